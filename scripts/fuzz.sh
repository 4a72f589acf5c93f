#!/usr/bin/env bash
# Fuzzes strata's parsers with libFuzzer (tests/fuzz/README.md):
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# builds the clang fuzz build (build-fuzz, STRATA_FUZZ=ON), makes each
# target's seeds from slices of the real files in the shared data
# (STRATA_SHARED_DATA, default ../shared/data beside the checkout) plus
# tests/fuzz/regress/TARGET/, runs each target for SECONDS (default 60),
# one after the other, and prints one line per target: executions, exec/s,
# coverage (cov, ft), corpus size and what it found. Exit status 1 when any
# target found a crash, hang, leak, out-of-memory or sanitizer report (the
# input is under build-fuzz/fuzz/TARGET/artifacts/, the report in its
# log.txt), 77 when clang or libFuzzer's runtime is missing, 2 for bad usage.
#
# Environment: STRATA_FUZZ_BUILD (build directory, default build-fuzz),
# STRATA_FUZZ_JOBS (build jobs, default all cores), STRATA_FUZZ_FRESH=1
# (start from the seeds alone, forgetting the corpus earlier runs grew),
# STRATA_FUZZ_FLAGS (more libFuzzer flags, e.g. -use_value_profile=1).
# Run by hand beside other work, `nice -n 19 scripts/fuzz.sh 600` keeps it
# out of the way.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
cd "$STRATA_ROOT"

secs=60
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
if [ "$secs" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
  exit 2
fi
build=${STRATA_FUZZ_BUILD:-build-fuzz}
data=${STRATA_SHARED_DATA:-$STRATA_ROOT/../shared/data}
jobs=${STRATA_FUZZ_JOBS:-$(nproc)}

# ---- the toolchain ----------------------------------------------------------
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: clang is not installed (scripts/setup.sh installs it): no fuzzing" >&2
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return d && n; }\n' \
  >"$probe/probe.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/probe.c" -o "$probe/probe" \
  >"$probe/log" 2>&1; then
  echo "fuzz: clang cannot link libFuzzer (Debian: libclang-rt-dev): no fuzzing" >&2
  sed 's/^/  /' "$probe/log" | head -5 >&2
  exit 77
fi

# ---- the build --------------------------------------------------------------
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DSTRATA_FUZZ=ON -DSTRATA_BUILD_TESTS=OFF \
  -DSTRATA_BUILD_BENCH=OFF -DSTRATA_NATIVE=OFF -DCMAKE_BUILD_TYPE=Debug -DSTRATA_WERROR=ON \
  >"$probe/configure.log" 2>&1 || { cat "$probe/configure.log" >&2; exit 1; }
cmake --build "$build" --target fuzz_all -j"$jobs" >"$probe/build.log" 2>&1 ||
  { cat "$probe/build.log" >&2; exit 1; }

