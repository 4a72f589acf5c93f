#define _GNU_SOURCE
#include "strata/apps/ratings.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "strata/core.h"
#include "apps/common/lines.h"

/* ---- id map ------------------------------------------------------------ */

/* Each slot keeps its key beside the index so a lookup touches one cache
 * line: with the key only in the dense array, a hit cost two dependent
 * misses, which dominated reading files with many users. */
typedef struct {
  int64_t id;
  uint32_t index1; /* dense index + 1; 0 marks an empty slot */
} idmap_slot;

struct strata_idmap {
  idmap_slot *slots;
  unsigned bits; /* table size is 1 << bits */
  int64_t *ids;  /* dense index -> id */
  uint32_t n, cap;
};

#define IDMAP_MIN_BITS 10
/* Dense indices stop below STRATA_ID_UNSEEN so the sentinel stays unambiguous. */
#define IDMAP_MAX_SIZE (UINT32_MAX - 1)

static inline size_t idmap_hash(int64_t id, unsigned bits) {
  /* Fibonacci hashing: the top bits of the product mix every input bit, so
   * sequential ids and ids sharing low bits both spread well. */
  return (size_t)(((uint64_t)id * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
}

strata_idmap *strata_idmap_create(void) {
  strata_idmap *m = strata_calloc(1, sizeof *m);
  if (!m) return NULL;
  m->bits = IDMAP_MIN_BITS;
  m->slots = strata_calloc((size_t)1 << m->bits, sizeof *m->slots);
  m->cap = 1u << (IDMAP_MIN_BITS - 1);
  m->ids = strata_malloc(m->cap * sizeof *m->ids);
  if (!m->slots || !m->ids) {
    strata_idmap_free(m);
    return NULL;
  }
  return m;
}

void strata_idmap_free(strata_idmap *m) {
  if (!m) return;
  strata_free(m->slots);
  strata_free(m->ids);
  strata_free(m);
}

static inline idmap_slot *idmap_probe(const strata_idmap *m, int64_t id) {
  size_t mask = ((size_t)1 << m->bits) - 1;
  size_t h = idmap_hash(id, m->bits);
  for (;;) {
    idmap_slot *s = &m->slots[h];
    if (s->index1 == 0 || s->id == id) return s;
    h = (h + 1) & mask;
  }
}

static int idmap_grow_table(strata_idmap *m) {
  unsigned bits = m->bits + 1;
  idmap_slot *slots = strata_calloc((size_t)1 << bits, sizeof *slots);
  if (!slots) return STRATA_ENOMEM;
  size_t mask = ((size_t)1 << bits) - 1;
  for (uint32_t i = 0; i < m->n; i++) {
    size_t h = idmap_hash(m->ids[i], bits);
    while (slots[h].index1) h = (h + 1) & mask;
    slots[h] = (idmap_slot){m->ids[i], i + 1};
  }
  strata_free(m->slots);
  m->slots = slots;
  m->bits = bits;
  return 0;
}

int strata_idmap_insert(strata_idmap *m, int64_t id, uint32_t *index) {
  idmap_slot *s = idmap_probe(m, id);
  if (s->index1) {
    *index = s->index1 - 1;
    return 0;
  }
  if (m->n >= IDMAP_MAX_SIZE)
    return strata_err_set(STRATA_ENOMEM, "id map full: more than %u distinct ids",
                          (unsigned)IDMAP_MAX_SIZE);
  if (m->n == m->cap) {
    uint32_t cap = m->cap > IDMAP_MAX_SIZE / 2 ? IDMAP_MAX_SIZE : m->cap * 2;
    int64_t *ids = strata_realloc(m->ids, (size_t)cap * sizeof *ids);
    if (!ids) return strata_err_set(STRATA_ENOMEM, "id map: out of memory");
    m->ids = ids;
    m->cap = cap;
  }
  /* Keep the load at or below one half so probe runs stay short. */
  if ((size_t)(m->n + 1) * 2 > ((size_t)1 << m->bits)) {
    if (idmap_grow_table(m) != 0) return strata_err_set(STRATA_ENOMEM, "id map: out of memory");
    s = idmap_probe(m, id);
  }
  m->ids[m->n] = id;
  *s = (idmap_slot){id, m->n + 1};
  *index = m->n++;
  return 0;
}

static inline void idmap_prefetch(const strata_idmap *m, int64_t id) {
#if defined(__GNUC__)
  __builtin_prefetch(&m->slots[idmap_hash(id, m->bits)]);
#else
  (void)m;
  (void)id;
#endif
}

uint32_t strata_idmap_find(const strata_idmap *m, int64_t id) {
  uint32_t s = idmap_probe(m, id)->index1;
  return s ? s - 1 : STRATA_ID_UNSEEN;
}

uint32_t strata_idmap_size(const strata_idmap *m) { return m ? m->n : 0; }

int64_t strata_idmap_id(const strata_idmap *m, uint32_t i) { return i < m->n ? m->ids[i] : -1; }

/* ---- formats and rating sets ------------------------------------------ */

static const char *const format_names[] = {"auto", "tsv", "dat", "csv", "libmf", "mm"};
#define N_FORMATS (sizeof format_names / sizeof format_names[0])

int strata_format_parse(const char *name, strata_format *out) {
  for (size_t i = 0; i < N_FORMATS; i++) {
    if (strcmp(name, format_names[i]) == 0) {
      *out = (strata_format)i;
      return 0;
    }
  }
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE,
                        "unknown rating format '%s' (expected auto, tsv, dat, csv, libmf or mm)",
                        strata_quote(q, sizeof q, name, strlen(name)));
}

const char *strata_format_name(strata_format f) {
  return (unsigned)f < N_FORMATS ? format_names[f] : "unknown";
}

void strata_ratings_close(strata_ratings *rs) {
  if (!rs) return;
  strata_free(rs->r);
  strata_idmap_free(rs->users);
  strata_idmap_free(rs->items);
  memset(rs, 0, sizeof *rs);
}

int strata_ratings_push(strata_ratings *rs, uint32_t user, uint32_t item, float value) {
  if (rs->n == rs->cap) {
    size_t cap = rs->cap ? rs->cap * 2 : 1024;
    if (cap > SIZE_MAX / sizeof *rs->r)
      return strata_err_set(STRATA_ENOMEM, "rating set: too many ratings");
    strata_rating *r = strata_realloc(rs->r, cap * sizeof *r);
    if (!r) return strata_err_set(STRATA_ENOMEM, "rating set: out of memory growing to %zu", cap);
    rs->r = r;
    rs->cap = cap;
  }
  rs->r[rs->n++] = (strata_rating){user, item, value};
  return 0;
}

/* Appends copies 1..copies-1 of the ids of m's first n indices. */
static int tile_ids(strata_idmap *m, int copies, uint32_t n) {
  int64_t max = -1;
  for (uint32_t i = 0; i < n; i++)
    if (strata_idmap_id(m, i) > max) max = strata_idmap_id(m, i);
  if (max >= INT64_MAX / copies - 1)
    return strata_err_set(STRATA_ERANGE, "ids too large to duplicate %d times", copies);
  for (int c = 1; c < copies; c++)
    for (uint32_t i = 0; i < n; i++) {
      uint32_t at;
      int rc = strata_idmap_insert(m, strata_idmap_id(m, i) + (int64_t)c * (max + 1), &at);
      if (rc) return rc;
      if (at != (uint32_t)c * n + i)
        return strata_err_set(STRATA_EINVAL, "duplicating ids: the map holds more than %u ids", n);
    }
  return 0;
}

int strata_ratings_duplicate(strata_ratings *rs, int copies, uint32_t n_users, uint32_t n_items) {
  if (copies < 1) return strata_err_set(STRATA_EINVAL, "duplicate: %d copies", copies);
  if (copies == 1) return 0;
  if ((uint64_t)n_users * copies >= STRATA_ID_UNSEEN ||
      (uint64_t)n_items * copies >= STRATA_ID_UNSEEN)
    return strata_err_set(STRATA_ERANGE, "duplicate: %d copies of %u users and %u items overflow "
                          "32-bit indices", copies, n_users, n_items);
  size_t n = rs->n;
  if (n > SIZE_MAX / sizeof *rs->r / (size_t)copies)
    return strata_err_set(STRATA_ENOMEM, "duplicate: too many ratings");
  strata_rating *r = strata_realloc(rs->r, n * (size_t)copies * sizeof *r + 1);
  if (!r) return strata_err_set(STRATA_ENOMEM, "duplicate: out of memory for %d copies", copies);
  rs->r = r;
  rs->cap = n * (size_t)copies;
  for (int c = 1; c < copies; c++)
    for (size_t j = 0; j < n; j++) {
      strata_rating x = r[j];
      if (x.user != STRATA_ID_UNSEEN) x.user += (uint32_t)c * n_users;
      if (x.item != STRATA_ID_UNSEEN) x.item += (uint32_t)c * n_items;
      r[(size_t)c * n + j] = x;
    }
  rs->n = n * (size_t)copies;
  rs->n_users = n_users * (uint32_t)copies;
  rs->n_items = n_items * (uint32_t)copies;
  int rc = 0;
  if (rs->users && (rc = tile_ids(rs->users, copies, n_users))) return rc;
  if (rs->items && (rc = tile_ids(rs->items, copies, n_items))) return rc;
  return 0;
}

/* ---- per-format line parsing ------------------------------------------ */

typedef struct {
  const char *p, *e;
} field;

/* Up to MAX_FIELDS are kept; the count keeps going so messages say how many
 * the line really had. */
#define MAX_FIELDS 4

static int split_ws(const char *s, const char *e, field *f) {
  int n = 0;
  const char *b, *fe;
  for (; strata_field_next(&s, e, &b, &fe); n++)
    if (n < MAX_FIELDS) f[n] = (field){b, fe};
  return n;
}

/* Fields separated by sep (1 or 2 chars), each trimmed of blanks. */
static int split_sep(const char *s, const char *e, const char *sep, size_t seplen, field *f) {
  int n = 0;
  for (;;) {
    const char *b = s;
    const char *x = s;
    while (x < e && !(*x == sep[0] && (seplen == 1 || (x + 1 < e && x[1] == sep[1])))) x++;
    const char *fe = x;
    strata_field_trim(&b, &fe);
    if (n < MAX_FIELDS) f[n] = (field){b, fe};
    n++;
    if (x == e) return n;
    s = x + seplen;
  }
}

/* First character that is not a blank, or 0 for a blank line. */
static char first_char(const char *s, size_t n) {
  const char *b, *e;
  return strata_field_next(&s, s + n, &b, &e) ? *b : 0;
}

static int has_prefix(const char *s, size_t n, const char *pre) {
  size_t k = strlen(pre);
  return n >= k && memcmp(s, pre, k) == 0;
}

/* A parsed line waiting for its ids to be mapped. */
typedef struct {
  int64_t uid, iid;
  float value;
  size_t line;
} pending;

#define BATCH 32

typedef struct {
  const char *path;
  strata_format fmt;
  strata_ratings *rs;
  strata_idmap *umap, *imap;         /* insert into these (training) */
  const strata_idmap *ufind, *ifind; /* or look up in these (test) */
  int64_t last_uid;                  /* files are often grouped by user */
  uint32_t last_uidx;
  int have_last;
  int csv_header_checked;
  /* Matrix Market state */
  int mm_state; /* 0 want header, 1 want size line, 2 entries */
  int64_t mm_rows, mm_cols, mm_nnz, mm_seen;
  pending batch[BATCH];
  int nb;
} read_ctx;

static int bad_id(const read_ctx *c, size_t line, const char *what, field f, int why) {
  char q[STRATA_QUOTE_SIZE];
  strata_quote(q, sizeof q, f.p, (size_t)(f.e - f.p));
  if (why == STRATA__NUM_OVERFLOW)
    return strata_err_set(STRATA_ERANGE, "%s:%zu: %s '%s' %s", c->path, line, what, q,
                          strata__overflow_why(f.p, f.e));
  return strata_err_set(STRATA_EPARSE, "%s:%zu: %s '%s' is not an integer", c->path, line, what, q);
}

static int scan_id(const read_ctx *c, size_t line, const char *what, field f, int64_t *id) {
  int why = strata__scan_i64(f.p, f.e, id);
  if (why != STRATA__NUM_OK) return bad_id(c, line, what, f, why);
  if (*id < 0)
    return strata_err_set(STRATA_ERANGE, "%s:%zu: negative %s %lld", c->path, line, what,
                          (long long)*id);
  return 0;
}

static int scan_value(const read_ctx *c, size_t line, const char *what, field f, float *value) {
  double v;
  char q[STRATA_QUOTE_SIZE];
  if (strata__scan_f64(f.p, f.e, &v) != STRATA__NUM_OK)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: %s '%s' is not a number", c->path, line, what,
                          strata_quote(q, sizeof q, f.p, (size_t)(f.e - f.p)));
  /* Finite as a double can still overflow the stored float. */
  if (!isfinite((float)v))
    return strata_err_set(STRATA_ERANGE, "%s:%zu: %s '%s' is not a finite float", c->path, line,
                          what, strata_quote(q, sizeof q, f.p, (size_t)(f.e - f.p)));
  *value = (float)v;
  return 0;
}

