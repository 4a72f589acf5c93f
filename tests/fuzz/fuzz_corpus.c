/*
 * strata_corpus_read over UCI bag-of-words and lda-c, plain and gzip. The
 * low two bits of the header's choice pick the format (0 and 3 auto, 1
 * uci, 2 ldac); bits 2-3 the vocabulary size given (0 and 1: none, the
 * file decides; 2: 50 words; 3: 10000), which turns large word ids into
 * errors naming their line.
 */
#include "fuzz.h"
#include "strata/apps/corpus.h"

static const uint32_t vocab_sizes[4] = {0, 0, 50, 10000};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in;
  if (fuzz_input_begin(&in, data, size)) return 0;
  unsigned f = in.choice & 3;
  strata_corpus_format fmt = f == 3 ? STRATA_CORPUS_AUTO : (strata_corpus_format)f;
  uint32_t vocab = vocab_sizes[in.choice >> 2];
  strata_corpus c;
  int rc = strata_corpus_read(fuzz_path(), fmt, vocab, &c);
  if (rc == 0) {
    FUZZ_CHECK(c.n_tokens > 0 && c.doc_off && c.word, "an empty corpus returned");
    FUZZ_CHECK(!vocab || c.n_vocab == vocab, "n_vocab is not the size given");
    FUZZ_CHECK(c.doc_off[0] == 0 && c.doc_off[c.n_docs] == c.n_tokens, "bad document offsets");
    for (uint32_t d = 0; d < c.n_docs; d++)
      FUZZ_CHECK(c.doc_off[d] <= c.doc_off[d + 1], "document offsets decrease");
    for (uint64_t t = 0; t < c.n_tokens; t++)
      FUZZ_CHECK(c.word[t] < c.n_vocab, "a word id beyond the vocabulary");
    FUZZ_CHECK(c.true_topic == NULL, "a file's corpus with true topics");
  } else {
    FUZZ_CHECK(c.doc_off == NULL && c.word == NULL && c.n_tokens == 0, "a failed read left data");
  }
  strata_corpus_close(&c);
  fuzz_finish(rc, fuzz_path());
  return 0;
}
