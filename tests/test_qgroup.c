/* test_qgroup.c — q8b and q4b rows read 16 bytes a lane (kernels/qgroup.h),
 * the lanes of a warp run on the host, two ways:
 *   - the lane functions step by step (each lane's word loaded from its
 *     group, its scale offered, the shuffles as reads of the offers, the
 *     per-block sums scaled, the lanes' parts added);
 *   - the GPU kernels' loops themselves (OT_QG_ROW8, OT_QG_ROWS4) run by
 *     32 threads, one a lane, whose shuffle (OT_QG_BCAST) is a slot per
 *     lane between two barriers.
 * Against a plain dot product of the dequantized row (ot_convert), for
 * rows of 1 to 86 groups (a warp pass takes three: partial passes
 * included) and, for q4b, four rows at once with the row count cut at 1..4
 * as the step kernel's last rows are. A piece read at the wrong
 * activation, a scale taken from the wrong lane or a scale piece counted as
 * quants breaks the match. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>

/* the warp shuffle of the threads that play the lanes (below) */
static float lane_bcast(float v, int src);
#define OT_QG_BCAST(v, src) lane_bcast((v), (src))
#include "kernels/qgroup.h"
#include "omptensor/dtype.h"
#include "ot_test.h"

enum { LANES = 32 };

/* rows [R, K] of dtype dt from uniform values; x [K] 16-byte aligned */
static uint8_t *make_rows(ot_dtype dt, int R, int64_t K, uint64_t *seed, size_t *row_bytes) {
  float *f = malloc((size_t)K * sizeof *f);
  *row_bytes = ot_dtype_bytes(dt, K);
  uint8_t *q = aligned_alloc(16, (*row_bytes * (size_t)R + 15) / 16 * 16);
  assert_true(f && q && *row_bytes % 16 == 0);
  for (int r = 0; r < R; r++) {
    for (int64_t i = 0; i < K; i++) f[i] = ot_test_rand_uniform(seed, -2.0f, 2.0f) * (float)(1 + i % 7);
    assert_int_equal(ot_convert(dt, q + (size_t)r * *row_bytes, OT_F32, f, K), OT_OK);
  }
  free(f);
  return q;
}

/* the dequantized row dotted with x, and the sum of the products' magnitudes (for the tolerance) */
static double ref_dot(ot_dtype dt, const uint8_t *row, const float *x, int64_t K, double *mag) {
  float *f = malloc((size_t)K * sizeof *f);
  assert_non_null(f);
  assert_int_equal(ot_convert(OT_F32, f, dt, row, K), OT_OK);
  double s = 0;
  *mag = 0;
  for (int64_t i = 0; i < K; i++) s += (double)f[i] * x[i], *mag += fabs((double)f[i] * x[i]);
  free(f);
  return s;
}

static void load_word(const uint8_t *p, uint32_t w[4]) { memcpy(w, p, 16); }

/* One q8b row as a warp reads it: passes of three groups. */
static double warp_q8(const uint8_t *row, const float *x, int64_t K) {
  const int64_t ng = K / OT_QG_VALUES(1);
  double total = 0;
  for (int64_t g0 = 0; g0 < ng; g0 += OT_QG_GROUPS) {
    uint32_t w[LANES][4];
    float offer[LANES];
    ot_qg_lane L[LANES];
    int64_t gi[LANES];
    for (int l = 0; l < LANES; l++) {
      L[l] = ot_qg_lane_init(1, l);
      gi[l] = g0 + OT_QG_G(L[l]);
      const int ok = OT_QG_J(L[l]) < OT_QG_WORDS && gi[l] < ng;
      memset(w[l], 0, sizeof w[l]);
      if (ok) load_word(row + OT_QG_BYTES * gi[l] + 16 * OT_QG_J(L[l]), w[l]);
      else gi[l] = 0;
      offer[l] = ot_qg_offer(1, L[l], w[l][0], w[l][1], w[l][2], w[l][3]);
    }
    for (int l = 0; l < LANES; l++) { /* after the shuffles */
      float ta = 0, tb = 0;
      ot_qg_dot8(L[l], w[l][0], w[l][1], w[l][2], w[l][3], x + OT_QG_VALUES(1) * gi[l], &ta, &tb);
      total += (double)(offer[OT_QG_SRC_A(L[l])] * ta + offer[OT_QG_SRC_B(L[l])] * tb);
    }
  }
  return total;
}

