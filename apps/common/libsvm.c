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

/* A line of plain fields, "label idx:val ...", each index above the last
 * and within the features given, each value a plain decimal (strata__scan_plain_f64),
 * scanned in place from s (it ends in '\n'): 1 when it was added, with *next after its
 * '\n'; 0 when it is anything else (a comment, an exponent, an error), with
 * nothing added, for read_line to decide; or an error. */
static int fast_line(reader *r, const char *s, const char **next) {
  const char *p = s;
  int neg = 0;
  if (*p == '-' || *p == '+') neg = *p++ == '-';
  const char *first = p;
  unsigned d;
  uint64_t label = 0; /* unsigned: a longer run of digits wraps harmlessly, then is refused */
  while ((d = (unsigned)(unsigned char)*p - '0') <= 9) {
    label = label * 10 + d;
    p++;
  }
  if (p == first || p - first > 18) return 0;
  size_t nnz0 = r->nnz;
  uint32_t prev = 0, max0 = r->max_index;
  const uint32_t limit = r->o->n_features;
  for (;;) {
    if (*p != ' ' && *p != '\t') break;
    while (*p == ' ' || *p == '\t') p++;
    if ((d = (unsigned)(unsigned char)*p - '0') > 9) break;
    uint64_t idx = d;
    first = p;
    while ((d = (unsigned)(unsigned char)*++p - '0') <= 9) idx = idx * 10 + d;
    double v;
    if (p - first > 10 || *p != ':' || idx <= prev || idx > UINT32_MAX || (limit && idx > limit) ||
        !(p = strata__scan_plain_f64(p + 1, &v)) ||
        (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r'))
      goto other;
    if (r->nnz == r->col_cap || r->nnz == r->val_cap) {
      size_t need = r->nnz + 1;
      if (STRATA__GROW(r->d->col, need, &r->col_cap, SIZE_MAX) ||
          STRATA__GROW(r->d->val, need, &r->val_cap, SIZE_MAX))
        return nomem(r);
    }
    r->d->col[r->nnz] = (uint32_t)(idx - 1);
    r->d->val[r->nnz] = (float)v; /* at most 15 digits: finite as a float */
    r->nnz++;
    prev = (uint32_t)idx;
  }
  if (*p == '\r') p++;
  if (*p != '\n') goto other;
  int rc;
  if ((rc = add_label(r, neg ? -(int64_t)label : (int64_t)label))) return rc;
  if (prev > r->max_index) r->max_index = prev;
  if (STRATA__GROW(r->d->row_off, r->n_rows + 2, &r->off_cap, SIZE_MAX)) return nomem(r);
  r->d->row_off[++r->n_rows] = r->nnz;
  *next = p + 1;
  return 1;
other:
  r->nnz = nnz0;
  r->max_index = max0;
  return 0;
}

/* The lines of a block [s, end) (whole lines, each ending in '\n'). */
static int read_block(reader *r, const char *s, const char *end) {
  int rc;
  while (s < end) {
    r->rd.lineno++;
    if ((rc = fast_line(r, s, &s)) == 1) continue;
    if (rc < 0) return rc;
    const char *nl = memchr(s, '\n', (size_t)(end - s)), *e = nl;
    if (e > s && e[-1] == '\r') e--;
    if ((rc = read_line(r, s, e))) return rc;
    s = nl + 1;
  }
  return 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* A label's first slot in a table of 2^bits. */
static inline size_t label_slot(int64_t label, unsigned bits) {
  return (size_t)(((uint64_t)label * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

/* The distinct labels of a training file, ascending, become its classes;
 * r->raw then gives way to the class of each row. The distinct labels are
 * gathered in a hash table first (files have few), so only they are
 * sorted, and each row finds its class there. */
static int build_label_map(reader *r) {
  strata_libsvm *d = r->d;
  size_t n = r->n_rows, J = 0;
  unsigned bits = 4;
  int64_t *key = strata_malloc(((size_t)1 << bits) * sizeof *key), *map = NULL;
  uint32_t *cls = strata_calloc((size_t)1 << bits, sizeof *cls); /* class + 1; 0: empty */
  d->label = strata_malloc(n * sizeof *d->label);
  if (!key || !cls || !d->label) goto nomem;
  for (size_t i = 0; i < n; i++) {
    size_t mask = ((size_t)1 << bits) - 1, h = label_slot(r->raw[i], bits);
    while (cls[h] && key[h] != r->raw[i]) h = (h + 1) & mask;
    if (cls[h]) continue;
    key[h] = r->raw[i];
    cls[h] = 1;
    /* A load of at most one half keeps the probes short. */
    if (++J * 2 > ((size_t)1 << bits)) {
      unsigned nb = bits + 1;
      int64_t *k2 = strata_malloc(((size_t)1 << nb) * sizeof *k2);
      uint32_t *c2 = strata_calloc((size_t)1 << nb, sizeof *c2);
      if (!k2 || !c2) {
        strata_free(k2);
        strata_free(c2);
        goto nomem;
      }
      for (size_t s = 0; s < ((size_t)1 << bits); s++) {
        if (!cls[s]) continue;
        size_t h2 = label_slot(key[s], nb);
        while (c2[h2]) h2 = (h2 + 1) & (((size_t)1 << nb) - 1);
        k2[h2] = key[s];
        c2[h2] = 1;
      }
      strata_free(key);
      strata_free(cls);
      key = k2;
      cls = c2;
      bits = nb;
    }
  }
  if (J > UINT32_MAX) {
    strata_free(key);
    strata_free(cls);
    return strata_err_set(STRATA_EPARSE, "%s: %zu distinct labels, more than %u classes",
                          r->rd.path, J, UINT32_MAX);
  }
  if (!(map = strata_malloc(J * sizeof *map))) goto nomem;
  for (size_t s = 0, j = 0; s < ((size_t)1 << bits); s++)
    if (cls[s]) map[j++] = key[s];
  qsort(map, J, sizeof *map, cmp_i64);
  d->class_label = map;
  d->n_classes = (uint32_t)J;
  for (size_t s = 0; s < ((size_t)1 << bits); s++)
    if (cls[s]) cls[s] = (uint32_t)find_class(map, (uint32_t)J, key[s]) + 1;
  for (size_t i = 0; i < n; i++) {
    size_t mask = ((size_t)1 << bits) - 1, h = label_slot(r->raw[i], bits);
    while (key[h] != r->raw[i]) h = (h + 1) & mask;
    d->label[i] = cls[h] - 1;
  }
  strata_free(key);
  strata_free(cls);
  return 0;
nomem:
  strata_free(key);
  strata_free(cls);
  return strata_err_set(STRATA_ENOMEM, "%s: out of memory for the labels of %zu examples",
                        r->rd.path, n);
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

  const char *blk;
  size_t len;
  while ((rc = strata_lines_block(&r.rd, &blk, &len)) > 0)
    if ((rc = read_block(&r, blk, blk + len))) goto fail;
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
