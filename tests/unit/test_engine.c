/*
 * Unit tests for the engine in serial mode, driven by the MF app in-process:
 * convergence, determinism, metrics, model export and early errors; and the
 * partials' reductions (SUM, MAX, MIN): their operations, the aggregation
 * of several workers' reports, and a serial run of a small app with MAX
 * and MIN partials, diverging or not; the rise check of objectives that
 * must fall.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dirs.h"
#include "strata/core.h"
#include "strata/engine.h"
#include "strata/apps/mf.h"
#include "strata/options.h"
#include "core/jsonr.h"
#include "engine/engine.h"
#include "scheduler/aggregate.h"

#define SYNTH "synth:users=300,items=200,ratings=20000,rank=5,noise=0.1,seed=3"

static size_t live0;
static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  live0 = strata_alloc_live();
  strata_err_clear();
  snprintf(tmpdir, sizeof tmpdir, "/tmp/strata_test_engine.XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(strata_alloc_live(), live0);
  return 0;
}

static void default_cfg(strata_mf_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  strata_optgroup g = {"mf", strata_app_mf.options, cfg};
  assert_int_equal(strata_options_defaults(&g, 1), 0);
  assert_int_equal(strata_app_mf.config_size, sizeof *cfg);
  cfg->data = SYNTH;
  cfg->rank = 8;
  cfg->test_fraction = 0.1;
}

static strata_engine_opts default_opts(int strata, int depth) {
  strata_engine_opts o = {.mode = STRATA_MODE_SERIAL, .strata = strata, .depth = depth, .passes = 5,
                          .seed = 7};
  return o;
}

static int objective_index(const char *name) {
  for (int i = 0; i < strata_app_mf.n_objectives; i++)
    if (strcmp(strata_app_mf.objective_names[i], name) == 0) return i;
  fail_msg("no objective named %s", name);
  return -1;
}

/* Checks a finished 5-pass run of the standard problem. */
static void check_converged(const strata_run_result *r, int strata, int depth) {
  int tr = objective_index("train_rmse"), te = objective_index("test_rmse");
  assert_ptr_equal(r->app, &strata_app_mf);
  assert_int_equal(r->mode, STRATA_MODE_SERIAL);
  assert_string_equal(strata_mode_name(r->mode), "serial");
  assert_int_equal(r->workers, 1);
  assert_int_equal(r->strata, strata);
  assert_int_equal(r->depth, depth);
  assert_int_equal(r->passes, 5);
  assert_non_null(r->per_pass);
  assert_non_null(r->per_pass_worker);
  assert_non_null(r->worker_total);
  /* 10% of the ratings held out */
  assert_true(r->n_examples >= 18000 - 600 && r->n_examples <= 18000 + 600);
  assert_true(r->n_examples < 20000);
  for (int p = 0; p < 5; p++) {
    const strata_pass_stats *ps = &r->per_pass[p];
    assert_int_equal(ps->pass, p);
    assert_true(ps->time_s > 0);
    assert_true(ps->compute_s > 0 && ps->compute_s <= ps->time_s);
    assert_true(ps->wait_s >= 0);
    assert_int_equal(ps->bytes_sent, 0); /* serial: nothing moves */
    assert_true(isfinite(ps->objectives[tr]));
    assert_true(isfinite(ps->objectives[te]));
    assert_true(ps->objectives[tr] > 0);
    if (p > 0) assert_true(ps->objectives[tr] < r->per_pass[p - 1].objectives[tr]);
  }
  assert_true(r->per_pass[4].objectives[tr] < 1.0);
  assert_true(r->objectives[tr] == r->per_pass[4].objectives[tr]);
  assert_true(r->objectives[te] == r->per_pass[4].objectives[te]);
  /* test error improves over training too */
  assert_true(r->objectives[te] < r->per_pass[0].objectives[te]);
  assert_true(r->time_per_pass_s > 0);
  assert_true(r->updates_per_s > 0);
  assert_true(fabs(r->updates_per_s * r->time_per_pass_s - (double)r->n_examples) <
              1e-6 * (double)r->n_examples);
  assert_true(r->wall_s > 0);
  assert_true(r->load_s > 0);
  assert_true(r->coordinator_wall_s >= r->wall_s);
  assert_true(r->coordinator_cpu_s > 0);
  /* per-worker totals add the passes up */
  double t = 0;
  for (int p = 0; p < 5; p++) t += r->per_pass_worker[p].time_s;
  assert_true(fabs(r->worker_total[0].time_s - t) < 1e-9);
}

static void test_serial_run_converges(void **state) {
  (void)state;
  const int cases[][2] = {{0, 2}, {3, 4}, {3, 2}, {0, 4}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    strata_mf_config cfg;
    default_cfg(&cfg);
    strata_engine_opts o = default_opts(cases[c][0], cases[c][1]);
    strata_run_result r;
    memset(&r, 0, sizeof r);
    int rc = strata_engine_run(&strata_app_mf, &cfg, &o, NULL, &r);
    if (rc) print_message("engine: %s\n", strata_err_msg());
    assert_int_equal(rc, 0);
    /* strata = 0 means one stratum per worker: P = 1 in serial mode */
    check_converged(&r, cases[c][0] ? cases[c][0] : 1, cases[c][1]);
    strata_run_result_close(&r);
    assert_int_equal(strata_alloc_live(), live0);
  }
}

static void run_ok(strata_mf_config *cfg, const strata_engine_opts *o, strata_run_result *r) {
  memset(r, 0, sizeof *r);
  int rc = strata_engine_run(&strata_app_mf, cfg, o, NULL, r);
  if (rc) print_message("engine: %s\n", strata_err_msg());
  assert_int_equal(rc, 0);
}

static void test_identical_runs_are_bit_identical(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  strata_engine_opts o = default_opts(3, 4);
  strata_run_result a, b;
  run_ok(&cfg, &o, &a);
  run_ok(&cfg, &o, &b);
  assert_memory_equal(a.objectives, b.objectives, sizeof a.objectives);
  for (int p = 0; p < 5; p++)
    assert_memory_equal(a.per_pass[p].objectives, b.per_pass[p].objectives,
                        sizeof a.per_pass[p].objectives);
  assert_true(a.n_examples == b.n_examples);
  strata_run_result_close(&a);
  strata_run_result_close(&b);

  /* A different seed gives a different run (the test is not vacuous). */
  run_ok(&cfg, &o, &a);
  o.seed = 8;
  run_ok(&cfg, &o, &b);
  assert_memory_not_equal(a.objectives, b.objectives, sizeof a.objectives);
  strata_run_result_close(&a);
  strata_run_result_close(&b);
}

