/* gemv_host.c — the decode matmul on host threads (gemv_host.h says why it
 * is plain host C and how each output is summed).
 *
 * Threads split the weight rows in contiguous blocks, so each streams its
 * part of W once; every row meets the activations in chunks of GH_MC rows
 * (their 16-lane partial sums in registers, the converted weight vector
 * shared). The loops are compiled once per instruction set (target_clones:
 * AVX-512, AVX2, baseline) and the loader picks one; the arithmetic is the
 * same in each (explicit fused multiply-adds: instructions on the first two,
 * fmaf on the baseline, slow but the same bits), only the code differs. */
#include <string.h>

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

#if defined(__x86_64__) && !defined(__NVPTX__) && !defined(__AMDGCN__)
#define GH_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GH_CLONES
#endif

/* Weight rows [n0, n1) of the job, for one weight dtype. */
#define GH_WORKER(NAME, LD16, LD1)                                                               \
  GH_CLONES static void NAME(const gh_job *j, int64_t n0, int64_t n1) {                          \
    const int64_t K16 = j->K & ~(int64_t)(GH_LANES - 1);                                         \
    for (int64_t n = n0; n < n1; n++) {                                                          \
      const void *wr = j->w + n * j->wrow;                                                       \
      for (int64_t m0 = 0; m0 < j->M; m0 += j->M - m0 >= GH_MC ? GH_MC : 1) {                   \
        if (j->M - m0 >= GH_MC) GH_ROW(GH_MC, LD16, LD1);                                        \
        else GH_ROW(1, LD16, LD1);                                                               \
      }                                                                                          \
    }                                                                                            \
  }

GH_WORKER(work_f32, LD16_F32, ot_ld_f32)
GH_WORKER(work_bf16, LD16_BF16, ot_ld_bf16)
GH_WORKER(work_f16, LD16_F16, ot_ld_f16)
GH_WORKER(work_q8b, LD16_Q8B, ot_ld_q8b)


int ot_kgemv_host_ok(ot_dtype wdt, int64_t K, int64_t ldw, int64_t M) {
  if (M < 1 || M > OT_GEMV_HOST_MAX_M || K < 1 || ldw < K) return 0;
  if (wdt == OT_Q8B) return K % OT_Q8B_BLOCK == 0 && ldw % OT_Q8B_BLOCK == 0;
  return wdt == OT_F32 || wdt == OT_F16 || wdt == OT_BF16;
}

void ot_kgemv_host(float *c, int64_t ldc, const float *a, int64_t lda, const void *w, ot_dtype wdt, int64_t ldw,
                   int64_t M, int64_t N, int64_t K, int accumulate) {
  const int64_t wrow = (int64_t)ot_dtype_bytes(wdt, ldw);
  const gh_job j = {c, a, (const char *)w, ldc, lda, wrow, M, N, K, accumulate != 0};
  void (*work)(const gh_job *, int64_t, int64_t) = wdt == OT_F32    ? work_f32
                                                   : wdt == OT_BF16 ? work_bf16
                                                   : wdt == OT_F16  ? work_f16
                                                                    : work_q8b;
  const int64_t blocks = (N + GH_BLOCK - 1) / GH_BLOCK;
  /* threads only where the matrix is worth starting them for */
  OT_HOST_PARFOR_IF(N * K * M >= (int64_t)1 << 16)
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t n0 = b * GH_BLOCK, n1 = n0 + GH_BLOCK < N ? n0 + GH_BLOCK : N;
    work(&j, n0, n1);
  }
}
