#!/usr/bin/env bash
# fail_report.sh: a failure on one worker ends the job cleanly, in every
# mode. strata_failapp (tests/apps/failapp.c) runs with 3 workers and makes
# one worker fail in a callback of its app (or the engine run out of memory
# there); each case checks that
#  - every one of the 4 ranks exits with the failure's exit code (1, or 3
#    for a divergence; each writes its own code down), and in the cases
#    marked STATUS=1 (one per kind of mode and path) so does mpirun, run as
#    a job runs by default;
#  - the only line any rank prints (-q) is the failing worker's message,
#    printed once, by rank 0, prefixed "PROGRAM: worker W: ";
#  - nothing aborted or crashed: no MPI_Abort banner, no "signal 15", no
#    ORTE_ERROR_LOG.
# Cases: compute on worker 2 in every mode (sum: scheduled, bsp, ssp, essp,
# async, absp; sf: sfb); worker_init on worker 0 (set-up); evaluate,
# block_objective and an sf app's clock_end; the last pass; the engine out
# of memory on a worker, and on rank 0; every worker at once; a
# divergence's exit code 3; serial mode.
. "$(dirname "$0")/common.sh"
: "${STRATA_FAILAPP:?STRATA_FAILAPP must be set}"
# Open MPI keeps allocations past exit that LeakSanitizer would report as
# leaks of each rank (scripts/test.sh runs every MPI test this way).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

NP=4

# run_case WANT_RC LINE APP ARGS...: LINE is the one line rank 0 must print
# (a shell pattern). A run where mpirun lets every rank finish (by default
# it kills the others once one exits non-zero, though it then exits 0),
# each rank writing down its own exit code; with STATUS=1 first a run as
# mpirun runs a job by default, for its exit status.
run_case() {
  local want=$1 line=$2 app=$3
  shift 3
  echo "== $app $*"
  local cmd=("$STRATA_FAILAPP" "$app" -q --passes 3 "$@")
  local rc r got=""
  if [ "${STATUS:-0}" = 1 ]; then
    timeout "$RUN_LIMIT" "${MPIRUN[@]}" --tag-output "$MPIEXEC_NUMPROC_FLAG" "$NP" \
      "${cmd[@]}" >out.txt 2>err.txt
    rc=$?
    cat out.txt err.txt >log.txt
    [ "$rc" = "$want" ] || show_log log.txt
    expect_rc "$want" "$rc" "mpirun"
    check_output log.txt "$line"
  fi
  rm -rf codes && mkdir codes
  OMPI_MCA_orte_abort_on_non_zero_status=0 timeout "$RUN_LIMIT" "${MPIRUN[@]}" \
    --tag-output "$MPIEXEC_NUMPROC_FLAG" "$NP" \
    sh -c '"$@"; rc=$?; echo $rc >"codes/$OMPI_COMM_WORLD_RANK"; exit $rc' sh "${cmd[@]}" \
    >out.txt 2>err.txt
  rc=$?
  cat out.txt err.txt >log.txt
  [ "$rc" = 124 ] && fail "timed out after ${RUN_LIMIT}s"
  for ((r = 0; r < NP; r++)); do got="$got $(cat "codes/$r" 2>/dev/null || echo none)"; done
  for r in $got; do
    [ "$r" = "$want" ] || { show_log log.txt; fail "every rank must exit with $want, got:$got"; }
  done
  ok "every rank exited with $want:$got"
  check_output log.txt "$line"
}

# check_output LOG LINE: the ranks printed one line, LINE on rank 0's
# stderr (--tag-output marks each line a rank prints with [job,rank];
# mpirun's own banners are not marked), and nothing aborted or crashed.
check_output() {
  grep -E '^\[[0-9]+,[0-9]+\]<std(out|err)>:' "$1" >ranks.txt
  local n only
  n=$(wc -l <ranks.txt)
  [ "$n" = 1 ] || { show_log "$1"; fail "expected one line from the ranks, got $n"; }
  only=$(cat ranks.txt)
  case $only in
    \[*,0\]"<stderr>:"$2) ok "rank 0 printed it: ${only#*<stderr>:}" ;;
    *) show_log "$1"; fail "the line is not rank 0's '$2' on stderr: $only" ;;
  esac
  if grep -E -i 'MPI_ABORT|signal [0-9]|ORTE_ERROR_LOG|unpack|exiting improperly|segmentation|core dumped|backtrace|AddressSanitizer|runtime error' "$1"; then
    show_log "$1"
    fail "abort or crash noise in the output"
  fi
  ok "no abort or crash noise"
}

