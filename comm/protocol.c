/*
 * The parts of the wire protocol (comm/protocol.h) both sides compute: the
 * blocks a worker gets at set-up, and a worker's messages when a run fails.
 */
#include <stdio.h>
#include <unistd.h>

#include "comm/protocol.h"
#include "core/wait.h"
#include "strata/core.h"

int strata__setup_blocks(const strata_schedule *s, int w, int all_rot, strata_block *data,
                         strata_block *eval, strata_block *res, strata_block *rot,
                         strata_block **out, size_t *total) {
  int n = 0;
  *total = 0;
#define TAKE(b)          \
  do {                   \
    if ((b)->len) {      \
      out[n++] = (b);    \
      *total += (b)->len; \
    }                    \
  } while (0)
  for (int i = 0; i < s->n_data; i++)
    if (strata_schedule_data_owner(s, i) == w) TAKE(&data[i]);
  for (int i = 0; eval && i < s->n_data; i++)
    if (strata_schedule_data_owner(s, i) == w) TAKE(&eval[i]);
  for (int i = 0; i < s->n_resident; i++)
    if (strata_schedule_resident_owner(s, i) == w) TAKE(&res[i]);
  for (int i = 0; i < s->n_rotating; i++)
    if (all_rot || strata_schedule_rotating_holder(s, i, 0) == w) TAKE(&rot[i]);
#undef TAKE
  return n;
}

typedef struct one_req {
  const strata_transport *t;
  strata_req *req;
} one_req;

static int test_one(void *ctx, int *done, int *progressed) {
  one_req *c = ctx;
  int rc = c->t->test(c->t->impl, c->req, done);
  *progressed = *done;
  return rc;
}

/* Waits for one request until `until`; 0 when it is done. */
static int wait_one(const strata_transport *t, strata_req *req, double until) {
  one_req c = {t, req};
  strata__wait_conf wc = {.ceiling = STRATA__WAIT_PROMPT, .until = until};
  int rc = strata__wait(test_one, &c, &wc);
  if (!rc && req->h) rc = strata_err_set(STRATA_ECOMM, "timed out");
  return rc;
}

int strata__fail_send(const strata_transport *t, int worker, int code, const char *msg,
                      double until) {
  fail_report f;
  memset(&f, 0, sizeof f);
  f.code = code;
  f.worker = worker;
  if (msg) snprintf(f.msg, sizeof f.msg, "%s", msg);
  strata_req rq = {0};
  int rc = t->isend(t->impl, &f, sizeof f, 0, TAG_FAIL, &rq);
  if (!rc) rc = wait_one(t, &rq, until);
  if (rc) {
    char why[256];
    snprintf(why, sizeof why, "%s", strata_err_msg());
    return strata_err_set(rc, "worker %d: cannot report to the coordinator (%s)", worker, why);
  }
  return 0;
}

int strata__verdict_wait(const strata_transport *t, double until, int32_t *code) {
  *code = 0;
  strata_req rq = {0};
  int rc = t->irecv(t->impl, code, sizeof *code, 0, TAG_FINAL, &rq);
  if (!rc) rc = wait_one(t, &rq, until);
  if (rc) {
    char why[256];
    snprintf(why, sizeof why, "%s", strata_err_msg());
    /* The receive's buffer is this frame's: let go of it first. */
    strata__comm_cancel(t, &rq, 1, strata_now() + 1);
    return strata_err_set(STRATA_ECOMM, "no verdict from the coordinator (%s)", why);
  }
  return 0;
}

void strata__host_info(host_info *h) {
  memset(h, 0, sizeof *h);
  gethostname(h->name, sizeof h->name - 1);
  strata_mem_available(&h->avail);
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size, resident;
  if (f && fscanf(f, "%llu %llu", &size, &resident) == 2)
    h->rss = (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
  if (f) fclose(f);
}
