/* prompt.c — token ids from "1,2,3" or a file holding them. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt.h"
#include "omptensor/file.h"

ot_status ot_cli_parse_ids(const char *text, const char *label, int32_t **ids, int *n) {
  *ids = NULL;
  *n = 0;
  int cap = 0;
  const char *p = text;
  for (;;) {
    while (*p && (isspace((unsigned char)*p) || *p == ',')) p++;
    if (!*p) break;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0 || v > INT32_MAX || (*end && !isspace((unsigned char)*end) && *end != ',')) {
      free(*ids);
      *ids = NULL;
      *n = 0;
      int len = 0;
      while (p[len] && !isspace((unsigned char)p[len]) && p[len] != ',' && len < 20) len++;
      return ot_set_error(OT_ERR_INVALID_ARG, "%s: '%.*s' at character %d is not a token id (non-negative integer)",
                     label, len, p, (int)(p - text) + 1);
    }
    if (*n == cap) {
      cap = cap ? 2 * cap : 64;
      int32_t *g = realloc(*ids, (size_t)cap * sizeof *g);
      if (!g) {
        free(*ids);
        *ids = NULL;
        return ot_set_error(OT_ERR_OUT_OF_MEMORY, "%s: no memory for the prompt", label);
      }
      *ids = g;
    }
    (*ids)[(*n)++] = (int32_t)v;
    p = end;
  }
  if (*n == 0) return ot_set_error(OT_ERR_INVALID_ARG, "%s: no token ids", label);
  return OT_OK;
}

ot_status ot_cli_read_ids_file(const char *path, int32_t **ids, int *n) {
  *ids = NULL;
  *n = 0;
  char *buf;
  size_t len;
  /* the library's checked read: a regular file only (a FIFO would block) */
  OT_TRY(ot_file_read(path, (size_t)64 << 20, &buf, &len));
  ot_status s = ot_cli_parse_ids(buf, path, ids, n);
  free(buf);
  return s;
}
