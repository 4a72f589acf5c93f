/*
 * The "synth:" spec parsers: strata_synth_parse (ratings),
 * strata_lda_synth_parse (corpora) and strata_libsvm_synth_parse
 * (classification), picked by the low two bits of the first byte (3: the
 * ratings one again); bit 7 fails the first allocation through strata's
 * allocator. The rest of the input is the text, up to a NUL byte. Only the
 * parsers run: the generators would allocate whatever sizes the text asks.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "strata/apps/corpus.h"
#include "strata/apps/libsvm.h"
#include "strata/apps/ratings.h"
#include "strata/core.h"

/* The parser's contract: on an error the spec is left as it was; a spec it
 * accepts holds values the generator takes. */
static int parse_mf(const char *text) {
  strata_synth_spec s, before;
  strata_synth_defaults(&s);
  /* memcpy, not assignment: the padding must compare equal too. */
  memcpy(&before, &s, sizeof s);
  int rc = strata_synth_parse(text, &s);
  if (rc) {
    FUZZ_CHECK(memcmp(&s, &before, sizeof s) == 0, "a failed parse changed the spec");
    return rc;
  }
  FUZZ_CHECK(s.users && s.items && s.ratings && s.rank, "a count of 0 accepted");
  FUZZ_CHECK(s.noise >= 0 && s.skew >= 0, "a negative noise or skew accepted");
  return 0;
}

static int parse_lda(const char *text) {
  strata_lda_synth s, before;
  strata_lda_synth_defaults(&s);
  memcpy(&before, &s, sizeof s);
  int rc = strata_lda_synth_parse(text, &s);
  if (rc) {
    FUZZ_CHECK(memcmp(&s, &before, sizeof s) == 0, "a failed parse changed the spec");
    return rc;
  }
  FUZZ_CHECK(s.docs && s.len && s.vocab && s.topics, "a count of 0 accepted");
  FUZZ_CHECK(s.alpha > 0 && s.beta > 0, "a concentration <= 0 accepted");
  return 0;
}

static int parse_libsvm(const char *text) {
  strata_libsvm_synth_spec s, before;
  strata_libsvm_synth_defaults(&s);
  memcpy(&before, &s, sizeof s);
  int rc = strata_libsvm_synth_parse(text, &s);
  if (rc) {
    FUZZ_CHECK(memcmp(&s, &before, sizeof s) == 0, "a failed parse changed the spec");
    return rc;
  }
  FUZZ_CHECK(s.classes >= 2 && s.features && s.nnz && s.samples && s.support,
             "a count out of range accepted");
  FUZZ_CHECK(s.nnz <= s.features / 2 && s.support <= s.features, "nnz or support too large");
  FUZZ_CHECK(s.signal >= 0 && s.signal <= 1, "a signal outside [0, 1] accepted");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char *text = malloc(size);
  FUZZ_CHECK(text != NULL, "out of memory copying the input");
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  fuzz_start();
  if (data[0] & 0x80) strata_alloc_fail_after(1);
  int rc;
  switch (data[0] & 3) {
    case 1: rc = parse_lda(text); break;
    case 2: rc = parse_libsvm(text); break;
    default: rc = parse_mf(text); break;
  }
  fuzz_finish(rc, NULL);
  free(text);
  return 0;
}
