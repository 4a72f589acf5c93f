/*
 * The MF SGD kernel itself (apps/mf, not installed). Included by kernel.c,
 * which defines STRATA__MF_SGD_NAME as its own entry point, and in portable
 * builds also by kernel_x86v3.c and kernel_x86v4.c, compiled for those
 * instruction sets: strata_mf_sgd picks the widest one the CPU runs.
 *
 * Rows are padded to whole 8-float vectors. The row sweeps work on the
 * widest vectors the copy is compiled for: 16 floats with AVX-512 (a row of
 * k = 100, 104 floats, is six of them and one 8-float half), 8 with AVX
 * (one register each), pairs of SSE registers otherwise. The serial and
 * distributed runs call the same code on one machine, which is what makes
 * them agree bit for bit.
 *
 * Where the time goes. One update reads two rows, takes their dot product,
 * reduces it to a scalar, computes step sizes, and only then can write
 * either row; the next update of the same user must wait for that write
 * (docs/architecture.md has the measurements). So:
 *  - Up to four updates whose rows are pairwise disjoint (no user and no
 *    item twice) run as a group: their sums, reductions, step sizes and row
 *    writes side by side, the scalar part lane by lane in 4-float vectors.
 *    Disjoint rows make the group equal, bit for bit, to its updates in
 *    order. strata_mf_interleave lays a chunk out as four runs of users
 *    taken in turn, so four neighbours are nearly always four users, and
 *    the next group is mostly the same four users.
 *  - Every update is computed by the same lane code whether its group is
 *    full or not: a group of fewer than four fills its empty lanes with an
 *    update of error 0 on scratch tails that writes no row. A lane's result
 *    never depends on its neighbours (reductions go through one fixed
 *    transpose tree, and every other operation is lane-wise), so a group
 *    and the same updates one by one round alike.
 *  - The AdaGrad accumulators need the squared norm of each gradient,
 *    |lx - ey|^2 = l^2|x|^2 - 2le<x,y> + e^2|y|^2: the sweep that takes
 *    <x,y> also takes |x|^2 and |y|^2, and a row write is two operations
 *    per vector, (1 - s l) x + (s e) y, instead of four.
 *  - The sixteen step sizes of a group (factors and bias of both rows of
 *    four updates) take one 16-float square root and one division: the
 *    divider is shared and slow.
 *  - A group's rows are written before the next group's are summed, in
 *    program order, so a next group that shares a row with this one reads
 *    it as an update after this one would. docs/architecture.md lists what
 *    else was measured and found slower or no faster (the next group's sums
 *    during this group's scalar part, one sweep for writes and sums, the
 *    written row kept in registers, software prefetch, ...).
 */
#ifndef STRATA_APPS_MF_KERNEL_IMPL_H
#define STRATA_APPS_MF_KERNEL_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "strata/core.h"
#include "strata/apps/mf.h"

typedef float v4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef float v8 __attribute__((vector_size(32)));
/* Rows are 32-byte aligned (the stride is a multiple of 8 floats), so the
 * 16-float vector may cross a cache line: it is declared 32-byte aligned,
 * which makes the compiler use unaligned loads and stores for it. */
typedef float v16 __attribute__((vector_size(64), aligned(32)));

/* a * b + c. The file is built with -ffp-contract=off, so these are the only
 * places a fused multiply-add happens: the compiler may not contract the
 * same expression one way in a group and another in a single update.
 * Macros, not functions: a vector passed by value changes the ABI between
 * AVX and non-AVX builds (-Wpsabi). */
#if defined(__FMA__)
#define FMA4(a, b, c) ((v4)_mm_fmadd_ps((__m128)(a), (__m128)(b), (__m128)(c)))
#define FMA8(a, b, c) ((v8)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define FMAF(a, b, c) fmaf(a, b, c)
#define FMAD(a, b, c) fma(a, b, c)
#else
#define FMA4(a, b, c) ((a) * (b) + (c))
#define FMA8(a, b, c) ((a) * (b) + (c))
#define FMAF(a, b, c) ((a) * (b) + (c))
#define FMAD(a, b, c) ((a) * (b) + (c))
#endif

/* vw: the sweeps' vector, VW floats. */
#if defined(__AVX512F__)
#define VW 16
typedef v16 vw;
#define FMAW(a, b, c) ((v16)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#else
#define VW 8
typedef v8 vw;
#define FMAW FMA8
#endif

#define AI inline __attribute__((always_inline))

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

/* hsum8 of eight sweep vectors: a 16-float vector is first folded to 8,
 * lane l plus lane l + 8. */
