/*
 * Unit tests for core/sf.c, the sets of sufficient factors: what
 * strata_sf_emit writes is what strata__sf_next walks back, the head
 * counts it, emit refuses what it documents refusing, strata_sf_apply is
 * W += scale * v u^T (against a double-precision reference),
 * strata__sf_check accepts every set emit can build and nothing malformed
 * (every truncation, a lying head, a bad dense flag, an index beyond D),
 * and an allocation failure leaves the set as it was.
 *
 * The randomised tests print their seed; STRATA_TEST_SEED=X replays them.
 * Buffers handed to the parser are copied to allocations of exactly their
 * length, so that a read past the end shows under ASan.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "core/sf.h"
#include "strata/core.h"
#include "strata/sf.h"

static uint64_t test_seed(const char *name) {
  const char *env = getenv("STRATA_TEST_SEED");
  uint64_t seed = env && *env ? strtoull(env, NULL, 0)
                              : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
  print_message("%s: STRATA_TEST_SEED=%llu\n", name, (unsigned long long)seed);
  return seed;
}

/* ---- a factor as the test keeps it ----------------------------------- */

typedef struct kept {
  float scale;
  uint32_t nnz;
  int dense;
  float *u;     /* J */
  uint32_t *idx; /* nnz, NULL when dense */
  float *val;   /* nnz */
} kept;

static float frand(strata_rng *r) { return (float)(2 * strata_rng_uniform(r) - 1); }

/* A random factor of a J x D matrix: dense about a third of the time, else
 * sparse with distinct indices; nnz may be 0. */
static kept random_factor(strata_rng *r, uint32_t J, uint32_t D) {
  kept k = {.scale = frand(r), .dense = strata_rng_below(r, 3) == 0};
  k.nnz = (uint32_t)strata_rng_below(r, (uint64_t)D + 1);
  k.u = malloc((size_t)J * sizeof *k.u);
  k.val = malloc(((size_t)k.nnz + 1) * sizeof *k.val);
  assert_non_null(k.u);
  assert_non_null(k.val);
  for (uint32_t j = 0; j < J; j++) k.u[j] = frand(r);
  for (uint32_t i = 0; i < k.nnz; i++) k.val[i] = frand(r);
  if (!k.dense) {
    /* distinct indices: a partial Fisher-Yates over 0..D-1 */
    uint32_t *perm = malloc((size_t)D * sizeof *perm);
    assert_non_null(perm);
    for (uint32_t i = 0; i < D; i++) perm[i] = i;
    k.idx = malloc(((size_t)k.nnz + 1) * sizeof *k.idx);
    assert_non_null(k.idx);
    for (uint32_t i = 0; i < k.nnz; i++) {
      uint32_t j = i + (uint32_t)strata_rng_below(r, D - i);
      uint32_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
      k.idx[i] = perm[i];
    }
    free(perm);
  }
  return k;
}

static void kept_free(kept *k) {
  free(k->u);
  free(k->idx);
  free(k->val);
}

static size_t factor_bytes(uint32_t J, const kept *k) {
  return 12 + 4 * (size_t)J + (k->dense ? 4 : 8) * (size_t)k->nnz;
}

static int emit(strata_sf_factors *f, const kept *k) {
  return strata_sf_emit(f, k->scale, k->u, k->dense ? NULL : k->idx, k->val, k->nnz);
}

/* An exact-length copy of a set's bytes (the caller frees it). */
static void *copy_of(const void *buf, size_t len) {
  void *p = malloc(len ? len : 1);
  assert_non_null(p);
  if (len) memcpy(p, buf, len);
  return p;
}

/* The walk of buf gives exactly the factors ks[0..n), in order. */
static void assert_walk(const void *buf, size_t len, uint32_t J, uint32_t D, const kept *ks,
                        int n) {
  size_t pos = 0;
  strata_sf_factor f;
  for (int i = 0; i < n; i++) {
    assert_int_equal(strata__sf_next(buf, len, J, D, &pos, &f), 1);
    assert_memory_equal(&f.scale, &ks[i].scale, sizeof f.scale);
    assert_int_equal(f.nnz, ks[i].nnz);
    assert_memory_equal(f.u, ks[i].u, (size_t)J * sizeof(float));
    if (ks[i].dense) {
      assert_null(f.idx);
    } else {
      assert_non_null(f.idx);
      if (f.nnz) assert_memory_equal(f.idx, ks[i].idx, (size_t)f.nnz * sizeof(uint32_t));
    }
    if (f.nnz) assert_memory_equal(f.val, ks[i].val, (size_t)f.nnz * sizeof(float));
  }
  assert_int_equal(strata__sf_next(buf, len, J, D, &pos, &f), 0);
  assert_int_equal(pos, len);
}

