/*
 * Unit tests for comm/live.c, the liveness watch, on rank 0's side: rank 0
 * runs strata__live_start over the loopback transport, and a thread of the
 * test plays the workers, over the transport (where they run, and the
 * address and secret they hear) and over real TCP connections to the
 * watch. The watch listens on 127.0.0.1 when every rank is on this host,
 * on this host's address on the workers' network otherwise, and where
 * --watch-address says; it acts on nothing a connection says before a HELLO
 * with the run's secret: a forged LOST, a wrong secret, a bad magic, a
 * HELLO for a worker out of range or already connected each close the
 * connection, unanswered, and are counted; silent connections beyond the
 * cap push out the oldest, and are closed after STRATA__LIVE_HELLO_S; once
 * every worker is in, a new connection is closed at once; refusals are
 * logged at most once every few seconds; everything is freed and closed.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "comm/live.h"
#include "strata/core.h"
#include "strata/error.h"
#include "strata/transport.h"

#define P 2
#define TAG 21
#define CAP (4 * P + 16) /* the watch's cap on connections waiting for their HELLO */

/* ---- what the watch logs ---------------------------------------------- */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int n_warn;
static char last_warn[1024];

static void capture(void *ud, strata_log_level level, const char *msg) {
  (void)ud;
  if (level != STRATA_LOG_WARN) return;
  pthread_mutex_lock(&log_mu);
  n_warn++;
  snprintf(last_warn, sizeof last_warn, "%s", msg);
  pthread_mutex_unlock(&log_mu);
}

static int warnings(char *last, size_t n) {
  pthread_mutex_lock(&log_mu);
  int k = n_warn;
  if (last) snprintf(last, n, "%s", last_warn);
  pthread_mutex_unlock(&log_mu);
  return k;
}

/* ---- the workers' side ---------------------------------------------- */

/* This process's open sockets. (Other descriptors come and go with no
 * help from the watch: the main thread's wait loop of core/wait.c stays
 * once made.) */
static int open_sockets(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));) {
    char path[300], link[64];
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, link, sizeof link - 1);
    n += k > 0 && strncmp(link, "socket:", 7) == 0;
  }
  closedir(d);
  return n;
}

static int connect_to(uint32_t ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = ip;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* 1: the other end closed without sending a byte; 0: still open after
 * ms; -1: it sent something. */
static int closed_within(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return 0;
  char b;
  ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET) ? 1 : n > 0 ? -1 : 0;
}

static strata__live_msg message(uint32_t magic, uint32_t type, int worker,
                                const unsigned char *secret) {
  strata__live_msg m;
  memset(&m, 0, sizeof m);
  m.magic = magic;
  m.type = type;
  m.worker = worker;
  m.pass = -1;
  m.pid = (int32_t)getpid();
  snprintf(m.host, sizeof m.host, "test");
  if (secret) memcpy(m.secret, secret, sizeof m.secret);
  return m;
}

