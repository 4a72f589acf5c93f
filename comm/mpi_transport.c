/*
 * MPI implementation of strata_transport. The only file that includes mpi.h.
 */
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "comm/live.h"
#include "comm/transport.h"
#include "strata/core.h"
#include "strata/transport.h"

_Static_assert(sizeof(MPI_Request) <= sizeof(uint64_t), "MPI_Request must fit a strata_req");

/* A strata_req stores the MPI_Request bits plus one, so that a zeroed
 * strata_req stays "null" whatever MPI_REQUEST_NULL's representation is. */
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
  req->expect = 0;
  return 0;
}

static int mpi_irecv(void *impl, void *buf, size_t len, int src, int tag, strata_req *req) {
  (void)impl;
  if (len > INT_MAX) return strata_err_set(STRATA_ETOOBIG, "message of %zu bytes exceeds INT_MAX", len);
  MPI_Request r;
  if (MPI_Irecv(buf, (int)len, MPI_BYTE, src, tag, MPI_COMM_WORLD, &r) != MPI_SUCCESS)
    return strata_err_set(STRATA_ECOMM, "MPI_Irecv from rank %d failed", src);
  req->h = pack_req(r);
  req->expect = (uint64_t)len + 1;
  return 0;
}

static int mpi_fail(const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, text, &n);
  return strata_err_set(STRATA_ECOMM, "%s failed: %s", what, text);
}

/* A completed receive must have brought exactly the bytes it was posted for:
 * a mismatch means the two sides disagree about the protocol. */
static int check_len(const strata_req *req, const MPI_Status *st) {
  if (!req->expect) return 0;
  int got = 0;
  MPI_Get_count(st, MPI_BYTE, &got);
  if ((uint64_t)got + 1 != req->expect)
    return strata_err_set(STRATA_ECOMM, "message from rank %d (tag %d) has %d bytes, expected %llu",
                          st->MPI_SOURCE, st->MPI_TAG, got,
                          (unsigned long long)(req->expect - 1));
  return 0;
}

/* A receive that was cancelled completed without a message: nothing to
 * check. */
static int check_done(const strata_req *req, const MPI_Status *st) {
  int cancelled = 0;
  if (req->expect) MPI_Test_cancelled(st, &cancelled);
  return cancelled ? 0 : check_len(req, st);
}

static int mpi_test(void *impl, strata_req *req, int *done) {
  (void)impl;
  *done = 1;
  if (req->h == 0) return 0;
  MPI_Request r = unpack_req(req->h);
  MPI_Status st;
  int flag = 0, err = MPI_Test(&r, &flag, &st);
  if (err != MPI_SUCCESS) return mpi_fail("MPI_Test", err);
  if (!flag) {
    *done = 0;
    return 0;
  }
  int rc = check_done(req, &st);
  req->h = 0;
  return rc;
}

static int mpi_test_all(void *impl, strata_req *reqs, int n, int *all) {
  (void)impl;
  *all = 1;
  int live = 0;
  for (int i = 0; i < n; i++) live += reqs[i].h != 0;
  if (!live) return 0;
  MPI_Request *mr = strata_malloc((size_t)live * sizeof *mr);
  int *map = strata_malloc((size_t)live * sizeof *map);
  int *idx = strata_malloc((size_t)live * sizeof *idx);
  MPI_Status *st = strata_malloc((size_t)live * sizeof *st);
  int rc = 0;
  if (!mr || !map || !idx || !st) {
    rc = strata_err_set(STRATA_ENOMEM, "out of memory testing %d requests", live);
    goto done;
  }
  for (int i = 0, k = 0; i < n; i++)
    if (reqs[i].h) {
      mr[k] = unpack_req(reqs[i].h);
      map[k++] = i;
    }
  int outcount = 0, err = MPI_Testsome(live, mr, &outcount, idx, st);
  if (err != MPI_SUCCESS) {
    rc = mpi_fail("MPI_Testsome", err);
    goto done;
  }
  for (int j = 0; j < outcount && outcount != MPI_UNDEFINED; j++) {
    strata_req *q = &reqs[map[idx[j]]];
    if (!rc) rc = check_done(q, &st[j]);
    q->h = 0;
  }
  *all = outcount != MPI_UNDEFINED && outcount == live;
done:
  strata_free(mr);
  strata_free(map);
  strata_free(idx);
  strata_free(st);
  return rc;
}

