/*
 * bench/mf_kernel.c - the plain serial C kernel: seconds per data pass of
 * the MF SGD kernel (strata_mf_sgd) alone, with no engine around it (no
 * blocks, no schedule, no MPI, no per-chunk calls), on the same ratings,
 * initial model and hyper-parameters as `strata mf`. Benchmark tables
 * report the engine's modes as ratios to this.
 *
 * What it shares with apps/mf/mf.c: the data (--data FILE or synth:..., the
 * same default, the same readers and generator), the global mean mu (summed
 * in data order), the row layout (stride floats, strata_mf_init_row seeded
 * by the global user or item index with --seed, so the same initial model)
 * and the rate of pass t, lr / (1 + lr-decay * t), the decay defaulting
 * by rule as in the app (strata_mf_lr_decay).
 *
 * Order of the updates (--order). The engine's serial mode runs one worker
 * on one stratum (B = 1): a single data block holding every rating. mf_load
 * renumbers users and items with strata_schedule_balance, which for one
 * block stores rows by rating count, most rated first (ties in a seeded
 * random order), then renumbers the users in a seeded random order, and
 * lays the block out chunk by chunk: chunk c of --depth (8) holds the
 * ratings of the c-th slice of the renumbered items, users ascending inside
 * a chunk (data order among one user's ratings of a chunk), interleaved by
 * strata_mf_interleave. Every pass walks the chunks in that order; nothing
 * is shuffled, and the order never changes between passes. So:
 *  - engine (the default): exactly that renumbering, row placement and
 *    order, one strata_mf_sgd call over all ratings. The kernel then
 *    computes the very model the serial engine computes (per-pass train
 *    and test RMSE agree), and the time ratio
 *    engine / kernel is the engine's overhead alone.
 *  - shuffle: the textbook serial SGD, rows at the global indices and one
 *    seeded uniform permutation of all ratings, kept for every pass. No
 *    locality: this shows what the engine's layout is worth.
 *
 * Output: the effective options and one line per pass on stderr ("pass i:
 * X s (CPU C s), Y M updates/s, train RMSE Z", the RMSE from the squared
 * errors the kernel measures before each update), then one JSON line on
 * stdout with the build, the machine, every parameter, the data's size, the
 * wall and CPU seconds of every pass (pass_s, pass_cpu_s) and their medians
 * over the passes after --warmup (time_per_pass_s, cpu_per_pass_s; the
 * engine's "time per pass" is the median of passes 2..N, i.e. --warmup 1).
 * CPU seconds are what a pass costs on a machine shared with other work:
 * they leave out the time the process waited for a core.
 * Exit status 2 for a bad flag or synth: spec, 1 for a runtime failure
 * (unreadable or malformed data file, out of memory).
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/engine.h"
#include "strata/apps/mf.h"
#include "strata/options.h"
#include "strata/apps/ratings.h"
#include "strata/schedule.h"
#include "bench/bench_info.h"

#define PROG "mf_kernel"

typedef struct bench_opts {
  const char *data, *format, *update, *order, *test, *isa;
  int rank, passes, warmup, depth;
  double lr, lambda, lambda_bias, init_scale;
  strata_opt_double lr_decay;
  uint64_t seed;
} bench_opts;

#define O(field) offsetof(bench_opts, field)
static const strata_option bench_options[] = {
    {"data", 'd', STRATA_OPT_STRING, O(data), "synth:", "FILE|synth:...", 0, 0, NULL,
     "training ratings, or the generator: synth:users=U,items=I,ratings=N,rank=R,noise=S,"
     "seed=X,skew=A (default: the mf app's)", NULL},
    {"test", 0, STRATA_OPT_STRING, O(test), NULL, "FILE", 0, 0, NULL,
     "held-out ratings (ids as in --data, a file) scored after every pass, untimed", NULL},
    {"format", 0, STRATA_OPT_CHOICE, O(format), "auto", "FMT", 0, 0, "auto|tsv|dat|csv|libmf|mm",
     "rating file format", NULL},
    {"rank", 'k', STRATA_OPT_INT, O(rank), "100", "K", 1, 4096, NULL, "factor rank", NULL},
    {"passes", 'p', STRATA_OPT_INT, O(passes), "6", "N", 1, 1000000, NULL, "data passes", NULL},
    {"warmup", 0, STRATA_OPT_INT, O(warmup), "1", "N", 0, 1000000, NULL,
     "first passes left out of the median (all count when passes <= warmup)", NULL},
    {"update", 0, STRATA_OPT_CHOICE, O(update), "adagrad", "RULE", 0, 0, "adagrad|sgd",
     "step sizes: row-wise AdaGrad (the pass's rate / sqrt(G)), or plain SGD (the pass's rate)",
     NULL},
    {"lr", 0, STRATA_OPT_DOUBLE, O(lr), "0.08", "RATE", 1e-9, 10, NULL,
     "learning rate (AdaGrad: the base step)", NULL},
    {"lr-decay", 0, STRATA_OPT_DOUBLE_OPTIONAL, O(lr_decay), NULL, "D", 0, 100, NULL,
     "the rate of pass t (from 0) is lr / (1 + D t) (default: 0.4 with AdaGrad, 0.1 with SGD)",
     NULL},
    {"lambda", 0, STRATA_OPT_DOUBLE, O(lambda), "0.05", "L", 0, 100, NULL,
     "L2 regularisation of the factors", NULL},
    {"lambda-bias", 0, STRATA_OPT_DOUBLE, O(lambda_bias), "0.05", "L", 0, 100, NULL,
     "L2 regularisation of the biases", NULL},
    {"init-scale", 0, STRATA_OPT_DOUBLE, O(init_scale), "0.1", "S", 0, 100, NULL,
     "initial factors ~ N(0, S^2/k)", NULL},
    {"order", 0, STRATA_OPT_CHOICE, O(order), "engine", "ORDER", 0, 0, "engine|shuffle",
     "engine: the serial engine's layout and order; shuffle: one seeded random permutation", NULL},
    {"isa", 0, STRATA_OPT_CHOICE, O(isa), "auto", "ISA", 0, 0, "auto|base|x86-64-v3|x86-64-v4",
     "the copy of the kernel to run: auto (strata_mf_sgd's choice), or, in a portable x86-64 "
     "build, the one compiled for the build's own target, for x86-64-v3 (AVX2) or x86-64-v4 "
     "(AVX-512); the CPU must run it", NULL},
    {"depth", 0, STRATA_OPT_INT, O(depth), "8", "C", 1, 1024, NULL,
     "with --order engine: item chunks, as the engine's --depth", NULL},
    {"seed", 's', STRATA_OPT_U64, O(seed), "1", "X", 0, 0, NULL,
     "seed of the initial model, the renumbering ties and the shuffle (as the engine's --seed)", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

static void usage(FILE *f, const strata_optgroup *g) {
  fprintf(f, "usage: " PROG " [options]\n"
             "Seconds per data pass of the MF SGD kernel alone (no engine), on the data and\n"
             "model the mf app would train.\n\n");
  strata_options_help(f, g, 1);
  fprintf(f, "\nExamples:\n"
             "  " PROG "\n"
             "  " PROG " --data synth:users=71567,items=10681,ratings=10000054 --passes 6\n"
             "  " PROG " --data ../shared/data/movielens-100k/ua.base --rank 100 --order shuffle\n");
}

typedef double (*sgd_fn)(const strata_mf_step *, const strata_mf_entry *, size_t, float *,
                         float *);

/* The kernel's copies (apps/mf/kernel.c): the build's own, and in portable
 * x86-64 builds those for x86-64-v3 and -v4. */
