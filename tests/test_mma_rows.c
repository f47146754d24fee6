/* test_mma_rows.c — the tensor-core rows of a batched decode step
 * (kernels/mma_gpu.h) on the CPU: the macros the step kernel runs, for
 * every lane of the 8 warps of a block, with the mma instruction replaced
 * by a model of its fragment layout (the PTX ISA's for m16n8k16 .bf16,
 * written out below independently of the header), against a plain dot
 * product of the same bf16 values. What it checks:
 *   - the k positions the header maps onto the instruction's fragments
 *     cover every k of a chunk exactly once, in A and W alike;
 *   - the result registers land on the rows and columns OT_MMA_ROW/COL say;
 *   - rows past M and weight rows past N are neither read (the matrices are
 *     allocated to their exact size: AddressSanitizer sees an over-read)
 *     nor anything but zero;
 *   - the chunks in flight (U) and the tails of a warp's chunks.
 * The instruction itself runs on a GPU in tests/test_step_gpu.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kcommon.h"
#include "kernels/mma_gpu.h"
#include "ot_test.h"

enum { WARPS = 8, LANES = 32 };

/* ---- a model of mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 --------------------- */

static float lo16(uint32_t r) { return ot_kbf16_f32((uint16_t)(r & 0xffff)); }
static float hi16(uint32_t r) { return ot_kbf16_f32((uint16_t)(r >> 16)); }

/* One instruction of a warp: every lane's operands, and where its 4 sums are. */
typedef struct op {
  uint32_t a[LANES][4], b[LANES][2];
  float *d[LANES];
} op;

/* D += A [16, 16] @ B [16, 8] from the lanes' registers (PTX ISA, "Matrix
 * Fragments for mma.m16n8k16" with .bf16): lane l = 4 g + t holds
 * a0,a1 = A[g][2t..2t+1], a2,a3 = A[g+8][2t..], a4,a5 = A[g][2t+8..],
 * a6,a7 = A[g+8][2t+8..]; b0,b1 = B[2t..2t+1][g], b2,b3 = B[2t+8..][g];
 * c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..]. */
static void model(const op *o) {
  float A[16][16], B[16][8];
  for (int l = 0; l < LANES; l++) {
    const int g = l / 4, t = l % 4;
    A[g][2 * t] = lo16(o->a[l][0]), A[g][2 * t + 1] = hi16(o->a[l][0]);
    A[g + 8][2 * t] = lo16(o->a[l][1]), A[g + 8][2 * t + 1] = hi16(o->a[l][1]);
    A[g][2 * t + 8] = lo16(o->a[l][2]), A[g][2 * t + 9] = hi16(o->a[l][2]);
    A[g + 8][2 * t + 8] = lo16(o->a[l][3]), A[g + 8][2 * t + 9] = hi16(o->a[l][3]);
    B[2 * t][g] = lo16(o->b[l][0]), B[2 * t + 1][g] = hi16(o->b[l][0]);
    B[2 * t + 8][g] = lo16(o->b[l][1]), B[2 * t + 9][g] = hi16(o->b[l][1]);
  }
  for (int l = 0; l < LANES; l++) {
    const int g = l / 4, t = l % 4;
    for (int e = 0; e < 4; e++) {
      const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      float s = 0.0f;
      for (int k = 0; k < 16; k++) s += A[row][k] * B[k][col];
      o->d[l][e] += s;
    }
  }
}

/* The lanes of one warp record their instructions in order; the n-th of
 * every lane is the warp's n-th instruction. */
static op *ops;
static int cap, used[LANES];

static void record(int lane, float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  const int i = used[lane]++;
  assert_true(i < cap);
  op *o = &ops[i];
  o->a[lane][0] = a0, o->a[lane][1] = a1, o->a[lane][2] = a2, o->a[lane][3] = a3;
  o->b[lane][0] = b0, o->b[lane][1] = b1;
  o->d[lane] = d;
}
#define RECORD(D, A0, A1, A2, A3, B0, B1) record(lane, (D), (A0), (A1), (A2), (A3), (B0), (B1))

/* ---- one unit as the step kernel's block computes it ---------------------------- */

/* c [32, 32] = the block's sums of columns n0 .. n0 + 32 (rows and columns
 * past M and N included: they must come out zero), U chunks in flight. */
