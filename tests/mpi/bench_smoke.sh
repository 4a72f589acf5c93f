#!/usr/bin/env bash
# bench_smoke.sh: the benchmark harness (bench/harness.py, what
# scripts/bench.sh runs) on its tiny "smoke" profile: every run succeeds and
# every output parses: runs.jsonl (one JSON object per run, with the
# machine, the git revision, the parameters and the metrics), summary.md
# (its tables), scale_model.json (validation rows) and the PNG plots. The
# sfb runs' bytes per clock must equal the cost model's P (P - 1) (24 +
# K (12 + 4 J + 8 nnz_v)) exactly (bench/scale_model.py's wire format: every
# set reaches every other worker once, relayed under partial broadcast).
. "$(dirname "$0")/common.sh"

: "${STRATA_BUILD_DIR:?STRATA_BUILD_DIR (the build directory) must be set}"
HARNESS=$(cd "$(dirname "$0")/../.." && pwd)/bench/harness.py
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed (scripts/setup.sh installs it)"; exit 77; }
RUN_LIMIT=$((300 * ${STRATA_TEST_TIME_SCALE:-1})) timeout $((300 * ${STRATA_TEST_TIME_SCALE:-1})) python3 "$HARNESS" --profile smoke --bin "$STRATA_BUILD_DIR" --out out -q \
  >harness.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log harness.log
expect_rc 0 "$rc" "harness --profile smoke"
python3 - out "$(dirname "$HARNESS")" <<'PY' || fail "outputs do not parse"
import json, os, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from scale_model import sfb_per_clock
recs = [json.loads(l) for l in open(os.path.join(out, "runs.jsonl"))]
kinds = {r["kind"] for r in recs}
assert {"strata", "kernel", "kernel2", "msgcost"} <= kinds, kinds
for r in recs:
    assert r["rc"] == 0, r
    m = r["metrics"]
    if r["kind"] == "strata":
        for k in ("time_per_pass_s", "updates_per_s", "per_pass", "workers_total", "machine", "build", "argv"):
            assert k in m, (k, r["group"], r["label"])
        assert m["time_per_pass_s"] > 0 and len(m["per_pass"]) == r["passes"]
        assert r["app"] in ("mf", "lda", "mlr", "pagerank", "lasso") and r["workers"] >= 0 and r["repeat"] == 0
        if r["app"] == "mlr" and m["mode"] == "sfb":
            pred = sfb_per_clock(m["workers"], m["sfb"]["peers"], m["minibatch"], m["classes"],
                                 m["nnz_per_sample"])[0]
            got = sum(w["bytes_sent_per_clock"] for w in m["workers_total"])
            assert got == pred, (r["label"], got, pred)
    elif r["kind"] in ("kernel", "kernel2"):
        assert m["time_per_pass_s"] > 0 and m["updates_per_s"] > 0
    else:
        assert m["patterns"]["ring"]["alpha_s"] > 0 and m["patterns"]["ring"]["beta_bytes_per_s"] > 0
groups = {r.get("group") for r in recs}
for g in ("modes", "lda", "strata", "weak", "tcp", "straggle", "sfb", "qsweep"):
    assert g in groups, g
print(f"runs.jsonl: {len(recs)} runs, kinds {sorted(kinds)}")
sm = json.load(open(os.path.join(out, "scale_model.json")))
assert sm["validation"] and all(v["predicted_s"] > 0 and v["measured_median_s"] > 0 for v in sm["validation"])
assert len(sm["predictions"]) >= 5
sv = sm["sfb"]["validation"]
assert {v["label"] for v in sv} == {"sfb s=0", "bsp", "ssp s=1"}, sv
assert all(v["predicted_s"] > 0 and v["measured_median_s"] > 0 for v in sv)
assert [p["workers"] for p in sm["sfb"]["predictions"]] == [2, 4, 8, 16, 32]
print(f"scale_model.json: {len(sm['validation'])} validation rows, {len(sv)} for SFB/FMS")
md = open(os.path.join(out, "summary.md")).read()
for h in ("## Modes (MF)", "## Modes (LDA", "## Strata on one worker", "## Weak scaling",
          "## Stragglers", "## Clock differentials", "## SFB against FMS (MLR, 2 workers)",
          "## SFB partial broadcast: Q sweep", "### SFB against FMS (MLR)", "## Scale model", "## Plots"):
    assert h in md, h
assert "## Failed runs" not in md
plots = [l.split("`")[1] for l in md.splitlines() if l.startswith("- `plots/")]
assert len(plots) >= 10, plots
for name in ("sfb_objective_vs_time", "sfb_objective_vs_samples", "sfb_samples_per_s", "sfb_bytes",
             "sfb_q_sweep", "sfb_scale_model"):
    assert f"plots/{name}.png" in plots, name
for p in plots:
    with open(os.path.join(out, p), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", p
print(f"summary.md: every section; {len(plots)} PNG plots")
PY
ok "runs.jsonl, summary.md, scale_model.json and plots parse"
echo PASS
