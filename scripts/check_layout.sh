#!/usr/bin/env bash
# The architecture's dependency rules, checked by grep (a CTest test, `layout`, runs this):
#   1. storage/ is the only code that includes libpq (the DSN rule of <troupe/dsn.hpp> is
#      storage/dsn.cpp). Tests, examples and benchmarks are users: they may drive their own
#      connections.
#   2. storage/ includes nothing of the runtime but the shared base.
#   3. CAF stays out of the public headers but <troupe/caf.hpp>, and out of storage/, cli/ and
#      the runtime's sources.
#   4. The public include folder holds no internal header (the actors' protocol).
#   check_layout.sh [SOURCE_DIR]
set -uo pipefail
cd "${1:-$(dirname "$0")/..}"
failed=0
fail() {
  echo "layout: $1" >&2
  failed=1
}

libpq=$(grep -rlE '#include *[<"]libpq-fe\.h[>"]' runtime actors config cli storage |
  grep -v '^storage/')
[ -z "$libpq" ] || fail "libpq-fe.h outside storage/: $(echo $libpq)"

base='area|error|message|json|log|options|dsn|admin_records|state_records|schedule_records'
internal=$(grep -rnE '#include *[<"](troupe|runtime|actors|config|cli)/' storage |
  grep -vE "#include *[<\"]troupe/($base)\.hpp[>\"]")
[ -z "$internal" ] || fail "storage/ includes more than the shared base:
$internal"

caf=$(grep -rlE '#include *[<"]caf/' runtime storage cli | grep -vx 'runtime/include/troupe/caf.hpp')
[ -z "$caf" ] || fail "CAF included outside actors/, config/ and <troupe/caf.hpp>: $(echo $caf)"

[ ! -e runtime/include/troupe/protocol.hpp ] || fail "runtime/include/troupe/protocol.hpp is back"
public_internal=$(grep -rlE '#include *"(storage|actors|config|cli|runtime)/' runtime/include)
[ -z "$public_internal" ] || fail "public headers include internal ones: $(echo $public_internal)"

if [ "$failed" -eq 0 ]; then
  echo "layout: libpq only in storage/; storage uses only the base; CAF only where it belongs"
fi
exit "$failed"
