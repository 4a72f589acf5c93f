#!/bin/sh
# Open MPI's launch agent for bench/netem.sh's emulated cluster, in place of
# ssh: "netem_rsh.sh HOST COMMAND..." runs COMMAND in the namespace of the
# host whose address is HOST (10.77.0.N is h{N-1}), with that hostname.
# NETEM_ID names the cluster (bench/netem.sh exports it).
host=$1
shift
n=${host##*.}
i=$((n - 1))
exec ip netns exec "strata-$NETEM_ID-h$i" unshare --uts sh -c "hostname h$i && $*"
