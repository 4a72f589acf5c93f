#!/usr/bin/env bash
# mf_strata_invariant.sh: with the blocking fixed (--strata 4), the tasks of
# one sub-epoch touch disjoint rows and columns, so the number of workers
# that share them must not change a single bit of the model: --mode serial,
# P = 2 and P = 4 export identical factors and biases.
. "$(dirname "$0")/common.sh"

flags=(mf --data "synth:users=700,items=350,ratings=25000,seed=9" --test-fraction 0.1 --rank 8
       --passes 3 --depth 3 --strata 4 -q)
echo "flags: ${flags[*]}"
timeout "$RUN_LIMIT" "$STRATA" "${flags[@]}" --mode serial --metrics-out serial.json \
  --model-out serial >serial.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log serial.log
expect_rc 0 "$rc" "serial, B = 4"
for P in 2 4; do
  mpi $((P + 1)) "$STRATA" "${flags[@]}" --metrics-out p$P.json --model-out p$P >p$P.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log p$P.log
  expect_rc 0 "$rc" "P = $P, B = 4"
  [ "$(json p$P.json '[m["workers"], m["strata"]]')" = "[$P, 4]" ] || fail "workers/strata in p$P.json"
  for f in W.f32 H.f32 bu.f32 bi.f32; do
    [ -s serial/$f ] || fail "serial/$f missing or empty"
    cmp serial/$f p$P/$f || fail "$f differs between serial and P = $P at B = 4"
  done
  ok "P = $P: W, H, bu, bi identical to serial"
done
for r in serial p2 p4; do echo "$r [train_rmse, test_rmse]: $(json $r.json '[m["train_rmse"], m["test_rmse"]]')"; done
echo PASS
