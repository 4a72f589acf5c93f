/*
 * MPI implementation of strata_transport. The only file that includes mpi.h.
 */
#include <limits.h>
#include <mpi.h>
#include <string.h>
#include <time.h>

#include "strata/transport.h"

_Static_assert(sizeof(MPI_Request) <= sizeof(uint64_t), "MPI_Request must fit a strata_req");

/* A strata_req stores the MPI_Request bits plus one, so that a zeroed
 * strata_req stays "null" whatever MPI_REQUEST_NULL's representation is. The
 * expected length of a receive is kept beside it in a small side table keyed
 * by request; receives are few at a time, so a linear table is enough. */
typedef struct {
  uint64_t h;
  int len;
} recv_len;

#define MAX_RECV 4096
static recv_len recv_lens[MAX_RECV];
static int recv_hw; /* slots at or past this index are all free */

static uint64_t pack_req(MPI_Request r) {
  uint64_t v = 0;
  memcpy(&v, &r, sizeof r);
  return v + 1;
}

static MPI_Request unpack_req(uint64_t h) {
  MPI_Request r;
  uint64_t v = h - 1;
  memcpy(&r, &v, sizeof r);
  return r;
}

static int mpi_isend(void *impl, const void *buf, size_t len, int dst, int tag, strata_req *req) {
  (void)impl;
  if (len > INT_MAX) return strata_err_set(STRATA_ETOOBIG, "message of %zu bytes exceeds INT_MAX", len);
  MPI_Request r;
  if (MPI_Isend(buf, (int)len, MPI_BYTE, dst, tag, MPI_COMM_WORLD, &r) != MPI_SUCCESS)
    return strata_err_set(STRATA_ECOMM, "MPI_Isend to rank %d failed", dst);
  req->h = pack_req(r);
  return 0;
}

static int mpi_irecv(void *impl, void *buf, size_t len, int src, int tag, strata_req *req) {
  (void)impl;
  if (len > INT_MAX) return strata_err_set(STRATA_ETOOBIG, "message of %zu bytes exceeds INT_MAX", len);
  MPI_Request r;
  if (MPI_Irecv(buf, (int)len, MPI_BYTE, src, tag, MPI_COMM_WORLD, &r) != MPI_SUCCESS)
    return strata_err_set(STRATA_ECOMM, "MPI_Irecv from rank %d failed", src);
  req->h = pack_req(r);
  for (int i = 0; i < MAX_RECV; i++)
    if (recv_lens[i].h == 0) {
      recv_lens[i].h = req->h;
      recv_lens[i].len = (int)len;
      if (i >= recv_hw) recv_hw = i + 1;
      return 0;
    }
  return strata_err_set(STRATA_ECOMM, "more than %d receives outstanding", MAX_RECV);
}

static int mpi_test(void *impl, strata_req *req, int *done) {
  (void)impl;
  *done = 1;
  if (req->h == 0) return 0;
  MPI_Request r = unpack_req(req->h);
  MPI_Status st;
  int flag = 0;
  if (MPI_Test(&r, &flag, &st) != MPI_SUCCESS)
    return strata_err_set(STRATA_ECOMM, "MPI_Test failed");
  if (!flag) {
    *done = 0;
    return 0;
  }
  int rc = 0;
  for (int i = 0; i < recv_hw; i++)
    if (recv_lens[i].h == req->h) {
      int got = 0;
      MPI_Get_count(&st, MPI_BYTE, &got);
      if (got != recv_lens[i].len)
        rc = strata_err_set(STRATA_ECOMM, "message from rank %d (tag %d) has %d bytes, expected %d",
                            st.MPI_SOURCE, st.MPI_TAG, got, recv_lens[i].len);
      recv_lens[i].h = 0;
      while (recv_hw > 0 && recv_lens[recv_hw - 1].h == 0) recv_hw--;
      break;
    }
  req->h = 0;
  return rc;
}

int strata_comm_init(int *argc, char ***argv, strata_transport *t) {
  int provided = 0;
  memset(t, 0, sizeof *t);
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return strata_err_set(STRATA_ECOMM, "MPI_Init_thread failed");
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    return strata_err_set(STRATA_ECOMM, "MPI provides no MPI_THREAD_FUNNELED support");
  }
  /* Errors come back as codes so that the engine can report them itself. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &t->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &t->size);
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  t->tag_ub = flag && ub ? *ub : 32767;
  t->isend = mpi_isend;
  t->irecv = mpi_irecv;
  t->test = mpi_test;
  return 0;
}

void strata_comm_finalize(strata_transport *t) {
  (void)t;
  MPI_Finalize();
}

void strata_comm_abort(strata_transport *t, int code) {
  (void)t;
  MPI_Abort(MPI_COMM_WORLD, code);
}

int strata_comm_wait(const strata_transport *t, strata_req *req) {
  int done = 0;
  while (!done) {
    int rc = t->test(t->impl, req, &done);
    if (rc) return rc;
  }
  return 0;
}

int strata_comm_wait_idle(const strata_transport *t, strata_req *req) {
  long ns = 50000;
  for (;;) {
    int done = 0;
    int rc = t->test(t->impl, req, &done);
    if (rc || done) return rc;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 5000000) ns *= 2;
  }
}
