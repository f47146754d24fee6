/* test_tensor.c — creation, views (slice, reshape, transpose) and strides,
 * checked against index arithmetic done by hand. */
#include <stdlib.h>
#include <string.h>

#include "ot_test.h"

static int setup(void **state) {
  ot_ctx_opts o = ot_ctx_opts_default();
  o.backend = OT_BACKEND_HOST;
  ot_ctx *ctx;
  if (ot_ctx_create(&o, &ctx) != OT_OK) return -1;
  *state = ctx;
  return 0;
}

static int teardown(void **state) {
  ot_ctx_destroy(*state);
  return 0;
}

static void create_and_strides(void **state) {
  ot_ctx *ctx = *state;
  ot_tensor *t;
  int64_t shape[3] = {2, 3, 5};
  OT_ASSERT_OK(ot_tensor_create(ctx, "x", OT_F32, 3, shape, &t));
  assert_string_equal(ot_tensor_name(t), "x");
  assert_int_equal(ot_tensor_numel(t), 30);
  assert_int_equal(ot_tensor_nbytes(t), 120);
  assert_int_equal(ot_tensor_stride(t, 0), 15);
  assert_int_equal(ot_tensor_stride(t, 1), 5);
  assert_int_equal(ot_tensor_stride(t, 2), 1);
  assert_int_equal(ot_tensor_dim(t, 3), 1);
  assert_true(ot_tensor_is_contiguous(t));
  float *d = ot_tensor_data(t);
  for (int i = 0; i < 30; i++) assert_true(d[i] == 0.0f); /* zero-initialised */
  ot_tensor_destroy(t);
}

static void views_share_storage(void **state) {
  ot_ctx *ctx = *state;
  ot_tensor *t, *s, *tr, *r;
  int64_t shape[2] = {4, 6};
  OT_ASSERT_OK(ot_tensor_create(ctx, "m", OT_F32, 2, shape, &t));
  float v[24];
  for (int i = 0; i < 24; i++) v[i] = (float)i;
  OT_ASSERT_OK(ot_tensor_write_f32(t, v, 24));

  /* columns 2..5 of every row: strides stay {6,1}, offset 2 */
  OT_ASSERT_OK(ot_tensor_slice(t, 1, 2, 3, &s));
  assert_true(ot_tensor_same_storage(s, t));
  assert_false(ot_tensor_is_contiguous(s));
  assert_int_equal(ot_tensor_offset(s), 2);
  float out[12];
  OT_ASSERT_OK(ot_tensor_read_f32(s, out, 12));
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) assert_true(out[i * 3 + j] == (float)(i * 6 + 2 + j));

  /* transpose of the slice: [3,4] with strides {1,6} */
  OT_ASSERT_OK(ot_tensor_transpose(s, 0, 1, &tr));
  assert_int_equal(ot_tensor_dim(tr, 0), 3);
  assert_int_equal(ot_tensor_stride(tr, 0), 1);
  assert_int_equal(ot_tensor_stride(tr, 1), 6);
  OT_ASSERT_OK(ot_tensor_read_f32(tr, out, 12));
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) assert_true(out[i * 4 + j] == (float)(j * 6 + 2 + i));

  /* writing through a view changes the base */
  float neg[12];
  for (int i = 0; i < 12; i++) neg[i] = -1.0f - (float)i;
  OT_ASSERT_OK(ot_tensor_write_f32(tr, neg, 12));
  const float *base = ot_tensor_data(t);
  assert_true(base[0 * 6 + 2] == -1.0f); /* tr[0][0] */
  assert_true(base[1 * 6 + 2] == -2.0f); /* tr[0][1] */
  assert_true(base[0] == 0.0f && base[1] == 1.0f);  /* outside the view untouched */

  /* reshape needs contiguity */
  int64_t flat[1] = {24};
  OT_ASSERT_FAILS(ot_tensor_reshape(s, 1, flat, &r), OT_ERR_SHAPE, "not contiguous");
  int64_t bad[2] = {5, 5};
  OT_ASSERT_FAILS(ot_tensor_reshape(t, 2, bad, &r), OT_ERR_SHAPE, "24 elements into a shape of 25");
  int64_t three[3] = {2, 2, 6};
  OT_ASSERT_OK(ot_tensor_reshape(t, 3, three, &r));
  assert_int_equal(ot_tensor_stride(r, 0), 12);

  /* the storage outlives the base tensor while views exist */
  ot_tensor_destroy(t);
  OT_ASSERT_OK(ot_tensor_read_f32(r, v, 24));
  assert_true(v[2] == -1.0f);
  ot_tensor_destroy(s);
  ot_tensor_destroy(tr);
  ot_tensor_destroy(r);
}

