#!/usr/bin/env bash
# strata's Metropolis-Hastings LDA sampler against WarpLDA, one core each,
# the same run, on the corpus both read: 50,000 documents of 200 tokens
# drawn from LDA (genlda 50000 200 10000 100 0.1 0.01, 10M tokens), at
# K = 100 and K = 1000, the same model and the same work per token:
#   strata lda --mode serial --sampler warp --mh-steps 1 --alpha 0.1 --beta 0.01
#   warplda --k K --alpha 0.1K --beta 0.01 (its -alpha is the sum over topics;
#     its main.cpp builds WarpLDA<1>, one Metropolis-Hastings step per
#     proposal, whatever -mh says)
# with OMP_NUM_THREADS=1.
#
# Speed: seconds per iteration (a pass of every token through a word and a
# document proposal, and each program's own likelihood of the pass, which
# both compute every iteration), by CPU seconds (what an iteration costs,
# whatever else the machine runs) and by wall seconds; medians over
# iterations 2..N of every run (all of them when N is 1). strata's figures
# are its metrics' per pass (workers[0].cpu_s, time_s + eval_s); WarpLDA's CPU seconds are read from
# /proc when it prints each iteration's line (its stdout line-buffered by
# stdbuf), its wall seconds are the ones it prints.
#
# Quality against time, judged by one evaluator: each program runs N
# iterations for every N of ITERS, writes its final topic assignments
# (WarpLDA's -z; strata's --topics-out z.txt, the same format) and
# `strata lda-eval` computes the same collapsed log p(w, z) per token from
# each file; its time is the CPU seconds of those N iterations. Both
# programs are deterministic, so a run of N iterations is the first N of a
# longer one. Runs are interleaved (the two programs alternate, and which
# goes first changes every round), ROUNDS rounds.
#
# WarpLDA (never part of strata) is built from $STRATA_WARPLDA_SRC, a
# checkout of github.com/thu-ml/warplda (default ../anchors/warplda beside
# the checkout), in out/anchors/warplda, with the three changes it needs to
# build on a current system (its CMakeLists.txt without its bundled gflags
# and its tests, #include <stdexcept> in its sources) and its own flags
# (CMAKE_BUILD_TYPE=Release: -march=native -std=c++1y -O3 -fopenmp); it
# needs libgflags-dev and libnuma-dev. The data is
# $STRATA_ANCHOR_DATA/lda (default ../data beside the checkout), made when
# missing by ../shared/tools/genlda.c, converted for strata to lda-c with
# the word ids WarpLDA's format tool gives (first appearance), so that both
# have the same V. Without WarpLDA, its libraries or the data the script
# says so and exits 0.
#
# Output: bench/results/anchors/warplda.jsonl (one JSON line per run, then
# one summary line per K), warplda.md (the tables) and warplda_kK.png (log
# p(w, z) per token against CPU seconds), or in $STRATA_ANCHOR_OUT.
# Usage: bench/anchor_warplda.sh [ROUNDS=2] [ITERS="1 2 4 8 16 32"] [KS="100 1000"]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
ROUNDS=${1:-2}
ITERS=${2:-1 2 4 8 16 32}
KS=${3:-100 1000}
BUILD=${STRATA_BUILD:-$STRATA_ROOT/build}
SRC=${STRATA_WARPLDA_SRC:-$STRATA_ROOT/../anchors/warplda}
DATA=${STRATA_ANCHOR_DATA:-$STRATA_ROOT/../data}/lda
OUT=${STRATA_ANCHOR_OUT:-$STRATA_ROOT/bench/results/anchors}
WORK=$STRATA_ROOT/out/anchors/warplda

skip() {
  echo "anchor_warplda: skipped: $*" >&2
  exit 0
}
[ -f "$SRC/src/warplda.cpp" ] && [ -f "$SRC/CMakeLists.txt" ] ||
  skip "no WarpLDA source at $SRC (git clone https://github.com/thu-ml/warplda there, or set STRATA_WARPLDA_SRC)"
[ -x "$BUILD/strata" ] || { echo "anchor_warplda: $BUILD/strata not built (cmake --build ...)" >&2; exit 1; }
command -v stdbuf >/dev/null || skip "no stdbuf (coreutils)"

