/* test_sched_movement.c — the transfer thread's queue (sched/movement.h):
 * write-backs queued one behind another go home as one batch (one wait
 * for all; on a GPU of a CUDA build, issued on the thread's own stream),
 * every byte in its place, whole copies and range lists alike, tickets
 * done in order; an injected transfer fault (OMPTENSOR_FAULT) inside a
 * batch fails the queue naming that write-back, and the others land;
 * write-backs queued under a plug wait for the unplug and go as one batch.
 *
 * The batch is made deterministic with the fault hook: it holds the
 * transfer thread inside the upload in front of the write-backs until they
 * are all queued. Runs on every build (the CPU builds batch too, with one
 * blocking copy per piece). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/fault.h"
#include "omptensor/memory.h"
#include "ot_test.h"
#include "sched/movement.h"

enum { ROWS = 40, ROW = 4096 };

/* The gate: the transfer thread waits in the hook until the test opens it. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open = 1;

static void hold_first(ot_fault_kind kind, unsigned long n) {
  if (kind != OT_FAULT_TRANSFER || n != 1) return;
  pthread_mutex_lock(&gate_mu);
  while (!gate_open) pthread_cond_wait(&gate_cv, &gate_mu);
  pthread_mutex_unlock(&gate_mu);
}

static void set_gate(int open) {
  pthread_mutex_lock(&gate_mu);
  gate_open = open;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
}

typedef struct rows {
  int dev;
  uint8_t *up;        /* host source of the upload in front */
  void *dup;          /* its device copy */
  void *drow[ROWS];   /* device rows, byte i of row r = (r * 31 + i) & 255 */
  uint8_t *home;      /* host homes [ROWS][ROW], zeroed */
} rows;

static void rows_make(rows *x) {
  x->dev = ot_test_dev();
  x->up = calloc(ROW, 1);
  x->home = calloc(ROWS, ROW);
  assert_non_null(x->up);
  assert_non_null(x->home);
  OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, x->dev, ROW, &x->dup));
  uint8_t pat[ROW];
  for (int r = 0; r < ROWS; r++) {
    for (int i = 0; i < ROW; i++) pat[i] = (uint8_t)((r * 31 + i) & 255);
    OT_ASSERT_OK(ot_mem_alloc(OT_MEM_DEVICE, x->dev, ROW, &x->drow[r]));
    OT_ASSERT_OK(ot_mem_copy(x->drow[r], x->dev, pat, OT_DEVICE_HOST, ROW));
  }
}

static void rows_free(rows *x) {
  for (int r = 0; r < ROWS; r++) ot_mem_free(OT_MEM_DEVICE, x->dev, x->drow[r]);
  ot_mem_free(OT_MEM_DEVICE, x->dev, x->dup);
  free(x->up);
  free(x->home);
}

/* Home row r after its write-back: mode 0 none, 1 whole, 2 the ranges
 * [0, 100) and [1000, 3000) (the device row's bytes there, 0 elsewhere). */
static void check_row(const rows *x, int r, int mode) {
  for (size_t i = 0; i < ROW; i++) {
    const int in = mode == 1 || (mode == 2 && (i < 100 || (i >= 1000 && i < 3000)));
    const uint8_t want = in ? (uint8_t)((r * 31 + i) & 255) : 0;
    if (x->home[(size_t)r * ROW + i] != want)
      fail_msg("row %d byte %zu is %u, expected %u", r, i, x->home[(size_t)r * ROW + i], want);
  }
}

/* The upload held at the gate, then ROWS write-backs queued behind it: the
 * odd rows whole, the even rows as two ranges. Returns the tickets' last. */
static uint64_t queue_rows(ot_movement *m, rows *x, uint64_t *tickets) {
  set_gate(0);
  ot_fault_set_hook(hold_first);
  ot_movement_upload(m, x->dup, x->up, ROW, "upload in front", NULL, NULL, (size_t)-1);
  for (int r = 0; r < ROWS; r++) {
    uint8_t *home = x->home + (size_t)r * ROW;
    if (r % 2) {
      tickets[r] = ot_movement_download(m, home, x->drow[r], ROW, "row", NULL, NULL, (size_t)-1);
    } else {
      const size_t rg[4] = {0, 100, 1000, 2000}; /* bytes [0, 100) and [1000, 3000) */
      tickets[r] = ot_movement_download_ranges(m, home, x->drow[r], rg, 2, ROW, "row ranges", NULL, (size_t)-1);
    }
  }
  for (int r = 1; r < ROWS; r++) assert_true(tickets[r] > tickets[r - 1]);
  set_gate(1);
  return tickets[ROWS - 1];
}

