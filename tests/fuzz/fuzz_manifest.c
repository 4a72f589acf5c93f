/*
 * strata__manifest_read (core/manifest.h): the checkpoint manifest, as a
 * resume reads it from disk. The whole input is the file's text (no header:
 * the manifest is read from memory, as scheduler/ckpt.c does once it has
 * the file). A manifest that reads back must keep its promises (every part
 * named once, file names without a '/', settings "name=value") and must
 * survive a round trip: written again with strata__manifest_write and read
 * once more, every field is the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/manifest.h"
#include "fuzz.h"
#include "strata/core.h"

static void check(const strata__manifest *m) {
  FUZZ_CHECK(m->workers >= 1 && m->workers <= STRATA__MANIFEST_WORKERS, "workers out of range");
  FUZZ_CHECK(m->passes >= 1, "passes out of range");
  for (int i = 0; i <= m->workers; i++) {
    const strata__manifest_part *p = &m->parts[i];
    FUZZ_CHECK(p->worker == i - 1, "a part not in worker order, or missing");
    FUZZ_CHECK(p->file[0] && !strchr(p->file, '/'), "a part's file is not a file name");
  }
  for (int i = 0; i < m->n_settings; i++) {
    const char *eq = strchr(m->settings[i], '=');
    FUZZ_CHECK(eq && eq > m->settings[i], "a setting without a name");
    FUZZ_CHECK(strata__manifest_setting(m, "") == NULL, "an empty name found");
  }
}

static void same(const strata__manifest *a, const strata__manifest *b) {
  FUZZ_CHECK(!strcmp(a->strata, b->strata) && !strcmp(a->build, b->build) &&
                 !strcmp(a->written, b->written) && !strcmp(a->app, b->app) &&
                 !strcmp(a->mode, b->mode) && !strcmp(a->byte_order, b->byte_order) &&
                 !strcmp(a->layout, b->layout),
             "a text field changed in the round trip");
  FUZZ_CHECK(a->workers == b->workers && a->passes == b->passes && a->next_clock == b->next_clock &&
                 a->data_bytes == b->data_bytes && a->data_sum == b->data_sum && a->seed == b->seed,
             "a number changed in the round trip");
  FUZZ_CHECK(a->n_settings == b->n_settings, "the settings changed in the round trip");
  for (int i = 0; i < a->n_settings; i++)
    FUZZ_CHECK(!strcmp(a->settings[i], b->settings[i]), "a setting changed in the round trip");
  for (int i = 0; i <= a->workers; i++)
    FUZZ_CHECK(!strcmp(a->parts[i].file, b->parts[i].file) && a->parts[i].bytes == b->parts[i].bytes &&
                   a->parts[i].sum == b->parts[i].sum,
               "a part changed in the round trip");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_start();
  strata__manifest m;
  int rc = strata__manifest_read((const char *)data, size, &m);
  if (rc == 0) {
    check(&m);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FUZZ_CHECK(f != NULL, "open_memstream failed");
    FUZZ_CHECK(strata__manifest_write(f, &m) == 0, "writing the manifest failed");
    FUZZ_CHECK(fclose(f) == 0, "writing the manifest failed");
    strata__manifest again;
    FUZZ_CHECK(strata__manifest_read(text, len, &again) == 0, "the manifest written does not read back");
    same(&m, &again);
    strata__manifest_free(&again);
    free(text);
    strata__manifest_free(&m);
  } else {
    FUZZ_CHECK(m.parts == NULL && m.settings == NULL, "a failed read left memory");
  }
  fuzz_finish(rc, NULL);
  return 0;
}
