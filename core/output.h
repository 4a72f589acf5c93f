/*
 * Output paths (internal to libstrata): what strata_write_atomic decides,
 * for the outputs that are streamed during a run instead of written at once
 * (the round trace).
 */
#ifndef STRATA_CORE_OUTPUT_H
#define STRATA_CORE_OUTPUT_H

/* 1 when path exists and is neither a regular file nor a directory
 * (/dev/null, /dev/stdout, a FIFO): it is written in place, never replaced
 * by renaming a temporary file over it. 0 otherwise. */
int strata__path_is_special(const char *path);

#endif
