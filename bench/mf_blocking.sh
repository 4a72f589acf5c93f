#!/usr/bin/env bash
# What blocking costs in accuracy: MF on the 10M-rating synthetic set (1%
# held out, k = 100) in serial mode (one block), with one worker and
# --strata 2 and 4, and with 2 workers; test RMSE at passes 10, 20 and 40
# and each blocked run's difference from serial.
# Usage: bench/mf_blocking.sh UPDATE [OUTDIR=out/bench]
#   UPDATE: sgd (plain SGD, no biases, lambda 0.05, lr 0.05, as issue 22
#   states the setting) or adagrad (the default update, with biases).
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
common=(--data "$DATA" --test-fraction 0.01 --rank 100 "${upd[@]}" --passes 40 -q)
mkdir -p "$OUT"
"$BIN" mf --mode serial "${common[@]}" --metrics-out "$OUT/blk-$UPD-serial.json" >/dev/null
mpirun --oversubscribe -np 2 "$BIN" mf --strata 2 "${common[@]}" --metrics-out "$OUT/blk-$UPD-b2.json" >/dev/null
mpirun --oversubscribe -np 2 "$BIN" mf --strata 4 "${common[@]}" --metrics-out "$OUT/blk-$UPD-b4.json" >/dev/null
mpirun --oversubscribe -np 3 "$BIN" mf "${common[@]}" --metrics-out "$OUT/blk-$UPD-p2.json" >/dev/null
python3 - "$OUT" "$UPD" <<'PY'
import json, sys
out, upd = sys.argv[1], sys.argv[2]
runs = [("serial (one block)", "serial"), ("1 worker, --strata 2", "b2"),
        ("1 worker, --strata 4", "b4"), ("2 workers", "p2")]
rm = {k: [json.load(open(f"{out}/blk-{upd}-{k}.json"))["per_pass"][i]["test_rmse"] for i in (9, 19, 39)]
      for _, k in runs}
lines = [f"| {upd} | pass 10 | pass 20 | pass 40 | worst difference from serial |", "|---|---|---|---|---|"]
for label, k in runs:
    d = max(abs(a - b) for a, b in zip(rm[k], rm["serial"]))
    lines.append(f"| {label} | " + " | ".join(f"{x:.4f}" for x in rm[k]) + f" | {d:.4f} |")
text = "\n".join(lines)
print(text)
open(f"{out}/mf_blocking_{upd}.md", "w").write(text + "\n")
PY
