#!/usr/bin/env bash
# The benchmark suite: setup, a Release build with the benchmark programs
# (build-bench/), then bench/harness.py over the profile's matrix (app x mode
# x workers x data x strata, each point repeated), the message-cost
# microbenchmark and the scale model. Writes OUT/runs.jsonl, OUT/summary.md,
# OUT/scale_model.json and OUT/plots/*.png (OUT defaults to
# out/bench/PROFILE). See bench/README.md.
# Usage: scripts/bench.sh [--quick | --full | --smoke] [harness options...]
#        scripts/bench.sh --anchors [OUTDIR]
#   --quick    under 5 minutes on a 2-core machine (the default)
#   --full     under an hour
#   --smoke    seconds; what the test suite runs
#   --anchors  every bench/anchor_*.sh present, in turn: each builds its
#              reference system (LIBMF, WarpLDA, GAP, ...) from a checkout
#              under ../anchors or the one its environment names, or says
#              it skips, and compares strata with it in the same run,
#              writing JSON lines and a table into OUTDIR (default
#              bench/results/anchors); the build is build-bench's
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
profile=quick
args=()
for a in "$@"; do
  case $a in
    --quick) profile=quick ;;
    --full) profile=full ;;
    --smoke) profile=smoke ;;
    --anchors) profile=anchors ;;
    *) args+=("$a") ;;
  esac
done
"$here/setup.sh"
source "$here/env.sh"
cd "$STRATA_ROOT"
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DSTRATA_BUILD_BENCH=ON \
  -DSTRATA_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target strata_cli strata_pagerank strata_lasso bench_mf_kernel bench_msgcost >/dev/null
if [ "$profile" = anchors ]; then
  cmake --build build-bench -j"$(nproc)" >/dev/null
  status=0
  for a in bench/anchor_*.sh; do
    [ -e "$a" ] || continue
    echo "== $a"
    STRATA_BUILD=$STRATA_ROOT/build-bench "$a" ${args[@]+"${args[@]}"} || status=1
  done
  exit $status
fi
exec python3 bench/harness.py --profile "$profile" --bin build-bench ${args[@]+"${args[@]}"}
