#!/usr/bin/env bash
# troupe-bench against the run's cluster at a tiny size: a burn-down of 200 messages with --json
# prints the server line and one scenario line, each with every key of the schema, and the
# drain's cost per message (row versions, index entries, WAL); a bad scenario name exits 2.
# Not a timed test: no rate is checked.
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
# The cost per message: a drain updates each row twice (its claim and its completion), and
# each update enters the primary key and the partial indexes of its new state (running; then
# finished and history: five entries in all). Row counts are the area's own tables (a few
# more come from the node's bookkeeping, hence the bound); the WAL is the whole cluster's,
# which other tests may write to at the same time: those figures have no upper bound.
s = bd["settings"]
assert s["timed"].startswith("first claim"), s
assert 2 <= s["row_updates_per_message"] <= 2.2, s
assert s["row_inserts_per_message"] < 0.2 and s["row_deletes_per_message"] < 0.2, s
assert s["wal_bytes_per_message"] > 100 and s["commits_per_1000"] > 0, s
assert "wal_stats_unavailable" not in s, s
assert s["index_entries_per_message"] >= 5, s
assert 0 <= s["wal_fpi_bytes_per_message"] < s["wal_bytes_per_message"], s
print("bench smoke: keys and costs ok")
PY
set +e
"$1/troupe-bench" no-such-scenario --dsn "$dsn" 2>/dev/null
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "unknown scenario exited $rc, expected 2"; exit 1; }
