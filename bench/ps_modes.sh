#!/usr/bin/env bash
# Time per data pass of every execution mode side by side: the scheduled
# ring and each parameter-server mode, MF at k = 100 with 2 workers on the
# 10M-rating synthetic set shaped like MovieLens-10M. Runs are interleaved
# (one of each mode per repeat) so machine noise hits them alike; the report
# gives medians, the ratio to scheduled mode, wait and traffic per pass, the
# mean and worst clock differential, and CPU / wall of every rank (a rank
# that spun a core while waiting would show CPU above its wall time).
# Usage: bench/ps_modes.sh [REPEATS=3] [PASSES=6] [OUTDIR=out/bench]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
R=${1:-3}
PASSES=${2:-6}
OUT=${3:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_BENCH_DATA:-synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1}
WORKERS=${STRATA_BENCH_WORKERS:-2}
mkdir -p "$OUT"
rm -f "$OUT"/modes-*.json
modes=("scheduled" "bsp" "absp --wpc 0.5" "ssp --staleness 1" "ssp --staleness 3"
       "essp --staleness 3" "async")
for r in $(seq 1 "$R"); do
  for i in "${!modes[@]}"; do
    # shellcheck disable=SC2086  # the mode string carries its own flags
    mpirun --oversubscribe -np $((WORKERS + 1)) "$BIN" mf --mode ${modes[$i]} --data "$DATA" \
      --rank 100 --passes "$PASSES" -q --metrics-out "$OUT/modes-$i-$r.json" >/dev/null
  done
  echo "repeat $r/$R done" >&2
done
python3 - "$OUT" "$R" "${modes[@]}" <<'PY'
import json, statistics, sys
out, R, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = statistics.median
rows = []
for i, m in enumerate(modes):
    rs = [json.load(open(f"{out}/modes-{i}-{r}.json")) for r in range(1, R + 1)]
    tpp = med([d["time_per_pass_s"] for d in rs])
    # per rank CPU / wall over the training passes (and their evaluation)
    cpu = max(w["cpu_s"] / w["span_s"] for d in rs for w in d["workers_total"])
    coord = med([d["coordinator_cpu_frac"] for d in rs])
    wait = med([max(w["wait_s"] / w["time_s"] for w in d["workers_total"]) for d in rs])
    mb = med([sum(w["bytes_sent"] for w in d["workers_total"]) / d["passes"] / len(d["workers_total"]) / 1e6 for d in rs])
    cd = [d["clock_diff"] for d in rs if "clock_diff" in d]
    diff = f"{med([c['mean'] for c in cd]):.2f} / {min(c['min'] for c in cd)}" if cd else "n/a"
    rmse = med([d["train_rmse"] for d in rs])
    rows.append((m, tpp, cpu, coord, wait, mb, diff, rmse, [round(d["time_per_pass_s"], 4) for d in rs]))
base = rows[0][1]
lines = ["| mode | time per pass (s, median) | vs scheduled | max worker wait / pass | MB sent per worker per pass | clock diff mean / min | worker CPU / wall (max) | coordinator CPU / wall | train RMSE | runs |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for m, tpp, cpu, coord, wait, mb, diff, rmse, all_ in rows:
    lines.append(f"| {m} | {tpp:.4f} | {tpp/base:.2f}x | {wait*100:.1f}% | {mb:.1f} | {diff} | {cpu:.3f} | {coord*100:.2f}% | {rmse:.4f} | {all_} |")
text = "\n".join(lines)
print(text)
open(f"{out}/ps_modes.md", "w").write(text + "\n")
PY