static inline void hsumw(const vw *a, v8 *out) {
#if VW == 16
  v8 b[8];
  for (int q = 0; q < 8; q++)
    b[q] = (v8)_mm512_castps512_ps256((__m512)a[q]) +
           (v8)_mm512_extractf32x8_ps((__m512)a[q], 1);
  hsum8(b, out);
#else
  hsum8(a, out);
#endif
}

static inline float hsum(const v8 *pv) {
  v8 a[8] = {*pv}, s;
  hsum8(a, &s);
  return s[0];
}

/* <a, b> over kpad floats (strata_mf_predict). */
static inline float dot(const float *a, const float *b, int kpad) {
  const v8 *x = (const v8 *)a, *y = (const v8 *)b;
  v8 acc = {0};
  for (int i = 0; i < kpad / 8; i++) acc = FMA8(x[i], y[i], acc);
  return hsum(&acc);
}

/* c / sqrt(x), lane by lane, correctly rounded in every build. */
static inline void div_sqrt16(float c, const v16 *x, v16 *out) {
#if defined(__AVX512F__)
  *out = c / (v16)_mm512_sqrt_ps((__m512)*x);
#elif defined(__AVX__)
  v8 lo = __builtin_shufflevector(*x, *x, 0, 1, 2, 3, 4, 5, 6, 7);
  v8 hi = __builtin_shufflevector(*x, *x, 8, 9, 10, 11, 12, 13, 14, 15);
  lo = c / (v8)_mm256_sqrt_ps((__m256)lo);
  hi = c / (v8)_mm256_sqrt_ps((__m256)hi);
  *out = __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  v16 r;
  for (int l = 0; l < 16; l++) r[l] = sqrtf((*x)[l]);
  *out = c / r;
#endif
}

/* Lane p of v in every lane of *out. */
static AI void bcastw(v4 v, int p, vw *out) {
#if VW == 16
  *out = (vw)_mm512_permutexvar_ps(_mm512_set1_epi32(p), _mm512_castps128_ps512((__m128)v));
#elif defined(__AVX2__)
  *out = (vw)_mm256_permutevar8x32_ps(_mm256_castps128_ps256((__m128)v), _mm256_set1_epi32(p));
#else
  const vw z = {0};
  *out = z + v[p];
#endif
}

enum { LANES = 4 };

/* Up to four updates on pairwise disjoint rows, lanes 0..n-1. Row pointers
 * are NULL in the empty lanes; the tail pointers (bias and accumulators,
 * row + kpad) of the empty lanes point at scratch tails, their rating is mu
 * and their sums are 0, so their error is exactly 0. */
typedef struct group {
  float *w[LANES], *h[LANES];
  float *tw[LANES], *th[LANES];
  v4 r;
  int n;
} group;

/* The row writes of lane p: x' = bw x + aw y, y' = bh y + ah x. */
typedef struct coefs {
  v4 aw, ah, bw, bh;
} coefs;

/* The group starting at e[j]; returns the index after it. */
static AI size_t next_group(const strata_mf_entry *e, size_t n, size_t j, float *W, float *H,
                            size_t stride, int kpad, float *scratch, float mu, group *g) {
  int m = 0;
  while (m < LANES && j + (size_t)m < n) {
    const strata_mf_entry *x = &e[j + (size_t)m];
    int ok = 1;
    for (int q = 0; q < m; q++) ok &= (x->u != e[j + (size_t)q].u) & (x->i != e[j + (size_t)q].i);
    if (!ok) break;
    g->w[m] = W + x->u * stride;
    g->h[m] = H + x->i * stride;
    g->tw[m] = g->w[m] + kpad;
    g->th[m] = g->h[m] + kpad;
    g->r[m] = x->r;
    m++;
  }
  g->n = m;
  for (int q = m; q < LANES; q++) {
    g->w[q] = g->h[q] = NULL; /* never read: the sweeps stop at n */
    g->tw[q] = scratch + 4 * q;
    g->th[q] = scratch + 4 * (LANES + q);
    g->r[q] = mu;
  }
  return j + (size_t)m;
}

/* The sums of the group's lanes: acc[p] <x,y>, acc[4+p] |x|^2, acc[8+p]
 * |y|^2 (the norms only for AdaGrad, else 0). nf whole sweep vectors, and
 * with half an 8-float vector after them (16-float sweeps only), summed as
 * a 16-float one with its upper lanes 0. Vector by vector across the lanes:
 * twelve independent chains of multiply-adds (5-8% faster than lane by
 * lane, both with AVX2 and AVX-512). */
