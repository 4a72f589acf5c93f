/*
 * Mode names (strata/app.h): how the CLI, the metrics and messages spell
 * each strata_mode.
 */
#include <stdio.h>
#include <string.h>

#include "strata/app.h"
#include "strata/core.h"

static const char *const names[STRATA_N_MODES] = {
    [STRATA_MODE_SCHEDULED] = "scheduled", [STRATA_MODE_SERIAL] = "serial",
    [STRATA_MODE_BSP] = "bsp",             [STRATA_MODE_ABSP] = "absp",
    [STRATA_MODE_SSP] = "ssp",             [STRATA_MODE_ESSP] = "essp",
    [STRATA_MODE_ASYNC] = "async",         [STRATA_MODE_SFB] = "sfb",
};

const char *strata_mode_name(strata_mode m) {
  return (unsigned)m < STRATA_N_MODES ? names[m] : "?";
}

int strata_mode_parse(const char *name, strata_mode *out) {
  char list[256] = "";
  size_t used = 0;
  for (int m = 0; m < STRATA_N_MODES; m++) {
    if (name && !strcmp(name, names[m])) {
      *out = (strata_mode)m;
      return 0;
    }
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", m ? ", " : "", names[m]);
  }
  char q[STRATA_QUOTE_SIZE];
  return strata_err_set(STRATA_EUSAGE, "unknown mode '%s': one of %s",
                        name ? strata_quote(q, sizeof q, name, strlen(name)) : "", list);
}

