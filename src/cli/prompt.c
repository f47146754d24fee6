/* prompt.c — prompts: token ids from "1,2,3" or a file holding them, text
 * from a file or stdin. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prompt.h"
#include "omptensor/file.h"

/* The list's separators: commas and ASCII whitespace. */
static int is_sep(unsigned char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Fails on the token that starts at text[at], quoted (at most 20 bytes of
 * it, unprintable ones as \xHH), giving the byte offset of what is wrong in it. */
static ot_status bad_token(const char *text, size_t len, size_t at, size_t off, const char *label, const char *why) {
  char shown[96];
  size_t k = 0, i = at;
  for (; i < len && i < at + 20 && !is_sep((unsigned char)text[i]); i++) {
    unsigned char c = (unsigned char)text[i];
    if (c < 0x20 || c >= 0x7f) k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", c);
    else shown[k++] = (char)c;
  }
  if (i < len && i == at + 20 && !is_sep((unsigned char)text[i])) memcpy(shown + k, "...", 3), k += 3;
  shown[k] = '\0';
  return ot_set_error(OT_ERR_INVALID_ARG, "%s: '%s' at byte offset %zu is not a token id (%s)", label, shown, off, why);
}

ot_status ot_cli_parse_ids(const char *text, size_t len, const char *label, int32_t **ids, int *n) {
  *ids = NULL;
  *n = 0;
  int cap = 0;
  size_t i = 0;
  ot_status st = OT_OK;
  while (st == OT_OK) {
    while (i < len && is_sep((unsigned char)text[i])) i++;
    if (i == len) break;
    size_t at = i;
    int64_t v = 0;
    for (; i < len && is_digit((unsigned char)text[i]) && v <= INT32_MAX; i++) v = v * 10 + (text[i] - '0');
    if (v > INT32_MAX) {
      st = bad_token(text, len, at, at, label, "larger than 2147483647");
      break;
    }
    if (i < len && !is_sep((unsigned char)text[i])) { /* a byte that is neither a digit nor a separator */
      st = bad_token(text, len, at, i, label, "ids are decimal integers from 0, separated by commas or whitespace");
      break;
    }
    if (*n == cap) {
      cap = cap ? 2 * cap : 64;
      int32_t *g = realloc(*ids, (size_t)cap * sizeof *g);
      if (!g) {
        st = ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory for the prompt", label);
        break;
      }
      *ids = g;
    }
    (*ids)[(*n)++] = (int32_t)v;
  }
  if (st == OT_OK && *n == 0) st = ot_set_error(OT_ERR_INVALID_ARG, "%s: no token ids", label);
  if (st != OT_OK) {
    free(*ids);
    *ids = NULL;
    *n = 0;
  }
  return st;
}


ot_status ot_cli_read_ids_file(const char *path, int32_t **ids, int *n) {
  *ids = NULL;
  *n = 0;
  char *buf;
  size_t len;
  /* the library's checked read: a regular file only (a FIFO would block),
   * whole by its length (a NUL byte is a byte, refused by the parser); "-"
   * is stdin, read to its end */
  OT_TRY(ot_cli_read_text(path, OT_CLI_PROMPT_MAX, &buf, &len));
  ot_status s = ot_cli_parse_ids(buf, len, strcmp(path, "-") ? path : "stdin", ids, n);
  free(buf);
  return s;
}

ot_status ot_cli_read_text(const char *path, size_t max_bytes, char **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  if (strcmp(path, "-") != 0) return ot_file_read(path, max_bytes, buf, len);
  /* stdin: a pipe or a terminal, read to its end */
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap + 1);
  if (!b) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "stdin: no memory for the text");
  for (;;) {
    if (n == cap) {
      if (cap >= max_bytes) {
        free(b);
        return ot_set_error(OT_ERR_INVALID_ARG, "stdin: the text is longer than %zu MiB", max_bytes >> 20);
      }
      char *g = realloc(b, 2 * cap + 1);
      if (!g) return free(b), ot_set_error(OT_ERR_OUT_OF_MEMORY, "stdin: no memory for the text");
      b = g;
      cap *= 2;
    }
    size_t k = fread(b + n, 1, cap - n, stdin);
    n += k;
    if (k == 0) break;
  }
  if (ferror(stdin)) {
    free(b);
    return ot_set_error(OT_ERR_IO, "stdin: read failed: %s", strerror(errno));
  }
  b[n] = '\0';
  *buf = b;
  *len = n;
  return OT_OK;
}

int ot_cli_looks_like_ids(const char *text, size_t len) {
  int digits = 0, seps = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)text[i];
    if (is_digit(c)) digits++;
    else if (is_sep(c)) seps += c == ',' || (i && is_digit((unsigned char)text[i - 1]));
    else return 0;
  }
  return digits > 0 && seps > 1;
}

ot_status ot_cli_check_prompt(const ot_hf_config *c, const char *model, const int32_t *ids, int n, int max_new,
                              const char *label, const char *max_label) {
  for (int i = 0; i < n; i++)
    if (ids[i] >= c->vocab_size)
      return ot_set_error(OT_ERR_INVALID_ARG, "%s: token id %d (number %d) is outside the vocabulary of %s (ids 0..%lld)",
                          label, ids[i], i + 1, model, (long long)c->vocab_size - 1);
  if ((int64_t)n + max_new > c->max_position_embeddings)
    return ot_set_error(OT_ERR_INVALID_ARG,
                        "%s %d: %d prompt + %d new tokens exceed the %lld positions of %s "
                        "(max_position_embeddings); generate at most %lld",
                        max_label, max_new, n, max_new, (long long)c->max_position_embeddings, model,
                        (long long)c->max_position_embeddings - n > 0 ? (long long)c->max_position_embeddings - n : 0);
  return OT_OK;
}
