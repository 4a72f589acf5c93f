# Sourced by the other scripts: MPI settings for this kind of machine.
# Open MPI refuses to run as root unless told; only set this when root.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# More ranks than cores is normal here (coordinator + workers on 2 cores).
export OMPI_MCA_rmaps_base_oversubscribe=1
STRATA_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export STRATA_ROOT
