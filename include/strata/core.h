/*
 * strata/core.h - allocation, clocks, random numbers, logging, atomic file
 * output and the quoting of input in messages, shared by every module.
 */
#ifndef STRATA_CORE_H
#define STRATA_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "strata/error.h"

/* ---- allocation ------------------------------------------------------ */
/*
 * Every allocation in strata goes through these so that live bytes can be
 * counted and failure injected in tests. strata_free(NULL) is a no-op.
 * strata_alloc_aligned returns memory aligned to 64 bytes, freed with
 * strata_free like any other.
 */
STRATA_EXPORT void *strata_malloc(size_t n);
STRATA_EXPORT void *strata_calloc(size_t count, size_t size);
STRATA_EXPORT void *strata_realloc(void *p, size_t n);
STRATA_EXPORT void *strata_alloc_aligned(size_t n);
STRATA_EXPORT void strata_free(void *p);
/* Bytes currently allocated through the wrappers (all threads). */
STRATA_EXPORT size_t strata_alloc_live(void);
/* Test hook: the n-th allocation from now fails (n >= 1); 0 disarms. */
STRATA_EXPORT void strata_alloc_fail_after(long n);

/* ---- memory before work -------------------------------------------- */
/*
 * Bytes of memory this process may still take: the kernel's MemAvailable,
 * or less where the process's memory cgroup (v1 or v2) sets a lower limit;
 * the memory limit instead when one is set (strata_mem_set_limit); and in
 * either case no more than what RLIMIT_AS (`ulimit -v`) and RLIMIT_DATA
 * (`ulimit -d`) leave above what the process maps already. 0 with
 * *bytes = 0 when none of these can be told (not Linux, no limit).
 * Reads /proc: tens of microseconds, not a per-line call.
 */
STRATA_EXPORT int strata_mem_available(uint64_t *bytes);

/*
 * The memory limit of this process's run, in bytes; 0 (the default) for
 * none. strata_engine_run sets it on every rank from
 * strata_engine_opts.mem_limit (the CLI's --mem-limit) before load, so the
 * readers' and load's estimates (strata_mem_check, strata_problem_fits)
 * refuse what the run would not fit. Process-wide; thread-safe.
 */
STRATA_EXPORT void strata_mem_set_limit(uint64_t bytes);
STRATA_EXPORT uint64_t strata_mem_limit(void);

/*
 * What a reader checks its sizes against before it allocates: the memory
 * available when it started, taken once (strata_mem_budget_init), so that a
 * check per line costs a comparison. A reader's estimate is the whole of
 * what it and its caller will allocate for the data read so far, not an
 * increment, so it is compared with what was available at the start.
 */
typedef struct strata_mem_budget {
  uint64_t avail; /* bytes (strata_mem_available); 0: unknown, every size fits */
  int bound;      /* what sets avail, for the message (internal values) */
} strata_mem_budget;

/* Measures the budget now. */
STRATA_EXPORT void strata_mem_budget_init(strata_mem_budget *b);

/*
 * 0 when `bytes` fit in b (or b's memory is unknown). Else STRATA_ENOMEM
 * with the message "SUBJECT about X GB, but this host has Y GB available:
 * HINT", SUBJECT formatted from fmt (it names what needs the memory and
 * ends with its verb: "ap.dat:1: a vocabulary of 4000000000 words at K=5
 * topics needs"), ": HINT" only when hint is not NULL, and the memory
 * available named by what bounds it: "(--mem-limit)" after it for the
 * run's limit, "but this process may take Y GB more (ulimit -v)" (or -d)
 * for a resource limit. Sizes print in GB, MB or KB.
 */
STRATA_EXPORT int strata_mem_check(const strata_mem_budget *b, double bytes, const char *hint,
                                   const char *fmt, ...) STRATA_PRINTF(4, 5);

/* ---- time ------------------------------------------------------------ */
/* Monotonic wall clock in seconds. */
STRATA_EXPORT double strata_now(void);
/* CPU seconds (user + system) used by this process so far. */
STRATA_EXPORT double strata_cpu_seconds(void);

