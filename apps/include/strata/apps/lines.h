/*
 * strata/apps/lines.h - the line reader every data reader of the apps
 * shares (apps/common/lines.c): ratings, corpora, vocabularies, LIBSVM, the
 * MF model, and the readers of strata-pagerank and strata-lasso.
 *
 * A file that starts with gzip's magic bytes is read through zlib, any
 * other as it is, so every reader takes gzip-compressed input too, whatever
 * the file's name says; a gzip stream cut short, or missing its 8-byte
 * trailer (CRC and length), is an error naming the file and line, never a
 * shorter file. Lines may be of any length; CR LF endings lose the CR.
 *
 * Two ways to read: a line at a time (strata_lines_next), or a block of
 * whole lines at a time (strata_lines_block), for readers that scan many
 * short lines with a scanner of their own. A plain file can also be read
 * by byte ranges (strata_lines_open_range): each range reader returns the
 * lines that start inside its range, so ranges that tile the file return
 * every line once, in order, and threads may read them side by side.
 *
 * With the reader comes the check a reader makes before it allocates for
 * what a line declares or implies (a vocabulary size, an id, a count): its
 * estimate of the memory it and its caller will need against what was
 * available when the file was opened (strata_lines_fits), so a file that
 * asks for more memory than there is fails at that line, at once, with a
 * message naming the file and line, the estimate and what is available.
 *
 * One reader is used by one thread at a time.
 */
#ifndef STRATA_APPS_LINES_H
#define STRATA_APPS_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "strata/core.h"

typedef struct strata_lines {
  void *gz;             /* gzFile for a gzip file; NULL for a plain one */
  const char *path;     /* as given to open; borrowed, must outlive the reader */
  char *buf;            /* cap + 1 bytes: room for the '\n' a block may add */
  size_t cap, beg, end; /* unread bytes are buf[beg, end) */
  int eof;
  size_t lineno;        /* of the line last returned, from 1; 0 before the first */
  strata_mem_budget budget; /* the memory available at open (strata_lines_fits) */
  /* Plain files are read with pread, without zlib. */
  int fd;               /* the file's descriptor while open; -1 closed */
  uint64_t size;        /* a plain file's size in bytes at open; 0 for gzip */
  uint64_t off0;        /* a plain file's offset of buf[0] */
  uint64_t start, stop; /* the range read: lines starting in [start, stop) */
  int skip;             /* the partial line before start is not yet skipped */
  size_t blk_next;      /* lineno once the block last returned is read */
  int in_blk;           /* a block is out: the next call sets lineno to blk_next */
} strata_lines;

/* Opens path for reading and measures the memory budget. 0, or
 * STRATA_ENOENT "PATH: cannot open: ..." (a directory too), STRATA_ENOMEM.
 * On failure nothing is left to close (close is still safe). rd->gz says
 * whether the file is gzip; rd->size is a plain file's size. */
STRATA_EXPORT int strata_lines_open(strata_lines *rd, const char *path);

/* Opens path, a plain file, to read the lines that start at a byte offset
 * in [start, stop) (stop may pass the end): the first line is the one
 * starting at start if a line does (start is 0, or byte start - 1 is
 * '\n'), else the next; the last is the one holding byte stop - 1, read to
 * its end. Line numbers (lineno) count from the range's first line. Errors
 * as strata_lines_open, and STRATA_EINVAL "PATH: a gzip file cannot be read
 * by ranges" when it is one and the range is not the whole file. */
STRATA_EXPORT int strata_lines_open_range(strata_lines *rd, const char *path, uint64_t start,
                                          uint64_t stop);

/* A plain file's offset of the first byte not yet returned (after the
 * line or block last returned); for a gzip file 0. */
STRATA_EXPORT uint64_t strata_lines_offset(const strata_lines *rd);

/* Releases the reader; safe on one that failed to open or is closed. */
STRATA_EXPORT void strata_lines_close(strata_lines *rd);

/* Back to the first line (lineno 0). 0 or STRATA_EIO. */
STRATA_EXPORT int strata_lines_rewind(strata_lines *rd);

/* 1 with the next line in *line, *len (without its end of line; valid
 * until the next call), 0 at the end of the file, or a negative error
 * naming PATH:LINE: STRATA_EIO (read error), STRATA_EPARSE (corrupt or
 * truncated gzip data, a missing trailer included), STRATA_ENOMEM. */
STRATA_EXPORT int strata_lines_next(strata_lines *rd, const char **line, size_t *len);

/* 1 with the next block of whole lines in [*blk, *blk + *len), valid until
 * the next call: one or more lines, each ending in '\n' (the reader adds one
 * to a last line without it), CRs kept; 0 at the end of the file; or an
 * error as strata_lines_next. On return rd->lineno is the number of the
 * line before the block; the caller may set it to each line's number as it
 * scans (for strata_lines_fits and strata_lines_scan_i64), and the next call
 * (block or next) goes on after the block's last line whatever it holds.
 * Blocks and single lines may be mixed. */
STRATA_EXPORT int strata_lines_block(strata_lines *rd, const char **blk, size_t *len);

/* The whole of [p, e), a field of the line rd last returned, as one
 * decimal integer (an optional sign, then digits): 0, or STRATA_EPARSE with
 * the message "PATH:LINE: WHAT 'FIELD' is not an integer" (or, beyond
 * int64_t, the limit it passes), the field quoted (strata_quote). */
STRATA_EXPORT int strata_lines_scan_i64(const strata_lines *rd, const char *what, const char *p,
                                        const char *e, int64_t *out);

/*
 * Before allocating for the line rd last returned: 0 when `bytes`, the
 * reader's and its caller's whole estimate for the data so far, fit in the
 * memory available at open (rd->budget), else STRATA_ENOMEM with the
 * message "PATH:LINE: SUBJECT about X GB, but this host has Y GB
 * available: HINT" (strata_mem_check; SUBJECT from fmt ends with its
 * verb, hint may be NULL). A comparison when it fits: cheap per line.
 */
STRATA_EXPORT int strata_lines_fits(const strata_lines *rd, double bytes, const char *hint,
                                    const char *fmt, ...) STRATA_PRINTF(4, 5);

#endif