static AI void sums(int nf, int half, const group *b, vw *acc, const int ADA) {
  vw sxy[LANES], sxx[LANES], syy[LANES];
  for (int p = 0; p < LANES; p++) sxy[p] = sxx[p] = syy[p] = (vw){0};
  const int n = b->n;
  for (int i = 0; i < nf; i++)
    for (int p = 0; p < LANES; p++) {
      if (p >= n) break;
      vw xv = ((const vw *)b->w[p])[i], yv = ((const vw *)b->h[p])[i];
      sxy[p] = FMAW(xv, yv, sxy[p]);
      if (ADA) {
        sxx[p] = FMAW(xv, xv, sxx[p]);
        syy[p] = FMAW(yv, yv, syy[p]);
      }
    }
#if VW == 16
  if (half)
    for (int p = 0; p < LANES; p++) {
      if (p >= n) break;
      vw xv = (vw)_mm512_zextps256_ps512(*(const __m256 *)((const vw *)b->w[p] + nf));
      vw yv = (vw)_mm512_zextps256_ps512(*(const __m256 *)((const vw *)b->h[p] + nf));
      sxy[p] = FMAW(xv, yv, sxy[p]);
      if (ADA) {
        sxx[p] = FMAW(xv, xv, sxx[p]);
        syy[p] = FMAW(yv, yv, syy[p]);
      }
    }
#else
  (void)half;
#endif
  for (int p = 0; p < LANES; p++) {
    acc[p] = sxy[p];
    acc[LANES + p] = sxx[p];
    acc[2 * LANES + p] = syy[p];
  }
}

static AI void writes(int nf, int half, const group *a, const coefs *c) {
  for (int p = 0; p < LANES; p++) {
    if (p >= a->n) break;
    vw *x = (vw *)a->w[p], *y = (vw *)a->h[p];
    vw aw, ah, bw, bh;
    bcastw(c->aw, p, &aw);
    bcastw(c->ah, p, &ah);
    bcastw(c->bw, p, &bw);
    bcastw(c->bh, p, &bh);
    for (int i = 0; i < nf; i++) {
      vw xv = x[i], yv = y[i];
      x[i] = FMAW(aw, yv, bw * xv);
      y[i] = FMAW(ah, xv, bh * yv);
    }
#if VW == 16
    if (half) {
      v8 *x8 = (v8 *)(x + nf), *y8 = (v8 *)(y + nf);
      const v8 aw8 = (v8)_mm512_castps512_ps256((__m512)aw),
               ah8 = (v8)_mm512_castps512_ps256((__m512)ah),
               bw8 = (v8)_mm512_castps512_ps256((__m512)bw),
               bh8 = (v8)_mm512_castps512_ps256((__m512)bh);
      v8 xv = *x8, yv = *y8;
      *x8 = FMA8(aw8, yv, bw8 * xv);
      *y8 = FMA8(ah8, xv, bh8 * yv);
    }
#else
    (void)half;
#endif
  }
}