static void test_strata_counts_both_converge(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  int tr = objective_index("train_rmse"), te = objective_index("test_rmse");
  strata_engine_opts o1 = default_opts(1, 2), o3 = default_opts(3, 2);
  strata_run_result a, b;
  run_ok(&cfg, &o1, &a);
  run_ok(&cfg, &o3, &b);
  check_converged(&a, 1, 2);
  check_converged(&b, 3, 2);
  /* Same data either way; the two models end up of similar quality. */
  assert_true(a.n_examples == b.n_examples);
  assert_true(fabs(a.objectives[tr] - b.objectives[tr]) < 0.1);
  assert_true(fabs(a.objectives[te] - b.objectives[te]) < 0.15);
  strata_run_result_close(&a);
  strata_run_result_close(&b);
}

static void test_sgd_update_rule_converges(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  cfg.update = "sgd";
  cfg.lr = 0.01;
  strata_engine_opts o = default_opts(2, 3);
  strata_run_result r;
  run_ok(&cfg, &o, &r);
  check_converged(&r, 2, 3);
  strata_run_result_close(&r);
}

/* ---- model export ---------------------------------------------------- */

static int has_file(const char *dir, const char *name) {
  char p[256];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}


static void check_top(const strata_mf_model *m, uint32_t u, const uint8_t *exclude, int n) {
  uint32_t items[64];
  float scores[64];
  assert_true(n <= 64);
  int got = strata_mf_model_top(m, u, exclude, n, items, scores);
  int allowed = 0;
  for (uint32_t i = 0; i < m->n_items; i++) allowed += !(exclude && exclude[i]);
  assert_int_equal(got, n < allowed ? n : allowed);
  float best_left = -INFINITY; /* best score among items not returned */
  for (uint32_t i = 0; i < m->n_items; i++) {
    if (exclude && exclude[i]) continue;
    int in = 0;
    for (int k = 0; k < got; k++) in |= items[k] == i;
    float s = strata_mf_model_score(m, u, i);
    if (!in && s > best_left) best_left = s;
  }
  for (int k = 0; k < got; k++) {
    assert_true(items[k] < m->n_items);
    if (exclude) assert_int_equal(exclude[items[k]], 0);
    for (int l = 0; l < k; l++) assert_int_not_equal(items[l], items[k]);
    float want = strata_mf_model_score(m, u, items[k]);
    assert_float_equal(scores[k], want, 1e-4 * fmaxf(1.0f, fabsf(want)));
    if (k > 0) assert_true(scores[k - 1] >= scores[k]);
  }
  /* nothing left out scores above what was returned */
  if (got > 0) assert_true(best_left <= scores[got - 1] + 1e-4f);
}

static void test_model_export_and_read(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  strata_engine_opts o = default_opts(3, 2);
  char dir[128];
  snprintf(dir, sizeof dir, "%s/model", tmpdir); /* created by the export */
  o.model_out = dir;
  strata_run_result r;
  run_ok(&cfg, &o, &r);
  const char *files[] = {"meta.json", "W.f32", "H.f32", "bu.f32", "bi.f32", "users.txt",
                         "items.txt"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    if (!has_file(dir, files[i])) print_message("missing %s/%s\n", dir, files[i]);
    assert_true(has_file(dir, files[i]));
  }
  assert_int_equal(count_entries(dir), 7); /* no temporary files left */
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
           "sys.exit(0 if d[\"k\"] == 8 and d[\"users\"] == 300 and d[\"items\"] == 200 else 1)' "
           "'%s/meta.json'",
           dir);
  assert_int_equal(system(cmd), 0);

  strata_mf_model m;
  int rc = strata_mf_model_read(dir, &m);
  if (rc) print_message("read: %s\n", strata_err_msg());
  assert_int_equal(rc, 0);
  assert_int_equal(m.k, 8);
  assert_int_equal(m.n_users, 300);
  assert_int_equal(m.n_items, 200);
  assert_int_equal(m.bias, 1);
  assert_true(m.mu > 2.0f && m.mu < 5.0f);
  /* synthetic ids are the dense indices */
  for (uint32_t u = 0; u < m.n_users; u++) assert_true(m.user_ids[u] == (int64_t)u);
  for (uint32_t i = 0; i < m.n_items; i++) assert_true(m.item_ids[i] == (int64_t)i);
  /* trained factors: finite, not all zero */
  double norm = 0;
  for (size_t i = 0; i < (size_t)m.n_users * 8; i++) {
    assert_true(isfinite(m.W[i]));
    norm += (double)m.W[i] * m.W[i];
  }
  assert_true(norm > 0);

  /* top-N: sorted, exclusions honoured, scores as model_score */
  uint8_t *ex = calloc(m.n_items, 1);
  assert_non_null(ex);
  check_top(&m, 0, NULL, 10);
  check_top(&m, 17, NULL, 1);
  uint32_t items[10];
  float scores[10];
  assert_int_equal(strata_mf_model_top(&m, 17, NULL, 10, items, scores), 10);
  for (int k = 0; k < 5; k++) ex[items[k]] = 1; /* exclude the current top five */
  check_top(&m, 17, ex, 10);
  uint32_t items2[10];
  float scores2[10];
  assert_int_equal(strata_mf_model_top(&m, 17, ex, 10, items2, scores2), 10);
  for (int k = 0; k < 5; k++) assert_int_equal(items2[k], items[k + 5]);
  for (uint32_t i = 0; i < m.n_items; i++) ex[i] = i % 50 != 3; /* only 4 items allowed */
  check_top(&m, 299, ex, 10);
  assert_int_equal(strata_mf_model_top(&m, 5, NULL, 0, items, scores), 0);
  free(ex);

  /* Writing the model back out and reading it again is lossless. */
  char dir2[128];
  snprintf(dir2, sizeof dir2, "%s/copy", tmpdir);
  assert_int_equal(strata_mf_model_write(dir2, &m), 0);
  strata_mf_model m2;
  assert_int_equal(strata_mf_model_read(dir2, &m2), 0);
  assert_int_equal(m2.k, m.k);
  assert_true(m2.mu == m.mu);
  assert_memory_equal(m2.W, m.W, (size_t)m.n_users * 8 * sizeof(float));
  assert_memory_equal(m2.H, m.H, (size_t)m.n_items * 8 * sizeof(float));
  assert_memory_equal(m2.bu, m.bu, (size_t)m.n_users * sizeof(float));
  assert_memory_equal(m2.bi, m.bi, (size_t)m.n_items * sizeof(float));
  strata_mf_model_close(&m2);
  strata_mf_model_close(&m);
  strata_run_result_close(&r);
}

