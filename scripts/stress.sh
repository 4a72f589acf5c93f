#!/usr/bin/env bash
# scripts/stress.sh [REPEAT] [JOBS]: the ways a run ends early, again and
# again on a loaded machine, so that a race in teardown shows. Each of
# REPEAT rounds (default 50) runs every case once, in JOBS streams (default
# 2) beside STRESS_BURNERS CPU burners (default 2, `yes >/dev/null`):
#   - every bad-flag case of tests/mpi/ps_bad_flags.sh (usage errors found
#     on every rank, before and after the watch starts): exit code 2 on
#     every rank, exactly one error line, no crash or abort noise;
#   - the signal cases of tests/mpi/interrupt.sh: SIGTERM and SIGINT to
#     rank 0, to worker 1 and to a serial run while rank 0 loads, early and
#     late in the passes, with a checkpoint after every pass, and at a
#     random moment; to mpirun; during --status-linger. One line, the same exit code on every rank, every
#     rank gone within INTERRUPT_LIMIT seconds (default here 3), no crash.
# A case fails on any of it (a segmentation fault shows as its text or as
# an exit code). Not part of the ctest suite: a round takes minutes.
# STRESS_CASES (a grep -E pattern) picks cases; STRATA_BUILD_DIR the build
# (default build/). Prints each failure's log path, the counts per case and
# the wall time; exit status 1 when any case failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
REPEAT=${1:-50}
JOBS=${2:-2}
BUILD=$(cd "${STRATA_BUILD_DIR:-$STRATA_ROOT/build}" && pwd)
[ -x "$BUILD/strata" ] || { echo "no strata in $BUILD: build first"; exit 1; }
MPI=$STRATA_ROOT/tests/mpi

# What ctest hands every MPI driver (tests/mpi/CMakeLists.txt).
export STRATA=$BUILD/strata STRATA_BLOCKSUM=$BUILD/tests/mpi/strata_blocksum
export STRATA_FAILAPP=$BUILD/tests/mpi/strata_failapp
export MPIEXEC=${MPIEXEC:-$(command -v mpiexec)} MPIEXEC_NUMPROC_FLAG=-n
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
export INTERRUPT_LIMIT=${INTERRUPT_LIMIT:-3}

cases=()
for c in $(sed -n 's/^  \([a-z0-9-]*\))\( NP=0\)\{0,1\} MSG=.*/\1/p; s/^  \([a-z0-9-]*\))$/\1/p' \
  "$MPI/ps_bad_flags.sh"); do
  cases+=("ps_bad_flags.sh $c")
done
for t in coordinator worker serial; do
  for s in TERM INT; do
    for p in load passes late ckpt random; do cases+=("interrupt.sh $t $s $p"); done
  done
done
cases+=("interrupt.sh worker TERM passes plain" "interrupt.sh coordinator INT load plain"
        "interrupt.sh mpirun TERM passes plain" "interrupt.sh mpirun INT load plain"
        "interrupt.sh coordinator TERM linger" "interrupt.sh serial INT linger")
if [ -n "${STRESS_CASES:-}" ]; then
  picked=()
  for c in "${cases[@]}"; do echo "$c" | grep -Eq "$STRESS_CASES" && picked+=("$c"); done
  cases=("${picked[@]}")
fi
[ ${#cases[@]} -gt 0 ] || { echo "no case matches"; exit 1; }

OUT=$(mktemp -d "${TMPDIR:-/tmp}/strata-stress.XXXXXX")
burners=()
cleanup() {
  for p in "${burners[@]}"; do kill "$p" 2>/dev/null; done
}
trap cleanup EXIT
for ((b = 0; b < ${STRESS_BURNERS:-2}; b++)); do
  yes >/dev/null &
  burners+=($!)
done
echo "stress: ${#cases[@]} cases x $REPEAT rounds, $JOBS streams, ${#burners[@]} burners; logs in $OUT"

# stream K: runs the K-th, K+JOBS-th, ... of all runs; one line per run
# into $OUT/results.K: "ok|FAIL SECONDS case", SECONDS the time from the
# signal to the last rank's end (interrupt.sh), or - .
stream() {
  local k=$1 i=0 r c log
  for ((r = 1; r <= REPEAT; r++)); do
    for c in "${cases[@]}"; do
      i=$((i + 1))
      [ $((i % JOBS)) = "$k" ] || continue
      log="$OUT/run-$r-${c// /_}.log"
      # shellcheck disable=SC2086 # the case is the driver and its words
      if bash "$MPI"/$c >"$log" 2>&1; then
        s=$(sed -n 's/^after \([0-9.]*\)s, .*/\1/p' "$log" | head -1)
        echo "ok ${s:--} $c" >>"$OUT/results.$k"
        rm -f "$log"
      else
        echo "FAIL - $c" >>"$OUT/results.$k"
        echo "FAIL (round $r) $c: $log"
      fi
    done
  done
}
t0=$(date +%s)
pids=()
for ((k = 0; k < JOBS; k++)); do
  stream "$k" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
wall=$(($(date +%s) - t0))

# Per case: runs passed and failed, and the slowest end after the signal.
cat "$OUT"/results.* | awk '{
  c = $3; for (i = 4; i <= NF; i++) c = c " " $i
  if ($1 == "ok") ok[c]++; else bad[c]++
  seen[c] = 1
  if ($2 != "-" && $2 + 0 > worst[c]) worst[c] = $2 + 0
} END {
  for (c in seen) printf "%4d ok %3d failed  %s%s\n", ok[c], bad[c], c,
    (c in worst) ? sprintf("  (slowest end %.2f s)", worst[c]) : ""
}' | sort -k5
runs=$(cat "$OUT"/results.* | wc -l)
failed=$(cat "$OUT"/results.* | grep -c '^FAIL')
echo "stress: $runs runs, $failed failed, wall ${wall}s"
[ "$failed" = 0 ]
