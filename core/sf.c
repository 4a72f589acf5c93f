/*
 * Sets of sufficient factors (core/sf.h): emitted by an app's compute,
 * applied to a matrix, and in --mode sfb sent as they are.
 */
#include "core/sf.h"

#include <string.h>

#include "strata/core.h"

void strata__sf_init(strata_sf_factors *f, uint32_t J, uint32_t D) {
  memset(f, 0, sizeof *f);
  f->J = J;
  f->D = D;
}

int strata__sf_reset(strata_sf_factors *f, int64_t clock, int sender) {
  if (!f->buf) {
    f->cap = 4096;
    if (!(f->buf = strata_malloc(f->cap))) {
      f->cap = 0;
      return strata_err_set(STRATA_ENOMEM, "out of memory for factors");
    }
  }
  strata__sf_head *h = (strata__sf_head *)f->buf;
  *h = (strata__sf_head){.clock = clock, .sender = sender};
  f->len = sizeof *h;
  return 0;
}

void strata__sf_close(strata_sf_factors *f) {
  strata_free(f->buf);
  memset(f, 0, sizeof *f);
}

void strata__sf_swap(strata_sf_factors *a, strata_sf_factors *b) {
  strata_sf_factors t = *a;
  *a = *b;
  *b = t;
}

/* Room for `more` bytes after what the set holds. */
static int reserve(strata_sf_factors *f, size_t more) {
  size_t need = f->len + more;
  if (need > f->cap) {
    size_t cap = f->cap;
    while (cap < need) cap *= 2;
    char *nb = strata_realloc(f->buf, cap);
    if (!nb) return strata_err_set(STRATA_ENOMEM, "out of memory for %zu bytes of factors", need);
    f->buf = nb;
    f->cap = cap;
  }
  return 0;
}

int strata_sf_emit(strata_sf_factors *f, float scale, const float *u, const uint32_t *idx,
                   const float *val, uint32_t nnz) {
  if (!f || !f->buf || !u || (nnz && !val))
    return strata_err_set(STRATA_EINVAL, "strata_sf_emit: %s is NULL",
                          !f || !f->buf ? "the factor set (not an SF app's compute?)"
                          : !u          ? "u"
                                        : "val");
  if (!idx && nnz > f->D)
    return strata_err_set(STRATA_ERANGE, "strata_sf_emit: a dense v of %u entries for a matrix of %u rows",
                          nnz, f->D);
  for (uint32_t k = 0; idx && k < nnz; k++)
    if (idx[k] >= f->D)
      return strata_err_set(STRATA_ERANGE, "strata_sf_emit: v's index %u is beyond the matrix's %u rows",
                            idx[k], f->D);
  size_t bytes = STRATA__SF_FACTOR_HEAD + (size_t)f->J * sizeof(float) +
                 (size_t)nnz * (idx ? sizeof(uint32_t) + sizeof(float) : sizeof(float));
  int rc = reserve(f, bytes);
  if (rc) return rc;
  char *p = f->buf + f->len;
  uint32_t dense = idx == NULL;
  memcpy(p, &scale, 4);
  memcpy(p + 4, &nnz, 4);
  memcpy(p + 8, &dense, 4);
  p += STRATA__SF_FACTOR_HEAD;
  memcpy(p, u, (size_t)f->J * sizeof(float));
  p += (size_t)f->J * sizeof(float);
  if (idx) {
    memcpy(p, idx, (size_t)nnz * sizeof(uint32_t));
    p += (size_t)nnz * sizeof(uint32_t);
  }
  if (nnz) memcpy(p, val, (size_t)nnz * sizeof(float));
  f->len += bytes;
  strata__sf_head *h = (strata__sf_head *)f->buf;
  h->n++;
  h->nnz += nnz;
  return 0;
}

void strata_sf_apply(strata_block *W, const strata_sf_factor *f) {
  uint32_t J = W->row_bytes / sizeof(float);
  float *w = W->buf;
  const float *u = f->u;
  for (uint32_t k = 0; k < f->nnz; k++) {
    float a = f->scale * f->val[k];
    float *row = w + (size_t)(f->idx ? f->idx[k] : k) * J;
    for (uint32_t j = 0; j < J; j++) row[j] += a * u[j];
  }
}