static void test_model_export_into_existing_dir(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  strata_engine_opts o = default_opts(0, 2);
  o.model_out = tmpdir; /* mkdtemp'd, exists already */
  strata_run_result r;
  run_ok(&cfg, &o, &r);
  assert_int_equal(count_entries(tmpdir), 7);
  strata_mf_model m;
  assert_int_equal(strata_mf_model_read(tmpdir, &m), 0);
  assert_int_equal(m.k, 8);
  assert_int_equal(m.n_users, 300);
  assert_int_equal(m.n_items, 200);
  strata_mf_model_close(&m);
  strata_run_result_close(&r);
}

static void test_model_read_missing(void **state) {
  (void)state;
  strata_mf_model m;
  assert_int_equal(strata_mf_model_read(tmpdir, &m), STRATA_ENOENT);
  assert_non_null(strstr(strata_err_msg(), "meta.json"));
}

/* ---- metrics --------------------------------------------------------- */

static void test_metrics_file(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  strata_engine_opts o = default_opts(3, 2);
  char path[128], script[128], cmd[512];
  snprintf(path, sizeof path, "%s/run.json", tmpdir);
  o.metrics_out = path;
  strata_run_result r;
  run_ok(&cfg, &o, &r);
  const char *argv[] = {"strata", "mf", "--mode", "serial", "--data", SYNTH};
  int rc = strata_metrics_write(path, &r, argv, 6);
  if (rc) print_message("metrics: %s\n", strata_err_msg());
  assert_int_equal(rc, 0);
  assert_int_equal(count_entries(tmpdir), 1);

  snprintf(script, sizeof script, "%s/check.py", tmpdir);
  FILE *f = fopen(script, "w");
  assert_non_null(f);
  fprintf(f,
          "import json, sys\n"
          "d = json.load(open(sys.argv[1]))\n"
          "need = ['app', 'mode', 'workers', 'strata', 'rank', 'passes', 'ratings', 'load_s',\n"
          "        'wall_s', 'time_per_pass_s', 'updates_per_s', 'train_rmse', 'test_rmse',\n"
          "        'coordinator_cpu_s', 'per_pass', 'build']\n"
          "missing = [k for k in need if k not in d]\n"
          "assert not missing, missing\n"
          "assert d['app'] == 'mf' and d['mode'] == 'serial', (d['app'], d['mode'])\n"
          "assert d['workers'] == 1 and d['strata'] == 3 and d['rank'] == 8 and d['passes'] == 5\n"
          "assert d['ratings'] == %llu, d['ratings']\n"
          "assert d['ratings'] + d['test_ratings'] == 20000, (d['ratings'], d['test_ratings'])\n"
          "assert isinstance(d['build']['git_rev'], str) and d['build']['git_rev']\n"
          "assert d['time_per_pass_s'] > 0 and d['updates_per_s'] > 0 and d['wall_s'] > 0\n"
          "assert 0 < d['train_rmse'] < 1 and d['test_rmse'] > 0\n"
          "pp = d['per_pass']\n"
          "assert len(pp) == 5, len(pp)\n"
          "for i, p in enumerate(pp):\n"
          "    for k in ['time_s', 'compute_s', 'wait_s', 'bytes_sent', 'train_rmse', 'test_rmse']:\n"
          "        assert k in p, (i, k)\n"
          "    assert p['time_s'] > 0 and p['train_rmse'] > 0 and p['test_rmse'] > 0\n"
          "assert pp[-1]['train_rmse'] == d['train_rmse']\n"
          "assert d['argv'] == ['strata', 'mf', '--mode', 'serial', '--data', '%s'], d['argv']\n",
          (unsigned long long)r.n_examples, SYNTH);
  fclose(f);
  snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", script, path);
  assert_int_equal(system(cmd), 0);
  strata_run_result_close(&r);
}

static void test_no_test_set(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  cfg.test_fraction = 0;
  strata_engine_opts o = default_opts(2, 2);
  char path[128], cmd[512];
  snprintf(path, sizeof path, "%s/run.json", tmpdir);
  strata_run_result r;
  run_ok(&cfg, &o, &r);
  int tr = objective_index("train_rmse"), te = objective_index("test_rmse");
  assert_true(r.n_examples == 20000);
  assert_true(isnan(r.objectives[te]));
  assert_true(r.objectives[tr] < 1.0);
  assert_int_equal(strata_metrics_write(path, &r, NULL, 0), 0);
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
           "sys.exit(0 if d[\"test_rmse\"] is None and d[\"ratings\"] == 20000 and "
           "d[\"argv\"] == [] else 1)' '%s'",
           path);
  assert_int_equal(system(cmd), 0);
  strata_run_result_close(&r);
}

static void test_tiny_problem_many_strata_and_chunks(void **state) {
  (void)state;
  /* More strata than users and items, more chunks than rows: empty blocks
   * and empty chunks must be handled. */
  strata_mf_config cfg;
  default_cfg(&cfg);
  cfg.data = "synth:users=5,items=3,ratings=40,rank=2,seed=9";
  cfg.rank = 3;
  cfg.test_fraction = 0.2;
  const int cases[][2] = {{7, 1}, {7, 9}, {1, 16}, {4, 3}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    strata_engine_opts o = default_opts(cases[c][0], cases[c][1]);
    o.passes = 3;
    strata_run_result r;
    run_ok(&cfg, &o, &r);
    assert_int_equal(r.strata, cases[c][0]);
    assert_true(r.n_examples > 0 && r.n_examples < 40);
    for (int p = 0; p < 3; p++) assert_true(isfinite(r.per_pass[p].objectives[0]));
    strata_run_result_close(&r);
  }
}

/* Runs a long serial run (many cheap passes) on a thread with a 1 MiB stack. */
static void *long_run(void *arg) {
  int *rc = arg;
  strata_mf_config cfg;
  default_cfg(&cfg);
  cfg.data = "synth:users=3,items=2,ratings=6,rank=1";
  cfg.rank = 1;
  cfg.test_fraction = 0;
  strata_engine_opts o = {.mode = STRATA_MODE_SERIAL, .strata = 0, .depth = 1, .passes = 200000, .seed = 1};
  strata_run_result r;
  memset(&r, 0, sizeof r);
  *rc = strata_engine_run(&strata_app_mf, &cfg, &o, NULL, &r);
  if (*rc == 0 && r.passes != 200000) *rc = -100;
  strata_run_result_close(&r);
  return NULL;
}

/*
 * The stack a run needs does not grow with --passes: a serial run of
 * 200,000 passes on a thread with a 1 MiB stack finishes (its per-pass
 * figures, 1.6 MB of pass times alone, live on the heap). The run happens
 * in a child process, so a crash shows up here as a failure.
 */
