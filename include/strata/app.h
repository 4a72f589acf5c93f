/*
 * strata/app.h - what an app provides to the engine.
 *
 * An app is a struct of callbacks. It never calls MPI: the engine loads the
 * problem once on the coordinator (rank 0) through `load`, asks `schedule`
 * for the static schedule of strata, ships each worker its blocks, then on
 * every worker runs `compute` for each task of each sub-epoch, one pipeline
 * chunk at a time, while the rotating parameter blocks travel between
 * workers. The app sees blocks as plain memory it laid out itself.
 *
 * Blocks:
 *  - data blocks: read-only examples (ratings, tokens), one per task;
 *  - resident parameter blocks: stay on the worker that uses them (W, users);
 *  - rotating parameter blocks: nrows rows of row_bytes bytes each, moved
 *    between workers (H, items). The engine cuts each into `depth` chunks of
 *    rows (strata_chunk_rows) and sends chunk c as soon as compute has
 *    finished it, so the app must lay out each data block so that the
 *    examples touching chunk c can be processed on their own;
 *  - eval blocks (optional): held-out examples that ride with data block d
 *    and are scored against the whole model at the end of a pass;
 *  - a global block (optional): float rows every worker holds a copy of and
 *    every compute may add to (LDA's topic totals). The engine merges the
 *    workers' changes by adding deltas: on the ring after every sub-epoch,
 *    each worker sending its change to all others and adding theirs one
 *    sub-epoch later (so a copy misses at most the other workers' last two
 *    sub-epochs), and completely at the end of every pass; in
 *    parameter-server modes as rows of the table, under its staleness rule.
 * The engine copies bytes verbatim; parameter blocks must not hold pointers.
 *
 * The contract: where each callback runs, what it returns, what it owns.
 *
 *   Ranks. A run over MPI has a coordinator (rank 0) and P workers (ranks
 *   1..P); serial mode runs both sides in one process. Every callback runs
 *   on the thread that called strata_engine_run (strata_main's), never on
 *   a thread of the engine's own, so a callback needs no locks; in serial
 *   mode the coordinator's and the worker's callbacks take turns on it.
 *     every rank, before the run  check (strata_main calls it with the
 *                                 set-up of that rank: worker -1 on rank 0)
 *     coordinator                 load, schedule, objectives, pass_control,
 *                                 describe (also when the metrics are
 *                                 written, after the run), export_model;
 *                                 a round app's schedule_round and pull
 *                                 (strata/round.h)
 *     each worker                 worker_init, compute, evaluate,
 *                                 block_objective, worker_free; a
 *                                 sufficient-factor app's apply and
 *                                 clock_end (strata/sf.h); a round app's
 *                                 push and apply
 *   Returns. A callback that returns int returns 0, or a negative STRATA_E*
 *   code with a message set through strata_err_set (strata/error.h), which
 *   names the input or the flag at fault. A failure on any rank ends the
 *   run on every rank, and rank 0 prints that message once ("worker 2:
 *   ..."); STRATA_EUSAGE (check) exits with 2, STRATA_EDIVERGED (an
 *   export refusing a non-finite model) with 3, every other code with 1.
 *   The void callbacks (objectives, describe, pass_control, worker_free,
 *   an sf apply) cannot fail.
 *   Ownership.
 *     cfg      the program's config struct (options, config_size bytes),
 *              the same on every rank; callbacks only read it; it lives
 *              for the whole run.
 *     state    made by worker_init, the app's own (the engine only hands
 *              it back); valid until worker_free, which the engine calls
 *              once, at the end or after a failure, whenever worker_init
 *              left *state non-NULL (also when it failed).
 *     meta     prob->meta as load made it; on a worker, the engine's
 *              bytes, valid only during worker_init: copy what the state
 *              keeps.
 *     prob     load fills it with buffers from strata_malloc or
 *              strata_alloc_aligned, and the engine owns them once load
 *              returns, also when it fails (strata_problem_close frees
 *              what is there). Data and parameter blocks go to the
 *              workers: on the coordinator they are valid in load and
 *              schedule, and the parameter blocks again in export_model
 *              (the final model); objectives, pass_control, describe,
 *              schedule_round and pull see only the coordinator's side
 *              (meta, priv, coord, n_examples, rounds_per_pass).
 *     prob->priv   load's coordinator-only state, the app's to change;
 *              freed by priv_free (strata_problem_close) when the run's
 *              result is closed, after the summary and the metrics, so a
 *              summary (strata/main.h) may read it as r->problem.priv.
 *     prob->coord  a round app's coordinator block: bytes schedule_round
 *              and pull own and change, kept by checkpoints.
 *     prob->value_len  in the parameter-server modes: the first value_len
 *              floats of every rotating and global row are model values,
 *              the rest optimiser state (0 = all); load sets it, and the
 *              table's rule bounds values in transit over those floats
 *              only (strata/problem.h).
 *     task view    tv and the blocks it points to are the engine's,
 *              valid during the call: data is read-only; compute may
 *              change its resident block, rows [row_lo, row_hi) of its
 *              rotating block and the global block; evaluate and
 *              block_objective only read.
 *     partials     the engine's array of n_partials, valid during the
 *              call; the callback combines its values into it.
 *     schedule     schedule fills the engine's struct (strata/schedule.h);
 *              the engine frees it.
 */
