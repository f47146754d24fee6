/* homes.c — lazy homes (tensor.h, ot_tensor_create_lazy). Why: a training
 * step's activations each had a pinned host home although most never leave
 * the device: 2.9 MB per token for GPT-2 350M, which, not the device
 * budget, capped the batch (bench/RESULTS.md, issue 7). A storage created
 * lazily gets its home here, when the finished plan shows it needs one:
 *   - the backend computes on homes (host, usm, a host device): all do;
 *   - OMPTENSOR_VERIFY checksums homes: all do;
 *   - it is marked (input, output, persistent) or its first access reads the
 *     run's starting value: the caller or the next run reads its home;
 *   - a schedule uploads or writes it home (an eviction of a live copy
 *     included), or keeps it resident between runs (ot_sched_sync writes
 *     such copies home);
 *   - it has no device block (empty) or a host op uses it (hybrid compute).
 * Everything else lives and dies in the device arena.
 *
 * File homes (memory/diskfile.h, a host budget: issue 23) are weights whose
 * truth is their checkpoint file. Each plan chooses which of them it keeps
 * in host memory, inside ot_ctx_opts.host_budget_bytes, and which it reads
 * from the file whenever it uploads them (sched/disk.c):
 *   - kept: those a host op or the backend reads at home (forced), then the
 *     small ones (< 1 MiB: norms, biases: a read each is mostly latency),
 *     then those the replays upload, largest first, while they fit; a
 *     weight the replays keep on the device is read from the file once, at
 *     the first run, and needs no host copy at all;
 *   - what the replays upload every run costs the same per byte wherever it
 *     is (a read per run), so keeping the largest leaves the smallest reads,
 *     and the staging ring (twice the largest read, so one read fills while
 *     the last is uploaded) small;
 *   - the budget holds everything else the context has at home (activations
 *     a plan moves, KV caches, rings of other plans): too small for that and
 *     the ring is OT_ERR_BUDGET with the numbers.
 * Homes this plan does not keep are freed (the file still has the bytes), so
 * a later plan (decode after the prompt) can keep a different set. */
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "memory/diskfile.h"
#include "memory/context_impl.h"
#include "memory/device.h"
#include "memory/tensor_impl.h"
#include "omptensor/settings.h"
#include "sched/disk.h"
#include "sched/plan_impl.h"
#include "sched/verify.h"

static void mark_schedule(const ot_schedule *s, unsigned char *need) {
  for (int i = 0; i < s->n_ev; i++)
    if (s->ev[i].kind == OT_EV_UPLOAD || s->ev[i].kind == OT_EV_DOWNLOAD) need[s->ev[i].st] = 1;
  for (int i = 0; i < s->n_start; i++) need[s->start[i].st] = 1;
}

typedef struct fh {
  int st;          /* storage index */
  size_t bytes, span;
  int forced;      /* read at home (a host op, the backend): must be kept */
  int uploaded;    /* some schedule uploads it */
  int replayed;    /* the replays upload it (every run) */
  int keep;
} fh;

/* Candidates in the order they are kept: forced, small, then those the
 * replays upload, largest first; never-replayed ones last (not kept). */
static int fh_rank(const fh *f) {
  return f->forced ? 0 : f->bytes < ((size_t)1 << 20) ? 1 : f->replayed ? 2 : 3;
}
static int fh_cmp(const void *a, const void *b) {
  const fh *x = a, *y = b;
  int rx = fh_rank(x), ry = fh_rank(y);
  if (rx != ry) return rx - ry;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->st - y->st;
}

/* The ring the reads of the not-kept uploaded ones need: twice the largest
 * read of the replays (one fills while the last is uploaded), at least the
 * largest read at all (a weight the replays keep on the device is read
 * once, in the first run: it only has to fit; measured on the H200, a
 * 262 MB embedding read once doubled the ring and took 0.26 GB from the
 * weights kept at home). */
static size_t ring_for(const fh *f, int n) {
  size_t big = 0, any = 0;
  for (int i = 0; i < n; i++)
    if (!f[i].keep && f[i].uploaded) {
      if (f[i].span > any) any = f[i].span;
      if (f[i].replayed && f[i].span > big) big = f[i].span;
    }
  return 2 * big > any ? 2 * big : any;
}

