/*
 * Unit tests for core/core.c (allocation wrappers, checksums, random
 * numbers, atomic file output, quoting input in messages) and strata_median.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dirs.h"
#include "leakcheck.h"

#include "strata/core.h"
#include "strata/engine.h"
#include "strata/error.h"
#include "strata/version.h"


/* ---- helpers for file tests ------------------------------------------ */

static void make_tmpdir(char *dir, size_t n) {
  snprintf(dir, n, "/tmp/strata_test_core.XXXXXX");
  assert_non_null(mkdtemp(dir));
}



static size_t read_file(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = '\0';
  return n;
}

/* ---- allocation ------------------------------------------------------ */

static void test_malloc_counts_live_bytes(void **state) {
  (void)state;
  char *a = strata_malloc(100);
  assert_non_null(a);
  assert_int_equal(strata_alloc_live(), live0 + 100);
  char *b = strata_malloc(28);
  assert_non_null(b);
  assert_int_equal(strata_alloc_live(), live0 + 128);
  memset(a, 1, 100);
  memset(b, 2, 28);
  strata_free(a);
  assert_int_equal(strata_alloc_live(), live0 + 28);
  strata_free(b);
  assert_int_equal(strata_alloc_live(), live0);
}

static void test_calloc_zeroes(void **state) {
  (void)state;
  /* Dirty the heap first so a non-zeroing calloc would likely show. */
  for (int round = 0; round < 4; round++) {
    unsigned char *d = strata_malloc(4096);
    assert_non_null(d);
    memset(d, 0xAB, 4096);
    strata_free(d);
    unsigned char *z = strata_calloc(512, 8);
    assert_non_null(z);
    assert_int_equal(strata_alloc_live(), live0 + 4096);
    for (int i = 0; i < 4096; i++) assert_int_equal(z[i], 0);
    strata_free(z);
  }
}

static void test_calloc_overflow_fails(void **state) {
  (void)state;
  assert_null(strata_calloc(SIZE_MAX / 2, 4));
  assert_null(strata_malloc(SIZE_MAX - 10));
  assert_int_equal(strata_alloc_live(), live0);
}

static void test_realloc_keeps_content(void **state) {
  (void)state;
  int *p = strata_malloc(10 * sizeof(int));
  assert_non_null(p);
  for (int i = 0; i < 10; i++) p[i] = i * 7 + 1;
  p = strata_realloc(p, 1000 * sizeof(int));
  assert_non_null(p);
  assert_int_equal(strata_alloc_live(), live0 + 1000 * sizeof(int));
  for (int i = 0; i < 10; i++) assert_int_equal(p[i], i * 7 + 1);
  p = strata_realloc(p, 4 * sizeof(int));
  assert_non_null(p);
  assert_int_equal(strata_alloc_live(), live0 + 4 * sizeof(int));
  for (int i = 0; i < 4; i++) assert_int_equal(p[i], i * 7 + 1);
  strata_free(p);
  /* realloc(NULL, n) is malloc. */
  void *q = strata_realloc(NULL, 33);
  assert_non_null(q);
  assert_int_equal(strata_alloc_live(), live0 + 33);
  strata_free(q);
}

static void test_aligned_is_64_byte_aligned(void **state) {
  (void)state;
  void *blocks[64];
  size_t total = 0;
  for (int i = 0; i < 64; i++) {
    size_t n = (size_t)(1 + i * 37);
    blocks[i] = strata_alloc_aligned(n);
    assert_non_null(blocks[i]);
    assert_int_equal((uintptr_t)blocks[i] % 64, 0);
    memset(blocks[i], 0x5a, n);
    total += n;
  }
  assert_int_equal(strata_alloc_live(), live0 + total);
  for (int i = 0; i < 64; i++) strata_free(blocks[i]);
  assert_int_equal(strata_alloc_live(), live0);
}

static void test_free_null_is_noop(void **state) {
  (void)state;
  strata_free(NULL);
  assert_int_equal(strata_alloc_live(), live0);
}

static void test_fail_after_injects_one_failure(void **state) {
  (void)state;
  strata_alloc_fail_after(3);
  void *a = strata_malloc(8);
  void *b = strata_calloc(2, 8);
  void *c = strata_alloc_aligned(8); /* the third allocation fails */
  void *d = strata_malloc(8);        /* and the hook disarms itself */
  assert_non_null(a);
  assert_non_null(b);
  assert_null(c);
  assert_non_null(d);
  assert_int_equal(strata_alloc_live(), live0 + 8 + 16 + 8);
  strata_free(a);
  strata_free(b);
  strata_free(d);

  strata_alloc_fail_after(1);
  assert_null(strata_malloc(1));
  void *e = strata_malloc(1);
  assert_non_null(e);
  strata_free(e);

  /* A failed realloc leaves the original block alone. */
  char *p = strata_malloc(16);
  assert_non_null(p);
  memcpy(p, "keep me intact!", 16);
  strata_alloc_fail_after(1);
  assert_null(strata_realloc(p, 4096));
  assert_string_equal(p, "keep me intact!");
  assert_int_equal(strata_alloc_live(), live0 + 16);
  strata_free(p);

  /* 0 disarms. */
  strata_alloc_fail_after(1);
  strata_alloc_fail_after(0);
  void *f = strata_malloc(1);
  assert_non_null(f);
  strata_free(f);
}

