/*
 * The DSGD kernel's public functions (strata/apps/mf.h). The update loop is
 * in kernel_impl.h: this file compiles it for the build's target, and a
 * portable build (STRATA_NATIVE off) on x86-64 also has it compiled for
 * x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512) in kernel_x86v3.c and
 * kernel_x86v4.c; strata_mf_sgd runs the widest one this CPU supports.
 * Each copy rounds its own way (fused multiply-adds or not), so runs that
 * must agree bit for bit (serial and one worker) agree on one machine.
 */
#define STRATA__MF_SGD_NAME strata__mf_sgd_base
#include "apps/mf/kernel_impl.h"

/* Runs of users that strata_mf_interleave takes in turn. */
enum { RUNS = 4 };

/* The first user boundary at or after x in in[lo..n), else n. */
static size_t boundary(const strata_mf_entry *in, size_t lo, size_t n, size_t x) {
  if (x <= lo) return lo;
  while (x < n && in[x].u == in[x - 1].u) x++;
  return x;
}

void strata_mf_interleave(const strata_mf_entry *in, size_t n, strata_mf_entry *out) {
  size_t pos[RUNS], end[RUNS];
  size_t lo = 0;
  for (int q = 0; q < RUNS; q++) {
    pos[q] = lo;
    end[q] = q == RUNS - 1 ? n : boundary(in, lo, n, n * (size_t)(q + 1) / RUNS);
    lo = end[q];
  }
  size_t o = 0;
  while (o < n)
    for (int q = 0; q < RUNS; q++)
      if (pos[q] < end[q]) out[o++] = in[pos[q]++];
}

#if defined(STRATA_MF_DISPATCH)
double strata__mf_sgd_x86v3(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                            float *H);
double strata__mf_sgd_x86v4(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                            float *H);

double strata_mf_sgd(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                     float *H) {
  /* __builtin_cpu_supports reads what the runtime's initialiser found:
   * a load and a test per call, and calls come once per chunk. */
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return strata__mf_sgd_x86v4(st, e, n, W, H);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return strata__mf_sgd_x86v3(st, e, n, W, H);
  return strata__mf_sgd_base(st, e, n, W, H);
}
#else
double strata_mf_sgd(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                     float *H) {
  return strata__mf_sgd_base(st, e, n, W, H);
}
#endif

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
