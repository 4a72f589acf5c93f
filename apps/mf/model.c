/*
 * Exported MF models: a directory of plain files any tool can read.
 *   meta.json   k, mu, bias, users, items
 *   W.f32 H.f32 row-major float32 factors (users x k, items x k)
 *   bu.f32 bi.f32 float32 biases
 *   users.txt items.txt original id of each dense index, one per line
 */
#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/common/lines.h"
#include "apps/common/model_files.h"
#include "strata/core.h"
#include "strata/json.h"
#include "strata/apps/mf.h"

static int fill_meta(FILE *f, void *ud) {
  const strata_mf_model *m = ud;
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "format", "strata-mf-1");
  strata_json_int(&j, "k", m->k);
  strata_json_number(&j, "mu", m->mu);
  strata_json_bool(&j, "bias", m->bias);
  strata_json_int(&j, "users", m->n_users);
  strata_json_int(&j, "items", m->n_items);
  strata_json_object_end(&j);
  return 0;
}

int strata_mf_model_write(const char *dir, const strata_mf_model *m) {
  size_t k = (size_t)m->k;
  int rc = strata__model_dir(dir);
  if (!rc) rc = strata__model_write_blob(dir, "W.f32", m->W, (size_t)m->n_users * k * sizeof(float));
  if (!rc) rc = strata__model_write_blob(dir, "H.f32", m->H, (size_t)m->n_items * k * sizeof(float));
  if (!rc) rc = strata__model_write_blob(dir, "bu.f32", m->bu, (size_t)m->n_users * sizeof(float));
  if (!rc) rc = strata__model_write_blob(dir, "bi.f32", m->bi, (size_t)m->n_items * sizeof(float));
  if (!rc) rc = strata__model_write_ids(dir, "users.txt", m->user_ids, m->n_users);
  if (!rc) rc = strata__model_write_ids(dir, "items.txt", m->item_ids, m->n_items);
  /* meta.json last: a directory with it is complete. */
  if (!rc) rc = strata_write_atomic_in(dir, "meta.json", fill_meta, (void *)m);
  return rc;
}

void strata_mf_model_close(strata_mf_model *m) {
  strata_free(m->W);
  strata_free(m->H);
  strata_free(m->bu);
  strata_free(m->bi);
  strata_free(m->user_ids);
  strata_free(m->item_ids);
  memset(m, 0, sizeof *m);
}

/* A model with one NaN or infinity scores every pair it touches as NaN, so
 * it is refused at load, naming the value's place: rows and columns count
 * from 1 like lines, and row r is the r-th id of users.txt or items.txt. */
static int check_finite(const char *dir, const char *name, const float *v, uint32_t rows,
                        size_t cols, const char *side, const int64_t *id_of) {
  for (uint32_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) {
      float x = v[(size_t)r * cols + c];
      if (isfinite(x)) continue;
      if (cols > 1)
        return strata_err_set(STRATA_ERANGE,
                              "%s/%s: row %u (%s %lld), column %zu: non-finite value %g", dir,
                              name, r + 1, side, (long long)id_of[r], c + 1, (double)x);
      return strata_err_set(STRATA_ERANGE, "%s/%s: row %u (%s %lld): non-finite value %g", dir,
                            name, r + 1, side, (long long)id_of[r], (double)x);
    }
  return 0;
}

