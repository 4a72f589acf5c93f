/*
 * The files of exported model directories (apps/common/model_files.h),
 * shared by the MF and MLR models.
 */
#include "apps/common/model_files.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/common/lines.h"
#include "strata/core.h"

int strata__model_dir(const char *dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return strata_err_set(STRATA_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
  return 0;
}

typedef struct blob {
  const void *p;
  size_t n;
} blob;

static int fill_blob(FILE *f, void *ud) {
  const blob *b = ud;
  return fwrite(b->p, 1, b->n, f) == b->n ? 0 : strata_err_set(STRATA_EIO, "short write");
}

int strata__model_write_blob(const char *dir, const char *name, const void *p, size_t n) {
  blob b = {p, n};
  return strata_write_atomic_in(dir, name, fill_blob, &b);
}

typedef struct ids {
  const int64_t *v;
  uint32_t n;
} ids;

static int fill_ids(FILE *f, void *ud) {
  const ids *x = ud;
  for (uint32_t i = 0; i < x->n; i++) fprintf(f, "%" PRId64 "\n", x->v[i]);
  return 0;
}

int strata__model_write_ids(const char *dir, const char *name, const int64_t *v, uint32_t n) {
  ids x = {v, n};
  return strata_write_atomic_in(dir, name, fill_ids, &x);
}

int strata__model_path(char *path, size_t cap, const char *dir, const char *name) {
  if (snprintf(path, cap, "%s/%s", dir, name) >= (int)cap)
    return strata_err_set(STRATA_EINVAL, "%s: path too long", dir);
  return 0;
}

int strata__model_read_blob(const char *dir, const char *name, void *dst, size_t n) {
  char path[4096];
  int rc = strata__model_path(path, sizeof path, dir, name);
  if (rc) return rc;
  FILE *f = fopen(path, "rb");
  if (!f) return strata_err_set(STRATA_ENOENT, "%s: cannot open: %s", path, strerror(errno));
  size_t got = fread(dst, 1, n, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (got != n || extra)
    return strata_err_set(STRATA_EPARSE, "%s: expected %zu bytes", path, n);
  return 0;
}

int strata__model_read_ids(const char *dir, const char *name, int64_t *dst, uint32_t n) {
  char path[4096];
  int rc = strata__model_path(path, sizeof path, dir, name);
  if (rc) return rc;
  strata_lines rd;
  if ((rc = strata_lines_open(&rd, path))) return rc;
  uint32_t got = 0;
  const char *line;
  size_t len;
  while ((rc = strata_lines_next(&rd, &line, &len)) > 0) {
    const char *p = line, *e = line + len;
    strata_field_trim(&p, &e);
    if (p == e) continue;
    if (got == n) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: more ids than the %u of meta.json", path,
                          rd.lineno, n);
      break;
    }
    int why = strata__scan_i64(p, e, &dst[got]);
    if (why != STRATA__NUM_OK) {
      char q[STRATA_QUOTE_SIZE];
      strata_quote(q, sizeof q, p, (size_t)(e - p));
      rc = why == STRATA__NUM_OVERFLOW
               ? strata_err_set(STRATA_EPARSE, "%s:%zu: id '%s' %s", path, rd.lineno, q,
                                strata__overflow_why(p, e))
               : strata_err_set(STRATA_EPARSE, "%s:%zu: id '%s' is not an integer", path,
                                rd.lineno, q);
      break;
    }
    got++;
  }
  if (rc == 0 && got != n)
    rc = strata_err_set(STRATA_EPARSE, "%s: %u ids, meta.json declares %u", path, got, n);
  strata_lines_close(&rd);
  return rc;
}

int strata__model_read_meta(const char *dir, char *text, size_t cap) {
  char path[4096];
  int rc = strata__model_path(path, sizeof path, dir, "meta.json");
  if (rc) return rc;
  FILE *f = fopen(path, "r");
  if (!f) return strata_err_set(STRATA_ENOENT, "%s: cannot open: %s", path, strerror(errno));
  size_t n = fread(text, 1, cap - 1, f);
  fclose(f);
  text[n] = '\0';
  return 0;
}

/* meta.json is our own output; a key scan is enough to read it back. A
 * non-finite number is written as null, read here as NaN. */
int strata__meta_number(const char *text, const char *key, double *out) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(text, pat);
  if (!p) return -1;
  p += strlen(pat);
  while (*p == ' ') p++;
  if (strncmp(p, "true", 4) == 0) *out = 1;
  else if (strncmp(p, "false", 5) == 0) *out = 0;
  else if (strncmp(p, "null", 4) == 0) *out = NAN;
  else {
    char *end;
    *out = strtod(p, &end);
    if (end == p) return -1;
  }
  return 0;
}

int strata__whole_in(double x, double lo, double hi) { return x >= lo && x <= hi && x == floor(x); }
