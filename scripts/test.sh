#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, and runs every CTest test (unit, pg,
# fault). The pg and fault tiers start their own throwaway PostgreSQL cluster, or use
# TROUPE_TEST_DSN when it is set. Extra arguments go to ctest, e.g. -L unit or -R queue.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
cd "${TROUPE_BUILD_DIR:-build}"
ctest --output-on-failure -j2 "$@"