/* ---- clocks ---------------------------------------------------------- */

static void test_clocks_advance(void **state) {
  (void)state;
  double t0 = strata_now(), c0 = strata_cpu_seconds();
  volatile double x = 0;
  for (int i = 0; i < 2000000; i++) x += sqrt((double)i);
  double t1 = strata_now(), c1 = strata_cpu_seconds();
  assert_true(t1 > t0);
  assert_true(c1 >= c0);
  assert_true(c0 >= 0);
  assert_true(x > 0);
}

/* ---- checksums ------------------------------------------------------ */

/* The checksum of buf[0..n) fed in the pieces that cuts[0..k) (ascending,
 * each in [0, n]) make, checking along the way that the value after each
 * piece is the one-shot value of the bytes so far (final does not end the
 * stream). */
static uint64_t hash_pieces(const unsigned char *buf, size_t n, const size_t *cuts, int k,
                            uint64_t seed) {
  strata_hash h;
  strata_hash_init(&h, seed);
  size_t at = 0;
  for (int i = 0; i <= k; i++) {
    size_t to = i < k ? cuts[i] : n;
    strata_hash_update(&h, buf + at, to - at);
    at = to;
    if (strata_hash_final(&h) != strata_hash64(buf, at, seed))
      fail_msg("after %zu of %zu bytes in %d pieces: the value differs from the one-shot one", at,
               n, k + 1);
  }
  return strata_hash_final(&h);
}

static void fill_bytes(unsigned char *buf, size_t n, uint64_t seed) {
  strata_rng r;
  strata_rng_seed(&r, seed);
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)strata_rng_next(&r);
}

/* However the bytes are split into updates (two pieces at every cut, three
 * at every pair of cuts, one byte at a time), the checksum is the one-shot
 * one, for every length up to 100 (across the 32-byte stripes) and at any
 * alignment of the bytes. */
static void test_hash_streaming_every_split(void **state) {
  (void)state;
  enum { MAXN = 100 };
  unsigned char store[MAXN + 8];
  fill_bytes(store, sizeof store, 1);
  for (size_t n = 0; n <= MAXN; n++) {
    const unsigned char *buf = store + n % 8; /* varying alignment */
    uint64_t whole = strata_hash64(buf, n, 7);
    /* The same bytes elsewhere in memory give the same value. */
    unsigned char copy[MAXN + 1];
    memcpy(copy + 1, buf, n);
    assert_true(strata_hash64(copy + 1, n, 7) == whole);
    for (size_t i = 0; i <= n; i++) {
      size_t cuts[2] = {i, 0};
      assert_true(hash_pieces(buf, n, cuts, 1, 7) == whole);
      for (size_t j = i; j <= n; j++) {
        cuts[1] = j;
        if (hash_pieces(buf, n, cuts, 2, 7) != whole)
          fail_msg("%zu bytes cut at %zu and %zu: not the one-shot value", n, i, j);
      }
    }
    size_t ones[MAXN];
    for (size_t i = 0; i < n; i++) ones[i] = i + 1;
    assert_true(hash_pieces(buf, n, ones, (int)n, 7) == whole);
  }
}

/* No bytes at all may come as (NULL, 0), at any point of a stream (the
 * checkpoint writer's empty entries do): nothing changes. */
static void test_hash_empty_update(void **state) {
  (void)state;
  unsigned char buf[80];
  fill_bytes(buf, sizeof buf, 6);
  assert_true(strata_hash64(NULL, 0, 3) == strata_hash64(buf, 0, 3));
  for (size_t n = 0; n <= sizeof buf; n += 5) {
    strata_hash h;
    strata_hash_init(&h, 3);
    strata_hash_update(&h, NULL, 0);
    strata_hash_update(&h, buf, n);
    strata_hash_update(&h, NULL, 0);
    strata_hash_update(&h, buf + n, 0);
    assert_true(strata_hash_final(&h) == strata_hash64(buf, n, 3));
  }
}

/* Long inputs: cuts at and around every stripe boundary of the first few
 * stripes, one byte at a time, and random pieces. */
