/*
 * Writing an LDA model: the top words of every topic, the documents' topic
 * proportions and the word-topic counts. Every file is written atomically.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/lda/lda_app.h"
#include "strata/core.h"
#include "strata/json.h"

typedef struct topics_ctx {
  const strata__lda_view *v;
  int top;
} topics_ctx;

typedef struct scored {
  float n;
  uint32_t w;
} scored;

static int by_count_desc(const void *a, const void *b) {
  const scored *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? 1 : -1;
  return (x->w > y->w) - (x->w < y->w);
}

/* One line per topic: "topic k (share): word word ...", heaviest first. */
static int fill_topics(FILE *f, void *ud) {
  const topics_ctx *t = ud;
  const strata__lda_view *v = t->v;
  scored *col = strata_malloc(((size_t)v->V + 1) * sizeof *col);
  if (!col) return strata_err_set(STRATA_ENOMEM, "lda: out of memory writing topics");
  double total = 0;
  for (uint32_t w = 0; w < v->V; w++)
    for (uint32_t k = 0; k < v->K; k++) total += strata__lda_word_row(v, w)[k];
  for (uint32_t k = 0; k < v->K; k++) {
    double nk = 0;
    for (uint32_t w = 0; w < v->V; w++) {
      col[w] = (scored){strata__lda_word_row(v, w)[k], w};
      nk += col[w].n;
    }
    qsort(col, v->V, sizeof *col, by_count_desc);
    fprintf(f, "topic %u (%.4f):", k, total > 0 ? nk / total : 0.0);
    for (int i = 0; i < t->top && (uint32_t)i < v->V && col[i].n > 0; i++) {
      if (v->vocab)
        fprintf(f, " %s", v->vocab[col[i].w]);
      else
        fprintf(f, " %u", col[i].w);
    }
    fputc('\n', f);
  }
  strata_free(col);
  return 0;
}

/* theta[d][k] = (n_dk + alpha) / (n_d + K alpha), one document per line. */
static int fill_doc_topics(FILE *f, void *ud) {
  const strata__lda_view *v = ud;
  for (uint32_t d = 0; d < v->n_docs; d++) {
    uint32_t len;
    const int32_t *row = strata__lda_doc_row(v, d, &len);
    double den = len + v->K * v->alpha;
    fprintf(f, "%u", d);
    for (uint32_t k = 0; k < v->K; k++) fprintf(f, "\t%.5g", (row[k] + v->alpha) / den);
    fputc('\n', f);
  }
  return 0;
}

static int fill_word_topic(FILE *f, void *ud) {
  const strata__lda_view *v = ud;
  for (uint32_t w = 0; w < v->V; w++)
    if (fwrite(strata__lda_word_row(v, w), sizeof(float), v->K, f) != v->K)
      return strata_err_set(STRATA_EIO, "write failed");
  return 0;
}

static int fill_meta(FILE *f, void *ud) {
  const strata__lda_view *v = ud;
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "format", "strata-lda-1");
  strata_json_int(&j, "topics", v->K);
  strata_json_int(&j, "vocab", v->V);
  strata_json_int(&j, "docs", v->n_docs);
  strata_json_number(&j, "alpha", v->alpha);
  strata_json_number(&j, "beta", v->beta);
  strata_json_string(&j, "word_topic", "word_topic.f32: V rows of K float32 counts, row-major");
  strata_json_object_end(&j);
  fputc('\n', f);
  return 0;
}

int strata__lda_export(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                       const char *dir) {
  (void)setup;
  strata__lda_view v;
  int rc = strata__lda_layout(prob, &v);
  if (rc) return rc;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return strata_err_set(STRATA_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
  topics_ctx t = {&v, strata__lda_top(cfg)};
  rc = strata_write_atomic_in(dir, "topics.txt", fill_topics, &t);
  if (!rc) rc = strata_write_atomic_in(dir, "doc_topics.tsv", fill_doc_topics, &v);
  if (!rc) rc = strata_write_atomic_in(dir, "word_topic.f32", fill_word_topic, &v);
  if (!rc) rc = strata_write_atomic_in(dir, "z.txt", strata__lda_write_z, &v);
  if (!rc) rc = strata_write_atomic_in(dir, "meta.json", fill_meta, &v);
  return rc;
}
