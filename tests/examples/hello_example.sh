#!/usr/bin/env bash
# The hello example end to end, as a user runs it: create the area with the troupe CLI, publish
# with hello-producer, run hello-worker from examples/hello/troupe.ini until every message is
# done (a bounded wait on `troupe stats`), then stop it with SIGTERM and expect exit code 0.
#   hello_example.sh BIN_DIR SOURCE_DIR
# BIN_DIR holds troupe, hello-producer and hello-worker. The area's schema is $HELLO_SCHEMA
# (default troupe).
set -euo pipefail
bin="$1"
src="$2"
if [ -n "${TROUPE_TEST_DSN:-}" ]; then dsn="$TROUPE_TEST_DSN"; else dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
export TROUPE_DSN="$dsn"
schema="${HELLO_SCHEMA:-troupe}"

psql_cmd() { "$bin/troupe" --dsn "$dsn" --schema "$schema" "$@"; }
cleanup() {
  [ -n "${worker:-}" ] && kill -9 "$worker" 2>/dev/null || true
  psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
}
trap cleanup EXIT
psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true

psql_cmd init
"$bin/hello-producer" "$dsn" 20 "$schema" >/dev/null        # 20 greetings + 1 delayed fibonacci
"$bin/hello-worker" --config-file="$src/examples/hello/troupe.ini" --area.schema="$schema" &
worker=$!

deadline=$((SECONDS + 30))
until psql_cmd stats --json --queue hello | grep -q '"done":21'; do
  if [ $SECONDS -ge $deadline ]; then
    echo "hello example: not every message was done within 30 s" >&2
    psql_cmd stats --queue hello >&2
    exit 1
  fi
  sleep 0.2
done
psql_cmd stats --queue hello

kill -TERM "$worker"
status=0
wait "$worker" || status=$?
worker=""
if [ "$status" -ne 0 ]; then
  echo "hello example: hello-worker exited with $status after SIGTERM" >&2
  exit 1
fi
result=$(psql "$dsn" -Atc "SELECT result FROM $schema.queue WHERE task_name = 'hello.greet' AND args->>0 = 'visitor 7'")
if [ "$result" != '"hello, visitor 7"' ]; then
  echo "hello example: unexpected result $result" >&2
  exit 1
fi
echo "hello example: 21 messages done, result $result, worker stopped cleanly"
