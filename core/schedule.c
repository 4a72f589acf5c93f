#include "strata/schedule.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"

int strata_schedule_init(strata_schedule *s, int n_workers, int n_subepochs, int n_data,
                         int n_resident, int n_rotating) {
  memset(s, 0, sizeof *s);
  if (n_workers < 1 || n_subepochs < 1 || n_data < 1 || n_resident < 1 || n_rotating < 0)
    return strata_err_set(STRATA_EINVAL,
                          "schedule: workers, sub-epochs, data and resident blocks must be >= 1, "
                          "rotating blocks >= 0");
  s->n_workers = n_workers;
  s->n_subepochs = n_subepochs;
  s->n_data = n_data;
  s->n_resident = n_resident;
  s->n_rotating = n_rotating;
  s->offsets = strata_calloc((size_t)n_workers * (size_t)n_subepochs + 1, sizeof(int));
  if (!s->offsets) return strata_err_set(STRATA_ENOMEM, "schedule: out of memory");
  return 0;
}

void strata_schedule_close(strata_schedule *s) {
  strata_free(s->offsets);
  strata_free(s->tasks);
  strata_free(s->keys);
  strata_free(s->data_owner);
  strata_free(s->resident_owner);
  strata_free(s->holder);
  memset(s, 0, sizeof *s);
}

int strata_schedule_add(strata_schedule *s, int sub, int w, strata_task t) {
  if (s->finished) return strata_err_set(STRATA_EINVAL, "schedule: add after finish");
  if (sub < 0 || sub >= s->n_subepochs || w < 0 || w >= s->n_workers)
    return strata_err_set(STRATA_EINVAL, "schedule: sub-epoch %d / worker %d out of range", sub, w);
  /* Without rotating blocks (a round app's shards) a task names none: -1. */
  int rot_ok = s->n_rotating ? t.rotating >= 0 && t.rotating < s->n_rotating : t.rotating == -1;
  if (t.data < 0 || t.data >= s->n_data || t.resident < 0 || t.resident >= s->n_resident || !rot_ok)
    return strata_err_set(STRATA_EINVAL,
                          "schedule: task (data %d, resident %d, rotating %d) out of range", t.data,
                          t.resident, t.rotating);
  if (s->n_tasks == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    strata_task *nt = strata_realloc(s->tasks, (size_t)cap * sizeof *nt);
    if (!nt) return strata_err_set(STRATA_ENOMEM, "schedule: out of memory");
    s->tasks = nt;
    int32_t *nk = strata_realloc(s->keys, (size_t)cap * sizeof *nk);
    if (!nk) return strata_err_set(STRATA_ENOMEM, "schedule: out of memory");
    s->keys = nk;
    s->cap = cap;
  }
  s->tasks[s->n_tasks] = t;
  s->keys[s->n_tasks] = sub * s->n_workers + w;
  s->n_tasks++;
  return 0;
}

int strata_schedule_finish(strata_schedule *s) {
  int nk = s->n_workers * s->n_subepochs;
  strata_task *sorted = strata_malloc((size_t)(s->n_tasks ? s->n_tasks : 1) * sizeof *sorted);
  if (!sorted) return strata_err_set(STRATA_ENOMEM, "schedule: out of memory");
  /* Counting sort on the key keeps insertion order within each (s, w). */
  memset(s->offsets, 0, (size_t)(nk + 1) * sizeof(int));
  for (int i = 0; i < s->n_tasks; i++) s->offsets[s->keys[i] + 1]++;
  for (int k = 0; k < nk; k++) s->offsets[k + 1] += s->offsets[k];
  int *fill = strata_malloc((size_t)nk * sizeof(int));
  if (!fill) {
    strata_free(sorted);
    return strata_err_set(STRATA_ENOMEM, "schedule: out of memory");
  }
  memcpy(fill, s->offsets, (size_t)nk * sizeof(int));
  for (int i = 0; i < s->n_tasks; i++) sorted[fill[s->keys[i]]++] = s->tasks[i];
  strata_free(fill);
  strata_free(s->tasks);
  strata_free(s->keys);
  s->keys = NULL;
  s->tasks = sorted;
  s->cap = s->n_tasks;
  s->finished = 1;
  int rc = strata_schedule_validate(s);
  if (rc) return rc;
  /* Validation proved each id has at most one owner, so one scan fills the
   * lookup tables. */
  s->data_owner = strata_malloc((size_t)s->n_data * sizeof(int));
  s->resident_owner = strata_malloc((size_t)s->n_resident * sizeof(int));
  s->holder = strata_malloc((size_t)s->n_subepochs * (size_t)s->n_rotating * sizeof(int));
  if (!s->data_owner || !s->resident_owner || !s->holder)
    return strata_err_set(STRATA_ENOMEM, "schedule: out of memory");
  for (int i = 0; i < s->n_data; i++) s->data_owner[i] = -1;
  for (int i = 0; i < s->n_resident; i++) s->resident_owner[i] = -1;
  for (int i = 0; i < s->n_subepochs * s->n_rotating; i++) s->holder[i] = -1;
  for (int sub = 0; sub < s->n_subepochs; sub++)
    for (int w = 0; w < s->n_workers; w++) {
      int n;
      const strata_task *t = strata_schedule_tasks(s, sub, w, &n);
      for (int i = 0; i < n; i++) {
        s->data_owner[t[i].data] = w;
        s->resident_owner[t[i].resident] = w;
        if (t[i].rotating < 0) continue;
        int *h = &s->holder[sub * s->n_rotating + t[i].rotating];
        if (*h < 0) *h = w;
      }
    }
  return 0;
}

