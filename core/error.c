#include "strata/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char err_msg[1024];

const char *strata_strerror(int err) {
  switch (err) {
    case 0: return "success";
#define XX(name, val, desc) case STRATA_##name: return desc;
    STRATA_ERRNO_MAP(XX)
#undef XX
    default: return "unknown error";
  }
}

const char *strata_err_name(int err) {
  switch (err) {
    case 0: return "STRATA_OK";
#define XX(name, val, desc) case STRATA_##name: return "STRATA_" #name;
    STRATA_ERRNO_MAP(XX)
#undef XX
    default: return "STRATA_EUNKNOWN";
  }
}

int strata_err_set(int err, const char *fmt, ...) {
  /* A caller may wrap the message already set ("%s: %s", ..., strata_err_msg()):
   * format apart, then copy, so the message never reads what it overwrites. */
  char msg[sizeof err_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(err_msg, msg, sizeof msg);
  return err;
}

const char *strata_err_msg(void) { return err_msg; }

void strata_err_clear(void) { err_msg[0] = '\0'; }
