/*
 * The coordinator's side of a round run (scheduler/rounds.h).
 */
#include "scheduler/rounds.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "core/output.h"
#include "strata/core.h"
#include "strata/round.h"

/* One round in flight: its plan, which workers still owe a push, and the
 * partial of every data block. */
struct strata__round_slot {
  int64_t index; /* -1: free */
  strata_round_plan plan;
  strata_bytes *part;    /* n_data */
  unsigned char *owed;   /* P: 1 while worker w's push is missing */
  int n_owed;
  double t_sent;
  double compute_max, wait_max;
  uint64_t bytes_out, bytes_in; /* its step's bytes to the workers, its pushes' back */
};

static strata__round_slot *slot_of(strata__rounds *R, int64_t t) {
  return &R->slots[t % R->depth];
}

int strata__rounds_trace_open(strata__rounds *R, const char *path) {
  if (!path) return 0;
  snprintf(R->trace_path, sizeof R->trace_path, "%s", path);
  /* /dev/null, a FIFO: written in place (an empty trace_tmp says so). */
  if (strata__path_is_special(path))
    R->trace_tmp[0] = 0;
  else
    snprintf(R->trace_tmp, sizeof R->trace_tmp, "%s.tmp.%d", path, (int)getpid());
  const char *open_path = R->trace_tmp[0] ? R->trace_tmp : path;
  if (!(R->trace = fopen(open_path, "w")))
    return strata_err_set(STRATA_EIO, "%s: cannot write: %s", open_path, strerror(errno));
  return 0;
}

void strata__rounds_trace_close(strata__rounds *R, int ok) {
  if (!R->trace) return;
  ok = fclose(R->trace) == 0 && ok;
  R->trace = NULL;
  if (R->trace_tmp[0] && (!ok || rename(R->trace_tmp, R->trace_path) != 0)) remove(R->trace_tmp);
}

int strata__rounds_open(strata__rounds *R, int start_pass) {
  R->P = R->sched->n_workers;
  R->per_pass = R->prob->rounds_per_pass;
  if (R->depth < 1) R->depth = 1;
  R->apply_index = -1;
  R->pass = start_pass - 1;
  R->ended = 1;
  R->next = R->pull_next = (int64_t)start_pass * (int64_t)R->per_pass;
  int nd = R->prob->n_data;
  R->slots = strata_calloc((size_t)R->depth, sizeof *R->slots);
  R->msg = strata_calloc((size_t)R->P, sizeof *R->msg);
  R->parts = strata_calloc((size_t)nd, sizeof *R->parts);
  if (!R->slots || !R->msg || !R->parts) goto oom;
  for (int i = 0; i < R->depth; i++) {
    strata__round_slot *s = &R->slots[i];
    s->index = -1;
    s->part = strata_calloc((size_t)nd, sizeof *s->part);
    s->owed = strata_calloc((size_t)R->P, 1);
    if (!s->part || !s->owed) goto oom;
    if (strata__plan_init(&s->plan, R->P)) return STRATA_ENOMEM;
  }
  if (R->stats) R->stats->depth = R->depth;
  return 0;
oom:
  return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory for the rounds");
}

void strata__rounds_close(strata__rounds *R) {
  for (int i = 0; R->slots && i < R->depth; i++) {
    strata__round_slot *s = &R->slots[i];
    for (int d = 0; s->part && d < R->prob->n_data; d++) strata__bytes_free(&s->part[d]);
    strata_free(s->part);
    strata_free(s->owed);
    strata__plan_free(&s->plan);
  }
  for (int w = 0; R->msg && w < R->P; w++) strata__bytes_free(&R->msg[w]);
  strata_free(R->slots);
  strata_free(R->msg);
  strata_free(R->parts);
  strata__bytes_free(&R->apply);
  R->slots = NULL;
  R->msg = NULL;
  R->parts = NULL;
}

void strata__rounds_begin_pass(strata__rounds *R, int pass) {
  R->pass = pass;
  R->first = (int64_t)pass * (int64_t)R->per_pass;
  R->end = R->first + (int64_t)R->per_pass;
  R->next = R->pull_next = R->first;
  R->ended = 0;
  R->pass_rounds = 0;
  R->pass_latency_s = 0;
}