const strata_task *strata_schedule_tasks(const strata_schedule *s, int sub, int w, int *n) {
  int k = sub * s->n_workers + w;
  *n = s->offsets[k + 1] - s->offsets[k];
  return s->tasks + s->offsets[k];
}

int strata_schedule_validate(const strata_schedule *s) {
  int rc = 0;
  int *data_seen = strata_calloc((size_t)s->n_data, sizeof(int));
  int *res_owner = strata_malloc((size_t)s->n_resident * sizeof(int));
  int *rot_sub = strata_malloc((size_t)s->n_rotating * sizeof(int));
  int *res_sub = strata_malloc((size_t)s->n_resident * sizeof(int));
  if (!data_seen || !res_owner || !rot_sub || !res_sub) {
    rc = strata_err_set(STRATA_ENOMEM, "schedule: out of memory");
    goto done;
  }
  for (int r = 0; r < s->n_resident; r++) res_owner[r] = -1;
  for (int sub = 0; sub < s->n_subepochs; sub++) {
    for (int r = 0; r < s->n_rotating; r++) rot_sub[r] = 0;
    for (int r = 0; r < s->n_resident; r++) res_sub[r] = 0;
    for (int w = 0; w < s->n_workers; w++) {
      int n;
      const strata_task *t = strata_schedule_tasks(s, sub, w, &n);
      for (int i = 0; i < n; i++) {
        if (data_seen[t[i].data]++) {
          rc = strata_err_set(STRATA_ESCHED, "schedule: data block %d is processed twice per pass",
                              t[i].data);
          goto done;
        }
        if (t[i].rotating >= 0 && rot_sub[t[i].rotating]++ && !s->shared) {
          rc = strata_err_set(STRATA_ESCHED,
                              "schedule: rotating block %d is used twice in sub-epoch %d",
                              t[i].rotating, sub);
          goto done;
        }
        if (res_sub[t[i].resident]++) {
          rc = strata_err_set(STRATA_ESCHED,
                              "schedule: resident block %d is used twice in sub-epoch %d",
                              t[i].resident, sub);
          goto done;
        }
        if (res_owner[t[i].resident] >= 0 && res_owner[t[i].resident] != w) {
          rc = strata_err_set(STRATA_ESCHED,
                              "schedule: resident block %d is used by workers %d and %d",
                              t[i].resident, res_owner[t[i].resident], w);
          goto done;
        }
        res_owner[t[i].resident] = w;
      }
    }
    for (int r = 0; r < s->n_rotating && !s->shared; r++)
      if (!rot_sub[r]) {
        rc = strata_err_set(STRATA_ESCHED, "schedule: rotating block %d is idle in sub-epoch %d",
                            r, sub);
        goto done;
      }
  }
  for (int d = 0; d < s->n_data; d++)
    if (!data_seen[d]) {
      rc = strata_err_set(STRATA_ESCHED, "schedule: data block %d is never processed", d);
      goto done;
    }
done:
  strata_free(data_seen);
  strata_free(res_owner);
  strata_free(rot_sub);
  strata_free(res_sub);
  return rc;
}

int strata_schedule_data_owner(const strata_schedule *s, int d) {
  return d >= 0 && d < s->n_data ? s->data_owner[d] : -1;
}