static inline void transpose4(v4 *a) {
  v4 t0 = __builtin_shufflevector(a[0], a[1], 0, 4, 1, 5);
  v4 t1 = __builtin_shufflevector(a[0], a[1], 2, 6, 3, 7);
  v4 t2 = __builtin_shufflevector(a[2], a[3], 0, 4, 1, 5);
  v4 t3 = __builtin_shufflevector(a[2], a[3], 2, 6, 3, 7);
  a[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  a[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  a[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  a[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}

/* Everything of the group's updates but the row writes, lane by lane:
 * prediction, error (added to *sq in entry order), step sizes, the tails
 * (bias and accumulators) written, and the coefficients of the row writes. */
static AI void scalars(const strata_mf_step *st, float inv_k, const group *g, const vw *acc,
                       coefs *c, double *sq, const int ADA) {
  const v4 z = {0};
  v8 s0, s1 = {0};
  hsumw(acc, &s0);
  if (ADA) hsumw(acc + 2 * LANES, &s1); /* reads acc[8..15]: acc has 16 */
  const v4 xy = __builtin_shufflevector(s0, s0, 0, 1, 2, 3);
  const v4 xx = __builtin_shufflevector(s0, s0, 4, 5, 6, 7);
  const v4 yy = __builtin_shufflevector(s1, s1, 0, 1, 2, 3);
  /* tw[0] the users' biases, tw[1] their factor accumulators, tw[2] their
   * bias accumulators, tw[3] the zero lane; th the same of the items. */
  v4 tw[LANES], th[LANES];
  for (int p = 0; p < LANES; p++) {
    tw[p] = *(const v4 *)g->tw[p];
    th[p] = *(const v4 *)g->th[p];
  }
  transpose4(tw);
  transpose4(th);
  v4 pred = st->mu + xy;
  if (st->bias) pred += tw[0] + th[0];
  const v4 e = g->r - pred;
  for (int p = 0; p < LANES; p++) *sq = FMAD((double)e[p], (double)e[p], *sq);
  const float lam = st->lambda;
  if (ADA) {
    v16 gacc = __builtin_shufflevector(
        __builtin_shufflevector(tw[1], th[1], 0, 1, 2, 3, 4, 5, 6, 7),
        __builtin_shufflevector(tw[2], th[2], 0, 1, 2, 3, 4, 5, 6, 7), 0, 1, 2, 3, 4, 5, 6, 7,
        8, 9, 10, 11, 12, 13, 14, 15);
    v16 scale;
    div_sqrt16(st->lr, &gacc, &scale);
    const v4 sw = __builtin_shufflevector(scale, scale, 0, 1, 2, 3);
    const v4 sh = __builtin_shufflevector(scale, scale, 4, 5, 6, 7);
    const v4 sbw = __builtin_shufflevector(scale, scale, 8, 9, 10, 11);
    const v4 sbh = __builtin_shufflevector(scale, scale, 12, 13, 14, 15);
    /* |gw|^2 and |gh|^2 from the three sums; rounding may leave a tiny
     * negative where the gradient vanishes, which adds 0. */
    const v4 cross = 2.0f * lam * e * xy, l2 = z + lam * lam, e2 = e * e;
    v4 gw2 = FMA4(e2, yy, FMA4(l2, xx, -cross)) * inv_k;
    v4 gh2 = FMA4(e2, xx, FMA4(l2, yy, -cross)) * inv_k;
    c->bw = FMA4(-sw, z + lam, z + 1.0f);
    c->aw = sw * e;
    c->bh = FMA4(-sh, z + lam, z + 1.0f);
    c->ah = sh * e;
    tw[1] += (v4)((vi4)gw2 & (gw2 > z));
    th[1] += (v4)((vi4)gh2 & (gh2 > z));
    if (st->bias) {
      const v4 lb = z + st->lambda_bias;
      const v4 gu = FMA4(lb, tw[0], -e), gi = FMA4(lb, th[0], -e);
      tw[0] = FMA4(-sbw, gu, tw[0]);
      th[0] = FMA4(-sbh, gi, th[0]);
      tw[2] = FMA4(gu, gu, tw[2]);
      th[2] = FMA4(gi, gi, th[2]);
    }
  } else {
    c->bw = c->bh = z + FMAF(-st->lr, lam, 1.0f);
    c->aw = c->ah = st->lr * e;
    if (st->bias) {
      const v4 lr = z + st->lr, lb = z + st->lambda_bias;
      tw[0] = FMA4(lr, FMA4(-lb, tw[0], e), tw[0]);
      th[0] = FMA4(lr, FMA4(-lb, th[0], e), th[0]);
    }
  }
  transpose4(tw);
  transpose4(th);
  for (int p = 0; p < LANES; p++) {
    *(v4 *)g->tw[p] = tw[p];
    *(v4 *)g->th[p] = th[p];
  }
}

/* ADA: AdaGrad; NV: the number of 8-float vectors in a row's factors, or 0
 * to read it from st (both constants after inlining). */
static AI double sgd_run(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                         float *H, const int ADA, const int NV) {
  const size_t stride = (size_t)st->stride;
  const int nv = NV ? NV : st->kpad / 8;
  const int nf = nv / (VW / 8), half = nv % (VW / 8);
  const float inv_k = 1.0f / (float)st->k;
  /* Scratch tails of the empty lanes, users' then items': bias 0,
   * accumulators 1. An empty lane's error is 0, so they never change. */
  float scratch[2 * LANES * 4] __attribute__((aligned(16)));
  for (int q = 0; q < 2 * LANES; q++) {
    scratch[4 * q] = scratch[4 * q + 3] = 0;
    scratch[4 * q + 1] = scratch[4 * q + 2] = 1;
  }
  double sq = 0;
  group g;
  vw acc[4 * LANES];
  memset(acc, 0, sizeof acc);
  size_t j = next_group(e, n, 0, W, H, stride, st->kpad, scratch, st->mu, &g);
  sums(nf, half, &g, acc, ADA);
  while (g.n) {
    /* The next group is formed first: its loads of entries and its
     * comparisons then run beside this group's scalar part (5% faster
     * than after the writes). */
    group g1;
    coefs c;
    j = next_group(e, n, j, W, H, stride, st->kpad, scratch, st->mu, &g1);
    scalars(st, inv_k, &g, acc, &c, &sq, ADA);
    writes(nf, half, &g, &c);
    g = g1;
    sums(nf, half, &g, acc, ADA);
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
   * arrays stay in registers. The common ranks (16, 32, 64, 100, 128) get
   * their own copy; the others share one. */
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
