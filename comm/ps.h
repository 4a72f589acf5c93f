/*
 * Parameter-server internals (not installed): the wire format and the pieces
 * of a server shard and a client that need no MPI, so that unit tests can
 * drive them directly: vector clocks, the per-clock oplog that coalesces
 * writes, and the queue of reads waiting for a shard's clock.
 */
#ifndef STRATA_COMM_PS_H
#define STRATA_COMM_PS_H

#include <stddef.h>
#include <stdint.h>

#include "strata/error.h"

/* Message types. To a server shard (tag conf.tag): UPDATE, READ, SNAP, BYE.
 * To a client (tag conf.tag + 1): ROWS, FIN. RULE, either way, is a
 * consistency rule's own (comm/rule.h). Messages between two ranks on one
 * tag arrive in order, which the protocol relies on: a client sends SNAP
 * for clock t before its UPDATE stamped t - 1, so every SNAP for t is at the
 * shard when the shard's clock reaches t. */
enum { PS_UPDATE = 1, PS_READ = 2, PS_BYE = 3, PS_ROWS = 4, PS_FIN = 5, PS_SNAP = 6, PS_RULE = 7 };

/* ROWS flag: not the answer to a READ but rows the shard sends on its own
 * (a rule's push); ESSP's pushes also say that every row of the shard the
 * client has subscribed to is current as of `clock`. */
#define PS_PUSH 1u
/* ROWS flag: rows of the pure snapshot `clock` (every update stamped
 * < clock, none later), the answer to a SNAP. */
#define PS_SNAPSHOT 2u
/* UPDATE flag: a batch sent before its clock ends (a rule's flush): it
 * does not end the sender's clock; the batch that does comes later. */
#define PS_EARLY 4u

typedef struct ps_hdr {
  uint32_t type;
  int32_t from;   /* sender's worker index */
  int32_t clock;  /* UPDATE: stamp; READ: minimum data age wanted; SNAP: the
                     snapshot wanted; ROWS: data age (or the snapshot) */
  int32_t own;    /* ROWS: the receiver's first `own` batches to this shard
                     are included (from a BSP shard: those in its pure copy,
                     which is all it sends) */
  uint32_t nrows; /* RULE: words that follow */
  uint32_t flags;
  uint32_t seq; /* UPDATE: the sender's batches to this shard before it */
  uint32_t pad;
} ps_hdr;
/* Followed by uint32_t rows[nrows] (ascending for UPDATE and ROWS; a
 * RULE's words) and, for UPDATE and ROWS, float values[nrows * row_len]. */

/* Bytes of a message with n rows of row_len floats (values when with_vals). */
size_t ps_msg_size(uint32_t n, uint32_t row_len, int with_vals);
/* Checks a received message's length against its header; STRATA_ECOMM. */
int ps_msg_check(const void *buf, size_t len, uint32_t row_len, int src);
static inline uint32_t *ps_msg_rows(void *buf) { return (uint32_t *)((ps_hdr *)buf + 1); }
static inline float *ps_msg_vals(void *buf) {
  return (float *)(ps_msg_rows(buf) + ((ps_hdr *)buf)->nrows);
}

/* ---- vector clock of a server shard ---- */
typedef struct ps_vclock {
  int n;
  int32_t *c;  /* c[w]: client w's updates stamped < c[w] have been applied */
  int32_t min; /* min over c: the shard's clock, the data age it serves */
} ps_vclock;

int ps_vclock_init(ps_vclock *v, int n);
void ps_vclock_free(ps_vclock *v);
/* Records client w's batch that ends clock `stamp`, which must be c[w]
 * (clients end one clock at a time, in order): STRATA_ECOMM otherwise.
 * *advanced = 1 when the minimum moved. */
int ps_vclock_tick(ps_vclock *v, int w, int32_t stamp, int *advanced);

