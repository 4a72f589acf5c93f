#!/usr/bin/env bash
# api_probe.sh: what the engine tells an app, in every mode (tests/apps/probe.c).
#
# Runs strata_probe (B = 3 strata, depth 4 over rotating blocks of 1, 4 and
# 7 rows, so some chunks are empty; 3 passes) in serial mode and, with 2
# workers, in scheduled, bsp, absp, ssp (staleness 0 and 2), essp, async and
# vap mode with --wpc 1, 0.5 and 2 where the mode takes it, and a few of them
# with 3 workers. Each run's export checks itself (exit 1 on a failure);
# then this script checks, from the traces and metrics alone:
#   - every mode hands each worker the task views of the scheduled run, in
#     the same order, empty chunks included; serial's sequence, restricted
#     to a worker's resident blocks, is that worker's;
#   - tv->clock follows the rule of strata/app.h for the mode and --wpc;
#   - setup->staleness and setup->wpc (coordinator and every worker) are the
#     mode's: 0 and 1 on the ring and in bsp, --staleness (-1 for async)
#     and --wpc in the parameter-server modes;
#   - the MAX and MIN partials combine over workers: the workers' indices
#     give P - 1 and 0 (a sum would give P(P-1)/2), a MAX partial nobody
#     touches is -inf (null in JSON) and the run did not diverge;
#   - metrics number passes from 0;
#   - under vap (--value-bound 0.5, each compute adding 1 to every row of its
#     chunk, so every delta is split): no read misses more than the bound of
#     another worker's released updates (the probe's own check, from the
#     calls' times and what each read saw), and the metrics' largest
#     in-transit sum is within the bound; with the enforcement switched off
#     (STRATA_TEST_VAP_OFF=1) the same check finds reads beyond it; with
#     --value-len 4 (only the worker columns are model values, the count
#     column optimiser state that rides unbounded) the bound still holds
#     and the counts come out whole.
# Last, --fault clock (worker 0 misreports one clock) must fail the run,
# and this script's own clock check must catch it in the trace.
. "$(dirname "$0")/common.sh"
: "${STRATA_PROBE:?STRATA_PROBE must be set}"

B=3 DEPTH=4 PASSES=3
common=(--strata $B --depth $DEPTH --passes $PASSES -q)

# run NAME WORKERS MODE STALENESS WPC [flags...]: WORKERS 0 is serial; the
# staleness and wpc are what setup must say.
: >runs.txt
run() {
  local name=$1 workers=$2 mode=$3 s=$4 wpc=$5
  shift 5
  local cmd=("$STRATA_PROBE" --mode "$mode" "${common[@]}" --expect-staleness "$s"
    --expect-wpc "$wpc" --model-out "$name" --metrics-out "$name.json" "$@")
  if [ "$workers" = 0 ]; then
    timeout "$RUN_LIMIT" "${cmd[@]}" >"$name.log" 2>&1
  else
    mpi $((workers + 1)) "${cmd[@]}" >"$name.log" 2>&1
  fi
  local rc=$?
  [ "$rc" = 0 ] || show_log "$name.log"
  expect_rc 0 "$rc" "$name ($mode, $workers workers, staleness $s, wpc $wpc, $*)"
  echo "$name $workers $mode $s $wpc" >>runs.txt
}

run serial 0 serial 0 1
run p2_scheduled 2 scheduled 0 1
run p2_bsp 2 bsp 0 1
run p2_absp_w05 2 absp 0 0.5 --wpc 0.5
run p2_absp_w2 2 absp 0 2 --wpc 2
run p2_ssp_s0 2 ssp 0 1 --staleness 0
run p2_ssp_s2 2 ssp 2 1 --staleness 2
run p2_ssp_s2_w05 2 ssp 2 0.5 --staleness 2 --wpc 0.5
run p2_ssp_s2_w2 2 ssp 2 2 --staleness 2 --wpc 2
run p2_essp 2 essp 1 1
run p2_essp_w05 2 essp 1 0.5 --wpc 0.5
run p2_essp_s2_w2 2 essp 2 2 --staleness 2 --wpc 2
run p2_async 2 async -1 1
run p2_async_w05 2 async -1 0.5 --wpc 0.5
run p2_async_w2 2 async -1 2 --wpc 2
run p3_scheduled 3 scheduled 0 1
run p3_bsp 3 bsp 0 1
run p3_ssp_s2_w05 3 ssp 2 0.5 --staleness 2 --wpc 0.5
run p3_essp_w2 3 essp 1 2 --wpc 2
run p3_async_w05 3 async -1 0.5 --wpc 0.5
VAP=(--value-bound 0.5 --expect-value-bound 0.5)
run p2_vap 2 vap -1 1 "${VAP[@]}"
run p3_vap_w05 3 vap -1 0.5 --wpc 0.5 "${VAP[@]}"
run p2_vap_values 2 vap -1 1 "${VAP[@]}" --value-len 4

