/*
 * Unit tests for core/ckpt.c, the checkpoint files: parts written and read
 * back, every kind of damage a part can suffer and the message naming it,
 * the writer's misuse, and the directory logic (the last complete
 * checkpoint, prepare, publish, prune), each test in a temporary directory
 * of its own that teardown removes.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/ckpt.h"
#include "dirs.h"
#include "strata/core.h"
#include "strata/error.h"

/* ---- fixture: a temporary directory, no leaks, no open files ---------- */

typedef struct fixture {
  char dir[64];  /* the test's own directory */
  char ck[256];  /* dir/ck: the checkpoint directory (made empty) */
  size_t live0;
  int fds0;
} fixture;

static fixture fx_storage;

/* snprintf that must fit (paths in the tests' buffers). */
static void sfmt(char *out, size_t n, const char *fmt, ...) STRATA_PRINTF(3, 4);
static void sfmt(char *out, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(out, n, fmt, ap);
  va_end(ap);
  assert_true(k >= 0 && (size_t)k < n);
}

/* Open file descriptors of this process. */
static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}


static int setup(void **state) {
  fixture *fx = &fx_storage;
  memset(fx, 0, sizeof *fx);
  sfmt(fx->dir, sizeof fx->dir, "/tmp/strata_test_ckpt.XXXXXX");
  if (!mkdtemp(fx->dir)) return -1;
  sfmt(fx->ck, sizeof fx->ck, "%s/ck", fx->dir);
  if (mkdir(fx->ck, 0777) != 0) return -1;
  fx->live0 = strata_alloc_live();
  fx->fds0 = count_fds();
  strata_err_clear();
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  strata_alloc_fail_after(0);
  strata_err_clear();
  remove_tree(fx->dir);
  assert_int_equal(strata_alloc_live(), fx->live0);
  assert_int_equal(count_fds(), fx->fds0);
  return 0;
}

/* ---- helpers ---------------------------------------------------------- */

static void assert_msg_has(const char *needle) {
  const char *msg = strata_err_msg();
  if (!strstr(msg, needle)) fail_msg("message '%s' lacks '%s'", msg, needle);
  assert_null(strchr(msg, '\n'));
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}


/* Whether any name in dir holds ".tmp." */
static int has_tmp(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d))) found |= strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return found;
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  assert_int_equal(fseek(f, 0, SEEK_END), 0);
  long len = ftell(f);
  assert_true(len >= 0);
  rewind(f);
  unsigned char *buf = malloc((size_t)len + 1);
  assert_non_null(buf);
  assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return buf;
}

