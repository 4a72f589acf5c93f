#define _GNU_SOURCE
#include "strata/core.h"
#include "core/output.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Each block carries a 64-byte header holding its size and the offset back to
 * the start of the underlying allocation, so aligned and plain blocks share
 * one strata_free and the live count stays exact. */
#define HDR 64

typedef struct {
  size_t size;
  size_t offset;
} alloc_hdr;

static atomic_size_t live_bytes;
static atomic_long fail_countdown;

static int should_fail(void) {
  long n = atomic_load(&fail_countdown);
  if (n <= 0) return 0;
  if (atomic_fetch_sub(&fail_countdown, 1) == 1) return 1;
  return 0;
}

static void *wrap(void *raw, size_t offset, size_t n) {
  char *p = (char *)raw + offset;
  alloc_hdr *h = (alloc_hdr *)(p - HDR);
  h->size = n;
  h->offset = offset;
  atomic_fetch_add(&live_bytes, n);
  return p;
}

void *strata_malloc(size_t n) {
  if (should_fail() || n > SIZE_MAX - 2 * HDR) return NULL;
  void *raw = malloc(n + HDR);
  return raw ? wrap(raw, HDR, n) : NULL;
}

void *strata_calloc(size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  void *p = strata_malloc(count * size);
  if (p) memset(p, 0, count * size);
  return p;
}

void *strata_alloc_aligned(size_t n) {
  if (should_fail() || n > SIZE_MAX - 2 * HDR) return NULL;
  void *raw = NULL;
  if (posix_memalign(&raw, 64, n + HDR) != 0) return NULL;
  return wrap(raw, HDR, n);
}

void strata_free(void *p) {
  if (!p) return;
  alloc_hdr *h = (alloc_hdr *)((char *)p - HDR);
  atomic_fetch_sub(&live_bytes, h->size);
  free((char *)p - h->offset);
}

void *strata_realloc(void *p, size_t n) {
  if (!p) return strata_malloc(n);
  alloc_hdr *h = (alloc_hdr *)((char *)p - HDR);
  size_t old = h->size;
  void *q = strata_malloc(n);
  if (!q) return NULL;
  memcpy(q, p, old < n ? old : n);
  strata_free(p);
  return q;
}

size_t strata_alloc_live(void) { return atomic_load(&live_bytes); }

void strata_alloc_fail_after(long n) { atomic_store(&fail_countdown, n); }

double strata_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double strata_cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

uint64_t strata_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void strata_rng_seed(strata_rng *rng, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) {
    x = strata_mix64(x);
    rng->s[i] = x;
  }
}

