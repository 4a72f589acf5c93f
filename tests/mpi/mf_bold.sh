#!/usr/bin/env bash
# mf_bold.sh NP MODE LAG [flags...]: the bold driver (--update sgd --lr-schedule
# bold; NP 0: --mode serial without mpiexec). The metrics' per-pass "lr" must
# follow the rule from the reported training RMSE, with the engine's lag L
# (2; ssp/essp 2 plus the passes s clocks span): the first L + 1 passes run
# at --lr, then pass k runs at lr(k-1) x 1.05 when train_rmse fell from
# pass k-L-1 to pass k-L, x 0.5 when it rose. --lr-schedule bold without
# --update sgd is a usage error (exit 2).
. "$(dirname "$0")/common.sh"

NP=$1 MODE=$2 LAG=$3
shift 3
flags=(mf --mode "$MODE" --data "synth:users=500,items=300,ratings=30000,seed=5" --test-fraction 0.1
       --rank 8 --passes 14 --update sgd --lr-schedule bold --lr 0.08 -q --metrics-out m.json "$@")
run() {
  if [ "$NP" = 0 ]; then timeout "$RUN_LIMIT" "$STRATA" "$@"; else mpi "$NP" "$STRATA" "$@"; fi
}
echo "np $NP: ${flags[*]}"
run "${flags[@]}" >out.txt 2>err.txt
rc=$?; [ "$rc" = 0 ] || show_log err.txt
expect_rc 0 "$rc" "bold driver run"
python3 - m.json "$LAG" <<'PY' || fail "the rates do not follow the bold driver"
import json, sys
m = json.load(open(sys.argv[1])); L = int(sys.argv[2])
lr = [p["lr"] for p in m["per_pass"]]
tr = [p["train_rmse"] for p in m["per_pass"]]
print("lr:", " ".join("%.5g" % x for x in lr))
print("train_rmse:", " ".join("%.5f" % x for x in tr))
assert m["lr_schedule"] == "bold", m["lr_schedule"]
for k, x in enumerate(lr):
    if k <= L:
        want = 0.08
    else:
        want = lr[k - 1] * (1.05 if tr[k - L] < tr[k - L - 1] else 0.5)
    # The JSON keeps 9 significant digits.
    assert abs(x - want) <= 1e-6 * want, (k, x, want)
assert any(b != a for a, b in zip(lr, lr[1:])), "the rate never moved"
print("ok: every pass's rate follows the rule, lag", L)
PY
ok "rates follow the bold driver"

run mf --mode "$MODE" --data "synth:users=50,items=30,ratings=300" --passes 1 --lr-schedule bold \
  >usage.out 2>usage.err
rc=$?
expect_rc 2 "$rc" "--lr-schedule bold with AdaGrad"
grep -q -- "--lr-schedule bold adapts plain SGD's rate: it needs --update sgd" usage.err ||
  { show_log usage.err; fail "no clear usage message"; }
echo PASS
