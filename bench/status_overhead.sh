#!/usr/bin/env bash
# What the live status costs: time per pass of the same run without
# --status and with it while a client scrapes /metrics 10 times a second
# (tests/mpi/status_client.py, which also checks every scrape), interleaved
# (off, on, off, on, ...) so that machine noise hits both alike. Prints
# each run's time per pass (median of passes 2..N), the medians and on/off.
# Usage: bench/status_overhead.sh [REPEATS=5] [NP=3] [strata mf args...]
#   default args: the 10M-rating MovieLens-10M-shaped synthetic set, k = 100,
#   30 passes (scheduled mode, 2 workers)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
R=${1:-5}
NP=${2:-3}
shift $(( $# < 2 ? $# : 2 ))
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  args=(--data "synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1" --rank 100 --passes 30)
fi
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
CLIENT=$STRATA_ROOT/tests/mpi/status_client.py
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1); $NP ranks; strata mf ${args[*]}"
for r in $(seq 1 "$R"); do
  mpirun --oversubscribe -np "$NP" "$BIN" mf "${args[@]}" -q --metrics-out "$out/off-$r.json" >/dev/null
  mpirun --oversubscribe -np "$NP" "$BIN" mf "${args[@]}" -q --metrics-out "$out/on-$r.json" \
    --status 127.0.0.1:0 --status-linger 1 2>"$out/on-$r.log" >/dev/null &
  pid=$!
  url=$(python3 "$CLIENT" url "$out/on-$r.log" 120)
  python3 "$CLIENT" scrape "$url" 10 "$out/scrape-$r.json" >"$out/scrape-$r.log"
  wait "$pid"
  echo "repeat $r: $(cat "$out/scrape-$r.log")"
done
python3 - "$out" "$R" <<'PY'
import json, statistics, sys
out, R = sys.argv[1], int(sys.argv[2])
t = {s: [json.load(open(f"{out}/{s}-{r}.json"))["time_per_pass_s"] for r in range(1, R + 1)]
     for s in ("off", "on")}
n = [json.load(open(f"{out}/scrape-{r}.json"))["scrapes"] for r in range(1, R + 1)]
for s in ("off", "on"):
    print(f"{s:>3}: " + " ".join(f"{x:.4f}" for x in t[s]) + f"  median {statistics.median(t[s]):.4f} s per pass")
print(f"scrapes of /metrics per run with --status: {' '.join(map(str, n))}")
print(f"on / off = {statistics.median(t['on']) / statistics.median(t['off']):.4f}")
PY
