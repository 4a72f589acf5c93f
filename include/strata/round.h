/*
 * strata/round.h - rounds: a coordinator that schedules every round from the
 * model (STRADS's schedule, push, pull).
 *
 * A static schedule (strata/schedule.h) is fixed for the whole run. A round
 * app instead lets the coordinator look at the model before every round and
 * pick that round's work:
 *
 *   coordinator  schedule_round  reads its state (prob->coord, prob->priv)
 *                                and picks each worker's work: variable ids
 *                                and a payload, possibly none for a worker;
 *                                or says the run has converged
 *   each worker  push            for each of its tasks (one data block, its
 *                                resident block), computes that shard's
 *                                partial result for the worker's work
 *   coordinator  pull            takes the partials of every data block,
 *                                updates its state and names the values
 *                                every worker applies
 *   each worker  apply           applies them to each of its tasks' blocks
 *
 * Pipelining. Up to `depth` rounds are in flight (--round-depth d, default 1):
 * round t is scheduled from the state after pull(t - d) and pushed on worker
 * blocks after apply(t - d). With d = 1 every round sees every earlier one
 * (exact); with d > 1 the coordinator schedules round t while rounds
 * t - d + 1 .. t - 1 are still out, so its round trip hides behind the
 * workers' compute, at a bounded lag of d - 1 rounds (STRADS pipelines its
 * scheduler so).
 *
 * Determinism. The engine calls the callbacks in one order whatever the
 * timing: pull(t - d), schedule_round(t), and on each worker apply(t - d)
 * then push(t), for t = 0, 1, ...; pull sees the partials indexed by data
 * block, never by worker or arrival. So when an app's work and results do
 * not depend on which worker holds a block (the same work for every worker,
 * say), a run gives the same results bit for bit with any number of
 * workers and in serial mode, at every depth.
 *
 * Passes. A pass is prob->rounds_per_pass rounds (set by load; the app says
 * how many rounds process its data once, for the time per data pass). At a
 * pass's end the rounds in flight drain (their pulls and applies run), then
 * every worker scores its blocks (the app's block_objective on its resident
 * blocks and evaluate on its eval blocks, as in every mode) and reports;
 * the coordinator sums the pass (objectives, divergence, --tol,
 * pass_control, checkpoints, progress) before the next pass's first round,
 * so pass_control for pass k sees the objectives of passes 0..k-1.
 *
 * Where each callback runs. schedule_round and pull run on the coordinator
 * (rank 0; in serial mode, the one process), on the thread that called
 * strata_engine_run, with the loaded problem: its coordinator block
 * (prob->coord, bytes the callbacks own and change: the model, priorities)
 * and prob->priv (load's own state, rebuilt by load on a resume). The
 * problem's data and parameter blocks are not theirs to read: in a run over
 * MPI they went to the workers. push and apply run on the worker holding
 * the task, with its state (worker_init) and the task's blocks, on the
 * thread that called strata_engine_run. Every callback returns 0 or a
 * negative STRATA_E* code with a message (strata_err_set), which ends the
 * run on every rank as any callback failure does.
 *
 * Checkpoints keep prob->coord and every resident block at a pass's end
 * (after the drain), so a round app keeps in them whatever a resumed run
 * needs; random choices are derived from (seed, round index).
 *
 * Modes: serial and scheduled (the coordinator and its workers). A round
 * run refuses the parameter-server modes and sfb at start.
 */
#ifndef STRATA_ROUND_H
#define STRATA_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "strata/error.h"
#include "strata/problem.h"

struct strata_task_view;

/* One round, as every round callback sees it. */
typedef struct strata_round {
  int64_t index; /* 0-based over the run (a resumed run goes on counting) */
  int pass;      /* the pass it belongs to, 0-based */
  int in_pass;   /* its place in the pass, 0 .. rounds_per_pass - 1 */
  int depth;     /* rounds in flight (--round-depth) */
  int workers;   /* P */
} strata_round;

