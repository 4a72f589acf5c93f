#!/usr/bin/env bash
# rounds.sh: round runs (strata/round.h) through mpiexec.
#
#  - examples/gcd (greedy coordinate descent) with 6 shards: serial and 1, 2
#    and 3 workers export the same coefficients bit for bit, at
#    --round-depth 1 and 3 (the engine calls the app in one order whatever
#    the timing, and pull sees partials by data block);
#  - --tol stops the run with stop_reason "tolerance" before --passes, and
#    the metrics count the rounds and their latencies;
#  - a run checkpointed after 8 passes and resumed to 16 ends with a straight
#    run's coefficients;
#  - tests/apps/gsprobe (the Gauss-Southwell block rule) at depth 1 makes the
#    choices of a direct computation, serial and with 2 workers;
#  - a round run refuses a parameter-server mode, and a callback that fails
#    on the coordinator or on a worker ends every rank with one message and
#    exit code 1.
. "$(dirname "$0")/common.sh"
: "${STRATA_GSPROBE:?STRATA_GSPROBE must be set}"
GCD="$STRATA_EXAMPLES/gcd"

# gcd NAME WORKERS ARGS...: WORKERS 0 is serial.
gcd() {
  local name=$1 workers=$2
  shift 2
  local cmd=("$GCD" -B 6 --rows 600 --cols 24 -q --model-out "$name" --metrics-out "$name.json" "$@")
  if [ "$workers" = 0 ]; then
    timeout "$RUN_LIMIT" "${cmd[@]}" --mode serial >"$name.log" 2>&1
  else
    mpi $((workers + 1)) "${cmd[@]}" >"$name.log" 2>&1
  fi
  local rc=$?
  [ "$rc" = 0 ] || show_log "$name.log"
  expect_rc 0 "$rc" "gcd $name ($workers workers, $*)"
}

for d in 1 3; do
  gcd serial_d$d 0 --passes 30 --round-depth $d
  for w in 1 2 3; do
    gcd p${w}_d$d "$w" --passes 30 --round-depth $d
    cmp -s serial_d$d/coef.txt p${w}_d$d/coef.txt ||
      fail "depth $d: $w workers' coefficients differ from serial's"
  done
  ok "depth $d: serial and 1, 2, 3 workers export the same coefficients"
done

gcd tol 2 --passes 500 --tol 1e-4 --round-trace trace.jsonl
[ "$(json tol.json "m['stop_reason']")" = tolerance ] || fail "--tol: stop_reason $(json tol.json "m['stop_reason']")"
passes=$(json tol.json "m['passes']")
[ "$passes" -lt 500 ] || fail "--tol: ran all $passes passes"
json tol.json "m['rounds']['count'] > 0 and m['rounds']['latency_us_median'] > 0 and m['score'] <= 1e-4" |
  grep -qx true || fail "--tol: rounds or score: $(json tol.json "m['rounds']")"

python3 - tol.json trace.jsonl <<'PY' || fail "--round-trace: not one line per round"
import json, sys
m = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
assert len(lines) == m["rounds"]["count"], (len(lines), m["rounds"]["count"])
assert all(l["latency_us"] > 0 and l["bytes_to_workers"] > 0 for l in lines)
assert [l["round"] for l in lines] == sorted(l["round"] for l in lines)
PY
ok "--tol stops after $passes passes with stop_reason tolerance; --round-trace has every round"

# An output path that is no regular file is written in place: renaming a
# file over /dev/null would replace the device (the suite runs as root).
mkfifo trace.fifo
cat trace.fifo >fifo.jsonl &
reader=$!
mpi 3 "$GCD" -B 6 --rows 600 --cols 24 -q --passes 500 --tol 1e-4 --round-trace trace.fifo \
  --metrics-out /dev/null >special.log 2>&1
rc=$?
[ "$rc" = 0 ] || { kill "$reader" 2>/dev/null; show_log special.log; }
expect_rc 0 "$rc" "gcd with --round-trace FIFO --metrics-out /dev/null"
wait_limited "$reader" 10 >/dev/null || fail "the FIFO's reader got no end of file"
[ -c /dev/null ] || fail "--metrics-out /dev/null replaced the device: $(ls -l /dev/null)"
[ -p trace.fifo ] || fail "--round-trace replaced the FIFO"
[ "$(wc -l <fifo.jsonl)" = "$(wc -l <trace.jsonl)" ] ||
  fail "--round-trace through a FIFO: $(wc -l <fifo.jsonl) lines, a file got $(wc -l <trace.jsonl)"
ok "/dev/null stays the device and a FIFO gets the trace ($(wc -l <fifo.jsonl) rounds)"

gcd ck 2 --passes 8 --checkpoint ckpt --checkpoint-every 4
gcd resumed 2 --passes 16 --resume ckpt
gcd straight 0 --passes 16
cmp -s resumed/coef.txt straight/coef.txt || fail "resumed run's coefficients differ from a straight run's"
ok "a run resumed after 8 passes ends with a straight run's coefficients"

