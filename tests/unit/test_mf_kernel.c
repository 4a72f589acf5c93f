/*
 * Unit tests for apps/mf/kernel.c: the SGD and AdaGrad steps against finite
 * differences of strata_mf_loss, padding, prediction and row initialisation,
 * the interleaved order and the groups of updates it enables.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "strata/core.h"
#include "strata/apps/mf.h"

enum { K = 13 };

/* The randomised tests print their seed; STRATA_TEST_SEED=X replays one. */
static uint64_t g_seed = 20261125;


static strata_mf_step make_step(int adagrad, int bias, float lr) {
  int kpad = strata_mf_kpad(K);
  strata_mf_step st = {.k = K,
                       .kpad = kpad,
                       .stride = kpad + STRATA_MF_TAIL,
                       .mu = 3.1f,
                       .lr = lr,
                       .lambda = 0.07f,
                       .lambda_bias = 0.03f,
                       .bias = bias,
                       .adagrad = adagrad};
  return st;
}

static float *new_row(const strata_mf_step *st) {
  float *r = strata_alloc_aligned((size_t)st->stride * sizeof(float));
  assert_non_null(r);
  assert_int_equal((uintptr_t)r % 64, 0);
  memset(r, 0, (size_t)st->stride * sizeof(float));
  return r;
}

/* Factors ~ N(0, 0.3^2), bias, accumulators as given. */
static void fill_row(const strata_mf_step *st, float *r, strata_rng *rng, float bias, float g,
                     float gb) {
  memset(r, 0, (size_t)st->stride * sizeof(float));
  for (int i = 0; i < st->k; i++) r[i] = (float)(0.3 * strata_rng_normal(rng));
  r[st->kpad] = bias;
  r[st->kpad + 1] = g;
  r[st->kpad + 2] = gb;
}

/* Central difference of the loss in parameter p (a float inside w or h). */
static double fd_grad(const strata_mf_step *st, float *w, float *h, float r, float *p) {
  const float eps = 1e-3f;
  float old = *p;
  *p = old + eps;
  double hi = (double)*p, lhi = strata_mf_loss(st, w, h, r);
  *p = old - eps;
  double lo = (double)*p, llo = strata_mf_loss(st, w, h, r);
  *p = old;
  return (lhi - llo) / (hi - lo);
}

static void assert_close(double got, double want, double rel, double floor_abs, const char *what,
                         int idx) {
  double tol = rel * fmax(fabs(want), floor_abs);
  if (fabs(got - want) > tol) {
    print_message("%s[%d]: got %.9g, want %.9g (tol %.3g)\n", what, idx, got, want, tol);
    fail();
  }
}

/* Gradients of every parameter (factors and bias) of both rows. */
typedef struct grads {
  double w[64], h[64];
} grads;

static void fd_all(const strata_mf_step *st, float *w, float *h, float r, grads *g) {
  for (int i = 0; i <= st->kpad; i++) {
    g->w[i] = fd_grad(st, w, h, r, &w[i]);
    g->h[i] = fd_grad(st, w, h, r, &h[i]);
  }
}

static void test_sgd_matches_finite_differences(void **state) {
  (void)state;
  strata_mf_step st = make_step(0, 1, 1e-3f);
  float *w = new_row(&st), *h = new_row(&st), *w0 = new_row(&st), *h0 = new_row(&st);
  strata_rng rng;
  strata_rng_seed(&rng, 11);
  for (int trial = 0; trial < 20; trial++) {
    fill_row(&st, w, &rng, (float)(0.4 * strata_rng_normal(&rng)), 1.0f, 1.0f);
    fill_row(&st, h, &rng, (float)(0.4 * strata_rng_normal(&rng)), 1.0f, 1.0f);
    float r = (float)(1.0 + 4.0 * strata_rng_uniform(&rng));
    memcpy(w0, w, (size_t)st.stride * sizeof(float));
    memcpy(h0, h, (size_t)st.stride * sizeof(float));
    grads g;
    fd_all(&st, w, h, r, &g);
    double pred = strata_mf_predict(&st, w, h);
    strata_mf_entry e = {0, 0, r};
    double sq = strata_mf_sgd(&st, &e, 1, w, h);
    double err = (double)r - pred;
    assert_close(sq, err * err, 1e-5, 1e-6, "squared error", trial);
    for (int i = 0; i <= st.kpad; i++) {
      /* Simultaneous update: both rows step along the gradient at the old
       * point, so each moved by -lr * dL/dparam. */
      double dw = ((double)w[i] - (double)w0[i]) / -st.lr;
      double dh = ((double)h[i] - (double)h0[i]) / -st.lr;
      assert_close(dw, g.w[i], 1e-2, 5e-2, "w grad", i);
      assert_close(dh, g.h[i], 1e-2, 5e-2, "h grad", i);
    }
    for (int i = st.k; i < st.kpad; i++) {
      assert_true(w[i] == 0.0f);
      assert_true(h[i] == 0.0f);
    }
    /* Plain SGD leaves the accumulators and the rest of the tail alone. */
    for (int i = st.kpad + 1; i < st.stride; i++) {
      assert_true(w[i] == w0[i]);
      assert_true(h[i] == h0[i]);
    }
  }
  strata_free(w);
  strata_free(h);
  strata_free(w0);
  strata_free(h0);
}

