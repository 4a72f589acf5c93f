#!/usr/bin/env bash
# Setup, build (warnings are errors), then the whole ctest suite: CMocka unit
# tests and MPI integration tests; then the same suite again built with
# AddressSanitizer + UndefinedBehaviorSanitizer. Extra arguments go to ctest
# (e.g. -L unit). Between the two, scripts/check_package.sh installs the
# Release build into a fresh prefix and builds and runs the examples against
# it. Last, every fuzz target of tests/fuzz runs a few seconds from its seeds
# (scripts/fuzz.sh, clang's libFuzzer). STRATA_TEST_NO_PACKAGE=1 skips the
# package stage, STRATA_TEST_NO_SANITIZE=1 the sanitizer stage,
# STRATA_TEST_NO_FUZZ=1 the fuzz stage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/setup.sh"
source "$here/env.sh"
cd "$STRATA_ROOT"
jobs=$(nproc)

echo "== Release build, warnings as errors"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR=ON >/dev/null
cmake --build build-test -j"$jobs"
(cd build-test && ctest -j"$jobs" --output-on-failure --timeout 600 "$@")

if [ -z "${STRATA_TEST_NO_PACKAGE:-}" ]; then
  echo "== install, then the examples against the installed package"
  "$here/check_package.sh" build-test
fi

if [ -z "${STRATA_TEST_NO_SANITIZE:-}" ]; then
  echo "== ASan + UBSan build"
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DSTRATA_ASAN=ON -DSTRATA_UBSAN=ON \
    -DSTRATA_WERROR=ON -DSTRATA_BUILD_BENCH=OFF >/dev/null
  cmake --build build-sanitize -j"$jobs"
  cd build-sanitize
  # Unit tests run without MPI: every leak there is ours. The sampler's
  # chi-square tests draw a tenth as often here (STRATA_TEST_QUICK).
  STRATA_TEST_QUICK=1 ASAN_OPTIONS=detect_leaks=1 \
    ctest -j"$jobs" --output-on-failure --timeout 600 -L unit "$@"
  # Open MPI keeps allocations until exit; leak reports there would be its own.
  # Flag-parsing cases (label usage), the runs on real data sets (label
  # slow: the same code paths as the synthetic cases, on more data), the
  # examples (label example: apps on the public API, whose engine paths the
  # other tests take) and the runs that kill or stop a rank (label lost: the
  # liveness watch's timing; the checkpoint paths they take run here in
  # ckpt_modes) ran in the Release stage already.
  ASAN_OPTIONS=detect_leaks=0 ctest -j"$jobs" --output-on-failure --timeout 600 -L mpi \
    -LE 'usage|slow|example|lost' "$@"
fi

if [ -z "${STRATA_TEST_NO_FUZZ:-}" ]; then
  echo "== fuzz targets, ${STRATA_TEST_FUZZ_SECONDS:-2} s each"
  # A build directory of its own, and no corpus carried over from earlier
  # runs, so the stage takes the same time every run.
  cd "$STRATA_ROOT"
  rc=0
  STRATA_FUZZ_BUILD=build-fuzz-test STRATA_FUZZ_FRESH=1 \
    "$here/fuzz.sh" "${STRATA_TEST_FUZZ_SECONDS:-2}" || rc=$?
  if [ "$rc" -eq 77 ]; then
    echo "== fuzz stage skipped: clang or libFuzzer's runtime is missing"
  elif [ "$rc" -ne 0 ]; then
    exit "$rc"
  fi
fi
