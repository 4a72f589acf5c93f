#!/usr/bin/env bash
# MF scaling on a synthetic set shaped like MovieLens-10M (71,567 users x
# 10,681 items, 10,000,054 ratings) at k = 100, in one script run:
#   serial (one process, no MPI), scheduled with 1 worker, with 2 workers.
# Runs are interleaved (serial, P=1, P=2, serial, ...) R times so machine
# noise hits every configuration alike; each run's JSON summary is kept and
# the report gives medians and the P=2 / P=1 ratio of time per pass.
# Usage: bench/mf_scaling.sh [REPEATS=3] [PASSES=6] [OUTDIR=out/bench]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
R=${1:-3}
PASSES=${2:-6}
OUT=${3:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_BENCH_DATA:-synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1}
mkdir -p "$OUT"
rm -f "$OUT"/scaling-*.json
common=(--data "$DATA" --rank 100 --passes "$PASSES" -q)
for r in $(seq 1 "$R"); do
  "$BIN" mf --mode serial "${common[@]}" --metrics-out "$OUT/scaling-serial-$r.json" >/dev/null
  mpirun --oversubscribe -np 2 "$BIN" mf "${common[@]}" --metrics-out "$OUT/scaling-p1-$r.json" >/dev/null
  mpirun --oversubscribe -np 3 "$BIN" mf "${common[@]}" --metrics-out "$OUT/scaling-p2-$r.json" >/dev/null
  echo "repeat $r/$R done" >&2
done
python3 - "$OUT" "$R" <<'PY'
import json, statistics, sys
out, R = sys.argv[1], int(sys.argv[2])
runs = {k: [json.load(open(f"{out}/scaling-{k}-{r}.json")) for r in range(1, R + 1)]
        for k in ("serial", "p1", "p2")}
med = lambda xs: statistics.median(xs)
rows = []
for k, label in (("serial", "serial (1 process)"), ("p1", "scheduled, 1 worker"), ("p2", "scheduled, 2 workers")):
    rs = runs[k]
    tpp = med([d["time_per_pass_s"] for d in rs])
    ups = med([d["updates_per_s"] for d in rs])
    coord = med([d["coordinator_cpu_frac"] for d in rs])
    # Each run's worst worker (wait over its time, all passes), then the
    # median and the worst over runs.
    waits = [max(w["wait_s"] / w["time_s"] for w in d["workers_total"]) for d in rs]
    rows.append((label, tpp, ups, coord, waits, [round(d["time_per_pass_s"], 4) for d in rs]))
ratio = rows[2][1] / rows[1][1]
lines = ["| configuration | time per pass (s, median) | updates/s (median) | coordinator CPU / wall | worst worker's wait / time: median (max) | runs |",
         "|---|---|---|---|---|---|"]
for label, tpp, ups, coord, waits, all_ in rows:
    # In serial mode one process does all the work: no coordinator to speak of.
    c = "n/a" if label.startswith("serial") else f"{coord*100:.2f}%"
    lines.append(f"| {label} | {tpp:.4f} | {ups/1e6:.2f} M | {c} | {med(waits)*100:.2f}% "
                 f"({max(waits)*100:.2f}%) | {all_} |")
lines.append("")
lines.append(f"time per pass, 2 workers / 1 worker: {ratio:.3f} (median of {R} interleaved runs each)")
lines.append(f"single-core throughput (serial): {rows[0][2]/1e6:.2f} M updates/s")
lines.append("worst worker's wait per run, 2 workers: "
             + ", ".join(f"{x*100:.2f}%" for x in rows[2][4]))
text = "\n".join(lines)
print(text)
open(f"{out}/scaling.md", "w").write(text + "\n")
PY