static void test_hash_streaming_long(void **state) {
  (void)state;
  static const size_t lens[] = {1024, 4096 + 7, 65536 + 31, 1000003};
  unsigned char *buf = malloc(1000003);
  assert_non_null(buf);
  fill_bytes(buf, 1000003, 2);
  strata_rng r;
  strata_rng_seed(&r, 3);
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
    size_t n = lens[li];
    uint64_t whole = strata_hash64(buf, n, 11);
    for (size_t b = 32; b <= 32 * 8; b += 32)
      for (size_t d = 0; d < 3; d++) {
        size_t cut = b + d - 1;
        assert_true(hash_pieces(buf, n, &cut, 1, 11) == whole);
      }
    if (n <= 4096 + 7) {
      size_t *ones = malloc(n * sizeof *ones);
      assert_non_null(ones);
      for (size_t i = 0; i < n; i++) ones[i] = i + 1;
      assert_true(hash_pieces(buf, n, ones, (int)n - 1, 11) == whole);
      free(ones);
    }
    for (int round = 0; round < 20; round++) {
      size_t cuts[16];
      int k = 1 + (int)strata_rng_below(&r, 16);
      for (int i = 0; i < k; i++) cuts[i] = (size_t)strata_rng_below(&r, n + 1);
      for (int i = 1; i < k; i++) /* insertion sort */
        for (int j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
          size_t t = cuts[j];
          cuts[j] = cuts[j - 1];
          cuts[j - 1] = t;
        }
      assert_true(hash_pieces(buf, n, cuts, k, 11) == whole);
    }
  }
  free(buf);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Whether the n values are pairwise distinct (sorts them). */
static int all_distinct(uint64_t *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_u64);
  for (size_t i = 1; i < n; i++)
    if (v[i] == v[i - 1]) return 0;
  return 1;
}

/* Different seeds give different values for the same bytes, at every
 * length (none included); and lengths are told apart, zeros included. */
static void test_hash_seeds_and_lengths(void **state) {
  (void)state;
  static const size_t lens[] = {0, 1, 7, 8, 31, 32, 33, 64, 100, 1024};
  static const uint64_t seeds[] = {0, 1, 2, 3, 0x73747261746163ull, UINT64_MAX, UINT64_MAX - 1,
                                   UINT64_C(1) << 63, 0x9e3779b97f4a7c15ull};
  enum { NS = sizeof seeds / sizeof *seeds };
  unsigned char buf[1024];
  fill_bytes(buf, sizeof buf, 4);
  for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
    uint64_t v[NS];
    for (int s = 0; s < NS; s++) v[s] = strata_hash64(buf, lens[li], seeds[s]);
    if (!all_distinct(v, NS)) fail_msg("%zu bytes: two seeds give the same checksum", lens[li]);
  }
  /* 0..256 zero bytes: the length alone must tell them apart. */
  unsigned char zeros[256] = {0};
  uint64_t z[257];
  for (size_t n = 0; n <= 256; n++) z[n] = strata_hash64(zeros, n, 0);
  assert_true(all_distinct(z, 257));
}

/* Flipping any one bit of a 1 KB buffer changes the checksum, to a value
 * no other flip gives; so does swapping two different 8-byte words of a
 * stripe, or two lanes' words. */
static void test_hash_every_bit_matters(void **state) {
  (void)state;
  enum { N = 1024 };
  unsigned char buf[N];
  fill_bytes(buf, N, 5);
  uint64_t *v = malloc((8 * N + 1) * sizeof *v);
  assert_non_null(v);
  v[8 * N] = strata_hash64(buf, N, 9);
  for (size_t i = 0; i < 8 * N; i++) {
    buf[i / 8] ^= (unsigned char)(1u << (i % 8));
    v[i] = strata_hash64(buf, N, 9);
    buf[i / 8] ^= (unsigned char)(1u << (i % 8));
    if (v[i] == v[8 * N]) fail_msg("flipping bit %zu of byte %zu leaves the checksum", i % 8, i / 8);
  }
  assert_true(all_distinct(v, 8 * N + 1));
  free(v);
  /* The same for every bit of a short tail (under a stripe). */
  for (size_t n = 1; n < 32; n++) {
    uint64_t base = strata_hash64(buf, n, 9);
    for (size_t i = 0; i < 8 * n; i++) {
      buf[i / 8] ^= (unsigned char)(1u << (i % 8));
      assert_true(strata_hash64(buf, n, 9) != base);
      buf[i / 8] ^= (unsigned char)(1u << (i % 8));
    }
  }
  uint64_t base = strata_hash64(buf, 64, 9);
  for (int a = 0; a < 8; a++)
    for (int b = a + 1; b < 8; b++) {
      unsigned char sw[64];
      memcpy(sw, buf, 64);
      memcpy(sw + 8 * a, buf + 8 * b, 8);
      memcpy(sw + 8 * b, buf + 8 * a, 8);
      assert_true(strata_hash64(sw, 64, 9) != base);
    }
}

