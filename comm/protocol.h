/*
 * The wire protocol between the coordinator and the workers (internal to
 * libstrata): message tags, the structs that travel, and which blocks a
 * worker gets at set-up. scheduler/ speaks one side, worker/ the other;
 * neither includes the other.
 *
 * First, the watch (comm/live.h), before any loading: each worker ->
 * coordinator TAG_LIVE, its host and addresses; coordinator -> each worker
 * TAG_LIVE, the address of its watch and the run's secret. Then each
 * worker -> coordinator: TAG_HOST, its host's name and memory available
 * (64 bytes of name, a uint64).
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
 * Round runs (setup_header.rounds_per_pass > 0; strata/round.h): within a
 * pass, coordinator -> each worker TAG_ROUND, one step at a time (the
 * values of a pulled round, the worker's work in the next), worker ->
 * coordinator TAG_PUSH for each round it had work in; the pass's last step
 * is flagged (core/round.h has the layouts), then the reports follow.
 * Checkpoints (--checkpoint): each worker writes its part itself and sends
 * the coordinator a ckpt_note (TAG_CKPT) once it is on disk; the
 * coordinator, which listens for notes in every wait, writes the manifest
 * once every part and its own are in.
 * Per pass, coordinator -> each worker: TAG_CONTROL struct pass_control for
 * pass k, sent once pass k - L is summed (passes 0..L-1 at the start); a
 * worker receives it before it starts pass k. stop = 1 ends the run there,
 * on every worker at the same pass (the run diverged); last = 1 makes pass
 * k the run's last (it converged: the model after it is exported).
 * Ring mode with a global block: after every sub-epoch each worker sends its
 * change of the global block to every other worker (TAG_GSYNC).
 * Between workers: chunk c of rotating block r with tag block_tag(r, c);
 * in parameter-server modes, table traffic on TAG_PS and TAG_PS + 1 instead;
 * model exchange for evaluation with TAG_EVAL_BASE + r; in sfb mode a
 * worker's factors of a clock to each out-peer (TAG_SFB, one message, the
 * layout of core/sf.h), and other workers' such messages relayed as they
 * came (worker/sfb.c), and after each pass a sample of its replica's rows
 * to worker 0 (TAG_SFB_DRIFT).
 * At the end with --model-out, worker -> coordinator TAG_EXPORT: owned
 * resident blocks by id, then rotating blocks held in the last sub-epoch;
 * worker 0 then sends the global block (TAG_GLOBAL).
 * Then each worker, through (passes, tables left, model sent), sends an
 * empty TAG_DONE: until every worker's is in, a worker may still fail and
 * the coordinator listens for it.
 * Last, coordinator -> each worker TAG_FINAL: int32 exit status of the run
 * as rank 0 saw it after writing its outputs (strata_engine_finish).
 *
 * Failure. A failure before shipping reaches the workers as the set-up
 * header's status. After that, the coordinator listens for TAG_FAIL in
 * every wait, and the run ends in two phases, with no MPI_Abort:
 *   - a worker that fails on its own sends rank 0 TAG_FAIL, a fail_report
 *     with its code and message (once), and waits for the verdict;
 *   - rank 0 makes the first report its error ("worker W: message"), or
 *     takes a failure of its own, and sends every worker TAG_ABORT, the
 *     int32 code: the notice that the run is over;
 *   - every worker's transport watches for the notice (comm/watch.h) in
 *     every wait, so a worker anywhere in set-up, a pass, the export or
 *     strata_engine_finish stops: its outstanding receives are cancelled,
 *     and it answers with its one TAG_FAIL (code 0 unless it failed
 *     itself), then waits for the verdict;
 *   - once every worker has answered, no rank posts another receive of
 *     the run, so sends still outstanding will never be read; rank 0
 *     settles its own receives and sends each worker TAG_FINAL with the
 *     code, and every rank frees its buffers and leaves with that code.
 * Rank 0 gives up on a worker that has not answered after
 * STRATA__CALL_OFF_S, a worker on a verdict after STRATA__VERDICT_S; only
 * then (or when rank 0 cannot reach the workers) does the job end at once
 * (strata_comm_abort: every rank by its liveness watch). SIGINT and SIGTERM
 * are the watch's too (comm/live.h), never these messages'. Rank 0 listens
 * until every worker's TAG_DONE is in, and a worker can fail only before it
 * sends that, so a report always finds rank 0 listening (a verdict of 0
 * after a report would mean it did not: the worker then keeps its own
 * message and code).
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
  TAG_FAIL = 17,      /* a worker's failure report, or its answer to TAG_ABORT */
  TAG_ABORT = 18,     /* the coordinator calls the run off: int32 code */
  TAG_DONE = 19,      /* a worker is through with the run (empty) */
  TAG_CKPT = 20,      /* a worker's part of a checkpoint is on disk: ckpt_note */
  TAG_LIVE = 21,      /* the watch's set-up (comm/live.h), the run's first messages */
  TAG_HOST = 22,      /* a worker's host and its memory available (scheduler/memory.h) */
  TAG_ROUND = 23,     /* round runs: the coordinator's step to a worker (core/round.h) */
  TAG_PUSH = 24,      /* round runs: a worker's partials of a round (core/round.h) */
  TAG_EVAL_BASE = 1000,
  TAG_CHUNK_BASE = 20000
};