static void test_sgd_gradients_are_nonzero(void **state) {
  (void)state;
  /* Guard against a vacuous check: the finite differences see the data
   * term, the factor L2 and the bias L2. */
  strata_mf_step st = make_step(0, 1, 1e-3f);
  float *w = new_row(&st), *h = new_row(&st);
  strata_rng rng;
  strata_rng_seed(&rng, 5);
  fill_row(&st, w, &rng, 0.5f, 1, 1);
  fill_row(&st, h, &rng, -0.2f, 1, 1);
  float r = 4.0f;
  double err = r - strata_mf_predict(&st, w, h);
  double g0 = fd_grad(&st, w, h, r, &w[0]);
  assert_close(g0, st.lambda * w[0] - err * h[0], 1e-3, 1e-3, "dL/dw0", 0);
  double gb = fd_grad(&st, w, h, r, &w[st.kpad]);
  assert_close(gb, st.lambda_bias * w[st.kpad] - err, 1e-3, 1e-3, "dL/dbu", 0);
  assert_true(fabs(gb) > 0.1);
  strata_free(w);
  strata_free(h);
}

static void test_sgd_sums_errors_sequentially(void **state) {
  (void)state;
  strata_mf_step st = make_step(0, 1, 0.05f);
  size_t stride = (size_t)st.stride;
  float *W = strata_alloc_aligned(3 * stride * sizeof(float));
  float *H = strata_alloc_aligned(2 * stride * sizeof(float));
  float *W2 = strata_alloc_aligned(3 * stride * sizeof(float));
  float *H2 = strata_alloc_aligned(2 * stride * sizeof(float));
  assert_non_null(W);
  assert_non_null(H);
  assert_non_null(W2);
  assert_non_null(H2);
  strata_rng rng;
  strata_rng_seed(&rng, 3);
  for (int u = 0; u < 3; u++) fill_row(&st, W + u * stride, &rng, 0.1f * (float)u, 1, 1);
  for (int i = 0; i < 2; i++) fill_row(&st, H + i * stride, &rng, -0.1f * (float)i, 1, 1);
  memcpy(W2, W, 3 * stride * sizeof(float));
  memcpy(H2, H, 2 * stride * sizeof(float));
  const strata_mf_entry e[] = {{0, 0, 4.0f}, {1, 1, 2.0f}, {0, 1, 5.0f}, {2, 0, 1.0f},
                               {0, 0, 3.0f}};
  const size_t n = sizeof e / sizeof e[0];
  double total = strata_mf_sgd(&st, e, n, W, H);
  /* One entry at a time gives the same rows and the same error sum. */
  double sum = 0;
  for (size_t j = 0; j < n; j++) {
    double pred = strata_mf_predict(&st, W2 + e[j].u * stride, H2 + e[j].i * stride);
    double one = strata_mf_sgd(&st, &e[j], 1, W2, H2);
    assert_close(one, (e[j].r - pred) * (e[j].r - pred), 1e-5, 1e-6, "entry error", (int)j);
    sum += one;
  }
  assert_true(total == sum);
  assert_memory_equal(W, W2, 3 * stride * sizeof(float));
  assert_memory_equal(H, H2, 2 * stride * sizeof(float));
  /* and n = 0 changes nothing */
  assert_true(strata_mf_sgd(&st, e, 0, W, H) == 0.0);
  assert_memory_equal(W, W2, 3 * stride * sizeof(float));
  strata_free(W);
  strata_free(H);
  strata_free(W2);
  strata_free(H2);
}

