/*
 * Inputs of strata-lasso (lasso.h). The readers collect (row, column,
 * value) triplets in file order and sort them into columns once, so the
 * rows of every column come out increasing without a second pass over the
 * file. They read through strata/apps/lines.h (plain or gzip; a cut gzip
 * stream is an error), and check every size a line brings against the
 * memory available before allocating for it. strata/apps/libsvm.h cannot
 * serve the svmlight input: it reads classification labels (integers
 * mapped to classes) and float values, while a regression file has
 * real-valued targets ("151.5").
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lasso.h"
#include "strata/apps/lines.h"
#include "strata/core.h"

typedef struct triplets {
  uint32_t *row, *col;
  double *val;
  size_t n, cap;
  double *y;
  size_t ny, ycap;
  uint32_t p; /* columns seen: largest index + 1 */
} triplets;

static void triplets_close(triplets *t) {
  strata_free(t->row);
  strata_free(t->col);
  strata_free(t->val);
  strata_free(t->y);
  memset(t, 0, sizeof *t);
}

/* The readers' out-of-memory message, naming the line. */
static int nomem(const strata_lines *rd, const triplets *t) {
  return strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for %zu examples, %zu stored values",
                        rd->path, rd->lineno, t->ny + 1, t->n + 1);
}

static int triplets_add(const strata_lines *rd, triplets *t, uint32_t r, uint32_t c, double v) {
  if (t->n == t->cap) {
    size_t cap = t->cap;
    uint32_t *a = strata_grow(t->row, t->n + 1, &cap, SIZE_MAX / 8, sizeof *a);
    if (!a)
      return nomem(rd, t);
    t->row = a;
    cap = t->cap;
    uint32_t *b = strata_grow(t->col, t->n + 1, &cap, SIZE_MAX / 8, sizeof *b);
    if (!b)
      return nomem(rd, t);
    t->col = b;
    cap = t->cap;
    double *v2 = strata_grow(t->val, t->n + 1, &cap, SIZE_MAX / 8, sizeof *v2);
    if (!v2)
      return nomem(rd, t);
    t->val = v2;
    t->cap = cap;
  }
  t->row[t->n] = r;
  t->col[t->n] = c;
  t->val[t->n++] = v;
  if (c + 1 > t->p)
    t->p = c + 1;
  return 0;
}

static int triplets_target(const strata_lines *rd, triplets *t, double y) {
  if (t->ny == UINT32_MAX)
    return strata_err_set(STRATA_ERANGE, "%s:%zu: more than %u examples", rd->path, rd->lineno,
                          UINT32_MAX);
  double *a = strata_grow(t->y, t->ny + 1, &t->ycap, UINT32_MAX, sizeof *a);
  if (!a)
    return nomem(rd, t);
  t->y = a;
  t->y[t->ny++] = y;
  return 0;
}

/* What reading to the triplets so far costs at its peak, triplets_to_csc:
 * the triplets (row, column, value: 16 bytes, the arrays growing by
 * doubling), the targets (8 bytes, doubling too), and the columns built
 * from them (a row and a value, 12 bytes, and colptr, 8 bytes a column). */
static double triplets_need(size_t nnz, size_t rows, uint64_t p) {
  return 2.0 * 16 * (double)nnz + 12.0 * (double)nnz + 2.0 * 8 * (double)rows +
         8.0 * ((double)p + 1);
}

/* strata_lines_fits for the triplets with nnz values, rows targets and p
 * columns, naming what the line brings (the printf-formatted why). */
static int triplets_fit(const strata_lines *rd, size_t nnz, size_t rows, uint64_t p,
                        const char *why, ...) __attribute__((format(printf, 5, 6)));
static int triplets_fit(const strata_lines *rd, size_t nnz, size_t rows, uint64_t p,
                        const char *why, ...) {
  double need = triplets_need(nnz, rows, p);
  if (!rd->budget.avail || need <= (double)rd->budget.avail)
    return 0;
  char what[96];
  va_list ap;
  va_start(ap, why);
  vsnprintf(what, sizeof what, why, ap);
  va_end(ap);
  return strata_lines_fits(rd, need, NULL,
                           "%s: the data (%zu example%s, %llu feature%s, %zu stored value%s) needs",
                           what, rows, rows == 1 ? "" : "s", (unsigned long long)p,
                           p == 1 ? "" : "s", nnz, nnz == 1 ? "" : "s");
}

/* The triplets as columns (a counting sort by column, stable: rows stay in
 * file order, which is increasing). */
