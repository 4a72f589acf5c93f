/*
 * latin: row and column sums of a random sparse matrix, on a schedule of
 * its own. The matrix is cut into B x B blocks; rows are the resident side
 * (one double per row, staying with the worker that owns the row block),
 * columns the rotating side (one double per column, travelling between
 * workers). The schedule is a random Latin square: in sub-epoch t, row
 * block i works on column block L(i, t), and every column block is in use
 * exactly once per sub-epoch. Every pass adds each entry to its row's and
 * its column's sum, so after N passes every sum is N times the true one.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/core.h"
#include "strata/main.h"

/* ---- configuration: one struct, one option table ------------------------ */
typedef struct latin_config {
  int rows, cols;
  uint64_t entries;
} latin_config;

#define OPT(f) offsetof(latin_config, f)
static const strata_option latin_options[] = {
    {.name = "rows",
     .type = STRATA_OPT_INT,
     .offset = OPT(rows),
     .def = "1000",
     .metavar = "N",
     .min = 1,
     .max = 1e9,
     .help = "matrix rows"},
    {.name = "cols",
     .type = STRATA_OPT_INT,
     .offset = OPT(cols),
     .def = "500",
     .metavar = "N",
     .min = 1,
     .max = 1e9,
     .help = "matrix columns"},
    {.name = "entries",
     .type = STRATA_OPT_U64,
     .offset = OPT(entries),
     .def = "100000",
     .metavar = "N",
     .min = 1,
     .max = 1e9,
     .help = "non-zeros"},
    {.name = NULL},
};

/* ---- blocks ------------------------------------------------------------- */
/* Block b of a B-way split of n holds [split(n, B, b), split(n, B, b + 1)). */
static uint32_t split(int n, int B, int b) { return (uint32_t)((int64_t)n * b / B); }

/* The block of index x in a B-way split of n. */
static int block_of(uint32_t x, int n, int B) {
  int b = (int)((int64_t)x * B / n);
  while (split(n, B, b + 1) <= x) b++;
  return b;
}

/* One example: indices local to its row block and column block. */
typedef struct entry {
  uint32_t row, col;
  double value;
} entry;

/* A data block: depth + 1 offsets (entries of chunk c are [off[c], off[c+1])),
 * then the entries, grouped by the pipeline chunk their column falls in. */
static size_t entries_offset(int depth) {
  return strata_round_up((size_t)(depth + 1) * sizeof(uint32_t), 16);
}

static int latin_load(const void *vcfg, const strata_setup *setup, strata_problem *prob) {
  const latin_config *cfg = vcfg;
  int B = setup->strata, depth = setup->depth, rc;
  if (B > cfg->rows || B > cfg->cols)
    return strata_err_set(STRATA_EUSAGE, "latin: --strata %d exceeds the matrix size", B);
  if ((rc = strata_problem_alloc(prob, B * B, B, B, 0))) return rc;

  /* The entries, drawn from the seed. */
  entry *all = strata_malloc(cfg->entries * sizeof *all);
  uint32_t *block = strata_malloc(cfg->entries * sizeof *block);
  if (!all || !block) {
    rc = strata_err_set(STRATA_ENOMEM, "latin: out of memory");
    goto done;
  }
  strata_rng rng;
  strata_rng_seed(&rng, setup->seed);
  for (uint64_t x = 0; x < cfg->entries; x++) {
    uint32_t r = (uint32_t)strata_rng_below(&rng, (uint64_t)cfg->rows);
    uint32_t c = (uint32_t)strata_rng_below(&rng, (uint64_t)cfg->cols);
    int bi = block_of(r, cfg->rows, B), bj = block_of(c, cfg->cols, B);
    all[x] = (entry){r - split(cfg->rows, B, bi), c - split(cfg->cols, B, bj),
                     strata_rng_uniform(&rng)};
    block[x] = (uint32_t)(bi * B + bj);
  }

  /* Parameter blocks: arrays of doubles, zero to start. A rotating block
   * declares its rows so that the engine can cut it into chunks. */
  for (int b = 0; b < B; b++) {
    uint32_t nr = split(cfg->rows, B, b + 1) - split(cfg->rows, B, b);
    uint32_t nc = split(cfg->cols, B, b + 1) - split(cfg->cols, B, b);
    prob->resident[b] = (strata_block){strata_alloc_aligned(nr * sizeof(double)),
                                       nr * sizeof(double), nr, 0};
    prob->rotating[b] = (strata_block){strata_alloc_aligned(nc * sizeof(double)),
                                       nc * sizeof(double), nc, sizeof(double)};
    if (!prob->resident[b].buf || !prob->rotating[b].buf) {
      rc = strata_err_set(STRATA_ENOMEM, "latin: out of memory");
      goto done;
    }
    memset(prob->resident[b].buf, 0, prob->resident[b].len);
    memset(prob->rotating[b].buf, 0, prob->rotating[b].len);
  }

  /* Data blocks, laid out chunk by chunk of the rotating block's rows. */
  size_t eoff = entries_offset(depth);
  for (int d = 0; d < B * B; d++) {
    uint32_t n = 0, ncols = prob->rotating[d % B].nrows;
    for (uint64_t x = 0; x < cfg->entries; x++) n += block[x] == (uint32_t)d;
    strata_block *blk = &prob->data[d];
    blk->len = eoff + n * sizeof(entry);
    if (!(blk->buf = strata_alloc_aligned(blk->len))) {
      rc = strata_err_set(STRATA_ENOMEM, "latin: out of memory");
      goto done;
    }
    memset(blk->buf, 0, eoff);
    uint32_t *off = blk->buf;
    entry *out = (entry *)((char *)blk->buf + eoff);
    uint32_t k = 0;
    for (int c = 0; c < depth; c++) {
      uint32_t lo, hi;
      strata_chunk_rows(ncols, depth, c, &lo, &hi);
      off[c] = k;
      for (uint64_t x = 0; x < cfg->entries; x++)
        if (block[x] == (uint32_t)d && all[x].col >= lo && all[x].col < hi) out[k++] = all[x];
    }
    off[depth] = k;
  }
  prob->n_examples = cfg->entries;
done:
  strata_free(all);
  strata_free(block);
  if (rc) strata_problem_close(prob);
  return rc;
}

