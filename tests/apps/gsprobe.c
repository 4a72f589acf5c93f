/*
 * gsprobe: a round app (strata/round.h) that picks, every round, the block
 * of coordinates with the largest error (the Gauss-Southwell rule) on a
 * least-squares problem, so that a test can check the engine's rounds
 * against a direct computation.
 *
 * min |y - X beta|^2 / 2, X dense N x (nb K), drawn from the seed. Every
 * round each shard pushes X_d^T r_d; pull sums them in block order into
 * g = X^T r at the model of that moment, takes the block b whose |g_b|^2 is
 * largest and moves it by a gradient step of 1 / trace(X_b^T X_b), and
 * sends the step. With --round-depth 1 every choice is made on the model
 * after the round before (lag 0); the export (--model-out DIR) writes the
 * engine's choices (choices.txt) and those of a direct computation in one
 * loop over the same data (direct.txt), which must be equal.
 *
 * --fail-at WHERE:WORKER:ROUND makes a callback fail (schedule, pull: on
 * the coordinator, WORKER ignored; push, apply: on that worker) at that
 * round, for the failure tests.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/core.h"
#include "strata/main.h"
#include "strata/round.h"

typedef struct probe_config {
  int rows, blocks, width;
  const char *fail_at;
} probe_config;

#define OPT(f) offsetof(probe_config, f)
static const strata_option probe_options[] = {
    {.name = "rows",
     .type = STRATA_OPT_INT,
     .offset = OPT(rows),
     .def = "600",
     .metavar = "N",
     .min = 1,
     .max = 1e6,
     .help = "examples"},
    {.name = "blocks",
     .type = STRATA_OPT_INT,
     .offset = OPT(blocks),
     .def = "8",
     .metavar = "B",
     .min = 1,
     .max = 1e4,
     .help = "coordinate blocks"},
    {.name = "width",
     .type = STRATA_OPT_INT,
     .offset = OPT(width),
     .def = "4",
     .metavar = "K",
     .min = 1,
     .max = 1e4,
     .help = "coordinates per block"},
    {.name = "fail-at",
     .type = STRATA_OPT_STRING,
     .offset = OPT(fail_at),
     .metavar = "WHERE:WORKER:ROUND",
     .help = "fail schedule|pull|push|apply on that worker at that round"},
    {.name = NULL},
};

/* The failure asked for: where, worker, round. */
typedef struct fail_spec {
  char where[16];
  int worker;
  long round;
} fail_spec;

static int parse_fail(const char *s, fail_spec *f) {
  memset(f, 0, sizeof *f);
  f->round = -1;
  if (!s) return 0;
  if (sscanf(s, "%15[a-z]:%d:%ld", f->where, &f->worker, &f->round) != 3)
    return strata_err_set(STRATA_EUSAGE, "--fail-at: WHERE:WORKER:ROUND, got '%s'", s);
  return 0;
}

static int maybe_fail(const fail_spec *f, const char *where, int worker, int64_t round) {
  if (f->round == round && !strcmp(f->where, where) && (worker < 0 || worker == f->worker))
    return strata_err_set(STRATA_EINVAL, "gsprobe: %s fails at round %lld, as asked", where,
                          (long long)round);
  return 0;
}

/* The data of row i, the same wherever it is drawn: X row and target. */
static void draw_row(uint64_t seed, uint32_t i, int p, double *x, double *y) {
  strata_rng rng;
  strata_rng_seed(&rng, seed * 1000003u + i);
  double t = 0;
  for (int j = 0; j < p; j++) {
    x[j] = 2 * strata_rng_uniform(&rng) - 1;
    t += x[j] * (double)((j % 5) - 2);
  }
  *y = t + 0.1 * strata_rng_normal(&rng);
}

typedef struct shard_head {
  uint32_t n, p;
} shard_head;

static const double *shard_x(const strata_block *b) {
  return (const double *)((const char *)b->buf + 16);
}

/* The coordinator block: beta, then each block's step 1 / trace. */
typedef struct coord_head {
  uint32_t p, nb, K, pad;
} coord_head;

typedef struct probe_priv {
  probe_config cfg;
  uint64_t seed;
  int N;
  fail_spec fail;
  uint32_t *choices;
  size_t n_choices, cap;
} probe_priv;