# WarpLDA, built from a copy of its source (kept while the commit it was
# built from is the checkout's: a build takes minutes on a small machine).
mkdir -p "$WORK" "$OUT"
WARPLDA_COMMIT=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)
WL=$WORK/src/build/src
if [ "$WARPLDA_COMMIT" = unknown ] || [ ! -x "$WL/warplda" ] || [ ! -x "$WL/format" ] ||
   [ "$(cat "$WORK/built_commit" 2>/dev/null)" != "$WARPLDA_COMMIT" ]; then
  rm -rf "$WORK/src" "$WORK/built_commit" && mkdir -p "$WORK/src"
  if [ "$WARPLDA_COMMIT" != unknown ]; then
    git -C "$SRC" archive HEAD | tar -x -C "$WORK/src"
  else
    cp -r "$SRC/." "$WORK/src"
  fi
  sed -i 's/^add_subdirectory *(gflags)/# &/; s/^add_subdirectory *(test)/# &/' "$WORK/src/CMakeLists.txt"
  for f in "$WORK"/src/src/*.cpp "$WORK"/src/src/*.hpp; do sed -i '1i #include <stdexcept>' "$f"; done
  if ! (cd "$WORK/src" && mkdir -p build && cd build &&
        cmake .. -DCMAKE_BUILD_TYPE=Release >"$WORK/build.log" 2>&1 &&
        make -j2 warplda format >>"$WORK/build.log" 2>&1); then
    tail -5 "$WORK/build.log" >&2
    skip "WarpLDA did not build (it needs libgflags-dev and libnuma-dev); see $WORK/build.log"
  fi
  echo "$WARPLDA_COMMIT" >"$WORK/built_commit"
fi
WARPLDA_FLAGS=$(sed -n 's/^CXX_FLAGS = //p' "$WL/CMakeFiles/warplda.dir/flags.make" | tr -s ' ')

# The corpus, in both formats.
if [ ! -f "$DATA/corpus.txt" ]; then
  gen=$STRATA_ROOT/../shared/tools/genlda.c
  [ -f "$gen" ] || skip "no $DATA/corpus.txt and no generator $gen"
  mkdir -p "$DATA"
  gcc -O2 -o "$DATA/genlda" "$gen" -lm
  "$DATA/genlda" 50000 200 10000 100 0.1 0.01 >"$DATA/corpus.txt.tmp"
  mv "$DATA/corpus.txt.tmp" "$DATA/corpus.txt"
fi
if [ ! -f "$DATA/corpus.ldac" ]; then
  # lda-c ("N id:count ..."), ids by first appearance as WarpLDA's format
  # numbers its vocabulary; the first two fields of a line name the document.
  awk '{delete c; n = 0
        for (i = 3; i <= NF; i++) { if (!($i in id)) id[$i] = nv++; x = id[$i]
                                    if (!(x in c)) { c[x] = 0; n++ } c[x]++ }
        printf "%d", n; for (x in c) printf " %d:%d", x, c[x]; printf "\n"}' \
    "$DATA/corpus.txt" >"$DATA/corpus.ldac.tmp"
  mv "$DATA/corpus.ldac.tmp" "$DATA/corpus.ldac"
fi
if [ ! -f "$DATA/warplda.vocab" ] || [ ! -f "$DATA/warplda.bin.u.idx" ]; then
  "$WL/format" -input "$DATA/corpus.txt" -prefix "$DATA/warplda" >"$WORK/format.log" 2>&1
fi

python3 - "$BUILD/strata" "$WL/warplda" "$DATA" "$WORK" "$OUT" "$ROUNDS" "$ITERS" "$KS" \
  "$WARPLDA_COMMIT" "$WARPLDA_FLAGS" <<'PY'
import json, os, re, shutil, statistics, subprocess, sys, time

strata, warplda, data, work, out, R, iters, ks, commit, wflags = sys.argv[1:11]
R = int(R)
ITERS = sorted({int(x) for x in iters.split()})
KS = [int(x) for x in ks.split()]
med = statistics.median
ALPHA, BETA = 0.1, 0.01
V = sum(1 for _ in open(f"{data}/warplda.vocab"))


def cpu_s(pid):
    """CPU seconds of every live thread of pid (/proc/PID/task/*/schedstat)."""
    t = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                t += int(f.read().split()[0])
        except OSError:
            pass
    return t / 1e9


def run(cmd, mark=None, env=None):
    """Runs cmd; returns its output lines, each with the process's CPU
    seconds when the line came if it matches `mark`."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    lines, last = [], 0.0
    for raw in p.stdout:
        line = raw.decode(errors="replace").rstrip("\n")
        c = None
        if mark and re.search(mark, line):
            try:
                c = last = cpu_s(p.pid)
            except OSError:
                c = last
        lines.append((c, line))
    if p.wait():
        sys.exit(f"anchor_warplda: {' '.join(cmd)} failed ({p.returncode}):\n" +
                 "\n".join(l for _, l in lines[-20:]))
    return lines


