#!/usr/bin/env bash
# strata pagerank against GAP's pr (github.com/sbeamer/gapbs, the GAP
# Benchmark Suite's PageRank; never part of strata), on the same text files,
# in the same run, interleaved:
#   - Graph500's directed R-MAT at scale 22, edge factor 18 (GAP's own
#     generator, ../shared/tools/gen_kron_directed.cc: 75.5M edges, 1.17 GB):
#     GAP's read and build of the text file against strata's load of it
#     (load and shipping the blocks, --truth-iters 0: GAP computes no ground
#     truth), and the time of one
#     iteration, serial against GAP with one thread and 2 workers against GAP
#     with two;
#   - soc-Slashdot0902 (../shared/data, in cache): the same, and 2 workers
#     against serial.
# GAP runs 20 iterations a trial (-i 20 -t 0) and reports each trial's time;
# its iteration is a trial's time over 20, median over its trials. strata's
# is the time per pass (median of passes 2..N). Every run repeats REPEATS
# times (default 3), the systems in turn; the figures are medians.
#
# Usage: bench/anchor_gap.sh [OUTDIR] [REPEATS]
#   OUTDIR  default bench/results/anchors: anchor_gap.jsonl (one JSON line
#           per run) and anchor_gap.md (the table)
# Environment:
#   STRATA_GAP_DIR    a gapbs checkout (default ../anchors/gapbs beside the
#                     checkout); built here with its Makefile (make pr)
#   STRATA_GRAPH_DIR  where kd22k18.el is, or is made (default ../data/graph)
#   STRATA_BUILD      a build directory holding strata-pagerank (default
#                     build-bench, configured and built if absent)
#   STRATA_SHARED_DATA  the shared data (default ../shared/data)
# Without a gapbs checkout it says so and exits 0, having run nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
OUT=${1:-$STRATA_ROOT/bench/results/anchors}
R=${2:-3}
GAP=${STRATA_GAP_DIR:-$STRATA_ROOT/../anchors/gapbs}
GRAPHS=${STRATA_GRAPH_DIR:-$STRATA_ROOT/../data/graph}
DATA=${STRATA_SHARED_DATA:-$STRATA_ROOT/../shared/data}
BUILD=${STRATA_BUILD:-$STRATA_ROOT/build-bench}

if [ ! -f "$GAP/src/pr.cc" ]; then
  echo "anchor_gap: skipped: no gapbs checkout at $GAP (git clone https://github.com/sbeamer/gapbs" \
    "there, or set STRATA_GAP_DIR)"
  exit 0
