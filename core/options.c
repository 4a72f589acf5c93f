#include "strata/options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"

/* Command-line text as messages quote it (see strata_quote). */
static const char *quoted(char q[STRATA_QUOTE_SIZE], const char *text) {
  return strata_quote(q, STRATA_QUOTE_SIZE, text, strlen(text));
}

static void *field(const strata_optgroup *g, const strata_option *o) {
  return (char *)g->base + o->offset;
}

static int choice_ok(const char *choices, const char *v) {
  size_t n = strlen(v);
  const char *p = choices;
  while (p && *p) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0) return 1;
    p = bar ? bar + 1 : NULL;
  }
  return 0;
}

/* Converts and validates text for one option; `who` is how the message names
 * the value's origin ("--rank" or "default of --rank"). */
static int store(const strata_optgroup *g, const strata_option *o, const char *text) {
  void *dst = field(g, o);
  char *end = NULL;
  double num = 0;
  char q[STRATA_QUOTE_SIZE];
  switch (o->type) {
    case STRATA_OPT_FLAG:
      *(int *)dst = 1;
      return 0;
    case STRATA_OPT_STRING:
      *(const char **)dst = text;
      return 0;
    case STRATA_OPT_CHOICE:
      if (!choice_ok(o->choices, text))
        return strata_err_set(STRATA_EUSAGE, "--%s: '%s' is not one of %s", o->name,
                              quoted(q, text), o->choices);
      *(const char **)dst = text;
      return 0;
    case STRATA_OPT_U64: {
      /* strtoull accepts "-1" as a huge number; a sign is never valid here. */
      const char *p = text;
      while (*p == ' ' || *p == '\t') p++;
      errno = 0;
      unsigned long long v = strtoull(text, &end, 10);
      if (*p == '-' || *p == '+' || errno || end == text || *end)
        return strata_err_set(STRATA_EUSAGE, "--%s: '%s' is not a non-negative integer", o->name,
                              quoted(q, text));
      num = (double)v;
      if (o->min < o->max && (num < o->min || num > o->max))
        return strata_err_set(STRATA_EUSAGE, "--%s: must be in [%g, %g] (got %s)", o->name,
                              o->min, o->max, quoted(q, text));
      *(uint64_t *)dst = (uint64_t)v;
      return 0;
    }
    case STRATA_OPT_INT: {
      errno = 0;
      long long v = strtoll(text, &end, 10);
      if (errno || end == text || *end)
        return strata_err_set(STRATA_EUSAGE, "--%s: '%s' is not an integer", o->name,
                              quoted(q, text));
      if (v < -2147483647LL || v > 2147483647LL)
        return strata_err_set(STRATA_EUSAGE, "--%s: %s is out of range", o->name,
                              quoted(q, text));
      num = (double)v;
      if (o->min < o->max && (num < o->min || num > o->max))
        return strata_err_set(STRATA_EUSAGE, "--%s: must be in [%g, %g] (got %s)", o->name,
                              o->min, o->max, quoted(q, text));
      *(int *)dst = (int)v;
      return 0;
    }
    case STRATA_OPT_DOUBLE:
      errno = 0;
      num = strtod(text, &end);
      if (errno || end == text || *end || !isfinite(num))
        return strata_err_set(STRATA_EUSAGE, "--%s: '%s' is not a finite number", o->name,
                              quoted(q, text));
      if (o->min < o->max && (num < o->min || num > o->max))
        return strata_err_set(STRATA_EUSAGE, "--%s: must be in [%g, %g] (got %s)", o->name,
                              o->min, o->max, quoted(q, text));
      *(double *)dst = num;
      return 0;
  }
  return strata_err_set(STRATA_EINVAL, "--%s: bad option table", o->name);
}

int strata_options_defaults(const strata_optgroup *groups, int n_groups) {
  for (int gi = 0; gi < n_groups; gi++) {
    const strata_optgroup *g = &groups[gi];
    for (const strata_option *o = g->opts; o->name; o++) {
      void *dst = field(g, o);
      if (o->type == STRATA_OPT_FLAG) {
        *(int *)dst = 0;
      } else if (!o->def) {
        if (o->type == STRATA_OPT_STRING || o->type == STRATA_OPT_CHOICE)
          *(const char **)dst = NULL;
        else if (o->type == STRATA_OPT_INT)
          *(int *)dst = 0;
        else if (o->type == STRATA_OPT_U64)
          *(uint64_t *)dst = 0;
        else
          *(double *)dst = 0;
      } else {
        int rc = store(g, o, o->def);
        if (rc) {
          char msg[512];
          snprintf(msg, sizeof msg, "%s", strata_err_msg());
          return strata_err_set(STRATA_EINVAL, "default of %s", msg);
        }
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
    if (o->type == STRATA_OPT_FLAG) {
      if (value) return strata_err_set(STRATA_EUSAGE, "--%s takes no value", o->name);
      *(int *)field(g, o) = 1;
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) return strata_err_set(STRATA_EUSAGE, "--%s needs a value", o->name);
      value = argv[++i];
    }
    int rc = store(g, o, value);
    if (rc) return rc;
  }
  return 0;
}

static void format_value(char *buf, size_t n, const strata_optgroup *g, const strata_option *o) {
  const void *src = field(g, o);
  switch (o->type) {
    case STRATA_OPT_FLAG: snprintf(buf, n, "%s", *(const int *)src ? "on" : "off"); break;
    case STRATA_OPT_INT: snprintf(buf, n, "%d", *(const int *)src); break;
    case STRATA_OPT_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)src); break;
    case STRATA_OPT_DOUBLE: snprintf(buf, n, "%g", *(const double *)src); break;
    case STRATA_OPT_STRING:
    case STRATA_OPT_CHOICE: {
      const char *s = *(const char *const *)src;
      snprintf(buf, n, "%s", s ? s : "-");
      break;
    }
  }
}

void strata_options_help(FILE *f, const strata_optgroup *groups, int n_groups) {
  for (int gi = 0; gi < n_groups; gi++) {
    fprintf(f, "\n%s:\n", groups[gi].title);
    for (const strata_option *o = groups[gi].opts; o->name; o++) {
      char lhs[96];
      const char *mv = o->type == STRATA_OPT_FLAG ? "" : o->metavar ? o->metavar : "X";
      if (o->short_name)
        snprintf(lhs, sizeof lhs, "-%c, --%s%s%s", o->short_name, o->name, *mv ? " " : "", mv);
      else
        snprintf(lhs, sizeof lhs, "    --%s%s%s", o->name, *mv ? " " : "", mv);
      fprintf(f, "  %-30s %s", lhs, o->help);
      if (o->type == STRATA_OPT_CHOICE) fprintf(f, " {%s}", o->choices);
      if (o->min < o->max) fprintf(f, " [%g..%g]", o->min, o->max);
      if (o->def && o->type != STRATA_OPT_FLAG) fprintf(f, " [default: %s]", o->def);
      fputc('\n', f);
    }
  }
}

void strata_options_echo(FILE *f, const char *prefix, const strata_optgroup *groups,
                         int n_groups) {
  for (int gi = 0; gi < n_groups; gi++) {
    fprintf(f, "%s%s:", prefix, groups[gi].title);
    for (const strata_option *o = groups[gi].opts; o->name; o++) {
      char buf[256];
      format_value(buf, sizeof buf, &groups[gi], o);
      fprintf(f, " %s=%s", o->name, buf);
    }
    fputc('\n', f);
  }
}