static void count_uploads(const ot_schedule *s, fh *f, const int *slot, int steady) {
  for (int i = 0; i < s->n_ev; i++) {
    if (s->ev[i].kind != OT_EV_UPLOAD || (s->ev[i].flags & OT_TRACE_CROSS)) continue;
    const int k = slot[s->ev[i].st];
    if (k < 0) continue;
    f[k].uploaded = 1;
    if (steady) f[k].replayed = 1;
  }
  for (int i = 0; i < s->n_start; i++) /* a handed-over start copy may be uploaded again (restore_start) */
    if (slot[s->start[i].st] >= 0) f[slot[s->start[i].st]].uploaded = 1;
}

static uint64_t read_bytes(const ot_schedule *s, const ot_program *p) {
  uint64_t b = 0;
  for (int i = 0; i < s->n_ev; i++) {
    const ot_prog_storage *ps = &p->st[s->ev[i].st];
    if (OT_UPLOAD_READS_FILE(&s->ev[i], ps)) {
      uint64_t a0;
      b += ot_disk_span(ps->st->file_off, ps->st->bytes, &a0);
    }
  }
  return b;
}

static char *mib(uint64_t b, char *buf, size_t n) {
  snprintf(buf, n, "%.1f MiB", (double)b / 1048576.0);
  return buf;
}

static ot_status file_homes(ot_plan *plan, int all) {
  const ot_program *p = plan->src;
  ot_ctx *ctx = plan->ctx;
  int n = 0;
  for (int i = 0; i < p->n_st; i++) n += p->st[i].st->file != NULL;
  if (!n) return OT_OK;
  fh *f = calloc((size_t)n, sizeof *f);
  int *slot = malloc(sizeof(int) * (size_t)p->n_st);
  if (!f || !slot) {
    free(f), free(slot);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_plan: no host memory");
  }
  uint64_t held = 0, kept = 0;
  n = 0;
  ot_status s = OT_OK;
  for (int i = 0; i < p->n_st; i++) {
    slot[i] = -1;
    const ot_storage *st = p->st[i].st;
    if (!st->file) continue;
    if (p->st[i].role & OT_ROLE_WRITTEN) {
      s = ot_fail(OT_ERR_INVALID_ARG, "'%s' is homed in its checkpoint file (%s), which is read-only, but an op of the "
                  "program writes it", p->st[i].name, ot_disk_file_path(st->file));
      break;
    }
    uint64_t a0;
    f[n] = (fh){i, st->bytes, ot_disk_span(st->file_off, st->bytes, &a0), all || !plan->prog->st[i].block, 0, 0, 0};
    if (st->home) held += st->bytes;
    slot[i] = n++;
  }
  for (int o = 0; s == OT_OK && plan->host_op && o < p->n_ops; o++)
    if (plan->host_op[o])
      for (int k = 0; k < p->ops[o].n_acc; k++)
        if (slot[p->ops[o].acc[k].st] >= 0) f[slot[p->ops[o].acc[k].st]].forced = 1;
  if (s == OT_OK) {
    count_uploads(&plan->first, f, slot, 0);
    count_uploads(&plan->steady, f, slot, 1);
    qsort(f, (size_t)n, sizeof *f, fh_cmp);
    const uint64_t budget = ctx->host_budget, have = ot_ctx_host_bytes(ctx);
    const uint64_t other = have > held ? have - held : 0;
    for (int i = 0; i < n && f[i].forced; i++) f[i].keep = 1, kept += f[i].bytes;
    for (int i = 0; i < n; i++) {
      if (f[i].keep || fh_rank(&f[i]) == 3) continue;
      f[i].keep = 1;
      if (other + kept + f[i].bytes + ot_disk_ring_footprint(ring_for(f, n)) <= budget) kept += f[i].bytes;
      else f[i].keep = 0;
    }
    const uint64_t ring = ot_disk_ring_footprint(ring_for(f, n));
    if (other + kept + ring > budget) {
      char b[5][48];
      s = ot_fail(OT_ERR_BUDGET, "host memory budget %s (--cpu-memory-limit) is too small: the context's other homes "
                  "(activations, caches) take %s, weights read at home %s and the staging ring for the weights read "
                  "from disk %s; give at least %s", mib(budget, b[0], sizeof b[0]), mib(other, b[1], sizeof b[1]),
                  mib(kept, b[2], sizeof b[2]), mib(ring, b[3], sizeof b[3]),
                  mib(other + kept + ring, b[4], sizeof b[4]));
    }
    /* drops before reads, so the host never holds both */
    for (int i = 0; s == OT_OK && i < n; i++)
      if (!f[i].keep) ot_storage_drop_home(p->st[f[i].st].st);
    for (int i = 0; s == OT_OK && i < n; i++)
      if (f[i].keep) {
        s = ot_storage_materialize(p->st[f[i].st].st);
        if (s != OT_OK) s = ot_fail_context(s, "the host copy of '%s'", p->st[f[i].st].name);
      }
    uint64_t disk = 0;
    for (int i = 0; i < n; i++) disk += f[i].keep ? 0 : f[i].bytes;
    plan->ring_bytes = ring_for(f, n);
    ot_plan_stats *ss[2] = {&plan->first.stats, &plan->steady.stats};
    for (int k = 0; k < 2; k++) {
      ss[k]->host_weight_bytes = kept;
      ss[k]->disk_weight_bytes = disk;
      ss[k]->ring_bytes = ring;
      ss[k]->host_bytes = ot_ctx_host_bytes(ctx) + ring;
    }
    plan->first.stats.disk_read_bytes = read_bytes(&plan->first, p);
    plan->steady.stats.disk_read_bytes = read_bytes(&plan->steady, p);
  }
  free(f);
  free(slot);
  return s;
}

