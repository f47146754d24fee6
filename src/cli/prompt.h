/* prompt.h (internal) — reading prompts as token ids. */
#ifndef OT_CLI_PROMPT_H
#define OT_CLI_PROMPT_H

#include <stdint.h>

#include "omptensor/status.h"

/* Ids separated by commas and/or whitespace. `label` names the source in
 * errors ("--prompt-ids", a file name). *ids is malloc'd. */
ot_status ot_cli_parse_ids(const char *text, const char *label, int32_t **ids, int *n);
ot_status ot_cli_read_ids_file(const char *path, int32_t **ids, int *n);

#endif
