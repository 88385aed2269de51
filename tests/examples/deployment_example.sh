#!/usr/bin/env bash
# The deployment example (examples/deployment/): two hello-worker nodes, each from its own config
# file, on one area. Checks what each node reports at start (its queue, executors and tasks),
# that both register and drain the work, that a config naming a queue no task runs on is refused
# with exit status 2 and the queue's name, that SIGTERM stops both with status 0, and (where
# systemd-analyze exists) that the unit file parses cleanly.
#   deployment_example.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin="$1"
src="$2"
if [ -n "${TROUPE_TEST_DSN:-}" ]; then dsn="$TROUPE_TEST_DSN"; else dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
# The files name db.internal; here TROUPE_DSN points them at the test cluster, and the metrics
# endpoints take any free port on localhost.
export TROUPE_DSN="$dsn"
schema=troupe_deployment_example
here="$src/examples/deployment"
logs="$(mktemp -d)"
cleanup() {
  for p in ${workers:-}; do kill -9 "$p" 2>/dev/null || true; done
  psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$logs"
}
trap cleanup EXIT
fail() {
  echo "deployment example: $1" >&2
  cat "$logs"/*.log >&2 2>/dev/null || true
  exit 1
}
psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
"$bin/troupe" --dsn "$dsn" --schema "$schema" init >/dev/null

# A queue that no registered task runs on is refused before anything starts.
status=0
"$bin/hello-worker" --config-file="$here/node-1.ini" --area.schema="$schema" \
  --queues=hello,reports >"$logs/refused.log" 2>&1 || status=$?
[ "$status" = 2 ] || fail "a config with queue reports exited with $status, not 2"
grep -qF 'queues.reports: no registered task runs on queue "reports"' "$logs/refused.log" ||
  fail "the refusal does not name queue reports"
rm "$logs/refused.log"

workers=""
for node in node-1 node-2; do
  "$bin/hello-worker" --config-file="$here/$node.ini" --area.schema="$schema" \
    --metrics.bind=127.0.0.1 --metrics.port=0 >"$logs/$node.log" 2>&1 &
  workers="$workers $!"
done
deadline=$((SECONDS + 30))
until [ "$(psql "$dsn" -Atc "SELECT count(*) FROM $schema.nodes")" = 2 ]; do
  [ $SECONDS -lt $deadline ] || fail "the two nodes did not register within 30 s"
  sleep 0.1
done
# What each node said it runs.
tasks="tasks=hello.fibonacci,hello.greet,hello.sum"
deadline=$((SECONDS + 10))
until grep -q "node scheduler=" "$logs/node-1.log" && grep -q "node scheduler=" "$logs/node-2.log"; do
  [ $SECONDS -lt $deadline ] || fail "the nodes did not report what they run"
  sleep 0.1
done
grep -qE "node runs queue=hello concurrency=8 prefetch=16 poll=1000ms $tasks" "$logs/node-1.log" ||
  fail "hello-1 did not report its queue and tasks"
grep -qE "node runs queue=hello concurrency=4 prefetch=8 poll=1000ms $tasks" "$logs/node-2.log" ||
  fail "hello-2 did not report its queue and tasks"
grep -qE "node scheduler=on metrics=127.0.0.1:[0-9]+" "$logs/node-1.log" ||
  fail "hello-1 did not report its scheduler and metrics endpoint"
grep -qE "node scheduler=off metrics=127.0.0.1:[0-9]+" "$logs/node-2.log" ||
  fail "hello-2 did not report its scheduler and metrics endpoint"
names=$(psql "$dsn" -Atc "SELECT string_agg(name, ',' ORDER BY name) FROM $schema.nodes")
[ "$names" = "hello-1,hello-2" ] || fail "registered nodes are $names"

"$bin/hello-producer" "$dsn" 200 "$schema" >/dev/null # 200 greetings + 1 delayed fibonacci
deadline=$((SECONDS + 60))
until grep -q '"done":201' <<<"$("$bin/troupe" --dsn "$dsn" --schema "$schema" stats --json --queue hello)"; do
  [ $SECONDS -lt $deadline ] || fail "not every message was done within 60 s"
  sleep 0.2
done

for p in $workers; do kill -TERM "$p"; done
for p in $workers; do
  status=0
  wait "$p" || status=$?
  [ "$status" = 0 ] || fail "a node exited with $status after SIGTERM"
done
workers=""
[ "$(psql "$dsn" -Atc "SELECT count(*) FROM $schema.nodes")" = 0 ] ||
  fail "a node is still registered after its graceful stop"

if command -v systemd-analyze >/dev/null 2>&1; then
  unit_dir="$logs/units"
  mkdir -p "$unit_dir"
  sed -e "s#/usr/local/bin/hello-worker#$bin/hello-worker#" -e "s#/etc/troupe/#$here/#g" \
    "$here/troupe-worker@.service" >"$unit_dir/troupe-worker@node-1.service"
  out=$(systemd-analyze verify "$unit_dir/troupe-worker@node-1.service" 2>&1 || true)
  [ -z "$out" ] || fail "systemd-analyze verify: $out"
else
  echo "deployment example: systemd-analyze is not installed; the unit file was not checked"
fi
echo "deployment example: two nodes from their own files drained 201 messages and stopped cleanly"
