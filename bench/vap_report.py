#!/usr/bin/env python3
"""The report of bench/vap.sh: VAP against SSP and ESSP.

Reads OUTDIR/runs/SET-MODE-PARAM-REPEAT.json (strata's --metrics-out) and
writes OUTDIR/vap.md (a table per data set: medians over repeats, min-max
in brackets) and OUTDIR/plots/SET_*.png (gnuplot): each point's objective
against training time (the repeat of median time per pass), its time per
pass, and the traffic each worker sends per pass.

Usage: bench/vap_report.py OUTDIR
"""
import glob
import json
import os
import re
import statistics
import subprocess
import sys

sys.dont_write_bytecode = True

SETS = {"ml100k": ("MF, MovieLens 100K (ua.base/ua.test), SGD lr 0.02, 20 passes", "test_rmse", "test RMSE", min),
        "mf10m": ("MF, 10M synthetic ratings (genmf 10000000 71567 10681), SGD lr 0.02, 10 passes",
                  "test_rmse", "test RMSE", min),
        "ap": ("LDA, AP (2246 documents), K = 100, 20 passes", "loglik_per_token",
               "log-likelihood per token", max)}
MODE_ORDER = {"ssp": 0, "essp": 1, "vap": 2}


def load(out):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
        m = re.match(r"(\w+)-(\w+)-([0-9.e-]+)-(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        s, mode, param, rep = m.groups()
        runs.setdefault(s, {}).setdefault((mode, param), []).append(json.load(open(path)))
    return runs


def spread(v):
    return (min(v), statistics.median(v), max(v))


def wait_frac(m):
    return max(w["wait_s"] / w["time_s"] for w in m["workers_total"] if w["time_s"] > 0)


def mb_per_pass(m):
    ws = m["workers_total"]
    return sum(w["bytes_sent"] for w in ws) / len(ws) / m["passes"] / 1e6


def key(k):
    mode, param = k
    return (MODE_ORDER.get(mode, 9), -float(param) if mode == "vap" else float(param))


def label(k):
    mode, param = k
    return f"vap V={param}" if mode == "vap" else f"{mode} s={param}"


def gnuplot(pdir, name, script, data):
    os.makedirs(pdir, exist_ok=True)
    for f, text in data.items():
        open(os.path.join(pdir, f), "w").write(text)
    open(os.path.join(pdir, name + ".gp"), "w").write(
        f"set terminal pngcairo size 900,560 font 'sans,10'\nset output '{name}.png'\n"
        "set grid\nset key outside right top\n" + script)
    subprocess.run(["gnuplot", name + ".gp"], cwd=pdir, check=True)


def main(out):
    runs = load(out)
    cpu = open(os.path.join(out, "cpu.txt")).read().strip() if os.path.exists(
        os.path.join(out, "cpu.txt")) else "?"
    pdir = os.path.join(out, "plots")
    L = [f"CPU: {cpu}, 2 cores shared with other developers' work (loaded); 2 workers + the "
         "coordinator. Medians over repeats, (min-max) in brackets; runs interleaved.\n"]
    for s, points in runs.items():
        title, obj, obj_name, best = SETS.get(s, (s, "test_rmse", "objective", min))
        pts = sorted(points, key=key)
        base = statistics.median(m["time_per_pass_s"] for m in points.get(("ssp", "1"), [{"time_per_pass_s": float("nan")}]))
        L.append(f"### {title}\n")
        L.append(f"| mode | time per pass s | vs ssp s=1 | {obj_name} after the last pass | "
                 "training s | MB sent per worker per pass | worker wait | VAP: most in transit / "
                 "bound | VAP: early sends per pass | runs |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        tpp_d, mb_d, curves, cmds = "", "", {}, []
        for i, k in enumerate(pts):
            ms = points[k]
            t = spread([m["time_per_pass_s"] for m in ms])
            o = spread([m[obj] for m in ms])
            wall = statistics.median(m["wall_s"] for m in ms)
            mb = spread([mb_per_pass(m) for m in ms])
            wt = statistics.median(wait_frac(m) for m in ms)
            vap = [m["vap"] for m in ms if "vap" in m]
            ratio = f"{max(v['max_inflight'] for v in vap):.4g} / {vap[0]['bound']:g}" if vap else "-"
            fl = (f"{statistics.median(v['flushes'] for v in vap) / ms[0]['passes']:.0f}"
                  if vap else "-")
            L.append(f"| {label(k)} | {t[1]:.3f} ({t[0]:.3f}-{t[2]:.3f}) | {t[1] / base:.2f}x | "
                     f"{o[1]:.4f} ({o[0]:.4f}-{o[2]:.4f}) | {wall:.1f} | {mb[1]:.2f} | "
                     f"{100 * wt:.0f}% | {ratio} | {fl} | {len(ms)} |")
            tpp_d += f"{i} \"{label(k)}\" {t[1]} {t[0]} {t[2]}\n"
            mb_d += f"{i} \"{label(k)}\" {mb[1]} {mb[0]} {mb[2]}\n"
            # the repeat of median time per pass, its objective against time
            m = sorted(ms, key=lambda x: x["time_per_pass_s"])[len(ms) // 2]
            acc, text = 0.0, ""
            for pp in m["per_pass"]:
                acc += pp["time_s"]
                if pp.get(obj) is not None:
                    text += f"{acc} {pp[obj]}\n"
            curves[f"{s}_{i}.dat"] = text
            style = {"ssp": "dt 2", "essp": "dt 1", "vap": "dt 3"}[k[0]]
            cmds.append(f"'{s}_{i}.dat' using 1:2 with linespoints {style} lw 1.5 title \"{label(k)}\"")
        L.append("")
        gnuplot(pdir, f"{s}_objective_vs_time",
                f"set title '{title}: convergence against time'\nset xlabel 'training seconds'\n"
                f"set logscale x\nset ylabel '{obj_name}'\nplot " + ", ".join(cmds) + "\n", curves)
        bars = ("set style fill solid 0.6\nset boxwidth 0.6\nset xtics rotate by -35\n"
                "set logscale y\n")
        gnuplot(pdir, f"{s}_time_per_pass", f"set title '{title}: time per pass'\n"
                "set ylabel 'seconds per pass (log)'\n" + bars +
                f"plot '{s}_tpp.dat' using 1:3:xtic(2) with boxes notitle, "
                "'' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0 notitle\n",
                {f"{s}_tpp.dat": tpp_d})
        gnuplot(pdir, f"{s}_bytes", f"set title '{title}: traffic'\n"
                "set ylabel 'MB sent per worker per pass (log)'\n" + bars +
                f"plot '{s}_mb.dat' using 1:3:xtic(2) with boxes notitle, "
                "'' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 0 notitle\n",
                {f"{s}_mb.dat": mb_d})
    text = "\n".join(L) + "\n"
    open(os.path.join(out, "vap.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    main(sys.argv[1])