static void unit(int U, const uint16_t *A, int64_t lda, int64_t M, const uint16_t *W, int64_t ldw, int64_t N,
                 int64_t n0, int64_t K, float c[32][32]) {
  const int64_t nch = K / OT_MMA_CHUNK_K;
  static float d[WARPS][LANES][OT_MMA_TILES_M][OT_MMA_TILES_N][4];
  memset(d, 0, sizeof d);
  memset(c, 0, 32 * 32 * sizeof(float));
  cap = (int)(nch / WARPS + 1) * OT_MMA_TILES_M * OT_MMA_TILES_N * 2;
  ops = calloc((size_t)cap, sizeof *ops);
  assert_non_null(ops);
  for (int w = 0; w < WARPS; w++) {
    memset(used, 0, sizeof used);
    for (int lane = 0; lane < LANES; lane++) {
      const int g = lane >> 2, t = lane & 3;
      const int64_t ch0 = w, stride = WARPS;
      if (U == 1) OT_MMA_SPAN(RECORD, 1, d[w][lane], A, lda, M, W, ldw, N, n0, ch0, stride, nch, g, t);
      else if (U == 2) OT_MMA_SPAN(RECORD, 2, d[w][lane], A, lda, M, W, ldw, N, n0, ch0, stride, nch, g, t);
      else OT_MMA_SPAN(RECORD, 3, d[w][lane], A, lda, M, W, ldw, N, n0, ch0, stride, nch, g, t);
    }
    for (int lane = 1; lane < LANES; lane++) assert_int_equal(used[lane], used[0]); /* the same instructions */
    for (int i = 0; i < used[0]; i++) model(&ops[i]);
    /* the block's sums, as the step kernel adds the warps' partials */
    for (int lane = 0; lane < LANES; lane++)
      for (int mt = 0; mt < OT_MMA_TILES_M; mt++)
        for (int j = 0; j < OT_MMA_TILES_N; j++)
          for (int e = 0; e < 4; e++)
            c[OT_MMA_ROW(mt, e, lane >> 2)][OT_MMA_COL(j, e, lane & 3)] += d[w][lane][mt][j][e];
  }
  free(ops);
  ops = NULL;
}

static uint16_t *bf16_matrix(int64_t rows, int64_t ld, uint64_t *st) {
  /* exactly rows * ld values, 16-byte aligned (aligned_alloc wants a multiple of 16 bytes) */
  const size_t bytes = ((size_t)(rows * ld) * 2 + 15) / 16 * 16;
  uint16_t *p = aligned_alloc(16, bytes);
  assert_non_null(p);
  for (int64_t i = 0; i < rows * ld; i++) p[i] = ot_kf32_bf16(ot_test_rand_uniform(st, -1, 1));
  return p;
}

static void check(int64_t M, int64_t N, int64_t K, int64_t pad, int U) {
  uint64_t st = (uint64_t)(M * 1000003 + N * 101 + K + U);
  const int64_t lda = K + pad, ldw = K + pad;
  uint16_t *A = bf16_matrix(M, lda, &st), *W = bf16_matrix(N, ldw, &st);
  int bad = 0;
  double worst = 0;
  for (int64_t n0 = 0; n0 < N; n0 += OT_MMA_UNIT_N) {
    float c[32][32];
    unit(U, A, lda, M, W, ldw, N, n0, K, c);
    for (int r = 0; r < 32; r++)
      for (int j = 0; j < 32; j++) {
        const int64_t n = n0 + j;
        if (r >= M || n >= N) {
          if (c[r][j] != 0.0f) bad++;
          continue;
        }
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          const double p = (double)ot_kbf16_f32(A[r * lda + k]) * ot_kbf16_f32(W[n * ldw + k]);
          s += p, mag += fabs(p);
        }
        const double e = fabs(c[r][j] - s);
        if (e > worst) worst = e;
        if (!(e <= 1e-5 * mag + 1e-6)) bad++;
      }
  }
  printf("  M %lld, N %lld, K %lld (ld %lld), %d chunks in flight: max error %.3g, %d wrong\n", (long long)M,
         (long long)N, (long long)K, (long long)lda, U, worst, bad);
  free(A);
  free(W);
  assert_int_equal(bad, 0);
}

static void test_units(void **state) {
  (void)state;
  check(2, 32, 32, 0, 2);      /* one chunk: warp 0 alone has work */
  check(9, 40, 96, 8, 2);      /* a second unit of 8 columns, rows in one tile */
  check(16, 64, 256, 0, 1);    /* exactly one tile of rows */
  check(17, 33, 512, 0, 2);    /* one row into the second tile, one column into the second unit */
  check(32, 100, 1024, 8, 3);  /* two tiles; 4 chunks a warp: one pass of 3 and a tail */
  check(31, 7, 544, 0, 2);     /* fewer columns than a tile; 17 chunks: uneven over the warps */
}

/* ot_mma_rows_ok: what the loads need. */
static void test_ok(void **state) {
  (void)state;
  _Alignas(16) uint16_t buf[64];
  assert_true(ot_mma_rows_ok(buf, 32, buf, 32, 32));
  assert_false(ot_mma_rows_ok(buf, 32, buf, 32, 48));     /* K not whole chunks */
  assert_false(ot_mma_rows_ok(buf, 36, buf, 32, 32));     /* a row stride of 72 bytes */
  assert_false(ot_mma_rows_ok(buf + 1, 32, buf, 32, 32)); /* misaligned rows */
  assert_false(ot_mma_rows_ok(buf, 32, buf + 4, 32, 32));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_units), cmocka_unit_test(test_ok)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
