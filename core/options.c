#include "strata/options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"

/* A spec has at most this many keys: required keys are tracked in a mask. */
#define MAX_KEYS 32
/* A spec's value is copied out of its text to be converted; numbers and
 * choices are far shorter. */
#define MAX_VALUE 128

/* Command-line text as messages quote it (see strata_quote). */
static const char *quoted(char q[STRATA_QUOTE_SIZE], const char *text) {
  return strata_quote(q, STRATA_QUOTE_SIZE, text, strlen(text));
}

static strata_opt_type base_type(const strata_option *o) {
  return (strata_opt_type)(o->type & STRATA_OPT_TYPE_MASK);
}

static void *field(void *base, size_t offset) { return (char *)base + offset; }

/* The index of v among choices ("a|b|c"), or -1. */
static int choice_index(const char *choices, const char *v) {
  size_t n = strlen(v);
  int i = 0;
  for (const char *p = choices; p && *p; i++) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0) return i;
    p = bar ? bar + 1 : NULL;
  }
  return -1;
}

/* The choice at index i, as a pointer into choices and its length. */
static const char *choice_at(const char *choices, int i, size_t *len) {
  const char *p = choices;
  for (; p && i > 0; i--) {
    p = strchr(p, '|');
    if (p) p++;
  }
  if (!p) return NULL;
  const char *bar = strchr(p, '|');
  *len = bar ? (size_t)(bar - p) : strlen(p);
  return p;
}

static int in_bounds(const char *who, const strata_option *o, double num, const char *text) {
  char q[STRATA_QUOTE_SIZE];
  int open = (o->type & STRATA_OPT_OPEN_MIN) != 0;
  if (!(o->min < o->max) || ((open ? num > o->min : num >= o->min) && num <= o->max)) return 0;
  return strata_err_set(STRATA_EUSAGE, "%s: must be in %c%.10g, %.10g] (got %s)", who, open ? '(' : '[',
                        o->min, o->max, quoted(q, text));
}

static int store_spec(void *base, const strata_option *o, const char *text);

/* Converts and validates text for one option into the struct at base; `who`
 * names the option in messages ("--rank", "--straggler 'delay=x': delay"). */
static int store(void *base, const strata_option *o, const char *text, const char *who) {
  void *dst = field(base, o->offset);
  char *end = NULL;
  double num = 0;
  char q[STRATA_QUOTE_SIZE];
  int rc = 0;
  int *given = NULL;
  strata_opt_type t = base_type(o);
  /* An optional value converts as its plain type into `value`, its first member. */
  if (t == STRATA_OPT_INT_OPTIONAL) {
    given = &((strata_opt_int *)dst)->given;
    t = STRATA_OPT_INT;
  } else if (t == STRATA_OPT_DOUBLE_OPTIONAL) {
    given = &((strata_opt_double *)dst)->given;
    t = STRATA_OPT_DOUBLE;
  }
  switch (t) {
    case STRATA_OPT_FLAG:
      *(int *)dst = 1;
      return 0;
    case STRATA_OPT_STRING:
      *(const char **)dst = text;
      return 0;
    case STRATA_OPT_CHOICE:
    case STRATA_OPT_ENUM: {
      int i = choice_index(o->choices, text);
      if (i < 0)
        return strata_err_set(STRATA_EUSAGE, "%s: '%s' is not one of %s", who, quoted(q, text),
                              o->choices);
      if (t == STRATA_OPT_ENUM)
        *(int *)dst = i;
      else
        *(const char **)dst = text;
      return 0;
    }
    case STRATA_OPT_SPEC:
      return store_spec(base, o, text);
    case STRATA_OPT_U64: {
      /* strtoull accepts "-1" as a huge number; a sign is never valid here. */
      const char *p = text;
      while (*p == ' ' || *p == '\t') p++;
      errno = 0;
      unsigned long long v = strtoull(text, &end, 10);
      if (*p == '-' || *p == '+' || errno || end == text || *end)
        return strata_err_set(STRATA_EUSAGE, "%s: '%s' is not a non-negative integer", who,
                              quoted(q, text));
      if ((rc = in_bounds(who, o, (double)v, text))) return rc;
      *(uint64_t *)dst = (uint64_t)v;
      break;
    }
    case STRATA_OPT_INT: {
      errno = 0;
      long long v = strtoll(text, &end, 10);
      if (errno || end == text || *end)
        return strata_err_set(STRATA_EUSAGE, "%s: '%s' is not an integer", who, quoted(q, text));
      if (v < -2147483647LL || v > 2147483647LL)
        return strata_err_set(STRATA_EUSAGE, "%s: %s is out of range", who, quoted(q, text));
      if ((rc = in_bounds(who, o, (double)v, text))) return rc;
      *(int *)dst = (int)v;
      break;
    }
    case STRATA_OPT_DOUBLE:
      errno = 0;
      num = strtod(text, &end);
      if (errno || end == text || *end || !isfinite(num))
        return strata_err_set(STRATA_EUSAGE, "%s: '%s' is not a finite number", who,
                              quoted(q, text));
      if ((rc = in_bounds(who, o, num, text))) return rc;
      *(double *)dst = num;
      break;
    default:
      return strata_err_set(STRATA_EINVAL, "%s: bad option table", who);
  }
  if (given) *given = 1;
  return 0;
}

