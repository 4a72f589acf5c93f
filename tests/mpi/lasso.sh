#!/usr/bin/env bash
# lasso.sh CASE: strata-lasso ($STRATA_LASSO) checked from the outside.
#   diabetes   the diabetes table (../shared/data/lasso-diabetes), standardised
#              (population sd) with y centred, at lambda = 1 and lambda =
#              lambda_max / 100: the final objective (exact, from the exported
#              coefficients) agrees within 1e-6 relative with an independent
#              solver's, in serial, scheduled static, scheduled dynamic, bsp,
#              ssp and async (2 workers), and along a warm-started path;
#              lambda_max too; a resumed run exports what a straight one does; the
#              dynamic schedule unfiltered with a set of all 10 features
#              diverges (exit 3, with the hint) where the filtered one does not;
#              the table written as svmlight gives the same objective.
#   diverge    a small synthetic set where the static schedule's 2 workers
#              diverge at the fixed damping 1/P without a NaN: exit 3 from the
#              engine's rise check, naming the objective; with the damping
#              that adapts to the objective, the run converges near serial's.
#   bad_input  a missing file, a malformed line, a wrong column count, a NaN,
#              an unknown flag, --lambda with --lambda-ratio, and a synth
#              spec too large for memory (under ulimit -v, with --mem-limit,
#              serially): one error line naming the problem, the same exit
#              code on all 3 ranks.
. "$(dirname "$0")/common.sh"

: "${STRATA_LASSO:?STRATA_LASSO (path of strata-lasso) must be set}"
CASE=$1

# within A B: |A / B - 1| <= 1e-6
within() {
  python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a / b - 1) <= 1e-6 else 1)' "$1" "$2"
}

case $CASE in
  diabetes)
    DATA=${STRATA_SHARED_DATA:-}/lasso-diabetes/diabetes.tab.txt
    if [ ! -f "$DATA" ]; then
      echo "skip: $DATA is absent (the shared data sets are not here)"
      exit 77
    fi
    # From tests/mpi/lasso_reference.py DIABETES (FISTA with restart on the
    # Gram form, then an exact active-set solve checked by KKT; pure Python):
    #   lambda_max 45.160030020462919
    #   lambda 1: F 1533.7687169625883 (7 nonzeros)
    #   lambda = lambda_max / 100 = 0.45160030020462921: F 1482.111859338384 (8 nonzeros)
    LMAX=45.160030020462919
    declare -A REF=([1]=1533.7687169625883 [ratio]=1482.111859338384)
    declare -A LAM=([1]="--lambda 1" [ratio]="--lambda-ratio 0.01")
    COMMON=(--data "$DATA" --standardize -q)
    for l in 1 ratio; do
      for m in serial static dynamic bsp ssp async; do
        np=3
        case $m in
          serial) args=(--mode serial --passes 300); np=1 ;;
          static) args=(--mode scheduled --passes 300) ;;
          dynamic) args=(--mode scheduled --schedule dynamic --set-size 2 --rounds 5
                         --corr-threshold 0.5 --passes 500) ;;
          # bsp updates the two workers' slices at once (block Jacobi):
          # --sweeps makes each slice's step nearly exact, which the
          # correlated columns need.
          bsp) args=(--mode bsp --sweeps 10 --passes 300) ;;
          ssp) args=(--mode ssp --passes 300) ;;
          async) args=(--mode async --passes 400) ;;
        esac
        # shellcheck disable=SC2206
        mpi $np "$STRATA_LASSO" "${args[@]}" ${LAM[$l]} "${COMMON[@]}" --model-out "m_${m}_$l" \
          --metrics-out "${m}_$l.json" >"${m}_$l.out" 2>&1 || { show_log "${m}_$l.out"; fail "$m lambda $l run"; }
        got=$(json "${m}_$l.json" "m['final_objective']")
        echo "$m, lambda $l: final objective $got, reference ${REF[$l]}"
        within "$got" "${REF[$l]}" || fail "$m lambda $l: final objective $got is not within 1e-6 of ${REF[$l]}"
        ok "$m lambda $l: within 1e-6 of the reference"
        [ -s "m_${m}_$l/coef.txt" ] || fail "$m lambda $l: no coef.txt"
      done
      got=$(json "serial_$l.json" "m['lambda_max']")
      within "$got" "$LMAX" || fail "lambda_max $got, reference $LMAX"
    done
    ok "lambda_max $got matches the reference"

    # The same table as a LIBSVM/svmlight file (zeros left out, 1-based
    # indices) gives the same objective through the svmlight reader.
    python3 - "$DATA" <<'PY' >diabetes.svm
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()][1:]
for r in rows:
    feats = " ".join(f"{j + 1}:{v}" for j, v in enumerate(r[:-1]) if float(v) != 0)
    print(f"{r[-1]} {feats}")
