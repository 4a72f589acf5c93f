/*
 * Rounds (strata/round.h, core/round.h): byte buffers, the plan, and the
 * wire layout of the round and push messages.
 */
#include "core/round.h"

#include <stdio.h>
#include <string.h>

#include "strata/core.h"

#define ALIGN8(n) (((n) + 7) & ~(size_t)7)

void *strata_bytes_add(strata_bytes *b, size_t n) {
  static char none;
  if (n == 0) return b->buf ? (char *)b->buf + b->len : &none;
  if (n > SIZE_MAX - b->len) {
    strata_err_set(STRATA_ENOMEM, "out of memory: a buffer of more than SIZE_MAX bytes");
    return NULL;
  }
  void *grown = strata_grow(b->buf, b->len + n, &b->cap, SIZE_MAX, 1);
  if (!grown) {
    strata_err_set(STRATA_ENOMEM, "out of memory for a buffer of %zu bytes", b->len + n);
    return NULL;
  }
  b->buf = grown;
  void *at = (char *)b->buf + b->len;
  b->len += n;
  return at;
}

int strata_bytes_put(strata_bytes *b, const void *src, size_t n) {
  void *at = strata_bytes_add(b, n);
  if (!at) return STRATA_ENOMEM;
  if (n) memcpy(at, src, n);
  return 0;
}

void strata__bytes_free(strata_bytes *b) {
  strata_free(b->buf);
  memset(b, 0, sizeof *b);
}

/* Pads b with zeros to a multiple of 8 bytes. */
static int pad8(strata_bytes *b) {
  size_t n = ALIGN8(b->len) - b->len;
  void *at = n ? strata_bytes_add(b, n) : NULL;
  if (n && !at) return STRATA_ENOMEM;
  if (n) memset(at, 0, n);
  return 0;
}

/* ---- the plan ------------------------------------------------------- */

int strata__plan_init(strata_round_plan *p, int P) {
  memset(p, 0, sizeof *p);
  p->P = P;
  p->ids = strata_calloc((size_t)P, sizeof *p->ids);
  p->payload = strata_calloc((size_t)P, sizeof *p->payload);
  if (!p->ids || !p->payload) {
    strata__plan_free(p);
    return strata_err_set(STRATA_ENOMEM, "out of memory for a round's plan");
  }
  return 0;
}

void strata__plan_clear(strata_round_plan *p) {
  for (int w = 0; w < p->P; w++) p->ids[w].len = p->payload[w].len = 0;
}

void strata__plan_free(strata_round_plan *p) {
  for (int w = 0; p->ids && w < p->P; w++) strata__bytes_free(&p->ids[w]);
  for (int w = 0; p->payload && w < p->P; w++) strata__bytes_free(&p->payload[w]);
  strata_free(p->ids);
  strata_free(p->payload);
  memset(p, 0, sizeof *p);
}

int strata__plan_any(const strata_round_plan *p) {
  for (int w = 0; w < p->P; w++)
    if (p->ids[w].len || p->payload[w].len) return 1;
  return 0;
}

static int assign_one(strata_round_plan *plan, int w, const uint32_t *ids, uint32_t n,
                      const void *payload, size_t len) {
  plan->ids[w].len = plan->payload[w].len = 0;
  int rc = strata_bytes_put(&plan->ids[w], ids, (size_t)n * sizeof *ids);
  if (!rc) rc = strata_bytes_put(&plan->payload[w], payload, len);
  return rc;
}

int strata_round_assign(strata_round_plan *plan, int w, const uint32_t *ids, uint32_t n,
                        const void *payload, size_t len) {
  if (w < -1 || w >= plan->P)
    return strata_err_set(STRATA_EINVAL, "strata_round_assign: worker %d of %d", w, plan->P);
  if ((n && !ids) || (len && !payload))
    return strata_err_set(STRATA_EINVAL, "strata_round_assign: NULL ids or payload with a length");
  int rc = 0;
  for (int v = w < 0 ? 0 : w; v < (w < 0 ? plan->P : w + 1) && !rc; v++)
    rc = assign_one(plan, v, ids, n, payload, len);
  return rc;
}

strata_round_work strata_round_work_of(const strata_round_plan *plan, int w) {
  strata_round_work k;
  memset(&k, 0, sizeof k);
  if (!plan || w < 0 || w >= plan->P) return k;
  k.n_ids = (uint32_t)(plan->ids[w].len / sizeof(uint32_t));
  k.ids = k.n_ids ? plan->ids[w].buf : NULL;
  k.payload_len = plan->payload[w].len;
  k.payload = k.payload_len ? plan->payload[w].buf : NULL;
  return k;
}

