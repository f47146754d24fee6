/* prompt.c — token ids from "1,2,3" or a file holding them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prompt.h"

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

#define PROMPT_FILE_MAX (64u << 20)

ot_status ot_cli_read_ids_file(const char *path, int32_t **ids, int *n) {
  *ids = NULL;
  *n = 0;
  /* O_NONBLOCK: a FIFO or a device must not block the open before its type
   * is checked; a regular file reads as ever. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ot_set_error(errno == ENOENT ? OT_ERR_NOT_FOUND : OT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return ot_set_error(OT_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return ot_set_error(OT_ERR_IO, "%s: is a %s, not a regular file (give a file of token ids)", path,
                        S_ISDIR(sb.st_mode) ? "directory" : S_ISFIFO(sb.st_mode) ? "FIFO" : S_ISSOCK(sb.st_mode) ? "socket" : "device");
  }
  if ((uint64_t)sb.st_size > PROMPT_FILE_MAX) {
    close(fd);
    return ot_set_error(OT_ERR_FORMAT, "%s: %lld bytes, larger than 64 MiB: not a prompt file", path, (long long)sb.st_size);
  }
  /* The whole file by its length (one byte more to see it did not grow). */
  size_t want = (size_t)sb.st_size, len = 0;
  char *buf = malloc(want + 1);
  if (!buf) {
    close(fd);
    return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory", path);
  }
  while (len < want + 1) {
    ssize_t r = read(fd, buf + len, want + 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return ot_set_error(OT_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    }
    if (r == 0) break;
    len += (size_t)r;
  }
  close(fd);
  if (len != want) {
    free(buf);
    return ot_set_error(OT_ERR_IO, "%s: changed while it was read (%zu bytes, %zu expected); try again", path, len, want);
  }
  ot_status s = ot_cli_parse_ids(buf, len, path, ids, n);
  free(buf);
  return s;
}
