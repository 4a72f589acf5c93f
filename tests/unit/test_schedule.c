/*
 * Unit tests for core/schedule.c: the diagonal strata, the shared
 * minibatch schedule of sufficient-factor apps, the validation rules (and
 * what sharing relaxes), task lookup and the wire form.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "strata/core.h"
#include "strata/schedule.h"


static int row_worker(int i, int P, int B) { return (int)((int64_t)i * P / B); }

/*
 * Every property the diagonal schedule promises, for one (P, B). Returns
 * through cmocka assertions; the schedule is closed by the caller.
 */
static void check_diagonal(const strata_schedule *s, int P, int B) {
  assert_int_equal(s->n_workers, P);
  assert_int_equal(s->n_subepochs, B);
  assert_int_equal(s->n_data, B * B);
  assert_int_equal(s->n_resident, B);
  assert_int_equal(s->n_rotating, B);
  assert_int_equal(s->n_tasks, B * B);
  assert_true(s->finished);
  assert_int_equal(strata_schedule_validate(s), 0);

  int *seen = calloc((size_t)(B * B), sizeof(int));
  int *res_used = calloc((size_t)B, sizeof(int));
  int *rot_used = calloc((size_t)B, sizeof(int));
  assert_non_null(seen);
  assert_non_null(res_used);
  assert_non_null(rot_used);
  int total = 0;
  for (int sub = 0; sub < B; sub++) {
    memset(res_used, 0, (size_t)B * sizeof(int));
    memset(rot_used, 0, (size_t)B * sizeof(int));
    for (int w = 0; w < P; w++) {
      int n = -1;
      const strata_task *t = strata_schedule_tasks(s, sub, w, &n);
      assert_true(n >= 0);
      total += n;
      for (int k = 0; k < n; k++) {
        int i = t[k].resident, j = t[k].rotating;
        assert_in_range(i, 0, B - 1);
        assert_in_range(j, 0, B - 1);
        /* data block (i, j) has id i*B + j */
        assert_int_equal(t[k].data, i * B + j);
        /* row i lives on worker floor(i*P/B) */
        assert_int_equal(w, row_worker(i, P, B));
        /* row i processes column (i + sub) mod B in sub-epoch sub */
        assert_int_equal(j, (i + sub) % B);
        /* a matching: no row or column twice in a sub-epoch */
        assert_int_equal(res_used[i]++, 0);
        assert_int_equal(rot_used[j]++, 0);
        seen[t[k].data]++;
      }
      /* tasks of one (sub, w) are in the order they were added: rows up */
      for (int k = 1; k < n; k++) assert_true(t[k - 1].resident < t[k].resident);
    }
    for (int r = 0; r < B; r++) {
      assert_int_equal(res_used[r], 1);
      assert_int_equal(rot_used[r], 1);
    }
  }
  assert_int_equal(total, B * B);
  for (int d = 0; d < B * B; d++) assert_int_equal(seen[d], 1);

  /* Owners and holders. */
  for (int i = 0; i < B; i++) {
    assert_int_equal(strata_schedule_resident_owner(s, i), row_worker(i, P, B));
    for (int j = 0; j < B; j++)
      assert_int_equal(strata_schedule_data_owner(s, i * B + j), row_worker(i, P, B));
  }
  assert_int_equal(strata_schedule_data_owner(s, B * B), -1);
  for (int r = 0; r < B; r++) {
    int *held = calloc((size_t)P, sizeof(int));
    assert_non_null(held);
    for (int sub = 0; sub < B; sub++) {
      int h = strata_schedule_rotating_holder(s, r, sub);
      /* column r sits on row (r - sub) mod B */
      assert_int_equal(h, row_worker(((r - sub) % B + B) % B, P, B));
      held[h]++;
      /* ring order: between sub-epochs (and from the last sub-epoch to the
       * first of the next pass) a block stays or moves to the previous
       * worker */
      int next = strata_schedule_rotating_holder(s, r, (sub + 1) % B);
      assert_true(next == h || next == (h - 1 + P) % P);
    }
    /* Following the ring for one pass brings the block home. */
    int pos = strata_schedule_rotating_holder(s, r, 0), moves = 0;
    for (int sub = 0; sub < B; sub++) {
      int next = strata_schedule_rotating_holder(s, r, (sub + 1) % B);
      if (next != pos) moves++;
      pos = next;
    }
    assert_int_equal(pos, strata_schedule_rotating_holder(s, r, 0));
    assert_int_equal(moves, P == 1 ? 0 : P);
    if (B == P)
      for (int w = 0; w < P; w++) assert_int_equal(held[w], 1);
    /* every worker holds every column for as many sub-epochs as it has rows */
    for (int w = 0; w < P; w++) {
      int rows = 0;
      for (int i = 0; i < B; i++) rows += row_worker(i, P, B) == w;
      assert_int_equal(held[w], rows);
    }
    free(held);
  }
  free(seen);
  free(res_used);
  free(rot_used);
}