/* ---- random numbers -------------------------------------------------- */

static void test_rng_same_seed_same_stream(void **state) {
  (void)state;
  strata_rng a, b;
  strata_rng_seed(&a, 12345);
  strata_rng_seed(&b, 12345);
  for (int i = 0; i < 1000; i++) assert_true(strata_rng_next(&a) == strata_rng_next(&b));
  strata_rng_seed(&a, 0);
  strata_rng_seed(&b, 0);
  for (int i = 0; i < 100; i++) {
    assert_true(strata_rng_uniform(&a) == strata_rng_uniform(&b));
    assert_true(strata_rng_normal(&a) == strata_rng_normal(&b));
    assert_true(strata_rng_below(&a, 1000003) == strata_rng_below(&b, 1000003));
  }
}

static void test_rng_different_seed_differs(void **state) {
  (void)state;
  strata_rng a, b;
  strata_rng_seed(&a, 1);
  strata_rng_seed(&b, 2);
  int same = 0;
  for (int i = 0; i < 1000; i++) same += strata_rng_next(&a) == strata_rng_next(&b);
  assert_int_equal(same, 0);
  /* A seed of zero still gives a non-degenerate stream. */
  strata_rng z;
  strata_rng_seed(&z, 0);
  uint64_t first = strata_rng_next(&z);
  int repeats = 0;
  for (int i = 0; i < 100; i++) repeats += strata_rng_next(&z) == first;
  assert_int_equal(repeats, 0);
  assert_true(strata_mix64(1) != strata_mix64(2));
  assert_true(strata_mix64(7) == strata_mix64(7));
}

static void test_rng_uniform_range(void **state) {
  (void)state;
  strata_rng r;
  strata_rng_seed(&r, 99);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; i++) {
    double u = strata_rng_uniform(&r);
    assert_true(u >= 0.0 && u < 1.0);
    sum += u;
  }
  assert_true(fabs(sum / n - 0.5) < 0.01);
}

static void test_rng_below_in_range_and_uniform(void **state) {
  (void)state;
  strata_rng r;
  strata_rng_seed(&r, 2024);
  enum { K = 10, N = 100000 };
  long counts[K] = {0};
  for (int i = 0; i < N; i++) {
    uint64_t x = strata_rng_below(&r, K);
    assert_true(x < K);
    counts[x]++;
  }
  double expect = (double)N / K, chi2 = 0;
  for (int i = 0; i < K; i++) chi2 += (counts[i] - expect) * (counts[i] - expect) / expect;
  /* 9 degrees of freedom: P(chi2 > 40) < 1e-5. */
  assert_true(chi2 < 40.0);

  for (int i = 0; i < 1000; i++) assert_true(strata_rng_below(&r, 1) == 0);
  /* n just above 2^63: about half the raw outputs are rejected. */
  uint64_t big = (UINT64_C(1) << 63) + 12345;
  int high = 0;
  for (int i = 0; i < 2000; i++) {
    uint64_t x = strata_rng_below(&r, big);
    assert_true(x < big);
    high += x >= big / 2;
  }
  assert_true(high > 800 && high < 1200);
  /* Non power-of-two n over a range where modulo bias would be visible. */
  uint64_t m = (UINT64_MAX / 3) * 2;
  int low_third = 0;
  for (int i = 0; i < 30000; i++) low_third += strata_rng_below(&r, m) < m / 2;
  assert_true(low_third > 14000 && low_third < 16000);
}

static void test_rng_normal_moments(void **state) {
  (void)state;
  strata_rng r;
  strata_rng_seed(&r, 777);
  const int n = 100000;
  double s = 0, s2 = 0, s4 = 0;
  for (int i = 0; i < n; i++) {
    double x = strata_rng_normal(&r);
    assert_true(isfinite(x));
    s += x;
    s2 += x * x;
    s4 += x * x * x * x;
  }
  double mean = s / n, var = s2 / n - mean * mean;
  assert_true(fabs(mean) < 0.02);
  assert_true(fabs(var - 1.0) < 0.03);
  assert_true(fabs(s4 / n - 3.0) < 0.15); /* kurtosis of a normal */
}

/* ---- atomic output --------------------------------------------------- */

static int fill_text(FILE *f, void *ud) {
  fputs((const char *)ud, f);
  return 0;
}

static int fill_fail(FILE *f, void *ud) {
  (void)ud;
  fputs("partial content", f);
  return strata_err_set(STRATA_EPARSE, "fill gave up");
}

