/*
 * Checkpoints on the coordinator's side (scheduler/ckpt.h).
 *
 * The manifest is JSON: what the run was (app, mode, workers, the settings
 * that change its result, the data's size and checksum, the struct sizes
 * the parts were written with), where it stands (passes, the clock the next
 * pass starts at, how its random streams are positioned) and every part
 * with its size and checksum. A resume refuses any difference that would
 * change the result, naming the first one.
 */
#include "scheduler/ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/live.h"
#include "core/ckpt.h"
#include "core/jsonr.h"
#include "scheduler/aggregate.h"
#include "strata/core.h"
#include "strata/json.h"
#include "strata/version.h"

#define FORMAT "strata-checkpoint-1"
#define COORD_FILE "coordinator.bin"

/* The coordinator's part: COORD entries. */
enum { C_STATE = 1, C_PER_PASS, C_PER_PASS_WORKER, C_WORKER_TOTAL, C_CONTROL, C_OBJ_HIST };

typedef struct coord_state {
  int32_t passes, workers, n_decided, pad;
  double wall_s, train_cpu_s;
} coord_state;

/* The sizes the parts' raw structs have in this build. */
static void layout(char *out, size_t n) {
  snprintf(out, n, "pass_stats %zu, worker_stats %zu, pass_control %zu, objectives %d",
           sizeof(strata_pass_stats), sizeof(strata_worker_stats), sizeof(pass_control),
           STRATA_MAX_OBJECTIVES);
}

static const char *resume_dir(const strata__ckpt_run *ck) { return ck->opts->resume_dir; }

/* ---- the data's identity ------------------------------------------- */

static void data_identity(strata__ckpt_run *ck, const strata_problem *p) {
  strata_hash h;
  strata_hash_init(&h, STRATA__CKPT_SEED);
  uint64_t n = 0;
#define ADD(buf, len)                          \
  do {                                         \
    uint64_t l_ = (len);                       \
    strata_hash_update(&h, &l_, sizeof l_);    \
    if (l_) strata_hash_update(&h, (buf), l_); \
    n += l_;                                   \
  } while (0)
  ADD(p->meta, p->meta_len);
  for (int i = 0; i < p->n_data; i++) ADD(p->data[i].buf, p->data[i].len);
  for (int i = 0; p->eval && i < p->n_data; i++) ADD(p->eval[i].buf, p->eval[i].len);
#undef ADD
  strata_hash_update(&h, &p->n_examples, sizeof p->n_examples);
  ck->data_sum = strata_hash_final(&h);
  ck->data_bytes = n;
}

/* ---- writing --------------------------------------------------------- */

static strata__ckpt_wait *wait_for(strata__ckpt_run *ck, int passes) {
  for (int i = 0; i < ck->n_wait; i++)
    if (ck->wait[i].passes == passes) return &ck->wait[i];
  strata__ckpt_wait *v = strata_realloc(ck->wait, ((size_t)ck->n_wait + 1) * sizeof *v);
  if (!v) return NULL;
  ck->wait = v;
  strata__ckpt_wait *cw = &ck->wait[ck->n_wait];
  memset(cw, 0, sizeof *cw);
  cw->passes = passes;
  cw->notes = strata_calloc((size_t)ck->P, sizeof *cw->notes);
  cw->noted = strata_calloc((size_t)ck->P, 1);
  if (!cw->notes || !cw->noted) {
    strata_free(cw->notes);
    strata_free(cw->noted);
    return NULL;
  }
  ck->n_wait++;
  return cw;
}

static void hex(char out[17], uint64_t v) { snprintf(out, 17, "%016" PRIx64, v); }

typedef struct manifest_ctx {
  const strata__ckpt_run *ck;
  const strata__ckpt_wait *cw;
} manifest_ctx;

/* The clock the next pass starts at, as the app is told clocks. */
static int64_t next_clock(const strata__ckpt_run *ck, int passes) {
  const strata_setup *s = &ck->setup;
  if (s->wpc == 0) return -1; /* a minibatch per clock: in the parts */
  if (s->wpc < 1) return (int64_t)passes * (int64_t)(1.0 / s->wpc + 0.5);
  return (int64_t)(passes / s->wpc);
}