/* A byte buffer a callback fills (push's partial, pull's values to apply).
 * The engine owns the memory; the callback appends with strata_bytes_add
 * or strata_bytes_put. len is 0 on entry. */
typedef struct strata_bytes {
  void *buf;
  size_t len, cap;
} strata_bytes;

/* Room for n more bytes at the end of b (b->len grows by n): a pointer to
 * them (not initialised), or NULL with STRATA_ENOMEM set when the memory
 * runs out. The pointer is valid until the next call on b. */
STRATA_EXPORT void *strata_bytes_add(strata_bytes *b, size_t n);
/* Appends n bytes from src. 0 or STRATA_ENOMEM. */
STRATA_EXPORT int strata_bytes_put(strata_bytes *b, const void *src, size_t n);

/* One worker's work in one round. */
typedef struct strata_round_work {
  uint32_t n_ids;
  const uint32_t *ids; /* variable ids, as schedule_round gave them */
  const void *payload; /* any bytes schedule_round added (NULL when none) */
  size_t payload_len;
} strata_round_work;

/* The work of every worker in one round: what schedule_round fills, what
 * pull is shown again. Opaque; the engine clears it before each round. */
typedef struct strata_round_plan strata_round_plan;

/* Gives worker w (0..P-1; -1: every worker) the variable ids ids[0..n) and
 * the payload bytes (may be NULL with len 0), replacing what it had this
 * round. A worker given nothing has no work: push is not called on its
 * tasks, and its blocks' partials are empty. 0, STRATA_EINVAL (w out of
 * range) or STRATA_ENOMEM. */
STRATA_EXPORT int strata_round_assign(strata_round_plan *plan, int w, const uint32_t *ids,
                                      uint32_t n, const void *payload, size_t len);
/* Worker w's work in the plan (all zero when none). */
STRATA_EXPORT strata_round_work strata_round_work_of(const strata_round_plan *plan, int w);

/* A data block's partial result of one round, as pull sees it. */
typedef struct strata_round_part {
  int worker;      /* the worker that computed it (holds the block) */
  const void *buf; /* push's bytes; NULL when the worker had no work */
  size_t len;
} strata_round_part;

/* schedule_round's answer that the run has converged: no more rounds. */
#define STRATA_ROUND_CONVERGED 1

typedef struct strata_round_ops {
  /* Coordinator: picks round r's work into plan (strata_round_assign), from
   * prob->coord, prob->priv and the round. Returns 0, STRATA_ROUND_CONVERGED
   * to end the run (the rounds in flight drain and the pass is summed, with
   * stop_reason "tolerance"), or a negative code. */
  int (*schedule_round)(const void *cfg, strata_problem *prob, const strata_round *r,
                        strata_round_plan *plan);
  /* Worker: the partial result of task tv (its data block tv->data, its
   * resident block tv->resident; no rotating block) for this worker's work,
   * appended to out. tv->pass is the round's pass, tv->chunk and
   * tv->clock are -1. Not called when the worker has no work. */
  int (*push)(void *state, const strata_round *r, const struct strata_task_view *tv,
              const strata_round_work *work, strata_bytes *out);
  /* Coordinator: combines the round's partials, parts[d] for data block d
   * (0..prob->n_data-1), updates prob->coord (and priv) and appends to
   * apply_out the values every worker applies. plan is the round's work. */
  int (*pull)(const void *cfg, strata_problem *prob, const strata_round *r,
              const strata_round_plan *plan, const strata_round_part *parts,
              strata_bytes *apply_out);
  /* Worker: applies pull's values (values[0..len), the same bytes on every
   * worker) to task tv's blocks, once per task of this worker. NULL: the
   * app has nothing to apply. */
  int (*apply)(void *state, const strata_round *r, const struct strata_task_view *tv,
               const void *values, size_t len);
} strata_round_ops;

#endif