/* Prefixes the message a callee left with the file and line. The copy is
 * needed because the message buffer is also strata_err_set's destination. */
static int with_line(const read_ctx *c, size_t line, int rc) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s", strata_err_msg());
  return strata_err_set(rc, "%s:%zu: %s", c->path, line, msg);
}

static int map_id(read_ctx *c, size_t line, strata_idmap *ins, const strata_idmap *find, int64_t id,
                  uint32_t *idx) {
  if (!ins) {
    *idx = strata_idmap_find(find, id);
    return 0;
  }
  int rc = strata_idmap_insert(ins, id, idx);
  if (rc) return with_line(c, line, rc);
  return 0;
}

static int flush_batch(read_ctx *c) {
  /* Look-ups in a big map miss the cache on nearly every line; touching all
   * of a batch's slots first lets those misses overlap instead of queueing. */
  for (int k = 0; k < c->nb; k++) {
    idmap_prefetch(c->umap ? c->umap : c->ufind, c->batch[k].uid);
    idmap_prefetch(c->imap ? c->imap : c->ifind, c->batch[k].iid);
  }
  int rc = 0;
  for (int k = 0; k < c->nb; k++) {
    const pending *b = &c->batch[k];
    uint32_t u, i;
    if (c->have_last && b->uid == c->last_uid) {
      u = c->last_uidx;
    } else {
      if ((rc = map_id(c, b->line, c->umap, c->ufind, b->uid, &u))) break;
      c->last_uid = b->uid;
      c->last_uidx = u;
      c->have_last = 1;
    }
    if ((rc = map_id(c, b->line, c->imap, c->ifind, b->iid, &i))) break;
    if ((rc = strata_ratings_push(c->rs, u, i, b->value))) {
      rc = with_line(c, b->line, rc);
      break;
    }
  }
  c->nb = 0;
  return rc;
}

