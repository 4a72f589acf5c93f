#!/usr/bin/env python3
"""The dependency graph of libstrata, by file and by folder, and its checks.

Edges: a file includes a header of another module ("x.c" and "x.h" are one
module), or its object calls a function or names a variable defined in
another module's object (read from the compiled objects with nm, so calls
through macros and inlines count; calls through function pointers do not,
which is how a lower layer is handed work from above). Public headers
(include/strata/) declare the API and are left out: they name no code.

Checks, each a failure with a one-line reason:
  - no cycle among modules, and none among folders;
  - scheduler/ and worker/ include and call nothing of each other;
  - the bundled apps (apps/) and tests use only public headers and apps/.

Usage: scripts/include_graph.py [--dot] [--write-doc MD | --check-doc MD] SOURCE_DIR BUILD_DIR
  prints the folder graph (and with --dot the module graph in Graphviz
  form); exit status 1 when a check fails. --write-doc puts the folder
  graph into MD's generated block (a fenced block right after the line
  DOC_MARK); --check-doc fails when that block differs (ctest's layers
  runs it on docs/architecture.md).
"""
import os
import re
import subprocess
import sys

LIB_DIRS = ["core", "comm", "scheduler", "worker", "engine", "cli"]
DOC_MARK = "<!-- the folder graph: scripts/include_graph.py --write-doc writes it -->"
INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module(path):
    return os.path.splitext(path)[0]


def folder(path):
    return path.split("/")[0]


def sources(src, dirs):
    out = []
    for d in dirs:
        for root, _, files in os.walk(os.path.join(src, d)):
            for f in files:
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(root, f), src))
    return sorted(out)


def include_edges(src, files):
    edges = set()
    for f in files:
        text = open(os.path.join(src, f), encoding="utf-8").read()
        for inc in INC.findall(text):
            if inc.startswith("strata/") or inc == "strata_build_info.h":
                continue
            if not os.path.exists(os.path.join(src, inc)):
                continue  # a header beside the file (tests, bench)
            if module(inc) != module(f):
                edges.add((module(f), module(inc), "includes"))
    return edges


def call_edges(src, build):
    objdir = os.path.join(build, "CMakeFiles", "libstrata.dir")
    defined, used = {}, {}
    for root, _, files in os.walk(objdir):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            obj = os.path.join(root, f)
            rel = os.path.relpath(obj, objdir)[: -len(".o")]
            # An object whose source is gone (a build directory older than
            # the checkout) says nothing about the code.
            if not os.path.exists(os.path.join(src, rel)):
                continue
            mod = module(rel)
            out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == "U":
                    used.setdefault(mod, set()).add(parts[1])
                elif len(parts) == 3 and parts[1] in "TDBRV":
                    defined[parts[2]] = mod
    edges = set()
    for mod, syms in used.items():
        for s in syms:
            d = defined.get(s)
            if d and d != mod:
                edges.add((mod, d, "calls"))
    return edges


def cycles(nodes, edges):
    """Strongly connected components with more than one node (Tarjan)."""
    adj = {n: set() for n in nodes}
    for a, b in edges:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set())
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(adj[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(adj):
        if v not in index:
            visit(v)
    return out


def doc_block(path, graph, write):
    """Writes or checks the fenced block after DOC_MARK; returns a failure or None."""
    text = open(path, encoding="utf-8").read()
    at = text.find(DOC_MARK)
    if at < 0:
        return f"{path}: no line {DOC_MARK!r} to put the folder graph after"
    start = text.index("```\n", at) + 4
    end = text.index("```\n", start)
    if text[start:end] == graph:
        return None
    if not write:
        return f"{path}: the folder graph differs from the code's (scripts/include_graph.py --write-doc)"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:start] + graph + text[end:])
    return None


def main(argv):
    dot = "--dot" in argv
    doc, write = None, False
    args = []
    it = iter(argv)
    for a in it:
        if a in ("--write-doc", "--check-doc"):
            doc, write = next(it, None), a == "--write-doc"
        elif a != "--dot":
            args.append(a)
    if len(args) != 2 or (doc is None and ("--write-doc" in argv or "--check-doc" in argv)):
        print(__doc__.strip().splitlines()[-8], file=sys.stderr)
        return 2
    src, build = args
    lib = sources(src, LIB_DIRS)
    edges = include_edges(src, lib) | call_edges(src, build)
    failures = []
    mods = sorted({module(f) for f in lib})
    for comp in cycles(mods, {(a, b) for a, b, _ in edges}):
        failures.append("modules in a cycle: " + ", ".join(comp))
    fedges = {(folder(a), folder(b)) for a, b, _ in edges if folder(a) != folder(b)}
    for comp in cycles(sorted({folder(m) for m in mods}), fedges):
        failures.append("folders in a cycle: " + ", ".join(comp))
    for a, b, how in sorted(edges):
        if {folder(a), folder(b)} == {"scheduler", "worker"}:
            failures.append(f"{a} {how} {b}: scheduler/ and worker/ must not depend on each other")
    # Code built on the library sees only its public headers; unit tests and
    # fuzz targets test internal modules directly.
    for f in sources(src, ["apps", "tests", "bench", "examples"]):
        text = open(os.path.join(src, f), encoding="utf-8").read()
        for inc in INC.findall(text):
            top = inc.split("/")[0]
            if top in LIB_DIRS and not f.startswith(("tests/unit/", "tests/fuzz/")):
                failures.append(f"{f} includes {inc}: only public headers outside libstrata")
    graph = "".join(f"{a} -> {b}\n" for a, b in sorted(fedges))
    print("folder graph (A -> B: A includes or calls B):")
    for a, b in sorted(fedges):
        print(f"  {a} -> {b}")
    if doc:
        bad = doc_block(doc, graph, write)
        if bad:
            failures.append(bad)
    if dot:
        print("digraph strata {")
        for a, b, how in sorted(edges):
            print(f'  "{a}" -> "{b}" [label="{how}"];')
        print("}")
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    print(f"{len(mods)} modules, {len(edges)} edges, {len(fedges)} folder edges: "
          + ("ok" if not failures else f"{len(failures)} problem(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
