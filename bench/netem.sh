#!/usr/bin/env bash
# An emulated cluster on one machine: HOSTS network namespaces ("hosts"
# h0..h{HOSTS-1}, 10.77.0.1, 10.77.0.2, ...) joined by veth pairs to one
# bridge (the switch), every link shaped with a token bucket (tc tbf) to
# RATE in both directions: a host's own egress and the switch port's egress
# towards it, as a full-duplex switched Ethernet port of that speed. Each
# namespace also gets its own hostname (a UTS namespace), so Open MPI sees
# HOSTS machines: mpirun runs in h0 and starts its daemons in the others
# through bench/netem_rsh.sh (in place of ssh), MPI forced onto TCP
# (--mca btl tcp,self: no shared memory between ranks, even on one host).
#
# Latency: the kernel here has no netem, so no delay is added; the links
# have the latency of veth and a bridge (tens of microseconds), and the
# scale model carries the latency of a real network analytically (its alpha
# term). Bandwidth is what tbf enforces.
#
# Usage:
#   bench/netem.sh check                       exit 0 if it can run here, else
#                                              77 with the reason
#   bench/netem.sh run HOSTS RATE NP [mpirun options --] PROGRAM ARGS...
#       sets the cluster up, runs PROGRAM on NP ranks placed round-robin by
#       host from h0 (rank 0 on h0, rank 1 on h1, ...; more ranks than hosts
#       wrap around), and takes the cluster down again, also on failure or
#       interrupt; exits with mpirun's status. RATE: a tc rate (10gbit,
#       1gbit, 250mbit) or "none" (unshaped). Extra mpirun options before a
#       lone "--".
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2; Debian packages
# only. NETEM_KEEP=1 leaves the cluster up (bench/netem.sh down ID removes it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"

why_not() {
  [ "$(id -u)" -eq 0 ] || { echo "not root: network namespaces need CAP_NET_ADMIN"; return; }
  command -v ip >/dev/null || { echo "no ip (apt-get install iproute2)"; return; }
  command -v tc >/dev/null || { echo "no tc (apt-get install iproute2)"; return; }
  command -v unshare >/dev/null || { echo "no unshare (util-linux)"; return; }
  local probe="strata-probe-$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "ip netns add failed: no CAP_NET_ADMIN here (a container without it?)"
    return
  fi
  local ok=1
  ip -n "$probe" link add d0 type veth peer name d1 2>/dev/null &&
    tc -n "$probe" qdisc add dev d0 root tbf rate 1gbit burst 256kb latency 100ms 2>/dev/null || ok=0
  ip netns del "$probe"
  [ "$ok" = 1 ] || { echo "tc tbf cannot shape a link here"; return; }
  unshare --uts true 2>/dev/null || echo "unshare --uts failed: no CAP_SYS_ADMIN for a hostname per host"
}

# The token bucket for RATE: a burst of 128 KiB whatever the rate, as small
# as it can be with the 64 KiB segments TCP hands the device (GSO): a link
# idle between two blocks lets only that much pass faster than the rate. A
# queue of at most 200 ms.
shape() { # ns-or-"", dev, rate
  local ns=$1 dev=$2 rate=$3
  [ "$rate" = none ] && return 0
  tc ${ns:+-n "$ns"} qdisc replace dev "$dev" root tbf rate "$rate" burst 131072 latency 200ms
}

up() { # id hosts rate
  local id=$1 hosts=$2 rate=$3
  ip link add "sbr$id" type bridge
  ip link set "sbr$id" up
  for i in $(seq 0 $((hosts - 1))); do
    local ns="strata-$id-h$i"
    ip netns add "$ns"
    ip link add "sv$id-$i" type veth peer name eth0 netns "$ns"
    ip link set "sv$id-$i" master "sbr$id" up
    ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    shape "$ns" eth0 "$rate"
    shape "" "sv$id-$i" "$rate"
  done
}

down() { # id
  local id=$1
  for ns in $(ip netns list | awk '{print $1}' | grep "^strata-$id-h" || true); do
    ip netns del "$ns"
  done
  ip link del "sbr$id" 2>/dev/null || true
}

cmd=${1:-}
case $cmd in
check)
  reason=$(why_not)
  if [ -n "$reason" ]; then
    echo "netem: cannot emulate a network here: $reason" >&2
    exit 77
  fi
  echo "netem: network namespaces and tc tbf work here"
  ;;
down)
  down "$2"
  ;;
run)
  [ $# -ge 5 ] || { sed -n '/^# Usage/,/^# Needs/p' "$0" >&2; exit 2; }
  hosts=$2 rate=$3 np=$4
  shift 4
  if [ "$rate" != none ] && ! [[ $rate =~ ^[0-9]+(\.[0-9]+)?[kmg]?bit$ ]]; then
    echo "netem: RATE $rate: expected a tc rate such as 10gbit, 1gbit, 250mbit, or none" >&2
    exit 2
  fi
  mpi_opts=()
  if printf '%s\n' "$@" | grep -qx -- --; then
    while [ "$1" != -- ]; do mpi_opts+=("$1"); shift; done
    shift
  fi
  reason=$(why_not)
  if [ -n "$reason" ]; then
    echo "netem: cannot emulate a network here: $reason" >&2
    exit 77
  fi
  id=$$
  work=$(mktemp -d)
  trap '[ -z "${NETEM_KEEP:-}" ] && down "$id"; rm -rf "$work"' EXIT
  trap 'exit 130' INT TERM
  up "$id" "$hosts" "$rate"
  # Rank r on host r mod HOSTS: the hostfile lists each host as often as
  # it gets ranks, in rank order, and --map-by slot follows it.
  : >"$work/hosts"
  for h in $(seq 0 $((hosts - 1))); do
    n=0
    for r in $(seq 0 $((np - 1))); do [ $((r % hosts)) = "$h" ] && n=$((n + 1)); done
    [ "$n" -gt 0 ] && echo "10.77.0.$((h + 1)) slots=$n" >>"$work/hosts"
  done
  # --bind-to none: each "host" believes it has every core and would bind
  # its first rank to core 0, so the ranks of all hosts would share one.
  # --stdin none: mpirun forwarding a stdin at end of file to a short job
  # can die of SIGSEGV itself (docs/failure.md). orte_tmpdir_base: the
  # session directories are named by hostname (/tmp/ompi.h1.0), and two
  # emulated clusters at once have the same hostnames.
  mkdir "$work/tmp"
  NETEM_ID=$id ip netns exec "strata-$id-h0" unshare --uts sh -c 'hostname h0 && exec "$@"' sh \
    mpirun --hostfile "$work/hosts" --map-by node --bind-to none --oversubscribe --stdin none \
    --mca orte_tmpdir_base "$work/tmp" \
    --mca plm_rsh_agent "$here/netem_rsh.sh" --mca btl tcp,self \
    --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    -x NETEM_ID -np "$np" "${mpi_opts[@]}" "$@"
  ;;
*)
  sed -n '/^# Usage/,/^# Needs/p' "$0" >&2
  exit 2
  ;;
esac
