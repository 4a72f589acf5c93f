#!/usr/bin/env bash
# mf_repeat.sh: two identical runs with P = 2 workers must export identical
# factors: the schedule is static and every block's updates happen in a
# fixed order, whatever the timing of the messages.
. "$(dirname "$0")/common.sh"

flags=(mf --data "synth:users=800,items=400,ratings=30000,seed=3" --test-fraction 0.1 --rank 8
       --passes 3 --depth 4 -q)
echo "flags: ${flags[*]}"
for run in 1 2; do
  mpi 3 "$STRATA" "${flags[@]}" --metrics-out run$run.json --model-out run$run >run$run.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log run$run.log
  expect_rc 0 "$rc" "run $run"
done
for f in W.f32 H.f32 bu.f32 bi.f32; do
  [ -s run1/$f ] || fail "run1/$f missing or empty"
  cmp run1/$f run2/$f || fail "$f differs between two identical P = 2 runs"
  ok "$f identical ($(stat -c %s run1/$f) bytes)"
done
a=$(json run1.json '[m["train_rmse"], m["test_rmse"]]')
b=$(json run2.json '[m["train_rmse"], m["test_rmse"]]')
echo "[train_rmse, test_rmse]: run 1 $a, run 2 $b"
[ "$a" = "$b" ] || fail "objectives differ"
echo PASS