static void test_many_passes_small_stack(void **state) {
  (void)state;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    pthread_attr_t at;
    pthread_t th;
    int rc = -1;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 1 << 20);
    if (pthread_create(&th, &at, long_run, &rc) != 0) _exit(2);
    pthread_join(th, NULL);
    _exit(rc == 0 ? 0 : 3);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status))
    print_message("engine run with 200000 passes died with signal %d\n", WTERMSIG(status));
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- errors ---------------------------------------------------------- */

static void test_missing_data_file(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  char path[128];
  snprintf(path, sizeof path, "%s/no-such-ratings.tsv", tmpdir);
  cfg.data = path;
  strata_engine_opts o = default_opts(0, 2);
  strata_run_result r;
  memset(&r, 0, sizeof r);
  int rc = strata_engine_run(&strata_app_mf, &cfg, &o, NULL, &r);
  assert_int_equal(rc, STRATA_ENOENT);
  assert_non_null(strstr(strata_err_msg(), "no-such-ratings.tsv"));
  strata_run_result_close(&r);
}

static void test_metrics_out_in_missing_dir(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  char path[128];
  snprintf(path, sizeof path, "%s/missing/run.json", tmpdir);
  strata_engine_opts o = default_opts(0, 2);
  o.metrics_out = path;
  o.passes = 200; /* would take a while if it trained */
  strata_run_result r;
  memset(&r, 0, sizeof r);
  int rc = strata_engine_run(&strata_app_mf, &cfg, &o, NULL, &r);
  assert_int_equal(rc, STRATA_EIO);
  assert_non_null(strstr(strata_err_msg(), path));
  /* failed before loading or training (no pass took time, nothing was loaded) */
  if (r.per_pass) assert_true(r.per_pass[0].time_s == 0);
  assert_true(r.load_s == 0);
  assert_int_equal(count_entries(tmpdir), 0);
  strata_run_result_close(&r);
}

static void test_model_out_in_missing_dir(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  char path[128];
  snprintf(path, sizeof path, "%s/missing/model", tmpdir);
  strata_engine_opts o = default_opts(0, 2);
  o.model_out = path;
  strata_run_result r;
  memset(&r, 0, sizeof r);
  int rc = strata_engine_run(&strata_app_mf, &cfg, &o, NULL, &r);
  assert_int_equal(rc, STRATA_EIO);
  assert_non_null(strstr(strata_err_msg(), path));
  assert_true(r.load_s == 0);
  assert_int_equal(count_entries(tmpdir), 0);
  strata_run_result_close(&r);
}

static void test_bad_synth_spec(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  cfg.data = "synth:users=300,bogus=1";
  strata_engine_opts o = default_opts(0, 2);
  strata_run_result r;
  memset(&r, 0, sizeof r);
  assert_int_equal(strata_engine_run(&strata_app_mf, &cfg, &o, NULL, &r), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "bogus"));
  strata_run_result_close(&r);
}

/* Without a transport a parameter-server mode is refused before any work. */
static void test_ps_mode_needs_transport(void **state) {
  (void)state;
  strata_mf_config cfg;
  default_cfg(&cfg);
  strata_engine_opts o = default_opts(0, 2);
  o.mode = STRATA_MODE_SSP;
  strata_run_result r;
  memset(&r, 0, sizeof r);
  assert_int_equal(strata_engine_run(&strata_app_mf, &cfg, &o, NULL, &r), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "--mode ssp needs workers"));
  assert_true(r.load_s == 0);
  strata_run_result_close(&r);
}

static void test_result_close_on_zeroed(void **state) {
  (void)state;
  strata_run_result r;
  memset(&r, 0, sizeof r);
  strata_run_result_close(&r);
  strata_run_result_close(&r);
  assert_null(r.per_pass);
}

/* ---- partial reductions ---------------------------------------------------- */

static void test_reduce_ops(void **state) {
  (void)state;
  assert_true(strata_reduce_identity(STRATA_REDUCE_SUM) == 0.0);
  assert_true(strata_reduce_identity(STRATA_REDUCE_MAX) == -INFINITY);
  assert_true(strata_reduce_identity(STRATA_REDUCE_MIN) == INFINITY);
  assert_true(strata_reduce_apply(STRATA_REDUCE_SUM, 2, 3) == 5);
  assert_true(strata_reduce_apply(STRATA_REDUCE_MAX, 2, 3) == 3);
  assert_true(strata_reduce_apply(STRATA_REDUCE_MAX, -INFINITY, -7) == -7);
  assert_true(strata_reduce_apply(STRATA_REDUCE_MIN, 2, 3) == 2);
  assert_true(strata_reduce_apply(STRATA_REDUCE_MIN, INFINITY, 9) == 9);
  /* a NaN survives every operation, on either side (fmax would drop it) */
  for (int op = STRATA_REDUCE_SUM; op <= STRATA_REDUCE_MIN; op++) {
    assert_true(isnan(strata_reduce_apply((strata_reduce)op, NAN, 1)));
    assert_true(isnan(strata_reduce_apply((strata_reduce)op, 1, NAN)));
  }

  static const strata_reduce ops[] = {STRATA_REDUCE_SUM, STRATA_REDUCE_MAX, STRATA_REDUCE_MIN};
  strata_app app = {.n_partials = 3, .partial_reduce = ops};
  double acc[4] = {9, 9, 9, 42}, in[3];
  strata_partials_init(&app, acc);
  assert_true(acc[0] == 0 && acc[1] == -INFINITY && acc[2] == INFINITY);
  assert_true(acc[3] == 42); /* beyond n_partials: untouched */
  const double v[3][3] = {{1, 5, 5}, {2, -3, -3}, {4, 0, 0}};
  for (int w = 0; w < 3; w++) {
    memcpy(in, v[w], sizeof in);
    strata_partials_combine(&app, acc, in);
  }
  assert_true(acc[0] == 7 && acc[1] == 5 && acc[2] == -3);

  /* NULL: every partial summed */
  strata_app sums = {.n_partials = 2};
  double s[2] = {3, 3};
  strata_partials_init(&sums, s);
  assert_true(s[0] == 0 && s[1] == 0);
  strata_partials_combine(&sums, s, (double[]){1, -INFINITY});
  assert_true(s[0] == 1 && s[1] == -INFINITY);

  /* divergence: NaN anywhere, an infinity other than the identity */
  assert_false(strata_partial_is_bad(&app, 0, 1e300));
  assert_true(strata_partial_is_bad(&app, 0, INFINITY));
  assert_true(strata_partial_is_bad(&app, 0, -INFINITY));
  assert_false(strata_partial_is_bad(&app, 1, -INFINITY));
  assert_true(strata_partial_is_bad(&app, 1, INFINITY));
  assert_false(strata_partial_is_bad(&app, 2, INFINITY));
  assert_true(strata_partial_is_bad(&app, 2, -INFINITY));
  for (int i = 0; i < 3; i++) assert_true(strata_partial_is_bad(&app, i, NAN));
  assert_true(strata_partial_is_bad(&sums, 1, -INFINITY));
}