static int fill_manifest(FILE *f, void *ud) {
  manifest_ctx *m = ud;
  const strata__ckpt_run *ck = m->ck;
  const strata__ckpt_wait *cw = m->cw;
  char h[17], lay[160], when[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  layout(lay, sizeof lay);
  strata_json j;
  strata_json_init(&j, f);
  strata_json_object_begin(&j, NULL);
  strata_json_string(&j, "format", FORMAT);
  strata_json_string(&j, "strata", strata_version());
  strata_json_string(&j, "build", strata_build_id());
  strata_json_string(&j, "written", when);
  strata_json_string(&j, "app", ck->app->name);
  strata_json_string(&j, "mode", strata_mode_name(ck->setup.mode));
  strata_json_int(&j, "workers", ck->P);
  strata_json_int(&j, "passes", cw->passes);
  int64_t clk = next_clock(ck, cw->passes);
  if (clk >= 0) strata_json_int(&j, "next_clock", clk);
  strata_json_string(&j, "byte_order", "little");
  strata_json_string(&j, "layout", lay);
  strata_json_object_begin(&j, "data");
  strata_json_int(&j, "bytes", (int64_t)ck->data_bytes);
  hex(h, ck->data_sum);
  strata_json_string(&j, "checksum", h);
  strata_json_object_end(&j);
  /* Every random stream drawn during passes is seeded from (seed, pass,
   * block, chunk) and none carries over a pass: the seed and the next
   * pass position them all. */
  strata_json_object_begin(&j, "random_streams");
  strata_json_int(&j, "seed", (int64_t)ck->setup.seed);
  strata_json_int(&j, "next_pass", cw->passes);
  strata_json_string(&j, "rule", "seeded from (seed, pass, block, chunk); none spans passes");
  strata_json_object_end(&j);
  strata_json_object_begin(&j, "settings");
  for (int i = 0; i < ck->opts->n_settings; i++) {
    const char *s = ck->opts->settings[i];
    const char *eq = strchr(s, '=');
    if (!eq) continue;
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
    strata_json_string(&j, key, eq + 1);
  }
  strata_json_object_end(&j);
  strata_json_array_begin(&j, "parts");
  for (int w = -1; w < ck->P; w++) {
    char file[64];
    if (w < 0) snprintf(file, sizeof file, COORD_FILE);
    else snprintf(file, sizeof file, "worker-%d.bin", w);
    strata_json_object_begin(&j, NULL);
    strata_json_string(&j, "file", file);
    strata_json_int(&j, "worker", w);
    strata_json_int(&j, "bytes", (int64_t)(w < 0 ? cw->coord_bytes : cw->notes[w].bytes));
    hex(h, w < 0 ? cw->coord_sum : cw->notes[w].sum);
    strata_json_string(&j, "checksum", h);
    strata_json_object_end(&j);
  }
  strata_json_array_end(&j);
  strata_json_object_end(&j);
  fputc('\n', f);
  return 0;
}

/* Publishes every checkpoint whose parts are all on disk, oldest first,
 * removing the ones before it. */
static int publish_ready(strata__ckpt_run *ck, strata__agg *agg) {
  int rc = 0;
  while (!rc && ck->n_wait && ck->wait[0].coord_done && ck->wait[0].n_noted == ck->P) {
    strata__ckpt_wait *cw = &ck->wait[0];
    manifest_ctx m = {ck, cw};
    rc = strata__ckpt_publish(ck->opts->checkpoint_dir, cw->passes, fill_manifest, &m);
    if (!rc) rc = strata__ckpt_prune(ck->opts->checkpoint_dir, cw->passes);
    if (!rc) {
      strata_run_result *r = agg->res;
      r->checkpoints++;
      r->checkpoint_last = cw->passes;
      r->checkpoint_bytes = cw->coord_bytes;
      double slowest = 0;
      for (int w = 0; w < ck->P; w++) {
        r->checkpoint_bytes += cw->notes[w].bytes;
        if (cw->notes[w].seconds > slowest) slowest = cw->notes[w].seconds;
      }
      r->checkpoint_s += slowest;
      strata__live_checkpoint(ck->opts->checkpoint_dir, cw->passes);
      strata_log(STRATA_LOG_DEBUG, "checkpoint after %d passes written to %s", cw->passes,
                 ck->opts->checkpoint_dir);
    }
    strata_free(cw->notes);
    strata_free(cw->noted);
    memmove(ck->wait, ck->wait + 1, (size_t)--ck->n_wait * sizeof *ck->wait);
  }
  return rc;
}

int strata__ckpt_summed(void *ud, strata__agg *agg, int pass) {
  strata__ckpt_run *ck = ud;
  const strata_engine_opts *o = ck->opts;
  if (!o->checkpoint_dir || (pass + 1) % o->checkpoint_every) return 0;
  strata__ckpt_wait *cw = wait_for(ck, pass + 1);
  if (!cw) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  strata_run_result *r = agg->res;
  int P = ck->P, n = pass + 1;
  int decided = agg->n_decided;
  coord_state cs = {n, P, decided, 0, strata_now() - agg->t_train0 + agg->wall_before,
                    strata_cpu_seconds() - agg->cpu_train0 + agg->cpu_before};
  strata__part_writer pw;
  int rc = strata__part_begin(&pw, o->checkpoint_dir, n, COORD_FILE, -1);
  if (!rc) rc = strata__part_add(&pw, STRATA__CK_COORD, C_STATE, 0, &cs, sizeof cs);
  if (!rc)
    rc = strata__part_add(&pw, STRATA__CK_COORD, C_PER_PASS, 0, r->per_pass,
                          (uint64_t)n * sizeof *r->per_pass);
  if (!rc)
    rc = strata__part_add(&pw, STRATA__CK_COORD, C_PER_PASS_WORKER, 0, r->per_pass_worker,
                          (uint64_t)n * (uint64_t)P * sizeof *r->per_pass_worker);
  if (!rc)
    rc = strata__part_add(&pw, STRATA__CK_COORD, C_WORKER_TOTAL, 0, r->worker_total,
                          (uint64_t)P * sizeof *r->worker_total);
  if (!rc)
    rc = strata__part_add(&pw, STRATA__CK_COORD, C_CONTROL, 0, agg->ctl,
                          (uint64_t)decided * sizeof *agg->ctl);
  if (!rc)
    rc = strata__part_add(&pw, STRATA__CK_COORD, C_OBJ_HIST, 0, agg->obj_hist,
                          (uint64_t)n * STRATA_MAX_OBJECTIVES * sizeof *agg->obj_hist);
  if (!rc) rc = strata__part_commit(&pw, &cw->coord_sum, &cw->coord_bytes);
  strata__part_abandon(&pw);
  if (rc) return rc;
  cw->coord_done = 1;
  return publish_ready(ck, agg);
}

int strata__ckpt_note(strata__ckpt_run *ck, strata__agg *agg, const ckpt_note *n) {
  const strata_engine_opts *o = ck->opts;
  if (!o->checkpoint_dir || n->worker < 0 || n->worker >= ck->P || n->passes < 1 ||
      n->passes % o->checkpoint_every)
    return strata_err_set(STRATA_ECOMM, "coordinator: a checkpoint note (after %d passes) from worker %d",
                          n->passes, n->worker);
  strata__ckpt_wait *cw = wait_for(ck, n->passes);
  if (!cw) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  if (cw->noted[n->worker])
    return strata_err_set(STRATA_ECOMM, "coordinator: worker %d noted its checkpoint part twice",
                          n->worker);
  cw->noted[n->worker] = 1;
  cw->notes[n->worker] = *n;
  cw->n_noted++;
  return publish_ready(ck, agg);
}

int strata__ckpt_finish(strata__ckpt_run *ck) {
  if (!ck->n_wait) return 0;
  strata__ckpt_wait *cw = &ck->wait[0];
  int missing = -1;
  for (int w = 0; w < ck->P && missing < 0; w++)
    if (!cw->noted[w]) missing = w;
  return strata_err_set(STRATA_ECOMM, "the checkpoint after %d passes is incomplete: %s", cw->passes,
                        missing >= 0 ? "a worker's part never came" : "the coordinator's part is missing");
}

/* ---- resuming -------------------------------------------------------- */

static int refuse(const strata__ckpt_run *ck, const char *fmt, const char *a, const char *b) {
  char what[512];
  snprintf(what, sizeof what, fmt, a, b);
  return strata_err_set(STRATA_EUSAGE, "--resume %s: the checkpoint after %d passes %s",
                        resume_dir(ck), ck->start_pass, what);
}

/* The manifest's settings against the run's: the first difference. */
static int check_settings(const strata__ckpt_run *ck, const strata__jv *set) {
  const strata_engine_opts *o = ck->opts;
  if (!set || set->kind != STRATA__JV_OBJECT)
    return strata_err_set(STRATA_EPARSE, "%s: no settings", ck->manifest);
  char key[128];
  for (int i = 0; i < o->n_settings; i++) {
    const char *s = o->settings[i], *eq = strchr(s, '=');
    if (!eq) continue;
    snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
    const char *was = strata__json_str(set, key);
    if (!was) return refuse(ck, "has no --%s (this run has it: it changes the result)", key, "");
    if (strcmp(was, eq + 1) != 0) {
      char a[256], b[256];
      snprintf(a, sizeof a, "--%s %s", key, was);
      snprintf(b, sizeof b, "--%s %s", key, eq + 1);
      return refuse(ck, "was made with %s; this run has %s (settings that change the result must match)",
                    a, b);
    }
  }
  for (const strata__jv *m = set->child; m; m = m->next) {
    size_t n = strlen(m->key);
    int found = 0;
    for (int i = 0; i < o->n_settings && !found; i++)
      found = strncmp(o->settings[i], m->key, n) == 0 && o->settings[i][n] == '=';
    if (!found) return refuse(ck, "was made with --%s, which this run does not know", m->key, "");
  }
  return 0;
}

static int read_manifest(strata__ckpt_run *ck) {
  FILE *f = fopen(ck->manifest, "rb");
  if (!f) return strata_err_set(STRATA_EIO, "%s: cannot read", ck->manifest);
  char *text = NULL;
  size_t len = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (len + 4096 > cap) {
      cap = cap ? 2 * cap : 16384;
      if (cap > (64u << 20)) {
        rc = strata_err_set(STRATA_EPARSE, "%s: too large for a manifest", ck->manifest);
        break;
      }
      char *t = strata_realloc(text, cap);
      if (!t) {
        rc = strata_err_set(STRATA_ENOMEM, "%s: out of memory", ck->manifest);
        break;
      }
      text = t;
    }
    size_t n = fread(text + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  if (!rc && ferror(f)) rc = strata_err_set(STRATA_EIO, "%s: read failed", ck->manifest);
  fclose(f);
  strata__json_doc *doc = NULL;
  if (!rc && (rc = strata__json_parse(text, len, &doc))) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", strata_err_msg());
    rc = strata_err_set(STRATA_EPARSE, "%s: %s", ck->manifest, msg);
  }
  strata_free(text);
  ck->doc = doc;
  return rc;
}

/* The manifest against the run, before any work. */
static int check_manifest(strata__ckpt_run *ck) {
  const strata__jv *root = strata__json_root(ck->doc);
  const char *fmt = strata__json_str(root, "format");
  if (!fmt || strcmp(fmt, FORMAT) != 0)
    return strata_err_set(STRATA_EPARSE, "%s: not a strata checkpoint manifest (%s)", ck->manifest,
                          FORMAT);
  int64_t passes, workers;
  const char *app = strata__json_str(root, "app"), *mode = strata__json_str(root, "mode");
  const char *order = strata__json_str(root, "byte_order"), *lay = strata__json_str(root, "layout");
  if (!app || !mode || !order || !lay ||
      strata__json_int(root, "passes", 1, 1000000000, &passes) ||
      strata__json_int(root, "workers", 1, 1000000, &workers))
    return strata_err_set(STRATA_EPARSE, "%s: incomplete manifest", ck->manifest);
  if (passes != ck->start_pass)
    return strata_err_set(STRATA_EPARSE, "%s: says %lld passes, in the directory of pass %d",
                          ck->manifest, (long long)passes, ck->start_pass);
  char mine[160];
  layout(mine, sizeof mine);
  if (strcmp(app, ck->app->name) != 0) return refuse(ck, "is of app %s, not %s", app, ck->app->name);
  if (strcmp(mode, strata_mode_name(ck->setup.mode)) != 0) {
    char a[64];
    snprintf(a, sizeof a, "--mode %s", mode);
    return refuse(ck, "was made with %s; this run has --mode %s", a, strata_mode_name(ck->setup.mode));
  }
  if (workers != ck->P) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%lld", (long long)workers);
    snprintf(b, sizeof b, "%d", ck->P);
    return refuse(ck, "was made with %s workers; this run has %s", a, b);
  }
  if (strcmp(order, "little") != 0 || strcmp(lay, mine) != 0)
    return refuse(ck, "was written by a build with other struct layouts (%s); this one has %s", lay,
                  mine);
  if (ck->start_pass > ck->setup.passes) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%d", ck->start_pass);
    snprintf(b, sizeof b, "%d", ck->setup.passes);
    return refuse(ck, "holds %s passes, more than --passes %s", a, b);
  }
  return check_settings(ck, strata__json_get(root, "settings"));
}

