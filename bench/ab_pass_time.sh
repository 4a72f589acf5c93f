#!/usr/bin/env bash
# Time per pass of two strata builds on the same command, interleaved
# (A, B, A, B, ...) so that machine noise hits both alike: the before/after
# check of a change. Prints each run's time per pass, then per build the
# median over repeats and B's ratio to A.
# AB_OUT=DIR keeps the runs' metrics there (A-1.json, B-1.json, ...).
# Usage: bench/ab_pass_time.sh BIN_A BIN_B REPEATS NP strata-args...
#   e.g. bench/ab_pass_time.sh old/strata build/strata 5 3 mf --mode ssp --passes 8
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
A=$1 B=$2 R=$3 NP=$4
shift 4
if [ -n "${AB_OUT:-}" ]; then
  out=$AB_OUT
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
for r in $(seq 1 "$R"); do
  for side in A B; do
    bin=$A
    [ "$side" = B ] && bin=$B
    mpirun --oversubscribe -np "$NP" "$bin" "$@" -q --metrics-out "$out/$side-$r.json" >/dev/null
  done
done
python3 - "$out" "$R" <<'PY'
import json, statistics, sys
out, R = sys.argv[1], int(sys.argv[2])
t = {s: [json.load(open(f"{out}/{s}-{r}.json"))["time_per_pass_s"] for r in range(1, R + 1)] for s in "AB"}
for s in "AB":
    print(f"{s}: " + " ".join(f"{x:.4f}" for x in t[s]) + f"  median {statistics.median(t[s]):.4f} s")
print(f"B / A = {statistics.median(t['B']) / statistics.median(t['A']):.4f}")
PY
