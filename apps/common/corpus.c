#define _GNU_SOURCE
#include "strata/apps/corpus.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/core.h"
#include "apps/common/lines.h"
#include "apps/common/spec.h"

/* ---- formats --------------------------------------------------------- */

static const char *const format_names[] = {"auto", "uci", "ldac"};
#define N_FORMATS (sizeof format_names / sizeof format_names[0])

int strata_corpus_format_parse(const char *name, strata_corpus_format *out) {
  for (size_t i = 0; i < N_FORMATS; i++) {
    if (strcmp(name, format_names[i]) == 0) {
      *out = (strata_corpus_format)i;
      return 0;
    }
  }
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE, "unknown corpus format '%s' (expected auto, uci or ldac)",
                        strata_quote(q, sizeof q, name, strlen(name)));
}

void strata_corpus_close(strata_corpus *c) {
  if (!c) return;
  strata_free(c->doc_off);
  strata_free(c->word);
  strata_free(c->true_topic);
  memset(c, 0, sizeof *c);
}

/* ---- auto detection -------------------------------------------------- */

/* UCI opens with three lines of one integer each (D, W, NNZ); an lda-c line
 * holds a count and then pairs. Blank lines are skipped, as the UCI reader
 * does. Reads from the start and rewinds. */
static int detect_format(strata_lines *rd, strata_corpus_format *fmt) {
  const char *line;
  size_t len;
  int ints = 0, rc = 0;
  *fmt = STRATA_CORPUS_LDAC;
  while (ints < 3 && (rc = strata_lines_next(rd, &line, &len)) > 0) {
    if (strata_field_blank(line, line + len)) continue;
    const char *s = line, *e = line + len, *fp, *fe, *gp, *ge;
    int64_t v;
    if (!strata_field_next(&s, e, &fp, &fe) || strata_field_next(&s, e, &gp, &ge) ||
        strata__scan_i64(fp, fe, &v) != STRATA__NUM_OK)
      break;
    ints++;
  }
  if (rc < 0) return rc;
  if (ints == 3) *fmt = STRATA_CORPUS_UCI;
  return strata_lines_rewind(rd);
}

/* ---- memory ---------------------------------------------------------- */

static const strata_corpus_cost no_cost = {0, 0, 0, NULL, NULL};

/* The estimate of strata_corpus_cost for D documents, V words and T tokens:
 * doc_off and word (8 and 4 bytes each) and the caller's share, plus
 * `extra` bytes of the reader's own (a growing array's spare capacity, a UCI
 * file's entries). */
static double corpus_need(const strata_corpus_cost *k, double docs, double words, double tokens,
                          double extra) {
  return docs * (8 + k->per_doc) + words * k->per_word + tokens * (4 + k->per_token) + extra;
}

static const char *plural(uint64_t n) { return n == 1 ? "" : "s"; }

/* strata_lines_fits for the estimate, naming what the line declared (the
 * printf-formatted why: "word id 4000000000") and the corpus it makes. */
static int corpus_fits(const strata_lines *rd, const strata_corpus_cost *k, uint64_t docs,
                       uint64_t words, uint64_t tokens, double extra, const char *why, ...)
    STRATA_PRINTF(7, 8);
static int corpus_fits(const strata_lines *rd, const strata_corpus_cost *k, uint64_t docs,
                       uint64_t words, uint64_t tokens, double extra, const char *why, ...) {
  double need = corpus_need(k, (double)docs, (double)words, (double)tokens, extra);
  if (!rd->budget.avail || need <= (double)rd->budget.avail) return 0;
  char what[128];
  va_list ap;
  va_start(ap, why);
  vsnprintf(what, sizeof what, why, ap);
  va_end(ap);
  /* The hint names what sizes the caller's share: no help when the tokens
   * are most of the estimate. */
  double share = (double)docs * k->per_doc + (double)words * k->per_word;
  return strata_lines_fits(rd, need, 2 * share >= need ? k->hint : NULL,
                           "%s: the corpus (%llu document%s, %llu word%s, %llu token%s)%s%s needs",
                           what, (unsigned long long)docs, plural(docs), (unsigned long long)words,
                           plural(words), (unsigned long long)tokens, plural(tokens),
                           k->what ? " " : "", k->what ? k->what : "");
}

/* ---- UCI ------------------------------------------------------------- */

typedef struct {
  uint32_t doc, word, count;
} uci_entry;

