#!/usr/bin/env python3
"""The reference objective of tests/mpi/lasso.sh's logistic case, from
LIBLINEAR (Debian's liblinear-tools: apt-get install liblinear-tools).

The problem: dna (libsvm-dna/dna.scale) as a binary one, class 3 against
the rest (labels 1 and -1), no bias term, lambda = 5e-3:

    F(w) = (1/N) sum_i log(1 + exp(-y_i w.x_i)) + lambda |w|_1

LIBLINEAR's -s 6 (L1-regularised logistic regression) minimises
    |w|_1 + C sum_i log(1 + exp(-y_i w.x_i))
which with C = 1 / (lambda N) is F / lambda: the same minimiser, and F is
lambda times LIBLINEAR's objective. (N = 2000 here, so C = 0.1.) This
script runs
    liblinear-train -s 6 -e 1e-8 -c C -B -1 DNA3 MODEL
and computes F from the model's w directly in double (LIBLINEAR prints its
own objective to 6 digits only). The model's first label is the class its
decision value w.x > 0 predicts.

Usage: lasso_logistic_reference.py DNA_SCALE [LAMBDA]
Prints the ±1 file's N and F to 17 significant digits.
"""
import math
import os
import subprocess
import sys
import tempfile


def softplus(x):
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lam = float(sys.argv[2]) if len(sys.argv) > 2 else 5e-3
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            t = line.split()
            if not t:
                continue
            y = 1.0 if int(float(t[0])) == 3 else -1.0
            x = [(int(k) - 1, float(v)) for k, v in (f.split(":") for f in t[1:])]
            rows.append((y, x))
    n = len(rows)
    with tempfile.TemporaryDirectory() as tmp:
        data, model = os.path.join(tmp, "dna3.svm"), os.path.join(tmp, "dna3.model")
        with open(data, "w") as f:
            for y, x in rows:
                f.write("%+d %s\n" % (y, " ".join("%d:%.17g" % (j + 1, v) for j, v in x)))
        c = 1.0 / (lam * n)
        subprocess.run(["liblinear-train", "-s", "6", "-e", "1e-8", "-c", repr(c), "-B", "-1",
                        data, model], check=True, stdout=subprocess.DEVNULL)
        with open(model) as f:
            lines = f.read().split("\n")
    at = lines.index("w")
    labels = [l.split()[1:] for l in lines[:at] if l.startswith("label")][0]
    sign = 1.0 if int(labels[0]) == 1 else -1.0
    w = [float(v) for v in lines[at + 1:] if v.strip()]
    loss = 0.0
    for y, x in rows:
        m = sign * sum(w[j] * v for j, v in x if j < len(w))
        loss += softplus(-y * m)
    F = loss / n + lam * sum(abs(v) for v in w)
    print(f"N {n} C {c!r} nonzeros {sum(1 for v in w if v != 0)} F {F:.17g}")


if __name__ == "__main__":
    main()