static void test_padding_stays_zero(void **state) {
  (void)state;
  for (int adagrad = 0; adagrad <= 1; adagrad++) {
    strata_mf_step st = make_step(adagrad, 1, 0.05f);
    size_t stride = (size_t)st.stride;
    enum { NU = 7, NI = 5, NE = 4000 };
    float *W = strata_alloc_aligned(NU * stride * sizeof(float));
    float *H = strata_alloc_aligned(NI * stride * sizeof(float));
    strata_mf_entry *e = strata_malloc(NE * sizeof *e);
    assert_non_null(W);
    assert_non_null(H);
    assert_non_null(e);
    for (uint32_t u = 0; u < NU; u++)
      strata_mf_init_row(W + u * stride, K, st.stride, 0.5, 9, 0, u);
    for (uint32_t i = 0; i < NI; i++)
      strata_mf_init_row(H + i * stride, K, st.stride, 0.5, 9, 1, i);
    strata_rng rng;
    strata_rng_seed(&rng, 17);
    for (int j = 0; j < NE; j++)
      e[j] = (strata_mf_entry){(uint32_t)strata_rng_below(&rng, NU),
                               (uint32_t)strata_rng_below(&rng, NI),
                               (float)(1 + strata_rng_below(&rng, 5))};
    double first = strata_mf_sgd(&st, e, NE, W, H), last = first;
    for (int rep = 0; rep < 20; rep++) last = strata_mf_sgd(&st, e, NE, W, H);
    assert_true(isfinite(last));
    assert_true(last < first); /* it learns */
    for (int u = 0; u < NU; u++)
      for (int i = K; i < st.kpad; i++) assert_true(W[u * stride + (size_t)i] == 0.0f);
    for (int it = 0; it < NI; it++)
      for (int i = K; i < st.kpad; i++) assert_true(H[it * stride + (size_t)i] == 0.0f);
    /* Tail lanes beyond the accumulators stay zero as well. */
    for (int u = 0; u < NU; u++)
      for (int i = st.kpad + 3; i < st.stride; i++) assert_true(W[u * stride + (size_t)i] == 0.0f);
    strata_free(W);
    strata_free(H);
    strata_free(e);
  }
}

static void test_adagrad_step_and_accumulators(void **state) {
  (void)state;
  strata_mf_step st = make_step(1, 1, 0.01f);
  float *w = new_row(&st), *h = new_row(&st), *w0 = new_row(&st), *h0 = new_row(&st);
  strata_rng rng;
  strata_rng_seed(&rng, 23);
  for (int trial = 0; trial < 20; trial++) {
    float gw_acc = (float)(1.0 + 3.0 * strata_rng_uniform(&rng));
    float gh_acc = (float)(1.0 + 3.0 * strata_rng_uniform(&rng));
    float bw_acc = (float)(1.0 + 3.0 * strata_rng_uniform(&rng));
    float bh_acc = (float)(1.0 + 3.0 * strata_rng_uniform(&rng));
    fill_row(&st, w, &rng, 0.2f, gw_acc, bw_acc);
    fill_row(&st, h, &rng, -0.3f, gh_acc, bh_acc);
    float r = (float)(1.0 + 4.0 * strata_rng_uniform(&rng));
    memcpy(w0, w, (size_t)st.stride * sizeof(float));
    memcpy(h0, h, (size_t)st.stride * sizeof(float));
    grads g;
    fd_all(&st, w, h, r, &g);
    double pred = strata_mf_predict(&st, w, h);
    strata_mf_entry e = {0, 0, r};
    double sq = strata_mf_sgd(&st, &e, 1, w, h);
    assert_close(sq, (r - pred) * (r - pred), 1e-5, 1e-6, "squared error", trial);
    double sw = st.lr / sqrt(gw_acc), sh = st.lr / sqrt(gh_acc);
    double mw = 0, mh = 0;
    for (int i = 0; i < st.k; i++) {
      mw += g.w[i] * g.w[i];
      mh += g.h[i] * g.h[i];
      /* the step uses the accumulator as it was before this update */
      assert_close(((double)w[i] - w0[i]) / -sw, g.w[i], 1e-2, 5e-2, "adagrad w", i);
      assert_close(((double)h[i] - h0[i]) / -sh, g.h[i], 1e-2, 5e-2, "adagrad h", i);
    }
    int kp = st.kpad;
    /* accumulators grow by the mean (over k) squared gradient */
    assert_close((double)w[kp + 1] - gw_acc, mw / st.k, 1e-2, 1e-3, "G_w", trial);
    assert_close((double)h[kp + 1] - gh_acc, mh / st.k, 1e-2, 1e-3, "G_h", trial);
    /* biases: their own accumulator, fed the squared bias gradient */
    double gbu = g.w[kp], gbi = g.h[kp];
    assert_close((double)w[kp + 2] - bw_acc, gbu * gbu, 1e-2, 1e-3, "G_bu", trial);
    assert_close((double)h[kp + 2] - bh_acc, gbi * gbi, 1e-2, 1e-3, "G_bi", trial);
    assert_close(((double)w[kp] - w0[kp]) / -(st.lr / sqrt(bw_acc)), gbu, 1e-2, 5e-2, "bu", trial);
    assert_close(((double)h[kp] - h0[kp]) / -(st.lr / sqrt(bh_acc)), gbi, 1e-2, 5e-2, "bi", trial);
    for (int i = st.k; i < kp; i++) assert_true(w[i] == 0.0f && h[i] == 0.0f);
    for (int i = kp + 3; i < st.stride; i++) assert_true(w[i] == 0.0f && h[i] == 0.0f);
  }
  strata_free(w);
  strata_free(h);
  strata_free(w0);
  strata_free(h0);
}

