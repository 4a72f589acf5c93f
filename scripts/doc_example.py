#!/usr/bin/env python3
"""Writes the C program a Markdown document shows under a heading, so that
the build compiles it and a test runs it: a documented example that stops
compiling or working fails the suite instead of drifting.

Usage: scripts/doc_example.py DOC.md "HEADING" OUT.c
  takes the first ```c block after the line "## HEADING" (or ###) and
  writes it to OUT.c only when it changed (so the build stays incremental).
"""
import os
import re
import sys


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__.strip().splitlines()[-3] + "\n")
        return 2
    doc, heading, out = argv
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"^#{2,3} " + re.escape(heading) + r"\s*$", text, re.M)
    if not m:
        sys.stderr.write(f"{doc}: no heading '{heading}'\n")
        return 1
    block = re.search(r"^```c\n(.*?)^```", text[m.end():], re.M | re.S)
    if not block:
        sys.stderr.write(f"{doc}: no ```c block after '{heading}'\n")
        return 1
    code = f"/* Generated from {os.path.basename(doc)}, \"{heading}\": edit it there. */\n" + block.group(1)
    if os.path.exists(out) and open(out, encoding="utf-8").read() == code:
        return 0
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(code)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