static int add_rating(read_ctx *c, size_t line, int64_t uid, int64_t iid, float v) {
  c->batch[c->nb++] = (pending){uid, iid, v, line};
  return c->nb == BATCH ? flush_batch(c) : 0;
}

static int triple_line(read_ctx *c, size_t line, const field *f, int nf) {
  if (nf < 3)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: expected 3 fields (user item rating), got %d",
                          c->path, line, nf);
  if (nf > 4)
    return strata_err_set(STRATA_EPARSE,
                          "%s:%zu: expected 3 or 4 fields (user item rating [timestamp]), got %d",
                          c->path, line, nf);
  int64_t uid = 0, iid = 0;
  float v = 0;
  int rc;
  if ((rc = scan_id(c, line, "user id", f[0], &uid))) return rc;
  if ((rc = scan_id(c, line, "item id", f[1], &iid))) return rc;
  if ((rc = scan_value(c, line, "rating", f[2], &v))) return rc;
  /* The timestamp is not used; a 4th field of any content is accepted. */
  return add_rating(c, line, uid, iid, v);
}

static int mm_header(read_ctx *c, size_t line, const char *s, size_t n) {
  static const char want[][12] = {"matrix", "coordinate", "", "general"};
  static const char need[] = "(need '%%MatrixMarket matrix coordinate real|integer general')";
  field f[MAX_FIELDS];
  int nf = split_ws(s + strlen("%%MatrixMarket"), s + n, f);
  /* The first word that differs is named, so the message shows what the
   * file is (pattern, array, symmetric) however long its header line. */
  for (int k = 0; k < 4 && k < nf; k++) {
    size_t len = (size_t)(f[k].e - f[k].p);
    int ok;
    if (k == 2) {
      ok = (len == 4 && strncasecmp(f[k].p, "real", 4) == 0) ||
           (len == 7 && strncasecmp(f[k].p, "integer", 7) == 0);
    } else {
      ok = len == strlen(want[k]) && strncasecmp(f[k].p, want[k], len) == 0;
    }
    if (!ok) {
      char q[STRATA_QUOTE_SIZE];
      return strata_err_set(STRATA_EPARSE, "%s:%zu: unsupported Matrix Market header: '%s' %s",
                            c->path, line, strata_quote(q, sizeof q, f[k].p, len), need);
    }
  }
  if (nf != 4)
    return strata_err_set(STRATA_EPARSE,
                          "%s:%zu: unsupported Matrix Market header: %d words after "
                          "%%%%MatrixMarket %s",
                          c->path, line, nf, need);
  c->mm_state = 1;
  return 0;
}

