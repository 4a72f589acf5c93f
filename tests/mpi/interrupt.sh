#!/usr/bin/env bash
# interrupt.sh TARGET SIG PHASE [MODE]: SIGINT or SIGTERM to one process of
# a running `strata mf` ends the run the one way (core/interrupt.h): every
# rank ends within the limit with exit code 128 + the signal (130, 143) and
# exactly one line names the signal and the rank. Checked: that line (and
# no other of strata's, no crash or abort noise), every rank's exit code,
# the time from the signal to the last rank's end, no rank left.
#   TARGET  coordinator (rank 0), worker (worker 1, rank 2), mpirun (which
#           signals every rank, SIGTERM for either signal), serial (a
#           --mode serial run, no mpiexec)
#   SIG     TERM or INT
#   PHASE   load (rank 0 loading: its ratings come from a FIFO no one
#           writes; the workers waiting for their set-up),
#           passes (pass 3 or so), late (pass 30 or so of 40), ckpt (pass
#           3 or so, a checkpoint after every pass: the line names the last
#           one), random (0 to 3 s after the start of a run of 400 passes,
#           the seed printed; INTERRUPT_SEED=X replays one), linger (after
#           the run, rank 0 serving --status-linger: the signal ends the
#           linger and the run's code, 0, stands)
#   MODE    codes (default): mpiexec lets every rank finish and each writes
#           down its own exit code; plain: mpiexec as a job runs by default,
#           checked by its exit status
# INTERRUPT_LIMIT (seconds, default 10: a loaded machine must not fail it;
# scripts/stress.sh asks for 3) bounds the time to the last rank's end.
. "$(dirname "$0")/common.sh"
# Background jobs of a non-interactive shell ignore SIGINT; with job control
# they keep it, as a job started from a terminal does.
set -m

TARGET=$1 SIG=$2 PHASE=$3 MODE=${4:-codes}
LIMIT=${INTERRUPT_LIMIT:-10}
case $SIG in TERM | INT) ;; *) fail "unknown signal $SIG" ;; esac
WANT=$((128 + $(kill -l "$SIG")))
NAME=SIG$SIG
# mpirun hands every rank SIGTERM, whichever of the two it got.
[ "$TARGET" = mpirun ] && NAME=SIGTERM WANT=143
PASSES=40
flags=(mf --rank 16 --passes $PASSES --straggler delay=100)
small=(--data "synth:users=2000,items=500,ratings=50000")
case $PHASE in
  load) mkfifo ratings.fifo && flags+=(--data ratings.fifo) ;;
  passes | late) flags+=("${small[@]}") ;;
  random) PASSES=400 flags=(mf --rank 16 --passes 400 --straggler delay=100 "${small[@]}") ;;
  ckpt) flags+=("${small[@]}" --checkpoint ck --checkpoint-every 1) ;;
  linger) PASSES=3 flags=(mf --rank 16 --passes 3 "${small[@]}" --status 127.0.0.1:0
                          --status-linger 60) WANT=0 ;;
  *) fail "unknown phase $PHASE" ;;
esac
NP=3
[ "$TARGET" = serial ] && NP=1 flags+=(--mode serial)
echo "case $TARGET $SIG $PHASE $MODE: ${flags[*]}"

mkdir codes
if [ "$TARGET" = serial ]; then
  "$STRATA" "${flags[@]}" >out.txt 2>err.txt &
elif [ "$MODE" = plain ]; then
  "${MPIRUN[@]}" "$MPIEXEC_NUMPROC_FLAG" $NP "$STRATA" "${flags[@]}" >out.txt 2>err.txt &
else
  # The trap keeps each wrapper alive to write its rank's code when
  # mpirun signals the whole process group.
  OMPI_MCA_orte_abort_on_non_zero_status=0 "${MPIRUN[@]}" "$MPIEXEC_NUMPROC_FLAG" $NP \
    sh -c 'trap : TERM INT; "$@"; rc=$?; echo $rc >"codes/$OMPI_COMM_WORLD_RANK"; exit $rc' sh \
    "$STRATA" "${flags[@]}" >out.txt 2>err.txt &
fi
job=$!