static int triplets_to_csc(const strata_lines *rd, triplets *t, uint32_t p, lasso_data *d) {
  memset(d, 0, sizeof *d);
  d->n = (uint32_t)t->ny;
  d->p = p;
  d->nnz = t->n;
  d->colptr = strata_calloc((size_t)p + 1, sizeof *d->colptr);
  d->row = strata_malloc((t->n ? t->n : 1) * sizeof *d->row);
  d->val = strata_malloc((t->n ? t->n : 1) * sizeof *d->val);
  if (!d->colptr || !d->row || !d->val)
    goto nomem;
  for (size_t k = 0; k < t->n; k++)
    d->colptr[t->col[k] + 1]++;
  for (uint32_t f = 0; f < p; f++)
    d->colptr[f + 1] += d->colptr[f];
  for (size_t k = 0; k < t->n; k++) {
    uint64_t at = d->colptr[t->col[k]]++;
    d->row[at] = t->row[k];
    d->val[at] = t->val[k];
  }
  for (uint32_t f = p; f > 0; f--)
    d->colptr[f] = d->colptr[f - 1];
  d->colptr[0] = 0;
  d->y = t->y; /* handed over */
  t->y = NULL;
  return 0;
nomem:
  lasso_data_close(d);
  return strata_err_set(STRATA_ENOMEM,
                        "%s: out of memory for %u examples, %u features, %zu stored values",
                        rd->path, (uint32_t)t->ny, p, t->n);
}

/* A number field [s, e) that must be finite; 0 or STRATA_EPARSE naming it. */
static int parse_number(const char *path, size_t line, const char *what, const char *s,
                        const char *e, double *out) {
  char buf[64], q[STRATA_QUOTE_SIZE];
  size_t len = (size_t)(e - s);
  if (len == 0 || len >= sizeof buf)
    goto bad;
  memcpy(buf, s, len);
  buf[len] = 0;
  char *end;
  errno = 0;
  double v = strtod(buf, &end);
  if (*end || end == buf)
    goto bad;
  if (!isfinite(v))
    return strata_err_set(STRATA_EPARSE, "%s:%zu: %s '%s' is not finite", path, line, what,
                          strata_quote(q, sizeof q, s, len));
  *out = v;
  return 0;
bad:
  return strata_err_set(STRATA_EPARSE, "%s:%zu: %s '%s' is not a number", path, line, what,
                        strata_quote(q, sizeof q, s, len));
}

/* svmlight: "target idx:val idx:val ... [# comment]". */
static int read_svmlight(const char *path, lasso_data *d) {
  triplets t = {0};
  strata_lines rd;
  char q[STRATA_QUOTE_SIZE];
  const char *text;
  size_t len;
  int rc = strata_lines_open(&rd, path);
  if (rc)
    return rc;
  while ((rc = strata_lines_next(&rd, &text, &len)) > 0) {
    size_t line = rd.lineno;
    const char *s = text, *e = text + len, *fp, *fe;
    const char *hash = memchr(s, '#', (size_t)(e - s));
    if (hash)
      e = hash;
    if (strata_field_blank(s, e))
      continue;
    strata_field_next(&s, e, &fp, &fe);
    double y, v;
    if ((rc = parse_number(path, line, "target", fp, fe, &y)))
      goto done;
    uint32_t r = (uint32_t)t.ny;
    long long last = 0;
    while (strata_field_next(&s, e, &fp, &fe)) {
      const char *colon = memchr(fp, ':', (size_t)(fe - fp));
      if (!colon) {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: feature '%s' is not idx:value", path, line,
                            strata_quote(q, sizeof q, fp, (size_t)(fe - fp)));
        goto done;
      }
      char ib[24], *end;
      size_t il = (size_t)(colon - fp);
      long long idx = -1;
      if (il > 0 && il < sizeof ib) {
        memcpy(ib, fp, il);
        ib[il] = 0;
        idx = strtoll(ib, &end, 10);
        if (*end)
          idx = -1;
      }
      if (idx < 1 || idx > (long long)UINT32_MAX - 1 || idx <= last) {
        rc = strata_err_set(STRATA_EPARSE,
                            "%s:%zu: feature index '%s' is not a positive integer above the "
                            "one before it",
                            path, line, strata_quote(q, sizeof q, fp, il));
        goto done;
      }
      last = idx;
      if ((rc = parse_number(path, line, "value", colon + 1, fe, &v)))
        goto done;
      /* An index sizes the columns, so a short line may ask for more than
       * there is: checked before anything is allocated for it. */
      uint64_t p = (uint64_t)idx > t.p ? (uint64_t)idx : t.p;
      if (v != 0 && ((rc = triplets_fit(&rd, t.n + 1, t.ny + 1, p, "feature index %lld", idx)) ||
                     (rc = triplets_add(&rd, &t, r, (uint32_t)(idx - 1), v))))
        goto done;
    }
    if ((rc = triplets_target(&rd, &t, y)))
      goto done;
  }
  if (rc < 0)
    goto done;
  if (t.ny == 0) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no examples", path);
    goto done;
  }
  rc = triplets_to_csc(&rd, &t, t.p ? t.p : 1, d);
