/*
 * strata/error.h - error codes and the per-thread error message.
 *
 * Every strata function that can fail returns 0 on success or a negative
 * STRATA_E* code. Alongside the code, the failing function records a one-line
 * message with context (the input file and line, the flag, the rank) that the
 * CLI prints; libraries never print themselves.
 */
#ifndef STRATA_ERROR_H
#define STRATA_ERROR_H

#include <stddef.h>

#if defined(__GNUC__)
#define STRATA_EXPORT __attribute__((visibility("default")))
#define STRATA_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define STRATA_EXPORT
#define STRATA_PRINTF(a, b)
#endif

/* X-macro: name, value, description. The one list that generates the enum,
 * strata_strerror and strata_err_name. */
#define STRATA_ERRNO_MAP(XX)                                         \
  XX(EINVAL, -1, "invalid argument")                                 \
  XX(ENOMEM, -2, "out of memory")                                    \
  XX(EIO, -3, "input/output error")                                  \
  XX(ENOENT, -4, "no such file")                                     \
  XX(EPARSE, -5, "malformed input")                                  \
  XX(ERANGE, -6, "value out of range")                               \
  XX(EUSAGE, -7, "usage error")                                      \
  XX(ECOMM, -8, "communication error")                               \
  XX(ESCHED, -9, "invalid schedule")                                 \
  XX(EEMPTY, -10, "empty input")                                     \
  XX(EINTR, -11, "interrupted")                                      \
  XX(EPEER, -12, "another rank failed")                              \
  XX(ETOOBIG, -13, "message too large")                              \
  XX(EDIVERGED, -14, "the run diverged (a non-finite objective or parameter)")

typedef enum {
#define STRATA_ERR_ENUM_(name, val, desc) STRATA_##name = (val),
  STRATA_ERRNO_MAP(STRATA_ERR_ENUM_)
#undef STRATA_ERR_ENUM_
} strata_errno;

/* Human-readable description of a code ("malformed input"). Never NULL. */
STRATA_EXPORT const char *strata_strerror(int err);

/* Symbolic name of a code ("STRATA_EPARSE"). Never NULL. */
STRATA_EXPORT const char *strata_err_name(int err);

/*
 * Records a formatted message for the calling thread and returns err, so a
 * failing path reads `return strata_err_set(STRATA_EPARSE, "%s:%zu: ...", ...)`.
 * The message replaces any earlier one, which its arguments may quote
 * (strata_err_set(rc, "%s: %s", where, strata_err_msg()) wraps it).
 */
STRATA_EXPORT int strata_err_set(int err, const char *fmt, ...) STRATA_PRINTF(2, 3);

/* The calling thread's last message, or strata_strerror of the last code set
 * without one; "" when nothing failed. Valid until the next strata_err_set. */
STRATA_EXPORT const char *strata_err_msg(void);

/* Forgets the calling thread's message. */
STRATA_EXPORT void strata_err_clear(void);

#endif
