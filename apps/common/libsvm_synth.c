/*
 * Synthetic sparse classification data (strata/apps/libsvm.h): class supports,
 * samples drawn from them, in the LIBSVM reader's CSR form.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/common/spec.h"
#include "strata/core.h"
#include "strata/apps/libsvm.h"

void strata_libsvm_synth_defaults(strata_libsvm_synth_spec *s) {
  *s = (strata_libsvm_synth_spec){.classes = 10,
                                  .features = 1000,
                                  .nnz = 20,
                                  .samples = 10000,
                                  .test = 2000,
                                  .support = 40,
                                  .signal = 0.5,
                                  .seed = 1};
}

#define K(name, kind) {#name, STRATA__SPEC_##kind, offsetof(strata_libsvm_synth_spec, name)}
static const strata__spec_key keys[] = {
    K(classes, U32), K(features, U32), K(nnz, U32),     K(samples, U64),
    K(test, SEED),   K(support, U32),  K(signal, NONNEG), K(seed, SEED),
};
#undef K

int strata_libsvm_synth_parse(const char *text, strata_libsvm_synth_spec *spec) {
  strata_libsvm_synth_spec s = *spec;
  int rc = strata__spec_parse(text, keys, sizeof keys / sizeof keys[0], &s, sizeof s);
  if (rc) return rc;
  if (s.classes < 2)
    return strata_err_set(STRATA_EUSAGE, "--data synth: classes=%u: at least 2 classes", s.classes);
  if (s.nnz > s.features / 2)
    return strata_err_set(STRATA_EUSAGE,
                          "--data synth: nnz=%u is more than half of features=%u (samples draw "
                          "distinct features)",
                          s.nnz, s.features);
  if (s.support > s.features)
    return strata_err_set(STRATA_EUSAGE, "--data synth: support=%u is more than features=%u",
                          s.support, s.features);
  if (s.signal > 1)
    return strata_err_set(STRATA_EUSAGE, "--data synth: signal=%g is not in [0, 1]", s.signal);
  *spec = s;
  return 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Samples [first, first + n) into d. seen[] (features entries) marks the
 * features a sample has drawn with its stamp. */
static int generate(const strata_libsvm_synth_spec *s, const uint32_t *support, uint64_t first,
                    uint64_t n, uint32_t *seen, strata_libsvm *d) {
  uint32_t J = s->classes, nnz = s->nnz;
  if (n > SIZE_MAX / ((size_t)nnz + 1) / 8) return STRATA_ENOMEM;
  d->row_off = strata_malloc(((size_t)n + 1) * sizeof *d->row_off);
  d->col = strata_malloc(((size_t)n * nnz + 1) * sizeof *d->col);
  d->val = strata_malloc(((size_t)n * nnz + 1) * sizeof *d->val);
  d->label = strata_malloc(((size_t)n + 1) * sizeof *d->label);
  d->class_label = strata_malloc((size_t)J * sizeof *d->class_label);
  if (!d->row_off || !d->col || !d->val || !d->label || !d->class_label) return STRATA_ENOMEM;
  for (uint32_t j = 0; j < J; j++) d->class_label[j] = (int64_t)j + 1;
  float v = (float)(1.0 / sqrt((double)nnz));
  d->row_off[0] = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t id = first + i;
    strata_rng rng;
    strata_rng_seed(&rng, strata_mix64(s->seed * 0x9e3779b97f4a7c15ull ^ id));
    uint32_t y = (uint32_t)strata_rng_below(&rng, J);
    uint32_t *c = d->col + (size_t)i * nnz;
    uint32_t stamp = (uint32_t)(id % 0xfffffffeu) + 1;
    for (uint32_t k = 0; k < nnz;) {
      uint32_t f = strata_rng_uniform(&rng) < s->signal && s->support
                       ? support[(size_t)y * s->support + strata_rng_below(&rng, s->support)]
                       : (uint32_t)strata_rng_below(&rng, s->features);
      if (seen[f] == stamp) continue; /* distinct features; nnz <= D / 2 keeps this quick */
      seen[f] = stamp;
      c[k++] = f;
    }
    qsort(c, nnz, sizeof *c, cmp_u32);
    for (uint32_t k = 0; k < nnz; k++) d->val[(size_t)i * nnz + k] = v;
    d->label[i] = y;
    d->row_off[i + 1] = (i + 1) * nnz;
  }
  d->n_rows = n;
  d->nnz = n * nnz;
  d->n_features = s->features;
  d->n_classes = J;
  return 0;
}

int strata_libsvm_synth(const strata_libsvm_synth_spec *s, strata_libsvm *train,
                        strata_libsvm *test) {
  memset(train, 0, sizeof *train);
  if (test) memset(test, 0, sizeof *test);
  /* Every sample's row offset, label and nnz features (a column and a
   * value, 4 bytes each), the classes' supports and the stamps: refused
   * before any of it is allocated. */
  double samples = (double)s->samples + (test ? (double)s->test : 0);
  strata_mem_budget budget;
  strata_mem_budget_init(&budget);
  int rc = strata_mem_check(&budget,
                            samples * (12.0 + 8.0 * s->nnz) + 4.0 * s->classes * s->support +
                                4.0 * s->features + 8.0 * s->classes,
                            "lower samples, test or nnz",
                            "--data synth: %llu samples of %u features (of %u) need",
                            (unsigned long long)samples, s->nnz, s->features);
  if (rc) return rc;
  uint32_t *support = strata_malloc(((size_t)s->classes * s->support + 1) * sizeof *support);
  uint32_t *seen = strata_calloc((size_t)s->features + 1, sizeof *seen);
  rc = support && seen ? 0 : STRATA_ENOMEM;
  for (uint32_t j = 0; j < s->classes && !rc; j++) {
    strata_rng rng;
    strata_rng_seed(&rng, strata_mix64(s->seed ^ 0x5eed0000ull ^ j));
    for (uint32_t k = 0; k < s->support; k++)
      support[(size_t)j * s->support + k] = (uint32_t)strata_rng_below(&rng, s->features);
  }
  if (!rc) rc = generate(s, support, 0, s->samples, seen, train);
  if (!rc && s->test && test) {
    memset(seen, 0, ((size_t)s->features + 1) * sizeof *seen);
    rc = generate(s, support, s->samples, s->test, seen, test);
  }
  strata_free(support);
  strata_free(seen);
  if (rc) {
    strata_libsvm_close(train);
    if (test) strata_libsvm_close(test);
    return strata_err_set(STRATA_ENOMEM, "synth: out of memory for %llu samples of %u features",
                          (unsigned long long)(s->samples + s->test), s->nnz);
  }
  return 0;
}
