/*
 * The line reader of strata/apps/lines.h, over read(2) for plain files and
 * zlib for gzip, and the number helpers of apps/common/lines.h.
 */
#define _GNU_SOURCE /* memrchr */
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

/* 256 KB: a block a reader scans stays in its core's L2. */
#define READ_CHUNK ((size_t)1 << 18)
/* gzread takes an unsigned and returns an int. */
#define READ_MAX ((size_t)1 << 30)
#define NO_STOP UINT64_MAX

static int open_file(strata_lines *rd, const char *path, uint64_t start, uint64_t stop) {
  memset(rd, 0, sizeof *rd);
  rd->path = path;
  rd->fd = -1;
  rd->stop = stop;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return strata_err_set(STRATA_ENOENT, "%s: cannot open: %s", path, strerror(errno));
  /* open() succeeds on a directory; reading it would fail later with a less
   * helpful message. */
  struct stat st;
  int regular = 0;
  if (fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      close(fd);
      return strata_err_set(STRATA_ENOENT, "%s: cannot open: %s", path, strerror(EISDIR));
    }
    regular = S_ISREG(st.st_mode);
  }
  /* A regular file is gzip when it starts with gzip's magic bytes; a pipe
   * cannot be peeked at, so zlib reads it, passing plain text through. */
  unsigned char magic[2];
  int gz = !regular || (pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b);
  if (gz && (start > 0 || stop != NO_STOP)) {
    close(fd);
    return strata_err_set(STRATA_EINVAL, "%s: a %s cannot be read by ranges", path,
                          regular ? "gzip file" : "stream");
  }
  if (gz) {
    gzFile g = gzdopen(fd, "rb");
    if (!g) {
      close(fd);
      return strata_err_set(STRATA_ENOMEM, "%s: out of memory opening the file", path);
    }
    gzbuffer(g, 1u << 17);
    rd->gz = g;
  } else {
    rd->fd = fd;
    rd->size = (uint64_t)st.st_size;
    rd->start = start;
    /* The byte before start tells whether a line starts at start. */
    rd->skip = start > 0;
    rd->off0 = start > 0 ? start - 1 : 0;
    if (rd->off0 && lseek(fd, (off_t)rd->off0, SEEK_SET) < 0) {
      int e = errno;
      strata_lines_close(rd);
      return strata_err_set(STRATA_EIO, "%s: cannot seek to byte %llu: %s", path,
                            (unsigned long long)rd->off0, strerror(e));
    }
  }
  strata_mem_budget_init(&rd->budget);
  rd->cap = READ_CHUNK;
  rd->buf = strata_malloc(rd->cap + 1);
  if (!rd->buf) {
    strata_lines_close(rd);
    return strata_err_set(STRATA_ENOMEM, "%s: out of memory for the read buffer", path);
  }
  return 0;
}

int strata_lines_open(strata_lines *rd, const char *path) {
  return open_file(rd, path, 0, NO_STOP);
}

int strata_lines_open_range(strata_lines *rd, const char *path, uint64_t start, uint64_t stop) {
  return open_file(rd, path, start, stop);
}

void strata_lines_close(strata_lines *rd) {
  strata_free(rd->buf);
  if (rd->gz) gzclose((gzFile)rd->gz);
  if (rd->fd >= 0) close(rd->fd);
  rd->buf = NULL;
  rd->gz = NULL;
  rd->fd = -1;
}

uint64_t strata_lines_offset(const strata_lines *rd) { return rd->gz ? 0 : rd->off0 + rd->beg; }