/* A host budget holds every home the context has in host memory, not only
 * file homes (issue 43: train, and run with weights no file can home, a
 * GGUF's or converted ones, held them all at home and never looked at the
 * budget): checked once this plan's homes are made. */
static ot_status host_budget_holds(const ot_plan *plan) {
  const uint64_t budget = plan->ctx->host_budget;
  const uint64_t ring = plan->ring_bytes ? ot_disk_ring_footprint(plan->ring_bytes) : 0;
  const uint64_t have = ot_ctx_host_bytes(plan->ctx) + ring;
  if (!budget || have <= budget) return OT_OK;
  char b[2][48];
  return ot_fail(OT_ERR_BUDGET, "host memory budget %s (--cpu-memory-limit) is too small: the context's homes in host "
                 "memory (weights not read from their files, trained weights with their gradients and optimizer "
                 "state, activations a plan moves, caches) and staging take %llu bytes (%s); give at least that",
                 ot_size_format(budget, b[0], sizeof b[0]), (unsigned long long)have,
                 ot_size_format(have, b[1], sizeof b[1]));
}

ot_status ot_plan_homes(ot_plan *plan) {
  const ot_program *p = plan->src;
  if (plan->n_stages) return OT_OK; /* each stage's plan gave its storages theirs */
  const int all = plan->ctx->backend != OT_BACKEND_MAP || ot_dev_is_host(plan->dev) || ot_verify_level() > 0 ||
                  plan->prog->n_st != p->n_st;
  unsigned char *need = calloc((size_t)(p->n_st ? p->n_st : 1), 1);
  if (!need) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_sched_plan: no host memory");
  if (!all) {
    const unsigned marked = OT_ROLE_INPUT | OT_ROLE_OUTPUT | OT_ROLE_PERSIST | OT_ROLE_NEEDS_HOME | OT_ROLE_WRITEBACK;
    for (int i = 0; i < p->n_st; i++) need[i] = (p->st[i].role & marked) || !plan->prog->st[i].block;
    mark_schedule(&plan->first, need);
    mark_schedule(&plan->steady, need);
    for (int o = 0; plan->host_op && o < p->n_ops; o++)
      if (plan->host_op[o])
        for (int k = 0; k < p->ops[o].n_acc; k++) need[p->ops[o].acc[k].st] = 1;
  }
  uint64_t made = 0, skipped = 0;
  ot_status s = OT_OK;
  for (int i = 0; s == OT_OK && i < p->n_st; i++) {
    ot_storage *st = p->st[i].st;
    if (!st->lazy || st->file) continue; /* file homes: file_homes() */
    if (!all && !need[i]) {
      if (!st->home) skipped += st->bytes;
      continue;
    }
    if (!st->home) {
      s = ot_storage_materialize(st);
      if (s != OT_OK) s = ot_fail_context(s, "the host home of '%s' (%zu bytes)", p->st[i].name, st->bytes);
    }
    made += st->bytes;
  }
  if (s == OT_OK) s = file_homes(plan, all);
  if (s == OT_OK) s = host_budget_holds(plan);
  free(need);
  plan->first.stats.lazy_home_bytes = plan->steady.stats.lazy_home_bytes = made;
  plan->first.stats.lazy_skipped_bytes = plan->steady.stats.lazy_skipped_bytes = skipped;
  return s;
}
