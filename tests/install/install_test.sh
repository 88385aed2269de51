#!/usr/bin/env bash
# The package as a user gets it: install the build into a temporary prefix, check that every
# public header compiles on its own with only the installed include folder, build
# examples/hello out of tree with find_package(troupe) alone (its tests against the installed
# test kit too), run it end to end with the
# installed troupe command, and build its producer once more with pkg-config.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
src="$2"
work="$(mktemp -d /tmp/troupe-install-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null

# The installed version is the one of CMakeLists.txt, and troupe --version says it.
version=$(sed -n 's/^project(troupe VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
reported=$("$prefix/bin/troupe" --version)
if [ "$reported" != "troupe $version" ]; then
  echo "install test: troupe --version says '$reported', CMakeLists.txt says $version" >&2
  exit 1
fi
grep -q "\"$version\"" "$prefix/lib/cmake/troupe/troupeConfigVersion.cmake"
grep -q "^Version: $version$" "$prefix/lib/pkgconfig/troupe.pc"
test -f "$prefix/share/doc/troupe/LICENSE"

# Every public header on its own, with the installed include folder and the system's.
headers=$(cd "$prefix/include" && ls troupe/*.hpp)
for h in $headers; do
  echo "#include <$h>" >"$work/one.cpp"
  if ! g++ -std=c++20 -fsyntax-only -Wall -Wextra -I"$prefix/include" "$work/one.cpp" \
      2>"$work/one.err"; then
    echo "install test: <$h> does not compile on its own:" >&2
    cat "$work/one.err" >&2
    exit 1
  fi
done
count=$(echo "$headers" | wc -w)
# None of the node's internals is installed.
if ls "$prefix/include/troupe" | grep -q protocol; then
  echo "install test: an internal protocol header was installed" >&2
  exit 1
fi

# examples/hello out of tree, against the installed package alone.
cmake -S "$src/examples/hello" -B "$work/hello" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/hello" -j2 >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
mkdir "$work/bin"
ln -s "$prefix/bin/troupe" "$work/hello/hello-worker" "$work/hello/hello-producer" "$work/bin/"
HELLO_SCHEMA=troupe_installed "$src/tests/examples/hello_example.sh" "$work/bin" "$src"
# The hello tasks' tests, built against the installed test kit (troupe::testing).
if [ -n "${TROUPE_TEST_DSN:-}" ]; then test_dsn="$TROUPE_TEST_DSN"; else test_dsn="$(cat "$TROUPE_TEST_PGDIR/dsn")"; fi
TROUPE_TEST_DSN="$test_dsn" "$work/hello/hello-test" >/dev/null

# The producer once more, with pkg-config instead of CMake.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
g++ $(pkg-config --cflags troupe) -o "$work/hello-producer-pc" \
  "$src/examples/hello/hello_producer.cpp" "$src/examples/hello/hello_tasks.cpp" \
  $(pkg-config --libs troupe)
status=0
"$work/hello-producer-pc" >/dev/null 2>&1 || status=$?
if [ "$status" -ne 2 ]; then # its usage text, without arguments
  echo "install test: the pkg-config build of hello-producer exited with $status" >&2
  exit 1
fi
echo "install test: $count public headers compile alone; hello built and ran out of tree; pkg-config build ran"