#ifndef STRATA_APP_H
#define STRATA_APP_H

#include <stddef.h>
#include <stdint.h>

#include "strata/error.h"
#include "strata/json.h"
#include "strata/modes.h"
#include "strata/options.h"
#include "strata/problem.h"
#include "strata/schedule.h"

#define STRATA_MAX_PARTIALS 16
#define STRATA_MAX_OBJECTIVES 8
#define STRATA_MAX_CONTROLS 4
/* The rise check of objectives that must fall (strata_app.falling): the
 * run diverged once such an objective has stayed above STRATA_RISE_LIMIT
 * times (or the app's rise_limit) its lowest value for STRATA_RISE_PASSES
 * passes in a row. */
#define STRATA_RISE_LIMIT 10.0
#define STRATA_RISE_PASSES 3

/* A clock's set of sufficient factors, filled by compute through
 * strata_sf_emit (strata/sf.h). */
typedef struct strata_sf_factors strata_sf_factors;
struct strata_sf_ops;

/*
 * Numbering. Passes, sub-epochs, chunks and clocks are 0-based everywhere
 * in the C API (tv->pass, block_objective's pass, strata_pass_stats.pass,
 * strata_sf_clock.pass) and in the metrics JSON; only lines for people
 * (the progress line "pass 3/20") count from 1.
 *
 * Clocks. Every mode counts clocks from the start of the run and tells
 * compute the clock of each chunk (strata_task_view.clock); the staleness
 * rule of the mode is stated in clocks (strata_setup.staleness).
 *   scheduled, serial: a clock is a pass (clock = pass). A worker holds a
 *     rotating block alone while it computes on it: staleness 0.
 *   the parameter-server modes (strata_mode_is_ps: bsp, absp, ssp, essp,
 *     async, ...): the worker's clock of the table, the clock its reads of
 *     the chunk's rows are checked against (a read at clock c sees every
 *     update of clocks <= c - s - 1).
 *     With wpc = 1/K a pass has K clocks: the i-th chunk of pass p (counting
 *     the chunks of this worker's tasks in the order compute sees them,
 *     empty ones included; n of them per pass) runs at clock
 *     p K + floor(i K / n). With wpc = 1 (always in bsp) the clock is the
 *     pass; with a whole wpc = W a clock spans W passes: floor(p / W).
 *     Staleness 0 in bsp and absp, s (--staleness, default 1) in ssp and
 *     essp, unbounded (-1) under a rule that bounds no clock (async).
 *   sfb, and a sufficient-factor app (strata/sf.h) in every mode: a clock
 *     is one task (a minibatch): the t-th of a pass's T tasks runs at clock
 *     p T + t (wpc 0). Staleness in sfb: --staleness (default 0); in the
 *     other modes as above.
 * Evaluate runs after the pass on the pass's model; its view's clock is -1.
 */