static const char *const uci_header_names[] = {"document count D", "vocabulary size W",
                                               "entry count NNZ"};

/* Entries are kept until the end so that documents can be grouped by id
 * whatever order the file lists them in (12 bytes per entry while reading);
 * one counting pass then lays the tokens out document by document. */
static int read_uci(strata_lines *rd, uint32_t vocab_size, const strata_corpus_cost *cost,
                    strata_corpus *c) {
  int rc = 0;
  uci_entry *ent = NULL;
  size_t n_ent = 0, cap = 0;
  uint64_t n_tok = 0; /* the counts so far */
  int64_t head[3] = {0, 0, 0};
  int n_head = 0;
  const char *line;
  size_t len;

  while ((rc = strata_lines_next(rd, &line, &len)) > 0) {
    if (strata_field_blank(line, line + len)) continue;
    const char *s = line, *e = line + len;
    const char *f[3][2];
    int nf = 0;
    const char *fp, *fe;
    while (strata_field_next(&s, e, &fp, &fe)) {
      if (nf < 3) {
        f[nf][0] = fp;
        f[nf][1] = fe;
      }
      nf++;
    }
    if (n_head < 3) {
      if (nf != 1) {
        rc = strata_err_set(STRATA_EPARSE,
                            "%s:%zu: expected the %s alone on the line (UCI header: D, W, NNZ), "
                            "got %d fields",
                            rd->path, rd->lineno, uci_header_names[n_head], nf);
        goto fail;
      }
      if ((rc = strata_lines_scan_i64(rd, uci_header_names[n_head], f[0][0], f[0][1],
                                       &head[n_head])))
        goto fail;
      if (head[n_head] < 0 || (n_head < 2 && head[n_head] > (int64_t)UINT32_MAX - 1)) {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: %s %lld out of range 0..%u", rd->path,
                            rd->lineno, uci_header_names[n_head], (long long)head[n_head],
                            UINT32_MAX - 1);
        goto fail;
      }
      /* D sizes doc_off at once, and W the caller's vocabulary. */
      if (n_head < 2 &&
          (rc = corpus_fits(rd, cost, (uint64_t)head[0],
                            n_head ? (vocab_size ? vocab_size : (uint64_t)head[1]) : 0, 0, 0,
                            "%s %lld", uci_header_names[n_head], (long long)head[n_head])))
        goto fail;
      n_head++;
      continue;
    }
    if (nf != 3) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: expected 3 fields (docID wordID count), got %d",
                          rd->path, rd->lineno, nf);
      goto fail;
    }
    if ((uint64_t)n_ent == (uint64_t)head[2]) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: more entries than the %lld the header declares",
                          rd->path, rd->lineno, (long long)head[2]);
      goto fail;
    }
    int64_t d, w, k;
    if ((rc = strata_lines_scan_i64(rd, "docID", f[0][0], f[0][1], &d)) ||
        (rc = strata_lines_scan_i64(rd, "wordID", f[1][0], f[1][1], &w)) ||
        (rc = strata_lines_scan_i64(rd, "count", f[2][0], f[2][1], &k)))
      goto fail;
    if (d < 1 || d > head[0]) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: docID %lld out of range 1..%lld", rd->path,
                          rd->lineno, (long long)d, (long long)head[0]);
      goto fail;
    }
    if (w < 1 || w > head[1]) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: wordID %lld out of range 1..%lld (W)", rd->path,
                          rd->lineno, (long long)w, (long long)head[1]);
      goto fail;
    }
    if (vocab_size && w > (int64_t)vocab_size) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: wordID %lld is beyond the vocabulary of %u words",
                          rd->path, rd->lineno, (long long)w, vocab_size);
      goto fail;
    }
    if (k <= 0) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: count %lld must be positive", rd->path,
                          rd->lineno, (long long)k);
      goto fail;
    }
    if (k > (int64_t)UINT32_MAX) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: count %lld is above %u", rd->path, rd->lineno,
                          (long long)k, UINT32_MAX);
      goto fail;
    }
    /* Entries grow by doubling: count them at twice their number. */
    n_tok += (uint64_t)k;
    if ((rc = corpus_fits(rd, cost, (uint64_t)head[0], vocab_size ? vocab_size : (uint64_t)head[1],
                          n_tok, 2.0 * (double)(n_ent + 1) * sizeof *ent, "count %lld",
                          (long long)k)))
      goto fail;
    /* Never past NNZ: more entries are an error anyway. */
    if (STRATA__GROW(ent, n_ent + 1, &cap, (size_t)head[2])) {
      rc = strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for %zu entries", rd->path,
                          rd->lineno, n_ent + 1);
      goto fail;
    }
    ent[n_ent++] = (uci_entry){(uint32_t)(d - 1), (uint32_t)(w - 1), (uint32_t)k};
  }
  if (rc < 0) goto fail;
  rc = 0;

  if (n_head < 3) {
    if (n_head == 0) {
      rc = strata_err_set(STRATA_EEMPTY, "%s: no tokens", rd->path);
    } else {
      rc = strata_err_set(
          STRATA_EPARSE, "%s:%zu: truncated file: the UCI header has %d of its 3 lines (D, W, NNZ)",
          rd->path, rd->lineno, n_head);
    }
    goto fail;
  }
  if ((uint64_t)n_ent != (uint64_t)head[2]) {
    rc = strata_err_set(STRATA_EPARSE,
                        "%s:%zu: truncated file: %zu entries after the header, which declares %lld",
                        rd->path, rd->lineno, n_ent, (long long)head[2]);
    goto fail;
  }

  const uint32_t D = (uint32_t)head[0];
  c->n_docs = D;
  c->n_vocab = vocab_size ? vocab_size : (uint32_t)head[1];
  c->doc_off = strata_calloc((size_t)D + 1, sizeof *c->doc_off);
  if (!c->doc_off) {
    rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory for %u documents", rd->path, D);
    goto fail;
  }
  /* Tokens per document at [d + 1], then starts by prefix sum; the starts
   * serve as write cursors and end up as the ends, shifted back at the end. */
  uint64_t *off = c->doc_off;
  for (size_t i = 0; i < n_ent; i++) off[ent[i].doc + 1] += ent[i].count;
  for (uint32_t d = 0; d < D; d++) off[d + 1] += off[d];
  c->n_tokens = off[D];
  if (c->n_tokens == 0) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no tokens", rd->path);
    goto fail;
  }
  if (c->n_tokens > SIZE_MAX / sizeof *c->word ||
      !(c->word = strata_malloc((size_t)c->n_tokens * sizeof *c->word))) {
    rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory for %llu tokens", rd->path,
                        (unsigned long long)c->n_tokens);
    goto fail;
  }
  for (size_t i = 0; i < n_ent; i++) {
    uint32_t *dst = c->word + off[ent[i].doc];
    for (uint32_t k = 0; k < ent[i].count; k++) dst[k] = ent[i].word;
    off[ent[i].doc] += ent[i].count;
  }
  memmove(off + 1, off, (size_t)D * sizeof *off);
  off[0] = 0;
  strata_free(ent);
  return 0;

