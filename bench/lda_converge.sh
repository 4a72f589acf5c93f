#!/usr/bin/env bash
# LDA on UCI KOS and lda-c AP, K = 100, 50 passes: log-likelihood per token
# of the serial run against 2 workers in scheduled mode and in ssp (s = 1,
# the app's default quarter-pass clocks, and whole-pass clocks for
# comparison), with time per pass. Needs ../shared/data; skips with a
# message without it. AP's top words per topic go to OUTDIR/ap-topics.
# Usage: bench/lda_converge.sh [PASSES=50] [OUTDIR=out/bench]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
PASSES=${1:-50}
OUT=${2:-$STRATA_ROOT/out/bench}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_DATA_DIR:-$STRATA_ROOT/../shared/data}
KOS="$DATA/uci-bow-kos/docword.kos.txt.gz"
AP="$DATA/lda-c-ap/ap.dat"
for f in "$KOS" "$AP"; do
  if [ ! -f "$f" ]; then
    echo "lda_converge: skipped: $f not found (needs ../shared/data)" >&2
    exit 0
  fi
done
mkdir -p "$OUT"
modes=("serial" "scheduled" "ssp --staleness 1" "ssp --staleness 1 --wpc 1")
for set in kos ap; do
  if [ $set = kos ]; then
    args=(--data "$KOS" --vocab "$DATA/uci-bow-kos/vocab.kos.txt")
  else
    args=(--data "$AP" --vocab "$DATA/lda-c-ap/vocab.txt")
  fi
  for i in "${!modes[@]}"; do
    run=(mpirun --oversubscribe -np 3)
    [ "${modes[$i]}" = serial ] && run=()
    extra=()
    [ $set = ap ] && [ "${modes[$i]}" = scheduled ] && extra=(--topics-out "$OUT/ap-topics")
    # shellcheck disable=SC2086  # the mode string carries its own flags
    "${run[@]}" "$BIN" lda --mode ${modes[$i]} "${args[@]}" --topics 100 --passes "$PASSES" -q \
      --metrics-out "$OUT/lda-$set-$i.json" "${extra[@]}" >/dev/null
  done
done
python3 - "$OUT" "${modes[@]}" <<'PY'
import json, sys
out, modes = sys.argv[1], sys.argv[2:]
lines = ["| corpus | mode | loglik/token after last pass | vs serial | count errors | time per pass (ms) | M tokens/s |",
         "|---|---|---|---|---|---|---|"]
for s in ["kos", "ap"]:
    ser = json.load(open(f"{out}/lda-{s}-0.json"))["loglik_per_token"]
    for i, m in enumerate(modes):
        d = json.load(open(f"{out}/lda-{s}-{i}.json"))
        ll = d["loglik_per_token"]
        rel = (ll - ser) / abs(ser) * 100
        errs = sum(p["count_errors"] for p in d["per_pass"]) + d["count_mismatch"]
        wpc = d.get("consistency", {}).get("wpc")
        name = m if wpc is None else f"{m.split(' --wpc')[0]} (wpc {wpc:g})"
        lines.append(f"| {s.upper()} | {name} | {ll:.4f} | {rel:+.2f}% | {errs:g} | "
                     f"{d['time_per_pass_s']*1e3:.1f} | {d['tokens_per_s']/1e6:.1f} |")
text = "\n".join(lines)
print(text)
open(f"{out}/lda_converge.md", "w").write(text + "\n")
PY
