/*
 * strata/json.h - a small streaming JSON writer for metrics summaries.
 *
 * Keys and commas are handled by the writer; strings are escaped; non-finite
 * numbers are written as null so every file parses.
 */
#ifndef STRATA_JSON_H
#define STRATA_JSON_H

#include <stdint.h>
#include <stdio.h>

#include "strata/error.h"

#define STRATA_JSON_MAX_DEPTH 16

typedef struct strata_json {
  FILE *f;
  int depth;
  int count[STRATA_JSON_MAX_DEPTH]; /* members written at each level */
  int one_line;                     /* no newlines or indentation inside the value */
} strata_json;

/* Starts writing to f (not owned), indented, a member per line. */
STRATA_EXPORT void strata_json_init(strata_json *j, FILE *f);
/* The same, but the whole top-level value on one line (JSON Lines: the
 * benchmark programs' output). */
STRATA_EXPORT void strata_json_init_line(strata_json *j, FILE *f);
/* key is NULL inside arrays and for the top-level value. */
STRATA_EXPORT void strata_json_object_begin(strata_json *j, const char *key);
STRATA_EXPORT void strata_json_object_end(strata_json *j);
STRATA_EXPORT void strata_json_array_begin(strata_json *j, const char *key);
STRATA_EXPORT void strata_json_array_end(strata_json *j);
STRATA_EXPORT void strata_json_string(strata_json *j, const char *key, const char *value);
STRATA_EXPORT void strata_json_number(strata_json *j, const char *key, double value);
/* As strata_json_number, with 17 significant digits: the text reads back as
 * the same double, so two runs' values compare exactly. */
STRATA_EXPORT void strata_json_double(strata_json *j, const char *key, double value);
STRATA_EXPORT void strata_json_int(strata_json *j, const char *key, int64_t value);
STRATA_EXPORT void strata_json_bool(strata_json *j, const char *key, int value);

#endif
