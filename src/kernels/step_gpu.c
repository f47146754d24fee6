/* step_gpu.c — see step_gpu.h. The encoders (host side), then the kernel. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "kernels/gemv_gpu.h"
#include "kernels/kcommon.h"
#include "kernels/mma_gpu.h"
#include "kernels/qgroup.h"
#include "kernels/step_gpu.h"
#include "kernels/warp_gpu.h"
#include "kernels/warp_ops.h"
#include "memory/device.h"
#include "omptensor/context.h"
#include "omptensor/memory.h"
#include "ot_gpu.h"

#ifdef OT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Off by default again since 2026-12-08. It was on since it ran on a GPU
 * (H100, 2026-12-07, build 9cdb461: the whole nvptx suite with it on; a
 * resident 7 GB decode step 4.3-4.7 ms against 8.2 ms op by op,
 * bench/RESULTS.md). On the H100 on 2026-12-08 the build of bff0d7c..
 * 90491e7 gave wrong logits with it on (test_step_gpu: every dtype
 * against the per-op path), a batch-1 step of the 7 GB model in 0.59 ms
 * (less than its weights take to read: the kernel skips work), a wrong
 * greedy token in test_cli and a launch failure under a budget; the
 * commit that broke it, somewhere after 9cdb461, is not found yet (the
 * session's device time ran out). OMPTENSOR_STEP_KERNEL=1 turns it on,
 * tests/test_step_gpu compares the two. */
#define STEP_DEFAULT 0

/* Threads per block, one block per multiprocessor. The kernel's register
 * budget follows from it: 255 a thread at 256; 512 needs ptxas
 * -maxrregcount=128 (clang 19 passes neither a bare kernel's block size
 * nor launch_bounds' blocks per multiprocessor on to ptxas), which spills
 * (696 bytes of stack). Measured on the H100, 2026-12-07
 * (bench/step_variants.sh): 512 is slower for every dtype (bf16 kernel
 * 3.98 -> 5.09 ms, q8b 3.87 -> 4.58, q4b 7.63 -> 8.68): the warps gained
 * do not pay for the loads in flight and the spills lost. */
#ifndef OT_STEP_THREADS
#define OT_STEP_THREADS 256
#endif
#define THREADS OT_STEP_THREADS
#define WARPS (THREADS / OT_WARP_SIZE)

/* ---- per device: the grid, the instruction buffer, the barrier ---------------------- */

typedef struct step_dev {
  pthread_mutex_t mu;
  int probed, sms; /* multiprocessors (0: no step kernel on this device) */
  ot_kinsn *insns; /* device copy of the instructions */
  int cap;
  uint64_t *bar;   /* the grid barrier's counter, then the split attention's partial sums (device memory) */
  uint64_t base;   /* its value when the next launch starts */
} step_dev;

static step_dev devs[OT_MAX_DEVICES];
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;
static void devs_init(void) {
  for (int i = 0; i < OT_MAX_DEVICES; i++) pthread_mutex_init(&devs[i].mu, NULL);
}

/* Multiprocessors of OpenMP device dev, 0 where unknown: the grid must not
 * have more blocks than can be resident at once (a block waiting for a slot
 * while the others spin at a barrier would never start), and one block of
 * THREADS per multiprocessor always fits. */
static int sm_count(int dev) {
#ifdef OT_HAVE_CUDA
  int n = 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
  return n > 0 ? n : 0;
#else
  (void)dev;
  return 0;
#endif
}

static step_dev *dev_state(int dev) {
  if (dev < 0 || dev >= OT_MAX_DEVICES) return NULL;
  pthread_once(&devs_once, devs_init);
  step_dev *s = &devs[dev];
  pthread_mutex_lock(&s->mu);
  if (!s->probed) {
    s->probed = 1;
    s->sms = sm_count(dev);
  }
  pthread_mutex_unlock(&s->mu);
  return s;
}

static _Atomic int forced = -1, forced_mma = -1;
static _Atomic int unroll = 8; /* ot_kstep_tune */
static _Atomic uint64_t n_launches, n_insns;

void ot_kstep_force(int on) { forced = on < 0 ? -1 : on != 0; }
void ot_kstep_force_mma(int on) { forced_mma = on < 0 ? -1 : on != 0; }

ot_status ot_kstep_tune(int unroll_loads) {
  if (unroll_loads != 4 && unroll_loads != 8 && unroll_loads != 16)
    return ot_fail(OT_ERR_INVALID_ARG, "step kernel: %d loads in flight per lane; give 4, 8 or 16", unroll_loads);
  unroll = unroll_loads;
  return OT_OK;
}

void ot_kstep_counts(uint64_t *launches, uint64_t *insns) {
  if (launches) *launches = n_launches;
  if (insns) *insns = n_insns;
}

/* OMPTENSOR_STEP_KERNEL: 0, 1 or 2 (nofuse), read once */
static int step_env(void) {
  static _Atomic int env = -1;
  if (env < 0) env = ot_env_choice("OMPTENSOR_STEP_KERNEL", STEP_DEFAULT);
  return env;
}

/* OMPTENSOR_STEP_MMA: a batched step's GEMM rows on tensor cores inside the
 * step kernel (OT_KI_MMA). Off by default until measured on a GPU. */
#define STEP_MMA_DEFAULT 0
static int mma_on(void) {
  static _Atomic int env = -1;
  const int f = forced_mma;
  if (f >= 0) return f;
  if (env < 0) env = ot_env_choice("OMPTENSOR_STEP_MMA", STEP_MMA_DEFAULT);
  return env;
}

int ot_kstep_mma_on(void) { return mma_on(); }

int ot_kstep_enabled(int dev) {
  const int f = forced;
  if (!(f >= 0 ? f : step_env()) || !ot_kfast_gpu(dev)) return 0;
  const step_dev *s = dev_state(dev);
  return s && s->sms > 0;
}

/* ---- encoders ------------------------------------------------------------------------ */

static int f32_row(ot_kview v, int64_t n) { return v.dt == OT_F32 && v.ndim == 2 && v.ne[0] == 1 && v.ne[1] == n && v.nb[1] == 1; }

int ot_kstep_norm(ot_kinsn *out, int dev, int layer, ot_kview y, ot_kview x, ot_kview w, ot_kview b, float eps) {
  if (!ot_kstep_enabled(dev) || x.ndim != 2 || y.ndim != 2 || x.ne[0] != y.ne[0] || x.ne[1] != y.ne[1]) return 0;
  const int64_t d = x.ne[1];
  /* a bf16 output is a batched step's GEMM input (OT_KI_MMA's) */
  if (x.dt != OT_F32 || (y.dt != OT_F32 && (y.dt != OT_BF16 || !mma_on())) || x.nb[1] != 1 || y.nb[1] != 1 ||
      w.dt != OT_F32 || w.ndim != 1 || w.ne[0] != d || w.nb[0] != 1)
    return 0;
  if (layer && (b.dt != OT_F32 || b.ndim != 1 || b.ne[0] != d || b.nb[0] != 1)) return 0;
  if (!ot_knorm_gpu_ok(y.p, y.nb[0], x.p, x.nb[0], w.p, layer ? b.p : NULL, d)) return 0;
  memset(out, 0, sizeof *out);
  out->op = OT_KI_NORM;
  out->u.norm = (ot_ki_norm){x.p, w.p, layer ? b.p : w.p, y.p, x.ne[0], d, x.nb[0], y.nb[0], eps, layer, (int)y.dt};
  return 1;
}

/* Matrix i of a GEMV instruction: c [1, N] = a [1, K] @ w^T, w [N, K] row-major. */
static int gemv_mat(ot_ki_gemv *g, int i, ot_kview c, ot_kview w) {
  if (w.ndim != 2 || w.ne[1] != g->K || w.nb[1] != 1 || !f32_row(c, w.ne[0])) return 0;
  if (!ot_kgemv_gpu_ok(w.p, w.dt, g->K, w.nb[0], 1)) return 0;
  /* 4-bit weights: rows in fours (ST_WARP_DOT_Q4), so every matrix of the instruction must be 4-bit, of one kind */
  const int q4 = w.dt == OT_Q4B || w.dt == OT_Q4K;
  if (i > 0 && (q4 || g->m[0].wdt == OT_Q4B || g->m[0].wdt == OT_Q4K) && (int)w.dt != g->m[0].wdt) return 0;
  g->m[i].w = w.p;
  g->m[i].c = c.p;
  g->m[i].ldw = w.nb[0];
  g->m[i].N = w.ne[0];
  g->m[i].wdt = (int)w.dt;
  return 1;
}

static int gemv_start(ot_kinsn *out, int dev, ot_kview a) {
  /* the rows read their activations as float4s (ST_X8, ST_Q8_WORD) */
  if (!ot_kstep_enabled(dev) || a.dt != OT_F32 || a.ndim != 2 || a.ne[0] != 1 || a.nb[1] != 1 || a.ne[1] % 8 ||
      (uintptr_t)a.p % 16)
    return 0;
  memset(out, 0, sizeof *out);
  out->op = OT_KI_GEMV;
  out->u.gemv.a = a.p;
  out->u.gemv.K = a.ne[1];
  out->u.gemv.a_shared = a.ne[1] <= OT_KSTEP_MAX_K && a.ne[1] % 4 == 0 && (uintptr_t)a.p % 16 == 0;
  return 1;
}