/* A small app: one stratum, a rotating block of 3 rows (so with depth 4 one
 * chunk is empty), partials [calls, max, min, never raised, never lowered,
 * the worker's index as MAX, ... as SUM]. cfg->fault poisons one partial
 * in pass index 1. */
enum { R_CALLS, R_MAX, R_MIN, R_UNTOUCHED_MAX, R_UNTOUCHED_MIN, R_WORKER_MAX, R_WORKER_SUM, R_N };
static const strata_reduce r_ops[R_N] = {STRATA_REDUCE_SUM, STRATA_REDUCE_MAX, STRATA_REDUCE_MIN,
                                         STRATA_REDUCE_MAX, STRATA_REDUCE_MIN, STRATA_REDUCE_MAX,
                                         STRATA_REDUCE_SUM};
static const char *const r_names[R_N] = {"calls", "max", "min", "untouched_max", "untouched_min",
                                         "worker_max", "worker_sum"};

typedef struct r_cfg {
  int fault; /* 0 none; 1 +inf into a MAX; 2 -inf into a MIN; 3 NaN into a MAX */
} r_cfg;

static int r_load(const void *cfg, const strata_setup *setup, strata_problem *p) {
  (void)cfg, (void)setup;
  int rc = strata_problem_alloc(p, 1, 1, 1, 0);
  if (rc) return rc;
  strata_block *blocks[] = {&p->data[0], &p->resident[0], &p->rotating[0]};
  for (int i = 0; i < 3; i++) {
    blocks[i]->len = 12;
    if (!(blocks[i]->buf = strata_alloc_aligned(12))) return STRATA_ENOMEM;
    memset(blocks[i]->buf, 0, 12);
  }
  p->rotating[0].nrows = 3;
  p->rotating[0].row_bytes = 4;
  p->n_examples = 3;
  return 0;
}

static int r_schedule(const void *cfg, const strata_setup *setup, const strata_problem *p,
                      strata_schedule *s) {
  (void)cfg, (void)p;
  return strata_schedule_diagonal(s, setup->workers, 1);
}

static int r_init(const void *cfg, const strata_setup *setup, const void *meta, size_t len,
                  void **state) {
  (void)setup, (void)meta, (void)len;
  *state = (void *)cfg;
  return 0;
}

static int r_compute(void *state, const strata_task_view *tv, double *partials) {
  const r_cfg *cfg = state;
  double v = tv->pass * 10 + tv->chunk;
  partials[R_CALLS] += 1;
  partials[R_MAX] = fmax(partials[R_MAX], v);
  partials[R_MIN] = fmin(partials[R_MIN], v);
  partials[R_WORKER_MAX] = fmax(partials[R_WORKER_MAX], 0);
  partials[R_WORKER_SUM] += 0;
  /* In the pass's last call: a later fmax would drop the NaN. */
  if (tv->pass == 1 && tv->chunk == 3) {
    if (cfg->fault == 1) partials[R_MAX] = INFINITY;
    if (cfg->fault == 2) partials[R_MIN] = -INFINITY;
    if (cfg->fault == 3) partials[R_MAX] = strata_reduce_apply(STRATA_REDUCE_MAX, partials[R_MAX], NAN);
  }
  return 0;
}

static void r_objectives(const void *cfg, const strata_problem *p, const double *partials,
                         double *values) {
  (void)cfg, (void)p;
  memcpy(values, partials, R_N * sizeof *values);
}

static const strata_app r_app = {.name = "reduce",
                                 .n_partials = R_N,
                                 .partial_reduce = r_ops,
                                 .n_objectives = R_N,
                                 .objective_names = r_names,
                                 .config_size = sizeof(r_cfg),
                                 .load = r_load,
                                 .schedule = r_schedule,
                                 .worker_init = r_init,
                                 .compute = r_compute,
                                 .objectives = r_objectives};

/* Serial runs: every compute call (empty chunks included) sees the array
 * its pass started with at the identities; untouched MAX/MIN partials stay
 * infinite without ending the run; +inf in a MAX, -inf in a MIN or a NaN
 * does end it. */
static void test_serial_max_min_partials(void **state) {
  (void)state;
  r_cfg cfg = {0};
  strata_engine_opts o = {.mode = STRATA_MODE_SERIAL, .depth = 4, .passes = 3, .seed = 1};
  strata_run_result r;
  memset(&r, 0, sizeof r);
  int rc = strata_engine_run(&r_app, &cfg, &o, NULL, &r);
  if (rc) print_message("engine: %s\n", strata_err_msg());
  assert_int_equal(rc, 0);
  for (int p = 0; p < 3; p++) {
    const double *ob = r.per_pass[p].objectives;
    assert_int_equal(r.per_pass[p].pass, p);
    assert_true(ob[R_CALLS] == 4);
    assert_true(ob[R_MAX] == p * 10 + 3);
    assert_true(ob[R_MIN] == p * 10);
    assert_true(ob[R_UNTOUCHED_MAX] == -INFINITY);
    assert_true(ob[R_UNTOUCHED_MIN] == INFINITY);
    assert_true(ob[R_WORKER_MAX] == 0 && ob[R_WORKER_SUM] == 0);
  }
  strata_run_result_close(&r);

  const char *const want[] = {"max is infinite", "min is infinite", "max is nan"};
  for (int f = 1; f <= 3; f++) {
    cfg.fault = f;
    memset(&r, 0, sizeof r);
    assert_int_equal(strata_engine_run(&r_app, &cfg, &o, NULL, &r), STRATA_EDIVERGED);
    if (!strstr(strata_err_msg(), want[f - 1]))
      fail_msg("fault %d: '%s' does not say '%s'", f, strata_err_msg(), want[f - 1]);
    assert_non_null(strstr(strata_err_msg(), "diverged at pass 2"));
    assert_null(strstr(strata_err_msg(), "untouched"));
    strata_run_result_close(&r);
    strata_err_clear();
  }
}

/* The coordinator's aggregation of three workers' reports, in report
 * order 2, 0, 1: MAX and MIN partials are not summed, untouched ones stay
 * at their identities, and the next pass starts from the identities. */
