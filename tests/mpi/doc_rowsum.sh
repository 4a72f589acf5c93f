#!/usr/bin/env bash
# doc_rowsum.sh: the complete app of docs/writing-an-app.md, built from the
# document, runs as the document says: serially and with 2 workers, with
# the same pass totals and byte-identical column sums.
. "$(dirname "$0")/common.sh"
: "${STRATA_DOC_ROWSUM:?STRATA_DOC_ROWSUM (the rowsum example) must be set}"

timeout "$RUN_LIMIT" "$STRATA_DOC_ROWSUM" -B 4 --model-out a >serial.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log serial.log
expect_rc 0 "$rc" "rowsum, serial"
mpi 3 "$STRATA_DOC_ROWSUM" -B 4 --model-out b >sched.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log sched.log
expect_rc 0 "$rc" "rowsum, 2 workers"
grep -q '^serial, 1 workers, 4 strata: .* pass_total ' serial.log || fail "serial summary line missing"
grep -q '^scheduled, 2 workers, 4 strata: .* pass_total ' sched.log || fail "scheduled summary line missing"
a=$(grep -o 'pass_total [0-9.]*$' serial.log)
b=$(grep -o 'pass_total [0-9.]*$' sched.log)
echo "serial: $a; scheduled: $b"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "pass totals differ"
[ -s a/col_sums.txt ] || fail "a/col_sums.txt missing or empty"
cmp a/col_sums.txt b/col_sums.txt || fail "column sums differ between serial and 2 workers"
ok "column sums identical ($(wc -l <a/col_sums.txt) lines)"
echo PASS