done:
  strata_lines_close(&rd);
  triplets_close(&t);
  return rc;
}

/* A table: a header line naming P + 1 columns, then rows of P + 1 numbers,
 * the last one the target. */
static int read_table(const char *path, lasso_data *d) {
  triplets t = {0};
  strata_lines rd;
  const char *text;
  size_t len, cols = 0;
  int rc = strata_lines_open(&rd, path);
  if (rc)
    return rc;
  while ((rc = strata_lines_next(&rd, &text, &len)) > 0) {
    size_t line = rd.lineno;
    const char *s = text, *e = text + len, *fp, *fe;
    if (strata_field_blank(s, e))
      continue;
    size_t k = 0;
    if (cols == 0) { /* the header */
      while (strata_field_next(&s, e, &fp, &fe))
        k++;
      if (k < 2) {
        rc = strata_err_set(STRATA_EPARSE,
                            "%s:%zu: the header names %zu column(s); a table "
                            "needs at least one "
                            "feature and the target",
                            path, line, k);
        goto done;
      }
      if (k - 1 > UINT32_MAX - 1) {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: the header names %zu features, more than %u",
                            path, line, k - 1, UINT32_MAX - 1);
        goto done;
      }
      if ((rc = triplets_fit(&rd, 0, 0, k - 1, "a header of %zu columns", k)))
        goto done;
      cols = k;
      continue;
    }
    const char *s0 = s;
    while (strata_field_next(&s, e, &fp, &fe))
      k++;
    if (k != cols) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: %zu fields, but the header names %zu columns",
                          path, line, k, cols);
      goto done;
    }
    /* At most a value per feature: the line's whole share at once. */
    if ((rc = triplets_fit(&rd, t.n + cols - 1, t.ny + 1, cols - 1, "row %zu", t.ny + 1)))
      goto done;
    uint32_t r = (uint32_t)t.ny;
    double v;
    s = s0;
    for (k = 0; strata_field_next(&s, e, &fp, &fe); k++) {
      if ((rc = parse_number(path, line, k + 1 == cols ? "target" : "value", fp, fe, &v)))
        goto done;
      if (k + 1 == cols) {
        if ((rc = triplets_target(&rd, &t, v)))
          goto done;
      } else if (v != 0 && (rc = triplets_add(&rd, &t, r, (uint32_t)k, v))) {
        goto done;
      }
    }
  }
  if (rc < 0)
    goto done;
  if (t.ny == 0) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no examples", path);
    goto done;
  }
  rc = triplets_to_csc(&rd, &t, (uint32_t)(cols - 1), d);
done:
  strata_lines_close(&rd);
  triplets_close(&t);
  return rc;
}

static int synth_parse(const char *text, lasso_synth *s) {
  *s = (lasso_synth){500, 1000, 10, 0.05, 0.1, 1};
  const char *p = text + strlen("synth");
  if (*p == ':')
    p++;
  else if (*p)
    goto bad;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[64], *eq, *vend;
    if (len == 0 || len >= sizeof item)
      goto bad;
    memcpy(item, p, len);
    item[len] = 0;
    if (!(eq = strchr(item, '=')))
      goto bad;
    *eq++ = 0;
    double v = strtod(eq, &vend);
    if (*vend || vend == eq || !isfinite(v))
      goto bad;
    int whole = v == floor(v) && v >= 0 && v <= 4294967295.0;
    if (!strcmp(item, "n") && whole && v >= 1)
      s->n = (uint32_t)v;
    else if (!strcmp(item, "p") && whole && v >= 1)
      s->p = (uint32_t)v;
    else if (!strcmp(item, "nonzeros") && whole)
      s->nonzeros = (uint32_t)v;
    else if (!strcmp(item, "density") && v > 0 && v <= 1)
      s->density = v;
    else if (!strcmp(item, "noise") && v >= 0)
      s->noise = v;
    else if (!strcmp(item, "seed") && v >= 0)
      s->seed = (uint64_t)v;
    else
      goto bad;
    p += len;
    if (*p == ',')
      p++;
  }
  if (s->nonzeros > s->p) {
    char q[STRATA_QUOTE_SIZE];
    return strata_err_set(STRATA_EUSAGE, "--data '%s': nonzeros above p",
                          strata_quote(q, sizeof q, text, strlen(text)));
  }
  return 0;