static void priv_free(void *v) {
  probe_priv *pv = v;
  strata_free(pv->choices);
  strata_free(pv);
}

static double *coord_beta(strata_block *c) { return (double *)((char *)c->buf + sizeof(coord_head)); }

static int probe_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const probe_config *cfg = vcfg;
  int B = setup->strata, N = cfg->rows, p = cfg->blocks * cfg->width, rc;
  if (B > N) return strata_err_set(STRATA_EUSAGE, "gsprobe: --strata %d exceeds --rows %d", B, N);
  if ((rc = strata_problem_alloc(prob, B, B, 0, 0))) return rc;
  probe_priv *pv = strata_calloc(1, sizeof *pv);
  prob->coord.len = sizeof(coord_head) + 2 * (size_t)p * sizeof(double);
  prob->coord.buf = strata_calloc(1, prob->coord.len);
  if (!pv || !prob->coord.buf) {
    strata_free(pv);
    rc = strata_err_set(STRATA_ENOMEM, "gsprobe: out of memory");
    goto done;
  }
  pv->cfg = *cfg;
  pv->seed = setup->seed;
  pv->N = N;
  prob->priv = pv;
  prob->priv_free = priv_free;
  if ((rc = parse_fail(cfg->fail_at, &pv->fail))) goto done;
  *(coord_head *)prob->coord.buf = (coord_head){(uint32_t)p, (uint32_t)cfg->blocks, (uint32_t)cfg->width, 0};
  double *step = coord_beta(&prob->coord) + p;
  for (int d = 0; d < B; d++) {
    uint32_t lo = (uint32_t)((int64_t)N * d / B), hi = (uint32_t)((int64_t)N * (d + 1) / B);
    uint32_t n = hi - lo;
    strata_block *b = &prob->data[d];
    b->len = 16 + (size_t)n * (size_t)(p + 1) * sizeof(double);
    prob->resident[d].len = (size_t)n * sizeof(double);
    if (!(b->buf = strata_alloc_aligned(b->len)) ||
        !(prob->resident[d].buf = strata_alloc_aligned(prob->resident[d].len))) {
      rc = strata_err_set(STRATA_ENOMEM, "gsprobe: out of memory");
      goto done;
    }
    memset(b->buf, 0, 16);
    *(shard_head *)b->buf = (shard_head){n, (uint32_t)p};
    double *x = (double *)shard_x(b), *y = x + (size_t)n * p, *r = prob->resident[d].buf;
    for (uint32_t i = 0; i < n; i++) {
      draw_row(setup->seed, lo + i, p, x + (size_t)i * p, &y[i]);
      r[i] = y[i];
      for (int j = 0; j < p; j++) step[j / cfg->width] += x[(size_t)i * p + j] * x[(size_t)i * p + j];
    }
  }
  for (int b = 0; b < cfg->blocks; b++) step[b] = 1 / step[b];
  prob->n_examples = (uint64_t)N;
  prob->rounds_per_pass = 2;
done:
  if (rc) strata_problem_close(prob);
  return rc;
}

static int probe_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                          strata_schedule *sched) {
  (void)cfg;
  return strata_schedule_shards(sched, setup->workers, prob->n_data);
}

static int probe_schedule_round(const void *cfg, strata_problem *prob, const strata_round *r,
                                strata_round_plan *plan) {
  (void)cfg;
  probe_priv *pv = prob->priv;
  int rc = maybe_fail(&pv->fail, "schedule", -1, r->index);
  uint8_t all = 1; /* every coordinate's partial gradient */
  return rc ? rc : strata_round_assign(plan, -1, NULL, 0, &all, 1);
}

/* The worker's own index, for --fail-at. */
typedef struct probe_worker {
  int me;
  fail_spec fail;
} probe_worker;

static int probe_worker_init(const void *cfg, const strata_setup *setup, const void *meta,
                             size_t meta_len, void **state) {
  (void)meta, (void)meta_len;
  probe_worker *pw = strata_calloc(1, sizeof *pw);
  if (!pw) return strata_err_set(STRATA_ENOMEM, "gsprobe: out of memory");
  pw->me = setup->worker;
  int rc = parse_fail(((const probe_config *)cfg)->fail_at, &pw->fail);
  *state = pw;
  return rc;
}

