/* hf_internal.h (internal) — what config.json's and generation_config.json's
 * readers share. */
#ifndef OT_CONFIG_HF_INTERNAL_H
#define OT_CONFIG_HF_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "omptensor/hfconfig.h"

/* A token id or a list of at most OT_HF_MAX_EOS ids (eos_token_id), v NULL
 * or JSON null: none. Errors name label and key. */
ot_status ot_hf_read_ids(const json_t *v, const char *label, const char *key, int64_t *ids, int *n);

#endif
