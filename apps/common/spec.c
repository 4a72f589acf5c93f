/*
 * The "synth:key=value,..." parser shared by the synthetic generators.
 */
#include "apps/common/spec.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/error.h"

/* Digits only: strtoull would accept a sign, blanks and wrap "-1" around. */
static int scan_u64(const char *p, const char *e, uint64_t *out) {
  if (p == e) return -1;
  uint64_t v = 0;
  for (; p < e; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (d > 9 || v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

static int scan_double(const char *p, const char *e, double *out) {
  char tmp[64];
  size_t n = (size_t)(e - p);
  if (n == 0 || n >= sizeof tmp || isspace((unsigned char)p[0])) return -1;
  memcpy(tmp, p, n);
  tmp[n] = '\0';
  char *end;
  double v = strtod(tmp, &end);
  if (end != tmp + n || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int set_value(void *spec, const strata__spec_key *key, const char *p, const char *e) {
  void *dst = (char *)spec + key->off;
  uint64_t u;
  double d;
  switch (key->kind) {
    case STRATA__SPEC_U32:
      if (scan_u64(p, e, &u) || u == 0 || u > UINT32_MAX) return -1;
      *(uint32_t *)dst = (uint32_t)u;
      return 0;
    case STRATA__SPEC_U64:
      if (scan_u64(p, e, &u) || u == 0) return -1;
      *(uint64_t *)dst = u;
      return 0;
    case STRATA__SPEC_SEED:
      if (scan_u64(p, e, &u)) return -1;
      *(uint64_t *)dst = u;
      return 0;
    case STRATA__SPEC_NONNEG:
      if (scan_double(p, e, &d) || d < 0) return -1;
      *(double *)dst = d;
      return 0;
    case STRATA__SPEC_POSITIVE:
      if (scan_double(p, e, &d) || !(d > 0)) return -1;
      *(double *)dst = d;
      return 0;
  }
  return -1;
}

static const char *rule(strata__spec_kind kind) {
  switch (kind) {
    case STRATA__SPEC_U32: return "a positive integer below 2^32";
    case STRATA__SPEC_U64: return "a positive integer";
    case STRATA__SPEC_SEED: return "a non-negative integer";
    case STRATA__SPEC_NONNEG: return "a finite number >= 0";
    case STRATA__SPEC_POSITIVE: return "a finite number > 0";
  }
  return "";
}

/* "a, b, c or d" */
static void key_list(const strata__spec_key *keys, size_t n, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t k = 0; k < n && used < cap; k++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%s",
                             k == 0 ? "" : k + 1 == n ? " or " : ", ", keys[k].name);
}

/* The spec is quoted up to the empty field at s, so that the message
 * points at it however long the spec. */
static int empty_field(const char *text, const char *s) {
  char q[STRATA_QUOTE_SIZE];
  size_t at = (size_t)(s - text);
  size_t from = at > STRATA_QUOTE_MAX ? at - STRATA_QUOTE_MAX : 0;
  return strata_err_set(STRATA_EUSAGE, "--data synth: empty field after '%s%s'",
                        from ? "..." : "", strata_quote(q, sizeof q, text + from, at - from));
}

int strata__spec_parse(const char *text, const strata__spec_key *keys, size_t n, void *spec,
                       size_t size) {
  static const char prefix[] = "synth";
  char q[STRATA_QUOTE_SIZE];
  if (strncmp(text, prefix, sizeof prefix - 1) != 0 ||
      (text[sizeof prefix - 1] != '\0' && text[sizeof prefix - 1] != ':'))
    return strata_err_set(STRATA_EUSAGE,
                          "--data '%s': not a synthetic spec (expected synth:key=value,...)",
                          strata_quote(q, sizeof q, text, strlen(text)));
  /* Parse into a copy so a bad spec leaves the caller's values untouched. */
  void *out = strata_malloc(size);
  if (!out) return strata_err_set(STRATA_ENOMEM, "--data synth: out of memory");
  memcpy(out, spec, size);
  int rc = 0;
  const char *s = text + sizeof prefix - 1;
  if (*s == ':') s++;
  while (*s && !rc) {
    const char *end = strchr(s, ',');
    if (!end) end = s + strlen(s);
    const char *eq = memchr(s, '=', (size_t)(end - s));
    size_t len = (size_t)(end - s);
    if (len == 0) {
      rc = empty_field(text, s);
      break;
    }
    if (!eq) {
      rc = strata_err_set(STRATA_EUSAGE, "--data synth: expected key=value, got '%s'",
                          strata_quote(q, sizeof q, s, len));
      break;
    }
    size_t klen = (size_t)(eq - s), k = 0;
    while (k < n && !(strlen(keys[k].name) == klen && memcmp(keys[k].name, s, klen) == 0)) k++;
    if (k == n) {
      char list[256];
      key_list(keys, n, list, sizeof list);
      rc = strata_err_set(STRATA_EUSAGE, "--data synth: unknown key '%s' (expected %s)",
                          strata_quote(q, sizeof q, s, klen), list);
    } else if (set_value(out, &keys[k], eq + 1, end) != 0) {
      rc = strata_err_set(STRATA_EUSAGE, "--data synth: bad value '%s' for '%s' (need %s)",
                          strata_quote(q, sizeof q, eq + 1, (size_t)(end - eq - 1)), keys[k].name,
                          rule(keys[k].kind));
    } else {
      s = *end ? end + 1 : end;
      if (*end && !*s) rc = empty_field(text, s);
    }
  }
  if (!rc) memcpy(spec, out, size);
  strata_free(out);
  return rc;
}