static int store_default(void *base, const strata_option *o, const char *who);

/* Every key of spec o back to its default. */
static int keys_default(void *base, const strata_option *o, const char *who) {
  for (const strata_option *k = o->keys; k->name; k++) {
    char kwho[256];
    snprintf(kwho, sizeof kwho, "%s: %s", who, k->name);
    strata_opt_type t = base_type(k);
    if ((t != STRATA_OPT_INT && t != STRATA_OPT_U64 && t != STRATA_OPT_DOUBLE &&
         t != STRATA_OPT_ENUM) ||
        k - o->keys >= MAX_KEYS)
      return strata_err_set(STRATA_EINVAL, "%s: not a valid key of a spec", kwho);
    int rc = store_default(base, k, kwho);
    if (rc) return rc;
  }
  return 0;
}

/* Stores o's default (zero without one; a flag is always off). */
static int store_default(void *base, const strata_option *o, const char *who) {
  void *dst = field(base, o->offset);
  int rc = 0;
  switch (base_type(o)) {
    case STRATA_OPT_FLAG: *(int *)dst = 0; return 0;
    case STRATA_OPT_INT:
    case STRATA_OPT_ENUM: *(int *)dst = 0; break;
    case STRATA_OPT_U64: *(uint64_t *)dst = 0; break;
    case STRATA_OPT_DOUBLE: *(double *)dst = 0; break;
    case STRATA_OPT_INT_OPTIONAL: *(strata_opt_int *)dst = (strata_opt_int){0, 0}; break;
    case STRATA_OPT_DOUBLE_OPTIONAL: *(strata_opt_double *)dst = (strata_opt_double){0, 0}; break;
    case STRATA_OPT_STRING:
    case STRATA_OPT_CHOICE: *(const char **)dst = NULL; break;
    case STRATA_OPT_SPEC:
      *(const char **)dst = NULL;
      if ((rc = keys_default(base, o, who))) return rc;
      break;
    default: return strata_err_set(STRATA_EINVAL, "%s: bad option table", who);
  }
  if (o->def) rc = store(base, o, o->def, who);
  /* A default is not a value given. */
  if (base_type(o) == STRATA_OPT_INT_OPTIONAL) ((strata_opt_int *)dst)->given = 0;
  if (base_type(o) == STRATA_OPT_DOUBLE_OPTIONAL) ((strata_opt_double *)dst)->given = 0;
  return rc;
}

/* A spec: every key back to its default, then the pairs of text in order. */
static int store_spec(void *base, const strata_option *o, const char *text) {
  char who[64 + STRATA_QUOTE_SIZE], q[STRATA_QUOTE_SIZE];
  snprintf(who, sizeof who, "--%s '%s'", o->name, quoted(q, text));
  int rc = keys_default(base, o, who);
  if (rc) return rc;
  uint32_t seen = 0;
  int bare = strchr(text, '=') == NULL;
  for (const char *p = text;;) {
    const char *comma = bare ? NULL : strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    const char *eq = bare ? p : memchr(p, '=', n);
    if (!eq)
      return strata_err_set(STRATA_EUSAGE, "%s: '%s' is not key=value (expected %s)", who,
                            strata_quote(q, sizeof q, p, n), o->metavar ? o->metavar : "");
    const strata_option *k = o->keys;
    if (!bare) {
      size_t kl = (size_t)(eq - p);
      while (k->name && !(strlen(k->name) == kl && strncmp(k->name, p, kl) == 0)) k++;
      if (!k->name) {
        /* The keys it takes, by name. */
        char keys[256] = "";
        size_t used = 0;
        for (const strata_option *x = o->keys; x->name && used < sizeof keys; x++)
          used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s",
                                   x == o->keys ? "" : x[1].name ? ", " : " or ", x->name);
        return strata_err_set(STRATA_EUSAGE, "%s: unknown key '%s' (expected %s)", who,
                              strata_quote(q, sizeof q, p, kl), keys);
      }
      eq++;
    }
    size_t vl = n - (size_t)(eq - p);
    char value[MAX_VALUE], kwho[sizeof who + 64];
    snprintf(kwho, sizeof kwho, "%s: %s", who, k->name);
    if (vl >= sizeof value)
      return strata_err_set(STRATA_EUSAGE, "%s: '%s' is too long", kwho,
                            strata_quote(q, sizeof q, eq, vl));
    memcpy(value, eq, vl);
    value[vl] = 0;
    if ((rc = store(base, k, value, kwho))) return rc;
    seen |= 1u << (k - o->keys);
    if (!comma) break;
    p = comma + 1;
  }
  for (const strata_option *k = o->keys; k->name; k++)
    if (!k->def && !(seen & 1u << (k - o->keys)))
      return strata_err_set(STRATA_EUSAGE, "%s: missing %s=%s", who, k->name,
                            k->metavar ? k->metavar : "X");
  *(const char **)field(base, o->offset) = text;
  return 0;
}

