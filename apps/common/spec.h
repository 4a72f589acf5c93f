/*
 * The "synth:key=value,..." specs of the synthetic data generators
 * (ratings in synth.c, corpora in corpus.c): one parser, each generator
 * its table of keys. Internal to apps/common.
 */
#ifndef STRATA_APPS_COMMON_SPEC_H
#define STRATA_APPS_COMMON_SPEC_H

#include <stddef.h>

typedef enum {
  STRATA__SPEC_U32,     /* an integer in [1, 2^32) into uint32_t */
  STRATA__SPEC_U64,     /* an integer >= 1 into uint64_t */
  STRATA__SPEC_SEED,    /* an integer >= 0 into uint64_t */
  STRATA__SPEC_NONNEG,  /* a finite double >= 0 */
  STRATA__SPEC_POSITIVE /* a finite double > 0 */
} strata__spec_kind;

typedef struct strata__spec_key {
  const char *name;
  strata__spec_kind kind;
  size_t off; /* offset of the field in the spec struct */
} strata__spec_key;

/*
 * Parses "synth" or "synth:key=value,..." (any subset of the n keys, any
 * order) into the struct at spec (size bytes), which holds the defaults on
 * entry. On error the struct is left untouched and STRATA_EUSAGE names the
 * offending field, key or value ("--data synth: ...").
 */
int strata__spec_parse(const char *text, const strata__spec_key *keys, size_t n, void *spec,
                       size_t size);

#endif
