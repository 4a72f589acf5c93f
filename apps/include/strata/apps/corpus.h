/*
 * strata/apps/corpus.h - bag-of-words corpora for topic models: readers for UCI
 * "Bag of Words" (docword.*.txt, gzipped or not) and lda-c (ap.dat), the
 * vocabulary file, and a generator drawn from the LDA model itself.
 *
 * A corpus is documents of tokens (word ids, counts expanded: a word that
 * occurs c times in a document appears c times, in file order). Word ids
 * are 0-based indices into the vocabulary; documents keep file order.
 * Readers fail with one line naming the file and line, quoting a bad field
 * through strata_quote: STRATA_ENOENT (cannot open), STRATA_EPARSE
 * (malformed line, an integer beyond int64_t, count <= 0, word id beyond the
 * vocabulary, truncated file: fewer entries than the header promises; a
 * gzip stream cut short or without its trailer), STRATA_ENOMEM (sizes
 * beyond the memory available, strata_corpus_cost), STRATA_EEMPTY (no
 * tokens).
 */
#ifndef STRATA_CORPUS_H
#define STRATA_CORPUS_H

#include <stdint.h>

#include "strata/error.h"

typedef struct strata_corpus {
  uint32_t n_docs;
  uint32_t n_vocab;    /* vocabulary size V (word ids are < n_vocab) */
  uint64_t n_tokens;
  uint64_t *doc_off;   /* n_docs + 1 offsets: doc d's tokens are word[doc_off[d] .. doc_off[d+1]) */
  uint32_t *word;      /* n_tokens word ids */
  int32_t *true_topic; /* synthetic corpora: the topic each token was drawn from; else NULL */
} strata_corpus;

typedef enum strata_corpus_format {
  STRATA_CORPUS_AUTO = 0, /* by content: three header integer lines = UCI, else lda-c */
  STRATA_CORPUS_UCI,      /* "D\nW\nNNZ\n" then "docID wordID count" (1-based) per line;
                             docs absent from the file are empty documents */
  STRATA_CORPUS_LDAC      /* one doc per line: "N id:count id:count ..." (0-based ids);
                             N must equal the number of pairs; trailing blanks and a
                             missing final newline are fine */
} strata_corpus_format;

/* "auto", "uci", "ldac". STRATA_EUSAGE for anything else. */
STRATA_EXPORT int strata_corpus_format_parse(const char *name, strata_corpus_format *out);

/*
 * What a caller will allocate for a corpus beyond the reader's own arrays
 * (doc_off, 8 bytes a document; word, 4 bytes a token), in bytes per
 * document, per word of the vocabulary and per token: LDA's counts, for
 * one. With it the readers and the generator refuse a corpus whose whole
 * would not fit in the memory available (strata_mem_check, core.h), before
 * allocating for it: a UCI header's document count D and vocabulary size
 * W, an lda-c word id (the vocabulary is 1 + the largest) and every count
 * (tokens) is checked at its line, as soon as it is read, with a message
 * "PATH:LINE: WHY: the corpus (D documents, V words, T tokens) WHAT needs
 * about X GB, but this host has Y GB available: HINT". The estimate is an
 * upper bound of the peak: it adds the reader's growing arrays at full
 * capacity (and a UCI file's entries, kept while reading) to the caller's.
 */
typedef struct strata_corpus_cost {
  double per_doc, per_word, per_token; /* bytes the caller adds for each */
  const char *what; /* what sizes the caller's share, for the message ("at K=5 topics"); or NULL */
  const char *hint; /* what to change ("lower --topics") when the per-document and per-word
                       share is most of the estimate; or NULL */
} strata_corpus_cost;

/*
 * Reads path (gzip data, recognised by its content whatever the file's
 * name, is decompressed on the fly, in either format). n_vocab is W from a UCI header, else 1 + the largest id seen;
 * vocab_size > 0 overrides it (and ids >= vocab_size are errors naming the
 * line). Fills *c (zeroed first). Sizes are checked against the memory
 * available for the reader's own arrays alone (strata_corpus_read_with,
 * a NULL cost).
 */
STRATA_EXPORT int strata_corpus_read(const char *path, strata_corpus_format fmt,
                                     uint32_t vocab_size, strata_corpus *c);

/* strata_corpus_read, with what the caller will allocate per part of the
 * corpus counted in the check of every size read (cost may be NULL: none).
 * STRATA_ENOMEM "PATH:LINE: ..." when the estimate outgrows the memory
 * available at the line that makes it so. */
STRATA_EXPORT int strata_corpus_read_with(const char *path, strata_corpus_format fmt,
                                          uint32_t vocab_size, const strata_corpus_cost *cost,
                                          strata_corpus *c);

/* Frees every array and zeroes c; safe on a zeroed corpus. */
STRATA_EXPORT void strata_corpus_close(strata_corpus *c);

/* A vocabulary: one word per line, line i (0-based) names word id i. */
typedef struct strata_vocab {
  uint32_t n;
  char **words; /* n strings, each strata_malloc'd */
} strata_vocab;

/* Reads a vocabulary file (CRLF tolerated). STRATA_EPARSE with file:line
 * for an empty line or a word holding a control character (a byte below
 * 0x20, a tab included, or 0x7f; the word is quoted escaped); bytes from
 * 0x80 (UTF-8) are kept. */
STRATA_EXPORT int strata_vocab_read(const char *path, strata_vocab *v);
STRATA_EXPORT void strata_vocab_close(strata_vocab *v);

/* The LDA generator: K topics phi_k ~ Dirichlet(beta) over V words; each of
 * D documents has theta_d ~ Dirichlet(alpha) and a length drawn from a
 * Poisson with mean L (at least 1); each token draws z ~ theta_d, then
 * w ~ phi_z. Deterministic for its seed. */
typedef struct strata_lda_synth {
  uint32_t docs, len, vocab, topics;
  double alpha, beta;
  uint64_t seed;
} strata_lda_synth;

/* Defaults: docs=2000, len=100, vocab=5000, topics=20, alpha=0.1, beta=0.01, seed=1. */
STRATA_EXPORT void strata_lda_synth_defaults(strata_lda_synth *s);
/* Parses "synth:docs=D,len=L,vocab=V,topics=K,alpha=A,beta=B,seed=X" (any
 * subset, any order; the prefix alone gives the defaults). STRATA_EUSAGE
 * with the offending key or value. */
STRATA_EXPORT int strata_lda_synth_parse(const char *text, strata_lda_synth *s);
STRATA_EXPORT int strata_lda_synth_generate(const strata_lda_synth *s, strata_corpus *c);
/* The same, refusing (STRATA_ENOMEM "--data synth: ...") before it
 * allocates a corpus whose generation and the caller's cost (may be NULL)
 * would not fit in the memory available; strata_lda_synth_generate counts
 * the generator's own arrays alone. */
STRATA_EXPORT int strata_lda_synth_generate_with(const strata_lda_synth *s,
                                                 const strata_corpus_cost *cost, strata_corpus *c);

#endif
