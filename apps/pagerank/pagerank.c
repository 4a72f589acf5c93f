/* strata-pagerank: placeholder until the app lands. */
#include "strata/main.h"

static const strata_app app = {.name = "pagerank"};

int main(int argc, char **argv) {
  const strata_app *apps[] = {&app};
  return strata_main(argc, argv, apps, 1);
}