double strata__mf_sgd_base(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                           float *H);
#if defined(STRATA_MF_DISPATCH)
double strata__mf_sgd_x86v3(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                            float *H);
double strata__mf_sgd_x86v4(const strata_mf_step *st, const strata_mf_entry *e, size_t n, float *W,
                            float *H);
#endif

/* The copy --isa names, or NULL (with the error set) when this build or CPU
 * has none such. */
static sgd_fn pick_isa(const char *isa) {
  if (!strcmp(isa, "auto")) return strata_mf_sgd;
  if (!strcmp(isa, "base")) return strata__mf_sgd_base;
#if defined(STRATA_MF_DISPATCH)
  if (!strcmp(isa, "x86-64-v3") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return strata__mf_sgd_x86v3;
  if (!strcmp(isa, "x86-64-v4") && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return strata__mf_sgd_x86v4;
#endif
  strata_err_set(STRATA_EUSAGE, "--isa %s: no such copy of the kernel in this build on this CPU "
                                "(only portable x86-64 builds have x86-64-v3 and -v4)", isa);
  return NULL;
}

/* Reads or generates the ratings, as the mf app's read_data does. */
static int load(const bench_opts *o, strata_ratings *rs) {
  strata_format fmt;
  int rc = strata_format_parse(o->format, &fmt);
  if (rc) return rc;
  if (strncmp(o->data, "synth:", 6) == 0) {
    strata_synth_spec spec;
    strata_synth_defaults(&spec);
    if ((rc = strata_synth_parse(o->data, &spec))) return rc;
    return strata_synth_generate(&spec, rs);
  }
  return strata_ratings_read(o->data, fmt, NULL, NULL, rs);
}

/* The serial engine's block (mf_load with B = 1): ids renumbered by
 * strata_schedule_balance, entries counting-sorted on (item chunk, user)
 * with data order kept inside a key. urow/irow receive the renumbering. */
static int order_engine(const strata_ratings *rs, int depth, uint64_t seed, strata_mf_entry *ent,
                        uint32_t *urow, uint32_t *irow) {
  const uint32_t nu = rs->n_users, ni = rs->n_items;
  const size_t nkeys = (size_t)depth * nu;
  uint32_t *ucount = strata_calloc((size_t)nu + 1, sizeof *ucount);
  uint32_t *icount = strata_calloc((size_t)ni + 1, sizeof *icount);
  uint32_t *blk = strata_malloc(((size_t)(nu > ni ? nu : ni) + 1) * sizeof *blk);
  size_t *start = strata_calloc(nkeys + 1, sizeof *start);
  strata_mf_entry *scratch = strata_malloc((rs->n + 1) * sizeof *scratch);
  uint32_t size1;
  int rc = 0;
  if (!ucount || !icount || !blk || !start || !scratch) {
    rc = strata_err_set(STRATA_ENOMEM, "out of memory ordering %zu ratings", rs->n);
    goto done;
  }
  for (size_t j = 0; j < rs->n; j++) {
    ucount[rs->r[j].user]++;
    icount[rs->r[j].item]++;
  }
  /* The same seeds as mf_load, so ties among equally rated ids fall alike. */
  if ((rc = strata_schedule_balance(nu, 1, strata_mix64(seed ^ 0x55), ucount, blk, urow, &size1)) ||
      (rc = strata_schedule_balance(ni, 1, strata_mix64(seed ^ 0x1e), icount, blk, irow, &size1)))
    goto done;
  {
    /* mf_load then renumbers the users of a block in a seeded random order
     * (its shuffle_local): the same shuffle, for the one block. */
    strata_rng rng;
    strata_rng_seed(&rng, strata_mix64(seed ^ 0x77));
    for (uint32_t x = 0; x < nu; x++) blk[x] = x;
    for (uint32_t x = nu; x > 1; x--) {
      uint32_t y = (uint32_t)strata_rng_below(&rng, x), t = blk[x - 1];
      blk[x - 1] = blk[y];
      blk[y] = t;
    }
    for (uint32_t u = 0; u < nu; u++) urow[u] = blk[urow[u]];
  }
  for (size_t j = 0; j < rs->n; j++) {
    uint32_t il = irow[rs->r[j].item];
    size_t c = (size_t)(((uint64_t)(il + 1) * (uint64_t)depth - 1) / ni);
    start[c * nu + urow[rs->r[j].user] + 1]++;
  }
  for (size_t q = 0; q < nkeys; q++) start[q + 1] += start[q];
  for (size_t j = 0; j < rs->n; j++) {
    uint32_t il = irow[rs->r[j].item], ul = urow[rs->r[j].user];
    size_t c = (size_t)(((uint64_t)(il + 1) * (uint64_t)depth - 1) / ni);
    ent[start[c * nu + ul]++] = (strata_mf_entry){.u = ul, .i = il, .r = rs->r[j].value};
  }
  /* Each key's start has moved to its end: start[c * nu + nu - 1] ends
   * chunk c. Each chunk is interleaved as mf_load does. */
  for (size_t c = 0; c < (size_t)depth; c++) {
    size_t lo = c ? start[c * nu - 1] : 0, hi = start[c * nu + nu - 1];
    memcpy(scratch, ent + lo, (hi - lo) * sizeof *scratch);
    strata_mf_interleave(scratch, hi - lo, ent + lo);
  }
done:
  strata_free(ucount);
  strata_free(icount);
  strata_free(blk);
  strata_free(start);
  strata_free(scratch);
  return rc;
}

/* Rows at the global indices, one seeded Fisher-Yates shuffle. */
static void order_shuffle(const strata_ratings *rs, uint64_t seed, strata_mf_entry *ent,
                          uint32_t *urow, uint32_t *irow) {
  for (uint32_t u = 0; u < rs->n_users; u++) urow[u] = u;
  for (uint32_t i = 0; i < rs->n_items; i++) irow[i] = i;
  for (size_t j = 0; j < rs->n; j++)
    ent[j] = (strata_mf_entry){.u = rs->r[j].user, .i = rs->r[j].item, .r = rs->r[j].value};
  strata_rng rng;
  strata_rng_seed(&rng, strata_mix64(seed ^ 0x5f6d665f6b65726eULL));
  for (size_t j = rs->n; j > 1; j--) {
    size_t x = (size_t)strata_rng_below(&rng, j);
    strata_mf_entry t = ent[j - 1];
    ent[j - 1] = ent[x];
    ent[x] = t;
  }
}

/* Test RMSE of the model (rows placed by urow/irow); an id unseen in
 * training is predicted without its row, as strata mf scores it. */
static double score(const strata_mf_step *st, const strata_ratings *ts, const uint32_t *urow,
                    const uint32_t *irow, const float *W, const float *H) {
  if (!ts->n) return 0;
  const size_t stride = (size_t)st->stride;
  double sq = 0;
  for (size_t j = 0; j < ts->n; j++) {
    const strata_rating *r = &ts->r[j];
    const float *w = r->user == STRATA_ID_UNSEEN ? NULL : W + (size_t)urow[r->user] * stride;
    const float *h = r->item == STRATA_ID_UNSEEN ? NULL : H + (size_t)irow[r->item] * stride;
    double e = (double)r->value - (double)strata_mf_predict(st, w, h);
    sq += e * e;
  }
  return sqrt(sq / (double)ts->n);
}

int main(int argc, char **argv) {
  bench_opts o;
  strata_optgroup g = {"options", bench_options, &o};
  int help = 0;
  int rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc - 1, argv + 1, &help);
  if (rc || help) {
    if (rc) fprintf(stderr, PROG ": %s\n", strata_err_msg());
    else usage(stdout, &g);
    return rc ? 2 : 0;
  }

  int code = 1;
  strata_ratings rs, ts;
  memset(&rs, 0, sizeof rs);
  memset(&ts, 0, sizeof ts);
  double *test_rmse = NULL;
  strata_mf_entry *ent = NULL;
  uint32_t *urow = NULL, *irow = NULL;
  float *W = NULL, *H = NULL;
  double *secs = NULL, *cpu = NULL;

  const sgd_fn sgd = pick_isa(o.isa);
  if (!sgd) {
    fprintf(stderr, PROG ": %s\n", strata_err_msg());
    return 2;
  }
  double t0 = strata_now();
  if ((rc = load(&o, &rs))) {
    fprintf(stderr, PROG ": %s\n", strata_err_msg());
    code = rc == STRATA_EUSAGE ? 2 : 1;
    goto done;
  }
  if (o.test) {
    strata_format fmt;
    if (!strncmp(o.data, "synth:", 6))
      rc = strata_err_set(STRATA_EUSAGE, "--test needs --data from a file (its ids)");
    if (!rc) rc = strata_format_parse(o.format, &fmt);
    if (!rc) rc = strata_ratings_read(o.test, fmt, rs.users, rs.items, &ts);
    if (rc) {
      fprintf(stderr, PROG ": %s\n", strata_err_msg());
      code = rc == STRATA_EUSAGE ? 2 : 1;
      goto done;
    }
  }
  /* Echoed once the data is in, so that a bad --data is the only line. */
  strata_options_echo(stderr, PROG ": ", &g, 1);
  const size_t n = rs.n;
  const uint32_t n_users = rs.n_users, n_items = rs.n_items;
  const int k = o.rank, kpad = strata_mf_kpad(k), stride = kpad + STRATA_MF_TAIL;
  ent = strata_malloc(n * sizeof *ent);
  urow = strata_malloc(((size_t)n_users + 1) * sizeof *urow);
  irow = strata_malloc(((size_t)n_items + 1) * sizeof *irow);
  W = strata_alloc_aligned(((size_t)n_users + 1) * (size_t)stride * sizeof *W);
  H = strata_alloc_aligned(((size_t)n_items + 1) * (size_t)stride * sizeof *H);
  secs = strata_malloc((size_t)o.passes * sizeof *secs);
  cpu = strata_malloc((size_t)o.passes * sizeof *cpu);
  test_rmse = strata_malloc((size_t)o.passes * sizeof *test_rmse);
  if (!ent || !urow || !irow || !W || !H || !secs || !cpu || !test_rmse) {
    fprintf(stderr, PROG ": out of memory for %zu ratings at rank %d\n", n, k);
    goto done;
  }
  double sum = 0;
  for (size_t j = 0; j < n; j++) sum += rs.r[j].value;
  const float mu = (float)(sum / (double)n);
  if (!strcmp(o.order, "engine")) {
    if ((rc = order_engine(&rs, o.depth, o.seed, ent, urow, irow))) {
      fprintf(stderr, PROG ": %s\n", strata_err_msg());
      goto done;
    }
  } else {
    order_shuffle(&rs, o.seed, ent, urow, irow);
  }
  for (uint32_t u = 0; u < n_users; u++)
    strata_mf_init_row(W + (size_t)urow[u] * (size_t)stride, k, stride, o.init_scale, o.seed, 0, u);
  for (uint32_t i = 0; i < n_items; i++)
    strata_mf_init_row(H + (size_t)irow[i] * (size_t)stride, k, stride, o.init_scale, o.seed, 1, i);
  strata_ratings_close(&rs);
  const double load_s = strata_now() - t0;
  fprintf(stderr, PROG ": %zu ratings, %u users, %u items, mu %.4f (%.2f s to load and lay out)\n",
          n, n_users, n_items, (double)mu, load_s);

  const int adagrad = !strcmp(o.update, "adagrad");
  const double decay = o.lr_decay.given ? o.lr_decay.value
                                        : adagrad ? STRATA_MF_DECAY_ADAGRAD : STRATA_MF_DECAY_SGD;
  strata_mf_step st = {.k = k,
                       .kpad = kpad,
                       .stride = stride,
                       .mu = mu,
                       .lambda = (float)o.lambda,
                       .lambda_bias = (float)o.lambda_bias,
                       .bias = 1,
                       .adagrad = adagrad};
  double rmse = 0;
  for (int p = 0; p < o.passes; p++) {
    st.lr = (float)(o.lr / (1.0 + decay * (double)p));
    double p0 = strata_now(), c0 = strata_cpu_seconds();
    double sse = sgd(&st, ent, n, W, H);
    secs[p] = strata_now() - p0;
    cpu[p] = strata_cpu_seconds() - c0;
    rmse = sqrt(sse / (double)n);
    test_rmse[p] = score(&st, &ts, urow, irow, W, H);
    fprintf(stderr, "pass %d: %.4f s (CPU %.4f s), %.2f M updates/s, train RMSE %.6f", p + 1,
            secs[p], cpu[p], (double)n / secs[p] / 1e6, rmse);
    if (ts.n) fprintf(stderr, ", test RMSE %.6f", test_rmse[p]);
    fputc('\n', stderr);
  }
  const int from = o.passes > o.warmup ? o.warmup : 0;
  const double tpp = strata_median(secs + from, o.passes - from);
  const double cpp = strata_median(cpu + from, o.passes - from);

  strata_json j;
  bench_json_begin(&j, "mf_kernel");
  strata_json_string(&j, "data", o.data);
  strata_json_string(&j, "format", o.format);
  strata_json_int(&j, "rank", o.rank);
  strata_json_int(&j, "passes", o.passes);
  strata_json_int(&j, "warmup", o.warmup);
  strata_json_string(&j, "update", o.update);
  strata_json_number(&j, "lr", o.lr);
  strata_json_number(&j, "lr_decay", decay);
  strata_json_number(&j, "lambda", o.lambda);
  strata_json_number(&j, "lambda_bias", o.lambda_bias);
  strata_json_number(&j, "init_scale", o.init_scale);
  strata_json_bool(&j, "bias", 1);
  strata_json_string(&j, "order", o.order);
  strata_json_string(&j, "isa", o.isa);
  strata_json_int(&j, "depth", o.depth);
  strata_json_int(&j, "seed", (int64_t)o.seed);
  strata_json_int(&j, "ratings", (int64_t)n);
  strata_json_int(&j, "users", n_users);
  strata_json_int(&j, "items", n_items);
  strata_json_number(&j, "mu", mu);
  strata_json_number(&j, "load_s", load_s);
  strata_json_array_begin(&j, "pass_s");
  for (int p = 0; p < o.passes; p++) strata_json_number(&j, NULL, secs[p]);
  strata_json_array_end(&j);
  strata_json_array_begin(&j, "pass_cpu_s");
  for (int p = 0; p < o.passes; p++) strata_json_number(&j, NULL, cpu[p]);
  strata_json_array_end(&j);
  strata_json_int(&j, "measured_passes", o.passes - from);
  if (ts.n) {
    strata_json_string(&j, "test", o.test);
    strata_json_int(&j, "test_ratings", (int64_t)ts.n);
    strata_json_array_begin(&j, "test_rmse");
    for (int p = 0; p < o.passes; p++) strata_json_double(&j, NULL, test_rmse[p]);
    strata_json_array_end(&j);
  }
  strata_json_number(&j, "time_per_pass_s", tpp);
  strata_json_number(&j, "updates_per_s", (double)n / tpp);
  strata_json_number(&j, "cpu_per_pass_s", cpp);
  strata_json_number(&j, "cpu_updates_per_s", (double)n / cpp);
  strata_json_number(&j, "train_rmse", rmse);
  strata_json_object_end(&j);
  code = 0;

done:
  strata_free(secs);
  strata_free(cpu);
  strata_free(test_rmse);
  strata_ratings_close(&ts);
  strata_free(H);
  strata_free(W);
  strata_free(irow);
  strata_free(urow);
  strata_free(ent);
  strata_ratings_close(&rs);
  return code;
}
