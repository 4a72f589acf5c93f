/*
 * bench/libmf_run.c - trains LIBMF (Chin, Yuan et al.; the library behind
 * `mf-train`) on LIBMF text files and reports what the time-to-quality
 * benchmark compares strata against. LIBMF is never part of strata: the
 * shared library is loaded at run time from --lib or $STRATA_LIBMF (for
 * example the libmf.so that the `libmf` npm package ships in
 * package/vendor/, or one built from LIBMF's sources with `make lib`).
 * Without it the program says so and exits 77 (skipped).
 *
 * Its C interface (mf.h) is declared here as LIBMF 2.x defines it, for the
 * default build (mf_float is float, mf_int int, mf_long long long).
 *
 * Output: one JSON line with the library's path, the parameters, the
 * ratings read, the seconds of the mf_train call alone (reading excluded),
 * and the train and test RMSE of the model it returns (calc_rmse).
 * Per-iteration time: run it with two iteration counts and divide the
 * difference, which leaves LIBMF's set-up (shuffling, blocking) out.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "strata/options.h"
#include "bench/bench_info.h"

#define PROG "libmf_run"

/* LIBMF's mf.h (2.x). */
typedef struct mf_node {
  int u, v;
  float r;
} mf_node;
typedef struct mf_problem {
  int m, n;
  long long nnz;
  mf_node *R;
} mf_problem;
typedef struct mf_parameter {
  int fun, k, nr_threads, nr_bins, nr_iters;
  float lambda_p1, lambda_p2, lambda_q1, lambda_q2, eta, alpha, c;
  bool do_nmf, quiet, copy_data;
} mf_parameter;
typedef struct mf_model mf_model;

typedef struct libmf_api {
  mf_parameter (*get_default_param)(void);
  mf_problem (*read_problem)(const char *path);
  mf_model *(*train)(const mf_problem *prob, mf_parameter param);
  double (*calc_rmse)(const mf_problem *prob, mf_model *model);
  void (*destroy_model)(mf_model **model);
} libmf_api;

typedef struct run_opts {
  const char *lib, *train, *test;
  int rank, threads, iters, bins;
  double eta, lambda;
} run_opts;

#define O(field) offsetof(run_opts, field)
static const strata_option run_options[] = {
    {"lib", 0, STRATA_OPT_STRING, O(lib), NULL, "PATH", 0, 0, NULL,
     "LIBMF's shared library (default: $STRATA_LIBMF)", NULL},
    {"train", 0, STRATA_OPT_STRING, O(train), NULL, "FILE", 0, 0, NULL,
     "training ratings, LIBMF text (required)", NULL},
    {"test", 0, STRATA_OPT_STRING, O(test), NULL, "FILE", 0, 0, NULL,
     "test ratings, LIBMF text, scored after training", NULL},
    {"rank", 'k', STRATA_OPT_INT, O(rank), "100", "K", 1, 4096, NULL, "factor rank (-k)", NULL},
    {"threads", 't', STRATA_OPT_INT, O(threads), "1", "N", 1, 1024, NULL, "threads (-s)", NULL},
    {"iters", 0, STRATA_OPT_INT, O(iters), "20", "N", 1, 1000000, NULL, "iterations (-t)", NULL},
    {"bins", 0, STRATA_OPT_INT, O(bins), "0", "N", 0, 1000000, NULL,
     "blocks per side (-n; 0: LIBMF's default)", NULL},
    {"eta", 0, STRATA_OPT_DOUBLE, O(eta), "0", "R", 0, 10, NULL,
     "learning rate (-r; 0: LIBMF's default)", NULL},
    {"lambda", 0, STRATA_OPT_DOUBLE, O(lambda), "-1", "L", -1, 100, NULL,
     "L2 of both factors (-l2; -1: LIBMF's default)", NULL},
    {NULL, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL, NULL}};

static int load_api(const char *path, libmf_api *api, void **handle) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return strata_err_set(STRATA_ENOENT, "cannot load %s: %s", path, dlerror());
  /* POSIX: a function pointer travels through void * by memcpy. */
  const char *names[] = {"mf_get_default_param", "mf_read_problem", "mf_train", "calc_rmse",
                         "mf_destroy_model"};
  void *fns[5];
  for (int i = 0; i < 5; i++)
    if (!(fns[i] = dlsym(h, names[i]))) {
      dlclose(h);
      return strata_err_set(STRATA_EINVAL, "%s: no symbol %s (not LIBMF 2.x?)", path, names[i]);
    }
  memcpy(&api->get_default_param, &fns[0], sizeof fns[0]);
  memcpy(&api->read_problem, &fns[1], sizeof fns[1]);
  memcpy(&api->train, &fns[2], sizeof fns[2]);
  memcpy(&api->calc_rmse, &fns[3], sizeof fns[3]);
  memcpy(&api->destroy_model, &fns[4], sizeof fns[4]);
  *handle = h;
  return 0;
}

