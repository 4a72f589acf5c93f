/*
 * strata: the command-line front end, a strata_program (strata/main.h) of
 * the bundled apps and commands (strata/apps/bundled.h).
 */
#include "strata/apps/bundled.h"

int main(int argc, char **argv) {
  strata_program p = {.name = "strata",
                      .summary = "scheduled model parallelism for iterative-convergent ML",
                      .apps = strata_bundled_apps,
                      .n_apps = strata_n_bundled_apps,
                      .commands = strata_bundled_commands,
                      .n_commands = strata_n_bundled_commands,
                      .external = 1};
  return strata_program_main(&p, argc, argv);
}