int strata__ckpt_open(strata__ckpt_run *ck, const strata_app *app, const strata_engine_opts *opts,
                      const strata_setup *setup, int all_rotating) {
  memset(ck, 0, sizeof *ck);
  ck->app = app;
  ck->opts = opts;
  ck->setup = *setup;
  ck->P = setup->workers;
  ck->all_rotating = all_rotating;
  ck->sfb = setup->mode == STRATA_MODE_SFB;
  ck->resumed_from = -1;
  int rc = 0;
  if (opts->resume_dir) {
    int last;
    if ((rc = strata__ckpt_last(opts->resume_dir, &last))) return rc;
    if (last < 0)
      return strata_err_set(STRATA_EUSAGE, "--resume %s: no complete checkpoint there",
                            opts->resume_dir);
    ck->start_pass = ck->resumed_from = last;
    if ((rc = strata__ckpt_path(ck->manifest, sizeof ck->manifest, opts->resume_dir, last,
                                STRATA__CKPT_MANIFEST)))
      return rc;
    if ((rc = read_manifest(ck)) || (rc = check_manifest(ck))) return rc;
  }
  if (opts->checkpoint_dir)
    rc = strata__ckpt_prepare(opts->checkpoint_dir,
                              opts->resume_dir && strata__same_dir(opts->checkpoint_dir,
                                                                   opts->resume_dir));
  return rc;
}