/* ---- random numbers -------------------------------------------------- */
/* xoshiro256** seeded through splitmix64: fast, deterministic for a seed. */
typedef struct strata_rng {
  uint64_t s[4];
} strata_rng;

STRATA_EXPORT void strata_rng_seed(strata_rng *rng, uint64_t seed);
/* Inline: samplers call it per draw, and a local copy of the state then
 * stays in registers. */
static inline uint64_t strata_rng_next(strata_rng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = s[3] << 45 | s[3] >> 19;
  return result;
}
/* Uniform double in [0, 1). */
static inline double strata_rng_uniform(strata_rng *rng) {
  return (double)(strata_rng_next(rng) >> 11) * 0x1.0p-53;
}
/* Uniform integer in [0, n), n > 0, without modulo bias. */
STRATA_EXPORT uint64_t strata_rng_below(strata_rng *rng, uint64_t n);
/* Standard normal deviate (Box-Muller, no cached second value). */
STRATA_EXPORT double strata_rng_normal(strata_rng *rng);
/* splitmix64 step: a well-mixed hash of x, used to derive sub-seeds. */
STRATA_EXPORT uint64_t strata_mix64(uint64_t x);

/* ---- checksums ------------------------------------------------------ */
/*
 * A 64-bit checksum of bytes, for telling a damaged or different file from
 * the one expected (checkpoint parts, the data a run loaded); not for
 * security. Four lanes of 64-bit multiply-rotate rounds over 32-byte
 * stripes, then a final mix: several GB/s, and the same value for the same
 * bytes however they are split into updates. strata_hash64 is the one-shot
 * form: strata_hash64(p, n, seed) equals init(seed), update(p, n), final.
 * p may be NULL when its length is 0.
 */
typedef struct strata_hash {
  uint64_t v[4];
  uint64_t total;          /* bytes so far */
  unsigned char buf[32];   /* the stripe being filled */
  uint32_t n;              /* bytes in buf */
} strata_hash;

STRATA_EXPORT void strata_hash_init(strata_hash *h, uint64_t seed);
STRATA_EXPORT void strata_hash_update(strata_hash *h, const void *p, size_t len);
/* The checksum of everything updated so far; h may go on being updated. */
STRATA_EXPORT uint64_t strata_hash_final(const strata_hash *h);
STRATA_EXPORT uint64_t strata_hash64(const void *p, size_t len, uint64_t seed);

/* ---- logging --------------------------------------------------------- */
typedef enum {
  STRATA_LOG_ERROR = 0,
  STRATA_LOG_WARN = 1,
  STRATA_LOG_INFO = 2,
  STRATA_LOG_DEBUG = 3
} strata_log_level;

/* Libraries report through this callback; the CLI installs one that prints
 * rank, role, elapsed time and level. Without one, messages are dropped. */
typedef void (*strata_log_fn)(void *ud, strata_log_level level, const char *msg);
STRATA_EXPORT void strata_log_set(strata_log_fn fn, void *ud, strata_log_level max_level);
STRATA_EXPORT void strata_log(strata_log_level level, const char *fmt, ...) STRATA_PRINTF(2, 3);

/* ---- atomic output --------------------------------------------------- */
/*
 * Writes a file so that readers see either nothing or the whole of it: the
 * content goes to "<path>.tmp.<pid>", which is renamed over path only on
 * success. `fill` writes through the FILE* and returns 0 or a STRATA_E* code;
 * on any failure the temporary file is removed and the code returned, with a
 * message naming path. An existing path that is neither a regular file nor
 * a directory (/dev/null, /dev/stdout, a FIFO) is written in place instead,
 * never replaced.
 */
typedef int (*strata_fill_fn)(FILE *f, void *ud);
STRATA_EXPORT int strata_write_atomic(const char *path, strata_fill_fn fill, void *ud);
/* The same for the file NAME inside directory DIR (model exports);
 * STRATA_EINVAL when "DIR/NAME" is longer than a path may be. */
