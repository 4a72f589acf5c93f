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

With the harness's sfb group (strata mlr, 2 workers) it also models
sufficient factor broadcasting against full-matrix synchronisation (the
"sfb" key of the output, sfb_model below): bytes and messages per clock
from the wire formats (SFB: P (P - 1) (24 + K (12 + 4 J + 8 nnz_v)), each
set reaching every other worker once, relayed under partial broadcast; FMS: every
worker reads all of W and writes back the rows its minibatch touched),
compute and factor application from the sfb runs' measured rates, message
latency and bandwidth from msgcost, and the engine's own costs per factor
set, per table message and per table byte calibrated on named runs (the
smallest sfb run; the smallest and largest bsp runs); validated against the
other 2-worker runs, predicted for 2 to 32 workers at the largest J x D.
"""
import argparse
import json
import math
import os
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


def predict(N, items, k, P, B, d, c, o, g, link, gate=0.0):
    """gate: the ring's transfers gated by MPI progress between chunks, as a
    share of a sub-epoch's compute (RING_GATE over TCP between hosts; 0
    over shared memory, where the receiver pulls the data)."""
    alpha, beta = link
    t_c = c * N / (P * B) / (g if P > 1 else 1.0)
    S = math.ceil(items / B) * row_bytes(k)
    if P == 1:
        return B * t_c + o  # no messages: blocks stay put
    t_ch = alpha + (S / d) / beta
    return B * max(t_c, t_c / d + d * t_ch + gate * t_c) + o


# ---- sufficient factor broadcasting (SFB) against full-matrix sync (FMS) ----
#
# MLR (strata mlr) on P workers, K examples per worker per clock, W of J
# classes x `rows` rows (features + bias), nnz_v stored entries per sample's
# v (bias included). The byte counts are those of the wire formats
# (worker/sfb.c, comm/ps.h); bench/harness.py uses the same functions for
# its "predicted" columns.

SFB_MSG_HEADER = 24     # one per message: P * (P - 1) messages per clock
SFB_FACTOR_HEADER = 12  # one per factor
PS_HEADER = 24          # comm/ps.h's ps_hdr


def sfb_factor_bytes(K, J, nnz_v):
    """One worker's factor set of one clock: K factors of u (J floats) and
    a sparse v (nnz_v index/value pairs), with their headers."""
    return SFB_MSG_HEADER + K * (SFB_FACTOR_HEADER + 4 * J + 8 * nnz_v)


def sfb_per_clock(P, Q, K, J, nnz_v):
    """(bytes, messages) sent per clock by all P workers: each set reaches
    each of the P - 1 other workers once, as one message, sent by its maker
    to its Q out-peers and relayed on to the rest (worker/sfb.c), so Q
    changes who sends, not how much (the seed's Figure 4 counts P Q K
    factors for a partial broadcast without relays, whose replicas never
    agree)."""
    return P * (P - 1) * sfb_factor_bytes(K, J, nnz_v), P * (P - 1)


def fms_touched_rows(K, rows, nnz_v):
    """Modelled: distinct rows one worker's minibatch of K examples touches,
    the bias row plus K (nnz_v - 1) features drawn uniformly from the rest.
    (The synthetic sets draw half of them from class supports, so this is
    an estimate; the reads, every row each clock, dominate the bytes.)"""
    d = max(1, rows - 1)
    return 1 + d * (1 - (1 - 1 / d) ** (K * max(0, nnz_v - 1)))


def fms_per_clock(P, K, J, rows, nnz_v):
    """(bytes, messages) sent per clock by all P workers in the table modes,
    the rows sharded over the P workers: each worker asks every shard for
    its rows (READ: 4 bytes a row id), every shard answers with them (ROWS:
    an id and J floats a row) and each worker sends every shard the deltas
    of the rows its minibatch touched (UPDATE); a header per message, 3 P
    messages per worker. O(P J D) against SFB's O(P^2 K (J + nnz))."""
    T = fms_touched_rows(K, rows, nnz_v)
    per_worker = 3 * P * PS_HEADER + rows * 4 + rows * (4 + 4 * J) + T * (4 + 4 * J)
    return P * per_worker, 3 * P * P


