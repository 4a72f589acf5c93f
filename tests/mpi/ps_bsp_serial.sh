#!/usr/bin/env bash
# ps_bsp_serial.sh: --mode bsp with one worker (coordinator + 1 worker) sees
# the same data in the same order as --mode serial and never reads a stale
# row, so it computes the same model. Not bit for bit, though: the worker
# sends each clock's updates as deltas (new - old, in float) and the table
# merges them by adding them to its copy (old + delta), which rounds
# differently from keeping the new value. So every pass's train_rmse and
# test_rmse must agree within 1e-6, and the exported factors and biases
# elementwise within 1e-4 (the id maps exactly).
. "$(dirname "$0")/common.sh"

flags=(mf --data "synth:users=2000,items=500,ratings=60000,rank=5,noise=0.3,seed=3" --test-fraction 0.1
       --rank 32 --passes 10 -q)
echo "flags: ${flags[*]}"
timeout "$RUN_LIMIT" "$STRATA" "${flags[@]}" --mode serial --metrics-out serial.json \
  --model-out serial >serial.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log serial.log
expect_rc 0 "$rc" "serial"
mpi 2 "$STRATA" "${flags[@]}" --mode bsp --metrics-out bsp.json --model-out bsp >bsp.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log bsp.log
expect_rc 0 "$rc" "bsp, P = 1"

python3 - serial.json bsp.json <<'EOF' || fail "RMSE per pass"
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert b["workers"] == 1 and b["mode"] == "bsp", (b["workers"], b["mode"])
assert b["clock_diff"]["max_staleness"] == 0, b["clock_diff"]
assert len(a["per_pass"]) == len(b["per_pass"]) == 10
worst = 0
for p, q in zip(a["per_pass"], b["per_pass"]):
    print("pass index %2d  train_rmse %.9f %.9f  test_rmse %.9f %.9f" %
          (p["pass"], p["train_rmse"], q["train_rmse"], p["test_rmse"], q["test_rmse"]))
    for k in ("train_rmse", "test_rmse"):
        d = abs(p[k] - q[k])
        assert d <= 1e-6, "pass index %d: %s differs by %g" % (p["pass"], k, d)
        worst = max(worst, d)
print("ok: train_rmse and test_rmse agree in every pass (largest difference %.3g, limit 1e-6)" % worst)
EOF

python3 - serial bsp <<'EOF' || fail "exported models"
import array, json, sys
a, b = sys.argv[1], sys.argv[2]
ma = json.load(open(a + "/meta.json")); mb = json.load(open(b + "/meta.json"))
assert ma.keys() == mb.keys(), (ma, mb)
for k in ma:
    if isinstance(ma[k], float):
        assert abs(ma[k] - mb[k]) <= 1e-6, (k, ma[k], mb[k])
    else:
        assert ma[k] == mb[k], (k, ma[k], mb[k])
for f in ("users.txt", "items.txt"):
    assert open(a + "/" + f).read() == open(b + "/" + f).read(), f + " differs"
for f in ("W.f32", "H.f32", "bu.f32", "bi.f32"):
    x = array.array("f", open(a + "/" + f, "rb").read())
    y = array.array("f", open(b + "/" + f, "rb").read())
    assert len(x) == len(y) > 0, "%s: %d and %d floats" % (f, len(x), len(y))
    d = max(abs(u - v) for u, v in zip(x, y))
    assert d <= 1e-4, "%s: elements differ by up to %g" % (f, d)
    print("ok: %s, %d floats, largest difference %.3g (limit 1e-4)" % (f, len(x), d))
print("ok: meta.json, users.txt, items.txt agree")
EOF
echo PASS
