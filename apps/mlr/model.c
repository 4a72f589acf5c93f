/*
 * Exported MLR models (strata/apps/mlr.h): meta.json, W.f32, labels.txt.
 */
#include <math.h>
#include <string.h>

#include "apps/common/model_files.h"
#include "strata/core.h"
#include "strata/json.h"
#include "strata/apps/mlr.h"

static int fill_meta(FILE *f, void *ud) {
  const strata_mlr_model *m = ud;
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "format", "strata-mlr-1");
  strata_json_int(&j, "classes", m->classes);
  strata_json_int(&j, "features", m->features);
  strata_json_bool(&j, "bias", m->bias);
  strata_json_object_end(&j);
  return 0;
}

static size_t weights(const strata_mlr_model *m) {
  return ((size_t)m->features + (m->bias ? 1 : 0)) * m->classes;
}

int strata_mlr_model_write(const char *dir, const strata_mlr_model *m) {
  int rc = strata__model_dir(dir);
  if (!rc) rc = strata__model_write_blob(dir, "W.f32", m->W, weights(m) * sizeof(float));
  if (!rc) rc = strata__model_write_ids(dir, "labels.txt", m->labels, m->classes);
  /* meta.json last: a directory with it is complete. */
  if (!rc) rc = strata_write_atomic_in(dir, "meta.json", fill_meta, (void *)m);
  return rc;
}

void strata_mlr_model_close(strata_mlr_model *m) {
  strata_free(m->W);
  strata_free(m->labels);
  memset(m, 0, sizeof *m);
}

int strata_mlr_model_read(const char *dir, strata_mlr_model *m) {
  memset(m, 0, sizeof *m);
  char path[4096], text[4096];
  int rc = strata__model_path(path, sizeof path, dir, "meta.json");
  if (!rc) rc = strata__model_read_meta(dir, text, sizeof text);
  if (rc) return rc;
  double classes, features, bias;
  if (!strstr(text, "strata-mlr-1") || strata__meta_number(text, "classes", &classes) ||
      strata__meta_number(text, "features", &features) || strata__meta_number(text, "bias", &bias) ||
      !strata__whole_in(classes, 2, 1 << 30) || !strata__whole_in(features, 0, UINT32_MAX - 1) ||
      !strata__whole_in(bias, 0, 1))
    return strata_err_set(STRATA_EPARSE, "%s: not a strata MLR model", path);
  m->classes = (uint32_t)classes;
  m->features = (uint32_t)features;
  m->bias = (int)bias;
  size_t n = weights(m);
  if (n >= SIZE_MAX / 8) return strata_err_set(STRATA_EPARSE, "%s: not a strata MLR model", path);
  m->W = strata_malloc(n * sizeof(float) + 1);
  m->labels = strata_malloc((size_t)m->classes * sizeof *m->labels);
  if (!m->W || !m->labels) rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory", dir);
  if (!rc) rc = strata__model_read_ids(dir, "labels.txt", m->labels, m->classes);
  for (uint32_t j = 1; !rc && j < m->classes; j++)
    if (m->labels[j] <= m->labels[j - 1])
      rc = strata_err_set(STRATA_EPARSE, "%s/labels.txt: labels are not ascending at line %u", dir,
                          j + 1);
  if (!rc) rc = strata__model_read_blob(dir, "W.f32", m->W, n * sizeof(float));
  for (size_t x = 0; !rc && x < n; x++)
    if (!isfinite(m->W[x]))
      rc = strata_err_set(STRATA_ERANGE, "%s/W.f32: row %zu, class %zu: non-finite value %g", dir,
                          x / m->classes + 1, x % m->classes + 1, (double)m->W[x]);
  if (rc) strata_mlr_model_close(m);
  return rc;
}