/* ---- emit, walk, head ------------------------------------------------ */

static void test_emit_then_walk(void **state) {
  (void)state;
  strata_rng r;
  strata_rng_seed(&r, test_seed("test_emit_then_walk"));
  for (int round = 0; round < 40; round++) {
    uint32_t J = 1 + (uint32_t)strata_rng_below(&r, 9), D = 1 + (uint32_t)strata_rng_below(&r, 40);
    int n = (int)strata_rng_below(&r, 30);
    int64_t clock = (int64_t)strata_rng_below(&r, 1000) - 1;
    int sender = (int)strata_rng_below(&r, 64);
    strata_sf_factors fs;
    strata__sf_init(&fs, J, D);
    assert_int_equal(strata__sf_reset(&fs, clock, sender), 0);
    kept *ks = calloc((size_t)n + 1, sizeof *ks);
    assert_non_null(ks);
    size_t len = sizeof(strata__sf_head);
    uint64_t nnz = 0;
    for (int i = 0; i < n; i++) {
      ks[i] = random_factor(&r, J, D);
      assert_int_equal(emit(&fs, &ks[i]), 0);
      len += factor_bytes(J, &ks[i]);
      nnz += ks[i].nnz;
    }
    const strata__sf_head *h = strata__sf_head_of(&fs);
    assert_int_equal(h->clock, clock);
    assert_int_equal(h->sender, sender);
    assert_int_equal(h->n, (uint32_t)n);
    assert_int_equal(h->nnz, nnz);
    assert_int_equal(fs.len, len);
    assert_true(fs.cap >= fs.len);
    void *copy = copy_of(fs.buf, fs.len);
    assert_walk(copy, len, J, D, ks, n);
    assert_int_equal(strata__sf_check(copy, len, J, D), 0);
    free(copy);
    /* A reset empties the set for the next clock and keeps its memory. */
    assert_int_equal(strata__sf_reset(&fs, clock + 1, sender), 0);
    assert_int_equal(fs.len, sizeof(strata__sf_head));
    h = strata__sf_head_of(&fs);
    assert_int_equal(h->n, 0);
    assert_int_equal(h->nnz, 0);
    assert_int_equal(h->clock, clock + 1);
    assert_walk(fs.buf, fs.len, J, D, NULL, 0);
    assert_int_equal(strata__sf_check(fs.buf, fs.len, J, D), 0);
    for (int i = 0; i < n; i++) kept_free(&ks[i]);
    free(ks);
    strata__sf_close(&fs);
    assert_null(fs.buf);
    assert_int_equal(strata_alloc_live(), live0);
  }
}

/* An empty v (nnz 0) may come without val; a sparse v's indices may repeat
 * (each still below D), so its nnz may exceed D: the set emit builds must
 * walk, check and apply like any other. */
