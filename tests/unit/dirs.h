/*
 * Directory helpers the unit tests share: counting a directory's entries
 * and removing a tree the test made.
 */
#ifndef STRATA_TESTS_DIRS_H
#define STRATA_TESTS_DIRS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Entries of dir other than . and .., or -1 when it cannot be read. */
static inline int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* Removes dir and everything below it (a file given instead: the file),
 * making read-only entries writable first. */
static inline void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    unlink(dir);
    return;
  }
  struct dirent *e;
  char p[4096];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p) continue;
    chmod(p, 0700);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      remove_tree(p);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

#endif
