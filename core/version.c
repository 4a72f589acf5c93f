/* strata/version.h: the library's version and build identity. */
#include "strata/version.h"
#include "strata_build_info.h"

const char *strata_version(void) { return STRATA_VERSION; }

const char *strata_build_id(void) {
  return "git " STRATA_GIT_REV "; " STRATA_BUILD_FLAGS "; " STRATA_COMPILER;
}
