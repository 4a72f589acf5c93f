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

#include "strata/core.h"
#include "strata/apps/corpus.h"

#include "quoted.h"
#include "tmpfiles.h"

/* Checks the corpus against docs given as "w w w|w|" (docs separated by '|'). */
static void assert_docs(const strata_corpus *c, const char *spec) {
  uint32_t d = 0;
  uint64_t t = 0;
  const char *s = spec;
  assert_int_equal(c->doc_off[0], 0);
  for (;;) {
    while (*s == ' ') s++;
    if (*s == '|' || *s == '\0') {
      assert_true(d < c->n_docs);
      if (c->doc_off[d + 1] != t)
        fail_msg("doc %u ends at %llu, want %llu", d, (unsigned long long)c->doc_off[d + 1],
                 (unsigned long long)t);
      d++;
      if (*s == '\0') break;
      s++;
      continue;
    }
    char *end;
    unsigned long w = strtoul(s, &end, 10);
    assert_true(end > s);
    s = end;
    assert_true(t < c->n_tokens);
    if (c->word[t] != w)
      fail_msg("token %llu is %u, want %lu", (unsigned long long)t, c->word[t], w);
    t++;
  }
  assert_int_equal(d, c->n_docs);
  assert_int_equal(t, c->n_tokens);
}

/* ---- format names, close --------------------------------------------- */

static void test_format_names(void **state) {
  fixture *fx = *state;
  static const char *names[] = {"auto", "uci", "ldac"};
  for (int k = 0; k < 3; k++) {
    strata_corpus_format f = STRATA_CORPUS_AUTO;
    assert_int_equal(strata_corpus_format_parse(names[k], &f), 0);
    assert_int_equal(f, k);
  }
  strata_corpus_format f = STRATA_CORPUS_UCI;
  assert_int_equal(strata_corpus_format_parse("lda-c", &f), STRATA_EUSAGE);
  assert_non_null(strstr(strata_err_msg(), "'lda-c'"));
  assert_int_equal(f, STRATA_CORPUS_UCI);
  assert_int_equal(strata_corpus_format_parse("", &f), STRATA_EUSAGE);

  strata_corpus c = {0};
  strata_corpus_close(&c);
  strata_corpus_close(NULL);
  strata_vocab v = {0};
  strata_vocab_close(&v);
  strata_vocab_close(NULL);
  assert_live(fx);
}

/* ---- good input ------------------------------------------------------ */

static const char uci_text[] =
    "5\n"
    "7\n"
    "6\n"
    "1 3 2\n"
    "1 7 1\r\n"
    "4 1 3\n"
    "\n"
    "2 2 1\n"
    "  1\t5   1 \n"
    "4 1 1"; /* no final newline; doc 3 and 5 are absent */

static void check_uci(const strata_corpus *c) {
  assert_int_equal(c->n_docs, 5);
  assert_int_equal(c->n_vocab, 7);
  assert_int_equal(c->n_tokens, 9);
  assert_null(c->true_topic);
  /* doc 1: 3 3 7 5 (file order), doc 2: 2, doc 3: empty, doc 4: 1 1 1 1, doc 5: empty */
  assert_docs(c, "2 2 6 4|1||0 0 0 0|");
}

static void test_uci_good(void **state) {
  fixture *fx = *state;
  strata_corpus c = {0};
  const char *plain = write_tmp(fx, uci_text);
  assert_int_equal(strata_corpus_read(plain, STRATA_CORPUS_UCI, 0, &c), 0);
  check_uci(&c);
  strata_corpus_close(&c);
  assert_null(c.word);
  assert_null(c.doc_off);
  assert_int_equal(c.n_tokens, 0);

  const char *gz = write_tmp_gz(fx, uci_text);
  assert_int_equal(strata_corpus_read(gz, STRATA_CORPUS_UCI, 0, &c), 0);
  check_uci(&c);
  strata_corpus_close(&c);
  assert_int_equal(strata_corpus_read(gz, STRATA_CORPUS_AUTO, 0, &c), 0);
  check_uci(&c);
  strata_corpus_close(&c);

  /* A larger vocabulary than W overrides n_vocab. */
  assert_int_equal(strata_corpus_read(plain, STRATA_CORPUS_UCI, 100, &c), 0);
  assert_int_equal(c.n_vocab, 100);
  strata_corpus_close(&c);
  assert_live(fx);
}

static void test_uci_unsorted(void **state) {
  fixture *fx = *state;
  /* Entries out of document order are grouped by docID, keeping file order
   * within each document. */
  const char *path = write_tmp(fx, "3\n4\n5\n3 1 1\n1 4 2\n3 2 1\n1 3 1\n2 4 1\n");
  strata_corpus c = {0};
  assert_int_equal(strata_corpus_read(path, STRATA_CORPUS_AUTO, 0, &c), 0);
  assert_int_equal(c.n_docs, 3);
  assert_docs(&c, "3 3 2|3|0 1");
  strata_corpus_close(&c);
  assert_live(fx);
}

static const char ldac_text[] =
    "3 0:2 5:1 2:1\n"
    "0\n"
    "1 4:3\r\n"
    "2\t1:1  0:1   \n"
    "2 7:1 3:2     "; /* trailing blanks and no final newline, as ap.dat ends */

static void check_ldac(const strata_corpus *c, uint32_t n_vocab) {
  assert_int_equal(c->n_docs, 5);
  assert_int_equal(c->n_vocab, n_vocab);
  assert_int_equal(c->n_tokens, 12);
  assert_null(c->true_topic);
  assert_docs(c, "0 0 5 2||4 4 4|1 0|7 3 3");
}

static void test_ldac_good(void **state) {
  fixture *fx = *state;
  strata_corpus c = {0};
  const char *plain = write_tmp(fx, ldac_text);
  assert_int_equal(strata_corpus_read(plain, STRATA_CORPUS_LDAC, 0, &c), 0);
  check_ldac(&c, 8); /* 1 + the largest id */
  strata_corpus_close(&c);
  assert_int_equal(strata_corpus_read(plain, STRATA_CORPUS_AUTO, 8, &c), 0);
  check_ldac(&c, 8);
  strata_corpus_close(&c);
  assert_int_equal(strata_corpus_read(plain, STRATA_CORPUS_LDAC, 20, &c), 0);
  check_ldac(&c, 20);
  strata_corpus_close(&c);

  const char *gz = write_tmp_gz(fx, ldac_text);
  assert_int_equal(strata_corpus_read(gz, STRATA_CORPUS_AUTO, 0, &c), 0);
  check_ldac(&c, 8);
  strata_corpus_close(&c);

  /* Blank lines at the very end are tolerated. */
  const char *tail = write_tmp(fx, "1 2:1\n1 0:1\n\n  \n");
  assert_int_equal(strata_corpus_read(tail, STRATA_CORPUS_LDAC, 0, &c), 0);
  assert_docs(&c, "2|0");
  strata_corpus_close(&c);
  assert_live(fx);
}

/* ---- auto detection -------------------------------------------------- */

