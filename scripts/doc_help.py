#!/usr/bin/env python3
"""Keeps the --help blocks of the docs equal to what the program prints.

A block in a markdown file is a fenced code block whose first line is
`$ strata ... --help`; its body is replaced by that command's output (run
with the given strata binary in place of `strata`).

Usage: doc_help.py [--check] STRATA_BIN FILE.md...
  without --check: rewrites the files in place (atomically);
  with --check: changes nothing, prints the stale blocks and exits 1 when
  any block differs (the test suite runs this).
Either way a line `$ ... --help` outside such a block is an error (exit 1):
every help text shown in the docs is generated. So is a build's git
revision in a pasted run (`strata 0.1.0 (git 1a2b3c4d5e6f; ...)`): pasted
output says `git <rev>`, which no later build makes stale.
"""
import os
import re
import subprocess
import sys
import tempfile

BLOCK = re.compile(r"^```\n(\$ strata((?: [a-z-]+)*) --help)\n(.*?)^```\n", re.M | re.S)
# Any command line asking for help, so that one BLOCK does not match (in
# another fence, with other arguments) is reported rather than left stale.
HELP_LINE = re.compile(r"^\$ .*--help$", re.M)
# A build's revision in pasted output ("(git 565ef74362b2; ..." or "-dirty").
BUILD_REV = re.compile(r"\(git [0-9a-f]{7,}(-dirty)?;")


def render(binary, sub):
    cmd = [binary] + sub.split() + ["--help"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit("doc_help: %s exited %d: %s" % (" ".join(cmd), out.returncode, out.stderr.strip()))
    return out.stdout


def main(argv):
    check = argv[:1] == ["--check"]
    if check:
        argv = argv[1:]
    if len(argv) < 2:
        sys.exit(__doc__)
    binary, files = argv[0], argv[1:]
    stale = uncovered = 0
    for path in files:
        text = open(path).read()

        def fresh(m):
            nonlocal stale
            body = render(binary, m.group(2))
            if body != m.group(3):
                stale += 1
                print("%s: the block of '%s' differs from the program's output" % (path, m.group(1)))
            return "```\n%s\n%s```\n" % (m.group(1), body)

        covered = {m.start(1) for m in BLOCK.finditer(text)}
        for m in HELP_LINE.finditer(text):
            if m.start() not in covered:
                uncovered += 1
                print("%s: '%s' is not a block doc_help renders (a fence of its own, "
                      "'$ strata [SUBCOMMAND] --help' first)" % (path, m.group(0)))
        for m in BUILD_REV.finditer(text):
            uncovered += 1
            print("%s:%d: a build's revision in pasted output (write 'git <rev>')"
                  % (path, text.count("\n", 0, m.start()) + 1))
        new = BLOCK.sub(fresh, text)
        if not check and new != text:
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)))
            with os.fdopen(fd, "w") as f:
                f.write(new)
            os.replace(tmp, path)
    if uncovered:
        print("doc_help: %d help command(s) outside a block it renders, or build revisions"
              % uncovered)
        return 1
    if check and stale:
        print("doc_help: %d stale block(s); run scripts/doc_help.py %s %s" % (stale, binary, " ".join(files)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