static strata_round round_of(const strata__rounds *R, int64_t t) {
  return (strata_round){.index = t,
                        .pass = (int)(t / (int64_t)R->per_pass),
                        .in_pass = (int)(t % (int64_t)R->per_pass),
                        .depth = R->depth,
                        .workers = R->P};
}

static void record(strata__rounds *R, const strata__round_slot *s, double now) {
  strata_round_stats *st = R->stats;
  double lat = now - s->t_sent;
  R->pass_rounds++;
  R->pass_latency_s += lat;
  if (R->trace)
    fprintf(R->trace,
            "{\"round\":%lld,\"pass\":%d,\"latency_us\":%.3f,\"bytes_to_workers\":%llu,"
            "\"bytes_from_workers\":%llu,\"worker_compute_us\":%.3f,\"worker_wait_us\":%.3f}\n",
            (long long)s->index, (int)(s->index / (int64_t)R->per_pass), lat * 1e6,
            (unsigned long long)s->bytes_out, (unsigned long long)s->bytes_in,
            s->compute_max * 1e6, s->wait_max * 1e6);
  if (!st) return;
  st->count++;
  st->latency_sum_s += lat;
  if (lat > st->latency_max_s) st->latency_max_s = lat;
  int b = lat > 1e-6 ? (int)floor(log(lat / 1e-6) / log(1.05)) : 0;
  st->latency_hist[b < 0 ? 0 : b >= STRATA_ROUND_HIST ? STRATA_ROUND_HIST - 1 : b]++;
  st->worker_compute_s += s->compute_max;
  st->worker_wait_s += s->wait_max;
}

/* pull(t): its partials in data-block order into the app, the values to
 * apply into R->apply. */
static int pull(strata__rounds *R, int64_t t) {
  strata__round_slot *s = slot_of(R, t);
  for (int d = 0; d < R->prob->n_data; d++) {
    int w = strata_schedule_data_owner(R->sched, d);
    int had = s->plan.ids[w].len || s->plan.payload[w].len;
    R->parts[d] = (strata_round_part){w, had ? s->part[d].buf : NULL, had ? s->part[d].len : 0};
  }
  strata_round r = round_of(R, t);
  R->apply.len = 0;
  int rc = R->app->round->pull(R->cfg, R->prob, &r, &s->plan, R->parts, &R->apply);
  s->index = -1;
  R->pull_next = t + 1;
  R->apply_index = t;
  return rc;
}

/* The step that sends the values pulled last (and no work). */
static int send_values(strata__rounds *R, int end_pass) {
  strata__round_head h = {.index = -1,
                          .apply_index = R->apply_index,
                          .pass = R->pass,
                          .in_pass = (int32_t)(R->next - R->first),
                          .flags = end_pass ? STRATA__ROUND_END_PASS |
                                                  (R->converged ? STRATA__ROUND_END_RUN : 0)
                                            : 0,
                          .apply_len = R->apply_index >= 0 ? R->apply.len : 0};
  int rc = 0;
  for (int w = 0; w < R->P && !rc; w++)
    rc = strata__round_pack(&R->msg[w], &h, R->apply.buf, NULL, w);
  if (rc) return rc;
  if (R->stats) R->stats->bytes_out += (uint64_t)R->msg[0].len * (uint64_t)R->P;
  R->apply_index = -1;
  if (end_pass) R->ended = 1;
  return STRATA__ROUNDS_SEND;
}

static int complete(strata__rounds *R, int64_t t) {
  if (slot_of(R, t)->n_owed == 0) return 1;
  R->awaited = t;
  return 0;
}