static int probe_push(void *state, const strata_round *r, const strata_task_view *tv,
                      const strata_round_work *work, strata_bytes *out) {
  (void)work;
  probe_worker *pw = state;
  int rc = maybe_fail(&pw->fail, "push", pw->me, r->index);
  if (rc) return rc;
  const shard_head *h = tv->data->buf;
  const double *x = shard_x(tv->data), *res = tv->resident->buf;
  double *g = strata_bytes_add(out, h->p * sizeof *g);
  if (!g) return STRATA_ENOMEM;
  memset(g, 0, h->p * sizeof *g);
  for (uint32_t i = 0; i < h->n; i++)
    for (uint32_t j = 0; j < h->p; j++) g[j] += x[(size_t)i * h->p + j] * res[i];
  return 0;
}

/* The Gauss-Southwell choice and step from g: block b and its K steps. */
static uint32_t choose(const coord_head *ch, const double *step, const double *g, double *delta) {
  uint32_t best = 0;
  double top = -1;
  for (uint32_t b = 0; b < ch->nb; b++) {
    double e = 0;
    for (uint32_t k = 0; k < ch->K; k++) e += g[b * ch->K + k] * g[b * ch->K + k];
    if (e > top) {
      top = e;
      best = b;
    }
  }
  for (uint32_t k = 0; k < ch->K; k++) delta[k] = step[best] * g[best * ch->K + k];
  return best;
}

static int probe_pull(const void *cfg, strata_problem *prob, const strata_round *r,
                      const strata_round_plan *plan, const strata_round_part *parts,
                      strata_bytes *apply_out) {
  (void)cfg, (void)plan;
  probe_priv *pv = prob->priv;
  int rc = maybe_fail(&pv->fail, "pull", -1, r->index);
  if (rc) return rc;
  coord_head *ch = prob->coord.buf;
  double *beta = coord_beta(&prob->coord), *step = beta + ch->p;
  double *g = strata_calloc(ch->p, sizeof *g);
  if (!g) return strata_err_set(STRATA_ENOMEM, "gsprobe: out of memory");
  for (int d = 0; d < prob->n_data; d++)
    for (uint32_t j = 0; j < ch->p; j++) g[j] += ((const double *)parts[d].buf)[j];
  uint32_t *out = strata_bytes_add(apply_out, 8 + ch->K * sizeof(double));
  if (!out) {
    strata_free(g);
    return STRATA_ENOMEM;
  }
  double *delta = (double *)(out + 2);
  out[0] = choose(ch, step, g, delta);
  out[1] = 0;
  for (uint32_t k = 0; k < ch->K; k++) beta[out[0] * ch->K + k] += delta[k];
  strata_free(g);
  /* The choices, for the export's comparison. */
  uint32_t *grown = strata_grow(pv->choices, pv->n_choices + 1, &pv->cap, SIZE_MAX, sizeof *grown);
  if (!grown) return strata_err_set(STRATA_ENOMEM, "gsprobe: out of memory");
  pv->choices = grown;
  pv->choices[pv->n_choices++] = out[0];
  return 0;
}

static int probe_apply(void *state, const strata_round *r, const strata_task_view *tv,
                       const void *values, size_t len) {
  probe_worker *pw = state;
  int rc = maybe_fail(&pw->fail, "apply", pw->me, r->index);
  if (rc) return rc;
  const shard_head *h = tv->data->buf;
  const uint32_t *in = values;
  const double *delta = (const double *)(in + 2);
  uint32_t K = (uint32_t)((len - 8) / sizeof(double)), b = in[0];
  const double *x = shard_x(tv->data);
  double *res = tv->resident->buf;
  for (uint32_t i = 0; i < h->n; i++)
    for (uint32_t k = 0; k < K; k++) res[i] -= x[(size_t)i * h->p + b * K + k] * delta[k];
  return 0;
}

static const strata_round_ops probe_rounds = {.schedule_round = probe_schedule_round,
                                              .push = probe_push,
                                              .pull = probe_pull,
                                              .apply = probe_apply};

