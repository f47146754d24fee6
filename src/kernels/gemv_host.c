/* gemv_host.c — the decode matmul on host threads (gemv_host.h says why it
 * is plain host C and how each output is summed).
 *
 * Threads take blocks of weight rows as they come free, each streaming its
 * blocks of W once; every row meets the activations in chunks of GH_MC rows
 * (their 16-lane partial sums in registers, the converted weight vector
 * shared). The loops are compiled once per instruction set (AVX-512,
 * AVX2 + FMA, baseline) and picked by the CPU's features; the arithmetic is the
 * same in each (explicit fused multiply-adds: instructions on the first two,
 * fmaf on the baseline, slow but the same bits), only the code differs. */
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "memory/device.h"
#include "omptensor/context.h"
#include "omptensor/memory.h"

#include "core/kquant.h"
#include "kernels/gemv_host.h"
#include "kernels/kcommon.h"

#define GH_LANES 16
#define GH_MC 4        /* activation rows per pass over a weight row */
#define GH_BLOCK 16    /* weight rows per scheduling unit */

typedef float gh_v16f __attribute__((vector_size(64)));
typedef uint16_t gh_v16h __attribute__((vector_size(32)));
typedef uint32_t gh_v16u __attribute__((vector_size(64)));
typedef int8_t gh_v16b __attribute__((vector_size(16)));
typedef _Float16 gh_v16hf __attribute__((vector_size(32)));
typedef uint8_t gh_v16ub __attribute__((vector_size(16)));
typedef int32_t gh_v16i __attribute__((vector_size(64)));

/* wv = the 16 weights k .. k+15 of row w as f32, each exactly ot_ld_<dt>'s
 * value (macros: a vector returned by value changes the ABI of the clones
 * without AVX-512, which clang refuses) */
#define LD16_F32(wv, w, k) memcpy(&(wv), (const float *)(w) + (k), sizeof(wv))
#define LD16_BF16(wv, w, k)                                                                      \
  do {                                                                                           \
    gh_v16h h_;                                                                                  \
    memcpy(&h_, (const uint16_t *)(w) + (k), sizeof h_);                                         \
    (wv) = (gh_v16f)(__builtin_convertvector(h_, gh_v16u) << 16);                                \
  } while (0)
#define LD16_F16(wv, w, k)                                                                       \
  do {                                                                                           \
    gh_v16hf h_;                                                                                 \
    memcpy(&h_, (const uint16_t *)(w) + (k), sizeof h_);                                         \
    (wv) = __builtin_convertvector(h_, gh_v16f);                                                 \
  } while (0)
#define LD16_Q8B(wv, w, k)                                                                       \
  do {                                                                                           \
    const ot_q8b_block *b_ = (const ot_q8b_block *)(w) + ((k) >> 5);                             \
    gh_v16b q_;                                                                                  \
    memcpy(&q_, b_->q + ((k)&31), sizeof q_);                                                    \
    (wv) = b_->scale * __builtin_convertvector(q_, gh_v16f);                                     \
  } while (0)

/* q4b (dtype.h): k is a multiple of 16, so the 16 values are the low or the
 * high nibbles of one block's 16 bytes */
#define LD16_Q4B(wv, w, k)                                                                       \
  do {                                                                                           \
    const ot_q4b_block *b_ = (const ot_q4b_block *)(w) + ((k) >> 5);                             \
    gh_v16ub q_;                                                                                 \
    memcpy(&q_, b_->qs, sizeof q_);                                                              \
    q_ = ((k)&16) ? q_ >> 4 : q_ & 15;                                                           \
    (wv) = __builtin_convertvector(__builtin_convertvector(q_, gh_v16i) - 8, gh_v16f) *          \
           ot_kf16_f32(b_->d);                                                                   \
  } while (0)

/* q4k (dtype.h): the 16 values are half of one 32's nibbles, one scale and
 * min; the multiply-add fused explicitly so every instruction set gives the
 * same bits (the baseline has no fma instruction: libm's fma, exact) */
