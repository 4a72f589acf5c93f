/*
 * Coordinator <-> worker protocol and the engine internals shared by
 * scheduler/ and worker/ (not installed).
 *
 * Set-up, coordinator -> each worker, in this order:
 *   TAG_HEADER  struct setup_header (status != 0: run failed, stop quietly)
 *   TAG_META    meta bytes (if meta_len > 0)
 *   TAG_SCHED   packed schedule
 *   TAG_DESC    struct block_desc for every block: data, eval (if has_eval),
 *               resident, rotating
 *   TAG_BLOCK   one bundle: the bytes of the worker's blocks back to back in
 *               canonical order (strata__setup_blocks), sent in pieces of at
 *               most STRATA__PIECE bytes; one message per block would make
 *               set-up cost grow with the square of the block count
 *   TAG_GLOBAL  the global block's initial values (if the problem has one)
 * Start: each worker, set up, sends an empty TAG_START to the coordinator;
 * once all have, the coordinator sends each an empty TAG_START and the
 * passes begin, on every worker at once (else the first worker set up
 * would spend pass 1 waiting for the last one's blocks).
 * Per pass, worker -> coordinator: TAG_REPORT struct pass_report.
 * Per pass, coordinator -> each worker: TAG_CONTROL struct pass_control for
 * pass k, sent once pass k - L is summed (passes 0..L-1 at the start); a
 * worker receives it before it starts pass k. stop = 1 ends the run there,
 * on every worker at the same pass (the run diverged).
 * Ring mode with a global block: after every sub-epoch each worker sends its
 * change of the global block to every other worker (TAG_GSYNC).
 * Between workers: chunk c of rotating block r with tag block_tag(r, c);
 * in parameter-server modes, table traffic on TAG_PS and TAG_PS + 1 instead;
 * model exchange for evaluation with TAG_EVAL_BASE + r.
 * At the end with --model-out, worker -> coordinator TAG_EXPORT: owned
 * resident blocks by id, then rotating blocks held in the last sub-epoch;
 * worker 0 then sends the global block (TAG_GLOBAL).
 * Last, coordinator -> each worker TAG_FINAL: int32 exit status of the run
 * as rank 0 saw it after writing its outputs (strata_engine_finish).
 */
#ifndef STRATA_SCHEDULER_PROTOCOL_H
#define STRATA_SCHEDULER_PROTOCOL_H

#include <stdint.h>
#include <string.h>

#include "strata/app.h"
#include "strata/engine.h"
#include "strata/transport.h"

enum {
  TAG_HEADER = 1,
  TAG_META = 2,
  TAG_SCHED = 3,
  TAG_DESC = 4,
  TAG_BLOCK = 5,
  TAG_REPORT = 6,
  TAG_EXPORT = 7,
  TAG_FINAL = 8,
  TAG_GLOBAL = 9, /* the global block: initial values, and worker 0's at export */
  TAG_PS = 10,    /* and 11: parameter-server tables (strata/table.h) */
  TAG_GSYNC = 12, /* ring: a worker's change of the global block in one sub-epoch */
  TAG_START = 13, /* set up / begin */
  TAG_CONTROL = 14, /* the verdict and control values of a pass */
  TAG_EVAL_BASE = 1000,
  TAG_CHUNK_BASE = 20000
};

typedef struct block_desc {
  uint64_t len;
  uint32_t nrows;
  uint32_t row_bytes;
} block_desc;

typedef struct setup_header {
  int32_t status;
  int32_t has_eval;
  int32_t n_data, n_resident, n_rotating;
  int32_t pad;
  uint64_t meta_len;
  uint64_t sched_len;
  uint64_t n_examples;
  block_desc global; /* len 0: no global block; else TAG_GLOBAL follows the bundle */
} setup_header;

typedef struct pass_report {
  int32_t pass;
  int32_t worker;
  int32_t unscored; /* parameter-server modes: the pass ended inside a clock
                       (--wpc > 1), so no consistent model was there to score */
  int32_t has_view; /* view_partials are set (--score-view) */
  strata_worker_stats stats;
  double partials[STRATA_MAX_PARTIALS];
  double view_partials[STRATA_MAX_PARTIALS]; /* partials with the evaluation
                       and rotating/global block objectives on the worker's view */
} pass_report;

typedef struct pass_control {
  int32_t pass;  /* 0-based */
  int32_t stop;  /* 1: do not start this pass; the run ends */
  double ctl[STRATA_MAX_CONTROLS];
} pass_control;

/* The lag L between a pass summed and the pass its verdict governs: 2, or
 * in ssp/essp 2 plus the passes that s clocks span, so that the verdict
 * never holds a worker back more than the staleness bound does. */
