#!/usr/bin/env bash
# Installs the Debian packages strata builds against; does nothing when all
# are present. Needs root (or sudo) only when something is missing.
set -euo pipefail
# clang and libclang-rt-dev (libFuzzer's runtime, only a recommendation of
# clang's) build the fuzz targets of tests/fuzz.
pkgs=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libev-dev libmicrohttpd-dev libopenblas-dev libcmocka-dev zlib1g-dev python3 gnuplot-nox
      clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
