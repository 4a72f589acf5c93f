/*
 * Unit tests for scheduler/ckpt.c, the coordinator's side of checkpoints,
 * without workers: the coordinator's part and the manifest once every
 * worker has noted its part, and resuming from them into a fresh problem
 * and aggregator, in each layout a mode's facts give a checkpoint's parts
 * (core/mode.h): the ring's (each rotating block once, each worker's global
 * block), the tables' (each worker's shard of the table's rows) and sfb's
 * replicas under partial broadcast. The worker parts are written here as a
 * worker would (core/ckpt.h). Refusals: a manifest of another mode, other
 * workers or another setting; a part holding what the mode does not keep;
 * a part that never came; a note twice. Each test in a temporary directory
 * of its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/ckpt.h"
#include "dirs.h"
#include "engine/engine.h"
#include "scheduler/aggregate.h"
#include "scheduler/ckpt.h"
#include "strata/core.h"

enum { P = 2, B = 2, ROWS = 3, L = 2 };

typedef struct fx {
  char dir[64];
  size_t live0;
} fx;

static int setup(void **state) {
  static fx f;
  snprintf(f.dir, sizeof f.dir, "/tmp/strata_sched_ckpt_%d", (int)getpid());
  remove_tree(f.dir);
  assert_int_equal(mkdir(f.dir, 0700), 0);
  f.live0 = strata_alloc_live();
  strata_err_clear();
  *state = &f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  remove_tree(f->dir);
  assert_int_equal(strata_alloc_live(), f->live0);
  strata_err_clear();
  return 0;
}

static const char *const obj_names[] = {"o"};
static void objectives(const void *cfg, const strata_problem *p, const double *partials,
                       double *values) {
  (void)cfg, (void)p;
  values[0] = partials[0];
}
static const strata_app app = {.name = "ck",
                               .flags = STRATA_APP_ADDITIVE,
                               .n_partials = 1,
                               .n_objectives = 1,
                               .objective_names = obj_names,
                               .objectives = objectives};

/* B x B data blocks, B resident blocks of 8 bytes, B rotating blocks of
 * ROWS rows of L floats; values from `base`. */
static void make_problem(strata_problem *p, float base) {
  memset(p, 0, sizeof *p);
  assert_int_equal(strata_problem_alloc(p, B * B, B, B, 0), 0);
  for (int d = 0; d < B * B; d++) {
    p->data[d].len = 4;
    p->data[d].buf = strata_alloc_aligned(4);
    memset(p->data[d].buf, d, 4);
  }
  for (int i = 0; i < B; i++) {
    p->resident[i].len = 8;
    p->resident[i].buf = strata_alloc_aligned(8);
    for (int k = 0; k < 2; k++) ((float *)p->resident[i].buf)[k] = base + 10 * (float)i + (float)k;
  }
  for (int r = 0; r < B; r++) {
    strata_block *b = &p->rotating[r];
    b->nrows = ROWS;
    b->row_bytes = L * sizeof(float);
    b->len = (size_t)ROWS * L * sizeof(float);
    b->buf = strata_alloc_aligned(b->len);
    for (int x = 0; x < ROWS * L; x++) ((float *)b->buf)[x] = base + 100 * (float)r + (float)x;
  }
  p->n_examples = 1;
}

typedef struct run {
  strata_engine_opts o;
  strata_setup setup;
  strata__facts f;
  strata_problem p;
  strata_schedule s;
  strata_run_result res;
  strata__agg agg;
  strata__ckpt_run ck;
  const char *settings[1];
} run;