static const int cases[][2] = {{1, 1}, {1, 3}, {2, 2}, {2, 3}, {2, 5}, {3, 3}, {3, 4}, {4, 8}};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static void test_diagonal_properties(void **state) {
  (void)state;
  for (int c = 0; c < N_CASES; c++) {
    int P = cases[c][0], B = cases[c][1];
    strata_schedule s;
    assert_int_equal(strata_schedule_diagonal(&s, P, B), 0);
    check_diagonal(&s, P, B);
    strata_schedule_close(&s);
    assert_int_equal(strata_alloc_live(), live0);
  }
}

static void test_diagonal_rejects_fewer_strata_than_workers(void **state) {
  (void)state;
  strata_schedule s;
  memset(&s, 0, sizeof s);
  assert_int_equal(strata_schedule_diagonal(&s, 3, 2), STRATA_EINVAL);
  assert_non_null(strstr(strata_err_msg(), "strata"));
  assert_int_equal(strata_schedule_diagonal(&s, 0, 2), STRATA_EINVAL);
  assert_int_equal(strata_schedule_diagonal(&s, 5, 1), STRATA_EINVAL);
  strata_schedule_close(&s);
}

static void test_diagonal_oom_cleans_up(void **state) {
  (void)state;
  /* Fail each allocation in turn: every failure is reported, nothing leaks. */
  int failures = 0;
  for (long n = 1; n < 64; n++) {
    strata_schedule s;
    memset(&s, 0, sizeof s);
    strata_alloc_fail_after(n);
    int rc = strata_schedule_diagonal(&s, 3, 7);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      check_diagonal(&s, 3, 7);
      strata_schedule_close(&s);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    failures++;
    strata_schedule_close(&s);
    assert_int_equal(strata_alloc_live(), live0);
  }
  assert_true(failures > 0);
}

/* ---- validation rules ------------------------------------------------ */

static void add_ok(strata_schedule *s, int sub, int w, int d, int r, int q) {
  strata_task t = {d, r, q};
  assert_int_equal(strata_schedule_add(s, sub, w, t), 0);
}

static void expect_finish_fails(strata_schedule *s, const char *words) {
  strata_err_clear();
  assert_int_equal(strata_schedule_finish(s), STRATA_ESCHED);
  assert_non_null(strstr(strata_err_msg(), words));
  /* The finished-but-invalid schedule stays invalid. */
  assert_int_equal(strata_schedule_validate(s), STRATA_ESCHED);
  strata_schedule_close(s);
}

static void test_valid_handmade_schedule(void **state) {
  (void)state;
  /* Two workers, two sub-epochs, 2x2 blocks: a diagonal written by hand,
   * tasks added out of order. */
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 2, 2, 4, 2, 2), 0);
  add_ok(&s, 1, 1, 2, 1, 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 1, 0, 1, 0, 1);
  add_ok(&s, 0, 1, 3, 1, 1);
  assert_int_equal(strata_schedule_finish(&s), 0);
  int n;
  const strata_task *t = strata_schedule_tasks(&s, 1, 1, &n);
  assert_int_equal(n, 1);
  assert_int_equal(t[0].data, 2);
  t = strata_schedule_tasks(&s, 0, 1, &n);
  assert_int_equal(n, 1);
  assert_int_equal(t[0].data, 3);
  assert_int_equal(strata_schedule_resident_owner(&s, 1), 1);
  assert_int_equal(strata_schedule_rotating_holder(&s, 0, 1), 1);
  strata_schedule_close(&s);
}

static void test_tasks_keep_insertion_order(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 1, 1, 3, 3, 3), 0);
  add_ok(&s, 0, 0, 2, 2, 1);
  add_ok(&s, 0, 0, 0, 0, 2);
  add_ok(&s, 0, 0, 1, 1, 0);
  assert_int_equal(strata_schedule_finish(&s), 0);
  int n;
  const strata_task *t = strata_schedule_tasks(&s, 0, 0, &n);
  assert_int_equal(n, 3);
  assert_int_equal(t[0].data, 2);
  assert_int_equal(t[1].data, 0);
  assert_int_equal(t[2].data, 1);
  assert_int_equal(t[2].rotating, 0);
  strata_schedule_close(&s);
}

