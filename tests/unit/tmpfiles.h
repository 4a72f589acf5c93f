/*
 * The fixture of the reader tests: like leakcheck.h (no error message or
 * armed allocation failure at the start, every byte given back at the end,
 * no memory limit left set),
 * plus temporary files that teardown removes, and the check that skips a
 * test when the shared data is absent. Include after cmocka.h.
 */
#ifndef STRATA_TEST_TMPFILES_H
#define STRATA_TEST_TMPFILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "strata/core.h"
#include "strata/error.h"

#define MAX_TMP 16

typedef struct {
  char path[MAX_TMP][64];
  int n_paths;
  size_t live0;
} fixture;

static fixture fx_storage;

static int setup(void **state) {
  memset(&fx_storage, 0, sizeof fx_storage);
  fx_storage.live0 = strata_alloc_live();
  strata_err_clear();
  *state = &fx_storage;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  strata_alloc_fail_after(0);
  strata_mem_set_limit(0);
  for (int k = 0; k < fx->n_paths; k++) unlink(fx->path[k]);
  assert_int_equal(strata_alloc_live(), fx->live0);
  return 0;
}

static inline void assert_live(const fixture *fx) {
  assert_int_equal(strata_alloc_live(), fx->live0);
}

/* A new empty temporary file, removed at teardown. */
static inline char *tmp_name(fixture *fx) {
  assert_true(fx->n_paths < MAX_TMP);
  char *path = fx->path[fx->n_paths++];
  strcpy(path, "/tmp/strata_test_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  return path;
}

static inline const char *write_tmp_len(fixture *fx, const char *content, size_t len) {
  char *path = tmp_name(fx);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(content, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  return path;
}

static inline const char *write_tmp(fixture *fx, const char *content) {
  return write_tmp_len(fx, content, strlen(content));
}

/* The same, gzip-compressed. The name does not end in .gz on purpose: the
 * readers go by content. */
static inline const char *write_tmp_gz(fixture *fx, const char *content) {
  char *path = tmp_name(fx);
  gzFile gz = gzopen(path, "wb");
  assert_non_null(gz);
  size_t len = strlen(content);
  assert_int_equal(gzwrite(gz, content, (unsigned)len), (int)len);
  assert_int_equal(gzclose(gz), Z_OK);
  return path;
}

/* The gzip of content, damaged as a reader may meet it: cut short in the
 * middle of the stream (cut = 1), or whole but for its last 8 bytes, the
 * trailer that holds the CRC and the length (cut = 0). */
static inline const char *write_tmp_gz_damaged(fixture *fx, const char *content, int cut) {
  const char *gz = write_tmp_gz(fx, content);
  FILE *f = fopen(gz, "rb");
  assert_non_null(f);
  static char bytes[1 << 16];
  size_t n = fread(bytes, 1, sizeof bytes, f);
  assert_true(feof(f));
  fclose(f);
  assert_true(n > 40);
  return write_tmp_len(fx, bytes, cut ? n / 2 : n - 8);
}

/* A reader (read) refuses content gzip-compressed and cut short, and
 * without its trailer, with STRATA_EPARSE and a message naming the file;
 * the whole stream reads (0). read reads path, frees what it read and
 * returns its code; ctx is passed through. */
static inline void assert_gzip_damage_refused(fixture *fx, const char *content,
                                              int (*read)(const char *path, void *ctx),
                                              void *ctx) {
  for (int cut = 0; cut <= 1; cut++) {
    const char *path = write_tmp_gz_damaged(fx, content, cut);
    int rc = read(path, ctx);
    if (rc != STRATA_EPARSE)
      fail_msg("the gzip stream %s: code %d, message '%s'", cut ? "cut short" : "without its trailer",
               rc, strata_err_msg());
    const char *msg = strata_err_msg();
    if (strncmp(msg, path, strlen(path)) != 0 || msg[strlen(path)] != ':' ||
        !strstr(msg, "truncated gzip"))
      fail_msg("message '%s' does not name '%s' and the truncated gzip data", msg, path);
    assert_live(fx);
  }
  assert_int_equal(read(write_tmp_gz(fx, content), ctx), 0);
  assert_live(fx);
}

/* A reader's error message msg: one line, starting "PATH:LINE: " (or
 * "PATH: " for line 0, a whole-file message) and holding needle (unless
 * NULL). */
static inline void assert_msg_at(const char *msg, const char *path, size_t line,
                                 const char *needle) {
  char where[128];
  if (line)
    snprintf(where, sizeof where, "%s:%zu: ", path, line);
  else
    snprintf(where, sizeof where, "%s: ", path);
  if (strncmp(msg, where, strlen(where)) != 0) fail_msg("message '%s' lacks '%s'", msg, where);
  if (needle && !strstr(msg, needle)) fail_msg("message '%s' lacks '%s'", msg, needle);
  assert_null(strchr(msg, '\n'));
}

/* Whether a shared data file is there; says so when it is not, before the
 * caller skips. */
static inline int have_file(const char *path) {
  if (access(path, R_OK) == 0) return 1;
  print_message("%s is absent: skipping\n", path);
  return 0;
}

#endif
