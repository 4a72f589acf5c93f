#!/usr/bin/env bash
# watch_forged.sh: a stranger on the host cannot stop a run (docs/failure.md,
# "Threat model"). While an mf run of 2 workers goes on (passes slowed with
# --straggler), every TCP port any rank listens on is sent the liveness
# watch's LOST message as a stranger would forge it (tests/mpi/watch_forge.py:
# 104 bytes, and the same padded to 256). The run must still end with exit
# code 0 and its summary, no rank reported lost, and rank 0 must have
# refused and counted the watch connections (a warning line, watch_refused
# in the metrics). Also, on this one host no rank listens beyond loopback:
# strata loads only Open MPI's self and shared-memory transports when every
# rank is on one host (docs/failure.md), so every port a rank listens on is
# on 127.0.0.1, rank 0's watch (named by its -v line) among them.
FORGE="$(cd "$(dirname "$0")" && pwd)/watch_forge.py"
. "$(dirname "$0")/common.sh"

NP=3
python3 "$FORGE" selftest || fail "watch_forge.py selftest"
# An attempt whose run ended before every message was sent (a loaded machine
# can hold this script that long: "refused", nothing listening any more)
# proves nothing: it is made again with four times the passes.
for PASSES in 30 120 480; do
mpi $NP "$STRATA" mf --data "synth:users=2000,items=500,ratings=50000" --rank 16 --passes $PASSES \
  --straggler delay=100 --metrics-out m.json -v >out.txt 2>err.txt &
job=$!
wait_for_line err.txt "pass 2/$PASSES" 60 || { show_log err.txt; fail "pass 2 never reported"; }
pids=""
for ((r = 0; r < NP; r++)); do
  p=$(rank_pid $r)
  [ -n "$p" ] || fail "no process for rank $r"
  pids="$pids $p"
  [ $r = 0 ] && pid0=$p
done
python3 "$FORGE" listeners $pids >listeners.txt || fail "cannot read the ranks' sockets"
echo "the ranks ($pids ) listen on:"
cat listeners.txt
watch_port=$(sed -n 's/.*the liveness watch listens on 127\.0\.0\.1 port \([0-9]*\)$/\1/p' err.txt)
[ -n "$watch_port" ] || { show_log err.txt; fail "rank 0 did not say where its watch listens"; }
own=0
while read -r pid addr port; do
  own=$((own + 1))
  [ "$addr" = 127.0.0.1 ] || fail "rank port $port (pid $pid) is open on $addr, beyond loopback"
done <listeners.txt
grep -qx "$pid0 127.0.0.1 $watch_port" listeners.txt ||
  fail "rank 0's watch is not on 127.0.0.1 port $watch_port"
ok "the ranks listen on loopback only ($own port(s), the watch on 127.0.0.1 port $watch_port)"
n=0
while read -r pid addr port; do
  echo "forged LOST to $addr port $port (pid $pid): $(python3 "$FORGE" send "$addr" "$port")"
done <listeners.txt | tee forged.txt
n=$(wc -l <forged.txt)
[ "$n" -gt 0 ] || fail "no port to send to"
late=0
kill -0 "$job" 2>/dev/null || late=1
rc=0
wait "$job" || rc=$?
if [ $late = 1 ] && [ "$rc" = 0 ] && grep -q ': refused' forged.txt; then
  echo "the run of $PASSES passes ended before the messages reached it: again with more passes"
  continue
fi
expect_rc 0 $rc "the run after the forged messages"
grep -q '^summary: mf scheduled, 2 workers' out.txt || { show_log out.txt; fail "no summary"; }
ok "the summary is printed"
if grep -E 'was lost|lost the coordinator' err.txt; then fail "a rank was reported lost"; fi
grep -q "the liveness watch refused a connection from 127.0.0.1" err.txt ||
  { show_log err.txt; fail "no warning of the refused connection"; }
refused=$(json m.json 'm["watch_refused"]')
[ "$refused" -ge 2 ] || fail "watch_refused is $refused, expected the 2 connections at least"
ok "rank 0 refused $refused connection(s) to its watch"
echo PASS
exit 0
done
fail "every run ended before the forged messages reached it"
