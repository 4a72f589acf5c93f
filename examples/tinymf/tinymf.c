/*
 * tinymf: matrix factorisation by SGD on a synthetic low-rank matrix, an
 * app whose parameters merge by adding deltas, so it runs in every mode
 * but sfb: scheduled (item factors rotate on the ring), serial, and the
 * parameter-server modes bsp, absp, ssp, essp and async (item factors live
 * in the sharded table). Ratings are X = U V' + noise with U, V drawn from
 * the seed; the app learns W (users, resident) and H (items, rotating) and
 * reports the training RMSE of each pass.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "strata/core.h"
#include "strata/main.h"

typedef struct tinymf_config {
  int users, items, rank;
  uint64_t ratings;
  double lr, lambda, noise;
} tinymf_config;

#define OPT(f) offsetof(tinymf_config, f)
static const strata_option tinymf_options[] = {
    {.name = "users",
     .type = STRATA_OPT_INT,
     .offset = OPT(users),
     .def = "1000",
     .metavar = "N",
     .min = 1,
     .max = 1e8,
     .help = "users (rows)"},
    {.name = "items",
     .type = STRATA_OPT_INT,
     .offset = OPT(items),
     .def = "500",
     .metavar = "N",
     .min = 1,
     .max = 1e8,
     .help = "items (columns)"},
    {.name = "rank",
     .short_name = 'k',
     .type = STRATA_OPT_INT,
     .offset = OPT(rank),
     .def = "8",
     .metavar = "K",
     .min = 1,
     .max = 256,
     .help = "factors per user and item"},
    {.name = "ratings",
     .type = STRATA_OPT_U64,
     .offset = OPT(ratings),
     .def = "50000",
     .metavar = "N",
     .min = 1,
     .max = 1e9,
     .help = "observed entries"},
    {.name = "lr",
     .type = STRATA_OPT_DOUBLE | STRATA_OPT_OPEN_MIN,
     .offset = OPT(lr),
     .def = "0.05",
     .metavar = "ETA",
     .max = 10,
     .help = "SGD step size"},
    {.name = "lambda",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(lambda),
     .def = "0.02",
     .metavar = "L",
     .max = 100,
     .help = "L2 penalty"},
    {.name = "noise",
     .type = STRATA_OPT_DOUBLE,
     .offset = OPT(noise),
     .def = "0.1",
     .metavar = "S",
     .max = 100,
     .help = "standard deviation of the noise on each rating"},
    {.name = NULL},
};

/* Block b of a B-way split of n holds [split(n, B, b), split(n, B, b + 1)). */
static uint32_t split(int n, int B, int b) { return (uint32_t)((int64_t)n * b / B); }

static int block_of(uint32_t x, int n, int B) {
  int b = (int)((int64_t)x * B / n);
  while (split(n, B, b + 1) <= x) b++;
  return b;
}

/* One rating, with indices local to its user block and item block. */
typedef struct rating {
  uint32_t user, item;
  float value;
} rating;

/* A data block: depth + 1 offsets, then the ratings grouped by the pipeline
 * chunk of H their item falls in (chunk c: ratings [off[c], off[c+1])). */
static size_t ratings_offset(int depth) {
  return strata_round_up((size_t)(depth + 1) * sizeof(uint32_t), 16);
}

/* n rows of k floats, drawn around 0 with standard deviation sd. */
static float *random_rows(uint32_t n, int k, double sd, strata_rng *rng) {
  float *f = strata_alloc_aligned((size_t)n * (size_t)k * sizeof *f + 1);
  for (size_t i = 0; f && i < (size_t)n * (size_t)k; i++) f[i] = (float)(sd * strata_rng_normal(rng));
  return f;
}