STRATA_EXPORT int strata_write_atomic_in(const char *dir, const char *name, strata_fill_fn fill,
                                         void *ud);

/* Checks that a file could be created at path (its directory exists and is
 * writable, and path is not a directory) without creating it, so runs fail
 * before doing the work; for /dev/null, a FIFO and the like, that it may be
 * written (without opening it). */
STRATA_EXPORT int strata_check_writable(const char *path);

/* ---- quoting input in messages --------------------------------------- */
/*
 * Messages that quote input (a field, a line, a flag's value) pass it
 * through strata_quote first, so that whatever a file holds, the message
 * stays one short line of printable ASCII: binary garbage or a terminal
 * escape sequence in the input can never reach the user's terminal raw.
 *
 * Writes into dst (dstsz bytes, always NUL-terminated when dstsz > 0) the
 * first STRATA_QUOTE_MAX of the len bytes at src (src need not be
 * NUL-terminated and may be NULL when len is 0). Printable ASCII (0x20 to
 * 0x7e) is copied, except the backslash and the single quote, which messages
 * use around the text; every other byte, and those two, become "\xNN"
 * (two lower-case hex digits). When src has more than STRATA_QUOTE_MAX
 * bytes, "..." follows the part shown. A dst of STRATA_QUOTE_SIZE bytes
 * always holds the whole result; a smaller one gets what fits, never half
 * an escape, ending in "..." when room allows.
 * Thread-safe; dst is the caller's.
 * @return dst, so that the call can be an argument of the message's format:
 *   char q[STRATA_QUOTE_SIZE];
 *   strata_err_set(STRATA_EPARSE, "%s:%zu: user id '%s' is not an integer",
 *                  path, line, strata_quote(q, sizeof q, field, field_len));
 */
#define STRATA_QUOTE_MAX 32
#define STRATA_QUOTE_SIZE (4 * STRATA_QUOTE_MAX + sizeof "...")
STRATA_EXPORT const char *strata_quote(char *dst, size_t dstsz, const char *src, size_t len);

/* Rounds n up to a multiple of m (m > 0). */
static inline size_t strata_round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* Room for `need` elements of `size` bytes in the array p of *cap elements
 * (strata_malloc'd, or NULL with *cap 0): p itself when need <= *cap, else
 * p grown by doubling (from 16) to at least need, but never past limit
 * elements. Returns the array to use, or NULL with p and *cap unchanged
 * when out of memory or need > limit. */
STRATA_EXPORT void *strata_grow(void *p, size_t need, size_t *cap, size_t limit, size_t size);

/* Fields of a line of text [s, e) (no NUL needed, so readers parse in
 * place in their buffers); blanks are spaces and tabs.
 * strata_field_next: the next blank-separated field as [*fp, *fe), moving
 * *s past it; 0 when only blanks are left.
 * strata_field_trim: [*p, *e) without its leading and trailing blanks.
 * strata_field_blank: whether [s, e) holds only blanks (or nothing). */
STRATA_EXPORT int strata_field_next(const char **s, const char *e, const char **fp, const char **fe);
STRATA_EXPORT void strata_field_trim(const char **p, const char **e);
STRATA_EXPORT int strata_field_blank(const char *s, const char *e);

/* Walker/Vose alias table over n >= 1 outcomes. On entry p[k] is outcome
 * k's weight scaled so that the weights average 1 (sum n); on return a draw
 * is: pick column k uniformly, keep k with probability p[k], else take
 * alias[k]. work needs room for n entries. Deterministic: the same p gives
 * the same table bit for bit. */
STRATA_EXPORT void strata_alias_build(double *p, uint32_t n, uint32_t *alias, uint32_t *work);

/* Median of n doubles (copied, input untouched); NaN when n == 0 or out
 * of memory. */
STRATA_EXPORT double strata_median(const double *v, int n);

#endif
