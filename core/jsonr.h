/*
 * A small JSON reader (internal to libstrata): parses one document into a
 * tree, for the files strata writes and reads back itself (the checkpoint
 * manifest). Strict RFC 8259: one value, no trailing commas, no comments,
 * strings in UTF-8 with escapes decoded (\u0000 and invalid surrogates are
 * refused, so every string is a NUL-terminated C string). Nesting is at
 * most STRATA__JSONR_DEPTH levels, so no input can exhaust the stack.
 */
#ifndef STRATA_CORE_JSONR_H
#define STRATA_CORE_JSONR_H

#include <stddef.h>
#include <stdint.h>

#define STRATA__JSONR_DEPTH 64

typedef enum {
  STRATA__JV_NULL,
  STRATA__JV_BOOL,
  STRATA__JV_NUMBER,
  STRATA__JV_STRING,
  STRATA__JV_ARRAY,
  STRATA__JV_OBJECT
} strata__jv_kind;

typedef struct strata__jv {
  strata__jv_kind kind;
  int boolean;
  double number;
  const char *str;          /* STRING: the decoded text, NUL-terminated */
  size_t len;               /* STRING: bytes; ARRAY, OBJECT: members */
  const char *key;          /* a member of an object: its key; else NULL */
  const struct strata__jv *child; /* ARRAY, OBJECT: the first member */
  const struct strata__jv *next;  /* the next member of the parent */
} strata__jv;

typedef struct strata__json_doc strata__json_doc;

/*
 * Parses text[0..len) (need not be NUL-terminated). Returns 0 with *out
 * (free with strata__json_free), or STRATA_EPARSE with a message
 * "line L, column C: what was expected", or STRATA_ENOMEM.
 */
int strata__json_parse(const char *text, size_t len, strata__json_doc **out);
void strata__json_free(strata__json_doc *d); /* NULL ok */
const strata__jv *strata__json_root(const strata__json_doc *d);

/* The member of object o named key (the first, when repeated); NULL when
 * o is not an object or has none. */
const strata__jv *strata__json_get(const strata__jv *o, const char *key);
/* The member's string or number when it is one, else NULL / -1. */
const char *strata__json_str(const strata__jv *o, const char *key);
/* The member as an integer in [lo, hi] (a number with no fraction); 0, or
 * -1 when missing, not such a number or out of range. */
int strata__json_int(const strata__jv *o, const char *key, int64_t lo, int64_t hi, int64_t *out);

#endif
