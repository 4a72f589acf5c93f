/*
 * The liveness watch (comm/live.h): a TCP connection from every worker to
 * the coordinator, heartbeats both ways, and a thread per rank that acts on
 * a loss.
 */
#include "comm/live.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/transport.h"
#include "core/wait.h"
#include "strata/core.h"

#define MAGIC 0x7374726cu /* "strl" */
#define MAX_ADDRS 8
#define CONNECT_MS 1000
#define HELLO_S 3.0 /* rank 0 waits this long at most for every worker's connection */
#define LINGER_S 0.3 /* a rank that ends the run waits this long at most for the others to go */

enum { M_HELLO = 1, M_BEAT, M_LOST, M_BYE };

typedef struct live_msg {
  uint32_t magic, type;
  int32_t worker, pass;
  uint64_t steps;
  int32_t waiting, pid;
  double timeout; /* rank 0's beats: the stall timeout in force */
  char host[64];  /* HELLO */
} live_msg;

/* Rank 0's address, sent to every worker over MPI. port 0: unwatched. */
typedef struct live_addr {
  int32_t port, n;
  uint32_t addr[MAX_ADDRS]; /* IPv4, network order */
  char host[64];
} live_addr;

struct live;

/* One connection, and what this end knows of the rank at its other end. */
typedef struct conn {
  struct live *l;
  int fd;
  ev_io io;
  unsigned char buf[sizeof(live_msg)];
  size_t have;
  int worker;      /* rank 0: the worker it is (-1 until its HELLO); a worker: -1 */
  double last_beat;
  int pass;
  uint64_t steps;
  double steps_at; /* when steps last changed */
  int waiting;
  int pid;
  char host[64];
  int bye;
  double timeout;  /* a worker: rank 0's timeout, from its beats */
} conn;

typedef struct live {
  int rank, P;
  strata__live_conf conf;
  struct ev_loop *loop;
  pthread_t thread;
  ev_io accept_io;
  int listen_fd;
  ev_timer beat;
  ev_async wake;
  conn **by_worker; /* rank 0: P entries */
  conn **pending;   /* rank 0: accepted, no HELLO yet */
  int n_pending, cap_pending;
  conn *hub;        /* a worker: its connection to rank 0 */
  char host[64];
  _Atomic int stop; /* 1: leave (BYE), 2: abandon (LOST) */
  _Atomic int identified; /* rank 0: workers whose HELLO came */
  pthread_mutex_t mu; /* guards what the main thread reports below */
  double slowest;
  int summed; /* passes the coordinator has summed: every worker is past them */
  char ckpt_dir[1024];
  int ckpt_passes;
} live;

static live *g_live;
static _Atomic int g_pass = -1;

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static double timeout_now(live *l, int *progress_on) {
  pthread_mutex_lock(&l->mu);
  double slowest = l->slowest;
  pthread_mutex_unlock(&l->mu);
  *progress_on = l->conf.stall_timeout > 0 || slowest > 0;
  return l->conf.stall_timeout > 0 ? l->conf.stall_timeout
                                   : fmax(STRATA__LIVE_FLOOR, STRATA__LIVE_FACTOR * slowest);
}

/* Best effort: a peer that does not read (stopped) must not block the watch. */
static void send_msg(conn *c, uint32_t type, live *l) {
  if (!c || c->fd < 0) return;
  live_msg m;
  memset(&m, 0, sizeof m);
  m.magic = MAGIC;
  m.type = type;
  m.worker = l->rank - 1;
  m.pass = atomic_load_explicit(&g_pass, memory_order_relaxed);
  m.steps = atomic_load_explicit(&strata__steps, memory_order_relaxed);
  m.waiting = atomic_load_explicit(&strata__waiting, memory_order_relaxed) > 0;
  m.pid = (int32_t)getpid();
  snprintf(m.host, sizeof m.host, "%s", l->host);
  if (l->rank == 0) {
    int progress_on;
    m.timeout = timeout_now(l, &progress_on);
  }
  ssize_t n = send(c->fd, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)n;
}

/* "during pass 9 of 20", "while setting up", "after the last pass". */
static void when(char *out, size_t n, int pass, int passes) {
  if (pass < 0)
    snprintf(out, n, "while setting up");
  else if (pass >= passes)
    snprintf(out, n, "after the last pass");
  else
    snprintf(out, n, "during pass %d of %d", pass + 1, passes);
}