static int send_all(int fd, const void *p, size_t n) {
  return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* 0 once a whole message from rank 0 is in *m, -1 when none came within ms. */
static int read_msg(int fd, strata__live_msg *m, int ms) {
  size_t have = 0;
  struct pollfd p = {fd, POLLIN, 0};
  while (have < sizeof *m && poll(&p, 1, ms) == 1) {
    ssize_t n = recv(fd, (char *)m + have, sizeof *m - have, 0);
    if (n <= 0) break;
    have += (size_t)n;
  }
  return have == sizeof *m ? 0 : -1;
}

/* One scenario for the thread that plays the workers. */
typedef struct play {
  strata_transport t[P + 1];
  const char *host;          /* the workers' host ("": this one) */
  uint32_t addr;             /* and their address (0: none) */
  int strangers;             /* 1: knock in every way before the workers prove */
  int rc;                    /* the transport's */
  strata__live_addr a;       /* what worker 0 heard */
  int worker_fd[P];
  /* What the strangers met: 1 closed unanswered, 0 open, -1 answered. */
  int forged_lost, wrong_secret, bad_magic, out_of_range, twice;
  int silent_fd[CAP + 1];
  int evicted, kept;
} play;

static void *play_workers(void *arg) {
  play *pl = arg;
  char here[64] = "";
  gethostname(here, sizeof here - 1);
  strata_req rq[2 * P];
  memset(rq, 0, sizeof rq);
  strata__live_where wh[P];
  strata__live_addr got[P];
  for (int w = 0; w < P; w++) {
    memset(&wh[w], 0, sizeof wh[w]);
    snprintf(wh[w].host, sizeof wh[w].host, "%s", pl->host[0] ? pl->host : here);
    if (pl->addr) wh[w].addr[wh[w].n++] = pl->addr;
    strata_transport *t = &pl->t[w + 1];
    int rc = t->isend(t->impl, &wh[w], sizeof wh[w], 0, TAG, &rq[2 * w]);
    if (!rc) rc = t->irecv(t->impl, &got[w], sizeof got[w], 0, TAG, &rq[2 * w + 1]);
    if (rc) {
      pl->rc = rc;
      return NULL;
    }
  }
  /* Rank 0 answers once every worker has said where it runs. */
  for (int w = 0; w < P; w++)
    if ((pl->rc = strata_comm_wait_all_idle(&pl->t[w + 1], &rq[2 * w], 2))) return NULL;
  pl->a = got[0];
  if (!pl->a.port) return NULL;
  uint32_t ip = pl->a.any ? htonl(INADDR_LOOPBACK) : pl->a.addr[0];
  int port = pl->a.port;
  if (pl->strangers) {
    strata__live_msg m;
    unsigned char wrong[STRATA__LIVE_SECRET];
    memcpy(wrong, pl->a.secret, sizeof wrong);
    wrong[STRATA__LIVE_SECRET - 1] ^= 1;
    /* The forged LOST as a stranger would send it: 104 bytes, then gone. */
    int fd = connect_to(ip, port);
    m = message(STRATA__LIVE_MAGIC, STRATA__LIVE_LOST, 0, NULL);
    send_all(fd, &m, 104);
    close(fd);
    /* A whole LOST message, no HELLO. */
    fd = connect_to(ip, port);
    send_all(fd, &m, sizeof m);
    pl->forged_lost = closed_within(fd, 2000);
    close(fd);
    fd = connect_to(ip, port);
    m = message(STRATA__LIVE_MAGIC, STRATA__LIVE_HELLO, 0, wrong);
    send_all(fd, &m, sizeof m);
    pl->wrong_secret = closed_within(fd, 2000);
    close(fd);
    fd = connect_to(ip, port);
    m = message(0x12345678, STRATA__LIVE_HELLO, 0, pl->a.secret);
    send_all(fd, &m, sizeof m);
    pl->bad_magic = closed_within(fd, 2000);
    close(fd);
    fd = connect_to(ip, port);
    m = message(STRATA__LIVE_MAGIC, STRATA__LIVE_HELLO, P, pl->a.secret);
    send_all(fd, &m, sizeof m);
    pl->out_of_range = closed_within(fd, 2000);
    close(fd);
  }
  /* Worker 0 proves itself. */
  pl->worker_fd[0] = connect_to(ip, port);
  strata__live_msg hello = message(STRATA__LIVE_MAGIC, STRATA__LIVE_HELLO, 0, pl->a.secret);
  send_all(pl->worker_fd[0], &hello, sizeof hello);
  if (pl->strangers) {
    /* Rank 0 beats only to a worker it knows: worker 0 is in. */
    strata__live_msg beat;
    if (read_msg(pl->worker_fd[0], &beat, 2000)) return NULL;
    /* Someone else says it is worker 0, with the secret even. */
    int fd = connect_to(ip, port);
    send_all(fd, &hello, sizeof hello);
    pl->twice = closed_within(fd, 2000);
    close(fd);
    /* One silent connection more than the cap: the oldest goes. */
    for (int i = 0; i <= CAP; i++) pl->silent_fd[i] = connect_to(ip, port);
    pl->evicted = closed_within(pl->silent_fd[0], 2000);
    pl->kept = 0;
    for (int i = 1; i <= CAP; i++) pl->kept += closed_within(pl->silent_fd[i], 0) == 0;
  }
  for (int w = 1; w < P; w++) {
    pl->worker_fd[w] = connect_to(ip, port);
    hello.worker = w;
    send_all(pl->worker_fd[w], &hello, sizeof hello);
  }
  return NULL;
}

/* Starts rank 0's watch with `address` while a thread plays the workers. */
static void run_play(play *pl, strata_loopback **lb, const char *address) {
  strata_loopback_conf c = {.size = P + 1, .seed = 7};
  assert_int_equal(strata_loopback_open(&c, lb), 0);
  for (int r = 0; r <= P; r++) assert_int_equal(strata_loopback_endpoint(*lb, r, &pl->t[r]), 0);
  for (int w = 0; w < P; w++) pl->worker_fd[w] = -1;
  for (int i = 0; i <= CAP; i++) pl->silent_fd[i] = -1;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, play_workers, pl), 0);
  strata__live_conf conf = {.passes = 1, .stall_timeout = 100, .address = address};
  assert_int_equal(strata__live_start(&pl->t[0], TAG, &conf), 0);
  pthread_join(th, NULL);
  assert_int_equal(pl->rc, 0);
}

