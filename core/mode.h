/*
 * What a mode answers (internal to libstrata): everything the engine, the
 * coordinator, the CLI, the metrics and the checkpoints ask of the run's
 * mode, in one place for each mode.
 *
 * A back-end (worker/backend.h) answers for the modes it runs, and a table
 * rule (comm/rule.h) for its own mode what is its own: its settings and
 * their checks, its clock rule, its memory, its figures. engine/modes.c
 * puts the two together into one strata__facts for a run (the engine asks
 * once), and the calls below ask both, the back-end first. The coordinator
 * (scheduler/) gets the facts as values and these calls, which reach the
 * back-end and the rule only through their function pointers.
 */
#ifndef STRATA_CORE_MODE_H
#define STRATA_CORE_MODE_H

#include <stdio.h>
#include <string.h>

#include "strata/app.h"
#include "strata/engine.h"
#include "strata/json.h"

/* The engine's options a mode may take (strata__mode_ops.takes); a flag
 * given to a mode that takes it nowhere is refused by the engine, naming
 * the modes that do. */
#define STRATA__TAKES_STALENESS 1u /* --staleness */
#define STRATA__TAKES_WPC 2u       /* --wpc */
#define STRATA__TAKES_PREFETCH 4u  /* --prefetch */
#define STRATA__TAKES_VIEW 8u      /* --score-view */

/* Which of those the command line gave (strata_engine_resolve). */
typedef struct strata__given {
  int staleness, wpc, prefetch;
} strata__given;

/* Where a checkpoint's parts keep the parameter blocks
 * (strata__mode_ops.ckpt_parts). */
#define STRATA__CKP_ROTATING 1u /* each rotating block once, from one worker */
#define STRATA__CKP_REPLICAS 2u /* each worker its own copy of every rotating block */
#define STRATA__CKP_TABLE 4u    /* each worker its shard of the table's rows */
#define STRATA__CKP_GLOBAL 8u   /* each worker its own copy of the global block */

/* What one worker holds of the problem, in bytes, for the memory estimate
 * (scheduler/memory.h). */
typedef struct strata__mem_view {
  const strata_engine_opts *opts;
  int P;
  double resident; /* the resident blocks it owns */
  double rot_held; /* the rotating blocks it computes on */
  double rot_all;  /* every rotating block */
  double global;   /* the global block */
  int eval;        /* it scores eval blocks (app->evaluate) */
} strata__mem_view;

