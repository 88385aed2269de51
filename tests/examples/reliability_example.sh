#!/usr/bin/env bash
# The reliability example (retries, callbacks, middleware, results) against the run's cluster:
# create its area with the troupe CLI, run it, and check what it printed.
#   reliability_example.sh BIN_DIR
set -euo pipefail
bin="$1"
if [ -n "${TROUPE_TEST_DSN:-}" ]; then dsn="$TROUPE_TEST_DSN"; else dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
schema=troupe_reliability_example
psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
trap 'psql "$dsn" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true' EXIT
"$bin/troupe" --dsn "$dsn" --schema "$schema" init >/dev/null
out=$("$bin/troupe-reliability-example" "$dsn" 2>/dev/null)
echo "$out"
expect() {
  if ! grep -qF "$1" <<<"$out"; then
    echo "reliability example: expected a line with \"$1\"" >&2
    exit 1
  fi
}
expect "charged 1250 cents"                       # declined once, retried, then paid
expect "receipt for shop.charge"                  # on_success callback
expect "refused without retries: shop::bad_amount: amount must be positive"
expect "reserved 3"                               # result from the actor-side waiter
expect "attempts: "