uint64_t strata_rng_below(strata_rng *rng, uint64_t n) {
  /* Rejection keeps the result unbiased for any n. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = strata_rng_next(rng);
  } while (x >= limit);
  return x % n;
}

double strata_rng_normal(strata_rng *rng) {
  double u1 = strata_rng_uniform(rng);
  double u2 = strata_rng_uniform(rng);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static strata_log_fn log_fn;
static void *log_ud;
static strata_log_level log_max = STRATA_LOG_INFO;

void strata_log_set(strata_log_fn fn, void *ud, strata_log_level max_level) {
  log_fn = fn;
  log_ud = ud;
  log_max = max_level;
}

void strata_log(strata_log_level level, const char *fmt, ...) {
  if (!log_fn || level > log_max) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  log_fn(log_ud, level, buf);
}

int strata_write_atomic_in(const char *dir, const char *name, strata_fill_fn fill, void *ud) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    return strata_err_set(STRATA_EINVAL, "%s: path too long", dir);
  return strata_write_atomic(path, fill, ud);
}

/* Written in place: renaming a temporary file over such a path would
 * replace the node itself (as root, even /dev/null) instead of writing to
 * it. */
int strata__path_is_special(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

/* Fills f (opened for name) and closes it: 0, or the first failure. */
static int fill_and_close(FILE *f, const char *name, strata_fill_fn fill, void *ud) {
  int rc = fill(f, ud);
  if (rc == 0 && ferror(f)) rc = strata_err_set(STRATA_EIO, "%s: write failed", name);
  if (fclose(f) != 0 && rc == 0)
    rc = strata_err_set(STRATA_EIO, "%s: write failed: %s", name, strerror(errno));
  return rc;
}

int strata_write_atomic(const char *path, strata_fill_fn fill, void *ud) {
  if (strata__path_is_special(path)) {
    FILE *f = fopen(path, "w");
    if (!f) return strata_err_set(STRATA_EIO, "%s: cannot write: %s", path, strerror(errno));
    return fill_and_close(f, path, fill, ud);
  }
  char tmp[4096];
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof tmp)
    return strata_err_set(STRATA_EINVAL, "%s: path too long", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return strata_err_set(STRATA_EIO, "%s: cannot write: %s", path, strerror(errno));
  int rc = fill_and_close(f, path, fill, ud);
  if (rc == 0 && rename(tmp, path) != 0)
    rc = strata_err_set(STRATA_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
  if (rc != 0) unlink(tmp);
  return rc;
}

int strata_check_writable(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return strata_err_set(STRATA_EIO, "%s: is a directory", path);
  /* Written in place, and not opened here: opening and closing a FIFO
   * would end its reader's input before the run writes. */
  if (strata__path_is_special(path)) {
    if (access(path, W_OK) != 0)
      return strata_err_set(STRATA_EIO, "%s: cannot write there: %s", path, strerror(errno));
    return 0;
  }
  /* access() says yes to root everywhere, so probe by creating a file where
   * the real one will go (and remove it at once). */
  char probe[4096];
  if (snprintf(probe, sizeof probe, "%s.probe.%ld", path, (long)getpid()) >= (int)sizeof probe)
    return strata_err_set(STRATA_EINVAL, "%s: path too long", path);
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return strata_err_set(STRATA_EIO, "%s: cannot write there: %s", path, strerror(errno));
  close(fd);
  unlink(probe);
  return 0;
}

/* Bytes that may appear as they are inside '...' in a message. */
static int quote_plain(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '\\' && c != '\''; }

const char *strata_quote(char *dst, size_t dstsz, const char *src, size_t len) {
  static const char hex[] = "0123456789abcdef";
  if (dstsz == 0) return dst;
  size_t show = len < STRATA_QUOTE_MAX ? len : STRATA_QUOTE_MAX;
  size_t need = len > show ? 3 : 0;
  for (size_t i = 0; i < show; i++) need += quote_plain((unsigned char)src[i]) ? 1 : 4;
  /* When the whole does not fit, the bytes shown give way to the "...". */
  int cut = len > show || need >= dstsz;
  size_t budget = need < dstsz ? need : dstsz - 1;
  size_t room = !cut ? budget : budget >= 3 ? budget - 3 : 0;
  size_t o = 0;
  for (size_t i = 0; i < show; i++) {
    unsigned char c = (unsigned char)src[i];
    if (quote_plain(c)) {
      if (o + 1 > room) break;
      dst[o++] = (char)c;
    } else {
      if (o + 4 > room) break;
      dst[o++] = '\\';
      dst[o++] = 'x';
      dst[o++] = hex[c >> 4];
      dst[o++] = hex[c & 15];
    }
  }
  for (int d = 0; cut && d < 3 && o < budget; d++) dst[o++] = '.';
  dst[o] = '\0';
  return dst;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double strata_median(const double *v, int n) {
  if (n <= 0) return 0.0 / 0.0;
  double *c = strata_malloc((size_t)n * sizeof *c);
  if (!c) return 0.0 / 0.0;
  memcpy(c, v, (size_t)n * sizeof *c);
  qsort(c, (size_t)n, sizeof *c, cmp_double);
  double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
  strata_free(c);
  return m;
}

void strata_alias_build(double *p, uint32_t n, uint32_t *alias, uint32_t *work) {
  /* Columns below the mean mass fill the work list from the front, the rest
   * from the back. */
  size_t n_small = 0, n_large = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (p[k] < 1.0)
      work[n_small++] = k;
    else
      work[n - 1 - n_large++] = k;
  }
  while (n_small && n_large) {
    uint32_t s = work[--n_small];
    uint32_t l = work[n - n_large];
    alias[s] = l;
    p[l] -= 1.0 - p[s];
    if (p[l] < 1.0) {
      n_large--;
      work[n_small++] = l;
    }
  }
  /* Leftovers are 1 up to rounding. */
  while (n_large) {
    uint32_t l = work[n - n_large--];
    p[l] = 1.0;
    alias[l] = l;
  }
  while (n_small) {
    uint32_t s = work[--n_small];
    p[s] = 1.0;
    alias[s] = s;
  }
}

static inline int is_blank(char c) { return c == ' ' || c == '\t'; }

int strata_field_next(const char **s, const char *e, const char **fp, const char **fe) {
  const char *p = *s;
  while (p < e && is_blank(*p)) p++;
  if (p == e) return 0;
  *fp = p;
  while (p < e && !is_blank(*p)) p++;
  *fe = p;
  *s = p;
  return 1;
}

void strata_field_trim(const char **p, const char **e) {
  while (*p < *e && is_blank(**p)) (*p)++;
  while (*e > *p && is_blank((*e)[-1])) (*e)--;
}

int strata_field_blank(const char *s, const char *e) {
  for (; s < e; s++)
    if (!is_blank(*s)) return 0;
  return 1;
}

void *strata_grow(void *p, size_t need, size_t *cap, size_t limit, size_t size) {
  if (need <= *cap) return p;
  size_t c = *cap ? *cap : 16;
  while (c < need) c = c > SIZE_MAX / 2 ? SIZE_MAX : c * 2;
  if (c > limit) c = limit;
  if (c < need || (size && c > SIZE_MAX / size)) return NULL;
  void *q = strata_realloc(p, c * size);
  if (q) *cap = c;
  return q;
}

/* ---- checksums --------------------------------------------------------
 * Lanes of multiply-rotate rounds, the structure of the xxHash family
 * (strata's own code and constants: odd 64-bit constants from the golden
 * ratio and square roots of primes). */
#define H_K1 0x9e3779b97f4a7c15ull
#define H_K2 0xc2b2ae3d27d4eb4full
#define H_K3 0x165667b19e3779f9ull

static inline uint64_t h_rotl(uint64_t x, int r) { return x << r | x >> (64 - r); }

static inline uint64_t h_load(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline uint64_t h_round(uint64_t acc, uint64_t w) {
  return h_rotl(acc + w * H_K2, 31) * H_K1;
}

static inline uint64_t h_mix(uint64_t x) {
  x ^= x >> 33;
  x *= H_K2;
  x ^= x >> 29;
  x *= H_K3;
  x ^= x >> 32;
  return x;
}

void strata_hash_init(strata_hash *h, uint64_t seed) {
  h->v[0] = seed + H_K1 + H_K2;
  h->v[1] = seed + H_K2;
  h->v[2] = seed;
  h->v[3] = seed - H_K1;
  h->total = 0;
  h->n = 0;
}

static void h_stripe(uint64_t v[4], const unsigned char *p) {
  v[0] = h_round(v[0], h_load(p));
  v[1] = h_round(v[1], h_load(p + 8));
  v[2] = h_round(v[2], h_load(p + 16));
  v[3] = h_round(v[3], h_load(p + 24));
}

void strata_hash_update(strata_hash *h, const void *data, size_t len) {
  /* (NULL, 0) is a valid empty update, but memcpy may not be given NULL. */
  if (len == 0) return;
  const unsigned char *p = data;
  h->total += len;
  if (h->n) {
    size_t take = 32 - h->n < len ? 32 - h->n : len;
    memcpy(h->buf + h->n, p, take);
    h->n += (uint32_t)take;
    p += take;
    len -= take;
    if (h->n < 32) return;
    h_stripe(h->v, h->buf);
    h->n = 0;
  }
  /* Local lanes stay in registers over the long run of stripes. */
  uint64_t v[4] = {h->v[0], h->v[1], h->v[2], h->v[3]};
  for (; len >= 32; p += 32, len -= 32) h_stripe(v, p);
  memcpy(h->v, v, sizeof v);
  memcpy(h->buf, p, len);
  h->n = (uint32_t)len;
}

uint64_t strata_hash_final(const strata_hash *h) {
  uint64_t acc = h_rotl(h->v[0], 1) + h_rotl(h->v[1], 7) + h_rotl(h->v[2], 12) +
                 h_rotl(h->v[3], 18);
  for (int i = 0; i < 4; i++) acc = (acc ^ h_round(0, h->v[i])) * H_K1 + H_K3;
  acc += h->total;
  const unsigned char *p = h->buf;
  uint32_t n = h->n;
  for (; n >= 8; p += 8, n -= 8) acc = h_rotl(acc ^ h_round(0, h_load(p)), 27) * H_K1 + H_K3;
  for (; n > 0; p++, n--) acc = h_rotl(acc ^ (*p * H_K3), 11) * H_K1;
  return h_mix(acc);
}

uint64_t strata_hash64(const void *p, size_t len, uint64_t seed) {
  strata_hash h;
  strata_hash_init(&h, seed);
  strata_hash_update(&h, p, len);
  return strata_hash_final(&h);
}

/* ---- memory available ------------------------------------------------ */

static int read_u64_file(const char *path, uint64_t *out) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  unsigned long long v;
  int ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  if (!ok) return -1; /* cgroup v2's "max" is no limit */
  *out = v;
  return 0;
}

/* The memory cgroup's room (limit - usage), or UINT64_MAX when none. */
static uint64_t cgroup_room(void) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return UINT64_MAX;
  char line[4096], v1[4096] = "", v2[4096] = "";
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
    if (!b) continue;
    *b = '\0';
    if (strcmp(a + 1, "memory") == 0) snprintf(v1, sizeof v1, "%s", b + 1);
    if (strncmp(line, "0", 1) == 0 && a == line + 1 && a[1] == '\0') snprintf(v2, sizeof v2, "%s", b + 1);
  }
  fclose(f);
  char path[4200];
  uint64_t limit, used;
  if (v1[0]) {
    snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1);
    if (read_u64_file(path, &limit) == 0) {
      snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", v1);
      if (read_u64_file(path, &used) == 0 && limit < (1ull << 60)) return limit > used ? limit - used : 0;
    }
  }
  if (v2[0]) {
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", v2);
    if (read_u64_file(path, &limit) == 0) {
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", v2);
      if (read_u64_file(path, &used) == 0) return limit > used ? limit - used : 0;
    }
  }
  return UINT64_MAX;
}