static void test_reject_data_twice(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 1, 2, 2, 2, 1), 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 1, 0, 0, 1, 0); /* data 0 again; data 1 never */
  expect_finish_fails(&s, "data block 0");
}

static void test_reject_data_never_processed(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 1, 1, 3, 2, 2), 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 0, 1, 1, 1);
  expect_finish_fails(&s, "data block 2");
}

static void test_reject_rotating_twice_in_subepoch(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 2, 1, 2, 2, 1), 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 1, 1, 1, 0);
  expect_finish_fails(&s, "rotating block 0");
}

static void test_reject_rotating_idle(void **state) {
  (void)state;
  strata_schedule s;
  /* Sub-epoch 0 uses both columns, sub-epoch 1 only column 1. */
  assert_int_equal(strata_schedule_init(&s, 1, 2, 3, 2, 2), 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 0, 1, 1, 1);
  add_ok(&s, 1, 0, 2, 0, 1);
  expect_finish_fails(&s, "idle");
}

static void test_reject_resident_on_two_workers(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 2, 2, 4, 2, 2), 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 1, 1, 1, 1);
  add_ok(&s, 1, 0, 2, 1, 0); /* row 1 moves to worker 0 */
  add_ok(&s, 1, 1, 3, 0, 1);
  expect_finish_fails(&s, "used by workers");
}

static void test_reject_resident_twice_in_subepoch(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 1, 1, 2, 1, 2), 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 0, 1, 0, 1);
  expect_finish_fails(&s, "resident block 0 is used twice");
}

static void test_validate_catches_mutation(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_diagonal(&s, 2, 4), 0);
  strata_task saved = s.tasks[5];
  s.tasks[5].data = s.tasks[6].data;
  assert_int_equal(strata_schedule_validate(&s), STRATA_ESCHED);
  s.tasks[5] = saved;
  assert_int_equal(strata_schedule_validate(&s), 0);
  s.tasks[5].rotating = (s.tasks[5].rotating + 1) % 4;
  assert_int_equal(strata_schedule_validate(&s), STRATA_ESCHED);
  s.tasks[5] = saved;
  s.tasks[5].resident = (s.tasks[5].resident + 1) % 4;
  assert_int_equal(strata_schedule_validate(&s), STRATA_ESCHED);
  s.tasks[5] = saved;
  assert_int_equal(strata_schedule_validate(&s), 0);
  strata_schedule_close(&s);
}

static void test_add_rejects_out_of_range(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 2, 3, 4, 5, 6), 0);
  const struct {
    int sub, w;
    strata_task t;
  } bad[] = {
      {-1, 0, {0, 0, 0}}, {3, 0, {0, 0, 0}}, {0, -1, {0, 0, 0}}, {0, 2, {0, 0, 0}},
      {0, 0, {-1, 0, 0}}, {0, 0, {4, 0, 0}}, {0, 0, {0, -1, 0}}, {0, 0, {0, 5, 0}},
      {0, 0, {0, 0, -1}}, {0, 0, {0, 0, 6}},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(strata_schedule_add(&s, bad[i].sub, bad[i].w, bad[i].t), STRATA_EINVAL);
  assert_int_equal(s.n_tasks, 0);
  /* the largest valid ids are accepted */
  add_ok(&s, 2, 1, 3, 4, 5);
  assert_int_equal(s.n_tasks, 1);
  strata_schedule_close(&s);
}

static void test_add_after_finish_rejected(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_diagonal(&s, 1, 2), 0);
  strata_task t = {0, 0, 0};
  assert_int_equal(strata_schedule_add(&s, 0, 0, t), STRATA_EINVAL);
  strata_schedule_close(&s);
}

static void test_init_rejects_zero_counts(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 0, 1, 1, 1, 1), STRATA_EINVAL);
  assert_int_equal(strata_schedule_init(&s, 1, 0, 1, 1, 1), STRATA_EINVAL);
  assert_int_equal(strata_schedule_init(&s, 1, 1, 0, 1, 1), STRATA_EINVAL);
  assert_int_equal(strata_schedule_init(&s, 1, 1, 1, 0, 1), STRATA_EINVAL);
  assert_int_equal(strata_schedule_init(&s, 1, 1, 1, 1, -3), STRATA_EINVAL);
  strata_schedule_close(&s); /* safe on what init left */
  strata_schedule z;
  memset(&z, 0, sizeof z);
  strata_schedule_close(&z);
}

