#!/usr/bin/env bash
# bad_input.sh CASE: one bad invocation with a coordinator and 2 workers
# (np 3) unless the case says otherwise. Every case must
#  - exit with its code: 2 for usage errors, 1 for runtime errors;
#  - print exactly one error line on stderr (besides mpiexec's own banner
#    about a non-zero exit status), naming the flag or FILE:LINE;
#  - print nothing on stdout (-q: no echo, and no summary of a failed run);
#  - finish within the time limit, with no abort, signal or crash noise;
#  - leave no output behind: no metrics JSON, no temporary file, no model;
#  - exit with the same code on every rank (recorded per rank);
#  - quote input escaped: with PRINTABLE set, stderr holds printable ASCII
#    only.
# With ULIMIT_V set, the whole job runs under `ulimit -v ULIMIT_V` (KiB).
. "$(dirname "$0")/common.sh"

CASE=$1
NP=3
PROG=("$STRATA" mf)
PREFIX="strata mf: "
METRICS=m.json
MODEL=model
MODEL_FLAG=--model-out

printf '1\t10\t4\n2\t20\t3\n3\t30\t5\n4\t10\t2\n' >good.txt
: >empty.txt
printf '1 10 4\n2 20 3\n1 x 3\n4 10 2\n' >bad.txt
printf '1\t10\t4\n2\t20\tnan\n' >nan.txt
# LDA corpora: UCI docword (D, W, NNZ, then "doc word count") and lda-c.
printf '3\n5\n4\n1 1 2\n1 3 1\n2 2 0\n3 5 1\n' >count0.txt
printf '3\n5\n4\n1 1 2\n1 3 1\n2 6 1\n3 5 1\n' >word6.txt
gzip -c word6.txt >word6.txt.gz
printf '3\n5\n5\n1 1 2\n1 3 1\n2 2 1\n' >short.txt
printf '2 0:1 1:2\n2 0:1 5:1\n' >ap.dat
printf 'a\nb\nc\n' >vocab3.txt
printf '1\t10\t4\n-2\t20\t3\n' >neg.txt
printf '1\t10\t4\n2\t20\n' >badtest.txt
# Binary garbage with a terminal colour sequence; a 2^64 - 1 id.
printf '1\t10\t4\n\001M-\033\033[31mRED\t20\t3\n' >garbage.txt
printf '2 0:1 1:2\n\001M-\033\033[31mRED 0:1\n' >garbage.dat
printf '1\t10\t4\n18446744073709551615\t20\t3\n' >hugeid.txt
# Sizes far beyond memory in a few bytes: a UCI vocabulary, an lda-c word
# id and an lda-c count of 4e9.
printf '2\n4000000000\n1\n1 4000000000 1\n' >hugevocab.txt
printf '1 4000000000:1\n' >hugeid.dat
printf '1 0:4000000000\n' >hugecount.dat
# LIBSVM classification files for mlr.
printf '1 1:0.5 3:1\n2 2:1\n1 1:1 2:0.5\n2 3:1\n' >good.svm
printf '1 1:0.5 3:1\n2:1 3:1\n' >nolabel.svm
printf '1 1:0.5\n2 0:1 3:1\n' >index0.svm
printf '1 1:0.5\n2 3:1 2:1\n' >unsorted.svm
printf '1 1:0.5\n2 1:nan\n' >nanvalue.svm

