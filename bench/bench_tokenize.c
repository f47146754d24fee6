/* bench_tokenize.c — tokenizing text with tokenizer.json (issue 17, "Show"):
 * one thread, the same text and tokenizer as bench/tokenize_peer.py (HF
 * `tokenizers`), which bench/tokenize.sh runs in the same call.
 *
 *   bench_tokenize TOKENIZER_DIR TEXT_FILE [REPEATS]
 *
 * Prints one JSON line: bytes, ids, the best of REPEATS (default 5) encode
 * times, MB/s, and a checksum of the ids (the sum) to compare with the peer. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"
#include "omptensor/file.h"
#include "omptensor/tokenizer.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_tokenize TOKENIZER_DIR TEXT_FILE [REPEATS]\n");
    return 2;
  }
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  if (reps < 1) reps = 1;
  ot_tokenizer *tk;
  char *text;
  size_t len;
  if (ot_tokenizer_load(argv[1], &tk) != OT_OK || ot_file_read(argv[2], 1u << 30, &text, &len) != OT_OK) {
    fprintf(stderr, "bench_tokenize: %s\n", ot_last_error());
    return 1;
  }
  double best = 1e30;
  size_t n = 0;
  long long sum = 0;
  for (int r = 0; r < reps; r++) {
    int32_t *ids;
    double t0 = bc_now();
    if (ot_tokenizer_encode(tk, text, len, 0, &ids, &n) != OT_OK) {
      fprintf(stderr, "bench_tokenize: %s\n", ot_last_error());
      return 1;
    }
    double t = bc_now() - t0;
    if (t < best) best = t;
    sum = 0;
    for (size_t i = 0; i < n; i++) sum += ids[i];
    free(ids);
  }
  printf("{\"impl\":\"omptensor\",\"bytes\":%zu,\"ids\":%zu,\"seconds\":%.6f,\"mb_per_s\":%.2f,\"id_sum\":%lld}\n", len, n,
         best, (double)len / best / 1e6, sum);
  free(text);
  ot_tokenizer_destroy(tk);
  return 0;
}
