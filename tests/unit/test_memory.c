/*
 * Unit tests for scheduler/memory.c, the estimate of every rank's memory
 * before set-up: each mode's answer (core/mode.h, memory) counted per host,
 * a run refused on a host whose ranks need more than it has (the message
 * names the host, the estimate, what each rank needs and the app's hint),
 * the same run fitting once its workers spread over hosts, and the modes
 * against each other: the ring holds least, a table mode its cache, oplog
 * and shard on top, vap its in-transit sums on top of that.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "engine/engine.h"
#include "scheduler/memory.h"
#include "strata/core.h"

enum { P = 2, B = 2 };
#define MB 1000000.0

static const strata_app app = {
    .name = "memapp", .flags = STRATA_APP_ADDITIVE, .memory_hint = "lower --rank"};

/* B x B data blocks of 4 MB, B resident blocks of 2 MB, B rotating blocks
 * of 8 MB (float rows), a global block of 1 MB. */
static void make_problem(strata_problem *p, strata_schedule *s) {
  memset(p, 0, sizeof *p);
  assert_int_equal(strata_problem_alloc(p, B * B, B, B, 0), 0);
  for (int d = 0; d < B * B; d++) p->data[d].len = (size_t)(4 * MB);
  for (int i = 0; i < B; i++) p->resident[i].len = (size_t)(2 * MB);
  for (int r = 0; r < B; r++) {
    p->rotating[r].nrows = 20000;
    p->rotating[r].row_bytes = 400;
    p->rotating[r].len = 20000 * 400;
  }
  p->global = (strata_block){.len = 1000000, .nrows = 2500, .row_bytes = 400};
  assert_int_equal(strata_schedule_diagonal(s, P, B), 0);
}

static void hosts_on(host_info *h, int spread) {
  memset(h, 0, sizeof(host_info) * (P + 1));
  for (int r = 0; r <= P; r++) snprintf(h[r].name, sizeof h[r].name, spread ? "h%d" : "h", r);
}

/* The least --mem-limit (bytes, to 1%) mode m fits in. */
static double least_limit(strata_mode m, const char *own, const strata_problem *p,
                          const strata_schedule *s, int spread) {
  strata_engine_opts o = {.mode = m, .staleness = -1};
  if (own) assert_int_equal(strata_mode_set(&o, "value-bound", own), 0);
  assert_int_equal(strata_engine_resolve(&o, 0, 0, 0), 0);
  strata__facts f;
  assert_int_equal(strata__mode_facts(m, &o, P, &f), 0);
  host_info h[P + 1];
  hosts_on(h, spread);
  double lo = 1, hi = 1e12;
  while (hi / lo > 1.01) {
    double mid = sqrt(lo * hi);
    if (strata__mem_check(&app, &o, &f, p, s, h, (uint64_t)mid) == 0)
      hi = mid;
    else
      lo = mid;
  }
  strata_err_clear();
  return hi;
}

static void test_modes_against_each_other(void **state) {
  (void)state;
  strata_problem p;
  strata_schedule s;
  make_problem(&p, &s);
  double ring = least_limit(STRATA_MODE_SCHEDULED, NULL, &p, &s, 0);
  double bsp = least_limit(STRATA_MODE_BSP, NULL, &p, &s, 0);
  double ssp = least_limit(STRATA_MODE_SSP, NULL, &p, &s, 0);
  double vap = least_limit(STRATA_MODE_VAP, "0.5", &p, &s, 0);
  double sfb = least_limit(STRATA_MODE_SFB, NULL, &p, &s, 0);
  print_message("one host: scheduled %.1f MB, bsp %.1f MB, ssp %.1f MB, vap %.1f MB, sfb %.1f MB\n",
                ring / MB, bsp / MB, ssp / MB, vap / MB, sfb / MB);
  assert_true(ring < bsp && bsp < ssp);
  /* ssp's snapshot buffers of the passes in flight: one table more per
   * worker than bsp's; vap (staleness 0, as bsp) twice the table more
   * (its in-transit sums and the batches it keeps until seen) */
  double table = 2 * 8 * MB + 1 * MB;
  assert_true(fabs((ssp - bsp) - P * table) < 0.03 * ssp);
  assert_true(fabs((vap - bsp) - P * 2 * table) < 0.03 * vap);
  assert_true(ring < sfb);
  /* every rank on a host of its own: each host needs less than all on one */
  double spread = least_limit(STRATA_MODE_SSP, NULL, &p, &s, 1);
  assert_true(spread < ssp);
  strata_schedule_close(&s);
  strata_problem_close(&p);
}

static void test_refusal_message(void **state) {
  (void)state;
  strata_problem p;
  strata_schedule s;
  make_problem(&p, &s);
  strata_engine_opts o = {.mode = STRATA_MODE_SSP, .staleness = -1};
  assert_int_equal(strata_engine_resolve(&o, 0, 0, 0), 0);
  strata__facts f;
  assert_int_equal(strata__mode_facts(o.mode, &o, P, &f), 0);
  host_info h[P + 1];
  hosts_on(h, 0);
  assert_int_equal(strata__mem_check(&app, &o, &f, &p, &s, h, (uint64_t)(10 * MB)), STRATA_ENOMEM);
  const char *msg = strata_err_msg();
  assert_non_null(strstr(msg, "on host h"));
  assert_non_null(strstr(msg, "(--mem-limit)"));
  assert_non_null(strstr(msg, "2 workers of up to"));
  assert_non_null(strstr(msg, "lower --rank"));
  /* what each host measured stands in without a limit */
  for (int r = 0; r <= P; r++) h[r].avail = (uint64_t)(10 * MB);
  assert_int_equal(strata__mem_check(&app, &o, &f, &p, &s, h, 0), STRATA_ENOMEM);
  for (int r = 0; r <= P; r++) h[r].avail = (uint64_t)(1e12);
  assert_int_equal(strata__mem_check(&app, &o, &f, &p, &s, h, 0), 0);
  strata_schedule_close(&s);
  strata_problem_close(&p);
  strata_err_clear();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_modes_against_each_other, setup, teardown),
      cmocka_unit_test_setup_teardown(test_refusal_message, setup, teardown),
  };
  return cmocka_run_group_tests_name("memory", tests, NULL, NULL);
}
