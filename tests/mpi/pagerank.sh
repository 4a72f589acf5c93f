#!/usr/bin/env bash
# pagerank.sh: strata pagerank (apps/pagerank, built on the installed API).
#  - a random graph written as a SNAP list, its gzip and a Matrix Market
#    file: the same ranks from all three; serial ranks equal an independent
#    power iteration (in Python) to 1e-12, dangling vertices included;
#  - scheduled with 2 workers equals serial after every pass: SSE, L1
#    change and rank sum per pass, and the exported ranks, to 1e-12, with
#    the blocks spread over the workers (--min-share 0) and, as a graph this
#    small runs by default, all on worker 0;
#  - bsp equals serial in float (1e-4), ssp and async converge;
#  - the ground truth is cached by the graph's checksum;
#  - a run resumed from a checkpoint ends with a straight run's ranks (and
#    on wiki-Vote with 2 workers, with ../shared/data);
#  - R-MAT is deterministic for its seed;
#  - bad input: one line, the right exit code, on every rank; a cut or
#    trailer-less gzip (SNAP and Matrix Market) and sizes beyond the memory
#    available refused, serially.
# With ../shared/data, the same serial/scheduled check on soc-Slashdot0902.
. "$(dirname "$0")/common.sh"
: "${STRATA_PAGERANK:?STRATA_PAGERANK must be set}"
PR=$STRATA_PAGERANK
export STRATA_CACHE_DIR=$WORK/cache
SEED=${PAGERANK_TEST_SEED:-$RANDOM}
echo "seed $SEED (PAGERANK_TEST_SEED=$SEED reproduces)"

python3 - "$SEED" <<'PY'
import gzip, random, sys
rnd = random.Random(int(sys.argv[1]))
n = 3000
# Non-contiguous ids, self-loops, repeated edges and dangling vertices.
ids = rnd.sample(range(10**9), n)
edges = []
for _ in range(30000):
    u = ids[min(int(rnd.paretovariate(1.2)) - 1, n - 1)] if rnd.random() < 0.5 else rnd.choice(ids)
    if ids.index(u) % 7 == 0:
        continue  # a dangling vertex (it still receives edges)
    edges.append((u, rnd.choice(ids)))
edges.append((ids[1], ids[1]))
with open("g.txt", "w") as f:
    f.write("# a random graph\r\n# FromNodeId\tToNodeId\r\n")
    for u, v in edges:
        f.write("%d\t%d\r\n" % (u, v))
with gzip.open("g.txt.gz", "wt") as f:
    for u, v in edges:
        f.write("%d %d\n" % (u, v))
order = sorted(set(u for e in edges for u in e))
num = {v: k + 1 for k, v in enumerate(order)}
with open("g.mtx", "w") as f:
    f.write("%%%%MatrixMarket matrix coordinate pattern general\n%% comment\n%d %d %d\n"
            % (len(order), len(order), len(edges)))
    for u, v in edges:
        f.write("%d %d\n" % (num[u], num[v]))
# The reference: plain power iteration, dangling mass spread evenly.
vs = order
out = {}
for u, v in edges:
    out[u] = out.get(u, 0) + 1
r = {v: 1.0 / len(vs) for v in vs}
for it in range(7):
    D = sum(r[v] for v in vs if v not in out)
    acc = {v: 0.0 for v in vs}
    for u, v in edges:
        acc[v] += r[u] / out[u]
    r = {v: 0.15 / len(vs) + 0.85 * (acc[v] + D / len(vs)) for v in vs}
with open("ref.txt", "w") as f:
    for v in vs:
        f.write("%d %.17g\n" % (v, r[v]))
with open("ref_mtx.txt", "w") as f:
    for v in vs:
        f.write("%d %.17g\n" % (num[v], r[v]))
PY
[ -s g.txt ] || fail "could not write the test graph"

# cmp_ranks A B TOL WHAT: the same ids, ranks within TOL relative.
cmp_ranks() {
  python3 - "$@" <<'PY' || fail "$4"
import sys
a = dict(l.split() for l in open(sys.argv[1]))
b = dict(l.split() for l in open(sys.argv[2]))
tol = float(sys.argv[3])
assert a.keys() == b.keys(), "different vertices: %d vs %d" % (len(a), len(b))
worst = max(abs(float(a[k]) - float(b[k])) / abs(float(b[k])) for k in a)
print("%s: %d vertices, max relative difference %.3g" % (sys.argv[4], len(a), worst))
sys.exit(worst > tol)
PY
}

run_serial() { # OUT GRAPH PASSES [flags]
  local out=$1 g=$2 p=$3
  shift 3
  timeout "$RUN_LIMIT" "$PR" --mode serial --graph "$g" --passes "$p" --model-out "$out" \
    --metrics-out "$out.json" -q "$@" >"$out.log" 2>&1
  local rc=$?
  [ "$rc" = 0 ] || show_log "$out.log"
  expect_rc 0 "$rc" "serial, $g, $p passes"
}

