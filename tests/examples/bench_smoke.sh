#!/usr/bin/env bash
# troupe-bench against the run's cluster at a tiny size: a burn-down of 200 messages with --json
# prints the server line and one scenario line, each with every key of the schema; a bad
# scenario name exits 2. Not a timed test: no figure is checked.
#   bench_smoke.sh BIN_DIR
set -euo pipefail
if [ -n "${TROUPE_TEST_DSN:-}" ]; then dsn="$TROUPE_TEST_DSN"; else dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
out="$("$1/troupe-bench" burn-down --tasks 200 --json --dsn "$dsn" 2>/dev/null)"
python3 - "$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
keys = {"scenario", "tasks", "seconds", "per_second", "p50_ms", "p99_ms", "peak_rss_mb", "settings"}
assert [l["scenario"] for l in lines] == ["server", "burn-down"], lines
for l in lines:
    assert set(l) == keys, sorted(l)
bd = lines[1]
assert bd["tasks"] == 200 and bd["per_second"] > 0 and bd["p50_ms"] is None, bd
assert lines[0]["settings"]["fsync"] and lines[0]["settings"]["version"], lines[0]
print("bench smoke: keys ok")
PY
set +e
"$1/troupe-bench" no-such-scenario --dsn "$dsn" 2>/dev/null
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "unknown scenario exited $rc, expected 2"; exit 1; }
