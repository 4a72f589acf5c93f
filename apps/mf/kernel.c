/*
 * The DSGD inner loop. Rows are padded to whole 8-float vectors so the
 * compiler's vector extensions map each row operation onto a few SIMD
 * instructions (one AVX register per vector with -march=native, pairs of
 * SSE registers in a portable build); the serial and distributed runs call
 * this same code, which is what makes them agree bit for bit.
 *
 * Where the time goes. One update reads two rows, takes their dot product,
 * reduces it to a scalar, and only then can write either row: a chain of
 * dependent steps that the next update of the same user must wait for.
 * With rows in cache an update costs its latency, not its arithmetic. So:
 *  - Two updates whose rows are disjoint (different user and item) run
 *    fused: their dot products, reductions, step sizes and row writes are
 *    computed side by side, and neither waits for the other. Disjoint rows
 *    make the fused pair equal, bit for bit, to the two updates in order.
 *    The data layout (strata_mf_interleave) makes nearly every pair of
 *    neighbours disjoint.
 *  - The AdaGrad accumulators need the squared norm of each gradient,
 *    |lx - ey|^2 = l^2|x|^2 - 2le<x,y> + e^2|y|^2: the pass that takes
 *    <x,y> also takes |x|^2 and |y|^2, and the row write is two operations
 *    per vector, (1 - s l) x + (s e) y, instead of four.
 *  - The four step sizes of an update (factors and bias of both rows) take
 *    one vector square root and one vector division, not four of each: the
 *    divider is shared and slow.
 *  - Reductions go through one fixed transpose tree, so a value's sum does
 *    not depend on what it is reduced beside: a fused pair and the same two
 *    updates alone round alike.
 */
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

/*
 * NP updates (1 or 2, a constant after inlining) on pairwise disjoint rows.
 * ADA selects AdaGrad, also a constant. Adds each squared error to *sq in
 * order.
 */
static inline __attribute__((always_inline)) void step_n(const strata_mf_step *st, float inv_k,
                                                         float *const *w, float *const *h,
                                                         const float *r, double *sq,
                                                         const int NP, const int ADA) {
  const int kpad = st->kpad, nv = kpad / 8;
  v8 acc[8] = {{0}};
  /* acc[3p]: <x,y>, acc[3p+1]: |x|^2, acc[3p+2]: |y|^2 of update p. */
  for (int i = 0; i < nv; i++)
    for (int p = 0; p < NP; p++) {
      v8 x = ((const v8 *)w[p])[i], y = ((const v8 *)h[p])[i];
      acc[3 * p] = FMA8(x, y, acc[3 * p]);
      if (ADA) {
        acc[3 * p + 1] = FMA8(x, x, acc[3 * p + 1]);
        acc[3 * p + 2] = FMA8(y, y, acc[3 * p + 2]);
      }
    }
  v8 sums;
  hsum8(acc, &sums);
  float err[2], a_w[2], a_h[2], b_w[2], b_h[2];
  v8 gacc = {1, 1, 1, 1, 1, 1, 1, 1}, scale = {0};
  for (int p = 0; p < NP; p++) {
    float *bw = w[p] + kpad, *bh = h[p] + kpad;
    float pred = st->mu + sums[3 * p];
    if (st->bias) pred += bw[0] + bh[0];
    err[p] = r[p] - pred;
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
    float *bw = w[p] + kpad, *bh = h[p] + kpad;
    if (ADA) {
      const float sw = scale[4 * p], sh = scale[4 * p + 1];
      const float xy = sums[3 * p], xx = sums[3 * p + 1], yy = sums[3 * p + 2];
      /* |gw|^2 and |gh|^2 from the three sums; rounding may leave a tiny
       * negative where the gradient vanishes. */
      const float cross = 2.0f * lam * e * xy, l2 = lam * lam, e2 = e * e;
      float gw2 = FMAF(e2, yy, FMAF(l2, xx, -cross)) * inv_k;
      float gh2 = FMAF(e2, xx, FMAF(l2, yy, -cross)) * inv_k;
      b_w[p] = FMAF(-sw, lam, 1.0f);
      a_w[p] = sw * e;
      b_h[p] = FMAF(-sh, lam, 1.0f);
      a_h[p] = sh * e;
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
      b_w[p] = b_h[p] = FMAF(-st->lr, lam, 1.0f);
      a_w[p] = a_h[p] = st->lr * e;
      if (st->bias) {
        bw[0] = FMAF(st->lr, FMAF(-st->lambda_bias, bw[0], e), bw[0]);
        bh[0] = FMAF(st->lr, FMAF(-st->lambda_bias, bh[0], e), bh[0]);
      }
    }
  }
  for (int i = 0; i < nv; i++)
    for (int p = 0; p < NP; p++) {
      v8 *x = (v8 *)w[p] + i, *y = (v8 *)h[p] + i;
      v8 xv = *x, yv = *y;
      const v8 zero = {0}, aw = zero + a_w[p], ah = zero + a_h[p];
      v8 bx = b_w[p] * xv, by = b_h[p] * yv;
      *x = FMA8(aw, yv, bx);
      *y = FMA8(ah, xv, by);
    }
}