static void test_resident_owner_unused(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 1, 1, 1, 3, 1), 0);
  add_ok(&s, 0, 0, 0, 1, 0);
  assert_int_equal(strata_schedule_finish(&s), 0);
  assert_int_equal(strata_schedule_resident_owner(&s, 1), 0);
  assert_int_equal(strata_schedule_resident_owner(&s, 0), -1);
  assert_int_equal(strata_schedule_resident_owner(&s, 2), -1);
  strata_schedule_close(&s);
}

/* ---- wire form ------------------------------------------------------- */

static void assert_same_schedule(const strata_schedule *a, const strata_schedule *b) {
  assert_int_equal(a->n_workers, b->n_workers);
  assert_int_equal(a->n_subepochs, b->n_subepochs);
  assert_int_equal(a->n_data, b->n_data);
  assert_int_equal(a->n_resident, b->n_resident);
  assert_int_equal(a->n_rotating, b->n_rotating);
  assert_int_equal(a->n_tasks, b->n_tasks);
  assert_true(b->finished);
  for (int sub = 0; sub < a->n_subepochs; sub++)
    for (int w = 0; w < a->n_workers; w++) {
      int na, nb;
      const strata_task *ta = strata_schedule_tasks(a, sub, w, &na);
      const strata_task *tb = strata_schedule_tasks(b, sub, w, &nb);
      assert_int_equal(na, nb);
      for (int k = 0; k < na; k++) {
        assert_int_equal(ta[k].data, tb[k].data);
        assert_int_equal(ta[k].resident, tb[k].resident);
        assert_int_equal(ta[k].rotating, tb[k].rotating);
      }
    }
}

static void test_pack_unpack_round_trip(void **state) {
  (void)state;
  for (int c = 0; c < N_CASES; c++) {
    strata_schedule s, u;
    assert_int_equal(strata_schedule_diagonal(&s, cases[c][0], cases[c][1]), 0);
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
    assert_non_null(buf);
    assert_true(len > 0);
    assert_int_equal(strata_schedule_unpack(&u, buf, len), 0);
    assert_same_schedule(&s, &u);
    check_diagonal(&u, cases[c][0], cases[c][1]);
    /* Packing the copy gives the same bytes. */
    void *buf2 = NULL;
    size_t len2 = 0;
    assert_int_equal(strata_schedule_pack(&u, &buf2, &len2), 0);
    assert_int_equal(len, len2);
    assert_memory_equal(buf, buf2, len);
    strata_free(buf);
    strata_free(buf2);
    strata_schedule_close(&s);
    strata_schedule_close(&u);
  }
}

static void test_pack_unpack_irregular(void **state) {
  (void)state;
  /* Uneven task counts per (sub, worker), some empty. */
  strata_schedule s, u;
  assert_int_equal(strata_schedule_init(&s, 3, 2, 6, 3, 3), 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 0, 1, 1, 1);
  add_ok(&s, 0, 2, 2, 2, 2);
  add_ok(&s, 1, 0, 3, 0, 2);
  add_ok(&s, 1, 0, 4, 1, 0);
  add_ok(&s, 1, 2, 5, 2, 1);
  assert_int_equal(strata_schedule_finish(&s), 0);
  void *buf;
  size_t len;
  assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
  assert_int_equal(strata_schedule_unpack(&u, buf, len), 0);
  assert_same_schedule(&s, &u);
  strata_free(buf);
  strata_schedule_close(&s);
  strata_schedule_close(&u);
}

static void test_unpack_truncated_fails(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_diagonal(&s, 2, 3), 0);
  void *buf;
  size_t len;
  assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
  const size_t live_before = strata_alloc_live();
  for (size_t cut = 0; cut < len; cut++) {
    strata_schedule u;
    memset(&u, 0, sizeof u);
    assert_int_not_equal(strata_schedule_unpack(&u, buf, cut), 0);
    strata_schedule_close(&u);
    assert_int_equal(strata_alloc_live(), live_before); /* failures free what they took */
  }
  /* Longer than the content is an error too. */
  char *longer = strata_malloc(len + 4);
  assert_non_null(longer);
  memcpy(longer, buf, len);
  memset(longer + len, 0, 4);
  strata_schedule u;
  memset(&u, 0, sizeof u);
  assert_int_not_equal(strata_schedule_unpack(&u, longer, len + 4), 0);
  strata_schedule_close(&u);
  strata_free(longer);
  strata_free(buf);
  strata_schedule_close(&s);
}

