/* test_arena.c — best-fit allocation, coalescing, fragmentation, OOM messages,
 * checked against a byte map of which offsets are taken. */
#include <stdlib.h>
#include <string.h>

#include "ot_test.h"

static void best_fit_and_coalesce(void **state) {
  (void)state;
  ot_arena *a;
  OT_ASSERT_OK(ot_arena_create(4096, 256, &a));
  size_t o[8];
  for (int i = 0; i < 4; i++) OT_ASSERT_OK(ot_arena_alloc(a, 1000, &o[i])); /* 4 x 1024 */
  assert_int_equal(o[0], 0);
  assert_int_equal(o[3], 3072);
  OT_ASSERT_FAILS(ot_arena_alloc(a, 1, &o[4]), OT_ERR_DEVICE_OOM, "cannot allocate 1 bytes");
  OT_ASSERT_OK(ot_arena_free(a, o[1]));
  OT_ASSERT_OK(ot_arena_free(a, o[3]));
  /* two 1024 holes: a 1024 request can't make a 2048 one */
  OT_ASSERT_FAILS(ot_arena_alloc(a, 2048, &o[4]), OT_ERR_DEVICE_OOM, "largest free block 1024");
  OT_ASSERT_OK(ot_arena_free(a, o[2])); /* merges 1024..4096 into one block */
  ot_arena_stats s = ot_arena_get_stats(a);
  assert_int_equal(s.n_free_blocks, 1);
  assert_int_equal(s.largest_free, 3072);
  OT_ASSERT_OK(ot_arena_alloc(a, 3000, &o[4]));
  assert_int_equal(o[4], 1024);
  OT_ASSERT_FAILS(ot_arena_free(a, 17), OT_ERR_INVALID_ARG, "no live block");
  OT_ASSERT_OK(ot_arena_free(a, o[4]));
  OT_ASSERT_FAILS(ot_arena_free(a, o[4]), OT_ERR_INVALID_ARG, "double free");
  assert_int_equal(ot_arena_get_stats(a).peak, 4096);
  ot_arena_destroy(a);
}

static void best_fit_picks_smallest_hole(void **state) {
  (void)state;
  ot_arena *a;
  OT_ASSERT_OK(ot_arena_create(1 << 16, 256, &a));
  size_t big, s1, mid, s2, small, tail;
  OT_ASSERT_OK(ot_arena_alloc(a, 4096, &big));
  OT_ASSERT_OK(ot_arena_alloc(a, 256, &s1));
  OT_ASSERT_OK(ot_arena_alloc(a, 1024, &mid));
  OT_ASSERT_OK(ot_arena_alloc(a, 256, &s2));
  OT_ASSERT_OK(ot_arena_alloc(a, 512, &small));
  OT_ASSERT_OK(ot_arena_alloc(a, 256, &tail));
  OT_ASSERT_OK(ot_arena_free(a, big));
  OT_ASSERT_OK(ot_arena_free(a, mid));
  OT_ASSERT_OK(ot_arena_free(a, small));
  size_t got;
  OT_ASSERT_OK(ot_arena_alloc(a, 500, &got));
  assert_int_equal(got, small); /* the 512 hole, not the 1024 or 4096 one */
  OT_ASSERT_OK(ot_arena_alloc(a, 600, &got));
  assert_int_equal(got, mid);
  ot_arena_destroy(a);
}

/* Random alloc/free against a byte map: blocks never overlap, stay in range
 * and aligned, `used` matches, and after freeing everything one block is left. */
static void random_fragmentation(void **state) {
  (void)state;
  enum { CAP = 1 << 20, ALIGN = 256, SLOTS = 64 };
  ot_arena *a;
  OT_ASSERT_OK(ot_arena_create(CAP, ALIGN, &a));
  unsigned char *map = calloc(CAP, 1);
  size_t off[SLOTS], sz[SLOTS];
  int live[SLOTS] = {0};
  uint64_t rng = 42;
  for (int step = 0; step < 20000; step++) {
    int i = (int)(ot_test_rand_u64(&rng) % SLOTS);
    if (live[i]) {
      OT_ASSERT_OK(ot_arena_free(a, off[i]));
      memset(map + off[i], 0, sz[i]);
      live[i] = 0;
    } else {
      size_t want = 1 + ot_test_rand_u64(&rng) % (CAP / 16);
      ot_arena_stats before = ot_arena_get_stats(a);
      ot_status s = ot_arena_alloc(a, want, &off[i]);
      size_t rounded = (want + ALIGN - 1) / ALIGN * ALIGN;
      if (s != OT_OK) {
        assert_int_equal(s, OT_ERR_DEVICE_OOM);
        assert_true(before.largest_free < rounded); /* refused only when truly no hole fits */
        continue;
      }
      sz[i] = ot_arena_block_size(a, off[i]);
      assert_int_equal(sz[i], rounded);
      assert_int_equal(off[i] % ALIGN, 0);
      assert_true(off[i] + sz[i] <= CAP);
      for (size_t k = off[i]; k < off[i] + sz[i]; k++) assert_int_equal(map[k], 0);
      memset(map + off[i], 1, sz[i]);
      live[i] = 1;
    }
    size_t used = 0;
    for (int k = 0; k < SLOTS; k++) used += live[k] ? sz[k] : 0;
    assert_int_equal(ot_arena_get_stats(a).used, used);
  }
  for (int k = 0; k < SLOTS; k++)
    if (live[k]) OT_ASSERT_OK(ot_arena_free(a, off[k]));
  ot_arena_stats s = ot_arena_get_stats(a);
  assert_int_equal(s.n_free_blocks, 1);
  assert_int_equal(s.largest_free, CAP);
  free(map);
  ot_arena_destroy(a);
}

static void bad_args(void **state) {
  (void)state;
  ot_arena *a = NULL;
  OT_ASSERT_FAILS(ot_arena_create(4096, 100, &a), OT_ERR_INVALID_ARG, "power of two");
  assert_null(a);
  OT_ASSERT_OK(ot_arena_create(0, 256, &a));
  size_t o;
  OT_ASSERT_FAILS(ot_arena_alloc(a, 1, &o), OT_ERR_DEVICE_OOM, "0 of 0 bytes free");
  OT_ASSERT_FAILS(ot_arena_alloc(a, SIZE_MAX, &o), OT_ERR_DEVICE_OOM, "overflows");
  ot_arena_destroy(a);
  ot_arena_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(best_fit_and_coalesce),
      cmocka_unit_test(best_fit_picks_smallest_hole),
      cmocka_unit_test(random_fragmentation),
      cmocka_unit_test(bad_args),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
