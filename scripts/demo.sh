#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs one worker node on the example
# workload (20,000 messages by default). Without --dsn or TROUPE_DSN it starts a private
# PostgreSQL cluster in .troupe/pg and stops it afterwards. Options go to troupe-demo:
#   --dsn DSN  --messages N  --concurrency N  --prefetch N
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh >/dev/null
exec "${TROUPE_BUILD_DIR:-build}/bin/troupe-demo" "$@"
