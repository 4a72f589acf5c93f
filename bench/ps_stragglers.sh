#!/usr/bin/env bash
# Stragglers (LazyTables 5.3; Cui et al. 5.3 "delayed threads"): worker i is
# delayed D ms at clocks i, i+P, ... (one clock per pass). The paper's ideal:
# BSP loses D per clock (everyone waits for the delayed one), SSP only D/P
# (each worker is delayed once every P clocks, and the slack absorbs it).
#
# The issue's point is a delay that makes a BSP pass 1.5x slower. BSP's
# loss is not exactly D (the delay hides some of BSP's own communication)
# and single runs vary by 10% here, so rather than calibrate one D the run
# sweeps D = 0.5, 0.65 and 0.8 times the BSP pass time T (measured first)
# and reports every D; the row whose BSP slowdown is nearest 1.5x is
# marked. For each repeat BSP and SSP (s = 3) run without and with each
# delay, interleaved; the report gives the time each loses per pass and the
# ratio SSP/BSP, per repeat and as a median.
#
# The delayed worker's shard keeps serving (in the papers the server is a
# separate thread), and the delay is a sleep, or with SPIN=1 a busy loop.
# Spinning is what a dedicated-core cluster looks like on an oversubscribed
# machine: with more workers than cores, a sleeping worker would hand its
# CPU share to the others, which a delayed machine cannot do. SPIN defaults
# to 1 when WORKERS exceeds the cores, else 0.
#
# Pass time here is window_pass_s: per worker, the median over windows of P
# consecutive passes (each window holds one delay per worker) of their
# mean, the slowest worker's. Under SSP the workers' passes do not line up
# and a per-pass figure would pick either delayed or undelayed passes; the
# median over windows keeps one slow outlier pass from deciding a run.
#
# Usage: bench/ps_stragglers.sh [REPEATS=5] [WORKERS=3] [OUTDIR=out/bench]
#   env: PASSES (default 1 + 4 * WORKERS), SPIN, FRACS (default "0.5 0.65 0.8"),
#        STRATA_BIN, STRATA_BENCH_DATA
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
R=${1:-5}
P=${2:-3}
OUT=${3:-$STRATA_ROOT/out/bench}
PASSES=${PASSES:-$((1 + 4 * P))}
FRACS=${FRACS:-0.5 0.65 0.8}
cores=$(nproc)
SPIN=${SPIN:-$([ "$P" -gt "$cores" ] && echo 1 || echo 0)}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_BENCH_DATA:-synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1}
mkdir -p "$OUT"
rm -f "$OUT"/straggle-*.json
run() { # name, mode flags...
  local name=$1; shift
  mpirun --oversubscribe -np $((P + 1)) "$BIN" mf --data "$DATA" --rank 100 --passes "$PASSES" -q \
    --metrics-out "$OUT/straggle-$name.json" "$@" >/dev/null
}
pass_s() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['window_pass_s'])" "$1"; }
delay() { echo "--straggler" "delay=$1,spin=$SPIN"; }

run calib-a --mode bsp
run calib-b --mode bsp
T=$(python3 -c "print(($(pass_s "$OUT/straggle-calib-a.json") + $(pass_s "$OUT/straggle-calib-b.json")) / 2)")
DS=$(python3 -c "print(' '.join(dict.fromkeys(str(max(1, round(1000 * $T * float(f)))) for f in '$FRACS'.split())))")
echo "BSP pass $T s: delays $DS ms (P = $P, spin = $SPIN, $PASSES passes)" >&2
for r in $(seq 1 "$R"); do
  run "bsp-0-$r" --mode bsp
  run "ssp-0-$r" --mode ssp --staleness 3
  for d in $DS; do
    # shellcheck disable=SC2046
    run "bsp-$d-$r" --mode bsp $(delay "$d")
    # shellcheck disable=SC2046
    run "ssp-$d-$r" --mode ssp --staleness 3 $(delay "$d")
  done
  echo "repeat $r/$R done" >&2
done
python3 - "$OUT" "$R" "$P" "$SPIN" "$(nproc)" $DS <<'PY'
import json, statistics, sys
out, R, P, spin, cores = sys.argv[1], *map(int, sys.argv[2:6])
Ds = [int(d) for d in sys.argv[6:]]
med = statistics.median
get = lambda n, r: json.load(open(f"{out}/straggle-{n}-{r}.json"))["window_pass_s"]
t = {f"{m}-{d}": [get(f"{m}-{d}", r) for r in range(1, R + 1)] for m in ("bsp", "ssp") for d in [0] + Ds}
rows, res = [], []
for d in Ds:
    loss = {m: [t[f"{m}-{d}"][i] - t[f"{m}-0"][i] for i in range(R)] for m in ("bsp", "ssp")}
    ratio = [loss["ssp"][i] / loss["bsp"][i] if loss["bsp"][i] > 0 else float("inf") for i in range(R)]
    slow = {m: med(t[f"{m}-{d}"]) / med(t[f"{m}-0"]) for m in ("bsp", "ssp")}
    res.append({"delay_ms": d, "bsp_slowdown": slow["bsp"], "ssp_slowdown": slow["ssp"],
                "bsp_loss_s": med(loss["bsp"]), "ssp_loss_s": med(loss["ssp"]),
                "ratio": ratio, "ratio_median": med(ratio)})
near = min(range(len(res)), key=lambda i: abs(res[i]["bsp_slowdown"] - 1.5))
how = "busy (spin)" if spin else "asleep"
lines = [f"straggler delay D, {how}, at clocks i, i+P, ... (one clock per pass); "
         f"P = {P} workers on {cores} cores; {R} repeats; ideal SSP/BSP loss 1/P = {1 / P:.3f}",
         "",
         f"pass time without a straggler (s): bsp {med(t['bsp-0']):.4f}, ssp s = 3 {med(t['ssp-0']):.4f}",
         "",
         "| D (ms) | bsp slowdown | bsp lost per pass (s) | bsp lost / D | ssp slowdown | "
         "ssp lost per pass (s) | ssp lost / D | SSP loss / BSP loss (median; per repeat) |",
         "|---|---|---|---|---|---|---|---|"]
for i, x in enumerate(res):
    d = x["delay_ms"] / 1000
    mark = " **(nearest 1.5x)**" if i == near else ""
    lines.append(f"| {x['delay_ms']}{mark} | {x['bsp_slowdown']:.2f}x | {x['bsp_loss_s']:.4f} | "
                 f"{x['bsp_loss_s'] / d:.2f} | {x['ssp_slowdown']:.2f}x | {x['ssp_loss_s']:.4f} | "
                 f"{x['ssp_loss_s'] / d:.2f} | {x['ratio_median']:.3f}; "
                 f"{[round(v, 2) for v in x['ratio']]} |")
text = "\n".join(lines)
print(text)
open(f"{out}/stragglers.md", "w").write(text + "\n")
json.dump({"workers": P, "spin": bool(spin), "cores": cores, "repeats": R, "pass_s": t,
           "delays": res, "nearest_1_5x": res[near]["delay_ms"]},
          open(f"{out}/stragglers.json", "w"), indent=1)
PY
