/*
 * What the fuzz targets (tests/fuzz/fuzz_<name>.c) share: the file a reader
 * target writes its input to, the ways that input can reach the file (as
 * is, or gzip-compressed whole, cut short or with a byte flipped), an
 * injected allocation failure, and the checks every input ends with.
 *
 * A target defines LLVMFuzzerTestOneInput and nothing else; libFuzzer's
 * main drives it in the clang fuzz build (STRATA_FUZZ), replay.c's in the
 * regular build, which replays tests/fuzz/regress/<name>/ under ctest.
 * Any broken expectation prints one line naming the target and aborts,
 * which libFuzzer records as a crash and ctest as a failure.
 */
#ifndef STRATA_TESTS_FUZZ_H
#define STRATA_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The header of a reader target's input: two bytes, then the file's content.
 *   byte 0, low nibble: the target's own choice (a format, a mode);
 *   byte 0, high nibble: how the content reaches the file: 0-7 as is (a
 *     gzip seed stays gzip data, so mutations corrupt it at random); 8
 *     gzip-compressed here; 9-14 compressed, then cut to (h - 8)/7 of its
 *     length; 15 compressed, then one byte of the deflate data flipped;
 *   byte 1: 0xe0-0xff make allocation number (byte - 0xdf), 1 to 32,
 *     through strata's allocator fail, so the error paths of out-of-memory
 *     run (and must free what they took); anything lower injects nothing.
 * Mutations rarely touch the header, so most runs parse plain text.
 */
typedef struct fuzz_input {
  unsigned choice;      /* low nibble of byte 0 */
  const uint8_t *data;  /* the content, after the header */
  size_t size;
} fuzz_input;

/* Splits the header off, writes the content to fuzz_path() as the header
 * says and arms the allocation failure. 0, or -1 when the input is too short
 * to hold a header (the target then returns at once). */
int fuzz_input_begin(fuzz_input *in, const uint8_t *data, size_t size);

/* The file reader targets read: "DIR/input" in a directory made once per
 * process under /dev/shm (or $TMPDIR, or /tmp) and removed at exit. */
const char *fuzz_path(void);

/* Writes size bytes to fuzz_path(), replacing what was there. */
void fuzz_write(const uint8_t *data, size_t size);

/* The memory limit every input runs under (strata_mem_set_limit): 64 MB,
 * so the readers' size checks refuse what a few bytes may ask for. */
#define FUZZ_MEM_LIMIT 64000000

/* Start of an input: clears the error message, remembers the bytes live
 * in strata's allocator and sets the memory limit. */
void fuzz_start(void);

/*
 * End of an input, after the target freed everything: disarms the injected
 * failure, checks strata's allocator is back where fuzz_start found it, and
 * for rc < 0 that the message is one non-empty line of printable ASCII that
 * starts with prefix (NULL: any start), e.g. the path of the file read.
 * With STRATA_FUZZ_VERBOSE set in the environment it prints the outcome.
 */
void fuzz_finish(int rc, const char *prefix);

/* Aborts with "fuzz: <what>" unless cond holds. */
#define FUZZ_CHECK(cond, what) ((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, (what)))
void fuzz_fail(const char *file, int line, const char *what) __attribute__((noreturn));

#endif