static void test_write_atomic_success(void **state) {
  (void)state;
  char dir[64], path[128], buf[256];
  make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/out.txt", dir);
  assert_int_equal(strata_write_atomic(path, fill_text, (void *)"hello\nworld\n"), 0);
  read_file(path, buf, sizeof buf);
  assert_string_equal(buf, "hello\nworld\n");
  assert_int_equal(count_entries(dir), 1);
  /* Overwrite replaces the whole content. */
  assert_int_equal(strata_write_atomic(path, fill_text, (void *)"x"), 0);
  read_file(path, buf, sizeof buf);
  assert_string_equal(buf, "x");
  assert_int_equal(count_entries(dir), 1);
  remove_tree(dir);
}

static void test_write_atomic_failed_fill_leaves_nothing(void **state) {
  (void)state;
  char dir[64], path[128], buf[256];
  make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/out.txt", dir);
  assert_int_equal(strata_write_atomic(path, fill_fail, NULL), STRATA_EPARSE);
  assert_int_equal(count_entries(dir), 0);
  struct stat sb;
  assert_int_not_equal(stat(path, &sb), 0);

  /* With an existing file, a failed write keeps the old content. */
  assert_int_equal(strata_write_atomic(path, fill_text, (void *)"old"), 0);
  assert_int_equal(strata_write_atomic(path, fill_fail, NULL), STRATA_EPARSE);
  read_file(path, buf, sizeof buf);
  assert_string_equal(buf, "old");
  assert_int_equal(count_entries(dir), 1);
  remove_tree(dir);
}

/* /dev/null and a FIFO are written in place: renaming a file over them
 * would replace the node (as root, /dev/null itself). */
static void test_write_atomic_special(void **state) {
  (void)state;
  struct stat sb;
  assert_int_equal(stat("/dev/null", &sb), 0);
  assert_true(S_ISCHR(sb.st_mode));
  assert_int_equal(strata_check_writable("/dev/null"), 0);
  assert_int_equal(strata_write_atomic("/dev/null", fill_text, (void *)"x"), 0);
  assert_int_equal(strata_write_atomic("/dev/null", fill_fail, NULL), STRATA_EPARSE);
  assert_int_equal(stat("/dev/null", &sb), 0);
  assert_true(S_ISCHR(sb.st_mode));

  char dir[64], fifo[128], buf[64];
  make_tmpdir(dir, sizeof dir);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(strata_check_writable(fifo), 0); /* no reader yet */
  int rd = open(fifo, O_RDONLY | O_NONBLOCK);
  assert_true(rd >= 0);
  assert_int_equal(strata_write_atomic(fifo, fill_text, (void *)"through\n"), 0);
  ssize_t n = read(rd, buf, sizeof buf - 1);
  assert_int_equal(n, 8);
  buf[n] = 0;
  assert_string_equal(buf, "through\n");
  close(rd);
  assert_int_equal(stat(fifo, &sb), 0);
  assert_true(S_ISFIFO(sb.st_mode));
  assert_int_equal(count_entries(dir), 1);
  remove_tree(dir);
}

static void test_write_atomic_unwritable_dir(void **state) {
  (void)state;
  char dir[64], path[160];
  make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/no/such/dir/out.json", dir);
  assert_int_equal(strata_write_atomic(path, fill_text, (void *)"x"), STRATA_EIO);
  assert_non_null(strstr(strata_err_msg(), path));
  assert_int_equal(count_entries(dir), 0);

  /* Parent is a regular file. */
  char file[128];
  snprintf(file, sizeof file, "%s/plain", dir);
  assert_int_equal(strata_write_atomic(file, fill_text, (void *)"x"), 0);
  snprintf(path, sizeof path, "%s/plain/out.json", dir);
  assert_int_equal(strata_write_atomic(path, fill_text, (void *)"x"), STRATA_EIO);
  assert_non_null(strstr(strata_err_msg(), path));

  /* Permissions only bind non-root users. */
  if (geteuid() != 0) {
    char ro[128];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    assert_int_equal(mkdir(ro, 0500), 0);
    snprintf(path, sizeof path, "%s/out.json", ro);
    assert_int_equal(strata_write_atomic(path, fill_text, (void *)"x"), STRATA_EIO);
    assert_non_null(strstr(strata_err_msg(), path));
    assert_int_equal(count_entries(ro), 0);
  }
  remove_tree(dir);
}

