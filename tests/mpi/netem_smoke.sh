#!/usr/bin/env bash
# netem_smoke.sh: one small job over bench/netem.sh's emulated cluster (3
# hosts, links shaped to 100 Mbit/s, one rank per host, MPI over TCP):
# it runs to the end, its workers moved their blocks over the network, each
# rank ran on its own host (hostname), and the namespaces are gone
# afterwards. Skipped (77) where network namespaces cannot be made.
. "$(dirname "$0")/common.sh"

NETEM="$(cd "$(dirname "$0")/../.." && pwd)/bench/netem.sh"
bash "$NETEM" check || exit 77
before=$(ip netns list | grep -c '^strata-' || true)
timeout "$RUN_LIMIT" bash "$NETEM" run 3 100mbit 3 sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)"' \
  >hosts.log 2>&1
rc=$?
[ "$rc" = 0 ] || show_log hosts.log
expect_rc 0 "$rc" "three ranks on three emulated hosts"
for r in 0 1 2; do
  grep -qx "rank $r on h$r" hosts.log || { cat hosts.log; fail "rank $r is not on h$r"; }
done
ok "$(sort hosts.log | tr '\n' ';')"
timeout "$RUN_LIMIT" bash "$NETEM" run 3 100mbit 3 "$STRATA" mf \
  --data "synth:users=3000,items=2000,ratings=60000,seed=5" --rank 16 --passes 3 -q --metrics-out m.json \
  >run.log 2>&1
rc=$?
[ "$rc" = 0 ] || show_log run.log
expect_rc 0 "$rc" "strata mf over 100 Mbit/s links"
sent=$(json m.json 'min(w["bytes_sent"] for w in m["workers_total"])')
[ "$sent" -gt 0 ] || fail "the workers sent nothing"
ok "every worker sent blocks ($sent bytes at least)"
after=$(ip netns list | grep -c '^strata-' || true)
[ "$after" = "$before" ] || { ip netns list; fail "namespaces left behind"; }
ok "the emulated cluster is gone"