static int mm_line(read_ctx *c, size_t line, const char *s, size_t n) {
  if (c->mm_state == 0) {
    if (!has_prefix(s, n, "%%MatrixMarket"))
      return strata_err_set(STRATA_EPARSE, "%s:%zu: expected a %%%%MatrixMarket header", c->path,
                            line);
    return mm_header(c, line, s, n);
  }
  field f[MAX_FIELDS];
  int nf = split_ws(s, s + n, f);
  int rc;
  if (c->mm_state == 1) {
    if (nf != 3)
      return strata_err_set(STRATA_EPARSE,
                            "%s:%zu: expected the size line 'rows cols entries', got %d fields",
                            c->path, line, nf);
    if ((rc = scan_id(c, line, "row count", f[0], &c->mm_rows))) return rc;
    if ((rc = scan_id(c, line, "column count", f[1], &c->mm_cols))) return rc;
    if ((rc = scan_id(c, line, "entry count", f[2], &c->mm_nnz))) return rc;
    c->mm_state = 2;
    return 0;
  }
  if (nf != 3)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: expected 3 fields (row col value), got %d",
                          c->path, line, nf);
  if (c->mm_seen == c->mm_nnz)
    return strata_err_set(STRATA_EPARSE, "%s:%zu: more entries than the %lld the header declares",
                          c->path, line, (long long)c->mm_nnz);
  int64_t i = 0, j = 0;
  float v = 0;
  int why;
  if ((why = strata__scan_i64(f[0].p, f[0].e, &i)) != STRATA__NUM_OK)
    return bad_id(c, line, "row index", f[0], why);
  if ((why = strata__scan_i64(f[1].p, f[1].e, &j)) != STRATA__NUM_OK)
    return bad_id(c, line, "column index", f[1], why);
  if (i < 1 || i > c->mm_rows)
    return strata_err_set(STRATA_ERANGE, "%s:%zu: row index %lld out of range 1..%lld", c->path,
                          line, (long long)i, (long long)c->mm_rows);
  if (j < 1 || j > c->mm_cols)
    return strata_err_set(STRATA_ERANGE, "%s:%zu: column index %lld out of range 1..%lld", c->path,
                          line, (long long)j, (long long)c->mm_cols);
  if ((rc = scan_value(c, line, "value", f[2], &v))) return rc;
  c->mm_seen++;
  return add_rating(c, line, i, j, v);
}

