/*
 * The MF SGD kernel itself (apps/mf, not installed). Included by kernel.c,
 * which defines STRATA__MF_SGD_NAME as its own entry point, and in portable
 * builds also by kernel_x86v3.c and kernel_x86v4.c, compiled for those
 * instruction sets: strata_mf_sgd picks the widest one the CPU runs.
 *
 * Rows are padded to whole 8-float vectors so the compiler's vector
 * extensions map each row operation onto a few SIMD instructions (one AVX
 * register per vector when compiled for AVX, pairs of SSE registers
 * otherwise); the serial and distributed runs call the same code on one
 * machine, which is what makes them agree bit for bit.
 *
 * Where the time goes. One update reads two rows, takes their dot product,
 * reduces it to a scalar, computes step sizes, and only then can write
 * either row: a chain of dependent steps that the next update of the same
 * user must wait for. With rows in cache an update costs about as much as
 * with rows in memory (docs/architecture.md has the measurements). So:
 *  - Two updates whose rows are disjoint (different user and item) run as
 *    a group: their sums, reductions, step sizes and row writes side by
 *    side. Disjoint rows make the group equal, bit for bit, to the two
 *    updates in order.
 *  - A group's row writes and the next group's sums share one sweep over
 *    the vectors. strata_mf_interleave lays a chunk out as four runs of
 *    users taken in turn, so consecutive groups mostly share no row, and
 *    the next group's sums run while this group's step sizes are still
 *    being computed. Where they do share a row, the sweep reads each vector
 *    after writing it, which is the order of one update after another.
 *  - The AdaGrad accumulators need the squared norm of each gradient,
 *    |lx - ey|^2 = l^2|x|^2 - 2le<x,y> + e^2|y|^2: the sweep that takes
 *    <x,y> also takes |x|^2 and |y|^2, and a row write is two operations
 *    per vector, (1 - s l) x + (s e) y, instead of four.
 *  - The four step sizes of an update (factors and bias of both rows) take
 *    one vector square root and one vector division, not four of each: the
 *    divider is shared and slow.
 *  - Reductions go through one fixed transpose tree, so a value's sum does
 *    not depend on what it is reduced beside: a group and the same updates
 *    alone round alike.
 *  - No software prefetch: the hardware's prefetchers and out-of-order
 *    loads keep up with the rows (explicit prefetches measured slower).
 */
#ifndef STRATA_APPS_MF_KERNEL_IMPL_H
#define STRATA_APPS_MF_KERNEL_IMPL_H

#include <math.h>
#include <string.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "strata/core.h"
#include "strata/apps/mf.h"

typedef float v8 __attribute__((vector_size(32)));

/* a * b + c. The file is built with -ffp-contract=off, so these are the only
 * places a fused multiply-add happens: the compiler may not contract the
 * same expression one way in the fused pair and another in a single update.
 * A macro, not a function: a 32-byte vector passed by value changes the
 * ABI between AVX and non-AVX builds (-Wpsabi). */
#if defined(__FMA__)
#define FMA8(a, b, c) ((v8)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define FMAF(a, b, c) fmaf(a, b, c)
#define FMAD(a, b, c) fma(a, b, c)
#else
#define FMA8(a, b, c) ((a) * (b) + (c))
#define FMAF(a, b, c) ((a) * (b) + (c))
#define FMAD(a, b, c) ((a) * (b) + (c))
#endif

/* Sums each of eight vectors: lane l of the result is the sum of a[l]'s
 * lanes, always as ((0+1)+(2+3))+((4+5)+(6+7)). By pointer, for -Wpsabi. */
