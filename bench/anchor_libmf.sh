#!/usr/bin/env bash
# strata's MF against LIBMF (its AVX build, OpenMP), the same run, on the
# MovieLens-10M-shaped file that both read (LIBMF text format, k = 100):
#   one core: updates per second of strata's kernel alone (bench/mf_kernel),
#     of strata serial (the engine, one process) and of LIBMF with one
#     thread, by CPU seconds (what a pass costs, whatever else the machine
#     runs) and by wall seconds;
#   two cores: wall seconds from launch until LIBMF with two threads has
#     run 20 iterations (its test RMSE then is the target) and until strata
#     with two workers (mpirun -np 3) first reaches that test RMSE, loading
#     included in both.
# Runs are interleaved, ROUNDS rounds, and the figures are medians.
#
# LIBMF (never part of strata) is built from $STRATA_LIBMF_SRC, a checkout
# of github.com/cjlin1/libmf (default ../anchors/libmf beside the checkout),
# into out/anchors/libmf with
#   g++ -O3 -pthread -std=c++0x -march=native -mavx -fopenmp -DUSEAVX -DUSEOMP
# (its Makefile's AVX settings). The data is $STRATA_ANCHOR_DATA/mf10m/s10m.tr
# and s10m.te (default ../data beside the checkout), made by the shared
# generator when missing: genmf 10000000 71567 10681 s10m.tr s10m.te
# (../shared/tools/genmf.c). Without LIBMF or the data the script says so
# and exits 0.
#
# LIBMF per iteration: the difference of a 12- and a 2-iteration run
# (--quiet) over 10, which leaves out its reading, set-up and model file;
# its first iteration updates only the first 8 factors, so both runs hold
# one such. Its time to 20 iterations is when it prints iteration 19 (-p:
# it scores the test file after every iteration, as strata does).
#
# With $STRATA_PORTABLE_BUILD naming a portable x86-64 build (cmake
# -DSTRATA_NATIVE=OFF), the one-core table also has its kernel's x86-64-v3
# (AVX2) and x86-64-v4 (AVX-512) copies, each the CPU can run (mf_kernel
# --isa): the AVX2 figure of an AVX-512 machine.
#
# Output: bench/results/anchors/libmf.jsonl (one JSON line per run, then
# one summary line) and libmf.md (the tables), or $STRATA_ANCHOR_OUT.
# Usage: bench/anchor_libmf.sh [ROUNDS=3] [PASSES=6]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
ROUNDS=${1:-3}
PASSES=${2:-6}
BUILD=${STRATA_BUILD:-$STRATA_ROOT/build}
SRC=${STRATA_LIBMF_SRC:-$STRATA_ROOT/../anchors/libmf}
DATA=${STRATA_ANCHOR_DATA:-$STRATA_ROOT/../data}/mf10m
OUT=${STRATA_ANCHOR_OUT:-$STRATA_ROOT/bench/results/anchors}
WORK=$STRATA_ROOT/out/anchors/libmf
PORT=${STRATA_PORTABLE_BUILD:-}

skip() {
  echo "anchor_libmf: skipped: $*" >&2
  exit 0
}
[ -f "$SRC/mf.cpp" ] && [ -f "$SRC/mf-train.cpp" ] ||
  skip "no LIBMF source at $SRC (git clone https://github.com/cjlin1/libmf there, or set STRATA_LIBMF_SRC)"
for b in "$BUILD/strata" "$BUILD/bench/mf_kernel" ${PORT:+"$PORT/bench/mf_kernel"}; do
  [ -x "$b" ] || { echo "anchor_libmf: $b not built (cmake --build ...)" >&2; exit 1; }
done
if [ ! -f "$DATA/s10m.tr" ] || [ ! -f "$DATA/s10m.te" ]; then
  gen=$STRATA_ROOT/../shared/tools/genmf.c
  [ -f "$gen" ] || skip "no $DATA/s10m.tr and no generator $gen"
  mkdir -p "$DATA"
  gcc -O2 -o "$DATA/genmf" "$gen" -lm
  (cd "$DATA" && ./genmf 10000000 71567 10681 s10m.tr s10m.te)
fi

LIBMF_FLAGS="-O3 -pthread -std=c++0x -march=native -mavx -fopenmp -DUSEAVX -DUSEOMP"
mkdir -p "$WORK" "$OUT"
cp "$SRC/mf.cpp" "$SRC/mf.h" "$SRC/mf-train.cpp" "$WORK/"
# shellcheck disable=SC2086
(cd "$WORK" && g++ $LIBMF_FLAGS -c mf.cpp -o mf.o && g++ $LIBMF_FLAGS -o mf-train mf-train.cpp mf.o)
LIBMF_COMMIT=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)

python3 - "$BUILD" "$WORK/mf-train" "$DATA" "$OUT" "$ROUNDS" "$PASSES" "$LIBMF_COMMIT" \
  "$LIBMF_FLAGS" "$PORT" <<'PY'
import json, os, re, statistics, subprocess, sys, time

