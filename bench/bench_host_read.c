/* bench_host_read.c — how fast the host's cores read weights: the bound of
 * hybrid compute (issue 20), whose host share runs the decode matmul on
 * host threads while PCIe streams the rest.
 *
 *   bench_host_read [GiB] [dtype] [rows]    default 2 bf16 1
 *
 * Allocates GiB of weights as [11008, 4096] matrices (Llama-2-7B's MLP),
 * touched first by the threads that later read them, and reports, each as
 * the median of timed passes over all of them:
 *   read   a plain parallel sum of the bytes as 64-bit words (what the
 *          memory system gives a reading loop: the peer of the matmul),
 *   gemv   ot_k_matmul on the initial device, `rows` activation rows
 *          (the host kernel a hybrid plan runs), bytes of weights / time,
 * and their ratio. One JSON line on stdout, the table on stderr. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "kernels/gemv_host.h"
#include "kernels/kernels.h"

#define HR_N 11008
#define HR_K 4096

typedef struct hr {
  void **w;
  int n_mat;
  size_t mat_bytes;
  ot_dtype dt;
  float *a, *c;
  int rows;
  volatile uint64_t sink;
} hr;

/* n weights of dtype dt at p: normal values of either sign, none zero */
static void fill(void *p, ot_dtype dt, int64_t n) {
  switch (dt) {
  case OT_F32: {
    float *f = p;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) f[i] = (float)(i % 1999 - 999) * 1e-3f + 5e-4f;
    break;
  }
  case OT_BF16: /* 2^-7 .. 2^-6, both signs */
  case OT_F16: { /* 2^-7 .. 2^-6 in f16 too */
    uint16_t *u = p;
    const uint16_t base = dt == OT_BF16 ? 0x3c00 : 0x2000, mask = dt == OT_BF16 ? 0x7f : 0x3ff;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) u[i] = (uint16_t)(base | (i & mask) | ((i >> 10) & 1) << 15);
    break;
  }
  default: { /* q8b: scale 1/127, q in [-127, 127] */
    ot_q8b_block *b = p;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n / OT_Q8B_BLOCK; i++) {
      b[i].scale = 1.0f / 127;
      for (int k = 0; k < OT_Q8B_BLOCK; k++) b[i].q[k] = (int8_t)((i * 31 + k * 7) % 255 - 127);
    }
  }
  }
}

static ot_status pass_read(void *user, int rep) {
  (void)rep;
  hr *h = user;
  uint64_t s = 0;
  for (int m = 0; m < h->n_mat; m++) {
    const uint64_t *p = h->w[m];
    const int64_t n = (int64_t)(h->mat_bytes / 8);
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += p[i];
  }
  h->sink = s;
  return OT_OK;
}

static ot_status pass_gemv(void *user, int rep) {
  (void)rep;
  hr *h = user;
  const int host = omp_get_initial_device();
  for (int m = 0; m < h->n_mat; m++)
    OT_TRY(ot_k_matmul(host, ot_kview_2d(h->c, OT_F32, h->rows, HR_N), ot_kview_2d(h->a, OT_F32, h->rows, HR_K),
                       ot_kview_2d(h->w[m], h->dt, HR_N, HR_K), 1, 0));
  return OT_OK;
}

