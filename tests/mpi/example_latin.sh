#!/usr/bin/env bash
# example_latin.sh: examples/latin, an app with a Latin-square schedule of
# its own, gives byte-identical column sums serially and with 2 and 3
# workers (the order of additions on a column depends on B, depth and the
# seed, not on P), and the same pass totals; a second seed gives another
# schedule and other sums.
. "$(dirname "$0")/common.sh"
: "${STRATA_EXAMPLES:?STRATA_EXAMPLES (the built examples) must be set}"
latin=$STRATA_EXAMPLES/latin

timeout "$RUN_LIMIT" "$latin" --mode serial -B 6 --model-out a >serial.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log serial.log
expect_rc 0 "$rc" "latin, serial"
for P in 2 3; do
  mpi $((P + 1)) "$latin" -B 6 --model-out p$P >p$P.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log p$P.log
  expect_rc 0 "$rc" "latin, $P workers"
  grep -q "^summary: latin scheduled, $P workers, 6 strata" p$P.log || fail "summary line missing ($P workers)"
  cmp a/col_sums.txt p$P/col_sums.txt || fail "column sums differ between serial and $P workers"
  a=$(grep -o 'pass_total [0-9.]*' serial.log | head -1) b=$(grep -o 'pass_total [0-9.]*' p$P.log | head -1)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "pass totals differ: serial '$a', $P workers '$b'"
done
ok "column sums identical serially and with 2 and 3 workers ($(wc -l <a/col_sums.txt) columns)"
timeout "$RUN_LIMIT" "$latin" --mode serial -B 6 --seed 2 --model-out s2 -q >seed2.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log seed2.log
expect_rc 0 "$rc" "latin, serial, seed 2"
cmp -s a/col_sums.txt s2/col_sums.txt && fail "seed 2 gave the same sums as seed 1"
ok "another seed, other sums"
echo PASS
