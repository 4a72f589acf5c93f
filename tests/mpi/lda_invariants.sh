#!/usr/bin/env bash
# lda_invariants.sh NP MODE [FLAGS...]: LDA's count checks after every pass
# (NP 0 runs --mode serial without mpiexec):
#  - count_errors == 0 at every pass in every mode: each document's topic
#    counts equal its tokens' topics, word-topic counts are whole, >= 0 and
#    sum to the word's tokens, totals sum to the corpus (these hold even for
#    stale parameter-server reads: every delta moves counts within a row);
#  - count_mismatch == 0 (documents, words and totals agree per topic) at
#    every pass in every mode: parameter-server modes score each pass on the
#    table's pure snapshot at its last clock, which holds exactly the word
#    and total counts of every worker's sweeps up to that pass;
#  - the log-likelihood per token improves from pass 1 to the last;
#  - tokens_per_s and the per-pass fields are in the metrics, and the
#    sampler (--sampler, exact unless given).
. "$(dirname "$0")/common.sh"

NP=$1 MODE=$2; shift 2
flags=(lda --mode "$MODE" --data "synth:docs=400,len=50,vocab=800,topics=10,seed=3" --topics 10
       --passes 5 -q --metrics-out m.json "$@")
echo "np $NP: ${flags[*]}"
if [ "$NP" = 0 ]; then
  timeout "$RUN_LIMIT" "$STRATA" "${flags[@]}" >run.log 2>&1
else
  mpi "$NP" "$STRATA" "${flags[@]}" >run.log 2>&1
fi
rc=$?; [ "$rc" = 0 ] || show_log run.log
expect_rc 0 "$rc" "$MODE"
echo "per pass (loglik_per_token, count_errors, count_mismatch):"
json m.json "[(round(p['loglik_per_token'], 4), p['count_errors'], p['count_mismatch']) for p in m['per_pass']]"
[ "$(json m.json "len(m['per_pass'])")" = 5 ] || fail "expected 5 passes in per_pass"
[ "$(json m.json "all(p['count_errors'] == 0 for p in m['per_pass'])")" = true ] ||
  fail "count_errors at some pass"
ok "count_errors 0 at every pass"
want="all(p['count_mismatch'] == 0 for p in m['per_pass'])"
[ "$(json m.json "$want and m['count_mismatch'] == 0")" = true ] || fail "count_mismatch: $want"
ok "count_mismatch 0 ($want)"
[ "$(json m.json "m['per_pass'][-1]['loglik_per_token'] > m['per_pass'][0]['loglik_per_token']")" = true ] ||
  fail "log-likelihood per token did not improve"
ok "loglik per token improved"
[ "$(json m.json "m['tokens_per_s'] > 0 and m['tokens'] == m['examples'] and m['time_per_pass_s'] > 0")" = true ] ||
  fail "tokens_per_s / tokens / time_per_pass_s missing"
ok "tokens/s $(json m.json "round(m['tokens_per_s'])"), time per pass $(json m.json "m['time_per_pass_s']")"
sampler=exact
for ((a = 1; a < $#; a++)); do
  b=$((a + 1))
  [ "${!a}" = --sampler ] && sampler=${!b}
done
[ "$(json m.json "m['sampler']")" = "$sampler" ] || fail "the metrics' sampler is not $sampler"
ok "sampler $sampler in the metrics"
echo PASS
