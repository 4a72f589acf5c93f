#!/usr/bin/env bash
# Message costs through strata's transport, 2 ranks on this machine: shared
# memory (Open MPI's default, vader) and TCP over loopback. Writes
# OUTDIR/msgcost-shm.json and OUTDIR/msgcost-tcp.json (one line each, see
# bench/msgcost.c) and prints latency alpha, bandwidth beta and the time of
# a 1 MiB message per pattern and transport. Builds nothing: needs
# build/bench/msgcost (-DSTRATA_BUILD_BENCH=ON); STRATA_BIN_DIR names another
# folder holding msgcost; MSGCOST_FLAGS adds flags to both runs.
# Usage: bench/msgcost.sh [OUTDIR=out/bench]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
OUT=${1:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN_DIR:-$STRATA_ROOT/build/bench}/msgcost
if [ ! -x "$BIN" ]; then
  echo "msgcost: $BIN not found: build with -DSTRATA_BUILD_BENCH=ON" >&2
  exit 1
fi
mkdir -p "$OUT"
read -r -a extra <<<"${MSGCOST_FLAGS:-}"
run() { # label, then mpirun flags
  local label=$1
  shift
  # 50 ms of timed repetitions per size: 3 patterns x 15 sizes x 2
  # transports take about half a minute here.
  mpirun --oversubscribe -np 2 "$@" "$BIN" --label "$label" -q --min-time 0.05 \
    "${extra[@]}" >"$OUT/msgcost-$label.json.tmp"
  mv "$OUT/msgcost-$label.json.tmp" "$OUT/msgcost-$label.json"
}
run shm
run tcp --mca btl tcp,self --mca btl_tcp_if_include lo
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def us(x): return "n/a" if x is None else f"{x * 1e6:.2f}"
def gbs(x): return "n/a" if x is None else f"{x / 1e9:.2f}"
lines = ["| pattern | transport | alpha (us) | beta (GB/s) | 1 MiB (us) | beta from minima (GB/s) |",
         "|---|---|---|---|---|---|"]
runs = {t: json.load(open(f"{out}/msgcost-{t}.json")) for t in ("shm", "tcp")}
for name in ("pingpong", "ring", "rr"):
    for t, d in runs.items():
        p = d["patterns"].get(name)
        if not p:
            continue
        mib = next((s["median_s"] for s in p["sizes"] if s["bytes"] == 1 << 20), None)
        lines.append(f"| {name} | {t} | {us(p['alpha_s'])} | {gbs(p['beta_bytes_per_s'])} "
                     f"| {us(mib)} | {gbs(p['beta_min_bytes_per_s'])} |")
lines.append("")
lines.append("pingpong: one way (round trip / 2); ring: one shift, every rank sends and receives; "
             f"rr: {runs['shm']['req_bytes']}-byte request to reply received. Medians; alpha over sizes <= 1 KiB, "
             "beta over sizes >= 64 KiB.")
text = "\n".join(lines)
print(text)
open(f"{out}/msgcost.md", "w").write(text + "\n")
PY