int strata_schedule_resident_owner(const strata_schedule *s, int r) {
  return r >= 0 && r < s->n_resident ? s->resident_owner[r] : -1;
}

int strata_schedule_rotating_holder(const strata_schedule *s, int r, int sub) {
  if (r < 0 || r >= s->n_rotating || sub < 0 || sub >= s->n_subepochs) return -1;
  return s->holder[sub * s->n_rotating + r];
}

int strata_schedule_diagonal(strata_schedule *s, int P, int B) {
  if (P < 1 || B < P)
    return strata_err_set(STRATA_EINVAL, "diagonal schedule needs 1 <= workers <= strata (got %d workers, %d strata)", P, B);
  int rc = strata_schedule_init(s, P, B, B * B, B, B);
  if (rc) return rc;
  for (int t = 0; t < B; t++)
    for (int i = 0; i < B; i++) {
      int j = (i + t) % B;
      strata_task task = {i * B + j, i, j};
      int w = (int)((int64_t)i * P / B);
      if ((rc = strata_schedule_add(s, t, w, task))) goto fail;
    }
  if ((rc = strata_schedule_finish(s))) goto fail;
  return 0;
fail:
  strata_schedule_close(s);
  return rc;
}

int strata_schedule_shards(strata_schedule *s, int P, int n) {
  if (P < 1 || n < P)
    return strata_err_set(STRATA_EINVAL, "shard schedule needs 1 <= workers <= data blocks (got "
                          "%d workers, %d blocks)", P, n);
  int rc = strata_schedule_init(s, P, 1, n, n, 0);
  if (rc) return rc;
  for (int d = 0; d < n; d++)
    if ((rc = strata_schedule_add(s, 0, (int)((int64_t)d * P / n), (strata_task){d, d, -1})))
      goto fail;
  if ((rc = strata_schedule_finish(s))) goto fail;
  return 0;
fail:
  strata_schedule_close(s);
  return rc;
}

int strata_schedule_minibatches(strata_schedule *s, int P, int C) {
  if (P < 1 || C < 1 || (int64_t)P * C > INT32_MAX)
    return strata_err_set(STRATA_EINVAL, "minibatch schedule needs P, C >= 1 and P * C data "
                          "blocks that an int can count (got P %d, C %d)", P, C);
  int rc = strata_schedule_init(s, P, C, P * C, P, 1);
  if (rc) return rc;
  s->shared = 1;
  for (int c = 0; c < C; c++)
    for (int p = 0; p < P; p++)
      if ((rc = strata_schedule_add(s, c, p, (strata_task){c * P + p, p, 0}))) goto fail;
  if ((rc = strata_schedule_finish(s))) goto fail;
  return 0;
fail:
  strata_schedule_close(s);
  return rc;
}

/* Wire form: 6 header ints (the counts, then shared), the offsets, then the
 * tasks as int32 triples. */
#define PACK_HEAD 6
int strata_schedule_pack(const strata_schedule *s, void **buf, size_t *len) {
  size_t nk = (size_t)s->n_workers * (size_t)s->n_subepochs + 1;
  size_t n = (PACK_HEAD + nk + 3 * (size_t)s->n_tasks) * sizeof(int32_t);
  int32_t *p = strata_malloc(n);
  if (!p) return strata_err_set(STRATA_ENOMEM, "schedule: out of memory");
  p[0] = s->n_workers;
  p[1] = s->n_subepochs;
  p[2] = s->n_data;
  p[3] = s->n_resident;
  p[4] = s->n_rotating;
  p[5] = s->shared;
  for (size_t k = 0; k < nk; k++) p[PACK_HEAD + k] = s->offsets[k];
  int32_t *q = p + PACK_HEAD + nk;
  for (int i = 0; i < s->n_tasks; i++) {
    q[3 * i] = s->tasks[i].data;
    q[3 * i + 1] = s->tasks[i].resident;
    q[3 * i + 2] = s->tasks[i].rotating;
  }
  *buf = p;
  *len = n;
  return 0;
}