PY
    timeout "$RUN_LIMIT" "$STRATA_LASSO" --mode serial --passes 300 --lambda 1 --data diabetes.svm \
      --standardize -q --model-out m_svm --metrics-out svm.json >svm.out 2>&1 ||
      { show_log svm.out; fail "svmlight run"; }
    got=$(json svm.json "m['final_objective']")
    within "$got" "${REF[1]}" || fail "svmlight: final objective $got is not within 1e-6 of ${REF[1]}"
    ok "svmlight input: final objective $got within 1e-6 of the reference"

    # (The metrics write the per-pass controls to 7 digits.)
    # A warm-started path of 6 lambdas down to lambda_max / 100, 40 passes
    # each: the control "lambda" falls stage by stage and ends at the target.
    mpi 3 "$STRATA_LASSO" --mode scheduled --path 6 --path-passes 40 --passes 400 \
      --lambda-ratio 0.01 "${COMMON[@]}" --model-out m_path --metrics-out path.json >path.out 2>&1 ||
      { show_log path.out; fail "path run"; }
    got=$(json path.json "m['final_objective']")
    echo "path: final objective $got; lambdas $(json path.json "sorted(set(round(p['lambda'], 6) for p in m['per_pass']), reverse=True)")"
    within "$got" "${REF[ratio]}" || fail "path: final objective $got is not within 1e-6 of ${REF[ratio]}"
    json path.json "abs(m['per_pass'][0]['lambda'] / m['lambda_max'] - 1) < 1e-6 and abs(m['per_pass'][-1]['lambda'] / m['lambda'] - 1) < 1e-6 and all(a['lambda'] >= b['lambda'] for a, b in zip(m['per_pass'], m['per_pass'][1:]))" | grep -q true ||
      fail "path: the per-pass lambda does not fall from lambda_max to lambda"
    ok "path: lambda falls from lambda_max to lambda; final objective within 1e-6"

    # A checkpoint after 20 passes, resumed to 40: the same coefficients as
    # 40 passes straight (scheduled, dynamic: the priorities are in the
    # resident blocks, the draws seeded by the pass).
    DYN=(--schedule dynamic --set-size 2 --rounds 5 --corr-threshold 0.5 --lambda-ratio 0.01)
    mpi 3 "$STRATA_LASSO" "${DYN[@]}" "${COMMON[@]}" --passes 40 --model-out m_full >full.out 2>&1 ||
      { show_log full.out; fail "40-pass run"; }
    mpi 3 "$STRATA_LASSO" "${DYN[@]}" "${COMMON[@]}" --passes 20 --checkpoint ck >ck.out 2>&1 ||
      { show_log ck.out; fail "checkpointed run"; }
    mpi 3 "$STRATA_LASSO" "${DYN[@]}" "${COMMON[@]}" --passes 40 --resume ck --model-out m_res \
      >res.out 2>&1 || { show_log res.out; fail "resumed run"; }
    cmp m_full/coef.txt m_res/coef.txt || fail "the resumed run's coefficients differ"
    ok "resumed from pass 20: the same coef.txt as 40 passes straight"

    # Jacobi over all 10 correlated features at once diverges; the filter
    # keeps the dynamic schedule stable.
    timeout "$RUN_LIMIT" "$STRATA_LASSO" --mode serial --schedule dynamic --set-size 10 --rounds 10 \
      --corr-threshold 1 --lambda-ratio 0.01 --passes 200 "${COMMON[@]}" >div.out 2>div.err
    expect_rc 3 $? "dynamic, set size 10, no correlation filter"
    grep -q 'diverged at pass .*lower --set-size' div.err || { cat div.err; fail "no diverged message with its hint"; }
    ok "$(cat div.err)"
    timeout "$RUN_LIMIT" "$STRATA_LASSO" --mode serial --schedule dynamic --set-size 10 --rounds 10 \
      --corr-threshold 0.5 --lambda-ratio 0.01 --passes 200 "${COMMON[@]}" >conv.out 2>&1
    expect_rc 0 $? "dynamic, set size 10, correlation filter 0.5"
    ;;

  diverge)
    # A small set on which the static schedule's 2 workers overshoot
    # together at the fixed damping 1/P: the objective falls to 0.052 by
    # pass 11, then climbs, every value finite (0.72 at pass 36, 744 at pass
    # 200). The engine's rise check ends such a run (exit 3, nothing
    # exported); the damping that adapts to the objective converges.
    D=(--data synth:n=50,p=40000,nonzeros=10,noise=0.05,seed=8 -q)
    mpi 3 "$STRATA_LASSO" "${D[@]}" --damping 0.5 --passes 300 --model-out m_fixed \
      >fixed.out 2>fixed.err
    expect_rc 3 $? "static, 2 workers, --damping 0.5"
    expect_one_error fixed.err "strata-lasso: " "objective rose from"
    N='[0-9.e+-]+'
    grep -Eq "diverged at pass [0-9]+: objective rose from $N \\(pass [0-9]+\\) to $N; lower --damping" \
      fixed.err || fail "the diverged message names no pass, best or hint: $(cat fixed.err)"
    [ ! -e m_fixed ] || fail "a diverged run exported its model"
    ok "$(cat fixed.err)"
    timeout "$RUN_LIMIT" "$STRATA_LASSO" --mode serial "${D[@]}" --passes 300 --model-out m_serial \
      --metrics-out serial.json >serial.out 2>&1 || { show_log serial.out; fail "serial run"; }
    mpi 3 "$STRATA_LASSO" "${D[@]}" --passes 300 --model-out m_auto --metrics-out auto.json \
      >auto.out 2>&1 || { show_log auto.out; fail "static, 2 workers, damping by the objective"; }
    python3 - serial.json auto.json <<'PY' || fail "the adapted damping did not converge"