void strata__ckpt_close(strata__ckpt_run *ck) {
  strata__json_free(ck->doc);
  for (int i = 0; i < ck->n_wait; i++) {
    strata_free(ck->wait[i].notes);
    strata_free(ck->wait[i].noted);
  }
  strata_free(ck->wait);
  for (int w = 0; ck->global_of && w < ck->P; w++) strata_free(ck->global_of[w]);
  strata_free(ck->global_of);
  size_t n = ck->rot_of ? (size_t)ck->P * (size_t)ck->n_rot : 0;
  for (size_t i = 0; i < n; i++) strata_free(ck->rot_of[i]);
  strata_free(ck->rot_of);
  memset(ck, 0, sizeof *ck);
}

/* Reading the parts back. */
typedef struct rctx {
  strata__ckpt_run *ck;
  strata_problem *p;
  const strata_schedule *s;
  strata__agg *agg;
  int who;               /* the part being read: -1 coordinator, else a worker */
  const char *path;
  unsigned char *res_seen, *rot_seen;
  unsigned char *global_seen; /* per worker */
  unsigned char *table_seen;  /* per worker */
  coord_state cs;
  int coord_items;       /* bit per item seen */
  float *rows;           /* a worker's TABLE_ROWS, scattered after the part */
  uint64_t rows_len;
  uint32_t L;            /* the table's floats per row */
} rctx;

