#!/usr/bin/env bash
# Configures and builds Troupe into build/ (or $TROUPE_BUILD_DIR) with 2 jobs.
# Extra arguments go to cmake's configure step, e.g. -DTROUPE_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${TROUPE_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$build_dir" -j "${TROUPE_JOBS:-2}"