static void test_auto_detect(void **state) {
  fixture *fx = *state;
  static const struct {
    const char *text;
    strata_corpus_format fmt;
    uint64_t tokens;
  } cases[] = {
      {"2\n3\n1\n2 3 4\n", STRATA_CORPUS_UCI, 4}, {"\n2\n\n3\n1\n2 3 4\n", STRATA_CORPUS_UCI, 4},
      {"1 0:1\n", STRATA_CORPUS_LDAC, 1},         {"0\n1 2:3\n", STRATA_CORPUS_LDAC, 3},
      {"0\n0\n1 2:3\n", STRATA_CORPUS_LDAC, 3},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fx->n_paths = 0;
    const char *path = write_tmp(fx, cases[k].text);
    strata_corpus a = {0}, b = {0};
    assert_int_equal(strata_corpus_read(path, STRATA_CORPUS_AUTO, 0, &a), 0);
    assert_int_equal(strata_corpus_read(path, cases[k].fmt, 0, &b), 0);
    assert_int_equal(a.n_tokens, cases[k].tokens);
    assert_int_equal(a.n_docs, b.n_docs);
    assert_int_equal(a.n_vocab, b.n_vocab);
    assert_memory_equal(a.doc_off, b.doc_off, (a.n_docs + 1) * sizeof *a.doc_off);
    assert_memory_equal(a.word, b.word, a.n_tokens * sizeof *a.word);
    strata_corpus_close(&a);
    strata_corpus_close(&b);
    unlink(path);
  }
  fx->n_paths = 0;
  /* Read as the other format, each fails: agreement above means detection
   * chose. */
  const char *uci = write_tmp(fx, "2\n3\n1\n2 3 4\n");
  strata_corpus c = {0};
  assert_int_equal(strata_corpus_read(uci, STRATA_CORPUS_LDAC, 0, &c), STRATA_EPARSE);
  const char *ldac = write_tmp(fx, "1 0:1\n");
  assert_int_equal(strata_corpus_read(ldac, STRATA_CORPUS_UCI, 0, &c), STRATA_EPARSE);
  assert_live(fx);
}

/* ---- vocabulary ------------------------------------------------------ */

static void test_vocab_good(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx, "apple\nbanana split\r\ncherry");
  strata_vocab v = {0};
  assert_int_equal(strata_vocab_read(path, &v), 0);
  assert_int_equal(v.n, 3);
  assert_string_equal(v.words[0], "apple");
  assert_string_equal(v.words[1], "banana split");
  assert_string_equal(v.words[2], "cherry");
  strata_vocab_close(&v);
  assert_null(v.words);
  assert_int_equal(v.n, 0);

  const char *gz = write_tmp_gz(fx, "a\nb\n");
  assert_int_equal(strata_vocab_read(gz, &v), 0);
  assert_int_equal(v.n, 2);
  assert_string_equal(v.words[1], "b");
  strata_vocab_close(&v);
  assert_live(fx);
}