static void test_unpack_corrupt_fails(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_diagonal(&s, 2, 2), 0);
  void *buf;
  size_t len;
  assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
  int32_t *p = buf;
  size_t nk = 2 * 2 + 1, q = 6 + nk; /* 6 header ints, the offsets, the tasks */
  /* a task naming a data block beyond n_data */
  int32_t saved = p[q];
  p[q] = 99;
  strata_schedule u;
  memset(&u, 0, sizeof u);
  assert_int_not_equal(strata_schedule_unpack(&u, buf, len), 0);
  strata_schedule_close(&u);
  p[q] = saved;
  /* two tasks naming the same data block: valid ids, invalid schedule */
  p[q] = p[q + 3];
  assert_int_equal(strata_schedule_unpack(&u, buf, len), STRATA_ESCHED);
  strata_schedule_close(&u);
  p[q] = saved;
  /* a zero worker count */
  p[0] = 0;
  assert_int_not_equal(strata_schedule_unpack(&u, buf, len), 0);
  strata_schedule_close(&u);
  p[0] = 2;
  assert_int_equal(strata_schedule_unpack(&u, buf, len), 0);
  strata_schedule_close(&u);
  strata_free(buf);
  strata_schedule_close(&s);
}

/*
 * strata_schedule_unpack must not read past `len`. The packed bytes are
 * placed so that they end exactly at a PROT_NONE guard page, and the offsets
 * are corrupted so that one (sub-epoch, worker) claims more tasks than the
 * buffer holds while the last offset (the task count used for the length
 * check) stays consistent: every offset is checked against the buffer, not
 * only the last, so the bytes are refused without a read beyond the end of
 * the buffer or before its start. The call runs in a child process: a
 * crash there is a failure here.
 */