static _Atomic uint64_t mem_limit;

void strata_mem_set_limit(uint64_t bytes) { atomic_store(&mem_limit, bytes); }

uint64_t strata_mem_limit(void) { return atomic_load(&mem_limit); }

/* What bounds the memory available (strata_mem_budget.bound). */
enum { BOUND_NONE, BOUND_HOST, BOUND_LIMIT, BOUND_RLIMIT_AS, BOUND_RLIMIT_DATA };

/* The host's memory: MemAvailable, or the cgroup's room when lower; 0 when
 * /proc/meminfo cannot tell. */
static uint64_t host_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
  fclose(f);
  if (!found) return 0;
  uint64_t avail = (uint64_t)kb * 1024, room = cgroup_room();
  return room < avail ? room : avail;
}

/* What a resource limit leaves: the soft limit less what it already
 * counts (/proc/self/statm: the whole address space for RLIMIT_AS, data
 * and stack for RLIMIT_DATA, the kernel's VmData being close to the
 * latter); UINT64_MAX for no limit. With statm unreadable, the limit
 * itself. */
static uint64_t rlimit_room(int *bound) {
  uint64_t room = UINT64_MAX;
  unsigned long long pages[2] = {0, 0}; /* size, data */
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%llu %*u %*u %*u %*u %llu", &pages[0], &pages[1]) != 2) pages[0] = pages[1] = 0;
    fclose(f);
  }
  long page = sysconf(_SC_PAGESIZE);
  const int res[2] = {RLIMIT_AS, RLIMIT_DATA}, why[2] = {BOUND_RLIMIT_AS, BOUND_RLIMIT_DATA};
  for (int k = 0; k < 2; k++) {
    struct rlimit rl;
    if (getrlimit(res[k], &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) continue;
    uint64_t used = (uint64_t)pages[k] * (uint64_t)(page > 0 ? page : 4096);
    uint64_t left = (uint64_t)rl.rlim_cur > used ? (uint64_t)rl.rlim_cur - used : 0;
    if (left < room) {
      room = left;
      *bound = why[k];
    }
  }
  return room;
}