fail:
  strata_free(ent);
  return rc;
}

/* ---- lda-c ----------------------------------------------------------- */

static int read_ldac(strata_lines *rd, uint32_t vocab_size, const strata_corpus_cost *cost,
                     strata_corpus *c) {
  int rc = 0;
  size_t off_cap = 0, word_cap = 0, n_tok = 0;
  uint32_t n_docs = 0;
  int64_t max_id = -1;
  size_t blank = 0; /* first blank line since the last document */
  const char *line;
  size_t len;

  if (STRATA__GROW(c->doc_off, 1, &off_cap, SIZE_MAX)) goto nomem;
  c->doc_off[0] = 0;
  while ((rc = strata_lines_next(rd, &line, &len)) > 0) {
    if (strata_field_blank(line, line + len)) {
      if (!blank) blank = rd->lineno;
      continue;
    }
    /* Blank lines at the very end are tolerated; inside, a blank line would
     * silently shift every later document's number. */
    if (blank) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: empty line (an empty document is written '0')",
                          rd->path, blank);
      goto fail;
    }
    if (n_docs == UINT32_MAX - 1) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: more than %u documents", rd->path, rd->lineno,
                          UINT32_MAX - 1);
      goto fail;
    }
    /* The line is not blank, so it has a first field. */
    const char *s = line, *e = line + len, *fp = line, *fe = line;
    int64_t npairs;
    strata_field_next(&s, e, &fp, &fe);
    if ((rc = strata_lines_scan_i64(rd, "pair count", fp, fe, &npairs))) goto fail;
    if (npairs < 0) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: negative pair count %lld", rd->path, rd->lineno,
                          (long long)npairs);
      goto fail;
    }
    int64_t seen = 0;
    while (strata_field_next(&s, e, &fp, &fe)) {
      seen++;
      const char *colon = memchr(fp, ':', (size_t)(fe - fp));
      if (!colon) {
        char q[STRATA_QUOTE_SIZE];
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: pair %lld '%s' is not id:count", rd->path,
                            rd->lineno, (long long)seen,
                            strata_quote(q, sizeof q, fp, (size_t)(fe - fp)));
        goto fail;
      }
      int64_t id, k;
      if ((rc = strata_lines_scan_i64(rd, "word id", fp, colon, &id)) ||
          (rc = strata_lines_scan_i64(rd, "count", colon + 1, fe, &k)))
        goto fail;
      if (id < 0) {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: negative word id %lld", rd->path, rd->lineno,
                            (long long)id);
        goto fail;
      }
      if (vocab_size ? id >= (int64_t)vocab_size : id > (int64_t)UINT32_MAX - 1) {
        rc = strata_err_set(
            STRATA_EPARSE, "%s:%zu: word id %lld is beyond the vocabulary of %llu words", rd->path,
            rd->lineno, (long long)id,
            vocab_size ? (unsigned long long)vocab_size : (unsigned long long)UINT32_MAX);
        goto fail;
      }
      if (k <= 0) {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: count %lld for word %lld must be positive",
                            rd->path, rd->lineno, (long long)k, (long long)id);
        goto fail;
      }
      if ((uint64_t)k > SIZE_MAX / sizeof *c->word - n_tok) {
        rc = strata_err_set(STRATA_EPARSE, "%s:%zu: count %lld for word %lld is too large",
                            rd->path, rd->lineno, (long long)k, (long long)id);
        goto fail;
      }
      /* Counts expand into tokens, and an id sizes the vocabulary, so one
       * pair of a short line may ask for more memory than there is: checked
       * before it is allocated, with the word array at twice its length
       * (it grows by doubling). */
      uint64_t words = vocab_size ? vocab_size : (uint64_t)(id > max_id ? id : max_id) + 1;
      if ((rc = corpus_fits(rd, cost, (uint64_t)n_docs + 1, words, n_tok + (uint64_t)k,
                            4.0 * (double)(n_tok + (uint64_t)k), "pair %lld:%lld", (long long)id,
                            (long long)k)))
        goto fail;
      if (STRATA__GROW(c->word, n_tok + (size_t)k, &word_cap, SIZE_MAX)) {
        rc = strata_err_set(STRATA_ENOMEM,
                            "%s:%zu: out of memory for %zu tokens (count %lld of word %lld)",
                            rd->path, rd->lineno, n_tok + (size_t)k, (long long)k, (long long)id);
        goto fail;
      }
      for (int64_t j = 0; j < k; j++) c->word[n_tok++] = (uint32_t)id;
      if (id > max_id) max_id = id;
    }
    if (seen != npairs) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: the line declares %lld pairs but has %lld",
                          rd->path, rd->lineno, (long long)npairs, (long long)seen);
      goto fail;
    }
    if (STRATA__GROW(c->doc_off, (size_t)n_docs + 2, &off_cap, SIZE_MAX))
      goto nomem;
    c->doc_off[++n_docs] = n_tok;
  }
  if (rc < 0) goto fail;
  if (n_tok == 0) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no tokens", rd->path);
    goto fail;
  }
  /* Growth by doubling can leave up to half the array unused; give a large
   * excess back (a failed shrink just keeps the bigger block). */
  if (word_cap - n_tok > word_cap / 8) {
    uint32_t *w = strata_realloc(c->word, n_tok * sizeof *w);
    if (w) c->word = w;
  }
  c->n_docs = n_docs;
  c->n_tokens = n_tok;
  c->n_vocab = vocab_size ? vocab_size : (uint32_t)(max_id + 1);
  return 0;