mapfile -t all <"$build/fuzz_targets.txt"
if [ $# -eq 0 ]; then
  set -- "${all[@]}"
fi
for t in "$@"; do
  if [[ " ${all[*]} " != *" $t "* ]]; then
    echo "fuzz: no target '$t' (targets: ${all[*]})" >&2
    exit 2
  fi
done

# ---- seeds ------------------------------------------------------------------
# A reader target's input starts with two header bytes (tests/fuzz/fuzz.h):
# the target's choice in the low nibble of the first (a format, a mode),
# how the rest reaches the file in its high nibble (0 as is, 8 gzip), and
# 0 for no injected allocation failure.
have_data=1
if [ ! -d "$data" ]; then
  have_data=0
  echo "fuzz: the shared data ($data) is absent: seeds come from tests/fuzz/regress alone" \
       "(set STRATA_SHARED_DATA to its folder)" >&2
fi

# seed NAME BYTE0: stdin, after the header BYTE0 (two hex digits) and 00,
# becomes the seed NAME, cut to the target's max_len.
seed() {
  { printf '%b' "\\x$2\\x00"; cat; } | head -c "$max_len" >"$seeds/$1"
}
# have FILE: whether the shared file is there (seeds from it are skipped if not).
have() {
  [ -r "$data/$1" ]
}

seeds_ratings() {
  local u=movielens-100k/u.data csv=movielens-latest-small/ratings.csv
  if have $u; then
    head -50 "$data/$u" | seed tsv-auto 00
    head -200 "$data/$u" | seed tsv 01
    head -50 "$data/$u" | seed tsv-gz 81
    head -50 "$data/$u" | seed tsv-test 09
    head -100 "$data/$u" | gzip -c | seed tsv-gzipfile 00
    head -100 "$data/$u" | sed 's/\t/::/g' | seed dat 02
    head -20 "$data/$u" | sed 's/\t/::/g' | seed dat-auto 00
    head -100 "$data/$u" | cut -f1-3 | tr '\t' ' ' | seed libmf 04
    head -20 "$data/$u" | cut -f1-3 | tr '\t' ' ' | seed libmf-test 0c
    # 551 items: past 512 ids, where an id map grows.
    head -1000 "$data/$u" | cut -f1-3 | tr '\t' ' ' | seed libmf-many 0c
    { printf '%%%%MatrixMarket matrix coordinate real general\n%% from u.data\n943 1682 100\n'
      head -100 "$data/$u" | cut -f1-3 | tr '\t' ' '; } | seed mm 05
    { printf '%%%%MatrixMarket matrix coordinate integer general\n943 1682 20\n'
      head -20 "$data/$u" | cut -f1-3; } | seed mm-auto 08
  fi
  have movielens-100k/ua.test && head -30 "$data/movielens-100k/ua.test" | seed uatest 01
  if have $csv; then
    head -50 "$data/$csv" | seed csv 03
    head -150 "$data/$csv" | seed csv-auto 00
    head -50 "$data/$csv" | seed csv-gz 83
    head -30 "$data/$csv" | seed csv-test 0b
  fi
  # Files of other shapes: each reader must refuse them cleanly.
  have snap-wiki-vote/wiki-Vote.txt && head -20 "$data/snap-wiki-vote/wiki-Vote.txt" | seed snap 00
  have movielens-100k/u.item && head -10 "$data/movielens-100k/u.item" | seed uitem 00
  return 0
}

seeds_corpus() {
  local kos=uci-bow-kos/docword.kos.txt.gz ap=lda-c-ap/ap.dat
  if have $kos; then
    # The first entries, under a header that counts them.
    zcat "$data/$kos" | tail -n +4 | head -150 >"$probe/uci"
    { printf '%s\n6906\n%s\n' "$(tail -1 "$probe/uci" | cut -d' ' -f1)" "$(wc -l <"$probe/uci")"
      cat "$probe/uci"; } >"$probe/uci.txt"
    seed uci 01 <"$probe/uci.txt"
    seed uci-auto 03 <"$probe/uci.txt"
    seed uci-vocab50 09 <"$probe/uci.txt"
    seed uci-gz 81 <"$probe/uci.txt"
    gzip -c <"$probe/uci.txt" | seed uci-gzipfile 03
    # The real file's gzip stream, cut short.
    head -c 3000 "$data/$kos" | seed kos-cut 03
  fi
  if have $ap; then
    head -3 "$data/$ap" | seed ldac 02
    head -2 "$data/$ap" | seed ldac-auto 03
    head -2 "$data/$ap" | seed ldac-vocab 0e
    head -2 "$data/$ap" | seed ldac-gz 82
    head -2 "$data/$ap" | gzip -c | seed ldac-gzipfile 00
    # The last document: trailing blanks and no final newline.
    tail -n 1 "$data/$ap" | seed ldac-last 02
  fi
  return 0
}

seeds_vocab() {
  local kos=uci-bow-kos/vocab.kos.txt ap=lda-c-ap/vocab.txt
  if have $kos; then
    head -200 "$data/$kos" | seed kos 00
    head -100 "$data/$kos" | sed 's/$/\r/' | seed kos-crlf 00
    head -200 "$data/$kos" | seed kos-gz 80
  fi
  if have $ap; then
    head -200 "$data/$ap" | seed ap 00
    head -100 "$data/$ap" | gzip -c | seed ap-gzipfile 00
  fi
  return 0
}

seeds_libsvm() {
  local dna=libsvm-dna/dna.scale sat=libsvm-satimage/satimage.scale
  if have $dna; then
    head -12 "$data/$dna" | seed dna 00
    head -12 "$data/$dna" | seed dna-test 01
    head -12 "$data/$dna" | seed dna-100 02
    head -12 "$data/$dna" | seed dna-gz 80
    head -12 "$data/$dna" | gzip -c | seed dna-gzipfile 01
  fi
  have $dna.t && head -8 "$data/$dna.t" | seed dnat 01
  if have $sat; then
    head -9 "$data/$sat" | seed satimage 00
    head -9 "$data/$sat" | seed satimage-test 03
    head -9 "$data/$sat" | seed satimage-gz 81
  fi
  have $sat.t && head -5 "$data/$sat.t" | sed 's/$/ # a comment/' | seed satimaget 00
  return 0
}

seeds_graph() {
  local wiki=snap-wiki-vote/wiki-Vote.txt enron=snap-email-enron/email-Enron.txt
  local fb=snap-ego-facebook/facebook_combined.txt.gz
  if have $wiki; then
    head -60 "$data/$wiki" | seed wiki 00
    head -60 "$data/$wiki" | seed wiki-gz 80
    head -60 "$data/$wiki" | sed 's/$/\r/' | seed wiki-crlf 00
    # As Matrix Market: the ids as row and column numbers.
    { printf '%%%%MatrixMarket matrix coordinate pattern general\n%% from wiki-Vote\n9000 9000 50\n'
      grep -v '^#' "$data/$wiki" | head -50; } | seed wiki-mm 00
    { printf '%%%%MatrixMarket matrix coordinate pattern symmetric\n9000 9000 20\n'
      grep -v '^#' "$data/$wiki" | head -20; } | seed wiki-mm-gz 80
  fi
  have $enron && head -40 "$data/$enron" | seed enron 00
  # The real file's gzip stream, cut short.
  have $fb && head -c 2000 "$data/$fb" | seed facebook-cut 00
  return 0
}

seeds_lasso() {
  local dia=lasso-diabetes/diabetes.tab.txt
  if have $dia; then
    head -30 "$data/$dia" | seed diabetes 02
    head -30 "$data/$dia" | seed diabetes-standardize 06
    head -30 "$data/$dia" | seed diabetes-gz 82
    # As svmlight: the target first, then the nonzero features.
    head -40 "$data/$dia" | tail -n +2 |
      awk '{ printf "%s", $NF; for (i = 1; i < NF; i++) if ($i != 0) printf " %d:%s", i, $i; print "" }' |
      seed diabetes-svm 00
  fi
  return 0
}

# A target without a seeds_ function (the spec and option parsers, which read
# no files) starts from the hand-made inputs of tests/fuzz/regress alone.

max_len_of() {
  case $1 in
    synth) echo 256 ;;
    options) echo 1024 ;;
    corpus) echo 8192 ;;
    ratings) echo 12288 ;;
    *) echo 4096 ;;
  esac
}

