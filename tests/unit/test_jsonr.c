/*
 * Unit tests for core/jsonr.c, the strict JSON reader of the checkpoint
 * manifests: valid documents and what they decode to, every error with the
 * line and column its message gives, strata__json_int's bounds, running out
 * of memory, and a randomised round trip through strata's own writer
 * (strata/json.h).
 *
 * Every text is parsed from a heap copy of exactly its length, with no NUL
 * after it, so that a read past the end shows under AddressSanitizer.
 *
 * The round trip prints its seed; STRATA_TEST_SEED=X replays it.
 */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "leakcheck.h"

#include "core/jsonr.h"
#include "strata/core.h"
#include "strata/error.h"
#include "strata/json.h"

static uint64_t g_seed;

/* ---- helpers --------------------------------------------------------- */

/* Parses text[0..len) from an exact-size heap copy. */
static int parse_len(const char *text, size_t len, strata__json_doc **doc) {
  char *copy = malloc(len ? len : 1);
  assert_non_null(copy);
  memcpy(copy, text, len);
  int rc = strata__json_parse(copy, len, doc);
  free(copy);
  return rc;
}

static strata__json_doc *parse_ok_len(const char *text, size_t len) {
  strata__json_doc *doc = NULL;
  int rc = parse_len(text, len, &doc);
  if (rc) fail_msg("'%.*s' was refused: %s", (int)len, text, strata_err_msg());
  assert_non_null(doc);
  return doc;
}

static strata__json_doc *parse_ok(const char *text) { return parse_ok_len(text, strlen(text)); }

/* Expects text[0..len) refused with "line L, column C: " and what in the
 * message, no document, and nothing left allocated. */
static void expect_error_len(const char *text, size_t len, int line, int col, const char *what) {
  size_t live = strata_alloc_live();
  strata__json_doc *doc = (strata__json_doc *)&doc; /* must be reset */
  strata_err_clear();
  int rc = parse_len(text, len, &doc);
  if (rc != STRATA_EPARSE)
    fail_msg("'%.*s': got %s, want STRATA_EPARSE (%s)", (int)len, text, strata_err_name(rc),
             rc ? strata_err_msg() : "accepted");
  assert_null(doc);
  assert_int_equal(strata_alloc_live(), live);
  char want[64];
  snprintf(want, sizeof want, "line %d, column %d: ", line, col);
  const char *msg = strata_err_msg();
  if (strncmp(msg, want, strlen(want)) != 0 || !strstr(msg, what))
    fail_msg("'%.*s': message '%s', want '%s...%s'", (int)len, text, msg, want, what);
  assert_null(strchr(msg, '\n'));
}

static void expect_error(const char *text, int line, int col, const char *what) {
  expect_error_len(text, strlen(text), line, col, what);
}

/* The root of a document holding one string, decoded. */
static const strata__jv *string_root(strata__json_doc *doc) {
  const strata__jv *r = strata__json_root(doc);
  assert_int_equal(r->kind, STRATA__JV_STRING);
  assert_non_null(r->str);
  assert_int_equal(strlen(r->str), r->len); /* NUL-terminated, no NUL inside */
  return r;
}

/* Parses a JSON string literal and checks it decodes to want (want_len
 * bytes). */
static void expect_decoded(const char *literal, const char *want, size_t want_len) {
  strata__json_doc *doc = parse_ok(literal);
  const strata__jv *r = string_root(doc);
  if (r->len != want_len || memcmp(r->str, want, want_len) != 0)
    fail_msg("%s decoded to %zu bytes, want %zu", literal, r->len, want_len);
  strata__json_free(doc);
}

/* ---- valid documents ------------------------------------------------- */

