#!/usr/bin/env bash
# mf_converge.sh: P = 3 workers (4 ranks on an oversubscribed machine) run to
# the end and the training RMSE of the last pass is below the first's.
. "$(dirname "$0")/common.sh"

flags=(mf --data "synth:users=900,items=450,ratings=40000,seed=5" --test-fraction 0.1 --rank 8
       --passes 5 --depth 4 -q)
echo "flags: ${flags[*]}"
mpi 4 "$STRATA" "${flags[@]}" --metrics-out m.json --model-out model >run.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log run.log
expect_rc 0 "$rc" "P = 3"
w=$(json m.json '[m["workers"], m["strata"], len(m["per_pass"])]')
echo "[workers, strata, passes]: $w"
[ "$w" = "[3, 3, 5]" ] || fail "expected [3, 3, 5]"
tr=$(json m.json '[p["train_rmse"] for p in m["per_pass"]]')
te=$(json m.json '[p["test_rmse"] for p in m["per_pass"]]')
echo "train_rmse per pass: $tr"
echo "test_rmse per pass:  $te"
python3 -c 'import json, sys, math
t = json.loads(sys.argv[1]); e = json.loads(sys.argv[2])
assert all(x is not None and math.isfinite(x) for x in t + e), "non-finite RMSE"
assert t[-1] < t[0], "train_rmse did not fall: %r" % t
assert e[-1] < e[0], "test_rmse did not fall: %r" % e' "$tr" "$te" || fail "no convergence"
ok "train_rmse $(json m.json 'm["per_pass"][0]["train_rmse"]') -> $(json m.json 'm["train_rmse"]')"
for f in W.f32 H.f32; do [ -s model/$f ] || fail "model/$f missing"; done
echo PASS
