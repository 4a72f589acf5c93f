#!/usr/bin/env bash
# Setup, Release build of every program (strata and the strata-NAME apps beside
# it: the strata_programs target), then the main job: DSGD matrix factorisation with a
# coordinator and 2 workers on the built-in Netflix-shaped synthetic set
# (96,000 users x 3,554 items, 4M ratings; Netflix scaled by 1/5 per side).
# Extra arguments go to `strata mf` (e.g. --passes 5, --rank 50).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/setup.sh"
source "$here/env.sh"
cd "$STRATA_ROOT"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target strata_programs >/dev/null
mkdir -p out
mpirun --oversubscribe -np 3 build/strata mf --data synth: --test-fraction 0.05 --rank 64 \
  --passes 20 --metrics-out out/demo-metrics.json "$@"
