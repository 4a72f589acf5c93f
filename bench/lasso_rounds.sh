#!/usr/bin/env bash
# strata-lasso's coordinator-scheduled rounds (--schedule dynamic, --loss
# logistic) against the schedules before them, as docs/lasso.md's tables:
#   - the SSP paper's 500 x 400,000 Lasso set as gen_lasso_synth makes it
#     (../shared/tools: ./gen 500 400000 0.05 100 42, then csc2svm), at
#     lambda = 0.1 lambda_max: the training time (the passes' time_s summed,
#     load excluded) and passes to a relative duality gap of 1e-4 (--tol
#     1e-4; rel_gap in the metrics) for serial cyclic descent, the static
#     schedule with 2 workers, the coordinator's dynamic schedule serial and
#     with 2 workers at --round-depth 1, 2 and 4 (with its default 2 rounds a
#     pass, and with 8), STRADS's Jacobi steps filtered
#     and unfiltered (Shotgun) at one set size, and BASE_LASSO's
#     --schedule dynamic (the worker-side sampler of builds before the
#     rounds: no --tol, so its gap is computed from exported coefficients
#     by bench/lasso_gap.py at pass counts bracketing 1e-4);
#   - dna as a binary problem (class 3 against the rest, lambda 5e-3,
#     --loss logistic, --tol 1e-7, 2 workers): the bounded Newton step
#     against the line search, filtered and not.
# Every configuration runs REPS times, the configurations interleaved
# within each repetition; the table has the median time (passes and rounds
# do not change between repetitions; the baseline's passes are found once).
# On a shared machine the times vary by half or more: read the medians.
# Usage: bench/lasso_rounds.sh [OUTDIR=out/bench/lasso_rounds]
#   env: STRATA_LASSO (build/strata-lasso), BASE_LASSO (a strata-lasso
#   built from main before the rounds; its rows are left out without it),
#   REPS (3), TOOLS (../shared/tools), STRATA_SHARED_DATA (../shared/data),
#   TABLE_ONLY=1 (no runs: the table from OUTDIR's results)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
OUT=${1:-$root/out/bench/lasso_rounds}
BIN=${STRATA_LASSO:-$root/build/strata-lasso}
BASE=${BASE_LASSO:-}
REPS=${REPS:-3}
TOOLS=${TOOLS:-$root/../shared/tools}
SHARED=${STRATA_SHARED_DATA:-$root/../shared/data}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# The data: generated once, never committed.
if [ ! -s "$OUT/synth.svm" ]; then
  gcc -O2 -o "$OUT/gen" "$TOOLS/gen_lasso_synth.c" -lm
  gcc -O2 -o "$OUT/csc2svm" "$TOOLS/csc2svm.c" -lm
  (cd "$OUT" && ./gen 500 400000 0.05 100 42 synth >/dev/null && ./csc2svm synth synth.svm >/dev/null)
fi
DNA=$SHARED/libsvm-dna/dna.scale
[ -f "$DNA" ] && awk '{ $1 = ($1 == 3) ? "+1" : "-1"; print }' "$DNA" >"$OUT/dna3.svm"

run() { # NAME NP BIN ARGS...: one run, its metrics in OUT/NAME.json (none when it fails)
  local name=$1 n=$2 bin=$3
  shift 3
  echo "+ mpirun -np $n $(basename "$bin") $*" >&2
  rm -f "$OUT/$name.json"
  mpirun --oversubscribe -np "$n" "$bin" "$@" -q --metrics-out "$OUT/$name.json" >"$OUT/$name.out" \
    2>&1 || echo "  exit $?: $(grep -m1 -v '^ *$' "$OUT/$name.out")" >&2
}

