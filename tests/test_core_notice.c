/* test_core_notice.c — the library's notices (status.h): once per key, to
 * the handler a program installs (the omptensor command holds them back so
 * that bad input gets one line), and on stderr again once it is removed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/error.h"
#include "omptensor/status.h"

static char got[8][512];
static int n_got;

static void take(void *user, const char *m) {
  assert_ptr_equal(user, got);
  if (n_got < 8) snprintf(got[n_got++], sizeof got[0], "%s", m);
}

static void once_per_key_to_the_handler(void **state) {
  (void)state;
  ot_set_notice_handler(take, got);
  ot_warn_once("test-a", "first %d", 1);
  ot_warn_once("test-a", "first again %d", 2); /* the same key: not again */
  ot_warn_once("test-b", "second: %s", "a string");
  assert_int_equal(n_got, 2);
  assert_string_equal(got[0], "first 1"); /* the message alone: the program chooses its prefix */
  assert_string_equal(got[1], "second: a string");
  /* a message of any length arrives cut, not overflowing */
  char big[2000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ot_warn_once("test-c", "%s", big);
  assert_int_equal(n_got, 3);
  assert_true(strlen(got[2]) > 400);
  /* removed: the default (stderr) again, the handler hears nothing */
  ot_set_notice_handler(NULL, NULL);
  ot_warn_once("test-d", "on stderr (expected in this test's output)");
  assert_int_equal(n_got, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(once_per_key_to_the_handler)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