typedef struct strata__mode_ops {
  const char *name; /* "ring", "table", "sfb"; a rule's: its mode's name */

  /* ---- settings ---- */
  /* The owner's own options (NULL-terminated, or NULL), their fields in
   * strata_engine_opts.mode_settings, all zero their defaults. */
  const strata_option *options;
  unsigned takes; /* STRATA__TAKES_* */
  /* Checks the settings and fills the mode's defaults (the engine has
   * refused the flags no owner of the mode takes). The back-end's runs
   * first, then the rule's, which may replace what the back-end filled.
   * NULL: nothing to check. */
  int (*resolve)(strata_engine_opts *o, const strata__given *g);
  /* The clock rule the app is told (strata_setup.staleness, .wpc) for
   * resolved options o; the rule's replaces the back-end's. */
  void (*clock_rule)(const strata_engine_opts *o, const strata_app *app, int *staleness,
                     double *wpc);
  /* The verdict lag L (strata/app.h, pass_control); the rule's replaces
   * the back-end's; NULL: 2. */
  int (*control_lag)(const strata_engine_opts *o);
  /* Refuses a problem the mode cannot run: before loading (p and s NULL)
   * and after scheduling; NULL: any. */
  int (*check)(const strata_engine_opts *o, const strata_app *app, const strata_setup *setup,
               const strata_problem *p, const strata_schedule *s);

  /* ---- where the parameters live (a back-end's) ---- */
  int all_rotating;  /* every worker gets every rotating block at set-up */
  int takes_factors; /* it applies a sufficient-factor app's factors itself */
  int runs_rounds;   /* a round run (strata/round.h) runs in its modes */
  int counts_clocks; /* it reports the clocks its workers end */
  /* What a checkpoint's parts hold (STRATA__CKP_*). */
  unsigned (*ckpt_parts)(const strata_engine_opts *o, int P);
  /* Bytes a worker holds for the parameters at its peak (the engine's
   * copies included); a rule's adds its own to the back-end's. */
  double (*memory)(const strata__mem_view *v);

  /* ---- the run's figures ---- */
  /* Before any work, on rank 0: the facts of the run the back-end makes
   * (sfb: its topology, also logged), into *data (NULL: none); a refusal
   * ends the run there. release frees *data. */
  int (*prepare)(const strata_engine_opts *o, int P, void **data);
  void (*release)(void *data);
  /* Its part of strata_worker_stats.mode_stats (`in`'s into `total`, a
   * worker's passes summed) and of strata_pass_stats.mode_stats (a
   * worker's report into the pass's). NULL: nothing to add. */
  void (*stats_add)(unsigned char *total, const unsigned char *in);
  void (*pass_add)(unsigned char *pass, const unsigned char *in);
  /* Its keys in the metrics JSON: at the top level, in each per_pass
   * entry (NULL-terminated, or NULL); an app's names must avoid them. */
  const char *const *keys, *const *pass_keys;
  /* Its members of the metrics JSON: at the top level, in per_pass entry
   * `pass`, in a worker's object (its stats s); slot: its index in
   * mode_stats. */
  void (*metrics)(strata_json *j, const strata_run_result *r, int slot);
  void (*metrics_pass)(strata_json *j, const strata_run_result *r, int pass, int slot);
  void (*metrics_worker)(strata_json *j, const strata_worker_stats *s, int slot);
  /* Its words of the configuration echo ("staleness 1"), appended to out. */
  void (*echo)(char *out, size_t n, const strata_engine_opts *o);
  /* Its line of the summary the CLI prints (after the workers'). */
  void (*summary)(FILE *f, const strata_run_result *r, int slot);
  /* Its families of the live status's Prometheus text (core/prom.h), from
   * the first `done` passes. */
  void (*status)(FILE *f, const strata_run_result *r, int done, int slot);
} strata__mode_ops;

/* A run's mode: its back-end's and its rule's answers, and the values the
 * engine resolved from them for the run's options. */
typedef struct strata__facts {
  strata_mode mode;
  const strata__mode_ops *ops[2]; /* the back-end's, then the rule's (or NULL) */
  const void *backend;            /* the worker's back-end (worker/backend.h) */
  int all_rotating, takes_factors, runs_rounds, counts_clocks;
  int lag;       /* the verdict lag */
  unsigned ckpt; /* STRATA__CKP_* */
} strata__facts;

/* The calls below ask the back-end, then the rule. */
int strata__facts_check(const strata__facts *f, const strata_engine_opts *o, const strata_app *app,
                        const strata_setup *setup, const strata_problem *p,
                        const strata_schedule *s);
double strata__facts_memory(const strata__facts *f, const strata__mem_view *v);
void strata__facts_stats_add(const strata__facts *f, strata_worker_stats *total,
                             const strata_worker_stats *in);
void strata__facts_pass_add(const strata__facts *f, strata_pass_stats *pass,
                            const strata_worker_stats *in);
void strata__facts_metrics(const strata__facts *f, strata_json *j, const strata_run_result *r);
void strata__facts_metrics_pass(const strata__facts *f, strata_json *j, const strata_run_result *r,
                                int pass);
void strata__facts_metrics_worker(const strata__facts *f, strata_json *j,
                                  const strata_worker_stats *s);
/* "staleness 1, work per clock 1 pass, prefetch aggressive"; "" for none. */
void strata__facts_echo(const strata__facts *f, char *out, size_t n, const strata_engine_opts *o);
void strata__facts_summary(const strata__facts *f, FILE *out, const strata_run_result *r);
void strata__facts_status(const strata__facts *f, FILE *out, const strata_run_result *r, int done);

/* A mode's stats are bytes in a layout of its own: these copy them out
 * and back, so that no code reads them through another type. */
#define STRATA__MODE_STATS_GET(type, var, bytes) \
  type var;                                      \
  memcpy(&var, (bytes), sizeof var)
#define STRATA__MODE_STATS_PUT(bytes, var) memcpy((bytes), &(var), sizeof(var))

#endif
