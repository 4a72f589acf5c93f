#!/usr/bin/env bash
# What a burst of scrapes costs the run: strata mf with --status, its pass
# rate (passes summed per second, from rank 0's progress lines: one a
# second, each with the pass and the time) over QUIET seconds without
# clients, BURST seconds while once a second N clients at once scrape
# /metrics (tests/mpi/status_client.py burst: one process, asyncio, on the
# same machine as the run), and QUIET seconds after. Prints the three
# rates and burst / quiet (the quiet windows' mean), per repeat.
# Usage: bench/status_burst.sh [REPEATS=3] [N=600] [strata mf args...]
#   default args: MovieLens 100K (../shared/data), k = 32, --passes 1000000
#   (the run is ended with SIGINT); STRATA_BIN picks the binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
R=${1:-3}
N=${2:-600}
shift $(($# < 2 ? $# : 2))
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  args=(--data "$STRATA_ROOT/../shared/data/movielens-100k/ua.base" --rank 32 --passes 1000000)
fi
QUIET=${QUIET:-10}
BURST=${BURST:-10}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
CLIENT=$STRATA_ROOT/tests/mpi/status_client.py
out=$(mktemp -d)
pid=
# A run left going (this script failed) would run its million passes.
trap '[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; rm -rf "$out"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1); load $(cut -d' ' -f1-3 /proc/loadavg); $BIN mf ${args[*]}; $N clients"
for r in $(seq 1 "$R"); do
  mpirun --oversubscribe -np 3 "$BIN" mf "${args[@]}" --status 127.0.0.1:0 2>"$out/run-$r.log" >/dev/null &
  pid=$!
  url=$(python3 "$CLIENT" url "$out/run-$r.log" 120)
  python3 - "$url" "$CLIENT" "$N" "$QUIET" "$BURST" "$out/burst-$r.json" "$out/run-$r.log" <<'PY'
import re, subprocess, sys, time
url, client, n, quiet, burst, out, log = sys.argv[1:8]
def last():
    # "[  5.426s coord0 info] pass 1737/1000000 ...": the coordinator's time and pass
    for _ in range(1200):
        m = re.findall(r"^\[ *([0-9.]+)s coord0 info\] pass ([0-9]+)/", open(log).read(), re.M)
        if m:
            return float(m[-1][0]), int(m[-1][1])
        time.sleep(0.1)
    sys.exit("no progress line in " + log)
last()
time.sleep(2)  # past the first passes
def rate(action):
    t0, p0 = last()
    action()
    t1, p1 = last()
    return (p1 - p0) / (t1 - t0)
before = rate(lambda: time.sleep(float(quiet)))
during = rate(lambda: subprocess.run([sys.executable, client, "burst", url, n, burst, out], check=True))
after = rate(lambda: time.sleep(float(quiet)))
print(f"passes/s: quiet {before:.1f}, {n} scraping {during:.1f}, quiet {after:.1f}; "
      f"burst / quiet = {during / ((before + after) / 2):.3f}")
PY
  # TERM: a script's background job ignores SIGINT.
  kill -TERM "$pid"
  wait "$pid" || true
  pid=
done
