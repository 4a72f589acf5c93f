#!/usr/bin/env python3
"""A scale model of strata's scheduled ring for MF (DSGD), fitted to what
the benchmark harness measured on this machine, validated against the runs
it can make here (1 and 2 workers, shared memory and TCP), and used to
predict time per data pass for 1 to 256 workers on Netflix-sized data and
its duplicates (x1 ... x256, as in the DSGD benchmark paper's Table 1).

Inputs (from the harness's runs.jsonl):
  c      engine compute seconds per update: the scheduled run with one worker
         (per pass compute_s, median over passes 2..N, over the repeats,
         divided by its training ratings);
  o      engine overhead per pass with one worker (time per pass - compute);
  g      the compute rate a worker keeps while another process computes on
         the other core (two plain kernels at once / one alone): memory
         contention, applied from 2 workers on;
  alpha, beta  latency and bandwidth of the ring-shift pattern (bench/msgcost)
         over shared memory and over TCP (loopback here).

Model, P workers, B strata (default B = P), depth d chunks, a rotating block
of S bytes (ceil(items / B) rows of the app's row size):
  t_c    = c * N / (P * B) / g                 compute of one sub-epoch's task
  t_ch   = alpha + (S / d) / beta              one chunk to the ring neighbour
  T_sub  = max(t_c, t_c / d + d * t_ch)        the last chunk must land before
                                               the neighbour needs it; chunks
                                               queue on the link
  T_pass = B * T_sub + o
Workers on one node (16 by default) use shared memory; a ring that spans
nodes moves every block over the network once per sub-epoch, so its slowest
link, the network, sets the pace. Loopback TCP stands in for the network
unless --net-alpha/--net-beta say otherwise; g measured with two processes
stands in for a full node. Those are the model's assumptions beyond 2
workers, and the reason its larger predictions are estimates, not
measurements.
"""
import argparse
import json
import math
import statistics
import sys

NETFLIX = dict(ratings=100480507, users=480189, items=17770)


