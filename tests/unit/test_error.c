/*
 * Unit tests for core/error.c: the code table, strata_err_set and the
 * per-thread message.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "strata/core.h"
#include "strata/error.h"

typedef struct code_entry {
  int code;
  const char *name;
  const char *desc;
} code_entry;

static const code_entry codes[] = {
#define XX(n, v, d) {STRATA_##n, "STRATA_" #n, d},
    STRATA_ERRNO_MAP(XX)
#undef XX
};
#define N_CODES ((int)(sizeof codes / sizeof codes[0]))


static void test_codes_are_negative_and_distinct(void **state) {
  (void)state;
  assert_true(N_CODES >= 13);
  for (int i = 0; i < N_CODES; i++) {
    assert_true(codes[i].code < 0);
    for (int j = i + 1; j < N_CODES; j++) assert_int_not_equal(codes[i].code, codes[j].code);
  }
}

static void test_every_code_has_its_name(void **state) {
  (void)state;
  for (int i = 0; i < N_CODES; i++) {
    const char *name = strata_err_name(codes[i].code);
    assert_non_null(name);
    assert_string_equal(name, codes[i].name);
  }
  for (int i = 0; i < N_CODES; i++)
    for (int j = i + 1; j < N_CODES; j++)
      assert_string_not_equal(strata_err_name(codes[i].code), strata_err_name(codes[j].code));
}

static void test_every_code_has_its_description(void **state) {
  (void)state;
  for (int i = 0; i < N_CODES; i++) {
    const char *d = strata_strerror(codes[i].code);
    assert_non_null(d);
    assert_true(strlen(d) > 0);
    assert_string_equal(d, codes[i].desc);
    assert_string_not_equal(d, "unknown error");
  }
  for (int i = 0; i < N_CODES; i++)
    for (int j = i + 1; j < N_CODES; j++)
      assert_string_not_equal(strata_strerror(codes[i].code), strata_strerror(codes[j].code));
}

static void test_zero_and_unknown_codes(void **state) {
  (void)state;
  assert_string_equal(strata_strerror(0), "success");
  assert_string_equal(strata_err_name(0), "STRATA_OK");
  const int unknown[] = {1, 42, -15, -1000, INT32_MIN};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    assert_string_equal(strata_strerror(unknown[i]), "unknown error");
    assert_string_equal(strata_err_name(unknown[i]), "STRATA_EUNKNOWN");
  }
}

static void test_err_set_returns_code_and_formats(void **state) {
  (void)state;
  assert_string_equal(strata_err_msg(), "");
  for (int i = 0; i < N_CODES; i++) {
    int rc = strata_err_set(codes[i].code, "%s:%d: bad %s (%.2f)", "file.tsv", 17 + i, "value",
                            2.5);
    assert_int_equal(rc, codes[i].code);
    char want[128];
    snprintf(want, sizeof want, "file.tsv:%d: bad value (2.50)", 17 + i);
    assert_string_equal(strata_err_msg(), want);
  }
}

static void test_err_set_replaces_earlier_message(void **state) {
  (void)state;
  strata_err_set(STRATA_EIO, "first %d", 1);
  assert_string_equal(strata_err_msg(), "first 1");
  strata_err_set(STRATA_EPARSE, "second");
  assert_string_equal(strata_err_msg(), "second");
  /* Wrapping the message already set: the arguments may quote it. */
  strata_err_set(STRATA_EUSAGE, "%s: %s", "--graph synth:x=1", strata_err_msg());
  assert_string_equal(strata_err_msg(), "--graph synth:x=1: second");
}

static void test_err_set_long_message_is_truncated(void **state) {
  (void)state;
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(strata_err_set(STRATA_EINVAL, "%s", big), STRATA_EINVAL);
  size_t n = strlen(strata_err_msg());
  assert_true(n > 100);
  assert_true(n < sizeof big - 1);
  for (size_t i = 0; i < n; i++) assert_int_equal(strata_err_msg()[i], 'x');
}

static void test_err_clear(void **state) {
  (void)state;
  strata_err_set(STRATA_ENOMEM, "out of %s", "memory");
  assert_string_equal(strata_err_msg(), "out of memory");
  strata_err_clear();
  assert_string_equal(strata_err_msg(), "");
  strata_err_clear();
  assert_string_equal(strata_err_msg(), "");
}

static void *other_thread(void *arg) {
  char *seen = arg;
  /* A fresh thread starts with no message, and its own does not leak out. */
  snprintf(seen, 64, "%s", strata_err_msg());
  strata_err_set(STRATA_ECOMM, "thread message");
  return NULL;
}

static void test_message_is_per_thread(void **state) {
  (void)state;
  strata_err_set(STRATA_EIO, "main message");
  char seen[64] = "unset";
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, other_thread, seen), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_string_equal(seen, "");
  assert_string_equal(strata_err_msg(), "main message");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_codes_are_negative_and_distinct, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_code_has_its_name, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_code_has_its_description, setup, teardown),
      cmocka_unit_test_setup_teardown(test_zero_and_unknown_codes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_err_set_returns_code_and_formats, setup, teardown),
      cmocka_unit_test_setup_teardown(test_err_set_replaces_earlier_message, setup, teardown),
      cmocka_unit_test_setup_teardown(test_err_set_long_message_is_truncated, setup, teardown),
      cmocka_unit_test_setup_teardown(test_err_clear, setup, teardown),
      cmocka_unit_test_setup_teardown(test_message_is_per_thread, setup, teardown),
  };
  return cmocka_run_group_tests_name("error", tests, NULL, NULL);
}
