#!/usr/bin/env bash
# ps_metrics_fields.sh: the parameter-server fields of the metrics JSON, on
# a small run per mode (2 workers, 4 passes):
#  - "consistency": staleness (a whole number, or "unbounded" for async),
#    wpc, and the prefetch policy (auto: aggressive);
#  - "clock_diff" (top level, in every pass, per worker): hist[i] counts the
#    reads with differential -i, so it sums to reads, ends at max_staleness
#    = -min, and gives the mean; passes and workers add up to the total;
#  - clocks per worker = passes / wpc;
#  - no straggler or disruption keys and no delay without those flags;
#  - --mode scheduled has neither "consistency" nor "clock_diff".
. "$(dirname "$0")/common.sh"

PASSES=4
flags=(mf --data "synth:users=600,items=300,ratings=20000,seed=7" --test-fraction 0.1 --rank 8
       --passes $PASSES -q)
echo "flags: ${flags[*]}"

# name|mode flags|expected consistency (JSON, or "none")
runs=('bsp|--mode bsp|{"staleness": 0, "wpc": 1, "prefetch": "aggressive"}'
      'absp|--mode absp --wpc 0.5|{"staleness": 0, "wpc": 0.5, "prefetch": "aggressive"}'
      'ssp|--mode ssp|{"staleness": 1, "wpc": 1, "prefetch": "aggressive"}'
      'ssp_conservative|--mode ssp --prefetch conservative|{"staleness": 1, "wpc": 1, "prefetch": "conservative"}'
      'ssp_wpc2|--mode ssp --staleness 2 --wpc 2 --prefetch none|{"staleness": 2, "wpc": 2, "prefetch": "none"}'
      'essp|--mode essp|{"staleness": 1, "wpc": 1, "prefetch": "aggressive"}'
      'async|--mode async|{"staleness": "unbounded", "wpc": 1, "prefetch": "aggressive"}'
      'async_third|--mode async --wpc 0.3333333333333333|{"staleness": "unbounded", "wpc": 0.333333333, "prefetch": "aggressive"}'
      'scheduled|--mode scheduled|none')
for r in "${runs[@]}"; do
  IFS='|' read -r name mode want <<<"$r"
  read -ra margs <<<"$mode"
  mpi 3 "$STRATA" "${flags[@]}" "${margs[@]}" --metrics-out "$name.json" >"$name.log" 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log "$name.log"
  expect_rc 0 "$rc" "$mode"
  python3 - "$name.json" "$want" "$PASSES" <<'EOF' || fail "$mode: metrics fields"
import json, math, sys
m = json.load(open(sys.argv[1])); want = sys.argv[2]; passes = int(sys.argv[3])
HIST = 34  # STRATA_TABLE_HIST: the last bucket holds everything older

def check_diffs(where, cd):
    keys = {"reads", "mean", "min", "max_staleness", "hist"}
    assert set(cd) == keys, "%s: keys %s" % (where, sorted(cd))
    h, n = cd["hist"], cd["reads"]
    assert all(isinstance(x, int) and x >= 0 for x in h), "%s: hist %s" % (where, h)
    assert sum(h) == n, "%s: hist %s sums to %d, reads %d" % (where, h, sum(h), n)
    if n == 0:
        assert h == [], "%s: hist %s without reads" % (where, h)
        return
    assert cd["min"] == -cd["max_staleness"] <= 0, "%s: min %d, max_staleness %d" % (
        where, cd["min"], cd["max_staleness"])
    assert cd["min"] <= cd["mean"] <= 0, "%s: mean %r outside [min, 0]" % (where, cd["mean"])
    if cd["max_staleness"] < HIST - 1:
        assert len(h) == cd["max_staleness"] + 1 and h[-1] > 0, \
            "%s: hist %s does not end at max_staleness %d" % (where, h, cd["max_staleness"])
        mean = -sum(i * x for i, x in enumerate(h)) / n
        assert math.isclose(cd["mean"], mean, rel_tol=1e-6, abs_tol=1e-8), \
            "%s: mean %r, hist gives %r" % (where, cd["mean"], mean)

assert "straggler_ms" not in m and "disrupt" not in m, "straggler or disrupt keys without the flags"
for w in m["workers_total"] + [w for p in m["per_pass"] for w in p["workers"]]:
    assert w["delay_s"] == 0, "delay_s %r without --straggler" % w["delay_s"]
assert len(m["per_pass"]) == passes
# Pass indices are 0-based, as in the C API.
assert [p["pass"] for p in m["per_pass"]] == list(range(passes)), [p["pass"] for p in m["per_pass"]]

if want == "none":
    assert "consistency" not in m, "consistency in a scheduled run"
    assert "clock_diff" not in m, "clock_diff in a scheduled run"
    for p in m["per_pass"]:
        assert "clock_diff" not in p, "pass index %d: clock_diff" % p["pass"]
    for w in m["workers_total"]:
        assert "clock_diff" not in w and "clocks" not in w, "worker %d: clock fields" % w["worker"]
    print("ok: no consistency or clock_diff")
    sys.exit(0)

c, want = m["consistency"], json.loads(want)
print("consistency %s; clock_diff %s" % (json.dumps(c), json.dumps(m["clock_diff"])))
assert set(c) == {"staleness", "wpc", "prefetch"}, c
s = c["staleness"]
assert (isinstance(s, int) and not isinstance(s, bool)) or s == "unbounded", "staleness %r" % s
assert s == want["staleness"] and c["prefetch"] == want["prefetch"], (c, want)
assert math.isclose(c["wpc"], want["wpc"], rel_tol=1e-6), (c, want)

cd = m["clock_diff"]
check_diffs("top level", cd)
assert cd["reads"] > 0, "no reads"
if s != "unbounded":
    assert cd["max_staleness"] <= s, "max_staleness %d > %d" % (cd["max_staleness"], s)
for p in m["per_pass"]:
    assert "clock_diff" in p, "pass index %d: no clock_diff" % p["pass"]
    check_diffs("pass index %d" % p["pass"], p["clock_diff"])
wt = m["workers_total"]
for w in wt:
    assert "clock_diff" in w, "worker %d: no clock_diff" % w["worker"]
    check_diffs("worker %d" % w["worker"], w["clock_diff"])
    assert w["clocks"] == round(passes / c["wpc"]), "worker %d: %d clocks, expected %d" % (
        w["worker"], w["clocks"], round(passes / c["wpc"]))
for what, parts in (("passes", [p["clock_diff"] for p in m["per_pass"]]),
                    ("workers", [w["clock_diff"] for w in wt])):
    assert sum(x["reads"] for x in parts) == cd["reads"], "reads of the %s do not add up" % what
    assert min(x["min"] for x in parts if x["reads"]) == cd["min"], "min of the %s" % what
    for i, n in enumerate(cd["hist"]):
        assert n == sum(x["hist"][i] if i < len(x["hist"]) else 0 for x in parts), \
            "hist[%d] of the %s does not add up" % (i, what)
print("ok: consistency; clock_diff at the top, in %d passes and %d workers; %d clocks per worker"
      % (len(m["per_pass"]), len(wt), wt[0]["clocks"]))
EOF
done
echo PASS
