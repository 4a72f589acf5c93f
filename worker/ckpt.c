/*
 * A worker's part of a checkpoint (core/ckpt.h has the files, scheduler/
 * the manifest): which passes are followed by one, and the entries every
 * back-end writes alike. Each back-end decides when its state is the pure
 * state of the pass's end and adds what it alone holds.
 */
#include <stdio.h>

#include "core/wait.h"
#include "strata/core.h"
#include "worker/worker.h"

int strata__tasks_per_pass(const strata__worker *w) {
  int total = 0;
  for (int s = 0; s < w->sched.n_subepochs; s++) {
    int n;
    strata_schedule_tasks(&w->sched, s, w->me, &n);
    total += n;
  }
  return total;
}

int strata__ckpt_due(const strata__worker *w, int pass) {
  const strata_engine_opts *o = w->opts;
  return o && o->checkpoint_dir && o->checkpoint_every > 0 && (pass + 1) % o->checkpoint_every == 0;
}

int strata__ckpt_add_residents(strata__worker *w, strata__part_writer *pw, void *const *bufs) {
  int rc = 0;
  for (int i = 0; i < w->sched.n_resident && !rc; i++)
    if (strata_schedule_resident_owner(&w->sched, i) == w->me)
      rc = strata__part_add(pw, STRATA__CK_RESIDENT, i, 0,
                            bufs && bufs[i] ? bufs[i] : w->res[i].buf, w->res[i].len);
  return rc;
}

int strata__worker_ckpt(strata__worker *w, int pass,
                        int (*add)(void *ctx, strata__part_writer *pw), void *ctx) {
  double t0 = strata_now();
  char name[64];
  snprintf(name, sizeof name, "worker-%d.bin", w->me);
  strata__part_writer pw;
  ckpt_note n = {.passes = pass + 1, .worker = w->me};
  /* Disk time: the liveness watch must not take it for a hang. */
  strata__wait_enter();
  int rc = strata__part_begin(&pw, w->opts->checkpoint_dir, pass + 1, name, w->me);
  if (!rc) rc = add(ctx, &pw);
  if (!rc) rc = strata__part_commit(&pw, &n.sum, &n.bytes);
  strata__part_abandon(&pw);
  strata__wait_leave();
  if (rc) return rc;
  n.seconds = strata_now() - t0;
  return w->ckpt_done ? w->ckpt_done(w->report_ud, &n) : 0;
}
