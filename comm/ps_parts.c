/*
 * The MPI-free pieces of the parameter server (see comm/ps.h).
 */
#include <stdlib.h>
#include <string.h>

#include "comm/ps.h"
#include "strata/core.h"

size_t ps_msg_size(uint32_t n, uint32_t row_len, int with_vals) {
  size_t s = sizeof(ps_hdr) + (size_t)n * sizeof(uint32_t);
  if (with_vals) s += (size_t)n * row_len * sizeof(float);
  return s;
}

int ps_msg_check(const void *buf, size_t len, uint32_t row_len, int src) {
  if (len < sizeof(ps_hdr))
    return strata_err_set(STRATA_ECOMM, "table: short message (%zu bytes) from rank %d", len, src);
  const ps_hdr *h = buf;
  int vals = h->type == PS_UPDATE || h->type == PS_ROWS;
  if (h->type < PS_UPDATE || h->type > PS_RULE || len != ps_msg_size(h->nrows, row_len, vals))
    return strata_err_set(STRATA_ECOMM, "table: malformed message (type %u, %u rows, %zu bytes) from rank %d",
                          h->type, h->nrows, len, src);
  return 0;
}

int ps_vclock_init(ps_vclock *v, int n) {
  v->n = n;
  v->min = 0;
  v->c = strata_calloc((size_t)n, sizeof *v->c);
  return v->c ? 0 : strata_err_set(STRATA_ENOMEM, "table: out of memory for a vector clock");
}

void ps_vclock_free(ps_vclock *v) {
  strata_free(v->c);
  v->c = NULL;
}

int ps_vclock_tick(ps_vclock *v, int w, int32_t stamp, int *advanced) {
  *advanced = 0;
  if (w < 0 || w >= v->n || stamp != v->c[w])
    return strata_err_set(STRATA_ECOMM, "table: batch stamped %d from worker %d, expected %d", stamp, w,
                          w >= 0 && w < v->n ? v->c[w] : -1);
  v->c[w]++;
  int32_t m = v->c[0];
  for (int i = 1; i < v->n; i++)
    if (v->c[i] < m) m = v->c[i];
  *advanced = m > v->min;
  v->min = m;
  return 0;
}

int ps_snapshot_init(ps_snapshot *s, int P, uint32_t n_local, uint32_t row_len,
                     const float *vals) {
  memset(s, 0, sizeof *s);
  s->P = P;
  s->n_local = n_local;
  s->row_len = row_len;
  size_t n = (size_t)n_local * row_len;
  s->vals = strata_malloc((n ? n : 1) * sizeof(float));
  if (!s->vals) return strata_err_set(STRATA_ENOMEM, "table: out of memory for the snapshot");
  if (n) memcpy(s->vals, vals, n * sizeof(float));
  return 0;
}

void ps_snapshot_free(ps_snapshot *s) {
  for (int i = 0; i < s->n_held; i++) strata_free(s->held[i]);
  strata_free(s->held);
  strata_free(s->vals);
  memset(s, 0, sizeof *s);
}

int ps_snapshot_hold(ps_snapshot *s, void *update) {
  void **v = strata_grow(s->held, (size_t)s->n_held + 1, &s->cap_held, SIZE_MAX, sizeof *v);
  if (!v) return strata_err_set(STRATA_ENOMEM, "table: out of memory holding a batch");
  s->held = v;
  s->held[s->n_held++] = update;
  return 0;
}

static void snapshot_apply(ps_snapshot *s, void *m) {
  ps_hdr *h = m;
  const uint32_t *rows = ps_msg_rows(m);
  const float *v = ps_msg_vals(m);
  for (uint32_t i = 0; i < h->nrows; i++) {
    float *dst = s->vals + (size_t)(rows[i] / (uint32_t)s->P) * s->row_len;
    const float *d = v + (size_t)i * s->row_len;
    for (uint32_t j = 0; j < s->row_len; j++) dst[j] += d[j];
  }
}

void ps_snapshot_advance(ps_snapshot *s, int32_t clock) {
  for (; s->clock < clock; s->clock++)
    for (int w = 0; w < s->P; w++)
      for (;;) {
        /* A worker's batches of one stamp (early ones, then the last) go in
         * the order it sent them: lowest seq first. */
        int best = -1;
        for (int i = 0; i < s->n_held; i++) {
          ps_hdr *h = s->held[i];
          if (h->clock != s->clock || h->from != w) continue;
          if (best < 0 || h->seq < ((ps_hdr *)s->held[best])->seq) best = i;
        }
        if (best < 0) break;
        snapshot_apply(s, s->held[best]);
        strata_free(s->held[best]);
        s->held[best] = s->held[--s->n_held];
      }
}

