/*
 * In-process implementation of strata_transport (strata/transport.h): every
 * rank is an endpoint of one hub, and a message is a copy of the sent bytes
 * queued at its receiver. Delays and reordering are counted in the
 * endpoints' own calls and drawn from per-endpoint generators, so a run
 * depends on the seed and on how the calls on the endpoints interleave,
 * never on wall-clock time. One mutex guards the hub: the endpoints' calls
 * are short, and the callers, not the transport, decide how to wait.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "strata/core.h"
#include "strata/transport.h"

typedef struct lb_msg {
  struct lb_msg *next;
  int src, tag;
  uint64_t ready; /* the receiver's call count from which it has arrived */
  size_t len;
  unsigned char *bytes; /* strata_malloc'd, at least 1 byte: poll hands it out */
} lb_msg;

typedef struct lb_list {
  lb_msg *head, *tail;
} lb_list;

enum { SLOT_FREE = 0, SLOT_SEND, SLOT_RECV };

typedef struct lb_slot {
  uint32_t gen;  /* bumped at every reuse, so a stale handle is caught */
  int kind;
  int matched;   /* receives: a message has landed in buf, or it was cancelled */
  int cancelled; /* receives: taken back before any message reached it */
  uint64_t ready; /* sends: this endpoint's call count from which it is complete */
  void *buf;
  size_t len;
  int src, tag;
  size_t got; /* receives: the length of the message that matched */
  int next_free;
} lb_slot;

typedef struct lb_endpoint {
  struct strata_loopback *hub;
  int rank;
  strata_rng rng;  /* delays of what it sends, shuffles of what it receives */
  uint64_t calls;  /* test, test_all and poll calls so far */
  lb_list inflight; /* sent to this rank, not arrived, in send order */
  lb_list arrived;  /* arrived and matched by no receive, in arrival order */
  lb_slot *slots;
  int n_slots, free_slot;
  size_t cap_slots;
  int *posted; /* receive slots waiting for a message, in posting order */
  int n_posted;
  size_t cap_posted;
  lb_msg **batch; /* scratch for the messages arriving in one call */
  int cap_batch;
} lb_endpoint;

struct strata_loopback {
  strata_loopback_conf c;
  pthread_mutex_t mu;
  lb_endpoint *ep;
};

static void list_push(lb_list *l, lb_msg *m) {
  m->next = NULL;
  if (l->tail) l->tail->next = m;
  else l->head = m;
  l->tail = m;
}

static void list_free(lb_list *l) {
  for (lb_msg *m = l->head, *n; m; m = n) {
    n = m->next;
    strata_free(m->bytes);
    strata_free(m);
  }
  l->head = l->tail = NULL;
}

static uint64_t draw_delay(lb_endpoint *e) {
  int d = e->hub->c.max_delay;
  return d > 0 ? strata_rng_below(&e->rng, (uint64_t)d + 1) : 0;
}

/* ---- requests ---- */

static int slot_new(lb_endpoint *e, int *out) {
  if (e->free_slot < 0) {
    if ((size_t)e->n_slots == e->cap_slots) {
      lb_slot *v = strata_grow(e->slots, (size_t)e->n_slots + 1, &e->cap_slots, SIZE_MAX, sizeof *v);
      if (!v) return strata_err_set(STRATA_ENOMEM, "loopback: out of memory for a request");
      e->slots = v;
    }
    e->slots[e->n_slots] = (lb_slot){.next_free = -1};
    e->free_slot = e->n_slots++;
  }
  int i = e->free_slot;
  e->free_slot = e->slots[i].next_free;
  uint32_t gen = e->slots[i].gen + 1;
  e->slots[i] = (lb_slot){.gen = gen, .next_free = -1};
  *out = i;
  return 0;
}

static void slot_release(lb_endpoint *e, int i) {
  e->slots[i].kind = SLOT_FREE;
  e->slots[i].next_free = e->free_slot;
  e->free_slot = i;
}

static uint64_t handle_of(const lb_endpoint *e, int i) {
  return (uint64_t)e->slots[i].gen << 32 | (uint64_t)(i + 1);
}

static int slot_of(lb_endpoint *e, uint64_t h, int *out) {
  uint64_t i = (h & 0xffffffffu) - 1;
  if (i >= (uint64_t)e->n_slots || e->slots[i].kind == SLOT_FREE ||
      e->slots[i].gen != (uint32_t)(h >> 32))
    return strata_err_set(STRATA_ECOMM, "loopback: rank %d tested an unknown request", e->rank);
  *out = (int)i;
  return 0;
}