static void test_nested_document(void **state) {
  (void)state;
  const char *text =
      " \t\r\n{\"a\" : [1, 2.5, -3e2, {\"b\": null}, [], {}],\r\n"
      "  \"c\":true,\"d\" :false , \"e\": \"x\",\n"
      "  \"f\": {}, \"g\": [], \"h\": [[[\"deep\"]]], \"\": 0}\n\t ";
  strata__json_doc *doc = parse_ok(text);
  const strata__jv *root = strata__json_root(doc);
  assert_int_equal(root->kind, STRATA__JV_OBJECT);
  assert_int_equal(root->len, 8);
  assert_null(root->key);
  assert_null(root->next);
  /* Members in document order, each with its key. */
  static const char *const keys[] = {"a", "c", "d", "e", "f", "g", "h", ""};
  const strata__jv *m = root->child;
  for (size_t i = 0; i < 8; i++, m = m->next) {
    assert_non_null(m);
    assert_string_equal(m->key, keys[i]);
  }
  assert_null(m);

  const strata__jv *a = strata__json_get(root, "a");
  assert_int_equal(a->kind, STRATA__JV_ARRAY);
  assert_int_equal(a->len, 6);
  const strata__jv *x = a->child;
  assert_int_equal(x->kind, STRATA__JV_NUMBER);
  assert_true(x->number == 1.0);
  assert_null(x->key); /* array members have no key */
  x = x->next;
  assert_true(x->number == 2.5);
  x = x->next;
  assert_true(x->number == -300.0);
  x = x->next;
  assert_int_equal(x->kind, STRATA__JV_OBJECT);
  assert_int_equal(x->len, 1);
  assert_int_equal(strata__json_get(x, "b")->kind, STRATA__JV_NULL);
  x = x->next;
  assert_int_equal(x->kind, STRATA__JV_ARRAY);
  assert_int_equal(x->len, 0);
  assert_null(x->child);
  x = x->next;
  assert_int_equal(x->kind, STRATA__JV_OBJECT);
  assert_int_equal(x->len, 0);
  assert_null(x->child);
  assert_null(x->next);

  const strata__jv *c = strata__json_get(root, "c"), *d = strata__json_get(root, "d");
  assert_int_equal(c->kind, STRATA__JV_BOOL);
  assert_int_equal(c->boolean, 1);
  assert_int_equal(d->kind, STRATA__JV_BOOL);
  assert_int_equal(d->boolean, 0);
  assert_string_equal(strata__json_str(root, "e"), "x");
  assert_int_equal(strata__json_get(root, "e")->len, 1);
  assert_int_equal(strata__json_get(root, "f")->kind, STRATA__JV_OBJECT);
  assert_null(strata__json_get(root, "f")->child);
  assert_int_equal(strata__json_get(root, "g")->kind, STRATA__JV_ARRAY);
  const strata__jv *h = strata__json_get(root, "h");
  assert_string_equal(h->child->child->child->str, "deep");
  assert_true(strata__json_get(root, "")->number == 0.0);
  /* Lookups that find nothing. */
  assert_null(strata__json_get(root, "z"));
  assert_null(strata__json_get(root, "A")); /* keys are case-sensitive */
  assert_null(strata__json_get(a, "a"));     /* an array has no members by name */
  assert_null(strata__json_get(NULL, "a"));
  assert_null(strata__json_str(root, "a")); /* not a string */
  assert_null(strata__json_str(root, "c"));
  assert_null(strata__json_str(root, "z"));
  strata__json_free(doc);
}

