/*
 * strata/apps/lines.h - the line reader every data reader of the apps
 * shares (apps/common/lines.c): ratings, corpora, vocabularies, LIBSVM, the
 * MF model, and the readers of strata-pagerank and strata-lasso.
 *
 * Files are read through zlib, which passes plain files through unchanged,
 * so every reader takes gzip-compressed input too, whatever the file's name
 * says; a gzip stream cut short, or missing its 8-byte trailer (CRC and
 * length), is an error naming the file and line, never a shorter file.
 * Lines may be of any length; CR LF endings lose the CR.
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
  void *gz;             /* gzFile */
  const char *path;     /* as given to open; borrowed, must outlive the reader */
  char *buf;
  size_t cap, beg, end; /* unread bytes are buf[beg, end) */
  int eof;
  size_t lineno;        /* of the line last returned, from 1; 0 before the first */
  strata_mem_budget budget; /* the memory available at open (strata_lines_fits) */
} strata_lines;

/* Opens path for reading and measures the memory budget. 0, or
 * STRATA_ENOENT "PATH: cannot open: ..." (a directory too), STRATA_ENOMEM.
 * On failure nothing is left to close (close is still safe). */
STRATA_EXPORT int strata_lines_open(strata_lines *rd, const char *path);

/* Releases the reader; safe on one that failed to open or is closed. */
STRATA_EXPORT void strata_lines_close(strata_lines *rd);

/* Back to the first line (lineno 0). 0 or STRATA_EIO. */
STRATA_EXPORT int strata_lines_rewind(strata_lines *rd);

/* 1 with the next line in *line, *len (without its end of line; valid
 * until the next call), 0 at the end of the file, or a negative error
 * naming PATH:LINE: STRATA_EIO (read error), STRATA_EPARSE (corrupt or
 * truncated gzip data, a missing trailer included), STRATA_ENOMEM. */
STRATA_EXPORT int strata_lines_next(strata_lines *rd, const char **line, size_t *len);

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
