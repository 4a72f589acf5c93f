#!/usr/bin/env bash
# lasso.sh CASE: strata-lasso ($STRATA_LASSO) checked from the outside.
#   diabetes   the diabetes table (../shared/data/lasso-diabetes), standardised
#              (population sd) with y centred, at lambda = 1 and lambda =
#              lambda_max / 100: the final objective (exact, from the exported
#              coefficients) agrees within 1e-6 relative with an independent
#              solver's, in serial, scheduled static, scheduled dynamic, bsp,
#              ssp and async (2 workers), and along a warm-started path;
#              lambda_max too; a resumed run exports what a straight one does; the
#              dynamic schedule's Jacobi steps unfiltered with a set of all 10
#              features diverge (exit 3, with the hint) where the filtered ones do
#              not; the table written as svmlight gives the same objective.
#   diverge    a small synthetic set where the static schedule's 2 workers
#              diverge at the fixed damping 1/P without a NaN: exit 3 from the
#              engine's rise check, naming the objective; with the damping
#              that adapts to the objective, the run converges near serial's.
#   rounds     the dynamic schedule and the logistic loss on rounds: 2 workers with
#              2 rounds in flight whose pushes are too large to go eagerly; diabetes at
#              lambda = 1 stops on --tol 1e-9 ("tolerance") within 1e-6 of the
#              reference, with the same coefficients bit for bit in serial and
#              with 2 workers (2 shards), also at --round-depth 3 and in Jacobi
#              steps; at lambda_max / 100 the defaults are within 1e-6 after 500
#              passes; --tol stops the static schedule too; dna as a binary
#              problem (class 3 against the rest) with --loss logistic agrees with
#              LIBLINEAR's objective (tests/mpi/lasso_logistic_reference.py) within
#              1e-6, serial and 2 workers, dynamic and static; a logistic run with
#              the line search resumed from a checkpoint exports what a straight
#              one does.
#   bad_input  a missing file, a malformed line, a wrong column count, a NaN,
#              an unknown flag, --lambda with --lambda-ratio, and a synth
#              spec too large for memory (under ulimit -v, with --mem-limit,
#              serially), a label other than 1 and -1 for the logistic loss
#              and --standardize with it: one error line naming the problem,
#              the same exit code on all 3 ranks.
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
          dynamic) args=(--mode scheduled --schedule dynamic --tol 1e-9 --passes 500) ;;
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
    # 40 passes straight (scheduled, dynamic on rounds, two in flight: beta
    # and the priorities are in the coordinator block, the draws seeded by
    # the round).
    DYN=(--schedule dynamic --set-size 2 --rounds 5 --corr-threshold 0.5 --lambda-ratio 0.01
         --round-depth 2)
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
    timeout "$RUN_LIMIT" "$STRATA_LASSO" --mode serial --schedule dynamic --set-sweeps 0 \
      --set-size 10 --rounds 10 --corr-threshold 1 --lambda-ratio 0.01 --passes 200 "${COMMON[@]}" \
      >div.out 2>div.err
    expect_rc 3 $? "dynamic, set size 10, no correlation filter"
    grep -q 'diverged at pass .*lower --set-size' div.err || { cat div.err; fail "no diverged message with its hint"; }
    ok "$(cat div.err)"
    timeout "$RUN_LIMIT" "$STRATA_LASSO" --mode serial --schedule dynamic --set-sweeps 0 \
      --set-size 10 --rounds 10 --corr-threshold 0.3 --lambda-ratio 0.01 --passes 200 "${COMMON[@]}" \
      >conv.out 2>&1
    expect_rc 0 $? "dynamic, set size 10, correlation filter 0.3"
    ;;

  rounds)
    # Two rounds in flight whose full rounds push 16 KB a worker, more than
    # MPI sends eagerly: the coordinator takes the pushes while it sends the
    # next step (a worker finishes sending only once the push is received).
    mpi 3 "$STRATA_LASSO" --schedule dynamic --data synth:n=200,p=2000,nonzeros=20,seed=3 \
      --round-depth 2 --tol 1e-6 --passes 50 -q --metrics-out big.json >big.out 2>&1
    expect_rc 0 $? "2 workers, 2 rounds in flight, pushes of 16 KB"
    [ "$(json big.json "m['stop_reason']")" = tolerance ] || fail "the 16 KB run did not converge"
    ok "2 rounds in flight with pushes larger than an eager send: converged"

    DATA=${STRATA_SHARED_DATA:-}/lasso-diabetes/diabetes.tab.txt
    if [ ! -f "$DATA" ]; then
      echo "skip: $DATA is absent (the shared data sets are not here)"
      exit 77
    fi
    # tests/mpi/lasso_reference.py (see the diabetes case)
    REF1=1533.7687169625883 REFR=1482.111859338384
    COMMON=(--data "$DATA" --standardize -q)
    # serial|NP NAME ARGS...: one run, its metrics in NAME.json and model in m_NAME
    run() {
      local np=$1 name=$2
      shift 2
      if [ "$np" = serial ]; then
        timeout "$RUN_LIMIT" "$STRATA_LASSO" --mode serial "$@" --model-out "m_$name" \
          --metrics-out "$name.json" >"$name.out" 2>&1
      else
        mpi "$np" "$STRATA_LASSO" "$@" --model-out "m_$name" --metrics-out "$name.json" >"$name.out" 2>&1
      fi || { show_log "$name.out"; fail "$name run"; }
    }
    # stopped NAME REF: stop_reason "tolerance", the final objective and the
    # last pass's within 1e-6 of REF, rounds pulled (one python3 a run: its
    # start is most of a check's time on a loaded machine)
    stopped() {
      python3 - "$1" "$2" <<'PY' || fail "$1: see above"
import json, sys
name, ref = sys.argv[1], float(sys.argv[2])
m = json.load(open(name + ".json"))
r, last = m["rounds"], m["per_pass"][-1]
print(f"{name}: stop_reason {m['stop_reason']} after {m['passes']} passes, {r['count']} rounds "
      f"(latency median {r['latency_us_median']} us); final objective {m['final_objective']!r}, "
      f"rel_gap {last['rel_gap']}")
bad = [w for w, ok in [("it did not stop on --tol", m["stop_reason"] == "tolerance"),
                       ("final objective", abs(m["final_objective"] / ref - 1) <= 1e-6),
                       ("last pass's objective", abs(last["objective"] / ref - 1) <= 1e-6),
                       ("no rounds", r["count"] > 0)] if not ok]
print(f"FAIL: {name}: {', '.join(bad)} (reference {ref!r})" if bad else
      f"ok: {name}: stopped on --tol within 1e-6 of {ref!r}")
sys.exit(1 if bad else 0)
PY
    }
    TOL=(--schedule dynamic --lambda 1 --tol 1e-9 --passes 100000 "${COMMON[@]}")
    run serial dyn1 "${TOL[@]}" --strata 2
    stopped dyn1 $REF1
    run 3 dyn2 "${TOL[@]}"
    stopped dyn2 $REF1
    cmp m_dyn1/coef.txt m_dyn2/coef.txt || fail "serial and 2 workers (2 shards) differ"
    ok "serial and 2 workers: the same coef.txt bit for bit"
    run serial depth3 "${TOL[@]}" --round-depth 3
    stopped depth3 $REF1
    run serial jacobi "${TOL[@]}" --set-sweeps 0
    stopped jacobi $REF1

    # lambda_max / 100 with the dynamic schedule's defaults: 500 passes
    run serial ratio --schedule dynamic --lambda-ratio 0.01 --passes 500 "${COMMON[@]}"
    got=$(json ratio.json "m['final_objective']")
    echo "dynamic defaults, lambda_max / 100, 500 passes: final objective $got, reference $REFR"
    within "$got" $REFR || fail "dynamic defaults: $got is not within 1e-6 of $REFR"
    ok "dynamic defaults, lambda_max / 100: within 1e-6 after 500 passes"

    # --tol on the ring's schedule: its gap from row block 0's residual
    run serial static --lambda 1 --tol 1e-6 --passes 5000 "${COMMON[@]}"
    json static.json "m['stop_reason'] == 'tolerance' and m['per_pass'][-1]['rel_gap'] <= 1e-6 and m['passes'] < 5000 and abs(m['final_objective'] / $REF1 - 1) <= 1e-6" |
      grep -q true || { show_log static.out; fail "static: --tol 1e-6 did not stop it within 1e-6"; }
    ok "static: stopped on --tol 1e-6 within 1e-6 of the reference"

    DNA=${STRATA_SHARED_DATA:-}/libsvm-dna/dna.scale
    if [ ! -f "$DNA" ]; then
      echo "skip: $DNA is absent: the logistic loss is not checked"
      exit 0
    fi
    # From tests/mpi/lasso_logistic_reference.py (LIBLINEAR 2.3.0, Debian's
    # liblinear-tools 2.3.0+dfsg-5: liblinear-train -s 6 -e 1e-8 -c 0.1 -B -1,
    # F computed from its model): class 3 against the rest, lambda 5e-3,
    # N 2000, 68 nonzeros.
    REFL=0.29600071521124016
    awk '{ $1 = ($1 == 3) ? "+1" : "-1"; print }' "$DNA" >dna3.svm
    LOG=(--loss logistic --data dna3.svm --lambda 5e-3 --tol 1e-7 --passes 5000 -q)
    run serial log1 "${LOG[@]}" --schedule dynamic --strata 2
    stopped log1 $REFL
    run 3 log2 "${LOG[@]}" --schedule dynamic
    stopped log2 $REFL
    cmp m_log1/coef.txt m_log2/coef.txt || fail "logistic: serial and 2 workers (2 shards) differ"
    ok "logistic: serial and 2 workers, the same coef.txt bit for bit"
    run serial logst "${LOG[@]}" --schedule static
    stopped logst $REFL

    # The line search's direction is in the coordinator's state between two
    # rounds of a pass, never across a checkpoint.
    LS=(--loss logistic --data dna3.svm --lambda 5e-3 --schedule dynamic --line-search 3 -q)
    run serial lsfull "${LS[@]}" --passes 30
    run serial lsck "${LS[@]}" --passes 15 --checkpoint ck --checkpoint-every 5
    run serial lsres "${LS[@]}" --passes 30 --resume ck
    cmp m_lsfull/coef.txt m_lsres/coef.txt || fail "logistic: the resumed run's coefficients differ"
    ok "logistic with the line search, resumed from pass 15: the same coef.txt as 30 passes"
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
    printf '1 1:2\n3 1:4\n' >labels.svm
    check 1 "example 2 has the label 3; --loss logistic takes 1 and -1" --loss logistic \
      --data labels.svm
    check 2 "--standardize centres y: it is for --loss squared" --loss logistic --standardize
    ;;
  *) fail "unknown case '$CASE'" ;;
esac
