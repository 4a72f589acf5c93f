/*
 * The mode table: for each mode (strata/modes.h), the back-end that runs
 * it and its table rule, and from them the one answer the engine gets for
 * a run (strata__mode_facts), the checks of its settings
 * (strata_engine_resolve) and the set-up its app is told
 * (strata_engine_setup). Every list of modes a message or --help shows is
 * made here from the table.
 */
#include <stdio.h>
#include <string.h>

#include "comm/live.h"
#include "comm/rule.h"
#include "core/mode.h"
#include "engine/engine.h"
#include "strata/core.h"
#include "strata/round.h"
#include "worker/backend.h"

#define BACKEND_EXTERN_(id, name, backend, rule, summary) \
  extern const strata__backend strata__##backend##_backend;
STRATA_MODES(BACKEND_EXTERN_)
#undef BACKEND_EXTERN_

static const strata__backend *const backends[STRATA_N_MODES] = {
#define BACKEND_(id, name, backend, rule, summary) \
  [STRATA_MODE_##id] = &strata__##backend##_backend,
    STRATA_MODES(BACKEND_)
#undef BACKEND_
};

/* The answers of mode m: [0] its back-end's, [1] its rule's (or NULL). */
static void ops_of(strata_mode m, const strata__mode_ops *ops[2]) {
  const strata__table_rule *rule = strata__table_rule_of(m);
  ops[0] = (unsigned)m < STRATA_N_MODES ? &backends[m]->mode : NULL;
  ops[1] = rule ? &rule->mode : NULL;
}

void strata__mode_list(char *out, size_t n,
                       int (*pick)(const strata__mode_ops *const ops[2], void *ud), void *ud,
                       const char *last_sep) {
  int picked[STRATA_N_MODES], k = 0;
  for (int m = 0; m < STRATA_N_MODES; m++) {
    const strata__mode_ops *ops[2];
    ops_of((strata_mode)m, ops);
    if (pick((const strata__mode_ops *const *)ops, ud)) picked[k++] = m;
  }
  size_t used = 0;
  if (n) out[0] = '\0';
  for (int i = 0; i < k && used < n; i++)
    used += (size_t)snprintf(out + used, n - used, "%s%s",
                             i == 0       ? ""
                             : i == k - 1 ? last_sep
                                          : ", ",
                             strata_mode_name((strata_mode)picked[i]));
}

static int takes(const strata__mode_ops *const ops[2], void *ud) {
  unsigned flag = *(const unsigned *)ud;
  return (ops[0] && (ops[0]->takes & flag)) || (ops[1] && (ops[1]->takes & flag));
}

static int runs_rounds(const strata__mode_ops *const ops[2], void *ud) {
  (void)ud;
  return ops[0] && ops[0]->runs_rounds;
}

/* "--staleness applies to --mode bsp, absp, ssp, essp and sfb, not --mode
 * scheduled": a flag given to a mode no owner of which takes it. */
static int refuse_flag(const char *flag, unsigned what, strata_mode m) {
  char list[256];
  strata__mode_list(list, sizeof list, takes, &what, " and ");
  return strata_err_set(STRATA_EUSAGE, "--%s applies to --mode %s, not --mode %s", flag, list,
                        strata_mode_name(m));
}

int strata__mode_facts(strata_mode m, const strata_engine_opts *o, int P, strata__facts *f) {
  memset(f, 0, sizeof *f);
  if ((unsigned)m >= STRATA_N_MODES)
    return strata_err_set(STRATA_EINVAL, "unknown mode %d", (int)m);
  f->mode = m;
  ops_of(m, f->ops);
  const strata__mode_ops *b = f->ops[0], *r = f->ops[1];
  f->backend = backends[m];
  f->all_rotating = b->all_rotating;
  f->takes_factors = b->takes_factors;
  f->runs_rounds = b->runs_rounds;
  f->counts_clocks = b->counts_clocks;
  f->lag = 2;
  if (!o) return 0;
  if (r && r->control_lag)
    f->lag = r->control_lag(o);
  else if (b->control_lag)
    f->lag = b->control_lag(o);
  f->ckpt = b->ckpt_parts ? b->ckpt_parts(o, P) : 0;
  return 0;
}

const strata_option *strata_mode_options(strata_mode m) {
  const strata__mode_ops *ops[2];
  if ((unsigned)m >= STRATA_N_MODES) return NULL;
  ops_of(m, ops);
  if (ops[1] && ops[1]->options) return ops[1]->options;
  return ops[0]->options;
}

int strata_mode_set(strata_engine_opts *o, const char *name, const char *value) {
  const strata_option *opts = strata_mode_options(o->mode);
  int found = 0;
  for (const strata_option *r = opts; r && r->name && !found; r++) found = !strcmp(r->name, name);
  if (!found)
    return strata_err_set(STRATA_EUSAGE, "--mode %s has no option --%s", strata_mode_name(o->mode),
                          name);
  char flag[128];
  snprintf(flag, sizeof flag, "--%s", name);
  char *argv[] = {flag, (char *)value, NULL};
  strata_optgroup g = {"", opts, &o->mode_settings};
  int help = 0;
  return strata_options_parse(&g, 1, value ? 2 : 1, argv, &help);
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
static int round_check(const strata_engine_opts *o, const strata__mode_ops *b,
                       const strata_app *app, const strata_problem *p, const strata_schedule *s) {
  if (!app->round || !app->round->schedule_round || !app->round->push || !app->round->pull)
    return strata_err_set(STRATA_EINVAL,
                          "%s: load set rounds_per_pass, but the app has no round callbacks "
                          "(schedule_round, push, pull)",
                          app->name);
  if (!b->runs_rounds) {
    char list[128];
    strata__mode_list(list, sizeof list, runs_rounds, NULL, " and ");
    return strata_err_set(STRATA_EUSAGE,
                          "%s: this run schedules every round on the coordinator (strata/round.h), "
                          "which runs in --mode %s, not --mode %s",
                          app->name, list, strata_mode_name(o->mode));
  }
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
  strata__facts f;
  int rc = strata__mode_facts(o->mode, o, setup->workers, &f);
  if (rc) return rc;
  if (p && p->rounds_per_pass) return round_check(o, f.ops[0], app, p, s);
  rc = app->sf ? sf_check(app, setup, p) : 0;
  return rc ? rc : strata__facts_check(&f, o, app, setup, p, s);
}

void strata_engine_setup(const strata_app *app, const strata_engine_opts *o, int workers,
                         int worker, strata_setup *out) {
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
  const strata__mode_ops *ops[2];
  if ((unsigned)o->mode >= STRATA_N_MODES) return;
  ops_of(o->mode, ops);
  /* The back-end's rule, which the mode's table rule may change. */
  for (int i = 0; i < 2; i++)
    if (ops[i] && ops[i]->clock_rule) ops[i]->clock_rule(o, app, &out->staleness, &out->wpc);
}

int strata_engine_resolve(strata_engine_opts *o, int s_given, int wpc_given, int pf_given) {
  if ((unsigned)o->mode >= STRATA_N_MODES)
    return strata_err_set(STRATA_EUSAGE, "unknown mode %d", (int)o->mode);
  int rc = strata__live_check_address(o->watch_address);
  if (rc) return rc;
  const strata__mode_ops *ops[2];
  ops_of(o->mode, ops);
  unsigned t = ops[0]->takes | (ops[1] ? ops[1]->takes : 0);
  if (s_given && !(t & STRATA__TAKES_STALENESS))
    return refuse_flag("staleness", STRATA__TAKES_STALENESS, o->mode);
  if (wpc_given && !(t & STRATA__TAKES_WPC)) return refuse_flag("wpc", STRATA__TAKES_WPC, o->mode);
  if (pf_given && !(t & STRATA__TAKES_PREFETCH))
    return refuse_flag("prefetch", STRATA__TAKES_PREFETCH, o->mode);
  if (o->score_view && !(t & STRATA__TAKES_VIEW))
    return refuse_flag("score-view", STRATA__TAKES_VIEW, o->mode);
  if (s_given && o->staleness < 0)
    return strata_err_set(STRATA_EUSAGE, "--staleness must be >= 0, got %d", o->staleness);
  strata__given g = {s_given, wpc_given, pf_given};
  /* The back-end checks and fills what its modes share, then the rule
   * what its mode fixes (bsp: one clock a pass), over the back-end's. */
  for (int i = 0; i < 2 && !rc; i++)
    if (ops[i] && ops[i]->resolve) rc = ops[i]->resolve(o, &g);
  return rc;
}

/* ---- the run's figures, asked of the result's mode ---- */

static int facts_of_result(const strata_run_result *r, strata__facts *f) {
  return strata__mode_facts(r->mode, r->opts, r->workers, f);
}

void strata__mode_summary(FILE *out, const strata_run_result *r) {
  strata__facts f;
  if (!facts_of_result(r, &f)) strata__facts_summary(&f, out, r);
}

void strata__mode_release(strata_run_result *r) {
  strata__facts f;
  if (r->mode_data && !facts_of_result(r, &f))
    for (int i = 0; i < 2; i++)
      if (f.ops[i] && f.ops[i]->release) f.ops[i]->release(r->mode_data);
  r->mode_data = NULL;
}

int strata__mode_prepare(const strata_engine_opts *o, int P, strata_run_result *r) {
  strata__facts f;
  int rc = strata__mode_facts(o->mode, o, P, &f);
  for (int i = 0; i < 2 && !rc; i++)
    if (f.ops[i] && f.ops[i]->prepare) rc = f.ops[i]->prepare(o, P, &r->mode_data);
  return rc;
}

void strata__mode_echo(char *out, size_t n, const strata_engine_opts *o) {
  strata__facts f;
  if (n) out[0] = '\0';
  if (!strata__mode_facts(o->mode, o, 0, &f)) strata__facts_echo(&f, out, n, o);
}

const char *const *strata__mode_keys(strata_mode m, int i, int per_pass) {
  const strata__mode_ops *ops[2];
  if ((unsigned)m >= STRATA_N_MODES || i < 0 || i > 1) return NULL;
  ops_of(m, ops);
  if (!ops[i]) return NULL;
  return per_pass ? ops[i]->pass_keys : ops[i]->keys;
}
