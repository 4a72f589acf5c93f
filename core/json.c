#include "strata/json.h"

#include <math.h>

void strata_json_init(strata_json *j, FILE *f) {
  j->f = f;
  j->depth = 0;
  j->count[0] = 0;
  j->one_line = 0;
}

void strata_json_init_line(strata_json *j, FILE *f) {
  strata_json_init(j, f);
  j->one_line = 1;
}

static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", f); break;
      case '\\': fputs("\\\\", f); break;
      case '\n': fputs("\\n", f); break;
      case '\r': fputs("\\r", f); break;
      case '\t': fputs("\\t", f); break;
      default:
        if (*p < 0x20)
          fprintf(f, "\\u%04x", *p);
        else
          fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* Writes the separator and key that precede any value at the current level. */
static void lead(strata_json *j, const char *key) {
  if (j->count[j->depth]++ > 0) fputc(',', j->f);
  if (j->depth > 0 && !j->one_line) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
  }
  if (key) {
    put_string(j->f, key);
    fputs(j->one_line ? ":" : ": ", j->f);
  }
}

static void open_level(strata_json *j, const char *key, char c) {
  lead(j, key);
  fputc(c, j->f);
  if (j->depth + 1 < STRATA_JSON_MAX_DEPTH) j->depth++;
  j->count[j->depth] = 0;
}

static void close_level(strata_json *j, char c) {
  int had = j->count[j->depth] > 0;
  if (j->depth > 0) j->depth--;
  if (had && !j->one_line) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
  }
  fputc(c, j->f);
  if (j->depth == 0) fputc('\n', j->f);
}

void strata_json_object_begin(strata_json *j, const char *key) { open_level(j, key, '{'); }
void strata_json_object_end(strata_json *j) { close_level(j, '}'); }
void strata_json_array_begin(strata_json *j, const char *key) { open_level(j, key, '['); }
void strata_json_array_end(strata_json *j) { close_level(j, ']'); }

void strata_json_string(strata_json *j, const char *key, const char *value) {
  lead(j, key);
  if (value)
    put_string(j->f, value);
  else
    fputs("null", j->f);
}

void strata_json_number(strata_json *j, const char *key, double value) {
  lead(j, key);
  if (isfinite(value))
    fprintf(j->f, "%.9g", value);
  else
    fputs("null", j->f);
}

void strata_json_double(strata_json *j, const char *key, double value) {
  lead(j, key);
  if (isfinite(value))
    fprintf(j->f, "%.17g", value);
  else
    fputs("null", j->f);
}

void strata_json_int(strata_json *j, const char *key, int64_t value) {
  lead(j, key);
  fprintf(j->f, "%lld", (long long)value);
}

void strata_json_bool(strata_json *j, const char *key, int value) {
  lead(j, key);
  fputs(value ? "true" : "false", j->f);
}
