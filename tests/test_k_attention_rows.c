/* test_k_attention_rows.c — the batched attention kernels (attention_rows.c:
 * rope_append_rows, attention_rows) against their references, and each row
 * against the one-sequence kernels on its slot.
 *
 * The rows mix what a batched step holds: a packed prompt (one slot,
 * positions 0..4, each row seeing the earlier ones through the cache),
 * decode rows of other slots (one at the last position, one crossing a key
 * tile), a second row of a slot, and padding (slot -1, and a slot past the
 * caches). Caches are random everywhere, so a row that reads another slot
 * or a position past its own fails. Tolerance (normalised error, the
 * references in double): 1e-5 for f32, 1e-2 for bf16. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kcommon.h"
#include "kernels/warp_gpu.h"
#include "ktest.h"
#include "ot_test.h"

enum { NS = 3, P = 90, T = 11 };
static const int32_t rows_tab[T][2] = {{1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {0, 70}, {-1, 0},
                                       {2, 89}, {0, 71},  {5, 3},  {2, 33}};

static int valid(int t) { return rows_tab[t][0] >= 0 && rows_tab[t][0] < NS; }

/* Row t of a host view [T, ...] as a one-row view. */
static ot_kview row_of(ot_kview v, int64_t t) {
  v.p = (char *)v.p + ot_dtype_bytes(v.dt, t * v.nb[0]);
  v.ne[0] = 1;
  return v;
}

/* Slot s of a host cache view [NS, P, KV, D] as [P, KV, D]. */
static ot_kview slot_of(ot_kview c, int64_t s) {
  ot_kview v = ot_kview_3d((char *)c.p + ot_dtype_bytes(c.dt, s * c.nb[0]), c.dt, c.ne[1], c.ne[2], c.ne[3]);
  return v;
}