case $CASE in
  unknown-flag) WANT=2 MSG="'--bogus'" ARGS=(--data good.txt --bogus) ;;
  rank-zero) WANT=2 MSG="--rank" ARGS=(--data good.txt --rank 0) ;;
  passes-zero) WANT=2 MSG="--passes" ARGS=(--data good.txt --passes 0) ;;
  strata-one) WANT=2 MSG="--strata 1" ARGS=(--data good.txt --strata 1) ;;
  np-one) NP=1 WANT=2 MSG="--mode serial" ARGS=(--data good.txt) ;;
  missing-file) WANT=1 MSG="missing.txt: cannot open" ARGS=(--data missing.txt) ;;
  empty-file) WANT=1 MSG="empty.txt: no ratings" ARGS=(--data empty.txt) ;;
  malformed-line) WANT=1 MSG="bad.txt:3:" ARGS=(--data bad.txt) ;;
  nan-rating) WANT=1 MSG="nan.txt:2:" ARGS=(--data nan.txt) ;;
  negative-id) WANT=1 MSG="neg.txt:2:" ARGS=(--data neg.txt) ;;
  malformed-test) WANT=1 MSG="badtest.txt:2:" ARGS=(--data good.txt --test badtest.txt) ;;
  garbage-line)
    PRINTABLE=1 WANT=1 MSG="garbage.txt:2: user id '\x01M-\x1b\x1b[31mRED' is not an integer"
    ARGS=(--data garbage.txt) ;;
  huge-id)
    WANT=1 MSG="hugeid.txt:2: user id '18446744073709551615' is above the largest supported, 9223372036854775807 (2^63 - 1)"
    ARGS=(--data hugeid.txt) ;;
  metrics-missing-dir)
    METRICS=nodir/sub/m.json WANT=1 MSG="nodir/sub/m.json" ARGS=(--data good.txt) ;;
  metrics-readonly-dir)
    mkdir ro && chmod 0555 ro
    if [ "$(id -u)" = 0 ]; then
      # Root may write into a mode 0555 directory; a read-only bind mount in
      # a private mount namespace stops root too.
      if ! unshare -m sh -c "mount --bind '$PWD/ro' '$PWD/ro' && mount -o remount,ro,bind '$PWD/ro'" 2>/dev/null; then
        echo "SKIP: running as root and cannot make a read-only mount"
        exit 77
      fi
      RANKS_WRAP=(unshare -m sh -c 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"' sh "$PWD/ro")
    fi
    METRICS=ro/m.json WANT=1 MSG="ro/m.json" ARGS=(--data good.txt) ;;
  model-out-is-file)
    # The model directory's path names an existing file: refused before any
    # training, every rank exits with 1.
    echo "not a directory" >afile
    MODEL=afile WANT=1 MSG="afile: exists and is not a directory" ARGS=(--data good.txt --passes 2) ;;
  blocksum-fault-after-passes)
    # A failure on rank 0 after the passes (blocksum's export checks catch a
    # planted fault): the workers are done by then, and must still exit with
    # rank 0's code.
    PROG=("$STRATA_BLOCKSUM") PREFIX="strata_blocksum: "
    # Its report of the failed check in the model directory is wanted output.
    KEEP_MODEL=1 WANT=1 MSG="check" ARGS=(--fault sum) ;;
  blocksum-strata-one)
    PROG=("$STRATA_BLOCKSUM") PREFIX="strata_blocksum: "
    WANT=2 MSG="--strata 1" ARGS=(--strata 1) ;;
  lda-*) PROG=("$STRATA" lda) PREFIX="strata lda: " MODEL_FLAG=--topics-out ;;&
  lda-count-zero) WANT=1 MSG="count0.txt:6: count 0" ARGS=(--data count0.txt) ;;
  lda-word-beyond-vocab) WANT=1 MSG="word6.txt:6: wordID 6" ARGS=(--data word6.txt) ;;
  lda-word-beyond-vocab-gz) WANT=1 MSG="word6.txt.gz:6: wordID 6" ARGS=(--data word6.txt.gz) ;;
  lda-truncated) WANT=1 MSG="short.txt:6: truncated" ARGS=(--data short.txt) ;;
  lda-ldac-beyond-vocab) WANT=1 MSG="ap.dat:2: word id 5" ARGS=(--data ap.dat --vocab vocab3.txt) ;;
  lda-missing-file) WANT=1 MSG="missing.dat: cannot open" ARGS=(--data missing.dat) ;;
  lda-bad-synth) WANT=2 MSG="--data synth: bad value 'x' for 'docs'" ARGS=(--data synth:docs=x) ;;
  lda-topics-zero) WANT=2 MSG="--topics" ARGS=(--topics 0) ;;
  lda-bad-sampler) WANT=2 MSG="--sampler: 'foo' is not one of exact|warp" ARGS=(--sampler foo) ;;
  # Memory before work: a model too large for the host is refused after
  # loading, before any block is shipped (--mem-limit stands for a small
  # host), naming the estimate and what to change.
  # Factors far too large for any host here: refused by load before it
  # allocates them (a 2-core test machine has far less than 67 GB).
  mf-rank-far-too-large)
    WANT=1 MSG="at rank 4096 need about 67.2 GB, but this host has"
    ARGS=(--data synth:users=1000,items=1000,ratings=2000 --duplicate 2048 --rank 4096) ;;
  mf-too-large-for-host)
    WANT=1 MSG="which has 10.0 MB available (--mem-limit): the coordinator"
    ARGS=(--data synth:users=2000,items=500,ratings=20000 --rank 400 --mem-limit 0.01) ;;
  # (Load's own estimate, 61 MB, fits in the limit: the run's does not.)
  lda-too-large-for-host)
    WANT=1 MSG="MB each (parameters"
    ARGS=(--data synth:docs=2000,len=20,vocab=3000,topics=5 --topics 3000 --mem-limit 0.1) ;;
  # Sizes far beyond the memory available are refused at the line that
  # declares them, before anything is allocated for them (a few seconds
  # at most), under a 4 GiB address-space limit, or --mem-limit.
  lda-huge-vocab)
    ULIMIT_V=4194304 WANT=1
    MSG="hugevocab.txt:2: vocabulary size W 4000000000: the corpus (2 documents, 4000000000 words, 0 tokens) at K=5 topics needs about"
    ARGS=(--data hugevocab.txt --topics 5) ;;
  lda-huge-word-id)
    ULIMIT_V=4194304 WANT=1 MSG="hugeid.dat:1: pair 4000000000:1: the corpus (1 document, 4000000001 words, 1 token)"
    ARGS=(--data hugeid.dat --topics 5) ;;
  lda-huge-count)
    ULIMIT_V=4194304 WANT=1 MSG="hugecount.dat:1: pair 0:4000000000: the corpus (1 document, 1 word, 4000000000 tokens)"
    ARGS=(--data hugecount.dat --topics 5) ;;
  lda-huge-count-serial)
    NP=1 ULIMIT_V=4194304 WANT=1 MSG="hugecount.dat:1: pair 0:4000000000"
    ARGS=(--mode serial --data hugecount.dat --topics 5) ;;
  lda-huge-word-id-mem-limit)
    WANT=1 MSG="hugeid.dat:1: pair 4000000000:1: the corpus (1 document, 4000000001 words, 1 token) at K=5 topics needs about 208.0 GB, but this host has 2.0 GB available (--mem-limit): lower --topics"
    ARGS=(--data hugeid.dat --topics 5 --mem-limit 2) ;;
  lda-garbage-line)
    PRINTABLE=1 WANT=1 MSG="garbage.dat:2: pair count '\x01M-\x1b\x1b[31mRED' is not an integer"
    ARGS=(--data garbage.dat) ;;
  mlr-*) PROG=("$STRATA" mlr) PREFIX="strata mlr: " ;;&
  mlr-missing-label) WANT=1 MSG="nolabel.svm:2:" ARGS=(--mode sfb --data nolabel.svm) ;;
  mlr-index-zero) WANT=1 MSG="index0.svm:2:" ARGS=(--mode sfb --data index0.svm) ;;
  mlr-index-not-increasing) WANT=1 MSG="unsorted.svm:2:" ARGS=(--mode sfb --data unsorted.svm) ;;
  mlr-value-nan) WANT=1 MSG="nanvalue.svm:2:" ARGS=(--mode sfb --data nanvalue.svm) ;;
  mlr-test-bad) WANT=1 MSG="index0.svm:2:" ARGS=(--mode sfb --data good.svm --test index0.svm) ;;
  mlr-missing-file) WANT=1 MSG="missing.svm: cannot open" ARGS=(--mode sfb --data missing.svm) ;;
  # 50,000 classes x 20,001 rows of W: 4 GB, more than a worker's block may be.
  mlr-too-large)
    WANT=1 MSG="too large" ARGS=(--mode sfb --data synth:classes=50000,features=20000,nnz=2,samples=10,test=0) ;;
  mlr-peers-zero) WANT=2 MSG="--peers" ARGS=(--mode sfb --peers 0 --data good.svm) ;;
  mlr-peers-all) WANT=2 MSG="--peers 2" ARGS=(--mode sfb --peers 2 --data good.svm) ;;
  mlr-peers-not-sfb) WANT=2 MSG="--peers" ARGS=(--mode bsp --peers 1 --data good.svm) ;;
  mlr-scheduled) WANT=2 MSG="--mode scheduled" ARGS=(--data good.svm) ;;
  mlr-depth) WANT=2 MSG="--depth 2" ARGS=(--mode sfb --depth 2 --data good.svm) ;;
  mlr-wpc) WANT=2 MSG="--wpc" ARGS=(--mode ssp --wpc 0.5 --data good.svm) ;;
  mlr-sfb-wpc) WANT=2 MSG="--wpc" ARGS=(--mode sfb --wpc 0.5 --data good.svm) ;;
  sfb-not-sf-app) WANT=2 MSG="--mode sfb" ARGS=(--mode sfb --data good.txt) ;;
  *) fail "unknown case $CASE" ;;
