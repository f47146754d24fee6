/* test_core_vec.c — ot_grow (core/vec.h), the growth of every array the
 * library appends to: a capacity that suffices is left alone, growth
 * doubles (from 16) and keeps the contents, sizes that overflow fail with a
 * message naming the array and leave it as it was. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/vec.h"
#include "ot_test.h"

static void grows_by_doubling(void **state) {
  (void)state;
  int *a = NULL, cap = 0;
  OT_ASSERT_OK(ot_grow((void **)&a, &cap, 0, sizeof *a, "ints"));
  assert_null(a);
  assert_int_equal(cap, 0);
  OT_ASSERT_OK(ot_grow((void **)&a, &cap, 1, sizeof *a, "ints"));
  assert_non_null(a);
  assert_int_equal(cap, 16);
  for (int i = 0; i < 16; i++) a[i] = i;
  int *before = a;
  OT_ASSERT_OK(ot_grow((void **)&a, &cap, 16, sizeof *a, "ints")); /* enough already */
  assert_ptr_equal(a, before);
  assert_int_equal(cap, 16);
  OT_ASSERT_OK(ot_grow((void **)&a, &cap, 17, sizeof *a, "ints"));
  assert_int_equal(cap, 32);
  OT_ASSERT_OK(ot_grow((void **)&a, &cap, 100, sizeof *a, "ints")); /* several doublings at once */
  assert_int_equal(cap, 128);
  for (int i = 0; i < 16; i++) assert_int_equal(a[i], i);
  free(a);
}

static void overflow_fails_and_keeps(void **state) {
  (void)state;
  char *a = NULL;
  int cap = 0;
  OT_ASSERT_OK(ot_grow((void **)&a, &cap, 4, 1, "bytes"));
  a[0] = 'x';
  char *before = a;
  OT_ASSERT_FAILS(ot_grow((void **)&a, &cap, INT_MAX, SIZE_MAX / 4, "huge things"), OT_ERR_OUT_OF_MEMORY,
                  "huge things");
  OT_ASSERT_FAILS(ot_grow((void **)&a, &cap, -1, 1, "negative things"), OT_ERR_OUT_OF_MEMORY, "negative things");
  assert_ptr_equal(a, before);
  assert_int_equal(cap, 16);
  assert_int_equal(a[0], 'x');
  free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(grows_by_doubling),
      cmocka_unit_test(overflow_fails_and_keeps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
