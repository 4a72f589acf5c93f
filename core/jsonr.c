/*
 * The JSON reader of core/jsonr.h: recursive descent with a depth bound,
 * nodes and decoded strings in an arena of chunks that never move, so the
 * tree's pointers stay valid until the document is freed.
 */
#include "core/jsonr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"

typedef struct chunk {
  struct chunk *prev;
  size_t used, cap;
  _Alignas(16) unsigned char mem[];
} chunk;

struct strata__json_doc {
  chunk *arena;
  strata__jv *root;
};

typedef struct parser {
  const char *s, *e, *p;
  strata__json_doc *doc;
  int depth;
} parser;

static void *arena_alloc(strata__json_doc *d, size_t n) {
  n = (n + 15) & ~(size_t)15;
  chunk *c = d->arena;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 8192 ? n : 8192;
    chunk *nc = strata_malloc(sizeof *nc + cap);
    if (!nc) return NULL;
    nc->prev = c;
    nc->used = 0;
    nc->cap = cap;
    d->arena = c = nc;
  }
  void *r = c->mem + c->used;
  c->used += n;
  return r;
}

/* "line L, column C" of the parser's position, for messages. */
static int fail_at(parser *ps, const char *what) {
  int line = 1, col = 1;
  for (const char *q = ps->s; q < ps->p && q < ps->e; q++) {
    if (*q == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  return strata_err_set(STRATA_EPARSE, "line %d, column %d: %s", line, col, what);
}

static int oom(void) { return strata_err_set(STRATA_ENOMEM, "json: out of memory"); }

static void skip_ws(parser *ps) {
  while (ps->p < ps->e && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

static int literal(parser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->e - ps->p) < n || memcmp(ps->p, word, n) != 0) return -1;
  ps->p += n;
  return 0;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                 : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                 : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                        : 16u;
    if (d > 15) return -1;
    v = v << 4 | d;
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xc0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | cp >> 18);
  o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len;
  unsigned cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  /* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

/* A string at ps->p (the opening quote): decoded into the arena. */
static int parse_string(parser *ps, const char **out, size_t *out_len) {
  ps->p++; /* the quote */
  const char *start = ps->p;
  /* The decoded text is never longer than the source. */
  const char *q = start;
  while (q < ps->e && *q != '"') q += *q == '\\' && q + 1 < ps->e ? 2 : 1;
  if (q >= ps->e) return fail_at(ps, "unterminated string");
  char *buf = arena_alloc(ps->doc, (size_t)(q - start) + 1);
  if (!buf) return oom();
  size_t o = 0;
  while (ps->p < q) {
    unsigned char c = (unsigned char)*ps->p;
    if (c < 0x20) return fail_at(ps, "control character in a string");
    if (c != '\\') {
      size_t n = utf8_len((const unsigned char *)ps->p, (size_t)(q - ps->p));
      if (!n) return fail_at(ps, "invalid UTF-8 in a string");
      memcpy(buf + o, ps->p, n);
      o += n;
      ps->p += n;
      continue;
    }
    ps->p++;
    char esc = *ps->p++;
    switch (esc) {
      case '"': buf[o++] = '"'; break;
      case '\\': buf[o++] = '\\'; break;
      case '/': buf[o++] = '/'; break;
      case 'b': buf[o++] = '\b'; break;
      case 'f': buf[o++] = '\f'; break;
      case 'n': buf[o++] = '\n'; break;
      case 'r': buf[o++] = '\r'; break;
      case 't': buf[o++] = '\t'; break;
      case 'u': {
        unsigned cp, lo;
        if (q - ps->p < 4 || hex4(ps->p, &cp)) return fail_at(ps, "bad \\u escape");
        ps->p += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff) return fail_at(ps, "unpaired surrogate in a string");
        if (cp >= 0xd800 && cp <= 0xdbff) {
          if (q - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, &lo) ||
              lo < 0xdc00 || lo > 0xdfff)
            return fail_at(ps, "unpaired surrogate in a string");
          ps->p += 6;
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        if (cp == 0) return fail_at(ps, "\\u0000 in a string");
        /* \uXXXX (6 bytes, 12 for a pair) decodes to at most 4. */
        o += put_utf8(buf + o, cp);
        break;
      }
      default: ps->p--; return fail_at(ps, "bad escape in a string");
    }
  }
  buf[o] = '\0';
  ps->p = q + 1;
  *out = buf;
  *out_len = o;
  return 0;
}

static int parse_number(parser *ps, double *out) {
  const char *p = ps->p, *e = ps->e;
  const char *start = p;
  if (p < e && *p == '-') p++;
  if (p >= e || !(*p >= '0' && *p <= '9')) return fail_at(ps, "expected a value");
  if (*p == '0') {
    p++;
  } else {
    while (p < e && *p >= '0' && *p <= '9') p++;
  }
  if (p < e && *p == '.') {
    p++;
    if (p >= e || !(*p >= '0' && *p <= '9')) return fail_at(ps, "expected digits after '.'");
    while (p < e && *p >= '0' && *p <= '9') p++;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < e && (*p == '+' || *p == '-')) p++;
    if (p >= e || !(*p >= '0' && *p <= '9')) return fail_at(ps, "expected an exponent");
    while (p < e && *p >= '0' && *p <= '9') p++;
  }
  char tmp[64];
  size_t n = (size_t)(p - start);
  if (n >= sizeof tmp) return fail_at(ps, "number too long");
  memcpy(tmp, start, n);
  tmp[n] = '\0';
  double v = strtod(tmp, NULL);
  if (!isfinite(v)) return fail_at(ps, "number out of range");
  *out = v;
  ps->p = p;
  return 0;
}

