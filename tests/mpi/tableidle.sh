#!/usr/bin/env bash
# tableidle.sh: a worker delayed inside strata_table_serve_for (as a
# straggler is) keeps answering its peers' reads, asleep and busy
# (tests/apps/tableidle.c: rank 1's staleness-0 read of a row on rank 0's
# shard must return while rank 0 is still in a 2 s delay).
. "$(dirname "$0")/common.sh"
: "${STRATA_TABLEIDLE:?STRATA_TABLEIDLE must be set}"

for spin in 0 1; do
  mpi 2 "$STRATA_TABLEIDLE" 2000 200 "$spin" >out.txt 2>err.txt
  rc=$?
  cat out.txt err.txt >log.txt
  [ "$rc" = 0 ] || show_log log.txt
  expect_rc 0 "$rc" "tableidle spin=$spin"
  grep '^tableidle: ok: ' out.txt || fail "spin=$spin: no 'ok' line"
  [ -s err.txt ] && { show_log err.txt; fail "spin=$spin: stderr is not empty"; }
done
echo PASS
