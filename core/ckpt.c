/*
 * Checkpoint files (core/ckpt.h): parts written under temporary names and
 * renamed into place once on disk, manifests published last, checkpoints
 * found, prepared and pruned by their directory names.
 */
#include "core/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PART_MAGIC "STRATACK"
#define PASS_PREFIX "pass-"

typedef struct part_header {
  char magic[8];
  uint32_t version;
  int32_t passes;
  int32_t who;
  uint32_t pad;
} part_header;

int strata__ckpt_path(char *out, size_t n, const char *dir, int passes, const char *file) {
  int k = file ? snprintf(out, n, "%s/" PASS_PREFIX "%06d/%s", dir, passes, file)
               : snprintf(out, n, "%s/" PASS_PREFIX "%06d", dir, passes);
  if (k < 0 || (size_t)k >= n) return strata_err_set(STRATA_EINVAL, "%s: path too long", dir);
  return 0;
}

/* fsync of a directory, so that a rename in it is on disk. */
static int sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return strata_err_set(STRATA_EIO, "%s: cannot open: %s", dir, strerror(errno));
  int rc = 0;
  if (fsync(fd) != 0 && errno != EINVAL)
    rc = strata_err_set(STRATA_EIO, "%s: fsync failed: %s", dir, strerror(errno));
  close(fd);
  return rc;
}

static int make_dir(const char *dir) {
  if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    return strata_err_set(STRATA_EIO, "%s: exists and is not a directory", dir);
  }
  return strata_err_set(STRATA_EIO, "%s: cannot create: %s", dir, strerror(errno));
}

static int put(strata__part_writer *pw, const void *buf, uint64_t len) {
  if (len && fwrite(buf, 1, len, pw->f) != len)
    return strata_err_set(STRATA_EIO, "%s: write failed: %s", pw->path, strerror(errno));
  strata_hash_update(&pw->h, buf, len);
  pw->bytes += len;
  return 0;
}

int strata__part_begin(strata__part_writer *pw, const char *dir, int passes, const char *file,
                       int32_t who) {
  memset(pw, 0, sizeof *pw);
  char pdir[4096];
  int rc = strata__ckpt_path(pdir, sizeof pdir, dir, passes, NULL);
  if (!rc) rc = strata__ckpt_path(pw->path, sizeof pw->path, dir, passes, file);
  if (rc) return rc;
  if ((rc = make_dir(pdir))) return rc;
  int n = snprintf(pw->tmp, sizeof pw->tmp, "%s.tmp.%ld", pw->path, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof pw->tmp)
    return strata_err_set(STRATA_EINVAL, "%s: path too long", pw->path);
  pw->f = fopen(pw->tmp, "wb");
  if (!pw->f) return strata_err_set(STRATA_EIO, "%s: cannot write: %s", pw->path, strerror(errno));
  strata_hash_init(&pw->h, STRATA__CKPT_SEED);
  part_header h = {PART_MAGIC, STRATA__CKPT_VERSION, passes, who, 0};
  rc = put(pw, &h, sizeof h);
  if (rc) strata__part_abandon(pw);
  return rc;
}

int strata__part_open_entry(strata__part_writer *pw, uint32_t kind, int32_t id, uint64_t aux,
                            uint64_t len) {
  if (pw->open_len)
    return strata_err_set(STRATA_EINVAL, "%s: an entry is still being written", pw->path);
  strata__ckpt_entry e = {kind, id, aux, len};
  int rc = put(pw, &e, sizeof e);
  if (!rc) pw->open_len = len;
  if (!rc && len == 0) rc = strata__part_write(pw, NULL, 0);
  return rc;
}

int strata__part_write(strata__part_writer *pw, const void *buf, uint64_t len) {
  if (len > pw->open_len)
    return strata_err_set(STRATA_EINVAL, "%s: entry longer than announced", pw->path);
  int rc = put(pw, buf, len);
  if (rc) return rc;
  pw->open_len -= len;
  /* The entry is done: pad to 8 bytes, so entries stay aligned. */
  if (pw->open_len == 0 && pw->bytes % 8) {
    static const char zeros[8];
    rc = put(pw, zeros, 8 - pw->bytes % 8);
  }
  return rc;
}

