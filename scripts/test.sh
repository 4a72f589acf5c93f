#!/usr/bin/env bash
# Setup, build (warnings are errors), then the whole ctest suite: CMocka unit
# tests and MPI integration tests. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/setup.sh"
source "$here/env.sh"
cd "$STRATA_ROOT"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR=ON >/dev/null
cmake --build build-test -j"$(nproc)"
cd build-test
ctest --output-on-failure --timeout 600 "$@"
