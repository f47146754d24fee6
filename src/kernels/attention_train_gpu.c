/* attention_train_gpu.c — causal attention of training on a GPU, in the
 * FlashAttention-2 manner (no [T, T] score matrix in memory):
 *   forward  a block per (sequence, head, query block) walks the key tiles
 *            with an online softmax and writes out and each row's
 *            log-sum-exp;
 *   backward D_i = dout_i . out_i and dq in a query-major pass, dk and dv in
 *            a key-major pass (recomputing P from the log-sum-exp), each
 *            block writing only its own rows: deterministic, no atomics.
 * The previous kernels (warp_gpu.c's ot_kattn_gpu: a block per query row;
 * attention_bwd_gpu.c: three warp-per-row passes) took 1467 and 2207 us per
 * 1024-token GPT-2 sequence on the H200: every row re-read its K/V. Here a
 * K/V tile in shared memory serves a whole block of queries, and each thread
 * accumulates a register micro-tile (attention_train_tiles.h has the
 * layouts). fp32 arithmetic; f32/f16/bf16 storage, converted on load and
 * rounded on store. Shared memory stays under the 48 KiB of a static
 * allocation: head dims up to 64 get the larger tiles, up to 128 smaller. */
#include "kernels/attention_train_gpu.h"
#include "kernels/kcommon.h"
#include "kernels/warp_ops.h"
#include "ot_gpu.h"

#define ATK_NT 128 /* threads per block */
#define ATK_LOG2E 1.4426950408889634f
#define ATK_LN2 0.6931471805599453f
/* element i of an f32/bf16/f16 tensor (ot_kld without the quantized cases) */
#define ATK_LD(dt, p, i) ((dt) == OT_F32 ? ot_ld_f32(p, i) : (dt) == OT_BF16 ? ot_ld_bf16(p, i) : ot_ld_f16(p, i))

/* A thread's rows of a transposed tile: one vector access (ld.shared.v4).
 * File-scope types: declared inside the kernels' host functions, the same
 * vector types lost their alignment in the device code (align 4: scalar
 * loads). */
typedef float atk_v_4 __attribute__((ext_vector_type(4), may_alias));
typedef float atk_v_2 __attribute__((ext_vector_type(2), may_alias));

int ot_katrain_gpu_ok(int64_t hd) { return hd > 0 && hd <= OT_KATRAIN_MAX_D; }

/* head_dim <= 64: shared memory 42 KiB (forward), 39 KiB (dq), 44 KiB (dk/dv) */
#define ATK_HD 64
#define ATK_SFX 64
#define ATK_F_BQ 64
#define ATK_F_BK 32
#define ATK_F_RM 4
#define ATK_Q_BQ 32
#define ATK_Q_BK 32
#define ATK_Q_RM 4
#define ATK_K_BK 32
#define ATK_K_BQ 32
#define ATK_K_RM 4
#include "kernels/attention_train_tiles.h"

/* head_dim <= 128: 36, 38 and 39 KiB */
#define ATK_HD 128
#define ATK_SFX 128
#define ATK_F_BQ 32
#define ATK_F_BK 16
#define ATK_F_RM 4
#define ATK_Q_BQ 16
#define ATK_Q_BK 16
#define ATK_Q_RM 2
#define ATK_K_BK 16
#define ATK_K_BQ 16
#define ATK_K_RM 2
#include "kernels/attention_train_tiles.h"

void ot_katrain_fwd_gpu(int dev, const ot_katrain_gpu_args *a) {
  if (a->B == 0 || a->T == 0 || a->H == 0) return;
  if (a->hd <= 64)
    atk_fwd_64(dev, a);
  else
    atk_fwd_128(dev, a);
}

void ot_katrain_bwd_gpu(int dev, const ot_katrain_gpu_args *a) {
  if (a->B == 0 || a->T == 0 || a->H == 0) return;
  if (a->hd <= 64) {
    atk_dq_64(dev, a); /* writes D, which the dk/dv pass reads */
    atk_dkv_64(dev, a);
  } else {
    atk_dq_128(dev, a);
    atk_dkv_128(dev, a);
  }
}
