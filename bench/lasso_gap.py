#!/usr/bin/env python3
"""The Lasso's duality gap relative to the objective, as scikit-learn's
enet_coordinate_descent computes it (l2 weight 0), for a coefficient file
that strata-lasso wrote (--model-out DIR: DIR/coef.txt, "index value" per
nonzero, index 0-based), on the binary data of gen_lasso_synth
(/work/shared/tools/gen_lasso_synth.c: PREFIX.colptr int64, .rowidx int32,
.val float64, .y float64). bench/lasso_rounds.sh times strata-lasso builds
without --tol (the worker-side sampler of earlier builds) with it.

    F(b) = (1/2N) |y - X b|^2 + lambda |b|_1,  lambda = RATIO |X^T y|_inf / N

In sklearn's scaling (primal N F, alpha = N lambda), with r = y - X b:
    c = min(1, alpha / |X^T r|_inf)
    gap = (|r|^2 (1 + c^2)) / 2 + alpha |b|_1 - c r.y
and the relative gap is gap / (N F).

Usage: lasso_gap.py PREFIX RATIO COEF_FILE [COEF_FILE...]
Prints, per file: the file, F (17 digits), the relative gap, the nonzeros.
Pure Python (no numpy): about 10 s per file for 500 x 400,000.
"""
import array
import sys


def load(prefix):
    def read(ext, code):
        a = array.array(code)
        with open(prefix + ext, "rb") as f:
            a.frombytes(f.read())
        return a

    y = read(".y", "d")
    return read(".colptr", "q"), read(".rowidx", "i"), read(".val", "d"), y


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    prefix, ratio = sys.argv[1], float(sys.argv[2])
    cp, row, val, y = load(prefix)
    n, p = len(y), len(cp) - 1

    def xt(v):
        out = [0.0] * p
        for j in range(p):
            s = 0.0
            for a in range(cp[j], cp[j + 1]):
                s += val[a] * v[row[a]]
            out[j] = s
        return out

    lam = ratio * max(abs(g) for g in xt(y)) / n
    alpha = n * lam
    for path in sys.argv[3:]:
        b = {}
        with open(path) as f:
            for line in f:
                if line.strip():
                    j, v = line.split()
                    b[int(j)] = float(v)
        r = list(y)
        for j, bj in b.items():
            for a in range(cp[j], cp[j + 1]):
                r[row[a]] -= val[a] * bj
        rr = sum(v * v for v in r)
        ry = sum(u * v for u, v in zip(r, y))
        l1 = sum(abs(v) for v in b.values())
        gmax = max(abs(g) for g in xt(r))
        c = alpha / gmax if gmax > alpha else 1.0
        gap = 0.5 * rr * (1 + c * c) + alpha * l1 - c * ry
        primal = 0.5 * rr + alpha * l1
        print(f"{path} {primal / n:.17g} {gap / primal:.6e} {len(b)}")


if __name__ == "__main__":
    main()