build, libmf, data, out, R, P, commit, flags, port = sys.argv[1:10]
R, P = int(R), int(P)
tr, te = os.path.realpath(f"{data}/s10m.tr"), os.path.realpath(f"{data}/s10m.te")
strata, kernel = f"{build}/strata", f"{build}/bench/mf_kernel"
work = os.path.dirname(libmf)
med = statistics.median
K = 100


def run(cmd, log=None):
    """Runs cmd; returns (lines with seconds since launch, wall s, CPU s of the
    process and its children, stdout text)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        lines.append((time.monotonic() - t0, line.rstrip("\n")))
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit(f"anchor_libmf: {' '.join(cmd)} failed ({p.returncode}):\n" +
                 "\n".join(l for _, l in lines[-20:]))
    return lines, wall, ru.ru_utime + ru.ru_stime


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


jsonl = open(f"{out}/libmf.jsonl", "w")


def record(**kw):
    kw["loadavg"] = loadavg()
    jsonl.write(json.dumps(kw) + "\n")
    jsonl.flush()
    return kw


n_train = None
one = {"kernel": [], "serial": [], "libmf": []}
isas = []
if port:
    for isa in ("x86-64-v3", "x86-64-v4"):
        ok = subprocess.run([f"{port}/bench/mf_kernel", "--isa", isa, "--passes", "1", "--data",
                             "synth:users=20,items=20,ratings=200"], capture_output=True).returncode
        if ok == 0:
            isas.append(isa)
            one[isa] = []
ttq = {"libmf": [], "strata": []}
for r in range(1, R + 1):
    # One core. Alternate the order of the systems from round to round.
    order = ["kernel", "serial", "libmf"] + isas
    if r % 2 == 0:
        order.reverse()
    for s in order:
        if s in isas:
            lines, wall, cpu = run([f"{port}/bench/mf_kernel", "--isa", s, "--data", tr, "--format",
                                    "libmf", "--rank", str(K), "--passes", str(P)])
            d = json.loads(lines[-1][1])
            one[s].append(record(run="kernel-" + s, round=r, cpu_per_pass_s=d["cpu_per_pass_s"],
                                 wall_per_pass_s=d["time_per_pass_s"], flags=d["flags"]))
        elif s == "kernel":
            lines, wall, cpu = run([kernel, "--data", tr, "--format", "libmf", "--rank", str(K),
                                    "--passes", str(P)])
            d = json.loads(lines[-1][1])
            n_train = d["ratings"]
            strata_build = d
            one[s].append(record(run="kernel", round=r, cpu_per_pass_s=d["cpu_per_pass_s"],
                                 wall_per_pass_s=d["time_per_pass_s"], ratings=d["ratings"]))
        elif s == "serial":
            m = f"{work}/serial.json"
            run([strata, "mf", "--mode", "serial", "--data", tr, "--format", "libmf", "--rank",
                 str(K), "--passes", str(P), "-q", "--metrics-out", m])
            d = json.load(open(m))
            pp = d["per_pass"][1:]
            one[s].append(record(run="serial", round=r,
                                 cpu_per_pass_s=med([p["workers"][0]["cpu_s"] for p in pp]),
                                 wall_per_pass_s=med([p["time_s"] for p in pp])))
        else:
            t = {}
            for it in (2, 12):
                _, wall, cpu = run([libmf, "--quiet", "-k", str(K), "-s", "1", "-t", str(it), tr,
                                    f"{work}/model.txt"])
                t[it] = (wall, cpu)
            one[s].append(record(run="libmf1", round=r, cpu_per_pass_s=(t[12][1] - t[2][1]) / 10,
                                 wall_per_pass_s=(t[12][0] - t[2][0]) / 10))
    # Two cores: LIBMF first in odd rounds, strata first in even ones.
    for s in (["libmf", "strata"] if r % 2 else ["strata", "libmf"]):
        if s == "libmf":
            lines, wall, cpu = run([libmf, "-k", str(K), "-s", "2", "-t", "20", "-p", te, tr,
                                    f"{work}/model.txt"])
            it = [(t, l.split()) for t, l in lines if re.match(r"\s*\d+\s", l)]
            t19, f19 = it[-1]
            assert f19[0] == "19", f19
            ttq[s].append(record(run="libmf2_ttq", round=r, seconds=t19, test_rmse=float(f19[2]),
                                 first_iteration_s=it[0][0]))
        else:
            m = f"{work}/p2.json"
            lines, wall, cpu = run(["mpirun", "--oversubscribe", "-np", "3", strata, "mf", "--data",
                                    tr, "--test", te, "--format", "libmf", "--rank", str(K),
                                    "--passes", str(P), "--metrics-out", m])
            d = json.load(open(m))
            # The seconds since launch at which each pass's line appeared.
            at = {int(mm.group(1)): t for t, l in lines
                  for mm in [re.search(r"\] pass (\d+)/", l)] if mm}
            ttq[s].append(record(run="strata2", round=r,
                                 test_rmse=[p["test_rmse"] for p in d["per_pass"]],
                                 pass_end_s=[at[i + 1] for i in range(len(d["per_pass"]))],
                                 load_s=d["load_s"]))
    print(f"anchor_libmf: round {r}/{R} done", file=sys.stderr)

# Time to quality: each strata run against the median LIBMF target.
target = med([x["test_rmse"] for x in ttq["libmf"]])
t_libmf = med([x["seconds"] for x in ttq["libmf"]])
reach = []
for x in ttq["strata"]:
    hit = next((i for i, e in enumerate(x["test_rmse"]) if e <= target), None)
    reach.append((x["pass_end_s"][hit], hit + 1) if hit is not None else (None, None))
ok = [t for t, _ in reach if t is not None]
t_strata = med(ok) if len(ok) == len(reach) else None

cpu_info = {}
for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
    k, _, v = l.partition(":")
    cpu_info[k.strip()] = v.strip()
flags_cpu = cpu_info.get("Flags", "").split()
isa = "AVX-512" if "avx512f" in flags_cpu else "AVX2" if "avx2" in flags_cpu else "no AVX2"
cpu = (f"{cpu_info.get('Model name', '?')}, family {cpu_info.get('CPU family', '?')} model "
       f"{cpu_info.get('Model', '?')}, {isa}, {cpu_info.get('CPU(s)', '?')} CPUs")
ns = lambda s: s / n_train * 1e9
summary = {
    "run": "summary", "cpu": cpu, "libmf_commit": commit, "libmf_flags": flags,
    "strata_git": strata_build["git"], "strata_flags": strata_build["flags"], "rounds": R,
    "passes": P, "rank": K, "ratings": n_train, "data": tr,
    "one_core": {s: {"cpu_ns_per_update": ns(med([x["cpu_per_pass_s"] for x in v])),
                     "wall_ns_per_update": ns(med([x["wall_per_pass_s"] for x in v]))}
                 for s, v in one.items()},
    "target_test_rmse": target, "libmf2_seconds_to_20_iterations": t_libmf,
    "strata2_seconds_to_target": t_strata,
    "strata2_passes_to_target": [p for _, p in reach],
}
o = summary["one_core"]
for s in ["kernel", "serial"] + isas:
    for m in ("cpu", "wall"):
        summary[f"{s}_over_libmf1_{m}"] = (o["libmf"][f"{m}_ns_per_update"] /
                                           o[s][f"{m}_ns_per_update"])
summary["strata2_over_libmf2_time_to_target"] = t_strata / t_libmf if t_strata else None
record(**summary)

f = lambda x, fmt: "-" if x is None else fmt.format(x)
libmf_runs = ", ".join("%.2f" % x["seconds"] for x in ttq["libmf"])
strata_runs = ", ".join(f(t, "{:.2f}") + (" (%d passes)" % p if p else "") for t, p in reach)
md = [f"CPU: {cpu}. LIBMF {commit[:12]} built with `{flags}`; strata {summary['strata_git']} "
      f"({summary['strata_flags']}). Data: {tr} ({n_train} training ratings), k = {K}, "
      f"{R} rounds interleaved, medians; load average {med([x['loadavg'] for x in ttq['libmf']]):.1f} "
      "during the runs. CPU seconds leave out the time a process waited for a core; on a "
      "loaded machine the wall columns measure the load as much as the programs.", "",
      "| one core | ns per update, CPU | ns per update, wall | M updates/s, CPU | x LIBMF (CPU) | x LIBMF (wall) |",
      "|---|---|---|---|---|---|"]
labels = [("kernel", "strata kernel alone (bench/mf_kernel)"),
          ("serial", "strata serial (the engine, one process)")]
labels += [(i, f"strata kernel alone, portable build, {i} copy"
               f" ({'AVX2' if i.endswith('v3') else 'AVX-512'})") for i in isas]
labels += [("libmf", "LIBMF, 1 thread")]
for s, label in labels:
    c, w = o[s]["cpu_ns_per_update"], o[s]["wall_ns_per_update"]
    rc = o["libmf"]["cpu_ns_per_update"] / c
    rw = o["libmf"]["wall_ns_per_update"] / w
    md.append(f"| {label} | {c:.1f} | {w:.1f} | {1e3 / c:.1f} | {rc:.2f} | {rw:.2f} |")
md += ["",
       f"Two cores, wall seconds from launch (loading included) to LIBMF's test RMSE after 20 "
       f"iterations with 2 threads, {target:.4f}:", "",
       "| two cores | seconds | runs |", "|---|---|---|",
       f"| LIBMF, 2 threads, 20 iterations | {t_libmf:.2f} | {libmf_runs} |",
       f"| strata, 2 workers, to the same test RMSE | {f(t_strata, '{:.2f}')} | {strata_runs} |",
       "", f"strata 2 workers / LIBMF 2 threads: {f(summary['strata2_over_libmf2_time_to_target'], '{:.3f}')}"]
text = "\n".join(md)
print(text)
open(f"{out}/libmf.md", "w").write(text + "\n")
PY
