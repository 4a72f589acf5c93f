/*
 * The number scanning and array growth the data readers of the apps share
 * (ratings.c, corpus.c, libsvm.c, the MF model loader), internal to the
 * apps, beside the line reader they read with (strata/apps/lines.h).
 */
#ifndef STRATA_APPS_COMMON_LINES_H
#define STRATA_APPS_COMMON_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "strata/apps/lines.h"
#include "strata/core.h"

enum { STRATA__NUM_OK = 0, STRATA__NUM_BAD = 1, STRATA__NUM_OVERFLOW = 2 };

/* The whole of [p, e) must be one decimal integer (an optional sign, then
 * digits); no NUL terminator needed, so fields parse in place inside the
 * read buffer. STRATA__NUM_BAD or STRATA__NUM_OVERFLOW (beyond int64: ids
 * and counts are int64_t everywhere, so 2^63 and above are refused, 2^64 - 1
 * included). */
static inline int strata__scan_i64(const char *p, const char *e, int64_t *out) {
  int neg = 0;
  if (p < e && (*p == '+' || *p == '-')) neg = *p++ == '-';
  if (p == e) return STRATA__NUM_BAD;
  uint64_t v = 0;
  int overflow = 0;
  for (; p < e; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (d > 9) return STRATA__NUM_BAD;
    if (v > (UINT64_MAX - d) / 10) overflow = 1;
    v = v * 10 + d;
  }
  if (overflow || v > (uint64_t)INT64_MAX + (uint64_t)neg) return STRATA__NUM_OVERFLOW;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return STRATA__NUM_OK;
}

/* The reason, for a message, why strata__scan_i64 found [p, e) out of
 * range: "is above the largest supported, ..." or, with a minus sign, "is
 * below the smallest supported, ...", stating the limit. */
static inline const char *strata__overflow_why(const char *p, const char *e) {
  return p < e && *p == '-' ? "is below the smallest supported, -9223372036854775808 (-2^63)"
                            : "is above the largest supported, 9223372036854775807 (2^63 - 1)";
}

/* 10^0 .. 10^22, the powers of ten that are exact doubles. */
extern const double strata__pow10[23];

/* A plain decimal at s ("4", "3.5", "-0.25": an optional sign, digits, an
 * optional point and digits, at least one digit) of at most 15 significant
 * digits, 22 of them after the point, read in place up to the first byte
 * that cannot continue it (s must be followed by one, as the '\n' that ends
 * a block's line): that byte's address, with the value in *out, the double
 * strtod gives (both the mantissa and the power of ten are exact doubles,
 * so one division rounds once, correctly). NULL for anything else (an
 * exponent, nan, a longer mantissa, no digit), which strata__scan_f64
 * decides. For the readers' scanners of whole lines. */
static inline const char *strata__scan_plain_f64(const char *s, double *out) {
  int neg = 0;
  if (*s == '+' || *s == '-') neg = *s++ == '-';
  uint64_t mant = 0;
  size_t digits = 0, frac = 0; /* size_t: no field is long enough to wrap them */
  int any = 0;
  unsigned d;
  while ((d = (unsigned)(unsigned char)*s - '0') <= 9) {
    mant = mant * 10 + d;
    digits += mant != 0;
    any = 1;
    s++;
  }
  if (*s == '.') {
    s++;
    while ((d = (unsigned)(unsigned char)*s - '0') <= 9) {
      mant = mant * 10 + d;
      digits += mant != 0;
      frac++;
      any = 1;
      s++;
    }
  }
  if (!any || digits > 15 || frac > 22 || *s == 'e' || *s == 'E') return NULL;
  double v = (double)mant / strata__pow10[frac];
  *out = neg ? -v : v;
  return s;
}

/* The whole of [p, e) must be one number as strtod reads it (no leading
 * blanks, no NUL terminator needed). NaN and infinities are numbers here:
 * callers that want finite values check. STRATA__NUM_OK or
 * STRATA__NUM_BAD. */
int strata__scan_f64(const char *p, const char *e, double *out);

/* Grows the array arr (a typed pointer lvalue holding *cap elements) to
 * room for need elements, never past limit (strata_grow), assigning arr
 * only on success: 0, or STRATA_ENOMEM with arr and *cap untouched. */
#define STRATA__GROW(arr, need, cap, limit)                                                  \
  __extension__({                                                                            \
    __typeof__(arr) grown_ = strata_grow((arr), (need), (cap), (limit), sizeof *(arr));      \
    grown_ ? ((arr) = grown_, 0) : STRATA_ENOMEM;                                            \
  })

#endif