static int unexpected(const rctx *c, const strata__ckpt_entry *e, const char *why) {
  return strata_err_set(STRATA_EPARSE, "%s: entry (kind %u, id %d, %llu bytes): %s", c->path, e->kind,
                        e->id, (unsigned long long)e->len, why);
}

static int coord_dest(rctx *c, const strata__ckpt_entry *e, void **buf) {
  strata__agg *agg = c->agg;
  strata_run_result *r = agg->res;
  uint64_t n = (uint64_t)c->ck->start_pass, P = (uint64_t)c->ck->P;
  if (e->id < C_STATE || e->id > C_OBJ_HIST || (c->coord_items & (1 << e->id)))
    return unexpected(c, e, "not a coordinator item, or twice");
  if (e->id != C_STATE && !(c->coord_items & (1 << C_STATE)))
    return unexpected(c, e, "before the coordinator's state");
  c->coord_items |= 1 << e->id;
  uint64_t want = 0;
  switch (e->id) {
    case C_STATE: want = sizeof c->cs; *buf = &c->cs; break;
    case C_PER_PASS: want = n * sizeof *r->per_pass; *buf = r->per_pass; break;
    case C_PER_PASS_WORKER: want = n * P * sizeof *r->per_pass_worker; *buf = r->per_pass_worker; break;
    case C_WORKER_TOTAL: want = P * sizeof *r->worker_total; *buf = r->worker_total; break;
    case C_CONTROL:
      /* Verdicts decided past this run's last pass are not kept. */
      if (e->len % sizeof *agg->ctl) return unexpected(c, e, "not whole verdicts");
      if (e->len / sizeof *agg->ctl > (uint64_t)c->ck->setup.passes) {
        c->rows = strata_malloc(e->len);
        if (!c->rows) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
        c->rows_len = e->len;
        *buf = c->rows;
      } else {
        *buf = agg->ctl;
      }
      return 0;
    case C_OBJ_HIST:
      want = n * STRATA_MAX_OBJECTIVES * sizeof *agg->obj_hist;
      *buf = agg->obj_hist;
      break;
  }
  if (e->len != want) return unexpected(c, e, "of the wrong size");
  return 0;
}

