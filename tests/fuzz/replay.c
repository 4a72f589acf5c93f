/*
 * Replays saved inputs through a fuzz target without libFuzzer, so the
 * regular build (gcc, and its ASan + UBSan stage) runs every crash input
 * ever fixed: fuzz_replay_<target> FILE|DIR... feeds each file, and each
 * file of each directory in name order, to LLVMFuzzerTestOneInput. A broken
 * expectation aborts inside the target; otherwise it prints how many inputs
 * it replayed and exits 0, or 1 when an argument cannot be read or holds no
 * inputs at all (a misspelt directory must not pass as an empty one).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: %s: cannot open\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *b = realloc(buf, cap * 2);
    if (!b) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = b;
    cap *= 2;
  }
  int bad = ferror(f) || !buf;
  fclose(f);
  if (bad) {
    free(buf);
    fprintf(stderr, "replay: %s: cannot read\n", path);
    return -1;
  }
  /* A copy of exactly the input's size, so that ASan sees a read past it. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    fprintf(stderr, "replay: %s: out of memory\n", path);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int keep(const struct dirent *e) { return e->d_name[0] != '.'; }

int main(int argc, char **argv) {
  long done = 0;
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: %s: no such file or directory\n", argv[i]);
      rc = 1;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(argv[i])) rc = 1;
      else done++;
      continue;
    }
    struct dirent **names = NULL;
    int n = scandir(argv[i], &names, keep, by_name);
    if (n <= 0) {
      fprintf(stderr, "replay: %s: %s\n", argv[i], n < 0 ? "cannot list" : "no inputs");
      rc = 1;
    }
    for (int k = 0; k < n; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
      if (replay_file(path)) rc = 1;
      else done++;
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %ld inputs\n", done);
  return rc;
}