cat >check.py <<'EOF'
import json, sys

B, DEPTH, PASSES = 3, 4, 3

def rows(j):
    return 1 + 3 * j

def chunk(n, c):
    return n * c // DEPTH, n * (c + 1) // DEPTH

EMPTY = sum(1 for j in range(B) for c in range(DEPTH) if chunk(rows(j), c)[0] == chunk(rows(j), c)[1])
CALLS = B * B * DEPTH

def rule(mode, wpc, p, i, n):
    """tv->clock of the i-th of n chunks of pass p (strata/app.h)."""
    if mode in ("serial", "scheduled"):
        return p
    if wpc < 1:
        K = round(1 / wpc)
        return p * K + i * K // n
    return p // int(wpc)

def view(e):
    return tuple(e[:8])  # the task view without its clock

def check_clocks(name, mode, wpc, trace):
    for w, t in enumerate(trace):
        n = len(t) // PASSES
        for k, e in enumerate(t):
            p, i = divmod(k, n)
            assert e[0] == p, "%s worker %d call %d: pass %d, expected %d" % (name, w, k, e[0], p)
            want = rule(mode, wpc, p, i, n)
            assert e[8] == want, ("%s worker %d pass %d chunk %d of %d: clock %d, the rule says %d"
                                  % (name, w, p, i, n, e[8], want))

def check(name, workers, mode, s, wpc, ref):
    P = max(workers, 1)
    r = json.load(open(name + "/probe_report.json"))
    m = json.load(open(name + ".json"))
    assert r["ok"], "%s: %s" % (name, r.get("first_failure"))
    # set-ups: coordinator, every worker
    assert r["setup"]["staleness"] == s and r["setup"]["wpc"] == wpc, (name, r["setup"])
    assert r["worker_setup"] == [[s, wpc]] * P, (name, r["worker_setup"])
    # traces: one list per worker, empty chunks in them
    trace = r["trace"]
    assert len(trace) == P, (name, len(trace))
    empties = sum(1 for t in trace for e in t if e[6] == e[7])
    assert empties == B * EMPTY * PASSES, "%s: %d empty chunks computed, expected %d" % (
        name, empties, B * EMPTY * PASSES)
    assert sum(len(t) for t in trace) == CALLS * PASSES, name
    check_clocks(name, mode, wpc, trace)
    if workers == 0:
        # serial: each worker's sequence of a P-worker run is serial's,
        # restricted to that worker's resident blocks
        for rname, rtrace in ref.items():
            for w, t in enumerate(rtrace):
                mine = {e[3] for e in t}
                sub = [view(e) for e in trace[0] if e[3] in mine]
                assert sub == [view(e) for e in t], ("serial's sequence over worker %d's blocks "
                                                     "differs from %s's" % (w, rname))
    elif mode != "scheduled":  # scheduled runs are the reference
        want = ref["p%d_scheduled" % P]
        for w in range(P):
            got = [view(e) for e in trace[w]]
            assert got == [view(e) for e in want[w]], (
                "%s worker %d: task views differ from scheduled's (first at call %d)" % (
                    name, w, next(k for k, (a, b) in enumerate(zip(got, want[w])) if a != b)
                    if any(a != b for a, b in zip(got, want[w])) else min(len(got), len(want[w]))))
    # partials: workers' indices as MAX and MIN, an untouched MAX
    names = r["partial_names"]
    for p, v in enumerate(r["partials"]):
        d = dict(zip(names, v))
        assert d["worker_max"] == P - 1 and d["worker_min"] == 0, (name, p, d)
        assert d["untouched"] is None, (name, p, d["untouched"])
        assert d["calls"] == CALLS and d["empty_calls"] == B * EMPTY, (name, p, d)
        assert d["clock_error"] == 0, (name, p, d)
    # metrics: passes from 0, the objectives of the combined partials
    # (null for a pass that ends inside a clock, --wpc above 1)
    pp = m["per_pass"]
    assert [x["pass"] for x in pp] == list(range(PASSES)), [x["pass"] for x in pp]
    for x in pp:
        if x["calls"] is None:
            assert mode not in ("serial", "scheduled") and wpc > 1, (name, x)
            continue
        assert x["worker_max"] == P - 1 and x["worker_min"] == 0, (name, x)
        assert x["untouched"] is None and x["calls"] == CALLS, (name, x)
    print("ok: %-15s %-9s P=%d staleness %2s wpc %-3s: %3d calls (%d empty), clocks %s" % (
        name, mode, P, s, wpc, sum(len(t) for t in trace), empties,
        sorted({e[8] for t in trace for e in t})))
    return trace

