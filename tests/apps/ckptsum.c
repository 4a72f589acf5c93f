/*
 * strata_ckptsum: an additive app whose model after k passes is known in
 * closed form, so that a test can check a checkpoint's rows against a
 * replay of exactly the updates of passes 0..k-1 (docs/failure.md).
 *
 * Float rows on the diagonal schedule with B x B data blocks: every chunk
 * of pass p adds p + 1 to each of its rotating rows, to each row of its
 * task's resident block, and to the one global row. A rotating or resident
 * row is in B tasks a pass, so after k passes it holds B k (k + 1) / 2; the
 * global row is in every chunk, B B depth of them a pass, and holds
 * B B depth k (k + 1) / 2. Every value is a whole number below 2^24, exact
 * in float whatever the order of the adds: a snapshot that took part of
 * pass k, or missed part of pass k - 1, is off by a whole number.
 *
 * export_model checks every row of every block against those values for
 * the passes the model holds (--passes; a resumed run with --passes equal
 * to its checkpoint's exports the checkpoint's model) and fails naming the
 * first row that differs; it writes DIR/check.txt with the rows checked.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/core.h"
#include "strata/main.h"

typedef struct cs_config {
  int rows, width, fault;
} cs_config;

#define OPT(f) offsetof(cs_config, f)
static const strata_option cs_options[] = {
    {.name = "rows",
     .type = STRATA_OPT_INT,
     .offset = OPT(rows),
     .def = "40",
     .metavar = "N",
     .min = 1,
     .max = 100000,
     .help = "rows of each block (resident and rotating)"},
    {.name = "width",
     .type = STRATA_OPT_INT,
     .offset = OPT(width),
     .def = "3",
     .metavar = "L",
     .min = 1,
     .max = 1024,
     .help = "floats per row"},
    {.name = "fault",
     .type = STRATA_OPT_FLAG,
     .offset = OPT(fault),
     .help = "one update too many (pass 1, the first row of the first chunk): the check must fail"},
    {.name = NULL},
};

static int block(strata_block *b, uint32_t rows, int width, int rotating) {
  b->nrows = rows;
  b->row_bytes = (uint32_t)width * sizeof(float);
  b->len = (size_t)rows * b->row_bytes;
  if (!(b->buf = strata_alloc_aligned(b->len)))
    return strata_err_set(STRATA_ENOMEM, "ckptsum: out of memory");
  memset(b->buf, 0, b->len);
  if (!rotating) b->row_bytes = 0;
  return 0;
}

static int cs_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const cs_config *cfg = vcfg;
  int B = setup->strata, rc = strata_problem_alloc(prob, B * B, B, B, 0);
  uint32_t rows = (uint32_t)(cfg->rows > setup->depth ? cfg->rows : setup->depth);
  for (int i = 0; i < B * B && !rc; i++) {
    prob->data[i].len = sizeof(int32_t);
    if (!(prob->data[i].buf = strata_alloc_aligned(prob->data[i].len)))
      rc = strata_err_set(STRATA_ENOMEM, "ckptsum: out of memory");
    else
      *(int32_t *)prob->data[i].buf = i;
  }
  for (int i = 0; i < B && !rc; i++) {
    rc = block(&prob->resident[i], rows, cfg->width, 0);
    if (!rc) rc = block(&prob->rotating[i], rows, cfg->width, 1);
  }
  if (!rc) rc = block(&prob->global, 1, cfg->width, 1);
  if (rc) {
    strata_problem_close(prob);
    return rc;
  }
  prob->n_examples = (uint64_t)B * (uint64_t)B;
  return 0;
}

static int cs_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                       strata_schedule *sched) {
  (void)cfg, (void)prob;
  return strata_schedule_diagonal(sched, setup->workers, setup->strata);
}

static int cs_worker_init(const void *cfg, const strata_setup *setup, const void *meta,
                          size_t meta_len, void **state) {
  (void)setup, (void)meta, (void)meta_len;
  *state = (void *)cfg;
  return 0;
}

static void add(float *v, size_t n, float x) {
  for (size_t i = 0; i < n; i++) v[i] += x;
}

static int cs_compute(void *state, const strata_task_view *tv, double *partials) {
  const cs_config *cfg = state;
  float x = (float)(tv->pass + 1);
  size_t L = tv->rotating->row_bytes / sizeof(float);
  if (cfg->fault && tv->pass == 0 && tv->ids.data == 0 && tv->chunk == 0 && tv->row_hi > tv->row_lo)
    ((float *)tv->rotating->buf)[(size_t)tv->row_lo * L] += 1;
  add((float *)tv->rotating->buf + (size_t)tv->row_lo * L, (size_t)(tv->row_hi - tv->row_lo) * L, x);
  /* The resident rows once per task: with its first chunk. */
  if (tv->chunk == 0) add(tv->resident->buf, tv->resident->len / sizeof(float), x);
  add(tv->global->buf, tv->global->len / sizeof(float), x);
  partials[0] += 1;
  return 0;
}