/* Tensor-core rows (OT_KI_MMA): 2 to OT_KSTEP_MMA_MAX_M rows of bf16
 * activations a [M, K] and bf16 weights, as mma_gpu.h reads them. */
static int mma_start(ot_kinsn *out, int dev, ot_kview a) {
  if (!ot_kstep_enabled(dev) || !mma_on() || a.dt != OT_BF16 || a.ndim != 2 || a.ne[0] < 2 ||
      a.ne[0] > OT_KSTEP_MMA_MAX_M || a.nb[1] != 1)
    return 0;
  memset(out, 0, sizeof *out);
  out->op = OT_KI_MMA;
  out->u.mma.a = a.p;
  out->u.mma.M = a.ne[0];
  out->u.mma.K = a.ne[1];
  out->u.mma.lda = a.nb[0];
  return 1;
}

/* Matrix i of an MMA instruction: c [M, N] (f32 or bf16) = a @ w^T, w [N, K] bf16 row-major. */
static int mma_mat(ot_ki_mma *g, int i, ot_kview c, ot_kview w) {
  if (w.dt != OT_BF16 || w.ndim != 2 || w.ne[1] != g->K || w.nb[1] != 1 || c.ndim != 2 || c.ne[0] != g->M ||
      c.ne[1] != w.ne[0] || c.nb[1] != 1 || (c.dt != OT_F32 && c.dt != OT_BF16) ||
      !ot_mma_rows_ok(g->a, g->lda, w.p, w.nb[0], g->K))
    return 0;
  g->m[i].w = w.p;
  g->m[i].c = c.p;
  g->m[i].ldw = w.nb[0];
  g->m[i].ldc = c.nb[0];
  g->m[i].N = w.ne[0];
  g->m[i].cdt = (int)c.dt;
  return 1;
}

int ot_kstep_matmul(ot_kinsn *out, int dev, ot_kview c, ot_kview a, ot_kview w, int trans_b, int accumulate) {
  if (trans_b && a.ndim == 2 && a.ne[0] > 1) {
    if (!mma_start(out, dev, a) || !mma_mat(&out->u.mma, 0, c, w)) return 0;
    out->u.mma.n_mats = 1;
    out->u.mma.accumulate = accumulate != 0;
    return 1;
  }
  if (!trans_b || !gemv_start(out, dev, a) || !gemv_mat(&out->u.gemv, 0, c, w)) return 0;
  out->u.gemv.n_mats = 1;
  out->u.gemv.accumulate = accumulate != 0;
  return 1;
}

int ot_kstep_matmul_multi(ot_kinsn *out, int dev, int n, const ot_kview *c, ot_kview a, const ot_kview *w) {
  if (n < 1 || n > 3) return 0;
  if (a.ndim == 2 && a.ne[0] > 1) {
    if (!mma_start(out, dev, a)) return 0;
    for (int i = 0; i < n; i++)
      if (!mma_mat(&out->u.mma, i, c[i], w[i])) return 0;
    out->u.mma.n_mats = n;
    return 1;
  }
  if (!gemv_start(out, dev, a)) return 0;
  for (int i = 0; i < n; i++)
    if (!gemv_mat(&out->u.gemv, i, c[i], w[i])) return 0;
  out->u.gemv.n_mats = n;
  return 1;
}

int ot_kstep_matmul_swiglu(ot_kinsn *out, int dev, ot_kview y, ot_kview up, ot_kview a, ot_kview wg, ot_kview wu) {
  if (a.ndim == 2 && a.ne[0] > 1) {
    if (!mma_start(out, dev, a) || !mma_mat(&out->u.mma, 0, y, wg) || !mma_mat(&out->u.mma, 1, up, wu) ||
        out->u.mma.m[0].N != out->u.mma.m[1].N)
      return 0;
    out->u.mma.n_mats = 2;
    out->u.mma.swiglu = 1;
    return 1;
  }
  if (!gemv_start(out, dev, a) || !gemv_mat(&out->u.gemv, 0, y, wg) || !gemv_mat(&out->u.gemv, 1, up, wu)) return 0;
  if (out->u.gemv.m[0].N != out->u.gemv.m[1].N) return 0;
  out->u.gemv.n_mats = 2;
  out->u.gemv.swiglu = 1;
  return 1;
}

int ot_kstep_rope_attention(ot_kinsn *out, int dev, ot_kview att, ot_kview q, ot_kview k, ot_kview v, ot_kview kc,
                            ot_kview vc, int64_t pos, ot_rope rope, int64_t window) {
  if (!ot_kstep_enabled(dev) || q.ndim != 3 || k.ndim != 3 || v.ndim != 3 || kc.ndim != 3 || vc.ndim != 3 ||
      att.ndim != 3)
    return 0;
  const int64_t H = q.ne[1], KV = k.ne[1], D = q.ne[2];
  if (q.ne[0] != 1 || k.ne[0] != 1 || v.ne[0] != 1 || D % 2 || k.ne[2] != D || v.ne[1] != KV || v.ne[2] != D ||
      kc.ne[1] != KV || kc.ne[2] != D || vc.ne[1] != KV || vc.ne[2] != D || KV < 1 || H % KV || pos < 0 ||
      pos >= kc.ne[0] || pos >= vc.ne[0] || att.ne[0] != 1 || att.ne[1] != H || att.ne[2] != D)
    return 0;
  if (window >= pos + 1) window = 0; /* as ot_k_attention_window: a window no row reaches past is none */
  /* the attention half as the per-op path's warp kernel takes it */
  if (q.dt != OT_F32 || vc.dt != kc.dt || att.dt != OT_F32 || q.nb[2] != 1 || k.nb[2] != 1 || v.nb[2] != 1 ||
      kc.nb[2] != 1 || vc.nb[2] != 1 || att.nb[2] != 1 || !ot_kattn_gpu_ok(kc.dt, kc.p, kc.nb[0], kc.nb[1], D))
    return 0;
  memset(out, 0, 2 * sizeof *out);
  out[0].op = OT_KI_ROPE_APPEND;
  out[0].u.rope = (ot_ki_rope){q.p, k.p, kc.p, vc.p, v.p, H, KV, D, pos, q.nb[1], k.nb[1], v.nb[1], kc.nb[0], kc.nb[1],
                               vc.nb[0], vc.nb[1], (int)q.dt, (int)k.dt, (int)v.dt, (int)kc.dt, (int)vc.dt,
                               ot_krope_resolve(rope, pos + 1, D)};
  out[1].op = OT_KI_ATTN;
  out[1].u.attn = (ot_ki_attn){.out = att.p, .q = q.p, .k = kc.p, .v = vc.p, .o1 = att.nb[1], .q1 = q.nb[1],
                               .k0 = kc.nb[0], .k1 = kc.nb[1], .v0 = vc.nb[0], .v1 = vc.nb[1], .H = H,
                               .group = H / KV, .D = D, .pos = pos, .window = window, .kvdt = (int)kc.dt,
                               .split = 1, .odt = OT_F32};
  return 2;
}

int ot_kstep_rope_attention_rows(ot_kinsn *out, int dev, ot_kview att, ot_kview q, ot_kview k, ot_kview v,
                                 ot_kview kc, ot_kview vc, ot_kview rows, ot_rope rope, int64_t window) {
  if (!ot_kstep_enabled(dev) || !mma_on() || q.ndim != 3 || k.ndim != 3 || v.ndim != 3 || kc.ndim != 4 ||
      vc.ndim != 4 || att.ndim != 3 || rows.ndim != 2 || rows.dt != OT_I32 || rope.type == OT_ROPE_DYNAMIC)
    return 0;
  const int64_t T = q.ne[0], H = q.ne[1], KV = k.ne[1], D = q.ne[2];
  if (T < 1 || D % 2 || KV < 1 || H % KV || k.ne[0] != T || v.ne[0] != T || v.ne[1] != KV || k.ne[2] != D ||
      v.ne[2] != D || kc.ne[2] != KV || kc.ne[3] != D || vc.ne[0] != kc.ne[0] || vc.ne[1] != kc.ne[1] ||
      vc.ne[2] != KV || vc.ne[3] != D || rows.ne[0] != T || rows.ne[1] != 2 || att.ne[0] != T || att.ne[1] != H ||
      att.ne[2] != D)
    return 0;
  /* the attention as ot_k_attention_rows hands it to the warp kernel */
  if (!ot_kfloat_bytes(k.dt) || !ot_kfloat_bytes(v.dt) || !ot_kattn_rows_gpu_ok(att, q, kc, vc)) return 0;
  memset(out, 0, 2 * sizeof *out);
  out[0].op = OT_KI_ROPE_ROWS;
  out[0].u.rrows.a = ot_kra_args(q, k, v, kc, vc, rows, rope);
  out[0].u.rrows.T = T;
  out[0].u.rrows.KV = KV;
  out[1].op = OT_KI_ATTN;
  ot_ki_attn *at = &out[1].u.attn;
  *at = (ot_ki_attn){.out = att.p,     .q = q.p,          .k = kc.p,         .v = vc.p,        .o1 = att.nb[1],
                     .q1 = q.nb[1],    .k0 = kc.nb[1],    .k1 = kc.nb[2],    .v0 = vc.nb[1],   .v1 = vc.nb[2],
                     .H = H,           .group = H / KV,   .D = D,            .window = window, .kvdt = (int)kc.dt,
                     .split = 1,       .rows = rows.p,    .T = T,            .r0 = rows.nb[0], .r1 = rows.nb[1],
                     .ks = kc.nb[0],   .vs = vc.nb[0],    .NS = kc.ne[0],    .P = kc.ne[1],    .q0 = q.nb[0],
                     .o0 = att.nb[0],  .odt = (int)att.dt};
  return 2;
}