typedef struct strata_setup {
  int workers;     /* P */
  int strata;      /* B: strata requested (apps block their data B x B) */
  int depth;       /* pipeline chunks per rotating block */
  int passes;
  uint64_t seed;
  int worker;      /* this worker's index 0..P-1; -1 on the coordinator */
  strata_mode mode; /* how parameters move (names: strata_mode_name) */
  const char *model_out;  /* --model-out directory or NULL */
  int staleness;          /* how many clocks old a read may be (see Clocks above): 0 in
                             scheduled, serial, bsp and absp; --staleness in ssp, essp
                             and sfb; -1 where the mode's rule bounds no clock (async) */
  double wpc;             /* work per clock in passes: 1 in scheduled, serial and bsp;
                             --wpc in the other table modes (1/K: K clocks a pass,
                             or a whole number W: a clock spans W passes); 0 for a
                             sufficient-factor app, whose clock is a minibatch (so
                             always 0 in sfb) */
  double tol;      /* --tol: the run may stop once the app's convergence measure
                      (strata_app.tol, or a round app's own in schedule_round) is at
                      most this; 0: it runs every pass */
} strata_setup;

/* One task as compute sees it. Rows of `rotating` outside [row_lo, row_hi)
 * may be in flight and must not be touched (in serial mode nothing travels:
 * every row is there, as the chunks before this one left it). Given the schedule, every mode
 * calls compute on a worker for the same task views in the same order: each
 * pass, each sub-epoch, the worker's tasks in schedule order, and for each
 * chunk 0..depth-1, empty chunks (row_lo == row_hi) included; what differs
 * is `clock` and what the blocks hold. */
typedef struct strata_task_view {
  int pass, subepoch; /* 0-based */
  strata_task ids;
  const strata_block *data;
  strata_block *resident;
  strata_block *rotating;
  strata_block *global; /* NULL when the problem has none */
  int chunk;            /* 0..depth-1; -1 in evaluate */
  uint32_t row_lo, row_hi;
  int64_t clock;        /* the clock the chunk's reads are made at (Clocks above);
                           -1 in evaluate */
  /* The pass's control values (app->pass_control; n_controls of them), the
   * same on every worker; NULL when the app has none. */
  const double *control;
  /* Sufficient-factor apps (app->sf), compute: where the clock's factors go
   * (strata_sf_emit); NULL for other apps and in evaluate. */
  strata_sf_factors *factors;
  /* evaluate: the task's training data block (data is its eval block), so
   * an app can score its training examples on the pass's model; NULL in
   * compute. */
  const strata_block *train;
} strata_task_view;

/* Which parameter block block_objective is given. */
typedef enum strata_block_kind {
  STRATA_BLOCK_RESIDENT,
  STRATA_BLOCK_ROTATING,
  STRATA_BLOCK_GLOBAL
} strata_block_kind;

/* How the values of one partial combine (strata_app.partial_reduce), and
 * the identity each starts every pass at: SUM 0, MAX -INFINITY, MIN
 * +INFINITY. */
typedef enum strata_reduce {
  STRATA_REDUCE_SUM,
  STRATA_REDUCE_MAX,
  STRATA_REDUCE_MIN
} strata_reduce;

/* strata_app.flags */
/* Rotating rows are float vectors that merge by adding deltas, so the app
 * can run against parameter-server tables (--mode bsp|absp|ssp|essp|async):
 * every rotating block then needs the same row_bytes, a multiple of 4. */
#define STRATA_APP_ADDITIVE 1u