static void test_unpack_stays_within_buffer(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_diagonal(&s, 2, 2), 0);
  void *buf;
  size_t len;
  assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
  strata_schedule_close(&s);

  long page = sysconf(_SC_PAGESIZE);
  size_t span = (size_t)page * 2;
  char *map = mmap(NULL, span * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(map != MAP_FAILED);
  assert_int_equal(mprotect(map + span, span, PROT_NONE), 0);
  char *at = map + span - len;
  memcpy(at, buf, len);
  strata_free(buf);
  int32_t *p = (int32_t *)at;
  /* offsets at p[6..10] = 0 1 2 3 4; let (sub 0, worker 0) claim a million. */
  p[7] = 1000000;

  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* Die of the signal instead of returning into cmocka's handler. */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    strata_schedule u;
    int rc = strata_schedule_unpack(&u, at, len);
    if (rc == 0) strata_schedule_close(&u);
    _exit(rc == 0 ? 3 : 0); /* rejected without touching the guard page */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  munmap(map, span * 2);
  if (WIFSIGNALED(status))
    print_message("unpack child died with signal %d (read past the buffer)\n", WTERMSIG(status));
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- shared schedules: data-parallel minibatches --------------------- */

/* Every property strata_schedule_minibatches promises for (P, C). */
static void check_minibatches(const strata_schedule *s, int P, int C) {
  assert_true(s->finished);
  assert_int_equal(s->shared, 1);
  assert_int_equal(s->n_workers, P);
  assert_int_equal(s->n_subepochs, C);
  assert_int_equal(s->n_data, P * C);
  assert_int_equal(s->n_resident, P);
  assert_int_equal(s->n_rotating, 1);
  assert_int_equal(s->n_tasks, P * C);
  assert_int_equal(strata_schedule_validate(s), 0);
  for (int c = 0; c < C; c++) {
    for (int p = 0; p < P; p++) {
      int n = -1;
      const strata_task *t = strata_schedule_tasks(s, c, p, &n);
      assert_int_equal(n, 1);
      assert_int_equal(t[0].data, c * P + p);
      assert_int_equal(t[0].resident, p);
      assert_int_equal(t[0].rotating, 0);
      assert_int_equal(strata_schedule_data_owner(s, c * P + p), p);
    }
    /* every worker uses W; the holder is the lowest of them */
    assert_int_equal(strata_schedule_rotating_holder(s, 0, c), 0);
    assert_int_equal(strata_schedule_rotating_holder(s, 1, c), -1);
  }
  for (int p = 0; p < P; p++) assert_int_equal(strata_schedule_resident_owner(s, p), p);
  assert_int_equal(strata_schedule_data_owner(s, P * C), -1);
  assert_int_equal(strata_schedule_rotating_holder(s, 0, C), -1);
}

static void test_minibatches_shape(void **state) {
  (void)state;
  for (int P = 1; P <= 6; P++)
    for (int C = 1; C <= 5; C++) {
      strata_schedule s;
      assert_int_equal(strata_schedule_minibatches(&s, P, C), 0);
      check_minibatches(&s, P, C);
      strata_schedule_close(&s);
      assert_int_equal(strata_alloc_live(), live0);
    }
}

static void test_minibatches_rejects(void **state) {
  (void)state;
  const int bad[][2] = {{0, 1}, {1, 0}, {-2, 3}, {3, -1}, {65536, 65536}, {2, INT32_MAX}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    strata_schedule s;
    memset(&s, 0, sizeof s);
    strata_err_clear();
    assert_int_equal(strata_schedule_minibatches(&s, bad[i][0], bad[i][1]), STRATA_EINVAL);
    assert_non_null(strstr(strata_err_msg(), "minibatch"));
    strata_schedule_close(&s);
    assert_int_equal(strata_alloc_live(), live0);
  }
}

static void test_minibatches_oom_cleans_up(void **state) {
  (void)state;
  int failures = 0;
  for (long n = 1; n < 64; n++) {
    strata_schedule s;
    memset(&s, 0, sizeof s);
    strata_alloc_fail_after(n);
    int rc = strata_schedule_minibatches(&s, 4, 9);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      check_minibatches(&s, 4, 9);
      strata_schedule_close(&s);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    failures++;
    strata_schedule_close(&s);
    assert_int_equal(strata_alloc_live(), live0);
  }
  assert_true(failures > 0);
}

/* The same tasks, shared or not: several workers on rotating block 0 in one
 * sub-epoch, block 1 idle in sub-epoch 1. Added worker 2 first, so that
 * the holder being the lowest worker is not the order of addition. */
static void build_crowded(strata_schedule *s, int shared) {
  assert_int_equal(strata_schedule_init(s, 3, 2, 6, 4, 2), 0);
  s->shared = shared;
  add_ok(s, 0, 2, 2, 2, 0);
  add_ok(s, 0, 1, 1, 1, 0);
  add_ok(s, 0, 0, 0, 0, 1);
  add_ok(s, 1, 2, 5, 2, 0);
  add_ok(s, 1, 1, 4, 1, 0);
  add_ok(s, 1, 1, 3, 3, 0); /* one worker twice on block 0 */
}

static void test_shared_validation(void **state) {
  (void)state;
  strata_schedule s;
  build_crowded(&s, 1);
  assert_int_equal(strata_schedule_finish(&s), 0);
  assert_int_equal(strata_schedule_rotating_holder(&s, 0, 0), 1);
  assert_int_equal(strata_schedule_rotating_holder(&s, 1, 0), 0);
  assert_int_equal(strata_schedule_rotating_holder(&s, 0, 1), 1);
  assert_int_equal(strata_schedule_rotating_holder(&s, 1, 1), -1); /* idle: fine when shared */
  int n;
  const strata_task *t = strata_schedule_tasks(&s, 1, 1, &n);
  assert_int_equal(n, 2);
  assert_int_equal(t[0].data, 4);
  assert_int_equal(t[1].data, 3);
  /* The flag is what allows it. */
  s.shared = 0;
  strata_err_clear();
  assert_int_equal(strata_schedule_validate(&s), STRATA_ESCHED);
  assert_non_null(strstr(strata_err_msg(), "rotating block 0 is used twice in sub-epoch 0"));
  s.shared = 1;
  assert_int_equal(strata_schedule_validate(&s), 0);
  strata_schedule_close(&s);

  /* Not shared: the same tasks break the rotating rule... */
  build_crowded(&s, 0);
  expect_finish_fails(&s, "rotating block 0 is used twice in sub-epoch 0");
  /* ... and so does an idle block, even with no block used twice. */
  assert_int_equal(strata_schedule_init(&s, 2, 2, 3, 2, 2), 0);
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 1, 1, 1, 1);
  add_ok(&s, 1, 0, 2, 0, 0);
  expect_finish_fails(&s, "rotating block 1 is idle in sub-epoch 1");
  assert_int_equal(strata_schedule_init(&s, 2, 2, 3, 2, 2), 0);
  s.shared = 1;
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 1, 1, 1, 1);
  add_ok(&s, 1, 0, 2, 0, 0);
  assert_int_equal(strata_schedule_finish(&s), 0);
  assert_int_equal(strata_schedule_rotating_holder(&s, 1, 1), -1);
  strata_schedule_close(&s);
}

