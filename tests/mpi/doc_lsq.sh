#!/usr/bin/env bash
# doc_lsq.sh: the complete sufficient-factor app of docs/writing-an-app.md,
# built from the document: serially with minibatch 100 and in --mode sfb
# with 2 workers and minibatch 50 it exports the same W byte for byte and
# reports the same loss; in bsp (full-matrix sync through a table) the loss
# agrees within 1%.
. "$(dirname "$0")/common.sh"
: "${STRATA_DOC_LSQ:?STRATA_DOC_LSQ (the lsq example) must be set}"

timeout "$RUN_LIMIT" "$STRATA_DOC_LSQ" --minibatch 100 --model-out a >serial.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log serial.log
expect_rc 0 "$rc" "lsq, serial"
mpi 3 "$STRATA_DOC_LSQ" --mode sfb --minibatch 50 --model-out b >sfb.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log sfb.log
expect_rc 0 "$rc" "lsq, sfb with 2 workers"
mpi 3 "$STRATA_DOC_LSQ" --mode bsp --minibatch 50 >bsp.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log bsp.log
expect_rc 0 "$rc" "lsq, bsp with 2 workers"
cat serial.log sfb.log bsp.log
a=$(grep -o 'loss [0-9.]*$' serial.log) b=$(grep -o 'loss [0-9.]*$' sfb.log) c=$(grep -o 'loss [0-9.]*$' bsp.log)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "serial ($a) and sfb ($b) losses differ"
cmp a/W.f32 b/W.f32 || fail "serial and sfb export different W"
ok "serial and sfb: the same loss and the same W.f32"
python3 -c "import sys; a, c = float(sys.argv[1].split()[1]), float(sys.argv[2].split()[1]); sys.exit(0 if abs(c / a - 1) <= 0.01 else 1)" "$a" "$c" ||
  fail "bsp's $c is more than 1% from $a"
ok "bsp: $c, within 1% of $a"
echo PASS
