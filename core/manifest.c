/*
 * The checkpoint manifest (core/manifest.h): strata's JSON writer one way,
 * core/jsonr.h and a field-by-field check the other.
 */
#include "core/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonr.h"
#include "strata/core.h"
#include "strata/json.h"

#define RULE "seeded from (seed, pass, block, chunk); none spans passes"
#define MAX_EXACT 9007199254740992.0 /* 2^53: integers a JSON number holds exactly */

static void hex(char out[17], uint64_t v) { snprintf(out, 17, "%016" PRIx64, v); }

int strata__manifest_write(FILE *f, const strata__manifest *m) {
  char h[17], seed[24];
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "format", STRATA__MANIFEST_FORMAT);
  strata_json_string(&j, "strata", m->strata);
  strata_json_string(&j, "build", m->build);
  strata_json_string(&j, "written", m->written);
  strata_json_string(&j, "app", m->app);
  strata_json_string(&j, "mode", m->mode);
  strata_json_int(&j, "workers", m->workers);
  strata_json_int(&j, "passes", m->passes);
  if (m->next_clock >= 0) strata_json_int(&j, "next_clock", m->next_clock);
  strata_json_string(&j, "byte_order", m->byte_order);
  strata_json_string(&j, "layout", m->layout);
  strata_json_object_begin(&j, "data");
  strata_json_int(&j, "bytes", (int64_t)m->data_bytes);
  hex(h, m->data_sum);
  strata_json_string(&j, "checksum", h);
  strata_json_object_end(&j);
  /* Every random stream drawn during passes is seeded from (seed, pass,
   * block, chunk) and none carries over a pass: the seed and the next
   * pass position them all. The seed is text: a uint64 may not fit a JSON
   * number exactly. */
  strata_json_object_begin(&j, "random_streams");
  snprintf(seed, sizeof seed, "%" PRIu64, m->seed);
  strata_json_string(&j, "seed", seed);
  strata_json_int(&j, "next_pass", m->passes);
  strata_json_string(&j, "rule", RULE);
  strata_json_object_end(&j);
  strata_json_object_begin(&j, "settings");
  for (int i = 0; i < m->n_settings; i++) {
    const char *s = m->settings[i], *eq = strchr(s, '=');
    if (!eq) continue;
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
    strata_json_string(&j, key, eq + 1);
  }
  strata_json_object_end(&j);
  strata_json_array_begin(&j, "parts");
  for (int i = 0; i <= m->workers; i++) {
    const strata__manifest_part *p = &m->parts[i];
    strata_json_object_begin(&j, NULL);
    strata_json_string(&j, "file", p->file);
    strata_json_int(&j, "worker", p->worker);
    strata_json_int(&j, "bytes", (int64_t)p->bytes);
    hex(h, p->sum);
    strata_json_string(&j, "checksum", h);
    strata_json_object_end(&j);
  }
  strata_json_array_end(&j);
  strata_json_object_end(&j);
  fputc('\n', f);
  return ferror(f) ? STRATA_EIO : 0;
}

static int missing(const char *what) {
  return strata_err_set(STRATA_EPARSE, "no valid '%s'", what);
}

/* A string member into out (room n), at most n - 1 bytes. */
static int get_str(const strata__jv *o, const char *key, char *out, size_t n) {
  const strata__jv *v = strata__json_get(o, key);
  if (!v || v->kind != STRATA__JV_STRING || v->len >= n) return missing(key);
  memcpy(out, v->str, v->len + 1);
  return 0;
}

static int get_hex(const strata__jv *o, const char *key, uint64_t *out) {
  const char *s = strata__json_str(o, key);
  if (!s || strlen(s) != 16) return missing(key);
  uint64_t v = 0;
  for (const char *p = s; *p; p++) {
    unsigned d = *p >= '0' && *p <= '9' ? (unsigned)(*p - '0')
                 : *p >= 'a' && *p <= 'f' ? (unsigned)(*p - 'a' + 10) : 16u;
    if (d > 15) return missing(key);
    v = v << 4 | d;
  }
  *out = v;
  return 0;
}

static int get_int(const strata__jv *o, const char *key, int64_t lo, int64_t hi, int64_t *out) {
  return strata__json_int(o, key, lo, hi, out) ? missing(key) : 0;
}

/* Text from the file, as a message may quote it (strata_quote). */
static const char *quoted(char q[STRATA_QUOTE_SIZE], const char *s) {
  return strata_quote(q, STRATA_QUOTE_SIZE, s, strlen(s));
}

static int read_settings(const strata__jv *set, strata__manifest *m) {
  if (!set || set->kind != STRATA__JV_OBJECT) return missing("settings");
  size_t bytes = 0;
  char q[STRATA_QUOTE_SIZE];
  for (const strata__jv *s = set->child; s; s = s->next) {
    if (s->kind != STRATA__JV_STRING || !s->key[0] || strchr(s->key, '=') || strlen(s->key) >= 128)
      return strata_err_set(STRATA_EPARSE, "settings: '%s' is not a name and its value as text",
                            quoted(q, s->key));
    for (const strata__jv *t = set->child; t != s; t = t->next)
      if (strcmp(t->key, s->key) == 0)
        return strata_err_set(STRATA_EPARSE, "settings: '%s' twice", quoted(q, s->key));
    bytes += strlen(s->key) + 1 + s->len + 1;
  }
  size_t n = set->len;
  m->settings = strata_malloc(n * sizeof *m->settings + bytes + 1);
  if (!m->settings) return strata_err_set(STRATA_ENOMEM, "out of memory");
  char *dst = (char *)(m->settings + n);
  for (const strata__jv *s = set->child; s; s = s->next) {
    m->settings[m->n_settings++] = dst;
    dst += sprintf(dst, "%s=%s", s->key, s->str) + 1;
  }
  return 0;
}