static inline void hsum8(const v8 *a, v8 *out) {
  v8 t0 = __builtin_shufflevector(a[0], a[1], 0, 8, 2, 10, 4, 12, 6, 14) +
          __builtin_shufflevector(a[0], a[1], 1, 9, 3, 11, 5, 13, 7, 15);
  v8 t1 = __builtin_shufflevector(a[2], a[3], 0, 8, 2, 10, 4, 12, 6, 14) +
          __builtin_shufflevector(a[2], a[3], 1, 9, 3, 11, 5, 13, 7, 15);
  v8 t2 = __builtin_shufflevector(a[4], a[5], 0, 8, 2, 10, 4, 12, 6, 14) +
          __builtin_shufflevector(a[4], a[5], 1, 9, 3, 11, 5, 13, 7, 15);
  v8 t3 = __builtin_shufflevector(a[6], a[7], 0, 8, 2, 10, 4, 12, 6, 14) +
          __builtin_shufflevector(a[6], a[7], 1, 9, 3, 11, 5, 13, 7, 15);
  v8 u0 = __builtin_shufflevector(t0, t1, 0, 1, 8, 9, 4, 5, 12, 13) +
          __builtin_shufflevector(t0, t1, 2, 3, 10, 11, 6, 7, 14, 15);
  v8 u1 = __builtin_shufflevector(t2, t3, 0, 1, 8, 9, 4, 5, 12, 13) +
          __builtin_shufflevector(t2, t3, 2, 3, 10, 11, 6, 7, 14, 15);
  *out = __builtin_shufflevector(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15);
}

static inline float hsum(const v8 *pv) {
  v8 a[8] = {*pv}, s;
  hsum8(a, &s);
  return s[0];
}

static inline float dot(const float *a, const float *b, int kpad) {
  const v8 *x = (const v8 *)a, *y = (const v8 *)b;
  v8 acc = {0};
  for (int i = 0; i < kpad / 8; i++) acc = FMA8(x[i], y[i], acc);
  return hsum(&acc);
}

/* c / sqrt(x), lane by lane, correctly rounded in every build. */
static inline void div_sqrt8(float c, const v8 *x, v8 *out) {
#if defined(__AVX__)
  *out = c / (v8)_mm256_sqrt_ps((__m256)*x);
#else
  v8 r;
  for (int l = 0; l < 8; l++) r[l] = sqrtf((*x)[l]);
  *out = c / r;
#endif
}

#define AI inline __attribute__((always_inline))

/* One or two updates on pairwise disjoint rows (n = 0: none). */
typedef struct group {
  float *w[2], *h[2];
  float r[2];
  int n;
} group;

/* The row writes of a group: x' = bw x + aw y, y' = bh y + ah x. */
typedef struct coefs {
  float aw[2], ah[2], bw[2], bh[2];
} coefs;

/* Vector i of the sums of the group's first NP updates: acc[3p] <x,y>,
 * acc[3p+1] |x|^2, acc[3p+2] |y|^2 (the norms only for AdaGrad). */
static AI void acc_vec(const group *g, int i, v8 *acc, const int NP, const int ADA) {
  for (int p = 0; p < NP; p++) {
    v8 x = ((const v8 *)g->w[p])[i], y = ((const v8 *)g->h[p])[i];
    acc[3 * p] = FMA8(x, y, acc[3 * p]);
    if (ADA) {
      acc[3 * p + 1] = FMA8(x, x, acc[3 * p + 1]);
      acc[3 * p + 2] = FMA8(y, y, acc[3 * p + 2]);
    }
  }
}

static AI void upd_vec(const group *g, const coefs *c, int i, const int NP) {
  for (int p = 0; p < NP; p++) {
    v8 *x = (v8 *)g->w[p] + i, *y = (v8 *)g->h[p] + i;
    const v8 zero = {0}, aw = zero + c->aw[p], ah = zero + c->ah[p];
    v8 xv = *x, yv = *y;
    v8 bx = c->bw[p] * xv, by = c->bh[p] * yv;
    *x = FMA8(aw, yv, bx);
    *y = FMA8(ah, xv, by);
  }
}

/*
 * The scalar part of the group's NP updates, in order: prediction, error
 * (added to *sq), step sizes, the tail (bias and accumulators) written, and
 * the coefficients of the row writes.
 */
