#!/usr/bin/env bash
# A screenshot of the live status page (--status) in headless Chromium,
# taken while a job runs: 2 workers in ssp mode (staleness 2) on the
# 10M-rating MovieLens-10M-shaped synthetic set (k = 100, 200 passes), each
# worker delayed 40 ms every other clock (--straggler) so that the page
# shows a slow worker, shot once SHOT_AT passes are done; the job is then
# ended.
# Needs Debian's chromium (installed here when missing and root or sudo is
# at hand; otherwise the script says so and exits 77).
# Usage: scripts/status_screenshot.sh [OUT=docs/status_page.png] [SHOT_AT=15]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
OUT=${1:-$STRATA_ROOT/docs/status_page.png}
SHOT_AT=${2:-15}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
CLIENT=$STRATA_ROOT/tests/mpi/status_client.py
if ! command -v chromium >/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  if [ -n "$SUDO" ] && ! command -v sudo >/dev/null; then
    echo "status_screenshot: needs chromium (apt-get install chromium), and no root to install it" >&2
    exit 77
  fi
  echo "status_screenshot: installing chromium" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
mpirun --oversubscribe -np 3 "$BIN" mf --mode ssp --staleness 2 \
  --data "synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1" \
  --test-fraction 0.1 --rank 100 --passes 200 --straggler delay=40 \
  --status 127.0.0.1:0 --status-linger 30 -q >"$work/run.log" 2>&1 &
pid=$!
url=$(python3 "$CLIENT" url "$work/run.log" 120)
echo "status_screenshot: $url, waiting for pass $SHOT_AT" >&2
python3 - "$url" "$SHOT_AT" <<'PY'
import json, sys, time, urllib.request
url, at = sys.argv[1], int(sys.argv[2])
while True:
    s = json.load(urllib.request.urlopen(url + "status.json", timeout=5))["status"]
    if s["passes_done"] >= at or s["phase"] in ("finished", "failed"):
        break
    time.sleep(0.2)
PY
flags=(--headless=new --disable-gpu --hide-scrollbars --window-size=1280,1700
       --virtual-time-budget=3000)
[ "$(id -u)" -eq 0 ] && flags+=(--no-sandbox)
mkdir -p "$(dirname "$OUT")"
chromium "${flags[@]}" --screenshot="$work/shot.png" "$url" >"$work/chromium.log" 2>&1 ||
  { cat "$work/chromium.log" >&2; exit 1; }
mv "$work/shot.png" "$OUT"
echo "status_screenshot: wrote $OUT" >&2
