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
 * is refused without blocking), or for "-" stdin to its end, as ids, as
 * above. */
ot_status ot_cli_read_ids_file(const char *path, int32_t **ids, int *n);

/* A whole text: a regular file of at most max_bytes (a FIFO, directory or
 * device refused without blocking, as above) or, for "-", stdin to its end
 * (more than max_bytes refused). *buf is malloc'd and NUL-terminated. */
ot_status ot_cli_read_text(const char *path, size_t max_bytes, char **buf, size_t *len);
#define OT_CLI_PROMPT_MAX ((size_t)64 << 20) /* a prompt: 64 MiB at most */
#define OT_CLI_CONFIG_MAX ((size_t)1 << 20)  /* --config -: 1 MiB at most, as the library reads a file */
#define OT_CLI_TRACE_MAX ((size_t)4 << 30)   /* trace summarize|plot -: as ot_trace_read_chrome reads a file */
/* Whether text is only decimal numbers between commas or whitespace (at
 * least two of them): a file of token ids given where text was expected. */
int ot_cli_looks_like_ids(const char *text, size_t len);
/* The prompt against the model's config.json, before any weight is read: a
 * bad id or length is the user's to fix, and should not wait for the load.
 * `label` is the option or file the ids came from, `max_label` where
 * max_new came from ("--max-new-tokens", a batch line's "max_new_tokens"). */
ot_status ot_cli_check_prompt(const ot_hf_config *c, const char *model, const int32_t *ids, int n, int max_new,
                              const char *label, const char *max_label);

#endif
