/*
 * SIGINT and SIGTERM noted by a handler and handed to one thread through a
 * pipe (core/interrupt.h).
 */
#include "core/interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "strata/core.h"

/* Set once by strata__interrupt_catch before the handler is installed and
 * never changed afterwards, so the handler may read them. */
static int g_pipe[2] = {-1, -1};
static int g_caught[2]; /* SIGINT, SIGTERM: the handler is ours */
static _Atomic int g_sig;

/* Async-signal-safe only: a lock-free atomic and write(2). The first signal
 * is the one the run ends with; a second one adds nothing. */
static void on_signal(int sig) {
  int saved = errno;
  int none = 0;
  atomic_compare_exchange_strong(&g_sig, &none, sig);
  ssize_t n = write(g_pipe[1], "", 1); /* a full pipe already says it */
  (void)n;
  errno = saved;
}

static int set_flags(int fd) {
  int fl = fcntl(fd, F_GETFL), fd_fl = fcntl(fd, F_GETFD);
  return fl < 0 || fd_fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ||
         fcntl(fd, F_SETFD, fd_fl | FD_CLOEXEC);
}

int strata__interrupt_catch(void) {
  if (g_pipe[0] >= 0) return 0;
  int fds[2];
  if (pipe(fds)) return strata_err_set(STRATA_EIO, "cannot make a pipe for signals: %s", strerror(errno));
  if (set_flags(fds[0]) || set_flags(fds[1])) {
    close(fds[0]);
    close(fds[1]);
    return strata_err_set(STRATA_EIO, "cannot set up the pipe for signals: %s", strerror(errno));
  }
  g_pipe[0] = fds[0];
  g_pipe[1] = fds[1];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  /* Interrupted system calls of the thread the handler ran on go on: the
   * watch thread acts, not the caller of read(2) or fsync(2). */
  sa.sa_flags = SA_RESTART;
  static const int sigs[2] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; i++) {
    struct sigaction old;
    if (sigaction(sigs[i], NULL, &old)) continue;
    if (sigs[i] == SIGINT && old.sa_handler == SIG_IGN) continue;
    g_caught[i] = sigaction(sigs[i], &sa, NULL) == 0;
  }
  return 0;
}

int strata__interrupt_fd(void) { return g_pipe[0]; }

int strata__interrupt_signal(void) { return atomic_load(&g_sig); }

void strata__interrupt_release(void) {
  static const int sigs[2] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; i++)
    if (g_caught[i]) {
      signal(sigs[i], SIG_DFL);
      g_caught[i] = 0;
    }
  int sig = atomic_load(&g_sig);
  if (sig) raise(sig);
}

const char *strata__interrupt_name(int sig) {
  static _Thread_local char other[32];
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      snprintf(other, sizeof other, "signal %d", sig);
      return other;
  }
}