def load(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def ok(recs, **kw):
    return [r for r in recs if r.get("rc") == 0 and "metrics" in r
            and all(r.get(k) == v for k, v in kw.items())]


def med(xs):
    return statistics.median(xs) if xs else math.nan


def row_bytes(k):
    # apps/mf rows: k factors padded to a multiple of 8, then an 8-float tail.
    return (-(-k // 8) * 8 + 8) * 4


def msg_fit(recs, label, pattern):
    for r in ok(recs, kind="msgcost", label=label):
        p = r["metrics"]["patterns"][pattern]
        return p["alpha_s"], p["beta_bytes_per_s"]
    return None


def predict(N, items, k, P, B, d, c, o, g, link):
    alpha, beta = link
    t_c = c * N / (P * B) / (g if P > 1 else 1.0)
    S = math.ceil(items / B) * row_bytes(k)
    if P == 1:
        return B * t_c + o  # no messages: blocks stay put
    t_ch = alpha + (S / d) / beta
    return B * max(t_c, t_c / d + d * t_ch) + o


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="runs.jsonl from bench/harness.py")
    ap.add_argument("--out", required=True, help="JSON output (with a markdown rendering)")
    ap.add_argument("--node-size", type=int, default=16, help="workers per node (default 16)")
    ap.add_argument("--net-alpha", type=float, default=0, help="network latency s (default: TCP loopback)")
    ap.add_argument("--net-beta", type=float, default=0, help="network bandwidth B/s (default: TCP loopback)")
    args = ap.parse_args()
    recs = load(args.runs)

    one = ok(recs, kind="strata", group="modes", label="scheduled", workers=1)
    if not one:
        sys.exit("scale_model: no scheduled one-worker run in " + args.runs)
    m0 = one[0]["metrics"]
    N, items, k, d = m0["examples"], m0["items"], m0["rank"], m0["depth"]
    per_update, over = [], []
    for r in one:
        pp = r["metrics"]["per_pass"][1:] or r["metrics"]["per_pass"]
        per_update.append(med([p["compute_s"] for p in pp]) / N)
        over.append(med([p["time_s"] - p["compute_s"] for p in pp]))
    c, o = med(per_update), max(0.0, med(over))
    k1 = [r["metrics"]["updates_per_s"] for r in ok(recs, kind="kernel")]
    k2 = [r["metrics"]["updates_per_s"] for r in ok(recs, kind="kernel2")]
    g = min(1.0, med(k2) / med(k1)) if k1 and k2 else 1.0
    shm, tcp = msg_fit(recs, "shm", "ring"), msg_fit(recs, "tcp", "ring")
    if not shm or not tcp:
        sys.exit("scale_model: msgcost results for shm and tcp are missing")
    net = (args.net_alpha or tcp[0], args.net_beta or tcp[1])

    # Validation: every measured scheduled point with its transport.
    val = []
    for group, label, tr, link in [("modes", "scheduled", "shm", shm), ("tcp", "scheduled tcp", "tcp", tcp),
                                   ("weak", "x2", "shm", shm)]:
        for P in (1, 2):
            rs = ok(recs, kind="strata", group=group, label=label, workers=P)
            if not rs:
                continue
            m = rs[0]["metrics"]
            meas = [r["metrics"]["time_per_pass_s"] for r in rs]
            pred = predict(m["examples"], m["items"], m["rank"], P, m["strata"], m["depth"], c, o, g, link)
            val.append(dict(group=group, label=label, transport=tr, workers=P, strata=m["strata"],
                            examples=m["examples"], predicted_s=pred, measured_median_s=med(meas),
                            measured_min_s=min(meas), measured_max_s=max(meas),
                            error=pred / med(meas) - 1,
                            calibration=(group == "modes" and P == 1)))

    # Predictions: Netflix and its duplicates, 1..256 workers, B = P.
    preds = []
    Ps = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    for mult in (1, 4, 16, 64, 256):
        pts = []
        for P in Ps:
            link = shm if P <= args.node_size else net
            t = predict(NETFLIX["ratings"] * mult, NETFLIX["items"] * mult, k, P, P, d, c, o, g, link)
            pts.append(dict(workers=P, time_per_pass_s=t))
        preds.append(dict(name=f"Netflix x{mult}", duplicate=mult, points=pts))
    # The paper's cluster linked nodes by 10 Gb Ethernet, slower than
    # loopback TCP: the same prediction with an assumed 10 GbE network.
    gbe = (50e-6, 1.17e9)
    pts = []
    for P in Ps:
        link = shm if P <= args.node_size else gbe
        pts.append(dict(workers=P, time_per_pass_s=predict(NETFLIX["ratings"], NETFLIX["items"], k, P, P,
                                                           d, c, o, g, link)))
    preds.append(dict(name="Netflix x1, 10 GbE (assumed 50 us, 1.17 GB/s)", duplicate=1, points=pts))
    weak = []
    for mult in (1, 2, 4, 8, 16, 32):
        P = 8 * mult
        link = shm if P <= args.node_size else net
        weak.append(dict(workers=P, duplicate=mult, time_per_pass_s=predict(
            NETFLIX["ratings"] * mult, NETFLIX["items"] * mult, k, P, P, d, c, o, g, link)))
    preds.append(dict(name="weak: Netflix x(P/8) on P workers", points=weak))

    md = []
    md.append(f"Inputs: c = {c * 1e9:.2f} ns per update (engine, 1 worker), o = {o * 1e3:.3f} ms per pass, "
              f"g = {g:.3f} (rate kept beside a second process), ring shift shm alpha = {shm[0] * 1e6:.2f} us, "
              f"beta = {shm[1] / 1e9:.2f} GB/s; TCP alpha = {tcp[0] * 1e6:.2f} us, beta = {tcp[1] / 1e9:.2f} GB/s; "
              f"rank {k}, depth {d}, rows of {row_bytes(k)} bytes.\n")
    md.append("| run | transport | workers | strata | predicted ms | measured ms median (min-max) | error |")
    md.append("|---|---|---|---|---|---|---|")
    for v in val:
        md.append(f"| {v['group']} {v['label']} | {v['transport']} | {v['workers']} | {v['strata']} | "
                  f"{v['predicted_s'] * 1e3:.2f} | {v['measured_median_s'] * 1e3:.2f} "
                  f"({v['measured_min_s'] * 1e3:.2f}-{v['measured_max_s'] * 1e3:.2f}) | "
                  f"{100 * v['error']:+.1f}%{' (calibration)' if v['calibration'] else ''} |")
    md.append("")
    md.append(f"Predicted seconds per pass, Netflix-sized data (rank {k}, B = P; "
              f"{args.node_size} workers per node, beyond one node the network is "
              + ("the given one" if args.net_alpha or args.net_beta else "loopback TCP as measured here")
              + "):\n")
    md.append("| workers | " + " | ".join(p["name"] for p in preds[:-1]) + " |")
    md.append("|---|" + "---|" * (len(preds) - 1))
    for i, P in enumerate(Ps):
        md.append(f"| {P} | " + " | ".join(f"{p['points'][i]['time_per_pass_s']:.3g}" for p in preds[:-1]) + " |")
    md.append("")
    md.append("Weak scaling, Netflix x(P/8) on P workers: " + ", ".join(
        f"P={w['workers']}: {w['time_per_pass_s']:.3g} s" for w in weak))
    out = dict(inputs=dict(compute_s_per_update=c, overhead_s=o, contention=g, shm_ring=shm, tcp_ring=tcp,
                           net=net, rank=k, depth=d, row_bytes=row_bytes(k), node_size=args.node_size),
               validation=val, predictions=preds, markdown="\n".join(md))
    with open(args.out + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    import os
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
