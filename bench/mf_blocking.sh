#!/usr/bin/env bash
# What blocking costs in accuracy: MF (k = 100) in serial mode (one block),
# with one worker and --strata 2 and 4, and with 2 workers; test RMSE at
# passes 10, 20 and 40 and each blocked run's difference from serial. Then
# serial and one worker with --strata 2 for the default seed (1) and
# --seed 2, pass by pass over the first 10 passes, with the difference and
# its worst from pass 5 on.
# Usage: bench/mf_blocking.sh UPDATE [OUTDIR=out/bench]
#   UPDATE: sgd (plain SGD, no biases, lambda 0.05, lr 0.05, as issue 22
#   states the setting) or adagrad (the default update, with biases).
# Data: STRATA_BENCH_TRAIN and STRATA_BENCH_TEST, a training and a test file
# (the MovieLens-10M-shaped pair of ../shared/tools/genmf.c, `genmf 10000000
# 71567 10681`); without them, the synthetic set STRATA_BENCH_DATA with 1%
# held out.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
UPD=$1
OUT=${2:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_BENCH_DATA:-synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1}
case $UPD in
  sgd) upd=(--update sgd --no-bias --lambda 0.05 --lr 0.05) ;;
  adagrad) upd=(--update adagrad) ;;
  *) echo "mf_blocking: UPDATE is sgd or adagrad" >&2; exit 2 ;;
esac
if [ -n "${STRATA_BENCH_TRAIN:-}" ]; then
  data=(--data "$STRATA_BENCH_TRAIN" --test "${STRATA_BENCH_TEST:?with STRATA_BENCH_TRAIN}")
else
  data=(--data "$DATA" --test-fraction 0.01)
fi
common=("${data[@]}" --rank 100 "${upd[@]}" -q)
mkdir -p "$OUT"
"$BIN" mf --mode serial "${common[@]}" --passes 40 --metrics-out "$OUT/blk-$UPD-serial.json" >/dev/null
mpirun --oversubscribe -np 2 "$BIN" mf --strata 2 "${common[@]}" --passes 40 --metrics-out "$OUT/blk-$UPD-b2.json" >/dev/null
mpirun --oversubscribe -np 2 "$BIN" mf --strata 4 "${common[@]}" --passes 40 --metrics-out "$OUT/blk-$UPD-b4.json" >/dev/null
mpirun --oversubscribe -np 3 "$BIN" mf "${common[@]}" --passes 40 --metrics-out "$OUT/blk-$UPD-p2.json" >/dev/null
# The rate of a pass depends on the pass alone, so the first 10 passes of
# the 40-pass runs are the default seed's; --seed 2 runs 10.
"$BIN" mf --mode serial "${common[@]}" --passes 10 --seed 2 --metrics-out "$OUT/blk-$UPD-serial-s2.json" >/dev/null
mpirun --oversubscribe -np 2 "$BIN" mf --strata 2 "${common[@]}" --passes 10 --seed 2 --metrics-out "$OUT/blk-$UPD-b2-s2.json" >/dev/null
python3 - "$OUT" "$UPD" <<'PY'
import json, sys
out, upd = sys.argv[1], sys.argv[2]
def rmse(k):
    return [p["test_rmse"] for p in json.load(open(f"{out}/blk-{upd}-{k}.json"))["per_pass"]]
runs = [("serial (one block)", "serial"), ("1 worker, --strata 2", "b2"),
        ("1 worker, --strata 4", "b4"), ("2 workers", "p2")]
rm = {k: [rmse(k)[i] for i in (9, 19, 39)] for _, k in runs}
lines = [f"| {upd} | pass 10 | pass 20 | pass 40 | worst difference from serial |", "|---|---|---|---|---|"]
for label, k in runs:
    d = max(abs(a - b) for a, b in zip(rm[k], rm["serial"]))
    lines.append(f"| {label} | " + " | ".join(f"{x:.4f}" for x in rm[k]) + f" | {d:.4f} |")
lines += ["", f"| {upd}, pass | serial, seed 1 | --strata 2, seed 1 | difference | serial, seed 2 "
          "| --strata 2, seed 2 | difference |", "|---|---|---|---|---|---|---|"]
pairs = [(rmse("serial")[:10], rmse("b2")[:10]), (rmse("serial-s2"), rmse("b2-s2"))]
for p in range(10):
    cells = []
    for one, two in pairs:
        cells += [f"{one[p]:.6f}", f"{two[p]:.6f}", f"{two[p] - one[p]:+.5f}"]
    lines.append(f"| {p + 1} | " + " | ".join(cells) + " |")
worst = [max(abs(b - a) for a, b in zip(one[4:], two[4:])) for one, two in pairs]
lines.append(f"| worst from pass 5 | | | {worst[0]:.5f} | | | {worst[1]:.5f} |")
text = "\n".join(lines)
print(text)
open(f"{out}/mf_blocking_{upd}.md", "w").write(text + "\n")
PY
