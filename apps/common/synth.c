#define _GNU_SOURCE
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/ratings.h"
#include "apps/common/spec.h"

/* ---- spec parsing ------------------------------------------------------ */

static const strata__spec_key synth_keys[] = {
    {"users", STRATA__SPEC_U32, offsetof(strata_synth_spec, users)},
    {"items", STRATA__SPEC_U32, offsetof(strata_synth_spec, items)},
    {"ratings", STRATA__SPEC_U64, offsetof(strata_synth_spec, ratings)},
    {"rank", STRATA__SPEC_U32, offsetof(strata_synth_spec, rank)},
    {"noise", STRATA__SPEC_NONNEG, offsetof(strata_synth_spec, noise)},
    {"seed", STRATA__SPEC_SEED, offsetof(strata_synth_spec, seed)},
    {"skew", STRATA__SPEC_NONNEG, offsetof(strata_synth_spec, skew)},
};
#define N_SYNTH_KEYS (sizeof synth_keys / sizeof synth_keys[0])

void strata_synth_defaults(strata_synth_spec *spec) {
  /* Netflix (480k users, 17.7k items, 100M ratings) scaled by 1/5 in each
   * dimension: the same shape at a size a laptop trains in seconds. */
  *spec = (strata_synth_spec){
      .users = 96000,
      .items = 3554,
      .ratings = 4000000,
      .rank = 10,
      .noise = 0.5,
      .seed = 1,
      .skew = 0.5,
  };
}

int strata_synth_parse(const char *text, strata_synth_spec *spec) {
  return strata__spec_parse(text, synth_keys, N_SYNTH_KEYS, spec, sizeof *spec);
}

/* ---- popularity sampler ------------------------------------------------ */

/* Walker/Vose alias table over popularity ranks, with the seeded shuffle
 * folded into the outcomes so a draw is one random number and two loads. */
typedef struct {
  uint32_t n;
  double *prob;  /* keep rank k with this probability ... */
  uint32_t *out; /* ... giving index out[k], else alt[k] */
  uint32_t *alt;
} sampler;

static void sampler_free(sampler *sp) {
  strata_free(sp->prob);
  strata_free(sp->out);
  strata_free(sp->alt);
  memset(sp, 0, sizeof *sp);
}

static int sampler_init(sampler *sp, uint32_t n, double skew, strata_rng *rng) {
  memset(sp, 0, sizeof *sp);
  sp->n = n;
  sp->prob = strata_malloc((size_t)n * sizeof *sp->prob);
  sp->out = strata_malloc((size_t)n * sizeof *sp->out);
  sp->alt = strata_malloc((size_t)n * sizeof *sp->alt);
  uint32_t *work = strata_malloc((size_t)n * sizeof *work);
  if (!sp->prob || !sp->out || !sp->alt || !work) {
    strata_free(work);
    sampler_free(sp);
    return STRATA_ENOMEM;
  }

  for (uint32_t k = 0; k < n; k++) sp->out[k] = k;
  for (uint32_t k = n - 1; k > 0; k--) {
    uint32_t j = (uint32_t)strata_rng_below(rng, (uint64_t)k + 1);
    uint32_t t = sp->out[k];
    sp->out[k] = sp->out[j];
    sp->out[j] = t;
  }

  double total = 0;
  for (uint32_t k = 0; k < n; k++) total += sp->prob[k] = pow((double)k + 1.0, -skew);
  for (uint32_t k = 0; k < n; k++) sp->prob[k] *= (double)n / total;
  uint32_t *alias = sp->alt; /* rank aliases first, mapped to indices below */
  strata_alias_build(sp->prob, n, alias, work);
  for (uint32_t k = 0; k < n; k++) alias[k] = sp->out[alias[k]];
  strata_free(work);
  return 0;
}

static inline uint32_t sampler_draw(const sampler *sp, strata_rng *rng) {
  /* The integer part of u*n picks the column and the fraction is the coin:
   * a 53-bit uniform leaves at least 21 bits for it when n < 2^32. */
  double x = strata_rng_uniform(rng) * sp->n;
  uint32_t k = (uint32_t)x;
  if (k >= sp->n) k = sp->n - 1;
  return x - k < sp->prob[k] ? sp->out[k] : sp->alt[k];
}

/* ---- generation -------------------------------------------------------- */

#define PREFETCH_AHEAD 16

static inline void prefetch_row(const float *row, uint32_t len) {
#if defined(__GNUC__)
  __builtin_prefetch(row);
  __builtin_prefetch(row + len - 1);
#else
  (void)row;
  (void)len;
#endif
}

static float *normal_array(size_t n, double sd, strata_rng *rng) {
  float *a = strata_malloc(n * sizeof *a);
  if (a)
    for (size_t k = 0; k < n; k++) a[k] = (float)(sd * strata_rng_normal(rng));
  return a;
}

