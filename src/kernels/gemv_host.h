/* gemv_host.h (internal to src/kernels) — the decode matmul on host threads.
 *
 * The kernels written as target regions run on a host device with one team
 * (ot_kteams) and a scalar K loop: a float sum that C may not reassociate,
 * so nothing vectorizes and a core reads ~2 GB/s of bf16 weights. Hybrid
 * compute (the planner runs some decode ops on the host while PCIe streams
 * the rest, issue 20) needs the host to read weights at memory speed, so
 * this path is plain host C: threads over weight rows, 16-lane vector
 * partial sums, the weight dtype converted in registers. */
#ifndef OT_KERNELS_GEMV_HOST_H
#define OT_KERNELS_GEMV_HOST_H

#include <stdint.h>

#include "omptensor/dtype.h"

/* Beyond this many rows the tiled host matmul reuses weights better. */
#define OT_GEMV_HOST_MAX_M 64

/* Whether the host path takes W [N, K] (row stride ldw elements) of dtype
 * wdt: f32, f16, bf16, or q8b / q4b / q4k / q6k with K and ldw whole blocks. */
int ot_kgemv_host_ok(ot_dtype wdt, int64_t K, int64_t ldw, int64_t M);

/* c [M, N] (+)= a [M, K] @ W^T on host threads (pointers the host can read:
 * the initial device, or the host-offload plugin's memory). a and c f32
 * with row strides lda, ldc and unit column stride.
 *
 * Each output is summed the same way whatever M, the thread count or the
 * instruction set: 16 partial sums (lane j takes k = j mod 16 in order),
 * added lane 0 to 15, then the K mod 16 tail in order, every product fused
 * with its add (fma).
 * So a sequence gives the same bits alone or in a batch, and two machines
 * agree. */
/* The instruction set the host path runs with here: "avx512", "avx2+fma"
 * or "baseline" (fmaf calls: correct, slow). */
const char *ot_kgemv_host_isa(void);

/* Tests: run with instruction set `level` (0 baseline, 1 avx2+fma, 2
 * avx512; -1: back to the CPU's best). -1 if the CPU lacks it. Not
 * thread-safe; never in the product's paths. */
int ot_kgemv_host_use_isa(int level);

void ot_kgemv_host(float *c, int64_t ldc, const float *a, int64_t lda, const void *w, ot_dtype wdt, int64_t ldw,
                   int64_t M, int64_t N, int64_t K, int accumulate);

#endif