static void run(int64_t H, int64_t KV, int64_t D, int64_t window, ot_dtype cdt, ot_dtype odt, uint64_t seed) {
  const int dev = ot_test_dev();
  const int64_t cn = NS * P * KV * D;
  ot_tbuf Kc = ot_tbuf_rand(cdt, cn, seed, -1, 1), Vc = ot_tbuf_rand(cdt, cn, seed + 1, -1, 1);
  ot_tbuf K = ot_tbuf_rand(OT_F32, T * KV * D, seed + 2, -1, 1), V = ot_tbuf_rand(OT_F32, T * KV * D, seed + 3, -1, 1);
  ot_tbuf Q = ot_tbuf_rand(OT_F32, T * H * D, seed + 4, -2, 2), O = ot_tbuf_rand(odt, T * H * D, seed + 5, -1, 1);
  ot_tbuf R = ot_tbuf_rand(OT_I32, 2 * T, seed + 6, 0, 1);
  memcpy(R.h, rows_tab, sizeof rows_tab);
  ot_tbuf_push(&R);
  const int64_t sc[4] = {NS, P, KV, D};
  ot_kview kc = ot_tview(&Kc, 0, 4, sc, NULL), vc = ot_tview(&Vc, 0, 4, sc, NULL);
  ot_kview k = ot_tview(&K, 0, 3, (int64_t[]){T, KV, D}, NULL), v = ot_tview(&V, 0, 3, (int64_t[]){T, KV, D}, NULL);
  ot_kview q = ot_tview(&Q, 0, 3, (int64_t[]){T, H, D}, NULL), o = ot_tview(&O, 0, 3, (int64_t[]){T, H, D}, NULL);
  ot_kview r = ot_tview(&R, 0, 2, (int64_t[]){T, 2}, NULL);
  const ot_rope rope = ot_rope_plain(10000.0f);
  char what[160];
  snprintf(what, sizeof what, "rows H%lld KV%lld D%lld window %lld cache %s out %s", (long long)H, (long long)KV,
           (long long)D, (long long)window, ot_dtype_name(cdt), ot_dtype_name(odt));

  /* rope + append: q, k rotated per row, the caches changed only at the valid rows' (slot, position) */
  OT_ASSERT_OK(ot_ref_rope_append_rows(q, k, v, kc, vc, r, rope));
  OT_ASSERT_OK(ot_k_rope_append_rows(dev, ot_tview_dev(q, &Q), ot_tview_dev(k, &K), ot_tview_dev(v, &V),
                                     ot_tview_dev(kc, &Kc), ot_tview_dev(vc, &Vc), ot_tview_dev(r, &R), rope));
  ot_tcheck(what, &Q, q, 1e-5);
  ot_tcheck(what, &K, k, 1e-5);
  ot_tcheck(what, &Kc, kc, cdt == OT_F32 ? 1e-5 : 1e-2);
  ot_tcheck(what, &Vc, vc, 0); /* v is copied: exact */

  /* attention from the kernel's caches and q on both sides */
  ot_test_download(Kc.h, Kc.d, Kc.bytes);
  ot_test_download(Vc.h, Vc.d, Vc.bytes);
  ot_test_download(Q.h, Q.d, Q.bytes);
  OT_ASSERT_OK(ot_ref_attention_rows(o, q, kc, vc, r, window));
  ot_status s = ot_k_attention_rows(dev, ot_tview_dev(o, &O), ot_tview_dev(q, &Q), ot_tview_dev(kc, &Kc),
                                    ot_tview_dev(vc, &Vc), ot_tview_dev(r, &R), window);
  if (s != OT_OK) fail_msg("%s: %s", what, ot_last_error());
  ot_tcheck(what, &O, o, odt == OT_F32 ? 1e-5 : 1e-2);

  /* each valid row bitwise the one-sequence kernel's on its slot: the
   * portable loop's (every device but an NVIDIA GPU), or on a GPU the warp
   * kernel's, which both take there (its f32 output, rounded to out's dtype
   * as the rows kernel stores it) */
  ot_tbuf O1 = ot_tbuf_rand(odt, H * D, seed + 7, -1, 1), O1f = ot_tbuf_rand(OT_F32, H * D, seed + 8, -1, 1);
  float *got = malloc((size_t)O.bytes), *one = malloc((size_t)O1f.bytes);
  char *rounded = malloc((size_t)O1.bytes);
  ot_test_download(got, O.d, O.bytes);
  for (int t = 0; t < T; t++) {
    const int64_t pos = rows_tab[t][1];
    if (!valid(t)) { /* padding: zero output */
      for (int64_t i = 0; i < H * D; i++)
        if (ot_kld(odt, got, t * H * D + i) != 0.0f) fail_msg("%s: padding row %d has output", what, t);
      continue;
    }
    const ot_kview kd = ot_tview_dev(slot_of(kc, rows_tab[t][0]), &Kc);
    if (ot_kfast_gpu(dev) && ot_kattn_gpu_ok(kd.dt, kd.p, kd.nb[0], kd.nb[1], D)) {
      ot_kview o1 = ot_tview(&O1f, 0, 3, (int64_t[]){1, H, D}, NULL);
      OT_ASSERT_OK(ot_k_attention_window(dev, ot_tview_dev(o1, &O1f), ot_tview_dev(row_of(q, t), &Q), kd,
                                         ot_tview_dev(slot_of(vc, rows_tab[t][0]), &Vc), pos, window));
      ot_test_download(one, O1f.d, O1f.bytes);
      for (int64_t i = 0; i < H * D; i++) ot_kst(odt, rounded, i, one[i]);
      if (memcmp((char *)got + ot_dtype_bytes(odt, t * H * D), rounded, (size_t)O1.bytes))
        fail_msg("%s: row %d (slot %d, position %lld) is not bitwise the one-sequence warp kernel's", what, t,
                 rows_tab[t][0], (long long)pos);
      continue;
    }
    ot_kview o1 = ot_tview(&O1, 0, 3, (int64_t[]){1, H, D}, NULL);
    OT_ASSERT_OK(ot_k_attention_window(dev, ot_tview_dev(o1, &O1), ot_tview_dev(row_of(q, t), &Q), kd,
                                       ot_tview_dev(slot_of(vc, rows_tab[t][0]), &Vc), pos, window));
    ot_test_download(one, O1.d, O1.bytes);
    if (memcmp((char *)got + ot_dtype_bytes(odt, t * H * D), one, (size_t)O1.bytes))
      fail_msg("%s: row %d (slot %d, position %lld) is not bitwise the one-sequence kernel's", what, t, rows_tab[t][0],
               (long long)pos);
  }
  free(got);
  free(one);
  free(rounded);
  ot_tbuf_free(&O1);
  ot_tbuf_free(&O1f);
  ot_tbuf_free(&Kc); ot_tbuf_free(&Vc); ot_tbuf_free(&K); ot_tbuf_free(&V); ot_tbuf_free(&Q); ot_tbuf_free(&O);
  ot_tbuf_free(&R);
}