static int read_parts(const strata__jv *parts, strata__manifest *m) {
  if (!parts || parts->kind != STRATA__JV_ARRAY || parts->len != (size_t)m->workers + 1)
    return strata_err_set(STRATA_EPARSE, "'parts' must list the coordinator's part and each of "
                          "the %d workers' once", m->workers);
  m->parts = strata_calloc((size_t)m->workers + 1, sizeof *m->parts);
  if (!m->parts) return strata_err_set(STRATA_ENOMEM, "out of memory");
  for (int i = 0; i <= m->workers; i++) m->parts[i].worker = -2; /* not seen */
  for (const strata__jv *p = parts->child; p; p = p->next) {
    int64_t w, bytes;
    strata__manifest_part part;
    int rc = get_int(p, "worker", -1, m->workers - 1, &w);
    if (!rc) rc = get_str(p, "file", part.file, sizeof part.file);
    if (!rc) rc = get_int(p, "bytes", 0, (int64_t)MAX_EXACT, &bytes);
    if (!rc) rc = get_hex(p, "checksum", &part.sum);
    if (rc) {
      char msg[256];
      snprintf(msg, sizeof msg, "%s", strata_err_msg());
      return strata_err_set(STRATA_EPARSE, "parts: %s", msg);
    }
    char q[STRATA_QUOTE_SIZE];
    if (!part.file[0] || strchr(part.file, '/') || !strcmp(part.file, ".") || !strcmp(part.file, ".."))
      return strata_err_set(STRATA_EPARSE, "parts: '%s' is not a file name", quoted(q, part.file));
    if (m->parts[w + 1].worker != -2)
      return strata_err_set(STRATA_EPARSE, "parts: worker %d's part twice", (int)w);
    part.worker = (int32_t)w;
    part.bytes = (uint64_t)bytes;
    m->parts[w + 1] = part;
  }
  return 0;
}

static int read_doc(const strata__jv *root, strata__manifest *m) {
  char fmt[32];
  int64_t v;
  if (!root || root->kind != STRATA__JV_OBJECT) return strata_err_set(STRATA_EPARSE, "not an object");
  int rc = get_str(root, "format", fmt, sizeof fmt);
  if (!rc && strcmp(fmt, STRATA__MANIFEST_FORMAT) != 0)
    return strata_err_set(STRATA_EPARSE, "not a strata checkpoint manifest (%s)", STRATA__MANIFEST_FORMAT);
  if (!rc) rc = get_str(root, "strata", m->strata, sizeof m->strata);
  if (!rc) rc = get_str(root, "build", m->build, sizeof m->build);
  if (!rc) rc = get_str(root, "written", m->written, sizeof m->written);
  if (!rc) rc = get_str(root, "app", m->app, sizeof m->app);
  if (!rc) rc = get_str(root, "mode", m->mode, sizeof m->mode);
  if (!rc) rc = get_str(root, "byte_order", m->byte_order, sizeof m->byte_order);
  if (!rc) rc = get_str(root, "layout", m->layout, sizeof m->layout);
  if (!rc && !(rc = get_int(root, "workers", 1, STRATA__MANIFEST_WORKERS, &v))) m->workers = (int)v;
  if (!rc && !(rc = get_int(root, "passes", 1, 1000000000, &v))) m->passes = (int)v;
  m->next_clock = -1;
  if (!rc && strata__json_get(root, "next_clock"))
    rc = get_int(root, "next_clock", 0, (int64_t)MAX_EXACT, &m->next_clock);
  const strata__jv *data = strata__json_get(root, "data");
  if (!rc && !(rc = get_int(data, "bytes", 0, (int64_t)MAX_EXACT, &v))) m->data_bytes = (uint64_t)v;
  if (!rc) rc = get_hex(data, "checksum", &m->data_sum);
  const strata__jv *rs = strata__json_get(root, "random_streams");
  const char *seed = strata__json_str(rs, "seed");
  if (!rc) {
    char *end = NULL;
    errno = 0;
    if (!seed || !(*seed >= '0' && *seed <= '9') || ((m->seed = strtoull(seed, &end, 10)), *end) ||
        errno)
      rc = missing("seed");
  }
  if (!rc && (rc = get_int(rs, "next_pass", 0, 1000000000, &v)) == 0 && v != m->passes)
    rc = strata_err_set(STRATA_EPARSE, "next_pass %lld is not the passes, %d", (long long)v, m->passes);
  if (!rc) rc = read_settings(strata__json_get(root, "settings"), m);
  if (!rc) rc = read_parts(strata__json_get(root, "parts"), m);
  return rc;
}

int strata__manifest_read(const char *text, size_t len, strata__manifest *m) {
  memset(m, 0, sizeof *m);
  strata__json_doc *doc = NULL;
  int rc = strata__json_parse(text, len, &doc);
  if (!rc) rc = read_doc(strata__json_root(doc), m);
  strata__json_free(doc);
  if (rc) strata__manifest_free(m);
  return rc;
}

void strata__manifest_free(strata__manifest *m) {
  strata_free(m->settings);
  strata_free(m->parts);
  memset(m, 0, sizeof *m);
}

const char *strata__manifest_setting(const strata__manifest *m, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < m->n_settings; i++)
    if (strncmp(m->settings[i], name, n) == 0 && m->settings[i][n] == '=') return m->settings[i] + n + 1;
  return NULL;
}
