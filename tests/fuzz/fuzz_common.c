/*
 * The helpers of tests/fuzz/fuzz.h.
 */
#include "fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "strata/core.h"
#include "strata/error.h"

/*
 * Every reader checks the sizes a file declares or implies against the
 * memory available before allocating for them; fuzz_start sets the run's
 * limit (strata_mem_set_limit) to FUZZ_MEM_LIMIT, so those checks run, and
 * refuse, on inputs of a few bytes. Behind them:
 * a corpus reader expands counts into tokens, and a UCI header's document
 * count sizes an array: a file of a few bytes may rightly ask for any
 * amount of memory, which strata_malloc turns into STRATA_ENOMEM when
 * malloc refuses. Under ASan (libFuzzer's build, and the regular build's
 * ASan stage replaying regress/) a request beyond 256 MiB gets NULL, as
 * on a machine without that much to spare, instead of a report: the
 * out-of-memory paths run, and a fuzzer's memory stays bounded. Without
 * ASan nothing calls this. Default visibility, against the build's hidden
 * one: gcc's ASan runtime is a shared library, which looks it up.
 */
#define FUZZ_HOOK __attribute__((used, visibility("default")))
const char *__asan_default_options(void);
FUZZ_HOOK const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:max_allocation_size_mb=256";
}

const char *__ubsan_default_options(void);
FUZZ_HOOK const char *__ubsan_default_options(void) { return "print_stacktrace=1"; }

static char dir[4096];
static char path[4096 + 16];
static size_t live0;

void fuzz_fail(const char *file, int line, const char *what) {
  fprintf(stderr, "fuzz: %s:%d: %s (the last message: '%s')\n", file, line, what,
          strata_err_msg());
  abort();
}

static void remove_dir(void) {
  unlink(path);
  rmdir(dir);
}

const char *fuzz_path(void) {
  if (path[0]) return path;
  /* fuzz.sh points TMPDIR at a directory of its own under /dev/shm, which
   * it removes even when a crash skips the atexit handler. */
  const char *base = getenv("TMPDIR");
  struct stat st;
  if (!base || !*base) base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  int n = snprintf(dir, sizeof dir, "%s/strata-fuzz.XXXXXX", base);
  FUZZ_CHECK(n > 0 && (size_t)n < sizeof dir, "TMPDIR is too long");
  FUZZ_CHECK(mkdtemp(dir) != NULL, "cannot create a temporary directory");
  snprintf(path, sizeof path, "%s/input", dir);
  atexit(remove_dir);
  return path;
}

void fuzz_write(const uint8_t *data, size_t size) {
  int fd = open(fuzz_path(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0, "cannot open the input file");
  while (size) {
    ssize_t w = write(fd, data, size);
    if (w < 0 && errno == EINTR) continue;
    FUZZ_CHECK(w > 0, "cannot write the input file");
    data += w;
    size -= (size_t)w;
  }
  FUZZ_CHECK(close(fd) == 0, "cannot close the input file");
}

/* gzip-compresses data into a malloc'd buffer; *out_size its length. */
static uint8_t *gzip(const uint8_t *data, size_t size, size_t *out_size) {
  z_stream z;
  memset(&z, 0, sizeof z);
  /* 15 + 16: a gzip header and trailer around the deflate data. */
  FUZZ_CHECK(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                          Z_DEFAULT_STRATEGY) == Z_OK,
             "deflateInit2 failed");
  size_t cap = deflateBound(&z, (uLong)size) + 32;
  uint8_t *out = malloc(cap);
  FUZZ_CHECK(out != NULL, "out of memory compressing the input");
  z.next_in = (Bytef *)(uintptr_t)data;
  z.avail_in = (uInt)size;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate failed");
  *out_size = z.total_out;
  deflateEnd(&z);
  return out;
}

int fuzz_input_begin(fuzz_input *in, const uint8_t *data, size_t size) {
  if (size < 2) return -1;
  in->choice = data[0] & 15u;
  in->data = data + 2;
  in->size = size - 2;
  unsigned how = data[0] >> 4;
  if (how < 8) {
    fuzz_write(in->data, in->size);
  } else {
    size_t n = 0;
    uint8_t *z = gzip(in->data, in->size, &n);
    if (how >= 9 && how <= 14) {
      n = n * (how - 8) / 7;
    } else if (how == 15 && n > 18) {
      /* Past the 10-byte header, before the 8-byte trailer. */
      z[10 + (n - 18) / 2] ^= 0x5a;
    }
    fuzz_write(z, n);
    free(z);
  }
  fuzz_start();
  if (data[1] >= 0xe0) strata_alloc_fail_after((long)data[1] - 0xdf);
  return 0;
}

void fuzz_start(void) {
  strata_err_clear();
  live0 = strata_alloc_live();
  /* Well below ASan's 256 MiB (above): the readers' own size checks
   * (strata_mem_check) refuse first, so they run too. */
  strata_mem_set_limit(FUZZ_MEM_LIMIT);
}

void fuzz_finish(int rc, const char *prefix) {
  strata_alloc_fail_after(0);
  /* To see what each input of a directory gives:
   * STRATA_FUZZ_VERBOSE=1 fuzz_replay_<target> DIR. */
  if (getenv("STRATA_FUZZ_VERBOSE"))
    fprintf(stderr, "fuzz: %s%s%s\n", strata_err_name(rc), rc ? ": " : "", rc ? strata_err_msg() : "");
  FUZZ_CHECK(rc <= 0, "a positive return code");
  FUZZ_CHECK(strata_alloc_live() == live0, "strata's allocator holds bytes the call did not free");
  if (rc == 0) return;
  FUZZ_CHECK(strcmp(strata_err_name(rc), "STRATA_EUNKNOWN") != 0, "an unknown error code");
  const char *msg = strata_err_msg();
  FUZZ_CHECK(msg[0] != '\0', "an error without a message");
  for (const char *p = msg; *p; p++)
    FUZZ_CHECK(*p >= 0x20 && *p <= 0x7e, "a message holding a byte that is not printable ASCII");
  if (prefix) {
    size_t n = strlen(prefix);
    FUZZ_CHECK(strncmp(msg, prefix, n) == 0 && msg[n] == ':', "a message not naming the input");
  }
}
