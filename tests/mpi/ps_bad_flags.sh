#!/usr/bin/env bash
# ps_bad_flags.sh CASE: one bad use of the parameter-server, straggler or
# disruption flags, with a coordinator and 2 workers (np 3) unless the case
# says otherwise (NP = 0: --mode serial, no mpiexec). As in bad_input.sh,
# every case must
#  - exit with 2 (usage error), on every rank;
#  - print exactly one error line on stderr (besides mpiexec's own banner
#    about a non-zero exit status), naming the flag (and the other words
#    the case lists);
#  - print nothing on stdout, and finish within the time limit with no
#    abort, signal or crash noise;
#  - leave no metrics JSON, temporary file or model behind.
. "$(dirname "$0")/common.sh"

CASE=$1
NP=3
PROG=("$STRATA" mf)
PREFIX="strata mf: "
DATA=(--data "synth:users=200,items=100,ratings=2000,seed=1")
ALSO=() # further words the error line must contain

case $CASE in
  ssp-staleness-negative) MSG="--staleness" ALSO=("-1") ARGS=(--mode ssp --staleness -1) ;;
  ssp-wpc-zero) MSG="--wpc" ALSO=("0") ARGS=(--mode ssp --wpc 0) ;;
  ssp-wpc-negative) MSG="--wpc" ALSO=("-1") ARGS=(--mode ssp --wpc -1) ;;
  ssp-wpc-not-whole) MSG="--wpc" ALSO=("1.5") ARGS=(--mode ssp --wpc 1.5) ;;
  bsp-staleness) MSG="--mode bsp" ALSO=("--staleness") ARGS=(--mode bsp --staleness 2) ;;
  bsp-wpc) MSG="--mode bsp" ALSO=("--wpc") ARGS=(--mode bsp --wpc 0.5) ;;
  async-staleness) MSG="--mode async" ALSO=("--staleness") ARGS=(--mode async --staleness 1) ;;
  scheduled-staleness)
    MSG="--staleness" ALSO=("--mode scheduled") ARGS=(--mode scheduled --staleness 1) ;;
  serial-wpc) NP=0 MSG="--wpc" ALSO=("--mode serial") ARGS=(--mode serial --wpc 0.5) ;;
  mode-unknown) MSG="--mode" ALSO=("'foo'") ARGS=(--mode foo) ;;
  straggler-not-number) MSG="--straggler" ALSO=("abc") ARGS=(--straggler delay=abc) ;;
  straggler-unknown-key) MSG="--straggler" ALSO=("foo=3") ARGS=(--straggler foo=3) ;;
  straggler-bad-spin) MSG="--straggler" ALSO=("2") ARGS=(--straggler delay=5,spin=2) ;;
  disrupt-prob-above-one)
    MSG="--disrupt" ALSO=("prob=2,slot=5") ARGS=(--disrupt prob=2,slot=5) ;;
  disrupt-no-slot) MSG="--disrupt" ALSO=("prob=0.5") ARGS=(--disrupt prob=0.5) ;;
  # 2 strata x depth 8 = 16 chunks per worker and pass, fewer than the 100
  # clocks per pass that --wpc 0.01 asks for: found once the data is loaded.
  ssp-wpc-too-many-clocks) MSG="--wpc 0.01" ALSO=("--depth") ARGS=(--mode ssp --wpc 0.01) ;;
  ssp-wpc-tiny) MSG="--wpc" ALSO=("out of range") ARGS=(--mode ssp --wpc 1e-10) ;;
  ssp-wpc-huge) MSG="--wpc" ALSO=("out of range") ARGS=(--mode ssp --wpc 3e9) ;;
  async-prefetch-none) MSG="--mode async" ALSO=("--prefetch aggressive") ARGS=(--mode async --prefetch none) ;;
  blocksum-bsp)
    # blocksum's parameters do not merge by adding deltas.
    PROG=("$STRATA_BLOCKSUM") PREFIX="strata_blocksum: " DATA=()
    MSG="--mode bsp" ARGS=(--mode bsp) ;;
  *) fail "unknown case $CASE" ;;
esac
WANT=2

cmd=("${PROG[@]}" ${DATA[@]+"${DATA[@]}"} "${ARGS[@]}" -q --metrics-out m.json --model-out model)
echo "case $CASE: np $NP: ${cmd[*]}"
start=$(date +%s.%N)
if [ "$NP" = 0 ]; then
  timeout "$RUN_LIMIT" "${cmd[@]}" >stdout.txt 2>stderr.txt
else
  mpi_wrapped "$NP" "${cmd[@]}" >stdout.txt 2>stderr.txt
fi
rc=$?
secs=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$(date +%s.%N)")
echo "exit code $rc after ${secs}s"
echo "---- stderr"; cat stderr.txt
echo "---- stdout"; cat stdout.txt
echo "----"
expect_rc "$WANT" "$rc" "$CASE"

expect_one_error stderr.txt "$PREFIX" "$MSG"
for w in ${ALSO[@]+"${ALSO[@]}"}; do
  grep -q -F -e "$w" errors.txt || fail "error line does not name '$w'"
  ok "error line names '$w'"
done
[ -s stdout.txt ] && fail "stdout is not empty"
left=$(find . \( -name 'm.json*' -o -name '*.tmp*' -o -name model \) -print)
[ -z "$left" ] || fail "left behind: $left"
ok "no metrics file, temporary file or model left behind"
if [ "$NP" != 0 ]; then
  rank_codes "$NP" "${cmd[@]}"
  expect_rank_codes "$NP" "$WANT"
fi
echo PASS