static void test_emit_edge_shapes(void **state) {
  (void)state;
  const uint32_t J = 3, D = 2;
  strata_sf_factors fs;
  strata__sf_init(&fs, J, D);
  assert_int_equal(strata__sf_reset(&fs, 7, 1), 0);
  float u[3] = {1, 2, 4};
  assert_int_equal(strata_sf_emit(&fs, 2.0f, u, NULL, NULL, 0), 0);
  uint32_t none = 0;
  assert_int_equal(strata_sf_emit(&fs, 2.0f, u, &none, NULL, 0), 0);
  uint32_t rep[5] = {0, 1, 0, 0, 1};
  float val[5] = {1, 10, 100, 1000, 10000};
  assert_int_equal(strata_sf_emit(&fs, 1.0f, u, rep, val, 5), 0);
  float dval[2] = {3, 5};
  assert_int_equal(strata_sf_emit(&fs, 1.0f, u, NULL, dval, D), 0);
  const strata__sf_head *h = strata__sf_head_of(&fs);
  assert_int_equal(h->n, 4);
  assert_int_equal(h->nnz, 7);

  void *copy = copy_of(fs.buf, fs.len);
  assert_int_equal(strata__sf_check(copy, fs.len, J, D), 0);
  size_t pos = 0;
  strata_sf_factor f;
  assert_int_equal(strata__sf_next(copy, fs.len, J, D, &pos, &f), 1);
  assert_int_equal(f.nnz, 0);
  assert_null(f.idx);
  assert_int_equal(strata__sf_next(copy, fs.len, J, D, &pos, &f), 1);
  assert_int_equal(f.nnz, 0);
  assert_non_null(f.idx);
  assert_int_equal(strata__sf_next(copy, fs.len, J, D, &pos, &f), 1);
  assert_int_equal(f.nnz, 5);
  assert_memory_equal(f.idx, rep, sizeof rep);
  assert_int_equal(strata__sf_next(copy, fs.len, J, D, &pos, &f), 1);
  assert_int_equal(f.nnz, 2);
  assert_null(f.idx);
  assert_int_equal(strata__sf_next(copy, fs.len, J, D, &pos, &f), 0);

  /* Applied: row 0 gets (1 + 100 + 1000 + 3) u, row 1 (10 + 10000 + 5) u;
   * every value is exact in float. */
  float w[6] = {0};
  strata_block W = {.buf = w, .len = sizeof w, .nrows = D, .row_bytes = J * sizeof(float)};
  strata__sf_apply_all(copy, fs.len, &W, NULL, NULL);
  for (uint32_t j = 0; j < J; j++) {
    assert_true(w[j] == 1104.0f * u[j]);
    assert_true(w[J + j] == 10015.0f * u[j]);
  }
  free(copy);
  strata__sf_close(&fs);
}

static void assert_unchanged(const strata_sf_factors *fs, size_t len, uint32_t n, uint64_t nnz) {
  assert_int_equal(fs->len, len);
  assert_int_equal(strata__sf_head_of(fs)->n, n);
  assert_int_equal(strata__sf_head_of(fs)->nnz, nnz);
}

static void test_emit_rejects(void **state) {
  (void)state;
  const uint32_t J = 4, D = 5;
  float u[4] = {1, 2, 3, 4}, val[6] = {1, 1, 1, 1, 1, 1};
  uint32_t idx[3] = {0, 4, 1};
  strata_sf_factors fs;
  strata__sf_init(&fs, J, D);
  /* No buffer yet: not a set compute was given. */
  strata_err_clear();
  assert_int_equal(strata_sf_emit(&fs, 1, u, idx, val, 3), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "factor set"));
  assert_int_equal(strata_sf_emit(NULL, 1, u, idx, val, 3), STRATA_EINVAL);
  assert_int_equal(strata__sf_reset(&fs, 0, 0), 0);
  assert_int_equal(strata_sf_emit(&fs, 1, u, idx, val, 3), 0);
  size_t len = fs.len;

  strata_err_clear();
  assert_int_equal(strata_sf_emit(&fs, 1, NULL, idx, val, 3), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "u is NULL"));
  assert_unchanged(&fs, len, 1, 3);
  strata_err_clear();
  assert_int_equal(strata_sf_emit(&fs, 1, u, idx, NULL, 3), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "val is NULL"));
  assert_int_equal(strata_sf_emit(&fs, 1, u, NULL, NULL, 2), STRATA_EINVAL);
  assert_unchanged(&fs, len, 1, 3);

  /* An index not below D, wherever it stands. */
  for (int at = 0; at < 3; at++) {
    uint32_t bad[3] = {0, 1, 2};
    bad[at] = D + (uint32_t)at * 1000;
    strata_err_clear();
    assert_int_equal(strata_sf_emit(&fs, 1, u, bad, val, 3), STRATA_ERANGE);
    char want[32];
    snprintf(want, sizeof want, "%u", bad[at]);
    assert_non_null(strstr(strata_err_msg(), want));
    assert_unchanged(&fs, len, 1, 3);
  }
  uint32_t edge = D - 1, over = D, huge = UINT32_MAX;
  assert_int_equal(strata_sf_emit(&fs, 1, u, &over, val, 1), STRATA_ERANGE);
  assert_int_equal(strata_sf_emit(&fs, 1, u, &huge, val, 1), STRATA_ERANGE);
  assert_unchanged(&fs, len, 1, 3);
  /* A dense v longer than D. */
  strata_err_clear();
  assert_int_equal(strata_sf_emit(&fs, 1, u, NULL, val, D + 1), STRATA_ERANGE);
  assert_non_null(strstr(strata_err_msg(), "dense"));
  assert_unchanged(&fs, len, 1, 3);
  /* The edges are accepted. */
  assert_int_equal(strata_sf_emit(&fs, 1, u, &edge, val, 1), 0);
  assert_int_equal(strata_sf_emit(&fs, 1, u, NULL, val, D), 0);
  assert_unchanged(&fs, len + factor_bytes(J, &(kept){.nnz = 1}) +
                            factor_bytes(J, &(kept){.nnz = D, .dense = 1}),
                   3, 3 + 1 + D);
  assert_int_equal(strata__sf_check(fs.buf, fs.len, J, D), 0);
  strata__sf_close(&fs);
}

