#define _GNU_SOURCE
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/ratings.h"

/* ---- spec parsing ------------------------------------------------------ */

typedef enum { KEY_U32, KEY_U64, KEY_SEED, KEY_DOUBLE } key_kind;

static const struct {
  const char *name;
  key_kind kind;
  size_t off;
} synth_keys[] = {
    {"users", KEY_U32, offsetof(strata_synth_spec, users)},
    {"items", KEY_U32, offsetof(strata_synth_spec, items)},
    {"ratings", KEY_U64, offsetof(strata_synth_spec, ratings)},
    {"rank", KEY_U32, offsetof(strata_synth_spec, rank)},
    {"noise", KEY_DOUBLE, offsetof(strata_synth_spec, noise)},
    {"seed", KEY_SEED, offsetof(strata_synth_spec, seed)},
    {"skew", KEY_DOUBLE, offsetof(strata_synth_spec, skew)},
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

/* Digits only: strtoull would accept a sign, blanks and wrap "-1" around. */
static int scan_u64(const char *p, const char *e, uint64_t *out) {
  if (p == e) return -1;
  uint64_t v = 0;
  for (; p < e; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (d > 9 || v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

static int set_value(strata_synth_spec *spec, size_t k, const char *p, const char *e) {
  void *dst = (char *)spec + synth_keys[k].off;
  uint64_t u;
  switch (synth_keys[k].kind) {
    case KEY_U32:
      if (scan_u64(p, e, &u) || u == 0 || u > UINT32_MAX) return -1;
      *(uint32_t *)dst = (uint32_t)u;
      return 0;
    case KEY_U64:
      if (scan_u64(p, e, &u) || u == 0) return -1;
      *(uint64_t *)dst = u;
      return 0;
    case KEY_SEED:
      if (scan_u64(p, e, &u)) return -1;
      *(uint64_t *)dst = u;
      return 0;
    case KEY_DOUBLE: {
      char tmp[64];
      size_t n = (size_t)(e - p);
      if (n == 0 || n >= sizeof tmp || isspace((unsigned char)p[0])) return -1;
      memcpy(tmp, p, n);
      tmp[n] = '\0';
      char *end;
      double v = strtod(tmp, &end);
      if (end != tmp + n || !isfinite(v) || v < 0) return -1;
      *(double *)dst = v;
      return 0;
    }
  }
  return -1;
}

static const char *key_rule(key_kind kind) {
  switch (kind) {
    case KEY_U32: return "a positive integer below 2^32";
    case KEY_U64: return "a positive integer";
    case KEY_SEED: return "a non-negative integer";
    case KEY_DOUBLE: return "a finite number >= 0";
  }
  return "";
}

int strata_synth_parse(const char *text, strata_synth_spec *spec) {
  static const char prefix[] = "synth";
  if (strncmp(text, prefix, sizeof prefix - 1) != 0 ||
      (text[sizeof prefix - 1] != '\0' && text[sizeof prefix - 1] != ':'))
    return strata_err_set(STRATA_EUSAGE,
                          "--data %s: not a synthetic spec (expected synth:key=value,...)", text);
  /* Parse into a copy so a bad spec leaves the caller's values untouched. */
  strata_synth_spec out = *spec;
  const char *s = text + sizeof prefix - 1;
  if (*s == ':') s++;
  while (*s) {
    const char *end = strchr(s, ',');
    if (!end) end = s + strlen(s);
    const char *eq = memchr(s, '=', (size_t)(end - s));
    int len = (int)(end - s);
    if (len == 0) return strata_err_set(STRATA_EUSAGE, "--data synth: empty field in '%s'", text);
    if (!eq)
      return strata_err_set(STRATA_EUSAGE, "--data synth: expected key=value, got '%.*s'", len, s);
    size_t klen = (size_t)(eq - s);
    size_t k = 0;
    while (k < N_SYNTH_KEYS &&
           !(strlen(synth_keys[k].name) == klen && memcmp(synth_keys[k].name, s, klen) == 0))
      k++;
    if (k == N_SYNTH_KEYS)
      return strata_err_set(STRATA_EUSAGE,
                            "--data synth: unknown key '%.*s' (expected users, items, ratings, "
                            "rank, noise, seed or skew)",
                            (int)klen, s);
    if (set_value(&out, k, eq + 1, end) != 0)
      return strata_err_set(STRATA_EUSAGE, "--data synth: bad value '%.*s' for '%s' (need %s)",
                            (int)(end - eq - 1), eq + 1, synth_keys[k].name,
                            key_rule(synth_keys[k].kind));
    s = *end ? end + 1 : end;
    if (*end && !*s)
      return strata_err_set(STRATA_EUSAGE, "--data synth: empty field in '%s'", text);
  }
  *spec = out;
  return 0;
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
  /* Columns below the mean mass fill the work list from the front, the rest
   * from the back. */
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
  size_t n_small = 0, n_large = 0;
  for (uint32_t k = 0; k < n; k++) {
    sp->prob[k] *= (double)n / total;
    if (sp->prob[k] < 1.0)
      work[n_small++] = k;
    else
      work[n - 1 - n_large++] = k;
  }
  uint32_t *alias = sp->alt; /* rank aliases first, mapped to indices below */
  while (n_small && n_large) {
    uint32_t s = work[--n_small];
    uint32_t l = work[n - n_large];
    alias[s] = l;
    sp->prob[l] -= 1.0 - sp->prob[s];
    if (sp->prob[l] < 1.0) {
      n_large--;
      work[n_small++] = l;
    }
  }
  /* Leftovers are 1 up to rounding. */
  while (n_large) {
    uint32_t l = work[n - n_large--];
    sp->prob[l] = 1.0;
    alias[l] = l;
  }
  while (n_small) {
    uint32_t s = work[--n_small];
    sp->prob[s] = 1.0;
    alias[s] = s;
  }
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