P="strata_failapp"
# compute on worker 2 in pass 2, every mode.
STATUS=1 run_case 1 "$P sum: worker 2: compute failed at pass 2 (injected)" sum --mode scheduled \
  --fail-worker 2 --fail-pass 2
STATUS=1 run_case 1 "$P sum: worker 2: compute failed at pass 2 (injected)" sum --mode ssp \
  --fail-worker 2 --fail-pass 2
for m in bsp essp async; do
  run_case 1 "$P sum: worker 2: compute failed at pass 2 (injected)" sum --mode "$m" \
    --fail-worker 2 --fail-pass 2
done
run_case 1 "$P sum: worker 2: compute failed at pass 2 (injected)" sum --mode absp --wpc 0.5 \
  --fail-worker 2 --fail-pass 2
STATUS=1 run_case 1 "$P sf: worker 2: compute failed at pass 2 (injected)" sf --mode sfb \
  --fail-worker 2 --fail-pass 2
# The other callbacks a worker runs, before and during the passes.
STATUS=1 run_case 1 "$P sum: worker 0: worker_init failed at pass 1 (injected)" sum --mode scheduled \
  --fail-worker 0 --fail-in worker_init
run_case 1 "$P sum: worker 2: evaluate failed at pass 1 (injected)" sum --mode bsp \
  --fail-worker 2 --fail-in evaluate
run_case 1 "$P sum: worker 2: block_objective failed at pass 2 (injected)" sum --mode essp \
  --fail-worker 2 --fail-pass 2 --fail-in block_objective
run_case 1 "$P sf: worker 2: clock_end failed at pass 2 (injected)" sf --mode sfb \
  --fail-worker 2 --fail-pass 2 --fail-in clock_end
# The last pass, whose end the other workers may have reached already.
run_case 1 "$P sum: worker 2: compute failed at pass 3 (injected)" sum --mode scheduled \
  --fail-worker 2 --fail-pass 3
run_case 1 "$P sum: worker 2: evaluate failed at pass 3 (injected)" sum --mode ssp \
  --fail-worker 2 --fail-pass 3 --fail-in evaluate
# On the ring the others are through with the run by then (the evaluation
# exchange is behind them): they answer from strata_engine_finish.
run_case 1 "$P sum: worker 2: evaluate failed at pass 3 (injected)" sum --mode scheduled \
  --fail-worker 2 --fail-pass 3 --fail-in evaluate
# The engine itself failing on a worker: out of memory after compute.
run_case 1 "$P sum: worker 2: *out of memory*" sum --mode scheduled \
  --fail-worker 2 --fail-pass 2 --fail-in alloc
# Every worker failing at once: rank 0 prints the first report only.
run_case 1 "$P sum: worker ?: compute failed at pass 2 (injected)" sum --mode scheduled \
  --fail-worker -2 --fail-pass 2
# Rank 0 itself failing mid-run (out of memory after pass 2 is summed) calls
# the run off the same way.
STATUS=1 run_case 1 "$P sum: *out of memory*" sum --mode ssp --fail-pass 2 --fail-in coordinator
# The failure's own exit code reaches every rank.
STATUS=1 run_case 3 "$P sum: worker 1: compute failed at pass 1 (injected)" sum --mode ssp \
  --fail-worker 1 --fail-code diverged
# Serial mode: one process, the same message without a worker.
echo "== sum --mode serial"
timeout "$RUN_LIMIT" "$STRATA_FAILAPP" sum --mode serial -q --passes 3 --fail-worker 0 \
  --fail-pass 2 >out.txt 2>err.txt
rc=$?
cat out.txt err.txt >log.txt
[ "$rc" = 1 ] || show_log log.txt
expect_rc 1 "$rc" "serial"
[ "$(cat log.txt)" = "$P sum: compute failed at pass 2 (injected)" ] ||
  { show_log log.txt; fail "serial: not the one line expected"; }
ok "serial: one line, the failure's"
echo PASS
