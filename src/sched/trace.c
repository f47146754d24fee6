/* trace.c — recording events, the summary and the budget check. */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/vec.h"
#include "core/checked.h"
#include "omptensor/settings.h" /* ot_size_format */
#include "sched/trace_impl.h"

struct ot_trace {
  pthread_mutex_t mu;
  ot_trace_event *ev;
  size_t n;
  int cap;
  uint64_t t0;
  int runs;
  int broken;       /* an append failed: the trace is incomplete */
  uint64_t budget;
  char **names;     /* interned names: open addressing, power-of-two size */
  size_t n_names, cap_names;
};

uint64_t ot_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

ot_status ot_trace_create(ot_trace **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_trace_create: out is NULL");
  ot_trace *t = calloc(1, sizeof *t);
  if (!t) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_trace_create: no host memory");
  pthread_mutex_init(&t->mu, NULL);
  t->t0 = ot_now_ns();
  *out = t;
  return OT_OK;
}

static void free_names(ot_trace *t) {
  for (size_t i = 0; i < t->cap_names; i++) free(t->names[i]);
  free(t->names);
  t->names = NULL;
  t->n_names = t->cap_names = 0;
}

void ot_trace_destroy(ot_trace *t) {
  if (!t) return;
  free(t->ev);
  free_names(t);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

void ot_trace_clear(ot_trace *t) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  t->n = 0;
  t->runs = 0;
  t->broken = 0;
  pthread_mutex_unlock(&t->mu);
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

static int rehash(ot_trace *t) {
  size_t nc = t->cap_names ? t->cap_names * 2 : 64;
  char **nn = calloc(nc, sizeof *nn);
  if (!nn) return 0;
  for (size_t i = 0; i < t->cap_names; i++)
    if (t->names[i]) {
      size_t j = hash_str(t->names[i]) & (nc - 1);
      while (nn[j]) j = (j + 1) & (nc - 1);
      nn[j] = t->names[i];
    }
  free(t->names);
  t->names = nn;
  t->cap_names = nc;
  return 1;
}

/* The trace's copy of `s` (NULL if out of memory). Called with the lock. */
static const char *intern(ot_trace *t, const char *s) {
  if (!s) s = "";
  if ((t->n_names + 1) * 2 > t->cap_names && !rehash(t)) return NULL;
  size_t j = hash_str(s) & (t->cap_names - 1);
  while (t->names[j]) {
    if (strcmp(t->names[j], s) == 0) return t->names[j];
    j = (j + 1) & (t->cap_names - 1);
  }
  size_t len = strlen(s) + 1;
  char *c = malloc(len);
  if (!c) return NULL;
  memcpy(c, s, len);
  t->names[j] = c;
  t->n_names++;
  return c;
}

static uint64_t rel(const ot_trace *t, uint64_t abs) { return abs > t->t0 ? abs - t->t0 : 0; }

size_t ot_trace_add(ot_trace *t, const ot_trace_event *e) {
  pthread_mutex_lock(&t->mu);
  size_t idx = (size_t)-1;
  if (t->n >= INT_MAX || ot_grow((void **)&t->ev, &t->cap, (int)t->n + 1, sizeof *t->ev, "trace events") != OT_OK)
    goto out;
  const char *nm = intern(t, e->name);
  if (!nm) goto out;
  idx = t->n++;
  t->ev[idx] = *e;
  t->ev[idx].name = nm;
  t->ev[idx].start_ns = rel(t, e->start_ns);
  t->ev[idx].end_ns = rel(t, e->end_ns);
  t->ev[idx].issued_ns = rel(t, e->issued_ns ? e->issued_ns : e->start_ns);
  if (e->kind == OT_TRACE_RUN && !(e->flags & OT_TRACE_STAGE)) t->runs++;
out:
  if (idx == (size_t)-1) t->broken = 1;
  pthread_mutex_unlock(&t->mu);
  return idx;
}

ot_status ot_trace_mark(ot_trace *t, const char *label) {
  if (!t) return OT_OK;
  uint64_t now = ot_now_ns();
  ot_trace_event e = {OT_TRACE_MARK, 0, ot_trace_next_run(t), -1, -1, label, now, now, 0, 0, 0, now, 0};
  if (ot_trace_add(t, &e) == (size_t)-1)
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "trace: no host memory to record the mark '%s'", label ? label : "");
  return OT_OK;
}

void ot_trace_set_times(ot_trace *t, size_t i, uint64_t start, uint64_t end) {
  pthread_mutex_lock(&t->mu);
  if (i < t->n) {
    t->ev[i].start_ns = rel(t, start);
    t->ev[i].end_ns = rel(t, end);
  }
  pthread_mutex_unlock(&t->mu);
}