static void test_check_writable(void **state) {
  (void)state;
  char dir[64], path[160];
  make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/metrics.json", dir);
  assert_int_equal(strata_check_writable(path), 0);
  assert_int_equal(count_entries(dir), 0); /* checked, not created */

  snprintf(path, sizeof path, "%s/missing/metrics.json", dir);
  assert_int_equal(strata_check_writable(path), STRATA_EIO);
  assert_non_null(strstr(strata_err_msg(), path));
  assert_int_equal(count_entries(dir), 0);

  if (geteuid() != 0) {
    char ro[128];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    assert_int_equal(mkdir(ro, 0500), 0);
    snprintf(path, sizeof path, "%s/out.json", ro);
    assert_int_equal(strata_check_writable(path), STRATA_EIO);
    assert_non_null(strstr(strata_err_msg(), path));
  }
  remove_tree(dir);
}

/* ---- quoting input in messages ----------------------------------------- */

/* strata_quote of len bytes at src into a full-size buffer equals want. */
static void expect_quote(const char *src, size_t len, const char *want) {
  char q[STRATA_QUOTE_SIZE];
  memset(q, 'Z', sizeof q);
  const char *got = strata_quote(q, sizeof q, src, len);
  assert_ptr_equal(got, q);
  assert_string_equal(q, want);
}

static void test_quote_escapes(void **state) {
  (void)state;
  expect_quote("", 0, "");
  expect_quote(NULL, 0, "");
  expect_quote("user 42", 7, "user 42");
  /* Only len bytes are read: no terminator needed, and a NUL is a byte. */
  expect_quote("abcdef", 3, "abc");
  expect_quote("a\0b", 3, "a\\x00b");
  /* Every printable ASCII byte but \ and ' stays as it is. */
  char all[256], want[4 * 256 + 1];
  size_t n = 0;
  for (int c = 0x20; c < 0x7f; c++)
    if (c != '\\' && c != '\'') all[n++] = (char)c;
  for (size_t i = 0; i < n; i += STRATA_QUOTE_MAX) {
    size_t len = n - i < STRATA_QUOTE_MAX ? n - i : STRATA_QUOTE_MAX;
    memcpy(want, all + i, len);
    want[len] = '\0';
    expect_quote(all + i, len, want);
  }
  /* Every other byte becomes \xNN, lower-case hex. */
  for (int c = 0; c < 256; c++) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') continue;
    char one = (char)c;
    snprintf(want, sizeof want, "\\x%02x", c);
    expect_quote(&one, 1, want);
  }
  /* The sample from issue 22: a terminal colour sequence. */
  static const char garbage[] = "\x01M-\x1b\x1b[31mRED";
  expect_quote(garbage, sizeof garbage - 1, "\\x01M-\\x1b\\x1b[31mRED");
  expect_quote("it's a\\b", 8, "it\\x27s a\\x5cb");
  expect_quote("caf\xc3\xa9", 5, "caf\\xc3\\xa9");
}

static void test_quote_truncates(void **state) {
  (void)state;
  char src[100], want[STRATA_QUOTE_SIZE];
  for (size_t i = 0; i < sizeof src; i++) src[i] = (char)('a' + i % 26);
  /* Exactly STRATA_QUOTE_MAX bytes: all shown, no mark. */
  memcpy(want, src, STRATA_QUOTE_MAX);
  want[STRATA_QUOTE_MAX] = '\0';
  expect_quote(src, STRATA_QUOTE_MAX, want);
  /* One more: the same bytes, then the mark. */
  strcat(want, "...");
  expect_quote(src, STRATA_QUOTE_MAX + 1, want);
  expect_quote(src, sizeof src, want);
  expect_quote(src, STRATA_QUOTE_MAX - 1, "abcdefghijklmnopqrstuvwxyzabcde");

  /* The longest result (every byte escaped, then the mark) fills
   * STRATA_QUOTE_SIZE exactly. */
  char esc[STRATA_QUOTE_MAX + 1];
  memset(esc, 0x1b, sizeof esc);
  char q[STRATA_QUOTE_SIZE];
  strata_quote(q, sizeof q, esc, sizeof esc);
  assert_int_equal(strlen(q), STRATA_QUOTE_SIZE - 1);
  assert_memory_equal(q, "\\x1b\\x1b", 8);
  assert_string_equal(q + 4 * STRATA_QUOTE_MAX, "...");
  strata_quote(q, sizeof q, esc, STRATA_QUOTE_MAX);
  assert_int_equal(strlen(q), 4 * STRATA_QUOTE_MAX);
}