/* Sharing drops the rotating rule only: data and resident rules stand. */
static void test_shared_keeps_other_rules(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_init(&s, 2, 1, 2, 2, 1), 0);
  s.shared = 1;
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 1, 0, 1, 0);
  expect_finish_fails(&s, "data block 0 is processed twice");
  assert_int_equal(strata_schedule_init(&s, 2, 2, 4, 2, 1), 0);
  s.shared = 1;
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 1, 1, 1, 0);
  add_ok(&s, 1, 0, 2, 1, 0); /* resident 1 moves to worker 0 */
  add_ok(&s, 1, 1, 3, 0, 0);
  expect_finish_fails(&s, "used by workers");
  assert_int_equal(strata_schedule_init(&s, 1, 1, 2, 1, 1), 0);
  s.shared = 1;
  add_ok(&s, 0, 0, 0, 0, 0);
  add_ok(&s, 0, 0, 1, 0, 0);
  expect_finish_fails(&s, "resident block 0 is used twice");
  assert_int_equal(strata_schedule_init(&s, 1, 1, 2, 1, 1), 0);
  s.shared = 1;
  add_ok(&s, 0, 0, 0, 0, 0);
  expect_finish_fails(&s, "data block 1 is never processed");
}

static void test_pack_unpack_keeps_shared(void **state) {
  (void)state;
  const int pc[][2] = {{1, 1}, {2, 3}, {5, 4}};
  for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
    strata_schedule s, u;
    assert_int_equal(strata_schedule_minibatches(&s, pc[i][0], pc[i][1]), 0);
    void *buf, *buf2;
    size_t len, len2;
    assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
    assert_int_equal(((int32_t *)buf)[5], 1);
    assert_int_equal(strata_schedule_unpack(&u, buf, len), 0);
    assert_same_schedule(&s, &u);
    check_minibatches(&u, pc[i][0], pc[i][1]);
    assert_int_equal(strata_schedule_pack(&u, &buf2, &len2), 0);
    assert_int_equal(len, len2);
    assert_memory_equal(buf, buf2, len);
    strata_free(buf2);
    strata_schedule_close(&u);
    /* Without the flag the tasks are no stratum (for P > 1). */
    ((int32_t *)buf)[5] = 0;
    memset(&u, 0, sizeof u);
    int rc = strata_schedule_unpack(&u, buf, len);
    if (pc[i][0] > 1) {
      assert_int_equal(rc, STRATA_ESCHED);
    } else {
      assert_int_equal(rc, 0);
      assert_int_equal(u.shared, 0);
    }
    strata_schedule_close(&u);
    strata_free(buf);
    strata_schedule_close(&s);
  }
  /* A ring schedule travels unshared. */
  strata_schedule s, u;
  assert_int_equal(strata_schedule_diagonal(&s, 2, 3), 0);
  void *buf;
  size_t len;
  assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
  assert_int_equal(((int32_t *)buf)[5], 0);
  assert_int_equal(strata_schedule_unpack(&u, buf, len), 0);
  assert_int_equal(u.shared, 0);
  strata_free(buf);
  strata_schedule_close(&s);
  strata_schedule_close(&u);
}

static void test_unpack_rejects_bad_shared_flag(void **state) {
  (void)state;
  strata_schedule s;
  assert_int_equal(strata_schedule_minibatches(&s, 3, 2), 0);
  void *buf;
  size_t len;
  assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
  strata_schedule_close(&s);
  const int32_t flags[] = {2, -1, 3, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    ((int32_t *)buf)[5] = flags[i];
    strata_schedule u;
    memset(&u, 0, sizeof u);
    strata_err_clear();
    assert_int_equal(strata_schedule_unpack(&u, buf, len), STRATA_ESCHED);
    assert_non_null(strstr(strata_err_msg(), "shared"));
    strata_schedule_close(&u);
    assert_int_equal(strata_alloc_live(), live0 + len);
  }
  ((int32_t *)buf)[5] = 1;
  assert_int_equal(strata_schedule_unpack(&s, buf, len), 0);
  check_minibatches(&s, 3, 2);
  strata_schedule_close(&s);
  strata_free(buf);
}

