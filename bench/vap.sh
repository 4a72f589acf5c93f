#!/usr/bin/env bash
# VAP against SSP and ESSP (the ESSP paper's comparison, measured): MF on
# MovieLens 100K and on the 10M-rating synthetic set of
# ../shared/tools/genmf.c (genmf 10000000 71567 10681), and LDA on AP, each
# under --mode vap at three value bounds and --mode ssp and essp at three
# staleness values, 2 workers. Runs are interleaved (one of each point per
# repeat) so the shared machine's slow spells hit them alike; the report
# (bench/vap_report.py) takes medians over repeats and gives time per pass,
# convergence against training time, traffic, the workers' wait and VAP's
# in-transit figures, with plots.
#
# MF runs plain SGD (--update sgd --lr 0.02), the algorithm these tables
# compare the modes on (VAP bounds mf's factors and biases only, so
# AdaGrad, mf's default, runs under it too). LDA's bounds are counts
# (whole pieces: bounds >= 1).
#
# Usage: bench/vap.sh [REPEATS=3] [OUTDIR=out/bench/vap]
#   STRATA_BIN (default build/strata), STRATA_VAP_SETS (default
#   "ml100k mf10m ap") pick what runs; the 10M set is generated once into
#   OUTDIR/data (about 130 MB, not kept in the repository).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
R=${1:-3}
OUT=${2:-$STRATA_ROOT/out/bench/vap}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
SHARED=${STRATA_SHARED_DATA:-$STRATA_ROOT/../shared/data}
SETS=${STRATA_VAP_SETS:-ml100k mf10m ap}
mkdir -p "$OUT/runs" "$OUT/data"

ML=$SHARED/movielens-100k
AP=$SHARED/lda-c-ap
if [[ " $SETS " == *" mf10m "* && ! -s "$OUT/data/s10m.tr" ]]; then
  cc -O2 -o "$OUT/data/genmf" "$STRATA_ROOT/../shared/tools/genmf.c" -lm
  (cd "$OUT/data" && ./genmf 10000000 71567 10681 s10m.tr s10m.te)
fi

# set: app, data flags, passes, value bounds, staleness values
declare -A APP DATA PASSES BOUNDS STALE
APP[ml100k]=mf
DATA[ml100k]="--data $ML/ua.base --test $ML/ua.test --update sgd --lr 0.02"
PASSES[ml100k]=20
BOUNDS[ml100k]="1 0.1 0.01"
STALE[ml100k]="1 3 10"
APP[mf10m]=mf
DATA[mf10m]="--data $OUT/data/s10m.tr --test $OUT/data/s10m.te --update sgd --lr 0.02"
PASSES[mf10m]=10
BOUNDS[mf10m]="1 0.1 0.03"
STALE[mf10m]="1 3 10"
APP[ap]=lda
DATA[ap]="--data $AP/ap.dat --vocab $AP/vocab.txt --topics 100"
PASSES[ap]=20
BOUNDS[ap]="100 10 1"
STALE[ap]="1 3 10"

lscpu | sed -n 's/^Model name: *//p' | head -1 >"$OUT/cpu.txt"
for r in $(seq 1 "$R"); do
  for set in $SETS; do
    points=()
    for s in ${STALE[$set]}; do points+=("ssp --staleness $s" "essp --staleness $s"); done
    for v in ${BOUNDS[$set]}; do points+=("vap --value-bound $v"); done
    for p in "${points[@]}"; do
      name="$set-$(echo "$p" | awk '{print $1 "-" $3}')-$r"
      # shellcheck disable=SC2086  # the strings carry their own flags
      if ! mpirun --oversubscribe -np 3 "$BIN" "${APP[$set]}" --mode $p ${DATA[$set]} \
          --passes "${PASSES[$set]}" -q --metrics-out "$OUT/runs/$name.json" \
          >"$OUT/runs/$name.log" 2>&1; then
        echo "failed: $name (see $OUT/runs/$name.log)" >&2
      fi
    done
  done
  echo "repeat $r/$R done" >&2
done
python3 "$here/vap_report.py" "$OUT"
