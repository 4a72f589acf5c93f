/*
 * The wire protocol between the coordinator and the workers (internal to
 * libstrata): message tags, the structs that travel, and which blocks a
 * worker gets at set-up. scheduler/ speaks one side, worker/ the other;
 * neither includes the other.
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
 * model exchange for evaluation with TAG_EVAL_BASE + r; in sfb mode a
 * worker's factors of a clock to each out-peer (TAG_SFB, one message, the
 * layout of core/sf.h) and after each pass a sample of its replica's rows
 * to worker 0 (TAG_SFB_DRIFT).
 * At the end with --model-out, worker -> coordinator TAG_EXPORT: owned
 * resident blocks by id, then rotating blocks held in the last sub-epoch;
 * worker 0 then sends the global block (TAG_GLOBAL).
 * Last, coordinator -> each worker TAG_FINAL: int32 exit status of the run
 * as rank 0 saw it after writing its outputs (strata_engine_finish).
 */
#ifndef STRATA_COMM_PROTOCOL_H
#define STRATA_COMM_PROTOCOL_H

#include <stdint.h>
#include <string.h>

#include "comm/transport.h"
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
  TAG_SFB = 15,     /* sfb: a worker's factors of one clock, to an out-peer */
  TAG_SFB_DRIFT = 16, /* sfb: a sample of a replica's rows, to worker 0 */
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

/* A zeroed report for pass index `pass` (0-based) of worker `worker`. */
static inline void strata__report_begin(pass_report *rep, int pass, int worker) {
  memset(rep, 0, sizeof *rep);
  rep->pass = pass + 1;
  rep->worker = worker;
}

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
