/* fuzz_common.h — shared bits of the libFuzzer targets (issue 8).
 *
 * Every target feeds one parser a buffer straight from libFuzzer; a parser
 * that returns an error is fine, a crash, a sanitizer report or a leak is
 * not. Inputs are copied into an exact-size heap block (no terminating NUL)
 * so that AddressSanitizer catches any read past the end. */
#ifndef OT_FUZZ_COMMON_H
#define OT_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A malloc'd copy of data[0..size) with no terminator. */
static inline char *ot_fuzz_copy(const uint8_t *data, size_t size) {
  char *p = malloc(size ? size : 1); /* never NULL for size 0: parsers get a valid pointer */
  if (p) memcpy(p, data, size);
  return p;
}

/* A malloc'd NUL-terminated string of data[0..size) (for C-string APIs). */
static inline char *ot_fuzz_cstr(const uint8_t *data, size_t size) {
  char *p = malloc(size + 1);
  if (!p) return NULL;
  memcpy(p, data, size);
  p[size] = 0;
  return p;
}

#endif