nomem:
  rc = strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for %zu tokens in %u documents",
                      rd->path, rd->lineno, n_tok, n_docs);
fail:
  return rc;
}

/* ---- reading --------------------------------------------------------- */

int strata_corpus_read(const char *path, strata_corpus_format fmt, uint32_t vocab_size,
                       strata_corpus *c) {
  return strata_corpus_read_with(path, fmt, vocab_size, NULL, c);
}

int strata_corpus_read_with(const char *path, strata_corpus_format fmt, uint32_t vocab_size,
                            const strata_corpus_cost *cost, strata_corpus *c) {
  memset(c, 0, sizeof *c);
  if (!cost) cost = &no_cost;
  if ((unsigned)fmt >= N_FORMATS)
    return strata_err_set(STRATA_EINVAL, "%s: unknown corpus format %d", path, (int)fmt);
  strata_lines rd;
  int rc = strata_lines_open(&rd, path);
  if (rc) return rc;
  if (fmt == STRATA_CORPUS_AUTO && (rc = detect_format(&rd, &fmt))) goto fail;
  rc = fmt == STRATA_CORPUS_UCI ? read_uci(&rd, vocab_size, cost, c)
                                : read_ldac(&rd, vocab_size, cost, c);
  if (rc) goto fail;
  strata_lines_close(&rd);
  return 0;

fail:
  strata_lines_close(&rd);
  strata_corpus_close(c);
  return rc;
}