/* Any value may be the whole document; whitespace around it is fine. */
static void test_scalar_roots(void **state) {
  (void)state;
  static const struct {
    const char *text;
    strata__jv_kind kind;
    double num;
    int b;
  } cases[] = {
      {"null", STRATA__JV_NULL, 0, 0},        {" true ", STRATA__JV_BOOL, 0, 1},
      {"\nfalse", STRATA__JV_BOOL, 0, 0},     {"0", STRATA__JV_NUMBER, 0, 0},
      {"-0", STRATA__JV_NUMBER, -0.0, 0},     {"\t42\r\n", STRATA__JV_NUMBER, 42, 0},
      {"\"\"", STRATA__JV_STRING, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    strata__json_doc *doc = parse_ok(cases[i].text);
    const strata__jv *r = strata__json_root(doc);
    assert_int_equal(r->kind, cases[i].kind);
    if (r->kind == STRATA__JV_BOOL) assert_int_equal(r->boolean, cases[i].b);
    if (r->kind == STRATA__JV_NUMBER) {
      assert_true(r->number == cases[i].num);
      assert_int_equal(signbit(r->number) != 0, signbit(cases[i].num) != 0);
    }
    if (r->kind == STRATA__JV_STRING) {
      assert_string_equal(r->str, "");
      assert_int_equal(r->len, 0);
    }
    strata__json_free(doc);
  }
  strata__json_free(NULL);
}

static void test_numbers(void **state) {
  (void)state;
  static const char *const ok[] = {
      "0",       "-0",      "7",         "-7",        "10",          "1234567890",
      "0.5",     "-0.5",    "3.14159",   "1e2",       "1E2",         "1e+2",
      "1E-2",    "-1.5e-3", "0e0",       "0.0e-0",    "2.5E+10",     "1e308",
      "-1e308",  "1e-300",  "4.9e-324",  "1e-400",    "123.456e-7",
      "9007199254740993",   "1.7976931348623157e308", "0.1000000000000000055511151231257827",
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    strata__json_doc *doc = parse_ok(ok[i]);
    const strata__jv *r = strata__json_root(doc);
    assert_int_equal(r->kind, STRATA__JV_NUMBER);
    double want = strtod(ok[i], NULL);
    if (!(r->number == want && signbit(r->number) == signbit(want)))
      fail_msg("%s read as %.17g, want %.17g", ok[i], r->number, want);
    strata__json_free(doc);
  }
  /* Inside containers, numbers end at the delimiters. */
  strata__json_doc *doc = parse_ok("[-1.5e3,0,2E1]");
  const strata__jv *a = strata__json_root(doc)->child;
  assert_true(a->number == -1500.0);
  assert_true(a->next->number == 0.0);
  assert_true(a->next->next->number == 20.0);
  strata__json_free(doc);
  /* The text's length bounds the number, NUL or not. */
  doc = parse_ok_len("123", 2);
  assert_true(strata__json_root(doc)->number == 12.0);
  strata__json_free(doc);
}

/* Numbers JSON does not have, or that a double cannot hold. */
static void test_number_errors(void **state) {
  (void)state;
  expect_error("01", 1, 2, "text after the value");
  expect_error("-01", 1, 3, "text after the value");
  expect_error("00", 1, 2, "text after the value");
  expect_error("[01]", 1, 3, "expected ',' or ']'");
  expect_error("0x10", 1, 2, "text after the value");
  expect_error("1.", 1, 1, "expected digits after '.'");
  expect_error("[1.]", 1, 2, "expected digits after '.'");
  expect_error("1.e5", 1, 1, "expected digits after '.'");
  expect_error(".5", 1, 1, "expected a value");
  expect_error("-.5", 1, 1, "expected a value");
  expect_error("+1", 1, 1, "expected a value");
  expect_error("-", 1, 1, "expected a value");
  expect_error("- 1", 1, 1, "expected a value");
  expect_error("1e", 1, 1, "expected an exponent");
  expect_error("1E+", 1, 1, "expected an exponent");
  expect_error("1e-x", 1, 1, "expected an exponent");
  expect_error("[2, 1e]", 1, 5, "expected an exponent");
  expect_error("1.5.2", 1, 4, "text after the value");
  expect_error("1e5e5", 1, 4, "text after the value");
  expect_error("NaN", 1, 1, "expected a value");
  expect_error("nan", 1, 1, "expected a value");
  expect_error("Infinity", 1, 1, "expected a value");
  expect_error("-Infinity", 1, 1, "expected a value");
  expect_error("[1, inf]", 1, 5, "expected a value");
  expect_error("1e309", 1, 1, "number out of range");
  expect_error("-1e309", 1, 1, "number out of range");
  expect_error("{\"x\": 1e99999}", 1, 7, "number out of range");
  /* A number far longer than any double needs is refused, not overrun. */
  char big[1001];
  memset(big, '1', 1000);
  big[1000] = '\0';
  expect_error(big, 1, 1, "number");
}

static void test_string_escapes(void **state) {
  (void)state;
  expect_decoded("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8);
  expect_decoded("\"a\\u0041z\"", "aAz", 3);
  expect_decoded("\"\\u0001\\u001f\\u007f\"", "\x01\x1f\x7f", 3);
  expect_decoded("\"\\u00e9\\u00E9\"", "\xc3\xa9\xc3\xa9", 4);    /* U+00E9, either case */
  expect_decoded("\"\\u0080\\u07ff\"", "\xc2\x80\xdf\xbf", 4);    /* 2-byte bounds */
  expect_decoded("\"\\u0800\\uffff\"", "\xe0\xa0\x80\xef\xbf\xbf", 6); /* 3-byte bounds */
  expect_decoded("\"\\u20AC\"", "\xe2\x82\xac", 3);
  expect_decoded("\"\\uD83D\\uDE00\"", "\xf0\x9f\x98\x80", 4); /* a surrogate pair */
  expect_decoded("\"\\ud800\\udc00\"", "\xf0\x90\x80\x80", 4); /* U+10000 */
  expect_decoded("\"\\uDBFF\\uDFFF\"", "\xf4\x8f\xbf\xbf", 4); /* U+10FFFF */
  expect_decoded("\"x\\uD83D\\uDE00y\\n\"", "x\xf0\x9f\x98\x80y\n", 7);
  /* UTF-8 as is, at every length, and DEL, which JSON allows raw. */
  expect_decoded("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"",
                "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f", 10);
  expect_decoded("\"\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80\"",
                "\xf4\x8f\xbf\xbf\xed\x9f\xbf\xee\x80\x80", 10); /* around the surrogates */
  expect_decoded("\"\"", "", 0);
  /* Keys decode the same way. */
  strata__json_doc *doc = parse_ok("{\"k\\u00e9\\n\": 1, \"k\": 2, \"k\": 3}");
  const strata__jv *r = strata__json_root(doc);
  assert_non_null(strata__json_get(r, "k\xc3\xa9\n"));
  assert_true(strata__json_get(r, "k")->number == 2.0); /* the first of repeated keys */
  assert_int_equal(r->len, 3);
  strata__json_free(doc);
}

static void test_string_errors(void **state) {
  (void)state;
  expect_error("\"abc", 1, 2, "unterminated string");
  expect_error("\"", 1, 2, "unterminated string");
  expect_error("[\"a\\\"]", 1, 3, "unterminated string");
  expect_error("\"a\\", 1, 2, "unterminated string");
  expect_error("{\"a\": \"x", 1, 8, "unterminated string");
  expect_error("{\"a", 1, 3, "unterminated string");
  expect_error("\"a\x01z\"", 1, 3, "control character");
  expect_error("\"a\nb\"", 1, 3, "control character");
  expect_error("\"\tb\"", 1, 2, "control character");
  expect_error("\"a\x1f\"", 1, 3, "control character");
  expect_error_len("\"a\0b\"", 5, 1, 3, "control character");
  /* Bytes that are not UTF-8. */
  static const char *const bad_utf8[] = {
      "\"a\x80\"",                 /* a lone continuation byte */
      "\"a\xbf\"",                 /* another */
      "\"a\xc0\x80\"",             /* overlong NUL */
      "\"a\xc1\xbf\"",             /* overlong U+007F */
      "\"a\xe0\x80\xaf\"",         /* overlong '/' in 3 bytes */
      "\"a\xe0\x9f\xbf\"",         /* overlong U+07FF */
      "\"a\xf0\x8f\xbf\xbf\"",     /* overlong U+FFFF in 4 bytes */
      "\"a\xed\xa0\x80\"",         /* U+D800, a surrogate */
      "\"a\xed\xbf\xbf\"",         /* U+DFFF */
      "\"a\xf4\x90\x80\x80\"",     /* U+110000 */
      "\"a\xf5\x80\x80\x80\"",     /* lead byte past U+10FFFF */
      "\"a\xff\"",                 /* never in UTF-8 */
      "\"a\xc3\"",                 /* cut short by the quote */
      "\"a\xe2\x82\"",             /* cut short */
      "\"a\xf0\x9f\x98\"",         /* cut short */
      "\"a\xc3x\"",                /* a continuation that is not one */
      "\"a\xe2\x82x\"",
  };
  for (size_t i = 0; i < sizeof bad_utf8 / sizeof *bad_utf8; i++)
    expect_error(bad_utf8[i], 1, 3, "invalid UTF-8");
  expect_error("{\"\xc0\xaf\": 1}", 1, 3, "invalid UTF-8"); /* in a key too */
  /* Escapes. */
  expect_error("\"a\\qb\"", 1, 4, "bad escape");
  expect_error("\"\\x41\"", 1, 3, "bad escape");
  expect_error("\"\\U0041\"", 1, 3, "bad escape");
  expect_error("\"\\'\"", 1, 3, "bad escape");
  expect_error("\"\\u12\"", 1, 4, "bad \\u escape");
  expect_error("\"\\u12G4\"", 1, 4, "bad \\u escape");
  expect_error("\"\\u-123\"", 1, 4, "bad \\u escape");
  expect_error("\"\\u\"", 1, 4, "bad \\u escape");
  /* Surrogates not in a pair. */
  expect_error("\"\\uDC00\"", 1, 8, "unpaired surrogate");
  expect_error("\"\\uDFFF\\uD800\"", 1, 8, "unpaired surrogate");
  expect_error("\"\\uD800\"", 1, 8, "unpaired surrogate");
  expect_error("\"\\uD800x\"", 1, 8, "unpaired surrogate");
  expect_error("\"\\uD800\\n\"", 1, 8, "unpaired surrogate");
  expect_error("\"\\uD800\\u0041\"", 1, 8, "unpaired surrogate");
  expect_error("\"\\uD800\\uD800\"", 1, 8, "unpaired surrogate");
  expect_error("\"\\uDBFF\\uE000\"", 1, 8, "unpaired surrogate");
  expect_error("\"\\uD800\\uDC0\"", 1, 8, "unpaired surrogate");
  /* NUL cannot be in a C string. */
  expect_error("\"\\u0000\"", 1, 8, "\\u0000");
  expect_error("[\"ok\", \"a\\u0000\"]", 1, 16, "\\u0000");
}

/* Structure: commas, colons, keys, closing brackets, what follows. */
static void test_structure_errors(void **state) {
  (void)state;
  expect_error("", 1, 1, "expected a value");
  expect_error("   ", 1, 4, "expected a value");
  expect_error(" \n\t", 2, 2, "expected a value");
  expect_error("[1,]", 1, 4, "expected a value");
  expect_error("[1,2,]", 1, 6, "expected a value");
  expect_error("[,1]", 1, 2, "expected a value");
  expect_error("{\"a\":1,}", 1, 8, "expected a key");
  expect_error("{,}", 1, 2, "expected a key");
  expect_error("{1: 2}", 1, 2, "expected a key");
  expect_error("{a: 2}", 1, 2, "expected a key");
  expect_error("{'a': 2}", 1, 2, "expected a key");
  expect_error("{\"a\" 1}", 1, 6, "expected ':'");
  expect_error("{\"a\"}", 1, 5, "expected ':'");
  expect_error("{\"a\"", 1, 5, "expected ':'");
  expect_error("{\"a\":}", 1, 6, "expected a value");
  expect_error("{\"a\":", 1, 6, "expected a value");
  expect_error("[1 2]", 1, 4, "expected ',' or ']'");
  expect_error("[1:2]", 1, 3, "expected ',' or ']'");
  expect_error("[1}", 1, 3, "expected ',' or ']'");
  expect_error("[1, 2", 1, 6, "expected ',' or ']'");
  expect_error("{\"a\":1 \"b\":2}", 1, 8, "expected ',' or '}'");
  expect_error("{\"a\":1]", 1, 7, "expected ',' or '}'");
  expect_error("{\"a\":1", 1, 7, "expected ',' or '}'");
  expect_error("[", 1, 2, "expected a value");
  expect_error("{", 1, 2, "expected a key");
  expect_error("]", 1, 1, "expected a value");
  expect_error("}", 1, 1, "expected a value");
  expect_error("1 2", 1, 3, "text after the value");
  expect_error("{} {}", 1, 4, "text after the value");
  expect_error("[]]", 1, 3, "text after the value");
  expect_error("null x", 1, 6, "text after the value");
  expect_error("\"a\"\"b\"", 1, 4, "text after the value");
  expect_error_len("1\0", 2, 1, 2, "text after the value");
  /* Literals: exact and lower case. */
  expect_error("tru", 1, 1, "expected a value");
  expect_error("nul", 1, 1, "expected a value");
  expect_error("True", 1, 1, "expected a value");
  expect_error("NULL", 1, 1, "expected a value");
  expect_error("fals", 1, 1, "expected a value");
  expect_error("falsey", 1, 6, "text after the value");
  expect_error("[true, nil]", 1, 8, "expected a value");
  /* No comments. */
  expect_error("[1] // x", 1, 5, "text after the value");
  expect_error("/* x */ 1", 1, 1, "expected a value");
  /* Lines and columns count from 1; a newline starts the next line. */
  expect_error("{\n  \"a\": 1,\n  \"b\" 2\n}", 3, 7, "expected ':'");
  expect_error("[\r\n1,\r\n]", 3, 1, "expected a value");
  expect_error("[1,\n\n\n   x]", 4, 4, "expected a value");
}

/* Nesting: exactly STRATA__JSONR_DEPTH levels parse, one more does not
 * (and fails where it starts, without recursing on). */
static void test_depth_limit(void **state) {
  (void)state;
  enum { D = STRATA__JSONR_DEPTH, BIG = 100000 };
  char *text = malloc(BIG + 1);
  assert_non_null(text);
  for (int kind = 0; kind < 3; kind++) {
    /* kind 0: arrays; 1: objects ({"k": ...}); 2: alternating. */
    for (int depth = D; depth <= D + 1; depth++) {
      size_t n = 0;
      for (int i = 0; i < depth; i++) {
        int obj = kind == 1 || (kind == 2 && i % 2);
        if (obj) n += (size_t)sprintf(text + n, "{\"k\":");
        else text[n++] = '[';
      }
      size_t open_end = n;
      text[n++] = '1';
      for (int i = depth - 1; i >= 0; i--) text[n++] = kind == 1 || (kind == 2 && i % 2) ? '}' : ']';
      if (depth == D) {
        strata__json_doc *doc = parse_ok_len(text, n);
        const strata__jv *v = strata__json_root(doc);
        int levels = 0;
        while (v->kind == STRATA__JV_ARRAY || v->kind == STRATA__JV_OBJECT) {
          assert_int_equal(v->len, 1);
          v = v->child;
          levels++;
        }
        assert_int_equal(levels, D);
        assert_true(v->number == 1.0);
        strata__json_free(doc);
      } else {
        /* The last opening bracket is the one too deep. */
        size_t last = open_end - (kind == 1 || (kind == 2 && (depth - 1) % 2) ? 5 : 1);
        expect_error_len(text, n, 1, (int)last + 1, "nesting too deep");
      }
    }
  }
  /* Far deeper input fails the same way, and empty containers count too. */
  memset(text, '[', BIG);
  expect_error_len(text, BIG, 1, D + 1, "nesting too deep");
  size_t n = 0;
  for (int i = 0; i < D; i++) text[n++] = '[';
  text[n++] = '{';
  text[n++] = '}';
  for (int i = 0; i < D; i++) text[n++] = ']';
  expect_error_len(text, n, 1, D + 1, "nesting too deep");
  /* Siblings do not add up: depth is nesting, not count. */
  n = 0;
  text[n++] = '[';
  for (int i = 0; i < 1000; i++) n += (size_t)sprintf(text + n, "%s[[]]", i ? "," : "");
  text[n++] = ']';
  strata__json_doc *doc = parse_ok_len(text, n);
  assert_int_equal(strata__json_root(doc)->len, 1000);
  strata__json_free(doc);
  free(text);
}

/* strata__json_int: whole numbers within [lo, hi] only, the bounds
 * included, whatever the bounds; the output untouched on refusal. */
static void test_json_int(void **state) {
  (void)state;
  strata__json_doc *doc = parse_ok(
      "{\"a\": 5, \"b\": -3, \"c\": 2.5, \"d\": \"7\", \"e\": 1e3, \"f\": -0, \"g\": null,"
      " \"h\": true, \"i\": [1], \"j\": 0.999999999, \"k\": 1e-300,"
      " \"max\": 9223372036854775807, \"p63\": 9223372036854775808, \"min\": -9223372036854775808,"
      " \"below\": -9223372036854775809.0e0, \"huge\": 1e19, \"p62\": 4611686018427387904,"
      " \"p53\": 9007199254740992, \"ip\": 2147483647, \"im\": -2147483648}");
  const strata__jv *r = strata__json_root(doc);
  int64_t v = 0;
#define OK(key, lo, hi, want)                                                   \
  do {                                                                          \
    v = 12345;                                                                  \
    if (strata__json_int(r, key, lo, hi, &v) != 0)                              \
      fail_msg("%s in [%lld, %lld] refused", key, (long long)(lo), (long long)(hi)); \
    assert_true(v == (want));                                                   \
  } while (0)
#define NO(key, lo, hi)                                                         \
  do {                                                                          \
    v = 12345;                                                                  \
    if (strata__json_int(r, key, lo, hi, &v) != -1)                             \
      fail_msg("%s in [%lld, %lld] accepted as %lld", key, (long long)(lo),     \
               (long long)(hi), (long long)v);                                  \
    assert_true(v == 12345);                                                    \
  } while (0)
  OK("a", 0, 10, 5);
  OK("a", 5, 5, 5);
  NO("a", 6, 10);
  NO("a", 0, 4);
  OK("b", -3, 0, -3);
  NO("b", -2, 0);
  NO("b", 0, INT64_MAX);
  NO("c", 0, 10);
  NO("d", 0, 10); /* a string, though it holds digits */
  OK("e", 0, 1000, 1000);
  NO("e", 0, 999);
  OK("f", 0, 0, 0);
  NO("g", 0, 10);
  NO("h", 0, 10);
  NO("i", 0, 10);
  NO("j", 0, 10);
  NO("k", 0, 10);
  NO("missing", INT64_MIN, INT64_MAX);
  OK("ip", INT32_MIN, INT32_MAX, INT32_MAX);
  OK("im", INT32_MIN, INT32_MAX, INT32_MIN);
  NO("ip", INT32_MIN, INT32_MAX - 1);
  OK("p53", 0, INT64_MAX, INT64_C(9007199254740992));
  /* At the ends of int64_t, where a double cannot tell hi from hi + 1. */
  OK("min", INT64_MIN, 0, INT64_MIN);
  NO("min", INT64_MIN + 1, 0);
  NO("p63", 0, INT64_MAX);         /* 2^63 is past every int64_t */
  NO("p63", INT64_MIN, INT64_MAX);
  NO("max", 0, INT64_MAX);         /* reads as 2^63 as well */
  NO("huge", INT64_MIN, INT64_MAX);
  /* The number as read is what counts: -2^63 - 1 reads as -2^63, an int64_t. */
  OK("below", INT64_MIN, -1, INT64_MIN);
  NO("p62", 0, INT64_MAX / 2);     /* 2^62 = INT64_MAX / 2 + 1 */
  OK("p62", 0, INT64_MAX / 2 + 1, INT64_C(4611686018427387904));
  NO("p53", 0, INT64_C(9007199254740991));
#undef OK
#undef NO
  /* Not an object: nothing by name. */
  strata__json_doc *arr = parse_ok("[1, 2]");
  v = 7;
  assert_int_equal(strata__json_int(strata__json_root(arr), "0", 0, 10, &v), -1);
  assert_true(v == 7);
  strata__json_free(arr);
  strata__json_free(doc);
}

/* Every allocation that can fail does so cleanly: STRATA_ENOMEM, no
 * document, nothing left allocated; documents larger than an arena chunk
 * included. */
static void test_out_of_memory(void **state) {
  (void)state;
  char *big = malloc(200000);
  assert_non_null(big);
  size_t n = 0;
  big[n++] = '[';
  for (int i = 0; i < 3000; i++)
    n += (size_t)sprintf(big + n, "%s{\"key%d\": \"a string of some length %d\"}", i ? "," : "", i, i);
  big[n++] = ']';
  const char *texts[] = {"1", "{\"a\": [1, {\"b\": \"c\"}]}", big};
  size_t lens[] = {1, strlen(texts[1]), n};
  for (int t = 0; t < 3; t++) {
    int ok = 0;
    for (long k = 1; k < 1000 && !ok; k++) {
      size_t live = strata_alloc_live();
      strata__json_doc *doc = (strata__json_doc *)&doc;
      strata_alloc_fail_after(k);
      int rc = parse_len(texts[t], lens[t], &doc);
      strata_alloc_fail_after(0);
      if (rc == 0) {
        ok = 1;
        assert_true(k > 1);
        strata__json_free(doc);
      } else {
        assert_int_equal(rc, STRATA_ENOMEM);
        assert_null(doc);
      }
      assert_int_equal(strata_alloc_live(), live);
    }
    assert_true(ok);
  }
  free(big);
}

/* ---- randomised round trip through strata's writer -------------------- */

typedef struct node {
  strata__jv_kind kind;
  int as; /* NUMBER: 0 json_int, 1 json_double, 2 json_number (a float) */
  int b;
  int64_t iv; /* NUMBER written with json_int */
  double num; /* NUMBER (for as 2, a float's value); NaN or infinite: written as null */
  char *str;
  char *key;
  struct node *kids;
  int n_kids;
} node;

/* A random string of valid UTF-8 with no NUL: ASCII (controls, quotes and
 * backslashes favoured) and code points of every length. */
static char *random_string(strata_rng *r) {
  int n = (int)strata_rng_below(r, 12);
  char *s = malloc((size_t)n * 4 + 1), *o = s;
  assert_non_null(s);
  for (int i = 0; i < n; i++) {
    uint64_t what = strata_rng_below(r, 8);
    unsigned cp;
    if (what == 0) cp = 1 + (unsigned)strata_rng_below(r, 0x1f);
    else if (what == 1) cp = "\"\\/"[strata_rng_below(r, 3)];
    else if (what <= 4) cp = 0x20 + (unsigned)strata_rng_below(r, 0x60);
    else if (what == 5) cp = 0x80 + (unsigned)strata_rng_below(r, 0x800 - 0x80);
    else if (what == 6) {
      do cp = 0x800 + (unsigned)strata_rng_below(r, 0x10000 - 0x800);
      while (cp >= 0xd800 && cp <= 0xdfff);
    } else {
      cp = 0x10000 + (unsigned)strata_rng_below(r, 0x110000 - 0x10000);
    }
    if (cp < 0x80) {
      *o++ = (char)cp;
    } else if (cp < 0x800) {
      *o++ = (char)(0xc0 | cp >> 6);
      *o++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      *o++ = (char)(0xe0 | cp >> 12);
      *o++ = (char)(0x80 | (cp >> 6 & 0x3f));
      *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
      *o++ = (char)(0xf0 | cp >> 18);
      *o++ = (char)(0x80 | (cp >> 12 & 0x3f));
      *o++ = (char)(0x80 | (cp >> 6 & 0x3f));
      *o++ = (char)(0x80 | (cp & 0x3f));
    }
  }
  *o = '\0';
  return s;
}

static double random_double(strata_rng *r) {
  switch (strata_rng_below(r, 6)) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return (strata_rng_uniform(r) - 0.5) * 1e6;
    case 3: { /* any finite bit pattern */
      double d;
      do {
        uint64_t bits = strata_rng_next(r);
        memcpy(&d, &bits, sizeof d);
      } while (!isfinite(d));
      return d;
    }
    case 4: return strata_rng_below(r, 2) ? NAN : -INFINITY; /* written as null */
    default: return ldexp(strata_rng_uniform(r), (int)strata_rng_below(r, 2000) - 1000);
  }
}

static void random_node(strata_rng *r, node *nd, int depth, int in_object) {
  memset(nd, 0, sizeof *nd);
  if (in_object) nd->key = random_string(r);
  uint64_t k = strata_rng_below(r, depth < STRATA_JSON_MAX_DEPTH - 2 ? 7 : 4);
  switch (k) {
    case 0: nd->kind = STRATA__JV_NULL; break;
    case 1:
      nd->kind = STRATA__JV_BOOL;
      nd->b = (int)strata_rng_below(r, 2);
      break;
    case 2:
      nd->kind = STRATA__JV_NUMBER;
      nd->as = (int)strata_rng_below(r, 3);
      if (nd->as == 0) {
        uint64_t x = strata_rng_next(r);
        nd->iv = strata_rng_below(r, 2) ? (int64_t)x : (int64_t)(x % 2001) - 1000;
        nd->num = (double)nd->iv;
      } else if (nd->as == 1) {
        nd->num = random_double(r);
      } else {
        nd->num = (double)(float)random_double(r);
      }
      if (!isfinite(nd->num)) nd->kind = STRATA__JV_NULL;
      break;
    case 3:
      nd->kind = STRATA__JV_STRING;
      nd->str = random_string(r);
      break;
    default: {
      nd->kind = k == 4 || k == 6 ? STRATA__JV_ARRAY : STRATA__JV_OBJECT;
      nd->n_kids = (int)strata_rng_below(r, depth < 3 ? 6 : 3);
      nd->kids = calloc((size_t)nd->n_kids + 1, sizeof *nd->kids);
      assert_non_null(nd->kids);
      for (int i = 0; i < nd->n_kids; i++)
        random_node(r, &nd->kids[i], depth + 1, nd->kind == STRATA__JV_OBJECT);
    }
  }
}

static void write_node(strata_json *j, const node *nd) {
  const char *key = nd->key;
  switch (nd->kind) {
    case STRATA__JV_NULL:
      /* Null itself, or a non-finite number the writer turns into null. */
      if (nd->as == 1) strata_json_double(j, key, nd->num);
      else if (nd->as == 2) strata_json_number(j, key, nd->num);
      else strata_json_string(j, key, NULL);
      break;
    case STRATA__JV_BOOL: strata_json_bool(j, key, nd->b); break;
    case STRATA__JV_NUMBER:
      if (nd->as == 0) {
        strata_json_int(j, key, nd->iv);
      } else if (nd->as == 1) {
        strata_json_double(j, key, nd->num);
      } else {
        strata_json_number(j, key, nd->num);
      }
      break;
    case STRATA__JV_STRING: strata_json_string(j, key, nd->str); break;
    case STRATA__JV_ARRAY:
    case STRATA__JV_OBJECT:
      if (nd->kind == STRATA__JV_ARRAY) strata_json_array_begin(j, key);
      else strata_json_object_begin(j, key);
      for (int i = 0; i < nd->n_kids; i++) write_node(j, &nd->kids[i]);
      if (nd->kind == STRATA__JV_ARRAY) strata_json_array_end(j);
      else strata_json_object_end(j);
      break;
  }
}

static void free_node(node *nd) {
  free(nd->str);
  free(nd->key);
  for (int i = 0; i < nd->n_kids; i++) free_node(&nd->kids[i]);
  free(nd->kids);
}

/* The parsed value against the node it was written from; path names the
 * place for the failure message. */
static void compare(const node *nd, const strata__jv *v, const char *path, uint64_t seed,
                    int round) {
  if (v->kind != nd->kind)
    fail_msg("seed %llu round %d, %s: kind %d, want %d", (unsigned long long)seed, round, path,
             (int)v->kind, (int)nd->kind);
  if (nd->key && (!v->key || strcmp(v->key, nd->key) != 0))
    fail_msg("seed %llu round %d, %s: key differs", (unsigned long long)seed, round, path);
  if (!nd->key && v->key)
    fail_msg("seed %llu round %d, %s: a key where none was written", (unsigned long long)seed,
             round, path);
  switch (nd->kind) {
    case STRATA__JV_BOOL: assert_int_equal(v->boolean, nd->b); break;
    case STRATA__JV_NUMBER:
      /* Nine digits give a float back, not the double it was. */
      if (nd->as == 2 ? (float)v->number != (float)nd->num || signbit(v->number) != signbit(nd->num)
                      : !(v->number == nd->num && signbit(v->number) == signbit(nd->num)))
        fail_msg("seed %llu round %d, %s: number %.17g, want %.17g (written as %d)",
                 (unsigned long long)seed, round, path, v->number, nd->num, nd->as);
      break;
    case STRATA__JV_STRING:
      if (v->len != strlen(nd->str) || strcmp(v->str, nd->str) != 0)
        fail_msg("seed %llu round %d, %s: string differs", (unsigned long long)seed, round, path);
      break;
    case STRATA__JV_ARRAY:
    case STRATA__JV_OBJECT: {
      assert_int_equal(v->len, (size_t)nd->n_kids);
      const strata__jv *c = v->child;
      for (int i = 0; i < nd->n_kids; i++, c = c->next) {
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%d", path, i);
        assert_non_null(c);
        compare(&nd->kids[i], c, sub, seed, round);
      }
      assert_null(c);
      if (nd->kind == STRATA__JV_OBJECT) /* lookups by key find the first */
        for (int i = 0; i < nd->n_kids; i++) {
          int first = i;
          for (int k = 0; k < i; k++)
            if (strcmp(nd->kids[k].key, nd->kids[i].key) == 0) {
              first = k;
              break;
            }
          const strata__jv *m = strata__json_get(v, nd->kids[i].key);
          const strata__jv *want = v->child;
          for (int k = 0; k < first; k++) want = want->next;
          assert_ptr_equal(m, want);
        }
      break;
    }
    default: break;
  }
}

/* Random documents written by strata/json.h (indented or one line) read
 * back to the same tree: kinds, keys in order, strings byte for byte,
 * numbers bit for bit (integers, 17-digit doubles, 9-digit floats), and
 * non-finite numbers as the null the writer puts in their place. */
static void test_round_trip_random(void **state) {
  (void)state;
  strata_rng r;
  strata_rng_seed(&r, g_seed);
  print_message("round trip: seed %llu (STRATA_TEST_SEED=X replays it)\n",
                (unsigned long long)g_seed);
  for (int round = 0; round < 400; round++) {
    node root;
    random_node(&r, &root, 0, 0);
    /* Mostly containers at the top, as real documents are. */
    if (round % 4 && root.kind != STRATA__JV_OBJECT && root.kind != STRATA__JV_ARRAY) {
      free_node(&root);
      memset(&root, 0, sizeof root);
      root.kind = STRATA__JV_OBJECT;
      root.n_kids = 1 + (int)strata_rng_below(&r, 8);
      root.kids = calloc((size_t)root.n_kids, sizeof *root.kids);
      assert_non_null(root.kids);
      for (int i = 0; i < root.n_kids; i++) random_node(&r, &root.kids[i], 1, 1);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    strata_json j;
    if (round % 2) strata_json_init_line(&j, f);
    else strata_json_init(&j, f);
    write_node(&j, &root);
    assert_int_equal(fclose(f), 0);
    strata__json_doc *doc = NULL;
    int rc = parse_len(text, len, &doc);
    if (rc)
      fail_msg("seed %llu round %d: the writer's text is refused: %s\n%s",
               (unsigned long long)g_seed, round, strata_err_msg(), text);
    compare(&root, strata__json_root(doc), "$", g_seed, round);
    strata__json_free(doc);
    free(text);
    free_node(&root);
  }
}

int main(void) {
  const char *env = getenv("STRATA_TEST_SEED");
  g_seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_nested_document, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scalar_roots, setup, teardown),
      cmocka_unit_test_setup_teardown(test_numbers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_number_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_string_escapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_string_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_structure_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_depth_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_json_int, setup, teardown),
      cmocka_unit_test_setup_teardown(test_out_of_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_round_trip_random, setup, teardown),
  };
  return cmocka_run_group_tests_name("jsonr", tests, NULL, NULL);
}