runs = [l.split() for l in open(sys.argv[1])]
ref = {}
for name, workers, mode, s, wpc in sorted(runs, key=lambda x: x[2] != "scheduled"):
    if mode == "scheduled":
        ref[name] = check(name, int(workers), mode, int(s), float(wpc), ref)
for name, workers, mode, s, wpc in runs:
    if mode != "scheduled":
        check(name, int(workers), mode, int(s), float(wpc), ref)
if len(sys.argv) > 2:
    # The fault run's trace: the clock check must fail on it.
    r = json.load(open(sys.argv[2]))
    try:
        check_clocks("fault", r["mode"], r["setup"]["wpc"], r["trace"])
    except AssertionError as e:
        print("ok: the clock check catches the misreported clock: %s" % e)
    else:
        sys.exit("the clock check missed the misreported clock")
EOF

# The checks are not vacuous: a clock worker 0 misreports once fails the run
# (the app's own check) and this script's check of the trace.
mpi 3 "$STRATA_PROBE" --mode ssp --staleness 2 --wpc 0.5 "${common[@]}" --expect-staleness 2 \
  --expect-wpc 0.5 --fault clock --model-out fault >fault.log 2>&1
rc=$?
[ "$rc" = 1 ] || show_log fault.log
expect_rc 1 "$rc" "--fault clock"
grep -q "partial clock_error is 1, expected 0" fault.log || { show_log fault.log; fail "the app's check missed the fault"; }
ok "the app's check caught the misreported clock"

# The value-bound check is not vacuous: with the enforcement off it finds
# reads that missed more than the bound (or the run fails).
STRATA_TEST_VAP_OFF=1 mpi 3 "$STRATA_PROBE" --mode vap "${common[@]}" --expect-staleness -1 \
  --expect-wpc 1 "${VAP[@]}" --expect-vap-violations --model-out vap_off \
  --metrics-out vap_off.json >vap_off.log 2>&1
rc=$?
[ "$rc" = 0 ] || show_log vap_off.log
expect_rc 0 "$rc" "vap with the enforcement off"

python3 - <<'EOF2' || fail "vap checks"
import json
for name, on in (("p2_vap", True), ("p3_vap_w05", True), ("p2_vap_values", True),
                 ("vap_off", False)):
    r = json.load(open(name + "/probe_report.json"))["value_bound"]
    m = json.load(open(name + ".json"))["vap"]
    assert r["reads"] > 0, (name, r)
    if on:
        assert r["violations"] == 0 and r["max_missed"] <= r["bound"] + 1e-4, (name, r)
        assert m["enforced"] and m["max_inflight"] <= m["bound"] + 1e-6, (name, m)
        assert m["splits"] > 0 and m["waits"] > 0, (name, m)
    else:
        assert r["violations"] > 0 and not m["enforced"] and m["max_inflight"] > m["bound"], (name, r, m)
    print("ok: %-10s %3d reads, %2d beyond the bound, the most missed %g (bound %g); "
          "in transit at most %g" % (name, r["reads"], r["violations"], r["max_missed"], r["bound"],
                                     m["max_inflight"]))
EOF2

python3 check.py runs.txt fault/probe_report.json || fail "probe checks"
echo "PASS"
