#!/usr/bin/env bash
# bench_smoke.sh: the benchmark harness (bench/harness.py, what
# scripts/bench.sh runs) on its tiny "smoke" profile: every run succeeds and
# every output parses: runs.jsonl (one JSON object per run, with the
# machine, the git revision, the parameters and the metrics), summary.md
# (its tables), scale_model.json (validation rows) and the PNG plots.
. "$(dirname "$0")/common.sh"

: "${STRATA_BUILD_DIR:?STRATA_BUILD_DIR (the build directory) must be set}"
HARNESS=$(cd "$(dirname "$0")/../.." && pwd)/bench/harness.py
command -v gnuplot >/dev/null || { echo "SKIP: gnuplot not installed (scripts/setup.sh installs it)"; exit 77; }
RUN_LIMIT=300 timeout 300 python3 "$HARNESS" --profile smoke --bin "$STRATA_BUILD_DIR" --out out -q \
  >harness.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log harness.log
expect_rc 0 "$rc" "harness --profile smoke"
python3 - out <<'PY' || fail "outputs do not parse"
import json, os, sys
out = sys.argv[1]
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
        assert r["app"] in ("mf", "lda") and r["workers"] >= 0 and r["repeat"] == 0
    elif r["kind"] in ("kernel", "kernel2"):
        assert m["time_per_pass_s"] > 0 and m["updates_per_s"] > 0
    else:
        assert m["patterns"]["ring"]["alpha_s"] > 0 and m["patterns"]["ring"]["beta_bytes_per_s"] > 0
groups = {r.get("group") for r in recs}
for g in ("modes", "lda", "strata", "weak", "tcp", "straggle"):
    assert g in groups, g
print(f"runs.jsonl: {len(recs)} runs, kinds {sorted(kinds)}")
sm = json.load(open(os.path.join(out, "scale_model.json")))
assert sm["validation"] and all(v["predicted_s"] > 0 and v["measured_median_s"] > 0 for v in sm["validation"])
assert len(sm["predictions"]) >= 5
print(f"scale_model.json: {len(sm['validation'])} validation rows")
md = open(os.path.join(out, "summary.md")).read()
for h in ("## Modes (MF)", "## Modes (LDA", "## Strata on one worker", "## Weak scaling",
          "## Stragglers", "## Clock differentials", "## Scale model", "## Plots"):
    assert h in md, h
assert "## Failed runs" not in md
plots = [l.split("`")[1] for l in md.splitlines() if l.startswith("- `plots/")]
assert len(plots) >= 10, plots
for p in plots:
    with open(os.path.join(out, p), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", p
print(f"summary.md: every section; {len(plots)} PNG plots")
PY
ok "runs.jsonl, summary.md, scale_model.json and plots parse"
echo PASS
