/*
 * The fixture most unit tests share: every test starts with no error
 * message and no armed allocation failure, and must give back every byte it
 * took through the strata allocation wrappers.
 */
#ifndef STRATA_TEST_LEAKCHECK_H
#define STRATA_TEST_LEAKCHECK_H

#include "strata/core.h"
#include "strata/error.h"

static size_t live0;

static int setup(void **state) {
  (void)state;
  live0 = strata_alloc_live();
  strata_err_clear();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  strata_alloc_fail_after(0);
  strata_err_clear();
  assert_int_equal(strata_alloc_live(), live0);
  return 0;
}

#endif