import json, sys
s, a = (json.load(open(f)) for f in sys.argv[1:3])
F, G = s["final_objective"], a["final_objective"]
cuts = [(p["pass"] + 1, p["damping"]) for p in a["per_pass"]
        if p["pass"] and p["damping_since"] == p["pass"]]
print("serial %.10g, 2 workers %.10g (relative %.2g); damping 0.5, lowered at %s"
      % (F, G, G / F - 1, cuts))
sys.exit(not (cuts and abs(G / F - 1) < 1e-3))
PY
    ok "static, 2 workers: the damping lowered, the objective within 1e-3 of serial's"
    ;;

  bad_input)
    printf 'A\tB\tY\n1\t2\t3\n4\tx\t6\n' >malformed.tsv
    printf 'A\tB\tY\n1\t2\t3\n4\t6\n' >columns.tsv
    printf '1.5 1:2 3:4\n2 1:nan\n' >nan.svm
    check() { # WANT TEXT ARGS...
      local want=$1 text=$2
      shift 2
      mpi_wrapped 3 "$STRATA_LASSO" "$@" -q >bad.out 2>bad.err
      expect_rc "$want" $? "$*"
      expect_one_error bad.err "strata-lasso: " "$text"
      rank_codes 3 "$STRATA_LASSO" "$@" -q
      expect_rank_codes 3 "$want"
    }
    check 1 "missing.tsv: cannot open" --data missing.tsv
    check 1 "malformed.tsv:3: value 'x' is not a number" --data malformed.tsv
    check 1 "columns.tsv:3: 2 fields, but the header names 3 columns" --data columns.tsv
    check 1 "nan.svm:2: value 'nan' is not finite" --data nan.svm
    check 2 "unknown flag '--bogus'" --bogus 1
    check 2 "--lambda and --lambda-ratio exclude each other" --lambda 1 --lambda-ratio 0.1
    # A generator's size beyond the memory available is refused before
    # anything is allocated: under a 4 GiB address-space limit, and with
    # --mem-limit; and serially.
    TOO_BIG="--data 'synth:p=1e9': 500 x 1000000000 at density 0.05 needs about"
    # (AddressSanitizer's shadow memory does not fit under a ulimit -v.)
    if ! ldd "$STRATA_LASSO" 2>/dev/null | grep -q libasan; then
      RANKS_WRAP=(sh -c 'ulimit -v 4194304 && exec "$@"' sh)
      check 1 "$TOO_BIG" --data synth:p=1e9
      RANKS_WRAP=()
    fi
    check 1 "$TOO_BIG" --data synth:p=1e9 --mem-limit 2
    grep -q "this host has 2.0 GB available (--mem-limit)" bad.err || fail "the limit is not named"
    timeout "$RUN_LIMIT" "$STRATA_LASSO" --mode serial --data synth:p=1e9 -q >bad.out 2>bad.err
    expect_rc 1 $? "serial --data synth:p=1e9"
    expect_one_error bad.err "strata-lasso: " "$TOO_BIG"
    ;;
  *) fail "unknown case '$CASE'" ;;
esac
