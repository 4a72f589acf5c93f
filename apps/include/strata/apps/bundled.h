/*
 * strata/apps/bundled.h - the apps and commands the `strata` program
 * bundles, for a program of your own that wants them beside its apps
 * (strata/main.h). Link strata::apps (pkg-config strata-apps).
 *
 *   const strata_app *apps[8];
 *   int n = 0;
 *   apps[n++] = &my_app;
 *   for (int i = 0; i < strata_n_bundled_apps; i++) apps[n++] = strata_bundled_apps[i];
 *   strata_program p = {.name = "mytool", .apps = apps, .n_apps = n,
 *                       .commands = strata_bundled_commands,
 *                       .n_commands = strata_n_bundled_commands};
 *   return strata_program_main(&p, argc, argv);
 */
#ifndef STRATA_APPS_BUNDLED_H
#define STRATA_APPS_BUNDLED_H

#include "strata/main.h"

/* mf, lda, mlr, dml. */
STRATA_EXPORT extern const strata_app *const strata_bundled_apps[];
STRATA_EXPORT extern const int strata_n_bundled_apps;
/* mf-predict, mlr-predict, lda-eval. */
STRATA_EXPORT extern const strata_command strata_bundled_commands[];
STRATA_EXPORT extern const int strata_n_bundled_commands;

#endif