/* ---- arrival and matching ---- */

static void land(lb_endpoint *e, int i, lb_msg *m) {
  lb_slot *s = &e->slots[i];
  memcpy(s->buf, m->bytes, m->len < s->len ? m->len : s->len);
  s->got = m->len;
  s->matched = 1;
  strata_free(m->bytes);
  strata_free(m);
}

/* MPI's rule: an arriving message goes to the earliest posted receive that
 * matches it, else waits for one. */
static void deliver(lb_endpoint *e, lb_msg *m) {
  for (int k = 0; k < e->n_posted; k++) {
    lb_slot *s = &e->slots[e->posted[k]];
    if (s->src != m->src || s->tag != m->tag) continue;
    int i = e->posted[k];
    memmove(e->posted + k, e->posted + k + 1, (size_t)(e->n_posted - k - 1) * sizeof *e->posted);
    e->n_posted--;
    land(e, i, m);
    return;
  }
  list_push(&e->arrived, m);
}

/* Shuffles the batch while every (source, tag) channel keeps its order:
 * each position draws one of the messages left, uniformly, and takes the
 * earliest message left of that one's channel. The messages left keep their
 * relative order, so every channel stays FIFO, and the channels interleave
 * as in a uniform random permutation. */
static void shuffle_batch(lb_endpoint *e, lb_msg **b, int n) {
  for (int i = 0; i < n - 1; i++) {
    int j = i + (int)strata_rng_below(&e->rng, (uint64_t)(n - i));
    int k = i;
    while (b[k]->src != b[j]->src || b[k]->tag != b[j]->tag) k++;
    lb_msg *m = b[k];
    memmove(b + i + 1, b + i, (size_t)(k - i) * sizeof *b);
    b[i] = m;
  }
}

/* One call of this endpoint: moves the messages whose time has come from
 * in flight to arrived, matching posted receives. */
static int progress(lb_endpoint *e) {
  e->calls++;
  int n = 0;
  for (lb_msg *m = e->inflight.head; m; m = m->next) n += m->ready <= e->calls;
  if (!n) return 0;
  if (n > e->cap_batch) {
    lb_msg **b = strata_realloc(e->batch, (size_t)n * sizeof *b);
    if (!b) return strata_err_set(STRATA_ENOMEM, "loopback: out of memory");
    e->batch = b;
    e->cap_batch = n;
  }
  lb_list keep = {NULL, NULL};
  int k = 0;
  for (lb_msg *m = e->inflight.head, *next; m; m = next) {
    next = m->next;
    if (m->ready <= e->calls) e->batch[k++] = m;
    else list_push(&keep, m);
  }
  e->inflight = keep;
  if (e->hub->c.reorder && n > 1) shuffle_batch(e, e->batch, n);
  for (int i = 0; i < n; i++) deliver(e, e->batch[i]);
  return 0;
}

/* ---- the transport ---- */

static int check_peer(const lb_endpoint *e, const char *what, int peer, int tag, size_t len) {
  const struct strata_loopback *lb = e->hub;
  if (len > INT_MAX) return strata_err_set(STRATA_ETOOBIG, "message of %zu bytes exceeds INT_MAX", len);
  if (peer < 0 || peer >= lb->c.size)
    return strata_err_set(STRATA_ECOMM, "loopback: %s rank %d of %d", what, peer, lb->c.size);
  if (tag < 0 || tag > lb->c.tag_ub)
    return strata_err_set(STRATA_ECOMM, "loopback: %s rank %d with tag %d beyond [0, %d]", what, peer,
                          tag, lb->c.tag_ub);
  return 0;
}

