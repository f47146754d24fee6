/* st_index.c — model.safetensors.index.json: {"metadata": {...},
 * "weight_map": {"tensor name": "model-00001-of-00002.safetensors", ...}}. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/fileio.h"
#include "io/json_util.h"
#include "io/st_internal.h"

/* Shard names are plain file names next to the index: refusing paths keeps
 * a downloaded index from reading files outside its directory. */
static int plain_name(const char *s) {
  return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Fills ix->shards with the distinct values of the weight map, sorted, and
 * ix->shard[i] with each entry's index among them. */
static ot_status collect_shards(const char *label, const json_t *map, ot_st_index *ix) {
  const char **vals = malloc((size_t)ix->n * sizeof *vals);
  ix->shards = calloc((size_t)ix->n, sizeof *ix->shards);
  if (!vals || !ix->shards) {
    free(vals);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
  }
  const char *k;
  const json_t *v;
  int i = 0;
  json_object_foreach((json_t *)map, k, v) vals[i++] = json_string_value(v);
  qsort(vals, (size_t)ix->n, sizeof *vals, cmp_str);
  ot_status s = OT_OK;
  for (i = 0; i < ix->n && s == OT_OK; i++)
    if (i == 0 || strcmp(vals[i], vals[i - 1]) != 0) {
      s = ot_io_strdup(vals[i], &ix->shards[ix->n_shards]);
      if (s == OT_OK) ix->n_shards++;
    }
  free(vals);
  for (i = 0; i < ix->n && s == OT_OK; i++) {
    const char *want = json_string_value(json_object_get(map, ix->tensor[i]));
    char *const *hit = bsearch(&want, ix->shards, (size_t)ix->n_shards, sizeof *ix->shards, cmp_str);
    ix->shard[i] = (int)(hit - ix->shards);
  }
  return s;
}

static ot_status parse_map(const char *label, const json_t *root, ot_st_index *ix) {
  if (!json_is_object(root))
    return ot_fail(OT_ERR_FORMAT, "%s: the index is %s, expected an object with \"weight_map\"", label,
                   ot_json_kind(root));
  const json_t *map = json_object_get(root, "weight_map");
  if (!map) return ot_fail(OT_ERR_FORMAT, "%s: no \"weight_map\" in the index", label);
  if (!json_is_object(map))
    return ot_fail(OT_ERR_FORMAT, "%s: \"weight_map\" is %s, expected an object {tensor: shard file}", label,
                   ot_json_kind(map));
  size_t n = json_object_size(map);
  if (n == 0) return ot_fail(OT_ERR_FORMAT, "%s: \"weight_map\" is empty", label);
  ix->tensor = calloc(n, sizeof *ix->tensor);
  ix->shard = calloc(n, sizeof *ix->shard);
  if (!ix->tensor || !ix->shard) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)map, k, v) {
    if (!json_is_string(v))
      return ot_fail(OT_ERR_FORMAT, "%s: weight_map['%s'] is %s, expected a shard file name", label, k,
                     ot_json_kind(v));
    if (!plain_name(json_string_value(v)))
      return ot_fail(OT_ERR_FORMAT, "%s: weight_map['%s'] = \"%.200s\" is not a file name in the index's directory",
                     label, k, json_string_value(v));
    OT_TRY(ot_io_strdup(k, &ix->tensor[ix->n]));
    ix->n++;
  }
  return collect_shards(label, map, ix);
}

ot_status ot_st_index_parse(const char *json, size_t len, const char *label, ot_st_index *out) {
  if (!json || !label || !out) return ot_fail(OT_ERR_INVALID_ARG, "ot_st_index_parse: NULL argument");
  memset(out, 0, sizeof *out);
  json_t *root;
  OT_TRY(ot_json_parse(json, len, label, "index", &root));
  ot_status s = parse_map(label, root, out);
  json_decref(root);
  if (s != OT_OK) ot_st_index_free(out);
  return s;
}

void ot_st_index_free(ot_st_index *ix) {
  if (!ix) return;
  for (int i = 0; i < ix->n; i++) free(ix->tensor[i]);
  for (int i = 0; i < ix->n_shards; i++) free(ix->shards[i]);
  free(ix->tensor);
  free(ix->shard);
  free(ix->shards);
  memset(ix, 0, sizeof *ix);
}