static int tinymf_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const tinymf_config *cfg = vcfg;
  int B = setup->strata, depth = setup->depth, k = cfg->rank, rc;
  if (B > cfg->users || B > cfg->items)
    return strata_err_set(STRATA_EUSAGE, "tinymf: --strata %d exceeds the users or items", B);
  if ((rc = strata_problem_alloc(prob, B * B, B, B, 0))) return rc;
  strata_rng rng;
  strata_rng_seed(&rng, setup->seed);
  /* The true factors: entries of U V' have variance 1. */
  double sd = 1 / sqrt(sqrt((double)k));
  float *U = random_rows((uint32_t)cfg->users, k, sd, &rng);
  float *V = random_rows((uint32_t)cfg->items, k, sd, &rng);
  rating *all = strata_malloc(cfg->ratings * sizeof *all);
  uint32_t *block = strata_malloc(cfg->ratings * sizeof *block);
  if (!U || !V || !all || !block) {
    rc = strata_err_set(STRATA_ENOMEM, "tinymf: out of memory");
    goto done;
  }
  for (uint64_t x = 0; x < cfg->ratings; x++) {
    uint32_t u = (uint32_t)strata_rng_below(&rng, (uint64_t)cfg->users);
    uint32_t i = (uint32_t)strata_rng_below(&rng, (uint64_t)cfg->items);
    double v = cfg->noise * strata_rng_normal(&rng);
    for (int f = 0; f < k; f++) v += (double)U[(size_t)u * k + f] * V[(size_t)i * k + f];
    int bu = block_of(u, cfg->users, B), bi = block_of(i, cfg->items, B);
    all[x] = (rating){u - split(cfg->users, B, bu), i - split(cfg->items, B, bi), (float)v};
    block[x] = (uint32_t)(bu * B + bi);
  }
  /* W (resident, by user block) and H (rotating, by item block): k floats
   * per row, small random values to start. */
  for (int b = 0; b < B; b++) {
    uint32_t nu = split(cfg->users, B, b + 1) - split(cfg->users, B, b);
    uint32_t ni = split(cfg->items, B, b + 1) - split(cfg->items, B, b);
    uint32_t row = (uint32_t)k * sizeof(float);
    prob->resident[b] = (strata_block){random_rows(nu, k, 0.1, &rng), (size_t)nu * row, nu, 0};
    prob->rotating[b] = (strata_block){random_rows(ni, k, 0.1, &rng), (size_t)ni * row, ni, row};
    if (!prob->resident[b].buf || !prob->rotating[b].buf) {
      rc = strata_err_set(STRATA_ENOMEM, "tinymf: out of memory");
      goto done;
    }
  }
  /* Data blocks: a counting sort by block, then by chunk within a block. */
  size_t roff = ratings_offset(depth);
  for (int d = 0; d < B * B; d++) {
    uint32_t n = 0, nitems = prob->rotating[d % B].nrows;
    for (uint64_t x = 0; x < cfg->ratings; x++) n += block[x] == (uint32_t)d;
    strata_block *blk = &prob->data[d];
    blk->len = roff + n * sizeof(rating);
    if (!(blk->buf = strata_alloc_aligned(blk->len))) {
      rc = strata_err_set(STRATA_ENOMEM, "tinymf: out of memory");
      goto done;
    }
    memset(blk->buf, 0, roff);
    uint32_t *off = blk->buf;
    rating *out = (rating *)((char *)blk->buf + roff);
    uint32_t m = 0;
    for (int c = 0; c < depth; c++) {
      uint32_t lo, hi;
      strata_chunk_rows(nitems, depth, c, &lo, &hi);
      off[c] = m;
      for (uint64_t x = 0; x < cfg->ratings; x++)
        if (block[x] == (uint32_t)d && all[x].item >= lo && all[x].item < hi) out[m++] = all[x];
    }
    off[depth] = m;
  }
  prob->n_examples = cfg->ratings;
done:
  strata_free(U);
  strata_free(V);
  strata_free(all);
  strata_free(block);
  if (rc) strata_problem_close(prob);
  return rc;
}

/* Gemulla's diagonal strata: in sub-epoch t user block i meets item block
 * (i + t) mod B. */
static int tinymf_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                           strata_schedule *sched) {
  return strata_schedule_diagonal(sched, setup->workers, setup->strata);
}

/* A worker keeps its configuration and the pipeline depth. */
typedef struct tinymf_worker {
  tinymf_config cfg;
  int depth;
} tinymf_worker;

static int tinymf_worker_init(const void *cfg, const strata_setup *setup, const void *meta,
                              size_t meta_len, void **state) {
  tinymf_worker *w = strata_malloc(sizeof *w);
  if (!w) return strata_err_set(STRATA_ENOMEM, "tinymf: out of memory");
  w->cfg = *(const tinymf_config *)cfg;
  w->depth = setup->depth;
  *state = w;
  return 0;
}

/* One SGD step per rating of the chunk; partials: squared errors (before
 * each step) and their count. */
static int tinymf_compute(void *state, const strata_task_view *tv, double *partials) {
  const tinymf_worker *w = state;
  const uint32_t *off = tv->data->buf;
  if (!off) return 0; /* an empty data block has no buffer */
  const rating *r = (const rating *)((const char *)off + ratings_offset(w->depth));
  int k = w->cfg.rank;
  float lr = (float)w->cfg.lr, lambda = (float)w->cfg.lambda;
  float *W = tv->resident->buf, *H = tv->rotating->buf;
  for (uint32_t x = off[tv->chunk]; x < off[tv->chunk + 1]; x++) {
    float *wu = W + (size_t)r[x].user * k, *hi = H + (size_t)r[x].item * k;
    float pred = 0;
    for (int f = 0; f < k; f++) pred += wu[f] * hi[f];
    float e = r[x].value - pred;
    for (int f = 0; f < k; f++) {
      float a = wu[f], b = hi[f];
      wu[f] += lr * (e * b - lambda * a);
      hi[f] += lr * (e * a - lambda * b);
    }
    partials[0] += (double)e * e;
    partials[1] += 1;
  }
  return 0;
}

static const char *const tinymf_objective_names[] = {"train_rmse"};

static void tinymf_objectives(const void *cfg, const strata_problem *prob, const double *partials,
                              double *values) {
  values[0] = partials[1] > 0 ? sqrt(partials[0] / partials[1]) : NAN;
}

static const strata_app tinymf_app = {
    .name = "tinymf",
    .flags = STRATA_APP_ADDITIVE, /* H's rows are floats that merge by adding deltas */
    .summary = "matrix factorisation by SGD on a synthetic low-rank matrix",
    .examples = "  mpirun -np 3 tinymf --passes 10\n"
                "  mpirun -np 3 tinymf --mode ssp --staleness 2 --passes 10\n",
    .unit = "ratings",
    .options = tinymf_options,
    .config_size = sizeof(tinymf_config),
    .n_partials = 2,
    .n_objectives = 1,
    .objective_names = tinymf_objective_names,
    .diverged_hint = "try a smaller --lr",
    .load = tinymf_load,
    .schedule = tinymf_schedule,
    .worker_init = tinymf_worker_init,
    .worker_free = strata_free,
    .compute = tinymf_compute,
    .objectives = tinymf_objectives,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&tinymf_app};
  return strata_main(argc, argv, apps, 1);
}