#define LD16_Q4K(wv, w, k)                                                                       \
  do {                                                                                           \
    const ot_q4k_block *b_ = (const ot_q4k_block *)(w) + ((k) >> 8);                             \
    const int j_ = (int)((k)&255), c_ = j_ >> 6, h_ = (j_ >> 5) & 1, s_ = 2 * c_ + h_;           \
    int sc_, m_;                                                                                 \
    ot_q4k_scale_min(s_, b_->scales, &sc_, &m_);                                                 \
    gh_v16ub q_;                                                                                 \
    memcpy(&q_, b_->qs + 32 * c_ + (j_ & 16), sizeof q_);                                        \
    q_ = h_ ? q_ >> 4 : q_ & 15;                                                                 \
    const float ds_ = ot_kf16_f32(b_->d) * (float)sc_, dm_ = ot_kf16_f32(b_->dmin) * (float)m_;  \
    (wv) = __builtin_elementwise_fma(__builtin_convertvector(q_, gh_v16f), (gh_v16f){0} + ds_,   \
                                     (gh_v16f){0} - dm_);                                        \
  } while (0)

/* q6k (dtype.h): 16 values share one int8 scale; 4 low bits from ql, 2
 * high from qh */
#define LD16_Q6K(wv, w, k)                                                                       \
  do {                                                                                           \
    const ot_q6k_block *b_ = (const ot_q6k_block *)(w) + ((k) >> 8);                             \
    const int j_ = (int)((k)&255), h_ = j_ >> 7, i_ = j_ & 127;                                  \
    gh_v16ub lo_, hi_;                                                                           \
    memcpy(&lo_, b_->ql + 64 * h_ + (i_ & 63), sizeof lo_);                                      \
    memcpy(&hi_, b_->qh + 32 * h_ + (i_ & 31), sizeof hi_);                                      \
    lo_ = (lo_ >> (4 * (i_ >> 6))) & 15;                                                         \
    hi_ = (hi_ >> (2 * (i_ >> 5))) & 3;                                                          \
    const gh_v16i q_ = __builtin_convertvector(lo_ | (hi_ << 4), gh_v16i) - 32;                  \
    (wv) = __builtin_convertvector(q_, gh_v16f) * (ot_kf16_f32(b_->d) * (float)b_->scales[j_ >> 4]); \
  } while (0)

typedef struct gh_job {
  float *c;
  const float *a;
  const char *w;
  int64_t ldc, lda, wrow, M, N, K; /* wrow: bytes from one weight row to the next */
  int accumulate;
} gh_job;

/* Outputs (m0 .. m0+MC-1, n) for one weight row wr: MC rows of partial
 * sums in registers, each weight vector converted once for all of them. */
#define GH_ROW(MC, LD16, LD1)                                                                    \
  do {                                                                                           \
    gh_v16f acc[MC];                                                                             \
    for (int m = 0; m < MC; m++) acc[m] = (gh_v16f){0};                                          \
    const float *a0 = j->a + m0 * j->lda;                                                        \
    for (int64_t k = 0; k < K16; k += GH_LANES) {                                                \
      gh_v16f wv;                                                                                \
      LD16(wv, wr, k);                                                                           \
      for (int m = 0; m < MC; m++) {                                                             \
        gh_v16f av;                                                                              \
        memcpy(&av, a0 + m * j->lda + k, sizeof av);                                             \
        acc[m] = __builtin_elementwise_fma(av, wv, acc[m]);                                      \
      }                                                                                          \
    }                                                                                            \
    for (int m = 0; m < MC; m++) {                                                               \
      float s = 0.0f;                                                                            \
      for (int l = 0; l < GH_LANES; l++) s += acc[m][l];                                         \
      for (int64_t k = K16; k < j->K; k++) s = __builtin_fmaf(a0[m * j->lda + k], LD1(wr, k), s);\
      float *out = j->c + (m0 + m) * j->ldc + n;                                                 \
      if (j->accumulate) s += *out;                                                              \
      *out = s;                                                                                  \
    }                                                                                            \
  } while (0)

