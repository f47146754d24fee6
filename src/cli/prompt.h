/* prompt.h (internal) — reading prompts as token ids. */
#ifndef OT_CLI_PROMPT_H
#define OT_CLI_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/status.h"

/* Decimal ids from 0 to 2^31-1 separated by commas and/or ASCII whitespace,
 * the len bytes of text and nothing else: any other byte (a NUL too) is an
 * error naming `label` (the source: "--prompt-ids", a file name) and its
 * byte offset. *ids is malloc'd. */
ot_status ot_cli_parse_ids(const char *text, size_t len, const char *label, int32_t **ids, int *n);
/* The whole of a regular file (at most 64 MiB; a FIFO, directory or device
 * is refused without blocking) as ids, as above. */
ot_status ot_cli_read_ids_file(const char *path, int32_t **ids, int *n);

#endif