static void test_rows(void **st) {
  (void)st;
  run(4, 2, 32, 0, OT_F32, OT_F32, 1);
  run(8, 1, 64, 0, OT_F32, OT_F32, 2);   /* MQA */
  run(4, 4, 16, 5, OT_F32, OT_F32, 3);   /* a window shorter than the prompt's and the decode rows' reach */
  run(6, 3, 64, 40, OT_BF16, OT_F32, 4); /* bf16 caches; the window cuts row 5's two tiles */
  run(4, 2, 32, 0, OT_F32, OT_BF16, 5);  /* a bf16 o_proj input */
}

/* One row of rope_append_rows against ot_k_rope_append at its position on
 * its slot: bitwise the same q, k and cache rows. */
static void test_rope_bitwise(void **st) {
  (void)st;
  const int dev = ot_test_dev();
  const int64_t H = 4, KV = 2, D = 32, cn = NS * P * KV * D;
  ot_tbuf Kc = ot_tbuf_rand(OT_F32, cn, 20, -1, 1), Vc = ot_tbuf_rand(OT_F32, cn, 21, -1, 1);
  ot_tbuf K = ot_tbuf_rand(OT_F32, T * KV * D, 22, -1, 1), V = ot_tbuf_rand(OT_F32, T * KV * D, 23, -1, 1);
  ot_tbuf Q = ot_tbuf_rand(OT_F32, T * H * D, 24, -2, 2), R = ot_tbuf_rand(OT_I32, 2 * T, 25, 0, 1);
  memcpy(R.h, rows_tab, sizeof rows_tab);
  ot_tbuf_push(&R);
  /* a second copy of every buffer for the one-row kernel */
  ot_tbuf Kc2 = ot_tbuf_rand(OT_F32, cn, 20, -1, 1), Vc2 = ot_tbuf_rand(OT_F32, cn, 21, -1, 1);
  ot_tbuf K2 = ot_tbuf_rand(OT_F32, T * KV * D, 22, -1, 1), Q2 = ot_tbuf_rand(OT_F32, T * H * D, 24, -2, 2);
  const int64_t sc[4] = {NS, P, KV, D};
  ot_kview kc = ot_tview(&Kc, 0, 4, sc, NULL), vc = ot_tview(&Vc, 0, 4, sc, NULL);
  ot_kview kc2 = ot_tview(&Kc2, 0, 4, sc, NULL), vc2 = ot_tview(&Vc2, 0, 4, sc, NULL);
  ot_kview k = ot_tview(&K, 0, 3, (int64_t[]){T, KV, D}, NULL), v = ot_tview(&V, 0, 3, (int64_t[]){T, KV, D}, NULL);
  ot_kview q = ot_tview(&Q, 0, 3, (int64_t[]){T, H, D}, NULL), r = ot_tview(&R, 0, 2, (int64_t[]){T, 2}, NULL);
  ot_kview k2 = ot_tview(&K2, 0, 3, (int64_t[]){T, KV, D}, NULL), q2 = ot_tview(&Q2, 0, 3, (int64_t[]){T, H, D}, NULL);
  const ot_rope rope = ot_rope_plain(500000.0f);
  OT_ASSERT_OK(ot_k_rope_append_rows(dev, ot_tview_dev(q, &Q), ot_tview_dev(k, &K), ot_tview_dev(v, &V),
                                     ot_tview_dev(kc, &Kc), ot_tview_dev(vc, &Vc), ot_tview_dev(r, &R), rope));
  for (int t = 0; t < T; t++) {
    if (!valid(t)) continue;
    const int s = rows_tab[t][0];
    OT_ASSERT_OK(ot_k_rope_append(dev, ot_tview_dev(row_of(q2, t), &Q2), ot_tview_dev(row_of(k2, t), &K2),
                                  ot_tview_dev(row_of(v, t), &V), ot_tview_dev(slot_of(kc2, s), &Kc2),
                                  ot_tview_dev(slot_of(vc2, s), &Vc2), rows_tab[t][1], rope));
  }
  const ot_tbuf *a[4] = {&Q, &K, &Kc, &Vc}, *b[4] = {&Q2, &K2, &Kc2, &Vc2};
  static const char *names[4] = {"q", "k", "k cache", "v cache"};
  for (int i = 0; i < 4; i++) {
    void *x = malloc(a[i]->bytes), *y = malloc(b[i]->bytes);
    ot_test_download(x, a[i]->d, a[i]->bytes);
    ot_test_download(y, b[i]->d, b[i]->bytes);
    if (memcmp(x, y, a[i]->bytes)) fail_msg("rope_append_rows: %s is not bitwise rope_append's per row", names[i]);
    free(x);
    free(y);
  }
  ot_tbuf *all[9] = {&Kc, &Vc, &K, &V, &Q, &R, &Kc2, &Vc2, &K2};
  for (int i = 0; i < 9; i++) ot_tbuf_free(all[i]);
  ot_tbuf_free(&Q2);
}