/* ---- the kernel ---------------------------------------------------------------------- */

typedef struct __attribute__((aligned(16))) u128 {
  uint32_t x, y, z, w;
} u128;

typedef struct __attribute__((aligned(16))) f4 {
  float x, y, z, w;
} f4;


/* The dot products of gemv_gpu.c's gemv1, per lane (macros there and here:
 * see its note on helpers in bare kernels). */
#define ST_BFLO(u) ot_kbits_f32((u) << 16)
#define ST_BFHI(u) ot_kbits_f32((u)&0xffff0000u)
/* The activations of a 16-byte weight load come from shared memory as
 * float4s. Eight bf16/f16 values take 32 bytes of activations, so lanes
 * 0-7 (one shared-memory phase) read 32 bytes apart and lanes l and l + 4
 * would hit the same banks (a 2-way conflict; read as scalars it was
 * 8-way, and the L1 bound the whole step kernel: bench/RESULTS.md): lanes
 * with hsw = 1 (bit 2 of the lane) read the upper half first, which puts
 * the phase's eight reads on 32 distinct banks, and swap the halves back
 * in registers. The products and their order are gemv1's. */
#define ST_X8(lo, hi, xp)                                                                                     \
  const f4 xa_ = ((const f4 *)(xp))[hsw], xb_ = ((const f4 *)(xp))[hsw ^ 1];                                  \
  const f4 lo = hsw ? xb_ : xa_, hi = hsw ? xa_ : xb_
#define ST_DOT8_BF(acc, q, xp)                                                                                 \
  do {                                                                                                        \
    ST_X8(l_, h_, xp);                                                                                        \
    (acc) += ST_BFLO((q).x) * l_.x + ST_BFHI((q).x) * l_.y + ST_BFLO((q).y) * l_.z + ST_BFHI((q).y) * l_.w +     \
             ST_BFLO((q).z) * h_.x + ST_BFHI((q).z) * h_.y + ST_BFLO((q).w) * h_.z + ST_BFHI((q).w) * h_.w;      \
  } while (0)
#define ST_F16LO(u) ot_kf16_f32((uint16_t)(u))
#define ST_F16HI(u) ot_kf16_f32((uint16_t)((u) >> 16))
#define ST_DOT8_F16(acc, q, xp)                                                                                \
  do {                                                                                                        \
    ST_X8(l_, h_, xp);                                                                                        \
    (acc) += ST_F16LO((q).x) * l_.x + ST_F16HI((q).x) * l_.y + ST_F16LO((q).y) * l_.z + ST_F16HI((q).y) * l_.w + \
             ST_F16LO((q).z) * h_.x + ST_F16HI((q).z) * h_.y + ST_F16LO((q).w) * h_.z + ST_F16HI((q).w) * h_.w;  \
  } while (0)
/* four f32 values: 16 bytes of activations per lane, a phase's reads are contiguous */
#define ST_DOT4_32(acc, q, xp)                                                                                 \
  do {                                                                                                        \
    const f4 x_ = *(const f4 *)(xp);                                                                          \
    (acc) += ot_kbits_f32((q).x) * x_.x + ot_kbits_f32((q).y) * x_.y + ot_kbits_f32((q).z) * x_.z + ot_kbits_f32((q).w) * x_.w;         \
  } while (0)

/* acc += one word of a q8b block (4 int8, biased here) times its scale,
 * dotted with the 4 activations at x (16-byte aligned) */
#define ST_Q8_WORD(acc, wv, sc, XP)                                                                          \
  do {                                                                                                        \
    const f4 x_ = *(const f4 *)(XP);                                                                          \
    const uint32_t b_ = (wv) ^ 0x80808080u;                                                                   \
    (acc) += (sc) * (OT_QG_I8F(b_, 0) * x_.x + OT_QG_I8F(b_, 1) * x_.y + OT_QG_I8F(b_, 2) * x_.z +                 \
                     OT_QG_I8F(b_, 3) * x_.w);                                                                \
  } while (0)

/* q8b: blocks of a lane in flight (8 lanes per block, a word each), 8, 16
 * or 32 at build time. A lane's loads are 4 bytes (a block is 36), so it
 * needs 4x bf16's loads in flight for the same bytes. H100, 2026-12-07
 * (bench/step_variants.sh, 7 GB model): the q8b step kernel 3.87 ms at 8,
 * 3.43 at 16, 3.41 at 32. */
#ifndef ST_Q8_U
#define ST_Q8_U 16
#endif
/* One pass over as many whole groups of NU blocks (4 blocks apart: a warp
 * is 4 groups of 8 lanes) as the row has left, the products into the four
 * accumulators in turn (NU 8 is the order the step kernel always had). */
#define ST_Q8_PASS(NU, S0, S1, S2, S3, QW, SUB, QB, NB, A)                                                    \
  for (; (QB) + 4 * ((NU)-1) < (NB); (QB) += 4 * (NU)) {                                                     \
    uint32_t wv_[NU];                                                                                         \
    float sc_[NU];                                                                                            \
    OT_UNROLL for (int u_ = 0; u_ < (NU); u_++) {                                                             \
      wv_[u_] = (QW)[9 * ((QB) + 4 * u_) + 1 + (SUB)];                                                        \
      sc_[u_] = ot_kbits_f32((QW)[9 * ((QB) + 4 * u_)]);                                                      \
    }                                                                                                         \
    OT_UNROLL for (int u_ = 0; u_ < (NU); u_ += 4) {                                                          \
      ST_Q8_WORD(S0, wv_[u_], sc_[u_], (A) + ((QB) + 4 * u_) * 32 + 4 * (SUB));                               \
      ST_Q8_WORD(S1, wv_[u_ + 1], sc_[u_ + 1], (A) + ((QB) + 4 * (u_ + 1)) * 32 + 4 * (SUB));                 \
      ST_Q8_WORD(S2, wv_[u_ + 2], sc_[u_ + 2], (A) + ((QB) + 4 * (u_ + 2)) * 32 + 4 * (SUB));                 \
      ST_Q8_WORD(S3, wv_[u_ + 3], sc_[u_ + 3], (A) + ((QB) + 4 * (u_ + 3)) * 32 + 4 * (SUB));                 \
    }                                                                                                         \
  }

/* 1: q8b and q4b rows whose K and row stride are whole groups of 144
 * bytes (qgroup.h: 128 q8b or 256 q4b values) and 16-byte aligned are read
 * a lane per 16 bytes, 27 lanes a pass; 0: a lane per 4 bytes (ST_Q8_PASS,
 * ST_Q4_PAIR_WORD). Not yet measured on a GPU: off by default, built as a
 * variant (scripts/step_variant.sh qg -DST_QG=1). */
#ifndef ST_QG
#define ST_QG 0
#endif
/* the passes (3 groups each) of a row a lane has in flight: 16-byte loads,
 * as many as a bf16 lane has at unroll 8 */
#ifndef ST_QG8_U
#define ST_QG8_U 8
#endif
/* the same for q4b, whose lane loads one word of each of 4 rows a pass */
#ifndef ST_QG4_U
#define ST_QG4_U 2
#endif
/* A lane's part of one row: UNR (16, 8 or 4: ot_kstep_tune) 16-byte loads
 * in flight before the first product (a batch-1 GEMV is bound by the bytes
 * each SM has in flight, and the step kernel runs few warps per SM), the
 * products into gemv1's four accumulators in gemv1's order, its tails
 * after. */
#define ST_ROW_PASS(NU, DOT, ELEMS, A)                                                                        \
  for (; v + ((NU)-1) * OT_WARP_SIZE < nv; v += (NU)*OT_WARP_SIZE) {                                          \
    u128 q[NU];                                                                                               \
    OT_UNROLL for (int u_ = 0; u_ < (NU); u_++) q[u_] = row[v + u_ * OT_WARP_SIZE];                                \
    OT_UNROLL for (int u_ = 0; u_ < (NU); u_ += 4) {                                                             \
      DOT(s0, q[u_], (A) + (v + u_ * OT_WARP_SIZE) * (ELEMS));                                                  \
      DOT(s1, q[u_ + 1], (A) + (v + (u_ + 1) * OT_WARP_SIZE) * (ELEMS));                                        \
      DOT(s2, q[u_ + 2], (A) + (v + (u_ + 2) * OT_WARP_SIZE) * (ELEMS));                                        \
      DOT(s3, q[u_ + 3], (A) + (v + (u_ + 3) * OT_WARP_SIZE) * (ELEMS));                                        \
    }                                                                                                         \
  }
