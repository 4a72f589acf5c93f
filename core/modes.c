/*
 * Mode names (strata/modes.h): how the CLI, the metrics and messages spell
 * each strata_mode, made from the one list of modes.
 */
#include <stdio.h>
#include <string.h>

#include "strata/core.h"
#include "strata/modes.h"

typedef struct mode_line {
  const char *name, *backend, *summary;
} mode_line;

static const mode_line lines[STRATA_N_MODES] = {
#define LINE_(id, name, backend, rule, summary) [STRATA_MODE_##id] = {#name, #backend, summary},
    STRATA_MODES(LINE_)
#undef LINE_
};

const char *strata_mode_name(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES ? lines[m].name : "?";
}

const char *strata_mode_summary(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES ? lines[m].summary : "";
}

int strata_mode_is_ps(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES && strcmp(lines[m].backend, "table") == 0;
}

int strata_mode_parse(const char *name, strata_mode *out) {
  char list[512] = "";
  size_t used = 0;
  for (int m = 0; m < STRATA_N_MODES; m++) {
    if (name && !strcmp(name, lines[m].name)) {
      *out = (strata_mode)m;
      return 0;
    }
    if (used < sizeof list)
      used +=
          (size_t)snprintf(list + used, sizeof list - used, "%s%s", m ? ", " : "", lines[m].name);
  }
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE, "unknown mode '%s': one of %s",
                        name ? strata_quote(q, sizeof q, name, strlen(name)) : "", list);
}