static int parse_line(read_ctx *c, size_t line, const char *s, size_t n) {
  field f[MAX_FIELDS];
  char first = first_char(s, n);
  if (!first) return 0;
  if (c->fmt == STRATA_FMT_AUTO) {
    if (has_prefix(s, n, "%%MatrixMarket")) {
      c->fmt = STRATA_FMT_MM;
    } else if (first == '#' || first == '%') {
      return 0;
    } else if (memmem(s, n, "::", 2)) {
      c->fmt = STRATA_FMT_DAT;
    } else if (memchr(s, ',', n)) {
      c->fmt = STRATA_FMT_CSV;
    } else if (memchr(s, '\t', n)) {
      c->fmt = STRATA_FMT_TSV;
    } else {
      c->fmt = STRATA_FMT_LIBMF;
    }
  }
  switch (c->fmt) {
    case STRATA_FMT_TSV:
    case STRATA_FMT_LIBMF:
      if (first == '#') return 0;
      return triple_line(c, line, f, split_ws(s, s + n, f));
    case STRATA_FMT_DAT: return triple_line(c, line, f, split_sep(s, s + n, "::", 2, f));
    case STRATA_FMT_CSV: {
      int nf = split_sep(s, s + n, ",", 1, f);
      if (!c->csv_header_checked) {
        c->csv_header_checked = 1;
        double v;
        /* Headers name their columns; a numeric first field is already data,
         * and a malformed one ("1.5", "-3") should be reported, not skipped. */
        if (strata__scan_f64(f[0].p, f[0].e, &v) != STRATA__NUM_OK) return 0;
      }
      return triple_line(c, line, f, nf);
    }
    case STRATA_FMT_MM: return first == '%' && c->mm_state > 0 ? 0 : mm_line(c, line, s, n);
    default:
      return strata_err_set(STRATA_EINVAL, "%s: unknown rating format %d", c->path, (int)c->fmt);
  }
}

