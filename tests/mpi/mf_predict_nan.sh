#!/usr/bin/env bash
# mf_predict_nan.sh: mf-predict refuses a model holding a non-finite value.
# A small serial run exports a model; one float of a copy is then patched
# to NaN or infinity (a factor of W or H, a bias, mu). Every query of the
# patched copy must exit 1 with one error line naming the file, the row (and
# the column of a factor), print nothing on stdout, and leave no --out file
# or temporary file behind; the untouched model must still answer.
. "$(dirname "$0")/common.sh"

mpi 1 "$STRATA" mf --mode serial --data synth:users=50,items=40,ratings=2000,rank=4,seed=3 \
  --rank 4 --passes 2 -q --model-out model >run.log 2>&1
rc=$?; [ "$rc" = 0 ] || show_log run.log
expect_rc 0 "$rc" "training"

timeout "$RUN_LIMIT" "$STRATA" mf-predict --model model --users 7 --top 3 >good.out 2>good.err
rc=$?; [ "$rc" = 0 ] || show_log good.err
expect_rc 0 "$rc" "mf-predict on the untouched model"
[ "$(wc -l <good.out)" = 3 ] || fail "expected 3 lines, got $(wc -l <good.out)"

printf '7\t3\t1\n8\t4\t1\n' >pairs.tsv

# patch_model FILE INDEX VALUE: copies model to bad/ and sets float INDEX of FILE
# (a .f32 file) to VALUE (nan, inf or -inf).
patch_model() {
  rm -rf bad && cp -r model bad || fail "cannot copy the model"
  python3 - "bad/$1" "$2" "$3" <<'PY' || fail "cannot patch bad/$1"
import struct, sys
path, index, value = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(path, "r+b") as f:
    f.seek(4 * index)
    f.write(struct.pack("<f", value))
PY
}

# refused WHAT TEXT ARGS...: mf-predict with ARGS on bad/ exits 1, prints one
# error line containing TEXT and nothing on stdout, and writes no file.
refused() {
  local what=$1 text=$2
  shift 2
  rm -f out.tsv
  timeout "$RUN_LIMIT" "$STRATA" mf-predict --model bad "$@" >pred.out 2>pred.err
  local rc=$?
  cat pred.err
  expect_rc 1 "$rc" "$what"
  expect_one_error pred.err "strata mf-predict: bad/" "$text"
  [ -s pred.out ] && { cat pred.out; fail "$what: output on stdout"; }
  [ -e out.tsv ] && fail "$what: out.tsv written"
  leftovers=$(ls -A | grep -E '\.tmp\.|\.probe\.' || true)
  [ -z "$leftovers" ] || fail "$what: temporary files left: $leftovers"
  ok "$what: nothing written"
}

# W is users x k, row-major: float 7 * 4 + 2 is user 7's (row 8's) column 3.
patch_model W.f32 30 nan
refused "NaN in W, --users --out" "bad/W.f32: row 8 (user 7), column 3: non-finite value nan" \
  --users 7 --top 3 --out out.tsv
refused "NaN in W, --pairs" "bad/W.f32: row 8 (user 7), column 3: non-finite value nan" \
  --pairs pairs.tsv
# A NaN in a row no query touches is refused all the same.
patch_model H.f32 $((39 * 4)) inf
refused "inf in H" "bad/H.f32: row 40 (item 39), column 1: non-finite value inf" \
  --users 7 --top 3 --out out.tsv
patch_model bu.f32 0 -inf
refused "-inf in bu" "bad/bu.f32: row 1 (user 0): non-finite value -inf" --pairs pairs.tsv
patch_model bi.f32 5 nan
refused "NaN in bi" "bad/bi.f32: row 6 (item 5): non-finite value nan" --users all --top 1
# mu is written as null when it is not finite.
rm -rf bad && cp -r model bad
sed -i 's/"mu": [^,]*/"mu": null/' bad/meta.json
refused "mu null" "bad/meta.json: mu: non-finite value nan" --pairs pairs.tsv --out out.tsv
echo PASS