static void test_quote_small_buffer(void **state) {
  (void)state;
  char q[16];
  /* dstsz 0: nothing written. */
  q[0] = 'Z';
  assert_ptr_equal(strata_quote(q, 0, "abc", 3), q);
  assert_int_equal(q[0], 'Z');
  assert_string_equal(strata_quote(q, 1, "abc", 3), "");
  /* Fits exactly: 3 bytes and the NUL. */
  assert_string_equal(strata_quote(q, 4, "abc", 3), "abc");
  /* One byte short: the bytes shown give way to the mark. */
  assert_string_equal(strata_quote(q, 4, "abcd", 4), "...");
  assert_string_equal(strata_quote(q, 6, "abcdef", 6), "ab...");
  /* Never half an escape: with room for 4 bytes before the mark, the
   * second byte's 4-byte escape does not fit after the "a". */
  assert_string_equal(strata_quote(q, 8, "a\x1b\x1b", 3), "a...");
  assert_string_equal(strata_quote(q, 9, "a\x1b\x1b", 3), "a\\x1b...");
  assert_string_equal(strata_quote(q, 10, "a\x1b\x1b", 3), "a\\x1b\\x1b");
  /* Too small even for the whole mark: as much of it as fits. */
  assert_string_equal(strata_quote(q, 3, "abcd", 4), "..");
}

/* ---- median ---------------------------------------------------------- */

static void test_median(void **state) {
  (void)state;
  double odd[] = {5, 1, 4, 2, 3};
  assert_true(strata_median(odd, 5) == 3.0);
  /* Input untouched. */
  assert_true(odd[0] == 5 && odd[1] == 1 && odd[2] == 4 && odd[3] == 2 && odd[4] == 3);
  double even[] = {10, 2, 8, 4};
  assert_true(strata_median(even, 4) == 6.0);
  double one[] = {-7.5};
  assert_true(strata_median(one, 1) == -7.5);
  double two[] = {1, 2};
  assert_true(strata_median(two, 2) == 1.5);
  double dup[] = {3, 3, 1, 3, 9, 9};
  assert_true(strata_median(dup, 6) == 3.0);
  assert_true(isnan(strata_median(odd, 0)));
}

/* strata_grow doubles from 16, keeps the array while it has room, stops
 * at the limit, and leaves everything as it was when it cannot grow. */
static void test_grow(void **state) {
  (void)state;
  int *v = NULL;
  size_t n = 0, cap = 0;
  for (int i = 0; i < 100; i++) {
    int room = n < cap;
    int *g = strata_grow(v, n + 1, &cap, SIZE_MAX, sizeof *v);
    assert_non_null(g);
    if (room) assert_ptr_equal(g, v);
    v = g;
    v[n++] = i;
    assert_true(cap == 16 || cap == 32 || cap == 64 || cap == 128);
  }
  for (int i = 0; i < 100; i++) assert_int_equal(v[i], i);
  /* Never past the limit; beyond it, nothing changes. */
  int *g = strata_grow(v, 129, &cap, 130, sizeof *v);
  assert_non_null(g);
  v = g;
  assert_int_equal(cap, 130);
  assert_null(strata_grow(v, 131, &cap, 130, sizeof *v));
  assert_int_equal(cap, 130);
  assert_null(strata_grow(v, SIZE_MAX / 2, &cap, SIZE_MAX, sizeof *v));
  assert_int_equal(cap, 130);
  strata_free(v);
}

/* An alias table reproduces its weights exactly: column k keeps p[k]/n of
 * the mass and passes the rest to alias[k]. */
static void test_alias(void **state) {
  (void)state;
  const double w[] = {5, 0, 1, 1, 3, 0.5, 9.5};
  enum { N = sizeof w / sizeof *w };
  double p[N], total = 0, mass[N] = {0};
  uint32_t alias[N], work[N];
  for (int k = 0; k < N; k++) total += w[k];
  for (int k = 0; k < N; k++) p[k] = w[k] * N / total;
  strata_alias_build(p, N, alias, work);
  for (int k = 0; k < N; k++) {
    assert_true(p[k] >= 0 && p[k] <= 1);
    assert_true(alias[k] < N);
    mass[k] += p[k];
    mass[alias[k]] += 1 - p[k];
  }
  for (int k = 0; k < N; k++) assert_true(fabs(mass[k] - w[k] * N / total) < 1e-12);
}

static void test_fields(void **state) {
  (void)state;
  const char line[] = " \t12  ab\tc  ", *s = line, *e = line + strlen(line), *b, *f;
  assert_true(strata_field_next(&s, e, &b, &f));
  assert_int_equal(f - b, 2);
  assert_memory_equal(b, "12", 2);
  assert_true(strata_field_next(&s, e, &b, &f));
  assert_memory_equal(b, "ab", 2);
  assert_true(strata_field_next(&s, e, &b, &f));
  assert_int_equal(f - b, 1);
  assert_false(strata_field_next(&s, e, &b, &f));
  const char *p = line, *q = e;
  strata_field_trim(&p, &q);
  assert_int_equal(q - p, 8);
  assert_true(strata_field_blank(" \t ", " \t " + 3));
  assert_true(strata_field_blank(line, line));
  assert_false(strata_field_blank(line, e));
}

/* ---- memory before work --------------------------------------------- */