static void half_and_q8b_views(void **state) {
  ot_ctx *ctx = *state;
  ot_tensor *t, *row;
  int64_t shape[2] = {3, 64};
  OT_ASSERT_OK(ot_tensor_create(ctx, "q", OT_Q8B, 2, shape, &t));
  assert_int_equal(ot_tensor_nbytes(t), 3 * 2 * sizeof(ot_q8b_block));
  OT_ASSERT_FAILS(ot_tensor_slice(t, 1, 16, 32, &row), OT_ERR_SHAPE, "split a block");
  OT_ASSERT_OK(ot_tensor_slice(t, 0, 1, 1, &row));
  float v[64];
  ot_test_fill_uniform(v, 64, 3, -1, 1);
  OT_ASSERT_OK(ot_tensor_write_f32(row, v, 64));
  /* row 1 starts 2 blocks into the storage */
  const ot_q8b_block *b = ot_tensor_data(t);
  assert_true(b[0].scale == 0.0f && b[2].scale > 0.0f);
  ot_tensor_destroy(row);
  ot_tensor_destroy(t);

  int64_t odd[1] = {33};
  OT_ASSERT_FAILS(ot_tensor_create(ctx, "q2", OT_Q8B, 1, odd, &t), OT_ERR_SHAPE, "multiple of 32");
  OT_ASSERT_OK(ot_tensor_create(ctx, "h", OT_BF16, 1, odd, &t));
  float w[33], back[33];
  ot_test_fill_uniform(w, 33, 5, -100, 100);
  OT_ASSERT_OK(ot_tensor_write_f32(t, w, 33));
  OT_ASSERT_OK(ot_tensor_read_f32(t, back, 33));
  for (int i = 0; i < 33; i++) assert_true(back[i] == ot_bf16_to_f32(ot_f32_to_bf16(w[i])));
  ot_tensor_destroy(t);
}

static void bad_shapes(void **state) {
  ot_ctx *ctx = *state;
  ot_tensor *t = (ot_tensor *)1;
  int64_t five[5] = {1, 1, 1, 1, 1}, neg[2] = {2, -3};
  OT_ASSERT_FAILS(ot_tensor_create(ctx, "a", OT_F32, 5, five, &t), OT_ERR_SHAPE, "'a': 5 dims");
  assert_null(t);
  OT_ASSERT_FAILS(ot_tensor_create(ctx, "b", OT_F32, 2, neg, &t), OT_ERR_SHAPE, "dim 1 is negative");
  int64_t huge[4] = {1ll << 40, 1ll << 40, 1, 1};
  OT_ASSERT_FAILS(ot_tensor_create(ctx, "c", OT_F32, 4, huge, &t), OT_ERR_SHAPE, "overflows");
  int64_t ok[2] = {2, 2};
  OT_ASSERT_OK(ot_tensor_create(ctx, "d", OT_F32, 2, ok, &t));
  ot_tensor *v;
  OT_ASSERT_FAILS(ot_tensor_slice(t, 0, 1, 2, &v), OT_ERR_SHAPE, "outside dim 0 of size 2");
  OT_ASSERT_FAILS(ot_tensor_transpose(t, 0, 2, &v), OT_ERR_SHAPE, "out of range");
  float buf[3];
  OT_ASSERT_FAILS(ot_tensor_read_f32(t, buf, 3), OT_ERR_SHAPE, "has 4 elements, buffer 3");
  ot_tensor_destroy(t);
  ot_tensor_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(create_and_strides),
      cmocka_unit_test(views_share_storage),
      cmocka_unit_test(half_and_q8b_views),
      cmocka_unit_test(bad_shapes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