int strata__rounds_next(strata__rounds *R) {
  if (R->ended) return STRATA__ROUNDS_DONE;
  int rc;
  if (!R->converged && R->next < R->end) {
    int64_t t = R->next, old = t - R->depth;
    if (old >= R->first && R->pull_next <= old) {
      if (!complete(R, old)) return STRATA__ROUNDS_WAIT;
      if ((rc = pull(R, old))) return rc;
    }
    strata__round_slot *s = slot_of(R, t);
    strata__plan_clear(&s->plan);
    strata_round r = round_of(R, t);
    rc = R->app->round->schedule_round(R->cfg, R->prob, &r, &s->plan);
    if (rc < 0) return rc;
    if (rc == STRATA_ROUND_CONVERGED) {
      R->converged = 1;
      if (R->stats) R->stats->converged = 1;
    } else if (rc) {
      return strata_err_set(STRATA_EINVAL, "%s: schedule_round returned %d", R->app->name, rc);
    } else {
      strata__round_head h = {.index = t,
                              .apply_index = R->apply_index,
                              .pass = R->pass,
                              .in_pass = (int32_t)(t - R->first),
                              .apply_len = R->apply_index >= 0 ? R->apply.len : 0};
      s->index = t;
      s->n_owed = 0;
      s->compute_max = s->wait_max = 0;
      s->bytes_out = s->bytes_in = 0;
      for (int w = 0; w < R->P; w++) {
        int has = s->plan.ids[w].len || s->plan.payload[w].len;
        s->owed[w] = (unsigned char)has;
        s->n_owed += has;
        if ((rc = strata__round_pack(&R->msg[w], &h, R->apply.buf, &s->plan, w))) return rc;
        s->bytes_out += R->msg[w].len;
        if (R->stats) {
          R->stats->bytes_out += R->msg[w].len;
          R->stats->ids_out += s->plan.ids[w].len / sizeof(uint32_t);
        }
      }
      R->apply_index = -1;
      R->next = t + 1;
      s->t_sent = strata_now();
      /* A round in which no worker has work is complete at once. */
      if (!s->n_owed) record(R, s, s->t_sent);
      return STRATA__ROUNDS_SEND;
    }
  }
  /* The drain: the values pulled last go out, then each round in flight is
   * pulled in turn; the last step ends the pass. */
  for (;;) {
    if (R->apply_index >= 0) return send_values(R, R->pull_next == R->next);
    if (R->pull_next >= R->next) return send_values(R, 1);
    if (!complete(R, R->pull_next)) return STRATA__ROUNDS_WAIT;
    if ((rc = pull(R, R->pull_next))) return rc;
  }
}

typedef struct take_ctx {
  strata__rounds *R;
  strata__round_slot *s;
  int w;
  int n;
} take_ctx;

static int take_part(void *ud, int data, const void *bytes, size_t len) {
  take_ctx *c = ud;
  strata__rounds *R = c->R;
  if (data < 0 || data >= R->prob->n_data || strata_schedule_data_owner(R->sched, data) != c->w)
    return strata_err_set(STRATA_ECOMM, "coordinator: worker %d pushed a partial of data block %d",
                          c->w, data);
  c->n++;
  c->s->part[data].len = 0;
  return strata_bytes_put(&c->s->part[data], bytes, len);
}

int strata__rounds_take(strata__rounds *R, int w, const void *msg, size_t len) {
  double now = strata_now();
  strata__push_head h;
  if (len >= sizeof h) memcpy(&h, msg, sizeof h);
  if (len < sizeof h || h.worker != w || h.index < R->pull_next || h.index >= R->next ||
      slot_of(R, h.index)->index != h.index || !slot_of(R, h.index)->owed[w])
    return strata_err_set(STRATA_ECOMM,
                          "coordinator: a push of %zu bytes from worker %d that no round in "
                          "flight awaits",
                          len, w);
  strata__round_slot *s = slot_of(R, h.index);
  take_ctx c = {R, s, w, 0};
  int rc = strata__push_unpack(msg, len, &h, take_part, &c);
  if (rc) return rc;
  s->owed[w] = 0;
  s->n_owed--;
  if (h.compute_s > s->compute_max) s->compute_max = h.compute_s;
  if (h.wait_s > s->wait_max) s->wait_max = h.wait_s;
  s->bytes_in += len;
  if (R->stats) R->stats->bytes_in += len;
  if (!s->n_owed) record(R, s, now);
  return 0;
}

int strata__rounds_complete(const strata__rounds *R, int64_t t) {
  const strata__round_slot *s = &R->slots[t % R->depth];
  return s->index != t || s->n_owed == 0;
}

void strata__rounds_pass_stats(const strata__rounds *R, int64_t *rounds, double *latency_s) {
  *rounds = R->pass_rounds;
  *latency_s = R->pass_rounds ? R->pass_latency_s / (double)R->pass_rounds : 0.0 / 0.0;
}
