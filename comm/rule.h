/*
 * A consistency rule of the parameter-server table (internal to libstrata).
 *
 * The table (comm/table.c, strata/table.h) moves rows and deltas: a client
 * cache with read-my-writes, an oplog shipped at every clock end, server
 * shards that apply batches as they come and answer reads, pure snapshots.
 * A rule decides the rest: how fresh a read must be and what it waits for,
 * what a shard sends whom on its own, and what holds a writer back. Each
 * rule is one file in comm/rules/ that defines one strata__table_rule and
 * has one line in the mode table (strata/modes.h); the rule also answers
 * what the engine asks of its mode (core/mode.h: its settings, clock rule,
 * memory and figures).
 *
 * Hooks run on the table's one thread, inside the table's calls; each
 * returns 0 or a negative code with a message (then the table fails: every
 * later call returns the code). A NULL hook does nothing.
 */
#ifndef STRATA_COMM_RULE_H
#define STRATA_COMM_RULE_H

#include "comm/ps.h"
#include "core/mode.h"
#include "strata/table.h"

typedef struct strata__table_rule {
  /* What the engine asks of the rule's mode (core/mode.h). */
  strata__mode_ops mode;

  /* Its state (tb->rule), made at open and freed at free; NULL: none. */
  int (*open)(strata_table *tb);
  void (*free)(strata_table *tb);

  /* ---- client ---- */
  /* The data age rows read at staleness s need (s < 0: the table's own
   * rule), or INT32_MIN when a read takes any copy; NULL: clock - s. */
  int32_t (*need)(const strata_table *tb, int s);
  /* Before a read of rows [lo, hi) checks their age (and before a read
   * that takes any copy returns): may ask for rows or wait. */
  int (*before_read)(strata_table *tb, uint32_t lo, uint32_t hi);
  /* Before inc adds delta to row in the cache and the oplog: may send
   * batches early (strata__table_flush) and wait; sets *taken when it has
   * added the delta itself (through strata__table_add). */
  int (*before_inc)(strata_table *tb, uint32_t row, const float *delta, int *taken);
  /* An UPDATE (its header, rows and values) went to shard X. */
  void (*batch_sent)(strata_table *tb, int X, const void *msg);
  /* Rows of a ROWS message from shard h->from are in the cache. */
  int (*rows_in)(strata_table *tb, const ps_hdr *h, const uint32_t *rows);
  /* refresh asks for rows not of the newest clock too (as the aggressive
   * prefetcher does), for reads that never wait for fresher ones. */
  int eager_refresh;
  /* The longest sleep between the polls of the table's waits (seconds; 0:
   * STRATA__WAIT_PEERS, core/wait.h): shorter for a rule whose waits are
   * round trips between workers. */
  double wait_ceiling;

  /* ---- server shard ---- */
  /* Whether the shards answer every read from their pure copy (the updates
   * stamped < the shard's clock and none later) instead of their live rows,
   * so that a read at clock c sees exactly the others' updates of clocks
   * <= c - 1 (BSP); a shard then adds a batch to its rows only once its
   * clock passes the batch's stamp. Asked once, at open. NULL: never. */
  int (*exact)(const strata_table *tb);
  /* A READ from client w for rows[0..n) of this shard came. */
  int (*read_in)(strata_table *tb, int w, const uint32_t *rows, uint32_t n);
  /* Client w's UPDATE came (added to the shard's live rows, or held for
   * the pure copy when exact). */
  int (*applied)(strata_table *tb, int w, const void *update);
  /* The shard's clock (the minimum of its vector clock) moved. */
  int (*advanced)(strata_table *tb);
  /* Whether the shard may end once every client has left: 0 while the
   * rule still waits for messages of its own. NULL: at once. */
  int (*settled)(const strata_table *tb);

  /* ---- both ---- */
  /* A PS_RULE message (strata__table_rule_send) came: to the shard when
   * side is 0, to the client when 1. */
  int (*message)(strata_table *tb, int side, const void *msg, int src);
} strata__table_rule;

/* The rule of mode m (strata/modes.h), or NULL when m is no table mode
 * (comm/rules.c). */
const strata__table_rule *strata__table_rule_of(strata_mode m);
/* strata_table_open under a given rule (comm/table.c; the rules call into
 * the table, and the table reaches them only through this pointer). */
