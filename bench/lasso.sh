#!/usr/bin/env bash
# strata-lasso on the synthetic 500 x 400,000 problem of the SSP paper's
# Lasso experiment (density 0.05, unit-norm columns, 100 true nonzeros,
# noise 0.1) at lambda = 0.1 lambda_max:
#   - the optimum F* from a long serial run (cyclic descent to max_delta 0);
#   - serial cyclic descent's cost in ns per stored nonzero touched (time per
#     pass, the engine's median over passes 2..N, over the nonzeros its dots
#     and axpys read; for 2 workers, over the nonzeros both read);
#   - the time to an objective within 1e-4 relative of F* (training seconds
#     summed over the passes, load excluded) for serial, scheduled static and
#     dynamic (2 workers: the coordinator's rounds, with its defaults and in
#     STRADS's Jacobi steps, filtered), serial dynamic, and every
#     parameter-server mode (bsp, absp with two clocks a pass, ssp and essp
#     with staleness 1, async);
#   - the correlation filter on the diabetes table: the dynamic schedule's
#     Jacobi steps over a set of all 10 features diverge unfiltered and
#     converge filtered;
#   - with SSP_SVM set: the SSP paper's set as ../shared/tools/gen_lasso_synth.c
#     makes it (gen_lasso_synth 500 400000 0.05 100 42 synth; csc2svm synth
#     SSP_SVM), 300 passes at lambda = 0.1 lambda_max: serial, and the static
#     schedule's workers with the damping that follows the objective, with a
#     fixed 0.5 (1/P for 2 workers: diverges, exit 3) and a fixed 0.3.
# bench/lasso_rounds.sh measures the rounds against a relative duality gap.
# Prints a table; the runs' --metrics-out JSON stays in OUTDIR.
# Usage: bench/lasso.sh [OUTDIR=out/bench/lasso]
#   env: STRATA_LASSO (binary; build/strata-lasso), WORKERS (2), OPT_PASSES (1000),
#        SSP_SVM (the svmlight file above; unset: skipped)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
OUT=${1:-$root/out/bench/lasso}
BIN=${STRATA_LASSO:-$root/build/strata-lasso}
WORKERS=${WORKERS:-2}
OPT_PASSES=${OPT_PASSES:-1000}
DATA=synth:n=500,p=400000,density=0.05,nonzeros=100,noise=0.1,seed=1
DIABETES=${STRATA_SHARED_DATA:-$root/../shared/data}/lasso-diabetes/diabetes.tab.txt
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1}
mkdir -p "$OUT"
np=$((WORKERS + 1))
COMMON=(--data "$DATA" --lambda-ratio 0.1 -q)

run() { # NAME NP ARGS...: one run, its metrics in OUT/NAME.json
  local name=$1 n=$2
  shift 2
  echo "+ mpirun -np $n strata-lasso $* ${COMMON[*]}" >&2
  rm -f "$OUT/$name.json"
  # A run that diverges (exit 3) writes no metrics; the table says so.
  mpirun --oversubscribe -np "$n" "$BIN" "$@" "${COMMON[@]}" --metrics-out "$OUT/$name.json" \
    >"$OUT/$name.out" 2>&1 || echo "  exit $?: $(head -1 "$OUT/$name.out")" >&2
}

run optimum 1 --mode serial --passes "$OPT_PASSES" --model-out "$OUT/optimum"
run serial 1 --mode serial --passes 200
run static "$np" --mode scheduled --passes 300
# The coordinator's rounds: its defaults (sets of 1024, 50 Gauss-Seidel
# sweeps on the coordinator), and STRADS's Jacobi steps over filtered sets.
run dynamic "$np" --mode scheduled --schedule dynamic --passes 30
run dynamic_jacobi "$np" --mode scheduled --schedule dynamic --set-sweeps 0 --set-size 64 \
  --corr-threshold 0.1 --passes 300
run dynamic_serial 1 --mode serial --schedule dynamic --passes 30
run bsp "$np" --mode bsp --passes 300
run absp "$np" --mode absp --wpc 0.5 --passes 300
run ssp "$np" --mode ssp --passes 300
run essp "$np" --mode essp --passes 300
run async "$np" --mode async --passes 300

# The filter on correlated columns (diabetes): Jacobi over all 10 at once.
div=skipped conv=skipped
if [ -f "$DIABETES" ]; then
  d=(--mode serial --schedule dynamic --set-sweeps 0 --set-size 10 --rounds 10 --data "$DIABETES"
     --standardize --lambda-ratio 0.01 --passes 200 -q)
  set +e
  "$BIN" "${d[@]}" --corr-threshold 1 >"$OUT/div.out" 2>&1
  div="exit $?: $(grep -m1 diverged "$OUT/div.out" || tail -1 "$OUT/div.out")"
  "$BIN" "${d[@]}" --corr-threshold 0.3 --metrics-out "$OUT/conv.json" >"$OUT/conv.out" 2>&1
  conv="exit $?: objective $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["per_pass"][-1]["objective"])' "$OUT/conv.json" 2>/dev/null)"
  set -e