static int mpi_poll(void *impl, int tag, int *got, int *src, void **buf, size_t *len) {
  (void)impl;
  *got = 0;
  *buf = NULL;
  *len = 0;
  MPI_Message msg;
  MPI_Status st;
  int flag = 0, err = MPI_Improbe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &msg, &st);
  if (err != MPI_SUCCESS) return mpi_fail("MPI_Improbe", err);
  if (!flag) return 0;
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  /* A matched message must be received whatever happens next. */
  void *b = strata_malloc(n ? (size_t)n : 1);
  if (!b) {
    char sink;
    MPI_Mrecv(&sink, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    return strata_err_set(STRATA_ENOMEM, "out of memory receiving %d bytes from rank %d", n,
                          st.MPI_SOURCE);
  }
  err = MPI_Mrecv(b, n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
  if (err != MPI_SUCCESS) {
    strata_free(b);
    return mpi_fail("MPI_Mrecv", err);
  }
  *got = 1;
  *src = st.MPI_SOURCE;
  *buf = b;
  *len = (size_t)n;
  return 0;
}

static int mpi_cancel(void *impl, strata_req *req) {
  (void)impl;
  if (req->h == 0 || req->expect == 0) return 0;
  MPI_Request r = unpack_req(req->h);
  int err = MPI_Cancel(&r);
  return err == MPI_SUCCESS ? 0 : mpi_fail("MPI_Cancel", err);
}

/* When every rank of the job runs on this host (Open MPI says so in the
 * environment it hands each rank), MPI needs no network: only the shared
 * memory and self transports are loaded, so that no rank listens on a
 * network address (Open MPI's TCP transport listens on every interface).
 * A transport list the user chose (--mca btl ..., OMPI_MCA_btl) stands. */
static void local_transports_only(void) {
  const char *size = getenv("OMPI_COMM_WORLD_SIZE"), *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!size || !local || strcmp(size, local) || getenv("OMPI_MCA_btl")) return;
  setenv("OMPI_MCA_btl", "self,vader", 0);
}

int strata_comm_init(int *argc, char ***argv, strata_transport *t) {
  int provided = 0;
  memset(t, 0, sizeof *t);
  local_transports_only();
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
  t->test_all = mpi_test_all;
  t->poll = mpi_poll;
  t->cancel = mpi_cancel;
  return 0;
}

void strata_comm_finalize(strata_transport *t) {
  (void)t;
  MPI_Finalize();
}

/* Open MPI 4.1 may fault inside MPI_Finalize, on its own progress thread
 * (like open-mpi/ompi#10117): orte_finalize closes the PMIx framework,
 * which unloads mca_pmix_ext3x.so, while a PMIx callback that component
 * shifted onto Open MPI's event thread is still queued; joining that thread
 * runs the callback, in code no longer mapped ("Address not mapped"). A
 * program of MPI_Init, MPI_Finalize and nothing else did it in one or two
 * runs of a hundred on a loaded machine (docs/failure.md). By then the
 * job's messages are all through, so such a fault ends the rank with the
 * code it was about to exit with. */
static pid_t g_final_tid;
static int g_final_code;
static struct sigaction g_old_segv, g_old_bus;

static void on_final_fault(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  if ((pid_t)syscall(SYS_gettid) != g_final_tid) _exit(g_final_code);
  /* The finalising thread's own fault is a real one: the handler before
   * (Open MPI's, a sanitizer's, the default) takes it as it happens again. */
  sigaction(sig, sig == SIGSEGV ? &g_old_segv : &g_old_bus, NULL);
  if (si->si_code <= 0) raise(sig); /* sent, not caused: it would not recur */
}

void strata__comm_finalize(strata_transport *t, int code) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_final_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  g_final_tid = (pid_t)syscall(SYS_gettid);
  g_final_code = code;
  int segv = sigaction(SIGSEGV, &sa, &g_old_segv) == 0, bus = sigaction(SIGBUS, &sa, &g_old_bus) == 0;
  strata_comm_finalize(t);
  if (segv) sigaction(SIGSEGV, &g_old_segv, NULL);
  if (bus) sigaction(SIGBUS, &g_old_bus, NULL);
}

void strata_comm_abort(strata_transport *t, int code) {
  (void)t;
  /* With a liveness watch, the ranks it keeps end on their own, quietly
   * (LOST), and so does every rank they keep: the job ends as after a lost
   * rank, each process by _exit. MPI_Abort then would race mpirun tearing
   * the job down over those exits, and was seen to hang there for good. */
  if (strata__live_watching()) {
    strata__live_abandon();
    _exit(code);
  }
  MPI_Abort(MPI_COMM_WORLD, code);
}
