/*
 * The DSGD inner loop. Rows are padded to whole 8-float vectors so the
 * compiler's vector extensions map each row operation onto a few SIMD
 * instructions (AVX-512 with -march=native on this machine, pairs or quads of
 * narrower registers elsewhere); the serial and distributed runs call this
 * same code, which is what makes them agree bit for bit.
 */
#include <math.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/mf.h"

typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));

/* A fixed shuffle tree: fewer dependent adds than a lane loop, and the same
 * summation order on every build. By pointer: a 32-byte vector passed by
 * value changes the ABI between AVX and non-AVX builds (-Wpsabi). */
static inline float hsum(const v8 *pv) {
  v8 v = *pv;
  v4 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3);
  v4 hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
  v4 s = lo + hi;
  v4 t = __builtin_shufflevector(s, s, 2, 3, 0, 1);
  s = s + t;
  t = __builtin_shufflevector(s, s, 1, 0, 3, 2);
  s = s + t;
  return s[0];
}

static inline float dot(const float *a, const float *b, int kpad) {
  const v8 *x = (const v8 *)a, *y = (const v8 *)b;
  v8 acc0 = {0}, acc1 = {0};
  int nv = kpad / 8, i = 0;
  for (; i + 1 < nv; i += 2) {
    acc0 += x[i] * y[i];
    acc1 += x[i + 1] * y[i + 1];
  }
  if (i < nv) acc0 += x[i] * y[i];
  v8 acc = acc0 + acc1;
  return hsum(&acc);
}

static inline void sgd_plain(float *restrict w, float *restrict h, int kpad, float err, float lr,
                             float lambda) {
  v8 *x = (v8 *)w, *y = (v8 *)h;
  float a = lr * err, b = 1.0f - lr * lambda;
  for (int i = 0; i < kpad / 8; i++) {
    v8 xv = x[i], yv = y[i];
    x[i] = b * xv + a * yv;
    y[i] = b * yv + a * xv;
  }
}

/* Row-wise AdaGrad: one accumulator per row, fed the row's mean squared
 * gradient, as in LIBMF. The step uses the accumulator as it was before this
 * update, which lets gradient, its square and the update share one sweep. */
static inline void sgd_adagrad(float *restrict w, float *restrict h, int k, int kpad, float err,
                               float lr, float lambda) {
  v8 *x = (v8 *)w, *y = (v8 *)h;
  v8 gw2 = {0}, gh2 = {0};
  float *tw = w + kpad, *th = h + kpad;
  float sw = lr / sqrtf(tw[1]), sh = lr / sqrtf(th[1]);
  for (int i = 0; i < kpad / 8; i++) {
    v8 xv = x[i], yv = y[i];
    v8 gw = lambda * xv - err * yv;
    v8 gh = lambda * yv - err * xv;
    gw2 += gw * gw;
    gh2 += gh * gh;
    x[i] = xv - sw * gw;
    y[i] = yv - sh * gh;
  }
  tw[1] += hsum(&gw2) / (float)k;
  th[1] += hsum(&gh2) / (float)k;
}

double strata_mf_sgd(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                     float *H) {
  const int kpad = st->kpad, stride = st->stride;
  const int k = st->k;
  double sq = 0;
  for (size_t j = 0; j < n; j++) {
    float *w = W + (size_t)e[j].u * (size_t)stride;
    float *h = H + (size_t)e[j].i * (size_t)stride;
    if (j + 2 < n) {
      /* The item row is the random access; fetch it two examples ahead, and
       * the user row when the next user starts (users ascend with gaps). */
      const char *hn = (const char *)(H + (size_t)e[j + 2].i * (size_t)stride);
      for (int b = 0; b < stride * 4; b += 64) __builtin_prefetch(hn + b, 1, 3);
      if (e[j + 2].u != e[j].u) {
        const char *wn = (const char *)(W + (size_t)e[j + 2].u * (size_t)stride);
        for (int b = 0; b < stride * 4; b += 64) __builtin_prefetch(wn + b, 1, 3);
      }
    }
    float pred = st->mu + dot(w, h, kpad);
    float *bw = w + kpad, *bh = h + kpad;
    if (st->bias) pred += bw[0] + bh[0];
    float err = e[j].r - pred;
    sq += (double)err * (double)err;
    if (st->adagrad) {
      sgd_adagrad(w, h, k, kpad, err, st->lr, st->lambda);
      if (st->bias) {
        float gu = st->lambda_bias * bw[0] - err, gi = st->lambda_bias * bh[0] - err;
        float su = st->lr / sqrtf(bw[2]), si = st->lr / sqrtf(bh[2]);
        bw[2] += gu * gu;
        bh[2] += gi * gi;
        bw[0] -= su * gu;
        bh[0] -= si * gi;
      }
    } else {
      sgd_plain(w, h, kpad, err, st->lr, st->lambda);
      if (st->bias) {
        bw[0] += st->lr * (err - st->lambda_bias * bw[0]);
        bh[0] += st->lr * (err - st->lambda_bias * bh[0]);
      }
    }
  }
  return sq;
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
