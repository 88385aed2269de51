#!/usr/bin/env bash
# The demo (the README's main job) against the run's cluster, with a smaller workload: it exits 0
# only when every message is done exactly once.
#   demo_example.sh BIN_DIR
set -euo pipefail
if [ -n "${TROUPE_TEST_DSN:-}" ]; then dsn="$TROUPE_TEST_DSN"; else dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
exec "$1/troupe-demo" --dsn "$dsn" --messages 3000
