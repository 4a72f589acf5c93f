#!/usr/bin/env bash
# program.sh: strata_main and strata_program_main (strata/main.h) as a user
# meets them: the strata program (several apps and commands) and the latin
# example (one app): --help and --version, naming the app or not, an
# unknown app, and a bad flag under mpirun with 3 ranks (one line from
# rank 0, exit code 2 on every rank).
. "$(dirname "$0")/common.sh"
: "${STRATA_EXAMPLES:?STRATA_EXAMPLES (the built examples) must be set}"
latin=$STRATA_EXAMPLES/latin

"$STRATA" --version >v.txt 2>&1
expect_rc 0 $? "strata --version"
grep -Eq '^strata [0-9]+\.[0-9]+\.[0-9]+ \(git [^;]+; ' v.txt || fail "strata --version: $(cat v.txt)"
"$latin" --version >lv.txt 2>&1
expect_rc 0 $? "latin --version"
[ "$(cut -d' ' -f2- lv.txt)" = "$(cut -d' ' -f2- v.txt)" ] || fail "latin and strata report other versions"
ok "$(cat lv.txt)"

"$STRATA" --help >help.txt 2>&1
expect_rc 0 $? "strata --help"
for w in mf lda mlr dml mf-predict mlr-predict; do
  grep -q "^  $w " help.txt || fail "strata --help does not list $w"
done
ok "strata --help lists the bundled apps and commands"
"$STRATA" >none.txt 2>&1
expect_rc 2 $? "strata with no arguments"
grep -q '^Usage:' none.txt || fail "no usage text on a bare strata"
"$STRATA" nosuch >bad.txt 2>&1
expect_rc 2 $? "strata nosuch"
grep -qx "strata: unknown app or command 'nosuch' (see strata --help)" bad.txt || fail "$(cat bad.txt)"
ok "unknown app named"

"$latin" --help >lhelp.txt 2>&1
expect_rc 0 $? "latin --help"
grep -q '^Usage: mpirun -np P+1 latin \[options\]' lhelp.txt || fail "latin --help: $(head -1 lhelp.txt)"
grep -q '^latin options:' lhelp.txt || fail "latin --help has no latin options"
grep -q '^engine options:' lhelp.txt || fail "latin --help has no engine options"
# One app: naming it first is the same program.
"$latin" --mode serial -B 3 --passes 2 -q --model-out a >a.txt 2>&1
expect_rc 0 $? "latin --mode serial"
"$latin" latin --mode serial -B 3 --passes 2 -q --model-out b >b.txt 2>&1
expect_rc 0 $? "latin latin --mode serial"
cmp a/col_sums.txt b/col_sums.txt || fail "naming the app changed the run"
ok "the app's name is optional in a one-app program"

rank_codes 3 "$latin" --rows 0
expect_rank_codes 3 2
expect_one_error rank-codes.log "latin: --rows" "0"
echo PASS
