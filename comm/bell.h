/*
 * comm/bell.h - doorbells: waking a rank that waits for a message (internal
 * to libstrata).
 *
 * MPI has no file descriptor to wait on, so a rank that must notice a
 * message at once would poll in a loop, and a rank that polls takes a core
 * from the others. A round run (strata/round.h) has its coordinator and
 * workers wait for each other's messages every round, so each rank there
 * sleeps in the back-off wait with its doorbell's descriptor watched
 * (strata__wait_conf.wake_fd), and whoever sends it a message rings it
 * right after the send: the sleeper wakes at once and tests MPI.
 *
 * A doorbell is a datagram socket in Linux's abstract namespace, named by
 * the run's random id and the rank: it needs no file and vanishes with the
 * process. A ring carries nothing: whoever rings a bell (any process on the
 * host that learns its name from /proc/net/unix) can only wake the rank,
 * which then finds no message and sleeps again; nothing that arrives on
 * the socket is acted on. Ranks on other hosts cannot be rung (their names
 * are not in this host's namespace): a ring to one fails quietly, and the
 * wait's back-off timer notices the message instead.
 */
#ifndef STRATA_COMM_BELL_H
#define STRATA_COMM_BELL_H

#include <stdint.h>

/* Opens this rank's doorbell for the run `id` (the same on every rank).
 * Returns its descriptor for strata__wait_conf.wake_fd, or -1 when it
 * could not be made (then rings to it fail and waits fall back on their
 * timers). Idempotent. */
int strata__bell_open(uint64_t id, int rank);
/* The descriptor of this rank's doorbell, or -1 when it has none. */
int strata__bell_fd(void);
/* Rings rank `rank`'s doorbell (best effort, never blocks). */
void strata__bell_ring(int rank);
/* Empties the doorbell: the rings so far are taken. */
void strata__bell_drain(void);
/* Closes this rank's doorbell. */
void strata__bell_close(void);
/* A fresh run id, from the system's random source. */
uint64_t strata__bell_new_id(void);

#endif