static int worker_dest(rctx *c, const strata__ckpt_entry *e, void **buf) {
  strata__ckpt_run *ck = c->ck;
  strata_problem *p = c->p;
  int w = c->who;
  switch (e->kind) {
    case STRATA__CK_RESIDENT:
      if (e->id < 0 || e->id >= p->n_resident || strata_schedule_resident_owner(c->s, e->id) != w ||
          c->res_seen[e->id] || e->len != p->resident[e->id].len)
        return unexpected(c, e, "not a resident block of this worker, or twice");
      c->res_seen[e->id] = 1;
      *buf = p->resident[e->id].buf;
      return 0;
    case STRATA__CK_ROTATING:
      if (e->id < 0 || e->id >= p->n_rotating || e->len != p->rotating[e->id].len ||
          (ck->all_rotating && !ck->sfb))
        return unexpected(c, e, "not a rotating block of this run");
      if (ck->rot_of) {
        void **slot = &ck->rot_of[(size_t)w * (size_t)p->n_rotating + (size_t)e->id];
        if (*slot) return unexpected(c, e, "twice");
        if (!(*slot = strata_alloc_aligned(e->len ? e->len : 1)))
          return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
        *buf = *slot;
        c->rot_seen[e->id] = 1;
        return 0;
      }
      if (c->rot_seen[e->id]) return unexpected(c, e, "twice");
      c->rot_seen[e->id] = 1;
      *buf = p->rotating[e->id].buf;
      return 0;
    case STRATA__CK_GLOBAL:
      if (!p->global.len || e->len != p->global.len || ck->all_rotating || c->global_seen[w])
        return unexpected(c, e, "not this run's global block, or twice");
      c->global_seen[w] = 1;
      if (ck->P == 1) {
        *buf = p->global.buf;
        return 0;
      }
      if (!(ck->global_of[w] = strata_alloc_aligned(e->len)))
        return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
      *buf = ck->global_of[w];
      return 0;
    case STRATA__CK_TABLE_ROWS: {
      uint32_t rows = 0;
      for (int r = 0; r < p->n_rotating; r++) rows += p->rotating[r].nrows;
      if (p->global.len) rows += p->global.nrows;
      uint64_t mine = rows > (uint32_t)w ? (rows - (uint32_t)w + (uint32_t)ck->P - 1) / (uint32_t)ck->P : 0;
      if (!ck->all_rotating || ck->sfb || e->id != w || e->aux != c->L || c->rows ||
          e->len != mine * c->L * sizeof(float))
        return unexpected(c, e, "not this worker's shard of the table");
      c->rows = strata_malloc(e->len ? e->len : 1);
      if (!c->rows) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
      c->rows_len = e->len;
      c->table_seen[w] = 1;
      *buf = c->rows;
      return 0;
    }
  }
  return unexpected(c, e, "unknown kind");
}