int strata__sf_next(const void *buf, size_t len, uint32_t J, uint32_t D, size_t *pos,
                    strata_sf_factor *out) {
  const char *b = buf;
  if (*pos == 0) *pos = sizeof(strata__sf_head);
  if (*pos == len) return 0;
  if (len - *pos < STRATA__SF_FACTOR_HEAD) return STRATA_ECOMM;
  const char *p = b + *pos;
  uint32_t nnz, dense;
  memcpy(&out->scale, p, 4);
  memcpy(&nnz, p + 4, 4);
  memcpy(&dense, p + 8, 4);
  /* Only a dense v is bounded by D: a sparse one may repeat an index (each
   * below D, which strata__sf_check tests), as strata_sf_emit allows. Its
   * entries take at least 4 bytes each, which bounds nnz by the bytes left
   * before the size below is computed. */
  if (dense > 1 || (dense && nnz > D) || nnz > (len - *pos) / 4) return STRATA_ECOMM;
  size_t bytes = STRATA__SF_FACTOR_HEAD + (size_t)J * sizeof(float) +
                 (size_t)nnz * (dense ? sizeof(float) : sizeof(uint32_t) + sizeof(float));
  if (bytes > len - *pos) return STRATA_ECOMM;
  p += STRATA__SF_FACTOR_HEAD;
  out->nnz = nnz;
  out->u = (const float *)p;
  p += (size_t)J * sizeof(float);
  out->idx = dense ? NULL : (const uint32_t *)p;
  out->val = (const float *)(dense ? p : p + (size_t)nnz * sizeof(uint32_t));
  *pos += bytes;
  return 1;
}

int strata__sf_check(const void *buf, size_t len, uint32_t J, uint32_t D) {
  if (len < sizeof(strata__sf_head))
    return strata_err_set(STRATA_ECOMM, "a factor message of %zu bytes is shorter than its head", len);
  strata__sf_head h;
  memcpy(&h, buf, sizeof h);
  size_t pos = 0;
  strata_sf_factor f;
  uint64_t n = 0, nnz = 0;
  int rc;
  while ((rc = strata__sf_next(buf, len, J, D, &pos, &f)) == 1) {
    for (uint32_t k = 0; f.idx && k < f.nnz; k++)
      if (f.idx[k] >= D) return strata_err_set(STRATA_ECOMM, "worker %d's factors index row %u of %u",
                                               h.sender, f.idx[k], D);
    n++;
    nnz += f.nnz;
  }
  if (rc < 0 || n != h.n || nnz != h.nnz)
    return strata_err_set(STRATA_ECOMM, "worker %d's factor message of clock %lld is malformed",
                          h.sender, (long long)h.clock);
  return 0;
}

void strata__sf_apply_all(const void *buf, size_t len, strata_block *W,
                          void (*apply)(void *, strata_block *, const strata_sf_factor *),
                          void *state) {
  size_t pos = 0;
  strata_sf_factor f;
  uint32_t J = W->row_bytes / sizeof(float);
  while (strata__sf_next(buf, len, J, W->nrows, &pos, &f) == 1) {
    if (apply)
      apply(state, W, &f);
    else
      strata_sf_apply(W, &f);
  }
}

strata_sf_factors *strata_sf_factors_create(uint32_t J, uint32_t D) {
  strata_sf_factors *f = strata_malloc(sizeof *f);
  if (!f) return NULL;
  strata__sf_init(f, J, D);
  if (strata__sf_reset(f, 0, 0)) {
    strata_free(f);
    return NULL;
  }
  return f;
}

void strata_sf_factors_free(strata_sf_factors *f) {
  if (!f) return;
  strata__sf_close(f);
  strata_free(f);
}

void strata_sf_factors_clear(strata_sf_factors *f) { strata__sf_reset(f, 0, 0); }

int strata_sf_factors_next(const strata_sf_factors *f, size_t *pos, strata_sf_factor *out) {
  return strata__sf_next(f->buf, f->len, f->J, f->D, pos, out) == 1;
}

int strata_sf_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                       strata_schedule *sched) {
  (void)cfg;
  if (prob->n_data % setup->workers)
    return strata_err_set(STRATA_ESCHED, "%d data blocks do not make minibatches for %d workers",
                          prob->n_data, setup->workers);
  return strata_schedule_minibatches(sched, setup->workers, prob->n_data / setup->workers);
}