int strata__part_add(strata__part_writer *pw, uint32_t kind, int32_t id, uint64_t aux,
                     const void *buf, uint64_t len) {
  int rc = strata__part_open_entry(pw, kind, id, aux, len);
  if (!rc && len) rc = strata__part_write(pw, buf, len);
  return rc;
}

int strata__part_commit(strata__part_writer *pw, uint64_t *sum, uint64_t *bytes) {
  int rc = pw->open_len ? strata_err_set(STRATA_EINVAL, "%s: an entry is unfinished", pw->path)
                        : strata__part_add(pw, STRATA__CK_END, 0, 0, NULL, 0);
  if (!rc && fflush(pw->f) != 0)
    rc = strata_err_set(STRATA_EIO, "%s: write failed: %s", pw->path, strerror(errno));
  if (!rc && fsync(fileno(pw->f)) != 0)
    rc = strata_err_set(STRATA_EIO, "%s: fsync failed: %s", pw->path, strerror(errno));
  if (fclose(pw->f) != 0 && !rc)
    rc = strata_err_set(STRATA_EIO, "%s: write failed: %s", pw->path, strerror(errno));
  pw->f = NULL;
  if (!rc && rename(pw->tmp, pw->path) != 0)
    rc = strata_err_set(STRATA_EIO, "%s: cannot rename into place: %s", pw->path, strerror(errno));
  if (rc) {
    unlink(pw->tmp);
    return rc;
  }
  pw->tmp[0] = '\0';
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", pw->path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  *sum = strata_hash_final(&pw->h);
  *bytes = pw->bytes;
  return sync_dir(slash ? dir : ".");
}

void strata__part_abandon(strata__part_writer *pw) {
  if (pw->f) fclose(pw->f);
  pw->f = NULL;
  if (pw->tmp[0]) unlink(pw->tmp);
  pw->tmp[0] = '\0';
}

/* The checksum and size of the file at f, read to its end. */
static int hash_file(FILE *f, const char *path, uint64_t *sum, uint64_t *bytes) {
  static const size_t piece = 1 << 20;
  unsigned char *buf = strata_malloc(piece);
  if (!buf) return strata_err_set(STRATA_ENOMEM, "%s: out of memory", path);
  strata_hash h;
  strata_hash_init(&h, STRATA__CKPT_SEED);
  size_t n;
  while ((n = fread(buf, 1, piece, f)) > 0) strata_hash_update(&h, buf, n);
  int rc = ferror(f) ? strata_err_set(STRATA_EIO, "%s: read failed: %s", path, strerror(errno)) : 0;
  strata_free(buf);
  *sum = strata_hash_final(&h);
  *bytes = h.total;
  return rc;
}

static int get(FILE *f, const char *path, void *buf, uint64_t len) {
  if (len && fread(buf, 1, len, f) != len)
    return strata_err_set(STRATA_EIO, "%s: truncated", path);
  return 0;
}

/* "the coordinator" (who < 0) or "worker W", for messages. */
static const char *writer_name(char *buf, size_t n, int32_t who) {
  if (who < 0) return "the coordinator";
  snprintf(buf, n, "worker %d", (int)who);
  return buf;
}