/* Blanks, then an id of at most 18 digits (which cannot overflow int64) at
 * *s, then a blank: the id, with *s past the blanks after it; or -1. */
static inline int64_t fast_id(const char **s) {
  const char *p = *s;
  unsigned d = (unsigned)(unsigned char)*p - '0';
  if (d > 9) return -1;
  uint64_t v = d; /* unsigned: a longer run of digits wraps harmlessly, then is refused */
  const char *first = p;
  while ((d = (unsigned)(unsigned char)*++p - '0') <= 9) v = v * 10 + d;
  if (p - first > 18 || (*p != ' ' && *p != '\t')) return -1;
  do p++;
  while (*p == ' ' || *p == '\t');
  *s = p;
  return (int64_t)v;
}

/* The lines of a block [s, end) (whole lines, each ending in '\n'), the
 * first being line lineno + 1. Once the format is known to be blank
 * separated (tsv, libmf), a line "user item rating" of plain numbers takes
 * a scanner of its own; every other line, and every line of the other
 * formats, goes through parse_line, which keeps the rules and words the
 * errors. The same ratings either way. */
static int parse_block(read_ctx *c, size_t lineno, const char *s, const char *end) {
  int rc;
  while (s < end) {
    const char *ls = s;
    lineno++;
    if (c->fmt == STRATA_FMT_TSV || c->fmt == STRATA_FMT_LIBMF) {
      int64_t uid, iid;
      double v;
      const char *p = s;
      if ((uid = fast_id(&p)) >= 0 && (iid = fast_id(&p)) >= 0 &&
          (p = strata__scan_plain_f64(p, &v))) {
        /* Then the end of the line, or blanks, a timestamp (any text) and
         * the end. */
        if (*p == ' ' || *p == '\t') {
          while (*p == ' ' || *p == '\t') p++;
          while (*p != ' ' && *p != '\t' && *p != '\n') p++;
          while (*p == ' ' || *p == '\t') p++;
          if (p[-1] == '\r' && *p == '\n') p--;
        }
        if (*p == '\n' || (*p == '\r' && p[1] == '\n')) {
          /* At most 15 digits: finite as a float too. */
          if ((rc = add_rating(c, lineno, uid, iid, (float)v))) return rc;
          s = p + 1 + (*p == '\r');
          continue;
        }
      }
    }
    const char *nl = memchr(ls, '\n', (size_t)(end - ls));
    size_t n = (size_t)(nl - ls);
    if (n && ls[n - 1] == '\r') n--;
    if ((rc = parse_line(c, lineno, ls, n))) return rc;
    s = nl + 1;
  }
  return 0;
}