fi

python3 - "$OUT" "$div" "$conv" <<'PY'
import json, statistics, sys
out, div, conv = sys.argv[1:4]
opt = json.load(open(f"{out}/optimum.json"))
F = opt["final_objective"]
print(f"optimum F* = {F!r} (serial, {opt['passes']} passes; lambda = {opt['lambda']:.6g}, "
      f"lambda_max = {opt['lambda_max']:.6g}, {opt['final_nonzeros']} nonzeros)")
rows = []
for name in ["serial", "static", "dynamic", "dynamic_jacobi", "dynamic_serial",
             "bsp", "absp", "ssp", "essp", "async"]:
    try:
        m = json.load(open(f"{out}/{name}.json"))
    except OSError:
        print(f"{name}: no metrics (see {out}/{name}.out)")
        continue
    pp = m["per_pass"]
    t, hit = 0.0, None
    for p in pp:
        t += p["time_s"]
        if hit is None and p["objective"] <= F * (1 + 1e-4):
            hit = (p["pass"] + 1, t)
    touched = statistics.median(p["touched"] for p in pp[1:])
    tpp = m["time_per_pass_s"]
    rows.append((name, m["mode"], hit, tpp, touched, pp[-1]["objective"]))
base = rows[0][2][1] if rows and rows[0][0] == "serial" and rows[0][2] else None
print()
print(f"{'run':16} {'passes to 1e-4':>14} {'time to 1e-4 s':>14} {'vs serial':>9} "
      f"{'time/pass s':>11} {'touched/pass':>12} {'ns/touched':>10} {'last objective':>16}")
for name, mode, hit, tpp, touched, last in rows:
    hp = str(hit[0]) if hit else "not reached"
    ht = f"{hit[1]:.3f}" if hit else "-"
    ratio = f"{hit[1] / base:.2f}" if hit and base else "-"
    print(f"{name:16} {hp:>14} {ht:>14} {ratio:>9} {tpp:11.5f} {touched:12.0f} "
          f"{tpp / touched * 1e9:10.3f} {last:16.10g}")
print()
print(f"diabetes, dynamic, set size 10, unfiltered (--corr-threshold 1): {div}")
print(f"diabetes, dynamic, set size 10, --corr-threshold 0.3: {conv}")
PY

# The SSP paper's set (docs/lasso.md, "The damping follows the objective").
if [ -n "${SSP_SVM:-}" ]; then
  S=(--data "$SSP_SVM" --lambda-ratio 0.1 --passes 300 -q)
  ssp_run() { # NAME NP ARGS...
    local name=$1 n=$2 rc=0
    shift 2
    echo "+ mpirun -np $n strata-lasso $* ${S[*]}" >&2
    rm -rf "$OUT/$name.json" "$OUT/$name"
    mpirun --oversubscribe -np "$n" "$BIN" "$@" "${S[@]}" --model-out "$OUT/$name" \
      --metrics-out "$OUT/$name.json" >"$OUT/$name.out" 2>&1 || rc=$?
    echo "$name exit $rc: $(grep -m1 diverged "$OUT/$name.out" || true)" >>"$OUT/ssp_exits.txt"
  }
  rm -f "$OUT/ssp_exits.txt"
  ssp_run ssp_serial 1 --mode serial
  ssp_run ssp_static "$np" --mode scheduled
  ssp_run ssp_static_0.5 "$np" --mode scheduled --damping 0.5
  ssp_run ssp_static_0.3 "$np" --mode scheduled --damping 0.3
  python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
print()
print(open(f"{out}/ssp_exits.txt").read(), end="")
F = json.load(open(f"{out}/ssp_serial.json"))["final_objective"]
for name in ["ssp_serial", "ssp_static", "ssp_static_0.5", "ssp_static_0.3"]:
    try:
        m = json.load(open(f"{out}/{name}.json"))
    except OSError:
        print(f"{name:16} no metrics (diverged)")
        continue
    pp = m["per_pass"]
    cuts = [(p["pass"] + 1, p["damping"]) for p in pp
            if p["pass"] and p["damping_since"] == p["pass"]]
    print(f"{name:16} final objective {m['final_objective']:.10g} "
          f"({m['final_objective'] / F - 1:+.2g} of serial's); damping {pp[0]['damping']:g}, "
          f"lowered at {cuts}")
PY
fi