int strata_lines_rewind(strata_lines *rd) {
  if (rd->gz ? gzrewind((gzFile)rd->gz) != 0
             : lseek(rd->fd, (off_t)(rd->start ? rd->start - 1 : 0), SEEK_SET) < 0)
    return strata_err_set(STRATA_EIO, "%s: cannot rewind after detecting the format", rd->path);
  rd->beg = rd->end = 0;
  rd->eof = 0;
  rd->lineno = 0;
  rd->in_blk = 0;
  rd->skip = rd->start > 0;
  rd->off0 = rd->start ? rd->start - 1 : 0;
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

/* A range's bounds on the bytes just read: the partial line before start
 * skipped, and the data cut after the '\n' that ends the line holding byte
 * stop - 1, after which nothing more is read. */
static void clip_range(strata_lines *rd) {
  if (rd->stop <= rd->start) { /* an empty range: no byte, so no line, is in it */
    rd->end = rd->beg;
    rd->eof = 1;
    return;
  }
  if (rd->skip) {
    char *nl = memchr(rd->buf + rd->beg, '\n', rd->end - rd->beg);
    rd->beg = nl ? (size_t)(nl + 1 - rd->buf) : rd->end;
    if (!nl) return;
    rd->skip = 0;
  }
  if (rd->stop == NO_STOP) return;
  uint64_t last = rd->stop - 1; /* the owned line holding it ends the range */
  if (rd->off0 + rd->beg > last) {
    rd->end = rd->beg;
    rd->eof = 1;
    return;
  }
  if (rd->off0 + rd->end <= last) return;
  size_t from = (size_t)(last - rd->off0);
  char *nl = memchr(rd->buf + from, '\n', rd->end - from);
  if (nl) {
    rd->end = (size_t)(nl + 1 - rd->buf);
    rd->eof = 1;
  }
}

/* More of the file after buf[end], the unread bytes moved to the front
 * first and the buffer doubled when they fill it (a line longer than it):
 * 0 (rd->eof set at the end), or an error naming the next line. */
static int read_more(strata_lines *rd) {
  size_t avail = rd->end - rd->beg;
  if (rd->beg) {
    memmove(rd->buf, rd->buf + rd->beg, avail);
    rd->off0 += rd->beg;
    rd->beg = 0;
    rd->end = avail;
  }
  if (rd->end == rd->cap) {
    /* A line longer than the buffer: keep all of it. */
    char *b = strata_realloc(rd->buf, rd->cap * 2 + 1);
    if (!b)
      return strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for a %zu-byte line", rd->path,
                            rd->lineno + 1, rd->cap);
    rd->buf = b;
    rd->cap *= 2;
  }
  size_t want = rd->cap - rd->end;
  if (want > READ_MAX) want = READ_MAX;
  if (rd->gz) {
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
    return 0;
  }
  ssize_t got;
  do got = read(rd->fd, rd->buf + rd->end, want);
  while (got < 0 && errno == EINTR);
  if (got < 0)
    return strata_err_set(STRATA_EIO, "%s:%zu: read error: %s", rd->path, rd->lineno + 1,
                          strerror(errno));
  rd->end += (size_t)got;
  if (got == 0) rd->eof = 1;
  clip_range(rd);
  return 0;
}

int strata_lines_next(strata_lines *rd, const char **line, size_t *len) {
  if (rd->in_blk) {
    rd->lineno = rd->blk_next;
    rd->in_blk = 0;
  }
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
    int rc = read_more(rd);
    if (rc) return rc;
  }
}

/* '\n's in [s, s + n), in a loop the compiler vectorises. */
static size_t count_lines(const char *s, size_t n) {
  size_t k = 0;
  while (n) {
    /* Byte-wide counts over at most 255 bytes, then widened. */
    size_t m = n < 255 ? n : 255;
    unsigned char c = 0;
    for (size_t i = 0; i < m; i++) c += s[i] == '\n';
    k += c;
    s += m;
    n -= m;
  }
  return k;
}

int strata_lines_block(strata_lines *rd, const char **blk, size_t *len) {
  if (rd->in_blk) {
    rd->lineno = rd->blk_next;
    rd->in_blk = 0;
  }
  for (;;) {
    char *s = rd->buf + rd->beg;
    size_t avail = rd->end - rd->beg;
    char *nl = avail ? memrchr(s, '\n', avail) : NULL;
    if (!nl && rd->eof && avail) {
      /* The last line lacks its '\n': the spare byte past cap holds one. */
      s[avail] = '\n';
      nl = s + avail;
      rd->end++;
    }
    if (nl) {
      size_t n = (size_t)(nl + 1 - s);
      rd->beg += n;
      rd->blk_next = rd->lineno + count_lines(s, n);
      rd->in_blk = 1;
      *blk = s;
      *len = n;
      return 1;
    }
    if (rd->eof) return 0;
    int rc = read_more(rd);
    if (rc) return rc;
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

const double strata__pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
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
    double v = (double)mant / strata__pow10[frac];
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