bad:;
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE,
                        "--data '%s': expected synth:n=N,p=P,density=D,nonzeros=K,noise=S,seed=X "
                        "(whole n, p >= 1, density in (0, 1], noise >= 0)",
                        strata_quote(q, sizeof q, text, strlen(text)));
}

/* Column f draws its rows by geometric skips (each row kept with
 * probability density) and N(0,1) values scaled to unit norm, from a
 * stream seeded by (seed, f) alone: the matrix does not depend on how it is
 * split, and column f is the same whatever p is. */
static int synth_generate(const char *spec, const lasso_synth *s, lasso_data *d) {
  memset(d, 0, sizeof *d);
  double expect = (double)s->n * s->density * s->p * 1.05 + 64.0 * s->p + 1024;
  /* colptr, the rows and values at the expected count, y and beta*: refused
   * before any of it is allocated. */
  double need = 8.0 * ((double)s->p + 1) + 12.0 * expect + 8.0 * s->n + 8.0 * s->p;
  strata_mem_budget budget;
  strata_mem_budget_init(&budget);
  char q[STRATA_QUOTE_SIZE];
  int rc = strata_mem_check(&budget, need, "lower n, p or density",
                            "--data '%s': %u x %u at density %g needs",
                            strata_quote(q, sizeof q, spec, strlen(spec)), s->n, s->p, s->density);
  if (rc)
    return rc;
  d->n = s->n;
  d->p = s->p;
  size_t cap = (size_t)expect;
  d->colptr = strata_malloc(((size_t)s->p + 1) * sizeof *d->colptr);
  d->row = strata_malloc(cap * sizeof *d->row);
  d->val = strata_malloc(cap * sizeof *d->val);
  d->y = strata_calloc(s->n, sizeof *d->y);
  double *beta = strata_calloc(s->p, sizeof *beta);
  if (!d->colptr || !d->row || !d->val || !d->y || !beta)
    goto nomem;
  double lq = s->density < 1 ? log1p(-s->density) : 0;
  uint64_t k = 0;
  strata_rng rng;
  for (uint32_t f = 0; f < s->p; f++) {
    d->colptr[f] = k;
    strata_rng_seed(&rng, strata_mix64(s->seed * 0x9e3779b97f4a7c15ull + f + 1));
    uint64_t start = k;
    for (double r = -1;;) {
      if (s->density < 1) {
        double u = 1 - strata_rng_uniform(&rng); /* (0, 1] */
        r += 1 + floor(log(u) / lq);
      } else {
        r += 1;
      }
      if (r >= s->n)
        break;
      if (k == cap) {
        size_t c2 = cap;
        uint32_t *a = strata_grow(d->row, k + 1, &c2, SIZE_MAX / 16, sizeof *a);
        if (!a)
          goto nomem;
        d->row = a;
        double *b = strata_grow(d->val, k + 1, &cap, SIZE_MAX / 16, sizeof *b);
        if (!b)
          goto nomem;
        d->val = b;
      }
      d->row[k] = (uint32_t)r;
      d->val[k++] = strata_rng_normal(&rng);
    }
    if (k == start) { /* an empty column would have no norm: give it one row */
      if (k == cap) {
        size_t c2 = cap;
        uint32_t *a = strata_grow(d->row, k + 1, &c2, SIZE_MAX / 16, sizeof *a);
        if (!a)
          goto nomem;
        d->row = a;
        double *b = strata_grow(d->val, k + 1, &cap, SIZE_MAX / 16, sizeof *b);
        if (!b)
          goto nomem;
        d->val = b;
      }
      d->row[k] = (uint32_t)strata_rng_below(&rng, s->n);
      d->val[k++] = 1;
    }
    double ss = 0;
    for (uint64_t x = start; x < k; x++)
      ss += d->val[x] * d->val[x];
    double inv = 1 / sqrt(ss);
    for (uint64_t x = start; x < k; x++)
      d->val[x] *= inv;
  }
  d->colptr[s->p] = k;
  d->nnz = k;
  /* beta*: `nonzeros` distinct features, values +-U(0.5, 1.5). */
  strata_rng_seed(&rng, strata_mix64(s->seed ^ 0xbe7a));
  for (uint32_t c = 0; c < s->nonzeros;) {
    uint32_t f = (uint32_t)strata_rng_below(&rng, s->p);
    if (beta[f] != 0)
      continue;
    double m = 0.5 + strata_rng_uniform(&rng);
    beta[f] = strata_rng_uniform(&rng) < 0.5 ? -m : m;
    c++;
  }
  for (uint32_t f = 0; f < s->p; f++)
    if (beta[f] != 0)
      for (uint64_t x = d->colptr[f]; x < d->colptr[f + 1]; x++)
        d->y[d->row[x]] += d->val[x] * beta[f];
  strata_rng_seed(&rng, strata_mix64(s->seed ^ 0x4015e));
  for (uint32_t i = 0; i < s->n; i++)
    d->y[i] += s->noise * strata_rng_normal(&rng);
  strata_free(beta);
  return 0;
nomem:
  strata_free(beta);
  lasso_data_close(d);
  return strata_err_set(STRATA_ENOMEM, "lasso: out of memory generating %u x %u", s->n, s->p);
}

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