void ot_trace_set_host_bytes(ot_trace *t, size_t i, uint64_t host_bytes) {
  pthread_mutex_lock(&t->mu);
  if (i < t->n) t->ev[i].host_bytes = host_bytes;
  pthread_mutex_unlock(&t->mu);
}

uint64_t ot_trace_t0(const ot_trace *t) { return t->t0; }

uint64_t ot_trace_budget(const ot_trace *t) { return t ? t->budget : 0; }

int ot_trace_next_run(ot_trace *t) {
  pthread_mutex_lock(&t->mu);
  int r = t->runs;
  pthread_mutex_unlock(&t->mu);
  return r;
}

void ot_trace_set_budget(ot_trace *t, uint64_t budget) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  if (budget > t->budget) t->budget = budget;
  pthread_mutex_unlock(&t->mu);
}

size_t ot_trace_count(const ot_trace *t) { return t ? t->n : 0; }

const ot_trace_event *ot_trace_event_at(const ot_trace *t, size_t i) { return t && i < t->n ? &t->ev[i] : NULL; }

/* The union of intervals sorted by start, in place: overlapping or touching
 * ones merged. Kernels run one after another on one thread, and so do a
 * plan's transfers, but a trace read from a file may say otherwise (and
 * several devices may overlap): without this, an interval would be counted
 * once per interval it overlaps, and the time under compute could exceed the
 * transfer time. Returns the number of intervals left. */
static size_t merge_iv(uint64_t (*a)[2], size_t n) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m && a[i][0] <= a[m - 1][1]) {
      if (a[i][1] > a[m - 1][1]) a[m - 1][1] = a[i][1];
    } else {
      a[m][0] = a[i][0];
      a[m++][1] = a[i][1];
    }
  }
  return m;
}

/* Length of the intersection of two sets of intervals, each sorted by start
 * and non-overlapping (merge_iv). */
static double overlap_ns(const uint64_t (*a)[2], size_t na, const uint64_t (*b)[2], size_t nb) {
  double tot = 0;
  size_t i = 0, j = 0;
  while (i < na && j < nb) {
    uint64_t lo = a[i][0] > b[j][0] ? a[i][0] : b[j][0];
    uint64_t hi = a[i][1] < b[j][1] ? a[i][1] : b[j][1];
    if (hi > lo) tot += (double)(hi - lo);
    if (a[i][1] < b[j][1]) i++;
    else j++;
  }
  return tot;
}

static int cmp_iv(const void *x, const void *y) {
  const uint64_t *a = x, *b = y;
  return a[0] < b[0] ? -1 : a[0] > b[0];
}

ot_trace_summary ot_trace_summarize(const ot_trace *t) {
  ot_trace_summary s;
  memset(&s, 0, sizeof s);
  if (!t) return s;
  s.budget = t->budget;
  uint64_t (*k)[2] = malloc((t->n ? t->n : 1) * sizeof *k), (*x)[2] = malloc((t->n ? t->n : 1) * sizeof *x);
  size_t nk = 0, nx = 0;
  uint64_t first = UINT64_MAX, last = 0;
  for (size_t i = 0; i < t->n; i++) {
    const ot_trace_event *e = &t->ev[i];
    if (e->kind == OT_TRACE_MARK) continue; /* a label, not work: no device bytes */
    if (e->start_ns < first) first = e->start_ns;
    if (e->end_ns > last) last = e->end_ns;
    if (e->device_bytes > s.peak_device_bytes) s.peak_device_bytes = e->device_bytes;
    s.current_device_bytes = e->device_bytes;
    double d = e->end_ns > e->start_ns ? (double)(e->end_ns - e->start_ns) * 1e-9 : 0.0;
    switch (e->kind) {
    case OT_TRACE_RUN: s.runs += !(e->flags & OT_TRACE_STAGE); break;
    case OT_TRACE_KERNEL:
      s.kernels++;
      s.recomputes += (e->flags & OT_TRACE_RECOMPUTE) != 0;
      s.kernel_s += d;
      if (k) k[nk][0] = e->start_ns, k[nk++][1] = e->end_ns;
      break;
    case OT_TRACE_UPLOAD:
      s.uploads++;
      if (e->flags & OT_TRACE_PEER) s.bytes_peer = ot_add_sat_u64(s.bytes_peer, e->bytes);
      else s.bytes_to_device = ot_add_sat_u64(s.bytes_to_device, e->bytes);
      s.transfer_s += d;
      if (x) x[nx][0] = e->start_ns, x[nx++][1] = e->end_ns;
      break;
    case OT_TRACE_DOWNLOAD:
      s.downloads++;
      if (e->flags & OT_TRACE_PEER) s.bytes_peer = ot_add_sat_u64(s.bytes_peer, e->bytes);
      else s.bytes_to_host = ot_add_sat_u64(s.bytes_to_host, e->bytes);
      s.transfer_s += d;
      if (x) x[nx][0] = e->start_ns, x[nx++][1] = e->end_ns;
      break;
    case OT_TRACE_ALLOC: s.allocs++; break;
    case OT_TRACE_DISK:
      s.disk_reads++;
      s.bytes_from_disk = ot_add_sat_u64(s.bytes_from_disk, e->bytes);
      s.disk_s += d;
      if (e->host_bytes > s.peak_host_bytes) s.peak_host_bytes = e->host_bytes;
      break;
    case OT_TRACE_REMOTE:
      s.remote_reads++;
      s.bytes_remote = ot_add_sat_u64(s.bytes_remote, e->bytes);
      break;
    case OT_TRACE_FREE:
      s.frees++;
      if (e->flags & OT_TRACE_EVICT) s.evictions++;
      if ((e->flags & OT_TRACE_CLEAN_DROP) || (e->flags & (OT_TRACE_DEAD | OT_TRACE_DIRTY)) == (OT_TRACE_DEAD | OT_TRACE_DIRTY))
        s.writebacks_avoided++;
      break;
    default: break;
    }
  }
  if (k && x) {
    qsort(k, nk, sizeof *k, cmp_iv);
    qsort(x, nx, sizeof *x, cmp_iv);
    nk = merge_iv(k, nk);
    nx = merge_iv(x, nx);
    s.overlap_s = overlap_ns((const uint64_t(*)[2])k, nk, (const uint64_t(*)[2])x, nx) * 1e-9;
  }
  if (last > first) s.wall_s = (double)(last - first) * 1e-9;
  free(k);
  free(x);
  return s;
}