/* A coordinator of mode m with checkpoints in dir (resume: from there). */
static int open_run(run *r, strata_mode m, const char *dir, int resume, float base, const char *own,
                    const char *setting) {
  memset(r, 0, sizeof *r);
  r->o.mode = m;
  r->o.passes = 4;
  r->o.depth = 1;
  r->o.checkpoint_dir = dir;
  r->o.checkpoint_every = 1;
  r->o.resume_dir = resume ? dir : NULL;
  r->settings[0] = setting ? setting : "lr=1";
  r->o.settings = r->settings;
  r->o.n_settings = 1;
  /* the mode's own option, as "name=value" */
  if (own) {
    char name[32];
    const char *eq = strchr(own, '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq - own), own);
    assert_int_equal(strata_mode_set(&r->o, name, eq + 1), 0);
  }
  assert_int_equal(strata_engine_resolve(&r->o, 0, 0, 0), 0);
  strata_engine_setup(&app, &r->o, P, -1, &r->setup);
  assert_int_equal(strata__mode_facts(m, &r->o, P, &r->f), 0);
  make_problem(&r->p, base);
  assert_int_equal(strata_schedule_diagonal(&r->s, P, B), 0);
  r->agg = (strata__agg){.app = &app,
                         .opts = &r->o,
                         .setup = r->setup,
                         .prob = &r->p,
                         .res = &r->res,
                         .facts = &r->f,
                         .lag = r->f.lag};
  assert_int_equal(strata__agg_open(&r->agg), 0);
  int rc = strata__ckpt_open(&r->ck, &app, &r->o, &r->setup, &r->f);
  /* A run that writes checkpoints takes the data's identity once loaded. */
  if (!rc && !resume) rc = strata__ckpt_loaded(&r->ck, &r->p, &r->s, &r->agg);
  return rc;
}

static void close_run(run *r) {
  strata__ckpt_close(&r->ck);
  strata__agg_close(&r->agg);
  strata_run_result_close(&r->res);
  strata_schedule_close(&r->s);
  strata_problem_close(&r->p);
}

/* Worker w's part after `passes`, as the mode's back-end writes it, noted. */
static int write_part(run *r, int w, int passes, int extra_rotating) {
  char name[32];
  snprintf(name, sizeof name, "worker-%d.bin", w);
  strata__part_writer pw;
  ckpt_note n = {.passes = passes, .worker = w};
  int rc = strata__part_begin(&pw, r->o.checkpoint_dir, passes, name, w);
  for (int i = 0; i < B && !rc; i++)
    if (strata_schedule_resident_owner(&r->s, i) == w)
      rc = strata__part_add(&pw, STRATA__CK_RESIDENT, i, 0, r->p.resident[i].buf, 8);
  if (r->f.ckpt & STRATA__CKP_TABLE) {
    /* its shard: table rows w, w + P, ... (the rotating blocks' rows in order) */
    float rows[B * ROWS * L];
    uint32_t n_rows = 0;
    for (uint32_t g = (uint32_t)w; g < B * ROWS; g += P, n_rows++)
      memcpy(rows + (size_t)n_rows * L,
             (float *)r->p.rotating[g / ROWS].buf + (size_t)(g % ROWS) * L, L * sizeof(float));
    if (!rc)
      rc = strata__part_add(&pw, STRATA__CK_TABLE_ROWS, w, L, rows, (uint64_t)n_rows * L * 4);
  }
  for (int b = 0; b < B && !rc; b++) {
    int mine = (r->f.ckpt & STRATA__CKP_REPLICAS) ||
               ((r->f.ckpt & STRATA__CKP_ROTATING) &&
                strata_schedule_rotating_holder(&r->s, b, r->s.n_subepochs - 1) == w);
    if (mine || (extra_rotating && b == 0))
      rc = strata__part_add(&pw, STRATA__CK_ROTATING, b, 0, r->p.rotating[b].buf,
                            r->p.rotating[b].len);
  }
  if (!rc) rc = strata__part_commit(&pw, &n.sum, &n.bytes);
  strata__part_abandon(&pw);
  return rc ? rc : strata__ckpt_note(&r->ck, &r->agg, &n);
}

/* Pass 0 summed: the coordinator's part, then every worker's. */
static int write_checkpoint(run *r, int extra_rotating) {
  for (int w = 0; w < P; w++) {
    pass_report rep;
    strata__report_begin(&rep, 0, w);
    strata_partials_init(&app, rep.partials);
    rep.partials[0] = 1;
    int rc = strata__agg_report(&r->agg, &rep);
    if (rc) return rc;
  }
  int rc = strata__ckpt_summed(&r->ck, &r->agg, 0);
  for (int w = 0; w < P && !rc; w++) rc = write_part(r, w, 1, extra_rotating);
  return rc;
}

/* Written in mode m, resumed in mode m: every parameter block comes back
 * from where the mode keeps it. */
static void round_trip(fx *f, strata_mode m, const char *own) {
  run a, b;
  assert_int_equal(open_run(&a, m, f->dir, 0, 1000, own, NULL), 0);
  assert_int_equal(write_checkpoint(&a, 0), 0);
  assert_int_equal(a.res.checkpoints, 1);
  assert_int_equal(strata__ckpt_finish(&a.ck), 0);
  assert_int_equal(open_run(&b, m, f->dir, 1, 0, own, NULL), 0);
  assert_int_equal(b.ck.start_pass, 1);
  assert_int_equal(strata__ckpt_loaded(&b.ck, &b.p, &b.s, &b.agg), 0);
  for (int i = 0; i < B; i++) assert_memory_equal(b.p.resident[i].buf, a.p.resident[i].buf, 8);
  for (int r = 0; r < B; r++)
    if (b.ck.rot_of) /* each replica its own: worker 0's is worker 0's */
      assert_memory_equal(b.ck.rot_of[r], a.p.rotating[r].buf, a.p.rotating[r].len);
    else
      assert_memory_equal(b.p.rotating[r].buf, a.p.rotating[r].buf, a.p.rotating[r].len);
  assert_int_equal(b.res.resumed_passes, 1);
  close_run(&a);
  close_run(&b);
}

static void test_round_trip_ring(void **state) { round_trip(*state, STRATA_MODE_SCHEDULED, NULL); }
static void test_round_trip_table(void **state) { round_trip(*state, STRATA_MODE_SSP, NULL); }
static void test_round_trip_vap(void **state) {
  round_trip(*state, STRATA_MODE_VAP, "value-bound=0.5");
}
/* sfb with one out-peer of two workers is full broadcast: one copy; with
 * one of three, every worker keeps its replica (the layout, below). */
static void test_round_trip_sfb_full(void **state) {
  round_trip(*state, STRATA_MODE_SFB, "peers=1");
}

/* The facts decide the layout: ring and sfb (full) one copy of each
 * rotating block, the tables shards, sfb under partial broadcast every
 * worker its replica. */
static void test_layouts(void **state) {
  (void)state;
  strata_engine_opts o = {.mode = STRATA_MODE_SFB};
  strata__facts f;
  assert_int_equal(strata_mode_set(&o, "peers", "1"), 0);
  assert_int_equal(strata__mode_facts(STRATA_MODE_SFB, &o, 3, &f), 0);
  assert_int_equal(f.ckpt, STRATA__CKP_REPLICAS);
  assert_int_equal(strata__mode_facts(STRATA_MODE_SFB, &o, 2, &f), 0);
  assert_int_equal(f.ckpt, STRATA__CKP_ROTATING);
  o.mode = STRATA_MODE_SCHEDULED;
  assert_int_equal(strata__mode_facts(o.mode, &o, 2, &f), 0);
  assert_int_equal(f.ckpt, STRATA__CKP_ROTATING | STRATA__CKP_GLOBAL);
  o.mode = STRATA_MODE_ESSP;
  assert_int_equal(strata__mode_facts(o.mode, &o, 2, &f), 0);
  assert_int_equal(f.ckpt, STRATA__CKP_TABLE);
}

/* Resumes that would not be the same run are refused, naming why. */
static void test_refusals(void **state) {
  fx *f = *state;
  run a, b;
  assert_int_equal(open_run(&a, STRATA_MODE_SSP, f->dir, 0, 1, NULL, NULL), 0);
  assert_int_equal(write_checkpoint(&a, 0), 0);
  close_run(&a);
  assert_int_equal(open_run(&b, STRATA_MODE_ESSP, f->dir, 1, 0, NULL, NULL), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "--mode ssp"));
  close_run(&b);
  assert_int_equal(open_run(&b, STRATA_MODE_SSP, f->dir, 1, 0, NULL, "lr=2"), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "--lr 1"));
  close_run(&b);
  strata_err_clear();
}

