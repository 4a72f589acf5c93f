#!/usr/bin/env bash
# Time to quality for MF on one 10M-rating file in LIBMF's text format
# (MovieLens-10M-shaped synthetic ratings, 10% held out), rank 100:
#   - the plain serial kernel (bench/mf_kernel, no engine), in the textbook
#     order (one seeded shuffle of all ratings) and in the engine's order,
#   - strata serial (one process) and scheduled with 2 workers,
#   - LIBMF with 1 and 2 threads, when $STRATA_LIBMF names its shared library
#     (bench/libmf_run loads it; without it those rows are skipped, and said so),
#     described by $STRATA_LIBMF_BUILD (how it was built: its version, and
#     whether with SSE, AVX or no SIMD), which every ratio against LIBMF names,
# and the same speed at rank 32. Every system reads the same two files.
#
# Per system: time per pass (median of passes 2..N; LIBMF: the difference of
# an N+2- and a 2-iteration run over N, which leaves its set-up out), ns per
# update, test RMSE after each pass, and the wall time of training (the sum
# of the pass times, scoring excluded) until the test RMSE first reaches the
# target. The target is LIBMF's test RMSE after 20 iterations (2 threads)
# when LIBMF is there, else strata serial's after PASSES passes
# ($STRATA_TTQ_TARGET overrides both). Runs are interleaved, REPEATS rounds.
#
# Usage: bench/mf_ttq.sh [REPEATS=3] [PASSES=20] [OUTDIR=out/bench/ttq]
# The files are made once by bench/synth_ratings into OUTDIR/data
# ($STRATA_TTQ_DATA: a directory holding train.txt and test.txt instead).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
R=${1:-3}
PASSES=${2:-20}
OUT=${3:-$STRATA_ROOT/out/bench/ttq}
BUILD=${STRATA_BUILD:-$STRATA_ROOT/build}
BIN=$BUILD/strata
for b in "$BIN" "$BUILD/bench/mf_kernel" "$BUILD/bench/synth_ratings" "$BUILD/bench/libmf_run"; do
  [ -x "$b" ] || { echo "mf_ttq: $b not built (cmake --build $BUILD)" >&2; exit 1; }
done
mkdir -p "$OUT"
DATA=${STRATA_TTQ_DATA:-$OUT/data}
if [ ! -f "$DATA/train.txt" ] || [ ! -f "$DATA/test.txt" ]; then
  mkdir -p "$DATA"
  "$BUILD/bench/synth_ratings" --train-out "$DATA/train.txt" --test-out "$DATA/test.txt"
fi
TR=$DATA/train.txt
TE=$DATA/test.txt
LIBMF=${STRATA_LIBMF:-}
if [ -n "$LIBMF" ] && [ ! -f "$LIBMF" ]; then
  echo "mf_ttq: STRATA_LIBMF=$LIBMF: no such file" >&2
  exit 1
fi
[ -n "$LIBMF" ] || echo "mf_ttq: LIBMF rows skipped: set STRATA_LIBMF to LIBMF's shared library" >&2
rm -f "$OUT"/run-*.json
run_libmf() { # name threads iters rank [extra...]
  local name=$1 t=$2 it=$3 k=$4
  shift 4
  "$BUILD/bench/libmf_run" --lib "$LIBMF" --train "$TR" --rank "$k" --threads "$t" \
    --iters "$it" "$@" >"$OUT/run-$name.json"
}
for r in $(seq 1 "$R"); do
  for k in 100 32; do
    "$BUILD/bench/mf_kernel" --data "$TR" --format libmf --rank $k --passes "$PASSES" \
      $([ $k = 100 ] && echo --test "$TE") >"$OUT/run-kernel-k$k-$r.json" 2>/dev/null
    if [ $k = 100 ]; then
      "$BUILD/bench/mf_kernel" --data "$TR" --format libmf --rank $k --passes "$PASSES" \
        --order shuffle --test "$TE" >"$OUT/run-shuffled-k$k-$r.json" 2>/dev/null
    fi
    "$BIN" mf --mode serial --data "$TR" --format libmf --rank $k --passes "$PASSES" -q \
      $([ $k = 100 ] && echo --test "$TE") --metrics-out "$OUT/run-serial-k$k-$r.json" >/dev/null
    if [ $k = 100 ]; then
      mpirun -np 3 "$BIN" mf --data "$TR" --test "$TE" --format libmf --rank $k \
        --passes "$PASSES" -q --metrics-out "$OUT/run-p2-k$k-$r.json" >/dev/null
    fi
    if [ -n "$LIBMF" ]; then
      for t in 1 2; do
        if [ $k = 32 ] && [ $t = 2 ]; then continue; fi
        run_libmf "libmf-t$t-k$k-i2-$r" $t 2 $k
        run_libmf "libmf-t$t-k$k-i12-$r" $t 12 $k
      done
      if [ $k = 100 ] && [ "$r" = 1 ]; then
        run_libmf "libmf-t2-k100-i20-test" 2 20 100 --test "$TE"
      fi
    fi
  done
  echo "mf_ttq: round $r/$R done" >&2