/* How the engine tells from a pass's objectives that a run has converged
 * (--tol X): after pass k is summed, the measure is objective `objective`'s
 * value (STRATA_TOL_VALUE: a duality gap, an L1 change), or its relative
 * change over the pass, |f_k - f_{k-1}| / |f_k| (STRATA_TOL_REL_CHANGE: a
 * training loss); once it is at most X, the run stops at the next verdict
 * (strata_app.pass_control says when that is) with stop_reason
 * "tolerance". `help` says what the measure is, for --help. */
typedef enum strata_tol_kind { STRATA_TOL_NONE, STRATA_TOL_VALUE, STRATA_TOL_REL_CHANGE } strata_tol_kind;
typedef struct strata_tol {
  strata_tol_kind kind;
  int objective;    /* index into objective_names */
  const char *help; /* "the duality gap relative to the objective" */
} strata_tol;

/* Defaults of engine options that an app wants different from the
 * engine's; a zero or NULL field keeps the engine's default. The program
 * builds its engine option table from them, so --help, parsing and the echo
 * show the app's values. The values pass the options' own bounds checks. */
typedef struct strata_app_defaults {
  strata_mode mode;           /* --mode; 0: scheduled (an SF app may want sfb) */
  int passes;                 /* --passes; 0: 20 */
  int depth;                  /* --depth; 0: 8 */
  double wpc;                 /* --wpc where the mode takes one (absp, ssp, essp, async);
                                 0: 1 */
  const char *model_out_flag; /* name of the option filling setup.model_out (export_model's
                                 directory); NULL: "model-out" */
  const char *model_out_help; /* its help line; NULL: "export the final model into this
                                 directory" */
} strata_app_defaults;

