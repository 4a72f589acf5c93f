#!/usr/bin/env bash
# Sufficient factor broadcasting against full-matrix synchronisation and
# serial, with `strata mlr`: the measurements of issue 13, as tables.
# Usage: bench/sfb_mlr.sh real|large|qsweep|exact [OUTDIR=out/bench/sfb]
#   real    dna and satimage (../shared/data): test accuracy of serial
#           (minibatch 200: the 2-worker partition; and 100) against sfb with
#           2 workers, staleness 0, minibatch 100; 20 passes.
#   large   J = 1000 classes x D = 20000 features (2e7 weights), nnz 50,
#           20000 samples, K = 100, lr 50, 3 passes: serial (K = 200), sfb
#           (s = 0), bsp and ssp (s = 1) with 2 workers. Time per pass, bytes
#           sent per clock by all workers against the cost model
#           (bench/scale_model.py's sfb_per_clock: P (P - 1) (24 + K (12 +
#           4 J + 8 nnz_v))), and the objective after the same passes.
#   qsweep  sfb with P = 4 and P = 6 workers (oversubscribed on a machine
#           with fewer cores), Q = 1..P-1, staleness 0, a fixed number of
#           passes: objective, drift, tau, bytes per clock against the model.
#   exact   the quick profile's sets (synth:classes=J,features=D,nnz=30,
#           samples=2400,test=600,seed=1; J x D = 50 x 2000, 100 x 5000,
#           200 x 10000), lr 50, 5 passes: serial (K = 200), sfb (s = 0) and bsp
#           with 2 workers (K = 100), each model exported: how far sfb's and
#           bsp's W.f32 and train_loss are from serial's; then bsp on 100 x 5000
#           $STRATA_SFB_REPEATS times (default 10) with the default prefetcher
#           and as often with --prefetch none: each run's train_loss against
#           serial's.
# STRATA_BIN picks the binary (default build/strata). Each run's metrics
# JSON stays in OUTDIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../scripts/env.sh"
WHAT=${1:?usage: bench/sfb_mlr.sh real|large|qsweep [OUTDIR]}
OUT=${2:-$STRATA_ROOT/out/bench/sfb}
BIN=${STRATA_BIN:-$STRATA_ROOT/build/strata}
DATA=${STRATA_DATA_DIR:-$STRATA_ROOT/../shared/data}
mkdir -p "$OUT"

run() { # NP JSON ARGS...: NP = 0 runs serially
  local np=$1 json=$2
  shift 2
  if [ "$np" = 0 ]; then
    "$BIN" mlr "$@" -q --metrics-out "$OUT/$json" >/dev/null
  else
    mpirun --oversubscribe -np "$np" "$BIN" mlr "$@" -q --metrics-out "$OUT/$json" >/dev/null
  fi
}

case $WHAT in
  real)
    for set in dna satimage; do
      d=$DATA/libsvm-$set
      if [ ! -f "$d/$set.scale" ]; then
        echo "sfb_mlr: skipped $set: $d/$set.scale not found (needs ../shared/data)" >&2
        continue
      fi
      args=(--data "$d/$set.scale" --test "$d/$set.scale.t" --passes 20)
      run 0 "$set-serial-k200.json" --mode serial --minibatch 200 "${args[@]}"
      run 0 "$set-serial-k100.json" --mode serial --minibatch 100 "${args[@]}"
      run 3 "$set-sfb.json" --mode sfb --minibatch 100 "${args[@]}"
    done
    ;;
  large)
    S=synth:classes=1000,features=20000,nnz=50,samples=20000,test=2000
    common=(--data "$S" --lr 50 --passes 3)
    run 0 large-serial.json --mode serial --minibatch 200 "${common[@]}"
    run 3 large-sfb.json --mode sfb --minibatch 100 "${common[@]}"
    run 3 large-bsp.json --mode bsp --minibatch 100 "${common[@]}"
    run 3 large-ssp1.json --mode ssp --staleness 1 --minibatch 100 "${common[@]}"
    ;;
  qsweep)
    S=synth:classes=200,features=20000,nnz=40,samples=24000,test=3000
    for P in 4 6; do
      for ((Q = 1; Q < P; Q++)); do
        run $((P + 1)) "q-p$P-q$Q.json" --mode sfb --peers "$Q" --data "$S" --minibatch 100 \
          --lr 30 --passes 4
      done
    done
    ;;
  exact)
    for jd in 50x2000 100x5000 200x10000; do
      S="synth:classes=${jd%x*},features=${jd#*x},nnz=30,samples=2400,test=600,seed=1"
      common=(--data "$S" --lr 50 --passes 5)
      run 0 "x-$jd-serial.json" --mode serial --minibatch 200 "${common[@]}" --model-out "$OUT/x-$jd-serial"
      run 3 "x-$jd-sfb.json" --mode sfb --minibatch 100 "${common[@]}" --model-out "$OUT/x-$jd-sfb"
      run 3 "x-$jd-bsp.json" --mode bsp --minibatch 100 "${common[@]}" --model-out "$OUT/x-$jd-bsp"
    done
    S="synth:classes=100,features=5000,nnz=30,samples=2400,test=600,seed=1"
    for ((r = 1; r <= ${STRATA_SFB_REPEATS:-10}; r++)); do
      run 3 "x-rep-default-$r.json" --mode bsp --minibatch 100 --data "$S" --lr 50 --passes 5
      run 3 "x-rep-none-$r.json" --mode bsp --prefetch none --minibatch 100 --data "$S" --lr 50 --passes 5
    done
    ;;
  *) echo "usage: bench/sfb_mlr.sh real|large|qsweep|exact [OUTDIR]" >&2; exit 2 ;;