SYN=(--data "$OUT/synth.svm" --lambda-ratio 0.1 --tol 1e-4)
declare -A CONF=(
  [serial]="1|--mode serial --passes 2000"
  [static]="3|--passes 600"
  [dyn_serial]="1|--mode serial --schedule dynamic --passes 2000"
  [dyn_d1]="3|--schedule dynamic --passes 2000"
  [dyn_d2]="3|--schedule dynamic --passes 2000 --round-depth 2"
  [dyn_d4]="3|--schedule dynamic --passes 2000 --round-depth 4"
  [dyn7_d1]="3|--schedule dynamic --passes 2000 --rounds 7"
  [dyn7_d2]="3|--schedule dynamic --passes 2000 --rounds 7 --round-depth 2"
  [dyn7_d4]="3|--schedule dynamic --passes 2000 --rounds 7 --round-depth 4"
  [jacobi]="3|--schedule dynamic --passes 1000 --set-sweeps 0 --set-size 64 --corr-threshold 0.1"
  [jacobi_d2]="3|--schedule dynamic --passes 1000 --set-sweeps 0 --set-size 64 --corr-threshold 0.1 --round-depth 2"
  [jacobi_d4]="3|--schedule dynamic --passes 1000 --set-sweeps 0 --set-size 64 --corr-threshold 0.1 --round-depth 4"
  [shotgun]="3|--schedule dynamic --passes 1000 --set-sweeps 0 --set-size 64 --corr-threshold 1"
)
ORDER=(serial static dyn_serial dyn_d1 dyn_d2 dyn_d4 dyn7_d1 dyn7_d2 dyn7_d4 jacobi jacobi_d2 jacobi_d4
  shotgun)
LOG=(--loss logistic --data "$OUT/dna3.svm" --lambda 5e-3 --tol 1e-7 --schedule dynamic)
declare -A LCONF=(
  [log_newton]="--passes 5000"
  [log_search]="--passes 5000 --line-search 3"
  [log_shotgun]="--passes 2000 --corr-threshold 1"
  [log_shotgun_search]="--passes 5000 --corr-threshold 1 --line-search 3 --set-size 16"
  [log_static]="--passes 5000 --schedule static"
)
LORDER=(log_newton log_search log_shotgun log_shotgun_search log_static)

[ -n "${TABLE_ONLY:-}" ] && REPS_RUN=0 || REPS_RUN=$REPS
for rep in $(seq 1 "$REPS_RUN"); do
  for c in "${ORDER[@]}"; do
    IFS='|' read -r np args <<<"${CONF[$c]}"
    # shellcheck disable=SC2086
    run "${c}_$rep" "$np" "$BIN" "${SYN[@]}" $args
  done
  if [ -f "$OUT/dna3.svm" ]; then
    for c in "${LORDER[@]}"; do
      # shellcheck disable=SC2086
      run "${c}_$rep" 3 "$BIN" "${LOG[@]}" ${LCONF[$c]}
    done
  fi
done

# The baseline: passes to a gap of 1e-4 from exported coefficients, in
# steps of 100 passes, then halving the last step down to 10; then REPS
# timed runs of exactly that many passes.
base_passes=
if [ -n "${TABLE_ONLY:-}" ]; then
  base_passes=$(cat "$OUT/base_passes" 2>/dev/null || true)
elif [ -n "$BASE" ]; then
  gap_at() { # K: the baseline's relative gap after K passes
    run "base_k$1" 3 "$BASE" --data "$OUT/synth.svm" --lambda-ratio 0.1 --schedule dynamic \
      --passes "$1" --model-out "$OUT/base_k$1"
    python3 "$here/lasso_gap.py" "$OUT/synth" 0.1 "$OUT/base_k$1/coef.txt" | awk '{print $3}'
  }
  lo=0 hi=
  for k in $(seq 100 100 2000); do
    g=$(gap_at "$k")
    echo "  baseline: gap $g after $k passes" >&2
    if python3 -c "import sys; sys.exit(0 if float('$g') <= 1e-4 else 1)"; then hi=$k; break; fi
    lo=$k
  done
  if [ -n "$hi" ]; then
    while [ $((hi - lo)) -gt 10 ]; do
      mid=$(((lo + hi) / 2))
      g=$(gap_at "$mid")
      echo "  baseline: gap $g after $mid passes" >&2
      if python3 -c "import sys; sys.exit(0 if float('$g') <= 1e-4 else 1)"; then hi=$mid; else lo=$mid; fi
    done
    base_passes=$hi
    echo "$base_passes" >"$OUT/base_passes"
    for rep in $(seq 1 "$REPS"); do
      run "base_$rep" 3 "$BASE" --data "$OUT/synth.svm" --lambda-ratio 0.1 --schedule dynamic \
        --passes "$base_passes"
    done
  fi
fi

python3 - "$OUT" "$REPS" "${base_passes:-}" "$BIN" "${BASE:-}" <<'PY' | tee "$OUT/table.md"
import json, os, statistics, subprocess, sys
out, reps, base_passes, binary, base = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

