/*
 * comm/transport.h - waits on any transport beyond the public ones of
 * strata/transport.h (internal to libstrata; comm/transport.c).
 */
#ifndef STRATA_COMM_TRANSPORT_H
#define STRATA_COMM_TRANSPORT_H

#include "strata/transport.h"

/* strata_comm_finalize for a program about to exit with `code`: should
 * another thread fault while MPI finalises (Open MPI 4.1 may, after the
 * job's last message: comm/mpi_transport.c), the process ends at once with
 * that code, quietly. A fault of the calling thread is reported as ever. */
void strata__comm_finalize(strata_transport *t, int code);
/* Cancels the outstanding receives among reqs[0..n) (requests with
 * expect != 0, none cancelled before; null ones and sends are only tested)
 * and waits, polling at least every STRATA__WAIT_PROMPT, until the
 * transport is done with each of them or until `until` (strata_now time):
 * afterwards nothing lands in their buffers, which may be freed. Sends
 * still outstanding are left as they are. Returns 0, or STRATA_ECOMM with a
 * message when a receive was still outstanding at `until` (its buffer must
 * be kept). */
int strata__comm_cancel(const strata_transport *t, strata_req *reqs, int n, double until);

#endif