/* A proven worker hears rank 0's heartbeats. */
static void expect_beats(int fd) {
  strata__live_msg m;
  assert_int_equal(read_msg(fd, &m, 2000), 0);
  assert_int_equal(m.magic, STRATA__LIVE_MAGIC);
  assert_int_equal(m.type, STRATA__LIVE_BEAT_MSG);
}

static void finish(play *pl, strata_loopback *lb) {
  strata__live_stop();
  for (int w = 0; w < P; w++)
    if (pl->worker_fd[w] >= 0) close(pl->worker_fd[w]);
  for (int i = 0; i <= CAP; i++)
    if (pl->silent_fd[i] >= 0) close(pl->silent_fd[i]);
  strata_loopback_close(lb);
  strata_log_set(NULL, NULL, STRATA_LOG_INFO);
}

static void test_check_address(void **state) {
  (void)state;
  assert_int_equal(strata__live_check_address(NULL), 0);
  assert_int_equal(strata__live_check_address("any"), 0);
  assert_int_equal(strata__live_check_address("10.0.0.5"), 0);
  assert_int_equal(strata__live_check_address("127.0.0.1"), 0);
  const char *bad[] = {"", "localhost", "10.0.0", "10.0.0.256", "::1", "ANY", "10.0.0.5:99"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(strata__live_check_address(bad[i]), STRATA_EUSAGE);
    assert_non_null(strstr(strata_err_msg(), "--watch-address"));
    strata_err_clear();
  }
}

/* Every rank on this host: 127.0.0.1, and strangers get nowhere. */
static void test_strangers(void **state) {
  (void)state;
  n_warn = 0;
  strata_log_set(capture, NULL, STRATA_LOG_DEBUG);
  int sockets0 = open_sockets();
  play pl = {.host = "", .strangers = 1};
  strata_loopback *lb;
  run_play(&pl, &lb, NULL);
  assert_int_not_equal(pl.a.port, 0);
  assert_int_equal(pl.a.any, 0);
  assert_int_equal(pl.a.n, 1);
  assert_int_equal(pl.a.addr[0], htonl(INADDR_LOOPBACK));
  /* Each closed without a byte of answer, and rank 0 still runs. */
  assert_int_equal(pl.forged_lost, 1);
  assert_int_equal(pl.wrong_secret, 1);
  assert_int_equal(pl.bad_magic, 1);
  assert_int_equal(pl.out_of_range, 1);
  assert_int_equal(pl.twice, 1);
  assert_int_equal(pl.evicted, 1);
  assert_int_equal(pl.kept, CAP);
  expect_beats(pl.worker_fd[0]);
  expect_beats(pl.worker_fd[1]);
  /* Every worker is in: a new connection is closed at once. */
  int fd = connect_to(htonl(INADDR_LOOPBACK), pl.a.port);
  assert_true(fd >= 0);
  assert_int_equal(closed_within(fd, 2000), 1);
  close(fd);
  /* The silent ones go after STRATA__LIVE_HELLO_S. */
  for (int i = 1; i <= CAP; i++)
    assert_int_equal(closed_within(pl.silent_fd[i], (int)(STRATA__LIVE_HELLO_S * 1000) + 2000), 1);
  /* 104 bytes and gone, a whole LOST, a wrong secret, a bad magic, out of
   * range, worker 0 twice, the one pushed out, the one after every worker,
   * and the silent ones. */
  int want = 7 + 1 + CAP;
  for (int i = 0; i < 50 && strata__live_refused() < want; i++) usleep(20000);
  assert_int_equal(strata__live_refused(), want);
  /* The proven workers are untouched. */
  expect_beats(pl.worker_fd[0]);
  expect_beats(pl.worker_fd[1]);
  char last[1024];
  int lines = warnings(last, sizeof last);
  /* At most one line every 5 s: the first, and perhaps one more on a slow
   * machine. */
  assert_true(lines >= 1 && lines <= 2);
  assert_non_null(strstr(last, "the liveness watch refused a connection from 127.0.0.1"));
  finish(&pl, lb);
  assert_int_equal(strata__live_refused(), 0);
  /* Every socket of the watch is closed. */
  assert_int_equal(open_sockets(), sockets0);
}