static void test_batch_lands(void **state) {
  (void)state;
  rows x;
  rows_make(&x);
  ot_movement *m = NULL;
  OT_ASSERT_OK(ot_movement_create(OT_MV_COPY, x.dev, 0, &m));
  OT_ASSERT_OK(ot_fault_configure(NULL)); /* counts from zero: the upload is transfer 1 */
  uint64_t t[ROWS];
  const uint64_t last = queue_rows(m, &x, t);
  OT_ASSERT_OK(ot_movement_wait(m, last));
  for (int r = 0; r < ROWS; r++) assert_true(ot_movement_done(m, t[r]));
  for (int r = 0; r < ROWS; r++) check_row(&x, r, r % 2 ? 1 : 2);
  /* all ROWS were queued before the thread left the upload: one batch */
  assert_int_equal(ot_movement_batched(m), ROWS);
  ot_fault_set_hook(NULL);
  ot_movement_destroy(m);
  rows_free(&x);
}

/* Transfer 1 is the upload; transfer 12 the 11th write-back (row 10). */
static void test_fault_in_batch(void **state) {
  (void)state;
  rows x;
  rows_make(&x);
  OT_ASSERT_OK(ot_fault_configure("transfer:12"));
  ot_movement *m = NULL;
  OT_ASSERT_OK(ot_movement_create(OT_MV_COPY, x.dev, 0, &m));
  uint64_t t[ROWS];
  const uint64_t last = queue_rows(m, &x, t);
  OT_ASSERT_FAILS(ot_movement_wait(m, last), OT_ERR_DEVICE, "injected");
  assert_non_null(strstr(ot_last_error(), "write-back of 'row ranges'"));
  for (int r = 0; r < ROWS; r++) check_row(&x, r, r == 10 ? 0 : r % 2 ? 1 : 2); /* all but row 10 landed */
  assert_int_equal(ot_movement_batched(m), ROWS);
  ot_fault_set_hook(NULL);
  OT_ASSERT_OK(ot_fault_configure(NULL));
  ot_movement_destroy(m);
  rows_free(&x);
}

/* Plugged, the thread leaves queued write-backs alone (none done 20 ms
 * after queuing, where an unplugged thread copies them in microseconds),
 * and unplugging lets it take all of them as one batch; a wait on a held
 * entry lifts the plug instead of waiting forever. */
static void test_plug_one_batch(void **state) {
  (void)state;
  rows x;
  rows_make(&x);
  ot_movement *m = NULL;
  OT_ASSERT_OK(ot_movement_create(OT_MV_COPY, x.dev, 0, &m));
  uint64_t t[ROWS];
  ot_movement_plug(m);
  for (int r = 0; r < ROWS; r++)
    t[r] = ot_movement_download(m, x.home + (size_t)r * ROW, x.drow[r], ROW, "row", NULL, NULL, (size_t)-1);
  const struct timespec ms20 = {0, 20 * 1000 * 1000};
  nanosleep(&ms20, NULL);
  for (int r = 0; r < ROWS; r++) assert_false(ot_movement_done(m, t[r]));
  check_row(&x, 0, 0);
  ot_movement_unplug(m);
  OT_ASSERT_OK(ot_movement_wait_all(m));
  for (int r = 0; r < ROWS; r++) check_row(&x, r, 1);
  assert_int_equal(ot_movement_batched(m), ROWS);
  /* a wait lifts the plug */
  memset(x.home, 0, ROW);
  ot_movement_plug(m);
  const uint64_t one = ot_movement_download(m, x.home, x.drow[0], ROW, "row", NULL, NULL, (size_t)-1);
  OT_ASSERT_OK(ot_movement_wait(m, one));
  check_row(&x, 0, 1);
  ot_movement_unplug(m); /* already lifted: nothing to do */
  ot_movement_destroy(m);
  rows_free(&x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_lands),
      cmocka_unit_test(test_fault_in_batch),
      cmocka_unit_test(test_plug_one_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
