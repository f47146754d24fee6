/* gpu_activity.c — see gpu_activity.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_activity.h"

#ifndef OT_HAVE_CUDA

ot_status bc_gpu_activity_start(void) {
  return ot_set_error(OT_ERR_UNSUPPORTED, "GPU activity records need CUPTI: this build has no CUDA runtime (an nvptx "
                      "build on a machine with the CUDA toolkit has)");
}
ot_status bc_gpu_activity_stop(bc_gpu_window *w) {
  memset(w, 0, sizeof *w);
  return bc_gpu_activity_start();
}

void bc_gpu_range_push(const char *name) { (void)name; }
void bc_gpu_range_pop(void) {}

#else

#include <cupti.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h> /* header-only: calls go nowhere unless a tool (ncu) injects itself */
#include <pthread.h>

typedef struct span {
  uint64_t start, end;
  const char *name; /* NULL: a copy or memset */
} span;

static struct {
  int loaded; /* 1 ok, -1 failed */
  char why[200];
  CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*enable)(CUpti_ActivityKind);
  CUptiResult (*disable)(CUpti_ActivityKind);
  CUptiResult (*flush)(uint32_t);
  CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **);
  CUptiResult (*version)(uint32_t *);
  CUptiResult (*errstr)(CUptiResult, const char **);
  CUptiResult (*cbname)(CUpti_CallbackDomain, uint32_t, const char **);
  pthread_mutex_t mu;
  bc_named_sum api[CUPTI_DRIVER_TRACE_CBID_SIZE]; /* by callback id, since the window's start */
  span *v; /* records since the window's start */
  size_t n, cap;
  int oom;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

enum { BUF_BYTES = 8 << 20 };

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records) {
  *buf = aligned_alloc(8, BUF_BYTES);
  *size = *buf ? BUF_BYTES : 0;
  *max_records = 0;
}

static void keep(uint64_t start, uint64_t end, const char *name) {
  if (g.n == g.cap) {
    size_t cap = g.cap ? 2 * g.cap : 4096;
    span *v = realloc(g.v, cap * sizeof *v);
    if (!v) {
      g.oom = 1;
      return;
    }
    g.v = v;
    g.cap = cap;
  }
  g.v[g.n++] = (span){start, end, name};
}

/* CUPTI's thread hands back full buffers; the records' layouts are those of
 * the header this was compiled with (checked against the library's version
 * at load). */
static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *rec = NULL;
  pthread_mutex_lock(&g.mu);
  while (g.next(buf, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
      keep(k->start, k->end, k->name ? k->name : "?");
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
      keep(m->start, m->end, NULL);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
      keep(m->start, m->end, NULL);
      break;
    }
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)rec;
      if (a->cbid < CUPTI_DRIVER_TRACE_CBID_SIZE) {
        g.api[a->cbid].count++;
        g.api[a->cbid].ns += (double)(a->end - a->start);
      }
      break;
    }
    default: break;
    }
  }
  pthread_mutex_unlock(&g.mu);
  free(buf);
}

static ot_status cupti_fail(const char *what, CUptiResult r) {
  const char *s = NULL;
  if (g.errstr) g.errstr(r, &s);
  return ot_set_error(OT_ERR_DEVICE, "CUPTI %s failed: %s (%d)", what, s ? s : "?", (int)r);
}

static int load(void) {
  if (g.loaded) return g.loaded > 0;
  g.loaded = -1;
  void *h = NULL;
  static const char *const names[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
  for (int i = 0; i < 3 && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g.why, sizeof g.why, "libcupti not found (%s); it is in the CUDA toolkit's lib64: put that on "
             "LD_LIBRARY_PATH", dlerror());
    return 0;
  }
  *(void **)&g.reg = dlsym(h, "cuptiActivityRegisterCallbacks");
  *(void **)&g.enable = dlsym(h, "cuptiActivityEnable");
  *(void **)&g.disable = dlsym(h, "cuptiActivityDisable");
  *(void **)&g.flush = dlsym(h, "cuptiActivityFlushAll");
  *(void **)&g.next = dlsym(h, "cuptiActivityGetNextRecord");
  *(void **)&g.version = dlsym(h, "cuptiGetVersion");
  *(void **)&g.errstr = dlsym(h, "cuptiGetResultString");
  *(void **)&g.cbname = dlsym(h, "cuptiGetCallbackName");
  if (!g.reg || !g.enable || !g.disable || !g.flush || !g.next || !g.version) {
    snprintf(g.why, sizeof g.why, "libcupti lacks the activity API");
    return 0;
  }
  uint32_t v = 0;
  g.version(&v);
  /* the record structs changed with the API's major versions: read only
   * what the same major version wrote */
  if (v / 10000 != CUPTI_API_VERSION / 10000) {
    snprintf(g.why, sizeof g.why, "libcupti is API version %u, this build read CUPTI's headers of version %d: "
             "rebuild against that toolkit", v, CUPTI_API_VERSION);
    return 0;
  }
  if (g.reg(buf_request, buf_complete) != CUPTI_SUCCESS) {
    snprintf(g.why, sizeof g.why, "cuptiActivityRegisterCallbacks failed");
    return 0;
  }
  g.loaded = 1;
  return 1;
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_DRIVER};
enum { N_KINDS = (int)(sizeof kinds / sizeof kinds[0]) };

