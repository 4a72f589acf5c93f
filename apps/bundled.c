/* strata/apps/bundled.h: the bundled apps and commands, in --help order. */
#include "apps/lda/lda_app.h"
#include "strata/apps/bundled.h"
#include "strata/apps/dml.h"
#include "strata/apps/mf.h"
#include "strata/apps/mlr.h"

int strata__predict_main(int argc, char **argv);
int strata__mlr_predict_main(int argc, char **argv);
int strata__lda_eval_main(int argc, char **argv);

const strata_app *const strata_bundled_apps[] = {&strata_app_mf, &strata_app_lda, &strata_app_mlr,
                                                 &strata_app_dml};
const int strata_n_bundled_apps = sizeof strata_bundled_apps / sizeof strata_bundled_apps[0];

/* The commands' own parsers take the arguments after the command's name. */
static int mf_predict(int argc, char **argv) { return strata__predict_main(argc - 1, argv + 1); }
static int mlr_predict(int argc, char **argv) { return strata__mlr_predict_main(argc - 1, argv + 1); }
static int lda_eval(int argc, char **argv) { return strata__lda_eval_main(argc - 1, argv + 1); }

const strata_command strata_bundled_commands[] = {
    {"mf-predict", "score (user, item) pairs or recommend with an exported MF model", mf_predict},
    {"mlr-predict", "classify LIBSVM examples with an exported MLR model", mlr_predict},
    {"lda-eval",
     "the collapsed log-likelihood of a file of LDA topic assignments (WarpLDA's or "
     "strata lda's z)",
     lda_eval}};
const int strata_n_bundled_commands =
    sizeof strata_bundled_commands / sizeof strata_bundled_commands[0];
