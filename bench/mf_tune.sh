#!/usr/bin/env bash
# The sweep behind strata mf's default learning settings (AdaGrad, k = 100,
# the default 20 passes), in two parts:
#   1. MovieLens 100K: every point of the grid below trains on ua.base with
#      10% of it held out for validation (--test-fraction 0.1, seed 1); the
#      points are ranked by validation RMSE after the last pass, and the best
#      few are then scored once on GroupLens' ua.test (never used to choose).
#   2. The 10M-rating MovieLens-10M-shaped synthetic set (10% held out): the
#      chosen settings against the ones they replaced, and the runner-up.
# Needs ../shared/data for part 1 (skipped with a message without it).
# Usage: bench/mf_tune.sh [OUTDIR=out/bench/tune] [--quick: a 3-point grid]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
OUT=${1:-$STRATA_ROOT/out/bench/tune}
QUICK=${2:-}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_DATA_DIR:-$STRATA_ROOT/../shared/data}
mkdir -p "$OUT"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
python3 - "$BIN" "$DATA" "$OUT" "$QUICK" "$cpu" <<'PY'
import itertools, json, os, subprocess, sys
BIN, DATA, OUT, QUICK, CPU = sys.argv[1:6]
ML = os.path.join(DATA, "movielens-100k")
SYNTH = "synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1"

def run(data_args, s):
    f = os.path.join(OUT, "run.json")
    args = [BIN, "mf", "--mode", "serial", "--rank", "100", "-q", "--metrics-out", f,
            "--lr", str(s["lr"]), "--lr-decay", str(s["decay"]), "--lambda", str(s["lambda"]),
            "--init-scale", str(s["init"])] + data_args
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return json.load(open(f))["per_pass"][-1]["test_rmse"]

def label(s):
    return f"lr {s['lr']}, decay {s['decay']}, lambda {s['lambda']}, init-scale {s['init']}"

old = dict(lr=0.05, decay=0, **{"lambda": 0.1}, init=0.1)  # the settings before this sweep
if QUICK == "--quick":
    grid = [dict(lr=0.08, decay=0.4, **{"lambda": 0.045}, init=0.05), old,
            dict(lr=0.05, decay=0.2, **{"lambda": 0.05}, init=0.05)]
else:
    grid = [dict(lr=lr, decay=d, **{"lambda": lam}, init=init)
            for lr, d, lam, init in itertools.product([0.03, 0.05, 0.08], [0, 0.2, 0.4],
                                                       [0.045, 0.05, 0.06, 0.1], [0.05, 0.1])]
lines = [f"CPU: {CPU}. strata mf --mode serial --rank 100, 20 passes, AdaGrad.", ""]
ranked = []
if os.path.exists(os.path.join(ML, "ua.base")):
    base = ["--data", os.path.join(ML, "ua.base")]
    for s in grid:
        ranked.append((run(base + ["--test-fraction", "0.1"], s), s))
    ranked.sort(key=lambda x: x[0])
    lines += [f"MovieLens 100K: {len(grid)} settings ranked by validation RMSE (10% of ua.base), "
              "the best five and the old defaults scored on ua.test:", "",
              "| settings | validation RMSE | rank | ua.test RMSE |", "|---|---|---|---|"]
    shown = ranked[:5] + [r for r in ranked if r[1] == old][:1]
    for v, s in shown:
        t = run(base + ["--test", os.path.join(ML, "ua.test")], s)
        lines.append(f"| {label(s)}{' (old defaults)' if s == old else ''} | {v:.4f} | "
                     f"{ranked.index((v, s)) + 1} | {t:.4f} |")
else:
    lines.append(f"MovieLens 100K: skipped ({ML} not found)")
lines += ["", "10M synthetic set (10% held out):", "", "| settings | test RMSE |", "|---|---|"]
for s in ([ranked[0][1]] if ranked else grid[:1]) + [old]:
    lines.append(f"| {label(s)}{' (old defaults)' if s == old else ''} | "
                 f"{run(['--data', SYNTH, '--test-fraction', '0.1'], s):.4f} |")
text = "\n".join(lines)
print(text)
open(os.path.join(OUT, "tune.md"), "w").write(text + "\n")
PY
