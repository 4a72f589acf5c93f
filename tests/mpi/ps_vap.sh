#!/usr/bin/env bash
# ps_vap.sh: MovieLens 100K (GroupLens' ua split), 2 workers, 20 passes of
# plain SGD (--update sgd --lr 0.02: VAP bounds every float of a row, and
# AdaGrad's sums of squares change by far more than the bound), under
# --mode vap --value-bound 0.01 and under bsp: both exit 0, VAP's largest
# in-transit sum is within its bound with the enforcement on, and its test
# RMSE is within 0.01 of bsp's. Skips (77) without the shared data.
# The run waits for a round trip at nearly every delta: about 12 s on a
# quiet machine, several times that on a busy one (each run's limit is
# 120 s times STRATA_TEST_TIME_SCALE).
RUN_LIMIT=${RUN_LIMIT:-$((120 * ${STRATA_TEST_TIME_SCALE:-1}))}
. "$(dirname "$0")/common.sh"

ML=${STRATA_SHARED_DATA:-}/movielens-100k
if [ ! -f "$ML/ua.base" ] || [ ! -f "$ML/ua.test" ]; then
  echo "SKIP: ../shared/data/movielens-100k not found"
  exit 77
fi
args=(mf --data "$ML/ua.base" --test "$ML/ua.test" --update sgd --lr 0.02 --passes 20 -q)
mpi 3 "$STRATA" "${args[@]}" --mode bsp --metrics-out bsp.json >bsp.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log bsp.log
expect_rc 0 "$rc" "bsp"
mpi 3 "$STRATA" "${args[@]}" --mode vap --value-bound 0.01 --metrics-out vap.json >vap.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log vap.log
expect_rc 0 "$rc" "vap --value-bound 0.01"
python3 - <<'PY' || fail "vap against bsp"
import json
b, v = json.load(open("bsp.json")), json.load(open("vap.json"))
x = v["vap"]
print("bsp test_rmse %.4f; vap test_rmse %.4f (%.1f s a pass), bound %g, most in transit %.6g, "
      "%d early sends, %d deltas split" % (b["test_rmse"], v["test_rmse"], v["time_per_pass_s"],
                                           x["bound"], x["max_inflight"], x["flushes"], x["splits"]))
assert x["enforced"] and x["max_inflight"] <= x["bound"], x
assert abs(v["test_rmse"] - b["test_rmse"]) <= 0.01, (v["test_rmse"], b["test_rmse"])
PY
ok "vap within its bound and within 0.01 of bsp's test RMSE"
echo PASS