done
# The CPU as every ratio names it: model, family and model number, widest SIMD.
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1), family $(lscpu | sed -n 's/^CPU family: *//p' | head -1) model $(lscpu | sed -n 's/^Model: *//p' | head -1)"
if grep -qw avx512f /proc/cpuinfo; then cpu+=", AVX-512"; elif grep -qw avx2 /proc/cpuinfo; then cpu+=", AVX2"; fi
libmf_build=""
if [ -n "$LIBMF" ]; then
  libmf_build="${STRATA_LIBMF_BUILD:-$(basename "$LIBMF"), build not described (set STRATA_LIBMF_BUILD)}"
fi
python3 - "$OUT" "$R" "$PASSES" "${STRATA_TTQ_TARGET:-}" "$cpu" "$TR" "$libmf_build" <<'PY'
import json, os, shutil, statistics, subprocess, sys
out, R, P, target_env, cpu, train = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
libmf_build = sys.argv[7]
med = statistics.median
def load(name):
    f = f"{out}/run-{name}.json"
    if not os.path.exists(f):
        return None
    text = open(f).read().strip()
    if not text:
        return None
    # --metrics-out files are indented JSON; the programs' output is a line.
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(text.splitlines()[-1])
rounds = range(1, R + 1)
def strata_runs(kind, k):
    return [d for d in (load(f"{kind}-k{k}-{r}") for r in rounds) if d]
def curve_strata(d):  # (pass seconds, test rmse) per pass
    return [p["time_s"] for p in d["per_pass"]], [p.get("test_rmse") for p in d["per_pass"]]
def curve_kernel(d):
    return d["pass_s"], d.get("test_rmse", [None] * len(d["pass_s"]))
def libmf_iter_s(t, k):
    xs = []
    for r in rounds:
        a, b = load(f"libmf-t{t}-k{k}-i2-{r}"), load(f"libmf-t{t}-k{k}-i12-{r}")
        if a and b:
            xs.append((b["train_s"] - a["train_s"]) / 10)
    return med(xs) if xs else None
lib_test = load("libmf-t2-k100-i20-test")
if target_env:
    target, tsrc = float(target_env), "STRATA_TTQ_TARGET"
elif lib_test:
    target, tsrc = lib_test["test_rmse"], "LIBMF's test RMSE after 20 iterations, 2 threads"
else:
    s = strata_runs("serial", 100)
    target, tsrc = s[0]["per_pass"][P - 1]["test_rmse"], f"strata serial's test RMSE after {P} passes (no LIBMF)"
def ttq(secs, rmse):
    t = 0.0
    for i, (s, e) in enumerate(zip(secs, rmse)):
        t += s
        if e is not None and e <= target:
            return t, i + 1
    return None, None
n = None
rows = []
def add(label, k, runs, curve, threads):
    global n
    if not runs:
        return
    tpp = med([statistics.median(curve(d)[0][1:]) for d in runs])
    n = runs[0].get("ratings") or runs[0].get("examples")
    t2q = [ttq(*curve(d)) for d in runs]
    final = curve(runs[0])[1][-1]
    ok = [x for x in t2q if x[0] is not None]
    rows.append(dict(label=label, k=k, threads=threads, tpp=tpp, ns=tpp / n * 1e9, ups=n / tpp,
                     final=final, ttq=med([x[0] for x in ok]) if len(ok) == len(t2q) else None,
                     passes=med([x[1] for x in ok]) if len(ok) == len(t2q) else None,
                     runs=[round(statistics.median(curve(d)[0][1:]), 4) for d in runs]))