/* ---- vocabulary ------------------------------------------------------ */

void strata_vocab_close(strata_vocab *v) {
  if (!v) return;
  for (uint32_t i = 0; i < v->n; i++) strata_free(v->words[i]);
  strata_free(v->words);
  memset(v, 0, sizeof *v);
}

int strata_vocab_read(const char *path, strata_vocab *v) {
  memset(v, 0, sizeof *v);
  strata_lines rd;
  int rc = strata_lines_open(&rd, path);
  if (rc) return rc;
  size_t cap = 0;
  const char *line;
  size_t len;
  while ((rc = strata_lines_next(&rd, &line, &len)) > 0) {
    /* Word ids are line numbers, so a blank line cannot simply be skipped. */
    if (strata_field_blank(line, line + len)) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: empty line (line i names word id i-1)", path,
                          rd.lineno);
      goto fail;
    }
    /* A word is printed as it is into topics.txt, one line per topic with
     * words between blanks: a control character (a tab, an escape sequence)
     * would garble that line or the terminal showing it. */
    for (size_t i = 0; i < len; i++) {
      unsigned char ch = (unsigned char)line[i];
      if (ch < 0x20 || ch == 0x7f) {
        char q[STRATA_QUOTE_SIZE];
        rc = strata_err_set(STRATA_EPARSE,
                            "%s:%zu: word '%s' holds a control character (byte 0x%02x at column "
                            "%zu)",
                            path, rd.lineno, strata_quote(q, sizeof q, line, len), ch, i + 1);
        goto fail;
      }
    }
    if (v->n == UINT32_MAX - 1) {
      rc = strata_err_set(STRATA_EPARSE, "%s:%zu: more than %u words", path, rd.lineno,
                          UINT32_MAX - 1);
      goto fail;
    }
    char *w = NULL;
    if (STRATA__GROW(v->words, (size_t)v->n + 1, &cap, SIZE_MAX) ||
        !(w = strata_malloc(len + 1))) {
      rc = strata_err_set(STRATA_ENOMEM, "%s:%zu: out of memory for %u words", path, rd.lineno,
                          v->n + 1);
      goto fail;
    }
    memcpy(w, line, len);
    w[len] = '\0';
    v->words[v->n++] = w;
  }
  if (rc < 0) goto fail;
  if (v->n == 0) {
    rc = strata_err_set(STRATA_EEMPTY, "%s: no words", path);
    goto fail;
  }
  strata_lines_close(&rd);
  return 0;

fail:
  strata_lines_close(&rd);
  strata_vocab_close(v);
  return rc;
}

/* ---- synthetic spec -------------------------------------------------- */

/* alpha and beta must be > 0: a Dirichlet needs a positive concentration. */
static const strata__spec_key synth_keys[] = {
    {"docs", STRATA__SPEC_U32, offsetof(strata_lda_synth, docs)},
    {"len", STRATA__SPEC_U32, offsetof(strata_lda_synth, len)},
    {"vocab", STRATA__SPEC_U32, offsetof(strata_lda_synth, vocab)},
    {"topics", STRATA__SPEC_U32, offsetof(strata_lda_synth, topics)},
    {"alpha", STRATA__SPEC_POSITIVE, offsetof(strata_lda_synth, alpha)},
    {"beta", STRATA__SPEC_POSITIVE, offsetof(strata_lda_synth, beta)},
    {"seed", STRATA__SPEC_SEED, offsetof(strata_lda_synth, seed)},
};
#define N_SYNTH_KEYS (sizeof synth_keys / sizeof synth_keys[0])

