#!/usr/bin/env bash
# ps_straggler.sh: injected stragglers and CPU disruption on a small run.
# --straggler delay=MS makes worker i sleep MS at clocks i, i + P, ...
# (one clock per pass here; a pass is a clock in scheduled mode): the
# metrics echo the settings, and each pass's delay_s shows the sleep on
# exactly the worker whose turn it was.
#  - ssp --staleness 2 with --straggler and --disrupt;
#  - scheduled with --straggler delay=MS,spin=1 (busy, not asleep).
# window_pass_s must match the per-pass times it is computed from.
. "$(dirname "$0")/common.sh"

DELAY=5 PASSES=8
flags=(mf --data "synth:users=600,items=300,ratings=20000,seed=7" --test-fraction 0.1 --rank 8
       --passes $PASSES -q --straggler delay=$DELAY)
echo "flags: ${flags[*]}"

# check FILE SPIN: straggler_ms, straggler_spin, the delay of every worker
# in every pass, and window_pass_s against the per-worker pass times.
check() {
  python3 - "$1" "$DELAY" "$PASSES" "$2" <<'EOF'
import json, statistics, sys
m = json.load(open(sys.argv[1])); ms, passes, spin = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
P = m["workers"]
assert m.get("straggler_ms") == ms, "straggler_ms %r, expected %d" % (m.get("straggler_ms"), ms)
assert m.get("straggler_spin") is spin, "straggler_spin %r, expected %r" % (m.get("straggler_spin"), spin)
times = [[p["workers"][w]["time_s"] for p in m["per_pass"][1:]] for w in range(P)]
nw = (passes - 1) // P
want = max(statistics.median([sum(t[k * P:(k + 1) * P]) / P for k in range(nw)]) for t in times) \
    if nw else m["mean_pass_s"]
assert abs(m["window_pass_s"] - want) <= 1e-6 * want, "window_pass_s %r, expected %r" % (m["window_pass_s"], want)
print("window_pass_s %.6f as computed from per_pass" % want)
assert len(m["per_pass"]) == passes
delays = [[w["delay_s"] for w in p["workers"]] for p in m["per_pass"]]
print("delay_s per pass and worker: %s" % delays)
print("delay_s per worker in all:   %s" % [w["delay_s"] for w in m["workers_total"]])
for n, d in enumerate(delays):
    for w in range(P):
        if n % P == w:
            assert d[w] >= 0.9 * ms / 1000, "pass %d: worker %d slept %g s" % (n + 1, w, d[w])
        else:
            assert d[w] == 0, "pass %d: worker %d slept %g s out of turn" % (n + 1, w, d[w])
assert m["workers_total"][0]["delay_s"] > 0, "worker 0: delay_s 0"
print("ok: straggler_ms %d; each worker slept in its turn only" % ms)
EOF
}

mpi 3 "$STRATA" "${flags[@]}" --mode ssp --staleness 2 --disrupt prob=0.3,slot=2 \
  --metrics-out ssp.json >ssp.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log ssp.log
expect_rc 0 "$rc" "ssp --staleness 2 with --straggler and --disrupt"
d=$(json ssp.json '[m["disrupt"]["prob"], m["disrupt"]["slot_ms"], m["consistency"]["staleness"]]')
echo "[disrupt.prob, disrupt.slot_ms, consistency.staleness]: $d"
[ "$d" = "[0.3, 2, 2]" ] || fail "expected [0.3, 2, 2]"
check ssp.json 0 || fail "ssp: straggler delays"
s=$(json ssp.json 'm["clock_diff"]["max_staleness"]')
[ "$s" -le 2 ] || fail "ssp: max_staleness $s > 2 with stragglers"
ok "ssp: max_staleness $s <= 2"

mpi 3 "$STRATA" "${flags[@]}",spin=1 --mode scheduled --metrics-out sched.json >sched.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log sched.log
expect_rc 0 "$rc" "scheduled with --straggler ...,spin=1"
check sched.json 1 || fail "scheduled: straggler delays"
[ "$(json sched.json '"disrupt" in m')" = false ] || fail "scheduled: disrupt in the metrics without --disrupt"
echo PASS