static int dest(void *ud, const strata__ckpt_entry *e, void **buf) {
  rctx *c = ud;
  if (c->who < 0) return e->kind == STRATA__CK_COORD ? coord_dest(c, e, buf) : unexpected(c, e, "not a coordinator item");
  return worker_dest(c, e, buf);
}

/* Table row g of the tables back-end's numbering: the rotating blocks'
 * rows in order, then the global rows. */
static float *table_row(strata_problem *p, uint32_t g, uint32_t L) {
  for (int r = 0; r < p->n_rotating; r++) {
    if (g < p->rotating[r].nrows) return (float *)p->rotating[r].buf + (size_t)g * L;
    g -= p->rotating[r].nrows;
  }
  return (float *)p->global.buf + (size_t)g * L;
}

static void scatter_rows(rctx *c) {
  strata_problem *p = c->p;
  uint32_t rows = 0, P = (uint32_t)c->ck->P;
  for (int r = 0; r < p->n_rotating; r++) rows += p->rotating[r].nrows;
  if (p->global.len) rows += p->global.nrows;
  const float *src = c->rows;
  for (uint32_t g = (uint32_t)c->who; g < rows; g += P, src += c->L)
    memcpy(table_row(p, g, c->L), src, (size_t)c->L * sizeof(float));
}

/* The manifest's record of a part: its file, size and checksum. */
static int part_entry(const strata__ckpt_run *ck, int who, char *file, size_t n, uint64_t *sum,
                      uint64_t *bytes) {
  const strata__jv *parts = strata__json_get(strata__json_root(ck->doc), "parts");
  for (const strata__jv *m = parts && parts->kind == STRATA__JV_ARRAY ? parts->child : NULL; m;
       m = m->next) {
    int64_t w, b;
    const char *f = strata__json_str(m, "file"), *h = strata__json_str(m, "checksum");
    if (strata__json_int(m, "worker", -1, ck->P - 1, &w) || w != who) continue;
    char *end = NULL;
    if (!f || strchr(f, '/') || !h || strlen(h) != 16 ||
        strata__json_int(m, "bytes", 0, INT64_MAX / 2, &b))
      break;
    *sum = strtoull(h, &end, 16);
    if (*end) break;
    *bytes = (uint64_t)b;
    snprintf(file, n, "%s", f);
    return 0;
  }
  return strata_err_set(STRATA_EPARSE, "%s: no valid record of the %s's part", ck->manifest,
                        who < 0 ? "coordinator" : "worker");
}

static int read_part(rctx *c, int who) {
  strata__ckpt_run *ck = c->ck;
  char file[256], path[4096];
  uint64_t sum = 0, bytes = 0;
  int rc = part_entry(ck, who, file, sizeof file, &sum, &bytes);
  if (!rc) rc = strata__ckpt_path(path, sizeof path, resume_dir(ck), ck->start_pass, file);
  if (rc) return rc;
  c->who = who;
  c->path = path;
  rc = strata__part_read(path, ck->start_pass, who, sum, bytes, dest, c);
  if (!rc && c->rows && who >= 0) scatter_rows(c);
  if (!rc && c->rows && who < 0) {
    /* Verdicts beyond this run's passes: keep those it needs. */
    memcpy(c->agg->ctl, c->rows, (size_t)c->ck->setup.passes * sizeof *c->agg->ctl);
  }
  strata_free(c->rows);
  c->rows = NULL;
  return rc;
}

/* Every parameter block came back, each from where the mode keeps it. */
static int check_coverage(rctx *c) {
  strata__ckpt_run *ck = c->ck;
  strata_problem *p = c->p;
  for (int i = 0; i < p->n_resident; i++)
    if (p->resident[i].len && !c->res_seen[i])
      return strata_err_set(STRATA_EPARSE, "%s: resident block %d is in no part", ck->manifest, i);
  for (int r = 0; r < p->n_rotating && (!ck->all_rotating || ck->sfb); r++)
    if (p->rotating[r].len && !c->rot_seen[r])
      return strata_err_set(STRATA_EPARSE, "%s: rotating block %d is in no part", ck->manifest, r);
  for (int w = 0; w < ck->P && ck->all_rotating && !ck->sfb; w++)
    if (!c->table_seen[w])
      return strata_err_set(STRATA_EPARSE, "%s: worker %d's shard of the table is in no part",
                            ck->manifest, w);
  for (int w = 0; w < ck->P && p->global.len && !ck->all_rotating; w++)
    if (!c->global_seen[w])
      return strata_err_set(STRATA_EPARSE, "%s: worker %d's global block is in no part", ck->manifest, w);
  if (ck->rot_of)
    for (int w = 0; w < ck->P; w++)
      if (!ck->rot_of[(size_t)w * (size_t)p->n_rotating])
        return strata_err_set(STRATA_EPARSE, "%s: worker %d's replica is in no part", ck->manifest, w);
  if (c->cs.passes != ck->start_pass || c->cs.workers != ck->P || c->coord_items != 0x7e)
    return strata_err_set(STRATA_EPARSE, "%s: the coordinator's part is incomplete", ck->manifest);
  return 0;
}