int lasso_data_read(const char *spec, lasso_data *d) {
  memset(d, 0, sizeof *d);
  if (!strncmp(spec, "synth", 5) && (spec[5] == 0 || spec[5] == ':')) {
    lasso_synth s;
    int rc = synth_parse(spec, &s);
    return rc ? rc : synth_generate(spec, &s, d);
  }
  if (!strncmp(spec, "tsv:", 4))
    return read_table(spec + 4, d);
  if (has_suffix(spec, ".tsv") || has_suffix(spec, ".tab.txt"))
    return read_table(spec, d);
  return read_svmlight(spec, d);
}

int lasso_data_standardize(lasso_data *d) {
  uint32_t n = d->n, p = d->p;
  uint64_t nnz = (uint64_t)n * p;
  /* The dense copy comes beside the sparse one. */
  strata_mem_budget budget;
  strata_mem_budget_init(&budget);
  int rc = strata_mem_check(&budget, 12.0 * (double)nnz + 8.0 * ((double)p + 1),
                            "leave out --standardize for sparse data",
                            "--standardize: the %u x %u matrix made dense needs", n, p);
  if (rc)
    return rc;
  uint64_t *cp = strata_malloc(((size_t)p + 1) * sizeof *cp);
  uint32_t *row = strata_malloc((nnz ? nnz : 1) * sizeof *row);
  double *val = strata_malloc((nnz ? nnz : 1) * sizeof *val);
  if (!cp || !row || !val) {
    strata_free(cp);
    strata_free(row);
    strata_free(val);
    return strata_err_set(STRATA_ENOMEM, "lasso: out of memory standardising %u x %u", n, p);
  }
  for (uint32_t f = 0; f < p; f++) {
    double *col = val + (size_t)f * n, mean = 0, ss = 0;
    cp[f] = (uint64_t)f * n;
    for (uint32_t i = 0; i < n; i++) {
      col[i] = 0;
      row[(size_t)f * n + i] = i;
    }
    for (uint64_t x = d->colptr[f]; x < d->colptr[f + 1]; x++)
      col[d->row[x]] = d->val[x];
    for (uint32_t i = 0; i < n; i++)
      mean += col[i];
    mean /= n;
    for (uint32_t i = 0; i < n; i++)
      ss += (col[i] - mean) * (col[i] - mean);
    double sd = sqrt(ss / n);
    for (uint32_t i = 0; i < n; i++)
      col[i] = sd > 0 ? (col[i] - mean) / sd : 0;
  }
  cp[p] = nnz;
  double ym = 0;
  for (uint32_t i = 0; i < n; i++)
    ym += d->y[i];
  ym /= n;
  for (uint32_t i = 0; i < n; i++)
    d->y[i] -= ym;
  strata_free(d->colptr);
  strata_free(d->row);
  strata_free(d->val);
  d->colptr = cp;
  d->row = row;
  d->val = val;
  d->nnz = nnz;
  return 0;
}

void lasso_data_close(lasso_data *d) {
  strata_free(d->colptr);
  strata_free(d->row);
  strata_free(d->val);
  strata_free(d->y);
  memset(d, 0, sizeof *d);
}