/* ---- apply ------------------------------------------------------------ */

/* W += scale * v u^T in double: row idx[k] (k when dense) += scale val[k] u. */
static void reference_apply(double *W, uint32_t J, const kept *k) {
  for (uint32_t i = 0; i < k->nnz; i++) {
    uint32_t row = k->dense ? i : k->idx[i];
    for (uint32_t j = 0; j < J; j++)
      W[(size_t)row * J + j] += (double)k->scale * k->val[i] * k->u[j];
  }
}

typedef struct apply_log {
  strata_block *W;
  int calls;
  const kept *ks;
  uint32_t J;
} apply_log;

/* An app's apply: checks it is handed the set's factors in order, then
 * applies them as the engine would. */
static void logging_apply(void *state, strata_block *W, const strata_sf_factor *f) {
  apply_log *l = state;
  assert_ptr_equal(W, l->W);
  const kept *k = &l->ks[l->calls++];
  assert_int_equal(f->nnz, k->nnz);
  assert_memory_equal(f->u, k->u, (size_t)l->J * sizeof(float));
  assert_true((f->idx == NULL) == k->dense);
  strata_sf_apply(W, f);
}

static void test_apply_matches_reference(void **state) {
  (void)state;
  strata_rng r;
  strata_rng_seed(&r, test_seed("test_apply_matches_reference"));
  for (int round = 0; round < 30; round++) {
    uint32_t J = 1 + (uint32_t)strata_rng_below(&r, 12), D = 1 + (uint32_t)strata_rng_below(&r, 30);
    int n = 1 + (int)strata_rng_below(&r, 20);
    size_t cells = (size_t)J * D;
    float *w = malloc(cells * sizeof *w), *w2 = malloc(cells * sizeof *w2);
    double *ref = malloc(cells * sizeof *ref);
    assert_non_null(w);
    assert_non_null(w2);
    assert_non_null(ref);
    for (size_t i = 0; i < cells; i++) ref[i] = w[i] = w2[i] = frand(&r);
    strata_block W = {.buf = w, .len = cells * 4, .nrows = D, .row_bytes = J * 4};
    strata_block W2 = {.buf = w2, .len = cells * 4, .nrows = D, .row_bytes = J * 4};
    strata_sf_factors fs;
    strata__sf_init(&fs, J, D);
    assert_int_equal(strata__sf_reset(&fs, round, 0), 0);
    kept *ks = calloc((size_t)n, sizeof *ks);
    assert_non_null(ks);
    double bound = 0; /* how far float rounding can take W from ref */
    for (int i = 0; i < n; i++) {
      ks[i] = random_factor(&r, J, D);
      assert_int_equal(emit(&fs, &ks[i]), 0);
      strata_sf_factor f = {ks[i].scale, ks[i].nnz, ks[i].u, ks[i].dense ? NULL : ks[i].idx,
                            ks[i].val};
      strata_sf_apply(&W, &f);
      reference_apply(ref, J, &ks[i]);
      bound += 4 * (double)ks[i].nnz;
    }
    /* |scale|, |val|, |u| <= 1: each product and sum rounds by a few ulps
     * of a value below n + 1. */
    double tol = (bound + 4) * (n + 1) * 0x1p-24;
    for (size_t i = 0; i < cells; i++) assert_true(fabs((double)w[i] - ref[i]) <= tol);
    /* The set applied as a whole, through the engine's apply or an app's,
     * does the same float operations in the same order. */
    strata__sf_apply_all(fs.buf, fs.len, &W2, NULL, NULL);
    assert_memory_equal(w, w2, cells * sizeof *w);
    for (size_t i = 0; i < cells; i++) w2[i] = (float)(ref[i] = 0);
    apply_log lg = {.W = &W2, .ks = ks, .J = J};
    strata__sf_apply_all(fs.buf, fs.len, &W2, logging_apply, &lg);
    assert_int_equal(lg.calls, n);
    for (int i = 0; i < n; i++) reference_apply(ref, J, &ks[i]);
    for (size_t i = 0; i < cells; i++) assert_true(fabs((double)w2[i] - ref[i]) <= tol);
    for (int i = 0; i < n; i++) kept_free(&ks[i]);
    free(ks);
    free(w);
    free(w2);
    free(ref);
    strata__sf_close(&fs);
  }
}

