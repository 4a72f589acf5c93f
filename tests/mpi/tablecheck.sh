#!/usr/bin/env bash
# tablecheck.sh NP [tablecheck flags...]
#
# Runs the table consistency checker (tests/apps/tablecheck.c) with NP
# ranks, every one a worker of the parameter-server table: read-my-writes,
# the SSP lower and upper bounds on what other workers' columns show
# (under BSP, ssp with staleness 0, exactly their clocks before the
# reader's), monotonic reads, the clock differential, async reads that never wait, and
# a final staleness-0 read that sees every worker's exact total. Exit 0 and
# an "ok" line expected, nothing on stderr.
#
# With --fault KIND (a planted error) the run must fail instead: exit 1 on
# every rank, each with one stderr line naming the violated property, the
# rank, the clock and the seed.
#
# The seed comes from the time unless TABLECHECK_SEED is set; the program
# prints it first, so a failure replays with TABLECHECK_SEED=X (or --seed X).
. "$(dirname "$0")/common.sh"
: "${STRATA_TABLECHECK:?STRATA_TABLECHECK must be set}"

NP=$1
shift
cmd=("$STRATA_TABLECHECK" "$@")
[ -n "${TABLECHECK_SEED:-}" ] && cmd+=(--seed "$TABLECHECK_SEED")
echo "np $NP: ${cmd[*]}"
start=$(date +%s.%N)
mpi "$NP" "${cmd[@]}" >out.txt 2>err.txt
rc=$?
secs=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$(date +%s.%N)")
cat out.txt err.txt >log.txt
echo "exit code $rc after ${secs}s"
seed=$(sed -n 's/^tablecheck: workers=.* seed=\([0-9]*\)$/\1/p' out.txt)
[ -n "$seed" ] || { show_log log.txt; fail "no seed in the first line"; }
ok "seed $seed (replay: TABLECHECK_SEED=$seed)"

case " $* " in *" --fault "*)
  show_log err.txt
  expect_rc 1 "$rc" "tablecheck with a planted fault"
  awk '/^-+$/ && length($0) >= 20 { b = !b; next } !b && NF' err.txt >errors.txt
  [ -s errors.txt ] || fail "no error line"
  bad=$(grep -v -E "^tablecheck: rank [0-9]+ clock [0-9]+: [a-z -]+(\([a-z]+\) )?violated: .*seed $seed\)$" errors.txt)
  [ -z "$bad" ] || fail "malformed error lines: $bad"
  [ -z "$(sed 's/^tablecheck: rank \([0-9]*\) .*/\1/' errors.txt | sort | uniq -d)" ] ||
    fail "a rank printed more than one line"
  ok "$(wc -l <errors.txt) error line(s), each naming the property, rank, clock and seed"
  grep -E -i 'MPI_ABORT|segmentation|signal [0-9]|core dumped|backtrace' err.txt &&
    fail "abort or crash noise"
  # Every rank saw the dropped inc: its writer by read-my-writes, the others
  # at the latest in the final read.
  rank_codes "$NP" "${cmd[@]}" --seed "$seed"
  expect_rank_codes "$NP" 1
  echo PASS
  exit 0
  ;;
esac

[ "$rc" = 0 ] || show_log log.txt
expect_rc 0 "$rc" "tablecheck"
grep -q '^tablecheck: ok: ' out.txt || fail "no 'ok' line"
grep '^tablecheck: ok: ' out.txt
[ -s err.txt ] && { show_log err.txt; fail "stderr is not empty"; }
ok "nothing on stderr"
echo PASS
