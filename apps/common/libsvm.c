#include "strata/apps/libsvm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "apps/common/lines.h"

typedef struct {
  strata_lines rd;
  const strata_libsvm_opts *o;
  strata_libsvm *d;
  int64_t *raw; /* a training file's labels as written, until the map is built */
  size_t n_rows, nnz;
  size_t off_cap, col_cap, val_cap;
  size_t label_cap; /* of raw, or of d->label when reading against a map */
  uint32_t max_index;
} reader;

void strata_libsvm_close(strata_libsvm *d) {
  if (!d) return;
  strata_free(d->row_off);
  strata_free(d->col);
  strata_free(d->val);
  strata_free(d->label);
  strata_free(d->class_label);
  memset(d, 0, sizeof *d);
}

void strata_libsvm_opts_for_test(const strata_libsvm *train, strata_libsvm_opts *o) {
  *o = (strata_libsvm_opts){
      .n_features = train->n_features,
      .class_label = train->class_label,
      .n_classes = train->n_classes,
  };
}

/* Index of label in the ascending map, or -1. */
static int64_t find_class(const int64_t *map, uint32_t n, int64_t label) {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (map[mid] < label)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && map[lo] == label ? (int64_t)lo : -1;
}

static int nomem(const reader *r) {
  return strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for %zu examples, %zu features",
                        r->rd.path, r->rd.lineno, r->n_rows, r->nnz);
}

static int add_label(reader *r, int64_t label) {
  const strata_libsvm_opts *o = r->o;
  size_t need = r->n_rows + 1;
  if (!o->class_label) {
    if (STRATA__GROW(r->raw, need, &r->label_cap, SIZE_MAX))
      return nomem(r);
    r->raw[r->n_rows] = label;
    return 0;
  }
  int64_t j = find_class(o->class_label, o->n_classes, label);
  if (j < 0)
    return strata_err_set(STRATA_EPARSE,
                          "%s:%zu: label %lld is not in the label map (%u classes, labels %lld "
                          "to %lld)",
                          r->rd.path, r->rd.lineno, (long long)label, o->n_classes,
                          (long long)o->class_label[0],
                          (long long)o->class_label[o->n_classes - 1]);
  if (STRATA__GROW(r->d->label, need, &r->label_cap, SIZE_MAX))
    return nomem(r);
  r->d->label[r->n_rows] = (uint32_t)j;
  return 0;
}

/* One "idx:val" field [p, e); prev is the line's previous index (0 before
 * the first). */
static int add_feature(reader *r, const char *p, const char *e, uint32_t *prev) {
  const char *path = r->rd.path;
  size_t line = r->rd.lineno;
  char q[STRATA_QUOTE_SIZE];
  const char *colon = memchr(p, ':', (size_t)(e - p));
  if (!colon)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: feature '%s' has no ':' (expected idx:val)",
                          path, line, strata_quote(q, sizeof q, p, (size_t)(e - p)));
  if (colon - p == 3 && memcmp(p, "qid", 3) == 0)
    return strata_err_set(STRATA_EPARSE,
                          "%s:%zu: '%s': qid (SVMlight query ids, for ranking) is not supported",
                          path, line, strata_quote(q, sizeof q, p, (size_t)(e - p)));

  int64_t idx = 0;
  int why = strata__scan_i64(p, colon, &idx);
  if (why != STRATA__NUM_OK || idx <= 0 || idx > (int64_t)UINT32_MAX) {
    strata_quote(q, sizeof q, p, (size_t)(colon - p));
    if (why == STRATA__NUM_BAD)
      return strata_err_set(STRATA_EPARSE, "%s:%zu: feature index '%s' is not an integer", path,
                            line, q);
    if (why == STRATA__NUM_OVERFLOW ? *p != '-' : idx > 0)
      return strata_err_set(STRATA_EPARSE,
                            "%s:%zu: feature index '%s' is above the largest supported, "
                            "4294967295 (2^32 - 1)",
                            path, line, q);
    return strata_err_set(STRATA_EPARSE,
                          "%s:%zu: feature index '%s' is not positive (indices start at 1)", path,
                          line, q);
  }
  if (idx <= *prev)
    return strata_err_set(STRATA_EPARSE,
                          "%s:%zu: feature index %lld follows %u: indices must increase along "
                          "a line",
                          path, line, (long long)idx, *prev);
  if (r->o->n_features && idx > r->o->n_features)
    return strata_err_set(STRATA_EPARSE,
                          "%s:%zu: feature index %lld is above the %u features given", path, line,
                          (long long)idx, r->o->n_features);

  double v;
  const char *vp = colon + 1;
  if (strata__scan_f64(vp, e, &v) != STRATA__NUM_OK)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: value '%s' of feature %lld is not a number",
                          path, line, strata_quote(q, sizeof q, vp, (size_t)(e - vp)),
                          (long long)idx);
  /* Finite as a double can still overflow the stored float. */
  if (!isfinite((float)v))
    return strata_err_set(STRATA_EPARSE,
                          "%s:%zu: value '%s' of feature %lld is not finite as a float", path,
                          line, strata_quote(q, sizeof q, vp, (size_t)(e - vp)), (long long)idx);

  size_t need = r->nnz + 1;
  if (STRATA__GROW(r->d->col, need, &r->col_cap, SIZE_MAX) ||
      STRATA__GROW(r->d->val, need, &r->val_cap, SIZE_MAX))
    return nomem(r);
  r->d->col[r->nnz] = (uint32_t)(idx - 1);
  r->d->val[r->nnz] = (float)v;
  r->nnz++;
  *prev = (uint32_t)idx;
  if (*prev > r->max_index) r->max_index = *prev;
  return 0;
}