/* The run is lost: every rank this one watches hears it (but `from`, who
 * said so), this rank reports (or not) and ends. LOST goes before an
 * orderly close (FIN), and this rank waits a moment for the others to close
 * first: a process that ends with bytes unread resets its connections,
 * and a reset can throw away the LOST still unread at the other end, which
 * would then take the close for a death (`gone`, the lost rank, is not
 * waited for). Stdout is not flushed: the main thread may hold its lock,
 * and nothing it holds matters now. */
static void end_run(live *l, const char *msg, int report, const conn *from, const conn *gone) {
  /* mpirun may send SIGTERM as soon as another rank has ended: this one
   * ends now, without the main thread's word on an interrupt. */
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  struct pollfd fds[64];
  int n = 0;
  conn *one[1] = {l->hub};
  conn **peers = l->rank == 0 ? l->by_worker : one;
  int np = l->rank == 0 ? l->P : 1;
  for (int i = 0; i < np; i++) {
    conn *c = peers[i];
    if (!c || c->fd < 0 || c == from) continue;
    send_msg(c, M_LOST, l);
    shutdown(c->fd, SHUT_WR);
    /* The lost rank will not answer: no waiting for it. */
    if (n < 64 && c != gone) fds[n++] = (struct pollfd){c->fd, POLLIN, 0};
  }
  if (msg && l->conf.on_lost) l->conf.on_lost(l->conf.ud, msg, report);
  char sink[4096];
  for (double until = strata_now() + LINGER_S; n > 0 && strata_now() < until;) {
    if (poll(fds, (nfds_t)n, 20) <= 0) continue;
    for (int i = 0; i < n; i++) {
      if (!fds[i].revents) continue;
      if (recv(fds[i].fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) fds[i--] = fds[--n];
    }
  }
  _exit(1);
}

static void hint(live *l, char *out, size_t n) {
  /* n >= 2 * sizeof ckpt_dir + 100: the message always fits. */
  pthread_mutex_lock(&l->mu);
  if (l->ckpt_passes > 0)
    snprintf(out, n, "; the last checkpoint (after %d passes) is in %s: continue with --resume %s",
             l->ckpt_passes, l->ckpt_dir, l->ckpt_dir);
  else
    out[0] = '\0';
  pthread_mutex_unlock(&l->mu);
}

static void lost_worker(live *l, const conn *c, const char *why) {
  char msg[3200], at[64], tail[2200];
  /* Its last heartbeat may be a pass behind the reports already summed. */
  pthread_mutex_lock(&l->mu);
  int pass = c->pass >= 0 && c->pass < l->summed ? l->summed : c->pass;
  pthread_mutex_unlock(&l->mu);
  when(at, sizeof at, pass, l->conf.passes);
  hint(l, tail, 2200);
  snprintf(msg, sizeof msg, "worker %d (rank %d, pid %d on %s) was lost %s: %s%s", c->worker,
           c->worker + 1, c->pid, c->host, at, why, tail);
  end_run(l, msg, 1, NULL, c);
}

static void lost_hub(live *l, const char *why) {
  char msg[512], at[64];
  when(at, sizeof at, atomic_load(&g_pass), l->conf.passes);
  snprintf(msg, sizeof msg, "worker %d lost the coordinator (rank 0) %s: %s", l->rank - 1, at, why);
  end_run(l, msg, l->rank == 1, NULL, l->hub);
}

static void close_conn(live *l, conn *c) {
  if (c->fd >= 0) {
    ev_io_stop(l->loop, &c->io);
    close(c->fd);
    c->fd = -1;
  }
}

/* A message from the other end. */
static void take(live *l, conn *c, const live_msg *m) {
  double now = strata_now();
  if (m->magic != MAGIC) {
    close_conn(l, c); /* not one of ours */
    return;
  }
  switch (m->type) {
    case M_HELLO:
      if (l->rank != 0 || c->worker >= 0 || m->worker < 0 || m->worker >= l->P ||
          l->by_worker[m->worker]) {
        close_conn(l, c);
        return;
      }
      c->worker = m->worker;
      c->pid = m->pid;
      snprintf(c->host, sizeof c->host, "%.*s", (int)sizeof m->host - 1, m->host);
      l->by_worker[m->worker] = c;
      atomic_fetch_add(&l->identified, 1);
      c->last_beat = c->steps_at = now;
      c->pass = m->pass;
      c->steps = m->steps;
      return;
    case M_BEAT:
      c->last_beat = now;
      /* Starting a pass is progress too: the steps before it may date from
       * before the set-up, which a large load makes longer than the stall
       * timeout. */
      if (m->steps != c->steps || m->pass != c->pass) c->steps_at = now;
      c->pass = m->pass;
      c->steps = m->steps;
      c->waiting = m->waiting;
      if (m->timeout > 0) c->timeout = m->timeout;
      return;
    case M_BYE:
      c->bye = 1;
      return;
    case M_LOST:
      /* The other end found the run lost and reported it. */
      end_run(l, NULL, 0, c, NULL);
      return;
    default:
      close_conn(l, c);
  }
}

static void on_read(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop, (void)revents;
  conn *c = w->data;
  live *l = c->l;
  for (;;) {
    ssize_t n = recv(c->fd, c->buf + c->have, sizeof c->buf - c->have, MSG_DONTWAIT);
    if (n > 0) {
      c->have += (size_t)n;
      if (c->have == sizeof c->buf) {
        live_msg m;
        memcpy(&m, c->buf, sizeof m);
        c->have = 0;
        take(l, c, &m);
        if (c->fd < 0) return;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    /* Closed. Deliberately (BYE), or by the death of its process. */
    int known = l->rank == 0 ? c->worker >= 0 : 1;
    int bye = c->bye;
    close_conn(l, c);
    if (!known || bye) return;
    if (l->rank == 0)
      lost_worker(l, c, "its connection closed: it was killed, crashed or ran out of memory");
    else
      lost_hub(l, "its connection closed: it was killed, crashed or ran out of memory");
    return;
  }
}

static conn *new_conn(live *l, int fd) {
  conn *c = strata_calloc(1, sizeof *c);
  if (!c) return NULL;
  c->l = l;
  c->fd = fd;
  c->worker = -1;
  c->pass = -1;
  c->last_beat = c->steps_at = strata_now();
  ev_io_init(&c->io, on_read, fd, EV_READ);
  c->io.data = c;
  ev_io_start(l->loop, &c->io);
  return c;
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents) {
  (void)loop, (void)revents;
  live *l = w->data;
  for (;;) {
    int fd = accept(l->listen_fd, NULL, NULL);
    if (fd < 0) return;
    set_nonblock(fd);
    if (l->n_pending == l->cap_pending) {
      int cap = l->cap_pending ? 2 * l->cap_pending : 8;
      conn **v = strata_realloc(l->pending, (size_t)cap * sizeof *v);
      if (!v) {
        close(fd);
        continue;
      }
      l->pending = v;
      l->cap_pending = cap;
    }
    conn *c = new_conn(l, fd);
    if (!c) {
      close(fd);
      continue;
    }
    l->pending[l->n_pending++] = c;
  }
}

/* Rank 0's checks: a worker silent or stuck for the timeout; every worker
 * waiting on another, none moving. */
static void check_workers(live *l, double now) {
  int progress_on;
  double T = timeout_now(l, &progress_on);
  char why[256];
  int in_passes = 0, all_waiting = 1;
  double still = INFINITY;
  for (int w = 0; w < l->P; w++) {
    conn *c = l->by_worker[w];
    if (!c || c->fd < 0 || c->bye) continue;
    if (now - c->last_beat > T) {
      snprintf(why, sizeof why,
               "no sign of life for %.1f s (stall timeout %.1f s): it is stopped, or its host hangs",
               now - c->last_beat, T);
      lost_worker(l, c, why);
    }
    if (c->pass < 0 || c->pass >= l->conf.passes) {
      all_waiting = 0;
      continue;
    }
    in_passes++;
    all_waiting &= c->waiting;
    if (now - c->steps_at < still) still = now - c->steps_at;
    if (progress_on && !c->waiting && now - c->steps_at > T) {
      snprintf(why, sizeof why,
               "no progress for %.1f s while it waited for no other rank (stall timeout %.1f s): "
               "it is hung or livelocked in its work",
               now - c->steps_at, T);
      lost_worker(l, c, why);
    }
  }
  if (progress_on && in_passes == l->P && all_waiting && still > T) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "the run made no progress for %.1f s: every worker waits for another (stall timeout "
             "%.1f s)",
             still, T);
    end_run(l, msg, 1, NULL, NULL);
  }
}

static void on_beat(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop, (void)revents;
  live *l = w->data;
  double now = strata_now();
  if (l->rank == 0) {
    for (int i = 0; i < l->P; i++) send_msg(l->by_worker[i], M_BEAT, l);
    check_workers(l, now);
  } else if (l->hub && l->hub->fd >= 0) {
    send_msg(l->hub, M_BEAT, l);
    double T = l->hub->timeout > 0 ? l->hub->timeout : STRATA__LIVE_FLOOR;
    if (!l->hub->bye && now - l->hub->last_beat > T + 1.0) {
      char why[160];
      snprintf(why, sizeof why,
               "no sign of life for %.1f s (stall timeout %.1f s): it is stopped, or its host hangs",
               now - l->hub->last_beat, T);
      lost_hub(l, why);
    }
  }
}

/* The main thread asks the watch to end. */
static void on_wake(struct ev_loop *loop, ev_async *w, int revents) {
  (void)revents;
  live *l = w->data;
  int how = atomic_load(&l->stop);
  if (!how) return;
  uint32_t type = how == 2 ? M_LOST : M_BYE;
  if (l->rank == 0)
    for (int i = 0; i < l->P; i++) send_msg(l->by_worker[i], type, l);
  else
    send_msg(l->hub, type, l);
  ev_break(loop, EVBREAK_ALL);
}

static void *watch_main(void *arg) {
  live *l = arg;
  /* Signals are the main thread's (its waits watch SIGINT and SIGTERM). */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  ev_run(l->loop, 0);
  return NULL;
}

/* Every connection rank 0 accepted is in `pending`, identified or not. */
static void free_live(live *l) {
  if (!l) return;
  for (int i = 0; i < l->n_pending; i++) {
    if (l->pending[i]->fd >= 0) close(l->pending[i]->fd);
    strata_free(l->pending[i]);
  }
  if (l->hub) {
    if (l->hub->fd >= 0) close(l->hub->fd);
    strata_free(l->hub);
  }
  if (l->listen_fd >= 0) close(l->listen_fd);
  if (l->loop) ev_loop_destroy(l->loop);
  pthread_mutex_destroy(&l->mu);
  strata_free(l->pending);
  strata_free(l->by_worker);
  strata_free(l);
}

/* Rank 0: a listening socket on every interface, and the addresses a
 * worker may reach it at (its own loopback when on the same host). */
static int hub_listen(live *l, live_addr *a) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof sa;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 64) ||
      getsockname(fd, (struct sockaddr *)&sa, &len)) {
    close(fd);
    return -1;
  }
  set_nonblock(fd);
  l->listen_fd = fd;
  a->port = ntohs(sa.sin_port);
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) == 0) {
    for (struct ifaddrs *i = ifs; i && a->n < MAX_ADDRS; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      uint32_t ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
      if (ntohl(ip) >> 24 == 127) continue;
      a->addr[a->n++] = ip;
    }
    freeifaddrs(ifs);
  }
  snprintf(a->host, sizeof a->host, "%s", l->host);
  return 0;
}

