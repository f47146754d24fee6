/* prompt.h (internal) — reading prompts: token ids, text. */
#ifndef OT_CLI_PROMPT_H
#define OT_CLI_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/hfconfig.h"
#include "omptensor/status.h"

/* Decimal ids from 0 to 2^31-1 separated by commas and/or ASCII whitespace,
 * the len bytes of text and nothing else: any other byte (a NUL too) is an
 * error naming `label` (the source: "--prompt-ids", a file name) and its
 * byte offset. *ids is malloc'd. */
ot_status ot_cli_parse_ids(const char *text, size_t len, const char *label, int32_t **ids, int *n);
/* The whole of a regular file (at most 64 MiB; a FIFO, directory or device
 * is refused without blocking) as ids, as above. */
ot_status ot_cli_read_ids_file(const char *path, int32_t **ids, int *n);

/* A whole text prompt: a regular file (at most 64 MiB, as above) or, for
 * "-", stdin to its end. *buf is malloc'd and NUL-terminated. */
ot_status ot_cli_read_text(const char *path, char **buf, size_t *len);
/* Whether text is only decimal numbers between commas or whitespace (at
 * least two of them): a file of token ids given where text was expected. */
int ot_cli_looks_like_ids(const char *text, size_t len);
/* The prompt against the model's config.json, before any weight is read: a
 * bad id or length is the user's to fix, and should not wait for the load.
 * `label` is the option or file the ids came from. */
ot_status ot_cli_check_prompt(const ot_hf_config *c, const char *model, const int32_t *ids, int n, int max_new,
                              const char *label);

#endif
