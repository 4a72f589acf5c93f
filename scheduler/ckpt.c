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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/live.h"
#include "core/ckpt.h"
#include "core/manifest.h"
#include "scheduler/aggregate.h"
#include "strata/core.h"
#include "strata/version.h"

#define COORD_FILE "coordinator.bin"

/* The coordinator's part: COORD entries. */
enum {
  C_STATE = 1,
  C_PER_PASS,
  C_PER_PASS_WORKER,
  C_WORKER_TOTAL,
  C_CONTROL,
  C_OBJ_HIST,
  C_BLOCK, /* a round app's coordinator block (strata/round.h), when it has one */
  C_ROUNDS /* a round run's figures (strata_round_stats) */
};

typedef struct coord_state {
  int32_t passes, workers, n_decided, pad;
  double wall_s, train_cpu_s;
} coord_state;

/* The sizes the parts' raw structs have in this build. */
static void layout(char *out, size_t n) {
  snprintf(out, n, "pass_stats %zu, worker_stats %zu, pass_control %zu, objectives %d, rounds %zu",
           sizeof(strata_pass_stats), sizeof(strata_worker_stats), sizeof(pass_control),
           STRATA_MAX_OBJECTIVES, sizeof(strata_round_stats));
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
  manifest_ctx *c = ud;
  const strata__ckpt_run *ck = c->ck;
  const strata__ckpt_wait *cw = c->cw;
  strata__manifest m;
  memset(&m, 0, sizeof m);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(m.written, sizeof m.written, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(m.strata, sizeof m.strata, "%s", strata_version());
  snprintf(m.build, sizeof m.build, "%s", strata_build_id());
  snprintf(m.app, sizeof m.app, "%s", ck->app->name);
  snprintf(m.mode, sizeof m.mode, "%s", strata_mode_name(ck->setup.mode));
  snprintf(m.byte_order, sizeof m.byte_order, "little");
  layout(m.layout, sizeof m.layout);
  m.workers = ck->P;
  m.passes = cw->passes;
  m.next_clock = next_clock(ck, cw->passes);
  m.data_bytes = ck->data_bytes;
  m.data_sum = ck->data_sum;
  m.seed = ck->setup.seed;
  m.settings = (char **)ck->opts->settings;
  m.n_settings = ck->opts->n_settings;
  strata__manifest_part *parts = strata_calloc((size_t)ck->P + 1, sizeof *parts);
  if (!parts) return strata_err_set(STRATA_ENOMEM, "coordinator: out of memory");
  m.parts = parts;
  for (int w = -1; w < ck->P; w++) {
    strata__manifest_part *p = &parts[w + 1];
    if (w < 0) snprintf(p->file, sizeof p->file, COORD_FILE);
    else snprintf(p->file, sizeof p->file, "worker-%d.bin", w);
    p->worker = w;
    p->bytes = w < 0 ? cw->coord_bytes : cw->notes[w].bytes;
    p->sum = w < 0 ? cw->coord_sum : cw->notes[w].sum;
  }
  int rc = strata__manifest_write(f, &m);
  strata_free(parts);
  return rc;
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
  if (!rc && agg->prob->coord.len)
    rc = strata__part_add(&pw, STRATA__CK_COORD, C_BLOCK, 0, agg->prob->coord.buf,
                          agg->prob->coord.len);
  if (!rc && agg->prob->rounds_per_pass)
    rc = strata__part_add(&pw, STRATA__CK_COORD, C_ROUNDS, 0, &r->rounds, sizeof r->rounds);
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
  if (missing >= 0)
    return strata_err_set(STRATA_ECOMM, "the checkpoint after %d passes is incomplete: worker %d's "
                          "part never came", cw->passes, missing);
  return strata_err_set(STRATA_ECOMM, "the checkpoint after %d passes is incomplete: the "
                        "coordinator's part is missing", cw->passes);
}

/* ---- resuming -------------------------------------------------------- */

static int refuse(const strata__ckpt_run *ck, const char *fmt, const char *a, const char *b) {
  char what[1200];
  snprintf(what, sizeof what, fmt, a, b);
  return strata_err_set(STRATA_EUSAGE, "--resume %s: the checkpoint after %d passes %s",
                        resume_dir(ck), ck->start_pass, what);
}

/* Text from the manifest, as a message may quote it (strata_quote). */
static const char *quoted(char q[STRATA_QUOTE_SIZE], const char *s) {
  return strata_quote(q, STRATA_QUOTE_SIZE, s, strlen(s));
}

/* The manifest's settings against the run's: the first difference. */
static int check_settings(const strata__ckpt_run *ck) {
  char q[STRATA_QUOTE_SIZE];
  const strata_engine_opts *o = ck->opts;
  const strata__manifest *m = &ck->man;
  char key[128];
  for (int i = 0; i < o->n_settings; i++) {
    const char *s = o->settings[i], *eq = strchr(s, '=');
    if (!eq) continue;
    snprintf(key, sizeof key, "%.*s", (int)(eq - s), s);
    const char *was = strata__manifest_setting(m, key);
    if (!was) return refuse(ck, "has no --%s (this run has it: it changes the result)", key, "");
    if (strcmp(was, eq + 1) != 0) {
      char a[256], b[256];
      snprintf(a, sizeof a, "--%s %s", key, quoted(q, was));
      snprintf(b, sizeof b, "--%s %s", key, eq + 1);
      return refuse(ck, "was made with %s; this run has %s (settings that change the result must match)",
                    a, b);
    }
  }
  for (int i = 0; i < m->n_settings; i++) {
    const char *eq = strchr(m->settings[i], '=');
    snprintf(key, sizeof key, "%.*s", (int)(eq - m->settings[i]), m->settings[i]);
    int found = 0;
    for (int j = 0; j < o->n_settings && !found; j++)
      found = strncmp(o->settings[j], key, strlen(key)) == 0 && o->settings[j][strlen(key)] == '=';
    if (!found) return refuse(ck, "was made with --%s, which this run does not know", quoted(q, key), "");
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
  if (!rc && (rc = strata__manifest_read(text, len, &ck->man))) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", strata_err_msg());
    rc = strata_err_set(rc, "%s: %s", ck->manifest, msg);
  }
  if (!rc) ck->have_man = 1;
  strata_free(text);
  return rc;
}

/* The manifest against the run, before any work. */
static int check_manifest(strata__ckpt_run *ck) {
  const strata__manifest *m = &ck->man;
  if (m->passes != ck->start_pass)
    return strata_err_set(STRATA_EPARSE, "%s: says %d passes, in the directory of pass %d",
                          ck->manifest, m->passes, ck->start_pass);
  char mine[160];
  layout(mine, sizeof mine);
  char q[STRATA_QUOTE_SIZE];
  if (strcmp(m->app, ck->app->name) != 0)
    return refuse(ck, "is of app %s, not %s", quoted(q, m->app), ck->app->name);
  if (strcmp(m->mode, strata_mode_name(ck->setup.mode)) != 0) {
    char a[64];
    snprintf(a, sizeof a, "--mode %s", quoted(q, m->mode));
    return refuse(ck, "was made with %s; this run has --mode %s", a, strata_mode_name(ck->setup.mode));
  }
  if (m->workers != ck->P) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%d", m->workers);
    snprintf(b, sizeof b, "%d", ck->P);
    return refuse(ck, "was made with %s workers; this run has %s", a, b);
  }
  if (strcmp(m->byte_order, "little") != 0 || strcmp(m->layout, mine) != 0)
    return refuse(ck, "was written by a build with other struct layouts (%s); this one has %s",
                  quoted(q, m->layout), mine);
  if (ck->start_pass > ck->setup.passes) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%d", ck->start_pass);
    snprintf(b, sizeof b, "%d", ck->setup.passes);
    return refuse(ck, "holds %s passes, more than --passes %s", a, b);
  }
  return check_settings(ck);
}

