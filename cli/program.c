/*
 * strata/main.h: picks the app or command a command line names and hands
 * it to the driver (cli/driver.c), or prints the program's help.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/driver.h"
#include "strata/core.h"
#include "strata/version.h"

/* argv[0]'s last path component. */
static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* The directory of the running program (from /proc/self/exe), or -1. */
static int self_dir(char *buf, size_t n) {
  ssize_t k = readlink("/proc/self/exe", buf, n - 1);
  if (k <= 0) return -1;
  buf[k] = 0;
  char *s = strrchr(buf, '/');
  if (!s) return -1;
  *s = 0;
  return 0;
}

/* Names an external app may have: letters, digits, '-' and '_', so that
 * NAME can never reach outside the directories searched. */
static int external_name_ok(const char *app) {
  if (!*app || *app == '-') return 0;
  for (const char *c = app; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '-' || *c == '_'))
      return 0;
  return 1;
}

/* PROG-APP beside this program, else on PATH: 0 with its path in out, or -1. */
static int find_external(const char *prog, const char *app, char *out, size_t n) {
  char dir[PATH_MAX];
  if (!external_name_ok(app)) return -1;
  if (!self_dir(dir, sizeof dir)) {
    snprintf(out, n, "%s/%s-%s", dir, prog, app);
    if (access(out, X_OK) == 0) return 0;
  }
  const char *path = getenv("PATH");
  while (path && *path) {
    const char *end = strchr(path, ':');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    if (len > 0 && len < sizeof dir) {
      snprintf(out, n, "%.*s/%s-%s", (int)len, path, prog, app);
      if (access(out, X_OK) == 0) return 0;
    }
    path = end ? end + 1 : NULL;
  }
  return -1;
}

/* The external apps beside this program, for --help. */
static void list_external(FILE *f, const char *prog) {
  char dir[PATH_MAX];
  if (self_dir(dir, sizeof dir)) return;
  DIR *d = opendir(dir);
  if (!d) return;
  char names[32][64];
  int n = 0;
  size_t pl = strlen(prog);
  for (struct dirent *e; n < 32 && (e = readdir(d));) {
    char path[PATH_MAX + 256];
    if (strncmp(e->d_name, prog, pl) || e->d_name[pl] != '-' ||
        !external_name_ok(e->d_name + pl + 1) || strlen(e->d_name + pl + 1) >= 64)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (access(path, X_OK) == 0) snprintf(names[n++], 64, "%s", e->d_name + pl + 1);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
  if (n) fprintf(f, "\nApps beside %s (%s-NAME, built on the installed library):\n", prog, prog);
  for (int i = 0; i < n; i++) fprintf(f, "  %s\n", names[i]);
}

static void usage_program(FILE *f, const strata_program *p, const char *name) {
  if (p->summary) fprintf(f, "%s %s: %s\n\n", name, strata_version(), p->summary);
  fprintf(f,
          "Usage:\n"
          "  mpirun -np P+1 %s APP [options]   rank 0 coordinates, ranks 1..P work\n"
          "  %s APP --mode serial [options]    the same computation in one process\n",
          name, name);
  for (int i = 0; i < p->n_commands; i++)
    fprintf(f, "  %s %s ...\n", name, p->commands[i].name);
  fprintf(f, "\nApps:\n");
  for (int i = 0; i < p->n_apps; i++)
    fprintf(f, "  %-12s %s\n", p->apps[i]->name, p->apps[i]->summary ? p->apps[i]->summary : "");
  if (p->n_commands) fprintf(f, "\nCommands:\n");
  for (int i = 0; i < p->n_commands; i++)
    fprintf(f, "  %-12s %s\n", p->commands[i].name, p->commands[i].summary ? p->commands[i].summary : "");
  if (p->external) list_external(f, name);
  fprintf(f,
          "\nRun '%s APP --help' for an app's options.\n"
          "Exit codes: 0 ok, 1 runtime error, 2 usage error, 3 the run diverged,\n"
          "130 interrupted by SIGINT, 143 by SIGTERM.\n",
          name);
}

static int run_app(const strata_program *p, const char *name, const strata_app *app, int skip,
                   int argc, char **argv) {
  char prog[256];
  if (p->n_apps == 1 && !p->n_commands)
    snprintf(prog, sizeof prog, "%s", name);
  else
    snprintf(prog, sizeof prog, "%s %s", name, app->name);
  strata__driver d = {.prog = prog, .summary = p->summary_fn, .summary_ud = p->summary_ud};
  return strata__driver_main(app, &d, argc - skip, argv + skip, argc, argv);
}

int strata_program_main(const strata_program *p, int argc, char **argv) {
  const char *name = p->name ? p->name : argc > 0 ? base_name(argv[0]) : "strata";
  if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
    printf("%s %s (%s)\n", name, strata_version(), strata_build_id());
    return 0;
  }
  for (int i = 0; argc >= 2 && i < p->n_apps; i++)
    if (strcmp(argv[1], p->apps[i]->name) == 0) return run_app(p, name, p->apps[i], 2, argc, argv);
  for (int i = 0; argc >= 2 && i < p->n_commands; i++)
    if (strcmp(argv[1], p->commands[i].name) == 0) return p->commands[i].main(argc - 1, argv + 1);
  /* One app and nothing else: the options follow the program's name. */
  if (p->n_apps == 1 && !p->n_commands) return run_app(p, name, p->apps[0], 1, argc, argv);
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage_program(argc < 2 ? stderr : stdout, p, name);
    return argc < 2 ? 2 : 0;
  }
  char path[PATH_MAX + 320];
  if (p->external && !find_external(name, argv[1], path, sizeof path)) {
    /* The app's own program takes over this rank before any MPI call, so
     * `mpirun -np 3 strata NAME` starts NAME's program on every rank. */
    argv[1] = path;
    execv(path, argv + 1);
    fprintf(stderr, "%s: cannot run %s: %s\n", name, path, strerror(errno));
    return 1;
  }
  char q[STRATA_QUOTE_SIZE];
  fprintf(stderr, "%s: unknown %s '%s' (see %s --help)\n", name,
          p->n_commands ? "app or command" : "app",
          strata_quote(q, sizeof q, argv[1], strlen(argv[1])), name);
  return 2;
}

int strata_main(int argc, char **argv, const strata_app *const *apps, int n_apps) {
  strata_program p = {.apps = apps, .n_apps = n_apps};
  return strata_program_main(&p, argc, argv);
}
