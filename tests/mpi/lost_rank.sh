#!/usr/bin/env bash
# lost_rank.sh CASE MODE: a rank that dies or stops ends the run on every
# other rank by strata's own doing, with one message naming the lost rank
# and the pass. CASE: kill-worker (kill -9 of worker 1), kill-coordinator
# (kill -9 of rank 0), stop-worker (SIGSTOP of worker 1), hang-worker
# (worker 1 spins forever in compute: strata_failapp --fail-in hang, with
# --stall-timeout 2).
# mpiexec runs with orte_abort_on_non_zero_status=0, so that it kills no
# rank itself, and each rank writes down its own exit code: every other
# rank must exit with 1 within 5 s of the kill (the stall timeout plus 5 s
# of the stop; the stall timeout is 5 s when the passes are fast; the 5 s
# times STRATA_TEST_TIME_SCALE), and only the reporting
# rank may print. CASE-plain runs mpiexec as a job runs by default
# instead (it kills the other ranks once one is lost): the job must end
# within the same time, with the same one message; its exit status is
# Open MPI's (137 when a rank was killed by signal 9).
. "$(dirname "$0")/common.sh"
: "${STRATA_FAILAPP:?STRATA_FAILAPP must be set}"

CASE=${1%-plain} MODE=$2 PLAIN=0
[ "$CASE" != "$1" ] && PLAIN=1
NP=3 PASSES=40
exe=$STRATA
flags=(mf --data "synth:users=2000,items=500,ratings=50000" --rank 16 --passes $PASSES
       --straggler delay=100 --mode "$MODE")
case $CASE in
  kill-worker) victim_rank=2 sig=KILL limit=5 ;;
  kill-coordinator) victim_rank=0 sig=KILL limit=5 ;;
  stop-worker) victim_rank=2 sig=STOP limit=10 ;;
  hang-worker) victim_rank=2 sig= limit=5 exe=$STRATA_FAILAPP
               flags=(sum --rows 2000 --passes $PASSES --straggler delay=20 --mode "$MODE"
                      --fail-worker 1 --fail-pass 6 --fail-in hang --stall-timeout 2) ;;
  *) fail "unknown case $CASE" ;;
esac
echo "case $CASE, mode $MODE: ${flags[*]}"
mkdir codes
if [ $PLAIN = 1 ]; then
  "${MPIRUN[@]}" "$MPIEXEC_NUMPROC_FLAG" $NP "$exe" "${flags[@]}" >out.txt 2>err.txt &
else
  OMPI_MCA_orte_abort_on_non_zero_status=0 "${MPIRUN[@]}" "$MPIEXEC_NUMPROC_FLAG" $NP \
    sh -c '"$@"; rc=$?; echo $rc >"codes/$OMPI_COMM_WORLD_RANK"; exit $rc' sh \
    "$exe" "${flags[@]}" >out.txt 2>err.txt &
fi
job=$!
wait_for_line err.txt "pass 1/$PASSES" 60 || { show_log err.txt; fail "pass 1 never reported"; }
victim=$(rank_pid $victim_rank "$exe")
[ -n "$victim" ] || fail "no process for rank $victim_rank"
if [ -n "$sig" ]; then
  wait_for_line err.txt "pass 4/$PASSES" 60 || { show_log err.txt; fail "pass 4 never reported"; }
  t0=$(date +%s.%N)
  kill -$sig "$victim"
else
  # The hang starts with pass 6. A parameter-server worker reports a pass
  # once its snapshot is in, which may be after it hung; its reads in pass
  # 5 waited for every worker to end pass 3, so pass 3 is reported.
  wait_for_line err.txt "pass 3/$PASSES" 60 || { show_log err.txt; fail "pass 3 never reported"; }
  t0=$(date +%s.%N)
