#!/usr/bin/env bash
# ps_scores_model.sh MODE [flags...]: in a parameter-server mode, the test
# RMSE reported for each pass is the model's (the pure snapshot at the pass's
# last clock), not a worker's stale view. Checked from outside the run: the
# last pass's reported test RMSE equals the RMSE that mf-predict computes
# from the exported model on the same held-out ratings; every pass has a
# finite figure; the snapshots' traffic is reported apart from the pass's
# (eval_bytes); with --score-view, the workers' views come as a second
# series.
. "$(dirname "$0")/common.sh"

MODE=$1
shift

# A rank-4 model with noise; every test user and item also appears in
# training, so both sides score the same factors.
python3 - <<'PY'
import random
rnd = random.Random(19)
U, I, K = 300, 120, 4
pu = [[rnd.gauss(0, 1) for _ in range(K)] for _ in range(U)]
qi = [[rnd.gauss(0, 1) for _ in range(K)] for _ in range(I)]
def r(u, i):
    x = 3 + 0.5 * sum(a * b for a, b in zip(pu[u], qi[i])) + rnd.gauss(0, 0.3)
    return min(5.0, max(1.0, x))
pairs = set()
while len(pairs) < 16000:
    pairs.add((rnd.randrange(U), rnd.randrange(I)))
pairs = sorted(pairs)
rnd.shuffle(pairs)
test, train = pairs[:1600], pairs[1600:]
seen_u = {u for u, _ in train}
seen_i = {i for _, i in train}
test = [(u, i) for u, i in test if u in seen_u and i in seen_i]
with open("train.tsv", "w") as f:
    for u, i in train:
        f.write("%d\t%d\t%.3f\n" % (u + 1, i + 1, r(u, i)))
with open("test.tsv", "w") as f:
    for u, i in test:
        f.write("%d\t%d\t%.3f\n" % (u + 1, i + 1, r(u, i)))
PY

mpi 3 "$STRATA" mf --mode "$MODE" "$@" --data train.tsv --test test.tsv --rank 16 --passes 8 \
  --lr 0.1 -q --model-out model --metrics-out m.json >run.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log run.log
expect_rc 0 "$rc" "mf --mode $MODE $*"

timeout "$RUN_LIMIT" "$STRATA" mf-predict --model model --pairs test.tsv >pred.tsv 2>pred.err
rc=$?; [ "$rc" = 0 ] || show_log pred.err
expect_rc 0 "$rc" "mf-predict --pairs test.tsv"

python3 - m.json test.tsv pred.tsv <<'PY' || fail "reported figures do not match the exported model"
import json, math, sys
m = json.load(open(sys.argv[1]))
truth = [float(l.split("\t")[2]) for l in open(sys.argv[2])]
pred = [float(l.rstrip("\n").split("\t")[2]) for l in open(sys.argv[3])]
assert len(truth) == len(pred) > 1000, (len(truth), len(pred))
outside = math.sqrt(sum((a - b) ** 2 for a, b in zip(truth, pred)) / len(truth))
curve = [p["test_rmse"] for p in m["per_pass"]]
print("reported per pass:", " ".join("%.5f" % x for x in curve))
print("exported model, outside the run: %.6f; last pass reported: %.6f" % (outside, m["test_rmse"]))
assert all(x is not None and math.isfinite(x) for x in curve), curve
assert curve[-1] == m["test_rmse"]
# mf-predict prints scores to 6 significant digits.
assert abs(outside - m["test_rmse"]) <= 2e-5, (outside, m["test_rmse"])
if "--score-view" in m["argv"]:
    views = [p["view"]["test_rmse"] for p in m["per_pass"]]
    print("workers' views per pass:", " ".join("%.5f" % x for x in views))
    assert all(math.isfinite(x) for x in views), views
    assert all(p["view"]["train_rmse"] == p["train_rmse"] for p in m["per_pass"])
else:
    assert all("view" not in p for p in m["per_pass"])
snap = sum(w["eval_bytes"] for p in m["per_pass"] for w in p["workers"])
assert snap > 0, "no snapshot traffic reported"
print("snapshot traffic %d bytes, reported apart (eval_bytes)" % snap)
PY
ok "last pass's test RMSE is the exported model's"
echo PASS