esac

if [ -n "${ULIMIT_V:-}" ]; then
  if ldd "${PROG[0]}" 2>/dev/null | grep -q libasan; then
    # AddressSanitizer maps terabytes of shadow memory: no ulimit -v holds
    # it. The run's limit stands in for it.
    ARGS+=(--mem-limit 4)
    echo "AddressSanitizer build: --mem-limit 4 instead of ulimit -v $ULIMIT_V"
  else
    RANKS_WRAP=(sh -c "ulimit -v $ULIMIT_V && exec \"\$@\"" sh)
    echo "under ulimit -v $ULIMIT_V"
  fi
fi
echo "case $CASE: np $NP: ${PROG[*]} ${ARGS[*]} -q --metrics-out $METRICS $MODEL_FLAG $MODEL"
start=$(date +%s.%N)
cmd=("${PROG[@]}" "${ARGS[@]}" -q --metrics-out "$METRICS" "$MODEL_FLAG" "$MODEL")
mpi_wrapped "$NP" "${cmd[@]}" >stdout.txt 2>stderr.txt
rc=$?
secs=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$(date +%s.%N)")
echo "exit code $rc after ${secs}s"
echo "---- stderr"; cat stderr.txt
echo "---- stdout"; cat stdout.txt
echo "----"
expect_rc "$WANT" "$rc" "$CASE"

expect_one_error stderr.txt "$PREFIX" "$MSG"
if [ -n "${PRINTABLE:-}" ]; then
  # Input quoted in a message is escaped: no control byte reaches stderr.
  if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f-\xff]' stderr.txt; then
    fail "stderr holds control or non-ASCII bytes"
  fi
  ok "stderr is printable ASCII"
fi
[ -s stdout.txt ] && fail "stdout is not empty"
left=$(find . -path ./model -prune -o \( -name 'm.json*' -o -name '*.tmp*' \) -print; [ -e model ] && [ -z "${KEEP_MODEL:-}" ] && echo ./model)
[ "$MODEL" = afile ] && [ "$(cat afile)" != "not a directory" ] && left="$left afile (changed)"
[ -z "$left" ] || fail "left behind: $left"
ok "no metrics file, temporary file or model left behind"
rank_codes "$NP" "${cmd[@]}"
expect_rank_codes "$NP" "$WANT"
echo PASS
