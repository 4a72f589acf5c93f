/*
 * Checkpoints on the coordinator's side (internal to libstrata): the
 * identity of the loaded data, the coordinator's own part (the metrics and
 * verdicts so far), the manifest once every worker's part is on disk, and
 * resuming: the manifest checked against the run, every part read back
 * into the problem and the aggregator. core/ckpt.h has the files;
 * worker/ckpt.c the workers' parts; docs/failure.md what is guaranteed.
 */
#ifndef STRATA_SCHEDULER_CKPT_H
#define STRATA_SCHEDULER_CKPT_H

#include "comm/protocol.h"
#include "core/manifest.h"
#include "core/mode.h"
#include "strata/engine.h"

struct strata__agg;

/* A checkpoint waiting for parts: the coordinator's and each worker's. */
typedef struct strata__ckpt_wait {
  int passes;
  int coord_done;
  uint64_t coord_sum, coord_bytes;
  ckpt_note *notes;      /* per worker */
  unsigned char *noted;  /* per worker */
  int n_noted;
} strata__ckpt_wait;

typedef struct strata__ckpt_run {
  const strata_app *app;
  const strata_engine_opts *opts;
  strata_setup setup;
  int P;
  unsigned parts; /* what the parts hold (STRATA__CKP_*: the mode's answer) */
  /* the data as load produced it (meta, data and eval blocks) */
  uint64_t data_sum, data_bytes;
  /* writing: checkpoints waiting for their parts, oldest first */
  strata__ckpt_wait *wait;
  int n_wait;
  /* resuming */
  int start_pass;                /* passes the resumed checkpoint holds; 0 */
  int resumed_from;              /* -1: not resuming */
  char manifest[4096];           /* its path, for messages */
  strata__manifest man;          /* its manifest, read (have_man) */
  int have_man;
  void **global_of;              /* per worker: its own copy of the global block, or NULL */
  void **rot_of;                 /* per worker x rotating block: its own copy, or NULL */
  int n_rot;
} strata__ckpt_run;

/* Opens the checkpoint state of a run of mode `mode`: with --resume, finds the last
 * complete checkpoint and checks its manifest against the run (app, mode,
 * workers, settings, passes); with --checkpoint, prepares the directory.
 * Before load, so that a refused resume costs nothing. */
int strata__ckpt_open(strata__ckpt_run *ck, const strata_app *app, const strata_engine_opts *opts,
                      const strata_setup *setup, const strata__facts *mode);
void strata__ckpt_close(strata__ckpt_run *ck);

/* After load and schedule: the data's identity, and when resuming, checks
 * it and reads every part back into the problem's parameter blocks (and
 * the per-worker copies) and the aggregator's metrics and verdicts. */
int strata__ckpt_loaded(strata__ckpt_run *ck, strata_problem *p, const strata_schedule *s,
                        struct strata__agg *agg);

/* Pass `pass` is summed (the aggregator's state is that of passes 0..pass):
 * when a checkpoint follows it, writes the coordinator's part. May publish
 * a manifest whose worker parts were all in. */
int strata__ckpt_summed(void *ck, struct strata__agg *agg, int pass);
/* A worker's part is on disk; publishes every checkpoint now complete. */
int strata__ckpt_note(strata__ckpt_run *ck, struct strata__agg *agg, const ckpt_note *n);
/* At the run's end: STRATA_ECOMM when a checkpoint still misses a part. */
int strata__ckpt_finish(strata__ckpt_run *ck);

#endif