def evaluate(zfile, K):
    lines = run([strata, "lda-eval", "--z", zfile, "--topics", str(K), "--alpha", str(ALPHA),
                 "--beta", str(BETA), "--vocab-size", str(V)])
    return json.loads(lines[-1][1])


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


def cpu_model():
    info = {}
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        k, _, v = line.partition(":")
        info[k.strip()] = v.strip()
    flags = set(info.get("Flags", "").split())
    return {"model": info.get("Model name"), "family": info.get("CPU family"),
            "model_id": info.get("Model"),
            "isa": [f for f in ("avx2", "avx512f") if f in flags]}


jsonl = open(f"{out}/warplda.jsonl", "w")


ROUND = 0  # the round being run, in each record


def record(**kw):
    kw["round"] = ROUND
    kw["loadavg"] = loadavg()
    jsonl.write(json.dumps(kw) + "\n")
    jsonl.flush()
    return kw


def run_warplda(K, n):
    z = f"{work}/warplda.z"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    lines = run(["stdbuf", "-oL", warplda, "--prefix", f"{data}/warplda", "--k", str(K),
                 "--alpha", repr(ALPHA * K), "--beta", str(BETA), "--niter", str(n),
                 "--dumpmodel=false", "--writeinfo=false", "--z", z],
                mark=r"^(Initialization finished|Iteration \d+,)", env=env)
    marks = [c for c, l in lines if c is not None]
    its = [l for _, l in lines if l.startswith("Iteration ")]
    assert len(marks) == n + 1 and len(its) == n, lines[-5:]
    cpu = [b - a for a, b in zip(marks, marks[1:])]
    wall = [float(l.split()[2]) for l in its]
    own = [float(l.split("log_likelihood (per token)")[1].split()[0]) for l in its]
    ev = evaluate(z, K)
    os.remove(z)
    return record(program="warplda", K=K, iterations=n, cpu_s=cpu, wall_s=wall,
                  own_loglik_per_token=own, eval=ev)


def run_strata(K, n):
    d, m = f"{work}/strata-topics", f"{work}/strata.json"
    shutil.rmtree(d, ignore_errors=True)
    run([strata, "lda", "--mode", "serial", "--data", f"{data}/corpus.ldac", "--topics", str(K),
         "--sampler", "warp", "--mh-steps", "1", "--alpha", str(ALPHA), "--beta", str(BETA),
         "--passes", str(n), "-q", "--metrics-out", m, "--topics-out", d])
    met = json.load(open(m))
    assert met["vocab"] == V, (met["vocab"], V)  # the same V beta in both priors
    pp = met["per_pass"]
    ev = evaluate(f"{d}/z.txt", K)
    shutil.rmtree(d)
    return record(program="strata", K=K, iterations=n,
                  cpu_s=[p["workers"][0]["cpu_s"] for p in pp],
                  wall_s=[p["time_s"] + p["eval_s"] for p in pp],
                  sample_wall_s=[p["time_s"] for p in pp],
                  own_loglik_per_token=[p["loglik_per_token"] for p in pp], eval=ev,
                  tokens=met["tokens"], build=met.get("build", {}))


runs = []
for r in range(1, R + 1):
    ROUND = r
    for K in KS:
        for n in ITERS:
            order = [run_warplda, run_strata] if r % 2 else [run_strata, run_warplda]
            for f in order:
                x = f(K, n)
                runs.append(x)
                print(f"anchor_warplda: round {r}/{R} K={K} {x['program']} {n} iterations: "
                      f"{sum(x['cpu_s']):.2f} cpu s, loglik/token {x['eval']['loglik_per_token']:.4f}",
                      file=sys.stderr)

cpu = cpu_model()
summary, md = {}, []
md.append(f"CPU: {cpu['model']} (family {cpu['family']}, model {cpu['model_id']}; "
          f"{', '.join(cpu['isa']) or 'no AVX2'}); load average at the start of each run "
          f"{min(x['loadavg'] for x in runs):.1f}-{max(x['loadavg'] for x in runs):.1f}. "
          f"WarpLDA {commit[:12]} ({wflags}), OMP_NUM_THREADS=1; strata "
          f"{next((x['build'].get('git_rev') for x in runs if x['program'] == 'strata'), '?')} "
          f"({next((x['build'].get('flags') for x in runs if x['program'] == 'strata'), '?')}). "
          f"{R} rounds, iterations {' '.join(map(str, ITERS))} per round.")
