#!/usr/bin/env bash
# Checks strata as a user gets it: installs a build into a fresh prefix,
# builds every example from its own folder against the installed package
# (find_package(strata) with -DCMAKE_PREFIX_PATH, and pkg-config), runs
# them with mpirun -np 3, then builds an app in a project that pulls strata
# in with FetchContent from this checkout.
#
# Usage: scripts/check_package.sh [BUILD_DIR]   (default: build; it must be built)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
build=$(cd "${1:-$STRATA_ROOT/build}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
jobs=$(nproc)
fail() { echo "check_package: FAIL: $*" >&2; exit 1; }
run() { echo "\$ $*" >&2; "$@"; }

echo "== cmake --install into a fresh prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/strata/main.h include/strata/app.h include/strata/version.h \
         include/strata/apps/mf.h bin/strata share/doc/strata/writing-an-app.md; do
  [ -e "$prefix/$f" ] || fail "$f not installed"
done
libdir=$(dirname "$(find "$prefix" -name libstrata.a | head -1)")
[ -f "$libdir/libstrata_apps.a" ] || fail "libstrata_apps.a not installed"
[ -f "$libdir/cmake/strata/strataConfig.cmake" ] || fail "strataConfig.cmake not installed"
[ -f "$libdir/pkgconfig/strata.pc" ] || fail "strata.pc not installed"
echo "installed: $(cd "$prefix" && find . -type f ! -path './share/*' | sort | tr '\n' ' ')"
"$prefix/bin/strata" --version
export PKG_CONFIG_PATH=$libdir/pkgconfig
echo "pkg-config --modversion strata: $(pkg-config --modversion strata)"

echo "== the examples, each from its own folder"
for ex in $(cd "$STRATA_ROOT/examples" && ls -d */ | tr -d /); do
  echo "-- examples/$ex, copied to its own folder"
  mkdir "$work/$ex"
  cp "$STRATA_ROOT/examples/$ex/CMakeLists.txt" "$STRATA_ROOT/examples/$ex/$ex.c" "$work/$ex/"
  cd "$work/$ex"
  run cmake -S . -B build -DCMAKE_PREFIX_PATH="$prefix" >cmake.log || { cat cmake.log; fail "$ex: configure"; }
  run cmake --build build -j"$jobs" >build.log || { cat build.log; fail "$ex: build"; }
  # shellcheck disable=SC2046
  run cc -O2 -Wall -Wextra -Wno-unused-parameter -Werror $ex.c -o $ex-pc \
    $(pkg-config --cflags --libs strata) || fail "$ex: pkg-config build"
  # shellcheck disable=SC2046
  run cc -O2 $ex.c -o $ex-static $(pkg-config --static --cflags --libs strata) ||
    fail "$ex: pkg-config --static build"
done

echo "== runs"
# --stdin none: mpirun forwarding a stdin at end of file to a short job can
# die of SIGSEGV itself (docs/failure.md).
mpirun_() { run mpirun --oversubscribe --stdin none -np "$@"; }
cd "$work/latin"
mpirun_ 3 build/latin -B 4 --passes 3 --model-out sums-p2 -q | tee p2.txt
run ./latin-pc --mode serial -B 4 --passes 3 --model-out sums-serial -q >serial.txt
cmp sums-p2/col_sums.txt sums-serial/col_sums.txt || fail "latin: 2 workers and serial differ"
echo "latin: column sums identical with 2 workers (CMake build) and serially (pkg-config build)"
cd "$work/tinymf"
for mode in scheduled bsp ssp async; do
  mpirun_ 3 build/tinymf --mode $mode --passes 10 -q | grep -E '^summary|objectives'
done
cd "$work/lsq"
mpirun_ 3 build/lsq --minibatch 50 --model-out w-sfb -q | grep -E '^summary|objectives'
run ./lsq-pc --mode serial --minibatch 100 --model-out w-serial -q | grep -E '^summary|objectives'
cmp w-sfb/W.f32 w-serial/W.f32 || fail "lsq: sfb with 2 workers and serial export different W"
echo "lsq: W.f32 identical in sfb with 2 workers and serially"
cd "$work/tablesum"
mpirun_ 3 ./tablesum-static | sort
cd "$work/gcd"
mpirun_ 3 build/gcd -B 4 --passes 200 --tol 1e-4 --model-out coef-p2 -q | grep -E '^summary|objectives|rounds'
run ./gcd-pc --mode serial -B 4 --passes 200 --tol 1e-4 --model-out coef-serial -q >/dev/null
cmp coef-p2/coef.txt coef-serial/coef.txt || fail "gcd: 2 workers and serial export different coefficients"
echo "gcd: coefficients identical with 2 workers (CMake build) and serially (pkg-config build)"

echo "== the apps written on the installed library (apps/NAME: strata-NAME), each from its own folder"
for a in lasso pagerank; do
  [ -x "$prefix/bin/strata-$a" ] || fail "strata-$a not installed"
  mkdir "$work/app-$a"
  cp "$STRATA_ROOT/apps/$a/CMakeLists.txt" "$STRATA_ROOT"/apps/$a/*.c "$work/app-$a/"
  cp "$STRATA_ROOT"/apps/$a/*.h "$work/app-$a/" 2>/dev/null || true
  cd "$work/app-$a"
  run cmake -S . -B build -DCMAKE_PREFIX_PATH="$prefix" >cmake.log || { cat cmake.log; fail "$a: configure"; }
  run cmake --build build -j"$jobs" >build.log || { cat build.log; fail "$a: build"; }
done
cd "$work/app-pagerank"
run build/strata-pagerank --mode serial --graph synth:scale=10,edge-factor=8 --passes 3 \
  --truth-cache none --model-out own -q | grep -E '^summary|^top'
run "$prefix/bin/strata" pagerank --mode serial --graph synth:scale=10,edge-factor=8 --passes 3 \
  --truth-cache none --model-out installed -q >/dev/null
# Two builds may contract multiply-adds differently: the ranks agree to rounding.
python3 - own/ranks.txt installed/ranks.txt <<'PY' || fail "pagerank: its own build and the installed one differ"
import sys
a, b = (dict(l.split() for l in open(f)) for f in sys.argv[1:])
sys.exit(a.keys() != b.keys() or max(abs(float(a[k]) / float(b[k]) - 1) for k in a) > 1e-12)
PY
echo "pagerank: the same ranks from its own build and from 'strata pagerank' installed"

echo "== FetchContent from this checkout"
mkdir -p "$work/fetch"
cp "$STRATA_ROOT/examples/latin/latin.c" "$work/fetch/"
cat >"$work/fetch/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(fetch_latin LANGUAGES C)
include(FetchContent)
FetchContent_Declare(strata SOURCE_DIR "$STRATA_ROOT")
FetchContent_MakeAvailable(strata)
add_executable(latin latin.c)
target_link_libraries(latin PRIVATE strata::strata)
CMAKE
cd "$work/fetch"
run cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug -DSTRATA_NATIVE=OFF >cmake.log || { cat cmake.log; fail "FetchContent: configure"; }
run cmake --build build -j"$jobs" --target latin >build.log || { cat build.log; fail "FetchContent: build"; }
mpirun_ 3 build/latin -B 4 --passes 3 --model-out sums -q >/dev/null
cmp sums/col_sums.txt "$work/latin/sums-serial/col_sums.txt" || fail "FetchContent build: other sums"
echo "FetchContent: the same column sums"
echo "check_package: ok"
