#!/usr/bin/env bash
# example_tablesum.sh: examples/tablesum, a program on strata/table.h alone:
# with 3 ranks every read keeps the SSP promise and the last read of row 0
# sees every worker's 10 clocks of updates.
. "$(dirname "$0")/common.sh"
: "${STRATA_EXAMPLES:?STRATA_EXAMPLES (the built examples) must be set}"

mpi 3 "$STRATA_EXAMPLES/tablesum" >ts.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log ts.log
expect_rc 0 "$rc" "tablesum with 3 ranks"
cat ts.log
[ "$(grep -c '^rank [0-2]: row 0 = 30, ' ts.log)" = 3 ] || fail "want 'row 0 = 30' from each of the 3 ranks"
ok "row 0 = 30 on every rank"
echo PASS
