#!/usr/bin/env bash
# mf_serial.sh: one worker in scheduled mode (coordinator + 1 worker) runs
# the same load, schedule and compute path as --mode serial, so the two must
# agree bit for bit: exported factors and biases, and every RMSE string in
# the metrics.
. "$(dirname "$0")/common.sh"

flags=(mf --data "synth:users=600,items=300,ratings=20000,seed=7" --test-fraction 0.1 --rank 8
       --passes 3 --depth 4 --seed 11 -q)
echo "flags: ${flags[*]}"
mpi 2 "$STRATA" "${flags[@]}" --metrics-out sched.json --model-out sched >sched.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log sched.log
expect_rc 0 "$rc" "scheduled, P = 1"
timeout "$RUN_LIMIT" "$STRATA" "${flags[@]}" --mode serial --metrics-out serial.json \
  --model-out serial >serial.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log serial.log
expect_rc 0 "$rc" "serial"

for f in W.f32 H.f32 bu.f32 bi.f32; do
  [ -s sched/$f ] || fail "sched/$f missing or empty"
  cmp sched/$f serial/$f || fail "$f differs between scheduled P = 1 and serial"
  ok "$f identical ($(stat -c %s sched/$f) bytes)"
done
a=$(grep -o '"t[a-z]*_rmse": *[^,}]*' sched.json)
b=$(grep -o '"t[a-z]*_rmse": *[^,}]*' serial.json)
echo "scheduled: $(echo "$a" | tr "\n" " ")"
echo "serial:    $(echo "$b" | tr "\n" " ")"
[ -n "$a" ] || fail "no RMSE in the metrics"
[ "$(echo "$a" | grep -c test_rmse)" -ge 4 ] || fail "test_rmse missing (need the last and 3 passes)"
[ "$a" = "$b" ] || fail "RMSE strings differ"
ok "train_rmse/test_rmse strings identical"
echo PASS