/* Weight rows [n0, n1) of the job, for one weight dtype, compiled for one
 * instruction set (ATTR: a target attribute, or nothing). */
#define GH_WORKER(NAME, ATTR, LD16, LD1)                                                         \
  ATTR static void NAME(const gh_job *j, int64_t n0, int64_t n1) {                               \
    const int64_t K16 = j->K & ~(int64_t)(GH_LANES - 1);                                         \
    for (int64_t n = n0; n < n1; n++) {                                                          \
      const void *wr = j->w + n * j->wrow;                                                       \
      for (int64_t m0 = 0; m0 < j->M; m0 += j->M - m0 >= GH_MC ? GH_MC : 1) {                   \
        if (j->M - m0 >= GH_MC) GH_ROW(GH_MC, LD16, LD1);                                        \
        else GH_ROW(1, LD16, LD1);                                                               \
      }                                                                                          \
    }                                                                                            \
  }

typedef void (*gh_work)(const gh_job *, int64_t, int64_t);

/* The seven dtypes for one instruction set: work_<isa>[dtype index]. */
#define GH_ISA(ISA, ATTR)                                                                        \
  GH_WORKER(work_f32_##ISA, ATTR, LD16_F32, ot_ld_f32)                                           \
  GH_WORKER(work_bf16_##ISA, ATTR, LD16_BF16, ot_ld_bf16)                                        \
  GH_WORKER(work_f16_##ISA, ATTR, LD16_F16, ot_ld_f16)                                           \
  GH_WORKER(work_q8b_##ISA, ATTR, LD16_Q8B, ot_ld_q8b)                                           \
  GH_WORKER(work_q4b_##ISA, ATTR, LD16_Q4B, ot_ld_q4b)                                           \
  GH_WORKER(work_q4k_##ISA, ATTR, LD16_Q4K, ot_ld_q4k)                                           \
  GH_WORKER(work_q6k_##ISA, ATTR, LD16_Q6K, ot_ld_q6k)                                           \
  static const gh_work work_##ISA[7] = {work_f32_##ISA, work_bf16_##ISA, work_f16_##ISA, work_q8b_##ISA,    \
                                        work_q4b_##ISA, work_q4k_##ISA, work_q6k_##ISA};

/* Chosen at run time from what the CPU has, by feature rather than by
 * x86-64-v3/v4 level: a virtual machine may hide one feature of a level
 * (the H200 machine's "Intel Xeon Processor" came out at 31 % of its read
 * bandwidth with levels), which then dropped the loop to the baseline. */
#if defined(__x86_64__) && !defined(__NVPTX__) && !defined(__AMDGCN__)
#define GH_X86 1
GH_ISA(avx512, __attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))))
GH_ISA(avx2, __attribute__((target("avx2,fma,f16c"))))
#endif
GH_ISA(base, )

static int gh_forced = -1; /* ot_kgemv_host_use_isa (tests) */

static int gh_isa(void) { /* 2 avx512, 1 avx2, 0 baseline */
#ifdef GH_X86
  static int isa = -1;
  if (gh_forced >= 0) return gh_forced;
  if (isa < 0) {
    __builtin_cpu_init();
    isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma")
              ? 2
          : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") ? 1
                                                                                                              : 0;
  }
  return isa;
#else
  return 0;
#endif
}

int ot_kgemv_host_use_isa(int level) {
  gh_forced = -1;
  const int have = gh_isa();
  if (level > have) return -1;
  gh_forced = level;
  return 0;
}

const char *ot_kgemv_host_isa(void) {
  static const char *const names[3] = {"baseline", "avx2+fma", "avx512"};
  return names[gh_isa()];
}

int ot_kgemv_host_ok(ot_dtype wdt, int64_t K, int64_t ldw, int64_t M) {
  if (M < 1 || M > OT_GEMV_HOST_MAX_M || K < 1 || ldw < K) return 0;
  if (wdt == OT_Q8B || wdt == OT_Q4B) return K % 32 == 0 && ldw % 32 == 0;
  if (wdt == OT_Q4K || wdt == OT_Q6K) return K % 256 == 0 && ldw % 256 == 0;
  return wdt == OT_F32 || wdt == OT_F16 || wdt == OT_BF16;
}

void ot_kgemv_host(float *c, int64_t ldc, const float *a, int64_t lda, const void *w, ot_dtype wdt, int64_t ldw,
                   int64_t M, int64_t N, int64_t K, int accumulate) {
  const int64_t wrow = (int64_t)ot_dtype_bytes(wdt, ldw);
  const gh_job j = {c, a, (const char *)w, ldc, lda, wrow, M, N, K, accumulate != 0};
  const int d = wdt == OT_F32    ? 0
                : wdt == OT_BF16 ? 1
                : wdt == OT_F16  ? 2
                : wdt == OT_Q8B  ? 3
                : wdt == OT_Q4B  ? 4
                : wdt == OT_Q4K  ? 5
                                 : 6;
#ifdef GH_X86
  const int isa = gh_isa();
  const gh_work work = isa == 2 ? work_avx512[d] : isa == 1 ? work_avx2[d] : work_base[d];
#else
  const gh_work work = work_base[d];
#endif
  const int64_t blocks = (N + GH_BLOCK - 1) / GH_BLOCK;
  /* threads only where the matrix is worth starting them for; blocks handed
   * out as threads come free (hybrid compute runs this while the transfer
   * thread may hold a core: a static split would wait for the thread that
   * shares it) */
  OT_HOST_PARFOR_DYNAMIC_IF(4, N * K * M >= (int64_t)1 << 16)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t n0 = b * GH_BLOCK, n1 = n0 + GH_BLOCK < N ? n0 + GH_BLOCK : N;
    work(&j, n0, n1);
  }
}

/* Copies a pinned buffer to device `dev`, 64 MiB at a time through one
 * device buffer, until told to stop (the PCIe stream a hybrid step runs
 * beside its host ops), counting the bytes. The host buffer is larger than
 * a server's last-level cache, so the DMA engine reads host memory as a
 * step's weight stream does: a 64 MiB source stayed in the cache of the
 * H200 machine's Xeon and showed no contention (93 GB/s for the host
 * matvec beside it, where a traced step's host ops got 20-45). */
typedef struct gh_stream {
  char *host;
  void *dev_buf;
  int dev;
  size_t bytes, chunk;
  atomic_int stop;
  double copied, seconds;
  ot_status st; /* a failed copy's, with its message (the thread's own) */
  char err[512];
} gh_stream;

static void *gh_stream_run(void *arg) {
  gh_stream *g = arg;
  const double t0 = omp_get_wtime();
  for (size_t off = 0; !atomic_load(&g->stop); off = (off + g->chunk) % g->bytes) {
    if ((g->st = ot_mem_copy(g->dev_buf, g->dev, g->host + off, OT_DEVICE_HOST, g->chunk)) != OT_OK) {
      snprintf(g->err, sizeof g->err, "%s", ot_last_error()); /* messages are per thread */
      break;
    }
    g->copied += (double)g->chunk;
  }
  g->seconds = omp_get_wtime() - t0;
  return NULL;
}

ot_status ot_k_host_rates(int dev, double *host_rate, double *pcie_rate) {
  static double cached_host = -1.0, cached_pcie = 0;
  static int cached_dev = -2;
  double r = -1, pr = 0;
  OT_CRITICAL(ot_host_matvec_rate)
  if (cached_dev == dev) r = cached_host, pr = cached_pcie;
  if (r >= 0) {
    *host_rate = r;
    if (pcie_rate) *pcie_rate = pr;
    return OT_OK;
  }
  /* 256 MiB of bf16 weights [32768, 4096]: past the last-level caches of
   * today's servers, a few hundred ms with the first touch */
  enum { K = 4096, N = 32768 };
  uint16_t *w = aligned_alloc(64, (size_t)N * K * sizeof *w);
  float *a = malloc(K * sizeof *a), *c = malloc(N * sizeof *c);
  r = 0;
  /* beside a PCIe stream when there is a device: the DMA engine reads the
   * same host memory (on the H200 machine the host matvec fell from 82 to
   * ~50 GB/s while uploads ran) */
  gh_stream g = {NULL, NULL, ot_omp_device(dev), (size_t)512 << 20, (size_t)64 << 20, 0, 0, 0, OT_OK, ""};
  pthread_t th;
  int streaming = 0;
  void *hb = NULL;
  /* a refused allocation is the caller's failure, not a default rate
   * (issue 43: an injected device-allocation failure here left generation
   * running on with the error message set) */
  ot_status s = w && a && c ? OT_OK : ot_fail(OT_ERR_OUT_OF_MEMORY, "no host memory for 256 MiB of test weights");
  if (s == OT_OK && !ot_dev_is_host(dev)) {
    s = ot_mem_alloc(OT_MEM_PINNED, dev, g.bytes, &hb);
    if (s == OT_OK) s = ot_mem_alloc(OT_MEM_DEVICE, dev, g.chunk, &g.dev_buf);
    if (s == OT_OK) {
      g.host = hb;
      memset(g.host, 1, g.bytes);
      streaming = pthread_create(&th, NULL, gh_stream_run, &g) == 0;
      if (!streaming) s = ot_fail(OT_ERR_OUT_OF_MEMORY, "cannot start the thread of the PCIe stream");
    }
  }
  if (s == OT_OK) {
    for (int k = 0; k < K; k++) a[k] = (float)(k % 7) * 0.25f;
    OT_HOST_PARFOR_DYNAMIC_IF(64, 1) /* touched by the threads (and as the kernel splits it) */
    for (int64_t i = 0; i < (int64_t)N; i++)
      for (int k = 0; k < K; k++) w[i * K + k] = (uint16_t)(0x3f80u + (uint16_t)((i + k) & 63));
    double best = 0;
    const int nt = omp_get_max_threads();
    if (streaming && nt > 2) omp_set_num_threads(nt - 1); /* as the executor runs host ops */
    for (int pass = 0; pass < 4; pass++) {
      const double t0 = omp_get_wtime();
      ot_kgemv_host(c, N, a, K, w, OT_BF16, K, 1, N, K, 0);
      const double dt = omp_get_wtime() - t0;
      if (dt > 0 && (double)N * K * 2 / dt > best) best = (double)N * K * 2 / dt;
    }
    if (streaming && nt > 2) omp_set_num_threads(nt);
    r = best;
  }
  if (streaming) {
    atomic_store(&g.stop, 1);
    pthread_join(th, NULL);
    pr = g.seconds > 0 ? g.copied / g.seconds : 0;
    if (g.st != OT_OK) s = ot_fail(g.st, "%s", g.err);
  }
  ot_mem_free(OT_MEM_DEVICE, dev, g.dev_buf);
  ot_mem_free(OT_MEM_PINNED, dev, hb);
  free(w);
  free(a);
  free(c);
  if (s != OT_OK) return ot_fail_context(s, "measuring the host's matvec rate beside a PCIe stream (hybrid compute)");
  OT_CRITICAL(ot_host_matvec_rate) {
    cached_host = r;
    cached_pcie = pr;
    cached_dev = dev;
  }
  *host_rate = r;
  if (pcie_rate) *pcie_rate = pr;
  return OT_OK;
}
