/*
 * strata_vocab_read. The header's choice is unused.
 */
#include <string.h>

#include "fuzz.h"
#include "strata/apps/corpus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_input in;
  if (fuzz_input_begin(&in, data, size)) return 0;
  strata_vocab v;
  int rc = strata_vocab_read(fuzz_path(), &v);
  if (rc == 0) {
    FUZZ_CHECK(v.n > 0 && v.words, "an empty vocabulary returned");
    for (uint32_t i = 0; i < v.n; i++) {
      const unsigned char *w = (const unsigned char *)v.words[i];
      FUZZ_CHECK(w && w[0], "an empty word");
      for (; *w; w++) FUZZ_CHECK(*w >= 0x20 && *w != 0x7f, "a word holding a control character");
    }
  } else {
    FUZZ_CHECK(v.n == 0 && v.words == NULL, "a failed read left words");
  }
  strata_vocab_close(&v);
  fuzz_finish(rc, fuzz_path());
  return 0;
}