/* ---- randomised ------------------------------------------------------ */

static uint64_t test_seed(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  if (env && *env) return strtoull(env, NULL, 0);
  return (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
}

static void test_random_diagonals(void **state) {
  (void)state;
  uint64_t seed = test_seed();
  print_message("test_random_diagonals: STRATA_TEST_SEED=%llu\n", (unsigned long long)seed);
  strata_rng rng;
  strata_rng_seed(&rng, seed);
  for (int round = 0; round < 60; round++) {
    int P = 1 + (int)strata_rng_below(&rng, 8);
    int B = P + (int)strata_rng_below(&rng, 17);
    strata_schedule s, u;
    assert_int_equal(strata_schedule_diagonal(&s, P, B), 0);
    check_diagonal(&s, P, B);
    void *buf;
    size_t len;
    assert_int_equal(strata_schedule_pack(&s, &buf, &len), 0);
    assert_int_equal(strata_schedule_unpack(&u, buf, len), 0);
    assert_same_schedule(&s, &u);
    strata_free(buf);
    strata_schedule_close(&u);
    /* Any change of one id of one task breaks a stratum (B > 1). */
    if (B > 1) {
      int t = (int)strata_rng_below(&rng, (uint64_t)s.n_tasks);
      int field = (int)strata_rng_below(&rng, 3);
      int delta = 1 + (int)strata_rng_below(&rng, (uint64_t)(B - 1));
      strata_task saved = s.tasks[t];
      if (field == 0)
        s.tasks[t].data = (s.tasks[t].data + delta) % (B * B);
      else if (field == 1)
        s.tasks[t].resident = (s.tasks[t].resident + delta) % B;
      else
        s.tasks[t].rotating = (s.tasks[t].rotating + delta) % B;
      assert_int_equal(strata_schedule_validate(&s), STRATA_ESCHED);
      s.tasks[t] = saved;
      assert_int_equal(strata_schedule_validate(&s), 0);
    }
    strata_schedule_close(&s);
    if (B > P) {
      memset(&s, 0, sizeof s);
      assert_int_equal(strata_schedule_diagonal(&s, B, P), STRATA_EINVAL);
    }
  }
}

static void test_chunk_rows(void **state) {
  (void)state;
  const uint32_t rows[] = {0, 1, 5, 7, 100, 1001};
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
    for (int depth = 1; depth <= 8; depth++) {
      uint32_t prev = 0, lo, hi, biggest = 0, smallest = UINT32_MAX;
      for (int c = 0; c < depth; c++) {
        strata_chunk_rows(rows[r], depth, c, &lo, &hi);
        assert_int_equal(lo, prev);
        assert_true(hi >= lo);
        biggest = hi - lo > biggest ? hi - lo : biggest;
        smallest = hi - lo < smallest ? hi - lo : smallest;
        prev = hi;
      }
      assert_int_equal(prev, rows[r]);
      assert_true(biggest - smallest <= 1);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_diagonal_properties, setup, teardown),
      cmocka_unit_test_setup_teardown(test_diagonal_rejects_fewer_strata_than_workers, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_diagonal_oom_cleans_up, setup, teardown),
      cmocka_unit_test_setup_teardown(test_valid_handmade_schedule, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tasks_keep_insertion_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reject_data_twice, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reject_data_never_processed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reject_rotating_twice_in_subepoch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reject_rotating_idle, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reject_resident_on_two_workers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_reject_resident_twice_in_subepoch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_validate_catches_mutation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_add_rejects_out_of_range, setup, teardown),
      cmocka_unit_test_setup_teardown(test_add_after_finish_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(test_init_rejects_zero_counts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_resident_owner_unused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pack_unpack_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pack_unpack_irregular, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unpack_truncated_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unpack_corrupt_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unpack_stays_within_buffer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_random_diagonals, setup, teardown),
      cmocka_unit_test_setup_teardown(test_minibatches_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(test_minibatches_rejects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_minibatches_oom_cleans_up, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shared_validation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shared_keeps_other_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pack_unpack_keeps_shared, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unpack_rejects_bad_shared_flag, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chunk_rows, setup, teardown),
  };
  return cmocka_run_group_tests_name("schedule", tests, NULL, NULL);
}