void strata_lda_synth_defaults(strata_lda_synth *s) {
  *s = (strata_lda_synth){
      .docs = 2000,
      .len = 100,
      .vocab = 5000,
      .topics = 20,
      .alpha = 0.1,
      .beta = 0.01,
      .seed = 1,
  };
}

int strata_lda_synth_parse(const char *text, strata_lda_synth *spec) {
  return strata__spec_parse(text, synth_keys, N_SYNTH_KEYS, spec, sizeof *spec);
}

/* ---- random variates ------------------------------------------------- */

/* Gamma(a, 1) by Marsaglia & Tsang (2000), with Gamma(a) = Gamma(a + 1) *
 * U^(1/a) for a < 1, worked in logarithms: with a small shape (beta = 0.01)
 * U^(1/a) underflows doubles for a fair share of draws, and a Dirichlet
 * whose every component underflowed to 0 could not be normalised. A draw
 * returns y = s * log(G) with s = min(a, 1), which stays finite however
 * small a is (a * log Gamma(a + 1) + log U); exp((y - y_max) / s) then gives
 * the component relative to the largest without an overflow or a NaN. */
typedef struct {
  double d, c; /* for the shape a' = a (a >= 1) or a + 1 (a < 1) */
  double s;    /* min(a, 1) */
  int boost;   /* a < 1 */
} gamma_gen;

static gamma_gen gamma_init(double a) {
  gamma_gen g = {0, 0, 1, 0};
  if (a < 1) {
    g.s = a;
    g.boost = 1;
    a += 1;
  }
  g.d = a - 1.0 / 3.0;
  g.c = 1.0 / sqrt(9.0 * g.d);
  return g;
}

static double scaled_log_gamma_draw(const gamma_gen *g, strata_rng *rng) {
  /* 1 - U lies in (0, 1], so its log is finite. */
  double log_u = g->boost ? log(1.0 - strata_rng_uniform(rng)) : 0.0;
  for (;;) {
    double x, v;
    do {
      x = strata_rng_normal(rng);
      v = 1.0 + g->c * x;
    } while (v <= 0);
    v = v * v * v;
    double u = strata_rng_uniform(rng), x2 = x * x;
    if (u < 1.0 - 0.0331 * x2 * x2 || log(u) < 0.5 * x2 + g->d * (1.0 - v + log(v)))
      return g->s * log(g->d * v) + log_u;
  }
}

/* A Dirichlet draw, unnormalised: the largest component is 1, the sum is
 * left to the caller. */
static void dirichlet_draw(const gamma_gen *g, strata_rng *rng, uint32_t n, double *out) {
  double mx = -INFINITY;
  for (uint32_t i = 0; i < n; i++) {
    out[i] = scaled_log_gamma_draw(g, rng);
    if (out[i] > mx) mx = out[i];
  }
  if (g->s == 1.0) {
    for (uint32_t i = 0; i < n; i++) out[i] = exp(out[i] - mx);
  } else {
    for (uint32_t i = 0; i < n; i++) out[i] = exp((out[i] - mx) / g->s);
  }
}

/* Poisson(mean): Knuth's product of uniforms for small means, and above 10
 * Hörmann's PTRS transformed rejection (1993), exact and O(1) per draw. */
typedef struct {
  double mean, exp_neg;                     /* small means */
  double slam, loglam, a, b, inv_alpha, vr; /* PTRS */
} poisson_gen;

static poisson_gen poisson_init(double mean) {
  poisson_gen p;
  memset(&p, 0, sizeof p);
  p.mean = mean;
  p.exp_neg = exp(-mean);
  p.slam = sqrt(mean);
  p.loglam = log(mean);
  p.b = 0.931 + 2.53 * p.slam;
  p.a = -0.059 + 0.02483 * p.b;
  p.inv_alpha = 1.1239 + 1.1328 / (p.b - 3.4);
  p.vr = 0.9277 - 3.6224 / (p.b - 2);
  return p;
}