/* ---- oplog: one clock's writes, coalesced per row ---- */
typedef struct ps_oplog {
  uint32_t n_rows, row_len;
  float *delta;     /* n_rows * row_len; zero outside pending rows */
  uint8_t *touched; /* n_rows: PS_OPLOG_PENDING | PS_OPLOG_LISTED */
  uint32_t *list;   /* rows listed, in first-touch order (pending or forgotten) */
  uint32_t n;
} ps_oplog;
#define PS_OPLOG_PENDING 1u /* the row has a pending sum */
#define PS_OPLOG_LISTED 2u  /* the row is in list */

int ps_oplog_init(ps_oplog *o, uint32_t n_rows, uint32_t row_len);
void ps_oplog_free(ps_oplog *o);
/* Adds delta to row's pending sum. */
void ps_oplog_add(ps_oplog *o, uint32_t row, const float *delta);
/* Pending sum of a row, or NULL when it has none. */
const float *ps_oplog_row(const ps_oplog *o, uint32_t row);
/* Builds the UPDATE message for the pending rows r with r % P == shard
 * (ascending; with rows given, only those of rows[0..n)), stamped `stamp`
 * from worker `from`, its seq and flags as given. *out is strata_malloc'd.
 * STRATA_ENOMEM. */
int ps_oplog_pack(const ps_oplog *o, int shard, int P, int from, int32_t stamp, uint32_t seq,
                  uint32_t flags, const uint32_t *rows, uint32_t n, void **out, size_t *len);
/* Drops a row's pending sum (it went in an early batch). */
void ps_oplog_forget(ps_oplog *o, uint32_t row);
/* Forgets every pending write (cost proportional to the rows listed). */
void ps_oplog_clear(ps_oplog *o);

/* ---- a shard's pure snapshot ---- */
/* The shard's rows holding exactly the updates stamped < clock from every
 * worker, and none later: batches stamped >= clock are held (copied) until
 * every worker has sent its batch of that stamp, then added in (stamp,
 * worker) order, so the snapshot's values do not depend on arrival order. */
typedef struct ps_snapshot {
  int P;
  uint32_t n_local, row_len;
  float *vals;  /* n_local rows; local row l is global row me + P * l */
  int32_t clock;
  void **held;  /* UPDATE messages stamped >= clock, as received (owned) */
  int n_held;
  size_t cap_held;
} ps_snapshot;

/* Starts at clock 0 with vals (n_local * row_len floats, copied).
 * STRATA_ENOMEM. */
int ps_snapshot_init(ps_snapshot *s, int P, uint32_t n_local, uint32_t row_len,
                     const float *vals);
void ps_snapshot_free(ps_snapshot *s);
/* Takes an UPDATE (strata_malloc'd) whose stamp is >= s->clock and whose
 * rows are on this shard (checked by the caller); the snapshot frees it.
 * STRATA_ENOMEM, and the caller keeps it. */
int ps_snapshot_hold(ps_snapshot *s, void *update);
/* Moves the snapshot to `clock` (every worker has sent its batches stamped
 * < clock): adds the held batches stamped < clock, in (stamp, worker, seq)
 * order, and drops them. */
void ps_snapshot_advance(ps_snapshot *s, int32_t clock);

/* ---- reads waiting for the shard's clock ---- */
typedef struct ps_read {
  int client;
  int32_t min_age;
  uint32_t n;
  uint32_t *rows; /* owned */
} ps_read;

typedef struct ps_pending {
  ps_read *v;
  int n;
  size_t cap;
} ps_pending;

/* Queues a read (rows copied). STRATA_ENOMEM. */
int ps_pending_add(ps_pending *q, int client, int32_t min_age, const uint32_t *rows, uint32_t n);
/* Removes the first queued read with min_age <= clock into *out (the caller
 * frees out->rows); returns 1, or 0 when none is ready. Reads come out in
 * arrival order among the ready ones. */
int ps_pending_take(ps_pending *q, int32_t clock, ps_read *out);
void ps_pending_free(ps_pending *q);

#endif
