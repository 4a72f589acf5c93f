/*
 * strata mlr-predict: classifies the examples of a LIBSVM file with an
 * exported MLR model. One line per example: the predicted label and its
 * probability; a summary of accuracy and cross-entropy on stderr (the
 * file's labels must be among the model's classes).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "strata/core.h"
#include "strata/apps/libsvm.h"
#include "strata/apps/mlr.h"
#include "strata/options.h"

typedef struct mlr_predict_opts {
  const char *model, *data, *out;
} mlr_predict_opts;

#define POPT(f) offsetof(mlr_predict_opts, f)
static const strata_option options[] = {
    {.name = "model",
     .type = STRATA_OPT_STRING,
     .offset = POPT(model),
     .metavar = "DIR",
     .help = "model directory written by strata mlr --model-out (required)"},
    {.name = "data",
     .short_name = 'd',
     .type = STRATA_OPT_STRING,
     .offset = POPT(data),
     .metavar = "FILE",
     .help = "examples to classify, LIBSVM format (required; labels must be the model's)"},
    {.name = "out",
     .short_name = 'o',
     .type = STRATA_OPT_STRING,
     .offset = POPT(out),
     .metavar = "FILE",
     .help = "write the predictions here (atomically) instead of stdout"},
    {.name = NULL},
};

typedef struct job {
  const strata_mlr_model *m;
  const strata_libsvm *d;
  double loss;
  uint64_t hits;
} job;

static int emit(FILE *f, void *ud) {
  job *j = ud;
  const strata_mlr_model *m = j->m;
  const strata_libsvm *d = j->d;
  float *p = strata_malloc((size_t)m->classes * sizeof *p);
  if (!p) return strata_err_set(STRATA_ENOMEM, "out of memory");
  j->loss = 0;
  j->hits = 0;
  for (uint64_t i = 0; i < d->n_rows; i++) {
    uint64_t a = d->row_off[i];
    uint32_t best = strata_mlr_model_predict(m, d->col + a, d->val + a, d->row_off[i + 1] - a, p);
    fprintf(f, "%lld\t%.4f\n", (long long)m->labels[best], (double)p[best]);
    float py = p[d->label[i]];
    j->loss -= log(py > 1e-30f ? (double)py : 1e-30);
    j->hits += best == d->label[i];
  }
  strata_free(p);
  return 0;
}

int strata__mlr_predict_main(int argc, char **argv);

int strata__mlr_predict_main(int argc, char **argv) {
  mlr_predict_opts o;
  memset(&o, 0, sizeof o);
  strata_optgroup g = {"mlr-predict options", options, &o};
  int help = 0, rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc, argv, &help);
  if (!rc && help) {
    printf("Usage: strata mlr-predict --model DIR --data FILE [--out FILE]\n");
    strata_options_help(stdout, &g, 1);
    printf("\nExamples:\n  strata mlr-predict --model dna-model/ --data dna.scale.t\n");
    return 0;
  }
  if (!rc && (!o.model || !o.data))
    rc = strata_err_set(STRATA_EUSAGE, "--%s is required", o.model ? "data" : "model");
  if (rc) {
    fprintf(stderr, "strata mlr-predict: %s\n", strata_err_msg());
    return 2;
  }
  strata_mlr_model m;
  strata_libsvm d = {0};
  rc = strata_mlr_model_read(o.model, &m);
  if (!rc) {
    /* The model's classes and features: an unknown label or a feature
     * beyond the model's is an error naming its line. */
    strata_libsvm_opts lo = {.n_features = m.features, .class_label = m.labels, .n_classes = m.classes};
    rc = strata_libsvm_read(o.data, &lo, &d);
  }
  job j = {.m = &m, .d = &d};
  if (!rc) rc = o.out ? strata_write_atomic(o.out, emit, &j) : emit(stdout, &j);
  if (!rc)
    fprintf(stderr, "%llu examples: accuracy %.4f, mean cross-entropy %.4f\n",
            (unsigned long long)d.n_rows, (double)j.hits / (double)d.n_rows,
            j.loss / (double)d.n_rows);
  else
    fprintf(stderr, "strata mlr-predict: %s\n", strata_err_msg());
  strata_libsvm_close(&d);
  strata_mlr_model_close(&m);
  return rc == 0 ? 0 : rc == STRATA_EUSAGE ? 2 : 1;
}
