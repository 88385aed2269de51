#!/usr/bin/env bash
# The hello example's own tests (examples/hello/hello_test.cpp, written with the test kit): once
# in a throwaway schema of the run's cluster (TROUPE_TEST_DSN), once in a private cluster the
# test starts itself (no TROUPE_TEST_DSN).
#   hello_tests.sh BIN_DIR
set -euo pipefail
bin="$1"
if [ -n "${TROUPE_TEST_DSN:-}" ]; then dsn="$TROUPE_TEST_DSN"; else dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
TROUPE_TEST_DSN="$dsn" "$bin/hello-test"
env -u TROUPE_TEST_DSN "$bin/hello-test"