run_serial s7 g.txt 7
cmp_ranks s7/ranks.txt ref.txt 1e-12 "serial against the Python power iteration"
run_serial z7 g.txt.gz 7
cmp_ranks z7/ranks.txt s7/ranks.txt 0 "gzip against plain"
run_serial m7 g.mtx 7
cmp_ranks m7/ranks.txt ref_mtx.txt 1e-12 "Matrix Market against the Python power iteration"
[ "$(wc -l <s7/top.txt)" = 10 ] || fail "top.txt should hold 10 vertices"
grep -q '^top 10: ' s7.log || fail "the summary should print the top 10"
[ "$(json s7.json 'm["truth"]')" = computed ] || fail "the first run should compute the truth"
run_serial s7b g.txt 7
[ "$(json s7b.json 'm["truth"]')" = cached ] || fail "the second run should read the cached truth"
[ "$(json s7.json 'repr(m["sse"])')" = "$(json s7b.json 'repr(m["sse"])')" ] ||
  fail "the cached truth gives another SSE"
ok "ground truth cached by checksum $(json s7.json 'm["graph_checksum"]')"

# per_pass_equal A.json B.json WHAT: every pass's scores agree. The ranks
# are the same (cmp_ranks, ranks_every_pass), so the scores are sums of the
# same n terms in another order: they may differ by the rounding of such a
# sum, at most 2 n eps of its value.
per_pass_equal() {
  python3 - "$@" <<'PY' || fail "$3"
import json, sys
A, B = (json.load(open(f)) for f in sys.argv[1:3])
a, b = A["per_pass"], B["per_pass"]
assert len(a) == len(b)
bound = 2 * A["vertices"] * 2.0 ** -52
worst = max(abs(x[k] - y[k]) / abs(y[k]) for x, y in zip(a, b) for k in ("sse", "l1_change", "rank_sum"))
print("%s: %d passes, largest relative gap %.3g (bound %.3g)" % (sys.argv[3], len(a), worst, bound))
sys.exit(worst > bound)
PY
}

# ranks_every_pass NP GRAPH PASSES...: after each of those pass counts,
# scheduled with NP - 1 workers exports the ranks serial does, to 1e-12.
ranks_every_pass() {
  local np=$1 g=$2 k
  shift 2
  for k in "$@"; do
    timeout "$RUN_LIMIT" "$PR" --mode serial --graph "$g" --passes $k --model-out es$k -q >/dev/null 2>&1 ||
      fail "serial, $k passes"
    mpi $np "$PR" --graph "$g" --passes $k --depth 3 --min-share 0 --model-out ep$k -q >/dev/null 2>&1 ||
      fail "scheduled, $k passes"
    cmp_ranks ep$k/ranks.txt es$k/ranks.txt 1e-12 "after pass $k: $((np - 1)) workers against serial"
    rm -rf es$k ep$k
  done
}

for np in 3 4; do
  P=$((np - 1))
  mpi $np "$PR" --graph g.txt --passes 7 --depth 3 --min-share 0 --model-out p$P \
    --metrics-out p$P.json -q >p$P.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log p$P.log
  expect_rc 0 "$rc" "scheduled, $P workers"
  cmp_ranks p$P/ranks.txt s7/ranks.txt 1e-12 "scheduled with $P workers against serial"
  per_pass_equal p$P.json s7.json "scheduled with $P workers, every pass"
done
ranks_every_pass 3 g.txt 1 2 3 4 5 6
mpi 3 "$PR" --graph g.txt --passes 7 --model-out one --metrics-out one.json -q >one.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log one.log
expect_rc 0 "$rc" "scheduled, 2 workers, the graph on worker 0 (under --min-share)"
cmp_ranks one/ranks.txt s7/ranks.txt 0 "2 workers, all on worker 0, against serial"
per_pass_equal one.json s7.json "2 workers, all on worker 0, every pass"
# The layout's groups: many destination sub-tiles (2^8 vertices), or many
# source windows (2^8 sources: --subtile-bits 24).
for sb in 8 24; do
  run_serial sb$sb g.txt 7 --subtile-bits $sb
  cmp_ranks sb$sb/ranks.txt s7/ranks.txt 0 "serial with --subtile-bits $sb"
  mpi 3 "$PR" --graph g.txt --passes 7 --depth 4 --subtile-bits $sb --min-share 0 --model-out psb$sb -q \
    >psb$sb.log 2>&1 || { show_log psb$sb.log; fail "2 workers, --subtile-bits $sb"; }
  cmp_ranks psb$sb/ranks.txt s7/ranks.txt 0 "2 workers with --subtile-bits $sb"
