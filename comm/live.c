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
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/transport.h"
#include "core/interrupt.h"
#include "core/wait.h"
#include "strata/core.h"

#define MAGIC STRATA__LIVE_MAGIC
#define MAX_ADDRS STRATA__LIVE_MAX_ADDRS
#define SECRET STRATA__LIVE_SECRET
#define CONNECT_MS 1000
#define HELLO_S STRATA__LIVE_HELLO_S
#define LINGER_S 0.3 /* a rank that ends the run waits this long at most for the others to go */
#define OWN_SIGNAL_S 0.2 /* rank 0 told of a worker's signal waits this long for its own */
/* Rank 0 keeps at most PENDING_PER_WORKER * P + PENDING_EXTRA connections
 * that have not proven themselves, and logs a refusal at most every
 * REFUSED_LOG_S (the count in the line covers those in between). */
#define PENDING_PER_WORKER 4
#define PENDING_EXTRA 16
#define REFUSED_LOG_S 5.0

enum {
  M_HELLO = STRATA__LIVE_HELLO,
  M_BEAT = STRATA__LIVE_BEAT_MSG,
  M_LOST = STRATA__LIVE_LOST,
  M_BYE = STRATA__LIVE_BYE,
  M_INT = STRATA__LIVE_INT
};

typedef strata__live_msg live_msg;
typedef strata__live_addr live_addr;
typedef strata__live_where live_where;

struct live;