md.append("")
md.append("| K | program | CPU s / iteration | wall s / iteration | M tokens / CPU s | strata / WarpLDA (CPU) | (wall) |")
md.append("|---|---|---|---|---|---|---|")
for K in KS:
    per = {}
    for prog in ("warplda", "strata"):
        xs = [x for x in runs if x["program"] == prog and x["K"] == K]
        skip = 1 if max(ITERS) > 1 else 0  # the first iteration is the warm-up
        c = [v for x in xs for v in x["cpu_s"][skip:]]
        w = [v for x in xs for v in x["wall_s"][skip:]]
        per[prog] = (med(c), med(w))
    tokens = next(x["tokens"] for x in runs if x["program"] == "strata")
    ratio_c = per["warplda"][0] / per["strata"][0]
    ratio_w = per["warplda"][1] / per["strata"][1]
    for prog, name in (("warplda", "WarpLDA"), ("strata", "strata")):
        c, w = per[prog]
        md.append(f"| {K} | {name} | {c:.3f} | {w:.3f} | {tokens / c / 1e6:.2f} | "
                  + (f"{ratio_c:.2f} | {ratio_w:.2f} |" if prog == "strata" else " | |"))
    # Quality against time: per N the median over rounds.
    curve = {}
    for prog in ("warplda", "strata"):
        pts = []
        for n in ITERS:
            xs = [x for x in runs if x["program"] == prog and x["K"] == K and x["iterations"] == n]
            pts.append((n, med([sum(x["cpu_s"]) for x in xs]),
                        med([x["eval"]["loglik_per_token"] for x in xs])))
        curve[prog] = pts
    summary[K] = dict(cpu_s_per_iteration={p: per[p][0] for p in per},
                      wall_s_per_iteration={p: per[p][1] for p in per},
                      strata_over_warplda_cpu=ratio_c, strata_over_warplda_wall=ratio_w,
                      curve=curve)
    jsonl.write(json.dumps({"summary": True, "K": K, **summary[K], "cpu": cpu,
                            "warplda_commit": commit, "warplda_flags": wflags}) + "\n")
    with open(f"{work}/curve_k{K}.dat", "w") as f:
        for prog in ("strata", "warplda"):
            f.write(f"# {prog}: iterations, CPU s, loglik per token\n")
            for n, c, ll in curve[prog]:
                f.write(f"{n} {c:.4f} {ll:.6f}\n")
            f.write("\n\n")
    if shutil.which("gnuplot"):
        subprocess.run(["gnuplot"], input=f"""
set terminal pngcairo size 800,500
set output '{out}/warplda_k{K}.png'
set title 'K = {K}, 10M tokens, one core: log p(w, z) per token by strata lda-eval'
set xlabel 'CPU seconds of the iterations'
set ylabel 'log-likelihood per token'
set key bottom right
set grid
plot '{work}/curve_k{K}.dat' index 0 using 2:3 with linespoints title 'strata --sampler warp --mh-steps 1', \\
     '' index 1 using 2:3 with linespoints title 'WarpLDA'
""", text=True, check=False)
md.append("")
for K in KS:
    c = summary[K]["curve"]
    md.append(f"K = {K}: log p(w, z) per token after N iterations (strata lda-eval on each "
              f"program's final assignments) and the CPU seconds of those N iterations, medians "
              f"of {R} rounds:")
    md.append("")
    md.append("| N | strata CPU s | strata loglik/token | WarpLDA CPU s | WarpLDA loglik/token |")
    md.append("|---|---|---|---|---|")
    for (n, sc, sl), (_, wc, wl) in zip(c["strata"], c["warplda"]):
        md.append(f"| {n} | {sc:.2f} | {sl:.4f} | {wc:.2f} | {wl:.4f} |")
    # When strata first reaches WarpLDA's last figure.
    target = c["warplda"][-1]
    hit = next(((n, t) for n, t, ll in c["strata"] if ll >= target[2]), None)
    if hit:
        md.append("")
        md.append(f"strata reaches WarpLDA's {target[0]}-iteration figure ({target[2]:.4f}) "
                  f"after {hit[0]} iterations, {hit[1]:.2f} CPU s, against WarpLDA's "
                  f"{target[1]:.2f} CPU s.")
    md.append("")
text = "\n".join(md)
print(text)
open(f"{out}/warplda.md", "w").write(text + "\n")
PY
