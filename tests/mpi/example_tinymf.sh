#!/usr/bin/env bash
# example_tinymf.sh: examples/tinymf, an additive app, runs with 2 workers
# in every mode that takes it (scheduled, bsp, absp, ssp, essp, async) and
# serially, and its training RMSE falls from about 1 (the data's scale) to
# below 0.5 in 10 passes in each; sfb refuses it (not an SF app) with a
# usage error.
. "$(dirname "$0")/common.sh"
: "${STRATA_EXAMPLES:?STRATA_EXAMPLES (the built examples) must be set}"
mf=$STRATA_EXAMPLES/tinymf

for mode in serial scheduled bsp absp ssp essp async; do
  if [ $mode = serial ]; then
    timeout "$RUN_LIMIT" "$mf" --mode serial -B 2 --passes 10 --metrics-out $mode.json >$mode.log 2>&1
  else
    mpi 3 "$mf" --mode $mode --passes 10 --metrics-out $mode.json >$mode.log 2>&1
  fi
  rc=$?; [ "$rc" = 0 ] || show_log $mode.log
  expect_rc 0 "$rc" "tinymf --mode $mode"
  first=$(json $mode.json 'm["per_pass"][0]["train_rmse"]')
  last=$(json $mode.json 'm["train_rmse"]')
  python3 -c "import sys; f, l = map(float, sys.argv[1:]); sys.exit(0 if f > 0.8 and l < 0.5 else 1)" "$first" "$last" ||
    fail "$mode: train_rmse $first after pass 1, $last after pass 10 (want > 0.8, then < 0.5)"
  ok "$mode: train_rmse $first -> $last"
done
mpi 3 "$mf" --mode sfb --passes 2 >sfb.log 2>&1
rc=$?
expect_rc 2 "$rc" "tinymf --mode sfb"
echo PASS