static void spit(const char *path, const void *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(buf, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static void pass_path(char *out, size_t n, const char *dir, int passes, const char *file) {
  assert_int_equal(strata__ckpt_path(out, n, dir, passes, file), 0);
}

/* The entries a part should hold, and what a read brings back. */
typedef struct entry {
  uint32_t kind;
  int32_t id;
  uint64_t aux;
  uint64_t len;
  unsigned char *bytes;
} entry;

typedef struct sink {
  entry got[16];
  int n;
  int refuse_at;  /* >= 0: the n-th entry is refused with refuse_rc */
  int refuse_rc;
  int calls;
} sink;

static int sink_dest(void *ud, const strata__ckpt_entry *e, void **buf) {
  sink *s = ud;
  s->calls++;
  if (s->n == s->refuse_at)
    return strata_err_set(s->refuse_rc, "test: entry %d (kind %u) was not expected", s->n,
                          (unsigned)e->kind);
  assert_true(s->n < 16);
  entry *g = &s->got[s->n++];
  g->kind = e->kind;
  g->id = e->id;
  g->aux = e->aux;
  g->len = e->len;
  g->bytes = malloc(e->len ? e->len : 1);
  assert_non_null(g->bytes);
  memset(g->bytes, 0xee, e->len);
  *buf = g->bytes;
  return 0;
}

static void sink_free(sink *s) {
  for (int i = 0; i < s->n; i++) free(s->got[i].bytes);
  s->n = 0;
  s->calls = 0;
}

static sink new_sink(void) {
  sink s;
  memset(&s, 0, sizeof s);
  s.refuse_at = -1;
  return s;
}

static unsigned char pattern(size_t i, int k) { return (unsigned char)(i * 31 + (size_t)k * 7 + 1); }

/* The entries of the reference part: odd lengths, an empty one, one of a
 * whole number of 8 bytes, one written in pieces, one long one. */
enum { N_REF = 6 };
static const uint64_t ref_len[N_REF] = {13, 0, 1, 64, 100, 1500007};
static const uint32_t ref_kind[N_REF] = {STRATA__CK_RESIDENT, STRATA__CK_GLOBAL,
                                         STRATA__CK_ROTATING, STRATA__CK_TABLE_ROWS,
                                         STRATA__CK_COORD, STRATA__CK_RESIDENT};
enum { PIECEWISE = 4 };

/* Writes the reference part "DIR/pass-PASSES/FILE" by `who`; its checksum
 * and size into *sum and *bytes. */
static void write_ref(const char *dir, int passes, const char *file, int32_t who, uint64_t *sum,
                      uint64_t *bytes) {
  strata__part_writer pw;
  assert_int_equal(strata__part_begin(&pw, dir, passes, file, who), 0);
  for (int k = 0; k < N_REF; k++) {
    unsigned char *buf = malloc(ref_len[k] ? ref_len[k] : 1);
    assert_non_null(buf);
    for (size_t i = 0; i < ref_len[k]; i++) buf[i] = pattern(i, k);
    if (k == PIECEWISE) {
      /* 100 bytes as 1 + 7 + 0 + 60 + 32. */
      static const uint64_t piece[] = {1, 7, 0, 60, 32};
      assert_int_equal(strata__part_open_entry(&pw, ref_kind[k], -k, (uint64_t)k << 40, 100), 0);
      uint64_t at = 0;
      for (int p = 0; p < 5; p++) {
        assert_int_equal(strata__part_write(&pw, buf + at, piece[p]), 0);
        at += piece[p];
      }
    } else {
      assert_int_equal(
          strata__part_add(&pw, ref_kind[k], k == 3 ? INT32_MIN : 1000 + k, (uint64_t)k << 40, buf,
                           ref_len[k]),
          0);
    }
    free(buf);
  }
  assert_int_equal(strata__part_commit(&pw, sum, bytes), 0);
  strata__part_abandon(&pw); /* safe after commit: keeps the part */
}

static void check_ref(const sink *s) {
  assert_int_equal(s->n, N_REF);
  for (int k = 0; k < N_REF; k++) {
    const entry *g = &s->got[k];
    assert_int_equal(g->kind, ref_kind[k]);
    assert_int_equal(g->id, k == PIECEWISE ? -k : k == 3 ? INT32_MIN : 1000 + k);
    assert_true(g->aux == (uint64_t)k << 40);
    assert_true(g->len == ref_len[k]);
    for (size_t i = 0; i < ref_len[k]; i++)
      if (g->bytes[i] != pattern(i, k)) fail_msg("entry %d: byte %zu differs", k, i);
  }
}

/* Size of the reference part: a 24-byte header, a 24-byte head per entry
 * and its bytes padded to 8, the END entry. */
static uint64_t ref_size(void) {
  uint64_t n = 24 + 24;
  for (int k = 0; k < N_REF; k++) n += 24 + (ref_len[k] + 7) / 8 * 8;
  return n;
}

/* ---- paths ------------------------------------------------------------ */

static void test_path(void **state) {
  (void)state;
  char out[64];
  assert_int_equal(strata__ckpt_path(out, sizeof out, "d", 7, NULL), 0);
  assert_string_equal(out, "d/pass-000007");
  assert_int_equal(strata__ckpt_path(out, sizeof out, "/x/y", 123456, "worker-3.bin"), 0);
  assert_string_equal(out, "/x/y/pass-123456/worker-3.bin");
  assert_int_equal(strata__ckpt_path(out, sizeof out, "d", 0, STRATA__CKPT_MANIFEST), 0);
  assert_string_equal(out, "d/pass-000000/manifest.json");
  /* Exactly fitting, and one byte short. */
  assert_int_equal(strata__ckpt_path(out, 14, "d", 7, NULL), 0);
  assert_string_equal(out, "d/pass-000007");
  strata_err_clear();
  assert_int_equal(strata__ckpt_path(out, 13, "d", 7, NULL), STRATA_EINVAL);
  assert_msg_has("too long");
  assert_int_equal(strata__ckpt_path(out, 20, "d", 7, "manifest.json"), STRATA_EINVAL);
}

/* ---- parts: the round trip -------------------------------------------- */

static void test_part_round_trip(void **state) {
  fixture *fx = *state;
  uint64_t sum, bytes;
  write_ref(fx->ck, 3, "worker-1.bin", 1, &sum, &bytes);
  char pdir[256], path[256];
  pass_path(pdir, sizeof pdir, fx->ck, 3, NULL);
  pass_path(path, sizeof path, fx->ck, 3, "worker-1.bin");
  /* Only the part is there, under its own name. */
  assert_int_equal(count_entries(pdir), 1);
  assert_false(has_tmp(pdir));
  /* What commit reports is the file: its size and its checksum. */
  size_t n;
  unsigned char *raw = slurp(path, &n);
  assert_true(bytes == n);
  assert_true(bytes == ref_size());
  assert_true(n % 8 == 0);
  assert_true(sum == strata_hash64(raw, n, STRATA__CKPT_SEED));
  assert_memory_equal(raw, "STRATACK", 8);
  free(raw);
  /* Read back: every entry, in order, with its bytes. */
  sink s = new_sink();
  assert_int_equal(strata__part_read(path, 3, 1, sum, bytes, sink_dest, &s), 0);
  check_ref(&s);
  sink_free(&s);
  /* The coordinator's part (who = -1) beside it. */
  uint64_t sum2, bytes2;
  write_ref(fx->ck, 3, "coordinator.bin", -1, &sum2, &bytes2);
  assert_true(bytes2 == bytes);
  assert_true(sum2 != sum); /* the header differs */
  pass_path(path, sizeof path, fx->ck, 3, "coordinator.bin");
  assert_int_equal(strata__part_read(path, 3, -1, sum2, bytes2, sink_dest, &s), 0);
  check_ref(&s);
  sink_free(&s);
  assert_int_equal(count_entries(pdir), 2);
}

/* A part with no entry at all, and rewriting a part in place. */
static void test_part_empty_and_rewrite(void **state) {
  fixture *fx = *state;
  strata__part_writer pw;
  uint64_t sum, bytes;
  assert_int_equal(strata__part_begin(&pw, fx->ck, 0, "worker-0.bin", 0), 0);
  assert_int_equal(strata__part_commit(&pw, &sum, &bytes), 0);
  assert_true(bytes == 48); /* header and END */
  char path[256];
  pass_path(path, sizeof path, fx->ck, 0, "worker-0.bin");
  sink s = new_sink();
  assert_int_equal(strata__part_read(path, 0, 0, sum, bytes, sink_dest, &s), 0);
  assert_int_equal(s.calls, 0);
  /* Written again (a run that died after its part): the new one replaces it. */
  uint64_t sum2, bytes2;
  write_ref(fx->ck, 0, "worker-0.bin", 0, &sum2, &bytes2);
  assert_int_equal(strata__part_read(path, 0, 0, sum2, bytes2, sink_dest, &s), 0);
  check_ref(&s);
  sink_free(&s);
  assert_int_equal(strata__part_read(path, 0, 0, sum, bytes, sink_dest, &s), STRATA_EIO);
  assert_int_equal(s.calls, 0);
}

/* ---- parts: damage ---------------------------------------------------- */

/* A small part to damage: three entries, 144 bytes. */
static void write_small(fixture *fx, char *path, size_t n, uint64_t *sum, uint64_t *bytes) {
  strata__part_writer pw;
  assert_int_equal(strata__part_begin(&pw, fx->ck, 5, "worker-2.bin", 2), 0);
  assert_int_equal(strata__part_add(&pw, STRATA__CK_RESIDENT, 1, 2, "abcdefghijk", 11), 0);
  assert_int_equal(strata__part_add(&pw, STRATA__CK_GLOBAL, 0, 0, NULL, 0), 0);
  assert_int_equal(strata__part_add(&pw, STRATA__CK_ROTATING, 3, 4, "xyz", 3), 0);
  assert_int_equal(strata__part_commit(&pw, sum, bytes), 0);
  pass_path(path, n, fx->ck, 5, "worker-2.bin");
}

/* Every byte of the part, flipped in turn (each of its bits for the first
 * bytes): the checksum catches it before any entry is handed out. */
static void test_part_flipped_byte(void **state) {
  fixture *fx = *state;
  char path[256];
  uint64_t sum, bytes;
  write_small(fx, path, sizeof path, &sum, &bytes);
  size_t n;
  unsigned char *good = slurp(path, &n);
  assert_true(n == bytes);
  unsigned char *bad = malloc(n);
  assert_non_null(bad);
  for (size_t i = 0; i < n; i++)
    for (int bit = 0; bit < (i < 24 ? 8 : 1); bit++) {
      memcpy(bad, good, n);
      bad[i] ^= (unsigned char)(1u << bit);
      spit(path, bad, n);
      sink s = new_sink();
      strata_err_clear();
      int rc = strata__part_read(path, 5, 2, sum, bytes, sink_dest, &s);
      if (rc != STRATA_EIO) fail_msg("byte %zu bit %d flipped: %s", i, bit, strata_err_name(rc));
      assert_int_equal(s.calls, 0);
      assert_msg_has(path);
      assert_msg_has("damaged: checksum");
      sink_free(&s);
    }
  /* Restored, it reads again. */
  spit(path, good, n);
  sink s = new_sink();
  assert_int_equal(strata__part_read(path, 5, 2, sum, bytes, sink_dest, &s), 0);
  assert_int_equal(s.n, 3);
  assert_memory_equal(s.got[0].bytes, "abcdefghijk", 11);
  assert_memory_equal(s.got[2].bytes, "xyz", 3);
  sink_free(&s);
  /* A wrong checksum in the manifest is the same damage. */
  strata_err_clear();
  assert_int_equal(strata__part_read(path, 5, 2, sum ^ 1, bytes, sink_dest, &s), STRATA_EIO);
  assert_msg_has("damaged: checksum");
  assert_int_equal(s.calls, 0);
  free(bad);
  free(good);
}

/* Cut short at many places, or a byte longer: the size catches it. */
static void test_part_wrong_size(void **state) {
  fixture *fx = *state;
  char path[256];
  uint64_t sum, bytes;
  write_small(fx, path, sizeof path, &sum, &bytes);
  size_t n;
  unsigned char *good = slurp(path, &n);
  unsigned char *longer = malloc(n + 1);
  assert_non_null(longer);
  const size_t cuts[] = {0, 1, 7, 8, 23, 24, 25, 47, 48, n / 2, n - 24, n - 9, n - 8, n - 1};
  for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
    spit(path, good, cuts[c]);
    sink s = new_sink();
    strata_err_clear();
    assert_int_equal(strata__part_read(path, 5, 2, sum, bytes, sink_dest, &s), STRATA_EIO);
    assert_int_equal(s.calls, 0);
    assert_msg_has(path);
    assert_msg_has("damaged");
    char want[64];
    sfmt(want, sizeof want, "%zu bytes, the manifest says %llu", cuts[c],
             (unsigned long long)bytes);
    assert_msg_has(want);
  }
  memcpy(longer, good, n);
  for (int v = 0; v < 2; v++) {
    longer[n] = (unsigned char)(v ? 0xff : 0);
    spit(path, longer, n + 1);
    sink s = new_sink();
    strata_err_clear();
    assert_int_equal(strata__part_read(path, 5, 2, sum, bytes, sink_dest, &s), STRATA_EIO);
    assert_int_equal(s.calls, 0);
    assert_msg_has("damaged");
  }
  free(longer);
  free(good);
}

/* Files whose size and checksum the manifest agrees with, but whose inside
 * is wrong (a manifest written for a bad part): the structure is checked
 * too. */
static void test_part_bad_structure(void **state) {
  fixture *fx = *state;
  char path[256];
  uint64_t sum, bytes;
  write_small(fx, path, sizeof path, &sum, &bytes);
  size_t n;
  unsigned char *good = slurp(path, &n);
  unsigned char *buf = malloc(n + 64);
  assert_non_null(buf);
  struct {
    const char *what;
    size_t len;
    int calls; /* entries handed out before the failure */
    const char *needle;
  } cases[] = {
      {"no END entry", n - 24, 3, "truncated"},
      {"cut inside an entry's bytes", 24 + 24 + 8, 0, "an entry runs past the end"},
      {"cut inside a head", 24 + 12, 0, "truncated"},
      {"cut inside the header", 16, 0, "truncated"},
      {"bytes after END", n + 8, 3, "bytes after its end"},
      {"bad magic", n, 0, "not a strata checkpoint part"},
      {"bad version", n, 0, "not a strata checkpoint part"},
      {"a length past the end", n, 0, "an entry runs past the end"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    memset(buf, 0, n + 64);
    memcpy(buf, good, cases[c].len < n ? cases[c].len : n);
    if (c == 5) buf[0] = 'X';
    if (c == 6) buf[8] = 2;            /* version */
    if (c == 7) buf[24 + 16] = 0xff;   /* the first entry's length */
    spit(path, buf, cases[c].len);
    uint64_t s2 = strata_hash64(buf, cases[c].len, STRATA__CKPT_SEED);
    sink s = new_sink();
    strata_err_clear();
    int rc = strata__part_read(path, 5, 2, s2, cases[c].len, sink_dest, &s);
    if (rc == 0) fail_msg("%s: accepted", cases[c].what);
    if (s.calls != cases[c].calls)
      fail_msg("%s: %d entries handed out, want %d", cases[c].what, s.calls, cases[c].calls);
    if (!strstr(strata_err_msg(), cases[c].needle) || !strstr(strata_err_msg(), path))
      fail_msg("%s: message '%s' lacks '%s'", cases[c].what, strata_err_msg(), cases[c].needle);
    sink_free(&s);
  }
  free(buf);
  free(good);
}

/* A part read for another pass or another rank. */
static void test_part_wrong_header(void **state) {
  fixture *fx = *state;
  char path[256];
  uint64_t sum, bytes;
  write_small(fx, path, sizeof path, &sum, &bytes);
  static const struct {
    int passes;
    int32_t who;
    const char *needle;
  } cases[] = {
      {4, 2, "written after 5 passes by worker 2, not after 4 passes by worker 2"},
      {6, 2, "not after 6 passes"},
      {5, 1, "written after 5 passes by worker 2, not after 5 passes by worker 1"},
      {5, 3, "not after 5 passes by worker 3"},
      {5, -1, "by worker 2, not after 5 passes by the coordinator"},
      {0, 0, "not after 0 passes by worker 0"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    sink s = new_sink();
    strata_err_clear();
    assert_int_equal(
        strata__part_read(path, cases[c].passes, cases[c].who, sum, bytes, sink_dest, &s),
        STRATA_EPARSE);
    assert_int_equal(s.calls, 0);
    assert_msg_has(path);
    assert_msg_has(cases[c].needle);
  }
  /* And the coordinator's part read as a worker's. */
  strata__part_writer pw;
  uint64_t cs, cb;
  assert_int_equal(strata__part_begin(&pw, fx->ck, 5, "coordinator.bin", -1), 0);
  assert_int_equal(strata__part_commit(&pw, &cs, &cb), 0);
  pass_path(path, sizeof path, fx->ck, 5, "coordinator.bin");
  sink s = new_sink();
  assert_int_equal(strata__part_read(path, 5, 0, cs, cb, sink_dest, &s), STRATA_EPARSE);
  assert_msg_has("written after 5 passes by the coordinator, not after 5 passes by worker 0");
  assert_int_equal(strata__part_read(path, 5, -1, cs, cb, sink_dest, &s), 0);
}

static void test_part_missing(void **state) {
  fixture *fx = *state;
  char path[256];
  pass_path(path, sizeof path, fx->ck, 9, "worker-0.bin");
  sink s = new_sink();
  strata_err_clear();
  assert_int_equal(strata__part_read(path, 9, 0, 0, 48, sink_dest, &s), STRATA_ENOENT);
  assert_msg_has(path);
  assert_msg_has("missing");
  assert_int_equal(s.calls, 0);
  /* A directory where the part should be is not "missing". */
  uint64_t sum, bytes;
  write_small(fx, path, sizeof path, &sum, &bytes);
  char pdir[256];
  pass_path(pdir, sizeof pdir, fx->ck, 5, NULL);
  strata_err_clear();
  int rc = strata__part_read(pdir, 5, 2, sum, bytes, sink_dest, &s);
  assert_true(rc != 0 && rc != STRATA_ENOENT);
  assert_int_equal(s.calls, 0);
}

/* The destination refuses an entry: its code and message come back, and
 * nothing after it is handed out. */
static void test_part_dest_refuses(void **state) {
  fixture *fx = *state;
  char path[256];
  uint64_t sum, bytes;
  write_small(fx, path, sizeof path, &sum, &bytes);
  static const int codes[] = {STRATA_EPARSE, STRATA_ERANGE, STRATA_EINVAL, STRATA_ECOMM};
  for (int at = 0; at < 3; at++) {
    sink s = new_sink();
    s.refuse_at = at;
    s.refuse_rc = codes[at];
    strata_err_clear();
    assert_int_equal(strata__part_read(path, 5, 2, sum, bytes, sink_dest, &s), codes[at]);
    assert_int_equal(s.calls, at + 1);
    char want[64];
    sfmt(want, sizeof want, "test: entry %d", at);
    assert_msg_has(want);
    sink_free(&s);
  }
}

/* Reading runs out of memory: STRATA_ENOMEM, nothing left open. */
static void test_part_read_out_of_memory(void **state) {
  fixture *fx = *state;
  char path[256];
  uint64_t sum, bytes;
  write_small(fx, path, sizeof path, &sum, &bytes);
  sink s = new_sink();
  strata_alloc_fail_after(1);
  int rc = strata__part_read(path, 5, 2, sum, bytes, sink_dest, &s);
  strata_alloc_fail_after(0);
  assert_int_equal(rc, STRATA_ENOMEM);
  assert_int_equal(s.calls, 0);
  assert_int_equal(count_fds(), fx->fds0);
}

/* ---- parts: the writer's misuse --------------------------------------- */

static void test_part_entry_too_long(void **state) {
  fixture *fx = *state;
  strata__part_writer pw;
  assert_int_equal(strata__part_begin(&pw, fx->ck, 1, "worker-0.bin", 0), 0);
  assert_int_equal(strata__part_open_entry(&pw, STRATA__CK_RESIDENT, 0, 0, 10), 0);
  strata_err_clear();
  assert_int_equal(strata__part_write(&pw, "0123456789A", 11), STRATA_EINVAL);
  assert_msg_has("longer than announced");
  assert_int_equal(strata__part_write(&pw, "012345", 6), 0);
  strata_err_clear();
  assert_int_equal(strata__part_write(&pw, "6789A", 5), STRATA_EINVAL);
  assert_msg_has("longer than announced");
  /* Another entry cannot start before this one is done. */
  strata_err_clear();
  assert_int_equal(strata__part_open_entry(&pw, STRATA__CK_GLOBAL, 0, 0, 1), STRATA_EINVAL);
  assert_msg_has("still being written");
  assert_int_equal(strata__part_add(&pw, STRATA__CK_GLOBAL, 0, 0, "x", 1), STRATA_EINVAL);
  /* Nothing past the announced length went in: the rest completes it. */
  assert_int_equal(strata__part_write(&pw, "6789", 4), 0);
  assert_int_equal(strata__part_write(&pw, "x", 1), STRATA_EINVAL); /* none open now */
  uint64_t sum, bytes;
  assert_int_equal(strata__part_commit(&pw, &sum, &bytes), 0);
  char path[256];
  pass_path(path, sizeof path, fx->ck, 1, "worker-0.bin");
  sink s = new_sink();
  assert_int_equal(strata__part_read(path, 1, 0, sum, bytes, sink_dest, &s), 0);
  assert_int_equal(s.n, 1);
  assert_true(s.got[0].len == 10);
  assert_memory_equal(s.got[0].bytes, "0123456789", 10);
  sink_free(&s);
}

/* Commit with an entry unfinished: refused, and no part, temporary or
 * final, is left. */
static void test_part_commit_unfinished(void **state) {
  fixture *fx = *state;
  strata__part_writer pw;
  assert_int_equal(strata__part_begin(&pw, fx->ck, 2, "worker-0.bin", 0), 0);
  assert_int_equal(strata__part_add(&pw, STRATA__CK_RESIDENT, 0, 0, "abc", 3), 0);
  assert_int_equal(strata__part_open_entry(&pw, STRATA__CK_RESIDENT, 1, 0, 8), 0);
  assert_int_equal(strata__part_write(&pw, "1234567", 7), 0);
  uint64_t sum = 77, bytes = 77;
  strata_err_clear();
  assert_int_equal(strata__part_commit(&pw, &sum, &bytes), STRATA_EINVAL);
  assert_msg_has("unfinished");
  strata__part_abandon(&pw);
  char pdir[256];
  pass_path(pdir, sizeof pdir, fx->ck, 2, NULL);
  assert_int_equal(count_entries(pdir), 0);
  assert_int_equal(count_fds(), fx->fds0);
}

/* Abandon: the temporary file goes, nothing is left; twice, after commit
 * (where it keeps the part) and on a zeroed writer, it is harmless. */
static void test_part_abandon(void **state) {
  fixture *fx = *state;
  strata__part_writer pw;
  assert_int_equal(strata__part_begin(&pw, fx->ck, 4, "worker-3.bin", 3), 0);
  assert_int_equal(strata__part_add(&pw, STRATA__CK_RESIDENT, 0, 0, "abc", 3), 0);
  assert_int_equal(strata__part_open_entry(&pw, STRATA__CK_RESIDENT, 1, 0, 8), 0);
  char pdir[256], path[256];
  pass_path(pdir, sizeof pdir, fx->ck, 4, NULL);
  pass_path(path, sizeof path, fx->ck, 4, "worker-3.bin");
  assert_int_equal(count_entries(pdir), 1); /* the temporary file */
  assert_true(has_tmp(pdir));
  assert_false(exists(path));
  strata__part_abandon(&pw);
  assert_int_equal(count_entries(pdir), 0);
  strata__part_abandon(&pw);
  assert_int_equal(count_fds(), fx->fds0);
  strata__part_writer zero;
  memset(&zero, 0, sizeof zero);
  strata__part_abandon(&zero);
  /* After commit, abandon keeps what was committed. */
  uint64_t sum, bytes;
  write_ref(fx->ck, 4, "worker-3.bin", 3, &sum, &bytes); /* abandons after committing */
  assert_true(exists(path));
  assert_int_equal(count_entries(pdir), 1);
  sink s = new_sink();
  assert_int_equal(strata__part_read(path, 4, 3, sum, bytes, sink_dest, &s), 0);
  sink_free(&s);
}

/* Begin where the checkpoint directory cannot be: a file in its place. */
static void test_part_begin_fails(void **state) {
  fixture *fx = *state;
  assert_int_equal(rmdir(fx->ck), 0);
  spit(fx->ck, "x", 1);
  strata__part_writer pw;
  strata_err_clear();
  int rc = strata__part_begin(&pw, fx->ck, 1, "worker-0.bin", 0);
  assert_true(rc != 0);
  assert_msg_has(fx->ck);
  strata__part_abandon(&pw);
  assert_int_equal(count_fds(), fx->fds0);
  /* A pass directory that is a file. */
  unlink(fx->ck);
  assert_int_equal(mkdir(fx->ck, 0777), 0);
  char pdir[256];
  pass_path(pdir, sizeof pdir, fx->ck, 1, NULL);
  spit(pdir, "x", 1);
  strata_err_clear();
  assert_int_equal(strata__part_begin(&pw, fx->ck, 1, "worker-0.bin", 0), STRATA_EIO);
  assert_msg_has("not a directory");
  strata__part_abandon(&pw);
}

/* ---- checkpoints in a directory -------------------------------------- */

static int fill_text(FILE *f, void *ud) {
  fputs(ud ? (const char *)ud : "{}\n", f);
  return 0;
}

static int fill_fails(FILE *f, void *ud) {
  (void)ud;
  fputs("{\"half\":", f);
  return strata_err_set(STRATA_ERANGE, "test: the manifest could not be filled");
}

/* A checkpoint after `passes`: a part, and the manifest when complete. */
static void make_ckpt(const char *dir, int passes, int complete) {
  uint64_t sum, bytes;
  strata__part_writer pw;
  assert_int_equal(strata__part_begin(&pw, dir, passes, "worker-0.bin", 0), 0);
  assert_int_equal(strata__part_add(&pw, STRATA__CK_RESIDENT, 0, 0, "abc", 3), 0);
  assert_int_equal(strata__part_commit(&pw, &sum, &bytes), 0);
  if (complete) assert_int_equal(strata__ckpt_publish(dir, passes, fill_text, NULL), 0);
}

static int has_ckpt(const char *dir, int passes) {
  char p[256];
  pass_path(p, sizeof p, dir, passes, NULL);
  return exists(p);
}

static int last_of(const char *dir) {
  int last = -7;
  assert_int_equal(strata__ckpt_last(dir, &last), 0);
  return last;
}

static void test_last(void **state) {
  fixture *fx = *state;
  assert_int_equal(rmdir(fx->ck), 0);
  assert_int_equal(last_of(fx->ck), -1); /* no directory */
  assert_int_equal(mkdir(fx->ck, 0777), 0);
  assert_int_equal(last_of(fx->ck), -1); /* empty */
  make_ckpt(fx->ck, 7, 0);
  assert_int_equal(last_of(fx->ck), -1); /* only incomplete */
  make_ckpt(fx->ck, 2, 1);
  make_ckpt(fx->ck, 5, 1);
  make_ckpt(fx->ck, 0, 1);
  make_ckpt(fx->ck, 9, 0);
  assert_int_equal(last_of(fx->ck), 5); /* the highest complete, not the highest */
  /* Names that are not checkpoints, though they hold manifests. */
  static const char *const others[] = {"pass-12", "pass-0000010", "pass-00000a", "pass-+00010",
                                       "xpass-000011", "pass-000012x", "PASS-000013"};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    char p[256];
    sfmt(p, sizeof p, "%s/%s", fx->ck, others[i]);
    assert_int_equal(mkdir(p, 0777), 0);
    sfmt(p, sizeof p, "%s/%s/%s", fx->ck, others[i], STRATA__CKPT_MANIFEST);
    spit(p, "{}", 2);
  }
  /* A manifest that is a directory, and a pass "directory" that is a file. */
  char p[256];
  pass_path(p, sizeof p, fx->ck, 20, STRATA__CKPT_MANIFEST);
  char pdir[256];
  pass_path(pdir, sizeof pdir, fx->ck, 20, NULL);
  assert_int_equal(mkdir(pdir, 0777), 0);
  assert_int_equal(mkdir(p, 0777), 0);
  pass_path(p, sizeof p, fx->ck, 21, NULL);
  spit(p, "{}", 2);
  assert_int_equal(last_of(fx->ck), 5);
  /* Publishing 9 makes it the last. */
  assert_int_equal(strata__ckpt_publish(fx->ck, 9, fill_text, NULL), 0);
  assert_int_equal(last_of(fx->ck), 9);
  /* A directory that cannot be read is an error; a file is not a directory. */
  char file[256];
  sfmt(file, sizeof file, "%s/plain", fx->dir);
  spit(file, "x", 1);
  int last = -7;
  strata_err_clear();
  assert_int_equal(strata__ckpt_last(file, &last), STRATA_EIO);
  assert_msg_has(file);
}

/* Checkpoints past six digits of passes are named with more; they count. */
static void test_last_seven_digits(void **state) {
  fixture *fx = *state;
  make_ckpt(fx->ck, 999999, 1);
  make_ckpt(fx->ck, 1000000, 1);
  char p[256];
  pass_path(p, sizeof p, fx->ck, 1000000, NULL);
  assert_non_null(strstr(p, "pass-1000000"));
  assert_int_equal(last_of(fx->ck), 1000000);
  /* Prune keeps it and removes the one before. */
  assert_int_equal(strata__ckpt_prune(fx->ck, 1000000), 0);
  assert_false(has_ckpt(fx->ck, 999999));
  assert_true(has_ckpt(fx->ck, 1000000));
  /* And a run may not start over it without resuming. */
  assert_int_equal(strata__ckpt_prepare(fx->ck, 0), STRATA_EUSAGE);
  assert_msg_has("after 1000000 passes");
  /* A name with a leading zero beyond six digits is not one strata writes. */
  char odd[256];
  sfmt(odd, sizeof odd, "%s/pass-0000002", fx->ck);
  assert_int_equal(mkdir(odd, 0777), 0);
  sfmt(odd, sizeof odd, "%s/pass-0000002/%s", fx->ck, STRATA__CKPT_MANIFEST);
  spit(odd, "{}", 2);
  assert_int_equal(strata__ckpt_prune(fx->ck, 1000001), 0);
  assert_int_equal(last_of(fx->ck), -1);
  sfmt(odd, sizeof odd, "%s/pass-0000002", fx->ck);
  assert_true(exists(odd)); /* not a checkpoint: left alone */
}

static void test_prepare(void **state) {
  fixture *fx = *state;
  /* Created when missing (its parent exists). */
  assert_int_equal(rmdir(fx->ck), 0);
  assert_int_equal(strata__ckpt_prepare(fx->ck, 0), 0);
  struct stat st;
  assert_int_equal(stat(fx->ck, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(strata__ckpt_prepare(fx->ck, 0), 0); /* and again */
  /* Incomplete checkpoints (a run that died while writing) are removed,
   * with every file in them. */
  make_ckpt(fx->ck, 3, 0);
  make_ckpt(fx->ck, 6, 0);
  char tmp[256];
  pass_path(tmp, sizeof tmp, fx->ck, 6, "worker-1.bin.tmp.123");
  spit(tmp, "partial", 7);
  char other[256];
  sfmt(other, sizeof other, "%s/notes.txt", fx->ck);
  spit(other, "mine", 4);
  assert_int_equal(strata__ckpt_prepare(fx->ck, 0), 0);
  assert_false(has_ckpt(fx->ck, 3));
  assert_false(has_ckpt(fx->ck, 6));
  assert_true(exists(other)); /* not a checkpoint: left alone */
  /* A complete one: refused unless the run resumes from this directory. */
  make_ckpt(fx->ck, 4, 1);
  make_ckpt(fx->ck, 8, 1);
  make_ckpt(fx->ck, 10, 0);
  strata_err_clear();
  assert_int_equal(strata__ckpt_prepare(fx->ck, 0), STRATA_EUSAGE);
  assert_msg_has(fx->ck);
  assert_msg_has("after 8 passes");
  assert_true(has_ckpt(fx->ck, 4));
  assert_true(has_ckpt(fx->ck, 8));
  make_ckpt(fx->ck, 10, 0);
  assert_int_equal(strata__ckpt_prepare(fx->ck, 1), 0);
  assert_true(has_ckpt(fx->ck, 4));
  assert_true(has_ckpt(fx->ck, 8));
  assert_false(has_ckpt(fx->ck, 10));
  assert_int_equal(last_of(fx->ck), 8);
  /* A checkpoint after 0 passes counts like any other. */
  assert_int_equal(strata__ckpt_prune(fx->ck, 9), 0);
  make_ckpt(fx->ck, 0, 1);
  assert_int_equal(strata__ckpt_prepare(fx->ck, 0), STRATA_EUSAGE);
  assert_msg_has("after 0 passes");
  /* A file where the directory should be. */
  char file[256];
  sfmt(file, sizeof file, "%s/plain", fx->dir);
  spit(file, "x", 1);
  strata_err_clear();
  assert_int_equal(strata__ckpt_prepare(file, 0), STRATA_EIO);
  assert_msg_has(file);
}

/* A checkpoint removed halfway (manifest gone, parts still there) is
 * incomplete: never the last, and prepare clears it. */
static void test_half_removed(void **state) {
  fixture *fx = *state;
  make_ckpt(fx->ck, 2, 1);
  make_ckpt(fx->ck, 4, 1);
  char m[256];
  pass_path(m, sizeof m, fx->ck, 4, STRATA__CKPT_MANIFEST);
  assert_int_equal(unlink(m), 0);
  assert_int_equal(last_of(fx->ck), 2);
  assert_int_equal(strata__ckpt_prepare(fx->ck, 1), 0);
  assert_false(has_ckpt(fx->ck, 4));
  assert_int_equal(last_of(fx->ck), 2);
  /* With the last part gone too, still not complete. */
  make_ckpt(fx->ck, 6, 0);
  char part[256];
  pass_path(part, sizeof part, fx->ck, 6, "worker-0.bin");
  assert_int_equal(unlink(part), 0);
  assert_int_equal(last_of(fx->ck), 2);
  /* A removal that fails halfway (something in the checkpoint that is not
   * a file): the error comes back, the other old checkpoints still go, and
   * what is left of this one is incomplete. */
  make_ckpt(fx->ck, 1, 1);
  make_ckpt(fx->ck, 7, 1);
  char sub[256];
  pass_path(sub, sizeof sub, fx->ck, 1, "stray");
  assert_int_equal(mkdir(sub, 0777), 0);
  strata_err_clear();
  assert_int_equal(strata__ckpt_prune(fx->ck, 7), STRATA_EIO);
  assert_msg_has("cannot remove");
  assert_true(has_ckpt(fx->ck, 1));
  assert_false(has_ckpt(fx->ck, 2));
  assert_false(has_ckpt(fx->ck, 6));
  assert_true(has_ckpt(fx->ck, 7));
  int last = -7;
  assert_int_equal(strata__ckpt_last(fx->ck, &last), 0);
  assert_int_equal(last, 7);
  assert_int_equal(rmdir(sub), 0);
  assert_int_equal(strata__ckpt_prune(fx->ck, 8), 0);
  assert_int_equal(last_of(fx->ck), -1);
  assert_int_equal(count_entries(fx->ck), 0);
}

static void test_publish(void **state) {
  fixture *fx = *state;
  make_ckpt(fx->ck, 3, 0);
  assert_int_equal(last_of(fx->ck), -1);
  const char *text = "{\"passes\": 3}\n";
  assert_int_equal(strata__ckpt_publish(fx->ck, 3, fill_text, (void *)text), 0);
  assert_int_equal(last_of(fx->ck), 3);
  char m[256], pdir[256];
  pass_path(m, sizeof m, fx->ck, 3, STRATA__CKPT_MANIFEST);
  pass_path(pdir, sizeof pdir, fx->ck, 3, NULL);
  size_t n;
  unsigned char *got = slurp(m, &n);
  assert_int_equal(n, strlen(text));
  assert_memory_equal(got, text, n);
  free(got);
  assert_false(has_tmp(pdir));
  assert_int_equal(count_entries(pdir), 2);
  /* A fill that fails: its code, no manifest, nothing temporary. */
  make_ckpt(fx->ck, 6, 0);
  pass_path(pdir, sizeof pdir, fx->ck, 6, NULL);
  strata_err_clear();
  assert_int_equal(strata__ckpt_publish(fx->ck, 6, fill_fails, NULL), STRATA_ERANGE);
  assert_msg_has("could not be filled");
  assert_false(has_tmp(pdir));
  assert_int_equal(count_entries(pdir), 1);
  assert_int_equal(last_of(fx->ck), 3);
  assert_int_equal(count_fds(), fx->fds0);
  /* No pass directory to publish into. */
  strata_err_clear();
  assert_int_equal(strata__ckpt_publish(fx->ck, 7, fill_text, NULL), STRATA_EIO);
  assert_msg_has("pass-000007");
  assert_int_equal(last_of(fx->ck), 3);
}

static void test_prune(void **state) {
  fixture *fx = *state;
  assert_int_equal(rmdir(fx->ck), 0);
  assert_int_equal(strata__ckpt_prune(fx->ck, 5), 0); /* no directory: nothing to do */
  assert_int_equal(mkdir(fx->ck, 0777), 0);
  const int passes[] = {1, 2, 3, 4, 5, 6, 8};
  const int complete[] = {1, 0, 1, 1, 0, 1, 0};
  for (int i = 0; i < 7; i++) make_ckpt(fx->ck, passes[i], complete[i]);
  char other[256];
  sfmt(other, sizeof other, "%s/pass-1", fx->ck);
  assert_int_equal(mkdir(other, 0777), 0);
  assert_int_equal(strata__ckpt_prune(fx->ck, 4), 0);
  for (int i = 0; i < 7; i++)
    if (has_ckpt(fx->ck, passes[i]) != (passes[i] >= 4))
      fail_msg("after prune(4): the checkpoint after %d passes is %s", passes[i],
               passes[i] >= 4 ? "gone" : "still there");
  assert_true(exists(other));
  /* What was kept is whole: the complete ones still read back. */
  assert_int_equal(last_of(fx->ck), 6);
  char path[256];
  pass_path(path, sizeof path, fx->ck, 4, "worker-0.bin");
  assert_true(exists(path));
  assert_int_equal(strata__ckpt_prune(fx->ck, 4), 0); /* again: nothing more */
  assert_int_equal(count_entries(fx->ck), 4 + 1);
  assert_int_equal(strata__ckpt_prune(fx->ck, 0), 0);
  assert_int_equal(count_entries(fx->ck), 4 + 1);
  assert_int_equal(strata__ckpt_prune(fx->ck, 9), 0);
  assert_int_equal(count_entries(fx->ck), 1);
  assert_int_equal(last_of(fx->ck), -1);
}

static void test_same_dir(void **state) {
  fixture *fx = *state;
  char a[256], b[256], link[256], dot[256], up[256];
  sfmt(a, sizeof a, "%s/a", fx->dir);
  sfmt(b, sizeof b, "%s/b", fx->dir);
  sfmt(link, sizeof link, "%s/link", fx->dir);
  sfmt(dot, sizeof dot, "%s/a/.", fx->dir);
  sfmt(up, sizeof up, "%s/b/../a/", fx->dir);
  assert_int_equal(mkdir(a, 0777), 0);
  assert_int_equal(mkdir(b, 0777), 0);
  assert_int_equal(symlink(a, link), 0);
  assert_true(strata__same_dir(a, a));
  assert_true(strata__same_dir(a, dot));
  assert_true(strata__same_dir(up, a));
  assert_true(strata__same_dir(a, link));
  assert_false(strata__same_dir(a, b));
  assert_false(strata__same_dir(a, fx->dir));
  char missing[256];
  sfmt(missing, sizeof missing, "%s/missing", fx->dir);
  assert_false(strata__same_dir(a, missing));
  assert_false(strata__same_dir(missing, missing));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_path, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_empty_and_rewrite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_flipped_byte, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_wrong_size, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_bad_structure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_wrong_header, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_dest_refuses, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_read_out_of_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_entry_too_long, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_commit_unfinished, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_abandon, setup, teardown),
      cmocka_unit_test_setup_teardown(test_part_begin_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(test_last, setup, teardown),
      cmocka_unit_test_setup_teardown(test_last_seven_digits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prepare, setup, teardown),
      cmocka_unit_test_setup_teardown(test_half_removed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_publish, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prune, setup, teardown),
      cmocka_unit_test_setup_teardown(test_same_dir, setup, teardown),
  };
  return cmocka_run_group_tests_name("ckpt", tests, NULL, NULL);
}
