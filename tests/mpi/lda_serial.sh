#!/usr/bin/env bash
# lda_serial.sh [FLAGS...]: LDA with one worker runs the same load, schedule and
# sampler streams as --mode serial, so scheduled P = 1 and bsp P = 1 must
# agree with serial bit for bit: the exported word-topic counts, the
# doc-topic proportions, the top words, every token's topic (z.txt) and
# every objective in the metrics. Then strata lda-eval: on z.txt it gives
# the run's last loglik; on a small file in WarpLDA's -dumpz format, the
# log p(w, z) a direct computation gives; and it refuses bad input.
. "$(dirname "$0")/common.sh"

flags=(lda --data "synth:docs=300,len=40,vocab=600,topics=8,seed=5" --topics 8 --passes 4
       --strata 2 --seed 13 -q "$@")
echo "flags: ${flags[*]}"
timeout "$RUN_LIMIT" "$STRATA" "${flags[@]}" --mode serial --metrics-out serial.json \
  --topics-out serial >serial.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log serial.log
expect_rc 0 "$rc" "serial"
objs() { grep -o '"\(loglik\|loglik_per_token\|count_errors\|count_mismatch\)": *[^,}]*' "$1"; }
for mode in scheduled bsp; do
  mpi 2 "$STRATA" "${flags[@]}" --mode $mode --metrics-out $mode.json --topics-out $mode \
    >$mode.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log $mode.log
  expect_rc 0 "$rc" "$mode, P = 1"
  for f in word_topic.f32 doc_topics.tsv topics.txt z.txt; do
    [ -s $mode/$f ] || fail "$mode/$f missing or empty"
    cmp $mode/$f serial/$f || fail "$f differs between $mode P = 1 and serial"
    ok "$f identical in $mode and serial ($(stat -c %s serial/$f) bytes)"
  done
  a=$(objs $mode.json); b=$(objs serial.json)
  [ "$(echo "$a" | grep -c '"loglik"')" -ge 5 ] || fail "loglik missing (need the last and 4 passes)"
  [ "$a" = "$b" ] || { echo "$a"; echo "$b"; fail "objective strings differ ($mode vs serial)"; }
  ok "every objective string identical ($mode vs serial)"
done

# lda-eval on the run's own z: the same formula on the same counts.
V=$(json serial.json 'm["vocab"]'); A=$(json serial.json 'm["alpha"]')
"$STRATA" lda-eval --z serial/z.txt --topics 8 --alpha "$A" --vocab-size "$V" >eval.json ||
  fail "lda-eval on serial/z.txt"
python3 - serial.json eval.json <<'PY' || fail "lda-eval's loglik is not the run's"
import json, sys
m, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert e["tokens"] == m["tokens"] and e["docs"] == m["docs"], (e, m["tokens"], m["docs"])
assert abs(e["loglik"] - m["loglik"]) <= 1e-8 * abs(m["loglik"]), (e["loglik"], m["loglik"])
print("ok: lda-eval on z.txt:", e["loglik"], "the run's loglik:", m["loglik"])
PY
# A small file, WarpLDA's format, against log p(w, z) computed here.
printf '3 0:1 2:0 0:1\n2 1:2 1:2\n4 0:0 2:1 3:2 0:0\n' >small.z
"$STRATA" lda-eval --z small.z --topics 3 --alpha 0.3 --beta 0.05 --vocab-size 5 >small.json ||
  fail "lda-eval on small.z"
python3 - small.z small.json <<'PY' || fail "lda-eval's loglik of small.z"
import json, math, sys
from collections import Counter
K, a, b, V = 3, 0.3, 0.05, 5
docs = [[tuple(map(int, p.split(":"))) for p in l.split()[1:]] for l in open(sys.argv[1])]
ll, nw, nk = 0.0, Counter(), Counter()
for d in docs:
    nd = Counter(k for _, k in d)
    ll += math.lgamma(K * a) - math.lgamma(len(d) + K * a)
    ll += sum(math.lgamma(c + a) - math.lgamma(a) for c in nd.values())
    nw.update(d); nk.update(k for _, k in d)
ll += sum(math.lgamma(c + b) - math.lgamma(b) for c in nw.values())
ll += sum(math.lgamma(V * b) - math.lgamma(nk[k] + V * b) for k in range(K))
e = json.load(open(sys.argv[2]))
assert (e["docs"], e["tokens"], e["vocab"]) == (3, 9, 5), e
assert abs(e["loglik"] - ll) <= 1e-8 * abs(ll), (e["loglik"], ll)
print("ok: lda-eval on small.z:", e["loglik"], "direct:", ll)
PY
# Refusals: a short line, a topic >= K, a word >= V (exit 1, naming the
# file and line); no --z (exit 2).
printf '2 0:1 1:1\n3 0:1 1:0\n' >short.z
"$STRATA" lda-eval --z short.z --topics 3 >/dev/null 2>err.txt
expect_rc 1 $? "lda-eval on a line with fewer pairs than it declares"
grep -q 'short.z:2' err.txt || { cat err.txt; fail "the message names short.z:2"; }
"$STRATA" lda-eval --z small.z --topics 2 >/dev/null 2>err.txt
expect_rc 1 $? "lda-eval with a topic >= --topics"
grep -q 'small.z:2: topic 2 is not below --topics 2' err.txt ||
  { cat err.txt; fail "the message names small.z:2 and the topic"; }
"$STRATA" lda-eval --z small.z --topics 3 --vocab-size 3 >/dev/null 2>err.txt
expect_rc 1 $? "lda-eval with a word >= --vocab-size"
grep -q 'small.z:3: word id 3 is not below --vocab-size 3' err.txt ||
  { cat err.txt; fail "the message names small.z:3 and the word"; }
"$STRATA" lda-eval --topics 3 >/dev/null 2>err.txt
expect_rc 2 $? "lda-eval without --z"
echo PASS