int strata_options_defaults(const strata_optgroup *groups, int n_groups) {
  for (int gi = 0; gi < n_groups; gi++) {
    const strata_optgroup *g = &groups[gi];
    for (const strata_option *o = g->opts; o->name; o++) {
      char who[64];
      snprintf(who, sizeof who, "--%s", o->name);
      int rc = store_default(g->base, o, who);
      if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", strata_err_msg());
        return strata_err_set(STRATA_EINVAL, "default of %s", msg);
      }
    }
  }
  return 0;
}

static int find(const strata_optgroup *groups, int n_groups, const char *name, size_t len,
                char short_name, const strata_optgroup **g_out, const strata_option **o_out) {
  for (int gi = 0; gi < n_groups; gi++)
    for (const strata_option *o = groups[gi].opts; o->name; o++) {
      int hit = short_name ? o->short_name == short_name
                           : strlen(o->name) == len && strncmp(o->name, name, len) == 0;
      if (hit) {
        *g_out = &groups[gi];
        *o_out = o;
        return 1;
      }
    }
  return 0;
}

int strata_options_parse(const strata_optgroup *groups, int n_groups, int argc, char **argv,
                         int *help) {
  *help = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    char q[STRATA_QUOTE_SIZE];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      *help = 1;
      return 0;
    }
    const strata_optgroup *g = NULL;
    const strata_option *o = NULL;
    const char *value = NULL;
    if (a[0] == '-' && a[1] == '-' && a[2]) {
      const char *name = a + 2;
      const char *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      if (!find(groups, n_groups, name, len, 0, &g, &o))
        return strata_err_set(STRATA_EUSAGE, "unknown flag '--%s' (see --help)",
                              strata_quote(q, sizeof q, name, len));
      if (eq) value = eq + 1;
    } else if (a[0] == '-' && a[1] && !a[2]) {
      if (!find(groups, n_groups, NULL, 0, a[1], &g, &o))
        return strata_err_set(STRATA_EUSAGE, "unknown flag '%s' (see --help)", quoted(q, a));
    } else {
      return strata_err_set(STRATA_EUSAGE, "unexpected argument '%s' (see --help)", quoted(q, a));
    }
    if (base_type(o) == STRATA_OPT_FLAG) {
      if (value) return strata_err_set(STRATA_EUSAGE, "--%s takes no value", o->name);
      *(int *)field(g->base, o->offset) = 1;
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) return strata_err_set(STRATA_EUSAGE, "--%s needs a value", o->name);
      /* The next word is a flag, not this one's value: "--trace --passes 2"
       * forgot the value (a value that starts with "--", or that is one of
       * the short flags, goes as --NAME=VALUE). A negative number is a
       * value. */
      const char *next = argv[i + 1];
      const strata_optgroup *ng;
      const strata_option *no;
      if ((next[0] == '-' && next[1] == '-' && next[2]) ||
          (next[0] == '-' && next[1] && !next[2] && find(groups, n_groups, NULL, 0, next[1], &ng, &no)))
        return strata_err_set(STRATA_EUSAGE, "--%s needs a value, but '%s' follows it (give it as --%s=VALUE if that is the value)",
                              o->name, quoted(q, next), o->name);
      value = argv[++i];
    }
    char who[64];
    snprintf(who, sizeof who, "--%s", o->name);
    int rc = store(g->base, o, value, who);
    if (rc) return rc;
  }
  return 0;
}

/* Writes the value of o (in the struct at base) as the echo shows it;
 * exact: doubles with 17 significant digits, so that the text reads back
 * as the same value (the settings a resume compares). */
