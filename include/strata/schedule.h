/*
 * strata/schedule.h - static schedules of strata.
 *
 * A schedule lists, for every sub-epoch of one data pass and every worker,
 * the tasks that worker runs in that sub-epoch, in order. A task names one
 * data block, the resident parameter block it updates (stays on its worker)
 * and the rotating parameter block it updates (moves between workers). The
 * same schedule repeats every pass. The engine derives every block transfer
 * from it: after a worker's last use of a rotating block in a sub-epoch, the
 * block travels to the worker that uses it next.
 *
 * Rules strata_schedule_validate enforces (what makes a set of blocks a
 * stratum, plus what the engine needs):
 *  - every data block is processed exactly once per pass;
 *  - within a sub-epoch a rotating block is used by exactly one task (every
 *    rotating block is used in every sub-epoch), and a resident block by at
 *    most one;
 *  - a resident block is only ever used by one worker (it never moves).
 * A shared schedule (data-parallel: every worker holds its own copy of every
 * rotating block, as for sufficient-factor apps, strata/sf.h) drops the
 * rotating rule: any task may use any rotating block. Only the modes that
 * give every worker every rotating block (sfb and the parameter-server
 * modes) and serial mode run a shared schedule.
 */
#ifndef STRATA_SCHEDULE_H
#define STRATA_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "strata/error.h"

typedef struct strata_task {
  int32_t data;     /* data block id, 0..n_data-1 */
  int32_t resident; /* resident parameter block id, 0..n_resident-1 */
  int32_t rotating; /* rotating parameter block id, 0..n_rotating-1; -1 in a
                       schedule without rotating blocks (n_rotating 0) */
} strata_task;

typedef struct strata_schedule {
  int n_workers;
  int n_subepochs;
  int n_data, n_resident, n_rotating;
  /* 1: shared (above). Set between strata_schedule_init and finish. */
  int shared;
  /* Tasks of (sub-epoch s, worker w) are tasks[offsets[s*n_workers + w] ..
   * offsets[s*n_workers + w + 1]), valid after strata_schedule_finish. */
  int *offsets;
  strata_task *tasks;
  int n_tasks;
  /* lookup tables filled by finish: O(1) owner queries */
  int *data_owner;     /* n_data */
  int *resident_owner; /* n_resident (-1: unused) */
  int *holder;         /* n_subepochs * n_rotating */
  /* building state */
  int cap;
  int32_t *keys; /* s * n_workers + w of each added task */
  int finished;
} strata_schedule;

/* Prepares an empty schedule. 0, STRATA_EINVAL (a count < 1; n_rotating may
 * be 0: a round app's, strata/round.h) or STRATA_ENOMEM. */
STRATA_EXPORT int strata_schedule_init(strata_schedule *s, int n_workers, int n_subepochs,
                                       int n_data, int n_resident, int n_rotating);
/* Releases a schedule; safe on a zeroed one. */
STRATA_EXPORT void strata_schedule_close(strata_schedule *s);

/* Appends a task for worker w in sub-epoch sub. Tasks of one (sub, w) keep
 * the order they were added in. STRATA_EINVAL when an id is out of range. */
STRATA_EXPORT int strata_schedule_add(strata_schedule *s, int sub, int w, strata_task task);

/* Groups the added tasks by (sub-epoch, worker) and validates the result
 * (rules above). STRATA_ESCHED with a message naming the broken rule. */
STRATA_EXPORT int strata_schedule_finish(strata_schedule *s);

/* Checks the rules above on a finished schedule. 0 or STRATA_ESCHED. */
STRATA_EXPORT int strata_schedule_validate(const strata_schedule *s);

/* The tasks of worker w in sub-epoch sub, and their count. */
STRATA_EXPORT const strata_task *strata_schedule_tasks(const strata_schedule *s, int sub, int w,
                                                      int *n);

/* Owner queries on a finished schedule, O(1). */
/* Worker that processes data block d (-1 if none). */
STRATA_EXPORT int strata_schedule_data_owner(const strata_schedule *s, int d);
/* Worker that owns resident block r (-1 if unused). */
STRATA_EXPORT int strata_schedule_resident_owner(const strata_schedule *s, int r);
/* Worker that uses rotating block r in sub-epoch sub (-1 if none; in a
 * shared schedule the lowest-numbered worker that uses it). */
STRATA_EXPORT int strata_schedule_rotating_holder(const strata_schedule *s, int r, int sub);

/*
 * Gemulla's diagonal strata on a B x B blocking with P workers (1 <= P <= B):
 * data block (i, j) has id i*B + j, resident block i (row side), rotating
 * block j (column side). Row blocks are dealt to workers in contiguous runs
 * (worker of row i = floor(i * P / B)); in sub-epoch t, row i processes
 * column block (i + t) mod B. Every column block therefore moves from row i
 * to row i - 1 between sub-epochs: to the previous worker on the ring, or
 * nowhere when both rows share a worker. Produces a finished schedule.
 */
STRATA_EXPORT int strata_schedule_diagonal(strata_schedule *s, int P, int B);

/*
 * Data-parallel minibatches (sufficient-factor apps, strata/sf.h): C
 * sub-epochs, one per clock of a pass; in sub-epoch c worker p runs one
 * task: data block c * P + p (its minibatch of clock c), resident block p,
 * rotating block 0. Shared; produces a finished schedule. 0, STRATA_EINVAL
 * (P or C < 1, or P * C beyond an int) or STRATA_ENOMEM.
 */
STRATA_EXPORT int strata_schedule_minibatches(strata_schedule *s, int P, int C);

/*
 * Shards (round apps, strata/round.h): one sub-epoch in which worker w runs
 * the tasks (data block d, resident block d) of a contiguous run of blocks,
 * d in [n w / P, n (w + 1) / P) (worker floor(d P / n)), and no rotating
 * blocks. Produces a finished schedule. 0, STRATA_EINVAL (P < 1 or n < P)
 * or STRATA_ENOMEM.
 */
STRATA_EXPORT int strata_schedule_shards(strata_schedule *s, int P, int n);

/* Deals n ids (users, items, documents, words) to B blocks so that every
 * block carries about the same load (count[i] is id i's: ratings, tokens):
 * block[i] gets id i's block, local[i] its index inside it, sizes[b] the
 * number of ids in block b. Deterministic for seed. 0 or STRATA_ENOMEM. */
STRATA_EXPORT int strata_schedule_balance(uint32_t n, int B, uint64_t seed, const uint32_t *count,
                                          uint32_t *block, uint32_t *local, uint32_t *sizes);

/* Serialises a finished schedule into a strata_malloc'd buffer. */
STRATA_EXPORT int strata_schedule_pack(const strata_schedule *s, void **buf, size_t *len);
/* Rebuilds (and validates) a schedule from strata_schedule_pack's bytes. */
STRATA_EXPORT int strata_schedule_unpack(strata_schedule *s, const void *buf, size_t len);

/* Row range [*lo, *hi) of chunk c when nrows rows are cut into `depth`
 * near-equal pipeline chunks (0 <= c < depth). Chunks may be empty. */
static inline void strata_chunk_rows(uint32_t nrows, int depth, int c, uint32_t *lo,
                                     uint32_t *hi) {
  *lo = (uint32_t)((uint64_t)nrows * (uint64_t)c / (uint64_t)depth);
  *hi = (uint32_t)((uint64_t)nrows * (uint64_t)(c + 1) / (uint64_t)depth);
}

#endif