int strata__part_read(const char *path, int passes, int32_t who, uint64_t sum, uint64_t bytes,
                      strata__part_dest dest, void *ud) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return strata_err_set(errno == ENOENT ? STRATA_ENOENT : STRATA_EIO, "%s: %s", path,
                          errno == ENOENT ? "missing" : strerror(errno));
  uint64_t got_sum = 0, got_bytes = 0;
  int rc = hash_file(f, path, &got_sum, &got_bytes);
  if (!rc && got_bytes != bytes)
    rc = strata_err_set(STRATA_EIO, "%s: damaged: %llu bytes, the manifest says %llu", path,
                        (unsigned long long)got_bytes, (unsigned long long)bytes);
  if (!rc && got_sum != sum)
    rc = strata_err_set(STRATA_EIO,
                        "%s: damaged: checksum %016llx, the manifest says %016llx", path,
                        (unsigned long long)got_sum, (unsigned long long)sum);
  if (!rc && fseek(f, 0, SEEK_SET) != 0)
    rc = strata_err_set(STRATA_EIO, "%s: cannot seek: %s", path, strerror(errno));
  part_header h;
  if (!rc) rc = get(f, path, &h, sizeof h);
  if (!rc && (memcmp(h.magic, PART_MAGIC, 8) != 0 || h.version != STRATA__CKPT_VERSION))
    rc = strata_err_set(STRATA_EPARSE, "%s: not a strata checkpoint part (version %u)", path,
                        STRATA__CKPT_VERSION);
  if (!rc && (h.passes != passes || h.who != who)) {
    char was[32], want[32];
    rc = strata_err_set(STRATA_EPARSE, "%s: written after %d passes by %s, not after %d passes by %s",
                        path, h.passes, writer_name(was, sizeof was, h.who), passes,
                        writer_name(want, sizeof want, who));
  }
  uint64_t off = sizeof h;
  while (!rc) {
    strata__ckpt_entry e;
    if ((rc = get(f, path, &e, sizeof e))) break;
    off += sizeof e;
    if (e.kind == STRATA__CK_END) {
      if (off != bytes) rc = strata_err_set(STRATA_EPARSE, "%s: bytes after its end", path);
      break;
    }
    if (e.len > bytes - off) {
      rc = strata_err_set(STRATA_EPARSE, "%s: an entry runs past the end", path);
      break;
    }
    void *buf = NULL;
    if ((rc = dest(ud, &e, &buf))) break;
    if ((rc = get(f, path, buf, e.len))) break;
    off += e.len;
    uint64_t pad = (8 - off % 8) % 8;
    if (pad && fseek(f, (long)pad, SEEK_CUR) != 0) rc = strata_err_set(STRATA_EIO, "%s: truncated", path);
    off += pad;
  }
  fclose(f);
  return rc;
}

/* The pass count of a checkpoint directory's name, or -1. The names are
 * exactly those strata__ckpt_path gives ("%06d"): six digits, or more
 * without a leading zero once passes reach 1000000 (--passes allows it). */
static int pass_of(const char *name) {
  size_t n = strlen(PASS_PREFIX), len = strlen(name);
  if (strncmp(name, PASS_PREFIX, n) != 0 || len < n + 6 || len > n + 10) return -1;
  if (len > n + 6 && name[n] == '0') return -1;
  long long v = 0;
  for (const char *p = name + n; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
  }
  return v <= INT_MAX ? (int)v : -1;
}

static int is_complete(const char *dir, int passes) {
  char path[4096];
  struct stat st;
  return strata__ckpt_path(path, sizeof path, dir, passes, STRATA__CKPT_MANIFEST) == 0 &&
         stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Calls fn for every checkpoint directory in dir (ENOENT: none). */
static int each_ckpt(const char *dir, int (*fn)(const char *dir, int passes, void *ud), void *ud) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return 0;
    return strata_err_set(STRATA_EIO, "%s: cannot read: %s", dir, strerror(errno));
  }
  int rc = 0;
  struct dirent *de;
  while (!rc && (de = readdir(d))) {
    int k = pass_of(de->d_name);
    if (k >= 0) rc = fn(dir, k, ud);
  }
  closedir(d);
  return rc;
}

static int note_last(const char *dir, int passes, void *ud) {
  int *last = ud;
  if (passes > *last && is_complete(dir, passes)) *last = passes;
  return 0;
}

int strata__ckpt_last(const char *dir, int *passes) {
  *passes = -1;
  return each_ckpt(dir, note_last, passes);
}

/* Removes a checkpoint: its manifest first (it is then incomplete), then
 * every file, then the directory. */
