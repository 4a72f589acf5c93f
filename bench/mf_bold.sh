#!/usr/bin/env bash
# Step-size rules for MF against a target test RMSE: plain SGD with the
# decaying rate, plain SGD with the bold driver (--lr-schedule bold), and
# AdaGrad, 2 workers (scheduled), plus the bold driver started at --lr 10.
# Per run: the passes and training seconds (the passes' time_s summed) to
# reach the target, the final test RMSE, the last pass's rate, and whether
# the run was reported as diverged (exit code 3).
# Usage: bench/mf_bold.sh DATASET PASSES TARGET [OUTDIR=out/bench]
#   DATASET: ml100k (../shared/data/movielens-100k ua split, k = 100) or
#   10m (the 10M-rating synthetic set, 1% held out, k = 100, no biases,
#   lambda 0.05, as in issue 22's blocking setting).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
SET=$1 PASSES=$2 TARGET=$3
OUT=${4:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
case $SET in
  ml100k)
    DATA=${STRATA_DATA_DIR:-$STRATA_ROOT/../shared/data}/movielens-100k
    if [ ! -f "$DATA/ua.base" ]; then
      echo "mf_bold: skipped: $DATA/ua.base not found (needs ../shared/data)" >&2
      exit 0
    fi
    common=(--data "$DATA/ua.base" --test "$DATA/ua.test" --rank 100) ;;
  10m)
    common=(--data "synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1"
            --test-fraction 0.01 --rank 100 --no-bias --lambda 0.05) ;;
  *) echo "mf_bold: DATASET is ml100k or 10m" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
runs=("sgd decay, lr 0.05|--update sgd --lr 0.05"
      "sgd bold, lr 0.05|--update sgd --lr-schedule bold --lr 0.05"
      "adagrad, lr 0.05|--update adagrad --lr 0.05"
      "sgd bold, lr 10|--update sgd --lr-schedule bold --lr 10"
      "sgd decay, lr 10|--update sgd --lr 10")
for i in "${!runs[@]}"; do
  IFS='|' read -r label flags <<<"${runs[$i]}"
  # shellcheck disable=SC2086  # flags carry their own words
  set +e
  mpirun --oversubscribe -np 3 "$BIN" mf "${common[@]}" $flags --passes "$PASSES" -q \
    --metrics-out "$OUT/bold-$SET-$i.json" >"$OUT/bold-$SET-$i.out" 2>"$OUT/bold-$SET-$i.err"
  echo $? >"$OUT/bold-$SET-$i.rc"
  set -e
done
python3 - "$OUT" "$SET" "$TARGET" "${runs[@]}" <<'PY'
import json, os, sys
out, sset, target, runs = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
lines = [f"| rule ({sset}) | passes to {target} | seconds to {target} | final test RMSE | last rate | outcome |",
         "|---|---|---|---|---|---|"]
for i, r in enumerate(runs):
    label = r.split("|")[0]
    rc = int(open(f"{out}/bold-{sset}-{i}.rc").read())
    err = [l.strip() for l in open(f"{out}/bold-{sset}-{i}.err") if "diverged" in l]
    if rc != 0:
        lines.append(f"| {label} | - | - | - | - | exit {rc}: `{err[0] if err else 'failed'}` |")
        continue
    m = json.load(open(f"{out}/bold-{sset}-{i}.json"))
    t, hit = 0.0, None
    for p in m["per_pass"]:
        t += p["time_s"]
        if hit is None and p["test_rmse"] <= target:
            hit = (p["pass"] + 1, t)
    last = m["per_pass"][-1]
    lines.append(f"| {label} | {hit[0] if hit else 'not reached'} | {f'{hit[1]:.2f}' if hit else '-'} | "
                 f"{m['test_rmse']:.4f} | {last['lr']:.4g} | ok |")
text = "\n".join(lines)
print(text)
open(f"{out}/mf_bold_{sset}.md", "w").write(text + "\n")
PY