# probe NAME WORKERS ARGS...
probe() {
  local name=$1 workers=$2
  shift 2
  local cmd=("$STRATA_GSPROBE" -B 4 --passes 10 -q --model-out "$name" "$@")
  if [ "$workers" = 0 ]; then
    timeout "$RUN_LIMIT" "${cmd[@]}" --mode serial >"$name.log" 2>&1
  else
    mpi $((workers + 1)) "${cmd[@]}" >"$name.log" 2>&1
  fi
}
for w in 0 2; do
  probe gs$w "$w"
  rc=$?
  [ "$rc" = 0 ] || show_log gs$w.log
  expect_rc 0 "$rc" "gsprobe, $w workers"
  [ -s gs$w/choices.txt ] || fail "gsprobe: no choices"
  cmp -s gs$w/choices.txt gs$w/direct.txt || fail "gsprobe, $w workers: choices differ from the direct computation"
done
ok "the Gauss-Southwell choices of every round equal a direct computation's (serial, 2 workers)"

mpi 3 "$GCD" --mode ssp -q >bad_mode.log 2>&1
expect_rc 2 $? "gcd --mode ssp"
grep -Eq 'scheduled (and|or) serial' bad_mode.log || { show_log bad_mode.log; fail "no reason for refusing ssp"; }

for where in schedule:0:3 pull:0:4 push:1:5 apply:0:2; do
  probe fail_${where%%:*} 2 --fail-at "$where"
  rc=$?
  expect_rc 1 "$rc" "gsprobe --fail-at $where"
  n=$(grep -c 'fails at round' fail_${where%%:*}.log)
  [ "$n" = 1 ] || { show_log fail_${where%%:*}.log; fail "--fail-at $where: $n messages"; }
done
ok "a failing round callback ends every rank with one message"

# --tol in apps without rounds: the engine stops on the app's measure (mf:
# the relative change of the training RMSE; pagerank: the L1 change), the
# stopped pass is the run's last on every worker, and the model exported
# then is a straight run's of that many passes (bit for bit on the ring;
# bsp's sums land in arrival order, so there the training RMSE of the
# exported model's run is compared).
MFDATA=synth:users=400,items=300,ratings=30000,rank=4,noise=0.1,seed=5
for mode in scheduled bsp; do
  mpi 3 "$STRATA" mf --mode $mode --data $MFDATA --rank 8 --passes 300 --tol 2e-3 -q \
    --model-out mf_tol_$mode --metrics-out mf_tol_$mode.json >mf_tol_$mode.log 2>&1
  rc=$?
  [ "$rc" = 0 ] || show_log mf_tol_$mode.log
  expect_rc 0 "$rc" "mf --mode $mode --tol"
  [ "$(json mf_tol_$mode.json "m['stop_reason']")" = tolerance ] || fail "mf $mode: not stopped by --tol"
  n=$(json mf_tol_$mode.json "m['passes']")
  [ "$n" -lt 300 ] || fail "mf $mode --tol ran every pass"
  mpi 3 "$STRATA" mf --mode $mode --data $MFDATA --rank 8 --passes "$n" -q --model-out mf_straight_$mode \
    --metrics-out mf_straight_$mode.json >/dev/null 2>&1 || fail "mf $mode --passes $n"
  if [ $mode = scheduled ]; then
    cmp -s mf_tol_$mode/W.f32 mf_straight_$mode/W.f32 && cmp -s mf_tol_$mode/H.f32 mf_straight_$mode/H.f32 ||
      fail "mf $mode: the model after a --tol stop at $n passes differs from a straight $n-pass run's"
  else
    a=$(json mf_tol_$mode.json "m['train_rmse']") b=$(json mf_straight_$mode.json "m['train_rmse']")
    python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-3 * b)" "$a" "$b" ||
      fail "mf $mode: train RMSE $a after a --tol stop, $b after a straight $n-pass run"
    cmp -s <(stat -c %s mf_tol_$mode/W.f32) <(stat -c %s mf_straight_$mode/W.f32) || fail "mf $mode: no model"
  fi
  ok "mf --mode $mode --tol stops after $n passes with a straight run's model"
done
timeout "$RUN_LIMIT" "$STRATA_PAGERANK" --mode serial --graph synth:scale=10,edge-factor=8 --passes 1000 \
  --tol 1e-10 -q --metrics-out pr_tol.json >pr_tol.log 2>&1 || { show_log pr_tol.log; fail "pagerank --tol"; }
[ "$(json pr_tol.json "m['stop_reason']")" = tolerance ] || fail "pagerank: not stopped by --tol"
json pr_tol.json "m['l1_change'] <= 1e-10 and m['passes'] < 1000" | grep -qx true || fail "pagerank --tol: $(json pr_tol.json "m['passes'], m['l1_change']")"
ok "pagerank --tol 1e-10 stops after $(json pr_tol.json "m['passes']") passes"