/* Dense v touches rows 0..nnz-1 and no other; with exact values the sums
 * are exact. */
static void test_apply_dense_rows(void **state) {
  (void)state;
  const uint32_t J = 2, D = 4;
  float w[8] = {0}, u[2] = {1, -2}, val[3] = {1, 2, 4};
  strata_block W = {.buf = w, .len = sizeof w, .nrows = D, .row_bytes = J * 4};
  strata_sf_factor f = {.scale = 0.5f, .nnz = 3, .u = u, .idx = NULL, .val = val};
  strata_sf_apply(&W, &f);
  const float want[8] = {0.5f, -1, 1, -2, 2, -4, 0, 0};
  assert_memory_equal(w, want, sizeof w);
  uint32_t idx[2] = {3, 0};
  f = (strata_sf_factor){.scale = 2, .nnz = 2, .u = u, .idx = idx, .val = val};
  strata_sf_apply(&W, &f);
  const float want2[8] = {4.5f, -9, 1, -2, 2, -4, 2, -4};
  assert_memory_equal(w, want2, sizeof w);
}

/* ---- check ------------------------------------------------------------ */

/* A set of n random factors (some dense, some with nnz 0) in a fresh
 * exact-length buffer; *len its length. */
static void *random_set(strata_rng *r, uint32_t J, uint32_t D, int n, size_t *len) {
  strata_sf_factors fs;
  strata__sf_init(&fs, J, D);
  assert_int_equal(strata__sf_reset(&fs, 3, 2), 0);
  for (int i = 0; i < n; i++) {
    kept k = random_factor(r, J, D);
    assert_int_equal(emit(&fs, &k), 0);
    kept_free(&k);
  }
  void *b = copy_of(fs.buf, fs.len);
  *len = fs.len;
  strata__sf_close(&fs);
  return b;
}

static void expect_malformed(const void *buf, size_t len, uint32_t J, uint32_t D) {
  void *c = copy_of(buf, len);
  strata_err_clear();
  assert_int_equal(strata__sf_check(c, len, J, D), STRATA_ECOMM);
  assert_true(strata_err_msg()[0] != '\0');
  free(c);
}

static void test_check_truncations(void **state) {
  (void)state;
  strata_rng r;
  strata_rng_seed(&r, test_seed("test_check_truncations"));
  for (int round = 0; round < 12; round++) {
    uint32_t J = 1 + (uint32_t)strata_rng_below(&r, 5), D = 1 + (uint32_t)strata_rng_below(&r, 10);
    size_t len;
    void *set = random_set(&r, J, D, 1 + (int)strata_rng_below(&r, 5), &len);
    void *c = copy_of(set, len);
    assert_int_equal(strata__sf_check(c, len, J, D), 0);
    free(c);
    for (size_t cut = 0; cut < len; cut++) expect_malformed(set, cut, J, D);
    /* Trailing bytes after the last factor are not a factor. */
    char *longer = malloc(len + 16);
    assert_non_null(longer);
    memcpy(longer, set, len);
    memset(longer + len, 0, 16);
    for (size_t extra = 1; extra <= 16; extra++) expect_malformed(longer, len + extra, J, D);
    free(longer);
    free(set);
  }
  /* The head alone is an empty set. */
  strata__sf_head h = {.clock = 1, .sender = 0};
  assert_int_equal(strata__sf_check(&h, sizeof h, 3, 3), 0);
}

/* Offsets into a one-factor set: head, then scale, nnz, dense, u, ... */
enum { OFF_N = 12, OFF_NNZ = 16, F0 = 24, F_NNZ = F0 + 4, F_DENSE = F0 + 8, F_U = F0 + 12 };

static void put32(void *buf, size_t off, uint32_t v) { memcpy((char *)buf + off, &v, 4); }

