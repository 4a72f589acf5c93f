#!/usr/bin/env bash
# ckpt_modes.sh NP ARGS...: a checkpoint holds exactly the updates of the
# passes before it, in every mode, and a run resumed from it goes on right.
# strata_ckptsum (tests/apps/ckptsum.c) adds p + 1 to every row in pass p,
# so its model after k passes is known in closed form; its export checks
# every row against that replay.
#  1. 5 passes with --checkpoint-every 3: ck holds the checkpoint after 3
#     passes and nothing else;
#  2. --resume with --passes 3: nothing runs, and the export is the
#     checkpoint's model: it must equal the replay of passes 1..3 exactly
#     (in the parameter-server modes: the pure snapshot of the pass's last
#     clock, taken while the workers went on);
#  3. --resume with --passes 6: the run goes on from the checkpoint, and
#     its model is the replay of passes 1..6.
# NP 0 runs --mode serial without mpiexec.
. "$(dirname "$0")/common.sh"
: "${STRATA_CKPTSUM:?STRATA_CKPTSUM must be set}"

NP=$1
shift
echo "ckptsum: np $NP, flags: $*"

run() { # run NAME ARGS...
  local name=$1 rc
  shift
  if [ "$NP" = 0 ]; then
    timeout "$RUN_LIMIT" "$STRATA_CKPTSUM" "$@" --mode serial -q >"$name.log" 2>&1
  else
    mpi "$NP" "$STRATA_CKPTSUM" "$@" -q >"$name.log" 2>&1
  fi
  rc=$?
  [ "$rc" = 0 ] || show_log "$name.log"
  expect_rc 0 "$rc" "$name"
}

run first "$@" --passes 5 --checkpoint ck --checkpoint-every 3
[ "$(ls ck)" = pass-000003 ] || fail "ck holds '$(ls ck | tr '\n' ' ')', not just pass-000003"
[ -f ck/pass-000003/manifest.json ] || fail "the checkpoint after 3 passes has no manifest"
ok "ck holds the checkpoint after 3 passes: $(ls ck/pass-000003 | tr '\n' ' ')"

run export3 "$@" --resume ck --passes 3 --model-out m3
grep -qx 'passes 3' m3/check.txt || fail "m3/check.txt: $(cat m3/check.txt)"
ok "the checkpoint's model is the replay of passes 1..3: $(sed -n 2p m3/check.txt)"

run resume6 "$@" --resume ck --passes 6 --model-out m6 --metrics-out m6.json
grep -qx 'passes 6' m6/check.txt || fail "m6/check.txt: $(cat m6/check.txt)"
[ "$(json m6.json 'm["resumed"]["passes"]')" = 3 ] || fail "metrics: not resumed after 3 passes"
[ "$(json m6.json 'len(m["per_pass"])')" = 6 ] || fail "metrics: not 6 passes"
ok "resumed to 6 passes: the model is the replay of passes 1..6"
echo PASS