int main(int argc, char **argv) {
  run_opts o;
  strata_optgroup g = {"options", run_options, &o};
  int help = 0;
  int rc = strata_options_defaults(&g, 1);
  if (!rc) rc = strata_options_parse(&g, 1, argc - 1, argv + 1, &help);
  if (!rc && !help && !o.train) rc = strata_err_set(STRATA_EUSAGE, "--train is required");
  if (rc || help) {
    if (rc) fprintf(stderr, PROG ": %s\n", strata_err_msg());
    else {
      printf("usage: " PROG " --train FILE [--test FILE] [options]\n"
             "Trains LIBMF, loaded from --lib or $STRATA_LIBMF, and reports seconds and RMSE.\n\n");
      strata_options_help(stdout, &g, 1);
    }
    return rc ? 2 : 0;
  }
  const char *lib = o.lib ? o.lib : getenv("STRATA_LIBMF");
  if (!lib || !*lib) {
    fprintf(stderr, PROG ": skipped: no LIBMF library (set STRATA_LIBMF or --lib)\n");
    return 77;
  }
  libmf_api api;
  memset(&api, 0, sizeof api);
  void *handle = NULL;
  if ((rc = load_api(lib, &api, &handle))) {
    fprintf(stderr, PROG ": %s\n", strata_err_msg());
    return 1;
  }
  double t0 = strata_now();
  mf_problem tr = api.read_problem(o.train), te = {0, 0, 0, NULL};
  if (!tr.R || tr.nnz <= 0) {
    fprintf(stderr, PROG ": %s: LIBMF read no ratings\n", o.train);
    return 1;
  }
  if (o.test) {
    te = api.read_problem(o.test);
    if (!te.R || te.nnz <= 0) {
      fprintf(stderr, PROG ": %s: LIBMF read no ratings\n", o.test);
      return 1;
    }
  }
  const double read_s = strata_now() - t0;
  mf_parameter p = api.get_default_param();
  p.k = o.rank;
  p.nr_threads = o.threads;
  p.nr_iters = o.iters;
  if (o.bins > 0) p.nr_bins = o.bins;
  if (o.eta > 0) p.eta = (float)o.eta;
  if (o.lambda >= 0) p.lambda_p2 = p.lambda_q2 = (float)o.lambda;
  p.quiet = true;
  double t1 = strata_now();
  mf_model *model = api.train(&tr, p);
  const double train_s = strata_now() - t1;
  if (!model) {
    fprintf(stderr, PROG ": mf_train failed\n");
    return 1;
  }
  double tr_rmse = api.calc_rmse(&tr, model);
  double te_rmse = o.test ? api.calc_rmse(&te, model) : -1;
  strata_json j;
  bench_json_begin(&j, "libmf_run");
  strata_json_string(&j, "lib", lib);
  strata_json_string(&j, "train", o.train);
  if (o.test) strata_json_string(&j, "test", o.test);
  strata_json_int(&j, "rank", p.k);
  strata_json_int(&j, "threads", p.nr_threads);
  strata_json_int(&j, "iters", p.nr_iters);
  strata_json_int(&j, "bins", p.nr_bins);
  strata_json_number(&j, "eta", p.eta);
  strata_json_number(&j, "lambda_p2", p.lambda_p2);
  strata_json_number(&j, "lambda_q2", p.lambda_q2);
  strata_json_int(&j, "ratings", tr.nnz);
  strata_json_int(&j, "test_ratings", te.nnz);
  strata_json_int(&j, "users", tr.m);
  strata_json_int(&j, "items", tr.n);
  strata_json_number(&j, "read_s", read_s);
  strata_json_number(&j, "train_s", train_s);
  strata_json_number(&j, "train_rmse", tr_rmse);
  if (o.test) strata_json_number(&j, "test_rmse", te_rmse);
  strata_json_object_end(&j);
  api.destroy_model(&model);
  /* LIBMF allocates the problems' nodes with new[]; the process ends here,
   * so they are left to the exit rather than freed with the wrong call. */
  dlclose(handle);
  return 0;
}