/* ---- round messages ------------------------------------------------- */

int strata__round_pack(strata_bytes *out, strata__round_head *head, const void *apply,
                       const strata_round_plan *plan, int w) {
  strata_round_work k = strata_round_work_of(plan, w);
  if (!plan || head->index < 0) memset(&k, 0, sizeof k);
  head->n_ids = k.n_ids;
  head->payload_len = k.payload_len;
  out->len = 0;
  int rc = strata_bytes_put(out, head, sizeof *head);
  if (!rc) rc = strata_bytes_put(out, apply, head->apply_len);
  if (!rc) rc = pad8(out);
  if (!rc) rc = strata_bytes_put(out, k.ids, (size_t)k.n_ids * sizeof(uint32_t));
  if (!rc) rc = pad8(out);
  if (!rc) rc = strata_bytes_put(out, k.payload, k.payload_len);
  return rc;
}

int strata__round_unpack(const void *msg, size_t len, strata__round_head *head,
                         const void **apply, strata_round_work *work) {
  const char *p = msg;
  memset(work, 0, sizeof *work);
  *apply = NULL;
  if (len < sizeof *head) return strata_err_set(STRATA_ECOMM, "a round message of %zu bytes", len);
  memcpy(head, p, sizeof *head);
  size_t off = sizeof *head, left = len - off;
  /* Every length is checked against what is left before it is used. */
  if (head->apply_len > left) goto bad;
  *apply = head->apply_len ? p + off : NULL;
  off = ALIGN8(off + head->apply_len);
  if (off > len) goto bad;
  left = len - off;
  if ((uint64_t)head->n_ids > left / sizeof(uint32_t)) goto bad;
  work->n_ids = head->n_ids;
  work->ids = head->n_ids ? (const uint32_t *)(const void *)(p + off) : NULL;
  off = ALIGN8(off + (size_t)head->n_ids * sizeof(uint32_t));
  if (off > len) goto bad;
  left = len - off;
  if (head->payload_len != left) goto bad;
  work->payload_len = head->payload_len;
  work->payload = head->payload_len ? p + off : NULL;
  if ((head->index < 0 && (head->n_ids || head->payload_len)) || head->index < -1 ||
      head->apply_index < -1)
    goto bad;
  return 0;
bad:
  return strata_err_set(STRATA_ECOMM,
                        "a round message of %zu bytes whose lengths do not add up (apply %llu, "
                        "%u ids, payload %llu)",
                        len, (unsigned long long)head->apply_len, (unsigned)head->n_ids,
                        (unsigned long long)head->payload_len);
}

/* ---- push messages -------------------------------------------------- */

int strata__push_begin(strata_bytes *out, const strata__push_head *head) {
  out->len = 0;
  return strata_bytes_put(out, head, sizeof *head);
}

int strata__push_add(strata_bytes *out, int data, const void *bytes, size_t len) {
  strata__push_part part = {data, 0, len};
  int rc = strata_bytes_put(out, &part, sizeof part);
  if (!rc) rc = strata_bytes_put(out, bytes, len);
  if (!rc) rc = pad8(out);
  return rc;
}

void strata__push_end(strata_bytes *out, int n_parts) {
  strata__push_head *h = out->buf;
  h->n_parts = n_parts;
}

int strata__push_unpack(const void *msg, size_t len, strata__push_head *head,
                        int (*take)(void *ud, int data, const void *bytes, size_t len), void *ud) {
  const char *p = msg;
  if (len < sizeof *head) return strata_err_set(STRATA_ECOMM, "a push of %zu bytes", len);
  memcpy(head, p, sizeof *head);
  if (head->n_parts < 0) goto bad;
  size_t off = sizeof *head;
  for (int i = 0; i < head->n_parts; i++) {
    strata__push_part part;
    if (len - off < sizeof part) goto bad;
    memcpy(&part, p + off, sizeof part);
    off += sizeof part;
    if (part.len > len - off) goto bad;
    int rc = take(ud, part.data, p + off, (size_t)part.len);
    if (rc) return rc;
    off = ALIGN8(off + (size_t)part.len);
    if (off > len) goto bad;
  }
  if (off != len) goto bad;
  return 0;
bad:
  return strata_err_set(STRATA_ECOMM, "a push of %zu bytes whose parts do not add up", len);
}