typedef struct strata_app {
  const char *name;     /* subcommand, e.g. "mf" */
  unsigned flags;       /* STRATA_APP_* */
  const char *summary;  /* one line for `strata --help` */
  const char *examples; /* shown at the end of `strata NAME --help` */
  const char *unit;     /* what one example is, plural ("ratings", "tokens"): the
                           summary prints M UNIT/s and the metrics add UNIT_per_s
                           beside updates_per_s; NULL: "updates" */

  /* Options: a table filling a config struct of config_size bytes. Every
   * rank parses the same argv, so every rank holds the same config. */
  const strata_option *options;
  size_t config_size;
  /* Optional cross-option checks after parsing; STRATA_EUSAGE + message. */
  int (*check)(const void *cfg, const strata_setup *setup);
  /* The engine options' defaults for this app (all zero: the engine's). */
  strata_app_defaults defaults;

  /* Partials: n_partials numbers per worker per pass that the engine
   * combines over the workers each pass, and the objective values
   * `objectives` derives from them (names like "train_rmse").
   *
   * partial_reduce[i] says how partial i combines: summed (a squared error,
   * a count), or the largest or smallest value (a worst lag, a largest
   * error), with n_partials entries; NULL: every partial is summed. At the
   * start of every pass, on every worker, the engine sets each partial to
   * its identity (0, -INFINITY, +INFINITY: strata_partials_init) before
   * compute, evaluate and block_objective see the array; those callbacks
   * combine their own values into it, a sum by partials[i] += v, a maximum
   * by partials[i] = fmax(partials[i], v) and a minimum by fmin (which drop
   * a NaN v; strata_reduce_apply keeps it). The engine then combines the
   * workers' arrays with the same operations (strata_partials_combine), in
   * every mode. A MAX or MIN partial nobody touched in a pass stays at its
   * identity, an infinity that objectives must expect. */
  int n_partials;
  const strata_reduce *partial_reduce;
  int n_objectives;
  const char *const *objective_names;
  /* Objectives that must fall as the run goes on (a training loss, an
   * error): bit i (1u << i) for objective i; 0: none. A run can diverge
   * without a NaN, its loss climbing for hundreds of passes while every
   * number stays finite, so besides the non-finite check (objectives,
   * below) the engine ends the run as diverged, the same way, when such an
   * objective, while positive, has been above rise_limit times its lowest
   * value of the earlier passes for STRATA_RISE_PASSES passes in a row, or
   * is above it after the run's last pass ("the run diverged at pass 40:
   * objective rose from 0.1466 (pass 18) to 1.52"). Passes in which the
   * objective is NaN (not scored) are left out. Declare only objectives
   * that no ordinary run raises that far: a factor of 10 leaves room for
   * the jitter of stale reads and the first passes of SGD, not for a
   * held-out error that overfitting may raise. */
  unsigned falling;
  /* The factor of that check, above 1; 0: STRATA_RISE_LIMIT. */
  double rise_limit;

  /* Coordinator: read and partition the data, initialise parameters. */
  int (*load)(const void *cfg, const strata_setup *setup, strata_problem *prob);
  /* Coordinator: the static schedule over the problem's blocks. Must return
   * a finished schedule for setup->workers workers. */
  int (*schedule)(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                  strata_schedule *sched);

  /* Worker: per-worker state from the meta bytes, which are the engine's
   * and valid only during the call (copy what the state keeps). A checkpoint
   * (--checkpoint) keeps the parameter blocks, not this state, and a
   * resumed run calls worker_init afresh: what changes from pass to pass
   * (an optimiser's moments, a random stream's position) belongs in the
   * blocks, or is derived from the pass (tv->pass) and the seed. */
  int (*worker_init)(const void *cfg, const strata_setup *setup, const void *meta,
                     size_t meta_len, void **state);
  void (*worker_free)(void *state);
  /* Worker: process the part of tv->data touching rows [row_lo, row_hi) of
   * the rotating block, combining its values into partials[0..n_partials)
   * (partial_reduce). */
  int (*compute)(void *state, const strata_task_view *tv, double *partials);
  /* Worker, optional: score eval block tv->data against the final state of
   * the pass (resident and rotating blocks of its task, whole). */
  int (*evaluate)(void *state, const strata_task_view *tv, double *partials);

  /* Worker, optional: adds objective partials of one parameter block at the
   * end of every pass (0-based `pass`; e.g. a likelihood term per block). Across workers,
   * every resident and rotating block and the global block is passed
   * exactly once per pass: on the ring a rotating block by the worker that
   * computed it last, in parameter-server modes by worker r mod P reading
   * it under the mode's rule, the global block on worker 0. */
  int (*block_objective)(void *state, int pass, strata_block_kind kind, int id,
                         const strata_block *b, double *partials);

  /* Coordinator: objective values from the partials combined over workers.
   * A value may be NaN where it is not defined (no test set). prob is the
   * coordinator's side of the loaded problem, the same in every mode: meta,
   * priv, a round app's coordinator block, n_examples and rounds_per_pass;
   * its data and parameter blocks are NULL (they are the workers', in
   * serial mode too). After every
   * pass the engine checks the combined partials: one that is NaN, or
   * infinite other than a MAX or MIN partial still at its identity, ends
   * the run as diverged (STRATA_EDIVERGED, exit code 3 from the CLI) on
   * every rank, naming the pass and the objectives it makes non-finite, and
   * nothing is exported; so does an objective of `falling` that has risen
   * past its limit. */
  void (*objectives)(const void *cfg, const strata_problem *prob, const double *partials,
                     double *values);
  /* Optional: the convergence measure --tol compares (kind NONE: the app
   * has none, and --tol is refused unless it is a round app, which stops
   * itself from schedule_round). */
  strata_tol tol;
  /* Optional: what the diverged message suggests ("try a smaller --lr"),
   * after either check. */
  const char *diverged_hint;
  /* Optional: what a run too large for its hosts' memory should change
   * ("lower --rank"), in the message that refuses it before set-up. */
  const char *memory_hint;

  /* Optional per-pass control values (a step size, say) derived from the
   * objectives of earlier passes, identical on every worker and in every
   * mode. pass_control runs on the coordinator and fills ctl[0..n_controls)
   * for pass `pass` (0-based) from the coordinator's side of the loaded
   * problem (prob, as objectives sees it: what load kept in prob->priv,
   * such as a scale derived from the data, and a round app's coordinator
   * block; never the parameter blocks, in any mode), the objectives of
   * passes 0..known-1 (objectives[q * STRATA_MAX_OBJECTIVES + i]) and the
   * previous pass's values (prev; NULL for pass 0). The engine decides pass
   * k's values once pass k - L is summed (known = k - L + 1; 0 for k < L),
   * L passes late so that workers never wait for them in the normal
   * course (a worker starting pass k waits only until pass k - L is
   * summed). The lag L by mode:
   *   round runs (strata/round.h)     1: the coordinator sums every pass
   *                                   before the next one's first round,
   *                                   so pass k sees passes 0..k-1
   *   scheduled, serial                2: the ring runs on into pass k
   *                                   while pass k - 1 is summed (serial
   *                                   keeps the same lag, so that it
   *                                   computes what the ring computes)
   *   ssp, essp with staleness s       2 plus the passes s clocks span
   *   the other table modes            2
   *   sfb with staleness s             2 + s
   * compute reads them as tv->control; the metrics record them per pass
   * under control_names. */
  int n_controls;
  const char *const *control_names;
  void (*pass_control)(const void *cfg, const strata_problem *prob, int pass,
                       const double *objectives, int known, const double *prev, double *ctl);
  /* Coordinator, optional: app fields for the metrics summary (--metrics-out),
   * e.g. "rank", "ratings". */
  void (*describe)(const void *cfg, const strata_problem *prob, strata_json *j);
  /* Sufficient-factor apps (strata/sf.h): how a factor is applied and the
   * step after each clock; NULL for every other app. An app that sets it
   * runs in sfb, serial and the parameter-server modes (not scheduled with
   * more than one worker: every worker updates the same matrix). */
  const struct strata_sf_ops *sf;
  /* Round apps (strata/round.h): the coordinator schedules every round from
   * its state (schedule_round, pull) and the workers compute on their shards
   * (push, apply). A run is a round run when this is set and load sets
   * prob->rounds_per_pass (so one app may run either way, by an option);
   * then compute and the rotating blocks are not used, and only serial and
   * scheduled modes run it. NULL for every other app. */
  const struct strata_round_ops *round;
  /* Coordinator, optional: write the final model (blocks hold final values).
   * An app whose parameters can turn non-finite without its objectives
   * showing it checks them here and refuses with STRATA_EDIVERGED. */
  int (*export_model)(const void *cfg, const strata_setup *setup, const strata_problem *prob,
                      const char *dir);
} strata_app;


/* The identity of op: 0 (SUM), -INFINITY (MAX), +INFINITY (MIN). */
STRATA_EXPORT double strata_reduce_identity(strata_reduce op);
/* a and b combined under op: a + b, or the larger or smaller of the two,
 * NaN when either is NaN (unlike fmax and fmin). */
STRATA_EXPORT double strata_reduce_apply(strata_reduce op, double a, double b);
/* Sets partials[0..app->n_partials) to the identities of their reductions,
 * as the engine does at the start of every pass; for testing an app's
 * callbacks outside the engine. */
STRATA_EXPORT void strata_partials_init(const strata_app *app, double *partials);
/* acc[i] = strata_reduce_apply(op_i, acc[i], in[i]) for every partial:
 * how the engine combines two workers' partials. */
STRATA_EXPORT void strata_partials_combine(const strata_app *app, double *acc, const double *in);
/* Whether value v of partial i is a sign of divergence: NaN, or an
 * infinity other than the identity of the partial's reduction. */
STRATA_EXPORT int strata_partial_is_bad(const strata_app *app, int i, double v);

#endif
