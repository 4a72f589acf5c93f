/*
 * strata/options.h - table-driven command-line options.
 *
 * A program (and each app) declares its options once, as a table; the same
 * table drives defaults, parsing with validation, --help and the echo of the
 * effective configuration at start. Values land in a caller-owned struct at
 * the offsets the table names. Write each row with designated initialisers
 * (a field left out is zero or NULL), and end the table with {.name = NULL}:
 *
 *   #define OPT(f) offsetof(my_config, f)
 *   static const strata_option my_options[] = {
 *       {.name = "rank",
 *        .short_name = 'k',
 *        .type = STRATA_OPT_INT,
 *        .offset = OPT(rank),
 *        .def = "32",
 *        .metavar = "K",
 *        .min = 1,
 *        .max = 4096,
 *        .help = "factor rank"},
 *       {.name = NULL},
 *   };
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
  STRATA_OPT_CHOICE, /* const char *, one of `choices` ("a|b|c") */
  STRATA_OPT_ENUM,   /* int (or an enum type, which is int-sized): the index of the
                        value among `choices` ("a|b|c": 0, 1, 2) */
  STRATA_OPT_INT_OPTIONAL,    /* strata_opt_int: an int, and whether it was given */
  STRATA_OPT_DOUBLE_OPTIONAL, /* strata_opt_double: a double, and whether it was given */
  STRATA_OPT_SPEC,   /* const char *: "key=value[,key=value...]" (see below) */

  /* Or-ed into a numeric type: min itself is out of bounds, (min, max]. */
  STRATA_OPT_OPEN_MIN = 0x100,
  /* Or-ed into any type: the option does not change what a run computes
   * (an output path, logging, the number of passes, an input's path whose
   * content is checked otherwise), so a run resumed from a checkpoint may
   * give it another value. Every other option is one of the run's
   * settings (strata_options_settings), which a resume must match. */
  STRATA_OPT_RESUMABLE = 0x200
} strata_opt_type;

#define STRATA_OPT_TYPE_MASK 0xff

/* Optional values: `value` holds the default until the command line gives
 * one, and `given` says whether it did (so a program can tell "--wpc 1"
 * from no --wpc). The echo shows "-" for a value not given. */
typedef struct strata_opt_int {
  int value;
  int given;
} strata_opt_int;

typedef struct strata_opt_double {
  double value;
  int given;
} strata_opt_double;

/*
 * STRATA_OPT_SPEC: a value of comma-separated key=value pairs, in any order,
 * such as "--straggler delay=20,spin=1". Each key is itself an option of the
 * table `keys` (INT, U64, DOUBLE or ENUM, OPEN_MIN allowed) whose offset lies
 * in the same struct as the spec's, and is converted and bounds-checked as
 * an option is. A key without a default is required whenever the spec is
 * given; the others take their default. A value without any '=' is the
 * value of the first key ("--straggler 20"). The spec's own field holds the
 * text as given, NULL when not given (then every key holds its default, zero
 * without one). Messages name the flag, the text and the key:
 * "--disrupt 'prob=2,slot=5': prob: must be in (0, 1] (got 2)".
 */

typedef struct strata_option {
  const char *name;     /* long name without "--" */
  char short_name;      /* 0 when none */
  strata_opt_type type; /* a type, or-ed with STRATA_OPT_OPEN_MIN for (min, max] */
  size_t offset;        /* offsetof(config struct, field) */
  const char *def;      /* default as text; NULL: none (strings stay NULL, numbers 0) */
  const char *metavar;  /* shown in --help, e.g. "N" */
  double min, max;      /* inclusive bounds for numbers, checked when min < max */
  const char *choices;  /* for STRATA_OPT_CHOICE and STRATA_OPT_ENUM: "a|b|c" */
  const char *help;     /* one line */
  const struct strata_option *keys; /* for STRATA_OPT_SPEC: its keys, ending with {.name = NULL} */
} strata_option;

/* A table bound to the struct it fills; tables end with a {NULL} entry. */
typedef struct strata_optgroup {
  const char *title;
  const strata_option *opts;
  void *base;
} strata_optgroup;

/* Stores every default into its struct. 0 or STRATA_EINVAL with a message
 * (a default that does not parse, a spec key of a type keys cannot have). */
STRATA_EXPORT int strata_options_defaults(const strata_optgroup *groups, int n_groups);

/*
 * Parses argv[0..argc) ("--name value", "--name=value", "-x value", flags
 * alone) into the groups' structs, after strata_options_defaults; when a
 * flag repeats, the last value wins (a spec's keys included). "--help" and
 * "-h" set *help to 1 and stop. Returns 0, or STRATA_EUSAGE with a message
 * naming the flag: unknown flag, missing value, not a number, out of bounds,
 * not one of the choices, a stray positional argument; for a spec also an
 * item that is not key=value, an unknown key, a missing required key. After
 * an error the structs may hold part of the values.
 */
STRATA_EXPORT int strata_options_parse(const strata_optgroup *groups, int n_groups, int argc,
                                       char **argv, int *help);

/* Writes the groups' options with metavars, help, choices, bounds and
 * defaults (a spec's keys with theirs). */
STRATA_EXPORT void strata_options_help(FILE *f, const strata_optgroup *groups, int n_groups);

/*
 * The run's settings: "name=value" for every option not marked
 * STRATA_OPT_RESUMABLE, values as strata_options_echo writes them but for
 * doubles, which have 17 significant digits (the same double, the same
 * text; the echo's %g would make 0.1 and 0.1000001 one setting). *out is
 * an array of *n strings in one allocation (strata_free it). Returns 0 or
 * STRATA_ENOMEM.
 */
STRATA_EXPORT int strata_options_settings(const strata_optgroup *groups, int n_groups,
                                          char ***out, int *n);

/* Writes "name=value" for every option (effective values), space separated
 * on one line per group, prefixed by `prefix`: an enum as its choice, a spec
 * as key=value,... of every key, "-" for a string or spec not set and for an
 * optional value not given. */
STRATA_EXPORT void strata_options_echo(FILE *f, const char *prefix, const strata_optgroup *groups,
                                       int n_groups);

#endif