static int parse_value(parser *ps, strata__jv *v);

/* An array or object at ps->p; members linked in order. */
static int parse_container(parser *ps, strata__jv *v, int object) {
  if (++ps->depth > STRATA__JSONR_DEPTH) return fail_at(ps, "nesting too deep");
  v->kind = object ? STRATA__JV_OBJECT : STRATA__JV_ARRAY;
  ps->p++;
  skip_ws(ps);
  char close = object ? '}' : ']';
  strata__jv **tail = (strata__jv **)&v->child;
  if (ps->p < ps->e && *ps->p == close) {
    ps->p++;
    ps->depth--;
    return 0;
  }
  for (;;) {
    strata__jv *m = arena_alloc(ps->doc, sizeof *m);
    if (!m) return oom();
    memset(m, 0, sizeof *m);
    skip_ws(ps);
    if (object) {
      size_t klen;
      if (ps->p >= ps->e || *ps->p != '"') return fail_at(ps, "expected a key");
      int rc = parse_string(ps, &m->key, &klen);
      if (rc) return rc;
      skip_ws(ps);
      if (ps->p >= ps->e || *ps->p != ':') return fail_at(ps, "expected ':'");
      ps->p++;
    }
    int rc = parse_value(ps, m);
    if (rc) return rc;
    *tail = m;
    tail = (strata__jv **)&m->next;
    v->len++;
    skip_ws(ps);
    if (ps->p < ps->e && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->e && *ps->p == close) {
      ps->p++;
      ps->depth--;
      return 0;
    }
    return fail_at(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int parse_value(parser *ps, strata__jv *v) {
  skip_ws(ps);
  if (ps->p >= ps->e) return fail_at(ps, "expected a value");
  switch (*ps->p) {
    case '{': return parse_container(ps, v, 1);
    case '[': return parse_container(ps, v, 0);
    case '"':
      v->kind = STRATA__JV_STRING;
      return parse_string(ps, &v->str, &v->len);
    case 't':
    case 'f':
      v->kind = STRATA__JV_BOOL;
      v->boolean = *ps->p == 't';
      if (literal(ps, v->boolean ? "true" : "false")) return fail_at(ps, "expected a value");
      return 0;
    case 'n':
      v->kind = STRATA__JV_NULL;
      if (literal(ps, "null")) return fail_at(ps, "expected a value");
      return 0;
    default:
      v->kind = STRATA__JV_NUMBER;
      return parse_number(ps, &v->number);
  }
}

int strata__json_parse(const char *text, size_t len, strata__json_doc **out) {
  *out = NULL;
  strata__json_doc *d = strata_calloc(1, sizeof *d);
  if (!d) return oom();
  parser ps = {text, text + len, text, d, 0};
  int rc = 0;
  d->root = arena_alloc(d, sizeof *d->root);
  if (!d->root) {
    rc = oom();
    goto fail;
  }
  memset(d->root, 0, sizeof *d->root);
  if ((rc = parse_value(&ps, d->root))) goto fail;
  skip_ws(&ps);
  if (ps.p != ps.e) {
    rc = fail_at(&ps, "text after the value");
    goto fail;
  }
  *out = d;
  return 0;
fail:
  strata__json_free(d);
  return rc;
}

void strata__json_free(strata__json_doc *d) {
  if (!d) return;
  for (chunk *c = d->arena; c;) {
    chunk *prev = c->prev;
    strata_free(c);
    c = prev;
  }
  strata_free(d);
}

const strata__jv *strata__json_root(const strata__json_doc *d) { return d->root; }

const strata__jv *strata__json_get(const strata__jv *o, const char *key) {
  if (!o || o->kind != STRATA__JV_OBJECT) return NULL;
  for (const strata__jv *m = o->child; m; m = m->next)
    if (strcmp(m->key, key) == 0) return m;
  return NULL;
}

const char *strata__json_str(const strata__jv *o, const char *key) {
  const strata__jv *m = strata__json_get(o, key);
  return m && m->kind == STRATA__JV_STRING ? m->str : NULL;
}

int strata__json_int(const strata__jv *o, const char *key, int64_t lo, int64_t hi, int64_t *out) {
  const strata__jv *m = strata__json_get(o, key);
  if (!m || m->kind != STRATA__JV_NUMBER) return -1;
  double v = m->number;
  /* Bounds compare as integers: (double)hi may round past hi (INT64_MAX
   * becomes 2^63, which no int64_t holds), and converting a double outside
   * [-2^63, 2^63) to int64_t is undefined. */
  if (v != floor(v) || v < -0x1p63 || v >= 0x1p63) return -1;
  int64_t i = (int64_t)v;
  if (i < lo || i > hi) return -1;
  *out = i;
  return 0;
}