/* The run's limit replaces the host's measure; the budget refuses what is
 * beyond it, naming --mem-limit, and takes what fits. */
static void test_mem_limit(void **state) {
  (void)state;
  struct rlimit as, data;
  assert_int_equal(getrlimit(RLIMIT_AS, &as), 0);
  assert_int_equal(getrlimit(RLIMIT_DATA, &data), 0);
  if (as.rlim_cur != RLIM_INFINITY || data.rlim_cur != RLIM_INFINITY) {
    print_message("a ulimit is set: skipping the limit's checks\n");
    skip();
  }
  strata_mem_set_limit(250000000);
  assert_int_equal(strata_mem_limit(), 250000000);
  uint64_t avail;
  assert_int_equal(strata_mem_available(&avail), 0);
  assert_int_equal(avail, 250000000);
  strata_mem_budget b;
  strata_mem_budget_init(&b);
  assert_int_equal(strata_mem_check(&b, 2.4e8, "hint", "%s needs", "this"), 0);
  assert_int_equal(strata_mem_check(&b, 3.5e9, "lower X", "%s needs", "the thing"), STRATA_ENOMEM);
  assert_string_equal(strata_err_msg(), "the thing needs about 3.5 GB, but this host has 250.0 MB "
                                        "available (--mem-limit): lower X");
  assert_int_equal(strata_mem_check(&b, 4.2e8, NULL, "x needs"), STRATA_ENOMEM);
  assert_string_equal(strata_err_msg(),
                      "x needs about 420.0 MB, but this host has 250.0 MB available (--mem-limit)");
  strata_mem_set_limit(0);
  strata_err_clear();
  /* Without a limit, the host's (Linux tells it). */
  assert_int_equal(strata_mem_available(&avail), 0);
  assert_true(avail > 0);
}

/* Under `ulimit -v`, what the process may still map bounds the estimate:
 * checked in a child, whose address space gets 256 MiB above what it maps
 * now. */
static void test_mem_rlimit(void **state) {
  (void)state;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%llu", &pages) != 1) _exit(10);
    fclose(f);
    uint64_t used = pages * (uint64_t)sysconf(_SC_PAGESIZE), room = 256ull << 20;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0) _exit(11);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < used + room) _exit(0); /* tighter already */
    rl.rlim_cur = used + room;
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(12);
    /* A larger --mem-limit does not lift it. */
    strata_mem_set_limit(1ull << 40);
    strata_mem_budget b;
    strata_mem_budget_init(&b);
    if (b.avail == 0 || b.avail > room) _exit(13);
    if (strata_mem_check(&b, 1e12, NULL, "it needs") != STRATA_ENOMEM) _exit(14);
    if (!strstr(strata_err_msg(), "it needs about 1000.0 GB, but this process may take ") ||
        !strstr(strata_err_msg(), "more (ulimit -v)"))
      _exit(15);
    if (strata_mem_check(&b, (double)(room / 2), NULL, "it needs") != 0) _exit(16);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) != 0) fail_msg("the child's check %d failed", WEXITSTATUS(status));
}

/* The headers' version macros agree with each other and with the library
 * the test is linked with. */
static void test_version_macros_match_library(void **st) {
  (void)st;
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR,
           STRATA_VERSION_PATCH);
  assert_string_equal(STRATA_VERSION, want);
  assert_string_equal(strata_version(), want);
  assert_int_equal(STRATA_VERSION_NUMBER,
                   10000 * STRATA_VERSION_MAJOR + 100 * STRATA_VERSION_MINOR + STRATA_VERSION_PATCH);
  assert_non_null(strstr(strata_build_id(), "git "));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_macros_match_library),
      cmocka_unit_test_setup_teardown(test_malloc_counts_live_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_calloc_zeroes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_calloc_overflow_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_realloc_keeps_content, setup, teardown),
      cmocka_unit_test_setup_teardown(test_aligned_is_64_byte_aligned, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_null_is_noop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fail_after_injects_one_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_clocks_advance, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hash_streaming_every_split, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hash_empty_update, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hash_streaming_long, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hash_seeds_and_lengths, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hash_every_bit_matters, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rng_same_seed_same_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rng_different_seed_differs, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rng_uniform_range, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rng_below_in_range_and_uniform, setup, teardown),
      cmocka_unit_test_setup_teardown(test_rng_normal_moments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_atomic_success, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_atomic_failed_fill_leaves_nothing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_write_atomic_special, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_atomic_unwritable_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_check_writable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quote_escapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quote_truncates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_quote_small_buffer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_median, setup, teardown),
      cmocka_unit_test_setup_teardown(test_grow, setup, teardown),
      cmocka_unit_test_setup_teardown(test_alias, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fields, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mem_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mem_rlimit, setup, teardown),
  };
  return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
