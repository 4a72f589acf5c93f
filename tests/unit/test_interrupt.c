/*
 * Unit tests for core/interrupt.c, SIGINT and SIGTERM noted by one handler,
 * and for what acts on them without MPI: the wait that asks for them
 * (core/wait.h) and a serial run's watch (comm/live.h), which prints one
 * line and ends the process with 128 + the signal. Every case runs in a
 * child process: the handler and the signal noted are the process's own.
 */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm/live.h"
#include "core/interrupt.h"
#include "core/wait.h"
#include "strata/core.h"

/* Runs fn in a child; returns its wait status. A child reports a failed
 * check by exiting 100 + the line's number modulo 100 (cmocka's asserts
 * would longjmp into the parent's copy of the runner). */
#define CHECK(c)                               \
  do {                                         \
    if (!(c)) {                                \
      fprintf(stderr, "failed: %s\n", #c);     \
      _exit(100 + __LINE__ % 100);             \
    }                                          \
  } while (0)

static int in_child(void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    fn();
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

static int readable(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1;
}

/* The first signal is the one noted; each writes a byte to the pipe. */
static void noted(void) {
  CHECK(strata__interrupt_fd() == -1);
  CHECK(strata__interrupt_catch() == 0);
  CHECK(strata__interrupt_catch() == 0); /* once is enough */
  int fd = strata__interrupt_fd();
  CHECK(fd >= 0);
  CHECK(strata__interrupt_signal() == 0);
  CHECK(!readable(fd, 0));
  raise(SIGTERM);
  CHECK(strata__interrupt_signal() == SIGTERM);
  CHECK(readable(fd, 1000));
  raise(SIGINT);
  CHECK(strata__interrupt_signal() == SIGTERM);
  char b[8];
  CHECK(read(fd, b, sizeof b) == 2);
  CHECK(strcmp(strata__interrupt_name(SIGINT), "SIGINT") == 0);
  CHECK(strcmp(strata__interrupt_name(SIGTERM), "SIGTERM") == 0);
  CHECK(strcmp(strata__interrupt_name(SIGHUP), "signal 1") == 0);
  CHECK(strata__interrupt_code(SIGINT) == 130 && strata__interrupt_code(SIGTERM) == 143);
}

static void test_first_signal_noted(void **state) {
  (void)state;
  int st = in_child(noted);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* A SIGINT ignored before (a background job of a script) stays ignored. */
static void ignored(void) {
  signal(SIGINT, SIG_IGN);
  CHECK(strata__interrupt_catch() == 0);
  raise(SIGINT);
  CHECK(strata__interrupt_signal() == 0);
  CHECK(!readable(strata__interrupt_fd(), 50));
  raise(SIGTERM);
  CHECK(strata__interrupt_signal() == SIGTERM);
}

static void test_ignored_sigint_stays_ignored(void **state) {
  (void)state;
  int st = in_child(ignored);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* Released, a signal noted already ends the process as by default. */
static void released(void) {
  CHECK(strata__interrupt_catch() == 0);
  raise(SIGTERM);
  strata__interrupt_release();
  _exit(0); /* not reached */
}

static void test_release_raises_the_noted_signal(void **state) {
  (void)state;
  int st = in_child(released);
  assert_true(WIFSIGNALED(st));
  assert_int_equal(WTERMSIG(st), SIGTERM);
}

static int never(void *ctx, int *done, int *progressed) {
  (void)ctx;
  *done = 0;
  *progressed = 0;
  return 0;
}

/* A wait with .signals ends with STRATA_EINTR once a signal is noted (at
 * its next poll, at most its ceiling later); one without goes on. */
static void wait_signalled(void) {
  CHECK(strata__interrupt_catch() == 0);
  raise(SIGINT);
  strata__wait_conf plain = {.ceiling = 0.01, .until = strata_now() + 0.05};
  CHECK(strata__wait(never, NULL, &plain) == 0);
  strata__wait_conf asks = {.ceiling = 0.01, .until = strata_now() + 30, .signals = 1, .who = "test"};
  double t0 = strata_now();
  CHECK(strata__wait(never, NULL, &asks) == STRATA_EINTR);
  CHECK(strata_now() - t0 < 5);
  CHECK(strcmp(strata_err_msg(), "test: interrupted by SIGINT") == 0);
}

static void test_wait_ends_on_a_noted_signal(void **state) {
  (void)state;
  int st = in_child(wait_signalled);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* A serial run's watch: one line through on_lost, naming the signal and
 * the pass, then exit code 128 + the signal. The signal may come before
 * the watch starts (it acts at once then) or while it runs. */
static int g_out = -1;

static void print_line(void *ud, const char *msg, int report) {
  (void)ud;
  dprintf(g_out, "%d %s\n", report, msg);
}

static void solo(int early) {
  CHECK(strata__interrupt_catch() == 0);
  strata__live_pass(3);
  if (early) raise(SIGTERM);
  strata__live_conf conf = {.passes = 20, .on_lost = print_line};
  CHECK(strata__live_start_solo(&conf) == 0);
  if (!early) raise(SIGINT);
  sleep(10); /* the watch thread ends the process */
  _exit(0);
}

static void solo_late(void) { solo(0); }
static void solo_early(void) { solo(1); }

static void expect_solo(void (*fn)(void), int code, const char *line) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  g_out = p[1];
  int st = in_child(fn);
  close(p[1]);
  char got[256] = "";
  ssize_t n = read(p[0], got, sizeof got - 1);
  close(p[0]);
  assert_true(n > 0);
  got[n] = '\0';
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), code);
  assert_string_equal(got, line);
}

static void test_serial_watch_ends_the_run(void **state) {
  (void)state;
  expect_solo(solo_late, 130, "1 interrupted by SIGINT during pass 4 of 20\n");
  expect_solo(solo_early, 143, "1 interrupted by SIGTERM during pass 4 of 20\n");
}

/* Without a catcher there is nothing to act on: no watch starts. */
static void no_catcher(void) {
  strata__live_conf conf = {.passes = 20, .on_lost = print_line};
  CHECK(strata__live_start_solo(&conf) == 0);
  CHECK(!strata__live_watching());
}

/* Stopped, the watch leaves a signal noted and nothing else. */
static void stopped(void) {
  CHECK(strata__interrupt_catch() == 0);
  strata__live_conf conf = {.passes = 20, .on_lost = print_line};
  CHECK(strata__live_start_solo(&conf) == 0);
  strata__live_stop();
  CHECK(!strata__live_watching());
  raise(SIGTERM);
  usleep(100000);
  CHECK(strata__interrupt_signal() == SIGTERM);
}

static void test_no_watch_without_catcher_or_after_stop(void **state) {
  (void)state;
  int st = in_child(no_catcher);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  st = in_child(stopped);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_signal_noted),
      cmocka_unit_test(test_ignored_sigint_stays_ignored),
      cmocka_unit_test(test_release_raises_the_noted_signal),
      cmocka_unit_test(test_wait_ends_on_a_noted_signal),
      cmocka_unit_test(test_serial_watch_ends_the_run),
      cmocka_unit_test(test_no_watch_without_catcher_or_after_stop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
