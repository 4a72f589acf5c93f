/*
 * The mode table: the back-end that runs each mode. A new back-end is one
 * file defining a strata__backend and one line here (besides its value in
 * strata_mode and its name in core/modes.c).
 */
#include "comm/live.h"
#include "strata/core.h"
#include "strata/round.h"
#include "worker/backend.h"

extern const strata__backend strata__ring_backend;  /* worker/ring.c */
extern const strata__backend strata__table_backend; /* worker/tables.c */
extern const strata__backend strata__sfb_backend;   /* worker/sfb.c */

static const strata__backend *const backends[STRATA_N_MODES] = {
    [STRATA_MODE_SCHEDULED] = &strata__ring_backend, [STRATA_MODE_SERIAL] = &strata__ring_backend,
    [STRATA_MODE_BSP] = &strata__table_backend,      [STRATA_MODE_ABSP] = &strata__table_backend,
    [STRATA_MODE_SSP] = &strata__table_backend,      [STRATA_MODE_ESSP] = &strata__table_backend,
    [STRATA_MODE_ASYNC] = &strata__table_backend,    [STRATA_MODE_SFB] = &strata__sfb_backend,
};

int strata_mode_is_ps(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES && backends[m] == &strata__table_backend;
}

const strata__backend *strata__backend_of(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES ? backends[m] : NULL;
}

int strata__mode_all_rotating(strata_mode m) {
  const strata__backend *b = strata__backend_of(m);
  return b && b->all_rotating;
}

int strata__mode_control_lag(const strata_engine_opts *o) {
  const strata__backend *b = strata__backend_of(o->mode);
  return b && b->control_lag ? b->control_lag(o) : 2;
}

/* What every mode asks of a sufficient-factor app (strata/sf.h): compute
 * sees the whole matrix, which is the one rotating block. */
static int sf_check(const strata_app *app, const strata_setup *setup, const strata_problem *p) {
  if (setup->depth != 1)
    return strata_err_set(STRATA_EUSAGE,
                          "%s: --depth %d: a sufficient-factor app computes on the whole matrix "
                          "every clock; run it with --depth 1",
                          app->name, setup->depth);
  if (!p) return 0;
  if (p->n_rotating != 1 || !p->rotating[0].nrows || !p->rotating[0].row_bytes ||
      p->rotating[0].row_bytes % sizeof(float))
    return strata_err_set(STRATA_EINVAL,
                          "%s: a sufficient-factor app keeps its matrix as its one rotating block "
                          "of float rows",
                          app->name);
  return 0;
}

/* A round run (strata/round.h): the coordinator and its workers exchange
 * rounds; there are no rotating blocks for another back-end to move. */
static int round_check(const strata_engine_opts *o, const strata_app *app,
                       const strata_problem *p, const strata_schedule *s) {
  if (!app->round || !app->round->schedule_round || !app->round->push || !app->round->pull)
    return strata_err_set(STRATA_EINVAL,
                          "%s: load set rounds_per_pass, but the app has no round callbacks "
                          "(schedule_round, push, pull)",
                          app->name);
  if (strata__backend_of(o->mode) != &strata__ring_backend)
    return strata_err_set(STRATA_EUSAGE,
                          "%s: this run schedules every round on the coordinator (strata/round.h), "
                          "which runs in --mode scheduled and serial, not --mode %s",
                          app->name, strata_mode_name(o->mode));
  if (p->n_rotating || p->global.len)
    return strata_err_set(STRATA_EINVAL, "%s: a round run has no rotating or global blocks",
                          app->name);
  if (s && s->n_subepochs != 1)
    return strata_err_set(STRATA_ESCHED,
                          "%s: a round run's schedule is one sub-epoch of each worker's tasks "
                          "(strata_schedule_shards)",
                          app->name);
  return 0;
}

int strata__mode_check(const strata_engine_opts *o, const strata_app *app,
                       const strata_setup *setup, const strata_problem *p,
                       const strata_schedule *s) {
  const strata__backend *b = strata__backend_of(o->mode);
  if (p && p->rounds_per_pass) return round_check(o, app, p, s);
  int rc = app->sf ? sf_check(app, setup, p) : 0;
  return !rc && b && b->check ? b->check(o, app, setup, p, s) : rc;
}

void strata_engine_setup(const strata_app *app, const strata_engine_opts *o, int workers,
                         int worker, strata_setup *out) {
  const strata__backend *b = strata__backend_of(o->mode);
  *out = (strata_setup){.workers = workers,
                        .strata = o->strata ? o->strata : workers,
                        .depth = o->depth,
                        .passes = o->passes,
                        .seed = o->seed,
                        .worker = worker,
                        .mode = o->mode,
                        .model_out = o->model_out,
                        .staleness = 0,
                        .wpc = 1,
                        .tol = o->tol};
  if (b) b->clock_rule(o, app, &out->staleness, &out->wpc);
}

int strata_engine_resolve(strata_engine_opts *o, int s_given, int wpc_given, int pf_given) {
  const strata__backend *b = strata__backend_of(o->mode);
  if (!b) return strata_err_set(STRATA_EUSAGE, "unknown mode %d", (int)o->mode);
  int rc = strata__live_check_address(o->watch_address);
  if (rc) return rc;
  return b->resolve(o, s_given, wpc_given, pf_given);
}
