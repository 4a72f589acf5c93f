#!/usr/bin/env bash
# lda_real.sh: the real corpora from ../shared/data read end to end: UCI KOS
# (gzipped docword) and lda-c AP with their vocabularies, 2 workers, a few
# passes: the corpus sizes data/README.md gives, improving log-likelihood,
# no count errors, and topics.txt naming words from the vocabulary.
. "$(dirname "$0")/common.sh"

D=${STRATA_SHARED_DATA:-}
KOS=$D/uci-bow-kos AP=$D/lda-c-ap
if [ -z "$D" ] || [ ! -f "$KOS/docword.kos.txt.gz" ] || [ ! -f "$AP/ap.dat" ]; then
  echo "SKIP: ../shared/data/uci-bow-kos or lda-c-ap not found"
  exit 77
fi
check() { # NAME DOCS TOKENS ARGS...
  local name=$1 docs=$2 tokens=$3; shift 3
  mpi 3 "$STRATA" lda "$@" --topics 20 --passes 5 -q --metrics-out $name.json \
    --topics-out $name >$name.log 2>&1
  rc=$?; [ "$rc" = 0 ] || show_log $name.log
  expect_rc 0 "$rc" "$name"
  [ "$(json $name.json "m['docs']")" = "$docs" ] || fail "$name: docs $(json $name.json "m['docs']"), expected $docs"
  [ "$(json $name.json "m['tokens']")" = "$tokens" ] || fail "$name: tokens $(json $name.json "m['tokens']"), expected $tokens"
  ok "$name: $docs documents, $tokens tokens"
  [ "$(json $name.json "m['count_errors'] == 0 and m['count_mismatch'] == 0 and m['per_pass'][-1]['loglik_per_token'] > m['per_pass'][0]['loglik_per_token']")" = true ] ||
    fail "$name: count errors or no improvement"
  ok "$name: loglik per token $(json $name.json "round(m['per_pass'][0]['loglik_per_token'], 3)") -> $(json $name.json "round(m['loglik_per_token'], 3)")"
  [ "$(grep -c '^topic ' $name/topics.txt)" = 20 ] || fail "$name: topics.txt does not list 20 topics"
  head -3 $name/topics.txt
}
check kos 3430 467714 --data "$KOS/docword.kos.txt.gz" --vocab "$KOS/vocab.kos.txt"
grep -q -w -e government -e bush -e iraq kos/topics.txt || fail "kos: no vocabulary words in topics.txt"
check ap 2246 435838 --data "$AP/ap.dat" --vocab "$AP/vocab.txt"
echo PASS
