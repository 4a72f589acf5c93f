#!/usr/bin/env bash
# mf_predict.sh: mf-predict on a model exported by a scheduled run: --users
# ID --top 5 prints 5 ranked lines for that user, --pairs FILE scores each
# line of the file, in order.
. "$(dirname "$0")/common.sh"

# Ratings file with non-dense ids so that the id maps matter.
python3 - <<'PY'
import random
rnd = random.Random(4)
with open("train.tsv", "w") as f:
    for _ in range(6000):
        f.write("%d\t%d\t%d\n" % (1000 + 7 * rnd.randrange(150), 50 + 3 * rnd.randrange(80),
                                  rnd.randint(1, 5)))
with open("pairs.tsv", "w") as f:
    f.write("1000\t50\t4\n1007\t53\t2\n99999\t50\t3\n1014\t77777\t1\n")
PY
mpi 3 "$STRATA" mf --data train.tsv --rank 8 --passes 3 -q --model-out model >run.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log run.log
expect_rc 0 "$rc" "training"

timeout "$RUN_LIMIT" "$STRATA" mf-predict --model model --users 1000 --top 5 >top.txt 2>top.err
rc=$?; expect_rc 0 "$rc" "mf-predict --users 1000 --top 5"
cat top.txt
[ -s top.err ] && { cat top.err; fail "mf-predict wrote to stderr"; }
[ "$(wc -l <top.txt)" = 5 ] || fail "expected 5 lines, got $(wc -l <top.txt)"
python3 - top.txt <<'PY' || fail "top-5 lines malformed"
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
assert all(len(r) == 4 for r in rows), rows
assert [r[0] for r in rows] == ["1000"] * 5, rows
assert [int(r[1]) for r in rows] == [1, 2, 3, 4, 5], rows
items = [int(r[2]) for r in rows]
assert len(set(items)) == 5 and all(50 <= i < 50 + 3 * 80 and (i - 50) % 3 == 0 for i in items), items
scores = [float(r[3]) for r in rows]
assert scores == sorted(scores, reverse=True), scores
print("ok: user 1000, ranks 1..5, distinct known items, scores descending")
PY

timeout "$RUN_LIMIT" "$STRATA" mf-predict --model model --pairs pairs.tsv >pairs.out 2>pairs.err
rc=$?; expect_rc 0 "$rc" "mf-predict --pairs"
cat pairs.out
[ "$(wc -l <pairs.out)" = "$(wc -l <pairs.tsv)" ] || fail "expected one line per pair"
python3 - pairs.tsv pairs.out <<'PY' || fail "pair scores malformed"
import math, sys
want = [l.split("\t")[:2] for l in open(sys.argv[1])]
got = [l.rstrip("\n").split("\t") for l in open(sys.argv[2])]
assert [g[:2] for g in got] == want, (got, want)
assert all(math.isfinite(float(g[2])) for g in got), got
print("ok: every pair scored, in file order, unseen ids included")
PY
echo PASS
