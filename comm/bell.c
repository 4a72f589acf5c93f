/*
 * Doorbells (comm/bell.h) on abstract-namespace datagram sockets.
 */
#include "comm/bell.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int g_fd = -1;
static uint64_t g_id;

/* "\0strata-bell-<id>-<rank>": the leading NUL puts it in the abstract
 * namespace. */
static socklen_t bell_name(struct sockaddr_un *a, uint64_t id, int rank) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "strata-bell-%016llx-%d",
                   (unsigned long long)id, rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int strata__bell_open(uint64_t id, int rank) {
  if (g_fd >= 0) return g_fd;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a;
  socklen_t len = bell_name(&a, id, rank);
  if (bind(fd, (struct sockaddr *)&a, len) != 0) {
    close(fd);
    return -1;
  }
  g_fd = fd;
  g_id = id;
  return fd;
}

int strata__bell_fd(void) { return g_fd; }

void strata__bell_ring(int rank) {
  if (g_fd < 0) return;
  struct sockaddr_un a;
  socklen_t len = bell_name(&a, g_id, rank);
  char b = 0;
  /* A full queue already wakes the rank; a missing name is a rank on
   * another host (or gone): either way nothing to do. */
  ssize_t n = sendto(g_fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&a, len);
  (void)n;
}

void strata__bell_drain(void) {
  char buf[64];
  while (g_fd >= 0 && recv(g_fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

void strata__bell_close(void) {
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
}

uint64_t strata__bell_new_id(void) {
  uint64_t id = 0;
  if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    id = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 48);
  }
  return id;
}