int ps_oplog_init(ps_oplog *o, uint32_t n_rows, uint32_t row_len) {
  memset(o, 0, sizeof *o);
  o->n_rows = n_rows;
  o->row_len = row_len;
  o->delta = strata_calloc((size_t)n_rows * row_len, sizeof(float));
  o->touched = strata_calloc(n_rows ? n_rows : 1, 1);
  o->list = strata_malloc((n_rows ? n_rows : 1) * sizeof(uint32_t));
  if (!o->delta || !o->touched || !o->list) {
    ps_oplog_free(o);
    return strata_err_set(STRATA_ENOMEM, "table: out of memory for the oplog (%u rows)", n_rows);
  }
  return 0;
}

void ps_oplog_free(ps_oplog *o) {
  strata_free(o->delta);
  strata_free(o->touched);
  strata_free(o->list);
  memset(o, 0, sizeof *o);
}

void ps_oplog_add(ps_oplog *o, uint32_t row, const float *delta) {
  float *d = o->delta + (size_t)row * o->row_len;
  if (!(o->touched[row] & PS_OPLOG_LISTED)) o->list[o->n++] = row;
  o->touched[row] = PS_OPLOG_PENDING | PS_OPLOG_LISTED;
  for (uint32_t j = 0; j < o->row_len; j++) d[j] += delta[j];
}

const float *ps_oplog_row(const ps_oplog *o, uint32_t row) {
  return o->touched[row] & PS_OPLOG_PENDING ? o->delta + (size_t)row * o->row_len : NULL;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Whether list entry r goes into shard's batch. */
static int packs(const ps_oplog *o, uint32_t r, int shard, int P) {
  return (o->touched[r] & PS_OPLOG_PENDING) && (int)(r % (uint32_t)P) == shard;
}

int ps_oplog_pack(const ps_oplog *o, int shard, int P, int from, int32_t stamp, uint32_t seq,
                  uint32_t flags, const uint32_t *only, uint32_t n_only, void **out, size_t *len) {
  const uint32_t *list = only ? only : o->list;
  uint32_t n_list = only ? n_only : o->n, n = 0;
  for (uint32_t i = 0; i < n_list; i++) n += packs(o, list[i], shard, P);
  size_t sz = ps_msg_size(n, o->row_len, 1);
  void *m = strata_malloc(sz);
  if (!m) return strata_err_set(STRATA_ENOMEM, "table: out of memory for an update of %u rows", n);
  ps_hdr *h = m;
  *h = (ps_hdr){
      .type = PS_UPDATE, .from = from, .clock = stamp, .nrows = n, .flags = flags, .seq = seq};
  uint32_t *rows = ps_msg_rows(m);
  uint32_t k = 0;
  for (uint32_t i = 0; i < n_list; i++)
    if (packs(o, list[i], shard, P)) rows[k++] = list[i];
  /* Ascending rows let a client find a row of a kept batch by bisection. */
  qsort(rows, n, sizeof *rows, cmp_u32);
  float *vals = ps_msg_vals(m);
  for (uint32_t i = 0; i < n; i++)
    memcpy(vals + (size_t)i * o->row_len, o->delta + (size_t)rows[i] * o->row_len,
           o->row_len * sizeof(float));
  *out = m;
  *len = sz;
  return 0;
}

void ps_oplog_forget(ps_oplog *o, uint32_t row) {
  if (!(o->touched[row] & PS_OPLOG_PENDING)) return;
  o->touched[row] &= (uint8_t)~PS_OPLOG_PENDING;
  memset(o->delta + (size_t)row * o->row_len, 0, o->row_len * sizeof(float));
}

void ps_oplog_clear(ps_oplog *o) {
  for (uint32_t i = 0; i < o->n; i++) {
    uint32_t r = o->list[i];
    if (o->touched[r] & PS_OPLOG_PENDING)
      memset(o->delta + (size_t)r * o->row_len, 0, o->row_len * sizeof(float));
    o->touched[r] = 0;
  }
  o->n = 0;
}

int ps_pending_add(ps_pending *q, int client, int32_t min_age, const uint32_t *rows, uint32_t n) {
  ps_read *v = strata_grow(q->v, (size_t)q->n + 1, &q->cap, SIZE_MAX, sizeof *v);
  if (!v) return strata_err_set(STRATA_ENOMEM, "table: out of memory queueing a read");
  q->v = v;
  uint32_t *copy = strata_malloc((n ? n : 1) * sizeof *copy);
  if (!copy) return strata_err_set(STRATA_ENOMEM, "table: out of memory queueing a read");
  if (n) memcpy(copy, rows, n * sizeof *copy);
  q->v[q->n++] = (ps_read){.client = client, .min_age = min_age, .n = n, .rows = copy};
  return 0;
}

int ps_pending_take(ps_pending *q, int32_t clock, ps_read *out) {
  for (int i = 0; i < q->n; i++)
    if (q->v[i].min_age <= clock) {
      *out = q->v[i];
      memmove(&q->v[i], &q->v[i + 1], (size_t)(q->n - i - 1) * sizeof *q->v);
      q->n--;
      return 1;
    }
  return 0;
}

void ps_pending_free(ps_pending *q) {
  for (int i = 0; i < q->n; i++) strata_free(q->v[i].rows);
  strata_free(q->v);
  memset(q, 0, sizeof *q);
}
