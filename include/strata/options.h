/*
 * strata/options.h - table-driven command-line options.
 *
 * A program (and each app) declares its options once, as a table; the same
 * table drives defaults, parsing with validation, --help and the echo of the
 * effective configuration at start. Values land in a caller-owned struct at
 * the offsets the table names.
 */
#ifndef STRATA_OPTIONS_H
#define STRATA_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "strata/error.h"

typedef enum {
  STRATA_OPT_INT,    /* int */
  STRATA_OPT_U64,    /* uint64_t */
  STRATA_OPT_DOUBLE, /* double */
  STRATA_OPT_STRING, /* const char * pointing into argv or the table's default */
  STRATA_OPT_FLAG,   /* int set to 1 when present; takes no value */
  STRATA_OPT_CHOICE  /* const char *, one of `choices` ("a|b|c") */
} strata_opt_type;

typedef struct strata_option {
  const char *name;    /* long name without "--" */
  char short_name;     /* 0 when none */
  strata_opt_type type;
  size_t offset;       /* offsetof(config struct, field) */
  const char *def;     /* default as text; NULL: none (strings stay NULL, numbers 0) */
  const char *metavar; /* shown in --help, e.g. "N" */
  double min, max;     /* inclusive bounds for numbers, checked when min < max */
  const char *choices; /* for STRATA_OPT_CHOICE: "a|b|c" */
  const char *help;    /* one line */
} strata_option;

/* A table bound to the struct it fills; tables end with a {NULL} entry. */
typedef struct strata_optgroup {
  const char *title;
  const strata_option *opts;
  void *base;
} strata_optgroup;

/* Stores every default into its struct. 0 or STRATA_EINVAL (bad table). */
STRATA_EXPORT int strata_options_defaults(const strata_optgroup *groups, int n_groups);

/*
 * Parses argv[0..argc) ("--name value", "--name=value", "-x value", flags
 * alone) into the groups' structs, after strata_options_defaults. "--help"
 * and "-h" set *help to 1 and stop. Returns 0, or STRATA_EUSAGE with a
 * message naming the flag: unknown flag, missing value, not a number, out of
 * bounds, not one of the choices, a stray positional argument.
 */
STRATA_EXPORT int strata_options_parse(const strata_optgroup *groups, int n_groups, int argc,
                                       char **argv, int *help);

/* Writes the groups' options with metavars, defaults, bounds and help. */
STRATA_EXPORT void strata_options_help(FILE *f, const strata_optgroup *groups, int n_groups);

/* Writes "name=value" for every option (effective values), space separated
 * on one line per group, prefixed by `prefix`. */
STRATA_EXPORT void strata_options_echo(FILE *f, const char *prefix, const strata_optgroup *groups,
                                       int n_groups);

#endif