#define ST_ROW(T, ELEMS, DOT, W, LDW, NROW, A, K, MAXU)                                                           \
  do {                                                                                                        \
    const u128 *row = (const u128 *)((const T *)(W) + (NROW) * (LDW));                                        \
    const int64_t nv = (K) / (ELEMS);                                                                         \
    int64_t v = lane;                                                                                         \
    if ((MAXU) >= 16 && unr >= 16) ST_ROW_PASS(16, DOT, ELEMS, A)                                              \
    if (unr >= 8) ST_ROW_PASS(8, DOT, ELEMS, A)                                                               \
    ST_ROW_PASS(4, DOT, ELEMS, A)                                                                             \
    for (; v < nv; v += OT_WARP_SIZE) {                                                                       \
      const u128 q0 = row[v];                                                                                 \
      DOT(s0, q0, (A) + v * (ELEMS));                                                                         \
    }                                                                                                         \
  } while (0)

/* out = the warp's dot product of row n of matrix (w, wt, ldw) with a (all
 * lanes get it): gemv1's arithmetic, in its order. */
#define ST_WARP_DOT(out, w, wt, ldw, n, a, K)                                                                 \
  do {                                                                                                        \
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;                                                         \
    if ((wt) == OT_BF16) ST_ROW(uint16_t, 8, ST_DOT8_BF, w, ldw, n, a, K, 16);                                    \
    else if ((wt) == OT_F16) ST_ROW(uint16_t, 8, ST_DOT8_F16, w, ldw, n, a, K, 8);                               \
    else if ((wt) == OT_F32) ST_ROW(float, 4, ST_DOT4_32, w, ldw, n, a, K, 8);                                   \
    else if (ST_QG && OT_QG_ROWS_OK(1, w, K, ldw))                                                           \
      OT_QG_ROW8(qg8, ST_QG8_U, s0, s1, s2, s3, w, ldw, n, a, K);                                             \
    else { /* q8b: 8 lanes per block, a word (4 values) each, so that a phase's activations are 128 contiguous \
              bytes (a lane per block read 128 bytes from its neighbour's: 32-way bank conflicts); ST_Q8_U \
              blocks of a lane in flight */                                                                   \
      const uint32_t *qw_ = (const uint32_t *)((const ot_q8b_block *)(w) + (n) * ((ldw) / 32));               \
      const int64_t nb_ = (K) / 32;                                                                           \
      const int sub_ = lane & 7;                                                                              \
      int64_t qb = lane >> 3;                                                                                 \
      if (ST_Q8_U >= 32) ST_Q8_PASS(32, s0, s1, s2, s3, qw_, sub_, qb, nb_, a);                                \
      if (ST_Q8_U >= 16) ST_Q8_PASS(16, s0, s1, s2, s3, qw_, sub_, qb, nb_, a);                                \
      ST_Q8_PASS(8, s0, s1, s2, s3, qw_, sub_, qb, nb_, a);                                                   \
      for (; qb < nb_; qb += 4) ST_Q8_WORD(s0, qw_[9 * qb + 1 + sub_], ot_kbits_f32(qw_[9 * qb]), (a) + qb * 32 + 4 * sub_); \
    }                                                                                                         \
    float s_ = (s0 + s1) + (s2 + s3);                                                                         \
    for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) s_ += OT_WARP_SHFL_DOWN(s_, o);                            \
    (out) = ot_warp_bcast(s_, 0);                                                                             \
  } while (0)

/* Tensor-core rows (OT_KI_MMA): chunks of k each warp has in flight (each
 * 16 bytes of 4 weight rows and of up to 4 activation rows a lane). */
#ifndef ST_MMA_U
#define ST_MMA_U 2
#endif
/* Where a unit's sum (row, col) of a warp lies in its 32 x 32 floats of
 * shared memory: the column XOR-ed with 4 (row % 8), so that a warp's
 * stores of one result register (rows g, columns 2t + c: 16 banks in
 * 32 lanes at best) are 2-way instead of 8-way conflicts (row % 8 = g);
 * a row stays in its 32 floats, read whole by a warp in the reduction. */
#define ST_MMA_AT(row, col) ((row)*OT_MMA_UNIT_N + ((col) ^ (((row)&7) << 2)))
/* v as a matrix of dtype dt holds it: rounded to bf16 or kept */
#define ST_ROUND(dt, v) ((dt) == OT_BF16 ? ot_kbf16_f32(ot_kf32_bf16(v)) : (v))
/* A unit's 32 x 32 sums per warp fill the activations' buffer, and the
 * block's threads reduce them 4 outputs each. */
_Static_assert(WARPS * 32 * OT_MMA_UNIT_N <= OT_KSTEP_MAX_K && THREADS * 4 == 32 * OT_MMA_UNIT_N &&
                   16 * OT_MMA_TILES_M == OT_KSTEP_MMA_MAX_M,
               "the tensor-core units' partial sums fit the shared buffer, 4 outputs a thread");

/* Key ranges per head for attention over pos + 1 keys: enough to give
 * every block one (H heads alone leave most of the G blocks idle), at most
 * ST_MAX_SPLIT, none shorter than a warp's 32 keys, and the partial sums
 * within ST_PART_FLOATS. 1: one block per head, ot_kattn_gpu's order. */
#define ST_MAX_SPLIT 8
#define ST_PART_FLOATS (1 << 18)
/* The first key a row at pos sees under window (0: none). */
#define ST_FIRST_KEY(pos, window) ((window) && (pos) + 1 > (window) ? (pos) + 1 - (window) : 0)
static int attn_split(const ot_ki_attn *at, int64_t G) {
  if (at->rows) return 1; /* T x H (row, head) pairs fill the blocks */
  int64_t s = at->H > 0 ? G / at->H : 1;
  if (s > ST_MAX_SPLIT) s = ST_MAX_SPLIT;
  const int64_t keys = at->pos + 1 - ST_FIRST_KEY(at->pos, at->window);
  if (s > keys / 32) s = keys / 32;
  while (s > 1 && at->H * s * (at->D + 2) > ST_PART_FLOATS) s--;
  return s < 1 ? 1 : (int)s;
}

/* An RMSNorm of one row whose output is the next GEMV's activations: the
 * GEMV's blocks normalize the row themselves, in the norm's arithmetic (so
 * the values are the norm's bit for bit), and the norm, run by one block
 * only to leave its output for later readers, needs no grid barrier after
 * it. Returns the grid barriers the list takes. */
static int64_t fuse(ot_kinsn *v, int n, int64_t G, float *part) {
  const int on = step_env() != 2; /* nofuse: no norm fused */
  int64_t barriers = 0;
  for (int i = 0; i < n; i++) {
    ot_kinsn *a = &v[i], *b = i + 1 < n ? &v[i + 1] : NULL;
    if (a->op == OT_KI_ATTN) {
      ot_ki_attn *at = &a->u.attn;
      at->split = attn_split(at, G);
      at->part = part;
      barriers += at->split > 1; /* the partial sums are combined after a grid barrier */
    }
    if (on && b && a->op == OT_KI_NORM && b->op == OT_KI_GEMV && !a->u.norm.layer && a->u.norm.rows == 1 &&
        b->u.gemv.a_shared && b->u.gemv.a == a->u.norm.y && b->u.gemv.K == a->u.norm.d && !b->u.gemv.pre_x) {
      b->u.gemv.pre_x = a->u.norm.x;
      b->u.gemv.pre_w = a->u.norm.w;
      b->u.gemv.pre_eps = a->u.norm.eps;
      a->no_barrier = 1;
    }
    if (i + 1 < n && !a->no_barrier) barriers++;
  }
  return barriers;
}

/* RS = 1 / sqrt(mean((v - MEAN)^2) + EPS) over a row of D floats held as
 * NVEC float4 in the block's threads' v[0 .. 8) (element c of thread tid at
 * v[c / THREADS] where c % THREADS == tid): ot_knorm_gpu's arithmetic in
 * its order (per thread, then the warp's shuffles, then the 8 warps' red[]).
 * Every thread of the block gets RS; red is free again afterwards. */
#define ST_BLOCK_RS(RS, v, NVEC, MEAN, D, EPS)                                                                 \
  do {                                                                                                         \
    float ss_ = 0.0f;                                                                                          \
    for (int j_ = 0; j_ < 8; j_++)                                                                             \
      if (tid + THREADS * j_ < (NVEC)) {                                                                       \
        const float a0 = v[j_].x - (MEAN), a1 = v[j_].y - (MEAN), a2 = v[j_].z - (MEAN), a3 = v[j_].w - (MEAN); \
        ss_ += a0 * a0 + a1 * a1 + a2 * a2 + a3 * a3;                                                          \
      }                                                                                                        \
    for (int o_ = OT_WARP_SIZE / 2; o_ > 0; o_ >>= 1) ss_ += OT_WARP_SHFL_DOWN(ss_, o_);                       \
    if (lane == 0) red[warp] = ss_;                                                                            \
    OT_GPU_BLOCK_SYNC();                                                                                       \
    float t_ = 0.0f;                                                                                           \
    for (int j_ = 0; j_ < WARPS; j_++) t_ += red[j_];                                                          \
    (RS) = 1.0f / sqrtf(t_ / (float)(D) + (EPS));                                                              \
    OT_GPU_BLOCK_SYNC();                                                                                       \
  } while (0)