done
mpi 3 "$PR" --graph g.txt --passes 7 --strata 5 --depth 2 --min-share 0 --model-out b5 -q >b5.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log b5.log
expect_rc 0 "$rc" "scheduled, 2 workers, 5 strata"
cmp_ranks b5/ranks.txt s7/ranks.txt 1e-12 "5 strata against serial"

mpi 3 "$PR" --mode bsp --graph g.txt --passes 7 --model-out bsp --metrics-out bsp.json -q >bsp.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log bsp.log
expect_rc 0 "$rc" "bsp, 2 workers"
cmp_ranks bsp/ranks.txt s7/ranks.txt 1e-5 "bsp (float table) against serial"
mpi 3 "$PR" --mode bsp --graph g.txt --passes 7 --strata 3 --model-out bsp3 -q >bsp3.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log bsp3.log
expect_rc 0 "$rc" "bsp, 2 workers, 3 strata (a worker holds two rows)"
cmp_ranks bsp3/ranks.txt s7/ranks.txt 1e-5 "bsp with 3 strata against serial"
for mode in ssp async; do
  mpi 3 "$PR" --mode $mode --graph g.txt --passes 20 --metrics-out $mode.json -q >$mode.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log $mode.log
  expect_rc 0 "$rc" "$mode, 2 workers"
  python3 -c "
import json, sys
pp = json.load(open('$mode.json'))['per_pass']
print('$mode: sse after 5 passes %.3g, after 20 %.3g' % (pp[4]['sse'], pp[19]['sse']))
sys.exit(not pp[19]['sse'] < pp[4]['sse'] / 100)" || fail "$mode does not converge"
done

# A checkpoint after 3 passes, resumed to 7: the ranks of a straight run,
# bit for bit (the accumulators and dangling sums live in the blocks), on
# the ring and in bsp.
for mode in scheduled bsp; do
  mpi 3 "$PR" --mode $mode --graph g.txt --passes 3 --min-share 0 --checkpoint ck-$mode \
    --checkpoint-every 3 -q >ck-$mode.log 2>&1 || { show_log ck-$mode.log; fail "$mode: checkpoint"; }
  mpi 3 "$PR" --mode $mode --graph g.txt --passes 7 --min-share 0 --resume ck-$mode --model-out rs-$mode -q \
    >rs-$mode.log 2>&1 || { show_log rs-$mode.log; fail "$mode: resume"; }
done
cmp_ranks rs-scheduled/ranks.txt p2/ranks.txt 0 "scheduled, resumed after 3 passes"
cmp_ranks rs-bsp/ranks.txt bsp/ranks.txt 0 "bsp, resumed after 3 passes"

# The same on wiki-Vote with 2 workers, checkpoints after 3 and 6 passes,
# resumed to 10: its data blocks (the tiles) hold an alignment gap that
# the checkpoint's data checksum covers, and which must not differ from
# run to run.
WV=${STRATA_SHARED_DATA:-}/snap-wiki-vote/wiki-Vote.txt
if [ -f "$WV" ]; then
  mpi 3 "$PR" --graph "$WV" --passes 6 --checkpoint ck-wv --checkpoint-every 3 --truth-iters 0 \
    --min-share 0 -q >ck-wv.log 2>&1 || { show_log ck-wv.log; fail "wiki-Vote: checkpoint"; }
  mpi 3 "$PR" --graph "$WV" --passes 10 --resume ck-wv --truth-iters 0 --min-share 0 \
    --model-out rs-wv -q >rs-wv.log 2>&1 || { show_log rs-wv.log; fail "wiki-Vote: resume"; }
  mpi 3 "$PR" --graph "$WV" --passes 10 --truth-iters 0 --min-share 0 --model-out wv -q >wv.log 2>&1 ||
    { show_log wv.log; fail "wiki-Vote: 10 passes"; }
  cmp_ranks rs-wv/ranks.txt wv/ranks.txt 0 "wiki-Vote, 2 workers, resumed after 6 passes"
else
  echo "skipping the resume on wiki-Vote: $WV is absent"
fi

# R-MAT: the same graph for the same seed, another for another.
for s in 1 1 2; do
  timeout "$RUN_LIMIT" "$PR" --mode serial --graph synth:scale=10,edge-factor=8,seed=$s --passes 2 \
    --truth-iters 0 --metrics-out r$s.json -q >/dev/null 2>&1 || fail "R-MAT run, seed $s"
  echo "$s $(json r$s.json 'm["graph_checksum"]')"
done >rmat.txt
cat rmat.txt
[ "$(sed -n 1p rmat.txt | cut -d' ' -f2)" = "$(sed -n 2p rmat.txt | cut -d' ' -f2)" ] ||
  fail "R-MAT differs for the same seed"
