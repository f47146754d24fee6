/* bench_launch.c — what one synchronous kernel launch costs through each
 * path a decode step uses (bare OpenMP loop, the kernel library, a bare
 * ompx kernel), alone and with the transfer thread copying beside it.
 *
 *   bench_launch [N]        N launches per case (default 2000) */
#include <omp.h>
#include <ompx.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"
#include "kernels/kernels.h"
#include "memory/device.h"
#include "memory/gpu_wait.h"
#include "ot_pragmas.h"

static atomic_int stop;

typedef struct copier {
  void *dev, *host;
  int d;
  size_t bytes;
  long n;
} copier;

static void *copy_loop(void *arg) {
  copier *c = arg;
  while (!atomic_load(&stop)) {
    ot_mem_copy(c->dev, c->d, c->host, OT_DEVICE_HOST, c->bytes);
    c->n++;
  }
  return NULL;
}

static double case_us(const char *name, int dev, float *x, float *y, float *w, int n, int which) {
  ot_kview vx = ot_kview_2d(x, OT_F32, 1, 4096), vy = ot_kview_2d(y, OT_F32, 1, 4096), vw = ot_kview_1d(w, OT_F32, 4096);
  double best = 1e9;
  for (int rep = 0; rep < 3; rep++) {
    double t = omp_get_wtime();
    for (int i = 0; i < n; i++) {
      if (which == 0) {
        OT_PARFOR(dev, OT_DEVPTR(x))
        for (int j = 0; j < 4096; j++) x[j] += 1.0f;
      } else if (which == 1) {
        ot_k_add(dev, vy, vx, vx);
      } else if (which == 2) {
        ot_k_rmsnorm(dev, vy, vx, vw, 1e-5f);
      } else {
        OT_GPU_KERNEL(dev, 16, 256, OT_DEVPTR(x))
        { x[ompx_block_id_x() * 256 + ompx_thread_id_x()] += 1.0f; }
      }
    }
    double us = (omp_get_wtime() - t) / n * 1e6;
    if (us < best) best = us;
  }
  printf("  %-34s %8.1f us per launch\n", name, best);
  return best;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  int dev = omp_get_num_devices() > 0 ? 0 : omp_get_initial_device();
  float *x, *y, *w;
  void *big_dev, *big_host;
  size_t big = 8u << 20;
  if (ot_mem_alloc(OT_MEM_DEVICE, dev, 3 * 4096 * 4, (void **)&x) ||
      ot_mem_alloc(OT_MEM_DEVICE, dev, big, &big_dev) || ot_mem_alloc(OT_MEM_PINNED, dev, big, &big_host)) {
    fprintf(stderr, "bench_launch: %s\n", ot_last_error());
    return 1;
  }
  y = x + 4096;
  w = y + 4096;
  /* The mode on the live context (the allocations above started it with
   * the plugin's blocking wait): what ot_ctx_create does when it comes
   * second. */
  if (ot_dev_is_gpu(dev) && ot_gpu_wait_apply(&dev, 1) != OT_OK) {
    fprintf(stderr, "bench_launch: %s\n", ot_last_error());
    return 2;
  }
  char wait[512];
  ot_gpu_wait_describe(wait, sizeof wait); /* what the launches below wait with */
  printf("GPU wait: %s\n", wait);
  case_us("warm-up", dev, x, y, w, 10, 0);
  for (int with_copy = 0; with_copy < 2; with_copy++) {
    printf("%s\n", with_copy ? "with a transfer thread copying 8 MiB blocks:" : "alone:");
    copier c = {big_dev, big_host, dev, big, 0};
    pthread_t th;
    atomic_store(&stop, 0);
    if (with_copy) pthread_create(&th, NULL, copy_loop, &c);
    case_us("OT_PARFOR 4096 floats", dev, x, y, w, n, 0);
    case_us("ot_k_add [1,4096]", dev, x, y, w, n, 1);
    case_us("ot_k_rmsnorm [1,4096]", dev, x, y, w, n, 2);
    if (omp_get_num_devices() > 0 && getenv("OT_BENCH_BARE")) case_us("bare ompx kernel 16x256", dev, x, y, w, n, 3);
    if (with_copy) {
      atomic_store(&stop, 1);
      pthread_join(th, NULL);
      printf("  (%ld copies of 8 MiB meanwhile)\n", c.n);
    }
  }
  ot_mem_free(OT_MEM_DEVICE, dev, x);
  ot_mem_free(OT_MEM_DEVICE, dev, big_dev);
  ot_mem_free(OT_MEM_PINNED, dev, big_host);
  return 0;
}