/* the exact count for scripts, and its size in the unit it calls for (a
 * 200 KB budget reads "195 KiB", not "0.19 MiB") */
static void print_bytes(FILE *f, const char *label, uint64_t b) {
  char h[OT_SIZE_FORMAT_LEN];
  fprintf(f, "  %-28s %14llu bytes (%s)\n", label, (unsigned long long)b, ot_size_format(b, h, sizeof h));
}

void ot_trace_summary_print(const ot_trace_summary *s, FILE *f) {
  if (!s || !f) return;
  fprintf(f, "omptensor memory summary (%d run%s)\n", s->runs, s->runs == 1 ? "" : "s");
  if (s->budget == UINT64_MAX) fprintf(f, "  %-28s %14s\n", "budget", "unlimited");
  else if (s->budget) print_bytes(f, "budget", s->budget);
  print_bytes(f, "peak device bytes", s->peak_device_bytes);
  print_bytes(f, "current device bytes", s->current_device_bytes);
  print_bytes(f, "to device", s->bytes_to_device);
  print_bytes(f, "to host", s->bytes_to_host);
  if (s->bytes_peer) print_bytes(f, "device to device", s->bytes_peer);
  if (s->remote_reads) print_bytes(f, "read in place (remote)", s->bytes_remote);
  fprintf(f, "  %-28s %14d\n  %-28s %14d\n  %-28s %14d\n  %-28s %14d\n  %-28s %14d\n", "kernels", s->kernels,
          "uploads", s->uploads, "write-backs", s->downloads, "evictions", s->evictions, "write-backs avoided",
          s->writebacks_avoided);
  if (s->recomputes) fprintf(f, "  %-28s %14d\n", "of the kernels, recomputes", s->recomputes);
  if (s->disk_reads) {
    print_bytes(f, "read from disk", s->bytes_from_disk);
    fprintf(f, "  %-28s %14d\n  %-28s %14.6f s\n", "disk reads", s->disk_reads, "disk time", s->disk_s);
    print_bytes(f, "peak host bytes", s->peak_host_bytes);
  }
  fprintf(f, "  %-28s %14.6f s\n  %-28s %14.6f s\n  %-28s %14.6f s (%.0f %% of transfer time)\n  %-28s %14.6f s\n",
          "kernel time", s->kernel_s, "transfer time", s->transfer_s, "transfer under compute", s->overlap_s,
          s->transfer_s > 0 ? 100.0 * s->overlap_s / s->transfer_s : 0.0, "wall time", s->wall_s);
}

/* The budget of device `dev`: budgets[i] where devices[i] == dev; with
 * devices == NULL the one budget budgets[0]. 0 with *found = 0 if not listed. */
static uint64_t budget_of(int n, const int *devices, const uint64_t *budgets, int dev, int *found) {
  *found = 1;
  if (!devices) return budgets[0];
  for (int i = 0; i < n; i++)
    if (devices[i] == dev) return budgets[i];
  *found = 0;
  return 0;
}

