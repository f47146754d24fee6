/* attention_train_gpu.h (internal to src/kernels) — causal attention of
 * training (no KV cache, a batch of sequences) as tiled flash-attention GPU
 * kernels (attention_train_gpu.c). Callers check eligibility with
 * ot_katrain_gpu_ok: a GPU device, f32/f16/bf16 operands with a unit last
 * stride, head_dim <= OT_KATRAIN_MAX_D. */
#ifndef OT_KERNELS_ATTENTION_TRAIN_GPU_H
#define OT_KERNELS_ATTENTION_TRAIN_GPU_H

#include <stdint.h>

#define OT_KATRAIN_MAX_D 128

/* Every tensor as [B, T, heads, hd] with element strides s[0..2] for b, t
 * and the head (the head dim is contiguous); ws [B, T, H, 2] f32 with
 * strides w[0..3]. dtypes are ot_dtype values (f32, f16, bf16). */
typedef struct ot_katrain_gpu_args {
  const void *q, *k, *v, *out, *dout; /* q, out, dout [B, T, H, hd]; k, v [B, T, KV, hd] */
  void *o, *dq, *dk, *dv;             /* o: the forward's output (out of the forward) */
  float *ws;                          /* forward: NULL or ws; backward: ws (lse read, D written) */
  int64_t B, T, H, KV, hd;
  int qdt, kdt, vdt, odt, gdt, dqdt, dkdt, dvdt; /* gdt: dout */
  int64_t qs[3], ks[3], vs[3], os[3], gs[3], dqs[3], dks[3], dvs[3], w[4];
  float scale;
} ot_katrain_gpu_args;

/* Whether the kernels take head_dim hd. */
int ot_katrain_gpu_ok(int64_t hd);

/* out (a->o) = causal softmax(q k^T scale) v; ws[..., 0] = each row's
 * log-sum-exp (natural log, of the scaled scores) when a->ws is set. */
void ot_katrain_fwd_gpu(int dev, const ot_katrain_gpu_args *a);

/* dq, dk, dv (overwritten) from dout, out (a->out), q, k, v and ws[..., 0]
 * as the forward wrote it; ws[..., 1] = D_i = dout_i . out_i. */
void ot_katrain_bwd_gpu(int dev, const ot_katrain_gpu_args *a);

#endif