# The moment to signal: a while into the load (the configuration echo comes
# before it; a signal that comes before the watch starts is acted on as it
# starts), pass 3 under way, or the summary printed and the linger begun.
case $PHASE in
  load) wait_for_line err.txt "^  mf options" 60 || { show_log err.txt; fail "no start"; }
        sleep 0.5 ;;
  passes | ckpt) wait_for_line err.txt "pass 2/$PASSES" 60 || { show_log err.txt; fail "no pass 2"; } ;;
  late) wait_for_line err.txt "pass 30/$PASSES" 60 || { show_log err.txt; fail "no pass 30"; } ;;
  random) seed=${INTERRUPT_SEED:-$(od -An -tu4 -N4 /dev/urandom | tr -d ' ')}
          delay=$(python3 -c "import random; random.seed($seed); print('%.3f' % random.uniform(0, 3))")
          echo "seed $seed: the signal $delay s after the start"
          wait_for_line err.txt "^  mf options" 60 || { show_log err.txt; fail "no start"; }
          sleep "$delay" ;;
  linger) wait_for_line out.txt "^summary" 60 || { show_log err.txt; fail "no summary"; }
          sleep 0.3 ;;
esac
case $TARGET in
  coordinator | serial) victim=$(rank_pid 0) ;;
  worker) victim=$(rank_pid 2) ;;
  mpirun) victim=$job ;;
esac
[ "$TARGET" = serial ] && victim=$job
[ -n "$victim" ] || { show_log err.txt; fail "no process to signal"; }
t0=$(date +%s.%N)
kill -"$SIG" "$victim"

# Every rank gone (or, with codes, every code written), within the limit.
gone() {
  if [ "$MODE" = codes ] && [ "$TARGET" != serial ]; then
    for ((r = 0; r < NP; r++)); do [ -s "codes/$r" ] || return 1; done
    return 0
  fi
  ! kill -0 "$job" 2>/dev/null
}
for ((i = 0; i < (LIMIT + 30) * 50; i++)); do
  gone && break
  sleep 0.02
done
elapsed=$(echo "$(date +%s.%N) - $t0" | bc)
if [ "$MODE" = codes ] && [ "$TARGET" != serial ]; then
  wait_limited "$job" 20 >/dev/null
  got=""
  for ((r = 0; r < NP; r++)); do got="$got $(cat "codes/$r" 2>/dev/null || echo none)"; done
  echo "after ${elapsed}s, the ranks' exit codes:$got"
  for c in $got; do [ "$c" = "$WANT" ] || { show_log err.txt; fail "every rank must exit with $WANT"; }; done
else
  rc=0
  wait_limited "$job" 20 || rc=$?
  echo "after ${elapsed}s, exit status $rc"
  # mpirun signalled exits with its own status (Open MPI's: 1).
  want=$WANT
  [ "$TARGET" = mpirun ] && want=1
  [ "$rc" = "$want" ] || { show_log err.txt; fail "exit status $rc, expected $want"; }
fi
[ "$(echo "$elapsed < $LIMIT" | bc)" = 1 ] || { show_log err.txt; fail "took ${elapsed}s (limit ${LIMIT}s)"; }
ok "ended within ${elapsed}s with $WANT"
sleep 0.2
left=$(pgrep -f -- "$(readlink -f "$STRATA")" | while read -r p; do
  [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$WORK" ] && echo "$p"; done)
[ -z "$left" ] || fail "a process of the run is still there: $left"
ok "no process of the run is left"

# strata's lines but the status URL; then nothing that looks like a crash.
grep -E '^strata mf: ' err.txt | grep -v 'live status at' >lines.txt
n=$(wc -l <lines.txt)
if [ "$PHASE" = linger ]; then
  [ "$n" = 0 ] || { show_log err.txt; fail "a run that ended prints no line, got $n"; }
  ok "no line: the run had ended"
else
  [ "$n" = 1 ] || { show_log err.txt; fail "expected one line, got $n"; }
  case $TARGET in
    serial) who="" ;;
    worker) who="rank 2 \(worker 1, pid $victim on [^)]*\) was " ;;
    *) who="rank 0 \(the coordinator\) was " ;;
  esac
  case $PHASE in
    load) at="while setting up" ;;
    random) at="(while setting up|during pass [0-9]+ of $PASSES)" ;;
    *) at="during pass [0-9]+ of $PASSES" ;;
  esac
  tail=""
  [ "$PHASE" = ckpt ] && tail="; the last checkpoint \(after [0-9]+ passes\) is in ck: continue with --resume ck"
  pat="^strata mf: ${who}interrupted by $NAME $at$tail\$"
  grep -Eq "$pat" lines.txt || { show_log err.txt; fail "the line does not match /$pat/"; }
  ok "one line: $(cat lines.txt)"
fi
if grep -E -i 'MPI_ABORT|exiting improperly|segmentation|signal [0-9]|core dumped|ORTE_ERROR_LOG|AddressSanitizer|backtrace' err.txt; then
  fail "abort or crash noise in the output"
fi
ok "no abort or crash noise"
echo PASS
