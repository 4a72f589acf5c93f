#!/usr/bin/env bash
# Stragglers (LazyTables 5.3): worker i sleeps D ms at clocks i, i+P, ...
# D is set from a first BSP run so that a BSP pass becomes 1.5x slower
# (one clock per pass: D = half a BSP pass). Then BSP and SSP (s = 3), with
# and without the straggler, run interleaved R times; the report gives the
# time each loses per pass to the straggler and their ratio.
# Workers' passes do not line up under SSP, so the per-pass figure here is
# mean_pass_s (each worker's mean pass time after the first, the slowest
# worker's): with a straggler alternating between workers a per-pass
# median would pick either the fast or the slow passes.
# Each worker sleeps once every P clocks: passes 2..N should number a
# multiple of P (the default 9 passes gives 8 for P = 2) so every worker
# counts as many sleeps.
# Usage: bench/ps_stragglers.sh [REPEATS=5] [PASSES=9] [OUTDIR=out/bench]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
R=${1:-5}
PASSES=${2:-9}
OUT=${3:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_BENCH_DATA:-synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1}
mkdir -p "$OUT"
rm -f "$OUT"/straggle-*.json
run() { # name, mode flags...
  local name=$1; shift
  mpirun --oversubscribe -np 3 "$BIN" mf --data "$DATA" --rank 100 --passes "$PASSES" -q \
    --metrics-out "$OUT/straggle-$name.json" "$@" >/dev/null
}
run calib --mode bsp
D=$(python3 -c "import json;print(max(1, round(500 * json.load(open('$OUT/straggle-calib.json'))['mean_pass_s'])))")
echo "straggler delay: $D ms (half a BSP pass)" >&2
for r in $(seq 1 "$R"); do
  run "bsp-0-$r" --mode bsp
  run "bsp-d-$r" --mode bsp --straggler delay="$D"
  run "ssp-0-$r" --mode ssp --staleness 3
  run "ssp-d-$r" --mode ssp --staleness 3 --straggler delay="$D"
  echo "repeat $r/$R done" >&2
done
python3 - "$OUT" "$R" "$D" <<'PY'
import json, statistics, sys
out, R, D = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
med = statistics.median
get = lambda n, r: json.load(open(f"{out}/straggle-{n}-{r}.json"))
t = {n: [get(n, r)["mean_pass_s"] for r in range(1, R + 1)] for n in ("bsp-0", "bsp-d", "ssp-0", "ssp-d")}
loss = {m: [t[f"{m}-d"][i] - t[f"{m}-0"][i] for i in range(R)] for m in ("bsp", "ssp")}
ratio = [loss["ssp"][i] / loss["bsp"][i] for i in range(R)]
lines = [f"straggler delay {D} ms at clocks i, i+P, ... (one clock per pass), 2 workers",
         "",
         "| mode | pass time, no straggler (s) | with straggler (s) | slowdown | lost per pass (s) |",
         "|---|---|---|---|---|"]
for m, label in (("bsp", "bsp"), ("ssp", "ssp, s = 3")):
    a, b = med(t[f"{m}-0"]), med(t[f"{m}-d"])
    lines.append(f"| {label} | {a:.4f} | {b:.4f} | {b/a:.2f}x | {med(loss[m]):.4f} |")
lines.append("")
lines.append(f"SSP loss / BSP loss: {med(ratio):.3f} (median of {R}; runs {[round(x, 3) for x in ratio]})")
text = "\n".join(lines)
print(text)
open(f"{out}/stragglers.md", "w").write(text + "\n")
PY
