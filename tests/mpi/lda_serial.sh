#!/usr/bin/env bash
# lda_serial.sh [FLAGS...]: LDA with one worker runs the same load, schedule and
# sampler streams as --mode serial, so scheduled P = 1 and bsp P = 1 must
# agree with serial bit for bit: the exported word-topic counts, the
# doc-topic proportions, the top words and every objective in the metrics.
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
  for f in word_topic.f32 doc_topics.tsv topics.txt; do
    [ -s $mode/$f ] || fail "$mode/$f missing or empty"
    cmp $mode/$f serial/$f || fail "$f differs between $mode P = 1 and serial"
    ok "$f identical in $mode and serial ($(stat -c %s serial/$f) bytes)"
  done
  a=$(objs $mode.json); b=$(objs serial.json)
  [ "$(echo "$a" | grep -c '"loglik"')" -ge 5 ] || fail "loglik missing (need the last and 4 passes)"
  [ "$a" = "$b" ] || { echo "$a"; echo "$b"; fail "objective strings differ ($mode vs serial)"; }
  ok "every objective string identical ($mode vs serial)"
done
echo PASS