static AI void scalars(const strata_mf_step *st, float inv_k, const group *g, const v8 *acc,
                       coefs *c, double *sq, const int NP, const int ADA) {
  const int kpad = st->kpad;
  v8 sums;
  hsum8(acc, &sums);
  float err[2];
  v8 gacc = {1, 1, 1, 1, 1, 1, 1, 1}, scale = {0};
  for (int p = 0; p < NP; p++) {
    float *bw = g->w[p] + kpad, *bh = g->h[p] + kpad;
    float pred = st->mu + sums[3 * p];
    if (st->bias) pred += bw[0] + bh[0];
    err[p] = g->r[p] - pred;
    *sq = FMAD((double)err[p], (double)err[p], *sq);
    if (ADA) {
      gacc[4 * p] = bw[1];
      gacc[4 * p + 1] = bh[1];
      gacc[4 * p + 2] = bw[2];
      gacc[4 * p + 3] = bh[2];
    }
  }
  if (ADA) div_sqrt8(st->lr, &gacc, &scale);
  for (int p = 0; p < NP; p++) {
    const float e = err[p], lam = st->lambda;
    float *bw = g->w[p] + kpad, *bh = g->h[p] + kpad;
    if (ADA) {
      const float sw = scale[4 * p], sh = scale[4 * p + 1];
      const float xy = sums[3 * p], xx = sums[3 * p + 1], yy = sums[3 * p + 2];
      /* |gw|^2 and |gh|^2 from the three sums; rounding may leave a tiny
       * negative where the gradient vanishes. */
      const float cross = 2.0f * lam * e * xy, l2 = lam * lam, e2 = e * e;
      float gw2 = FMAF(e2, yy, FMAF(l2, xx, -cross)) * inv_k;
      float gh2 = FMAF(e2, xx, FMAF(l2, yy, -cross)) * inv_k;
      c->bw[p] = FMAF(-sw, lam, 1.0f);
      c->aw[p] = sw * e;
      c->bh[p] = FMAF(-sh, lam, 1.0f);
      c->ah[p] = sh * e;
      bw[1] += gw2 > 0 ? gw2 : 0;
      bh[1] += gh2 > 0 ? gh2 : 0;
      if (st->bias) {
        const float gu = FMAF(st->lambda_bias, bw[0], -e), gi = FMAF(st->lambda_bias, bh[0], -e);
        bw[0] = FMAF(-scale[4 * p + 2], gu, bw[0]);
        bh[0] = FMAF(-scale[4 * p + 3], gi, bh[0]);
        bw[2] = FMAF(gu, gu, bw[2]);
        bh[2] = FMAF(gi, gi, bh[2]);
      }
    } else {
      c->bw[p] = c->bh[p] = FMAF(-st->lr, lam, 1.0f);
      c->aw[p] = c->ah[p] = st->lr * e;
      if (st->bias) {
        bw[0] = FMAF(st->lr, FMAF(-st->lambda_bias, bw[0], e), bw[0]);
        bh[0] = FMAF(st->lr, FMAF(-st->lambda_bias, bh[0], e), bh[0]);
      }
    }
  }
}

/*
 * Writes g0's rows and takes g1's sums in the same sweep. Vector i of a
 * g1 row is read after g0 wrote its vector i, and g1's tails only after
 * the sweep, so g1 sees exactly what it would after all of g0, whichever
 * rows the two share. When they share none, g1's sums need not wait for
 * g0's step sizes at all, and the processor overlaps the two.
 */
static AI void write_then_sum(int nv, const group *g0, const coefs *c, const group *g1, v8 *out,
                              const int NP0, const int NP1, const int ADA) {
  /* Local copies of what the sweep reads, so that they live in registers
   * rather than behind pointers the row stores might alias. */
  v8 acc[6] = {{0}};
  const group a = *g0, b = *g1;
  const coefs k = *c;
  for (int i = 0; i < nv; i++) {
    upd_vec(&a, &k, i, NP0);
    acc_vec(&b, i, acc, NP1, ADA);
  }
  for (int q = 0; q < 6; q++) out[q] = acc[q];
}

