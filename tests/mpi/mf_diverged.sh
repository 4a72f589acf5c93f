#!/usr/bin/env bash
# mf_diverged.sh NP MODE [flags...]: a run whose objective goes non-finite
# fails loudly (NP 0: --mode serial without mpiexec). Plain SGD at --lr 10
# on small ratings (and, with --huge, ratings of +-3e38) must:
#  - end with exit code 3 (diverged) on every rank, within a few passes;
#  - print exactly one error line (-q: no echo or progress), naming the pass
#    and the objective, with the app's hint;
#  - create no model directory and no metrics file.
. "$(dirname "$0")/common.sh"

NP=$1 MODE=$2
shift 2
huge=0
if [ "${1:-}" = --huge ]; then huge=1; shift; fi
python3 - "$huge" <<'PY'
import random, sys
huge = sys.argv[1] == "1"
rnd = random.Random(22)
with open("train.tsv", "w") as f:
    for _ in range(8000):
        r = rnd.choice((-3e38, 3e38)) if huge else rnd.randint(1, 5)
        f.write("%d\t%d\t%g\n" % (rnd.randrange(200), rnd.randrange(100), r))
PY
flags=(mf --mode "$MODE" --data train.tsv --test-fraction 0.1 --rank 8 --passes 12 --depth 2
       --model-out model --metrics-out m.json -q "$@")
if [ "$huge" = 0 ]; then flags+=(--update sgd --lr 10); fi
echo "np $NP: ${flags[*]}"
if [ "$NP" = 0 ]; then
  timeout "$RUN_LIMIT" "$STRATA" "${flags[@]}" >out.txt 2>err.txt
else
  mpi "$NP" "$STRATA" "${flags[@]}" >out.txt 2>err.txt
fi
rc=$?
cat err.txt
expect_rc 3 "$rc" "diverged run"
expect_one_error err.txt "strata mf: the run diverged at pass " "try a smaller --lr"
grep -q -E "the run diverged at pass [12]: (train|test)_rmse is (nan|infinite)" errors.txt ||
  fail "the divergence is not caught in pass 1 or 2, or names no objective"
ok "caught in pass 1 or 2, naming the objective"
[ ! -e model ] || fail "a model directory was created"
[ ! -e m.json ] || fail "a metrics file was written"
ls -A | grep -q -E '\.tmp|\.probe' && fail "temporary files left behind"
ok "no model, no metrics, nothing half-written"
if [ "$NP" != 0 ]; then
  rank_codes "$NP" "$STRATA" "${flags[@]}"
  expect_rank_codes "$NP" 3
fi
echo PASS
