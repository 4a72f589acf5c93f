/*
 * Prometheus' text format (core/prom.h).
 */
#include "core/prom.h"

#include <math.h>

static void pval(FILE *f, double v) {
  if (isnan(v))
    fputs("NaN", f);
  else if (isinf(v))
    fputs(v > 0 ? "+Inf" : "-Inf", f);
  else
    fprintf(f, "%.17g", v);
}

void strata__prom_family(FILE *f, const char *name, const char *type, const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void strata__prom_sample(FILE *f, const char *name, const char *labels, double v) {
  fputs(name, f);
  if (labels && labels[0]) fprintf(f, "{%s}", labels);
  fputc(' ', f);
  pval(f, v);
  fputc('\n', f);
}

void strata__prom_label(char *out, size_t n, const char *v) {
  size_t k = 0;
  for (; *v && k + 3 < n; v++) {
    if (*v == '\\' || *v == '"')
      out[k++] = '\\', out[k++] = *v;
    else if (*v == '\n')
      out[k++] = '\\', out[k++] = 'n';
    else
      out[k++] = *v;
  }
  out[k] = '\0';
}

void strata__prom_histogram(FILE *f, const char *name, const char *help, int n,
                            const uint64_t *counts, const double *le, double sum, uint64_t count) {
  strata__prom_family(f, name, "histogram", help);
  char bname[96], lab[48];
  snprintf(bname, sizeof bname, "%s_bucket", name);
  uint64_t cum = 0;
  for (int b = 0; b < n; b++) {
    cum += counts[b];
    snprintf(lab, sizeof lab, "le=\"%.6g\"", le[b]);
    strata__prom_sample(f, bname, lab, (double)cum);
  }
  strata__prom_sample(f, bname, "le=\"+Inf\"", (double)count);
  char n2[96];
  snprintf(n2, sizeof n2, "%s_sum", name);
  strata__prom_sample(f, n2, NULL, sum);
  snprintf(n2, sizeof n2, "%s_count", name);
  strata__prom_sample(f, n2, NULL, (double)count);
}