typedef struct block_desc {
  uint64_t len;
  uint32_t nrows;
  uint32_t row_bytes;
} block_desc;

/* setup_header.status: the run ends before any pass, each worker with code
 * 0 (a resumed run whose checkpoint holds every pass asked for). Any other
 * nonzero status is the failure's code. */
#define STRATA__SETUP_NOTHING 1

typedef struct setup_header {
  int32_t status;
  int32_t has_eval;
  int32_t n_data, n_resident, n_rotating;
  int32_t start_pass; /* the first pass to run: 0, or the passes a resumed
                         checkpoint holds */
  uint64_t meta_len;
  uint64_t sched_len;
  uint64_t n_examples;
  block_desc global; /* len 0: no global block; else TAG_GLOBAL follows the bundle */
  uint64_t rounds_per_pass; /* > 0: a round run (strata/round.h) */
  uint64_t bell_id; /* != 0: every rank's doorbell (comm/bell.h) is named by it */
  uint32_t value_len; /* strata_problem.value_len */
  uint32_t pad;
} setup_header;

typedef struct pass_report {
  int32_t pass;     /* 0-based */
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
  int32_t stop;  /* 1: do not start this pass; the run ends (it diverged) */
  int32_t last;  /* 1: this pass is the run's last (it converged, --tol) */
  int32_t pad;
  double ctl[STRATA_MAX_CONTROLS];
} pass_control;

/* TAG_HOST: a rank's host, for the memory estimate (scheduler/memory.h). */
typedef struct host_info {
  char name[64];
  uint64_t avail; /* strata_mem_available(); 0: unknown */
  uint64_t rss;   /* the rank's resident bytes now: Open MPI's own share, before any block */
} host_info;

/* This rank's host_info, now. */
void strata__host_info(host_info *h);

/* TAG_CKPT: this worker's part of the checkpoint after `passes` passes is
 * on disk (a worker that cannot write it fails the run instead). */
typedef struct ckpt_note {
  int32_t passes;
  int32_t worker;
  uint64_t sum, bytes; /* the part's checksum and size, for the manifest */
  double seconds;      /* writing it */
} ckpt_note;

/* TAG_FAIL: a worker's one message when a run fails (see above). */
#define STRATA__FAIL_MSG 512
typedef struct fail_report {
  int32_t code;   /* the worker's own failure; 0: it stopped on TAG_ABORT */
  int32_t worker;
  char msg[STRATA__FAIL_MSG]; /* its message, NUL-terminated, cut to fit */
} fail_report;

/* Seconds rank 0 waits for every worker's answer to TAG_ABORT, and a worker
 * that stopped for the verdict (TAG_FINAL), before giving up (then the job
 * ends at once: strata_comm_abort). A worker notices the notice at its next wait; one
 * deep in a long compute or a straggler's delay answers late. */
#define STRATA__CALL_OFF_S 10.0
#define STRATA__VERDICT_S (STRATA__CALL_OFF_S + 10.0)

/* Sends rank 0 this worker's TAG_FAIL (code, and msg cut to fit; NULL: none)
 * and waits until it is out, or until `until` (strata_now time). 0, or a
 * code with a message when it could not go. */
int strata__fail_send(const strata_transport *t, int worker, int code, const char *msg,
                      double until);
/* Waits for the verdict (TAG_FINAL from rank 0) until `until`: 0 with *code,
 * or STRATA_ECOMM with a message when none came by then or the receive
 * failed (the receive is settled either way). */
int strata__verdict_wait(const strata_transport *t, double until, int32_t *code);

/* A zeroed report for pass index `pass` (0-based) of worker `worker`. */
static inline void strata__report_begin(pass_report *rep, int pass, int worker) {
  memset(rep, 0, sizeof *rep);
  rep->pass = pass;
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