static int resume_parts(strata__ckpt_run *ck, strata_problem *p, const strata_schedule *s,
                        strata__agg *agg) {
  rctx c = {.ck = ck, .p = p, .s = s, .agg = agg};
  for (int r = 0; r < p->n_rotating; r++)
    if (p->rotating[r].nrows) c.L = p->rotating[r].row_bytes / (uint32_t)sizeof(float);
  ck->n_rot = p->n_rotating;
  c.res_seen = strata_calloc((size_t)p->n_resident + 1, 1);
  c.rot_seen = strata_calloc((size_t)p->n_rotating + 1, 1);
  c.global_seen = strata_calloc((size_t)ck->P, 1);
  c.table_seen = strata_calloc((size_t)ck->P, 1);
  ck->global_of = strata_calloc((size_t)ck->P, sizeof *ck->global_of);
  /* Under partial broadcast every replica is its own (worker/sfb.c). */
  int partial = ck->sfb && ck->opts->peers && ck->opts->peers < ck->P - 1;
  if (partial)
    ck->rot_of = strata_calloc((size_t)ck->P * (size_t)p->n_rotating, sizeof *ck->rot_of);
  int rc = 0;
  if (!c.res_seen || !c.rot_seen || !c.global_seen || !c.table_seen || !ck->global_of ||
      (partial && !ck->rot_of))
    rc = strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  for (int who = -1; who < ck->P && !rc; who++) rc = read_part(&c, who);
  if (!rc) rc = check_coverage(&c);
  if (!rc) {
    /* The aggregator continues where the checkpoint left it. */
    int n = ck->start_pass;
    agg->n_decided = c.cs.n_decided < ck->setup.passes ? c.cs.n_decided : ck->setup.passes;
    agg->start_pass = n;
    agg->wall_before = c.cs.wall_s;
    agg->cpu_before = c.cs.train_cpu_s;
    agg->res->resumed_passes = n;
    /* The coordinator's copy of the global block: worker 0's. */
    if (ck->P > 1 && p->global.len && !ck->all_rotating)
      memcpy(p->global.buf, ck->global_of[0], p->global.len);
  }
  strata_free(c.res_seen);
  strata_free(c.rot_seen);
  strata_free(c.global_seen);
  strata_free(c.table_seen);
  return rc;
}

int strata__ckpt_loaded(strata__ckpt_run *ck, strata_problem *p, const strata_schedule *s,
                        strata__agg *agg) {
  if (!ck->opts->checkpoint_dir && !ck->doc) return 0;
  data_identity(ck, p);
  if (!ck->doc) return 0;
  const strata__jv *data = strata__json_get(strata__json_root(ck->doc), "data");
  const char *h = strata__json_str(data, "checksum");
  int64_t bytes;
  if (!h || strata__json_int(data, "bytes", 0, INT64_MAX / 2, &bytes))
    return strata_err_set(STRATA_EPARSE, "%s: no record of the data", ck->manifest);
  char mine[17];
  hex(mine, ck->data_sum);
  if ((uint64_t)bytes != ck->data_bytes || strcmp(h, mine) != 0) {
    char a[64], b[64];
    snprintf(a, sizeof a, "%lld bytes, checksum %s", (long long)bytes, h);
    snprintf(b, sizeof b, "%llu bytes, checksum %s", (unsigned long long)ck->data_bytes, mine);
    return refuse(ck, "was made on other data (as loaded: %s; now %s)", a, b);
  }
  return resume_parts(ck, p, s, agg);
}