static inline void prefetch_row(const float *row, int stride) {
  const char *c = (const char *)row;
  for (int b = 0; b < stride * 4; b += 64) __builtin_prefetch(c + b, 1, 3);
}

static double sgd_run(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                      float *H, const int ADA) {
  const size_t stride = (size_t)st->stride;
  const float inv_k = 1.0f / (float)st->k;
  /* How far ahead to fetch: two pairs. */
  enum { AHEAD = 4 };
  double sq = 0;
  size_t j = 0;
  while (j < n) {
    if (j + AHEAD + 1 < n) {
      /* Item rows are the random accesses; a user row only when its stream
       * moves on to the next user (users ascend within a stream). */
      for (size_t q = j + AHEAD; q < j + AHEAD + 2; q++) {
        prefetch_row(H + e[q].i * stride, st->stride);
        if (e[q].u != e[q - 2].u) prefetch_row(W + e[q].u * stride, st->stride);
      }
    }
    float *w[2], *h[2];
    float r[2];
    w[0] = W + e[j].u * stride;
    h[0] = H + e[j].i * stride;
    r[0] = e[j].r;
    if (j + 1 < n && e[j + 1].u != e[j].u && e[j + 1].i != e[j].i) {
      w[1] = W + e[j + 1].u * stride;
      h[1] = H + e[j + 1].i * stride;
      r[1] = e[j + 1].r;
      step_n(st, inv_k, w, h, r, &sq, 2, ADA);
      j += 2;
    } else {
      step_n(st, inv_k, w, h, r, &sq, 1, ADA);
      j += 1;
    }
  }
  return sq;
}

void strata_mf_interleave(const strata_mf_entry *in, size_t n, strata_mf_entry *out) {
  /* The user boundary nearest the middle, after it if there is one. */
  size_t c = n / 2;
  while (c > 0 && c < n && in[c].u == in[c - 1].u) c++;
  if (c == n) {
    c = n / 2;
    while (c > 0 && in[c].u == in[c - 1].u) c--;
  }
  size_t a = 0, b = c, o = 0;
  while (a < c && b < n) {
    out[o++] = in[a++];
    out[o++] = in[b++];
  }
  while (a < c) out[o++] = in[a++];
  while (b < n) out[o++] = in[b++];
}

double strata_mf_sgd(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                     float *H) {
  return st->adagrad ? sgd_run(st, e, n, W, H, 1) : sgd_run(st, e, n, W, H, 0);
}

float strata_mf_predict(const strata_mf_step *st, const float *w, const float *h) {
  float p = st->mu;
  if (st->bias) {
    if (w) p += w[st->kpad];
    if (h) p += h[st->kpad];
  }
  if (w && h) p += dot(w, h, st->kpad);
  return p;
}

double strata_mf_loss(const strata_mf_step *st, const float *w, const float *h, float r) {
  double e = (double)r - (double)strata_mf_predict(st, w, h);
  double l = 0.5 * e * e, nw = 0, nh = 0;
  for (int i = 0; i < st->kpad; i++) {
    nw += (double)w[i] * w[i];
    nh += (double)h[i] * h[i];
  }
  l += 0.5 * st->lambda * (nw + nh);
  if (st->bias)
    l += 0.5 * st->lambda_bias *
         ((double)w[st->kpad] * w[st->kpad] + (double)h[st->kpad] * h[st->kpad]);
  return l;
}

void strata_mf_init_row(float *row, int k, int stride, double scale, uint64_t seed, int side,
                        uint64_t index) {
  strata_rng rng;
  strata_rng_seed(&rng, strata_mix64(seed ^ strata_mix64(2 * index + (uint64_t)side)));
  memset(row, 0, (size_t)stride * sizeof *row);
  double sd = scale / sqrt((double)k);
  for (int i = 0; i < k; i++) row[i] = (float)(sd * strata_rng_normal(&rng));
  int kpad = strata_mf_kpad(k);
  row[kpad + 1] = 1.0f;
  row[kpad + 2] = 1.0f;
}