int main(int argc, char **argv) {
  double gib = argc > 1 ? atof(argv[1]) : 2.0;
  ot_dtype dt = OT_BF16;
  if (argc > 2 && ot_dtype_parse(argv[2], &dt) != OT_OK) {
    fprintf(stderr, "bench_host_read: unknown dtype '%s' (f32, f16, bf16, q8b)\n", argv[2]);
    return 2;
  }
  int rows = argc > 3 ? atoi(argv[3]) : 1;
  if (gib <= 0 || rows < 1 || rows > 64) {
    fprintf(stderr, "usage: bench_host_read [GiB > 0] [dtype] [rows 1..64]\n");
    return 2;
  }
  hr h = {0};
  h.dt = dt;
  h.rows = rows;
  h.mat_bytes = ot_dtype_bytes(dt, (int64_t)HR_N * HR_K);
  h.n_mat = (int)(gib * 1073741824.0 / (double)h.mat_bytes + 0.5);
  if (h.n_mat < 1) h.n_mat = 1;
  h.w = calloc((size_t)h.n_mat, sizeof *h.w);
  h.a = malloc((size_t)rows * HR_K * sizeof(float));
  h.c = malloc((size_t)rows * HR_N * sizeof(float));
  if (!h.w || !h.a || !h.c) return fprintf(stderr, "bench_host_read: out of memory\n"), 1;
  for (int i = 0; i < rows * HR_K; i++) h.a[i] = (float)((i * 7919) % 2000 - 1000) * 1e-3f;
  for (int m = 0; m < h.n_mat; m++) {
    h.w[m] = aligned_alloc(64, (h.mat_bytes + 63) / 64 * 64);
    if (!h.w[m]) return fprintf(stderr, "bench_host_read: out of memory (%d matrices)\n", h.n_mat), 1;
    /* first touch by threads (on a machine with several NUMA nodes the
     * pages spread over them), with normal numbers of the dtype: a
     * denormal operand costs an Intel core a microcode assist per multiply
     * (the first version filled raw bytes and measured that, 2.2 GB/s per
     * core on the H200 machine's Xeon) */
    fill(h.w[m], dt, (int64_t)HR_N * HR_K);
  }
  const double bytes = (double)h.mat_bytes * h.n_mat;
  double t_read, t_gemv;
  int n_read, n_gemv;
  if (bc_time(pass_read, &h, 1, 3, 20, 2.0, &t_read, &n_read) != OT_OK ||
      bc_time(pass_gemv, &h, 1, 3, 20, 2.0, &t_gemv, &n_gemv) != OT_OK) {
    fprintf(stderr, "bench_host_read: %s\n", ot_last_error());
    return 1;
  }
  fprintf(stderr, "host weight reads: %.2f GB of %s in %d matrices [%d, %d], %d threads, %s\n", bytes * 1e-9,
          ot_dtype_name(dt), h.n_mat, HR_N, HR_K, omp_get_max_threads(), ot_kgemv_host_isa());
  fprintf(stderr, "  read (64-bit sum)   %8.2f GB/s  (%d passes)\n", bytes / t_read * 1e-9, n_read);
  fprintf(stderr, "  gemv (%2d rows)      %8.2f GB/s  (%d passes)  %.0f%% of read\n", rows, bytes / t_gemv * 1e-9,
          n_gemv, 100.0 * t_read / t_gemv);
  printf("{\"bench\": \"host_read\", \"bytes\": %.0f, \"dtype\": \"%s\", \"rows\": %d, \"threads\": %d, "
         "\"isa\": \"%s\", \"read_gbs\": %.3f, \"gemv_gbs\": %.3f, \"gemv_over_read\": %.4f}\n",
         bytes, ot_dtype_name(dt), rows, omp_get_max_threads(), ot_kgemv_host_isa(), bytes / t_read * 1e-9, bytes / t_gemv * 1e-9,
         t_read / t_gemv);
  /* the library's own measurement, which hybrid compute splits by: its
   * host kernel beside a PCIe stream to the device (sharing host memory) */
  double hr = 0, pr = 0;
  if (ot_k_host_rates(omp_get_num_devices() > 0 ? 0 : OT_DEVICE_HOST, &hr, &pr) != OT_OK) {
    fprintf(stderr, "  ot_k_host_rates: %s\n", ot_last_error());
    return 1;
  }
  fprintf(stderr, "  ot_k_host_rates: host matvec %.2f GB/s beside a PCIe stream of %.2f GB/s\n", hr * 1e-9, pr * 1e-9);
  printf("{\"bench\": \"host_rates\", \"host_gbs_beside_pcie\": %.3f, \"pcie_gbs_beside_host\": %.3f}\n", hr * 1e-9,
         pr * 1e-9);
  for (int m = 0; m < h.n_mat; m++) free(h.w[m]);
  free(h.w);
  free(h.a);
  free(h.c);
  return 0;
}