int strata__control_lag(const strata_engine_opts *o);

/* A zeroed report for pass index `pass` (0-based) of worker `worker`. */
static inline void strata__report_begin(pass_report *rep, int pass, int worker) {
  memset(rep, 0, sizeof *rep);
  rep->pass = pass + 1;
  rep->worker = worker;
}

/* A worker's view of the run; in serial mode built in-process. */
typedef struct strata__worker {
  const strata_app *app;
  const void *cfg;
  strata_setup setup;
  void *state;
  strata_transport *t; /* NULL in serial mode */
  const strata_engine_opts *opts;
  strata_schedule sched;
  int me;
  int has_eval;
  strata_block *data, *eval, *res, *rot; /* indexed by block id */
  strata_block *global; /* NULL, or the worker's copy of the global block */
  /* called with each pass's report (serial: the coordinator's aggregator) */
  int (*report)(void *ud, const pass_report *rep);
  void *report_ud;
  /* gives pass k's control before the pass starts, waiting for it if need
   * be (serial: from the aggregator); NULL: no stop, no control values */
  int (*control)(void *ud, int pass, pass_control *out);
  /* while control waits (parameter-server modes: the table keeps serving,
   * for peers may need this worker's shard to reach the pass summed) */
  int (*waiting)(void *ctx);
  void *waiting_ctx;
  int stopped; /* the loop ended early on a stop verdict */
} strata__worker;

/* Runs every pass on a prepared worker (the ring, or in parameter-server
 * modes strata__worker_loop_ps). */
int strata__worker_loop(strata__worker *w);
/* Parameter-server modes: every rotating block starts on every worker (the
 * table's initial values); rows come from the table chunk by chunk, their
 * changes go back as deltas, and clocks end per --wpc. */
int strata__worker_loop_ps(strata__worker *w);
/* Pass `pass`'s verdict (w->control, or none): *stop = 1 when the run ends
 * before it; ctl gets its control values. */
int strata__pass_verdict(strata__worker *w, int pass, int *stop, double *ctl);
/* Scores this worker's eval blocks against w->res and w->rot as they are. */
int strata__worker_score(strata__worker *w, int pass, double *partials);
/* Clocks per pass for wpc < 1 (round(1/wpc)), 0 when a clock spans passes. */
int strata__clocks_per_pass(double wpc);
/* A ring straggler's delay of ms milliseconds, asleep or (spin) busy;
 * returns the seconds it took. */
double strata__straggle_ms(int ms, int spin);

/* --disrupt: a thread that, in each slot of slot_ms, burns the CPU with
 * probability prob. */
typedef struct strata__disrupt strata__disrupt;
int strata__disrupt_start(double prob, int slot_ms, uint64_t seed, strata__disrupt **out);
void strata__disrupt_stop(strata__disrupt *d);
/* Scheduled mode, ranks >= 1: receive set-up, loop, export. On a failure of
 * its own (not the coordinator calling the run off) sets *own_failure and
 * keeps its buffers: MPI may still write into them and peers may wait. */
int strata__worker_main(const strata_app *app, void *cfg, const strata_engine_opts *opts,
                        strata_transport *t, int *own_failure);
/* Frees the worker's blocks, schedule and app state. */
void strata__worker_close(strata__worker *w);

/* Coordinator waits: runs a libev loop that tests the requests with a timer
 * backing off from 50 us to 10 ms, and watches SIGINT/SIGTERM (returning
 * STRATA_EINTR). Never spins. */
int strata__loop_wait_all(const strata_transport *t, strata_req *reqs, int n);

#define STRATA__PIECE ((size_t)1 << 30)

/* The blocks worker w receives at set-up, in canonical order: owned data
 * blocks by id, their eval blocks (eval may be NULL), owned resident blocks,
 * rotating blocks it holds in sub-epoch 0 (with all_rot, parameter-server
 * modes: every rotating block); empty blocks are left out. out
 * needs room for 2 n_data + n_resident + n_rotating pointers. Returns the
 * count; *total gets the sum of their lengths. */
int strata__setup_blocks(const strata_schedule *s, int w, int all_rot, strata_block *data,
                         strata_block *eval, strata_block *res, strata_block *rot,
                         strata_block **out, size_t *total);

/* Tag of chunk c of rotating block r. */
static inline int strata__chunk_tag(const strata_transport *t, int r, int c, int depth) {
  int span = (t->tag_ub - TAG_CHUNK_BASE) / depth;
  return TAG_CHUNK_BASE + (r % span) * depth + c;
}

#endif