esac

python3 - "$WHAT" "$OUT" "$here" <<'PY'
import glob, json, os, sys
what, out, here = sys.argv[1:]
sys.path.insert(0, here)
from scale_model import sfb_per_clock  # noqa: E402

def load(name):
    p = os.path.join(out, name)
    return json.load(open(p)) if os.path.exists(p) else None

def per_clock(m):
    """Bytes sent per clock by all workers together (every worker ends the
    same number of clocks), and that number."""
    w = m["workers_total"]
    return sum(x["bytes_sent"] for x in w) / w[0]["clocks"], w[0]["clocks"]

if what == "real":
    print("| data | serial K=200 | serial K=100 | sfb, 2 workers, K=100, s=0 | sfb - serial K=200 (points) |")
    print("|---|---|---|---|---|")
    for s in ("dna", "satimage"):
        a, b, c = load(f"{s}-serial-k200.json"), load(f"{s}-serial-k100.json"), load(f"{s}-sfb.json")
        if not c:
            continue
        print(f"| {s} | {a['test_acc']:.4f} | {b['test_acc']:.4f} | {c['test_acc']:.4f} | "
              f"{100 * (c['test_acc'] - a['test_acc']):+.2f} |")
elif what == "large":
    runs = [(n, load(f"large-{n}.json")) for n in ("serial", "sfb", "bsp", "ssp1")]
    sfb = dict(runs)["sfb"]
    J, K, nv = sfb["classes"], sfb["minibatch"], sfb["nnz_per_sample"]
    pred = sfb_per_clock(2, 1, K, J, nv)[0]
    print(f"J = {J}, rows = {sfb['rows']} (J x D = {J * (sfb['rows'] - 1):.3g}), K = {K}, "
          f"nnz per sample {nv:.1f} (bias included), {sfb['passes']} passes")
    print("| mode | time per pass (s) | samples/s | bytes sent per clock, all workers | predicted | measured / predicted | train_loss | test_acc |")
    print("|---|---|---|---|---|---|---|---|")
    base = {}
    for n, m in runs:
        if n == "serial":
            b, pr, ratio = "-", "-", "-"
        else:
            v, _ = per_clock(m)
            base[n] = (v, m["time_per_pass_s"], m["train_loss"])
            b = f"{v:,.0f}"
            pr = f"{pred:,.0f}" if n == "sfb" else "-"
            ratio = f"{v / pred:.4f}" if n == "sfb" else "-"
        print(f"| {n} | {m['time_per_pass_s']:.4f} | {m['samples_per_s']:,.0f} | {b} | {pr} | {ratio} | "
              f"{m['train_loss']:.6f} | {m['test_acc']:.4f} |")
    s = base["sfb"]
    for n in ("bsp", "ssp1"):
        f = base[n]
        print(f"sfb / {n}: bytes per clock {s[0] / f[0]:.5f}, time per pass {s[1] / f[1]:.4f}, "
              f"train_loss relative difference {abs(s[2] / f[2] - 1):.2e}")
elif what == "exact":
    import array
    def W(name):
        a = array.array("f")
        with open(os.path.join(out, name, "W.f32"), "rb") as f:
            a.frombytes(f.read())
        return a
    print("| J x D | mode | W.f32 equal to serial's | max abs difference | entries differing | train_loss | relative to serial |")
    print("|---|---|---|---|---|---|---|")
    for jd in ("50x2000", "100x5000", "200x10000"):
        ws, ls = W(f"x-{jd}-serial"), load(f"x-{jd}-serial.json")["train_loss"]
        for mode in ("sfb", "bsp"):
            w, l = W(f"x-{jd}-{mode}"), load(f"x-{jd}-{mode}.json")["train_loss"]
            d = [abs(a - b) for a, b in zip(ws, w)]
            print(f"| {jd} | {mode} | {'yes' if ws == w else 'no'} | {max(d):.3g} | "
                  f"{sum(1 for x in d if x)} of {len(d)} | {l!r} | {l / ls - 1:+.2e} |")
    ls = load("x-100x5000-serial.json")["train_loss"]
    for pf in ("default", "none"):
        rel = []
        for r in range(1, 1000):
            m = load(f"x-rep-{pf}-{r}.json")
            if not m:
                break
            rel.append(m["train_loss"] / ls - 1)
        far = [x for x in rel if abs(x) > 1e-7]
        print(f"bsp on 100x5000, prefetch {pf}: {len(far)} of {len(rel)} runs further than 1e-7 "
              f"(relative) from serial's train_loss; the runs: " + " ".join(f"{x:+.1e}" for x in rel))
else:
    print("| P | Q | tau (lower bound) | train_loss | test_acc | drift after last pass | bytes/clock measured | predicted P (P - 1) (24 + K (12 + 4J + 8 nnz)) | ratio | time per pass (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for P in (4, 6):
        for Q in range(1, P):
            m = load(f"q-p{P}-q{Q}.json")
            if not m:
                continue
            v, _ = per_clock(m)
            pred = sfb_per_clock(P, Q, m["minibatch"], m["classes"], m["nnz_per_sample"])[0]
            sf = m["sfb"]
            print(f"| {P} | {Q} | {sf['tau']} ({sf['tau_lower_bound']}) | {m['train_loss']:.5f} | "
                  f"{m['test_acc']:.4f} | {m['per_pass'][-1]['drift']:.4g} | {v:,.0f} | {pred:,.0f} | "
                  f"{v / pred:.4f} | {m['time_per_pass_s']:.4f} |")
PY
