/*
 * Prometheus' text format (internal to libstrata): what the live status
 * (engine/status.c) and a mode's own families (core/mode.h, status) write.
 */
#ifndef STRATA_CORE_PROM_H
#define STRATA_CORE_PROM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "# HELP name help" and "# TYPE name type". */
void strata__prom_family(FILE *f, const char *name, const char *type, const char *help);
/* One sample: name{labels} value (labels NULL or "": none); NaN and the
 * infinities spelled the format's way. */
void strata__prom_sample(FILE *f, const char *name, const char *labels, double v);
/* A label value escaped as the format asks (backslash, quote, newline),
 * cut to fit out[n]. */
void strata__prom_label(char *out, size_t n, const char *v);
/* A histogram of n buckets in rising order of their upper bounds le[b]
 * (counts[b] observations each, not cumulative), then +Inf holding all
 * `count`; `sum` is the observations' sum. */
void strata__prom_histogram(FILE *f, const char *name, const char *help, int n,
                            const uint64_t *counts, const double *le, double sum, uint64_t count);

#endif
