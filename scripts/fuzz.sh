#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/) with clang-14 into build-fuzz/ (or
# $TROUPE_FUZZ_BUILD_DIR) and runs each for SECONDS (default 20) from its committed corpus
# (tests/fuzz/corpus/NAME; new inputs go to a scratch folder, never into the repository). A crash
# or a failed check leaves its input in build-fuzz/crashes/NAME/ and exits 1.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
scripts/deps.sh
missing=()
for p in clang-14 libfuzzer-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "troupe: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
build_dir="${TROUPE_FUZZ_BUILD_DIR:-build-fuzz}"
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTROUPE_FUZZ=ON -DTROUPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" -j "${TROUPE_JOBS:-2}" --target troupe-fuzzers
passed=0
failed=0
for name in decoder wake_payload cron config; do
  scratch="$(mktemp -d)"
  crashes="$build_dir/crashes/$name"
  log="$build_dir/fuzz_$name.log"
  mkdir -p "$crashes"
  if "$build_dir/bin/fuzz_$name" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$scratch" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
    echo "fuzz_$name: passed, $runs inputs in ${seconds} s"
    passed=$((passed + 1))
  else
    echo "fuzz_$name: FAILED; its input is in $crashes/, the log in $log:" >&2
    tail -40 "$log" >&2
    failed=$((failed + 1))
  fi
  rm -rf "$scratch"
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
