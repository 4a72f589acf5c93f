#!/usr/bin/env bash
# lda_repeat.sh NP [FLAGS...]: the same scheduled LDA run twice gives the same
# result bit for bit (sampler streams depend on seed, pass, data block and
# chunk only; the topic totals merge in a fixed order): exported model and
# every per-pass objective.
. "$(dirname "$0")/common.sh"

NP=$1; shift
flags=(lda --data "synth:docs=400,len=50,vocab=800,topics=10,seed=3" --topics 10 --passes 4
       --seed 21 -q "$@")
echo "np $NP, flags: ${flags[*]}"
for run in a b; do
  mpi "$NP" "$STRATA" "${flags[@]}" --metrics-out $run.json --topics-out $run >$run.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log $run.log
  expect_rc 0 "$rc" "run $run"
done
for f in word_topic.f32 doc_topics.tsv topics.txt; do
  cmp a/$f b/$f || fail "$f differs between identical runs"
  ok "$f identical"
done
pp() { json "$1" "[(p['loglik'], p['count_errors'], p['count_mismatch']) for p in m['per_pass']]"; }
[ "$(pp a.json)" = "$(pp b.json)" ] || fail "per-pass objectives differ: $(pp a.json) vs $(pp b.json)"
ok "per-pass objectives identical: $(json a.json "m['loglik_per_token']")"
echo PASS