int strata__table_open_rule(strata_transport *t, const strata_table_conf *conf,
                            const strata__table_rule *rule, const float *init, strata_table **out);

/* ---- the table, as rules see it ---- */

typedef struct strata__kept {
  uint32_t seq;
  void *msg; /* the UPDATE as sent */
} strata__kept;

typedef struct strata__keptq {
  strata__kept *v;
  int n;
  size_t cap;
} strata__keptq;

typedef struct strata__snapwait {
  int32_t id;
  float *out;
  uint64_t left; /* rows still to come */
} strata__snapwait;

typedef struct strata__outmsg {
  strata_req req;
  void *buf;
} strata__outmsg;

struct strata_table {
  strata_transport *t;
  strata_table_conf c;
  const strata__table_rule *rule;
  void *rule_state;
  int P, me;
  uint32_t L;
  int err;
  /* client */
  float *cache;
  int32_t *age;     /* data age of the cached copy */
  int32_t *req_age; /* min age of the outstanding request, -1 none */
  uint8_t *sub;     /* the shard sends this client the row's changes (a rule's subscription) */
  ps_oplog log;
  int32_t clock;
  uint32_t *seq_out;   /* per shard: batches sent to it */
  strata__keptq *kept; /* per shard: batches sent and not yet applied */
  /* Rows read during each of the last `period` clocks, by clock mod period:
   * the prefetcher replays the clock one period back (the same place in the
   * previous pass). */
  int period;
  uint8_t **acc;
  uint32_t **acc_list, *n_acc;
  int fins;
  strata__snapwait *snaps;
  int n_snaps;
  size_t cap_snaps;
  /* server */
  uint32_t n_local; /* rows g = me + P * l */
  float *vals;
  ps_vclock vc;
  uint32_t *seq_in; /* per client: its batches applied */
  ps_pending pend;
  ps_snapshot snap;      /* conf.snapshots or pure: the updates stamped < vc.min */
  int pure;              /* the rule's exact reads: every row this shard sends comes from snap */
  ps_pending snap_reads; /* SNAPs waiting for the snapshot to reach them */
  uint8_t *subs;         /* n_local * P: client w subscribes to local row l */
  int byes, finned;
  /* outgoing */
  strata__outmsg *out;
  int n_out, cap_out;
  strata_req *reqs_scratch;
  strata_table_stats st;
};

/* Local index of global row g on its shard. */
static inline uint32_t strata__table_local(const strata_table *tb, uint32_t g) {
  return g / (uint32_t)tb->P;
}
/* Records rc as the table's failure and returns it. */
int strata__table_fail(strata_table *tb, int rc);
/* Sends buf (len bytes, ownership taken) to worker `to`'s shard (side 0)
 * or client (side 1), counted in bytes_sent. */
int strata__table_post(strata_table *tb, int to, int side, void *buf, size_t len);
/* Shard: sends client w rows[0..n) (ascending, of this shard) as they
 * stand, with ROWS flags `flags` (PS_PUSH: not an answer to a READ). */
int strata__table_send_rows(strata_table *tb, int w, const uint32_t *rows, uint32_t n,
                            uint32_t flags);
/* Sends worker `to` (side as for post) a PS_RULE message: the header's
 * clock and flags fields as given, then n words. */
int strata__table_rule_send(strata_table *tb, int to, int side, int32_t clock, uint32_t flags,
                            const uint32_t *words, uint32_t n);
/* Client: asks the shards for rows [lo, hi) older than `need` that have no
 * request on the way (force > 0: also rows not of the newest clock; force
 * < 0: every row not subscribed to, answered at once and subscribing). */
int strata__table_request(strata_table *tb, const uint32_t *list, uint32_t lo, uint32_t hi,
                          int32_t need, int force);
/* Client: sends the oplog's deltas of rows[0..n) now, each shard's in one
 * batch stamped with the current clock that does not end it (PS_EARLY),
 * and forgets them in the oplog. */
int strata__table_flush(strata_table *tb, const uint32_t *rows, uint32_t n);
/* Client: adds delta to row in the cache and the oplog (what inc does). */
void strata__table_add(strata_table *tb, uint32_t row, const float *delta);
/* Serves until ready(tb, ctx) holds, sleeping between polls; the time
 * counts as waiting (wait_s). */
int strata__table_wait(strata_table *tb, int (*ready)(strata_table *tb, void *ctx), void *ctx);

#endif
