#!/usr/bin/env bash
# The Metropolis-Hastings sampler against the exact one on real corpora: UCI
# KOS and lda-c AP, K = 100, --mode serial (one core), the exact sampler for
# EXACT passes and --sampler warp for WARP passes. Reports the log-likelihood
# per token after the last pass of each, warp's relative to exact's, and time
# per pass; the issue's bar is warp after 100 passes within 1% of exact after
# 50. Needs ../shared/data; skips with a message without it.
# Usage: bench/lda_warp.sh [EXACT=50] [WARP=100] [OUTDIR=out/bench] [-- extra warp flags]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
EXACT=${1:-50}
WARP=${2:-100}
OUT=${3:-$STRATA_ROOT/out/bench}
shift $(($# < 3 ? $# : 3))
[ "${1:-}" = -- ] && shift
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_DATA_DIR:-$STRATA_ROOT/../shared/data}
KOS="$DATA/uci-bow-kos/docword.kos.txt.gz"
AP="$DATA/lda-c-ap/ap.dat"
for f in "$KOS" "$AP"; do
  if [ ! -f "$f" ]; then
    echo "lda_warp: skipped: $f not found (needs ../shared/data)" >&2
    exit 0
  fi
done
mkdir -p "$OUT"
for set in kos ap; do
  if [ $set = kos ]; then
    args=(--data "$KOS" --vocab "$DATA/uci-bow-kos/vocab.kos.txt")
  else
    args=(--data "$AP" --vocab "$DATA/lda-c-ap/vocab.txt")
  fi
  "$BIN" lda --mode serial "${args[@]}" --topics 100 --passes "$EXACT" -q \
    --metrics-out "$OUT/lda-warp-$set-exact.json" >/dev/null
  "$BIN" lda --mode serial "${args[@]}" --topics 100 --passes "$WARP" --sampler warp "$@" -q \
    --metrics-out "$OUT/lda-warp-$set-warp.json" >/dev/null
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
lines = ["| corpus | sampler | passes | loglik/token after last pass | vs exact | count errors | time per pass (ms) | M tokens/s |",
         "|---|---|---|---|---|---|---|---|"]
for s in ["kos", "ap"]:
    ex = json.load(open(f"{out}/lda-warp-{s}-exact.json"))
    for name in ["exact", "warp"]:
        d = json.load(open(f"{out}/lda-warp-{s}-{name}.json"))
        ll = d["loglik_per_token"]
        rel = (ll - ex["loglik_per_token"]) / abs(ex["loglik_per_token"]) * 100
        errs = sum(p["count_errors"] + p["count_mismatch"] for p in d["per_pass"])
        label = name if name == "exact" else f"warp ({d.get('mh_steps')} steps)"
        lines.append(f"| {s.upper()} | {label} | {len(d['per_pass'])} | {ll:.4f} | {rel:+.2f}% | "
                     f"{errs:g} | {d['time_per_pass_s']*1e3:.1f} | {d['tokens_per_s']/1e6:.1f} |")
text = "\n".join(lines)
print(text)
open(f"{out}/lda_warp.md", "w").write(text + "\n")
PY