static int probe_block_objective(void *state, int pass, strata_block_kind kind, int id,
                                 const strata_block *b, double *partials) {
  (void)state, (void)pass, (void)id;
  if (kind != STRATA_BLOCK_RESIDENT) return 0;
  const double *res = b->buf;
  for (size_t i = 0; i < b->len / sizeof(double); i++) partials[0] += res[i] * res[i] / 2;
  return 0;
}

static const char *const probe_objective_names[] = {"loss"};

static void probe_objectives(const void *cfg, const strata_problem *prob, const double *partials,
                             double *values) {
  (void)cfg, (void)prob;
  values[0] = partials[0];
}

typedef struct seq {
  const uint32_t *v;
  size_t n;
} seq;

static int write_seq(FILE *f, void *ud) {
  const seq *s = ud;
  for (size_t i = 0; i < s->n; i++) fprintf(f, "%u\n", s->v[i]);
  return 0;
}

/* The same rule in one loop over every row, round after round, from the
 * same data: its choices are what the engine's must be at depth 1. */
static int direct(const probe_priv *pv, const coord_head *ch, const double *step, uint32_t *out,
                  size_t rounds) {
  int N = pv->N, p = (int)ch->p, rc = 0;
  double *x = strata_malloc((size_t)N * p * sizeof *x), *r = strata_malloc((size_t)N * sizeof *r);
  double *g = strata_malloc((size_t)p * sizeof *g), *delta = strata_malloc(ch->K * sizeof *delta);
  if (!x || !r || !g || !delta) {
    rc = strata_err_set(STRATA_ENOMEM, "gsprobe: out of memory");
    goto done;
  }
  for (int i = 0; i < N; i++) draw_row(pv->seed, (uint32_t)i, p, x + (size_t)i * p, &r[i]);
  for (size_t t = 0; t < rounds; t++) {
    for (int j = 0; j < p; j++) {
      double s = 0;
      for (int i = 0; i < N; i++) s += x[(size_t)i * p + j] * r[i];
      g[j] = s;
    }
    uint32_t b = choose(ch, step, g, delta);
    out[t] = b;
    for (int i = 0; i < N; i++)
      for (uint32_t k = 0; k < ch->K; k++) r[i] -= x[(size_t)i * p + b * ch->K + k] * delta[k];
  }
done:
  strata_free(x);
  strata_free(r);
  strata_free(g);
  strata_free(delta);
  return rc;
}

static int probe_export(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                        const char *dir) {
  (void)cfg, (void)setup;
  const probe_priv *pv = prob->priv;
  const coord_head *ch = prob->coord.buf;
  const double *step = (const double *)((const char *)prob->coord.buf + sizeof *ch) + ch->p;
  char path[4096];
  mkdir(dir, 0777);
  uint32_t *want = strata_malloc((pv->n_choices ? pv->n_choices : 1) * sizeof *want);
  if (!want) return strata_err_set(STRATA_ENOMEM, "gsprobe: out of memory");
  int rc = direct(pv, ch, step, want, pv->n_choices);
  seq got = {pv->choices, pv->n_choices}, ref = {want, pv->n_choices};
  snprintf(path, sizeof path, "%s/choices.txt", dir);
  if (!rc) rc = strata_write_atomic(path, write_seq, &got);
  snprintf(path, sizeof path, "%s/direct.txt", dir);
  if (!rc) rc = strata_write_atomic(path, write_seq, &ref);
  strata_free(want);
  return rc;
}

static const strata_app probe_app = {
    .name = "gsprobe",
    .summary = "Gauss-Southwell block choice on rounds, checked against a direct computation",
    .unit = "rows",
    .options = probe_options,
    .config_size = sizeof(probe_config),
    .n_partials = 1,
    .n_objectives = 1,
    .objective_names = probe_objective_names,
    .load = probe_load,
    .schedule = probe_schedule,
    .worker_init = probe_worker_init,
    .worker_free = strata_free,
    .block_objective = probe_block_objective,
    .objectives = probe_objectives,
    .round = &probe_rounds,
    .export_model = probe_export,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&probe_app};
  return strata_main(argc, argv, apps, 1);
}