/* ---- the schedule: a random Latin square -------------------------------- */
/* A random permutation of 0..n-1 (Fisher-Yates). */
static void shuffle(int *p, int n, strata_rng *rng) {
  for (int i = 0; i < n; i++) p[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)strata_rng_below(rng, (uint64_t)i + 1), x = p[i];
    p[i] = p[j];
    p[j] = x;
  }
}

/* L(i, t) = sym[(row[i] + sub[t]) mod B] with three random permutations:
 * each row of L and each column of L is a permutation of the column
 * blocks, which is what makes every sub-epoch a stratum. Row block i
 * belongs to worker i * P / B. */
static int latin_schedule(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                          strata_schedule *sched) {
  int B = setup->strata, P = setup->workers;
  int *perm = strata_malloc(3 * (size_t)B * sizeof *perm);
  if (!perm) return strata_err_set(STRATA_ENOMEM, "latin: out of memory");
  int *row = perm, *sub = perm + B, *sym = perm + 2 * B;
  strata_rng rng;
  strata_rng_seed(&rng, setup->seed ^ 0x1a71u);
  shuffle(row, B, &rng);
  shuffle(sub, B, &rng);
  shuffle(sym, B, &rng);
  int rc = strata_schedule_init(sched, P, B, B * B, B, B);
  for (int t = 0; t < B && !rc; t++)
    for (int i = 0; i < B && !rc; i++) {
      int j = sym[(row[i] + sub[t]) % B];
      rc = strata_schedule_add(sched, t, (int)((int64_t)i * P / B), (strata_task){i * B + j, i, j});
    }
  if (!rc) rc = strata_schedule_finish(sched);
  strata_free(perm);
  return rc;
}

/* ---- worker side -------------------------------------------------------- */
/* A worker's state: the pipeline depth, which says where entries start. */
static int latin_worker_init(const void *cfg, const strata_setup *setup, const void *meta,
                             size_t meta_len, void **state) {
  int *depth = strata_malloc(sizeof *depth);
  if (!depth) return strata_err_set(STRATA_ENOMEM, "latin: out of memory");
  *depth = setup->depth;
  *state = depth;
  return 0;
}

static int latin_compute(void *state, const strata_task_view *tv, double *partials) {
  const uint32_t *off = tv->data->buf;
  if (!off) return 0; /* an empty data block has no buffer */
  const entry *e = (const entry *)((const char *)off + entries_offset(*(const int *)state));
  double *row_sum = tv->resident->buf, *col_sum = tv->rotating->buf;
  /* Only this chunk's entries: their columns lie in [row_lo, row_hi). */
  for (uint32_t x = off[tv->chunk]; x < off[tv->chunk + 1]; x++) {
    row_sum[e[x].row] += e[x].value;
    col_sum[e[x].col] += e[x].value;
    partials[0] += e[x].value;
  }
  return 0;
}

/* ---- coordinator side --------------------------------------------------- */
static const char *const latin_objective_names[] = {"pass_total"};

static void latin_objectives(const void *cfg, const strata_problem *prob, const double *partials,
                             double *values) {
  values[0] = partials[0];
}

static int write_sums(FILE *f, void *ud) {
  const strata_problem *prob = ud;
  for (int b = 0; b < prob->n_rotating; b++) {
    const double *s = prob->rotating[b].buf;
    for (uint32_t i = 0; i < prob->rotating[b].nrows; i++) fprintf(f, "%.17g\n", s[i]);
  }
  return 0;
}

/* --model-out DIR: the column sums, one per line (written atomically). */
static int latin_export(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                        const char *dir) {
  char path[4096];
  mkdir(dir, 0777); /* may exist; strata_write_atomic reports real failures */
  snprintf(path, sizeof path, "%s/col_sums.txt", dir);
  return strata_write_atomic(path, write_sums, (void *)prob);
}

static const strata_app latin_app = {
    .name = "latin",
    .summary = "row and column sums of a random sparse matrix, on a Latin-square schedule",
    .examples = "  mpirun -np 3 latin --rows 1000 --cols 500 --strata 4\n"
                "  latin --mode serial --strata 4 --model-out sums\n",
    .unit = "entries",
    .options = latin_options,
    .config_size = sizeof(latin_config),
    .n_partials = 1,
    .n_objectives = 1,
    .objective_names = latin_objective_names,
    .load = latin_load,
    .schedule = latin_schedule,
    .worker_init = latin_worker_init,
    .worker_free = strata_free,
    .compute = latin_compute,
    .objectives = latin_objectives,
    .export_model = latin_export,
};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&latin_app};
  return strata_main(argc, argv, apps, 1);
}