/* acc[0 .. 4) = the warp's dot products of rows n0 .. n0 + nr (nr <= 4) of
 * a 4-bit matrix with a (lane 0 holds them): gemv_gpu.c's gemv1_q4, whose
 * note says why four rows share a lane's activations. */
#define ST_Q4_ROWS 4
/* 1: q4b rows as pairs of blocks (below); 0: a lane per block. H100,
 * 2026-12-07 (bench/step_variants.sh, 2.16 GB q4b model): the q4b step
 * kernel 7.63 ms a lane per block, 4.44-4.45 ms in pairs. */
#ifndef ST_Q4_PAIRED
#define ST_Q4_PAIRED 1
#endif
#ifndef ST_Q4_PAIRS
#define ST_Q4_PAIRS 4
#endif
/* A q4b pair lane's activations: XL = a[64P + 32 hi_ + 4 t_ ..), XH 16
 * further. Block 1's lanes read their XH first, so that the 8 lanes of a
 * pair (one phase of a 16-byte shared load) hit 32 different banks. */
#define ST_Q4_PAIR_X(XL, XH, A, P)                                                                            \
  do {                                                                                                        \
    const float *x_ = (A) + (P)*64 + 32 * hi_ + 4 * t_;                                                       \
    const f4 f_ = *(const f4 *)(x_ + sh_), s_ = *(const f4 *)(x_ + 16 - sh_);                                 \
    (XL) = hi_ ? s_ : f_;                                                                                     \
    (XH) = hi_ ? f_ : s_;                                                                                     \
  } while (0)
/* ACC += 8 values of a q4b pair's lane times their activations: the lane's
 * 4 bytes of a block (qs[4t .. 4t + 4): low nibbles values 4t.., high ones
 * 16 + 4t..) from words A and B (block 0's straddle two words: the high
 * half of A, the low of B), its block's f16 scale in C (low half for block
 * 0, high for block 1); XL, XH the activations 4t.. and 16 + 4t.. . Uses
 * the enclosing hi_ and sh_. */
#define ST_Q4_PAIR_WORD(ACC, A, B, C, XL, XH)                                                                 \
  do {                                                                                                        \
    const uint32_t q_ = hi_ ? (B) : ((A) >> 16) | ((B) << 16);                                                \
    const float d_ = ot_kf16_f32((uint16_t)((C) >> sh_));                                                     \
    (ACC) += d_ * (OT_QG_U4F(q_, 0) * (XL).x + OT_QG_U4F(q_, 8) * (XL).y + OT_QG_U4F(q_, 16) * (XL).z +         \
                   OT_QG_U4F(q_, 24) * (XL).w + OT_QG_U4F(q_, 4) * (XH).x + OT_QG_U4F(q_, 12) * (XH).y +       \
                   OT_QG_U4F(q_, 20) * (XH).z + OT_QG_U4F(q_, 28) * (XH).w);                                \
  } while (0)
#define ST_WARP_DOT_Q4(acc, W_, WT_, LDW_, N0_, NR_, A_, K_)                                                          \
  do {                                                                                                         \
    OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++) (acc)[r] = 0.0f;                                            \
    if (ST_QG && (WT_) == OT_Q4B && OT_QG_ROWS_OK(0, W_, K_, LDW_)) {                                          \
      OT_QG_ROWS4(qg4, ST_QG4_U, ST_Q4_ROWS, acc, W_, LDW_, N0_, NR_, A_, K_);                               \
    } else if (ST_Q4_PAIRED && (WT_) == OT_Q4B && (K_) % 64 == 0 && (LDW_) % 64 == 0 &&                     \
               ((uintptr_t)(W_)&3) == 0) {                                                                     \
      /* a pair of blocks is 36 bytes, 9 aligned words (d0 and qs0[0..1], qs0[2..13], qs0[14..15] and d1,  \
         qs1): 8 lanes a pair, 4 bytes (8 values) each, a block's activations read by 4 lanes as two      \
         float4, ST_Q4_PAIRS pairs of the 4 rows in flight per lane */                                     \
      const int sub_ = lane & 7, hi_ = sub_ >> 2, t_ = sub_ & 3;                                                \
      const int ia_ = hi_ ? 4 : t_, ib_ = t_ + 1 + 4 * hi_, ic_ = 4 * hi_, sh_ = 16 * hi_;                      \
      const int64_t np_ = (K_) / 64, rw_ = (LDW_) / 64 * 9;                                                     \
      const uint32_t *w0_ = (const uint32_t *)(W_) + (N0_) * rw_;                                               \
      int64_t p_ = lane >> 3;                                                                                   \
      for (; p_ + 4 * (ST_Q4_PAIRS - 1) < np_; p_ += 4 * ST_Q4_PAIRS) {                                          \
        uint32_t wa_[ST_Q4_PAIRS][ST_Q4_ROWS], wb_[ST_Q4_PAIRS][ST_Q4_ROWS], wc_[ST_Q4_PAIRS][ST_Q4_ROWS];       \
        OT_UNROLL for (int u_ = 0; u_ < ST_Q4_PAIRS; u_++)                                                      \
          OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++) {                                                      \
            const uint32_t *w_ = w0_ + (r < (NR_) ? r : 0) * rw_ + 9 * (p_ + 4 * u_);                            \
            wa_[u_][r] = w_[ia_], wb_[u_][r] = w_[ib_], wc_[u_][r] = w_[ic_];                                    \
          }                                                                                                    \
        OT_UNROLL for (int u_ = 0; u_ < ST_Q4_PAIRS; u_++) {                                                    \
          f4 xl_, xh_;                                                                                         \
          ST_Q4_PAIR_X(xl_, xh_, (A_), p_ + 4 * u_);                                                            \
          OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++) ST_Q4_PAIR_WORD((acc)[r], wa_[u_][r], wb_[u_][r], wc_[u_][r], xl_, xh_); \
        }                                                                                                      \
      }                                                                                                        \
      for (; p_ < np_; p_ += 4) {                                                                               \
        f4 xl_, xh_;                                                                                           \
        ST_Q4_PAIR_X(xl_, xh_, (A_), p_);                                                                       \
        OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++) {                                                        \
          const uint32_t *w_ = w0_ + (r < (NR_) ? r : 0) * rw_ + 9 * p_;                                         \
          ST_Q4_PAIR_WORD((acc)[r], w_[ia_], w_[ib_], w_[ic_], xl_, xh_);                                        \
        }                                                                                                      \
      }                                                                                                        \
    } else if ((WT_) == OT_Q4B) { /* a lane per block, its 32 activations read once for the 4 rows (gemv1_q4's way; \
                              89c8974's 4 lanes per block, conflict-free activations but 3 loads per 4 bytes \
                              of a row, took the H100's q4b step kernel from 7.7 to 10.8 ms) */               \
      const int64_t rb = (LDW_) / 32;                                                                           \
      for (int64_t b = lane; b < (K_) / 32; b += OT_WARP_SIZE) {                                                \
        float xv[32];                                                                                          \
        OT_UNROLL for (int j = 0; j < 32; j++) xv[j] = (A_)[b * 32 + j];                                        \
        OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++)                                                         \
          if (r < (NR_)) {                                                                                      \
            const ot_q4b_block *qb_ = (const ot_q4b_block *)(W_) + ((N0_) + r) * rb + b;                         \
            const uint16_t *q = (const uint16_t *)qb_->qs;                                                     \
            float t = 0.0f;                                                                                    \
            OT_UNROLL for (int j = 0; j < 8; j++) {                                                            \
              const uint32_t qu_ = q[j];                                                                       \
              t += OT_QG_U4F(qu_, 0) * xv[2 * j] + OT_QG_U4F(qu_, 8) * xv[2 * j + 1] +                          \
                   OT_QG_U4F(qu_, 4) * xv[2 * j + 16] + OT_QG_U4F(qu_, 12) * xv[2 * j + 17];                      \
            }                                                                                                  \
            (acc)[r] += ot_kf16_f32(qb_->d) * t;                                                               \
          }                                                                                                    \
      }                                                                                                        \
    } else {                                                                                                   \
      const int64_t rb = (LDW_) / 256;                                                                          \
      const int qc = lane & 3;                                                                                 \
      const int s_lo = 2 * qc, s_hi = 2 * qc + 1;                                                              \
      for (int64_t b = lane >> 2; b < (K_) / 256; b += OT_WARP_SIZE / 4) {                                      \
        float xl[32], xh[32], sl = 0.0f, sh = 0.0f;                                                            \
        for (int j = 0; j < 32; j++) {                                                                         \
          xl[j] = (A_)[b * 256 + 64 * qc + j], xh[j] = (A_)[b * 256 + 64 * qc + 32 + j];                         \
          sl += xl[j], sh += xh[j];                                                                            \
        }                                                                                                      \
        OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++)                                                         \
          if (r < (NR_)) {                                                                                      \
            const ot_q4k_block *qb_ = (const ot_q4k_block *)(W_) + ((N0_) + r) * rb + b;                         \
            const u128 q0 = ((const u128 *)qb_->qs)[2 * qc], q1 = ((const u128 *)qb_->qs)[2 * qc + 1];         \
            const uint8_t *sc = qb_->scales;                                                                   \
            const int sc0 = s_lo < 4 ? sc[s_lo] & 63 : (sc[s_lo + 4] & 0xF) | ((sc[s_lo - 4] >> 6) << 4);      \
            const int m0 = s_lo < 4 ? sc[s_lo + 4] & 63 : (sc[s_lo + 4] >> 4) | ((sc[s_lo] >> 6) << 4);        \
            const int sc1 = s_hi < 4 ? sc[s_hi] & 63 : (sc[s_hi + 4] & 0xF) | ((sc[s_hi - 4] >> 6) << 4);      \
            const int m1 = s_hi < 4 ? sc[s_hi + 4] & 63 : (sc[s_hi + 4] >> 4) | ((sc[s_hi] >> 6) << 4);        \
            const uint32_t u[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};                            \
            float tl = 0.0f, th = 0.0f;                                                                        \
            for (int j = 0; j < 8; j++)                                                                        \
              for (int k = 0; k < 4; k++) {                                                                    \
                const uint32_t byte = (u[j] >> (8 * k)) & 0xff;                                                \
                tl += (float)(byte & 15) * xl[4 * j + k];                                                      \
                th += (float)(byte >> 4) * xh[4 * j + k];                                                      \
              }                                                                                                \
            const float d = ot_kf16_f32(qb_->d), dmin = ot_kf16_f32(qb_->dmin);                                \
            (acc)[r] += (d * (float)sc0 * tl - dmin * (float)m0 * sl) + (d * (float)sc1 * th - dmin * (float)m1 * sh); \
          }                                                                                                    \
      }                                                                                                        \
    }                                                                                                          \
    OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++) {                                                           \
      float s_ = (acc)[r];                                                                                     \
      for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) s_ += OT_WARP_SHFL_DOWN(s_, o);                           \
      (acc)[r] = s_;                                                                                           \
    }                                                                                                          \
  } while (0)