static void test_no_bias_leaves_bias_alone(void **state) {
  (void)state;
  for (int adagrad = 0; adagrad <= 1; adagrad++) {
    strata_mf_step st = make_step(adagrad, 0, 0.05f);
    float *w = new_row(&st), *h = new_row(&st);
    strata_rng rng;
    strata_rng_seed(&rng, 31);
    fill_row(&st, w, &rng, 0.7f, 1, 1);
    fill_row(&st, h, &rng, -0.4f, 1, 1);
    /* the bias lane is ignored by predict and loss, and not updated */
    float p = strata_mf_predict(&st, w, h);
    w[st.kpad] = 100.0f;
    assert_true(strata_mf_predict(&st, w, h) == p);
    strata_mf_entry e = {0, 0, 4.5f};
    for (int rep = 0; rep < 50; rep++) strata_mf_sgd(&st, &e, 1, w, h);
    assert_true(w[st.kpad] == 100.0f);
    assert_true(h[st.kpad] == -0.4f);
    assert_true(w[st.kpad + 2] == 1.0f);
    strata_free(w);
    strata_free(h);
  }
}

static void test_predict_unseen(void **state) {
  (void)state;
  strata_mf_step st = make_step(0, 1, 0.05f);
  float *w = new_row(&st), *h = new_row(&st);
  strata_rng rng;
  strata_rng_seed(&rng, 41);
  fill_row(&st, w, &rng, 0.25f, 1, 1);
  fill_row(&st, h, &rng, -0.5f, 1, 1);
  assert_true(strata_mf_predict(&st, NULL, NULL) == st.mu);
  assert_float_equal(strata_mf_predict(&st, w, NULL), st.mu + 0.25f, 1e-6);
  assert_float_equal(strata_mf_predict(&st, NULL, h), st.mu - 0.5f, 1e-6);
  double dot = 0;
  for (int i = 0; i < K; i++) dot += (double)w[i] * h[i];
  assert_float_equal(strata_mf_predict(&st, w, h), st.mu + 0.25f - 0.5f + (float)dot, 1e-5);
  st.bias = 0;
  assert_true(strata_mf_predict(&st, w, NULL) == st.mu);
  assert_true(strata_mf_predict(&st, NULL, h) == st.mu);
  assert_float_equal(strata_mf_predict(&st, w, h), st.mu + (float)dot, 1e-5);
  strata_free(w);
  strata_free(h);
}

