#!/usr/bin/env python3
"""strata over an emulated cluster network (bench/netem.sh), and the scale
model checked against it.

Order of work, so that every prediction is made before its run:
  1. calibration: msgcost over TCP loopback and over the unshaped emulated
     network (its latency alpha: no delay is added, bench/netem.sh), and
     every configuration (app x mode x workers) once over TCP loopback, all
     ranks on one host;
  2. predictions: bench/scale_model.py --netem fits each configuration on
     its loopback run and predicts every (configuration, link) point;
     written to OUT/predictions.json before any emulated run;
  3. the emulated runs: every configuration over every link (one rank per
     host: the coordinator on h0, worker i on h{i+1});
  4. the comparison: OUT/netem.md (link x mode x workers: measured and
     predicted time per pass, error, worker wait, bytes) and OUT/runs.jsonl.

Usage: bench/netem_sweep.py [--out DIR] [--quick] [--repeats R] [--model apriori|refit]
  --quick: MF at 2 workers, scheduled and bsp, over 1gbit only (a smoke run)
  --repeats R: runs of each loopback configuration and of each point on
      10gbit and 1gbit (default 3; medians), one run on the slower links
  --model: bench/scale_model.py's model of the emulated runs (default refit)
  --only MODE: the configurations of that mode only (a check of one term)
Needs root for the namespaces (exit 77 with the reason otherwise),
build/strata and build/bench/msgcost, and ../shared/data for LDA on AP
(left out with a message when absent).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STRATA = os.environ.get("STRATA_BIN", os.path.join(ROOT, "build", "strata"))
MSGCOST = os.path.join(os.environ.get("STRATA_BIN_DIR", os.path.join(ROOT, "build", "bench")), "msgcost")
DATA = os.environ.get("STRATA_DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))
NETEM = os.path.join(HERE, "netem.sh")
MF10M = "synth:users=71567,items=10681,ratings=10000054,rank=10,noise=0.5,seed=1"

LINKS_FULL = ["10gbit", "1gbit", "500mbit", "250mbit", "100mbit"]
# The bandwidths between which the ring stops hiding MF's transfers: the
# search for the 5% point adds these for scheduled MF.
LINKS_RING = ["400mbit", "300mbit", "200mbit", "150mbit"]


def env():
    e = dict(os.environ)
    if os.getuid() == 0:
        e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    e["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    return e


def configs(quick, have_ap):
    mf = ["mf", "--data", MF10M, "--rank", "100", "--passes", "6"]
    out = []
    modes = ["scheduled", "bsp"] if quick else ["scheduled", "bsp", "ssp", "essp"]
    for m in modes:
        out.append(dict(name=f"mf {m}", app="mf", mode=m, workers=2, args=mf + ["--mode", m]))
    if not quick:
        for m in ("scheduled", "bsp"):
            out.append(dict(name=f"mf {m}", app="mf", mode=m, workers=4, args=mf + ["--mode", m]))
        if have_ap:
            lda = ["lda", "--data", os.path.join(DATA, "lda-c-ap", "ap.dat"), "--topics", "100",
                   "--passes", "8"]
            for m in ("scheduled", "bsp", "ssp", "essp"):
                out.append(dict(name=f"lda {m}", app="lda", mode=m, workers=2, args=lda + ["--mode", m]))
    return out


def run_strata(cfg, link, out, tag):
    """One run: link "lo" (TCP loopback, one host) or a tc rate (one rank per host)."""
    np_ = cfg["workers"] + 1
    mfile = os.path.join(out, f"{tag}.json")
    args = [STRATA] + cfg["args"] + ["-q", "--metrics-out", mfile]
    if link == "lo":
        cmd = ["mpirun", "--oversubscribe", "-np", str(np_), "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "lo"] + args
    else:
        cmd = ["bash", NETEM, "run", str(np_), link, str(np_)] + args
    t0 = time.time()
    r = subprocess.run(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"netem_sweep: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")
    m = json.load(open(mfile))
    pp = m["per_pass"][1:] or m["per_pass"]
    P = m["workers"]
    rec = dict(kind="netem", name=cfg["name"], app=cfg["app"], mode=cfg["mode"], workers=P,
               link=link, strata=m["strata"], depth=m["depth"], passes=m["passes"],
               time_per_pass_s=m["time_per_pass_s"],
               compute_s=statistics.median(p["compute_s"] for p in pp),
               # per worker and pass: the mean over workers of the median over passes
               wait_s=statistics.mean(statistics.median(p["workers"][w]["wait_s"] for p in pp)
                                      for w in range(P)),
               wait_max_s=statistics.median(p["wait_s"] for p in pp),
               bytes_sent=statistics.median(max(p["workers"][w]["bytes_sent"] for w in range(P)) for p in pp),
               bytes_recv=statistics.median(max(p["workers"][w]["bytes_recv"] for w in range(P)) for p in pp),
               wall_s=round(time.time() - t0, 2))
    return rec


def msgcost(link, out):
    f = os.path.join(out, f"msgcost-{link}.json")
    base = [MSGCOST, "--label", link, "-q", "--min-time", "0.05"]
    if link == "lo":
        cmd = ["mpirun", "--oversubscribe", "-np", "2", "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "lo"] + base
    else:
        cmd = ["bash", NETEM, "run", "2", link, "2"] + base
    with open(f, "w") as fh:
        subprocess.run(cmd, env=env(), stdout=fh, check=True)
    d = json.load(open(f))
    p = d["patterns"]["pingpong"]
    return dict(kind="msgcost", link=link, alpha_s=p["alpha_s"], beta_bytes_per_s=p["beta_bytes_per_s"],
                ring_beta_bytes_per_s=d["patterns"]["ring"]["beta_bytes_per_s"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "netem"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", choices=("apriori", "refit"), default="refit")
    ap.add_argument("--only", help="the configurations of this mode only")
    args = ap.parse_args()
    r = subprocess.run(["bash", NETEM, "check"], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr.strip(), file=sys.stderr)
        sys.exit(r.returncode)
    for b in (STRATA, MSGCOST):
        if not os.access(b, os.X_OK):
            sys.exit(f"netem_sweep: {b} not found (build with -DSTRATA_BUILD_BENCH=ON)")
    os.makedirs(args.out, exist_ok=True)
    have_ap = os.path.exists(os.path.join(DATA, "lda-c-ap", "ap.dat"))
    if not have_ap and not args.quick:
        print(f"netem_sweep: {DATA}/lda-c-ap not found: LDA on AP left out", file=sys.stderr)
    cfgs = [c for c in configs(args.quick, have_ap) if not args.only or c["mode"] == args.only]
    links = ["1gbit"] if args.quick else LINKS_FULL
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    recs = [dict(kind="machine", cpu=cpu, nproc=os.cpu_count())]

    # 1. calibration
    for link in ("lo", "none"):
        recs.append(msgcost(link, args.out))
        print(f"msgcost {link}: alpha {recs[-1]['alpha_s'] * 1e6:.1f} us, "
              f"beta {recs[-1]['beta_bytes_per_s'] * 8 / 1e9:.2f} Gbit/s", flush=True)
    for rep in range(args.repeats):
        for i, c in enumerate(cfgs):
            recs.append(run_strata(c, "lo", args.out, f"lo-{i}-{rep}"))
            print(f"lo {c['name']} P={c['workers']}: {recs[-1]['time_per_pass_s']:.4f} s per pass", flush=True)
    runs = os.path.join(args.out, "runs.jsonl")
    with open(runs, "w") as f:
        for rec in recs:
            f.write(json.dumps(rec) + "\n")

    # 2. predictions, before any emulated run
    plan = [dict(name=c["name"], app=c["app"], mode=c["mode"], workers=c["workers"], link=l)
            for c in cfgs for l in links + (LINKS_RING if c["name"] == "mf scheduled" and c["workers"] == 2
                                            and not args.quick else [])]
    json.dump(plan, open(os.path.join(args.out, "plan.json"), "w"))
    pred = os.path.join(args.out, "predictions.json")
    subprocess.run([sys.executable, os.path.join(HERE, "scale_model.py"), "--netem", runs,
                    "--plan", os.path.join(args.out, "plan.json"), "--model", args.model, "--out", pred],
                   check=True)
    print(f"predictions written to {pred} ({time.strftime('%H:%M:%S')})", flush=True)

    # 3. the emulated runs: the repeats of a point interleaved with the
    # other points, so that a slow spell of the machine hits several
    # points once rather than one point every time
    reps = {pt["link"]: (args.repeats if pt["link"] in ("10gbit", "1gbit") else 1) for pt in plan}
    for rep in range(max(reps.values())):
        for i, pt in enumerate(plan):
            if rep >= reps[pt["link"]]:
                continue
            c = next(c for c in cfgs if c["name"] == pt["name"] and c["workers"] == pt["workers"])
            recs.append(run_strata(c, pt["link"], args.out, f"net-{i}-{rep}"))
            print(f"{pt['link']} {c['name']} P={c['workers']}: {recs[-1]['time_per_pass_s']:.4f} s per pass, "
                  f"wait {recs[-1]['wait_s']:.4f} s", flush=True)
            with open(runs, "a") as f:
                f.write(json.dumps(recs[-1]) + "\n")

    # 4. the comparison
    subprocess.run([sys.executable, os.path.join(HERE, "scale_model.py"), "--netem", runs,
                    "--plan", os.path.join(args.out, "plan.json"), "--compare", pred,
                    "--out", os.path.join(args.out, "netem.json")], check=True)


if __name__ == "__main__":
    main()