fi
survivors=""
for ((r = 0; r < NP; r++)); do [ $r = "$victim_rank" ] || survivors="$survivors $r"; done
# The limits above are for a quiet machine; on a loaded one ending every
# rank takes longer, so each is times STRATA_TEST_TIME_SCALE. A stopped
# worker is found once it has shown no sign of life for the stall timeout,
# which the watch sets from the passes' times (10 times the slowest, at
# least 5 s): there the limit is the timeout the message names plus the
# scaled 5 s.
stall_limit() {
  local t
  t=$(sed -n 's/.*no sign of life for [^(]*(stall timeout \([0-9.]*\) s).*/\1/p' err.txt | head -1)
  if [ -n "$t" ] && [ "$CASE" = stop-worker ]; then
    limit=$(echo "$t + 5 * ${STRATA_TEST_TIME_SCALE:-1}" | bc)
  else
    limit=$((limit * ${STRATA_TEST_TIME_SCALE:-1}))
  fi
}
if [ $PLAIN = 1 ]; then
  rc=0
  wait_limited "$job" $((limit + 10)) || rc=$?
  elapsed=$(echo "$(date +%s.%N) - $t0" | bc)
  echo "the job ended with exit status $rc after ${elapsed}s"
  stall_limit
  [ "$(echo "$elapsed < $limit" | bc)" = 1 ] || fail "the job took ${elapsed}s (limit ${limit}s)"
  case $rc in 1 | 137) ;; *) show_log err.txt; fail "exit status $rc" ;; esac
  survivors=""
fi
for ((i = 0; i < (limit + 10) * 20 * ${STRATA_TEST_TIME_SCALE:-1} && PLAIN == 0; i++)); do
  all=1
  for r in $survivors; do [ -s "codes/$r" ] || all=0; done
  [ $all = 1 ] && break
  sleep 0.05
done
if [ $PLAIN = 0 ]; then
  elapsed=$(echo "$(date +%s.%N) - $t0" | bc)
  # The victim, if still there (stopped or spinning), goes now.
  kill -CONT "$victim" 2>/dev/null
  kill -KILL "$victim" 2>/dev/null
  wait_limited "$job" 20
  got=""
  for ((r = 0; r < NP; r++)); do got="$got $r:$(cat "codes/$r" 2>/dev/null || echo none)"; done
  echo "after ${elapsed}s, exit codes (rank:code):$got"
  stall_limit
  for r in $survivors; do
    [ "$(cat "codes/$r" 2>/dev/null)" = 1 ] || { show_log err.txt; fail "rank $r did not exit with 1"; }
  done
  [ "$(echo "$elapsed < $limit" | bc)" = 1 ] || fail "the other ranks took ${elapsed}s (limit ${limit}s)"
  ok "every other rank exited with 1 within ${elapsed}s"
fi
sleep 0.2
[ -z "$(pgrep -f -- "$(readlink -f "$exe")" | while read -r p; do
  [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$WORK" ] && echo "$p"; done)" ] ||
  fail "a rank of the run is still there"
ok "no rank of the run is left"
grep -E '^strata(_failapp)? [a-z]+: ' err.txt >lines.txt
[ "$(wc -l <lines.txt)" = 1 ] || { show_log err.txt; fail "expected one message, got $(wc -l <lines.txt)"; }
case $CASE in
  kill-coordinator) pat="worker 0 lost the coordinator \(rank 0\) during pass [0-9]+ of $PASSES: its connection closed" ;;
  stop-worker) pat="worker 1 \(rank 2, pid $victim on .*\) was lost during pass [0-9]+ of $PASSES: no sign of life for" ;;
  hang-worker) pat="worker 1 \(rank 2, pid $victim on .*\) was lost during pass 6 of $PASSES: no progress for [0-9.]+ s while it waited for no other rank \(stall timeout 2.0 s\)" ;;
  *) pat="worker 1 \(rank 2, pid $victim on .*\) was lost during pass [0-9]+ of $PASSES: its connection closed" ;;
esac
grep -Eq "$pat" lines.txt || { cat lines.txt; fail "the message does not match /$pat/"; }
ok "one message: $(cat lines.txt)"
if grep -E -i 'MPI_ABORT|signal 15|ORTE_ERROR_LOG|segmentation|core dumped|AddressSanitizer' err.txt; then
  fail "abort or crash noise in the output"
fi
echo PASS
