/*
 * The files of an exported model directory (internal to the apps): raw
 * float32 blobs, one id per line, and a meta.json read back by key. Every
 * file is written atomically; readers name the file in each message.
 */
#ifndef STRATA_APPS_COMMON_MODEL_FILES_H
#define STRATA_APPS_COMMON_MODEL_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Creates DIR if missing. STRATA_EIO naming it. */
int strata__model_dir(const char *dir);
/* Writes n bytes at p as DIR/NAME, atomically. */
int strata__model_write_blob(const char *dir, const char *name, const void *p, size_t n);
/* Writes n ids as DIR/NAME, one per line, atomically. */
int strata__model_write_ids(const char *dir, const char *name, const int64_t *v, uint32_t n);
/* "DIR/NAME" into path; STRATA_EINVAL when it does not fit. */
int strata__model_path(char *path, size_t cap, const char *dir, const char *name);
/* Reads DIR/NAME, which must hold exactly n bytes: STRATA_ENOENT,
 * STRATA_EPARSE ("expected N bytes"). */
int strata__model_read_blob(const char *dir, const char *name, void *dst, size_t n);
/* Reads exactly n ids, one per line (blank lines and blanks around an id
 * are fine): STRATA_ENOENT, STRATA_EPARSE naming the line. */
int strata__model_read_ids(const char *dir, const char *name, int64_t *dst, uint32_t n);
/* Reads DIR/meta.json (at most cap - 1 bytes) into text, NUL-terminated. */
int strata__model_read_meta(const char *dir, char *text, size_t cap);
/* The number (true 1, false 0, null NaN) after "KEY": in meta.json's text;
 * -1 when the key is missing or holds no number. */
int strata__meta_number(const char *text, const char *key, double *out);
/* Whether x is an integer in [lo, hi] (false for NaN). */
int strata__whole_in(double x, double lo, double hi);

#endif