static ot_status check_budgets(const ot_trace *t, int n, const int *devices, const uint64_t *budgets) {
  if (!t) return ot_fail(OT_ERR_INVALID_ARG, "ot_trace_check_budget: trace is NULL");
  if (t->broken) return ot_fail(OT_ERR_STATE, "trace is incomplete (ran out of host memory while recording)");
  /* bytes in use per device, recomputed from the blocks: one slot per
   * device seen (not device % NDEV: two devices must never share one) */
  enum { NDEV = 64 };
  int dev[NDEV], n_dev = 0;
  int64_t used[NDEV] = {0};
  for (size_t i = 0; i < t->n; i++) {
    const ot_trace_event *e = &t->ev[i];
    if (e->kind == OT_TRACE_MARK) continue; /* of no device; holds no bytes */
    int d = 0, found;
    while (d < n_dev && dev[d] != e->device) d++;
    if (d == n_dev) {
      if (n_dev == NDEV)
        return ot_fail(OT_ERR_STATE, "trace event %zu (run %d, op %d, '%s'): device %d is the %dth device in the trace; "
                       "the check follows at most %d", i, e->run, e->op, e->name, e->device, NDEV + 1, NDEV);
      dev[n_dev++] = e->device;
    }
    uint64_t budget = budget_of(n, devices, budgets, e->device, &found);
    if (!found)
      return ot_fail(OT_ERR_STATE, "trace event %zu (run %d, op %d, '%s'): device %d has no budget in the check", i,
                     e->run, e->op, e->name, e->device);
    if (e->device_bytes > (uint64_t)INT64_MAX)
      return ot_fail(OT_ERR_STATE, "trace event %zu (run %d, op %d, '%s'): recorded %llu device bytes, past what the "
                     "check can count (2^63 - 1)", i, e->run, e->op, e->name, (unsigned long long)e->device_bytes);
    if (e->kind == OT_TRACE_RUN) used[d] = (int64_t)e->device_bytes;
    if (ot_add_i64(used[d], e->block_delta, &used[d]))
      return ot_fail(OT_ERR_STATE, "trace event %zu (run %d, op %d, '%s'): device %d bytes in use overflow (%lld %+lld "
                     "is past int64)", i, e->run, e->op, e->name, e->device, (long long)used[d],
                     (long long)e->block_delta);
    if (used[d] < 0)
      return ot_fail(OT_ERR_STATE, "trace event %zu (run %d, op %d, '%s'): device %d bytes in use below zero", i, e->run,
                     e->op, e->name, e->device);
    if ((uint64_t)used[d] != e->device_bytes)
      return ot_fail(OT_ERR_STATE, "trace event %zu (run %d, op %d, '%s'): recorded %llu device bytes, blocks say %lld",
                     i, e->run, e->op, e->name, (unsigned long long)e->device_bytes, (long long)used[d]);
    if ((uint64_t)used[d] > budget)
      return ot_fail(OT_ERR_BUDGET, "trace event %zu (run %d, op %d, '%s'): %lld device bytes in use on device %d, "
                     "budget %llu", i, e->run, e->op, e->name, (long long)used[d], e->device,
                     (unsigned long long)budget);
    if (e->kind == OT_TRACE_KERNEL && !(e->flags & OT_TRACE_RESIDENT_OK))
      return ot_fail(OT_ERR_STATE, "trace event %zu (run %d): op #%d '%s' ran without all its tensors resident", i,
                     e->run, e->op, e->name);
  }
  return OT_OK;
}

ot_status ot_trace_check_budget(const ot_trace *t, uint64_t budget) { return check_budgets(t, 1, NULL, &budget); }

ot_status ot_trace_check_host_budget(const ot_trace *t, uint64_t host_budget) {
  if (!t) return ot_fail(OT_ERR_INVALID_ARG, "ot_trace_check_host_budget: trace is NULL");
  if (t->broken) return ot_fail(OT_ERR_STATE, "trace is incomplete (ran out of host memory while recording)");
  for (size_t i = 0; i < t->n; i++) {
    const ot_trace_event *e = &t->ev[i];
    if (e->kind == OT_TRACE_DISK && e->host_bytes > host_budget)
      return ot_fail(OT_ERR_BUDGET, "trace event %zu (run %d, read of '%s'): %llu host bytes held, host budget %llu", i,
                     e->run, e->name, (unsigned long long)e->host_bytes, (unsigned long long)host_budget);
  }
  return OT_OK;
}

ot_status ot_trace_check_budgets(const ot_trace *t, int n, const int *devices, const uint64_t *budgets) {
  if (n < 1 || !devices || !budgets) return ot_fail(OT_ERR_INVALID_ARG, "ot_trace_check_budgets: no devices given");
  return check_budgets(t, n, devices, budgets);
}