static uint64_t poisson_draw(const poisson_gen *p, strata_rng *rng) {
  if (p->mean < 10) {
    uint64_t k = 0;
    double prod = strata_rng_uniform(rng);
    while (prod > p->exp_neg) {
      k++;
      prod *= strata_rng_uniform(rng);
    }
    return k;
  }
  int sign; /* lgamma_r: lgamma's sign lives in a global, which threads share */
  for (;;) {
    double u = strata_rng_uniform(rng) - 0.5, v = strata_rng_uniform(rng);
    double us = 0.5 - fabs(u);
    double k = floor((2 * p->a / us + p->b) * u + p->mean + 0.43);
    if (us >= 0.07 && v <= p->vr) return (uint64_t)k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (log(v) + log(p->inv_alpha) - log(p->a / (us * us) + p->b) <=
        -p->mean + k * p->loglam - lgamma_r(k + 1, &sign))
      return (uint64_t)k;
  }
}

/* ---- generation ------------------------------------------------------ */

/* Walker/Vose alias tables, one row of V columns per topic: a word draw is
 * one uniform and one cell. prob is float: 24 bits of coin are plenty next
 * to the Dirichlet's own noise, and with the alias beside it a cell is 8
 * bytes, so a draw touches one cache line. */
typedef struct {
  float prob;     /* keep this column with this probability ... */
  uint32_t alias; /* ... else take this one */
} alias_cell;

static void alias_row(const double *w, uint32_t n, alias_cell *row, double *scaled,
                      uint32_t *work) {
  double total = 0;
  for (uint32_t k = 0; k < n; k++) total += w[k];
  for (uint32_t k = 0; k < n; k++) scaled[k] = w[k] * (double)n / total;
  uint32_t *alias = work + n;
  strata_alias_build(scaled, n, alias, work);
  for (uint32_t k = 0; k < n; k++) row[k] = (alias_cell){(float)scaled[k], alias[k]};
}

/* First k with cum[k] > u (n >= 1), clamped to n - 1 for a u rounded up to
 * the total. Zero-weight entries repeat the previous sum and are never hit. */
static inline uint32_t cum_search(const double *cum, uint32_t n, double u) {
  uint32_t base = 0, len = n;
  while (len > 1) {
    uint32_t half = len / 2;
    base = cum[base + half - 1] <= u ? base + half : base;
    len -= half;
  }
  base += cum[base] <= u;
  return base < n ? base : n - 1;
}

#define SYNTH_BATCH 32

int strata_lda_synth_generate(const strata_lda_synth *s, strata_corpus *c) {
  return strata_lda_synth_generate_with(s, NULL, c);
}