static void test_aggregate_reduces_workers(void **state) {
  (void)state;
  strata_engine_opts o = {.mode = STRATA_MODE_SCHEDULED, .passes = 2};
  strata_problem prob = {.n_examples = 1};
  strata_run_result r;
  memset(&r, 0, sizeof r);
  strata__agg agg = {.app = &r_app, .cfg = NULL, .opts = &o,
                     .setup = {.workers = 3, .strata = 3, .depth = 1, .passes = 2, .worker = -1},
                     .prob = &prob, .res = &r, .lag = 2};
  assert_int_equal(strata__agg_open(&agg), 0);
  strata__agg_start(&agg);
  assert_int_equal(strata__agg_decide_first(&agg), 0);
  for (int pass = 0; pass < 2; pass++) {
    for (int k = 0; k < 3; k++) {
      int w = (k + 2) % 3;
      pass_report rep;
      strata__report_begin(&rep, pass, w);
      strata_partials_init(&r_app, rep.partials);
      rep.partials[R_CALLS] = 10 + w;
      rep.partials[R_MAX] = pass ? -w : 100 * w;
      rep.partials[R_MIN] = pass ? -w : 100 * w;
      rep.partials[R_WORKER_MAX] = w;
      rep.partials[R_WORKER_SUM] = w;
      assert_int_equal(strata__agg_report(&agg, &rep), 0);
    }
    const double *ob = r.per_pass[pass].objectives;
    assert_int_equal(r.per_pass[pass].pass, pass);
    assert_true(ob[R_CALLS] == 33);
    assert_true(ob[R_MAX] == (pass ? 0 : 200));
    assert_true(ob[R_MIN] == (pass ? -2 : 0));
    assert_true(ob[R_UNTOUCHED_MAX] == -INFINITY && ob[R_UNTOUCHED_MIN] == INFINITY);
    assert_true(ob[R_WORKER_MAX] == 2);
    assert_true(ob[R_WORKER_SUM] == 3);
  }
  assert_int_equal(strata__agg_finish(&agg), 0);
  strata__agg_close(&agg);
  strata_run_result_close(&r);
}

/* ---- the metrics' keys ------------------------------------------------ */

static const char *const key_objs[] = {"o1", "o2"};
static const char *const key_ctls[] = {"c1"};

static void key_objectives(const void *cfg, const strata_problem *p, const double *in, double *out) {
  (void)cfg, (void)p, (void)in;
  out[0] = out[1] = 1;
}

static void key_describe(const void *cfg, const strata_problem *p, strata_json *j) {
  (void)p;
  const char *name = cfg;
  strata_json_int(j, name ? name : "size", 7);
  strata_json_string(j, "kind", "fake");
}

static void key_extra(strata_json *j, void *ud) {
  (void)ud;
  strata_json_object_begin(j, "status");
  strata_json_object_end(j);
  strata_json_object_begin(j, "settings");
  strata_json_object_end(j);
}

static int in_list(const char *const *l, const char *k) {
  for (; l && *l; l++)
    if (!strcmp(*l, k)) return 1;
  return 0;
}

/* The engine's keys and the mode's own (its back-end's and its rule's). */
static int engine_key(strata_mode mode, int per_pass, const char *k) {
  return in_list(strata__metrics_keys(per_pass), k) ||
         in_list(strata__mode_keys(mode, 0, per_pass), k) ||
         in_list(strata__mode_keys(mode, 1, per_pass), k);
}

/* Every key of a summary with every section on is the engine's (listed in
 * strata__metrics_keys) or the app's: the lists that guard against
 * collisions cannot drift from what the writer writes. */
static void render_and_check(strata_mode mode) {
  strata_app app = {.name = "fake", .unit = "things", .n_objectives = 2,
                    .objective_names = key_objs, .n_controls = 1, .control_names = key_ctls,
                    .objectives = key_objectives, .describe = key_describe};
  strata_engine_opts o = {.mode = mode,
                          .passes = 2,
                          .staleness = 1,
                          .wpc = 1,
                          .straggler_ms = 5,
                          .disrupt_prob = 0.5,
                          .disrupt_slot_ms = 10,
                          .resume_dir = "r",
                          .checkpoint_dir = "c",
                          .checkpoint_every = 1};
  /* A mode's own options at a value other than the default. */
  const strata_option *own = strata_mode_options(mode);
  if (own && own->name) {
    int flag = (own->type & STRATA_OPT_TYPE_MASK) == STRATA_OPT_FLAG;
    assert_int_equal(strata_mode_set(&o, own->name, flag ? NULL : "1"), 0);
  }
  strata_run_result r;
  memset(&r, 0, sizeof r);
  r.app = &app;
  r.opts = &o;
  r.mode = mode;
  r.workers = 2;
  r.passes = 2;
  r.stop_reason = "passes";
  r.rounds_per_pass = 3;
  r.per_pass = strata_calloc(2, sizeof *r.per_pass);
  r.per_pass_worker = strata_calloc(4, sizeof *r.per_pass_worker);
  r.worker_total = strata_calloc(2, sizeof *r.worker_total);
  assert_non_null(r.per_pass);
  r.per_pass[0].has_view = 1;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  assert_int_equal(strata__metrics_render(f, &r, 2, NULL, 0, 1, key_extra, NULL), 0);
  fclose(f);
  strata__json_doc *doc;
  assert_int_equal(strata__json_parse(text, len, &doc), 0);
  const char *const app_top[] = {"o1", "o2", "things_per_s", "size", "kind", NULL};
  const char *const app_pass[] = {"o1", "o2", "c1", NULL};
  for (const strata__jv *m = strata__json_root(doc)->child; m; m = m->next) {
    if (!engine_key(mode, 0, m->key) && !in_list(app_top, m->key))
      fail_msg("top-level key '%s' (mode %s) is in no list", m->key, strata_mode_name(mode));
    if (strcmp(m->key, "per_pass")) continue;
    for (const strata__jv *p = m->child; p; p = p->next)
      for (const strata__jv *k = p->child; k; k = k->next)
        if (!engine_key(mode, 1, k->key) && !in_list(app_pass, k->key))
          fail_msg("per-pass key '%s' (mode %s) is in no list", k->key, strata_mode_name(mode));
  }
  strata__json_free(doc);
  free(text);
  strata_free(r.per_pass);
  strata_free(r.per_pass_worker);
  strata_free(r.worker_total);
}