ot_status bc_gpu_activity_start(void) {
  if (!load()) return ot_set_error(OT_ERR_UNSUPPORTED, "GPU activity records: %s", g.why);
  pthread_mutex_lock(&g.mu);
  g.n = 0;
  g.oom = 0;
  memset(g.api, 0, sizeof g.api);
  pthread_mutex_unlock(&g.mu);
  for (int i = 0; i < N_KINDS; i++) {
    CUptiResult r = g.enable(kinds[i]);
    if (r != CUPTI_SUCCESS) return cupti_fail("cuptiActivityEnable", r);
  }
  return OT_OK;
}

static int by_start(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

static int by_time(const void *a, const void *b) {
  const bc_named_sum *x = a, *y = b;
  return x->ns > y->ns ? -1 : x->ns < y->ns;
}

/* The driver functions called in the window, named by CUPTI. */
static ot_status per_api(bc_gpu_window *w) {
  w->apis = calloc(CUPTI_DRIVER_TRACE_CBID_SIZE, sizeof *w->apis);
  if (!w->apis) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "GPU activity: the driver calls' table");
  for (uint32_t id = 0; id < CUPTI_DRIVER_TRACE_CBID_SIZE; id++) {
    if (!g.api[id].count) continue;
    const char *name = NULL;
    if (!g.cbname || g.cbname(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS) name = NULL;
    w->apis[w->n_apis] = g.api[id];
    w->apis[w->n_apis++].name = name ? name : "?";
  }
  qsort(w->apis, (size_t)w->n_apis, sizeof *w->apis, by_time);
  return OT_OK;
}

/* One row per kernel name (names are CUPTI's strings: the same pointer for
 * the same kernel, compared by content to be safe). */
static ot_status per_name(bc_gpu_window *w) {
  w->names = calloc(w->kernels ? (size_t)w->kernels : 1, sizeof *w->names);
  if (!w->names) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "GPU activity: the per-kernel table");
  for (size_t i = 0; i < g.n; i++) {
    const span *s = &g.v[i];
    if (!s->name) continue;
    int j = 0;
    while (j < w->n_names && strcmp(w->names[j].name, s->name)) j++;
    if (j == w->n_names) w->names[w->n_names++].name = s->name;
    w->names[j].count++;
    w->names[j].ns += (double)(s->end - s->start);
  }
  qsort(w->names, (size_t)w->n_names, sizeof *w->names, by_time);
  return OT_OK;
}

ot_status bc_gpu_activity_stop(bc_gpu_window *w) {
  memset(w, 0, sizeof *w);
  if (g.loaded <= 0) return ot_set_error(OT_ERR_STATE, "GPU activity: stop without a start");
  CUptiResult r = g.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (int i = 0; i < N_KINDS; i++) g.disable(kinds[i]);
  if (r != CUPTI_SUCCESS) return cupti_fail("cuptiActivityFlushAll", r);
  pthread_mutex_lock(&g.mu);
  ot_status st = OT_OK;
  if (g.oom) st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "GPU activity: records lost (out of memory)");
  qsort(g.v, g.n, sizeof *g.v, by_start);
  uint64_t cur_s = 0, cur_e = 0;
  for (size_t i = 0; i < g.n; i++) {
    const span *s = &g.v[i];
    const double d = (double)(s->end - s->start);
    if (s->name) w->kernels++, w->kernel_ns += d;
    else w->copies++, w->copy_ns += d;
    if (i == 0 || s->start > cur_e) { /* a gap: close the busy interval */
      if (i) w->busy_ns += (double)(cur_e - cur_s);
      cur_s = s->start;
      cur_e = s->end;
    } else if (s->end > cur_e) {
      cur_e = s->end;
    }
  }
  if (g.n) {
    w->busy_ns += (double)(cur_e - cur_s);
    uint64_t last = 0;
    for (size_t i = 0; i < g.n; i++)
      if (g.v[i].end > last) last = g.v[i].end;
    w->span_ns = (double)(last - g.v[0].start);
  }
  if (st == OT_OK) st = per_name(w);
  if (st == OT_OK) st = per_api(w);
  g.n = 0;
  pthread_mutex_unlock(&g.mu);
  return st;
}

void bc_gpu_range_push(const char *name) { nvtxRangePushA(name); }
void bc_gpu_range_pop(void) { nvtxRangePop(); }

#endif

void bc_gpu_window_free(bc_gpu_window *w) {
  if (!w) return;
  free(w->names);
  free(w->apis);
  memset(w, 0, sizeof *w);
}