/* R (<= 4) q4b rows (row_bytes apart) as a warp reads them, out[r] each */
static void warp_q4(const uint8_t *rows, size_t row_bytes, int R, const float *x, int64_t K, double out[4]) {
  const int64_t ng = K / OT_QG_VALUES(0);
  for (int r = 0; r < 4; r++) out[r] = 0;
  for (int64_t g0 = 0; g0 < ng; g0 += OT_QG_GROUPS) {
    uint32_t w[LANES][4][4]; /* lane, row, word */
    float offer[LANES][4];
    ot_qg_lane L[LANES];
    int64_t gi[LANES];
    for (int l = 0; l < LANES; l++) {
      L[l] = ot_qg_lane_init(0, l);
      gi[l] = g0 + OT_QG_G(L[l]);
      const int ok = OT_QG_J(L[l]) < OT_QG_WORDS && gi[l] < ng;
      memset(w[l], 0, sizeof w[l]);
      for (int r = 0; r < 4; r++) {
        if (ok && r < R) load_word(rows + (size_t)r * row_bytes + OT_QG_BYTES * gi[l] + 16 * OT_QG_J(L[l]), w[l][r]);
        offer[l][r] = ot_qg_offer(0, L[l], w[l][r][0], w[l][r][1], w[l][r][2], w[l][r][3]);
      }
      if (!ok) gi[l] = 0;
    }
    for (int l = 0; l < LANES; l++) {
      uint32_t wx[4], wy[4], wz[4], ww[4];
      float ta[4] = {0}, tb[4] = {0};
      for (int r = 0; r < 4; r++) wx[r] = w[l][r][0], wy[r] = w[l][r][1], wz[r] = w[l][r][2], ww[r] = w[l][r][3];
      const ot_qg_lane Lp = L[l];
      const float *xg = x + OT_QG_VALUES(0) * gi[l];
      OT_QG_DOT4(Lp, 4, wx, wy, wz, ww, xg, ta, tb);
      for (int r = 0; r < R; r++)
        out[r] += (double)(offer[OT_QG_SRC_A(L[l])][r] * ta[r] + offer[OT_QG_SRC_B(L[l])][r] * tb[r]);
    }
  }
}

/* ---- the kernels' loops, a thread a lane ---------------------------------------------- */

static pthread_barrier_t lanes_met;
static float slot[LANES];
static _Thread_local int my_lane;

static float lane_bcast(float v, int src) {
  slot[my_lane] = v;
  pthread_barrier_wait(&lanes_met);
  const float r = slot[src];
  pthread_barrier_wait(&lanes_met); /* everyone has read before the next shuffle writes */
  return r;
}

typedef struct loop_job {
  int q8, lane, R;
  const uint8_t *w;
  int64_t ldw, K;
  const float *x;
  float out[4]; /* the lane's sums: q8b out[0], q4b one per row */
} loop_job;

static void *lane_main(void *arg) {
  loop_job *j = arg;
  my_lane = j->lane;
  const ot_qg_lane L = ot_qg_lane_init(j->q8, j->lane);
  if (j->q8) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    OT_QG_ROW8(L, 8, s0, s1, s2, s3, j->w, j->ldw, 0, j->x, j->K);
    j->out[0] = (s0 + s1) + (s2 + s3);
  } else {
    float acc[4] = {0, 0, 0, 0};
    OT_QG_ROWS4(L, 2, 4, acc, j->w, j->ldw, 0, j->R, j->x, j->K);
    memcpy(j->out, acc, sizeof acc);
  }
  return NULL;
}

/* the warp's sums (q8b: out[0]; q4b: out[r] for r < R) */
static void warp_loops(int q8, const uint8_t *w, int64_t K, int R, const float *x, double out[4]) {
  loop_job jobs[LANES];
  pthread_t th[LANES];
  assert_int_equal(pthread_barrier_init(&lanes_met, NULL, LANES), 0);
  for (int l = 0; l < LANES; l++) {
    jobs[l] = (loop_job){q8, l, R, w, K, K, x, {0, 0, 0, 0}};
    assert_int_equal(pthread_create(&th[l], NULL, lane_main, &jobs[l]), 0);
  }
  for (int r = 0; r < 4; r++) out[r] = 0;
  for (int l = 0; l < LANES; l++) {
    assert_int_equal(pthread_join(th[l], NULL), 0);
    for (int r = 0; r < 4; r++) out[r] += jobs[l].out[r];
  }
  pthread_barrier_destroy(&lanes_met);
}

