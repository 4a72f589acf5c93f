# Helpers sourced by the MPI integration test drivers (tests/mpi/*.sh).
#
# ctest passes, through the environment:
#   STRATA            the strata CLI
#   STRATA_BLOCKSUM   the blocksum test app
#   MPIEXEC           mpiexec/mpirun; MPIEXEC_NUMPROC_FLAG its "-n"
#   STRATA_SHARED_DATA  ../shared/data (may not exist)
# Each driver prints what it compares and exits non-zero on the first
# failed expectation (77 = skipped).

set -u

: "${STRATA:?STRATA (path of the strata CLI) must be set}"
: "${MPIEXEC:=mpiexec}"
: "${MPIEXEC_NUMPROC_FLAG:=-n}"
: "${OMPI_ALLOW_RUN_AS_ROOT:=1}"
: "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM

# Every run gets a wall-clock limit, so a hung rank fails the test instead
# of hanging ctest until its own timeout: 60 s times the factor the build
# puts on every test's limit (STRATA_TEST_TIME_SCALE, tests/CMakeLists.txt).
RUN_LIMIT=${RUN_LIMIT:-$((60 * ${STRATA_TEST_TIME_SCALE:-1}))}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-mpi-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

fail() {
  echo "FAIL: $*"
  exit 1
}

ok() { echo "ok: $*"; }

# MPIRUN: mpiexec as every test runs it. --stdin none: Open MPI 4.1's
# mpirun forwards its own stdin to rank 0, and when that stdin is at end of
# file (ctest's /dev/null) and the job is short, the forwarding callback can
# run after the rank's record is gone: mpirun itself dies of SIGSEGV (exit
# 139, in orte_iof_hnp_read_local_handler; open-mpi/ompi#7483), about 1 run
# in 150 of a job that ends at once. No strata program reads stdin.
MPIRUN=("$MPIEXEC" --oversubscribe --stdin none)

# mpi NP CMD ARGS...: CMD under mpiexec with NP ranks.
mpi() {
  local np=$1
  shift
  timeout "$RUN_LIMIT" "${MPIRUN[@]}" "$MPIEXEC_NUMPROC_FLAG" "$np" "$@"
}

# expect_rc WANT GOT WHAT
expect_rc() {
  if [ "$2" = 124 ]; then fail "$3: timed out after ${RUN_LIMIT}s"; fi
  [ "$2" = "$1" ] || fail "$3: exit code $2, expected $1"
  ok "$3: exit code $2"
}

# json FILE EXPR: prints the Python expression EXPR over the parsed FILE (m).
json() {
  python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(json.dumps(v) if isinstance(v, (list, dict, bool)) or v is None else v)' "$1" "$2"
}

# show_log FILE: the output of a failed run, for the test log.
show_log() {
  echo "---- $1"
  cat "$1"
  echo "----"
}

# RANKS_WRAP, when set, prefixes the whole mpiexec command line of
# mpi_wrapped and rank_codes (e.g. unshare).
RANKS_WRAP=()
mpi_wrapped() {
  local np=$1
  shift
  ${RANKS_WRAP[@]+"${RANKS_WRAP[@]}"} timeout "$RUN_LIMIT" "${MPIRUN[@]}" \
    "$MPIEXEC_NUMPROC_FLAG" "$np" "$@"
}

# rank_codes NP CMD ARGS...: runs the command again so that every rank
# records its own exit code in rank-codes/RANK (output in rank-codes.log).
# mpiexec normally kills the other ranks once one exits non-zero, so this
# run tells it to let every rank finish.
rank_codes() {
  rm -rf rank-codes && mkdir rank-codes
  OMPI_MCA_orte_abort_on_non_zero_status=0 mpi_wrapped "$1" sh -c \
    '"$@"; rc=$?; echo $rc >"rank-codes/${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-$$}}"; exit $rc' \
    sh "${@:2}" >rank-codes.log 2>&1
}

# expect_rank_codes NP WANT: every one of the NP ranks exited with WANT.
expect_rank_codes() {
  local got="" r
  for ((r = 0; r < $1; r++)); do got="$got $(cat "rank-codes/$r" 2>/dev/null || echo none)"; done
  echo "exit code of each rank:$got"
  for r in $got; do [ "$r" = "$2" ] || fail "every rank must exit with $2, got:$got"; done
  ok "all $1 ranks exited with $2"
}

# expect_one_error STDERR PREFIX TEXT: exactly one line on stderr besides
# mpiexec's banner about a non-zero exit status (blocks between dashed
# lines), starting with PREFIX and containing TEXT; and no abort or crash
# noise anywhere in STDERR.
expect_one_error() {
  awk '/^-+$/ && length($0) >= 20 { b = !b; next } !b && NF' "$1" >errors.txt
  local n line
  n=$(wc -l <errors.txt)
  [ "$n" = 1 ] || { show_log "$1"; fail "expected exactly one error line, got $n"; }
  line=$(cat errors.txt)
  case $line in "$2"*) ;; *) fail "error line does not start with '$2': $line" ;; esac
  case $line in *"$3"*) ok "one error line, naming '$3'" ;;
    *) fail "error line does not name '$3': $line" ;;
  esac
  if grep -E -i 'MPI_ABORT|(mpirun|mpiexec) has exited due to|exiting improperly|segmentation|signal [0-9]|core dumped|MPI_ERR|backtrace' "$1"; then
    fail "abort or crash noise in the output"
  fi
  ok "no abort or crash noise"
}

# wait_limited PID SECONDS: waits for the background job PID; when it is
# still running after SECONDS (times STRATA_TEST_TIME_SCALE), kills it (and what it started) and returns
# 124, else its exit code.
wait_limited() {
  local pid=$1 limit=$(($2 * ${STRATA_TEST_TIME_SCALE:-1})) t=0
  while kill -0 "$pid" 2>/dev/null && [ "$t" -lt $((limit * 20)) ]; do
    sleep 0.05
    t=$((t + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    pkill -KILL -P "$pid" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid"
}

# wait_for_line FILE PATTERN SECONDS: until FILE holds a line matching the
# grep pattern; 1 when SECONDS pass first.
wait_for_line() {
  local t=0
  while ! grep -q "$2" "$1" 2>/dev/null; do
    [ "$t" -ge $(($3 * 50)) ] && return 1
    sleep 0.02
    t=$((t + 1))
  done
}

# rank_pid RANK [EXE]: the process of MPI rank RANK started from this
# test's directory, running EXE (default: $STRATA); empty when none.
rank_pid() {
  local want=${2:-$STRATA} p exe
  want=$(readlink -f "$want")
  for p in $(pgrep -f -- "$want"); do
    [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$WORK" ] || continue
    exe=$(readlink "/proc/$p/exe" 2>/dev/null) || continue
    [ "$exe" = "$want" ] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
      echo "$p"
      return
    fi
  done
}
