#!/usr/bin/env bash
# tablecheck_bad_flags.sh CASE: one bad invocation of tablecheck with 2
# ranks. As in bad_input.sh, it must exit with 2 on every rank, print
# exactly one error line on stderr naming the flag (rank 0 alone), nothing
# on stdout, and no abort or crash noise.
. "$(dirname "$0")/common.sh"
: "${STRATA_TABLECHECK:?STRATA_TABLECHECK must be set}"

CASE=$1
NP=2
case $CASE in
  cons-unknown) MSG="--cons" ARGS=(--cons bsp) ;;
  staleness-negative) MSG="--staleness" ARGS=(--cons ssp --staleness -1) ;;
  clocks-zero) MSG="--clocks" ARGS=(--clocks 0) ;;
  seed-not-number) MSG="--seed: 'x12'" ARGS=(--seed x12) ;;
  prefetch-unknown) MSG="--prefetch" ARGS=(--prefetch eager) ;;
  unknown-flag) MSG="'--bogus'" ARGS=(--bogus) ;;
  *) fail "unknown case $CASE" ;;
esac
cmd=("$STRATA_TABLECHECK" "${ARGS[@]}")
echo "case $CASE: np $NP: ${cmd[*]}"
mpi_wrapped "$NP" "${cmd[@]}" >stdout.txt 2>stderr.txt
rc=$?
echo "exit code $rc"
echo "---- stderr"; cat stderr.txt
echo "---- stdout"; cat stdout.txt
echo "----"
expect_rc 2 "$rc" "$CASE"
expect_one_error stderr.txt "tablecheck: " "$MSG"
[ -s stdout.txt ] && fail "stdout is not empty"
rank_codes "$NP" "${cmd[@]}"
expect_rank_codes "$NP" 2
echo PASS