static int remove_ckpt(const char *dir, int passes) {
  char pdir[4096], path[4096 + 256];
  int rc = strata__ckpt_path(pdir, sizeof pdir, dir, passes, NULL);
  if (rc) return rc;
  snprintf(path, sizeof path, "%s/%s", pdir, STRATA__CKPT_MANIFEST);
  if (unlink(path) != 0 && errno != ENOENT)
    return strata_err_set(STRATA_EIO, "%s: cannot remove: %s", path, strerror(errno));
  DIR *d = opendir(pdir);
  if (!d) return errno == ENOENT ? 0 : strata_err_set(STRATA_EIO, "%s: cannot read: %s", pdir, strerror(errno));
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", pdir, de->d_name);
    if (unlink(path) != 0 && errno != ENOENT) rc = strata_err_set(STRATA_EIO, "%s: cannot remove: %s", path, strerror(errno));
  }
  closedir(d);
  if (!rc && rmdir(pdir) != 0 && errno != ENOENT)
    rc = strata_err_set(STRATA_EIO, "%s: cannot remove: %s", pdir, strerror(errno));
  return rc;
}

typedef struct prep {
  int complete; /* the newest complete checkpoint seen, -1 none */
} prep;

static int prepare_one(const char *dir, int passes, void *ud) {
  prep *p = ud;
  if (is_complete(dir, passes)) {
    if (passes > p->complete) p->complete = passes;
    return 0;
  }
  return remove_ckpt(dir, passes);
}

int strata__ckpt_prepare(const char *dir, int resuming_here) {
  int rc = make_dir(dir);
  if (rc) return rc;
  prep p = {-1};
  if ((rc = each_ckpt(dir, prepare_one, &p))) return rc;
  if (p.complete >= 0 && !resuming_here)
    return strata_err_set(STRATA_EUSAGE,
                          "--checkpoint %s holds a checkpoint (after %d passes): resume from it "
                          "with --resume %s, or remove it or choose another directory",
                          dir, p.complete, dir);
  return 0;
}

int strata__ckpt_publish(const char *dir, int passes, strata_fill_fn fill, void *ud) {
  char path[4096], tmp[4096 + 32];
  int rc = strata__ckpt_path(path, sizeof path, dir, passes, STRATA__CKPT_MANIFEST);
  if (rc) return rc;
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) return strata_err_set(STRATA_EIO, "%s: cannot write: %s", path, strerror(errno));
  rc = fill(f, ud);
  if (!rc && (fflush(f) != 0 || ferror(f)))
    rc = strata_err_set(STRATA_EIO, "%s: write failed: %s", path, strerror(errno));
  if (!rc && fsync(fileno(f)) != 0)
    rc = strata_err_set(STRATA_EIO, "%s: fsync failed: %s", path, strerror(errno));
  if (fclose(f) != 0 && !rc) rc = strata_err_set(STRATA_EIO, "%s: write failed: %s", path, strerror(errno));
  if (!rc && rename(tmp, path) != 0)
    rc = strata_err_set(STRATA_EIO, "%s: cannot rename into place: %s", path, strerror(errno));
  if (rc) {
    unlink(tmp);
    return rc;
  }
  char pdir[4096];
  if ((rc = strata__ckpt_path(pdir, sizeof pdir, dir, passes, NULL))) return rc;
  if ((rc = sync_dir(pdir))) return rc;
  return sync_dir(dir);
}

typedef struct prune {
  int keep;
  int rc;
} prune;

static int prune_one(const char *dir, int passes, void *ud) {
  prune *p = ud;
  if (passes < p->keep) {
    int rc = remove_ckpt(dir, passes);
    if (rc && !p->rc) p->rc = rc;
  }
  return 0;
}

int strata__ckpt_prune(const char *dir, int keep) {
  prune p = {keep, 0};
  int rc = each_ckpt(dir, prune_one, &p);
  return rc ? rc : p.rc;
}

int strata__same_dir(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