static int lb_isend(void *impl, const void *buf, size_t len, int dst, int tag, strata_req *req) {
  lb_endpoint *e = impl;
  int rc = check_peer(e, "send to", dst, tag, len);
  if (rc) return rc;
  lb_msg *m = strata_malloc(sizeof *m);
  unsigned char *bytes = strata_malloc(len ? len : 1);
  if (!m || !bytes) {
    strata_free(m);
    strata_free(bytes);
    return strata_err_set(STRATA_ENOMEM, "loopback: out of memory sending %zu bytes", len);
  }
  if (len) memcpy(bytes, buf, len);
  *m = (lb_msg){.src = e->rank, .tag = tag, .len = len, .bytes = bytes};
  pthread_mutex_lock(&e->hub->mu);
  int i = 0;
  if ((rc = slot_new(e, &i))) {
    pthread_mutex_unlock(&e->hub->mu);
    strata_free(bytes);
    strata_free(m);
    return rc;
  }
  lb_endpoint *d = &e->hub->ep[dst];
  m->ready = d->calls + 1 + draw_delay(e);
  /* No overtaking within a (source, tag) channel, nor at all without
   * reordering: a message arrives no earlier than the one sent before it. */
  for (lb_msg *p = d->inflight.head; p; p = p->next)
    if ((!e->hub->c.reorder || (p->src == m->src && p->tag == m->tag)) && p->ready > m->ready)
      m->ready = p->ready;
  list_push(&d->inflight, m);
  e->slots[i].kind = SLOT_SEND;
  e->slots[i].ready = e->calls + 1 + draw_delay(e);
  req->h = handle_of(e, i);
  req->expect = 0;
  pthread_mutex_unlock(&e->hub->mu);
  return 0;
}

static int lb_irecv(void *impl, void *buf, size_t len, int src, int tag, strata_req *req) {
  lb_endpoint *e = impl;
  int rc = check_peer(e, "receive from", src, tag, len);
  if (rc) return rc;
  pthread_mutex_lock(&e->hub->mu);
  int i = 0;
  if ((rc = slot_new(e, &i))) goto out;
  lb_slot *s = &e->slots[i];
  s->kind = SLOT_RECV;
  s->buf = buf;
  s->len = len;
  s->src = src;
  s->tag = tag;
  req->h = handle_of(e, i);
  req->expect = (uint64_t)len + 1;
  /* MPI's rule: a new receive takes the earliest arrived message it
   * matches, else waits for one. */
  lb_msg *prev = NULL;
  for (lb_msg *m = e->arrived.head; m; prev = m, m = m->next) {
    if (m->src != src || m->tag != tag) continue;
    if (prev) prev->next = m->next;
    else e->arrived.head = m->next;
    if (e->arrived.tail == m) e->arrived.tail = prev;
    land(e, i, m);
    goto out;
  }
  if ((size_t)e->n_posted == e->cap_posted) {
    int *v = strata_grow(e->posted, (size_t)e->n_posted + 1, &e->cap_posted, SIZE_MAX, sizeof *v);
    if (!v) {
      slot_release(e, i);
      req->h = 0;
      rc = strata_err_set(STRATA_ENOMEM, "loopback: out of memory for a receive");
      goto out;
    }
    e->posted = v;
  }
  e->posted[e->n_posted++] = i;
out:
  pthread_mutex_unlock(&e->hub->mu);
  return rc;
}

/* Reports whether req has completed; when it has, frees its slot and nulls it.
 * Called with the hub locked. */
static int finish(lb_endpoint *e, strata_req *req, int *done) {
  int i = 0, rc = slot_of(e, req->h, &i);
  if (rc) return rc;
  lb_slot *s = &e->slots[i];
  *done = s->kind == SLOT_SEND ? e->calls >= s->ready : s->matched;
  if (!*done) return 0;
  if (s->kind == SLOT_RECV && !s->cancelled && s->got != s->len)
    rc = strata_err_set(STRATA_ECOMM, "message from rank %d (tag %d) has %zu bytes, expected %zu",
                        s->src, s->tag, s->got, s->len);
  slot_release(e, i);
  req->h = 0;
  return rc;
}

static int lb_test(void *impl, strata_req *req, int *done) {
  lb_endpoint *e = impl;
  *done = 1;
  if (req->h == 0) return 0;
  pthread_mutex_lock(&e->hub->mu);
  int rc = progress(e);
  if (!rc) rc = finish(e, req, done);
  pthread_mutex_unlock(&e->hub->mu);
  return rc;
}

static int lb_test_all(void *impl, strata_req *reqs, int n, int *all) {
  lb_endpoint *e = impl;
  *all = 1;
  int live = 0;
  for (int i = 0; i < n; i++) live += reqs[i].h != 0;
  if (!live) return 0;
  pthread_mutex_lock(&e->hub->mu);
  int rc = progress(e);
  /* After a failed progress step nothing is tested. Otherwise every
   * completed request is nulled even when one of them failed, as
   * MPI_Testsome reports them all; the first error is returned. */
  for (int i = 0, failed = rc; i < n && !failed; i++) {
    if (!reqs[i].h) continue;
    int done = 0, r = finish(e, &reqs[i], &done);
    if (!rc) rc = r;
    if (!done) *all = 0;
  }
  pthread_mutex_unlock(&e->hub->mu);
  return rc;
}