int strata__ckpt_open(strata__ckpt_run *ck, const strata_app *app, const strata_engine_opts *opts,
                      const strata_setup *setup, const strata__facts *mode) {
  memset(ck, 0, sizeof *ck);
  ck->app = app;
  ck->opts = opts;
  ck->setup = *setup;
  ck->P = setup->workers;
  ck->parts = mode->ckpt;
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
  strata__manifest_free(&ck->man);
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
  if (e->id < C_STATE || e->id > C_ROUNDS || (c->coord_items & (1 << e->id)))
    return unexpected(c, e, "not a coordinator item, or twice");
  if (e->id != C_STATE && !(c->coord_items & (1 << C_STATE)))
    return unexpected(c, e, "before the coordinator's state");
  c->coord_items |= 1 << e->id;
  uint64_t want = 0;
  /* The per-pass arrays hold the passes done: room for the checkpoint's
   * (each entry is read in before the next one asks for room). */
  uint64_t room = n;
  if (e->id == C_CONTROL && e->len % sizeof *agg->ctl == 0) {
    room = e->len / sizeof *agg->ctl;
    if (room > (uint64_t)c->ck->setup.passes) room = (uint64_t)c->ck->setup.passes;
  }
  if (e->id != C_STATE && e->id != C_WORKER_TOTAL) {
    int rc = strata__agg_reserve(agg, (int)room);
    if (rc) return rc;
  }
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
    case C_BLOCK: want = c->p->coord.len; *buf = c->p->coord.buf; break;
    case C_ROUNDS:
      want = c->p->rounds_per_pass ? sizeof r->rounds : 0;
      *buf = &r->rounds;
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
          !(ck->parts & (STRATA__CKP_ROTATING | STRATA__CKP_REPLICAS)))
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
      if (!p->global.len || e->len != p->global.len || !(ck->parts & STRATA__CKP_GLOBAL) ||
          c->global_seen[w])
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
      if (!(ck->parts & STRATA__CKP_TABLE) || e->id != w || e->aux != c->L || c->rows ||
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

static int read_part(rctx *c, int who) {
  strata__ckpt_run *ck = c->ck;
  const strata__manifest_part *part = &ck->man.parts[who + 1];
  char path[4096];
  int rc = strata__ckpt_path(path, sizeof path, resume_dir(ck), ck->start_pass, part->file);
  if (rc) return rc;
  c->who = who;
  c->path = path;
  rc = strata__part_read(path, ck->start_pass, who, part->sum, part->bytes, dest, c);
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
  for (int r = 0; r < p->n_rotating && (ck->parts & (STRATA__CKP_ROTATING | STRATA__CKP_REPLICAS));
       r++)
    if (p->rotating[r].len && !c->rot_seen[r])
      return strata_err_set(STRATA_EPARSE, "%s: rotating block %d is in no part", ck->manifest, r);
  for (int w = 0; w < ck->P && (ck->parts & STRATA__CKP_TABLE); w++)
    if (!c->table_seen[w])
      return strata_err_set(STRATA_EPARSE, "%s: worker %d's shard of the table is in no part",
                            ck->manifest, w);
  for (int w = 0; w < ck->P && p->global.len && (ck->parts & STRATA__CKP_GLOBAL); w++)
    if (!c->global_seen[w])
      return strata_err_set(STRATA_EPARSE, "%s: worker %d's global block is in no part", ck->manifest, w);
  if (ck->rot_of)
    for (int w = 0; w < ck->P; w++)
      if (!ck->rot_of[(size_t)w * (size_t)p->n_rotating])
        return strata_err_set(STRATA_EPARSE, "%s: worker %d's replica is in no part", ck->manifest, w);
  int items = 0x7e | (p->coord.len ? 1 << C_BLOCK : 0) | (p->rounds_per_pass ? 1 << C_ROUNDS : 0);
  if (c->cs.passes != ck->start_pass || c->cs.workers != ck->P || c->coord_items != items)
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
  /* Every worker's replica is its own (sfb's partial broadcast). */
  int partial = (ck->parts & STRATA__CKP_REPLICAS) != 0;
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
    if (ck->P > 1 && p->global.len && (ck->parts & STRATA__CKP_GLOBAL))
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
  if (!ck->opts->checkpoint_dir && !ck->have_man) return 0;
  data_identity(ck, p);
  if (!ck->have_man) return 0;
  const strata__manifest *m = &ck->man;
  if (m->data_bytes != ck->data_bytes || m->data_sum != ck->data_sum) {
    char a[64], b[64];
    snprintf(a, sizeof a, "%llu bytes, checksum %016llx", (unsigned long long)m->data_bytes,
             (unsigned long long)m->data_sum);
    snprintf(b, sizeof b, "%llu bytes, checksum %016llx", (unsigned long long)ck->data_bytes,
             (unsigned long long)ck->data_sum);
    return refuse(ck, "was made on other data (as loaded: %s; now %s)", a, b);
  }
  return resume_parts(ck, p, s, agg);
}