static void test_metrics_keys(void **state) {
  (void)state;
  for (int m = 0; m < STRATA_N_MODES; m++) render_and_check((strata_mode)m);
  /* Collisions are refused before any work. */
  strata_app app = {.name = "fake", .unit = "things", .n_objectives = 2,
                    .objective_names = key_objs, .n_controls = 1, .control_names = key_ctls,
                    .describe = key_describe};
  strata_problem p;
  memset(&p, 0, sizeof p);
  assert_int_equal(strata__metrics_check_keys(&app, NULL, &p), 0);
  assert_int_equal(strata__metrics_check_keys(&app, "passes", &p), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "'passes'"));
  assert_int_equal(strata__metrics_check_keys(&app, "o2", &p), STRATA_EINVAL);
  assert_int_equal(strata__metrics_check_keys(&app, "kind", &p), STRATA_EINVAL);
  const char *const bad_obj[] = {"o1", "wall_s"};
  app.objective_names = bad_obj;
  assert_int_equal(strata__metrics_check_keys(&app, NULL, NULL), STRATA_EINVAL);
  const char *const dup_obj[] = {"o1", "o1"};
  app.objective_names = dup_obj;
  assert_int_equal(strata__metrics_check_keys(&app, NULL, NULL), STRATA_EINVAL);
  const char *const bad_ctl[] = {"time_s"};
  app.objective_names = key_objs;
  app.control_names = bad_ctl;
  assert_int_equal(strata__metrics_check_keys(&app, NULL, NULL), STRATA_EINVAL);
  app.control_names = key_ctls;
  app.unit = "wall"; /* wall_per_s is free */
  assert_int_equal(strata__metrics_check_keys(&app, NULL, NULL), 0);
  /* The bundled apps pass. */
  strata_mf_config cfg;
  default_cfg(&cfg);
  assert_int_equal(strata__metrics_check_keys(&strata_app_mf, &cfg, NULL), 0);
  strata_err_clear();
}

/* An app whose objective 0 ("loss") must fall and objective 1 ("size")
 * need not: each is partial i as one worker reports it. */
static const char *const g_names[] = {"loss", "size"};

static void g_objectives(const void *cfg, const strata_problem *p, const double *partials,
                         double *values) {
  (void)cfg, (void)p;
  values[0] = partials[0];
  values[1] = partials[1];
}

static const strata_app g_app = {.name = "rise", .n_partials = 2, .n_objectives = 2,
                                 .objective_names = g_names, .falling = 1u,
                                 .objectives = g_objectives, .diverged_hint = "lower --lr"};

/* Feeds the aggregator one worker's passes first..n-1 of a run of n
 * passes (loss[k], size 1000 k, pass k unscored where loss[k] is NaN), the
 * passes before `first` as a resumed run's history. Returns the 1-based
 * pass the rise check stopped at (0: none), with its message in msg. */
static int feed_rise(const strata_app *app, const double *loss, int n, int first, char *msg,
                     size_t msg_len) {
  strata_engine_opts o = {.mode = STRATA_MODE_SCHEDULED, .passes = n};
  strata_problem prob = {.n_examples = 1};
  strata_run_result r;
  memset(&r, 0, sizeof r);
  strata__agg agg = {.app = app, .opts = &o,
                     .setup = {.workers = 1, .strata = 1, .depth = 1, .passes = n, .worker = -1},
                     .prob = &prob, .res = &r, .lag = 2};
  assert_int_equal(strata__agg_open(&agg), 0);
  /* What a resume restores: the objectives of the checkpoint's passes
   * and the verdicts decided then (scheduler/ckpt.c, which makes room for
   * them first). */
  assert_int_equal(strata__agg_reserve(&agg, first + 2 < n ? first + 2 : n), 0);
  for (int k = 0; k < first; k++) {
    agg.obj_hist[(size_t)k * STRATA_MAX_OBJECTIVES] = loss[k];
    agg.obj_hist[(size_t)k * STRATA_MAX_OBJECTIVES + 1] = 1000.0 * k;
  }
  agg.start_pass = first;
  agg.n_decided = first + 2 < n ? first + 2 : n;
  strata__agg_start(&agg);
  assert_int_equal(strata__agg_decide_first(&agg), 0);
  for (int k = first; k < n && k < agg.run_passes; k++) {
    pass_report rep;
    strata__report_begin(&rep, k, 0);
    strata_partials_init(app, rep.partials);
    rep.unscored = isnan(loss[k]);
    rep.partials[0] = isnan(loss[k]) ? 0 : loss[k];
    rep.partials[1] = 1000.0 * k;
    assert_int_equal(strata__agg_report(&agg, &rep), 0);
  }
  int rc = strata__agg_finish(&agg), stopped = agg.diverged_pass;
  snprintf(msg, msg_len, "%s", rc ? strata_err_msg() : "");
  assert_int_equal(rc, stopped ? STRATA_EDIVERGED : 0);
  /* The workers run the passes up to the verdict lag after it. */
  if (stopped) assert_int_equal(agg.run_passes, stopped + 1 < n ? stopped + 1 : n);
  strata__agg_close(&agg);
  strata_run_result_close(&r);
  strata_err_clear();
  return stopped;
}

/* The rise check of an objective that must fall: spikes above 10 times
 * the best that last fewer than STRATA_RISE_PASSES passes, a rise below
 * the limit, an objective not declared, unscored passes and a best of 0 do
 * not stop a run; STRATA_RISE_PASSES passes above the limit, or one at the
 * last pass, do, naming the objective, the best and its pass; the app's
 * factor replaces 10; a resumed run measures against the checkpoint's
 * passes. */
static void test_aggregate_rise_check(void **state) {
  (void)state;
  char msg[256];
  assert_int_equal(STRATA_RISE_PASSES, 3);
  const double N = NAN;
  /* best 0.5 at pass 2; spikes of two passes above 5; 4.9 just below */
  const double ok[] = {1, 0.8, 0.5, 6, 4.9, 6, 7, 0.9, 4.99, 4.99, 4.99, N, 4.9, 0.6};
  assert_int_equal(feed_rise(&g_app, ok, 14, 0, msg, sizeof msg), 0);
  /* three passes in a row above the limit: the third stops the run */
  const double up[] = {1, 0.8, 0.5, 0.7, 6, 60, 600, 6000, 0.1};
  assert_int_equal(feed_rise(&g_app, up, 9, 0, msg, sizeof msg), 7);
  assert_string_equal(msg, "the run diverged at pass 7: loss rose from 0.5 (pass 3) to 600; "
                           "lower --lr");
  /* an unscored pass neither counts nor breaks the streak */
  const double gap[] = {1, 0.5, 6, N, 6, 6, 1};
  assert_int_equal(feed_rise(&g_app, gap, 7, 0, msg, sizeof msg), 6);
  /* above the limit after the last pass: no passes left to wait for */
  const double end[] = {1, 0.5, 0.4, 4.5};
  assert_int_equal(feed_rise(&g_app, end, 4, 0, msg, sizeof msg), 4);
  assert_non_null(strstr(msg, "at pass 4: loss rose from 0.4 (pass 3) to 4.5"));
  /* a best of 0 or below gives no ratio */
  const double zero[] = {1, 0, 5, 5, 5, 5};
  assert_int_equal(feed_rise(&g_app, zero, 6, 0, msg, sizeof msg), 0);
  /* nothing declared: nothing checked */
  strata_app none = g_app;
  none.falling = 0;
  assert_int_equal(feed_rise(&none, up, 9, 0, msg, sizeof msg), 0);
  /* the app's own factor: 2 */
  strata_app two = g_app;
  two.rise_limit = 2;
  const double mild[] = {1, 0.5, 0.9, 1.1, 1.2, 1.3, 0.2};
  assert_int_equal(feed_rise(&g_app, mild, 7, 0, msg, sizeof msg), 0);
  assert_int_equal(feed_rise(&two, mild, 7, 0, msg, sizeof msg), 6);
  assert_non_null(strstr(msg, "loss rose from 0.5 (pass 2) to 1.3"));
  /* resumed after 4 passes: the best, 0.1 at pass 2, is the checkpoint's */
  const double res[] = {1, 0.1, 0.3, 0.5, 2, 2, 2, 2};
  assert_int_equal(feed_rise(&g_app, res, 8, 4, msg, sizeof msg), 7);
  assert_non_null(strstr(msg, "loss rose from 0.1 (pass 2) to 2"));
  assert_int_equal(feed_rise(&g_app, res, 8, 0, msg, sizeof msg), 7);
}