/* --watch-address any: every interface, loopback for this host's workers. */
static void test_address_any(void **state) {
  (void)state;
  play pl = {.host = ""};
  strata_loopback *lb;
  run_play(&pl, &lb, "any");
  assert_int_not_equal(pl.a.port, 0);
  assert_int_equal(pl.a.any, 1);
  expect_beats(pl.worker_fd[0]);
  expect_beats(pl.worker_fd[1]);
  assert_int_equal(strata__live_refused(), 0);
  finish(&pl, lb);
}

/* This host's first non-loopback IPv4 address and its netmask; 0: none. */
static uint32_t an_interface(uint32_t *mask) {
  struct ifaddrs *ifs = NULL;
  uint32_t ip = 0;
  if (getifaddrs(&ifs) != 0) return 0;
  for (struct ifaddrs *i = ifs; i && !ip; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask) continue;
    uint32_t a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
    if (ntohl(a) >> 24 == 127) continue;
    ip = a;
    *mask = ((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr;
  }
  freeifaddrs(ifs);
  return ip;
}

/* Workers on another host, on the network of one of this host's
 * interfaces: rank 0 listens on that interface's address. */
static void test_other_hosts(void **state) {
  (void)state;
  uint32_t mask = 0, ip = an_interface(&mask);
  if (!ip || ntohl(mask) >= 0xfffffffeu) skip();
  /* Another address on the same network. */
  uint32_t other = htonl((ntohl(ip) & ntohl(mask)) | ((ntohl(ip) + 1) & ~ntohl(mask)));
  play pl = {.host = "strata-test-elsewhere", .addr = other};
  strata_loopback *lb;
  run_play(&pl, &lb, NULL);
  assert_int_not_equal(pl.a.port, 0);
  assert_int_equal(pl.a.any, 0);
  assert_int_equal(pl.a.n, 1);
  assert_int_equal(pl.a.addr[0], ip);
  expect_beats(pl.worker_fd[0]);
  finish(&pl, lb);
}

/* Workers on another host and on no network of this one: never every
 * interface, never loopback; without an address its name resolves to, no
 * watch, and a warning that says what to give. */
static void test_other_hosts_unknown(void **state) {
  (void)state;
  n_warn = 0;
  strata_log_set(capture, NULL, STRATA_LOG_WARN);
  play pl = {.host = "strata-test-elsewhere", .addr = htonl(0xcb00710au)}; /* 203.0.113.10 */
  strata_loopback *lb;
  run_play(&pl, &lb, NULL);
  if (pl.a.port) {
    assert_int_equal(pl.a.any, 0);
    assert_int_equal(pl.a.n, 1);
    assert_int_not_equal(ntohl(pl.a.addr[0]) >> 24, 127);
  } else {
    char last[1024];
    assert_int_equal(warnings(last, sizeof last), 1);
    assert_non_null(strstr(last, "give --watch-address"));
  }
  finish(&pl, lb);
}

/* A test that failed half-way must not leave its watch to the next. */
static int teardown_live(void **state) {
  strata__live_stop();
  strata_log_set(NULL, NULL, STRATA_LOG_INFO);
  return teardown(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_check_address, setup, teardown),
      cmocka_unit_test_setup_teardown(test_strangers, setup, teardown_live),
      cmocka_unit_test_setup_teardown(test_address_any, setup, teardown_live),
      cmocka_unit_test_setup_teardown(test_other_hosts, setup, teardown_live),
      cmocka_unit_test_setup_teardown(test_other_hosts_unknown, setup, teardown_live),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