int strata_lda_synth_generate_with(const strata_lda_synth *s, const strata_corpus_cost *cost,
                                   strata_corpus *c) {
  int rc = 0;
  alias_cell *cells = NULL;
  uint32_t *work = NULL;
  double *tmp = NULL, *scaled = NULL;
  memset(c, 0, sizeof *c);

  if (!s->docs || !s->len || !s->vocab || !s->topics || s->topics > INT32_MAX ||
      s->docs == UINT32_MAX || !(s->alpha > 0) || !isfinite(s->alpha) || !(s->beta > 0) ||
      !isfinite(s->beta))
    return strata_err_set(STRATA_EINVAL,
                          "synth: invalid spec (docs=%u len=%u vocab=%u topics=%u alpha=%g "
                          "beta=%g)",
                          s->docs, s->len, s->vocab, s->topics, s->alpha, s->beta);
  const uint32_t D = s->docs, V = s->vocab, K = s->topics;
  /* What the generator holds at once (the alias tables, their work arrays,
   * and the corpus with its true topics, of about D * len tokens) and the
   * caller's share. */
  if (!cost) cost = &no_cost;
  double tokens = (double)D * s->len;
  double need = corpus_need(cost, D, V, tokens, (double)K * V * sizeof *cells + 24.0 * V +
                                                    16.0 * K + 4.0 * tokens);
  strata_mem_budget budget;
  strata_mem_budget_init(&budget);
  if ((rc = strata_mem_check(&budget, need, cost->hint,
                             "--data synth: %u document%s of mean length %u, %u word%s and %u "
                             "topic%s%s%s need",
                             D, plural(D), s->len, V, plural(V), K, plural(K),
                             cost->what ? " " : "", cost->what ? cost->what : "")))
    return rc;
  const size_t kv = (size_t)K * V;
  if (kv / K != V || kv > SIZE_MAX / sizeof *cells) goto nomem;

  cells = strata_malloc(kv * sizeof *cells);
  work = strata_malloc(2 * (size_t)V * sizeof *work);
  /* Holds phi_k (V), then theta_d and its running sums (2K). */
  size_t tmp_n = V > 2 * (size_t)K ? V : 2 * (size_t)K;
  tmp = strata_malloc(tmp_n * sizeof *tmp);
  scaled = strata_malloc((size_t)V * sizeof *scaled);
  c->doc_off = strata_malloc(((size_t)D + 1) * sizeof *c->doc_off);
  if (!cells || !work || !tmp || !scaled || !c->doc_off) goto nomem;

  /* The draw order (topics, lengths, then each document's mixture and
   * tokens) is part of the output's identity: changing it changes every
   * generated corpus. */
  strata_rng rng;
  strata_rng_seed(&rng, s->seed);
  gamma_gen gb = gamma_init(s->beta), ga = gamma_init(s->alpha);
  for (uint32_t k = 0; k < K; k++) {
    dirichlet_draw(&gb, &rng, V, tmp);
    alias_row(tmp, V, cells + (size_t)k * V, scaled, work);
  }
  strata_free(scaled);
  strata_free(work);
  scaled = NULL;
  work = NULL;

  poisson_gen pg = poisson_init((double)s->len);
  uint64_t n_tok = 0;
  c->doc_off[0] = 0;
  for (uint32_t d = 0; d < D; d++) {
    uint64_t n = poisson_draw(&pg, &rng);
    n_tok += n ? n : 1;
    if (n_tok > SIZE_MAX / sizeof *c->word) goto nomem;
    c->doc_off[d + 1] = n_tok;
  }
  c->word = strata_malloc((size_t)n_tok * sizeof *c->word);
  c->true_topic = strata_malloc((size_t)n_tok * sizeof *c->true_topic);
  if (!c->word || !c->true_topic) goto nomem;

  /* Tokens go in batches: first every (topic, column, coin) of the batch is
   * drawn and its alias cell prefetched, then the cells are read. The tables
   * (8 bytes * K * V) outgrow the cache, and a miss per token in series
   * was most of the time; overlapped, a 10M-token corpus takes about half.
   * The random numbers are drawn in the same order either way. */
  double *theta = tmp, *cum = tmp + K;
  uint32_t bcol[SYNTH_BATCH];
  double bcoin[SYNTH_BATCH];
  for (uint32_t d = 0; d < D; d++) {
    dirichlet_draw(&ga, &rng, K, theta);
    double run = 0;
    for (uint32_t k = 0; k < K; k++) cum[k] = run += theta[k];
    for (uint64_t t0 = c->doc_off[d]; t0 < c->doc_off[d + 1]; t0 += SYNTH_BATCH) {
      uint64_t left = c->doc_off[d + 1] - t0;
      uint32_t nb = left < SYNTH_BATCH ? (uint32_t)left : SYNTH_BATCH;
      for (uint32_t b = 0; b < nb; b++) {
        uint32_t z = cum_search(cum, K, strata_rng_uniform(&rng) * run);
        /* The integer part of u*V picks the column and the fraction is the coin. */
        double x = strata_rng_uniform(&rng) * V;
        uint32_t col = (uint32_t)x;
        if (col >= V) col = V - 1;
        c->true_topic[t0 + b] = (int32_t)z;
        bcol[b] = col;
        bcoin[b] = x - col;
#if defined(__GNUC__)
        __builtin_prefetch(&cells[(size_t)z * V + col]);
#endif
      }
      for (uint32_t b = 0; b < nb; b++) {
        const alias_cell *cell = &cells[(size_t)c->true_topic[t0 + b] * V + bcol[b]];
        c->word[t0 + b] = bcoin[b] < cell->prob ? bcol[b] : cell->alias;
      }
    }
  }
  c->n_docs = D;
  c->n_vocab = V;
  c->n_tokens = n_tok;
  goto done;

nomem:
  rc = strata_err_set(STRATA_ENOMEM,
                      "synth: out of memory for %u documents of mean length %u, %u words, %u "
                      "topics",
                      s->docs, s->len, s->vocab, s->topics);
  strata_corpus_close(c);
done:
  strata_free(cells);
  strata_free(work);
  strata_free(tmp);
  strata_free(scaled);
  return rc;
}
