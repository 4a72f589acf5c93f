#!/usr/bin/env python3
"""strata benchmark harness: runs a declared matrix of points (app x mode x
workers x data x strata), each repeated, and writes

  OUT/runs.jsonl   one JSON object per run: profile, group, label, every
                   parameter, the command, exit status, the run's full
                   --metrics-out summary (machine, git revision, metrics)
  OUT/summary.md   the tables: time per pass min / median / max over the
                   repeats, ratios to the plain serial kernel and to the
                   engine's serial mode, objectives, waits, bytes, staleness
  OUT/plots/*.png  gnuplot figures (see bench/README.md for what each shows)

Besides MF and LDA, the sfb and qsweep groups run `strata mlr` (multiclass
logistic regression) on synthetic sets: sufficient factor broadcasting
against full-matrix synchronisation (bsp, ssp) and serial over a sweep of
J x D, and partial broadcast over Q out-peers; their bytes per clock are
compared with the cost model of bench/scale_model.py.

Time per pass is the engine's own figure: wall seconds per data pass,
median over passes 2..N (--metrics-out time_per_pass_s). Ratios compare
rates on the same examples: a run's time per pass over the time the plain
kernel (bench/mf_kernel) would need for that run's examples at its measured
rate.

Usage: bench/harness.py --profile quick|full|smoke [--out DIR] [--bin DIR]
       [--data-dir DIR] [--repeats N] [--no-plots]
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# mpirun as every run here starts it. --stdin none: Open MPI 4.1's mpirun
# forwards its stdin to rank 0 and, with stdin at end of file (/dev/null)
# and a short job, can die of SIGSEGV itself (open-mpi/ompi#7483; see
# docs/failure.md). No strata program reads stdin.
MPIRUN = ["mpirun", "--oversubscribe", "--stdin", "none"]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from scale_model import fms_per_clock, sfb_per_clock  # noqa: E402  (the cost model's byte counts)

TCP = ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"]

# ---- profiles ---------------------------------------------------------------

PROFILES = {
    # A few seconds: the test suite runs it to check the outputs parse.
    "smoke": dict(
        repeats=1, passes=3, rank=16,
        mf_data="synth:users=3000,items=600,ratings=60000,seed=1",
        lda_data="synth:docs=300,len=50,vocab=800,topics=10,seed=1", lda_topics=10,
        lda_real=False, strata=[1, 2], straggle=[0.0, 1.0], straggle_passes=3,
        msgcost=["--max-bytes", "1048576", "--reps", "5"], timeout=120,
        pr_real=False, pr_graph="synth:scale=12,edge-factor=8,seed=1", pr_passes=5,
        lasso_data="synth:n=100,p=2000,density=0.05,nonzeros=10,noise=0.1,seed=1", lasso_passes=10,
        sfb=dict(sizes=[(10, 1000)], nnz=10, samples=1200, test=300, minibatch=50, passes=3,
                 lr=50, q_workers=[4], q_size=(10, 1000))),
    # Under 5 minutes on the 2-core machine: a MovieLens-10M-shaped set at
    # a tenth of its size.
    "quick": dict(
        repeats=3, passes=6, rank=100,
        mf_data="synth:users=7157,items=1068,ratings=1000005,seed=1",
        lda_data="synth:docs=2000,len=100,vocab=5000,topics=50,seed=1", lda_topics=100,
        lda_real=True, strata=[1, 2, 4, 8, 16], straggle=[0.0, 0.25, 0.5, 1.0],
        straggle_passes=5, msgcost=[], timeout=300,
        pr_real=True, pr_graph="synth:scale=16,edge-factor=16,seed=1", pr_passes=20,
        lasso_data="synth:n=500,p=100000,density=0.05,nonzeros=100,noise=0.1,seed=1",
        lasso_passes=200,
        sfb=dict(sizes=[(50, 2000), (100, 5000), (200, 10000)], nnz=30, samples=2400, test=600,
                 minibatch=100, passes=5, lr=50, q_workers=[4], q_size=(100, 5000))),
    # Under an hour: the MovieLens-10M shape at full size.
    "full": dict(
        repeats=5, passes=10, rank=100,
        mf_data="synth:users=71567,items=10681,ratings=10000054,seed=1",
        lda_data="synth:docs=20000,len=100,vocab=10000,topics=100,seed=1", lda_topics=100,
        lda_real=True, strata=[1, 2, 4, 8, 16, 32, 64], straggle=[0.0, 0.25, 0.5, 1.0, 2.0],
        straggle_passes=9, msgcost=[], timeout=1200,
        pr_real=True, pr_graph="synth:scale=20,edge-factor=16,seed=1", pr_passes=20,
        lasso_data="synth:n=500,p=400000,density=0.05,nonzeros=100,noise=0.1,seed=1",
        lasso_passes=300,
        sfb=dict(sizes=[(50, 5000), (100, 10000), (200, 20000), (500, 20000)], nnz=30, samples=6000,
                 test=1200, minibatch=100, passes=8, lr=50, q_workers=[4, 6], q_size=(100, 10000))),
}


def mf_points(pr):
    """The MF matrix: (group, label, workers (0 = serial), args, mpirun extra)."""
    common = ["--data", pr["mf_data"], "--rank", str(pr["rank"]), "--test-fraction", "0.1"]
    pts = [("modes", "serial", 0, ["--mode", "serial"] + common, []),
           ("modes", "scheduled", 1, ["--mode", "scheduled"] + common, []),
           ("modes", "scheduled", 2, ["--mode", "scheduled"] + common, [])]
    for label, flags in [("bsp", ["--mode", "bsp"]),
                         ("absp wpc 0.5", ["--mode", "absp", "--wpc", "0.5"]),
                         ("ssp s=1", ["--mode", "ssp", "--staleness", "1"]),
                         ("ssp s=3", ["--mode", "ssp", "--staleness", "3"]),
                         # The ESSP paper's SSP: rows fetched as late as allowed.
                         ("ssp s=3 conservative", ["--mode", "ssp", "--staleness", "3",
                                                   "--prefetch", "conservative"]),
                         ("essp s=1", ["--mode", "essp", "--staleness", "1"]),
                         ("essp s=3", ["--mode", "essp", "--staleness", "3"]),
                         ("async", ["--mode", "async"])]:
        pts.append(("modes", label, 2, flags + common, []))
    # The consistency models on plain SGD (VAP bounds every float of a row,
    # AdaGrad's sums of squares included: bench/vap.sh has the whole study).
    sgd = common + ["--update", "sgd", "--lr", "0.02"]
    for label, flags in [("ssp s=1", ["--mode", "ssp", "--staleness", "1"]),
                         ("essp s=1", ["--mode", "essp", "--staleness", "1"]),
                         ("vap V=1", ["--mode", "vap", "--value-bound", "1"]),
                         ("vap V=0.1", ["--mode", "vap", "--value-bound", "0.1"])]:
        pts.append(("vap", label, 2, flags + sgd, []))
    for b in pr["strata"]:
        pts.append(("strata", f"B={b}", 1, ["--mode", "scheduled", "--strata", str(b)] + common, []))
    # Weak scaling: one copy of the data per worker (block-diagonal, as the
    # DSGD paper's Netflix x4 ... x256).
    for p in (1, 2):
        pts.append(("weak", f"x{p}", p, ["--mode", "scheduled", "--duplicate", str(p)] + common, []))
    # The same runs over TCP (loopback) for the scale model's validation.
    for p in (1, 2):
        pts.append(("tcp", "scheduled tcp", p, ["--mode", "scheduled"] + common, TCP))
    return pts


def lda_points(pr, data_dir):
    kos = os.path.join(data_dir, "uci-bow-kos", "docword.kos.txt.gz")
    if pr["lda_real"] and os.path.isfile(kos):
        data = ["--data", kos, "--vocab", os.path.join(data_dir, "uci-bow-kos", "vocab.kos.txt")]
        name = "KOS"
    else:
        data = ["--data", pr["lda_data"]]
        name = pr["lda_data"]
    common = data + ["--topics", str(pr["lda_topics"])]
    pts = [("lda", "serial", 0, ["--mode", "serial"] + common, []),
           ("lda", "scheduled", 2, ["--mode", "scheduled"] + common, []),
           ("lda", "bsp", 2, ["--mode", "bsp"] + common, []),
           ("lda", "ssp s=1", 2, ["--mode", "ssp", "--staleness", "1"] + common, []),
           ("lda", "essp s=1", 2, ["--mode", "essp", "--staleness", "1"] + common, []),
           ("lda", "vap V=10", 2, ["--mode", "vap", "--value-bound", "10"] + common, [])]
    return pts, name


def pagerank_points(pr, data_dir):
    """Every mode on one graph; A-BSP with 2 passes per clock against SSP
    with staleness 1 is the bounded-staleness paper's comparison at equal
    staleness."""
    sd = os.path.join(data_dir, "snap-soc-slashdot0902", "soc-Slashdot0902.txt.gz")
    if pr["pr_real"] and os.path.isfile(sd):
        graph, name = sd, "soc-Slashdot0902"
    else:
        graph, name = pr["pr_graph"], pr["pr_graph"]
    common = ["--graph", graph]
    pts = [("pagerank", "serial", 0, ["--mode", "serial"] + common, []),
           ("pagerank", "scheduled", 2, ["--mode", "scheduled"] + common, []),
           ("pagerank", "bsp", 2, ["--mode", "bsp"] + common, []),
           ("pagerank", "absp wpc 2", 2, ["--mode", "absp", "--wpc", "2"] + common, []),
           ("pagerank", "ssp s=1", 2, ["--mode", "ssp", "--staleness", "1"] + common, []),
           ("pagerank", "essp s=1", 2, ["--mode", "essp", "--staleness", "1"] + common, []),
           ("pagerank", "async", 2, ["--mode", "async"] + common, [])]
    return pts, name


def lasso_points(pr):
    """Lasso at lambda = 0.1 lambda_max (the SSP paper's setting, scaled):
    cyclic descent serially and on the ring, the coordinator's dynamic
    schedule on rounds, and the parameter-server modes."""
    common = ["--data", pr["lasso_data"], "--lambda-ratio", "0.1"]
    return [("lasso", "serial", 0, ["--mode", "serial"] + common, []),
            ("lasso", "scheduled static", 2, ["--mode", "scheduled"] + common, []),
            ("lasso", "scheduled dynamic", 2, ["--mode", "scheduled", "--schedule", "dynamic"] + common,
             []),
            ("lasso", "bsp", 2, ["--mode", "bsp"] + common, []),
            ("lasso", "ssp s=1", 2, ["--mode", "ssp", "--staleness", "1"] + common, []),
            ("lasso", "async", 2, ["--mode", "async"] + common, [])]


def sfb_data(sp, J, D):
    return (f"synth:classes={J},features={D},nnz={sp['nnz']},samples={sp['samples']},"
            f"test={sp['test']},seed=1")


def sfb_points(pr):
    """MLR by sufficient factor broadcasting against full-matrix sync:
    (group, label, workers, args, mpirun extra, record fields). Group sfb:
    every J x D with serial, sfb (s = 0), bsp and ssp (s = 1) on 2 workers,
    K examples per worker per clock (serial: 2K, the same global minibatch,
    so the same partition). Group qsweep: sfb on P workers for Q = 1..P-1
    out-peers at one J x D."""
    sp = pr["sfb"]
    K = sp["minibatch"]
    pts = []
    for J, D in sp["sizes"]:
        common = ["--data", sfb_data(sp, J, D), "--lr", str(sp["lr"])]
        f = dict(classes=J, features=D, jd=J * D)
        pts.append(("sfb", "serial", 0, ["--mode", "serial", "--minibatch", str(2 * K)] + common, [], f))
        for label, flags in [("sfb s=0", ["--mode", "sfb", "--staleness", "0"]),
                             ("bsp", ["--mode", "bsp"]),
                             ("ssp s=1", ["--mode", "ssp", "--staleness", "1"])]:
            pts.append(("sfb", label, 2, flags + ["--minibatch", str(K)] + common, [], f))
    J, D = sp["q_size"]
    common = ["--data", sfb_data(sp, J, D), "--lr", str(sp["lr"]), "--minibatch", str(K)]
    cpus = os.cpu_count() or 1
    for P in sp["q_workers"]:
        for Q in range(1, P):
            pts.append(("qsweep", f"P={P} Q={Q}", P,
                        ["--mode", "sfb", "--staleness", "0", "--peers", str(Q)] + common, [],
                        dict(classes=J, features=D, jd=J * D, peers=Q,
                             oversubscribed=P > cpus)))
    return pts


# ---- running ----------------------------------------------------------------

class Runner:
    def __init__(self, args, pr, out):
        self.args, self.pr, self.out = args, pr, out
        self.bin = args.bin
        self.jsonl = open(os.path.join(out, "runs.jsonl"), "w")
        self.records = []
        self.failures = []
        self.tmp = tempfile.mkdtemp(prefix="strata-bench-")
        self.t0 = time.time()

    def close(self):
        self.jsonl.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def log(self, msg):
        if not self.args.quiet:
            print(f"[{time.time() - self.t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def record(self, rec):
        self.jsonl.write(json.dumps(rec, sort_keys=True) + "\n")
        self.jsonl.flush()
        self.records.append(rec)

    def run_cmd(self, cmd, timeout):
        t = time.time()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=timeout)
            rc, err, out = p.returncode, p.stderr, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, err, out = 124, (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""), ""
        return rc, out, err, time.time() - t

    def strata(self, app, group, label, workers, args, extra, repeat, passes=None, fields=None):
        mfile = os.path.join(self.tmp, "m.json")
        if os.path.exists(mfile):
            os.remove(mfile)
        passes = passes or self.pr["passes"]
        exe = os.path.join(self.bin, "strata")
        base = [exe, app] + args + ["--passes", str(passes), "-q", "--metrics-out", mfile]
        if workers > 0:
            cmd = MPIRUN + ["-np", str(workers + 1)] + extra + base
        else:
            cmd = base
        rc, _, err, secs = self.run_cmd(cmd, self.pr["timeout"])
        rec = dict(kind="strata", profile=self.args.profile, group=group, label=label, app=app,
                   workers=workers, transport="tcp" if extra == TCP else "shm" if workers else "none",
                   args=args, passes=passes, repeat=repeat, cmd=cmd, rc=rc, elapsed_s=round(secs, 3))
        rec.update(fields or {})
        if rc == 0 and os.path.exists(mfile):
            rec["metrics"] = json.load(open(mfile))
        else:
            rec["stderr_tail"] = err[-2000:]
            self.failures.append(f"{group}/{label} P={workers} repeat {repeat}: rc {rc}: "
                                 f"{err.strip().splitlines()[-1] if err.strip() else ''}")
        self.record(rec)
        t = rec.get("metrics", {}).get("time_per_pass_s")
        self.log(f"{app} {group:8s} {label:14s} P={workers} #{repeat}: "
                 + (f"{t * 1e3:.2f} ms/pass" if t else f"FAILED rc {rc}"))
        return rec

    def pair(self, group, label, cmd, repeat):
        t = time.time()
        ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
        res = [p.communicate(timeout=self.pr["timeout"]) for p in ps]
        for i, (p, (out, err)) in enumerate(zip(ps, res)):
            rec = dict(kind="kernel2", profile=self.args.profile, group=group, label=label, cmd=cmd,
                       repeat=repeat, instance=i, rc=p.returncode, elapsed_s=round(time.time() - t, 3))
            try:
                rec["metrics"] = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                rec["rc"] = p.returncode or 1
            if rec["rc"] != 0:
                rec["stderr_tail"] = err[-2000:]
                self.failures.append(f"{group}/{label} #{repeat}: rc {rec['rc']}")
            self.record(rec)
        self.log(f"kernel pair #{repeat}: done")

    def program(self, group, label, cmd, repeat, kind):
        rc, out, err, secs = self.run_cmd(cmd, self.pr["timeout"])
        rec = dict(kind=kind, profile=self.args.profile, group=group, label=label, cmd=cmd,
                   repeat=repeat, rc=rc, elapsed_s=round(secs, 3))
        try:
            rec["metrics"] = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            rc = rc or 1
        if rc != 0:
            rec["rc"] = rc
            rec["stderr_tail"] = err[-2000:]
            self.failures.append(f"{group}/{label} #{repeat}: rc {rc}")
        self.record(rec)
        self.log(f"{kind} {label} #{repeat}: " + ("ok" if rc == 0 else f"FAILED rc {rc}"))
        return rec


def run_matrix(r, pr, data_dir):
    R = r.args.repeats or pr["repeats"]
    P = pr["passes"]
    kernel = os.path.join(r.bin, "bench", "mf_kernel")
    mf = mf_points(pr)
    lda, lda_name = lda_points(pr, data_dir)
    sfb = sfb_points(pr)
    prk, r.pr_name = pagerank_points(pr, data_dir)
    las = lasso_points(pr)
    # Interleave repeats: each round visits every point once, so slow spells
    # of the shared machine spread over all points instead of hitting one.
    for rep in range(R):
        kcmd = [kernel, "--data", pr["mf_data"], "--rank", str(pr["rank"]), "--passes", str(P)]
        r.program("kernel", "plain kernel", kcmd, rep, "kernel")
        # Two kernels at once, one per core: the compute rate a worker keeps
        # while another shares the memory system (the scale model's input).
        r.pair("kernel2", "plain kernel x2", kcmd, rep)
        for g, label, w, args, extra in mf:
            r.strata("mf", g, label, w, args, extra, rep)
        for g, label, w, args, extra in lda:
            r.strata("lda", g, label, w, args, extra, rep)
        for g, label, w, args, extra, f in sfb:
            r.strata("mlr", g, label, w, args, extra, rep, passes=pr["sfb"]["passes"], fields=f)
        for g, label, w, args, extra in prk:
            r.strata("pagerank", g, label, w, args, extra, rep, passes=pr["pr_passes"])
        for g, label, w, args, extra in las:
            r.strata("lasso", g, label, w, args, extra, rep, passes=pr["lasso_passes"])
    # Stragglers: the delay is a fraction of a BSP pass measured above.
    bsp = [window_pass(x["metrics"]) for x in r.records
           if x.get("group") == "modes" and x.get("label") == "bsp" and "metrics" in x]
    base_ms = 1e3 * statistics.median(bsp) if bsp else 100.0
    common = ["--data", pr["mf_data"], "--rank", str(pr["rank"]), "--test-fraction", "0.1"]
    for rep in range(R):
        for frac in pr["straggle"]:
            d = int(round(frac * base_ms))
            for label, flags in [("bsp", ["--mode", "bsp"]),
                                 ("absp wpc 0.5", ["--mode", "absp", "--wpc", "0.5"]),
                                 ("ssp s=3", ["--mode", "ssp", "--staleness", "3"])]:
                s = ["--straggler", f"delay={d}"] if d > 0 else []
                r.strata("mf", "straggle", label, 2, flags + common + s, [], rep,
                         passes=pr["straggle_passes"], fields=dict(straggler_ms=d, straggler_frac=frac))
    # Message costs for the scale model: shared memory and TCP.
    msg = os.path.join(r.bin, "bench", "msgcost")
    for label, extra in [("shm", []), ("tcp", TCP)]:
        cmd = (MPIRUN + ["-np", "2"] + extra
               + [msg, "--label", label, "-q"] + pr["msgcost"])
        r.program("msgcost", label, cmd, 0, "msgcost")
    return lda_name


# ---- summarising ------------------------------------------------------------

def ok(recs):
    return [x for x in recs if x.get("rc") == 0 and "metrics" in x]


def spread(vals):
    return (min(vals), statistics.median(vals), max(vals)) if vals else (math.nan,) * 3


def ms3(t):
    return f"{t[1] * 1e3:.2f} ({t[0] * 1e3:.2f}-{t[2] * 1e3:.2f})"


def points(records, group, app=None):
    """{(label, workers, transport): [records]} in first-seen order."""
    out = {}
    for x in ok(records):
        if x.get("group") != group or (app and x.get("app") != app):
            continue
        out.setdefault((x["label"], x.get("workers", 0), x.get("transport", "")), []).append(x)
    return out


def wait_frac(m):
    ws = m.get("workers_total", [])
    t = sum(w["time_s"] for w in ws)
    return sum(w["wait_s"] for w in ws) / t if t > 0 else 0.0


def window_pass(m):
    """Pass time for runs whose workers' passes do not line up (stragglers):
    window_pass_s, or mean_pass_s from a build that predates it."""
    return m.get("window_pass_s", m["mean_pass_s"])


def sent_per_pass(m):
    ws = m.get("workers_total", [])
    return sum(w["bytes_sent"] for w in ws) / max(1, len(ws)) / max(1, m["passes"])


def sfb_groups(records, group):
    """{(J x D, label): [records]} of an mlr group, in first-seen order."""
    out = {}
    for x in ok(records):
        if x.get("group") == group and x.get("app") == "mlr":
            out.setdefault((x["jd"], x["label"]), []).append(x)
    return out


def bytes_per_clock(m):
    """Bytes sent per clock by all workers together (median run's figures):
    sfb's bytes_sent_per_clock, or a table mode's bytes_sent / clocks; None
    for serial."""
    ws = m.get("workers_total", [])
    if m["mode"] == "sfb":
        return sum(w["bytes_sent_per_clock"] for w in ws)
    if ws and all(w.get("clocks") for w in ws):
        return sum(w["bytes_sent"] / w["clocks"] for w in ws)
    return None


def predicted_bytes(m):
    J, rows, K, nv = m["classes"], m["rows"], m["minibatch"], m["nnz_per_sample"]
    P = m["workers"]
    if m["mode"] == "sfb":
        return sfb_per_clock(P, m["sfb"]["peers"], K, J, nv)[0]
    if m["mode"] == "serial":
        return None
    return fms_per_clock(P, K, J, rows, nv)[0]


def fmt(v, spec):
    return "-" if v is None or v != v else format(v, spec)


def sfb_summary(recs, pr):
    sp = pr["sfb"]
    L = []
    g = sfb_groups(recs, "sfb")
    if g:
        L.append(f"## SFB against FMS (MLR, 2 workers)\n")
        L.append(f"`strata mlr` on `{sfb_data(sp, 'J', 'D')}`, {sp['passes']} passes, lr {sp['lr']}, "
                 f"K = {sp['minibatch']} samples per worker per clock (serial: {2 * sp['minibatch']}, the "
                 "same global minibatch and partition). sfb: sufficient factor broadcasting, s = 0, full "
                 "broadcast; bsp and ssp s = 1: full-matrix synchronisation through the parameter-server "
                 "table. Bytes per clock: sent by all workers together (sfb: `bytes_sent_per_clock`; "
                 "tables: `bytes_sent / clocks`), median over repeats; predicted: SFB P (P - 1) (24 + K (12 + "
                 "4 J + 8 nnz_v)), FMS P (72 P + rows (8 + 4 J) + T (4 + 4 J)) with T the rows a minibatch "
                 "touches for uniformly drawn features (bench/scale_model.py). train_loss: after the last "
                 "pass; vs serial: its relative difference to serial's.\n")
        L.append("| J x D | J | rows | mode | workers | time per pass ms | x serial | samples/s | "
                 "bytes/clock measured | predicted | measured / predicted | train_loss | vs serial |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        tpp, byts, loss = {}, {}, {}
        for (jd, label), xs in g.items():
            ms = [x["metrics"] for x in xs]
            t = spread([m["time_per_pass_s"] for m in ms])
            tpp[(jd, label)] = t[1]
            b = [v for v in (bytes_per_clock(m) for m in ms) if v is not None]
            byts[(jd, label)] = statistics.median(b) if b else None
            loss[(jd, label)] = statistics.median([m["train_loss"] for m in ms])
        for (jd, label), xs in g.items():
            m = xs[0]["metrics"]
            ser_t, ser_l = tpp.get((jd, "serial")), loss.get((jd, "serial"))
            b, pb = byts[(jd, label)], predicted_bytes(m)
            rel = (loss[(jd, label)] - ser_l) / ser_l if ser_l else None
            L.append(f"| {jd:.3g} | {m['classes']} | {m['rows']} | {label} | {m['workers'] or 'serial'} | "
                     f"{ms3(spread([x['metrics']['time_per_pass_s'] for x in xs]))} | "
                     f"{fmt(tpp[(jd, label)] / ser_t if ser_t else None, '.2f')} | "
                     f"{statistics.median([x['metrics']['updates_per_s'] for x in xs]):.4g} | "
                     f"{fmt(b, '.4g')} | {fmt(pb, '.4g')} | {fmt(b / pb if b and pb else None, '.3f')} | "
                     f"{loss[(jd, label)]:.5f} | " + (f"{100 * rel:+.3f}%" if rel is not None else "-") + " |")
        L.append("")
        L.append("### SFB / FMS per J x D (medians over repeats)\n")
        L.append("| J x D | SFB / FMS bytes per clock: bsp | ssp s=1 | SFB / FMS time per pass: bsp | ssp s=1 "
                 "| SFB time / serial time |\n|---|---|---|---|---|---|")
        for jd in sorted({k[0] for k in g}):
            def ratio(d, a, b):
                return d[(jd, a)] / d[(jd, b)] if d.get((jd, a)) and d.get((jd, b)) else None
            L.append(f"| {jd:.3g} | {fmt(ratio(byts, 'sfb s=0', 'bsp'), '.4f')} | "
                     f"{fmt(ratio(byts, 'sfb s=0', 'ssp s=1'), '.4f')} | {fmt(ratio(tpp, 'sfb s=0', 'bsp'), '.3f')} | "
                     f"{fmt(ratio(tpp, 'sfb s=0', 'ssp s=1'), '.3f')} | {fmt(ratio(tpp, 'sfb s=0', 'serial'), '.3f')} |")
        L.append("")
    q = sfb_groups(recs, "qsweep")
    if q:
        J, D = sp["q_size"]
        cpus = next(iter(q.values()))[0]["metrics"].get("machine", {}).get("cpus", "?")
        L.append(f"## SFB partial broadcast: Q sweep (J x D = {J * D:.3g})\n")
        L.append(f"sfb, s = 0, on P workers with Q out-peers each (`--peers Q`; Q = P-1 is full broadcast), "
                 f"K = {sp['minibatch']}, {sp['passes']} passes, `{sfb_data(sp, J, D)}`. Runs with more "
                 f"workers than the machine's {cpus} cpus are oversubscribed: their times measure "
                 "time-sharing, not scaling. tau: the topology's diameter in clocks (its Moore lower "
                 "bound); drift: the largest |W_p - W_q| over the replicas after the last pass; "
                 "train_loss: median over repeats; predicted bytes per clock P (P - 1) (24 + K (12 + "
                 "4 J + 8 nnz_v)): every set reaches every other worker once, relayed when Q < P - 1.\n")
        L.append("| P | Q | oversubscribed | tau (lower bound) | time per pass ms | train_loss | "
                 "vs full broadcast | test_acc | drift, last pass (rows) | bytes/clock measured | predicted | "
                 "measured / predicted |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
        full = {}
        for (jd, label), xs in q.items():
            m = xs[0]["metrics"]
            if m["sfb"]["full_broadcast"]:
                full[m["workers"]] = statistics.median([x["metrics"]["train_loss"] for x in xs])
        for (jd, label), xs in sorted(q.items(), key=lambda kv: (kv[1][0]["workers"], kv[1][0]["peers"])):
            ms = [x["metrics"] for x in xs]
            m = ms[0]
            P, sf = m["workers"], m["sfb"]
            lo = statistics.median([x["train_loss"] for x in ms])
            drift = [x["per_pass"][-1].get("drift") for x in ms]
            drift = [d for d in drift if d is not None and d == d]
            b = statistics.median([bytes_per_clock(x) for x in ms])
            pb = predicted_bytes(m)
            fl = full.get(P)
            L.append(f"| {P} | {sf['peers']} | {'yes' if xs[0].get('oversubscribed') else 'no'} "
                     f"({P} workers) | {sf['tau']} ({sf['tau_lower_bound']}) | "
                     f"{ms3(spread([x['time_per_pass_s'] for x in ms]))} | {lo:.5f} | "
                     + (f"{100 * (lo - fl) / fl:+.2f}%" if fl else "-") + " | "
                     f"{statistics.median([x['test_acc'] for x in ms]):.4f} | "
                     f"{fmt(statistics.median(drift) if drift else None, '.4g')} "
                     f"({m['per_pass'][-1].get('drift_rows', '?')}) | {b:.4g} | {pb:.4g} | {b / pb:.3f} |")
        L.append("")
    return L


def pagerank_summary(r, pr):
    pts = points(r.records, "pagerank", "pagerank")
    if not pts:
        return []
    L = [f"## PageRank ({getattr(r, 'pr_name', '?')}, {pr['pr_passes']} passes)\n",
         "SSE: sum of squared errors from 100 exact iterations, after 5, 10 and the last pass "
         "(the first repeat); edges/s per core: the graph's edges over the time per pass, "
         "over the workers' cores (1 serially).\n",
         "| mode | workers | time per pass ms | x serial | M edges/s per core | SSE 5 | SSE 10 | "
         "SSE last | worker wait % | MB sent/pass/worker |\n|---|---|---|---|---|---|---|---|---|---|"]
    s = pts.get(("serial", 0, "none"))
    st = statistics.median([x["metrics"]["time_per_pass_s"] for x in s]) if s else math.nan
    for (label, w, tr), xs in pts.items():
        ms = [x["metrics"] for x in xs]
        t = spread([m["time_per_pass_s"] for m in ms])
        pp = ms[0]["per_pass"]
        # A pass ending inside a clock (absp wpc 2) is not scored: the next one is shown.
        def sse_at(k):
            for q_ in pp[k - 1:]:
                if q_.get("sse") is not None:
                    return q_["sse"]
            return math.nan
        sse = [sse_at(k) if len(pp) >= k else math.nan for k in (5, 10, len(pp))]
        L.append(f"| {label} | {w or 'serial'} | {ms3(t)} | {t[1] / st:.2f} | "
                 f"{statistics.median([m['edges_per_s'] for m in ms]) / max(1, w) / 1e6:.1f} | "
                 + " | ".join(f"{v:.3g}" for v in sse)
                 + f" | {100 * statistics.median([wait_frac(m) for m in ms]):.1f} | "
                 f"{statistics.median([sent_per_pass(m) for m in ms]) / 1e6:.2f} |")
    L.append("")
    return L


def lasso_best(recs):
    """The lowest objective any Lasso run reached: the optimum's estimate."""
    return min((p["objective"] for x in ok(recs) if x.get("app") == "lasso"
                for p in x["metrics"]["per_pass"] if p.get("objective") is not None),
               default=math.nan)


def lasso_summary(r, pr):
    pts = points(r.records, "lasso", "lasso")
    if not pts:
        return []
    best = lasso_best(r.records)
    L = [f"## Lasso (`{pr['lasso_data']}`, lambda = 0.1 lambda_max, {pr['lasso_passes']} passes)\n",
         f"F*: the lowest objective any run reached ({best:.10g}). Time to 1e-4: training seconds "
         "until the objective is within 1e-4 relative of F* (median over repeats; '-': not "
         "reached).\n",
         "| mode | workers | time per pass ms | passes to 1e-4 | time to 1e-4 s | x serial | "
         "final objective | nonzeros |\n|---|---|---|---|---|---|---|---|"]
    def hit(m):
        t = 0.0
        for p in m["per_pass"]:
            t += p["time_s"]
            if p.get("objective") is not None and p["objective"] <= best * (1 + 1e-4):
                return p["pass"] + 1, t
        return None
    rows, serial_t = [], None
    for (label, w, tr), xs in pts.items():
        ms = [x["metrics"] for x in xs]
        hs = [h for h in map(hit, ms) if h]
        ht = statistics.median([h[1] for h in hs]) if len(hs) == len(ms) else None
        if label == "serial":
            serial_t = ht
        rows.append((label, w, ms, hs, ht))
    for label, w, ms, hs, ht in rows:
        t = spread([m["time_per_pass_s"] for m in ms])
        L.append(f"| {label} | {w or 'serial'} | {ms3(t)} | "
                 + (f"{statistics.median([h[0] for h in hs]):.0f} | {ht:.3f} | " if ht else "- | - | ")
                 + (f"{ht / serial_t:.2f} | " if ht and serial_t else "- | ")
                 + f"{ms[0]['per_pass'][-1]['objective']:.10g} | {ms[0]['per_pass'][-1]['nonzeros']:.0f} |")
    L.append("")
    return L


def summarise(r, pr, lda_name, out, model):
    recs = r.records
    kern = [x["metrics"] for x in ok(recs) if x["kind"] == "kernel"]
    k_rate = statistics.median([k["updates_per_s"] for k in kern]) if kern else math.nan
    k_tpp = spread([k["time_per_pass_s"] for k in kern])
    L = []
    meta = next((x["metrics"] for x in ok(recs) if x["kind"] == "strata"), {})
    L.append(f"# strata benchmark: profile `{r.args.profile}`\n")
    L.append(f"Machine `{meta.get('machine', {}).get('host', '?')}` "
             f"({meta.get('machine', {}).get('cpus', '?')} cpus), git "
             f"`{meta.get('build', {}).get('git_rev', '?')}`, build "
             f"`{meta.get('build', {}).get('flags', '?')}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"{r.args.repeats or pr['repeats']} repeats per point (interleaved), {pr['passes']} passes per run. "
             f"Time per pass: median over passes 2..N of a run; tables give the median over "
             f"repeats with (min-max).\n")
    L.append(f"MF data `{pr['mf_data']}`, rank {pr['rank']}, 10% held out. "
             f"Plain serial kernel (bench/mf_kernel, no engine): {ms3(k_tpp)} ms per pass of "
             f"all ratings, {k_rate / 1e6:.2f} M updates/s. "
             f"\"x kernel\" = time per pass / (the run's examples / the kernel's rate).\n")

    def rows(group, app="mf", serial_tpp=None):
        lines = []
        for (label, w, tr), xs in points(recs, group, app).items():
            ms = [x["metrics"] for x in xs]
            t = spread([m["time_per_pass_s"] for m in ms])
            ex = ms[0]["examples"]
            xk = t[1] / (ex / k_rate) if app == "mf" and k_rate == k_rate else math.nan
            xs_ = t[1] / serial_tpp if serial_tpp else math.nan
            obj = "test_rmse" if app == "mf" else "loglik_per_token"
            lines.append(
                f"| {label} | {w or 'serial'} | {tr} | {ms3(t)} | "
                + (f"{xk:.2f} | " if app == "mf" else "")
                + f"{xs_:.2f} | {statistics.median([m['updates_per_s'] for m in ms]) / 1e6:.2f} | "
                f"{statistics.median([m[obj] for m in ms]):.4f} | "
                f"{100 * statistics.median([wait_frac(m) for m in ms]):.1f} | "
                f"{statistics.median([sent_per_pass(m) for m in ms]) / 1e6:.2f} | "
                f"{100 * statistics.median([m.get('coordinator_cpu_frac', 0) for m in ms]):.2f} |")
        return lines

    def serial_of(group, app):
        s = points(recs, group, app).get(("serial", 0, "none"))
        return statistics.median([x["metrics"]["time_per_pass_s"] for x in s]) if s else None

    head = ("| mode | workers | transport | time per pass ms | x kernel | x serial | M updates/s | "
            "test RMSE | worker wait % | MB sent/pass/worker | coordinator CPU % |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|")
    L.append("## Modes (MF)\n")
    L.append(head)
    L += rows("modes", "mf", serial_of("modes", "mf"))
    L.append("")
    L.append("## Consistency models on SGD (MF, `--update sgd --lr 0.02`; bench/vap.sh)\n")
    L.append(head)
    L += rows("vap", "mf", serial_of("modes", "mf"))
    L.append("")
    L.append(f"## Modes (LDA, {lda_name}, K = {pr['lda_topics']})\n")
    L.append("| mode | workers | transport | time per pass ms | x serial | M tokens/s | "
             "loglik/token | worker wait % | MB sent/pass/worker | coordinator CPU % |\n"
             "|---|---|---|---|---|---|---|---|---|---|")
    L += rows("lda", "lda", serial_of("lda", "lda"))
    L.append("")
    L.append("## Strata on one worker (scheduled, P = 1)\n")
    L.append(head)
    L += rows("strata", "mf", serial_of("modes", "mf"))
    L.append("")
    L.append("## Weak scaling (scheduled; the data duplicated once per worker)\n")
    L.append(head)
    L += rows("weak", "mf", serial_of("modes", "mf"))
    L.append("")
    L.append("## Transport (scheduled over TCP loopback vs shared memory)\n")
    L.append(head)
    L += rows("tcp", "mf", serial_of("modes", "mf"))
    L.append("")
    # Stragglers
    st = {}
    for x in ok(recs):
        if x.get("group") == "straggle":
            st.setdefault((x["label"], x["straggler_ms"]), []).append(window_pass(x["metrics"]))
    if st:
        L.append("## Stragglers (P = 2; worker i sleeps D ms at clocks i, i+2, ...; "
                 "pass time: window_pass_s, the slowest worker's)\n")
        L.append("| mode | D ms | pass ms | lost to the straggler per pass ms | lost / D |\n"
                 "|---|---|---|---|---|")
        for (label, d), v in sorted(st.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            base = st.get((label, 0))
            t = spread(v)
            lost = (t[1] - statistics.median(base)) * 1e3 if base else math.nan
            L.append(f"| {label} | {d} | {ms3(t)} | {lost:.2f} | "
                     + (f"{lost / d:.2f}" if d else "-") + " |")
        L.append("")
    # Staleness
    L.append("## Clock differentials (P = 2; reads per clock difference)\n")
    L.append("| mode | mean | max staleness | reads at diff 0, -1, -2, ... |\n|---|---|---|---|")
    for (label, w, tr), xs in points(recs, "modes", "mf").items():
        cd = xs[0]["metrics"].get("clock_diff")
        if cd:
            L.append(f"| {label} | {cd['mean']:.3f} | {cd['max_staleness']} | {cd['hist']} |")
    L.append("")
    L += sfb_summary(recs, pr)
    L += pagerank_summary(r, pr)
    L += lasso_summary(r, pr)
    if model:
        L.append("## Scale model (bench/scale_model.py)\n")
        L.append(model.get("markdown", ""))
        L.append("")
        if model.get("sfb"):
            L.append("### SFB against FMS (MLR)\n")
            L.append(model["sfb"]["markdown"])
            L.append("")
    if r.failures:
        L.append("## Failed runs\n")
        L += [f"- {f}" for f in r.failures]
        L.append("")
    L.append("## Plots\n")
    for name, what in PLOTS:
        if os.path.exists(os.path.join(out, "plots", name + ".png")):
            L.append(f"- `plots/{name}.png`: {what}")
    text = "\n".join(L) + "\n"
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    return text


# ---- plots ------------------------------------------------------------------

PLOTS = [
    ("time_per_pass_modes", "time per pass by mode and workers (MF), median with min-max bars"),
    ("objective_vs_time", "test RMSE against training time, per mode (MF, first repeat)"),
    ("objective_vs_time_lda", "log-likelihood per token against training time, per mode (LDA)"),
    ("objective_vs_time_vap", "test RMSE against training time under SSP, ESSP and VAP on plain "
     "SGD (MF, first repeat)"),
    ("compute_wait", "compute, wait and other time per pass and worker (passes 2..N, median over repeats), per mode (MF)"),
    ("staleness", "SSP vs ESSP: share of reads at each clock difference (s = 3)"),
    ("strata_one_worker", "time per pass against the number of strata B on one worker"),
    ("strong_scaling", "time per pass against workers, same data (serial, 1, 2 workers)"),
    ("weak_scaling", "time per pass against workers, data duplicated per worker"),
    ("stragglers", "mean time per pass against straggler delay for BSP, A-BSP and SSP"),
    ("bytes", "bytes sent and received per pass and worker, per mode (MF)"),
    ("scale_model", "predicted time per pass for 1-256 workers (Netflix and its duplicates)"),
    ("sfb_objective_vs_time", "MLR train_loss against training seconds, serial / sfb / bsp / ssp "
     "on the largest J x D (first repeat)"),
    ("pagerank_time_per_pass", "PageRank time per pass by mode, median with min-max bars"),
    ("lasso_objective_vs_time", "Lasso: objective minus the best any run reached against training "
     "seconds, per mode (first repeat, log scale)"),
    ("pagerank_sse_vs_time", "PageRank SSE from the ground truth against training seconds, per "
     "mode (first repeat, log scale)"),
    ("sfb_objective_vs_samples", "MLR train_loss against samples processed, the same runs"),
    ("sfb_samples_per_s", "MLR samples/s per mode on the largest J x D, median with min-max bars"),
    ("sfb_bytes", "bytes sent per clock (all workers) against J x D, SFB and FMS, measured and "
     "predicted (log-log)"),
    ("sfb_q_sweep", "SFB partial broadcast: final train_loss and the last pass's replica drift "
     "against out-peers Q"),
    ("sfb_scale_model", "predicted samples/s of SFB (Q = P-1, Q = 2) and FMS for 2-32 workers, "
     "largest J x D"),
]


def gnuplot(out, name, script, data):
    if not any(line.strip() for text in data.values() for line in text.splitlines()):
        return  # no successful run for this figure: the summary lists the failures
    pdir = os.path.join(out, "plots")
    os.makedirs(pdir, exist_ok=True)
    for fname, text in data.items():
        with open(os.path.join(pdir, fname), "w") as f:
            f.write(text)
    gp = os.path.join(pdir, name + ".gp")
    with open(gp, "w") as f:
        f.write(f"set terminal pngcairo size 900,560 font 'sans,10'\nset output '{name}.png'\n"
                "set grid\nset key outside right top\n" + script)
    p = subprocess.run(["gnuplot", name + ".gp"], cwd=pdir, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"gnuplot {name}: {p.stderr.strip()}")


def q(s):
    return '"' + str(s).replace('"', "'") + '"'


def plots(r, out, model):
    recs = r.records
    modes = points(recs, "modes", "mf")
    # 1. time per pass by mode
    d = ""
    for i, ((label, w, tr), xs) in enumerate(modes.items()):
        t = spread([x["metrics"]["time_per_pass_s"] * 1e3 for x in xs])
        d += f"{i} {q(label + (' P=' + str(w) if w else ''))} {t[1]} {t[0]} {t[2]}\n"
    gnuplot(out, "time_per_pass_modes",
            "set title 'Time per data pass by mode (MF)'\nset ylabel 'ms per pass'\n"
            "set style fill solid 0.6\nset boxwidth 0.6\nset xtics rotate by -35\nset yrange [0:*]\n"
            "plot 'modes.dat' using 1:3:xtic(2) with boxes notitle, "
            "'' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0 notitle\n", {"modes.dat": d})
    # 2. objective vs time
    for app, group, obj, name, title in [
            ("mf", "modes", "test_rmse", "objective_vs_time", "test RMSE"),
            ("mf", "vap", "test_rmse", "objective_vs_time_vap", "test RMSE (SGD)"),
            ("lda", "lda", "loglik_per_token", "objective_vs_time_lda", "log-likelihood per token")]:
        files, cmds = {}, []
        for i, ((label, w, tr), xs) in enumerate(points(recs, group, app).items()):
            m = xs[0]["metrics"]
            t, s = 0.0, ""
            for pp in m["per_pass"]:
                t += pp["time_s"]
                s += f"{t} {pp[obj]}\n"
            files[f"{name}_{i}.dat"] = s
            cmds.append(f"'{name}_{i}.dat' using 1:2 with linespoints title {q(label + ' P=' + str(w) if w else label)}")
        gnuplot(out, name, f"set title 'Convergence against time ({app.upper()})'\n"
                f"set xlabel 'training seconds'\nset ylabel '{title}'\nplot " + ", ".join(cmds) + "\n",
                files)
    # 2b. PageRank's SSE against time (log scale)
    files, cmds = {}, []
    for i, ((label, w, tr), xs) in enumerate(points(recs, "pagerank", "pagerank").items()):
        t, s = 0.0, ""
        for pp in xs[0]["metrics"]["per_pass"]:
            t += pp["time_s"]
            if (pp.get("sse") or 0) > 0:  # unscored passes (a clock spans two) have none
                s += f"{t} {pp['sse']}\n"
        files[f"pagerank_{i}.dat"] = s
        cmds.append(f"'pagerank_{i}.dat' using 1:2 with linespoints title {q(label)}")
    d = ""
    for i, ((label, w, tr), xs) in enumerate(points(recs, "pagerank", "pagerank").items()):
        t = spread([x["metrics"]["time_per_pass_s"] * 1e3 for x in xs])
        d += f"{i} {q(label + (' P=' + str(w) if w else ''))} {t[1]} {t[0]} {t[2]}\n"
    gnuplot(out, "pagerank_time_per_pass",
            "set title 'PageRank: time per pass by mode'\nset ylabel 'ms per pass'\n"
            "set style fill solid 0.6\nset boxwidth 0.6\nset xtics rotate by -35\nset yrange [0:*]\n"
            "plot 'pr_modes.dat' using 1:3:xtic(2) with boxes notitle, "
            "'' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0 notitle\n", {"pr_modes.dat": d})
    if cmds:
        gnuplot(out, "pagerank_sse_vs_time", "set title 'PageRank: SSE from the ground truth "
                "against time'\nset xlabel 'training seconds'\nset ylabel 'SSE'\nset logscale y\n"
                "plot " + ", ".join(cmds) + "\n", files)
    # 2c. Lasso's distance to the best objective against time (log scale)
    best = lasso_best(recs)
    files, cmds = {}, []
    for i, ((label, w, tr), xs) in enumerate(points(recs, "lasso", "lasso").items()):
        t, s = 0.0, ""
        for pp in xs[0]["metrics"]["per_pass"]:
            t += pp["time_s"]
            if pp.get("objective") is not None and pp["objective"] > best:
                s += f"{t} {(pp['objective'] - best) / best}\n"
        files[f"lasso_{i}.dat"] = s
        cmds.append(f"'lasso_{i}.dat' using 1:2 with linespoints title {q(label)}")
    if cmds:
        gnuplot(out, "lasso_objective_vs_time", "set title 'Lasso: (F - F*) / F* against time'\n"
                "set xlabel 'training seconds'\nset ylabel 'relative gap'\nset logscale y\n"
                "plot " + ", ".join(cmds) + "\n", files)
    # 3. compute vs wait
    d = ""
    for i, ((label, w, tr), xs) in enumerate(modes.items()):
        # Per worker and pass (passes 2..N, as time per pass), median over repeats.
        parts = []
        for x in xs:
            pp = x["metrics"]["per_pass"][1:] or x["metrics"]["per_pass"]
            ws = [wk for p_ in pp for wk in p_.get("workers", [])]
            n = max(1, len(ws))
            c = sum(wk["compute_s"] for wk in ws) / n * 1e3
            wt = sum(wk["wait_s"] for wk in ws) / n * 1e3
            tot = sum(wk["time_s"] for wk in ws) / n * 1e3
            parts.append((c, wt, max(0.0, tot - c - wt)))
        c, wt, other = (statistics.median(v[j] for v in parts) for j in range(3))
        d += f"{q(label + (' P=' + str(w) if w else ''))} {c} {wt} {other}\n"
    gnuplot(out, "compute_wait",
            "set title 'Per worker and pass: compute, wait, other (MF)'\nset ylabel 'ms'\n"
            "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.7\n"
            "set boxwidth 0.6\nset xtics rotate by -35\nset yrange [0:*]\n"
            "plot 'cw.dat' using 2:xtic(1) title 'compute', '' using 3 title 'wait', "
            "'' using 4 title 'other'\n", {"cw.dat": d})
    # 4. staleness histograms
    d, cmds = "", []
    hs = {}
    for (label, w, tr), xs in modes.items():
        if label in ("ssp s=3", "ssp s=3 conservative", "essp s=3") and xs[0]["metrics"].get("clock_diff"):
            h = xs[0]["metrics"]["clock_diff"]["hist"]
            tot = sum(h) or 1
            hs[label] = [v / tot for v in h]
    n = max([len(v) for v in hs.values()] or [1])
    for k in range(n):
        d += f"{-k} " + " ".join(str(hs[lb][k] if k < len(hs[lb]) else 0) for lb in hs) + "\n"
    cols = ", ".join(f"'' using {j + 2}:xtic(1) title {q(lb)}" for j, lb in enumerate(hs))
    if hs:
        gnuplot(out, "staleness", "set title 'Clock differential of reads (P = 2, s = 3)'\n"
                "set xlabel 'clock of the row read - clock of the reader'\nset ylabel 'share of reads'\n"
                "set style data histograms\nset style fill solid 0.7\nset yrange [0:1]\n"
                "plot 'st.dat' " + cols[3:] + "\n", {"st.dat": d})
    # 5. strata on one worker
    d = ""
    for (label, w, tr), xs in points(recs, "strata", "mf").items():
        t = spread([x["metrics"]["time_per_pass_s"] * 1e3 for x in xs])
        d += f"{xs[0]['metrics']['strata']} {t[1]} {t[0]} {t[2]}\n"
    gnuplot(out, "strata_one_worker", "set title 'More strata on one worker (scheduled, P = 1)'\n"
            "set xlabel 'strata B'\nset ylabel 'ms per pass'\nset logscale x 2\nset yrange [0:*]\n"
            "plot 'b.dat' using 1:2:3:4 with yerrorlines title 'time per pass'\n", {"b.dat": d})
    # 6. strong / weak scaling
    for group, name, title in [("modes", "strong_scaling", "Strong scaling (same data)"),
                               ("weak", "weak_scaling", "Weak scaling (data x workers)")]:
        d = ""
        for (label, w, tr), xs in points(recs, group, "mf").items():
            if group == "modes" and label not in ("serial", "scheduled"):
                continue
            t = spread([x["metrics"]["time_per_pass_s"] * 1e3 for x in xs])
            d += f"{w} {t[1]} {t[0]} {t[2]} {q(label)}\n"
        gnuplot(out, name, f"set title '{title}'\nset xlabel 'workers (0 = serial)'\n"
                "set ylabel 'ms per pass'\nset xrange [-0.5:2.5]\nset xtics 1\nset yrange [0:*]\n"
                "plot 's.dat' using 1:2:3:4 with yerrorlines title 'time per pass'\n", {"s.dat": d})
    # 7. stragglers
    files, cmds = {}, []
    st = {}
    for x in ok(recs):
        if x.get("group") == "straggle":
            st.setdefault(x["label"], {}).setdefault(x["straggler_ms"], []).append(
                window_pass(x["metrics"]) * 1e3)
    for i, (label, byd) in enumerate(st.items()):
        s = ""
        for dms in sorted(byd):
            t = spread(byd[dms])
            s += f"{dms} {t[1]} {t[0]} {t[2]}\n"
        files[f"sg_{i}.dat"] = s
        cmds.append(f"'sg_{i}.dat' using 1:2:3:4 with yerrorlines title {q(label)}")
    if cmds:
        gnuplot(out, "stragglers", "set title 'Stragglers (P = 2)'\nset xlabel 'straggler delay D (ms)'\n"
                "set ylabel 'ms per pass (slowest worker)'\nplot " + ", ".join(cmds) + "\n", files)
    # 8. bytes per pass
    d = ""
    for (label, w, tr), xs in modes.items():
        m = xs[0]["metrics"]
        ws = m["workers_total"]
        n = max(1, len(ws)) * m["passes"]
        d += (f"{q(label + (' P=' + str(w) if w else ''))} "
              f"{sum(x['bytes_sent'] for x in ws) / n / 1e6} {sum(x['bytes_recv'] for x in ws) / n / 1e6}\n")
    gnuplot(out, "bytes", "set title 'Bytes per pass and worker (MF)'\nset ylabel 'MB'\n"
            "set style data histograms\nset style fill solid 0.7\nset xtics rotate by -35\n"
            "set yrange [0:*]\nplot 'by.dat' using 2:xtic(1) title 'sent', '' using 3 title 'received'\n",
            {"by.dat": d})
    # 9. scale model
    if model and model.get("predictions"):
        files, cmds = {}, []
        for i, series in enumerate(model["predictions"]):
            s = "".join(f"{p['workers']} {p['time_per_pass_s']}\n" for p in series["points"])
            files[f"sm_{i}.dat"] = s
            cmds.append(f"'sm_{i}.dat' using 1:2 with linespoints title {q(series['name'])}")
        gnuplot(out, "scale_model", "set title 'Scale model: predicted time per pass'\n"
                "set xlabel 'workers'\nset ylabel 'seconds per pass'\nset logscale xy\n"
                "plot " + ", ".join(cmds) + "\n", files)


def sfb_plots(r, out, model):
    recs = r.records
    g = sfb_groups(recs, "sfb")
    if g:
        big = max(jd for jd, _ in g)
        runs = [(label, xs) for (jd, label), xs in g.items() if jd == big]
        # Objective against time and against samples (the seed's Figure 6).
        ft, fs, ct, cs = {}, {}, [], []
        for i, (label, xs) in enumerate(runs):
            m = xs[0]["metrics"]
            t, a, b = 0.0, "", ""
            for k, pp in enumerate(m["per_pass"]):
                t += pp["time_s"]
                a += f"{t} {pp['train_loss']}\n"
                b += f"{(k + 1) * m['examples']} {pp['train_loss']}\n"
            ft[f"sot_{i}.dat"], fs[f"sos_{i}.dat"] = a, b
            title = q(label + (f" P={xs[0]['workers']}" if xs[0]["workers"] else ""))
            ct.append(f"'sot_{i}.dat' using 1:2 with linespoints title {title}")
            cs.append(f"'sos_{i}.dat' using 1:2 with linespoints title {title}")
        m0 = runs[0][1][0]["metrics"]
        shape = f"J = {m0['classes']}, rows = {m0['rows']} (J x D = {big:.3g})"
        gnuplot(out, "sfb_objective_vs_time", f"set title 'MLR: objective against time, {shape}'\n"
                "set xlabel 'training seconds'\nset ylabel 'train loss'\nplot " + ", ".join(ct) + "\n", ft)
        gnuplot(out, "sfb_objective_vs_samples", f"set title 'MLR: objective against samples, {shape}'\n"
                "set xlabel 'samples processed'\nset ylabel 'train loss'\nplot " + ", ".join(cs) + "\n", fs)
        d = ""
        for i, (label, xs) in enumerate(runs):
            v = spread([x["metrics"]["updates_per_s"] for x in xs])
            d += f"{i} {q(label)} {v[1]} {v[0]} {v[2]}\n"
        gnuplot(out, "sfb_samples_per_s", f"set title 'MLR: samples per second, {shape}'\n"
                "set ylabel 'samples/s'\nset style fill solid 0.6\nset boxwidth 0.6\nset yrange [0:*]\n"
                "plot 'sps.dat' using 1:3:xtic(2) with boxes notitle, "
                "'' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0 notitle\n", {"sps.dat": d})
        # Bytes per clock against J x D.
        files, cmds = {}, []
        for i, label in enumerate(("sfb s=0", "bsp", "ssp s=1")):
            meas, pred = "", ""
            for jd in sorted({k[0] for k in g}):
                xs = g.get((jd, label))
                if not xs:
                    continue
                b = [v for v in (bytes_per_clock(x["metrics"]) for x in xs) if v]
                if b:
                    meas += f"{jd} {statistics.median(b)}\n"
                pred += f"{jd} {predicted_bytes(xs[0]['metrics'])}\n"
            files[f"byc_{i}.dat"], files[f"byp_{i}.dat"] = meas, pred
            cmds.append(f"'byc_{i}.dat' using 1:2 with points pt {5 + 2 * i} ps 1.3 title {q(label + ' measured')}")
            if label != "ssp s=1":  # ssp's prediction is bsp's
                cmds.append(f"'byp_{i}.dat' using 1:2 with linespoints dt 2 pt 6 ps 2 title "
                            f"{q(('SFB' if i == 0 else 'FMS') + ' predicted')}")
        gnuplot(out, "sfb_bytes", "set title 'Bytes sent per clock, all workers (P = 2)'\n"
                "set xlabel 'J x D (weights)'\nset ylabel 'bytes per clock'\nset logscale xy\n"
                "plot " + ", ".join(cmds) + "\n", files)
    qs = sfb_groups(recs, "qsweep")
    if qs:
        files, cmds = {}, []
        byP = {}
        for (jd, label), xs in qs.items():
            byP.setdefault(xs[0]["workers"], []).append(xs)
        for i, (P, series) in enumerate(sorted(byP.items())):
            d = ""
            for xs in sorted(series, key=lambda v: v[0]["peers"]):
                lo = statistics.median([x["metrics"]["train_loss"] for x in xs])
                dr = [x["metrics"]["per_pass"][-1].get("drift") for x in xs]
                dr = [v for v in dr if v is not None and v == v]
                d += f"{xs[0]['peers']} {lo} {statistics.median(dr) if dr else 'NaN'}\n"
            over = " (oversubscribed)" if series[0][0].get("oversubscribed") else ""
            files[f"qs_{i}.dat"] = d
            cmds.append(f"'qs_{i}.dat' using 1:2 with linespoints title {q(f'train loss, P={P}{over}')}")
            cmds.append(f"'qs_{i}.dat' using 1:3 axes x1y2 with linespoints dt 2 "
                        f"title {q(f'drift, P={P}{over}')}")
        gnuplot(out, "sfb_q_sweep", "set title 'SFB partial broadcast: Q out-peers per worker'\n"
                "set xlabel 'Q'\nset xtics 1\nset ylabel 'final train loss'\n"
                "set y2label 'replica drift after the last pass'\nset y2tics\nset y2range [0:*]\n"
                "plot " + ", ".join(cmds) + "\n", files)
    if model and model.get("sfb"):
        preds = model["sfb"]["predictions"]
        d = "".join(f"{p['workers']} {p['sfb']['samples_per_s']} {p['fms']['samples_per_s']}\n"
                    for p in preds)
        gnuplot(out, "sfb_scale_model", "set title 'Scale model (MLR, largest J x D): predicted throughput'\n"
                "set xlabel 'workers'\nset ylabel 'samples/s'\nset logscale xy\n"
                "plot 'ssm.dat' using 1:2 with linespoints title 'SFB (any Q)', "
                "'' using 1:3 with linespoints title 'FMS (bsp)'\n", {"ssm.dat": d})


# ---- main -------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    ap.add_argument("--out", default=None, help="output directory (default out/bench/PROFILE)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build"),
                    help="build directory holding strata and bench/ (default build)")
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--repeats", type=int, default=0, help="override the profile's repeats")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args()
    if os.geteuid() == 0:  # Open MPI refuses root unless told (as scripts/env.sh does)
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    if args.repeats < 0:
        ap.error("--repeats must be >= 0")
    pr = PROFILES[args.profile]
    out = args.out or os.path.join(ROOT, "out", "bench", args.profile)
    for exe in ("strata", "bench/mf_kernel", "bench/msgcost"):
        if not os.access(os.path.join(args.bin, exe), os.X_OK):
            sys.exit(f"harness: {os.path.join(args.bin, exe)} not found: build with "
                     "-DSTRATA_BUILD_BENCH=ON (scripts/bench.sh does)")
    if not args.no_plots and not shutil.which("gnuplot"):
        sys.exit("harness: gnuplot not found (scripts/setup.sh installs gnuplot-nox), or pass --no-plots")
    os.makedirs(out, exist_ok=True)
    for stale in ("runs.jsonl", "summary.md", "scale_model.json"):
        if os.path.exists(os.path.join(out, stale)):
            os.remove(os.path.join(out, stale))
    shutil.rmtree(os.path.join(out, "plots"), ignore_errors=True)
    r = Runner(args, pr, out)
    try:
        lda_name = run_matrix(r, pr, args.data_dir)
    finally:
        r.close()
    model = None
    sm = subprocess.run([sys.executable, os.path.join(HERE, "scale_model.py"), "--runs",
                         os.path.join(out, "runs.jsonl"), "--out", os.path.join(out, "scale_model.json")],
                        stderr=subprocess.PIPE, text=True)
    if sm.returncode == 0:
        model = json.load(open(os.path.join(out, "scale_model.json")))
    else:
        r.failures.append(f"scale model: {sm.stderr.strip()[-500:]}")
    if not args.no_plots:
        plots(r, out, model)
        sfb_plots(r, out, model)
    text = summarise(r, pr, lda_name, out, model)
    if not args.quiet:
        print(text)
    print(f"harness: {len(r.records)} runs, {len(r.failures)} failed; outputs in {out} "
          f"({time.time() - r.t0:.0f} s)", file=sys.stderr)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
