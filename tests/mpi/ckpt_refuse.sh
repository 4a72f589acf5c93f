#!/usr/bin/env bash
# ckpt_refuse.sh CASE: --resume and --checkpoint refuse what would not be
# the same run, or a checkpoint that is not whole, with one clear line and
# the same exit code on every rank, before any pass. A checkpoint after 3
# passes of MF (2 workers) is made first; each case then runs against it.
. "$(dirname "$0")/common.sh"

CASE=$1
base=(mf --data "synth:users=300,items=200,ratings=6000" --rank 8 -q)
mpi 3 "$STRATA" "${base[@]}" --passes 3 --checkpoint ck --checkpoint-every 3 >make.log 2>&1 ||
  { show_log make.log; fail "making the checkpoint failed"; }
ok "made ck/pass-000003"

np=3 want=2 prog="strata mf: "
args=("${base[@]}" --passes 5 --resume ck)
case $CASE in
  none) mkdir empty; args=("${base[@]}" --resume empty); text="--resume empty: no complete checkpoint there" ;;
  exists) args=("${base[@]}" --checkpoint ck); text="--checkpoint ck holds a checkpoint (after 3 passes)" ;;
  app) args=(lda --data "synth:docs=50,len=20,vocab=100,topics=4" --topics 4 -q --resume ck)
       text="is of app mf, not lda" prog="strata lda: " ;;
  setting) args=("${args[@]}" --rank 16); text="was made with --rank 8; this run has --rank 16" ;;
  mode) args=("${args[@]}" --mode ssp); text="was made with --mode scheduled; this run has --mode ssp" ;;
  workers) np=4; text="was made with 2 workers; this run has 3" ;;
  data) args=(mf --data "synth:users=300,items=200,ratings=6001" --rank 8 -q --passes 5 --resume ck)
        text="was made on other data" ;;
  passes) args=("${base[@]}" --passes 2 --resume ck); text="holds 3 passes, more than --passes 2" ;;
  missing-part) rm ck/pass-000003/worker-1.bin; want=1; text="worker-1.bin: missing" ;;
  damaged-part) printf '\x01' | dd of=ck/pass-000003/worker-0.bin bs=1 seek=100 conv=notrunc 2>/dev/null
                want=1; text="worker-0.bin: damaged: checksum" ;;
  bad-manifest) head -c 200 ck/pass-000003/manifest.json >m && mv m ck/pass-000003/manifest.json
                want=1; text="manifest.json: line " ;;
  *) fail "unknown case $CASE" ;;
esac
echo "case $CASE: np $np: ${args[*]}"
mpi "$np" "$STRATA" "${args[@]}" >out.txt 2>err.txt
rc=$?
expect_rc "$want" "$rc" "$CASE"
expect_one_error err.txt "$prog" "$text"
[ -s out.txt ] && fail "a summary was printed"
[ "$(ls ck)" = pass-000003 ] || fail "ck changed: $(ls ck)"
rank_codes "$np" "$STRATA" "${args[@]}"
expect_rank_codes "$np" "$want"
echo PASS
