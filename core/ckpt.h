/*
 * Checkpoint files (internal to libstrata): the directory layout, the parts
 * each rank writes, and how a checkpoint becomes visible. What goes into a
 * part and into the manifest is the engine's business (worker/ckpt.c,
 * scheduler/ckpt.c); this module only makes the files safe.
 *
 * Layout: DIR/pass-NNNNNN/ holds the checkpoint taken after NNNNNN passes:
 * coordinator.bin, worker-W.bin (one per worker that has state to keep)
 * and manifest.json, which names every part with its size and checksum. A
 * checkpoint is complete exactly when its manifest is there: every part is
 * written under a temporary name, fsync'ed and renamed first, and the
 * manifest is renamed into place last (then the directory is fsync'ed). A
 * checkpoint is removed manifest first, so one half removed is incomplete,
 * never damaged.
 *
 * A part: the header ("STRATACK", version, passes, who), then entries, each
 * a 24-byte head (kind, id, aux, length) and the bytes padded to 8, ending
 * with an entry of kind END. Integers are little-endian, as the machines
 * strata runs on (the manifest records the byte order).
 */
#ifndef STRATA_CORE_CKPT_H
#define STRATA_CORE_CKPT_H

#include <stdint.h>
#include <stdio.h>

#include "strata/core.h"

#define STRATA__CKPT_MANIFEST "manifest.json"
#define STRATA__CKPT_VERSION 1u
#define STRATA__CKPT_SEED 0x73747261746163ull /* the checksums' seed */

enum {
  STRATA__CK_END = 0,
  STRATA__CK_RESIDENT = 1,   /* id: resident block */
  STRATA__CK_ROTATING = 2,   /* id: rotating block */
  STRATA__CK_GLOBAL = 3,     /* this worker's copy of the global block */
  STRATA__CK_TABLE_ROWS = 4, /* a shard's rows of the table: aux = floats per row; rows
                                me, me + P, ... of the table's row numbering */
  STRATA__CK_COORD = 5       /* the coordinator's state; id names the item */
};

typedef struct strata__ckpt_entry {
  uint32_t kind;
  int32_t id;
  uint64_t aux;
  uint64_t len;
} strata__ckpt_entry;

typedef struct strata__part_writer {
  FILE *f;
  char path[4096], tmp[4096];
  strata_hash h;
  uint64_t bytes;
  uint64_t open_len; /* bytes still due of the entry being written piecewise */
} strata__part_writer;

/* "DIR/pass-NNNNNN" (file NULL) or "DIR/pass-NNNNNN/FILE" into out;
 * STRATA_EINVAL when it does not fit. */
int strata__ckpt_path(char *out, size_t n, const char *dir, int passes, const char *file);

/* Starts writing part `path` (a temporary name beside it until commit) for
 * the checkpoint after `passes` passes, written by `who` (-1: the
 * coordinator, else the worker). Creates the pass directory if need be. */
int strata__part_begin(strata__part_writer *pw, const char *dir, int passes, const char *file,
                       int32_t who);
/* One entry of len bytes. */
int strata__part_add(strata__part_writer *pw, uint32_t kind, int32_t id, uint64_t aux,
                     const void *buf, uint64_t len);
/* An entry written in pieces: the head now, then strata__part_write until
 * len bytes have gone. */
int strata__part_open_entry(strata__part_writer *pw, uint32_t kind, int32_t id, uint64_t aux,
                            uint64_t len);
int strata__part_write(strata__part_writer *pw, const void *buf, uint64_t len);
/* Ends the part: END entry, flush, fsync, rename into place, fsync of the
 * directory. *sum and *bytes are what the manifest records. On failure
 * the temporary file is removed. */
int strata__part_commit(strata__part_writer *pw, uint64_t *sum, uint64_t *bytes);
/* Gives up a part being written (removes its temporary file); safe after
 * commit and on a zeroed writer. */
void strata__part_abandon(strata__part_writer *pw);

/*
 * Reads part `path`: first checks that it is `bytes` long with checksum
 * `sum` and was written for `passes` by `who`, then hands each entry to
 * dest, which returns 0 with *buf, where the entry's bytes go (len of
 * them), or a code with a message for an entry it did not expect.
 * Messages name the file: missing, damaged (size or checksum), truncated.
 */
typedef int (*strata__part_dest)(void *ud, const strata__ckpt_entry *e, void **buf);
int strata__part_read(const char *path, int passes, int32_t who, uint64_t sum, uint64_t bytes,
                      strata__part_dest dest, void *ud);

/* The last complete checkpoint in dir: *passes, or -1 when there is none
 * (dir missing, empty, or holding only incomplete ones). Errors only when
 * dir cannot be read. */
int strata__ckpt_last(const char *dir, int *passes);
/* Makes dir ready for a run's checkpoints: creates it if missing; refuses
 * (STRATA_EUSAGE) when it holds a complete checkpoint and the run is not
 * resuming from dir itself (resuming_here); removes incomplete checkpoint
 * directories (left by a run that died while writing). */
int strata__ckpt_prepare(const char *dir, int resuming_here);
/* Writes the manifest of the checkpoint after `passes` passes through fill
 * (temporary name, fsync, rename, directory fsync): the checkpoint is
 * complete once this returns 0. */
int strata__ckpt_publish(const char *dir, int passes, strata_fill_fn fill, void *ud);
/* Removes every checkpoint in dir older than the one after `keep` passes,
 * complete or not (newer ones may be being written). */
int strata__ckpt_prune(const char *dir, int keep);
/* Whether two paths name the same directory (both exist). */
int strata__same_dir(const char *a, const char *b);

#endif
