/* gpu_wait.c — see gpu_wait.h. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "memory/gpu_wait.h"

/* The few driver API types and values used (cuda.h is not needed to build). */
typedef int cu_result;
typedef int cu_device;
typedef struct cu_ctx_st *cu_context;
enum { CU_SCHED_SPIN = 1, CU_SCHED_YIELD = 2, CU_SCHED_BLOCKING = 4, CU_SCHED_MASK = 7, MAX_GPUS = 64 };

static const struct {
  const char *name;
  unsigned flag;
} modes[] = {{"spin", CU_SCHED_SPIN}, {"yield", CU_SCHED_YIELD}, {"block", CU_SCHED_BLOCKING}};

static struct {
  pthread_mutex_t mu;
  int parsed, bad, from_env, mode; /* mode: index into modes */
  char bad_value[64];
  int loaded; /* 1 driver found, -1 not */
  char why[160];
  cu_result (*init)(unsigned);
  cu_result (*count)(int *);
  cu_result (*get)(cu_device *, int);
  cu_result (*pstate)(cu_device, unsigned *, int *);
  cu_result (*pset)(cu_device, unsigned);
  cu_result (*retain)(cu_context *, cu_device);
  cu_result (*push)(cu_context);
  cu_result (*pop)(cu_context *);
  cu_result (*cget)(unsigned *);
  cu_result (*cset)(unsigned); /* CUDA 12.1+; NULL before */
  int n_dev;
  cu_context ctx[MAX_GPUS]; /* retained for the life of the process: the plugin keeps an active context's flags */
  unsigned now[MAX_GPUS];   /* the scheduling flag read back */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void parse_env(void) {
  if (g.parsed) return;
  g.parsed = 1;
  const char *v = getenv("OMPTENSOR_GPU_WAIT");
  g.mode = 0;
  if (!v) return;
  g.from_env = 1;
  for (int i = 0; i < 3; i++)
    if (!strcasecmp(v, modes[i].name)) {
      g.mode = i;
      return;
    }
  g.bad = 1;
  snprintf(g.bad_value, sizeof g.bad_value, "%s", v);
}

#ifdef OT_HAVE_CUDA
static void *sym(void *h, const char *a, const char *b) {
  void *p = dlsym(h, a);
  return p || !b ? p : dlsym(h, b);
}

static int load(void) {
  if (g.loaded) return g.loaded > 0;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    g.loaded = -1;
    snprintf(g.why, sizeof g.why, "no CUDA driver (%s)", dlerror());
    return 0;
  }
  *(void **)&g.init = sym(h, "cuInit", NULL);
  *(void **)&g.count = sym(h, "cuDeviceGetCount", NULL);
  *(void **)&g.get = sym(h, "cuDeviceGet", NULL);
  *(void **)&g.pstate = sym(h, "cuDevicePrimaryCtxGetState", NULL);
  *(void **)&g.pset = sym(h, "cuDevicePrimaryCtxSetFlags_v2", "cuDevicePrimaryCtxSetFlags");
  *(void **)&g.retain = sym(h, "cuDevicePrimaryCtxRetain", NULL);
  *(void **)&g.push = sym(h, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
  *(void **)&g.pop = sym(h, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
  *(void **)&g.cget = sym(h, "cuCtxGetFlags", NULL);
  *(void **)&g.cset = sym(h, "cuCtxSetFlags", NULL);
  if (!g.init || !g.count || !g.get || !g.pstate || !g.pset || !g.retain || !g.push || !g.pop || !g.cget) {
    g.loaded = -1;
    snprintf(g.why, sizeof g.why, "libcuda.so.1 lacks the primary-context calls (a driver older than CUDA 11?)");
    return 0;
  }
  if (g.init(0) != 0 || g.count(&g.n_dev) != 0) {
    g.loaded = -1;
    g.n_dev = 0;
    snprintf(g.why, sizeof g.why, "the CUDA driver found no usable GPU (cuInit failed)");
    return 0;
  }
  if (g.n_dev > MAX_GPUS) g.n_dev = MAX_GPUS;
  g.loaded = 1;
  return 1;
}

/* Device d's primary context: its flag set and the context retained, so that
 * the OpenMP plugin, finding it active, keeps the flag (when it had started
 * it already, with its blocking wait, the live context's flag is set: CUDA
 * 12.1's cuCtxSetFlags); then read back. Only the devices a context uses:
 * retaining a primary context creates it (memory on that GPU). */
static void set_one(int d) {
  const unsigned want = modes[g.mode].flag;
  cu_device dev;
  unsigned pf = 0, cf = 0;
  int active = 0;
  if (g.get(&dev, d) != 0 || g.pstate(dev, &pf, &active) != 0) return;
  if ((pf & CU_SCHED_MASK) != want) g.pset(dev, (pf & ~(unsigned)CU_SCHED_MASK) | want);
  if (!g.ctx[d] && g.retain(&g.ctx[d], dev) != 0) g.ctx[d] = NULL;
  if (!g.ctx[d] || g.push(g.ctx[d]) != 0) return;
  if (g.cget(&cf) == 0 && (cf & CU_SCHED_MASK) != want && g.cset) g.cset((cf & ~(unsigned)CU_SCHED_MASK) | want);
  if (g.cget(&cf) == 0) g.now[d] = cf & CU_SCHED_MASK;
  cu_context popped;
  g.pop(&popped);
}
#endif

static void describe_locked(void) {
  parse_env();
#ifdef OT_HAVE_CUDA
  if (!g.bad) load();
#else
  snprintf(g.why, sizeof g.why, "not applicable: this build has no CUDA");
#endif
}

static ot_status bad_value(void) {
  return ot_fail(OT_ERR_INVALID_ARG,
                 "OMPTENSOR_GPU_WAIT='%s': use spin (default: fastest launches, holds a host core per GPU while it "
                 "waits), yield or block",
                 g.bad_value);
}

ot_status ot_gpu_wait_check(void) {
  pthread_mutex_lock(&g.mu);
  parse_env();
  int bad = g.bad;
  pthread_mutex_unlock(&g.mu);
  return bad ? bad_value() : OT_OK;
}

ot_status ot_gpu_wait_apply(const int *devs, int n) {
  pthread_mutex_lock(&g.mu);
  parse_env();
  int bad = g.bad;
#ifdef OT_HAVE_CUDA
  if (!bad && load())
    for (int i = 0; i < n; i++)
      if (devs[i] >= 0 && devs[i] < g.n_dev) set_one(devs[i]);
#else
  (void)devs, (void)n;
#endif
  pthread_mutex_unlock(&g.mu);
  return bad ? bad_value() : OT_OK;
}

static const char *name_of(unsigned f) {
  return f == CU_SCHED_SPIN ? "spin" : f == CU_SCHED_YIELD ? "yield" : f == CU_SCHED_BLOCKING ? "block" : "auto";
}

void ot_gpu_wait_describe(char *buf, size_t n) {
  pthread_mutex_lock(&g.mu);
  describe_locked();
  if (g.bad) {
    snprintf(buf, n, "OMPTENSOR_GPU_WAIT='%s' is not spin, yield or block", g.bad_value);
  } else {
    size_t k = (size_t)snprintf(buf, n, "%s (%s; OMPTENSOR_GPU_WAIT=spin|yield|block, spin holds a host core per GPU)",
                                modes[g.mode].name, g.from_env ? "from OMPTENSOR_GPU_WAIT" : "default");
    if (g.loaded <= 0 && k < n) snprintf(buf + k, n - k, ": %s", g.why);
    /* what each context in use has, read back; the others are not
     * started by this process (or not through omptensor) */
    for (int d = 0, shown = 0; g.loaded > 0 && d < g.n_dev && k < n; d++)
      if (g.ctx[d]) k += (size_t)snprintf(buf + k, n - k, "%s GPU %d %s", shown++ ? "," : ";", d, name_of(g.now[d]));
  }
  pthread_mutex_unlock(&g.mu);
}