/* The per-pass arrays follow the passes summed, not --passes: a run of a
 * million passes holds a few kilobytes before its first pass, and after
 * 1000 at most twice what 1000 passes take. Every pass stays as summed
 * while they grow; a growth that finds no memory fails the report with a
 * message naming the pass, the passes before intact. */
static void test_aggregate_grows_with_passes(void **state) {
  (void)state;
  enum { N = 1000000, P = 2, DONE = 1000 };
  strata_engine_opts o = {.mode = STRATA_MODE_SCHEDULED, .passes = N};
  strata_problem prob = {.n_examples = 1};
  strata_run_result r;
  memset(&r, 0, sizeof r);
  strata__agg agg = {.app = &r_app, .cfg = NULL, .opts = &o,
                     .setup = {.workers = P, .strata = P, .depth = 1, .passes = N, .worker = -1},
                     .prob = &prob, .res = &r, .lag = 1};
  size_t per = sizeof(strata_pass_stats) + P * sizeof(strata_worker_stats) + sizeof(pass_control) +
               STRATA_MAX_OBJECTIVES * sizeof(double);
  size_t before = strata_alloc_live();
  assert_int_equal(strata__agg_open(&agg), 0);
  size_t opened = strata_alloc_live() - before;
  print_message("a run of %d passes: %zu bytes after open (%zu a pass)\n", N, opened, per);
  assert_true(opened < 64 * per);
  strata__agg_start(&agg);
  assert_int_equal(strata__agg_decide_first(&agg), 0);
  for (int pass = 0; pass < DONE; pass++) {
    for (int w = 0; w < P; w++) {
      pass_report rep;
      strata__report_begin(&rep, pass, w);
      strata_partials_init(&r_app, rep.partials);
      rep.partials[R_CALLS] = pass;
      rep.stats.time_s = pass + w;
      assert_int_equal(strata__agg_report(&agg, &rep), 0);
    }
  }
  size_t held = strata_alloc_live() - before;
  print_message("after %d passes: %zu bytes (%zu for exactly %d)\n", DONE, held, DONE * per, DONE);
  assert_true(held <= 2 * DONE * per + opened);
  for (int pass = 0; pass < DONE; pass++) {
    assert_int_equal(r.per_pass[pass].pass, pass);
    assert_true(r.per_pass[pass].objectives[R_CALLS] == 2 * pass);
    assert_true(r.per_pass[pass].time_s == pass + 1);
    assert_true(r.per_pass_worker[(size_t)pass * P + 1].time_s == pass + 1);
    assert_true(agg.obj_hist[(size_t)pass * STRATA_MAX_OBJECTIVES + R_CALLS] == 2 * pass);
    assert_int_equal(agg.ctl[pass].pass, pass);
  }
  assert_int_equal(agg.n_decided, DONE + 1);
  assert_true(agg.cap_pass > DONE && r.per_pass[DONE].time_s == 0); /* not summed yet */
  strata_run_result snap;
  strata__agg_snapshot(&agg, DONE, &snap);
  assert_true(snap.time_per_pass_s == 501); /* passes 2..1000 took 2..1000 s */

  /* The next growth finds no memory: the report fails, naming the pass. */
  while (agg.cap_pass > (size_t)agg.n_decided) {
    for (int w = 0; w < P; w++) {
      pass_report rep;
      strata__report_begin(&rep, agg.n_decided - 1, w);
      strata_partials_init(&r_app, rep.partials);
      assert_int_equal(strata__agg_report(&agg, &rep), 0);
    }
  }
  /* The next pass to sum; the verdict it leads to needs room, made as its
   * first report comes in. */
  int next = agg.n_decided - 1;
  pass_report rep;
  strata__report_begin(&rep, next, 0);
  strata_partials_init(&r_app, rep.partials);
  strata_alloc_fail_after(1);
  assert_int_equal(strata__agg_report(&agg, &rep), STRATA_ENOMEM);
  strata_alloc_fail_after(0);
  char want[64];
  snprintf(want, sizeof want, "out of memory for the metrics of pass %d ", next + 2);
  if (!strstr(strata_err_msg(), want)) fail_msg("'%s' lacks '%s'", strata_err_msg(), want);
  assert_true(r.per_pass[DONE - 1].objectives[R_CALLS] == 2 * (DONE - 1));
  strata_err_clear();
  strata__agg_close(&agg);
  strata_run_result_close(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_metrics_keys, setup, teardown),
      cmocka_unit_test_setup_teardown(test_serial_run_converges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ps_mode_needs_transport, setup, teardown),
      cmocka_unit_test_setup_teardown(test_identical_runs_are_bit_identical, setup, teardown),
      cmocka_unit_test_setup_teardown(test_strata_counts_both_converge, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sgd_update_rule_converges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_model_export_and_read, setup, teardown),
      cmocka_unit_test_setup_teardown(test_model_export_into_existing_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_model_read_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_metrics_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_test_set, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tiny_problem_many_strata_and_chunks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_many_passes_small_stack, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_data_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_metrics_out_in_missing_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_model_out_in_missing_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_synth_spec, setup, teardown),
      cmocka_unit_test_setup_teardown(test_result_close_on_zeroed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reduce_ops, setup, teardown),
      cmocka_unit_test_setup_teardown(test_serial_max_min_partials, setup, teardown),
      cmocka_unit_test_setup_teardown(test_aggregate_reduces_workers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_aggregate_rise_check, setup, teardown),
      cmocka_unit_test_setup_teardown(test_aggregate_grows_with_passes, setup, teardown),
  };
  return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}
