/* verify.c — OMPTENSOR_VERIFY's level and the checksum (verify.h); the
 * checks themselves run on the transfer thread (movement.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "sched/verify.h"

static atomic_int level = -1; /* -1: not read yet */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void read_env(void) {
  int l = ot_env_choice("OMPTENSOR_VERIFY", 0); /* 0 | 1 | 2: the level itself (core/env.h) */
  int unset = -1;
  atomic_compare_exchange_strong(&level, &unset, l); /* a test's override wins */
}

int ot_verify_level(void) {
  pthread_once(&env_once, read_env);
  return atomic_load(&level);
}

void ot_verify_set_level(int l) {
  pthread_once(&env_once, read_env);
  atomic_store(&level, l < 0 ? 0 : l > 2 ? 2 : l);
}

static inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull

uint64_t ot_checksum64(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h[4] = {P1 + P2, P2, 0, (uint64_t)0 - P1};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; k++) {
      uint64_t w;
      memcpy(&w, b + i + 8 * (size_t)k, 8);
      h[k] = rotl(h[k] + w * P2, 31) * P1;
    }
  uint64_t r = (uint64_t)n * P3;
  for (int k = 0; k < 4; k++) r = rotl(r ^ h[k], 27) * P1 + P3;
  for (; i < n; i++) r = (r ^ b[i]) * 0x100000001B3ull; /* FNV-1a step for the tail */
  r ^= r >> 33;
  r *= P2;
  r ^= r >> 29;
  r *= P3;
  r ^= r >> 32;
  return r;
}