/* A table-mode part that holds a rotating block is not this run's. */
static void test_part_of_another_layout(void **state) {
  fx *f = *state;
  run a, b;
  assert_int_equal(open_run(&a, STRATA_MODE_SSP, f->dir, 0, 1, NULL, NULL), 0);
  assert_int_equal(write_checkpoint(&a, 1), 0);
  close_run(&a);
  assert_int_equal(open_run(&b, STRATA_MODE_SSP, f->dir, 1, 0, NULL, NULL), 0);
  assert_int_equal(strata__ckpt_loaded(&b.ck, &b.p, &b.s, &b.agg), STRATA_EPARSE);
  assert_non_null(strstr(strata_err_msg(), "not a rotating block of this run"));
  close_run(&b);
  strata_err_clear();
}

/* A worker's part that never came leaves the checkpoint unpublished; a
 * note twice is refused. */
static void test_missing_and_twice(void **state) {
  fx *f = *state;
  run a;
  assert_int_equal(open_run(&a, STRATA_MODE_SCHEDULED, f->dir, 0, 1, NULL, NULL), 0);
  for (int w = 0; w < P; w++) {
    pass_report rep;
    strata__report_begin(&rep, 0, w);
    strata_partials_init(&app, rep.partials);
    assert_int_equal(strata__agg_report(&a.agg, &rep), 0);
  }
  assert_int_equal(strata__ckpt_summed(&a.ck, &a.agg, 0), 0);
  assert_int_equal(write_part(&a, 0, 1, 0), 0);
  assert_int_equal(a.res.checkpoints, 0);
  assert_int_equal(strata__ckpt_finish(&a.ck), STRATA_ECOMM);
  assert_non_null(strstr(strata_err_msg(), "worker 1's part never came"));
  ckpt_note n = {.passes = 1, .worker = 0};
  assert_int_equal(strata__ckpt_note(&a.ck, &a.agg, &n), STRATA_ECOMM);
  assert_non_null(strstr(strata_err_msg(), "twice"));
  close_run(&a);
  strata_err_clear();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip_ring, setup, teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_table, setup, teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_vap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_sfb_full, setup, teardown),
      cmocka_unit_test_setup_teardown(test_layouts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_of_another_layout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_and_twice, setup, teardown),
  };
  return cmocka_run_group_tests_name("sched_ckpt", tests, NULL, NULL);
}