/* One connection, and what this end knows of the rank at its other end. */
typedef struct conn {
  struct live *l;
  int fd;
  ev_io io;
  unsigned char buf[sizeof(live_msg)];
  size_t have;
  int worker;      /* rank 0: the worker it is (-1 until its HELLO proves it); a worker: -1 */
  double since;    /* rank 0: when it was accepted */
  struct sockaddr_in peer; /* rank 0: who connected, for the log */
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
  conn **conns;     /* rank 0: every connection accepted and not yet freed, oldest first */
  int n_conns, cap_conns;
  unsigned char secret[SECRET]; /* rank 0: what a HELLO must carry */
  _Atomic int refused; /* rank 0: connections closed unproven */
  double refused_logged; /* rank 0: when the last refusal was logged */
  conn *hub;        /* a worker: its connection to rank 0 */
  int solo;         /* a serial run: no connections, interrupts only */
  ev_io sig_io;     /* core/interrupt.h's pipe */
  int sig;          /* the signal M_INT carries */
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
  if (type == M_HELLO) memcpy(m.secret, l->secret, sizeof m.secret);
  m.sig = l->sig;
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

/* The run is over: lost (sig 0), or interrupted by signal sig. Every rank
 * this one watches hears it (but `from`, who said so: LOST, or INT with
 * the signal), this rank reports (or not) and ends with exit code 1, or
 * 128 + sig. The message goes before an orderly close (FIN), and this rank
 * waits a moment for the others to close first: a process that ends with
 * bytes unread resets its connections, and a reset can throw away the
 * message still unread at the other end, which would then take the close
 * for a death (`gone`, the lost rank, is not waited for). Stdout is not
 * flushed: the main thread may hold its lock, and nothing it holds
 * matters now. */
static _Noreturn void end_run(live *l, int sig, const char *msg, int report, const conn *from,
                              const conn *gone) {
  /* mpirun may send SIGTERM as soon as another rank has ended: this one
   * ends now, with the code it has. */
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  l->sig = sig;
  struct pollfd fds[64];
  int n = 0;
  conn *one[1] = {l->hub};
  conn **peers = l->rank == 0 ? l->by_worker : one;
  int np = l->rank == 0 ? l->P : 1;
  for (int i = 0; i < np; i++) {
    conn *c = peers[i];
    if (!c || c->fd < 0 || c == from) continue;
    send_msg(c, sig ? M_INT : M_LOST, l);
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
  _exit(sig ? strata__interrupt_code(sig) : 1);
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
  end_run(l, 0, msg, 1, NULL, c);
}

static void lost_hub(live *l, const char *why) {
  char msg[512], at[64];
  when(at, sizeof at, atomic_load(&g_pass), l->conf.passes);
  snprintf(msg, sizeof msg, "worker %d lost the coordinator (rank 0) %s: %s", l->rank - 1, at, why);
  end_run(l, 0, msg, l->rank == 1, NULL, l->hub);
}

/* Where rank 0 stands: the furthest pass a worker said it is in, at least
 * the passes summed (-1 before any worker began one). */
static int coordinator_pass(live *l) {
  pthread_mutex_lock(&l->mu);
  int summed = l->summed;
  pthread_mutex_unlock(&l->mu);
  int pass = -1;
  for (int w = 0; w < l->P; w++)
    if (l->by_worker[w] && l->by_worker[w]->pass > pass) pass = l->by_worker[w]->pass;
  return pass >= 0 && pass < summed ? summed : pass;
}

/* This rank was interrupted (SIGINT or SIGTERM): the run ends on every rank
 * with 128 + sig and one line. A worker tells rank 0, which reports and
 * tells the others, so that one rank prints whichever got the signal, also
 * when mpirun signals every rank at once; rank 0 reports its own. */
static _Noreturn void interrupted(live *l, int sig) {
  if (l->rank > 0 && l->hub && l->hub->fd >= 0) end_run(l, sig, NULL, 0, NULL, NULL);
  char msg[3200], at[64], tail[2200];
  const char *name = strata__interrupt_name(sig);
  if (l->solo) {
    when(at, sizeof at, atomic_load(&g_pass), l->conf.passes);
    hint(l, tail, sizeof tail);
    snprintf(msg, sizeof msg, "interrupted by %s %s%s", name, at, tail);
  } else if (l->rank == 0) {
    when(at, sizeof at, coordinator_pass(l), l->conf.passes);
    hint(l, tail, sizeof tail);
    snprintf(msg, sizeof msg, "rank 0 (the coordinator) was interrupted by %s %s%s", name, at, tail);
  } else {
    /* No word to rank 0 can go: this rank reports. */
    when(at, sizeof at, atomic_load(&g_pass), l->conf.passes);
    snprintf(msg, sizeof msg, "rank %d (worker %d) was interrupted by %s %s", l->rank, l->rank - 1,
             name, at);
  }
  end_run(l, sig, msg, 1, NULL, NULL);
}

/* Rank 0: a signal of its own, noted, or pending while no thread of this
 * process has taken it yet (this thread blocks every signal, so sigpending
 * shows one sent to the process), waiting up to OWN_SIGNAL_S for one. */
static int own_signal(void) {
  for (double until = strata_now() + OWN_SIGNAL_S;; poll(NULL, 0, 5)) {
    int sig = strata__interrupt_signal();
    sigset_t pending;
    if (!sig && sigpending(&pending) == 0)
      sig = sigismember(&pending, SIGTERM) ? SIGTERM : sigismember(&pending, SIGINT) ? SIGINT : 0;
    if (sig || strata_now() >= until) return sig;
  }
}

/* Rank 0: worker c says it was interrupted by sig. */
static void interrupted_worker(live *l, const conn *c, int sig) {
  /* mpirun signals every rank at once, in no fixed order: rank 0 names
   * itself then, as when its own signal comes first, so that the line is
   * the same every time. */
  int own = own_signal();
  if (own) interrupted(l, own);
  char msg[3200], at[64], tail[2200];
  pthread_mutex_lock(&l->mu);
  int pass = c->pass >= 0 && c->pass < l->summed ? l->summed : c->pass;
  pthread_mutex_unlock(&l->mu);
  when(at, sizeof at, pass, l->conf.passes);
  hint(l, tail, sizeof tail);
  snprintf(msg, sizeof msg, "rank %d (worker %d, pid %d on %s) was interrupted by %s %s%s",
           c->worker + 1, c->worker, c->pid, c->host, strata__interrupt_name(sig), at, tail);
  end_run(l, sig, msg, 1, c, NULL);
}

static void close_conn(live *l, conn *c) {
  if (c->fd >= 0) {
    ev_io_stop(l->loop, &c->io);
    close(c->fd);
    c->fd = -1;
  }
}

/* Whether a HELLO carries this run's secret. The secret travels in the
 * clear: the watch is guarded against those who can reach its port but
 * cannot read the job's traffic. Whoever can read the watch's traffic can
 * read MPI's as well (Open MPI's TCP transport is not encrypted, and it
 * carries the secret itself to every worker), so a challenge answered with
 * a keyed hash (HMAC) would keep out no one that this lets in. The bytes
 * are compared in a time that does not depend on them, so that how soon a
 * guess is refused tells nothing of how much of it was right. */
static int proves(const live *l, const live_msg *m) {
  unsigned char d = 0;
  for (size_t i = 0; i < SECRET; i++) d |= (unsigned char)(l->secret[i] ^ m->secret[i]);
  return d == 0;
}

/* Rank 0 counts a connection it closes unproven, and says so at most once
 * every REFUSED_LOG_S: whoever knocks cannot flood the log. */
static void count_refused(live *l, const struct sockaddr_in *peer, const char *why) {
  int n = atomic_fetch_add(&l->refused, 1) + 1;
  double now = strata_now();
  if (n > 1 && now - l->refused_logged < REFUSED_LOG_S) return;
  l->refused_logged = now;
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &peer->sin_addr, ip, sizeof ip);
  strata_log(STRATA_LOG_WARN,
             "the liveness watch refused a connection from %s port %d: %s (%d refused in all; "
             "at most one such line every %.0f s)",
             ip, ntohs(peer->sin_port), why, n, REFUSED_LOG_S);
}

/* The connection stays allocated, closed, until sweep: its reader may be
 * on the stack. */
static void refuse(live *l, conn *c, const char *why) {
  count_refused(l, &c->peer, why);
  close_conn(l, c);
}

/* Rank 0: the first message of a connection, which must be a HELLO that
 * proves itself; anything else closes the connection, and nothing in it
 * is acted on. */
static void hello(live *l, conn *c, const live_msg *m, double now) {
  char why[128];
  if (m->magic != MAGIC)
    snprintf(why, sizeof why, "not the watch's protocol (it began with 0x%08x)", (unsigned)m->magic);
  else if (m->type != M_HELLO)
    snprintf(why, sizeof why, "a message of type %u before any HELLO", (unsigned)m->type);
  else if (!proves(l, m))
    snprintf(why, sizeof why, "a HELLO without this run's secret");
  else if (m->worker < 0 || m->worker >= l->P)
    snprintf(why, sizeof why, "a HELLO for worker %d of a run of %d", (int)m->worker, l->P);
  else if (l->by_worker[m->worker])
    snprintf(why, sizeof why, "a HELLO for worker %d, which is connected already", (int)m->worker);
  else {
    c->worker = m->worker;
    c->pid = m->pid;
    snprintf(c->host, sizeof c->host, "%.*s", (int)sizeof m->host - 1, m->host);
    l->by_worker[m->worker] = c;
    atomic_fetch_add(&l->identified, 1);
    c->last_beat = c->steps_at = now;
    c->pass = m->pass;
    c->steps = m->steps;
    return;
  }
  refuse(l, c, why);
}

/* A message from the other end: on rank 0 from a worker its HELLO proved,
 * on a worker from rank 0 (the connection it opened itself, to the address
 * rank 0 sent it over MPI after binding it, so no one else can be at the
 * other end). */
static void take(live *l, conn *c, const live_msg *m) {
  double now = strata_now();
  if (l->rank == 0 && c->worker < 0) {
    hello(l, c, m, now);
    return;
  }
  if (m->magic != MAGIC) {
    close_conn(l, c); /* not one of ours */
    return;
  }
  switch (m->type) {
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
      end_run(l, 0, NULL, 0, c, NULL);
      return;
    case M_INT:
      if (m->sig <= 0) {
        close_conn(l, c); /* no message of ours */
        return;
      }
      if (l->rank > 0) end_run(l, m->sig, NULL, 0, c, NULL); /* rank 0 reported it */
      c->pass = m->pass;
      interrupted_worker(l, c, m->sig);
      return;
    default: /* a second HELLO, or no message of ours */
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
    if (l->rank == 0 && c->worker < 0) {
      char why[96];
      snprintf(why, sizeof why, "it closed after %zu bytes, before a whole HELLO (%zu bytes)",
               c->have, sizeof(live_msg));
      refuse(l, c, why);
      return;
    }
    /* Closed. Deliberately (BYE), or by the death of its process. */
    int bye = c->bye;
    close_conn(l, c);
    if (bye) return;
    if (l->rank == 0)
      lost_worker(l, c, "its connection closed: it was killed, crashed or ran out of memory");
    else
      lost_hub(l, "its connection closed: it was killed, crashed or ran out of memory");
    return;
  }
}

/* The pipe of core/interrupt.h is readable: a signal was caught (now, or
 * before this watch started). */
static void on_interrupt(struct ev_loop *loop, ev_io *w, int revents) {
  (void)revents;
  live *l = w->data;
  char sink[64];
  while (read(w->fd, sink, sizeof sink) > 0) continue;
  int sig = strata__interrupt_signal();
  if (!sig) return;
  /* Rank 0 said BYE: every verdict is out, the run is over, and this
   * worker leaves with its code (core/interrupt.h). A BYE already here
   * but not yet read counts. */
  if (l->hub && l->hub->fd >= 0) on_read(loop, &l->hub->io, 0);
  if (l->hub && l->hub->bye) return;
  interrupted(l, sig);
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

/* Rank 0: frees the connections closed unproven. Only from the accept
 * and beat callbacks, where no reader of a connection is on the stack. */
static void sweep(live *l) {
  int k = 0;
  for (int i = 0; i < l->n_conns; i++) {
    conn *c = l->conns[i];
    if (c->fd < 0 && c->worker < 0)
      strata_free(c);
    else
      l->conns[k++] = c;
  }
  l->n_conns = k;
}

static int n_unproven(const live *l) {
  int n = 0;
  for (int i = 0; i < l->n_conns; i++) n += l->conns[i]->fd >= 0 && l->conns[i]->worker < 0;
  return n;
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents) {
  (void)revents;
  live *l = w->data;
  int cap = PENDING_PER_WORKER * l->P + PENDING_EXTRA;
  for (;;) {
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    memset(&peer, 0, sizeof peer);
    int fd = accept(l->listen_fd, (struct sockaddr *)&peer, &len);
    if (fd < 0) return;
    if (atomic_load(&l->identified) == l->P) {
      /* Every worker is in, and none connects twice. */
      count_refused(l, &peer, "every worker had connected already");
      close(fd);
      continue;
    }
    set_nonblock(fd);
    sweep(l);
    /* The oldest unproven connection makes room: a worker sends its HELLO
     * as it connects, and it is read below as soon as it is accepted, so
     * only a connection that lingers silent is pushed out. */
    if (n_unproven(l) >= cap) {
      for (int i = 0; i < l->n_conns; i++)
        if (l->conns[i]->fd >= 0 && l->conns[i]->worker < 0) {
          refuse(l, l->conns[i], "too many connections were waiting for their HELLO");
          break;
        }
      sweep(l);
    }
    if (l->n_conns == l->cap_conns) {
      int n = l->cap_conns ? 2 * l->cap_conns : 8;
      conn **v = strata_realloc(l->conns, (size_t)n * sizeof *v);
      if (!v) {
        close(fd);
        continue;
      }
      l->conns = v;
      l->cap_conns = n;
    }
    conn *c = new_conn(l, fd);
    if (!c) {
      close(fd);
      continue;
    }
    c->since = strata_now();
    c->peer = peer;
    l->conns[l->n_conns++] = c;
    on_read(loop, &c->io, EV_READ);
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
      /* A stopped process's beats end when it stops, its steps at its last
       * step, which a slow pass puts seconds earlier: beats missing for
       * several periods tell a stopped worker from a hung one. */
      if (now - c->last_beat > 10 * STRATA__LIVE_BEAT)
        snprintf(why, sizeof why,
                 "no sign of life for %.1f s and no progress for %.1f s (stall timeout %.1f s): "
                 "it is stopped, or its host hangs",
                 now - c->last_beat, now - c->steps_at, T);
      else
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
    end_run(l, 0, msg, 1, NULL, NULL);
  }
}

static void on_beat(struct ev_loop *loop, ev_timer *w, int revents) {
  (void)loop, (void)revents;
  live *l = w->data;
  double now = strata_now();
  if (l->rank == 0) {
    for (int i = 0; i < l->P; i++) send_msg(l->by_worker[i], M_BEAT, l);
    check_workers(l, now);
    for (int i = 0; i < l->n_conns; i++) {
      conn *c = l->conns[i];
      if (c->fd >= 0 && c->worker < 0 && now - c->since > HELLO_S) {
        char why[64];
        snprintf(why, sizeof why, "no HELLO within %.0f s", HELLO_S);
        refuse(l, c, why);
      }
    }
    sweep(l);
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
  /* No handler runs here: SIGINT and SIGTERM come as bytes on the pipe of
   * core/interrupt.h (already there when one was caught before this watch
   * started), and this thread is the one that acts on them. */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  int fd = strata__interrupt_fd();
  if (fd >= 0) {
    ev_io_init(&l->sig_io, on_interrupt, fd, EV_READ);
    l->sig_io.data = l;
    ev_io_start(l->loop, &l->sig_io);
  }
  ev_run(l->loop, 0);
  return NULL;
}

/* Every connection rank 0 accepted and did not free is in `conns`. */
static void free_live(live *l) {
  if (!l) return;
  for (int i = 0; i < l->n_conns; i++) {
    if (l->conns[i]->fd >= 0) close(l->conns[i]->fd);
    strata_free(l->conns[i]);
  }
  if (l->hub) {
    if (l->hub->fd >= 0) close(l->hub->fd);
    strata_free(l->hub);
  }
  if (l->listen_fd >= 0) close(l->listen_fd);
  if (l->loop) ev_loop_destroy(l->loop);
  pthread_mutex_destroy(&l->mu);
  strata_free(l->conns);
  strata_free(l->by_worker);
  strata_free(l);
}

/* This host's non-loopback IPv4 addresses and their netmasks (network
 * order), at most max. */
static int own_addrs(uint32_t *addr, uint32_t *mask, int max) {
  int n = 0;
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return 0;
  for (struct ifaddrs *i = ifs; i && n < max; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    uint32_t ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
    if (ntohl(ip) >> 24 == 127) continue;
    addr[n] = ip;
    mask[n] = i->ifa_netmask ? ((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr : 0xffffffffu;
    n++;
  }
  freeifaddrs(ifs);
  return n;
}

/* Rank 0: where to listen, from --watch-address or else from where the
 * workers are (wh[P]): 127.0.0.1 when every one is on this host, so that
 * no other host can reach the port at all; else this host's address on a
 * network that every worker on another host also has an address on (by
 * the interface's netmask), and failing that (routed networks) the address
 * this host's name resolves to, if it is one of its own. The networks come
 * first because a host's name often resolves to a loopback address
 * (Debian's 127.0.1.1) or to an interface the cluster does not use, and
 * they need no name service, which may be slow or absent. 0 with *ip
 * (network order) or *any set; -1 with the reason in why. */
static int choose_address(const live *l, const live_where *wh, uint32_t *ip, int *any, char *why,
                          size_t n) {
  *any = 0;
  const char *want = l->conf.address;
  if (want) {
    struct in_addr in;
    if (strcmp(want, "any") == 0) {
      *any = 1;
      return 0;
    }
    if (inet_pton(AF_INET, want, &in) != 1) {
      snprintf(why, n, "--watch-address is not an IPv4 address");
      return -1;
    }
    *ip = in.s_addr;
    return 0;
  }
  int remote = 0;
  for (int w = 0; w < l->P; w++) remote += strncmp(wh[w].host, l->host, sizeof wh[w].host) != 0;
  if (!remote) {
    *ip = htonl(INADDR_LOOPBACK);
    return 0;
  }
  uint32_t mine[MAX_ADDRS], mask[MAX_ADDRS];
  int k = own_addrs(mine, mask, MAX_ADDRS);
  for (int i = 0; i < k; i++) {
    int all = 1;
    for (int w = 0; w < l->P && all; w++) {
      if (strncmp(wh[w].host, l->host, sizeof wh[w].host) == 0) continue;
      int on = 0;
      for (int j = 0; j < wh[w].n && j < MAX_ADDRS; j++)
        on |= (wh[w].addr[j] & mask[i]) == (mine[i] & mask[i]);
      all = on;
    }
    if (all) {
      *ip = mine[i];
      return 0;
    }
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(l->host, NULL, &hints, &res) == 0) {
    for (struct addrinfo *r = res; r; r = r->ai_next) {
      uint32_t a = ((struct sockaddr_in *)r->ai_addr)->sin_addr.s_addr;
      for (int i = 0; i < k; i++)
        if (a == mine[i]) {
          *ip = a;
          freeaddrinfo(res);
          return 0;
        }
    }
    freeaddrinfo(res);
  }
  snprintf(why, n,
           "no address of host %s is on a network of the workers on other hosts, and its name "
           "resolves to none of its own: give --watch-address",
           l->host);
  return -1;
}

/* Rank 0: listens on ip (network order), or on every interface, and fills
 * what a worker tries: that address, or (every interface) rank 0's
 * non-loopback addresses, after loopback for a worker on its host. -1
 * with errno. */
static int hub_listen(live *l, live_addr *a, uint32_t ip, int any) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = any ? htonl(INADDR_ANY) : ip;
  socklen_t len = sizeof sa;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 64) ||
      getsockname(fd, (struct sockaddr *)&sa, &len)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  set_nonblock(fd);
  l->listen_fd = fd;
  a->port = ntohs(sa.sin_port);
  a->any = any;
  if (any) {
    uint32_t mask[MAX_ADDRS];
    a->n = own_addrs(a->addr, mask, MAX_ADDRS);
  } else {
    a->addr[0] = ip;
    a->n = 1;
  }
  snprintf(a->host, sizeof a->host, "%s", l->host);
  return 0;
}

/* A worker: connects to rank 0 at one of its addresses. */
static int connect_to(uint32_t ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

/* Only the addresses rank 0 sent: loopback only where it listens on every
 * interface, since where it listens on one address, another process could
 * listen on loopback at the same port and pose as rank 0. */
static int worker_connect(live *l, const live_addr *a) {
  if (a->any && strncmp(a->host, l->host, sizeof a->host) == 0) {
    int fd = connect_to(htonl(INADDR_LOOPBACK), a->port);
    if (fd >= 0) return fd;
  }
  for (int i = 0; i < a->n && i < MAX_ADDRS; i++) {
    int fd = connect_to(a->addr[i], a->port);
    if (fd >= 0) return fd;
  }
  return -1;
}

/* The run's secret, from the kernel's random source. */
static int make_secret(unsigned char *out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

int strata__live_check_address(const char *addr) {
  struct in_addr in;
  if (!addr || strcmp(addr, "any") == 0 || inet_pton(AF_INET, addr, &in) == 1) return 0;
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE,
                        "--watch-address '%s': not an IPv4 address (as 10.0.0.5) or any",
                        strata_quote(q, sizeof q, addr, strlen(addr)));
}

/* Rank 0: hears where every worker runs, picks its address, makes the
 * secret, listens, and tells every worker (port 0: no watch; rank 0 says
 * why). Returns the transport's error, or 0. */
static int hub_start(live *l, strata_transport *t, int tag, int ok, live_addr *a) {
  live_where *wh = strata_calloc((size_t)l->P, sizeof *wh);
  strata_req *rq = strata_calloc((size_t)l->P + 1, sizeof *rq);
  if (!wh || !rq) {
    strata_free(wh);
    strata_free(rq);
    return strata_err_set(STRATA_ENOMEM, "out of memory");
  }
  int rc = 0;
  for (int w = 1; w < t->size && !rc; w++)
    rc = t->irecv(t->impl, &wh[w - 1], sizeof *wh, w, tag, &rq[w - 1]);
  if (!rc) rc = strata_comm_wait_all_idle(t, rq, l->P);
  char why[512] = "";
  uint32_t ip = 0;
  int any = 0;
  if (!rc && ok) {
    if (make_secret(l->secret, sizeof l->secret)) {
      snprintf(why, sizeof why, "no random bytes for its secret: %s", strerror(errno));
    } else if (choose_address(l, wh, &ip, &any, why, sizeof why) == 0 &&
               hub_listen(l, a, ip, any) != 0) {
      char ipt[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &ip, ipt, sizeof ipt);
      snprintf(why, sizeof why, "cannot listen on %s: %s", any ? "every interface" : ipt,
               strerror(errno));
    }
    if (why[0]) {
      memset(a, 0, sizeof *a);
      strata_log(STRATA_LOG_WARN, "the liveness watch is off: %s; a lost rank will not be noticed",
                 why);
    } else {
      memcpy(a->secret, l->secret, sizeof a->secret);
      char ipt[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &ip, ipt, sizeof ipt);
      strata_log(STRATA_LOG_DEBUG, "the liveness watch listens on %s port %d",
                 any ? "every interface" : ipt, a->port);
    }
  }
  for (int w = 1; w < t->size && !rc; w++) rc = t->isend(t->impl, a, sizeof *a, w, tag, &rq[w - 1]);
  if (!rc) rc = strata_comm_wait_all_idle(t, rq, l->P);
  strata_free(rq);
  strata_free(wh);
  return rc;
}

/* A worker: tells rank 0 where it runs, hears where to connect. */
static int worker_start(live *l, strata_transport *t, int tag, live_addr *a) {
  live_where me;
  memset(&me, 0, sizeof me);
  snprintf(me.host, sizeof me.host, "%s", l->host);
  uint32_t mask[MAX_ADDRS];
  me.n = own_addrs(me.addr, mask, MAX_ADDRS);
  strata_req rq[2] = {{0}, {0}};
  int rc = t->isend(t->impl, &me, sizeof me, 0, tag, &rq[0]);
  if (!rc) rc = t->irecv(t->impl, a, sizeof *a, 0, tag, &rq[1]);
  if (!rc) rc = strata_comm_wait_all_idle(t, rq, 2);
  return rc;
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
    ok = ok && l->by_worker;
    rc = hub_start(l, t, tag, ok, &a);
    ok = ok && a.port;
    if (ok) {
      ev_io_init(&l->accept_io, on_accept, l->listen_fd, EV_READ);
      l->accept_io.data = l;
      ev_io_start(l->loop, &l->accept_io);
    }
  } else {
    rc = worker_start(l, t, tag, &a);
    memcpy(l->secret, a.secret, sizeof l->secret);
    int fd = !rc && ok && a.port ? worker_connect(l, &a) : -1;
    if (fd < 0 && !rc && a.port) {
      char ipt[INET_ADDRSTRLEN] = "?";
      if (a.n > 0) inet_ntop(AF_INET, &a.addr[0], ipt, sizeof ipt);
      strata_log(STRATA_LOG_WARN,
                 "worker %d: cannot reach the coordinator's watch on %s (%s%s) port %d: a lost "
                 "rank will not be noticed",
                 l->rank - 1, a.host, a.any ? "every interface, as " : "", ipt, a.port);
    }
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

int strata__live_start_solo(const strata__live_conf *conf) {
  if (g_live || strata__interrupt_fd() < 0) return 0;
  live *l = strata_calloc(1, sizeof *l);
  if (!l) return strata_err_set(STRATA_ENOMEM, "out of memory");
  l->solo = 1;
  l->conf = *conf;
  l->listen_fd = -1;
  pthread_mutex_init(&l->mu, NULL);
  if ((l->loop = ev_loop_new(EVFLAG_AUTO)) != NULL) {
    ev_async_init(&l->wake, on_wake);
    l->wake.data = l;
    ev_async_start(l->loop, &l->wake);
    if (pthread_create(&l->thread, NULL, watch_main, l) == 0) {
      g_live = l;
      return 0;
    }
  }
  free_live(l);
  strata_log(STRATA_LOG_WARN, "cannot start the thread that acts on SIGINT and SIGTERM: they end "
             "the process at once");
  return 0;
}

int strata__live_watching(void) { return g_live != NULL; }

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

int strata__live_refused(void) {
  live *l = g_live;
  return l ? atomic_load(&l->refused) : 0;
}