def load(name):
    try:
        return json.load(open(f"{out}/{name}.json"))
    except (OSError, ValueError):
        return None

def row(label, name, what):
    runs = [load(f"{name}_{r}") for r in range(1, reps + 1)]
    ok = [m for m in runs if m]
    if not ok:
        err = open(f"{out}/{name}_1.out").read().strip().splitlines()
        msg = next((l for l in err if "diverged" in l or "strata-lasso:" in l), err[-1] if err else "")
        return f"| {label} | {msg.replace('|', '/')} | | | | | |"
    m = ok[0]
    times = [sum(p["time_s"] for p in x["per_pass"]) for x in ok]
    r = m.get("rounds", {})
    last = m["per_pass"][-1]
    stop = m.get("stop_reason", "passes")
    reached = stop == "tolerance" or (last.get("rel_gap") is not None and last["rel_gap"] <= what)
    cell = lambda v: "" if v is None else v
    return (f"| {label} | {'yes' if reached else 'no: ' + stop} | {m['passes']} | "
            f"{statistics.median(times):.3f} ({', '.join(f'{t:.2f}' for t in times)}) | "
            f"{cell(r.get('count'))} | {'' if r.get('latency_us_median') is None else round(r['latency_us_median'])} | "
            f"{last.get('rel_gap') if last.get('rel_gap') is not None else ''} |")

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"

cpu = sh("lscpu | grep -m1 'Model name' | sed 's/.*: *//'")
loadavg = sh("cut -d' ' -f1-3 /proc/loadavg")
print(f"machine: {cpu}, {os.cpu_count()} cores, load {loadavg} at the end; {reps} repetitions, "
      "median time (each repetition's in brackets)")
print()
print("500 x 400,000 (gen_lasso_synth 500 400000 0.05 100 42), lambda = 0.1 lambda_max, to a "
      "relative duality gap of 1e-4; 2 workers are 3 ranks\n")
print("| run | reached 1e-4 | passes | training s, median | rounds | round latency median (us) | last rel_gap |")
print("|---|---|---|---|---|---|---|")
labels = [("serial cyclic (`--mode serial`)", "serial"),
          ("static, 2 workers", "static"),
          ("dynamic (defaults: sets of 1024, 50 sweeps, `--rounds 1`), serial", "dyn_serial"),
          ("the same, 2 workers, `--round-depth 1`", "dyn_d1"),
          ("the same, `--round-depth 2`", "dyn_d2"),
          ("the same, `--round-depth 4`", "dyn_d4"),
          ("dynamic, `--rounds 7`, 2 workers, `--round-depth 1`", "dyn7_d1"),
          ("the same, `--round-depth 2`", "dyn7_d2"),
          ("the same, `--round-depth 4`", "dyn7_d4"),
          ("Jacobi (STRADS), U 64, `--corr-threshold 0.1`, 2 workers, `--round-depth 1`", "jacobi"),
          ("the same, `--round-depth 2`", "jacobi_d2"),
          ("the same, `--round-depth 4`", "jacobi_d4"),
          ("Shotgun: the same unfiltered, `--corr-threshold 1`", "shotgun")]
for label, name in labels:
    print(row(label, name, 1e-4))
if base_passes:
    runs = [load(f"base_{r}") for r in range(1, reps + 1)]
    times = [sum(p["time_s"] for p in x["per_pass"]) for x in runs if x]
    print(f"| worker-side sampler (`{base}`), 2 workers | yes, after {base_passes} passes "
          f"(bench/lasso_gap.py) | {base_passes} | {statistics.median(times):.3f} "
          f"({', '.join(f'{t:.2f}' for t in times)}) | | | |")
print()
if load("log_newton_1"):
    print("dna, class 3 against the rest, `--loss logistic --lambda 5e-3`, to a relative gap of "
          "1e-7, 2 workers\n")
    print("| run | reached 1e-7 | passes | training s, median | rounds | round latency median (us) | last rel_gap |")
    print("|---|---|---|---|---|---|---|")
    for label, name in [("bounded Newton step (defaults: U 64, `--corr-threshold 0.1`)", "log_newton"),
                        ("the same with `--line-search 3`", "log_search"),
                        ("unfiltered, `--corr-threshold 1`", "log_shotgun"),
                        ("unfiltered with `--line-search 3`, U 16", "log_shotgun_search"),
                        ("static: sets in turn", "log_static")]:
        print(row(label, name, 1e-7))
PY