def mlr_shape(m):
    """(J, rows, K, nnz_v, samples) of an mlr run's metrics."""
    return m["classes"], m["rows"], m["minibatch"], m["nnz_per_sample"], m["examples"]


def sfb_rates(m):
    """Per worker, passes 2..N (medians): compute seconds per sample without
    the application of factors, and apply seconds per factor applied (own
    and received), from an sfb run's per-pass worker figures."""
    pp = m["per_pass"][1:] or m["per_pass"]
    comp, app = [], []
    for p in pp:
        for w in p["workers"]:
            applied = w["factors_out"] + w["factor_delay"]["factors"]
            if w["factors_out"] > 0:
                comp.append((w["compute_s"] - w["apply_s"]) / w["factors_out"])
            if applied > 0:
                app.append(w["apply_s"] / applied)
    return med(comp), med(app)


def clocks_per_pass(n, P, K):
    return -(-n // (P * K))


def sfb_clock_s(P, Q, K, J, nnz_v, c, a, o, r, link):
    """Modelled seconds per clock of one SFB worker: compute its K samples,
    apply every worker's factors (P sets of K), send P - 1 sets (its own to
    Q out-peers, P - 1 - Q relayed on a circulant topology) while receiving
    as many, each a ring-shift message (alpha + bytes / beta) plus r per
    byte (the engine's handling of a set beyond the link: receive buffers,
    checks, waiting on the slower peer; calibrated), and o, the clock's
    fixed cost (polling, scheduling, the round's latency; calibrated,
    assumed constant in P and Q). Under staleness 0 a clock waits only for
    its in-peers' own sets, and a relayed set is applied a hop later, so Q
    adds no term here."""
    alpha, beta = link
    return c * K + a * K * P + (P - 1) * (alpha + sfb_factor_bytes(K, J, nnz_v) * (1 / beta + r)) + o


def fms_clock_s(P, K, J, rows, nnz_v, c, a, o, h, link):
    """Modelled seconds per clock of one FMS worker: compute and apply its
    own factors (to its cached rows and the oplog), its share of the table
    traffic, 3 P messages at alpha and bytes / P at h + 1 / beta each (h:
    the tables' handling of a byte: copies, coalescing, allocation;
    calibrated), and o, the clock's fixed cost (calibrated, assumed
    constant in P)."""
    alpha, beta = link
    b, msgs = fms_per_clock(P, K, J, rows, nnz_v)
    return c * K + a * K + (msgs / P) * alpha + (b / P) * (h + 1 / beta) + o


def sfb_model(recs, shm, tcp, net, node_size, workers_list):
    """The SFB/FMS part of the model, or None without the harness's sfb
    group (2 workers: sfb s=0, bsp, ssp s=1 on each J x D).

    Measured: c and a (the sfb runs' own compute and apply time, per sample
    and per factor, at each J x D), alpha and beta (bench/msgcost).
    Modelled: bytes and messages per clock (the wire formats).
    Calibrated (what the model cannot derive, fitted to named runs and then
    not validated on them): o_sfb and r, an SFB clock's fixed cost and the
    cost per byte of a set beyond the link's, from the smallest and the
    largest J x D's sfb runs; o_tab and h, the same for an FMS clock and
    the tables' bytes, from the smallest and the largest J x D's bsp runs.
    With one J x D only the fixed costs are fitted (r = 0; h alone for
    FMS, o_tab = 0)."""
    runs = ok(recs, kind="strata", group="sfb", app="mlr")
    by = {}
    for r in runs:
        by.setdefault((r["jd"], r["label"]), []).append(r)
    rates = {}
    for jd in sorted({k[0] for k in by}):
        rs = by.get((jd, "sfb s=0"))
        if rs:
            cs, as_ = zip(*[sfb_rates(r["metrics"]) for r in rs])
            rates[jd] = (med(cs), med(as_))
    if not rates:
        return None
    sizes = sorted(rates)
    small, big = sizes[0], sizes[-1]

    def measured_clock(jd, label):
        """(median seconds per clock, metrics) of a point, or None."""
        rs = by.get((jd, label))
        if not rs:
            return None
        m = rs[0]["metrics"]
        J, rows, K, nv, n = mlr_shape(m)
        return med([r["metrics"]["time_per_pass_s"] for r in rs]) / clocks_per_pass(n, m["workers"], K), m

    def two_points(cal):
        """(fixed, per byte) through two (bytes, rest) points; one point:
        (rest, 0). Negative fits (noise) are clamped to 0."""
        if len(cal) == 2 and cal[0][0] != cal[1][0]:
            (b1, r1), (b2, r2) = cal
            per = max(0.0, (r2 - r1) / (b2 - b1))
            return max(0.0, r1 - b1 * per), per
        return (max(0.0, cal[-1][1]), 0.0) if cal else (0.0, 0.0)

    # o_sfb, r: the sfb clocks less their measured and linked terms, at the
    # smallest and the largest J x D, against the set bytes a worker sends.
    cal = []
    for jd in ([small, big] if small != big else [big]):
        t, m = measured_clock(jd, "sfb s=0")
        J, rows, K, nv, n = mlr_shape(m)
        Q = m["sfb"]["peers"]
        rest = t - sfb_clock_s(m["workers"], Q, K, J, nv, *rates[jd], 0.0, 0.0, shm)
        cal.append(((m["workers"] - 1) * sfb_factor_bytes(K, J, nv), rest))
    o_sfb, r_sfb = two_points(cal)
    # o_tab, h: t = base + msgs * o_tab + bytes * h at the two bsp points.
    cal = []
    for jd in ([small, big] if small != big else [big]):
        mc = measured_clock(jd, "bsp")
        if mc:
            t, m = mc
            J, rows, K, nv, n = mlr_shape(m)
            P = m["workers"]
            b, msgs = fms_per_clock(P, K, J, rows, nv)
            rest = t - fms_clock_s(P, K, J, rows, nv, *rates[jd], 0.0, 0.0, shm)
            cal.append((b / P, rest))
    if len(cal) == 2:
        o_tab, h = two_points(cal)
    else:  # one J x D: the tables' bytes outweigh a fixed cost
        o_tab, h = 0.0, max(0.0, cal[-1][1] / cal[-1][0]) if cal else 0.0
    calibrated = {(small, "sfb s=0"), (big, "sfb s=0"), (small, "bsp"), (big, "bsp")}

    val = []
    for jd in sizes:
        c, a = rates[jd]
        for label in ("sfb s=0", "bsp", "ssp s=1"):
            rs = by.get((jd, label))
            if not rs:
                continue
            m = rs[0]["metrics"]
            J, rows, K, nv, n = mlr_shape(m)
            P = m["workers"]
            if label.startswith("sfb"):
                Q = m["sfb"]["peers"]
                t = sfb_clock_s(P, Q, K, J, nv, c, a, o_sfb, r_sfb, shm)
                b, msgs = sfb_per_clock(P, Q, K, J, nv)
                how = "calibration (o_sfb, r)" if (jd, label) in calibrated else "c, a of this run"
            else:
                t = fms_clock_s(P, K, J, rows, nv, c, a, o_tab, h, shm)
                b, msgs = fms_per_clock(P, K, J, rows, nv)
                how = ("calibration (o_tab, h)" if (jd, label) in calibrated
                       else "c, a of the sfb run" + (" (no staleness term)" if label.startswith("ssp") else ""))
            meas = [r["metrics"]["time_per_pass_s"] for r in rs]
            pred = t * clocks_per_pass(n, P, K)
            val.append(dict(jd=jd, classes=J, rows=rows, label=label, workers=P, minibatch=K,
                            bytes_per_clock=b, messages_per_clock=msgs, predicted_s=pred,
                            measured_median_s=med(meas), measured_min_s=min(meas),
                            measured_max_s=max(meas), error=pred / med(meas) - 1, inputs=how,
                            calibration=(jd, label) in calibrated))
    # Predictions: the largest point's shape (J, rows, K, nnz) at more
    # workers. Per clock the P workers process P K samples; a pass of the
    # run's n samples is ceil(n / (P K)) clocks.
    m = by[(big, "sfb s=0")][0]["metrics"]
    J, rows, K, nv, n = mlr_shape(m)
    c, a = rates[big]
    preds = []
    for P in workers_list:
        link = shm if P <= node_size else net
        row = dict(workers=P, link="shm" if P <= node_size else "net",
                   clocks_per_pass=clocks_per_pass(n, P, K))
        # Partial broadcast relays every set to every worker: the same work
        # per worker for any Q (sfb_clock_s), so one row stands for all Q.
        t = sfb_clock_s(P, P - 1, K, J, nv, c, a, o_sfb, r_sfb, link)
        b, msgs = sfb_per_clock(P, P - 1, K, J, nv)
        row["sfb"] = dict(peers=P - 1, clock_s=t, samples_per_s=P * K / t, bytes_per_clock=b,
                          messages_per_clock=msgs, time_per_pass_s=t * row["clocks_per_pass"])
        t = fms_clock_s(P, K, J, rows, nv, c, a, o_tab, h, link)
        b, msgs = fms_per_clock(P, K, J, rows, nv)
        row["fms"] = dict(clock_s=t, samples_per_s=P * K / t, bytes_per_clock=b,
                          messages_per_clock=msgs, time_per_pass_s=t * row["clocks_per_pass"])
        preds.append(row)
    inputs = [
        ("c", f"{c * 1e6:.3f} us per sample", "measured: sfb runs, (compute_s - apply_s) / factors_out "
         "per worker, passes 2..N, median (2 workers on 2 cores: contention included)"),
        ("a", f"{a * 1e6:.3f} us per factor applied", "measured: sfb runs, apply_s / (own + received "
         "factors) per worker, passes 2..N, median"),
        ("alpha, beta (shm)", f"{shm[0] * 1e6:.2f} us, {shm[1] / 1e9:.2f} GB/s", "measured: bench/msgcost ring shift"),
        ("alpha, beta (net)", f"{net[0] * 1e6:.2f} us, {net[1] / 1e9:.2f} GB/s",
         "measured: bench/msgcost ring shift over TCP loopback, or --net-alpha/--net-beta"),
        ("o_sfb, r", f"{o_sfb * 1e6:.2f} us per clock, {r_sfb * 1e9:.3f} ns per set byte",
         f"calibrated: the sfb runs at J x D = {small:g} and {big:g}, their time per clock less "
         "compute, apply and the link; o_sfb assumed constant in P and Q"),
        ("o_tab, h", f"{o_tab * 1e6:.2f} us per clock, {h * 1e9:.3f} ns per byte",
         f"calibrated: the bsp runs at J x D = {small:g} and {big:g}, their time per clock less compute, "
         "apply and the link"),
        ("SFB bytes, messages", "P (P - 1) (24 + K (12 + 4 J + 8 nnz_v)), P (P - 1)",
         "modelled: the wire format, every set to every other worker once"),
        ("FMS bytes, messages", "P (72 P + rows (8 + 4 J) + T (4 + 4 J)), 3 P^2",
         "modelled: the wire format; T, the rows a minibatch touches, for uniformly drawn features"),
    ]
    md = []
    md.append(f"MLR; c and a at J x D = {big:g} ({J} classes x {rows} rows, nnz_v {nv}, K {K}) shown; each "
              "J x D uses its own. Every input with its source:\n")
    md.append("| input | value | source |\n|---|---|---|")
    md += [f"| {k} | {v} | {s_} |" for k, v, s_ in inputs]
    md.append("")
    md.append("Per clock, one worker: SFB = c K + a K P + (P - 1) (alpha + set bytes (1 / beta + r)) + o_sfb "
              "(any Q: partial broadcast relays every set to every worker); "
              "FMS = c K + a K + 3 P alpha + (bytes / P) (h + 1 / beta) + o_tab, bytes as above. "
              "A pass is ceil(n / (P K)) clocks.\n")
    md.append("Validation (2 workers, shared memory; calibration rows are fitted, not validated):\n")
    md.append("| J x D | mode | bytes per clock (model) | predicted ms per pass | measured ms median (min-max) "
              "| error | inputs |\n|---|---|---|---|---|---|---|")
    for v in val:
        md.append(f"| {v['jd']:g} | {v['label']} | {v['bytes_per_clock']:.4g} | {v['predicted_s'] * 1e3:.2f} | "
                  f"{v['measured_median_s'] * 1e3:.2f} ({v['measured_min_s'] * 1e3:.2f}-"
                  f"{v['measured_max_s'] * 1e3:.2f}) | {100 * v['error']:+.1f}% | {v['inputs']} |")
    md.append("")
    md.append(f"Predicted (modelled: estimates, not measurements), J x D = {big:g}, K = {K} per worker, "
              f"{n} samples per pass, {node_size} workers per node (beyond one node every message at the "
              "network's alpha and beta). The model has no explicit term for waiting on the slowest worker "
              "(the calibrated terms hold what the 2-worker runs waited).\n")
    md.append("| workers | clocks per pass | SFB (any Q): ms per clock | samples/s | MB per clock "
              "| FMS: ms per clock | samples/s | MB per clock "
              "| SFB / FMS time |\n|---|---|---|---|---|---|---|---|---|")
    for p in preds:
        s1, f = p["sfb"], p["fms"]
        md.append(f"| {p['workers']} | {p['clocks_per_pass']} | {s1['clock_s'] * 1e3:.3g} | "
                  f"{s1['samples_per_s']:.3g} | {s1['bytes_per_clock'] / 1e6:.3g} | "
                  f"{f['clock_s'] * 1e3:.3g} | {f['samples_per_s']:.3g} | "
                  f"{f['bytes_per_clock'] / 1e6:.3g} | {s1['clock_s'] / f['clock_s']:.3g} |")
    return dict(point=dict(jd=big, classes=J, rows=rows, minibatch=K, nnz_v=nv, samples=n),
                inputs=dict(compute_s_per_sample=c, apply_s_per_factor=a,
                            rates_by_size={f"{jd:g}": dict(compute_s_per_sample=r[0], apply_s_per_factor=r[1])
                                           for jd, r in rates.items()},
                            sfb_clock_s=o_sfb, sfb_set_byte_s=r_sfb, table_clock_s=o_tab, table_byte_s=h, shm_ring=shm, net=net,
                            node_size=node_size, sources={k: s_ for k, _, s_ in inputs}),
                validation=val, predictions=preds, markdown="\n".join(md))


# ---- the emulated cluster network (bench/netem.sh, bench/netem_sweep.py) ----
#
# Every configuration (app x mode x workers) is fitted on its own runs over
# TCP loopback, all ranks on one host (medians over repeats), and predicted
# on each emulated link from those runs' compute and bytes, before the link
# is run. Terms common to both models:
#  - a link of rate R bits/s carries R/8 * TCP_PAYLOAD bytes/s of payload
#    (tbf counts Ethernet, IPv4 and TCP headers: 14 + 20 + 32 bytes on a
#    1448-byte segment); its latency alpha is the unshaped emulated
#    network's, measured (no delay is added; a real network's would be
#    carried here);
#  - the table's own shard is reached through MPI's self transport: (P - 1)
#    / P of a worker's table bytes cross the network.
# The a priori model (--model apriori), as written before any emulated run:
#  - scheduled (the ring): predict() above, with the rotating bytes a worker
#    sends per sub-epoch (its bytes_sent per pass / B) as the block and the
#    engine's overhead o what the loopback run leaves beyond the model;
#  - bsp, absp: the table's traffic is on the critical path, each direction
#    carrying its share: wire = max(sent, received) * (P - 1) / P / beta
#    per pass, added to the loopback time in place of the loopback's wire;
#  - ssp, essp: the same wire time overlaps the next clock's compute:
#    T = (T_lo - compute) + max(compute, wire).
# The refit (--model refit, the default), from what the first sweep's
# misses showed (bench/README.md, "Over an emulated network"):
#  - ring: a chunk crosses the link only while its sender and receiver call
#    MPI, which they do between chunks (TCP has no progress thread), so a
#    sub-epoch's transfers end later than the link alone allows; the term
#    RING_GATE * t_c in the sub-epoch's critical path, RING_GATE fitted on
#    the first sweep's links of 500 Mbit/s and more;
#  - every table mode: the traffic of both directions in turn and none of it
#    behind compute (it too moves only while the worker is in the table):
#    wire = (sent + received) * (P - 1) / P / beta, added as in bsp;
#  - essp (the second sweep's misses): a share ESSP_OVERLAP of that wire
#    time does hide behind compute, the rows the shards push eagerly
#    arriving while their readers compute; ESSP_OVERLAP fitted on the second
#    sweep's essp points at 1 Gbit/s and 500 Mbit/s, checked by a third.
TCP_PAYLOAD = 1448 / (1448 + 14 + 20 + 32)
RING_GATE = 0.2
ESSP_OVERLAP = 0.35


def rate_bits(link):
    import re
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", link)
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def netem_link(link, cal):
    """(alpha, beta) of a link: measured for loopback and the unshaped
    emulation, else the unshaped alpha and the rate's payload bandwidth."""
    if link in ("lo", "none"):
        return cal[link]["alpha_s"], cal[link]["beta_bytes_per_s"]
    return cal["none"]["alpha_s"], rate_bits(link) / 8 * TCP_PAYLOAD


def netem_predict(lo, ab, ab_lo, model="refit"):
    """Time per pass and worker wait per pass (None: not modelled) on link
    ab, from the configuration's loopback runs lo (medians)."""
    P, B, d = lo["workers"], lo["strata"], lo["depth"]
    T, comp = lo["time_per_pass_s"], lo["compute_s"]
    if lo["mode"] == "scheduled":
        t_c, S = comp / B, lo["bytes_sent"] / B
        gate = RING_GATE * t_c if model == "refit" else 0.0

        def sub(link):
            a, b = link
            return max(t_c, t_c / d + d * (a + S / d / b) + gate)
        o = T - B * sub(ab_lo)
        return B * sub(ab) + o, B * (sub(ab) - t_c)
    if model == "refit":
        share = 1 - ESSP_OVERLAP if lo["mode"] == "essp" else 1.0
        wire = lambda link: share * (lo["bytes_sent"] + lo["bytes_recv"]) * (P - 1) / P / link[1]
        return T - wire(ab_lo) + wire(ab), None
    wire = lambda link: max(lo["bytes_sent"], lo["bytes_recv"]) * (P - 1) / P / link[1]
    if lo["mode"] in ("bsp", "absp"):
        return T - wire(ab_lo) + wire(ab), None
    rest = T - comp
    return rest + max(comp, wire(ab)), None


def netem_medians(recs, link_filter=None):
    """(name, workers, link) -> the median over repeats of each figure."""
    groups = {}
    for r in recs:
        if r.get("kind") == "netem" and (link_filter is None or link_filter(r["link"])):
            groups.setdefault((r["name"], r["workers"], r["link"]), []).append(r)
    out = {}
    for k, rs in groups.items():
        m = dict(rs[0])
        for f in ("time_per_pass_s", "compute_s", "wait_s", "wait_max_s", "bytes_sent", "bytes_recv"):
            m[f] = med([r[f] for r in rs])
        m["repeats"] = len(rs)
        m["time_min_s"] = min(r["time_per_pass_s"] for r in rs)
        m["time_max_s"] = max(r["time_per_pass_s"] for r in rs)
        out[k] = m
    return out


def netem_main(args):
    recs = load(args.netem)
    cal = {r["link"]: r for r in recs if r.get("kind") == "msgcost"}
    lo = {(k[0], k[1]): v for k, v in netem_medians(recs, lambda l: l == "lo").items()}
    plan = json.load(open(args.plan))
    preds = []
    for pt in plan:
        base = lo[(pt["name"], pt["workers"])]
        t, w = netem_predict(base, netem_link(pt["link"], cal), netem_link("lo", cal), args.model)
        preds.append(dict(pt, predicted_s=t, predicted_wait_s=w))
    if not args.compare:
        with open(args.out, "w") as f:
            json.dump(dict(model=args.model, calibration=cal, predictions=preds), f, indent=1)
        return
    made_all = json.load(open(args.compare))
    made = made_all["predictions"]
    meas = netem_medians(recs, lambda l: l != "lo")
    rows = []
    for p in made:
        m = meas.get((p["name"], p["workers"], p["link"]))
        if not m:
            continue
        rows.append(dict(p, measured_s=m["time_per_pass_s"], error=p["predicted_s"] / m["time_per_pass_s"] - 1,
                         wait_s=m["wait_s"], compute_s=m["compute_s"], bytes_sent=m["bytes_sent"],
                         bytes_recv=m["bytes_recv"], repeats=m["repeats"], time_min_s=m["time_min_s"],
                         time_max_s=m["time_max_s"], lo_s=lo[(p["name"], p["workers"])]["time_per_pass_s"]))
    # The ring's 5% point for scheduled MF, 2 workers: measured (between the
    # two links around it, linearly in 1 / bandwidth) and predicted.
    ring = sorted((r for r in rows if r["name"] == "mf scheduled" and r["workers"] == 2),
                  key=lambda r: -rate_bits(r["link"]))
    point = {}
    for a, b in zip(ring, ring[1:]):
        fa, fb = a["wait_s"] / a["measured_s"], b["wait_s"] / b["measured_s"]
        if fa <= 0.05 < fb:
            ia, ib = 1 / rate_bits(a["link"]), 1 / rate_bits(b["link"])
            point["measured_bits"] = 1 / (ia + (0.05 - fa) / (fb - fa) * (ib - ia))
            break
    if ring:
        base = lo[("mf scheduled", 2)]
        lo_ab = netem_link("lo", cal)
        hi, low = 1e11, 1e6
        for _ in range(60):  # the predicted wait share falls as bandwidth grows
            mid = (hi * low) ** 0.5
            t, w = netem_predict(base, (cal["none"]["alpha_s"], mid / 8 * TCP_PAYLOAD), lo_ab,
                                 made_all.get("model", "apriori"))
            (low, hi) = (mid, hi) if w / t > 0.05 else (low, mid)
        point["predicted_bits"] = hi
    md = [f"CPU: {next((r['cpu'] for r in recs if r.get('kind') == 'machine'), '?')}. Model: "
          f"{made_all.get('model', 'apriori')}. Calibration: TCP loopback "
          f"alpha {cal['lo']['alpha_s'] * 1e6:.1f} us, beta {cal['lo']['beta_bytes_per_s'] * 8 / 1e9:.2f} Gbit/s; "
          f"the unshaped emulated network alpha {cal['none']['alpha_s'] * 1e6:.1f} us, "
          f"beta {cal['none']['beta_bytes_per_s'] * 8 / 1e9:.2f} Gbit/s (msgcost ping-pong).", "",
          "Times per pass are medians of passes 2..N; with repeats, the median over runs (min-max).", "",
          "| link | run | workers | loopback s | measured s | predicted s | error | wait s (measured / predicted) "
          "| MB sent per worker per pass |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pw = "" if r["predicted_wait_s"] is None else f" / {r['predicted_wait_s']:.4f}"
        rng = f" ({r['time_min_s']:.4f}-{r['time_max_s']:.4f})" if r["repeats"] > 1 else ""
        md.append(f"| {r['link']} | {r['name']} | {r['workers']} | {r['lo_s']:.4f} | {r['measured_s']:.4f}{rng} | "
                  f"{r['predicted_s']:.4f} | {100 * r['error']:+.1f}% | {r['wait_s']:.4f}{pw} | "
                  f"{r['bytes_sent'] / 1e6:.2f} |")
    if point:
        md += ["", "The bandwidth below which the ring's wait exceeds 5% of a pass (MF, k = 100, 10M ratings, "
               "2 workers): measured " + (f"{point['measured_bits'] / 1e6:.0f} Mbit/s" if "measured_bits" in point
                                          else "not bracketed by the links run")
               + f", predicted {point.get('predicted_bits', float('nan')) / 1e6:.0f} Mbit/s."]
    out = dict(calibration=cal, rows=rows, ring_5pct=point, markdown="\n".join(md))
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
        f.write(out["markdown"] + "\n")
    print(out["markdown"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", help="runs.jsonl from bench/harness.py")
    ap.add_argument("--netem", help="runs.jsonl from bench/netem_sweep.py: predict its plan from its loopback runs")
    ap.add_argument("--plan", help="with --netem: the points to predict (netem_sweep.py's plan.json)")
    ap.add_argument("--compare", help="with --netem: predictions made before the runs, to compare with them")
    ap.add_argument("--model", choices=("apriori", "refit"), default="refit",
                    help="with --netem: the model (see the comment above netem_predict)")
    ap.add_argument("--out", required=True, help="JSON output (with a markdown rendering)")
    ap.add_argument("--node-size", type=int, default=16, help="workers per node (default 16)")
    ap.add_argument("--net-alpha", type=float, default=0, help="network latency s (default: TCP loopback)")
    ap.add_argument("--net-beta", type=float, default=0, help="network bandwidth B/s (default: TCP loopback)")
    args = ap.parse_args()
    if args.netem:
        return netem_main(args)
    if not args.runs:
        sys.exit("scale_model: --runs or --netem is needed")
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
    sfb = sfb_model(recs, shm, tcp, net, args.node_size, [2, 4, 8, 16, 32])

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
    # The paper's cluster linked nodes by 10 Gb Ethernet: the same
    # predictions over 10 GbE with the terms the emulated network checked
    # (bench/netem_sweep.py): TCP's payload share of the line rate and the
    # ring's progress gate; the latency, which the emulation could not add,
    # is assumed (50 us).
    gbe = (50e-6, 10e9 / 8 * TCP_PAYLOAD)
    gbe_preds = []
    for mult in (1, 4, 16, 64, 256):
        pts = []
        for P in Ps:
            net_hop = P > args.node_size
            pts.append(dict(workers=P, time_per_pass_s=predict(
                NETFLIX["ratings"] * mult, NETFLIX["items"] * mult, k, P, P, d, c, o, g,
                gbe if net_hop else shm, RING_GATE if net_hop else 0.0)))
        gbe_preds.append(dict(name=f"Netflix x{mult}", duplicate=mult, points=pts))
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
    md.append(f"The same over 10 GbE between nodes ({args.node_size} workers per node; payload "
              f"{gbe[1] / 1e9:.3f} GB/s, the ring's progress gate {RING_GATE} of a sub-epoch's compute, "
              f"latency assumed {gbe[0] * 1e6:.0f} us), seconds per pass:\n")
    md.append("| workers | " + " | ".join(p["name"] for p in gbe_preds) + " |")
    md.append("|---|" + "---|" * len(gbe_preds))
    for i, P in enumerate(Ps):
        md.append(f"| {P} | " + " | ".join(f"{p['points'][i]['time_per_pass_s']:.3g}" for p in gbe_preds) + " |")
    md.append("")
    md.append("Weak scaling, Netflix x(P/8) on P workers: " + ", ".join(
        f"P={w['workers']}: {w['time_per_pass_s']:.3g} s" for w in weak))
    out = dict(inputs=dict(compute_s_per_update=c, overhead_s=o, contention=g, shm_ring=shm, tcp_ring=tcp,
                           net=net, rank=k, depth=d, row_bytes=row_bytes(k), node_size=args.node_size),
               validation=val, predictions=preds, predictions_10gbe=gbe_preds, markdown="\n".join(md))
    if sfb:
        out["sfb"] = sfb
    with open(args.out + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    import os
    os.replace(args.out + ".tmp", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