/* MPI's rule: a receive still waiting for its message is taken back; one
 * that has its message, and a send, go on as they are. */
static int lb_cancel(void *impl, strata_req *req) {
  lb_endpoint *e = impl;
  if (req->h == 0) return 0;
  pthread_mutex_lock(&e->hub->mu);
  int i = 0, rc = slot_of(e, req->h, &i);
  for (int k = 0; !rc && k < e->n_posted; k++) {
    if (e->posted[k] != i) continue;
    memmove(e->posted + k, e->posted + k + 1, (size_t)(e->n_posted - k - 1) * sizeof *e->posted);
    e->n_posted--;
    e->slots[i].matched = 1;
    e->slots[i].cancelled = 1;
    break;
  }
  pthread_mutex_unlock(&e->hub->mu);
  return rc;
}

static int lb_poll(void *impl, int tag, int *got, int *src, void **buf, size_t *len) {
  lb_endpoint *e = impl;
  *got = 0;
  *buf = NULL;
  *len = 0;
  pthread_mutex_lock(&e->hub->mu);
  int rc = progress(e);
  lb_msg *prev = NULL, *m = e->arrived.head;
  for (; !rc && m; prev = m, m = m->next)
    if (m->tag == tag) break;
  if (!rc && m) {
    if (prev) prev->next = m->next;
    else e->arrived.head = m->next;
    if (e->arrived.tail == m) e->arrived.tail = prev;
    *got = 1;
    *src = m->src;
    *buf = m->bytes;
    *len = m->len;
    strata_free(m);
  }
  pthread_mutex_unlock(&e->hub->mu);
  return rc;
}

/* ---- the hub ---- */

int strata_loopback_open(const strata_loopback_conf *c, strata_loopback **out) {
  *out = NULL;
  if (c->size < 1 || c->max_delay < 0 || c->tag_ub < 0)
    return strata_err_set(STRATA_EINVAL, "loopback: invalid configuration (%d ranks, max delay %d, tag bound %d)",
                          c->size, c->max_delay, c->tag_ub);
  strata_loopback *lb = strata_calloc(1, sizeof *lb);
  if (!lb) return strata_err_set(STRATA_ENOMEM, "loopback: out of memory");
  lb->c = *c;
  if (!lb->c.tag_ub) lb->c.tag_ub = 32767;
  lb->ep = strata_calloc((size_t)c->size, sizeof *lb->ep);
  if (!lb->ep) {
    strata_free(lb);
    return strata_err_set(STRATA_ENOMEM, "loopback: out of memory for %d ranks", c->size);
  }
  if (pthread_mutex_init(&lb->mu, NULL)) {
    strata_free(lb->ep);
    strata_free(lb);
    return strata_err_set(STRATA_ECOMM, "loopback: cannot create a mutex");
  }
  for (int r = 0; r < c->size; r++) {
    lb_endpoint *e = &lb->ep[r];
    e->hub = lb;
    e->rank = r;
    e->free_slot = -1;
    strata_rng_seed(&e->rng, strata_mix64(c->seed ^ strata_mix64((uint64_t)r + 1)));
  }
  *out = lb;
  return 0;
}

int strata_loopback_endpoint(strata_loopback *lb, int rank, strata_transport *t) {
  if (rank < 0 || rank >= lb->c.size)
    return strata_err_set(STRATA_EINVAL, "loopback: no rank %d of %d", rank, lb->c.size);
  *t = (strata_transport){.impl = &lb->ep[rank],
                          .rank = rank,
                          .size = lb->c.size,
                          .tag_ub = lb->c.tag_ub,
                          .isend = lb_isend,
                          .irecv = lb_irecv,
                          .test = lb_test,
                          .test_all = lb_test_all,
                          .poll = lb_poll,
                          .cancel = lb_cancel};
  return 0;
}

void strata_loopback_close(strata_loopback *lb) {
  if (!lb) return;
  for (int r = 0; r < lb->c.size; r++) {
    lb_endpoint *e = &lb->ep[r];
    list_free(&e->inflight);
    list_free(&e->arrived);
    strata_free(e->slots);
    strata_free(e->posted);
    strata_free(e->batch);
  }
  pthread_mutex_destroy(&lb->mu);
  strata_free(lb->ep);
  strata_free(lb);
}