for k in (100, 32):
    add("plain serial kernel, textbook order", k, strata_runs("shuffled", k), curve_kernel, 1)
    add("plain serial kernel, engine order", k, strata_runs("kernel", k), curve_kernel, 1)
    add("strata serial", k, strata_runs("serial", k), curve_strata, 1)
    add("strata scheduled, 2 workers", k, strata_runs("p2", k), curve_strata, 2)
    for t in (1, 2):
        it = libmf_iter_s(t, k)
        if it is None:
            continue
        ttq_l = 20 * it if (k == 100 and t == 2 and lib_test) else None
        rows.append(dict(label=f"LIBMF, {t} thread{'s' if t > 1 else ''}", k=k, threads=t, tpp=it,
                         ns=it / n * 1e9, ups=n / it,
                         final=lib_test["test_rmse"] if (lib_test and k == 100 and t == 2) else None,
                         ttq=ttq_l, passes=20 if ttq_l else None, runs=[]))
def f(x, fmt):
    return "-" if x is None else fmt.format(x)
lines = [f"CPU: {cpu}. Data: {train} ({n} training ratings). Target test RMSE {target:.4f}: {tsrc}."
         + (f" LIBMF: {libmf_build}." if libmf_build else ""),
         "",
         "| system | k | threads | time per pass s (median) | ns per update | M updates/s | test RMSE after the last pass | passes to target | seconds to target | runs |",
         "|---|---|---|---|---|---|---|---|---|---|"]
for x in rows:
    lines.append(f"| {x['label']} | {x['k']} | {x['threads']} | {x['tpp']:.4f} | {x['ns']:.1f} | {x['ups']/1e6:.2f} | "
                 f"{f(x['final'], '{:.4f}')} | {f(x['passes'], '{:.0f}')} | {f(x['ttq'], '{:.2f}')} | {x['runs']} |")
def pick(label, k):
    return next((x for x in rows if x["label"] == label and x["k"] == k), None)
lines.append("")
for k in (100, 32):
    s, l1 = pick("strata serial", k), pick("LIBMF, 1 thread", k)
    if s and l1:
        lines.append(f"k = {k}: strata serial / LIBMF 1 thread ({libmf_build}), updates/s: {s['ups'] / l1['ups']:.2f} on {cpu}")
p2, l2, s = pick("strata scheduled, 2 workers", 100), pick("LIBMF, 2 threads", 100), pick("strata serial", 100)
if p2 and s:
    lines.append(f"k = 100: time per pass, 2 workers / serial: {p2['tpp'] / s['tpp']:.3f}")
if p2 and l2 and p2["ttq"] and l2["ttq"]:
    lines.append(f"k = 100: seconds to target, strata 2 workers / LIBMF 2 threads ({libmf_build}): "
                 f"{p2['ttq'] / l2['ttq']:.3f} on {cpu}")
text = "\n".join(lines)
print(text)
open(f"{out}/ttq.md", "w").write(text + "\n")

# ttq.png: test RMSE against training seconds at k = 100, the first round of
# each system, the target as a line (gnuplot; the .dat and .gp stay beside it).
curves = [("plain serial kernel, textbook order", strata_runs("shuffled", 100), curve_kernel),
          ("plain serial kernel, engine order", strata_runs("kernel", 100), curve_kernel),
          ("strata serial", strata_runs("serial", 100), curve_strata),
          ("strata scheduled, 2 workers", strata_runs("p2", 100), curve_strata)]
cmds = []
for i, (label, runs, curve) in enumerate(curves):
    if not runs:
        continue
    secs, rmse = curve(runs[0])
    t, d = 0.0, ""
    for x, e in zip(secs, rmse):
        t += x
        d += f"{t} {e}\n"
    open(f"{out}/ttq_{i}.dat", "w").write(d)
    cmds.append(f"'ttq_{i}.dat' using 1:2 with linespoints title '{label}'")
l2 = pick("LIBMF, 2 threads", 100)
if l2 and l2["ttq"]:
    open(f"{out}/ttq_libmf.dat", "w").write(f"{l2['ttq']} {target}\n")
    cmds.append("'ttq_libmf.dat' using 1:2 with points pt 7 ps 1.5 title 'LIBMF, 2 threads, 20 iterations'")
cmds.append(f"{target} with lines dt 2 lc rgb 'black' title 'target {target:.4f}'")
open(f"{out}/ttq.gp", "w").write(
    "set terminal pngcairo size 900,560 font 'sans,10'\nset output 'ttq.png'\nset grid\n"
    "set key outside right top\nset logscale x\n"
    f"set title 'MF time to quality, k = 100 ({cpu})'\nset xlabel 'training seconds'\n"
    "set ylabel 'test RMSE'\nplot " + ", ".join(cmds) + "\n")
if shutil.which("gnuplot") and subprocess.run(["gnuplot", "ttq.gp"], cwd=out).returncode != 0:
    print("mf_ttq: gnuplot failed; ttq.gp and its .dat files are in " + out, file=sys.stderr)
PY