static void test_loss_value(void **state) {
  (void)state;
  strata_mf_step st = make_step(0, 1, 0.05f);
  float *w = new_row(&st), *h = new_row(&st);
  strata_rng rng;
  strata_rng_seed(&rng, 43);
  fill_row(&st, w, &rng, 0.25f, 1, 1);
  fill_row(&st, h, &rng, -0.5f, 1, 1);
  float r = 4.0f;
  double e = r - (double)strata_mf_predict(&st, w, h), nw = 0, nh = 0;
  for (int i = 0; i < K; i++) {
    nw += (double)w[i] * w[i];
    nh += (double)h[i] * h[i];
  }
  double want = 0.5 * e * e + 0.5 * st.lambda * (nw + nh) +
                0.5 * st.lambda_bias * (0.25 * 0.25 + 0.5 * 0.5);
  assert_close(strata_mf_loss(&st, w, h, r), want, 1e-9, 1e-9, "loss", 0);
  strata_free(w);
  strata_free(h);
}

static void test_init_row(void **state) {
  (void)state;
  const int k = K, kpad = strata_mf_kpad(k), stride = kpad + STRATA_MF_TAIL;
  const double scale = 0.8;
  float *a = strata_alloc_aligned((size_t)stride * sizeof(float));
  float *b = strata_alloc_aligned((size_t)stride * sizeof(float));
  assert_non_null(a);
  assert_non_null(b);
  /* deterministic per (seed, side, index) */
  memset(b, 0x7f, (size_t)stride * sizeof(float));
  strata_mf_init_row(a, k, stride, scale, 1234, 0, 77);
  strata_mf_init_row(b, k, stride, scale, 1234, 0, 77);
  assert_memory_equal(a, b, (size_t)stride * sizeof(float));
  strata_mf_init_row(b, k, stride, scale, 1234, 1, 77);
  assert_memory_not_equal(a, b, (size_t)k * sizeof(float));
  strata_mf_init_row(b, k, stride, scale, 1234, 0, 78);
  assert_memory_not_equal(a, b, (size_t)k * sizeof(float));
  strata_mf_init_row(b, k, stride, scale, 1235, 0, 77);
  assert_memory_not_equal(a, b, (size_t)k * sizeof(float));
  /* layout: padding 0, bias 0, accumulators 1, rest of the tail 0 */
  for (int i = k; i < kpad; i++) assert_true(a[i] == 0.0f);
  assert_true(a[kpad] == 0.0f);
  assert_true(a[kpad + 1] == 1.0f);
  assert_true(a[kpad + 2] == 1.0f);
  for (int i = kpad + 3; i < stride; i++) assert_true(a[i] == 0.0f);

  /* factors ~ N(0, scale^2 / k) over many rows */
  double s = 0, s2 = 0;
  long n = 0;
  for (uint64_t idx = 0; idx < 4000; idx++) {
    strata_mf_init_row(b, k, stride, scale, 99, (int)(idx & 1), idx);
    for (int i = 0; i < k; i++) {
      s += b[i];
      s2 += (double)b[i] * b[i];
      n++;
    }
  }
  double mean = s / (double)n, sd = sqrt(s2 / (double)n - mean * mean);
  double want = scale / sqrt((double)k);
  assert_true(fabs(mean) < 0.03 * want);
  assert_true(fabs(sd / want - 1.0) < 0.03);
  strata_free(a);
  strata_free(b);
}

/* A chunk as mf_load lays it out before interleaving: users ascending,
 * random items, some users with one rating, some with many. */
static size_t make_chunk(strata_rng *rng, uint32_t nu, uint32_t ni, strata_mf_entry *e,
                         size_t cap) {
  size_t n = 0;
  for (uint32_t u = 0; u < nu && n < cap; u++) {
    uint64_t c = strata_rng_below(rng, 4) == 0 ? 1 : 1 + strata_rng_below(rng, 12);
    for (uint64_t x = 0; x < c && n < cap; x++)
      e[n++] = (strata_mf_entry){u, (uint32_t)strata_rng_below(rng, ni),
                                 (float)(1 + strata_rng_below(rng, 5))};
  }
  return n;
}

