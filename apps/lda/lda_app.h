/*
 * The LDA app's internals shared by its files (not installed).
 */
#ifndef STRATA_APPS_LDA_APP_H
#define STRATA_APPS_LDA_APP_H

#include <stdint.h>
#include <stdio.h>

#include "strata/app.h"

/* The final model as the coordinator holds it after the run. */
typedef struct strata__lda_view {
  uint32_t K, V, n_docs;
  double alpha, beta;
  const char *const *vocab; /* V words, or NULL (ids are printed) */
  const strata_problem *prob;
  const uint32_t *wblock, *wlocal, *dblock, *dlocal;
  const uint32_t *slot_word;  /* with a --topics-out: each token's word, by block and slot */
  const uint64_t *slot_first; /* resident block b's slots from slot_first[b] */
} strata__lda_view;

int strata__lda_layout(const strata_problem *prob, strata__lda_view *v);
/* Document d's topic counts (K) and length. */
const int32_t *strata__lda_doc_row(const strata__lda_view *v, uint32_t d, uint32_t *len);
/* Word w's topic counts (K floats). */
static inline const float *strata__lda_word_row(const strata__lda_view *v, uint32_t w) {
  return (const float *)v->prob->rotating[v->wblock[w]].buf + (size_t)v->wlocal[w] * v->K;
}

/* export_model: DIR/topics.txt (top words per topic), doc_topics.tsv
 * (proportions per document), word_topic.f32 (V x K counts), z.txt (every
 * token's word and topic, strata__lda_write_z), meta.json. */
int strata__lda_export(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                       const char *dir);

/* A strata_fill_fn for DIR/z.txt (ud: the view): one line per document in
 * corpus order, "N word:topic ..." (WarpLDA's -dumpz format), from the
 * words lda_load keeps when there is a --topics-out. */
int strata__lda_write_z(FILE *f, void *ud);

/* The app's top-words setting, read by the export (from the config). */
int strata__lda_top(const void *cfg);

extern const strata_app strata_app_lda;

#endif