fi
GAP=$(cd "$GAP" && pwd)
make -C "$GAP" pr >/dev/null
GAP_COMMIT=$(git -C "$GAP" rev-parse HEAD 2>/dev/null || echo unknown)
GAP_FLAGS=$(make -C "$GAP" -n -B pr 2>/dev/null | grep 'src/pr.cc' | head -1 | sed 's/ src\/pr.cc.*//') || true
CXX_VERSION=$(${CXX:-g++} --version | head -1)
# The CPU, on every JSON line: model, family/model, AVX2 and AVX-512.
CPU=$(lscpu | python3 -c '
import re, sys
t = sys.stdin.read()
f = lambda k: (re.search(r"^%s:\s*(.*)$" % k, t, re.M) or [None, "?"])[1].strip()
isa = ", ".join(x for x in ("avx2", "avx512f") if x in f("Flags").split()) or "no AVX2"
print("%s (family %s, model %s; %s), %s CPUs" % (f("Model name"), f("CPU family"), f("Model"), isa, f("CPU\\(s\\)")))')
export CPU

if [ ! -x "$BUILD/strata-pagerank" ]; then
  cmake -S "$STRATA_ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSTRATA_BUILD_BENCH=ON \
    -DSTRATA_BUILD_TESTS=OFF >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" --target strata_pagerank >/dev/null
fi
PR=$BUILD/strata-pagerank

mkdir -p "$OUT" "$GRAPHS"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

KRON=$GRAPHS/kd22k18.el
if [ ! -f "$KRON" ]; then
  echo "anchor_gap: making $KRON with GAP's generator (about a minute, 1.2 GB)"
  ${CXX:-g++} -O3 -fopenmp -std=c++11 -I "$GAP/src" -o "$TMP/gen_kron_directed" \
    "$STRATA_ROOT/../shared/tools/gen_kron_directed.cc"
  "$TMP/gen_kron_directed" 22 18 "$KRON.part" >/dev/null
  mv "$KRON.part" "$KRON"
fi
# GAP reads edge lists without comments: soc-Slashdot0902's edges as GAP's .el.
SD=$DATA/snap-soc-slashdot0902/soc-Slashdot0902.txt.gz
graphs=("kron22:$KRON")
if [ -f "$SD" ]; then
  zcat "$SD" | grep -v '^#' >"$TMP/slashdot.el"
  graphs+=("slashdot:$TMP/slashdot.el")
else
  echo "anchor_gap: no soc-Slashdot0902 at $SD: the small graph is left out"
fi

JSONL=$OUT/anchor_gap.jsonl
: >"$JSONL"
# gap NAME FILE THREADS TRIALS: one GAP run, as a JSON line.
gap() {
  local log=$TMP/gap.log
  OMP_NUM_THREADS=$3 "$GAP/pr" -f "$2" -i 20 -t 0 -n "$4" >"$log"
  python3 - "$1" "$3" "$log" <<'PY' >>"$JSONL"
import json, os, re, sys
name, threads, log = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
grab = lambda k: [float(x) for x in re.findall(k + r":\s+([0-9.]+)", log)]
trials = grab("Trial Time")
print(json.dumps({"graph": name, "system": "gap", "threads": threads, "cpu": os.environ["CPU"],
                  "read_s": grab("Read Time")[0], "build_s": grab("Build Time")[0],
                  "trial_s": trials, "iteration_ms": sorted(trials)[len(trials) // 2] / 20 * 1e3}))
PY
}
# strata NAME FILE WORKERS PASSES [flags]: one strata run (WORKERS 0:
# serial), as a JSON line.
strata() {
  local name=$1 file=$2 w=$3 p=$4 m=$TMP/m.json
  shift 4
  if [ "$w" = 0 ]; then
    "$PR" --mode serial --graph "$file" --passes "$p" --truth-iters 0 -q --metrics-out "$m" "$@"
  else
    mpirun -np $((w + 1)) "$PR" --graph "$file" --passes "$p" --truth-iters 0 -q \
      --metrics-out "$m" "$@"
  fi >/dev/null
  python3 - "$name" "$w" "$m" "$*" <<'PY' >>"$JSONL"
import json, os, statistics, sys
name, w, m, flags = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3])), sys.argv[4]
# CPU seconds of all workers in a pass, median over passes 2..N: what the
# pass cost, whatever share of the cores the machine's load left it.
cpu = [sum(x["cpu_s"] for x in p["workers"]) for p in m["per_pass"][1:]]
print(json.dumps({"graph": name, "system": "strata", "threads": max(w, 1), "cpu": os.environ["CPU"],
                  "mode": "serial" if w == 0 else "scheduled", "flags": flags,
                  "load_s": m["load_s"] + m["setup_s"], "setup_s": m["setup_s"],
                  "iteration_ms": m["time_per_pass_s"] * 1e3,
                  "cpu_ms_per_pass": statistics.median(cpu) * 1e3 if cpu else None,
                  "vertices": m["vertices"],
                  "edges": m["edges"], "git": m["build"].get("git_rev", ""),
                  "build_flags": m["build"].get("flags", "")}))
PY
}

for r in $(seq 1 "$R"); do
  for g in "${graphs[@]}"; do
    name=${g%%:*} file=${g#*:}
    if [ "$name" = kron22 ]; then trials=3 passes=12; else trials=20 passes=200; fi
    echo "anchor_gap: round $r of $R, $name"
    gap "$name" "$file" 1 "$trials"
    strata "$name" "$file" 0 "$passes"
    gap "$name" "$file" 2 "$trials"
    strata "$name" "$file" 2 "$passes"
    [ "$name" = kron22 ] || strata "$name" "$file" 2 "$passes" --min-share 0
  done
done

python3 - "$JSONL" "$OUT/anchor_gap.md" "$GAP_COMMIT" "$GAP_FLAGS" "$CXX_VERSION" "$R" <<'PY'
import json, re, statistics, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
commit, flags, cxx, R = sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
field = lambda k: (re.search(r"^%s:\s*(.*)$" % k, lscpu, re.M) or [None, "?"])[1].strip()
flagset = set(field("Flags").split())
isa = ", ".join(f for f in ("avx2", "avx512f") if f in flagset) or "no AVX2"
cpu = "%s (family %s, model %s; %s), %s CPUs" % (field("Model name"), field("CPU family"),
                                                 field("Model"), isa, field("CPU\\(s\\)"))
load = open("/proc/loadavg").read().split()[:3]
med = lambda xs: statistics.median(xs) if xs else float("nan")
mine = [r for r in rows if r["system"] == "strata"]
strata_git = ", ".join(sorted({r["git"] for r in mine})) or "?"
strata_flags = ", ".join(sorted({r["build_flags"] for r in mine})) or "?"
def pick(graph, system, threads, flags=None):
    return [r for r in rows if r["graph"] == graph and r["system"] == system and
            r["threads"] == threads and (flags is None or r.get("flags", "") == flags)]
out = ["# strata pagerank against GAP's pr", "",
       "CPU: %s; load average at the end %s. GAP: gapbs %s, `make pr` (`%s`; %s), "
       "`pr -f FILE -i 20 -t 0 -n N` with OMP_NUM_THREADS 1 and 2. strata: commit %s (%s), "
       "`--truth-iters 0`, serial and 2 workers (`mpirun -np 3`). Medians of %s interleaved "
       "rounds; ms per iteration: GAP's trial over its 20 iterations, strata's time per pass "
       "(passes 2..N); strata's CPU ms: all workers' CPU time in a pass." % (
           cpu, " ".join(load), commit[:12], flags, cxx, strata_git, strata_flags, R), ""]
out += ["| graph | system | threads | load s (GAP: read + build) | ms per iteration | x GAP, same threads | strata CPU ms a pass |",
        "|---|---|---|---|---|---|---|"]
for graph in ("kron22", "slashdot"):
    for threads in (1, 2):
        g = pick(graph, "gap", threads)
        if not g:
            continue
        g_load = med([x["read_s"] + x["build_s"] for x in g])
        g_it = med([x["iteration_ms"] for x in g])
        out.append("| %s | GAP pr | %d | %.2f (%.2f + %.2f) | %.2f | 1.00 | |" % (
            graph, threads, g_load, med([x["read_s"] for x in g]), med([x["build_s"] for x in g]), g_it))
        s = pick(graph, "strata", threads, "")
        if s:
            s_it = med([x["iteration_ms"] for x in s])
            out.append("| %s | strata %s | %d | %.2f | %.2f | %.2f | %.2f |" % (
                graph, "serial" if threads == 1 else "2 workers", threads,
                med([x["load_s"] for x in s]), s_it, s_it / g_it, med([x["cpu_ms_per_pass"] for x in s])))
        s = pick(graph, "strata", threads, "--min-share 0")
        if s:
            s_it = med([x["iteration_ms"] for x in s])
            out.append("| %s | strata 2 workers, blocks spread (`--min-share 0`) | %d | %.2f | %.2f | %.2f | %.2f |" % (
                graph, threads, med([x["load_s"] for x in s]), s_it, s_it / g_it,
                med([x["cpu_ms_per_pass"] for x in s])))
ser = pick("slashdot", "strata", 1, "")
two = pick("slashdot", "strata", 2, "")
if ser and two:
    ratio = lambda k: med([x[k] for x in two]) / med([x[k] for x in ser])
    each = " ".join("%.2f" % (b["iteration_ms"] / a["iteration_ms"]) for a, b in zip(ser, two))
    out += ["", "soc-Slashdot0902: strata 2 workers over serial: %.2f in ms per pass (round by "
            "round: %s), %.2f in CPU ms per pass" % (ratio("iteration_ms"), each,
                                                     ratio("cpu_ms_per_pass"))]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