[ "$(sed -n 1p rmat.txt | cut -d' ' -f2)" != "$(sed -n 3p rmat.txt | cut -d' ' -f2)" ] ||
  fail "R-MAT is the same for another seed"
[ "$(json r1.json 'm["edges"]')" = 8192 ] || fail "scale 10, edge factor 8 should have 8192 edges"
ok "R-MAT deterministic for its seed"

# Bad input: exit code, one line, every rank ends.
printf '# x\n1 2\n3 x\n' >bad.txt
printf '%%%%MatrixMarket matrix coordinate pattern general\n3 3 1\n4 1\n' >bad.mtx
bad() { # WANT_RC PATTERN ARGS...
  local want=$1 pat=$2
  shift 2
  mpi 3 "$PR" "$@" -q >bad.out 2>bad.err
  local rc=$?
  expect_rc "$want" "$rc" "$*"
  expect_one_error bad.err "strata-pagerank: " "$pat"
  [ ! -e out ] || fail "$*: wrote a model"
  rank_codes 3 "$PR" "$@" -q
  expect_rank_codes 3 "$want"
}
bad 1 'bad.txt:3: expected two vertex ids' --graph bad.txt --model-out out
bad 1 'bad.mtx:3: entry (4, 1) outside the 3 x 3 matrix' --graph bad.mtx --model-out out
bad 1 'nope.txt: cannot open' --graph nope.txt --model-out out
bad 2 'damping' --graph g.txt --damping 1.5
bad 2 'scale' --graph synth:scale=40
bad 2 'subtile-bits' --graph g.txt --subtile-bits 4
bad 2 'graph' --passes 3
# One rank in serial mode: a gzip stream cut in the middle or missing its
# 8-byte trailer, SNAP and Matrix Market, is refused naming the file (never
# read as a smaller graph); sizes beyond the memory available are refused
# at the line that declares them, before anything is allocated for them.
bad_serial() { # WANT_RC PATTERN PATTERN2 ARGS...
  local want=$1 pat=$2 pat2=$3
  shift 3
  timeout "$RUN_LIMIT" "$PR" --mode serial "$@" -q >bad.out 2>bad.err
  local rc=$?
  expect_rc "$want" "$rc" "serial $*"
  expect_one_error bad.err "strata-pagerank: " "$pat"
  grep -q -- "$pat2" bad.err || fail "serial $*: the message lacks '$pat2'"
  [ ! -e out ] || fail "$*: wrote a model"
}
gzip -c g.mtx >g.mtx.gz
for f in g.txt.gz g.mtx.gz; do
  size=$(stat -c %s $f)
  head -c $((size / 2)) $f >cut-$f
  head -c $((size - 8)) $f >notrailer-$f
  bad_serial 1 "cut-$f:" 'truncated gzip data' --graph cut-$f --model-out out
  bad_serial 1 "notrailer-$f:" 'truncated gzip data' --graph notrailer-$f --model-out out
done
printf '%%%%MatrixMarket matrix coordinate pattern general\n4000000000 4000000000 1\n1 1\n' >huge.mtx
bad_serial 1 'huge.mtx:2: a 4000000000 x 4000000000 matrix of 1 entry needs about' \
  'GB available (--mem-limit)' --graph huge.mtx --mem-limit 1 --model-out out
bad_serial 1 '--graph synth:scale=31,edge-factor=1024: 2147483648 vertices and 2199023255552 edges need about' \
  'lower scale or edge-factor' --graph synth:scale=31,edge-factor=1024 --model-out out
ok "bad input"

if [ -d "${STRATA_SHARED_DATA:-}/snap-soc-slashdot0902" ]; then
  G=$STRATA_SHARED_DATA/snap-soc-slashdot0902/soc-Slashdot0902.txt.gz
  run_serial sd $G 10
  mpi 3 "$PR" --graph "$G" --passes 10 --model-out sd2 --metrics-out sd2.json -q >sd2.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log sd2.log
  expect_rc 0 "$rc" "soc-Slashdot0902, 2 workers"
  cmp_ranks sd2/ranks.txt sd/ranks.txt 1e-12 "soc-Slashdot0902: 2 workers against serial"
  per_pass_equal sd2.json sd.json "soc-Slashdot0902: 2 workers, every pass"
  ranks_every_pass 3 "$G" 1 2 5
  [ "$(json sd.json 'm["vertices"]')" = 82168 ] || fail "soc-Slashdot0902 has 82168 vertices"
  [ "$(json sd.json 'm["edges"]')" = 948464 ] || fail "soc-Slashdot0902 has 948464 edges"
  grep '^top 10' sd2.log
else
  echo "skipping soc-Slashdot0902: ${STRATA_SHARED_DATA:-../shared/data}/snap-soc-slashdot0902 is absent"
fi
ok "pagerank"