static float *make_x(int64_t K, uint64_t *seed) {
  float *x = aligned_alloc(16, (size_t)K * sizeof *x);
  assert_non_null(x);
  for (int64_t i = 0; i < K; i++) x[i] = ot_test_rand_uniform(seed, -1.0f, 1.0f);
  return x;
}

static void check(double got, double want, double mag, const char *what, int64_t K) {
  if (fabs(got - want) > 1e-5 * mag + 1e-6) fail_msg("%s, K %lld: %.9g against %.9g", what, (long long)K, got, want);
}

static void test_q8b_rows(void **st) {
  (void)st;
  uint64_t seed = 11;
  const int64_t Ks[] = {128, 256, 384, 512, 640, 1024, 4096, 11008};
  for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
    const int64_t K = Ks[i];
    size_t rb;
    uint8_t *q = make_rows(OT_Q8B, 1, K, &seed, &rb);
    float *x = make_x(K, &seed);
    double mag;
    const double want = ref_dot(OT_Q8B, q, x, K, &mag);
    check(warp_q8(q, x, K), want, mag, "q8b", K);
    double loops[4];
    warp_loops(1, q, K, 1, x, loops);
    check(loops[0], want, mag, "q8b, OT_QG_ROW8", K);
    free(q);
    free(x);
  }
}

static void test_q4b_rows(void **st) {
  (void)st;
  uint64_t seed = 12;
  const int64_t Ks[] = {256, 512, 768, 1024, 2048, 4096, 11008};
  for (size_t i = 0; i < sizeof Ks / sizeof *Ks; i++) {
    const int64_t K = Ks[i];
    size_t rb;
    uint8_t *q = make_rows(OT_Q4B, 4, K, &seed, &rb);
    float *x = make_x(K, &seed);
    for (int R = 1; R <= 4; R++) {
      double got[4], loops[4];
      warp_q4(q, rb, R, x, K, got);
      warp_loops(0, q, K, R, x, loops);
      for (int r = 0; r < R; r++) {
        double mag;
        const double want = ref_dot(OT_Q4B, q + (size_t)r * rb, x, K, &mag);
        check(got[r], want, mag, "q4b", K);
        check(loops[r], want, mag, "q4b, OT_QG_ROWS4", K);
      }
    }
    free(q);
    free(x);
  }
}

/* Every piece of a group is one lane's, once: scales offered by exactly
 * one lane per block, quants covering each value's activation once. */
static void test_lane_map(void **st) {
  (void)st;
  for (int q8 = 0; q8 <= 1; q8++) {
    const int pieces = q8 ? 4 : 8, blocks = q8 ? 4 : 8, per = q8 ? 4 : 2;
    int seen[256] = {0}, offers[8] = {0};
    for (int l = 0; l < OT_QG_WORDS; l++) {
      const ot_qg_lane L = ot_qg_lane_init(q8, l);
      assert_int_equal(OT_QG_J(L), l);
      for (int k = 0; k < pieces; k++) {
        if (!OT_QG_QUANT(L, k)) {
          assert_int_equal(OT_QG_OFFER(L), k);
          offers[(pieces * l + k) / 9]++;
          continue;
        }
        for (int v = 0; v < per; v++) {
          seen[OT_QG_OFF(L, k) + v]++;
          if (!q8) seen[OT_QG_OFF(L, k) + 16 + v]++;
        }
      }
    }
    for (int b = 0; b < blocks; b++) assert_int_equal(offers[b], 1);
    for (int v = 0; v < OT_QG_VALUES(q8); v++) assert_int_equal(seen[v], 1);
    const ot_qg_lane idle = ot_qg_lane_init(q8, 27);
    assert_int_equal(OT_QG_J(idle), OT_QG_WORDS); /* lanes 27..31 idle */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lane_map),
      cmocka_unit_test(test_q8b_rows),
      cmocka_unit_test(test_q4b_rows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
