#!/usr/bin/env bash
# The CAF application example: create its area with the troupe CLI, run caf-app (a node, a
# typed actor as the task, a storage pool with an enqueue hook, a result waiter, all in one
# actor system), and check what it printed, that it ended by itself with status 0, and the rows.
#   caf_app_example.sh BIN_DIR
set -euo pipefail
bin="$1"
if [ -n "${TROUPE_TEST_DSN:-}" ]; then dsn="$TROUPE_TEST_DSN"; else dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
schema=troupe_caf_app_example
cleanup() { psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
"$bin/troupe" --dsn "$dsn" --schema "$schema" init >/dev/null

fail() { echo "caf_app example: $*" >&2; echo "$out" >&2; exit 1; }
status=0
out=$(timeout 120 "$bin/caf-app" "$dsn" "$schema" 12 2>/dev/null) || status=$?
[ "$status" = 0 ] || fail "caf-app ended with status $status"
echo "$out"
grep -q '^node ready: node_id=[1-9]' <<<"$out" || fail "no ready line"
grep -q '^published 12 reservations (the enqueue hook saw 12)$' <<<"$out" || fail "no publish line"
[ "$(grep -c '^reserved ' <<<"$out")" = 12 ] || fail "not 12 reservations answered"
grep -q '^node stopped: executed=12 released=0 abandoned=0$' <<<"$out" || fail "no clean stop"
q() { psql "$dsn" -Atc "$1"; }
[ "$(q "SELECT count(*) FROM $schema.queue WHERE state = 'done' AND result IS NOT NULL")" = 12 ] ||
  fail "not 12 rows done with a result"
# The enqueue hook put the jam reservations first (priority 10).
[ "$(q "SELECT count(*) FROM $schema.queue WHERE args->>0 = 'jam' AND priority = 10")" = 4 ] ||
  fail "the hook's priority is missing"
# One tea answer is its level after every reservation of it: 40 - (1 + 4 + 3 + 2) = 30.
grep -q '^reserved \["tea",[0-9]\], left 30$' <<<"$out" || fail "tea did not end at 30"
echo "caf_app example: ok"