static void test_interleave_is_a_permutation_of_runs(void **state) {
  (void)state;
  enum { CAP = 3000 };
  strata_mf_entry *in = strata_malloc(CAP * sizeof *in), *out = strata_malloc(CAP * sizeof *out);
  assert_non_null(in);
  assert_non_null(out);
  strata_rng rng;
  strata_rng_seed(&rng, g_seed);
  for (int trial = 0; trial < 50; trial++) {
    uint32_t nu = 1 + (uint32_t)strata_rng_below(&rng, trial < 5 ? 3 : 400);
    size_t n = make_chunk(&rng, nu, 50, in, CAP);
    strata_mf_interleave(in, n, out);
    /* A permutation: the same multiset, and each user's ratings keep
     * their order (a user lies wholly in one run). */
    size_t next[400] = {0};
    for (size_t j = 0; j < n; j++) {
      uint32_t u = out[j].u;
      size_t k = next[u];
      while (k < n && in[k].u != u) k++;
      assert_true(k < n);
      assert_true(in[k].i == out[j].i && in[k].r == out[j].r);
      next[u] = k + 1;
    }
    /* Exactly the header's order: four runs cut at the first user boundary
     * at or after each quarter, taken in turn. (A chunk whose user at the
     * quarter runs to its end is one run: a user of 10 ratings among 12.) */
    size_t end[4], lo = 0, runs = 0;
    for (int q = 0; q < 4; q++) {
      size_t x = q == 3 ? n : n * (size_t)(q + 1) / 4;
      if (x < lo) x = lo;
      while (x > lo && x < n && in[x].u == in[x - 1].u) x++;
      end[q] = lo = x;
    }
    for (size_t j = 0, pos[4] = {0, end[0], end[1], end[2]}; j < n;)
      for (int q = 0; q < 4; q++)
        if (pos[q] < end[q]) {
          assert_true(out[j].u == in[pos[q]].u && out[j].i == in[pos[q]].i);
          j++, pos[q]++;
        }
    for (int q = 0; q < 4; q++) runs += end[q] > (q ? end[q - 1] : 0);
    /* With two runs or more, the first neighbours differ in user; with
     * many users, most neighbours do (all but a run's tail). */
    size_t apart = 0;
    for (size_t j = 0; j + 1 < n; j++) apart += out[j].u != out[j + 1].u;
    if (runs >= 2) assert_true(out[0].u != out[1].u);
    if (nu >= 50) assert_true(apart * 10 >= (n - 1) * 8);
    /* n = 0 and n = 1 */
    strata_mf_interleave(in, 0, out);
    strata_mf_interleave(in, 1, out);
    assert_true(out[0].u == in[0].u && out[0].i == in[0].i);
  }
  strata_free(in);
  strata_free(out);
}

/* The kernel compiled for the build's own target (kernel.c); strata_mf_sgd
 * may run a copy compiled for a wider instruction set instead. */
double strata__mf_sgd_base(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                           float *H);

typedef double (*sgd_fn)(const strata_mf_step *, const strata_mf_entry *, size_t, float *,
                         float *);

/* Whether e[0..m) are on pairwise disjoint rows. */
static int disjoint_run(const strata_mf_entry *e, size_t m) {
  for (size_t a = 0; a < m; a++)
    for (size_t b = a + 1; b < m; b++)
      if (e[a].u == e[b].u || e[a].i == e[b].i) return 0;
  return 1;
}

/* The kernel runs up to four neighbours on disjoint rows as one group,
 * and fills a shorter group with empty lanes; that must equal one update
 * after another, bit for bit, under both rules, with and without biases,
 * whatever the rank (whole 16-float vectors, an 8-float half after them,
 * rows that cross cache lines), in every copy of the kernel. */
