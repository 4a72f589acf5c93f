/*
 * The back-end interface (internal to libstrata): how the pass loop
 * (worker/loop.c) gets the rows of a task's rotating block and hands them
 * back, and what the engine asks of the back-end's modes (core/mode.h).
 * Each back-end is one file that defines one strata__backend; the mode
 * table (strata/modes.h) names which mode runs on which.
 *
 * Per pass the loop calls, in this order:
 *   begin_pass                 before the pass's verdict is awaited
 *   idle (repeatedly)          while it is awaited
 *   then, for each sub-epoch s:
 *     begin_subepoch(s)
 *     for each task, for each chunk c: acquire, the app's compute, release
 *     end_subepoch(s)
 *   end_pass, stats, evaluate, and checkpoint when one follows the pass
 * and at the end close (also after a stop verdict, with stopped = 1) and
 * free. Every call returns 0 or a negative code with a message; after a
 * failure only free is called.
 */
#ifndef STRATA_WORKER_BACKEND_H
#define STRATA_WORKER_BACKEND_H

#include "core/mode.h"
#include "worker/worker.h"

struct strata__backend {
  /* What the engine asks of its modes: settings, clock rule, memory,
   * checkpoint parts, figures (core/mode.h). A table mode's rule adds its
   * own (comm/rule.h). */
  strata__mode_ops mode;

  /* Opens the back-end on a prepared worker (blocks received). */
  int (*open)(strata__worker *w, void **be);
  int (*begin_pass)(void *be, int pass, strata_worker_stats *st);
  int (*begin_subepoch)(void *be, int pass, int s, strata_worker_stats *st);
  /* Makes rows [tv->row_lo, tv->row_hi) of tv->rotating (and the global
   * block, if any) current for chunk tv->chunk of the task; the chunk may
   * be empty (row_lo == row_hi), and compute runs on it all the same. On
   * entry tv->clock holds the loop's count (the pass, or a
   * sufficient-factor app's tasks so far); a back-end that keeps clocks of
   * its own sets tv->clock to the clock its staleness rule reads the chunk
   * at. */
  int (*acquire)(void *be, strata_task_view *tv, strata_worker_stats *st);
  /* Hands the chunk's rows back after compute changed them. */
  int (*release)(void *be, const strata_task_view *tv, strata_worker_stats *st);
  int (*end_subepoch)(void *be, int pass, int s, strata_worker_stats *st);
  /* The pass's work is done: whatever must reach other workers goes. */
  int (*end_pass)(void *be, int pass, strata_worker_stats *st);
  /* Adds the back-end's own measurements to the pass's stats (time_s holds
   * the pass's wall time on entry). */
  void (*stats)(void *be, strata_worker_stats *st);
  /* Loads the model for evaluation, scores the pass (block objectives and
   * the app's evaluate) and hands its report to w->report, now or later
   * (reports go out in pass order). */
  int (*evaluate)(void *be, int pass, pass_report *rep);
  /* After evaluate, when a checkpoint follows the pass (strata__ckpt_due):
   * writes this worker's part (strata__worker_ckpt) once its state is that
   * of the pass's end, now or later (the tables: when the pass's snapshot
   * lands). A back-end that starts at a resumed pass takes w->start_pass
   * at open. */
  int (*checkpoint)(void *be, int pass);
  /* Work that must go on while the verdict is awaited; NULL: none. */
  int (*idle)(void *be);
  /* Settles: every transfer complete, every report out, the final model in
   * the worker's blocks (unless stopped). */
  int (*close)(void *be, int stopped);
  void (*free)(void *be);
};

#endif