/* A worker: connects to rank 0 at one of its addresses. */
static int connect_to(uint32_t ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  set_nonblock(fd);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = ip;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  struct pollfd p = {fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  if (poll(&p, 1, CONNECT_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static int worker_connect(live *l, const live_addr *a) {
  if (strcmp(a->host, l->host) == 0) {
    int fd = connect_to(htonl(INADDR_LOOPBACK), a->port);
    if (fd >= 0) return fd;
  }
  for (int i = 0; i < a->n && i < MAX_ADDRS; i++) {
    int fd = connect_to(a->addr[i], a->port);
    if (fd >= 0) return fd;
  }
  return -1;
}

int strata__live_start(strata_transport *t, int tag, const strata__live_conf *conf) {
  if (g_live) return 0;
  live *l = strata_calloc(1, sizeof *l);
  if (!l) return strata_err_set(STRATA_ENOMEM, "out of memory");
  l->rank = t->rank;
  l->P = t->size - 1;
  l->conf = *conf;
  l->listen_fd = -1;
  pthread_mutex_init(&l->mu, NULL);
  gethostname(l->host, sizeof l->host - 1);
  live_addr a;
  memset(&a, 0, sizeof a);
  int rc = 0, ok = (l->loop = ev_loop_new(EVFLAG_AUTO)) != NULL;
  if (l->rank == 0) {
    l->by_worker = strata_calloc((size_t)l->P + 1, sizeof *l->by_worker);
    ok = ok && l->by_worker && hub_listen(l, &a) == 0;
    if (!ok) a.port = 0;
    strata_req *rq = strata_calloc((size_t)l->P + 1, sizeof *rq);
    if (!rq) rc = strata_err_set(STRATA_ENOMEM, "out of memory");
    for (int w = 1; w < t->size && !rc; w++) rc = t->isend(t->impl, &a, sizeof a, w, tag, &rq[w - 1]);
    if (!rc) rc = strata_comm_wait_all_idle(t, rq, l->P);
    strata_free(rq);
    if (ok) {
      ev_io_init(&l->accept_io, on_accept, l->listen_fd, EV_READ);
      l->accept_io.data = l;
      ev_io_start(l->loop, &l->accept_io);
    }
  } else {
    strata_req rq = {0};
    rc = t->irecv(t->impl, &a, sizeof a, 0, tag, &rq);
    if (!rc) rc = strata_comm_wait_idle(t, &rq);
    int fd = !rc && ok && a.port ? worker_connect(l, &a) : -1;
    if (fd < 0 && !rc && a.port)
      strata_log(STRATA_LOG_WARN,
                 "worker %d: cannot reach the coordinator's watch on %s port %d: a lost rank "
                 "will not be noticed",
                 l->rank - 1, a.host, a.port);
    ok = ok && fd >= 0 && (l->hub = new_conn(l, fd)) != NULL;
    if (ok) {
      l->hub->timeout = conf->stall_timeout > 0 ? conf->stall_timeout : STRATA__LIVE_FLOOR;
      send_msg(l->hub, M_HELLO, l);
    } else if (fd >= 0 && !l->hub) {
      close(fd);
    }
  }
  if (!rc && ok) {
    ev_timer_init(&l->beat, on_beat, STRATA__LIVE_BEAT, STRATA__LIVE_BEAT);
    l->beat.data = l;
    ev_timer_start(l->loop, &l->beat);
    ev_async_init(&l->wake, on_wake);
    l->wake.data = l;
    ev_async_start(l->loop, &l->wake);
    if (pthread_create(&l->thread, NULL, watch_main, l) == 0) {
      g_live = l;
      /* Every worker connects before rank 0 goes on: a run that ends at
       * once (bad input) must not close the door on them. */
      for (double until = strata_now() + HELLO_S; l->rank == 0 && strata_now() < until &&
                                                   atomic_load(&l->identified) < l->P;)
        usleep(500);
      return 0;
    }
    strata_log(STRATA_LOG_WARN, "rank %d: cannot start the watch thread: a lost rank will not be "
               "noticed", l->rank);
  }
  free_live(l);
  return rc;
}

static void end_watch(int how) {
  live *l = g_live;
  if (!l) return;
  g_live = NULL;
  atomic_store(&l->stop, how);
  ev_async_send(l->loop, &l->wake);
  pthread_join(l->thread, NULL);
  free_live(l);
}

void strata__live_stop(void) { end_watch(1); }
void strata__live_abandon(void) { end_watch(2); }

void strata__live_pass(int pass) { atomic_store_explicit(&g_pass, pass, memory_order_relaxed); }

void strata__live_pass_time(double seconds) {
  live *l = g_live;
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  if (seconds > l->slowest) l->slowest = seconds;
  l->summed++;
  pthread_mutex_unlock(&l->mu);
}

void strata__live_checkpoint(const char *dir, int passes) {
  live *l = g_live;
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  snprintf(l->ckpt_dir, sizeof l->ckpt_dir, "%s", dir);
  l->ckpt_passes = passes;
  pthread_mutex_unlock(&l->mu);
}