ot_status ot_kstep_run(int dev, void *insns_v, int n) {
  if (n <= 0) return OT_OK;
  step_dev *sd = dev_state(dev);
  if (!sd || !sd->sms) return ot_fail(OT_ERR_UNSUPPORTED, "step kernel: device %d is not a GPU it runs on", dev);
  pthread_mutex_lock(&sd->mu);
  ot_status st = OT_OK;
  if (n > sd->cap) {
    int cap = sd->cap ? sd->cap : 256;
    while (cap < n) cap *= 2;
    void *p = NULL;
    st = ot_mem_alloc(OT_MEM_DEVICE, dev, (size_t)cap * sizeof(ot_kinsn), &p);
    if (st == OT_OK) {
      if (sd->insns) ot_mem_free(OT_MEM_DEVICE, dev, sd->insns);
      sd->insns = p;
      sd->cap = cap;
    }
  }
  if (st == OT_OK && !sd->bar) {
    void *p = NULL;
    const uint64_t zero = 0;
    st = ot_mem_alloc(OT_MEM_DEVICE, dev, 256 + ST_PART_FLOATS * sizeof(float), &p);
    if (st == OT_OK) st = ot_mem_copy(p, dev, &zero, OT_DEVICE_HOST, sizeof zero);
    if (st == OT_OK) sd->bar = p, sd->base = 0;
    else if (p) ot_mem_free(OT_MEM_DEVICE, dev, p);
  }
  ot_kinsn *insns = insns_v;
  const int64_t barriers = st == OT_OK ? fuse(insns, n, sd->sms, (float *)((char *)sd->bar + 256)) : 0;
  if (st == OT_OK) st = ot_mem_copy(sd->insns, dev, insns, OT_DEVICE_HOST, (size_t)n * sizeof(ot_kinsn));
  if (st != OT_OK) {
    pthread_mutex_unlock(&sd->mu);
    return ot_fail_context(st, "step kernel: %d instructions on device %d", n, dev);
  }
  const ot_kinsn *prog = sd->insns;
  uint64_t *bar = sd->bar;
  const uint64_t base = sd->base;
  const int64_t G = sd->sms, ni = n;
  const int unr = unroll;
  OT_GPU_KERNEL(dev, G, THREADS, OT_DEVPTR(prog, bar) firstprivate(ni, G, base, unr))
  {
    float red[WARPS], wm[WARPS], wl[WARPS];
    float qs[OT_KATTN_MAX_D] __attribute__((aligned(16)));
    float xsh[OT_KSTEP_MAX_K] __attribute__((aligned(16)));
    OT_TEAM_SHARED(red, wm, wl, qs, xsh)
    /* attention's per-warp sums live in the GEMV's activation buffer: an
     * instruction is one or the other, and the attention's last reads are
     * followed by a block barrier (static shared memory stops at 48 KiB) */
    _Static_assert(WARPS * OT_KATTN_MAX_D <= OT_KSTEP_MAX_K, "attention's sums fit the activations' buffer");
    float(*wacc)[OT_KATTN_MAX_D] = (float(*)[OT_KATTN_MAX_D])xsh;
    const int tid = (int)OT_GPU_THREAD_ID(), lane = OT_WARP_LANE(tid), warp = OT_WARP_INDEX(tid);
    const int hsw = (lane >> 2) & 1; /* ST_X8 */
    const int64_t blk = OT_GPU_BLOCK_ID();
    uint64_t nbar = 0; /* grid barriers passed in this launch */
    for (int64_t i = 0; i < ni; i++) {
      const ot_kinsn *I = &prog[i];
      const int op = I->op;
      if (op == OT_KI_GEMV) {
        const ot_ki_gemv *g = &I->u.gemv;
        const float *a = g->a;
        if (g->a_shared) { /* the block's copy of the activations, normalized first if a norm was fused in */
          const int64_t nvec = g->K / 4;
          const f4 *src = (const f4 *)(g->pre_x ? g->pre_x : g->a);
          f4 *dst = (f4 *)xsh;
          if (g->pre_x) { /* the norm's arithmetic, thread for thread (see the OT_KI_NORM case) */
            f4 v[8];
            for (int j = 0; j < 8; j++) {
              const int64_t c = tid + THREADS * j;
              v[j] = c < nvec ? src[c] : (f4){0, 0, 0, 0};
            }
            float rs;
            ST_BLOCK_RS(rs, v, nvec, 0.0f, g->K, g->pre_eps);
            const f4 *wv = (const f4 *)g->pre_w;
            for (int j = 0; j < 8; j++) {
              const int64_t c = tid + THREADS * j;
              if (c < nvec) {
                const f4 gw = wv[c];
                dst[c] = (f4){(v[j].x - 0.0f) * rs * gw.x, (v[j].y - 0.0f) * rs * gw.y, (v[j].z - 0.0f) * rs * gw.z,
                              (v[j].w - 0.0f) * rs * gw.w};
              }
            }
          } else {
            for (int64_t c = tid; c < nvec; c += THREADS) dst[c] = src[c];
          }
          OT_GPU_BLOCK_SYNC();
          a = xsh;
        }
        const int64_t K = g->K, N0 = g->m[0].N, N1 = g->n_mats > 1 ? g->m[1].N : 0, N2 = g->n_mats > 2 ? g->m[2].N : 0;
        const int q4 = g->m[0].wdt == OT_Q4B || g->m[0].wdt == OT_Q4K;
        if (q4) { /* units of ST_Q4_ROWS rows of one matrix */
          const ot_qg_lane qg4 = ot_qg_lane_init(0, lane); /* OT_QG_ROWS4 */
          (void)qg4;
          const int64_t u0 = (N0 + 3) / 4, u1 = (N1 + 3) / 4, u2 = (N2 + 3) / 4;
          const int64_t units = g->swiglu ? u0 : u0 + u1 + u2;
          for (int64_t un = blk * WARPS + warp; un < units; un += G * WARPS) {
            const int mi = un < u0 ? 0 : un < u0 + u1 ? 1 : 2;
            const int64_t n0 = 4 * (mi == 0 ? un : mi == 1 ? un - u0 : un - u0 - u1), N = g->m[mi].N;
            const int nr = N - n0 < ST_Q4_ROWS ? (int)(N - n0) : ST_Q4_ROWS;
            float s4[ST_Q4_ROWS];
            ST_WARP_DOT_Q4(s4, g->m[mi].w, g->m[mi].wdt, g->m[mi].ldw, n0, nr, a, K);
            if (g->swiglu) {
              float u4[ST_Q4_ROWS];
              ST_WARP_DOT_Q4(u4, g->m[1].w, g->m[1].wdt, g->m[1].ldw, n0, nr, a, K);
              OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++) /* a constant trip count: s4, u4 stay in registers */
                if (r < nr && lane == 0) {
                  g->m[1].c[n0 + r] = u4[r];
                  g->m[0].c[n0 + r] = s4[r] / (1.0f + expf(-s4[r])) * u4[r];
                }
            } else {
              float *c = g->m[mi].c;
              OT_UNROLL for (int r = 0; r < ST_Q4_ROWS; r++)
                if (r < nr && lane == 0) c[n0 + r] = g->accumulate ? c[n0 + r] + s4[r] : s4[r];
            }
          }
        }
        const int64_t rows = q4 ? 0 : g->swiglu ? N0 : N0 + N1 + N2;
        const ot_qg_lane qg8 = ot_qg_lane_init(1, lane); /* OT_QG_ROW8 */
        (void)qg8;
        for (int64_t r = blk * WARPS + warp; r < rows; r += G * WARPS) {
          const int mi = r < N0 ? 0 : r < N0 + N1 ? 1 : 2;
          const int64_t nr = mi == 0 ? r : mi == 1 ? r - N0 : r - N0 - N1;
          float s;
          ST_WARP_DOT(s, g->m[mi].w, g->m[mi].wdt, g->m[mi].ldw, nr, a, K);
          if (g->swiglu) { /* y = silu(a Wg^T) * (a Wu^T), up = a Wu^T: ot_k_swiglu's formula */
            float u;
            ST_WARP_DOT(u, g->m[1].w, g->m[1].wdt, g->m[1].ldw, nr, a, K);
            if (lane == 0) {
              g->m[1].c[nr] = u;
              g->m[0].c[nr] = s / (1.0f + expf(-s)) * u;
            }
          } else if (lane == 0) {
            float *c = g->m[mi].c;
            c[nr] = g->accumulate ? c[nr] + s : s;
          }
        }
      } else if (op == OT_KI_MMA) {
        /* a block per unit of 32 columns of one matrix (swiglu: of gate and
         * then up), its 8 warps over the chunks of k in turn (mma_gpu.h),
         * their sums added in shared memory in warp order */
        const ot_ki_mma *g = &I->u.mma;
        const int gq = lane >> 2, tq = lane & 3;
        const int64_t M = g->M, nch = g->K / OT_MMA_CHUNK_K;
        const int64_t u0 = (g->m[0].N + OT_MMA_UNIT_N - 1) / OT_MMA_UNIT_N;
        const int64_t u1 = g->n_mats > 1 && !g->swiglu ? (g->m[1].N + OT_MMA_UNIT_N - 1) / OT_MMA_UNIT_N : 0;
        const int64_t u2 = g->n_mats > 2 ? (g->m[2].N + OT_MMA_UNIT_N - 1) / OT_MMA_UNIT_N : 0;
        for (int64_t un = blk; un < u0 + u1 + u2; un += G) {
          const int mi = un < u0 ? 0 : un < u0 + u1 ? 1 : 2;
          const int64_t n0 = OT_MMA_UNIT_N * (un - (mi == 0 ? 0 : mi == 1 ? u0 : u0 + u1));
          float gate[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* swiglu: this thread's rounded gate outputs */
          for (int part = 0; part < 1 + g->swiglu; part++) {
            const int wi = g->swiglu ? part : mi;
            const int64_t N = g->m[wi].N;
            float d[OT_MMA_TILES_M][OT_MMA_TILES_N][4];
            OT_UNROLL for (int a_ = 0; a_ < OT_MMA_TILES_M; a_++)
              OT_UNROLL for (int b_ = 0; b_ < OT_MMA_TILES_N; b_++)
                OT_UNROLL for (int e = 0; e < 4; e++) d[a_][b_][e] = 0.0f;
            const uint16_t *A = g->a, *W = g->m[wi].w;
            const int64_t lda = g->lda, ldw = g->m[wi].ldw, ch0 = warp;
            OT_MMA_SPAN(OT_MMA_16816, ST_MMA_U, d, A, lda, M, W, ldw, N, n0, ch0, (int64_t)WARPS, nch, gq, tq);
            float *pw = xsh + warp * (32 * OT_MMA_UNIT_N);
            OT_UNROLL for (int a_ = 0; a_ < OT_MMA_TILES_M; a_++)
              OT_UNROLL for (int b_ = 0; b_ < OT_MMA_TILES_N; b_++)
                OT_UNROLL for (int e = 0; e < 4; e++)
                  pw[ST_MMA_AT(OT_MMA_ROW(a_, e, gq), OT_MMA_COL(b_, e, tq))] = d[a_][b_][e];
            OT_GPU_BLOCK_SYNC();
            float sum[4];
            OT_UNROLL for (int r = 0; r < 4; r++) {
              const int o = tid + THREADS * r, at = ST_MMA_AT(o / OT_MMA_UNIT_N, o % OT_MMA_UNIT_N);
              sum[r] = 0.0f;
              for (int w = 0; w < WARPS; w++) sum[r] += xsh[w * (32 * OT_MMA_UNIT_N) + at];
            }
            OT_GPU_BLOCK_SYNC(); /* xsh is the next part's or unit's */
            OT_UNROLL for (int r = 0; r < 4; r++) {
              const int o = tid + THREADS * r, row = o / OT_MMA_UNIT_N;
              const int64_t col = n0 + o % OT_MMA_UNIT_N;
              if (row >= M || col >= N) continue;
              if (!g->swiglu) {
                void *c = g->m[mi].c;
                const int64_t off = row * g->m[mi].ldc + col;
                ot_kst(g->m[mi].cdt, c, off, g->accumulate ? ot_kld(g->m[mi].cdt, c, off) + sum[r] : sum[r]);
              } else if (part == 0) {
                gate[r] = ST_ROUND(g->m[0].cdt, sum[r]);
              } else { /* y = silu(g) * u, up = u: ot_k_swiglu's formula on the rounded outputs */
                const float u = ST_ROUND(g->m[1].cdt, sum[r]);
                ot_kst(g->m[1].cdt, g->m[1].c, row * g->m[1].ldc + col, u);
                ot_kst(g->m[0].cdt, g->m[0].c, row * g->m[0].ldc + col, gate[r] / (1.0f + expf(-gate[r])) * u);
              }
            }
          }
        }
      } else if (op == OT_KI_NORM) { /* ot_knorm_gpu's body, a block per row */
        const ot_ki_norm *nm = &I->u.norm;
        const int64_t nvec = nm->d / 4;
        /* fused into the next GEMV (no barrier after it): one block writes y for later readers */
        for (int64_t r = blk; r < nm->rows && (!I->no_barrier || blk == 0); r += G) {
          const f4 *xr = (const f4 *)(nm->x + r * nm->xs);
          f4 v[8];
          float s = 0.0f;
          for (int j = 0; j < 8; j++) {
            const int64_t c = tid + THREADS * j;
            v[j] = c < nvec ? xr[c] : (f4){0, 0, 0, 0};
            s += v[j].x + v[j].y + v[j].z + v[j].w;
          }
          float mean = 0.0f;
          if (nm->layer) {
            for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) s += OT_WARP_SHFL_DOWN(s, o);
            if (lane == 0) red[warp] = s;
            OT_GPU_BLOCK_SYNC();
            float t = 0.0f;
            for (int j = 0; j < WARPS; j++) t += red[j];
            mean = t / (float)nm->d;
            OT_GPU_BLOCK_SYNC();
          }
          float rs;
          ST_BLOCK_RS(rs, v, nvec, mean, nm->d, nm->eps);
          const f4 *wv = (const f4 *)nm->w, *bv = (const f4 *)nm->b;
          for (int j = 0; j < 8; j++) {
            const int64_t c = tid + THREADS * j;
            if (c < nvec) {
              const f4 gw = wv[c], bb = nm->layer ? bv[c] : (f4){0, 0, 0, 0};
              const f4 o = {(v[j].x - mean) * rs * gw.x + bb.x, (v[j].y - mean) * rs * gw.y + bb.y,
                            (v[j].z - mean) * rs * gw.z + bb.z, (v[j].w - mean) * rs * gw.w + bb.w};
              if (nm->ydt == OT_BF16) { /* 4 values, 8 bytes (ys is a multiple of 4) */
                uint32_t *yb = (uint32_t *)((uint16_t *)nm->y + r * nm->ys) + 2 * c;
                yb[0] = ot_kf32_bf16(o.x) | (uint32_t)ot_kf32_bf16(o.y) << 16;
                yb[1] = ot_kf32_bf16(o.z) | (uint32_t)ot_kf32_bf16(o.w) << 16;
              } else {
                ((f4 *)((float *)nm->y + r * nm->ys))[c] = o;
              }
            }
          }
        }
      } else if (op == OT_KI_ROPE_APPEND) { /* ot_k_rope_append for one row, over (head, pair) */
        const ot_ki_rope *rp = &I->u.rope;
        const int64_t half = rp->d / 2, total = (rp->H + rp->KV) * half;
        for (int64_t t = blk * THREADS + tid; t < total; t += G * THREADS) {
          const int64_t h = t / half, j = t % half;
          const float ang = ot_krope_angle(rp->pos, j, rp->d, rp->rope), c = cosf(ang) * ot_krope_scale(rp->rope),
                      sn = sinf(ang) * ot_krope_scale(rp->rope);
          if (h < rp->H) {
            const int64_t o1 = h * rp->q1 + j, o2 = o1 + half;
            const float x1 = ot_kld(rp->qt, rp->q, o1), x2 = ot_kld(rp->qt, rp->q, o2);
            ot_kst(rp->qt, rp->q, o1, x1 * c - x2 * sn);
            ot_kst(rp->qt, rp->q, o2, x2 * c + x1 * sn);
          } else {
            const int64_t gh = h - rp->H, o1 = gh * rp->k1 + j, o2 = o1 + half;
            const float x1 = ot_kld(rp->kt, rp->k, o1), x2 = ot_kld(rp->kt, rp->k, o2);
            ot_kst(rp->kt, rp->k, o1, x1 * c - x2 * sn);
            ot_kst(rp->kt, rp->k, o2, x2 * c + x1 * sn);
            const int64_t co = rp->pos * rp->c0 + gh * rp->c1, eo = rp->pos * rp->e0 + gh * rp->e1, vo = gh * rp->v1;
            ot_kst(rp->kct, rp->kc, co + j, ot_kld(rp->kt, rp->k, o1));
            ot_kst(rp->kct, rp->kc, co + j + half, ot_kld(rp->kt, rp->k, o2));
            ot_kst(rp->vct, rp->vc, eo + j, ot_kld(rp->vt, rp->v, vo + j));
            ot_kst(rp->vct, rp->vc, eo + j + half, ot_kld(rp->vt, rp->v, vo + j + half));
          }
        }
      } else if (op == OT_KI_ROPE_ROWS) { /* ot_k_rope_append_rows: a thread per (row, head, pair) */
        const ra_args *ra = &I->u.rrows.a;
        const int64_t hk = ra->H + I->u.rrows.KV, total = I->u.rrows.T * hk * ra->half;
        for (int64_t t = blk * THREADS + tid; t < total; t += G * THREADS) {
          const int64_t srow = t / (hk * ra->half), rem = t % (hk * ra->half);
          ra_pair(ra, srow, rem / ra->half, rem % ra->half);
        }
      } else if (op == OT_KI_ATTN) { /* ot_kattn_gpu's body, a block per (head, key range) */
        const ot_ki_attn *at = &I->u.attn;
        const int dd = (int)at->D, per = dd / OT_WARP_SIZE, S = at->split;
        const float scale = 1.0f / sqrtf((float)at->D);
        const int kvdt = at->kvdt;
        const int64_t nrow = at->rows ? at->T : 1;
        for (int64_t un = blk; un < nrow * at->H * S; un += G) {
          const int64_t srow = un / (at->H * S), hu = un % (at->H * S), h = hu / S, kh = h / at->group;
          int64_t nkeys = at->pos + 1, kb = kh * at->k1, vb = kh * at->v1;
          if (at->rows) { /* its own slot and position; padding: no keys, output 0 (ot_kattn_rows_gpu) */
            const int64_t slot = at->rows[srow * at->r0], p = at->rows[srow * at->r0 + at->r1];
            const int live = slot >= 0 && slot < at->NS && p >= 0 && p < at->P;
            nkeys = live ? p + 1 : 0;
            kb += live ? slot * at->ks : 0;
            vb += live ? slot * at->vs : 0;
          }
          const int64_t first = ST_FIRST_KEY(nkeys - 1, at->window);
          const int64_t chunk = (nkeys - first + S - 1) / S, lo = first + (hu % S) * chunk;
          const int64_t hi = lo + chunk < nkeys ? lo + chunk : nkeys;
          const float *qr = at->q + srow * at->q0 + h * at->q1;
          for (int d = tid; d < dd; d += THREADS) qs[d] = qr[d] * scale;
          OT_GPU_BLOCK_SYNC();
          float acc[OT_KATTN_MAX_D / OT_WARP_SIZE], mx = -INFINITY, sum = 0.0f;
          /* loops over acc unrolled to its full size (d < per inside): indexed at run time it went to local memory */
          OT_UNROLL for (int j = 0; j < OT_KATTN_MAX_D / OT_WARP_SIZE; j++) acc[j] = 0.0f;
          for (int64_t j0 = lo + (int64_t)warp * OT_WARP_SIZE; j0 < hi; j0 += WARPS * OT_WARP_SIZE) {
            const int64_t j = j0 + lane;
            float sc = -INFINITY;
            if (j < hi) {
              float dot = 0.0f;
              OT_KKV_DOT(dot, kvdt, at->k, j * at->k0 + kb, qs, dd);
              sc = dot;
            }
            const float m2 = fmaxf(mx, ot_warp_max(sc)), alpha = expf(mx - m2);
            const float p = j < hi ? expf(sc - m2) : 0.0f;
            float ps = p;
            for (int o = OT_WARP_SIZE / 2; o > 0; o >>= 1) ps += OT_WARP_SHFL_DOWN(ps, o);
            sum = sum * alpha + ot_warp_bcast(ps, 0);
            OT_UNROLL for (int d = 0; d < OT_KATTN_MAX_D / OT_WARP_SIZE; d++) acc[d] *= alpha; /* registers */
            const int64_t nj = hi - j0 < OT_WARP_SIZE ? hi - j0 : OT_WARP_SIZE;
            for (int jj = 0; jj < nj; jj++) {
              const float pj = ot_warp_bcast(p, jj);
              const int64_t vo = (j0 + jj) * at->v0 + vb + lane;
              OT_UNROLL for (int d = 0; d < OT_KATTN_MAX_D / OT_WARP_SIZE; d++)
                if (d < per) acc[d] += pj * OT_KKV_LD(kvdt, at->v, vo + OT_WARP_SIZE * d);
            }
            mx = m2;
          }
          if (lane == 0) {
            wm[warp] = mx;
            wl[warp] = sum;
          }
          OT_UNROLL for (int d = 0; d < OT_KATTN_MAX_D / OT_WARP_SIZE; d++)
            if (d < per) wacc[warp][lane + OT_WARP_SIZE * d] = acc[d];
          OT_GPU_BLOCK_SYNC();
          float M = -INFINITY;
          for (int w = 0; w < WARPS; w++) M = fmaxf(M, wm[w]);
          float L = 0.0f;
          for (int w = 0; w < WARPS; w++) L += wm[w] == -INFINITY ? 0.0f : wl[w] * expf(wm[w] - M);
          /* one range: the output; several: this range's max, sum and unnormalized output */
          float *orow = at->part + un * (dd + 2) + 2;
          const int64_t ob = srow * at->o0 + h * at->o1;
          for (int d = tid; d < dd; d += THREADS) {
            float s = 0.0f;
            for (int w = 0; w < WARPS; w++) s += wm[w] == -INFINITY ? 0.0f : wacc[w][d] * expf(wm[w] - M);
            if (S > 1) {
              orow[d] = s;
            } else {
              const float r = L > 0.0f ? s / L : 0.0f; /* L = 0: a padding row */
              if (at->odt == OT_F32) ((float *)at->out)[ob + d] = r;
              else ot_kst(at->odt, at->out, ob + d, r);
            }
          }
          if (S > 1 && tid == 0) orow[-2] = M, orow[-1] = L;
          OT_GPU_BLOCK_SYNC(); /* qs, wm, wl, wacc are reused by the next head */
        }
        if (S > 1) { /* the ranges combined (flash-decoding), an output element per thread of the grid */
          nbar++;
          OT_GPU_GRID_SYNC(tid, bar, base + nbar * (uint64_t)G);
          for (int64_t t = blk * THREADS + tid; t < at->H * dd; t += G * THREADS) {
            const int64_t h = t / dd, d = t % dd;
            const float *pr = at->part + h * S * (dd + 2);
            float M = -INFINITY;
            for (int c = 0; c < S; c++) M = fmaxf(M, pr[c * (dd + 2)]);
            float L = 0.0f, o = 0.0f;
            for (int c = 0; c < S; c++) {
              const float mc = pr[c * (dd + 2)];
              if (mc == -INFINITY) continue; /* an empty range */
              const float e = expf(mc - M);
              L += pr[c * (dd + 2) + 1] * e;
              o += pr[c * (dd + 2) + 2 + d] * e;
            }
            ((float *)at->out)[h * at->o1 + d] = o / L;
          }
        }
      }
      if (i + 1 < ni && !I->no_barrier) {
        nbar++;
        OT_GPU_GRID_SYNC(tid, bar, base + nbar * (uint64_t)G);
      }
    }
  }
  sd->base = base + (uint64_t)barriers * (uint64_t)G;
  n_launches++;
  n_insns += (uint64_t)n;
  pthread_mutex_unlock(&sd->mu);
  return OT_OK;
}