static int read_line(reader *r, const char *s, const char *e) {
  /* SVMlight lets a comment follow the features; no field holds a '#'. */
  const char *hash = memchr(s, '#', (size_t)(e - s));
  if (hash) e = hash;
  const char *fp, *fe;
  if (!strata_field_next(&s, e, &fp, &fe)) return 0;
  if (memchr(fp, ':', (size_t)(fe - fp))) {
    char q[STRATA_QUOTE_SIZE];
    return strata_err_set(STRATA_EPARSE, "%s:%zu: label missing: the line starts with '%s'",
                          r->rd.path, r->rd.lineno,
                          strata_quote(q, sizeof q, fp, (size_t)(fe - fp)));
  }
  int64_t label;
  int rc;
  if ((rc = strata_lines_scan_i64(&r->rd, "label", fp, fe, &label)) || (rc = add_label(r, label)))
    return rc;
  uint32_t prev = 0;
  while (strata_field_next(&s, e, &fp, &fe))
    if ((rc = add_feature(r, fp, fe, &prev))) return rc;
  if (STRATA__GROW(r->d->row_off, r->n_rows + 2, &r->off_cap, SIZE_MAX))
    return nomem(r);
  r->d->row_off[++r->n_rows] = r->nnz;
  return 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The distinct labels of a training file, ascending, become its classes;
 * r->raw then gives way to the class of each row. */
static int build_label_map(reader *r) {
  strata_libsvm *d = r->d;
  size_t n = r->n_rows;
  int64_t *map = strata_malloc(n * sizeof *map);
  d->label = strata_malloc(n * sizeof *d->label);
  if (!map || !d->label) {
    strata_free(map);
    return strata_err_set(STRATA_ENOMEM, "%s: out of memory for the labels of %zu examples",
                          r->rd.path, n);
  }
  memcpy(map, r->raw, n * sizeof *map);
  qsort(map, n, sizeof *map, cmp_i64);
  size_t J = 1;
  for (size_t i = 1; i < n; i++)
    if (map[i] != map[J - 1]) map[J++] = map[i];
  if (J > UINT32_MAX) {
    strata_free(map);
    return strata_err_set(STRATA_EPARSE, "%s: %zu distinct labels, more than %u classes",
                          r->rd.path, J, UINT32_MAX);
  }
  /* A failed shrink keeps the bigger block, which is as good. */
  int64_t *small = strata_realloc(map, J * sizeof *map);
  d->class_label = small ? small : map;
  d->n_classes = (uint32_t)J;
  for (size_t i = 0; i < n; i++)
    d->label[i] = (uint32_t)find_class(d->class_label, d->n_classes, r->raw[i]);
  return 0;
}

static int check_opts(const char *path, const strata_libsvm_opts *o) {
  if (!o->class_label) return 0;
  if (o->n_classes == 0)
    return strata_err_set(STRATA_EINVAL, "%s: a label map of 0 classes", path);
  for (uint32_t j = 1; j < o->n_classes; j++)
    if (o->class_label[j] <= o->class_label[j - 1])
      return strata_err_set(STRATA_EINVAL,
                            "%s: the label map is not strictly ascending (%lld then %lld)", path,
                            (long long)o->class_label[j - 1], (long long)o->class_label[j]);
  return 0;
}

int strata_libsvm_read(const char *path, const strata_libsvm_opts *o, strata_libsvm *out) {
  static const strata_libsvm_opts defaults = {0};
  reader r = {.o = o ? o : &defaults, .d = out};
  memset(out, 0, sizeof *out);
  int rc = check_opts(path, r.o);
  if (rc) return rc;
  if ((rc = strata_lines_open(&r.rd, path))) return rc;
  if (STRATA__GROW(out->row_off, 1, &r.off_cap, SIZE_MAX)) {
    rc = nomem(&r);
    goto fail;
  }
  out->row_off[0] = 0;

  const char *line;
  size_t len;
  while ((rc = strata_lines_next(&r.rd, &line, &len)) > 0)
    if ((rc = read_line(&r, line, line + len))) goto fail;
  if (rc < 0) goto fail;
  if (r.n_rows == 0) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no examples", path);
    goto fail;
  }

  if (r.o->class_label) {
    size_t sz = (size_t)r.o->n_classes * sizeof *out->class_label;
    if (!(out->class_label = strata_malloc(sz))) {
      rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory for the label map", path);
      goto fail;
    }
    memcpy(out->class_label, r.o->class_label, sz);
    out->n_classes = r.o->n_classes;
  } else if ((rc = build_label_map(&r))) {
    goto fail;
  }
  /* Growth by doubling can leave up to half an array unused; give a large
   * excess back (a failed shrink just keeps the bigger block). */
  if (r.nnz && r.col_cap - r.nnz > r.col_cap / 8) {
    uint32_t *c = strata_realloc(out->col, r.nnz * sizeof *c);
    float *v = strata_realloc(out->val, r.nnz * sizeof *v);
    if (c) out->col = c;
    if (v) out->val = v;
  }
  out->n_rows = r.n_rows;
  out->nnz = r.nnz;
  out->n_features = r.o->n_features ? r.o->n_features : r.max_index;
  strata_free(r.raw);
  strata_lines_close(&r.rd);
  return 0;

fail:
  strata_free(r.raw);
  strata_lines_close(&r.rd);
  strata_libsvm_close(out);
  return rc;
}