static void test_check_rejects_lies(void **state) {
  (void)state;
  const uint32_t J = 2, D = 6;
  float u[2] = {1, 2}, val[3] = {1, 2, 3};
  uint32_t idx[3] = {5, 0, 2};
  strata_sf_factors fs;
  strata__sf_init(&fs, J, D);
  assert_int_equal(strata__sf_reset(&fs, 9, 4), 0);
  assert_int_equal(strata_sf_emit(&fs, 1, u, idx, val, 3), 0);
  size_t len = fs.len;
  char *b = copy_of(fs.buf, len);
  strata__sf_close(&fs);
  assert_int_equal(strata__sf_check(b, len, J, D), 0);
  strata__sf_head h;
  memcpy(&h, b, sizeof h);

  /* The head's counts lie. */
  for (int d = -1; d <= 1; d += 2) {
    put32(b, OFF_N, h.n + (uint32_t)d);
    expect_malformed(b, len, J, D);
    put32(b, OFF_N, h.n);
    uint64_t nnz = h.nnz + (uint64_t)(int64_t)d;
    memcpy(b + OFF_NNZ, &nnz, 8);
    expect_malformed(b, len, J, D);
    memcpy(b + OFF_NNZ, &h.nnz, 8);
  }
  /* The error names the sender. */
  put32(b, OFF_N, 7);
  strata_err_clear();
  assert_int_equal(strata__sf_check(b, len, J, D), STRATA_ECOMM);
  assert_non_null(strstr(strata_err_msg(), "worker 4"));
  put32(b, OFF_N, h.n);

  /* A dense flag other than 0 or 1. */
  for (uint32_t flag = 2; flag < 5; flag++) {
    put32(b, F_DENSE, flag);
    expect_malformed(b, len, J, D);
  }
  put32(b, F_DENSE, UINT32_MAX);
  expect_malformed(b, len, J, D);
  put32(b, F_DENSE, 0);
  /* An index not below D, each position in turn. */
  size_t at_idx = F_U + 4 * J;
  for (int k = 0; k < 3; k++) {
    put32(b, at_idx + 4 * (size_t)k, D);
    strata_err_clear();
    assert_int_equal(strata__sf_check(b, len, J, D), STRATA_ECOMM);
    assert_non_null(strstr(strata_err_msg(), "worker 4"));
    put32(b, at_idx + 4 * (size_t)k, UINT32_MAX);
    expect_malformed(b, len, J, D);
    put32(b, at_idx + 4 * (size_t)k, idx[k]);
  }
  /* The factor's nnz lies (the bytes no longer add up). */
  for (uint32_t nnz = 0; nnz < 8; nnz++) {
    if (nnz == 3) continue;
    put32(b, F_NNZ, nnz);
    expect_malformed(b, len, J, D);
  }
  put32(b, F_NNZ, UINT32_MAX);
  expect_malformed(b, len, J, D);
  put32(b, F_NNZ, 3);
  /* Read as the other shape: a dense v of 3 takes 4 bytes an entry, not 8. */
  put32(b, F_DENSE, 1);
  expect_malformed(b, len, J, D);
  put32(b, F_DENSE, 0);
  /* Another matrix's shape. */
  expect_malformed(b, len, J + 1, D);
  expect_malformed(b, len, J, 5);
  assert_int_equal(strata__sf_check(b, len, J, D), 0);
  free(b);

  /* A dense v longer than D. */
  strata__sf_init(&fs, J, D);
  assert_int_equal(strata__sf_reset(&fs, 0, 0), 0);
  float dv[6] = {1, 2, 3, 4, 5, 6};
  assert_int_equal(strata_sf_emit(&fs, 1, u, NULL, dv, 6), 0);
  assert_int_equal(strata__sf_check(fs.buf, fs.len, J, D), 0);
  expect_malformed(fs.buf, fs.len, J, 5);
  strata__sf_close(&fs);
}

/* ---- swap, allocation failure ----------------------------------------- */

