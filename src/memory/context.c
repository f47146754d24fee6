/* context.c — choosing devices, backend and budgets. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "memory/context_impl.h"
#include "core/error.h"
#include "memory/device.h"
#include "memory/gpu_wait.h"
#include "omptensor/settings.h" /* ot_size_format */
#include "omptensor/version.h"

#ifdef OT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static const char *const backend_names[OT_BACKEND_COUNT] = {"auto", "map", "usm", "host"};

const char *ot_backend_name(ot_backend b) {
  return (unsigned)b < OT_BACKEND_COUNT ? backend_names[b] : "?";
}

ot_status ot_backend_parse(const char *s, ot_backend *out) {
  for (int i = 0; s && i < OT_BACKEND_COUNT; i++)
    if (strcasecmp(s, backend_names[i]) == 0) {
      *out = (ot_backend)i;
      return OT_OK;
    }
  return ot_fail(OT_ERR_INVALID_ARG, "unknown backend '%s' (use auto, map, usm or host)", s ? s : "(null)");
}

ot_ctx_opts ot_ctx_opts_default(void) {
  ot_ctx_opts o;
  memset(&o, 0, sizeof o);
  o.backend = OT_BACKEND_AUTO;
  o.device = -1;
  o.n_devices = 1;
  return o;
}

void ot_device_memory(int dev, uint64_t *free_bytes, uint64_t *total_bytes) {
  uint64_t f = 0, t = 0;
#ifdef OT_HAVE_CUDA
  if (ot_dev_is_gpu(dev)) {
    size_t cf = 0, ct = 0;
    int old = 0;
    cudaGetDevice(&old);
    if (cudaSetDevice(dev) == cudaSuccess && cudaMemGetInfo(&cf, &ct) == cudaSuccess) {
      f = cf;
      t = ct;
    }
    cudaSetDevice(old);
  }
#else
  (void)dev;
#endif
  if (free_bytes) *free_bytes = f;
  if (total_bytes) *total_bytes = t;
}

uint64_t ot_device_capacity(int dev) {
  if (ot_dev_is_host(dev)) return 0;
  uint64_t total = 0;
  ot_device_memory(dev, NULL, &total);
  return total ? total : OT_EMULATED_DEVICE_BYTES;
}

static int offload_mandatory(void) {
  const char *e = getenv("OMP_TARGET_OFFLOAD");
  return e && strcasecmp(e, "MANDATORY") == 0;
}

static uint64_t default_budget(int dev) {
  if (ot_dev_is_host(dev)) return UINT64_MAX; /* no device memory to protect */
  uint64_t f, t;
  ot_device_memory(dev, &f, &t);
  /* Leave 5 % of what is free for the CUDA context, kernels' stacks and
   * other processes: the budget is a promise we must keep. */
  if (f) return f / 20 * 19;
  return ot_device_capacity(dev); /* an emulated device: all of the size it is said to have */
}

static ot_status resolve_backend(ot_backend want, int have_dev, ot_backend *out) {
  int have_gpu = have_dev && ot_dev_is_gpu(0);
  switch (want) {
  case OT_BACKEND_AUTO:
    /* map reached the PCIe bound in docs/gpu.md's measurements; managed prefetch
     * device->host is 4x slower, so map is the default where both exist. */
    *out = have_dev ? OT_BACKEND_MAP : OT_BACKEND_HOST;
    return OT_OK;
  case OT_BACKEND_MAP:
  case OT_BACKEND_USM:
    if (!have_dev)
      return ot_fail(OT_ERR_UNSUPPORTED,
                     "backend '%s' needs an offload device, and none is available (this build: %s). "
                     "Use --backend host, or a build with an offload target (cmake --preset offload-host or nvptx)",
                     ot_backend_name(want),
#ifdef OT_OFFLOAD
                     "offload target compiled in, but the runtime found 0 devices"
#else
                     "no offload target"
#endif
      );
    if (want == OT_BACKEND_USM && !have_gpu)
      ot_warn_once("usm-emulated", "backend usm on an emulated device: homes are host memory, moves are plain copies as with map");
    *out = want;
    return OT_OK;
  case OT_BACKEND_HOST: *out = OT_BACKEND_HOST; return OT_OK;
  default: return ot_fail(OT_ERR_INVALID_ARG, "unknown backend %d", (int)want);
  }
}