int strata_schedule_unpack(strata_schedule *s, const void *buf, size_t len) {
  const int32_t *p = buf;
  if (len < PACK_HEAD * sizeof(int32_t)) return strata_err_set(STRATA_ESCHED, "schedule: truncated");
  int rc = strata_schedule_init(s, p[0], p[1], p[2], p[3], p[4]);
  if (rc) return rc;
  if (p[5] != 0 && p[5] != 1) {
    rc = strata_err_set(STRATA_ESCHED, "schedule: bad shared flag");
    goto fail;
  }
  s->shared = p[5];
  size_t nk = (size_t)s->n_workers * (size_t)s->n_subepochs + 1;
  if (len < (PACK_HEAD + nk) * sizeof(int32_t)) {
    rc = strata_err_set(STRATA_ESCHED, "schedule: truncated");
    goto fail;
  }
  const int32_t *off = p + PACK_HEAD;
  int n_tasks = off[nk - 1];
  if (n_tasks < 0 || len != (PACK_HEAD + nk + 3 * (size_t)n_tasks) * sizeof(int32_t)) {
    rc = strata_err_set(STRATA_ESCHED, "schedule: bad length");
    goto fail;
  }
  /* Offsets come off the wire: each must stay inside the task array. */
  if (off[0] != 0) {
    rc = strata_err_set(STRATA_ESCHED, "schedule: bad offsets");
    goto fail;
  }
  for (size_t k = 0; k + 1 < nk; k++)
    if (off[k] > off[k + 1]) {
      rc = strata_err_set(STRATA_ESCHED, "schedule: bad offsets");
      goto fail;
    }
  const int32_t *q = off + nk;
  for (size_t k = 0; k + 1 < nk; k++)
    for (int i = off[k]; i < off[k + 1]; i++) {
      strata_task t = {q[3 * i], q[3 * i + 1], q[3 * i + 2]};
      if ((rc = strata_schedule_add(s, (int)(k / (size_t)s->n_workers),
                                    (int)(k % (size_t)s->n_workers), t)))
        goto fail;
    }
  if ((rc = strata_schedule_finish(s))) goto fail;
  return 0;
fail:
  strata_schedule_close(s);
  return rc;
}

typedef struct id_load {
  uint32_t id, count, tie;
} id_load;

static int by_count_desc(const void *a, const void *b) {
  const id_load *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? 1 : -1;
  return (x->tie > y->tie) - (x->tie < y->tie);
}

/* Min-heap of blocks keyed by (ratings, ids) assigned so far. */
static void heap_down(uint64_t *load, uint32_t *ids, int *heap, int n, int i) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && (load[heap[l]] < load[heap[m]] ||
                  (load[heap[l]] == load[heap[m]] && ids[heap[l]] < ids[heap[m]])))
      m = l;
    if (r < n && (load[heap[r]] < load[heap[m]] ||
                  (load[heap[r]] == load[heap[m]] && ids[heap[r]] < ids[heap[m]])))
      m = r;
    if (m == i) return;
    int t = heap[i];
    heap[i] = heap[m];
    heap[m] = t;
    i = m;
  }
}

/* Heaviest ids first, each to the block with the least load so far (ties
 * broken by a seeded shuffle, so the assignment is deterministic and light
 * ids spread evenly): popular ids in a power-law data set would otherwise
 * make blocks, and so workers, uneven. */
int strata_schedule_balance(uint32_t n, int B, uint64_t seed, const uint32_t *count,
                            uint32_t *block, uint32_t *local, uint32_t *sizes) {
  id_load *ord = strata_malloc((size_t)(n ? n : 1) * sizeof *ord);
  uint64_t *load = strata_calloc((size_t)B, sizeof *load);
  int *heap = strata_malloc((size_t)B * sizeof *heap);
  if (!ord || !load || !heap) {
    strata_free(ord);
    strata_free(load);
    strata_free(heap);
    return strata_err_set(STRATA_ENOMEM, "out of memory balancing %u ids over %d blocks", n, B);
  }
  strata_rng rng;
  strata_rng_seed(&rng, seed);
  for (uint32_t i = 0; i < n; i++) ord[i] = (id_load){i, count[i], (uint32_t)strata_rng_next(&rng)};
  qsort(ord, n, sizeof *ord, by_count_desc);
  for (int b = 0; b < B; b++) {
    heap[b] = b;
    sizes[b] = 0;
  }
  for (uint32_t x = 0; x < n; x++) {
    int b = heap[0];
    block[ord[x].id] = (uint32_t)b;
    local[ord[x].id] = sizes[b]++;
    load[b] += ord[x].count;
    heap_down(load, sizes, heap, B, 0);
  }
  strata_free(ord);
  strata_free(load);
  strata_free(heap);
  return 0;
}
