/*
 * What every benchmark program's JSON line starts with: its name, the build
 * and the machine, so a result can always be traced to what produced it.
 */
#ifndef STRATA_BENCH_INFO_H
#define STRATA_BENCH_INFO_H

#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "strata/json.h"
#include "strata/version.h"
#include "strata_build_info.h"

/* Opens the one-line top-level object on stdout and writes bench, version,
 * git, flags, compiler, host, machine and cpus; the caller adds its own
 * members and closes the object. */
static inline void bench_json_begin(strata_json *j, const char *bench) {
  struct utsname un;
  if (uname(&un)) memset(&un, 0, sizeof un);
  strata_json_init_line(j, stdout);
  strata_json_object_begin(j, NULL);
  strata_json_string(j, "bench", bench);
  strata_json_string(j, "version", STRATA_VERSION);
  strata_json_string(j, "git", STRATA_GIT_REV);
  strata_json_string(j, "flags", STRATA_BUILD_FLAGS);
  strata_json_string(j, "compiler", STRATA_COMPILER);
  strata_json_string(j, "host", un.nodename);
  strata_json_string(j, "machine", un.machine);
  strata_json_int(j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
}

#endif