static const char *const cs_objective_names[] = {"chunks"};

static void cs_objectives(const void *cfg, const strata_problem *prob, const double *p,
                          double *values) {
  (void)cfg, (void)prob;
  values[0] = p[0];
}

/* The first value of b that is not `want`, or -1. */
static long first_off(const strata_block *b, double want) {
  const float *v = b->buf;
  for (size_t i = 0; i < b->len / sizeof(float); i++)
    if ((double)v[i] != want) return (long)i;
  return -1;
}

typedef struct check_ctx {
  long values;
  int passes;
} check_ctx;

static int write_check(FILE *f, void *ud) {
  const check_ctx *c = ud;
  fprintf(f, "passes %d\nvalues checked %ld\nmismatches 0\n", c->passes, c->values);
  return 0;
}

static int cs_export(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                     const char *dir) {
  (void)cfg;
  double k = setup->passes, B = setup->strata, tri = k * (k + 1) / 2;
  check_ctx c = {0, setup->passes};
  struct {
    const strata_block *b;
    int n;
    const char *kind;
    double want;
  } sets[3] = {{prob->resident, prob->n_resident, "resident", B * tri},
               {prob->rotating, prob->n_rotating, "rotating", B * tri},
               {&prob->global, 1, "global", B * B * setup->depth * tri}};
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < sets[s].n; i++) {
      const strata_block *b = &sets[s].b[i];
      long off = first_off(b, sets[s].want);
      if (off >= 0)
        return strata_err_set(STRATA_EINVAL,
                              "%s block %d, value %ld: %.1f, but a replay of passes 1..%d gives %.1f",
                              sets[s].kind, i, off, ((const float *)b->buf)[off], setup->passes,
                              sets[s].want);
      c.values += (long)(b->len / sizeof(float));
    }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return strata_err_set(STRATA_EIO, "%s: cannot create: %s", dir, strerror(errno));
  return strata_write_atomic_in(dir, "check.txt", write_check, &c);
}

static const strata_app cs_app = {
    .name = "ckptsum",
    .flags = STRATA_APP_ADDITIVE,
    .summary = "adds p + 1 to every row in pass p; its export checks the model against the replay",
    .examples = "  mpirun -np 3 strata_ckptsum --mode ssp --staleness 2 --model-out m\n",
    .options = cs_options,
    .config_size = sizeof(cs_config),
    .defaults = {.passes = 6, .depth = 2},
    .n_partials = 1,
    .n_objectives = 1,
    .objective_names = cs_objective_names,
    .load = cs_load,
    .schedule = cs_schedule,
    .worker_init = cs_worker_init,
    .compute = cs_compute,
    .objectives = cs_objectives,
    .export_model = cs_export,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&cs_app};
  return strata_main(argc, argv, apps, 1);
}