int strata_synth_generate(const strata_synth_spec *spec, strata_ratings *rs) {
  int rc = 0;
  float *bu = NULL, *bi = NULL, *p = NULL, *q = NULL;
  sampler us = {0}, is = {0};
  memset(rs, 0, sizeof *rs);

  if (!spec->users || !spec->items || !spec->ratings || !spec->rank || !(spec->noise >= 0) ||
      !isfinite(spec->noise) || !(spec->skew >= 0) || !isfinite(spec->skew))
    return strata_err_set(STRATA_EINVAL,
                          "synth: invalid spec (users=%u items=%u ratings=%llu rank=%u noise=%g "
                          "skew=%g)",
                          spec->users, spec->items, (unsigned long long)spec->ratings, spec->rank,
                          spec->noise, spec->skew);
  const uint32_t rank = spec->rank;
  if (spec->ratings > SIZE_MAX / sizeof *rs->r || (size_t)spec->users > SIZE_MAX / 4 / rank ||
      (size_t)spec->items > SIZE_MAX / 4 / rank)
    return strata_err_set(STRATA_ENOMEM, "synth: spec too large for this machine");

  /* The biases and factors, the two alias samplers (and their work
   * array) and the ratings: refused before any of it is allocated. */
  strata_mem_budget budget;
  strata_mem_budget_init(&budget);
  double rows = (double)spec->users + spec->items;
  if ((rc = strata_mem_check(&budget,
                             rows * (4.0 + 4.0 * rank + 20.0) +
                                 (double)spec->ratings * sizeof *rs->r,
                             "lower users, items, ratings or rank",
                             "--data synth: %u users, %u items and %llu ratings at rank %u need",
                             spec->users, spec->items, (unsigned long long)spec->ratings, rank)))
    return rc;
  strata_rng rng;
  strata_rng_seed(&rng, spec->seed);
  /* The draw order (biases, factors, shuffles, ratings) is part of the
   * output's identity: changing it changes every generated data set. */
  bu = normal_array(spec->users, 0.3, &rng);
  bi = bu ? normal_array(spec->items, 0.3, &rng) : NULL;
  /* Per-coordinate variance 1/sqrt(rank) gives <p, q> unit variance. */
  double fsd = pow((double)rank, -0.25);
  p = bi ? normal_array((size_t)spec->users * rank, fsd, &rng) : NULL;
  q = p ? normal_array((size_t)spec->items * rank, fsd, &rng) : NULL;
  if (!q) goto nomem;
  if (sampler_init(&us, spec->users, spec->skew, &rng) ||
      sampler_init(&is, spec->items, spec->skew, &rng))
    goto nomem;
  rs->r = strata_malloc((size_t)spec->ratings * sizeof *rs->r);
  if (!rs->r) goto nomem;
  rs->cap = (size_t)spec->ratings;

  const size_t n = rs->cap;
  /* Indices first, values second: the value pass then knows the rows it
   * will need a few ratings ahead and can prefetch them, which matters once
   * the factors outgrow the cache. It also keeps the (user, item) sequence
   * of a seed independent of the noise level. */
  for (size_t k = 0; k < n; k++) {
    rs->r[k].user = sampler_draw(&us, &rng);
    rs->r[k].item = sampler_draw(&is, &rng);
  }
  for (size_t k = 0; k < n; k++) {
    if (k + PREFETCH_AHEAD < n) {
      const strata_rating *a = &rs->r[k + PREFETCH_AHEAD];
      prefetch_row(p + (size_t)a->user * rank, rank);
      prefetch_row(q + (size_t)a->item * rank, rank);
      prefetch_row(bu + a->user, 1);
    }
    uint32_t u = rs->r[k].user, i = rs->r[k].item;
    const float *pu = p + (size_t)u * rank, *qi = q + (size_t)i * rank;
    double dot = 0;
    for (uint32_t f = 0; f < rank; f++) dot += (double)pu[f] * qi[f];
    double eps = strata_rng_normal(&rng);
    rs->r[k].value = (float)(3.5 + bu[u] + bi[i] + dot + spec->noise * eps);
  }
  rs->n = rs->cap;
  rs->n_users = spec->users;
  rs->n_items = spec->items;
  goto done;

nomem:
  rc = strata_err_set(STRATA_ENOMEM,
                      "synth: out of memory for %u users, %u items, %llu ratings at rank %u",
                      spec->users, spec->items, (unsigned long long)spec->ratings, rank);
  strata_ratings_close(rs);
done:
  sampler_free(&us);
  sampler_free(&is);
  strata_free(bu);
  strata_free(bi);
  strata_free(p);
  strata_free(q);
  return rc;
}