static void test_vocab_bad(void **state) {
  fixture *fx = *state;
  static const struct {
    const char *text;
    int code;
    size_t line;
    const char *needle;
  } cases[] = {
      {"", STRATA_EEMPTY, 0, "no words"},           {"a\n\nb\n", STRATA_EPARSE, 2, "empty line"},
      {"a\nb\n\n", STRATA_EPARSE, 3, "empty line"}, {"a\r\n\r\n", STRATA_EPARSE, 2, "empty line"},
      {"  \n", STRATA_EPARSE, 1, "empty line"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fx->n_paths = 0;
    const char *path = write_tmp(fx, cases[k].text);
    strata_vocab v = {0};
    assert_int_equal(strata_vocab_read(path, &v), cases[k].code);
    char where[128];
    if (cases[k].line)
      snprintf(where, sizeof where, "%s:%zu: ", path, cases[k].line);
    else
      snprintf(where, sizeof where, "%s: ", path);
    const char *msg = strata_err_msg();
    if (strncmp(msg, where, strlen(where)) != 0) fail_msg("message '%s' lacks '%s'", msg, where);
    assert_non_null(strstr(msg, cases[k].needle));
    assert_null(v.words);
    assert_int_equal(v.n, 0);
    unlink(path);
    assert_live(fx);
  }
  fx->n_paths = 0;
  strata_vocab v = {0};
  assert_int_equal(strata_vocab_read("/nonexistent/strata/vocab.txt", &v), STRATA_ENOENT);
  assert_non_null(strstr(strata_err_msg(), "/nonexistent/strata/vocab.txt: cannot open"));
  assert_live(fx);
}

/* ---- bad input ------------------------------------------------------- */

static void expect_fail(const char *path, strata_corpus_format fmt, uint32_t vocab, int code,
                        size_t line, const char *needle) {
  strata_corpus c = {0};
  int rc = strata_corpus_read(path, fmt, vocab, &c);
  const char *msg = strata_err_msg();
  if (rc != code)
    fail_msg("%s as format %d: got %s (%s), want %s", path, (int)fmt, strata_err_name(rc), msg,
             strata_err_name(code));
  assert_msg_at(msg, path, line, needle);
  assert_null(c.doc_off);
  assert_null(c.word);
  assert_int_equal(c.n_tokens, 0);
  assert_int_equal(c.n_docs, 0);
}

static void test_missing_file(void **state) {
  fixture *fx = *state;
  char *path = tmp_name(fx);
  unlink(path);
  expect_fail(path, STRATA_CORPUS_AUTO, 0, STRATA_ENOENT, 0, "cannot open: No such file");
  expect_fail("/tmp", STRATA_CORPUS_UCI, 0, STRATA_ENOENT, 0, "cannot open");
  strata_corpus c = {0};
  assert_int_equal(strata_corpus_read(path, (strata_corpus_format)7, 0, &c), STRATA_EINVAL);
  assert_live(fx);
}

/* Why an integer beyond int64_t (ids and counts are int64_t) is refused. */
#define ABOVE_I64 " is above the largest supported, 9223372036854775807 (2^63 - 1)"
#define BELOW_I64 " is below the smallest supported, -9223372036854775808 (-2^63)"

static void test_bad_inputs(void **state) {
  fixture *fx = *state;
  enum { A = STRATA_CORPUS_AUTO, U = STRATA_CORPUS_UCI, L = STRATA_CORPUS_LDAC };
  static const struct {
    int fmt;
    uint32_t vocab;
    const char *text;
    int code;
    size_t line; /* 0: a whole-file message "FILE: ..." */
    const char *needle;
  } cases[] = {
      /* empty */
      {A, 0, "", STRATA_EEMPTY, 0, "no tokens"},
      {U, 0, "", STRATA_EEMPTY, 0, "no tokens"},
      {L, 0, "", STRATA_EEMPTY, 0, "no tokens"},
      {L, 0, "\n\n", STRATA_EEMPTY, 0, "no tokens"},
      {L, 0, "0\n0\n", STRATA_EEMPTY, 0, "no tokens"},
      {U, 0, "3\n5\n0\n", STRATA_EEMPTY, 0, "no tokens"},
      {A, 0, "0\n0\n0\n", STRATA_EEMPTY, 0, "no tokens"},
      /* UCI header */
      {U, 0, "3\n", STRATA_EPARSE, 1, "truncated file: the UCI header has 1 of its 3"},
      {U, 0, "3\n5\n", STRATA_EPARSE, 2, "has 2 of its 3"},
      {U, 0, "3 5\n5\n1\n", STRATA_EPARSE, 1, "document count D alone"},
      {U, 0, "3\nx\n1\n", STRATA_EPARSE, 2, "vocabulary size W 'x' is not an integer"},
      {U, 0, "3\n5\n-1\n", STRATA_EPARSE, 3, "entry count NNZ -1 out of range"},
      {U, 0, "4294967296\n5\n1\n", STRATA_EPARSE, 1, "document count D 4294967296 out of range"},
      {U, 0, "3\n5\n99999999999999999999\n", STRATA_EPARSE, 3,
       "entry count NNZ '99999999999999999999'" ABOVE_I64},
      /* UCI entries */
      {U, 0, "3\n5\n2\n1 1 1\n", STRATA_EPARSE, 4,
       "truncated file: 1 entries after the header, "
       "which declares 2"},
      {U, 0, "3\n5\n2\n1 1 1\n\n\n", STRATA_EPARSE, 6, "truncated file"},
      {A, 0, "3\n5\n1\n1 1 1\n2 2 2\n", STRATA_EPARSE, 5, "more entries than the 1"},
      {U, 0, "3\n5\n2\n1 1 1\n1 1\n", STRATA_EPARSE, 5,
       "expected 3 fields (docID wordID count), "
       "got 2"},
      {U, 0, "3\n5\n1\n1 1 1 1\n", STRATA_EPARSE, 4, "got 4"},
      {U, 0, "3\n5\n1\n0 1 1\n", STRATA_EPARSE, 4, "docID 0 out of range 1..3"},
      {U, 0, "3\n5\n1\n4 1 1\n", STRATA_EPARSE, 4, "docID 4 out of range 1..3"},
      {U, 0, "3\n5\n1\n-1 1 1\n", STRATA_EPARSE, 4, "docID -1"},
      {U, 0, "3\n5\n1\n1 6 1\n", STRATA_EPARSE, 4, "wordID 6 out of range 1..5"},
      {U, 0, "3\n5\n1\n1 0 1\n", STRATA_EPARSE, 4, "wordID 0 out of range"},
      {U, 4, "3\n5\n1\n1 5 1\n", STRATA_EPARSE, 4, "wordID 5 is beyond the vocabulary of 4 words"},
      {U, 0, "3\n5\n1\n1 2 0\n", STRATA_EPARSE, 4, "count 0 must be positive"},
      {U, 0, "3\n5\n1\n1 2 -2\n", STRATA_EPARSE, 4, "count -2 must be positive"},
      {U, 0, "3\n5\n1\n1 2 4294967296\n", STRATA_EPARSE, 4, "count 4294967296 is above"},
      {U, 0, "3\n5\n1\n1 2x 1\n", STRATA_EPARSE, 4, "wordID '2x' is not an integer"},
      {U, 0, "3\n5\n1\n1 2 1.5\n", STRATA_EPARSE, 4, "count '1.5'"},
      {U, 0, "3\n5\n1\n1 2 1\rx\n", STRATA_EPARSE, 4, "count"},
      {U, 0, "3\n5\n1\n99999999999999999999 2 1\n", STRATA_EPARSE, 4, ABOVE_I64},
      /* 2^64 - 1 fits 64 bits unsigned, but ids and counts are int64_t. */
      {U, 0, "3\n5\n1\n18446744073709551615 2 1\n", STRATA_EPARSE, 4,
       "docID '18446744073709551615'" ABOVE_I64},
      {U, 0, "3\n5\n1\n1 9223372036854775808 1\n", STRATA_EPARSE, 4,
       "wordID '9223372036854775808'" ABOVE_I64},
      {U, 0, "3\n5\n1\n1 9223372036854775807 1\n", STRATA_EPARSE, 4,
       "wordID 9223372036854775807 out of range 1..5"},
      {U, 0, "3\n5\n1\n-99999999999999999999 2 1\n", STRATA_EPARSE, 4,
       "docID '-99999999999999999999'" BELOW_I64},
      /* lda-c */
      {L, 0, "2 0:1\n", STRATA_EPARSE, 1, "declares 2 pairs but has 1"},
      {L, 0, "1 0:1\n1 0:1 1:1\n", STRATA_EPARSE, 2, "declares 1 pairs but has 2"},
      {A, 0, "1 0:1\n0 3:1\n", STRATA_EPARSE, 2, "declares 0 pairs but has 1"},
      {L, 0, "1 0:1\n\n1 2:1\n", STRATA_EPARSE, 2, "empty line"},
      {L, 0, "1 0:1\n  \n\n1 2:1\n", STRATA_EPARSE, 2, "empty line"},
      {L, 0, "1 0:1\n1 3\n", STRATA_EPARSE, 2, "pair 1 '3' is not id:count"},
      {L, 0, "2 0:1 1:2:3\n", STRATA_EPARSE, 1, "count '2:3' is not an integer"},
      {L, 0, "1 :1\n", STRATA_EPARSE, 1, "word id '' is not an integer"},
      {L, 0, "1 1:\n", STRATA_EPARSE, 1, "count '' is not an integer"},
      {L, 0, "1 x:1\n", STRATA_EPARSE, 1, "word id 'x'"},
      {L, 0, "x 1:1\n", STRATA_EPARSE, 1, "pair count 'x' is not an integer"},
      {L, 0, "-1\n", STRATA_EPARSE, 1, "negative pair count -1"},
      {L, 0, "1 -2:1\n", STRATA_EPARSE, 1, "negative word id -2"},
      {L, 0, "1 2:0\n", STRATA_EPARSE, 1, "count 0 for word 2 must be positive"},
      {L, 0, "1 0:1\n1 2:-3\n", STRATA_EPARSE, 2, "count -3 for word 2 must be positive"},
      {L, 5, "1 0:1\n1 5:1\n", STRATA_EPARSE, 2, "word id 5 is beyond the vocabulary of 5 words"},
      {L, 0, "1 4294967295:1\n", STRATA_EPARSE, 1, "word id 4294967295 is beyond"},
      {L, 0, "1 99999999999999999999:1\n", STRATA_EPARSE, 1,
       "word id '99999999999999999999'" ABOVE_I64},
      {L, 0, "1 1:99999999999999999999\n", STRATA_EPARSE, 1,
       "count '99999999999999999999'" ABOVE_I64},
      {L, 0, "1 18446744073709551615:1\n", STRATA_EPARSE, 1,
       "word id '18446744073709551615'" ABOVE_I64},
      {L, 0, "1 1:1\r\r\n", STRATA_EPARSE, 1, "count"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    fx->n_paths = 0;
    const char *path = write_tmp(fx, cases[k].text);
    expect_fail(path, (strata_corpus_format)cases[k].fmt, cases[k].vocab, cases[k].code,
                cases[k].line, cases[k].needle);
    unlink(path);
    assert_live(fx);
  }
  fx->n_paths = 0;
}

/* A line of control characters and a terminal escape sequence reaches the
 * message escaped, in both formats (plain and gzipped), the vocabulary and
 * the synthetic spec. */
static void test_garbage_quoted(void **state) {
  fixture *fx = *state;
  enum { A = STRATA_CORPUS_AUTO, U = STRATA_CORPUS_UCI, L = STRATA_CORPUS_LDAC };
  static const struct {
    int fmt;
    const char *text;
    size_t line;
    const char *needle;
  } cases[] = {
      {U, "3\n5\n1\n1 " GARBAGE " 1\n", 4, "wordID '" GARBAGE_QUOTED "' is not an integer"},
      {U, GARBAGE "\n5\n1\n", 1, "document count D '" GARBAGE_QUOTED "' is not an integer"},
      {A, "3\n5\n1\n1 2 " GARBAGE "\n", 4, "count '" GARBAGE_QUOTED "' is not an integer"},
      {L, "1 0:1\n" GARBAGE " 1:1\n", 2, "pair count '" GARBAGE_QUOTED "' is not an integer"},
      {L, "1 " GARBAGE "\n", 1, "pair 1 '" GARBAGE_QUOTED "' is not id:count"},
      {A, "1 " GARBAGE ":1\n", 1, "word id '" GARBAGE_QUOTED "' is not an integer"},
      {L, "1 1:" GARBAGE "\n", 1, "count '" GARBAGE_QUOTED "' is not an integer"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    for (int gz = 0; gz < 2; gz++) {
      fx->n_paths = 0;
      const char *path = gz ? write_tmp_gz(fx, cases[k].text) : write_tmp(fx, cases[k].text);
      expect_fail(path, (strata_corpus_format)cases[k].fmt, 0, STRATA_EPARSE, cases[k].line,
                  cases[k].needle);
      assert_quoted_msg(strata_err_msg(), GARBAGE_QUOTED);
      unlink(path);
      assert_live(fx);
    }
  }

  /* Vocabulary: a word with a control character is refused, quoted. */
  fx->n_paths = 0;
  const char *path = write_tmp(fx, "apple\n" GARBAGE "\ncherry\n");
  strata_vocab v = {0};
  assert_int_equal(strata_vocab_read(path, &v), STRATA_EPARSE);
  char where[128];
  snprintf(where, sizeof where, "%s:2: word '" GARBAGE_QUOTED "' holds a control character "
           "(byte 0x01 at column 1)", path);
  assert_quoted_msg(strata_err_msg(), where);
  assert_null(v.words);
  unlink(path);
  /* Tab and DEL are control characters too; bytes from 0x80 (UTF-8) are not. */
  fx->n_paths = 0;
  path = write_tmp(fx, "a\tb\n");
  assert_int_equal(strata_vocab_read(path, &v), STRATA_EPARSE);
  assert_quoted_msg(strata_err_msg(), "word 'a\\x09b' holds a control character (byte 0x09");
  unlink(path);
  fx->n_paths = 0;
  path = write_tmp(fx, "ok\nb\x7f\n");
  assert_int_equal(strata_vocab_read(path, &v), STRATA_EPARSE);
  assert_quoted_msg(strata_err_msg(), ":2: word 'b\\x7f'");
  unlink(path);
  fx->n_paths = 0;
  path = write_tmp(fx, "caf\xc3\xa9\nna\xc3\xafve\n");
  assert_int_equal(strata_vocab_read(path, &v), 0);
  assert_int_equal(v.n, 2);
  assert_string_equal(v.words[0], "caf\xc3\xa9");
  strata_vocab_close(&v);
  unlink(path);
  fx->n_paths = 0;

  /* The synthetic spec: key, value and a spec that is not one. */
  static const struct {
    const char *text, *needle;
  } specs[] = {
      {"synth:" GARBAGE "=1", "unknown key '" GARBAGE_QUOTED "'"},
      {"synth:docs=" GARBAGE, "bad value '" GARBAGE_QUOTED "' for 'docs'"},
      {"synth:" GARBAGE, "expected key=value, got '" GARBAGE_QUOTED "'"},
      {GARBAGE, "--data '" GARBAGE_QUOTED "': not a synthetic spec"},
  };
  for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
    strata_lda_synth sp;
    strata_lda_synth_defaults(&sp);
    int rc = strata_lda_synth_parse(specs[k].text, &sp);
    assert_int_equal(rc, STRATA_EUSAGE);
    assert_quoted_msg(strata_err_msg(), specs[k].needle);
  }
  strata_corpus_format f;
  assert_int_equal(strata_corpus_format_parse(GARBAGE, &f), STRATA_EUSAGE);
  assert_quoted_msg(strata_err_msg(), "'" GARBAGE_QUOTED "'");
  assert_live(fx);
}

static void test_bad_gzip(void **state) {
  fixture *fx = *state;
  /* A gzip stream cut short: its last bytes (and the trailer) are missing. */
  char text[4096];
  size_t len = 0;
  len += (size_t)snprintf(text, sizeof text, "3\n9\n300\n");
  for (int k = 0; k < 300; k++)
    len += (size_t)snprintf(text + len, sizeof text - len, "%d %d 1\n", 1 + k % 3, 1 + k % 9);
  (void)len;
  const char *gz = write_tmp_gz(fx, text);
  FILE *f = fopen(gz, "rb");
  assert_non_null(f);
  char bytes[4096];
  size_t n = fread(bytes, 1, sizeof bytes, f);
  fclose(f);
  assert_true(n > 40);
  const char *cut = write_tmp_len(fx, bytes, n - 12);
  strata_corpus c = {0};
  assert_int_equal(strata_corpus_read(cut, STRATA_CORPUS_UCI, 0, &c), STRATA_EPARSE);
  const char *msg = strata_err_msg();
  char where[80];
  snprintf(where, sizeof where, "%s:", cut);
  if (strncmp(msg, where, strlen(where)) != 0 || !strstr(msg, "truncated gzip"))
    fail_msg("message '%s' lacks '%s' or 'truncated gzip'", msg, where);
  assert_null(c.word);
  /* The whole one reads. */
  assert_int_equal(strata_corpus_read(gz, STRATA_CORPUS_AUTO, 0, &c), 0);
  assert_int_equal(c.n_tokens, 300);
  strata_corpus_close(&c);
  assert_live(fx);
}

/* Cut short or without its trailer, a gzip stream is refused by both
 * readers, naming the file, never read as a shorter corpus. */
static int read_fmt(const char *path, void *ctx) {
  strata_corpus c = {0};
  int rc = strata_corpus_read(path, *(const strata_corpus_format *)ctx, 0, &c);
  if (rc == 0) assert_true(c.n_tokens > 0);
  if (rc) assert_null(c.word);
  strata_corpus_close(&c);
  return rc;
}

static void test_gzip_cut_or_trailerless(void **state) {
  fixture *fx = *state;
  static char uci[16384], ldac[16384];
  size_t u = (size_t)snprintf(uci, sizeof uci, "40\n500\n400\n"), l = 0;
  for (int k = 0; k < 400; k++)
    u += (size_t)snprintf(uci + u, sizeof uci - u, "%d %d %d\n", 1 + k / 10, 1 + (k * 37) % 500,
                          1 + k % 3);
  for (int d = 0; d < 100; d++)
    l += (size_t)snprintf(ldac + l, sizeof ldac - l, "3 %d:1 %d:2 %d:1\n", d, 100 + d * 7 % 300,
                          400 + d);
  strata_corpus_format fmt = STRATA_CORPUS_UCI;
  assert_gzip_damage_refused(fx, uci, read_fmt, &fmt);
  fmt = STRATA_CORPUS_LDAC;
  assert_gzip_damage_refused(fx, ldac, read_fmt, &fmt);
}

/* ---- sizes checked before they are allocated ------------------------- */

/* A short file may declare or imply any size: a UCI header's D or W, an
 * lda-c word id (the vocabulary is 1 + the largest) or a count (tokens).
 * Each is refused at its line against the memory available (here a
 * --mem-limit of 64 MB), with the estimate, before the reader allocates
 * for it. With a caller's cost (LDA's at K = 5) the vocabulary counts too;
 * without one only the reader's own arrays (documents and tokens) do. */
static void test_sizes_refused(void **state) {
  fixture *fx = *state;
  strata_mem_set_limit(64000000);
  const strata_corpus_cost k5 = {.per_doc = 60, .per_word = 56, .per_token = 14,
                                 .what = "at K=5 topics", .hint = "lower --topics"};
  static const struct {
    const char *text;
    strata_corpus_format fmt;
    int plain; /* without a cost */
    size_t line;
    const char *what;
  } cases[] = {
      {"2\n4000000000\n1\n1 4000000000 1\n", STRATA_CORPUS_UCI, 0, 2,
       "vocabulary size W 4000000000: the corpus (2 documents, 4000000000 words, 0 tokens) at K=5 "
       "topics needs about 224.0 GB, but this host has 64.0 MB available (--mem-limit): lower "
       "--topics"},
      {"4000000000\n5\n1\n1 1 1\n", STRATA_CORPUS_AUTO, 1, 1,
       "document count D 4000000000: the corpus (4000000000 documents, 0 words, 0 tokens) needs "
       "about 32.0 GB, but this host has 64.0 MB available (--mem-limit)"},
      {"3\n5\n2\n1 1 1\n2 3 4000000000\n", STRATA_CORPUS_UCI, 0, 5,
       "count 4000000000: the corpus (3 documents, 5 words, 4000000001 tokens) at K=5 topics needs "
       "about 72.0 GB, but"},
      {"1 4000000000:1\n", STRATA_CORPUS_AUTO, 0, 1,
       "pair 4000000000:1: the corpus (1 document, 4000000001 words, 1 token) at K=5 topics"},
      {"1 0:2\n1 0:4000000000\n", STRATA_CORPUS_LDAC, 1, 2,
       "pair 0:4000000000: the corpus (2 documents, 1 word, 4000000002 tokens) needs about 32.0 GB"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const char *path = write_tmp(fx, cases[k].text);
    strata_corpus c = {0};
    int rc = strata_corpus_read_with(path, cases[k].fmt, 0, cases[k].plain ? NULL : &k5, &c);
    if (rc != STRATA_ENOMEM) fail_msg("case %zu: code %d, message '%s'", k, rc, strata_err_msg());
    assert_msg_at(strata_err_msg(), path, cases[k].line, cases[k].what);
    assert_null(c.word);
    assert_live(fx);
  }
  /* The hint names what to lower only when the caller's share is most of
   * the estimate: not for tokens. */
  assert_null(strstr(strata_err_msg(), "--topics"));
  /* A vocabulary of 1000 words fits; at 20000 topics (80 KB a word) not. */
  const char *path = write_tmp(fx, "1 999:1\n");
  strata_corpus c = {0};
  assert_int_equal(strata_corpus_read_with(path, STRATA_CORPUS_LDAC, 0, &k5, &c), 0);
  strata_corpus_close(&c);
  strata_corpus_cost k20000 = {.per_doc = 80000, .per_word = 80000, .per_token = 14,
                               .what = "at K=20000 topics", .hint = "lower --topics"};
  assert_int_equal(strata_corpus_read_with(path, STRATA_CORPUS_LDAC, 0, &k20000, &c),
                   STRATA_ENOMEM);
  assert_msg_at(strata_err_msg(), path, 1,
                "pair 999:1: the corpus (1 document, 1000 words, 1 token) at K=20000 topics needs "
                "about 80.1 MB, but this host has 64.0 MB available (--mem-limit): lower --topics");
  /* The generator, before it allocates. */
  strata_lda_synth s;
  strata_lda_synth_defaults(&s);
  s.vocab = 4000000000u;
  assert_int_equal(strata_lda_synth_generate_with(&s, &k5, &c), STRATA_ENOMEM);
  const char *want = "--data synth: 2000 documents of mean length 100, 4000000000 words and 20 "
                     "topics at K=5 topics need about ";
  if (strncmp(strata_err_msg(), want, strlen(want)) != 0) fail_msg("message '%s'", strata_err_msg());
  assert_null(c.word);
  /* Without the limit, the host's memory: a 10-word corpus reads. */
  strata_mem_set_limit(0);
  assert_int_equal(strata_corpus_read_with(path, STRATA_CORPUS_LDAC, 0, &k5, &c), 0);
  strata_corpus_close(&c);
  assert_live(fx);
}

/* ---- a line longer than the read buffer ------------------------------ */

static void test_long_line(void **state) {
  fixture *fx = *state;
  enum { PAIRS = 300000 };
  size_t cap = (size_t)PAIRS * 16 + 64, len = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  len += (size_t)snprintf(text, cap, "1 7:2\n%d", PAIRS);
  for (int k = 0; k < PAIRS; k++) len += (size_t)snprintf(text + len, cap - len, " %d:1", k);
  len += (size_t)snprintf(text + len, cap - len, "\n");
  const char *path = write_tmp_len(fx, text, len);
  free(text);
  strata_corpus c = {0};
  assert_int_equal(strata_corpus_read(path, STRATA_CORPUS_AUTO, 0, &c), 0);
  assert_int_equal(c.n_docs, 2);
  assert_int_equal(c.n_tokens, PAIRS + 2);
  assert_int_equal(c.n_vocab, PAIRS);
  for (int k = 0; k < PAIRS; k++) assert_int_equal(c.word[2 + k], k);
  strata_corpus_close(&c);
  assert_live(fx);
}

/* ---- allocation failure at every step leaves nothing behind ---------- */

static void fail_every_step(fixture *fx, const char *path, strata_corpus_format fmt,
                            uint64_t tokens) {
  int failures = 0;
  for (long n = 1;; n++) {
    strata_corpus c = {0};
    strata_alloc_fail_after(n);
    int rc = strata_corpus_read(path, fmt, 0, &c);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      assert_int_equal(c.n_tokens, tokens);
      strata_corpus_close(&c);
      break;
    }
    if (rc != STRATA_ENOMEM)
      fail_msg("step %ld: %s (%s)", n, strata_err_name(rc), strata_err_msg());
    assert_non_null(strstr(strata_err_msg(), path));
    assert_null(c.word);
    assert_null(c.doc_off);
    assert_live(fx);
    failures++;
    assert_true(n < 1000);
  }
  assert_true(failures >= 3);
}

static void test_alloc_failure(void **state) {
  fixture *fx = *state;
  enum { DOCS = 400 };
  static char uci[DOCS * 64], ldac[DOCS * 64];
  size_t lu = (size_t)snprintf(uci, sizeof uci, "%d\n50\n%d\n", DOCS, DOCS * 3);
  size_t ll = 0;
  for (int d = 0; d < DOCS; d++) {
    for (int j = 0; j < 3; j++)
      lu += (size_t)snprintf(uci + lu, sizeof uci - lu, "%d %d %d\n", d + 1, 1 + (d + 7 * j) % 50,
                             1 + j);
    ll += (size_t)snprintf(ldac + ll, sizeof ldac - ll, "3 %d:1 %d:2 %d:3\n", d % 50, (d + 7) % 50,
                           (d + 14) % 50);
  }
  fail_every_step(fx, write_tmp(fx, uci), STRATA_CORPUS_UCI, DOCS * 6);
  fail_every_step(fx, write_tmp_gz(fx, uci), STRATA_CORPUS_AUTO, DOCS * 6);
  fail_every_step(fx, write_tmp(fx, ldac), STRATA_CORPUS_LDAC, DOCS * 6);

  const char *vpath = write_tmp(fx, "alpha\nbeta\ngamma\ndelta\n");
  int failures = 0;
  for (long n = 1;; n++) {
    strata_vocab v = {0};
    strata_alloc_fail_after(n);
    int rc = strata_vocab_read(vpath, &v);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      assert_int_equal(v.n, 4);
      strata_vocab_close(&v);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    assert_non_null(strstr(strata_err_msg(), vpath));
    assert_null(v.words);
    assert_live(fx);
    failures++;
    assert_true(n < 100);
  }
  assert_true(failures >= 5);

  strata_lda_synth s;
  strata_lda_synth_defaults(&s);
  s.docs = 50;
  s.vocab = 300;
  failures = 0;
  for (long n = 1;; n++) {
    strata_corpus c = {0};
    strata_alloc_fail_after(n);
    int rc = strata_lda_synth_generate(&s, &c);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      strata_corpus_close(&c);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    assert_non_null(strstr(strata_err_msg(), "synth"));
    assert_null(c.word);
    assert_null(c.true_topic);
    assert_null(c.doc_off);
    assert_live(fx);
    failures++;
    assert_true(n < 100);
  }
  assert_true(failures >= 5);
  assert_live(fx);
}

/* A count expands into that many tokens: when they do not fit, the message
 * names the line and the pair that asked (found by fuzz_corpus, whose input
 * "1 0:92233854775807" read "out of memory for 0 tokens in 0 documents"). */
static void test_ldac_count_out_of_memory(void **state) {
  fixture *fx = *state;
  const char *path = write_tmp(fx, "1 0:5\n2 1:1 2:1000\n");
  int named = 0;
  for (long n = 1;; n++) {
    strata_corpus c = {0};
    strata_alloc_fail_after(n);
    int rc = strata_corpus_read(path, STRATA_CORPUS_LDAC, 0, &c);
    strata_alloc_fail_after(0);
    if (rc == 0) {
      assert_int_equal(c.n_tokens, 1006);
      strata_corpus_close(&c);
      break;
    }
    assert_int_equal(rc, STRATA_ENOMEM);
    if (strstr(strata_err_msg(), "1006 tokens (count 1000 of word 2)")) {
      assert_msg_at(strata_err_msg(), path, 2, NULL);
      named++;
    }
    assert_live(fx);
    assert_true(n < 100);
  }
  assert_int_equal(named, 1);
}

/* ---- synthetic spec -------------------------------------------------- */

/* Field by field: the struct has padding, which memcmp would compare. */
static void assert_synth_equal(const strata_lda_synth *a, const strata_lda_synth *b) {
  assert_int_equal(a->docs, b->docs);
  assert_int_equal(a->len, b->len);
  assert_int_equal(a->vocab, b->vocab);
  assert_int_equal(a->topics, b->topics);
  assert_true(a->alpha == b->alpha);
  assert_true(a->beta == b->beta);
  assert_true(a->seed == b->seed);
}

static void test_synth_parse_good(void **state) {
  fixture *fx = *state;
  strata_lda_synth s, d;
  memset(&d, 0xff, sizeof d);
  strata_lda_synth_defaults(&d);
  assert_int_equal(d.docs, 2000);
  assert_int_equal(d.len, 100);
  assert_int_equal(d.vocab, 5000);
  assert_int_equal(d.topics, 20);
  assert_true(d.alpha == 0.1);
  assert_true(d.beta == 0.01);
  assert_true(d.seed == 1);

  s = d;
  assert_int_equal(strata_lda_synth_parse("synth", &s), 0);
  assert_synth_equal(&s, &d);
  assert_int_equal(strata_lda_synth_parse("synth:", &s), 0);
  assert_synth_equal(&s, &d);

  assert_int_equal(strata_lda_synth_parse("synth:docs=10,len=20,vocab=30,topics=4,alpha=0.5,"
                                          "beta=1e-3,seed=18446744073709551615",
                                          &s),
                   0);
  assert_int_equal(s.docs, 10);
  assert_int_equal(s.len, 20);
  assert_int_equal(s.vocab, 30);
  assert_int_equal(s.topics, 4);
  assert_true(s.alpha == 0.5);
  assert_true(s.beta == 1e-3);
  assert_true(s.seed == UINT64_MAX);

  s = d;
  assert_int_equal(strata_lda_synth_parse("synth:seed=0,topics=7,topics=9,docs=4294967295", &s), 0);
  assert_true(s.seed == 0);
  assert_int_equal(s.topics, 9); /* the last of a repeated key wins */
  assert_int_equal(s.docs, UINT32_MAX);
  assert_int_equal(s.len, d.len);
  assert_true(s.alpha == d.alpha);
  assert_live(fx);
}

static void test_synth_parse_bad(void **state) {
  fixture *fx = *state;
  static const struct {
    const char *text;
    const char *needle;
  } cases[] = {
      {"synth:foo=1", "--data synth: unknown key 'foo'"},
      {"synth:users=5", "unknown key 'users'"},
      {"synth:docs=x", "--data synth: bad value 'x' for 'docs'"},
      {"synth:docs=", "bad value '' for 'docs'"},
      {"synth:docs=0", "bad value '0' for 'docs'"},
      {"synth:docs=-5", "bad value '-5' for 'docs'"},
      {"synth:docs=4294967296", "bad value '4294967296' for 'docs'"},
      {"synth:len=0", "for 'len'"},
      {"synth:len= 5", "for 'len'"},
      {"synth:vocab=0", "for 'vocab'"},
      {"synth:topics=0", "for 'topics'"},
      {"synth:topics=1e3", "for 'topics'"},
      {"synth:alpha=0", "bad value '0' for 'alpha' (need a finite number > 0)"},
      {"synth:alpha=-1", "for 'alpha'"},
      {"synth:alpha=nan", "for 'alpha'"},
      {"synth:beta=inf", "for 'beta'"},
      {"synth:beta=0.1x", "for 'beta'"},
      {"synth:beta= 0.1", "for 'beta'"},
      {"synth:seed=-1", "for 'seed'"},
      {"synth:seed=18446744073709551616", "for 'seed'"},
      {"synth:docs", "expected key=value, got 'docs'"},
      {"synth:docs=5,,len=3", "empty field"},
      {"synth:docs=5,", "empty field"},
      {"synth:,", "empty field after 'synth:'"},
      /* A long spec is quoted by its last STRATA_QUOTE_MAX bytes before the gap. */
      {"synth:docs=1,len=2,vocab=3,topics=4,alpha=0.5,,beta=1",
       "empty field after '...en=2,vocab=3,topics=4,alpha=0.5,'"},
      {"synthetic:docs=5", "not a synthetic spec"},
      {"ap.dat", "not a synthetic spec"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    strata_lda_synth s, d;
    strata_lda_synth_defaults(&d);
    s = d;
    int rc = strata_lda_synth_parse(cases[k].text, &s);
    if (rc != STRATA_EUSAGE)
      fail_msg("'%s': got %s, want STRATA_EUSAGE", cases[k].text, strata_err_name(rc));
    if (!strstr(strata_err_msg(), cases[k].needle))
      fail_msg("'%s': message '%s' lacks '%s'", cases[k].text, strata_err_msg(), cases[k].needle);
    assert_null(strchr(strata_err_msg(), '\n'));
    assert_synth_equal(&s, &d); /* a rejected spec leaves the values alone */
  }
  assert_live(fx);
}

/* ---- generation ------------------------------------------------------ */

static void assert_corpus_equal(const strata_corpus *a, const strata_corpus *b) {
  assert_int_equal(a->n_docs, b->n_docs);
  assert_int_equal(a->n_vocab, b->n_vocab);
  assert_int_equal(a->n_tokens, b->n_tokens);
  assert_memory_equal(a->doc_off, b->doc_off, (a->n_docs + 1) * sizeof *a->doc_off);
  assert_memory_equal(a->word, b->word, a->n_tokens * sizeof *a->word);
  assert_memory_equal(a->true_topic, b->true_topic, a->n_tokens * sizeof *a->true_topic);
}

static void check_synth(const strata_lda_synth *s, const strata_corpus *c) {
  assert_int_equal(c->n_docs, s->docs);
  assert_int_equal(c->n_vocab, s->vocab);
  assert_non_null(c->true_topic);
  assert_int_equal(c->doc_off[0], 0);
  for (uint32_t d = 0; d < c->n_docs; d++) assert_true(c->doc_off[d + 1] > c->doc_off[d]);
  assert_int_equal(c->doc_off[c->n_docs], c->n_tokens);
  for (uint64_t t = 0; t < c->n_tokens; t++) {
    assert_true(c->word[t] < s->vocab);
    assert_true(c->true_topic[t] >= 0 && (uint32_t)c->true_topic[t] < s->topics);
  }
}

static void test_synth_deterministic(void **state) {
  fixture *fx = *state;
  strata_lda_synth s;
  strata_lda_synth_defaults(&s);
  s.docs = 300;
  s.seed = 42;
  strata_corpus a = {0}, b = {0}, c = {0};
  assert_int_equal(strata_lda_synth_generate(&s, &a), 0);
  assert_int_equal(strata_lda_synth_generate(&s, &b), 0);
  check_synth(&s, &a);
  assert_corpus_equal(&a, &b);
  s.seed = 43;
  assert_int_equal(strata_lda_synth_generate(&s, &c), 0);
  check_synth(&s, &c);
  assert_true(c.n_tokens != a.n_tokens || memcmp(c.word, a.word, a.n_tokens * sizeof *a.word) != 0);
  assert_true(memcmp(c.doc_off, a.doc_off, (a.n_docs + 1) * sizeof *a.doc_off) != 0);
  strata_corpus_close(&a);
  strata_corpus_close(&b);
  strata_corpus_close(&c);
  assert_null(c.true_topic);
  assert_live(fx);
}

static void test_synth_statistics(void **state) {
  fixture *fx = *state;
  strata_lda_synth s = {
      .docs = 4000, .len = 50, .vocab = 2000, .topics = 10, .alpha = 0.1, .beta = 0.01, .seed = 5};
  strata_corpus c = {0};
  assert_int_equal(strata_lda_synth_generate(&s, &c), 0);
  check_synth(&s, &c);
  /* 200000 tokens expected, Poisson sd sqrt(200000) = 450: within 2%. */
  double want = (double)s.docs * s.len;
  assert_true(fabs((double)c.n_tokens - want) < 0.02 * want);
  /* Document lengths: Poisson, so variance about the mean (50). */
  double sq = 0, mean = (double)c.n_tokens / s.docs;
  for (uint32_t d = 0; d < s.docs; d++) {
    double n = (double)(c.doc_off[d + 1] - c.doc_off[d]);
    sq += (n - mean) * (n - mean);
  }
  double var = sq / s.docs;
  assert_true(var > 40 && var < 60);

  /* alpha = 0.1 over 10 topics: a document is dominated by one or two
   * topics (E[max theta] is above 0.6); with a flat mixture it would be
   * about 0.25 for 50 tokens. */
  double top_share = 0;
  for (uint32_t d = 0; d < s.docs; d++) {
    uint32_t cnt[10] = {0}, mx = 0;
    for (uint64_t t = c.doc_off[d]; t < c.doc_off[d + 1]; t++) cnt[c.true_topic[t]]++;
    for (int k = 0; k < 10; k++) mx = cnt[k] > mx ? cnt[k] : mx;
    top_share += (double)mx / (double)(c.doc_off[d + 1] - c.doc_off[d]);
  }
  top_share /= s.docs;
  assert_true(top_share > 0.55);

  /* beta = 0.01 over 2000 words: a topic's words are concentrated, so far
   * fewer distinct words per topic than tokens drawn from it. Every topic is
   * used. */
  uint32_t *seen = calloc((size_t)s.topics * s.vocab, sizeof *seen);
  uint64_t per_topic[10] = {0};
  assert_non_null(seen);
  for (uint64_t t = 0; t < c.n_tokens; t++) {
    seen[(size_t)c.true_topic[t] * s.vocab + c.word[t]]++;
    per_topic[c.true_topic[t]]++;
  }
  for (uint32_t k = 0; k < s.topics; k++) {
    uint32_t distinct = 0, top = 0;
    for (uint32_t w = 0; w < s.vocab; w++) {
      distinct += seen[(size_t)k * s.vocab + w] > 0;
      top = seen[(size_t)k * s.vocab + w] > top ? seen[(size_t)k * s.vocab + w] : top;
    }
    assert_true(per_topic[k] > 1000);
    assert_true(distinct < s.vocab / 2);
    assert_true(top > per_topic[k] / 100);
  }
  free(seen);
  strata_corpus_close(&c);

  /* Mean length 1 and tiny shapes still give valid, non-empty documents. */
  s = (strata_lda_synth){
      .docs = 1000, .len = 1, .vocab = 1, .topics = 1, .alpha = 1e-3, .beta = 1e-3, .seed = 9};
  assert_int_equal(strata_lda_synth_generate(&s, &c), 0);
  check_synth(&s, &c);
  strata_corpus_close(&c);
  s = (strata_lda_synth){
      .docs = 200, .len = 5, .vocab = 50, .topics = 300, .alpha = 5, .beta = 2, .seed = 9};
  assert_int_equal(strata_lda_synth_generate(&s, &c), 0);
  check_synth(&s, &c);
  strata_corpus_close(&c);

  /* Small means take the other Poisson sampler: max(1, Poisson(3)) has mean
   * 3 + e^-3 = 3.0498 (sd of the average 0.012 over 20000 documents). */
  s = (strata_lda_synth){
      .docs = 20000, .len = 3, .vocab = 20, .topics = 2, .alpha = 1, .beta = 1, .seed = 4};
  assert_int_equal(strata_lda_synth_generate(&s, &c), 0);
  check_synth(&s, &c);
  assert_true(fabs((double)c.n_tokens / s.docs - 3.0498) < 0.06);
  strata_corpus_close(&c);

  /* Vanishing shapes: each document keeps to one topic and each topic to
   * one word, so a document repeats one word. No NaN on the way. */
  s = (strata_lda_synth){
      .docs = 300, .len = 20, .vocab = 50, .topics = 4, .alpha = 1e-300, .beta = 5e-324, .seed = 3};
  assert_int_equal(strata_lda_synth_generate(&s, &c), 0);
  check_synth(&s, &c);
  for (uint32_t d = 0; d < s.docs; d++)
    for (uint64_t t = c.doc_off[d] + 1; t < c.doc_off[d + 1]; t++) {
      assert_int_equal(c.word[t], c.word[c.doc_off[d]]);
      assert_int_equal(c.true_topic[t], c.true_topic[c.doc_off[d]]);
    }
  strata_corpus_close(&c);

  /* Huge shapes: flat mixtures, every topic and nearly every word in use. */
  s = (strata_lda_synth){
      .docs = 500, .len = 40, .vocab = 30, .topics = 3, .alpha = 1e300, .beta = 1e300, .seed = 3};
  assert_int_equal(strata_lda_synth_generate(&s, &c), 0);
  check_synth(&s, &c);
  uint32_t used[30] = {0}, topic_used[3] = {0};
  for (uint64_t t = 0; t < c.n_tokens; t++) {
    used[c.word[t]] = 1;
    topic_used[c.true_topic[t]]++;
  }
  for (int w = 0; w < 30; w++) assert_true(used[w]);
  for (int k = 0; k < 3; k++) assert_in_range(topic_used[k], c.n_tokens / 4, c.n_tokens / 2);
  strata_corpus_close(&c);
  assert_live(fx);
}

static void test_synth_invalid(void **state) {
  fixture *fx = *state;
  strata_lda_synth bad[6];
  for (int k = 0; k < 6; k++) strata_lda_synth_defaults(&bad[k]);
  bad[0].docs = 0;
  bad[1].len = 0;
  bad[2].vocab = 0;
  bad[3].topics = 0;
  bad[4].alpha = 0;
  bad[5].beta = NAN;
  for (int k = 0; k < 6; k++) {
    strata_corpus c = {0};
    assert_int_equal(strata_lda_synth_generate(&bad[k], &c), STRATA_EINVAL);
    assert_null(c.word);
    assert_non_null(strstr(strata_err_msg(), "synth: invalid spec"));
  }
  /* Too large for memory: an error, not a crash. */
  strata_lda_synth huge;
  strata_lda_synth_defaults(&huge);
  huge.topics = INT32_MAX;
  huge.vocab = UINT32_MAX;
  strata_corpus c = {0};
  assert_int_equal(strata_lda_synth_generate(&huge, &c), STRATA_ENOMEM);
  assert_null(c.doc_off);
  assert_live(fx);
}

/* ---- randomised: fresh specs, reproducible from the printed seed --------- */

static void test_synth_random_specs(void **state) {
  fixture *fx = *state;
  const char *env = getenv("STRATA_TEST_SEED");
  unsigned long long seed = env && *env
                                ? strtoull(env, NULL, 0)
                                : (unsigned long long)time(NULL) ^ (unsigned long long)clock();
  print_message("seed=%llu\n", seed);
  strata_rng rng;
  strata_rng_seed(&rng, seed);
  for (int round = 0; round < 20; round++) {
    strata_lda_synth s = {
        .docs = 1 + (uint32_t)strata_rng_below(&rng, 200),
        .len = 1 + (uint32_t)strata_rng_below(&rng, 60),
        .vocab = 1 + (uint32_t)strata_rng_below(&rng, 500),
        .topics = 1 + (uint32_t)strata_rng_below(&rng, 30),
        .alpha = 0.001 + 3 * strata_rng_uniform(&rng),
        .beta = 0.001 + 3 * strata_rng_uniform(&rng),
        .seed = strata_rng_next(&rng),
    };
    strata_corpus a = {0}, b = {0};
    assert_int_equal(strata_lda_synth_generate(&s, &a), 0);
    check_synth(&s, &a);
    assert_int_equal(strata_lda_synth_generate(&s, &b), 0);
    assert_corpus_equal(&a, &b);

    /* The spec survives a round trip through its text form. */
    char text[256];
    snprintf(text, sizeof text,
             "synth:docs=%u,len=%u,vocab=%u,topics=%u,alpha=%.17g,beta=%.17g,seed=%llu", s.docs,
             s.len, s.vocab, s.topics, s.alpha, s.beta, (unsigned long long)s.seed);
    strata_lda_synth p;
    strata_lda_synth_defaults(&p);
    assert_int_equal(strata_lda_synth_parse(text, &p), 0);
    assert_synth_equal(&p, &s);
    strata_corpus_close(&a);
    strata_corpus_close(&b);
  }
  assert_live(fx);
}

/* ---- 10M tokens in a few seconds ------------------------------------- */

static void test_synth_speed(void **state) {
  fixture *fx = *state;
  strata_lda_synth s = {.docs = 100000,
                        .len = 100,
                        .vocab = 10000,
                        .topics = 100,
                        .alpha = 0.1,
                        .beta = 0.01,
                        .seed = 1};
  strata_corpus c = {0};
  double t0 = strata_now();
  assert_int_equal(strata_lda_synth_generate(&s, &c), 0);
  double dt = strata_now() - t0;
  print_message("generated %llu tokens in %.2f s\n", (unsigned long long)c.n_tokens, dt);
  double want = 1e7;
  assert_true(fabs((double)c.n_tokens - want) < 0.01 * want);
  uint32_t max_w = 0;
  int32_t max_z = 0;
  for (uint64_t t = 0; t < c.n_tokens; t++) {
    max_w = c.word[t] > max_w ? c.word[t] : max_w;
    max_z = c.true_topic[t] > max_z ? c.true_topic[t] : max_z;
  }
  assert_true(max_w < s.vocab);
  assert_true(max_z < (int32_t)s.topics);
  strata_corpus_close(&c);
  assert_live(fx);
}

/* ---- real data (skipped when the shared data folder is absent) ------- */

static void test_uci_kos(void **state) {
  fixture *fx = *state;
  const char *path = STRATA_SHARED_DATA "/uci-bow-kos/docword.kos.txt.gz";
  const char *vpath = STRATA_SHARED_DATA "/uci-bow-kos/vocab.kos.txt";
  if (!have_file(path)) skip();
  strata_corpus c = {0};
  assert_int_equal(strata_corpus_read(path, STRATA_CORPUS_AUTO, 0, &c), 0);
  assert_int_equal(c.n_docs, 3430);
  assert_int_equal(c.n_vocab, 6906);
  assert_int_equal(c.n_tokens, 467714);
  assert_int_equal(c.doc_off[0], 0);
  /* The file opens with "1 61 2 / 1 76 1". */
  assert_int_equal(c.word[0], 60);
  assert_int_equal(c.word[1], 60);
  assert_int_equal(c.word[2], 75);
  for (uint64_t t = 0; t < c.n_tokens; t++) assert_true(c.word[t] < c.n_vocab);
  strata_corpus_close(&c);
  if (have_file(vpath)) {
    strata_vocab v = {0};
    assert_int_equal(strata_vocab_read(vpath, &v), 0);
    assert_int_equal(v.n, 6906);
    assert_int_equal(strata_corpus_read(path, STRATA_CORPUS_UCI, v.n, &c), 0);
    assert_int_equal(c.n_tokens, 467714);
    strata_corpus_close(&c);
    strata_vocab_close(&v);
  }
  assert_live(fx);
}

static void test_ldac_ap(void **state) {
  fixture *fx = *state;
  const char *path = STRATA_SHARED_DATA "/lda-c-ap/ap.dat";
  const char *vpath = STRATA_SHARED_DATA "/lda-c-ap/vocab.txt";
  if (!have_file(path)) skip();
  strata_corpus c = {0};
  assert_int_equal(strata_corpus_read(path, STRATA_CORPUS_AUTO, 0, &c), 0);
  assert_int_equal(c.n_docs, 2246);
  assert_int_equal(c.n_tokens, 435838);
  assert_int_equal(c.n_vocab, 10473); /* every term is used */
  /* The file opens with "186 0:1 6144:1 3586:2". */
  assert_int_equal(c.word[0], 0);
  assert_int_equal(c.word[1], 6144);
  assert_int_equal(c.word[2], 3586);
  assert_int_equal(c.word[3], 3586);
  strata_corpus_close(&c);
  if (have_file(vpath)) {
    strata_vocab v = {0};
    assert_int_equal(strata_vocab_read(vpath, &v), 0);
    assert_int_equal(v.n, 10473);
    assert_string_equal(v.words[0], "i");
    assert_string_equal(v.words[1], "new");
    assert_int_equal(strata_corpus_read(path, STRATA_CORPUS_LDAC, v.n, &c), 0);
    assert_int_equal(c.n_tokens, 435838);
    strata_corpus_close(&c);
    strata_vocab_close(&v);
  }
  assert_live(fx);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_format_names),     T(test_uci_good),        T(test_uci_unsorted),
      T(test_ldac_good),        T(test_auto_detect),     T(test_vocab_good),
      T(test_vocab_bad),        T(test_missing_file),    T(test_bad_inputs),
      T(test_bad_gzip),         T(test_long_line),       T(test_alloc_failure),
      T(test_ldac_count_out_of_memory), T(test_gzip_cut_or_trailerless), T(test_sizes_refused),
      T(test_garbage_quoted), T(test_synth_parse_good), T(test_synth_parse_bad), T(test_synth_deterministic),
      T(test_synth_statistics), T(test_synth_invalid),   T(test_synth_random_specs),
      T(test_synth_speed),      T(test_uci_kos),         T(test_ldac_ap),
  };
  return cmocka_run_group_tests_name("corpus", tests, NULL, NULL);
}
