/*
 * The line reader of strata/apps/lines.h, over zlib, and the number helpers
 * of apps/common/lines.h.
 */
#include "apps/common/lines.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "strata/core.h"
#include "strata/error.h"

#define READ_CHUNK ((size_t)1 << 20)
/* gzread takes an unsigned and returns an int. */
#define READ_MAX ((size_t)1 << 30)

int strata_lines_open(strata_lines *rd, const char *path) {
  memset(rd, 0, sizeof *rd);
  rd->path = path;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return strata_err_set(STRATA_ENOENT, "%s: cannot open: %s", path, strerror(errno));
  /* open() succeeds on a directory; reading it would fail later with a less
   * helpful message. */
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    return strata_err_set(STRATA_ENOENT, "%s: cannot open: %s", path, strerror(EISDIR));
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    close(fd);
    return strata_err_set(STRATA_ENOMEM, "%s: out of memory opening the file", path);
  }
  gzbuffer(gz, 1u << 17);
  rd->gz = gz;
  strata_mem_budget_init(&rd->budget);
  rd->cap = READ_CHUNK;
  rd->buf = strata_malloc(rd->cap);
  if (!rd->buf) {
    strata_lines_close(rd);
    return strata_err_set(STRATA_ENOMEM, "%s: out of memory for the read buffer", path);
  }
  return 0;
}

void strata_lines_close(strata_lines *rd) {
  strata_free(rd->buf);
  if (rd->gz) gzclose((gzFile)rd->gz);
  rd->buf = NULL;
  rd->gz = NULL;
}

int strata_lines_rewind(strata_lines *rd) {
  if (gzrewind((gzFile)rd->gz) != 0)
    return strata_err_set(STRATA_EIO, "%s: cannot rewind after detecting the format", rd->path);
  rd->beg = rd->end = 0;
  rd->eof = 0;
  rd->lineno = 0;
  return 0;
}

static int read_failed(strata_lines *rd) {
  int errnum = Z_OK;
  const char *msg = gzerror((gzFile)rd->gz, &errnum);
  if (errnum == Z_OK) return 0;
  if (errnum == Z_ERRNO)
    return strata_err_set(STRATA_EIO, "%s:%zu: read error: %s", rd->path, rd->lineno + 1,
                          strerror(errno));
  if (errnum == Z_MEM_ERROR)
    return strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory decompressing", rd->path,
                          rd->lineno + 1);
  /* Z_BUF_ERROR is zlib's "unexpected end of file": a cut gzip stream.
   * zlib prefixes its message with "<fd:N>: ", which names nothing here. */
  const char *colon = msg && msg[0] == '<' ? strstr(msg, ">: ") : NULL;
  if (colon) msg = colon + 3;
  return strata_err_set(STRATA_EPARSE, "%s:%zu: corrupt or truncated gzip data: %s", rd->path,
                        rd->lineno + 1, msg);
}

int strata_lines_next(strata_lines *rd, const char **line, size_t *len) {
  for (;;) {
    char *s = rd->buf + rd->beg;
    size_t avail = rd->end - rd->beg;
    char *nl = avail ? memchr(s, '\n', avail) : NULL;
    if (nl || (rd->eof && avail)) {
      size_t n = nl ? (size_t)(nl - s) : avail;
      rd->beg += nl ? n + 1 : n;
      if (n && s[n - 1] == '\r') n--;
      rd->lineno++;
      *line = s;
      *len = n;
      return 1;
    }
    if (rd->eof) return 0;
    if (rd->beg) {
      memmove(rd->buf, s, avail);
      rd->beg = 0;
      rd->end = avail;
    }
    if (rd->end == rd->cap) {
      /* A line longer than the buffer: keep all of it. */
      char *b = strata_realloc(rd->buf, rd->cap * 2);
      if (!b)
        return strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for a %zu-byte line", rd->path,
                              rd->lineno + 1, rd->cap);
      rd->buf = b;
      rd->cap *= 2;
    }
    size_t want = rd->cap - rd->end;
    if (want > READ_MAX) want = READ_MAX;
    int got = gzread((gzFile)rd->gz, rd->buf + rd->end, (unsigned)want);
    if (got < 0) {
      int rc = read_failed(rd);
      return rc ? rc : strata_err_set(STRATA_EIO, "%s:%zu: read error", rd->path, rd->lineno + 1);
    }
    rd->end += (size_t)got;
    if (got == 0) {
      int rc = read_failed(rd);
      if (rc) return rc;
      rd->eof = 1;
    }
  }
}

int strata_lines_scan_i64(const strata_lines *rd, const char *what, const char *p,
                           const char *e, int64_t *out) {
  int why = strata__scan_i64(p, e, out);
  if (why == STRATA__NUM_OK) return 0;
  char q[STRATA_QUOTE_SIZE];
  strata_quote(q, sizeof q, p, (size_t)(e - p));
  if (why == STRATA__NUM_OVERFLOW)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: %s '%s' %s", rd->path, rd->lineno, what, q,
                          strata__overflow_why(p, e));
  return strata_err_set(STRATA_EPARSE, "%s:%zu: %s '%s' is not an integer", rd->path, rd->lineno,
                        what, q);
}

int strata_lines_fits(const strata_lines *rd, double bytes, const char *hint, const char *fmt,
                      ...) {
  if (!rd->budget.avail || bytes <= (double)rd->budget.avail) return 0;
  char subject[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(subject, sizeof subject, fmt, ap);
  va_end(ap);
  return strata_mem_check(&rd->budget, bytes, hint, "%s:%zu: %s", rd->path, rd->lineno, subject);
}

static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Plain decimals ("4", "3.5", "-0.25") take the fast path: with at most 15
 * significant digits the mantissa and the power of ten are both exact
 * doubles, so one IEEE division gives the correctly rounded result strtod
 * would. Anything else (exponents, nan, inf, long mantissas) goes to strtod
 * on a NUL-terminated copy. */
int strata__scan_f64(const char *p, const char *e, double *out) {
  const char *s = p;
  int neg = 0;
  if (s < e && (*s == '+' || *s == '-')) neg = *s++ == '-';
  uint64_t mant = 0;
  int digits = 0, frac = 0, any = 0;
  while (s < e && (unsigned)(*s - '0') <= 9) {
    mant = mant * 10 + (unsigned)(*s++ - '0');
    if (mant) digits++;
    any = 1;
  }
  if (s < e && *s == '.') {
    s++;
    while (s < e && (unsigned)(*s - '0') <= 9) {
      mant = mant * 10 + (unsigned)(*s++ - '0');
      if (mant) digits++;
      frac++;
      any = 1;
    }
  }
  if (s == e && any && digits <= 15 && frac <= 22) {
    double v = (double)mant / pow10_exact[frac];
    *out = neg ? -v : v;
    return STRATA__NUM_OK;
  }
  char tmp[128];
  size_t n = (size_t)(e - p);
  if (n == 0 || n >= sizeof tmp) return STRATA__NUM_BAD;
  memcpy(tmp, p, n);
  tmp[n] = '\0';
  /* strtod skips leading white space, which would hide garbage such as a
   * stray CR inside the line. */
  if (isspace((unsigned char)tmp[0])) return STRATA__NUM_BAD;
  char *end;
  *out = strtod(tmp, &end);
  return end == tmp + n ? STRATA__NUM_OK : STRATA__NUM_BAD;
}

