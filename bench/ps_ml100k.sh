#!/usr/bin/env bash
# Every execution mode on MovieLens 100K (ua.base / ua.test), MF k = 100,
# 2 workers, 40 passes: final test RMSE, clock differentials and time per
# pass. Needs ../shared/data; skips with a message without it.
# Usage: bench/ps_ml100k.sh [PASSES=40] [OUTDIR=out/bench]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
PASSES=${1:-40}
OUT=${2:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_DATA_DIR:-$STRATA_ROOT/../shared/data}/movielens-100k
if [ ! -f "$DATA/ua.base" ]; then
  echo "ps_ml100k: skipped: $DATA/ua.base not found (needs ../shared/data)" >&2
  exit 0
fi
mkdir -p "$OUT"
modes=("scheduled" "bsp" "absp --wpc 0.5" "ssp --staleness 1" "ssp --staleness 3"
       "essp --staleness 1" "essp --staleness 3" "async")
for i in "${!modes[@]}"; do
  # shellcheck disable=SC2086  # the mode string carries its own flags
  mpirun --oversubscribe -np 3 "$BIN" mf --mode ${modes[$i]} --data "$DATA/ua.base" \
    --test "$DATA/ua.test" --rank 100 --passes "$PASSES" -q \
    --metrics-out "$OUT/ml100k-$i.json" >/dev/null
done
python3 - "$OUT" "${modes[@]}" <<'PY'
import json, sys
out, modes = sys.argv[1], sys.argv[2:]
lines = ["| mode | test RMSE after last pass | best pass (RMSE) | clock diff mean | max staleness | reads per clock diff 0, -1, -2, ... | time per pass (ms) |",
         "|---|---|---|---|---|---|---|"]
for i, m in enumerate(modes):
    d = json.load(open(f"{out}/ml100k-{i}.json"))
    best = min(d["per_pass"], key=lambda p: p["test_rmse"])
    cd = d.get("clock_diff")
    mean = f"{cd['mean']:.3f}" if cd else "n/a"
    mx = str(cd["max_staleness"]) if cd else "n/a"
    hist = str(cd["hist"]) if cd else "n/a"
    lines.append(f"| {m} | {d['test_rmse']:.4f} | {best['pass'] + 1} ({best['test_rmse']:.4f}) | {mean} | {mx} | {hist} | {d['time_per_pass_s']*1e3:.2f} |")
text = "\n".join(lines)
print(text)
open(f"{out}/ps_ml100k.md", "w").write(text + "\n")
PY