static void test_errors(void **st) {
  (void)st;
  float x[4096];
  int32_t rows[8] = {0};
  const int dev = ot_test_dev();
  ot_kview c4 = ot_kview_nd(x, OT_F32, 4, (int64_t[]){2, 4, 2, 8}), c3 = ot_kview_3d(x, OT_F32, 4, 2, 8);
  ot_kview q = ot_kview_3d(x, OT_F32, 2, 4, 8), k = ot_kview_3d(x, OT_F32, 2, 2, 8);
  ot_kview r = ot_kview_2d(rows, OT_I32, 2, 2), r3 = ot_kview_2d(rows, OT_I32, 3, 2), rf = ot_kview_2d(x, OT_F32, 2, 2);
  OT_ASSERT_FAILS(ot_k_attention_rows(dev, q, q, c3, c3, r, 0), OT_ERR_SHAPE, "k cache");
  OT_ASSERT_FAILS(ot_k_attention_rows(dev, q, q, c4, c4, r3, 0), OT_ERR_SHAPE, "must be i32 [2, 2]");
  OT_ASSERT_FAILS(ot_k_attention_rows(dev, q, q, c4, c4, rf, 0), OT_ERR_DTYPE, "rows");
  OT_ASSERT_FAILS(ot_k_attention_rows(dev, q, q, c4, c4, r, -1), OT_ERR_INVALID_ARG, "negative");
  OT_ASSERT_FAILS(ot_k_rope_append_rows(dev, q, k, k, c4, c3, r, ot_rope_plain(1e4f)), OT_ERR_SHAPE, "v cache");
  ot_rope dyn = ot_rope_plain(1e4f);
  dyn.type = OT_ROPE_DYNAMIC;
  OT_ASSERT_FAILS(ot_k_rope_append_rows(dev, q, k, k, c4, c4, r, dyn), OT_ERR_UNSUPPORTED, "dynamic RoPE");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rows), cmocka_unit_test(test_rope_bitwise),
                                     cmocka_unit_test(test_errors)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
