/*
 * Rounds (strata/round.h), the parts both sides use (internal to
 * libstrata): the plan's storage and the two wire messages.
 *
 * Coordinator -> worker, one message per worker per step (TAG_ROUND):
 *   round_head, then the values of round apply_index to apply (apply_len
 *   bytes), then n_ids uint32 ids and payload_len bytes of the worker's work
 *   in round `index`; each section starts at a multiple of 8 bytes. index
 *   -1: no work (a drain step); apply_index -1: nothing to apply.
 *   ROUND_END_PASS: the pass's last step.
 * Worker -> coordinator (TAG_PUSH), once per round in which it had work:
 *   push_head, then for each of its tasks in schedule order a push_part and
 *   its bytes, each section at a multiple of 8 bytes.
 * Both sides check a message's every length against its size before using
 * it.
 */
#ifndef STRATA_CORE_ROUND_H
#define STRATA_CORE_ROUND_H

#include <stdint.h>

#include "strata/round.h"

/* Step flags: the pass's last step; the run's last pass (schedule_round
 * said the run converged). */
enum { STRATA__ROUND_END_PASS = 1, STRATA__ROUND_END_RUN = 2 };

typedef struct strata__round_head {
  int64_t index;       /* the round whose work follows; -1: none */
  int64_t apply_index; /* the round whose values come first; -1: none */
  int32_t pass, in_pass; /* of `index`, or of the drain */
  int32_t flags;
  uint32_t n_ids;
  uint64_t apply_len, payload_len;
} strata__round_head;

typedef struct strata__push_head {
  int64_t index;
  int32_t worker, n_parts;
  double compute_s; /* this worker's apply and push time for this step */
  double wait_s;    /* its wait for this step's message */
} strata__push_head;

typedef struct strata__push_part {
  int32_t data;
  int32_t pad;
  uint64_t len;
} strata__push_part;

/* The plan: per worker its ids and payload. */
struct strata_round_plan {
  int P;
  strata_bytes *ids, *payload; /* P each */
};

int strata__plan_init(strata_round_plan *p, int P);
void strata__plan_clear(strata_round_plan *p);
void strata__plan_free(strata_round_plan *p);
/* Whether any worker has work. */
int strata__plan_any(const strata_round_plan *p);

/* The message to worker w: head (its n_ids and payload_len are filled
 * here from plan, when plan is not NULL), then apply bytes, then the
 * worker's work. out is cleared first. 0 or STRATA_ENOMEM. */
int strata__round_pack(strata_bytes *out, strata__round_head *head, const void *apply,
                       const strata_round_plan *plan, int w);
/* Checks a received message and points into it: the head (copied), the
 * values to apply and the work. 0, or STRATA_ECOMM with a message. */
int strata__round_unpack(const void *msg, size_t len, strata__round_head *head,
                         const void **apply, strata_round_work *work);

/* Pushes: begins one (clearing out), adds a part, and reads one back.
 * unpack checks the message and calls take(ud, data, bytes, len) for each
 * part; 0, STRATA_ECOMM, or take's error. */
int strata__push_begin(strata_bytes *out, const strata__push_head *head);
int strata__push_add(strata_bytes *out, int data, const void *bytes, size_t len);
/* Ends the push: sets the part count. */
void strata__push_end(strata_bytes *out, int n_parts);
int strata__push_unpack(const void *msg, size_t len, strata__push_head *head,
                        int (*take)(void *ud, int data, const void *bytes, size_t len), void *ud);

/* The buffer's own memory, released. */
void strata__bytes_free(strata_bytes *b);

#endif