# ---- runs -------------------------------------------------------------------
# Each target reads its file from a directory of this run, removed at the
# end even when a crash skips the target's own clean-up.
scratch=$(mktemp -d "${TMPDIR:-/dev/shm}/strata-fuzz-run.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$probe" "$scratch"' EXIT

# field LINE KEY: the value after "KEY: " in a libFuzzer status line.
field() {
  local v
  v=$(sed -n "s/.* $2: \\([^ ]*\\).*/\\1/p" <<<"$1")
  echo "${v:-?}"
}

failed=()
for t in "$@"; do
  dir=$build/fuzz/$t
  seeds=$dir/seeds
  max_len=$(max_len_of "$t")
  rm -rf "$seeds"
  mkdir -p "$seeds" "$dir/corpus" "$dir/artifacts"
  if [ -n "${STRATA_FUZZ_FRESH:-}" ]; then
    rm -rf "$dir/corpus"
    mkdir -p "$dir/corpus"
  fi
  # head cuts the slices short: the writers it stops are no failure.
  set +o pipefail
  if [ "$have_data" = 1 ] && declare -F "seeds_$t" >/dev/null; then "seeds_$t"; fi
  set -o pipefail
  flags=(-max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048
         -print_final_stats=1 -artifact_prefix="$dir/artifacts/")
  [ -f "tests/fuzz/dict/$t.dict" ] && flags+=(-dict="tests/fuzz/dict/$t.dict")
  # shellcheck disable=SC2206
  flags+=(${STRATA_FUZZ_FLAGS:-})
  regress=()
  [ -d "tests/fuzz/regress/$t" ] && regress=("tests/fuzz/regress/$t")
  rc=0
  start=$SECONDS
  TMPDIR=$scratch \
    "$build/tests/fuzz/fuzz_$t" "${flags[@]}" "$dir/corpus" "$seeds" "${regress[@]}" \
    >"$dir/log.txt" 2>&1 || rc=$?

  took=$((SECONDS - start))
  last=$(grep -aE '^#[0-9]+' "$dir/log.txt" | grep -a 'cov:' | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log.txt" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log.txt" | tail -1)
  corp=$(field "$last" corp)
  [ "$corp" != "?" ] || corp=?/?
  found=$(grep -a 'Test unit written to' "$dir/log.txt" | sed 's/.*Test unit written to //' || true)
  count() { grep -c "/$1-" <<<"$found" || true; }
  crashes=$(count crash) timeouts=$(count timeout) leaks=$(count leak) ooms=$(count oom)
  verdict=ok
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    verdict="FAILED (exit $rc; log $dir/log.txt)"
    failed+=("$t")
  fi
  printf 'fuzz_%s: %s execs in %s s (%s/s), cov %s ft %s, corpus %s inputs (%s), crashes %s timeouts %s leaks %s ooms %s: %s\n' \
    "$t" "${execs:-?}" "$took" "${rate:-?}" "$(field "$last" cov)" "$(field "$last" ft)" \
    "${corp%%/*}" "${corp#*/}" "$crashes" "$timeouts" "$leaks" "$ooms" "$verdict"
  if [ "$verdict" != ok ]; then
    grep -aE 'ERROR: |runtime error:|^fuzz: |SUMMARY: ' "$dir/log.txt" | head -5 | sed 's/^/  /'
    if [ -n "$found" ]; then sed 's/^/  input: /' <<<"$found"; fi
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${failed[*]} found problems; each input becomes a regression case" \
       "(tests/fuzz/README.md)" >&2
  exit 1
fi