/* The memory available and what bounds it (BOUND_NONE: unknown). */
static uint64_t available(int *bound) {
  uint64_t limit = strata_mem_limit(), avail = limit ? limit : host_available();
  *bound = avail ? (limit ? BOUND_LIMIT : BOUND_HOST) : BOUND_NONE;
  int rbound = BOUND_NONE;
  uint64_t room = rlimit_room(&rbound);
  if (room != UINT64_MAX && (!avail || room < avail)) {
    avail = room;
    *bound = rbound;
  }
  /* A limit already used up still refuses: 1 byte, not 0 (unknown). */
  if (*bound != BOUND_NONE && avail == 0) avail = 1;
  return avail;
}

int strata_mem_available(uint64_t *bytes) {
  int bound;
  *bytes = available(&bound);
  return 0;
}

void strata_mem_budget_init(strata_mem_budget *b) {
  b->avail = available(&b->bound);
}

static void human_bytes(char *out, size_t n, double bytes) {
  if (bytes >= 1e9)
    snprintf(out, n, "%.1f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    snprintf(out, n, "%.1f MB", bytes / 1e6);
  else
    snprintf(out, n, "%.0f KB", bytes / 1e3);
}

int strata_mem_check(const strata_mem_budget *b, double bytes, const char *hint, const char *fmt,
                     ...) {
  if (!b->avail || bytes <= (double)b->avail) return 0;
  char subject[512], need[32], have[32];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(subject, sizeof subject, fmt, ap);
  va_end(ap);
  human_bytes(need, sizeof need, bytes);
  human_bytes(have, sizeof have, (double)b->avail);
  const char *sep = hint ? ": " : "", *h = hint ? hint : "";
  switch (b->bound) {
    case BOUND_RLIMIT_AS:
    case BOUND_RLIMIT_DATA:
      return strata_err_set(STRATA_ENOMEM, "%s about %s, but this process may take %s more (ulimit -%c)%s%s",
                            subject, need, have, b->bound == BOUND_RLIMIT_AS ? 'v' : 'd', sep, h);
    default:
      return strata_err_set(STRATA_ENOMEM, "%s about %s, but this host has %s available%s%s%s", subject,
                            need, have, b->bound == BOUND_LIMIT ? " (--mem-limit)" : "", sep, h);
  }
}