static void check_groups(sgd_fn sgd, int f) {
  enum { NU = 60, NI = 40, CAP = 600 };
  strata_rng rng;
  strata_rng_seed(&rng, g_seed ^ 0x9e37);
  const int ks[] = {1, 8, 13, 32, 100, 200};
  for (size_t kx = 0; kx < sizeof ks / sizeof ks[0]; kx++)
    for (int rule = 0; rule < 4; rule++) {
      int k = ks[kx], kpad = strata_mf_kpad(k);
      strata_mf_step st = make_step(rule & 1, rule >> 1, 0.03f);
      st.k = k;
      st.kpad = kpad;
      st.stride = kpad + STRATA_MF_TAIL;
      size_t stride = (size_t)st.stride;
      float *W = strata_alloc_aligned(NU * stride * sizeof(float));
      float *H = strata_alloc_aligned(NI * stride * sizeof(float));
      float *W2 = strata_alloc_aligned(NU * stride * sizeof(float));
      float *H2 = strata_alloc_aligned(NI * stride * sizeof(float));
      strata_mf_entry *in = strata_malloc(CAP * sizeof *in), *e = strata_malloc(CAP * sizeof *e);
      assert_true(W && H && W2 && H2 && in && e);
      for (uint32_t u = 0; u < NU; u++) strata_mf_init_row(W + u * stride, k, st.stride, 0.5, 3, 0, u);
      for (uint32_t i = 0; i < NI; i++) strata_mf_init_row(H + i * stride, k, st.stride, 0.5, 3, 1, i);
      memcpy(W2, W, NU * stride * sizeof(float));
      memcpy(H2, H, NI * stride * sizeof(float));
      /* Both full groups and shorter ones are what this tests: a chunk
       * without neighbours that share a row, or with few full groups, is drawn
       * again. */
      size_t n, quads, cut, draws = 0;
      do {
        n = make_chunk(&rng, NU, NI, in, CAP);
        strata_mf_interleave(in, n, e);
        quads = cut = 0;
        for (size_t j = 0; j + 3 < n; j++) quads += disjoint_run(e + j, 4);
        for (size_t j = 0; j + 1 < n; j++) cut += !disjoint_run(e + j, 2);
      } while ((quads * 3 < n || cut == 0) && ++draws < 100);
      assert_true(quads * 3 >= n);
      assert_true(cut > 0);
      for (int rep = 0; rep < 3; rep++) {
        double total = sgd(&st, e, n, W, H), sum = 0;
        for (size_t j = 0; j < n; j++) sum += sgd(&st, &e[j], 1, W2, H2);
        if (total != sum) {
          print_message("kernel %d, k %d rule %d: sse %.17g vs %.17g one at a time\n", f, k,
                        rule, total, sum);
          fail();
        }
      }
      assert_memory_equal(W, W2, NU * stride * sizeof(float));
      assert_memory_equal(H, H2, NI * stride * sizeof(float));
      strata_free(W);
      strata_free(H);
      strata_free(W2);
      strata_free(H2);
      strata_free(in);
      strata_free(e);
    }
}

#if defined(STRATA_MF_DISPATCH)
/* The copies a portable x86-64 build compiles besides its base one. */
double strata__mf_sgd_x86v3(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                            float *H);
double strata__mf_sgd_x86v4(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                            float *H);
#endif

static void test_groups_equal_one_at_a_time(void **state) {
  (void)state;
  check_groups(strata_mf_sgd, 0);
  check_groups(strata__mf_sgd_base, 1);
#if defined(STRATA_MF_DISPATCH)
  /* Each copy this CPU can run, not only the one strata_mf_sgd picks. */
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    check_groups(strata__mf_sgd_x86v3, 2);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    check_groups(strata__mf_sgd_x86v4, 3);
#endif
}

static void test_kpad(void **state) {
  (void)state;
  assert_int_equal(strata_mf_kpad(1), 8);
  assert_int_equal(strata_mf_kpad(8), 8);
  assert_int_equal(strata_mf_kpad(9), 16);
  assert_int_equal(strata_mf_kpad(13), 16);
  assert_int_equal(strata_mf_kpad(100), 104);
}

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  if (env && *env) g_seed = strtoull(env, NULL, 0);
  printf("test_mf_kernel: seed %llu (STRATA_TEST_SEED=X replays one)\n",
         (unsigned long long)g_seed);
  fflush(stdout);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_kpad, setup, teardown),
      cmocka_unit_test_setup_teardown(test_interleave_is_a_permutation_of_runs, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_groups_equal_one_at_a_time, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sgd_gradients_are_nonzero, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sgd_matches_finite_differences, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sgd_sums_errors_sequentially, setup, teardown),
      cmocka_unit_test_setup_teardown(test_padding_stays_zero, setup, teardown),
      cmocka_unit_test_setup_teardown(test_adagrad_step_and_accumulators, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_bias_leaves_bias_alone, setup, teardown),
      cmocka_unit_test_setup_teardown(test_predict_unseen, setup, teardown),
      cmocka_unit_test_setup_teardown(test_loss_value, setup, teardown),
      cmocka_unit_test_setup_teardown(test_init_row, setup, teardown),
  };
  return cmocka_run_group_tests_name("mf_kernel", tests, NULL, NULL);
}