ot_status ot_ctx_create(const ot_ctx_opts *opts, ot_ctx **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_ctx_create: out is NULL");
  *out = NULL;
  ot_ctx_opts o = opts ? *opts : ot_ctx_opts_default();
  OT_TRY(ot_gpu_wait_check());
  int ndev = ot_num_devices();
  if (ndev == 0 && offload_mandatory())
    return ot_fail(OT_ERR_DEVICE,
                   "OMP_TARGET_OFFLOAD=MANDATORY but the OpenMP runtime found no offload device. "
                   "On a GPU machine check the driver and that the binary was built with the CUDA <= 12 ptxas "
                   "(docs/gpu.md); otherwise unset OMP_TARGET_OFFLOAD or use --backend host");
  if (o.device >= 0 && o.device >= ndev && o.backend != OT_BACKEND_HOST)
    return ot_fail(OT_ERR_INVALID_ARG, "device %d asked, but the OpenMP runtime has %d offload device(s)%s", o.device,
                   ndev, ndev ? "" : " (use --backend host to run on the CPU)");
  ot_backend b;
  OT_TRY(resolve_backend(o.backend, ndev > 0, &b));

  int n = o.n_devices < 1 ? 1 : o.n_devices;
  if (n > OT_MAX_DEVICES)
    return ot_fail(OT_ERR_INVALID_ARG, "%d devices asked; at most %d", n, OT_MAX_DEVICES);
  int first = o.device;
  if (b == OT_BACKEND_HOST) {
    if (n > 1)
      ot_warn_once("host-devices", "%d devices asked, but the host backend has none: running on the host as one "
                   "stage", n);
    first = OT_DEVICE_HOST;
    n = 1;
  } else {
    if (first < 0) first = 0;
    if (first + n > ndev)
      return ot_fail(OT_ERR_INVALID_ARG, "devices %d..%d asked, but the runtime has %d (0..%d)", first,
                     first + n - 1, ndev, ndev - 1);
  }

  /* how the host waits for these GPUs, before the CUDA runtime starts
   * them below (cudaMemGetInfo) where the OpenMP plugin has not yet */
  int gpus[OT_MAX_DEVICES], n_gpus = 0;
  for (int i = 0; b != OT_BACKEND_HOST && i < n; i++)
    if (ot_dev_is_gpu(first + i)) gpus[n_gpus++] = first + i;
  OT_TRY(ot_gpu_wait_apply(gpus, n_gpus));

  /* weights homed in their files are read into a staging ring and uploaded:
   * that needs device copies (map); usm's kernels use the homes themselves,
   * and the host backend computes on them */
  if (o.host_budget_bytes && b != OT_BACKEND_MAP)
    return ot_fail(OT_ERR_INVALID_ARG, "a host memory budget (--cpu-memory-limit) needs the map backend, not %s: "
                   "weights beyond it are read from the checkpoint and uploaded to a device",
                   ot_backend_name(b));
  ot_ctx *c = calloc(1, sizeof *c);
  if (!c) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_ctx_create: no memory");
  c->backend = b;
  c->host_budget = o.host_budget_bytes;
  atomic_init(&c->host_bytes, 0);
  c->n_dev = n;
  c->verbose = o.verbose;
  for (int i = 0; i < n; i++) {
    c->dev[i] = b == OT_BACKEND_HOST ? OT_DEVICE_HOST : first + i;
    uint64_t want = o.budgets[i] ? o.budgets[i] : o.budget_bytes;
    c->budget[i] = want ? want : default_budget(c->dev[i]);
    /* the reference of the scheduler's independent budget probe (sched.h) */
    ot_device_memory(c->dev[i], &c->free_at_create[i], NULL);
  }
  c->home_space = b == OT_BACKEND_MAP ? OT_MEM_PINNED : b == OT_BACKEND_USM ? OT_MEM_MANAGED : OT_MEM_HOST;
  *out = c;
  return OT_OK;
}

void ot_ctx_destroy(ot_ctx *ctx) { free(ctx); }

ot_backend ot_ctx_backend(const ot_ctx *ctx) { return ctx->backend; }
int ot_ctx_num_devices(const ot_ctx *ctx) { return ctx->n_dev; }
int ot_ctx_device(const ot_ctx *ctx, int i) { return i >= 0 && i < ctx->n_dev ? ctx->dev[i] : OT_DEVICE_HOST; }
uint64_t ot_ctx_budget(const ot_ctx *ctx, int i) { return i >= 0 && i < ctx->n_dev ? ctx->budget[i] : 0; }
uint64_t ot_ctx_host_budget(const ot_ctx *ctx) { return ctx->host_budget; }
uint64_t ot_ctx_host_bytes(const ot_ctx *ctx) { return atomic_load(&((ot_ctx *)ctx)->host_bytes); }