static void test_swap(void **state) {
  (void)state;
  float u[3] = {1, 2, 3}, val[1] = {1};
  uint32_t idx[1] = {1};
  strata_sf_factors a, b;
  strata__sf_init(&a, 3, 4);
  strata__sf_init(&b, 1, 9);
  assert_int_equal(strata__sf_reset(&a, 5, 1), 0);
  assert_int_equal(strata_sf_emit(&a, 1, u, idx, val, 1), 0);
  assert_int_equal(strata_sf_emit(&a, 2, u, NULL, val, 1), 0);
  const char *abuf = a.buf;
  size_t alen = a.len;
  strata__sf_swap(&a, &b);
  /* b has a's set and shape; a is the never-used set b was. */
  assert_ptr_equal(b.buf, abuf);
  assert_int_equal(b.len, alen);
  assert_int_equal(b.J, 3);
  assert_int_equal(b.D, 4);
  assert_int_equal(strata__sf_head_of(&b)->n, 2);
  assert_null(a.buf);
  assert_int_equal(a.J, 1);
  assert_int_equal(a.D, 9);
  assert_int_equal(a.len, 0);
  /* Both stay usable: the empty one allocates on its first reset. */
  assert_int_equal(strata__sf_reset(&a, 0, 0), 0);
  assert_int_equal(strata_sf_emit(&a, 1, u, NULL, val, 1), 0);
  assert_int_equal(strata_sf_emit(&b, 1, u, idx, val, 1), 0);
  assert_int_equal(strata__sf_head_of(&b)->n, 3);
  assert_int_equal(strata__sf_check(b.buf, b.len, 3, 4), 0);
  assert_int_equal(strata__sf_check(a.buf, a.len, 1, 9), 0);
  strata__sf_swap(&a, &b);
  assert_int_equal(strata__sf_head_of(&a)->n, 3);
  assert_int_equal(strata__sf_head_of(&b)->n, 1);
  strata__sf_close(&a);
  strata__sf_close(&b);
  strata__sf_close(&a); /* twice is fine */
}

static void test_emit_oom_keeps_set(void **state) {
  (void)state;
  const uint32_t J = 64, D = 8;
  float u[64], val[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (int j = 0; j < 64; j++) u[j] = (float)j;
  strata_sf_factors fs;
  strata__sf_init(&fs, J, D);
  /* The first reset's allocation fails: no buffer, and emit still refuses. */
  strata_alloc_fail_after(1);
  assert_int_equal(strata__sf_reset(&fs, 0, 0), STRATA_ENOMEM);
  assert_null(fs.buf);
  assert_int_equal(strata_sf_emit(&fs, 1, u, NULL, val, 1), STRATA_EINVAL);
  assert_int_equal(strata__sf_reset(&fs, 0, 0), 0);
  /* Fill until the next factor needs more room, then fail that growth. */
  size_t per = 12 + 4 * (size_t)J + 4 * D;
  int n = 0;
  while (fs.len + per <= fs.cap) {
    assert_int_equal(strata_sf_emit(&fs, 1, u, NULL, val, D), 0);
    n++;
  }
  size_t len = fs.len, cap = fs.cap;
  char *before = copy_of(fs.buf, fs.len);
  strata_alloc_fail_after(1);
  strata_err_clear();
  assert_int_equal(strata_sf_emit(&fs, 1, u, NULL, val, D), STRATA_ENOMEM);
  assert_true(strata_err_msg()[0] != '\0');
  strata_alloc_fail_after(0);
  assert_int_equal(fs.len, len);
  assert_int_equal(fs.cap, cap);
  assert_memory_equal(fs.buf, before, len);
  assert_int_equal(strata__sf_check(fs.buf, fs.len, J, D), 0);
  free(before);
  /* The set goes on growing after the failure. */
  for (int i = 0; i < 3; i++) assert_int_equal(strata_sf_emit(&fs, 1, u, NULL, val, D), 0);
  assert_int_equal(strata__sf_head_of(&fs)->n, (uint32_t)n + 3);
  assert_int_equal(strata__sf_check(fs.buf, fs.len, J, D), 0);
  strata__sf_close(&fs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_emit_then_walk, setup, teardown),
      cmocka_unit_test_setup_teardown(test_emit_edge_shapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_emit_rejects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_apply_matches_reference, setup, teardown),
      cmocka_unit_test_setup_teardown(test_apply_dense_rows, setup, teardown),
      cmocka_unit_test_setup_teardown(test_check_truncations, setup, teardown),
      cmocka_unit_test_setup_teardown(test_check_rejects_lies, setup, teardown),
      cmocka_unit_test_setup_teardown(test_swap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_emit_oom_keeps_set, setup, teardown),
  };
  return cmocka_run_group_tests_name("sf", tests, NULL, NULL);
}
