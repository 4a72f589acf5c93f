/*
 * A worker's pass loop in a round run (strata/round.h): no rotating blocks
 * and no compute; each step from the coordinator brings the values of a
 * pulled round to apply and, unless it drains, this worker's work in the
 * next round, whose partial it pushes for each of its tasks.
 */
#include <string.h>

#include "comm/live.h"
#include "core/round.h"
#include "core/wait.h"
#include "strata/core.h"
#include "strata/round.h"
#include "worker/worker.h"

static strata_round round_at(const strata__worker *w, int64_t t) {
  int64_t per = (int64_t)w->rounds_per_pass;
  return (strata_round){.index = t,
                        .pass = (int)(t / per),
                        .in_pass = (int)(t % per),
                        .depth = w->opts && w->opts->round_depth > 0 ? w->opts->round_depth : 1,
                        .workers = w->sched.n_workers};
}

static strata_task_view task_view(strata__worker *w, const strata_task *tk, int pass) {
  return (strata_task_view){.pass = pass,
                            .ids = *tk,
                            .data = &w->data[tk->data],
                            .resident = &w->res[tk->resident],
                            .global = w->global,
                            .chunk = -1,
                            .clock = -1};
}

/* One step: apply, then push. Sets *end at the pass's last step. */
static int step(strata__worker *w, int pass, const void *msg, size_t len, double wait_s,
                strata_bytes *push, pass_report *rep, int *end) {
  const strata_round_ops *ops = w->app->round;
  strata__round_head h;
  const void *values;
  strata_round_work work;
  int rc = strata__round_unpack(msg, len, &h, &values, &work);
  if (rc) return rc;
  if (h.pass != pass || (h.index >= 0 && h.index / (int64_t)w->rounds_per_pass != pass))
    return strata_err_set(STRATA_ECOMM, "worker %d: a step of pass %d in pass %d", w->me,
                          h.pass + 1, pass + 1);
  int n;
  const strata_task *tk = strata_schedule_tasks(&w->sched, 0, w->me, &n);
  double t0 = strata_now();
  if (h.apply_index >= 0 && ops->apply) {
    strata_round r = round_at(w, h.apply_index);
    for (int i = 0; i < n && !rc; i++) {
      strata_task_view tv = task_view(w, &tk[i], pass);
      rc = ops->apply(w->state, &r, &tv, values, (size_t)h.apply_len);
    }
  }
  if (!rc && h.index >= 0 && (work.n_ids || work.payload_len)) {
    strata_round r = round_at(w, h.index);
    strata__push_head ph = {.index = h.index, .worker = w->me};
    rc = strata__push_begin(push, &ph);
    strata_bytes part = {0};
    for (int i = 0; i < n && !rc; i++) {
      strata_task_view tv = task_view(w, &tk[i], pass);
      part.len = 0;
      rc = ops->push(w->state, &r, &tv, &work, &part);
      if (!rc) rc = strata__push_add(push, tk[i].data, part.buf, part.len);
    }
    strata__bytes_free(&part);
    if (!rc) {
      strata__push_end(push, n);
      strata__push_head *out = push->buf;
      out->compute_s = strata_now() - t0;
      out->wait_s = wait_s;
      rep->stats.compute_s += out->compute_s;
      rep->stats.bytes_sent += push->len;
      rc = w->round_send(w->round_ud, push->buf, push->len);
    }
  } else if (!rc) {
    rep->stats.compute_s += strata_now() - t0;
  }
  strata__step();
  *end = !rc && (h.flags & STRATA__ROUND_END_PASS);
  /* schedule_round said the run converged: this pass is its last. */
  if (*end && (h.flags & STRATA__ROUND_END_RUN)) w->last_pass = pass;
  return rc;
}

/* End of pass: the partials of this worker's resident blocks and its eval
 * blocks, then the report. */
static int score(strata__worker *w, int pass, pass_report *rep) {
  int rc = 0;
  double t0 = strata_now();
  for (int i = 0; i < w->sched.n_resident && !rc && w->app->block_objective; i++)
    if (strata_schedule_resident_owner(&w->sched, i) == w->me)
      rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_RESIDENT, i, &w->res[i],
                                   rep->partials);
  if (!rc && w->me == 0 && w->global && w->app->block_objective)
    rc = w->app->block_objective(w->state, pass, STRATA_BLOCK_GLOBAL, 0, w->global, rep->partials);
  if (!rc && w->has_eval && w->app->evaluate) rc = strata__worker_score(w, pass, rep->partials);
  rep->stats.eval_s += strata_now() - t0;
  strata__worker_stamp(w, &rep->stats);
  return rc ? rc : w->report(w->report_ud, rep);
}

static int add_residents(void *ctx, strata__part_writer *pw) {
  return strata__ckpt_add_residents(ctx, pw, NULL);
}

int strata__worker_rounds(strata__worker *w) {
  int rc = 0;
  strata_bytes push = {0};
  for (int pass = w->start_pass; pass <= w->last_pass && !rc; pass++) {
    pass_report rep;
    strata__live_pass(pass);
    strata__report_begin(&rep, pass, w->me);
    strata_partials_init(w->app, rep.partials);
    w->t_pass = strata_now();
    w->cpu_pass = strata_cpu_seconds();
    pass_control v;
    memset(&v, 0, sizeof v);
    if (w->control && (rc = w->control(w->report_ud, pass, &v))) break;
    if (v.stop) {
      w->stopped = 1;
      break;
    }
    if (v.last) w->last_pass = pass;
    double verdict_s = strata_now() - w->t_pass;
    for (int end = 0; !end && !rc;) {
      void *msg = NULL;
      size_t len = 0;
      double wait_s = 0;
      rc = w->round_recv(w->round_ud, pass, &msg, &len, &wait_s);
      if (!rc) {
        rep.stats.wait_s += wait_s;
        rep.stats.bytes_recv += len;
        rc = step(w, pass, msg, len, wait_s, &push, &rep, &end);
      }
      strata_free(msg);
    }
    if (rc) break;
    rep.stats.time_s = strata_now() - w->t_pass;
    rep.stats.wait_s += verdict_s;
    rc = score(w, pass, &rep);
    if (!rc && strata__ckpt_due(w, pass)) rc = strata__worker_ckpt(w, pass, add_residents, w);
  }
  strata__live_pass(w->setup.passes);
  strata__bytes_free(&push);
  if (rc && w->settle) rc = w->settle(w->report_ud, rc);
  return rc;
}
