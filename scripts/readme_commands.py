#!/usr/bin/env python3
"""Runs every command README.md shows, in the README's order, and fails on
any non-zero exit.

The commands are read from the README itself, so they cannot drift: every
line of a ```sh block (a line ending in a backslash continues on the next),
and every `$ ` line of another fenced block (a command shown with its
output), which runs after the sh block before it and is skipped with it.
Each block runs in one bash from the checkout's root, so a `cd` holds for
the rest of its block. The commands get:
  - HOME, a fresh folder (`cmake --install build --prefix $HOME/strata`
    and strata's caches land there), without XDG_CACHE_HOME and
    STRATA_CACHE_DIR;
  - as root, OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,
    which the README says root needs; OMPI_MCA_rmaps_base_oversubscribe is
    taken away, so an mpirun line without --oversubscribe fails as it would
    for a reader with fewer cores than ranks.

Modes:
  (default)  a fresh `git clone` of the checkout (its HEAD: uncommitted
             changes are not in it) in a temporary folder, with ../shared
             beside it a link to the checkout's ../shared; then every
             command, scripts/demo.sh first (the README's set-up).
  --quick BUILD
             no clone and no build: a temporary checkout whose build/ is a
             link to BUILD (a built tree of this checkout, with its tests:
             the suite's own build), scripts/ a link and examples/ a copy.
             The commands that configure or build build/ are skipped (BUILD
             stands for them) and two runs are shortened. The test suite
             runs this mode (ctest -L readme).
  --list     prints each command and what either mode does with it; runs
             nothing.

What is skipped, and why (RULES below): scripts/test.sh, the whole suite,
of which the quick mode is a test (minutes; run it by itself); a command
whose ../shared/data file is absent, with the path. The quick mode also
skips scripts/demo.sh and the `cmake -S`/`cmake --build` lines of "Building
by hand", and shortens two runs by appending `--passes N` (the last value
of a flag counts; what is checked is that each command runs): the `--status`
example (200 passes over 10M ratings as written) to 2, the LDA example on
AP (50) to 5.

Usage: scripts/readme_commands.py [--quick BUILD | --list] [--keep] [--root DIR]
  --root DIR  the checkout (default: this script's ../)
  --keep      leave the temporary folder and print where it is
Exit status: 0 when every command run exited 0, 1 otherwise, 2 on bad usage.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```(\w*)\s*$")
DATA = re.compile(r"\.\./shared/data/[^\s'\"]+")

# (pattern, modes it applies to, action, reason). The first matching rule
# wins; an action is "skip" or a string appended to the command.
RULES = [
    (re.compile(r"^scripts/test\.sh\b"), {"full", "quick"}, "skip",
     "the whole test suite (Release, package, sanitizer and fuzz stages: beyond 15 minutes "
     "on 2 cores), of which this check is a part: run it by itself"),
    (re.compile(r"^scripts/demo\.sh\b"), {"quick"}, "skip",
     "the set-up: the suite's build stands for its build (the full mode runs it)"),
    (re.compile(r"^cmake (-S \. -B build -DCMAKE_BUILD_TYPE=|--build build -j)"), {"quick"}, "skip",
     "configures or builds build/, which here is the suite's own build"),
    (re.compile(r"--status 127\.0\.0\.1:0"), {"quick"}, " --passes 2",
     "200 passes over 10M ratings as written: shortened to 2 (the last --passes counts)"),
    (re.compile(r"build/strata lda .*--passes 50\b"), {"quick"}, " --passes 5",
     "50 passes over AP are 5 s of this check as written; 5 take the same paths"),
]


def die(msg, code=2):
    print("readme_commands: " + msg, file=sys.stderr)
    sys.exit(code)


def parse(readme):
    """[(kind, first line, [(line, command)])]: kind "sh" for a sh block,
    "shown" for the `$ ` lines of another fenced block."""
    blocks, lang, cur, pending, start = [], None, [], None, 0
    for no, raw in enumerate(open(readme, encoding="utf-8"), 1):
        line = raw.rstrip("\n")
        m = FENCE.match(line)
        if m and lang is None:
            lang, cur, pending, start = m.group(1), [], None, no
            continue
        if line.startswith("```") and lang is not None:
            if cur:
                blocks.append(("sh" if lang == "sh" else "shown", start, cur))
            lang = None
            continue
        if lang is None:
            continue
        if lang == "sh":
            text = line.strip()
            if pending is not None:
                pending = (pending[0], pending[1] + " " + text)
            elif text and not text.startswith("#"):
                pending = (no, text)
            if pending is not None and not pending[1].endswith("\\"):
                cur.append(pending)
                pending = None
            elif pending is not None:
                pending = (pending[0], pending[1][:-1].rstrip())
        elif line.startswith("$ "):
            cur.append((no, line[2:].strip()))
    if lang is not None:
        die("%s: a fence opened at line %d is not closed" % (readme, start))
    return blocks


def plan(cmd, mode, root):
    """(action, reason): action "run", "skip" or the text to append. Absent
    data comes first: a shortened run still needs its files."""
    for path in DATA.findall(cmd):
        if not os.path.exists(os.path.join(root, path)):
            return "skip", "needs %s, absent" % path
    for pat, modes, action, reason in RULES:
        if mode in modes and pat.search(cmd):
            return action, reason
    return "run", ""


def checkout(args, work):
    """The folder the commands run in, set up for the mode."""
    co = os.path.join(work, "strata")
    shared = os.path.join(args.root, "..", "shared")
    if os.path.isdir(shared):
        os.symlink(os.path.realpath(shared), os.path.join(work, "shared"))
    if args.quick:
        os.mkdir(co)
        os.symlink(os.path.realpath(args.quick), os.path.join(co, "build"))
        os.symlink(os.path.join(args.root, "scripts"), os.path.join(co, "scripts"))
        shutil.copytree(os.path.join(args.root, "examples"), os.path.join(co, "examples"),
                        ignore=shutil.ignore_patterns("build"))
        return co, os.path.join(args.root, "README.md")
    dirty = subprocess.run(["git", "-C", args.root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=True).stdout
    head = subprocess.run(["git", "-C", args.root, "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    print("== git clone of %s at %s%s" % (args.root, head,
          " (uncommitted changes are not in it)" if dirty else ""), flush=True)
    subprocess.run(["git", "clone", "-q", args.root, co], check=True)
    return co, os.path.join(co, "README.md")


def environment(work):
    env = dict(os.environ)
    env["HOME"] = os.path.join(work, "home")
    os.makedirs(env["HOME"])
    for k in ("XDG_CACHE_HOME", "STRATA_CACHE_DIR", "OMPI_MCA_rmaps_base_oversubscribe"):
        env.pop(k, None)
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def run_block(co, env, work, cmds):
    """Runs the block's commands in one bash, stopping at the first that
    fails: {index: (rc, seconds)} for those that ran."""
    times = os.path.join(work, "times")
    open(times, "w").close()
    script = ["cd %s" % sh_quote(co)]
    for i, (_, cmd) in cmds:
        script += ["printf '\\n$ %%s\\n' %s" % sh_quote(cmd),
                   "__t0=$EPOCHREALTIME",
                   cmd,
                   "__rc=$?",
                   'echo "%d $__rc $__t0 $EPOCHREALTIME" >>%s' % (i, sh_quote(times)),
                   "[ $__rc -eq 0 ] || exit $__rc"]
    # stdin: an open pipe that stays silent, as a reader's terminal. At end
    # of file (ctest's /dev/null), Open MPI 4.1's mpirun can die of SIGSEGV
    # forwarding it to a short job (docs/failure.md).
    p = subprocess.Popen(["bash", "-c", "\n".join(script)], env=env, stdin=subprocess.PIPE)
    p.wait()
    p.stdin.close()
    done = {}
    for line in open(times):
        i, rc, t0, t1 = line.replace(",", ".").split()
        done[int(i)] = (int(rc), float(t1) - float(t0))
    return done


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--quick")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("-h", "--help", action="store_true")
    args, rest = ap.parse_known_args()
    if args.help:
        print(__doc__)
        return 0
    if rest or (args.quick and args.list):
        die("bad usage\n" + __doc__.split("Usage: ")[1].split("\n")[0])
    args.root = os.path.realpath(args.root)
    if args.quick and not os.path.isfile(os.path.join(args.quick, "strata")):
        die("%s holds no built strata" % args.quick)

    if args.list:
        for kind, start, cmds in parse(os.path.join(args.root, "README.md")):
            for no, cmd in cmds:
                print("README.md:%d: %s" % (no, cmd))
                for mode in ("full", "quick"):
                    action, reason = plan(cmd, mode, args.root)
                    if action != "run":
                        print("    %s: %s: %s" % (mode, "skip" if action == "skip" else
                                                  "append '%s'" % action.strip(), reason))
        return 0

    mode = "quick" if args.quick else "full"
    work = tempfile.mkdtemp(prefix="strata-readme.")
    t_start = time.monotonic()
    rows, failed = [], False
    try:
        co, readme = checkout(args, work)
        env = environment(work)
        prev_skipped = False
        for kind, start, cmds in parse(readme):
            todo = []
            for no, cmd in cmds:
                action, reason = plan(cmd, mode, co)
                if kind == "shown" and prev_skipped:
                    action, reason = "skip", "shows the output of the block before, skipped"
                if action == "skip":
                    rows.append([no, "skip", None, cmd, reason])
                    print("\n-- README.md:%d: skipped: %s\n   %s" % (no, reason, cmd), flush=True)
                    continue
                run = cmd if action == "run" else cmd + action
                if action != "run":
                    print("\n-- README.md:%d: '%s' appended: %s" % (no, action.strip(), reason))
                rows.append([no, "not run", None, run, reason])
                todo.append((len(rows) - 1, (no, run)))
            if kind == "sh":
                prev_skipped = not todo
            if not todo:
                continue
            print("\n== README.md:%d" % start, flush=True)
            done = run_block(co, env, work, todo)
            for i, _ in todo:
                if i in done:
                    rc, secs = done[i]
                    rows[i][1:3] = ["ok" if rc == 0 else "FAIL (exit %d)" % rc, secs]
                    failed = failed or rc != 0
                elif not any(rows[j][1].startswith("FAIL") for j, _ in todo):
                    rows[i][1] = "FAIL (no exit)"
                    failed = True
    finally:
        total = time.monotonic() - t_start
        print("\n== README commands (%s mode), %.1f s in all" % (mode, total))
        for no, status, secs, cmd, reason in rows:
            short = re.sub(r"\s+#.*$", "", cmd)
            short = short if len(short) <= 90 else short[:87] + "..."
            print("README.md:%-4d %-14s %7s  %s%s" % (no, status, "%.1f s" % secs if secs is not None else "-",
                                                     short, "  (%s)" % reason if reason else ""))
        if args.keep:
            print("kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    ran = sum(1 for r in rows if r[1] == "ok")
    print("%d run, %d skipped, %s" % (ran, sum(1 for r in rows if r[1] == "skip"),
                                      "FAILED" if failed else "all passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
