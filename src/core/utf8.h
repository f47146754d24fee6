/* utf8.h (internal) — well-formed UTF-8, by Unicode's table 3-7.
 *
 * One definition for every place that checks text: the tokenizer's
 * decoders and byte tables, the stream's clean boundaries, the CLI's JSON
 * text, and the tests and fuzzers that check what they print. A lead byte
 * fixes the sequence's length and the range of its second byte (that range
 * is what rules out overlongs, surrogates and values past U+10FFFF); later
 * bytes are 80..BF. */
#ifndef OT_CORE_UTF8_H
#define OT_CORE_UTF8_H

#include <stddef.h>

/* Length of the sequence lead byte c starts (1 for ASCII; 0: c starts
 * none), and the range [*lo, *hi] of its second byte. */
static inline size_t ot_utf8_lead(unsigned c, unsigned *lo, unsigned *hi) {
  *lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
  *hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
  return c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
}

/* Bytes of the well-formed sequence at s[0 .. n) (n > 0); 0: none starts there. */
static inline size_t ot_utf8_len(const unsigned char *s, size_t n) {
  unsigned lo, hi;
  const size_t k = ot_utf8_lead(s[0], &lo, &hi);
  if (!k || k > n) return 0;
  for (size_t i = 1; i < k; i++, lo = 0x80, hi = 0xBF)
    if (s[i] < lo || s[i] > hi) return 0;
  return k;
}

/* Whether s[0 .. n) is well-formed UTF-8. */
static inline int ot_utf8_valid(const char *s, size_t n) {
  for (size_t i = 0, k; i < n; i += k)
    if (!(k = ot_utf8_len((const unsigned char *)s + i, n - i))) return 0;
  return 1;
}

#endif
