#!/usr/bin/env bash
# What a parameter-server run's convergence curve measures. MF on the quick
# benchmark's data (synthetic, 7157 x 1068, 1M ratings, 10% held out), rank
# 100, 2 workers, for ssp s = 1, 2, 3 and essp s = 3 under both prefetch
# policies: per pass, the test RMSE of the model (the pure snapshot at the
# pass's last clock: what strata reports) and of the workers' own views
# (--score-view: their caches at their pass ends). With STRATA_OLD set to an
# older strata binary, also the figure that binary reports (its "before").
# Writes ps_snapshot.md (tables) and one metrics JSON per run.
# Usage: bench/ps_snapshot.sh [PASSES=12] [OUTDIR=out/bench]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
PASSES=${1:-12}
OUT=${2:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
OLD=${STRATA_OLD:-}
DATA="synth:users=7157,items=1068,ratings=1000005,seed=1"
mkdir -p "$OUT"
modes=("ssp --staleness 1" "ssp --staleness 2" "ssp --staleness 3" "essp --staleness 3")
for i in "${!modes[@]}"; do
  for pf in conservative aggressive; do
    # shellcheck disable=SC2086  # the mode string carries its own flags
    mpirun --oversubscribe -np 3 "$BIN" mf --mode ${modes[$i]} --prefetch $pf --data "$DATA" \
      --rank 100 --test-fraction 0.1 --passes "$PASSES" --score-view -q \
      --metrics-out "$OUT/snap-$i-$pf.json" >/dev/null
    if [ -n "$OLD" ]; then
      # shellcheck disable=SC2086
      mpirun --oversubscribe -np 3 "$OLD" mf --mode ${modes[$i]} --prefetch $pf --data "$DATA" \
        --rank 100 --test-fraction 0.1 --passes "$PASSES" -q \
        --metrics-out "$OUT/snap-$i-$pf-old.json" >/dev/null
    fi
  done
done
python3 - "$OUT" "$PASSES" "${modes[@]}" <<'PY'
import json, os, sys
out, passes, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
lines = []
for i, m in enumerate(modes):
    for pf in ("conservative", "aggressive"):
        d = json.load(open(f"{out}/snap-{i}-{pf}.json"))
        old = f"{out}/snap-{i}-{pf}-old.json"
        o = json.load(open(old)) if os.path.exists(old) else None
        cd = d["clock_diff"]
        lines.append(f"**{m}, prefetch {pf}** (time per pass {d['time_per_pass_s']*1e3:.1f} ms, "
                     f"clock differential mean {cd['mean']:.2f})\n")
        head = "| | " + " | ".join(str(p["pass"] + 1) for p in d["per_pass"]) + " |"
        lines += [head, "|---" * (len(d["per_pass"]) + 1) + "|"]
        if o:
            lines.append("| before: reported (old build) | " +
                         " | ".join(f"{p['test_rmse']:.4f}" for p in o["per_pass"]) + " |")
        lines.append("| workers' views | " +
                     " | ".join(f"{p['view']['test_rmse']:.4f}" for p in d["per_pass"]) + " |")
        lines.append("| **model: reported now** | " +
                     " | ".join(f"{p['test_rmse']:.4f}" for p in d["per_pass"]) + " |")
        lines.append("")
text = "\n".join(lines)
print(text)
open(f"{out}/ps_snapshot.md", "w").write(text + "\n")
PY