int ot_device_count(void) { return ot_num_devices(); }

static void print_bytes(FILE *f, uint64_t b) {
  char h[OT_SIZE_FORMAT_LEN];
  if (b == UINT64_MAX) fputs("unlimited", f);
  else fprintf(f, "%s (%llu bytes)", ot_size_format(b, h, sizeof h), (unsigned long long)b);
}

void ot_info_get(const ot_ctx_opts *opts, ot_info *out) {
  memset(out, 0, sizeof *out);
  out->version = ot_version();
#if defined(OT_OFFLOAD)
  out->offload_target = OT_OFFLOAD_NAME;
#endif
#ifdef OT_USM
  out->usm_build = 1;
#endif
#ifdef OT_HAVE_CUDA
  out->cuda_linked = 1;
#endif
  const int ndev = ot_num_devices();
  out->n_devices = ndev;
  out->initial_device = omp_get_initial_device();
  out->host_threads = omp_get_max_threads();
  out->omp_target_offload = getenv("OMP_TARGET_OFFLOAD");
  for (int d = 0; d < ndev && d < OT_MAX_DEVICES; d++) {
    ot_info_device *i = &out->dev[d];
    i->gpu = ot_dev_is_gpu(d);
    ot_device_memory(d, &i->free, &i->total);
    i->capacity = ot_device_capacity(d);
  }
  out->map_available = ndev > 0;
  out->usm_available = !ndev ? 0 : ot_dev_is_gpu(0) ? 1 : 2;
  ot_ctx *ctx = NULL;
  if (ot_ctx_create(opts, &ctx) == OT_OK) {
    out->selected = 1;
    out->backend = ctx->backend;
    out->n_selected = ctx->n_dev;
    for (int i = 0; i < ctx->n_dev; i++) {
      out->selected_dev[i] = ctx->dev[i];
      out->budget[i] = ctx->budget[i];
    }
    out->host_budget = ctx->host_budget;
    ot_ctx_destroy(ctx);
  } else {
    snprintf(out->selected_error, sizeof out->selected_error, "%s", ot_last_error());
  }
  ot_gpu_wait_describe(out->gpu_wait, sizeof out->gpu_wait);
}

void ot_info_print(FILE *f, const ot_ctx_opts *opts) {
  ot_info in;
  ot_info_get(opts, &in);
  fprintf(f, "omptensor %s\n", in.version);
  fprintf(f, "build:      offload target %s%s, CUDA runtime %s\n",
          in.offload_target ? in.offload_target : "none (target regions run on the host)",
          in.usm_build ? ", requires unified_shared_memory" : "", in.cuda_linked ? "linked" : "not linked");
  fprintf(f, "OpenMP:     %d offload device(s), initial device %d, OMP_TARGET_OFFLOAD=%s, %d host threads\n",
          in.n_devices, in.initial_device, in.omp_target_offload ? in.omp_target_offload : "(unset)", in.host_threads);
  for (int d = 0; d < in.n_devices && d < OT_MAX_DEVICES; d++) {
    const ot_info_device *i = &in.dev[d];
    fprintf(f, "device %d:   %s, memory ", d,
            i->gpu ? "GPU" : "emulated (host-offload plugin: separate buffers, real copies)");
    print_bytes(f, i->capacity);
    if (i->total) {
      fputs(", free ", f);
      print_bytes(f, i->free);
    } else {
      fputs(", the size omptensor gives an emulated device", f); /* what budgets count: the runtime reports none */
    }
    fputc('\n', f);
  }
  fprintf(f, "backends:   host yes, map %s, usm %s\n", in.map_available ? "yes" : "no (no offload device)",
          in.usm_available == 1 ? "yes" : in.usm_available == 2 ? "emulated (no prefetch)" : "no (no offload device)");
  if (in.selected) {
    fprintf(f, "selected:   backend %s, %d device(s)\n", ot_backend_name(in.backend), in.n_selected);
    for (int i = 0; i < in.n_selected; i++) {
      if (in.selected_dev[i] == OT_DEVICE_HOST) fprintf(f, "budget:     host: ");
      else fprintf(f, "budget:     device %d: ", in.selected_dev[i]);
      print_bytes(f, in.budget[i]);
      fputc('\n', f);
    }
    if (in.host_budget) {
      fprintf(f, "host budget: ");
      print_bytes(f, in.host_budget);
      fputc('\n', f);
    }
  } else {
    fprintf(f, "selected:   none: %s\n", in.selected_error);
  }
  fprintf(f, "GPU wait:   %s\n", in.gpu_wait);
}