static void format_value(FILE *f, void *base, const strata_option *o, int exact) {
  const char *g = exact ? "%.17g" : "%g";
  const void *src = field(base, o->offset);
  switch (base_type(o)) {
    case STRATA_OPT_INT_OPTIONAL: {
      const strata_opt_int *v = src;
      if (v->given) fprintf(f, "%d", v->value);
      else fputc('-', f);
      break;
    }
    case STRATA_OPT_DOUBLE_OPTIONAL: {
      const strata_opt_double *v = src;
      if (v->given) fprintf(f, g, v->value);
      else fputc('-', f);
      break;
    }
    case STRATA_OPT_FLAG: fputs(*(const int *)src ? "on" : "off", f); break;
    case STRATA_OPT_INT: fprintf(f, "%d", *(const int *)src); break;
    case STRATA_OPT_U64: fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)src); break;
    case STRATA_OPT_DOUBLE: fprintf(f, g, *(const double *)src); break;
    case STRATA_OPT_ENUM: {
      size_t len = 0;
      const char *c = choice_at(o->choices, *(const int *)src, &len);
      fprintf(f, "%.*s", (int)len, c ? c : "?");
      break;
    }
    case STRATA_OPT_SPEC:
      if (!*(const char *const *)src) {
        fputc('-', f);
        break;
      }
      for (const strata_option *k = o->keys; k->name; k++) {
        fprintf(f, "%s%s=", k == o->keys ? "" : ",", k->name);
        format_value(f, base, k, exact);
      }
      break;
    default: {
      const char *s = *(const char *const *)src;
      fputs(s ? s : "-", f);
      break;
    }
  }
}

/* Choices, bounds and default of o, as --help shows them after its help. */
static void describe(FILE *f, const strata_option *o) {
  strata_opt_type t = base_type(o);
  if (t == STRATA_OPT_CHOICE || t == STRATA_OPT_ENUM) fprintf(f, " {%s}", o->choices);
  if (o->min < o->max)
    fprintf(f, " %c%.10g..%.10g]", o->type & STRATA_OPT_OPEN_MIN ? '(' : '[', o->min, o->max);
  if (o->def && t != STRATA_OPT_FLAG) fprintf(f, " [default: %s]", o->def);
  if (t == STRATA_OPT_SPEC) {
    fputs(" (", f);
    for (const strata_option *k = o->keys; k->name; k++) {
      fprintf(f, "%s%s%s", k == o->keys ? "" : "; ", k->name, k->def ? "" : " required");
      describe(f, k);
    }
    fputc(')', f);
  }
}

void strata_options_help(FILE *f, const strata_optgroup *groups, int n_groups) {
  for (int gi = 0; gi < n_groups; gi++) {
    fprintf(f, "\n%s:\n", groups[gi].title);
    for (const strata_option *o = groups[gi].opts; o->name; o++) {
      char lhs[96];
      const char *mv = base_type(o) == STRATA_OPT_FLAG ? "" : o->metavar ? o->metavar : "X";
      if (o->short_name)
        snprintf(lhs, sizeof lhs, "-%c, --%s%s%s", o->short_name, o->name, *mv ? " " : "", mv);
      else
        snprintf(lhs, sizeof lhs, "    --%s%s%s", o->name, *mv ? " " : "", mv);
      fprintf(f, "  %-30s %s", lhs, o->help ? o->help : "");
      describe(f, o);
      fputc('\n', f);
    }
  }
}

int strata_options_settings(const strata_optgroup *groups, int n_groups, char ***out, int *n) {
  *out = NULL;
  *n = 0;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return strata_err_set(STRATA_ENOMEM, "options: out of memory");
  int count = 0;
  for (int gi = 0; gi < n_groups; gi++)
    for (const strata_option *o = groups[gi].opts; o->name; o++) {
      if (o->type & STRATA_OPT_RESUMABLE) continue;
      fprintf(f, "%s=", o->name);
      format_value(f, groups[gi].base, o, 1);
      fputc('\0', f);
      count++;
    }
  if (fclose(f) != 0 || !text) {
    free(text);
    return strata_err_set(STRATA_ENOMEM, "options: out of memory");
  }
  char **v = strata_malloc((size_t)count * sizeof *v + len + 1);
  if (!v) {
    free(text);
    return strata_err_set(STRATA_ENOMEM, "options: out of memory");
  }
  char *dst = (char *)(v + count);
  memcpy(dst, text, len);
  free(text);
  for (int i = 0; i < count; i++) {
    v[i] = dst;
    dst += strlen(dst) + 1;
  }
  *out = v;
  *n = count;
  return 0;
}

void strata_options_echo(FILE *f, const char *prefix, const strata_optgroup *groups,
                         int n_groups) {
  for (int gi = 0; gi < n_groups; gi++) {
    fprintf(f, "%s%s:", prefix, groups[gi].title);
    for (const strata_option *o = groups[gi].opts; o->name; o++) {
      fprintf(f, " %s=", o->name);
      format_value(f, groups[gi].base, o, 0);
    }
    fputc('\n', f);
  }
}