/* The group starting at e[j]: two entries when their rows are disjoint. */
static inline size_t next_group(const strata_mf_entry *e, size_t n, size_t j, float *W, float *H,
                                size_t stride, group *g) {
  g->n = 0;
  if (j >= n) return j;
  g->w[0] = W + e[j].u * stride;
  g->h[0] = H + e[j].i * stride;
  g->r[0] = e[j].r;
  g->n = 1;
  if (j + 1 < n && e[j + 1].u != e[j].u && e[j + 1].i != e[j].i) {
    g->w[1] = W + e[j + 1].u * stride;
    g->h[1] = H + e[j + 1].i * stride;
    g->r[1] = e[j + 1].r;
    g->n = 2;
  }
  return j + (size_t)g->n;
}

/* ADA: AdaGrad; NV: the number of 8-float vectors in a row's factors, or 0
 * to read it from st (both constants after inlining). */
static AI double sgd_run(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                         float *H, const int ADA, const int NV) {
  const size_t stride = (size_t)st->stride;
  const int nv = NV ? NV : st->kpad / 8;
  const float inv_k = 1.0f / (float)st->k;
  double sq = 0;
  group g0 = {{0}, {0}, {0}, 0}, g1 = g0;
  v8 acc0[8] = {{0}}, acc1[8] = {{0}};
  size_t j = next_group(e, n, 0, W, H, stride, &g0);
  for (int i = 0; i < nv; i++) {
    if (g0.n == 2) acc_vec(&g0, i, acc0, 2, ADA);
    else if (g0.n == 1) acc_vec(&g0, i, acc0, 1, ADA);
  }
  while (g0.n) {
    coefs c = {{0}, {0}, {0}, {0}};
    if (g0.n == 2) scalars(st, inv_k, &g0, acc0, &c, &sq, 2, ADA);
    else scalars(st, inv_k, &g0, acc0, &c, &sq, 1, ADA);
    j = next_group(e, n, j, W, H, stride, &g1);
    switch (g0.n * 3 + g1.n) {
      case 8: write_then_sum(nv, &g0, &c, &g1, acc1, 2, 2, ADA); break;
      case 7: write_then_sum(nv, &g0, &c, &g1, acc1, 2, 1, ADA); break;
      case 6: write_then_sum(nv, &g0, &c, &g1, acc1, 2, 0, ADA); break;
      case 5: write_then_sum(nv, &g0, &c, &g1, acc1, 1, 2, ADA); break;
      case 4: write_then_sum(nv, &g0, &c, &g1, acc1, 1, 1, ADA); break;
      default: write_then_sum(nv, &g0, &c, &g1, acc1, 1, 0, ADA); break;
    }
    g0 = g1;
    for (int q = 0; q < 6; q++) acc0[q] = acc1[q];
  }
  return sq;
}

/* This copy's entry point: strata_mf_sgd's contract. */
double STRATA__MF_SGD_NAME(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                           float *H);
double STRATA__MF_SGD_NAME(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                           float *H) {
  if (!st->adagrad) return sgd_run(st, e, n, W, H, 0, 0);
  /* With the vector count a constant the sweeps unroll and the groups'
   * arrays stay in registers: 10-15% at k = 32 and 100. The common ranks
   * (16, 32, 64, 100, 128) get their own copy; the others share one. */
  switch (st->kpad / 8) {
    case 2: return sgd_run(st, e, n, W, H, 1, 2);
    case 4: return sgd_run(st, e, n, W, H, 1, 4);
    case 8: return sgd_run(st, e, n, W, H, 1, 8);
    case 13: return sgd_run(st, e, n, W, H, 1, 13);
    case 16: return sgd_run(st, e, n, W, H, 1, 16);
    default: return sgd_run(st, e, n, W, H, 1, 0);
  }
}

#endif
