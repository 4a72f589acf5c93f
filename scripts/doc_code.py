#!/usr/bin/env python3
"""Keeps the code blocks of a Markdown document true to the files the
build compiles, so the docs cannot drift from the headers.

Every ```c and ```cmake block must follow a marker line:
  <!-- file: PATH -->     the block is the whole file PATH (relative to the
                          repository root); --write copies the file in
  <!-- excerpt: PATH -->  the block is a verbatim run of lines of PATH
A block with no marker fails the check: a fragment nobody compiles would
drift. The examples these point to are built and run by the test suite.

Usage: scripts/doc_code.py --check|--write ROOT DOC.md [DOC.md ...]
"""
import os
import re
import sys

FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)
MARKER = re.compile(r"<!-- (file|excerpt): (\S+) -->\s*\n\s*$")
COMPILED = {"c", "cmake"}


def process(root, doc, write):
    text = open(doc, encoding="utf-8").read()
    errors, out, pos = [], [], 0
    for m in FENCE.finditer(text):
        lang, body = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        before = text[max(0, m.start() - 300):m.start()]
        mk = MARKER.search(before)
        out.append(text[pos:m.start()])
        pos = m.end()
        if lang not in COMPILED and not mk:
            out.append(m.group(0))
            continue
        if not mk:
            errors.append(f"{doc}:{line}: a ```{lang} block with no <!-- file: --> or "
                          "<!-- excerpt: --> marker before it")
            out.append(m.group(0))
            continue
        kind, rel = mk.group(1), mk.group(2)
        path = os.path.join(root, rel)
        if not os.path.exists(path):
            errors.append(f"{doc}:{line}: {rel}: no such file")
            out.append(m.group(0))
            continue
        src = open(path, encoding="utf-8").read()
        if kind == "file":
            if body != src:
                if write:
                    body = src
                else:
                    errors.append(f"{doc}:{line}: the block differs from {rel} "
                                  f"(scripts/doc_code.py --write copies it in)")
        elif not excerpt_of(body, src):
            errors.append(f"{doc}:{line}: the block is not a run of lines of {rel}")
        out.append(f"```{lang}\n{body}```\n")
    out.append(text[pos:])
    new = "".join(out)
    if write and new != text:
        tmp = doc + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(tmp, doc)
    return errors


def excerpt_of(body, src):
    """Whole lines of src, in order and contiguous."""
    return body.strip() != "" and ("\n" + body) in ("\n" + src)


def main(argv):
    if len(argv) < 3 or argv[0] not in ("--check", "--write"):
        sys.stderr.write(__doc__.strip().splitlines()[-1] + "\n")
        return 2
    write, root = argv[0] == "--write", argv[1]
    errors = []
    for doc in argv[2:]:
        errors += process(root, doc, write)
    for e in errors:
        sys.stderr.write(e + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
