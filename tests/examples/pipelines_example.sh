#!/usr/bin/env bash
# The pipelines example across two worker nodes: create the area with the troupe CLI, start two
# orders-worker processes from examples/pipelines/troupe.ini (nodes a and b), wait until both
# have registered, publish one order with orders-producer, and check its confirmation, that
# every step ran once, and that both nodes ran some of them.
#   pipelines_example.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin="$1"
src="$2"
if [ -n "${TROUPE_TEST_DSN:-}" ]; then dsn="$TROUPE_TEST_DSN"; else dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
export TROUPE_DSN="$dsn"
schema=troupe_pipelines_example
logs="$(mktemp -d)"
cleanup() {
  for p in ${workers:-}; do kill -9 "$p" 2>/dev/null || true; done
  psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$logs"
}
trap cleanup EXIT
psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
"$bin/troupe" --dsn "$dsn" --schema "$schema" init >/dev/null

workers=""
for name in a b; do
  "$bin/orders-worker" --config-file="$src/examples/pipelines/troupe.ini" \
    --area.schema="$schema" --node.name="$name" 2>"$logs/$name.log" &
  workers="$workers $!"
done
deadline=$((SECONDS + 30))
until [ "$(psql "$dsn" -Atc "SELECT count(*) FROM $schema.nodes")" = 2 ]; do
  if [ $SECONDS -ge $deadline ]; then
    echo "pipelines example: the two nodes did not register within 30 s" >&2
    cat "$logs"/*.log >&2
    exit 1
  fi
  sleep 0.1
done

out=$(timeout 90 "$bin/orders-producer" "$dsn" "$schema")
echo "$out"
fail() {
  echo "pipelines example: $1" >&2
  cat "$logs"/*.log >&2
  exit 1
}
grep -qF "order-1001 confirmed: 3025 cents" <<<"$out" || fail "no confirmation of 3025 cents"
grep -qF "steps done: 3 of 3" <<<"$out" || fail "not every step done"
# Every step ran exactly once: 6 lines, 1 total, 1 confirmation.
runs=$(cat "$logs"/*.log | grep -cE "priced |total of |confirmed order-1001" || true)
[ "$runs" = 8 ] || fail "expected 8 task runs in the logs, found $runs"
for name in a b; do
  grep -q "on node $name" "$logs/$name.log" || fail "node $name ran none of the steps"
done
for p in $workers; do kill -TERM "$p"; done
for p in $workers; do wait "$p" || fail "a worker exited with an error after SIGTERM"; done
workers=""
echo "pipelines example: one order across two nodes, every step once"