int strata_ratings_read(const char *path, strata_format fmt, const strata_idmap *users,
                        const strata_idmap *items, strata_ratings *rs) {
  int rc = 0;
  read_ctx c = {.path = path, .fmt = fmt, .rs = rs, .ufind = users, .ifind = items};
  strata_lines rd = {0};
  memset(rs, 0, sizeof *rs);

  if ((unsigned)fmt > STRATA_FMT_MM)
    return strata_err_set(STRATA_EINVAL, "%s: unknown rating format %d", path, (int)fmt);
  if ((rc = strata_lines_open(&rd, path))) return rc;
  if (!users) {
    if (!(rs->users = c.umap = strata_idmap_create())) {
      rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory for the user map", path);
      goto fail;
    }
  }
  if (!items) {
    if (!(rs->items = c.imap = strata_idmap_create())) {
      rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory for the item map", path);
      goto fail;
    }
  }

  const char *blk = NULL;
  size_t len = 0;
  while ((rc = strata_lines_block(&rd, &blk, &len)) > 0) {
    if ((rc = parse_block(&c, rd.lineno, blk, blk + len)) != 0) goto fail;
  }
  if (rc < 0) goto fail;
  if ((rc = flush_batch(&c)) != 0) goto fail;

  if (c.fmt == STRATA_FMT_MM && c.mm_state == 2 && c.mm_seen != c.mm_nnz) {
    rc = strata_err_set(STRATA_EPARSE, "%s: found %lld entries, the header declares %lld", path,
                        (long long)c.mm_seen, (long long)c.mm_nnz);
    goto fail;
  }
  if (rs->n == 0) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no ratings", path);
    goto fail;
  }
  rs->n_users = strata_idmap_size(users ? users : rs->users);
  rs->n_items = strata_idmap_size(items ? items : rs->items);
  strata_lines_close(&rd);
  return 0;

fail:
  strata_lines_close(&rd);
  strata_ratings_close(rs);
  return rc;
}

/* ---- train/test split -------------------------------------------------- */

int strata_ratings_split(strata_ratings *train, double fraction, uint64_t seed,
                         strata_ratings *test) {
  if (!(fraction > 0.0 && fraction < 1.0))
    return strata_err_set(STRATA_EUSAGE, "test fraction %g must be strictly between 0 and 1",
                          fraction);
  memset(test, 0, sizeof *test);
  test->n_users = train->n_users;
  test->n_items = train->n_items;

  /* Count first with a copy of the generator so the test array is sized once
   * and a failed allocation leaves train untouched. */
  strata_rng rng, count_rng;
  strata_rng_seed(&rng, seed);
  count_rng = rng;
  size_t n_test = 0;
  for (size_t k = 0; k < train->n; k++) n_test += strata_rng_uniform(&count_rng) < fraction;
  if (n_test) {
    test->r = strata_malloc(n_test * sizeof *test->r);
    if (!test->r)
      return strata_err_set(STRATA_ENOMEM, "split: out of memory for %zu test ratings", n_test);
    test->cap = n_test;
  }
  size_t kept = 0;
  for (size_t k = 0; k < train->n; k++) {
    if (strata_rng_uniform(&rng) < fraction)
      test->r[test->n++] = train->r[k];
    else
      train->r[kept++] = train->r[k];
  }
  train->n = kept;
  return 0;
}
