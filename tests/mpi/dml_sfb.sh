#!/usr/bin/env bash
# dml_sfb.sh: strata dml, a sufficient-factor app, in its three kinds of
# run on a small synthetic set. With --mode sfb, --staleness 0 and full
# broadcast every replica applies the same factors in the same order, so
# 2 workers with --minibatch K export the same L, byte for byte, as
# --mode serial with --minibatch 2K (the pairs are drawn independently of
# P, and a short last minibatch leaves worker 1 fewer pairs). --mode bsp
# takes the same steps through the parameter-server table, whose deltas
# round differently: its train_loss must agree within 1%.
. "$(dirname "$0")/common.sh"

flags=(dml --data "synth:classes=4,features=100,nnz=10,samples=1000,test=300,seed=3"
       --pairs 2015 --test-pairs 500 --latent 8 --passes 5 --seed 9 -q)
echo "flags: ${flags[*]}"
timeout "$RUN_LIMIT" "$STRATA" "${flags[@]}" --mode serial --minibatch 20 \
  --metrics-out serial.json --model-out serial >serial.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log serial.log
expect_rc 0 "$rc" "serial, --minibatch 20"
mpi 3 "$STRATA" "${flags[@]}" --mode sfb --staleness 0 --minibatch 10 \
  --metrics-out sfb.json --model-out sfb >sfb.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log sfb.log
expect_rc 0 "$rc" "sfb, 2 workers, --minibatch 10"
mpi 3 "$STRATA" "${flags[@]}" --mode bsp --minibatch 10 --metrics-out bsp.json >bsp.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log bsp.log
expect_rc 0 "$rc" "bsp, 2 workers, --minibatch 10"

w=$(json sfb.json 'm["workers"]')
[ "$w" = 2 ] || fail "sfb ran with $w workers"
for f in L.f32 meta.json; do
  [ -s sfb/$f ] || fail "sfb/$f missing or empty"
  cmp sfb/$f serial/$f || fail "$f differs between sfb (2 x 10) and serial (20)"
  ok "$f identical ($(stat -c %s sfb/$f) bytes)"
done
[ "$(stat -c %s sfb/L.f32)" = $((100 * 8 * 4)) ] || fail "L.f32 is not 100 rows of 8 floats"
[ "$(json sfb/meta.json 'm["format"]')" = strata-dml-1 ] || fail "meta.json format"

s=$(json sfb.json 'm["per_pass"][-1]["train_loss"]')
s1=$(json sfb.json 'm["per_pass"][0]["train_loss"]')
b=$(json bsp.json 'm["per_pass"][-1]["train_loss"]')
echo "train_loss after the last pass: sfb $s (pass 1: $s1), bsp $b"
python3 -c 'import sys
s, s1, b = map(float, sys.argv[1:])
sys.exit(not (s < s1 and abs(b - s) <= 0.01 * s))' "$s" "$s1" "$b" || fail "train_loss: sfb must fall over the passes and bsp agree within 1%"
ok "sfb's train_loss falls, bsp's is within 1% of it"
echo PASS