int strata_mf_model_read(const char *dir, strata_mf_model *m) {
  memset(m, 0, sizeof *m);
  char path[4096], text[4096];
  int rc = strata__model_path(path, sizeof path, dir, "meta.json");
  if (!rc) rc = strata__model_read_meta(dir, text, sizeof text);
  if (rc) return rc;
  double k, mu, bias, users, items;
  if (!strstr(text, "strata-mf-1") || strata__meta_number(text, "k", &k) ||
      strata__meta_number(text, "mu", &mu) || strata__meta_number(text, "bias", &bias) ||
      strata__meta_number(text, "users", &users) || strata__meta_number(text, "items", &items) ||
      !strata__whole_in(k, 1, INT_MAX) || !strata__whole_in(users, 0, UINT32_MAX - 1) ||
      !strata__whole_in(items, 0, UINT32_MAX - 1))
    return strata_err_set(STRATA_EPARSE, "%s: not a strata MF model", path);
  if (!isfinite(mu)) return strata_err_set(STRATA_ERANGE, "%s: mu: non-finite value %g", path, mu);
  m->k = (int)k;
  m->mu = (float)mu;
  m->bias = (int)bias;
  m->n_users = (uint32_t)users;
  m->n_items = (uint32_t)items;
  size_t K = (size_t)m->k;
  /* n * K < 2^63; the byte counts below must not wrap either. */
  if ((size_t)m->n_users * K >= SIZE_MAX / 8 || (size_t)m->n_items * K >= SIZE_MAX / 8)
    return strata_err_set(STRATA_EPARSE, "%s: not a strata MF model (k = %d is too large)", path,
                          m->k);
  m->W = strata_malloc(((size_t)m->n_users * K + 1) * sizeof(float));
  m->H = strata_malloc(((size_t)m->n_items * K + 1) * sizeof(float));
  m->bu = strata_malloc(((size_t)m->n_users + 1) * sizeof(float));
  m->bi = strata_malloc(((size_t)m->n_items + 1) * sizeof(float));
  m->user_ids = strata_malloc(((size_t)m->n_users + 1) * sizeof(int64_t));
  m->item_ids = strata_malloc(((size_t)m->n_items + 1) * sizeof(int64_t));
  if (!m->W || !m->H || !m->bu || !m->bi || !m->user_ids || !m->item_ids)
    rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory", dir);
  if (!rc) rc = strata__model_read_ids(dir, "users.txt", m->user_ids, m->n_users);
  if (!rc) rc = strata__model_read_ids(dir, "items.txt", m->item_ids, m->n_items);
  if (!rc) rc = strata__model_read_blob(dir, "W.f32", m->W, (size_t)m->n_users * K * sizeof(float));
  if (!rc) rc = strata__model_read_blob(dir, "H.f32", m->H, (size_t)m->n_items * K * sizeof(float));
  if (!rc) rc = strata__model_read_blob(dir, "bu.f32", m->bu, (size_t)m->n_users * sizeof(float));
  if (!rc) rc = strata__model_read_blob(dir, "bi.f32", m->bi, (size_t)m->n_items * sizeof(float));
  if (!rc) rc = check_finite(dir, "W.f32", m->W, m->n_users, K, "user", m->user_ids);
  if (!rc) rc = check_finite(dir, "H.f32", m->H, m->n_items, K, "item", m->item_ids);
  if (!rc) rc = check_finite(dir, "bu.f32", m->bu, m->n_users, 1, "user", m->user_ids);
  if (!rc) rc = check_finite(dir, "bi.f32", m->bi, m->n_items, 1, "item", m->item_ids);
  if (rc) strata_mf_model_close(m);
  return rc;
}

float strata_mf_model_score(const strata_mf_model *m, uint32_t u, uint32_t i) {
  size_t k = (size_t)m->k;
  float s = m->mu + m->bu[u] + m->bi[i];
  s += cblas_sdot(m->k, m->W + u * k, 1, m->H + i * k, 1);
  return s;
}

int strata_mf_model_top(const strata_mf_model *m, uint32_t u, const uint8_t *exclude, int n,
                        uint32_t *items, float *scores) {
  if (n <= 0 || m->n_items == 0) return 0;
  float *all = strata_malloc((size_t)m->n_items * sizeof *all);
  if (!all) return strata_err_set(STRATA_ENOMEM, "out of memory scoring items");
  /* all = H w_u + bi, one BLAS call for the whole catalogue. */
  memcpy(all, m->bi, (size_t)m->n_items * sizeof *all);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)m->n_items, m->k, 1.0f, m->H, m->k,
              m->W + (size_t)u * m->k, 1, 1.0f, all, 1);
  int got = 0;
  /* Insertion into a sorted list of n: fine for the small n of a top-N. */
  for (uint32_t i = 0; i < m->n_items; i++) {
    if (exclude && exclude[i]) continue;
    float s = all[i] + m->mu + m->bu[u];
    if (got == n && s <= scores[n - 1]) continue;
    int pos = got < n ? got++ : n - 1;
    while (pos > 0 && scores[pos - 1] < s) {
      scores[pos] = scores[pos - 1];
      items[pos] = items[pos - 1];
      pos--;
    }
    scores[pos] = s;
    items[pos] = i;
  }
  strata_free(all);
  return got;
}
