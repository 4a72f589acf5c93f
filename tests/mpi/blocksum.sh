#!/usr/bin/env bash
# blocksum.sh NP [--fault KIND CHECK] [blocksum flags...]
#
# Runs the blocksum app with NP MPI ranks (NP = 0: --mode serial, no
# mpiexec) and --model-out, then checks its report: the exact row and column
# sums, one holder per rotating block per sub-epoch (the one the schedule
# names), the return home at sub-epoch 0, and the visits of every worker
# (exactly once when B == P, at least once when B > P).
#
# With --fault KIND CHECK the app injects a deliberate error and the run must
# fail (exit 1) with CHECK among the failed checks: the checks are not
# vacuous.
. "$(dirname "$0")/common.sh"
: "${STRATA_BLOCKSUM:?STRATA_BLOCKSUM must be set}"

NP=$1
shift
FAULT="" FAULT_CHECK=""
if [ "${1:-}" = --fault ]; then
  FAULT=$2 FAULT_CHECK=$3
  shift 3
fi
B="" PASSES=3
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --strata | -B) B=${args[i + 1]} ;;
    --passes | -p) PASSES=${args[i + 1]} ;;
  esac
done
if [ "$NP" = 0 ]; then P=1; else P=$((NP - 1)); fi
: "${B:=$P}"
echo "blocksum: P=$P B=$B passes=$PASSES flags: $*${FAULT:+ fault=$FAULT}"

cmd=("$STRATA_BLOCKSUM" --passes "$PASSES" "$@" -q --model-out model --metrics-out m.json)
[ -n "$FAULT" ] && cmd+=(--fault "$FAULT")
if [ "$NP" = 0 ]; then
  timeout "$RUN_LIMIT" "${cmd[@]}" --mode serial >out.txt 2>err.txt
else
  mpi "$NP" "${cmd[@]}" >out.txt 2>err.txt
fi
rc=$?
cat out.txt err.txt >log.txt
report=model/blocksum_report.json

if [ -n "$FAULT" ]; then
  [ "$rc" = 1 ] || show_log log.txt
  expect_rc 1 "$rc" "blocksum with --fault $FAULT"
  [ -f "$report" ] || fail "no report written for the failed checks"
  failed=$(json "$report" '[c["name"] for c in m["checks"] if not c["ok"]]')
  echo "failed checks: $failed"
  json "$report" '[c["name"] + ": " + c["first_failure"] for c in m["checks"] if not c["ok"]]'
  case $failed in *"\"$FAULT_CHECK\""*) ok "check $FAULT_CHECK caught the fault" ;;
    *) fail "check $FAULT_CHECK did not catch --fault $FAULT" ;;
  esac
  # Per-rank exit codes after a failure on rank 0 past the passes are the
  # subject of bad_input.sh model-out-is-file.
  expect_one_error err.txt "strata_blocksum: " "checks failed, first "
  [ -s out.txt ] && fail "a summary was printed for a failed run"
  [ ! -e m.json ] || fail "metrics written although the run failed"
  exit 0
fi

[ "$rc" = 0 ] || show_log log.txt
expect_rc 0 "$rc" "blocksum"
[ -f "$report" ] || fail "$report missing"
echo "visits[block][pass][sub-epoch] = worker: $(json "$report" 'm["visits"]')"
json "$report" '"\n".join("  %-21s %-4s tested %5d failed %d%s" % (c["name"], "ok" if c["ok"] else "FAIL", c["tested"], c["failed"], "" if c["applicable"] else "  (not applicable)") for c in m["checks"])'

got=$(json "$report" '[m["ok"], m["workers"], m["strata"], m["passes"]]')
want="[true, $P, $B, $PASSES]"
echo "report [ok, workers, strata, passes]: $got, expected $want"
[ "$got" = "$want" ] || fail "report header differs"

# The checks the brief asks for must have run, with something to test.
need="row_sums col_sums pass_totals block_integrity visits_once returns_home resident_stays"
if [ "$B" = "$P" ]; then need="$need every_worker_once"; else need="$need every_worker_visited"; fi
case " $* " in *" --no-eval "*) ;; *) need="$need evaluation" ;; esac
for c in $need; do
  st=$(json "$report" "[[c['applicable'], c['ok'], c['tested'] > 0] for c in m['checks'] if c['name'] == '$c']")
  [ "$st" = "[[true, true, true]]" ] || fail "check $c: [applicable, ok, tested>0] = $st"
done
ok "checks ran and passed: $need"

# The visits table, read independently of the app's own checks.
python3 - "$report" "$P" "$B" <<'EOF' || fail "visits table"
import json, sys
m = json.load(open(sys.argv[1])); P = int(sys.argv[2]); B = int(sys.argv[3])
for j, passes in enumerate(m["visits"]):
    homes = {p[0] for p in passes}
    assert len(homes) == 1, "block %d does not return home: %s" % (j, passes)
    for n, subs in enumerate(passes):
        assert len(subs) == B, (j, n, subs)
        # diagonal schedule: column block j is at row (j - s) mod B in sub-epoch s
        want = [((j - s) % B) * P // B for s in range(B)]
        assert subs == want, "block %d pass %d: %s, expected %s" % (j, n + 1, subs, want)
        if B == P:
            assert sorted(subs) == list(range(P)), (j, n, subs)
        assert set(subs) == set(range(P)), (j, n, subs)
print("ok: visits follow the diagonal schedule; every block returns home")
EOF

sums=$(json m.json '[[p["sum"], p["triples"], p["bad_rows"], p["eval_errors"]] for p in m["per_pass"]]')
echo "metrics per pass [sum, triples, bad_rows, eval_errors]: $sums"
python3 -c 'import json,sys; p=json.loads(sys.argv[1]); assert len({tuple(x[:2]) for x in p})==1 and all(x[2]==0 and x[3]==0 for x in p)' "$sums" ||
  fail "per-pass metrics differ between passes or report errors"
echo "PASS"
