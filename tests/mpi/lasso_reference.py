#!/usr/bin/env python3
"""Reference Lasso objectives for tests/mpi/lasso.sh, by a solver unlike the
app's coordinate descent (pure Python, no numpy).

    F(b) = (1/2N) |y - X b|^2 + lambda |b|_1

on the diabetes table, every column centred and scaled to unit population
standard deviation (over N), y centred. The solver works on the Gram form
G = X^T X / N, c = X^T y / N: FISTA (accelerated proximal gradient, step
1/L with L the largest eigenvalue of G by power iteration, with adaptive
restart) until the iterate moves less than 1e-15, then an exact active-set
polish: with the signs s of the FISTA support A, solve G_AA b_A = c_A -
lambda s_A by Gaussian elimination and check the KKT conditions (|G b - c|
<= lambda off the support, sign agreement on it). F is then evaluated from
X directly in double.

Usage: lasso_reference.py DIABETES_FILE  (prints lambda_max and, for
lambda = 1 and lambda = lambda_max / 100, F to 17 significant digits).
"""
import math
import sys


def load(path):
    with open(path) as f:
        lines = [l.split() for l in f if l.strip()]
    rows = [[float(v) for v in l] for l in lines[1:]]
    n, p = len(rows), len(rows[0]) - 1
    cols = []
    for j in range(p):
        col = [r[j] for r in rows]
        mean = sum(col) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in col) / n)
        cols.append([(v - mean) / sd if sd > 0 else 0.0 for v in col])
    y = [r[p] for r in rows]
    ym = sum(y) / n
    return n, p, cols, [v - ym for v in y]


def objective(n, cols, y, b, lam):
    r = list(y)
    for j, bj in enumerate(b):
        if bj != 0:
            cj = cols[j]
            for i in range(n):
                r[i] -= cj[i] * bj
    return sum(v * v for v in r) / (2 * n) + lam * sum(abs(v) for v in b)


def solve_linear(a, rhs):
    m = len(rhs)
    a = [row[:] + [rhs[i]] for i, row in enumerate(a)]
    for k in range(m):
        piv = max(range(k, m), key=lambda i: abs(a[i][k]))
        a[k], a[piv] = a[piv], a[k]
        for i in range(k + 1, m):
            f = a[i][k] / a[k][k]
            for j in range(k, m + 1):
                a[i][j] -= f * a[k][j]
    x = [0.0] * m
    for k in range(m - 1, -1, -1):
        x[k] = (a[k][m] - sum(a[k][j] * x[j] for j in range(k + 1, m))) / a[k][k]
    return x


def lasso(G, c, lam, iters=2000000):
    p = len(c)
    v = [1.0] * p
    for _ in range(1000):  # power iteration for L
        w = [sum(G[i][j] * v[j] for j in range(p)) for i in range(p)]
        nw = math.sqrt(sum(x * x for x in w))
        v = [x / nw for x in w]
    L = nw * 1.0001
    b = [0.0] * p
    z, t = list(b), 1.0
    soft = lambda x, a: x - a if x > a else x + a if x < -a else 0.0
    for it in range(iters):
        g = [sum(G[i][j] * z[j] for j in range(p)) - c[i] for i in range(p)]
        nb = [soft(z[i] - g[i] / L, lam / L) for i in range(p)]
        move = max(abs(nb[i] - b[i]) for i in range(p))
        nt = (1 + math.sqrt(1 + 4 * t * t)) / 2
        # restart when the momentum points uphill
        if sum((z[i] - nb[i]) * (nb[i] - b[i]) for i in range(p)) > 0:
            nt, z = 1.0, list(nb)
        else:
            z = [nb[i] + (t - 1) / nt * (nb[i] - b[i]) for i in range(p)]
        b, t = nb, nt
        if move < 1e-15 and it > 100:
            break
    # exact polish on the support
    A = [j for j in range(p) if b[j] != 0]
    if A:
        s = [1.0 if b[j] > 0 else -1.0 for j in A]
        bA = solve_linear([[G[i][j] for j in A] for i in A], [c[A[k]] - lam * s[k] for k in range(len(A))])
        cand = [0.0] * p
        for k, j in enumerate(A):
            cand[j] = bA[k]
        g = [sum(G[i][j] * cand[j] for j in range(p)) - c[i] for i in range(p)]
        kkt = all((cand[j] > 0) == (s[A.index(j)] > 0) for j in A) and all(
            abs(g[j]) <= lam * (1 + 1e-9) for j in range(p) if j not in A)
        if kkt:
            b = cand
        else:
            print("warning: KKT check failed, keeping FISTA's iterate", file=sys.stderr)
    return b, it


def main():
    n, p, cols, y = load(sys.argv[1])
    G = [[sum(cols[i][k] * cols[j][k] for k in range(n)) / n for j in range(p)] for i in range(p)]
    c = [sum(cols[i][k] * y[k] for k in range(n)) / n for i in range(p)]
    lmax = max(abs(v) for v in c)
    print("lambda_max %.17g" % lmax)
    for name, lam in (("1", 1.0), ("lambda_max/100", lmax / 100)):
        b, it = lasso(G, c, lam)
        F = objective(n, cols, y, b, lam)
        nz = sum(1 for v in b if v != 0)
        print("lambda %s = %.17g: F %.17g nonzeros %d (FISTA iterations %d)" % (name, lam, F, nz, it))


if __name__ == "__main__":
    main()
