/* settings_yaml.c — the YAML configuration file, through libyaml's
 * document API:
 *
 *     memory:
 *       offload_strategy: balanced
 *       max_gpu_memory: 3GB
 *     backend: auto
 *
 * Keys come from the settings table ("memory.max_gpu_memory" is key
 * max_gpu_memory in the mapping under memory). Unknown or repeated keys and
 * non-scalar values are errors naming the key and its line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/settings_internal.h"
#include "core/error.h"
#include "io/fileio.h"

#define OT_YAML_MAX_BYTES ((size_t)1 << 20)
/* Nesting deeper than this is refused before the document is built: the
 * configuration needs two levels (memory: {max_gpu_memory: ...}), and
 * libyaml's scanner does work proportional to the depth for every token, so
 * 200 KB of "[[[..." took it 23 s to parse. */
#define OT_YAML_MAX_DEPTH 64

typedef struct walker {
  ot_settings *s;
  yaml_document_t *doc;
  const char *label;
} walker;

static size_t line_of(const yaml_node_t *n) { return n->start_mark.line + 1; }

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* An empty value, ~ or null (unquoted) leaves the setting alone. */
static int is_null(const yaml_node_t *n) {
  const char *v = scalar(n);
  return v && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         (!v[0] || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL"));
}

/* The keys allowed at one level ("memory", "backend", ...) for messages. */
static void expected_keys(const char *section, char *buf, size_t cap) {
  size_t n = 0, sl = section ? strlen(section) : 0;
  buf[0] = '\0';
  for (int k = 0; k < OT_SET_COUNT; k++) {
    const char *y = ot_setting_defs[k].yaml, *dot = strchr(y, '.');
    char name[64];
    if (section) {
      if (!dot || (size_t)(dot - y) != sl || strncmp(y, section, sl) != 0) continue;
      snprintf(name, sizeof name, "%s", dot + 1);
    } else {
      snprintf(name, sizeof name, "%.*s", dot ? (int)(dot - y) : (int)strlen(y), y);
    }
    if (strstr(buf, name)) continue; /* a section listed once */
    n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", n ? ", " : "", name);
  }
}

static ot_status unknown_key(const walker *w, const yaml_node_t *key, const char *section) {
  char exp[256];
  expected_keys(section, exp, sizeof exp);
  return ot_fail(OT_ERR_FORMAT, "%s:%zu: unknown key '%s%s%s' (expected %s%s)", w->label, line_of(key),
                 section ? section : "", section ? "." : "", scalar(key), exp, section ? "" : " at the top level");
}

static ot_status set_value(walker *w, int k, const yaml_node_t *val) {
  const char *path = ot_setting_defs[k].yaml;
  if (is_null(val)) return OT_OK;
  if (!scalar(val))
    return ot_fail(OT_ERR_FORMAT, "%s:%zu: '%s' must be a single value, not a %s", w->label, line_of(val), path,
                   val->type == YAML_MAPPING_NODE ? "mapping" : "list");
  ot_status st = ot_settings_apply(w->s, (ot_setting)k, OT_SRC_FILE, scalar(val));
  if (st != OT_OK) return ot_fail_context(st, "%s:%zu: %s", w->label, line_of(val), path);
  return OT_OK;
}

/* A key given twice in one mapping, at any level (a setting, or a section
 * such as memory: whose second mapping libyaml keeps beside the first), is
 * refused, not merged or overridden: the file says two things. The keys
 * before p were each checked (known, and not repeated), so this loop looks
 * at no more of them than the table has. */
static ot_status repeated_key(const walker *w, const yaml_node_t *map, const yaml_node_pair_t *p, const char *path) {
  const char *name = scalar(yaml_document_get_node(w->doc, p->key));
  for (const yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
    const yaml_node_t *earlier = yaml_document_get_node(w->doc, q->key);
    if (!strcmp(scalar(earlier), name))
      return ot_fail(OT_ERR_FORMAT, "%s:%zu: '%s' given twice (first at line %zu); a key may appear once, so put "
                     "its values together", w->label, line_of(yaml_document_get_node(w->doc, p->key)), path,
                     line_of(earlier));
  }
  return OT_OK;
}

/* Walks one mapping; section is NULL at the top level or "memory" below. */
static ot_status walk_mapping(walker *w, const yaml_node_t *map, const char *section) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const yaml_node_t *key = yaml_document_get_node(w->doc, p->key), *val = yaml_document_get_node(w->doc, p->value);
    if (!scalar(key)) return ot_fail(OT_ERR_FORMAT, "%s:%zu: a key must be a plain name", w->label, line_of(key));
    char path[128];
    snprintf(path, sizeof path, "%s%s%s", section ? section : "", section ? "." : "", scalar(key));
    OT_TRY(repeated_key(w, map, p, path));
    int found = 0;
    for (int k = 0; k < OT_SET_COUNT && !found; k++)
      if (!strcmp(ot_setting_defs[k].yaml, path)) {
        OT_TRY(set_value(w, k, val));
        found = 1;
      }
    if (found) continue;
    size_t pl = strlen(path);
    int is_section = 0;
    for (int k = 0; k < OT_SET_COUNT; k++)
      if (!section && !strncmp(ot_setting_defs[k].yaml, path, pl) && ot_setting_defs[k].yaml[pl] == '.') is_section = 1;
    if (!is_section) return unknown_key(w, key, section);
    if (is_null(val)) continue;
    if (val->type != YAML_MAPPING_NODE)
      return ot_fail(OT_ERR_FORMAT, "%s:%zu: '%s' must be a mapping (e.g. %s: {max_gpu_memory: 3GB})", w->label,
                     line_of(val), path, path);
    OT_TRY(walk_mapping(w, val, scalar(key)));
  }
  return OT_OK;
}

static ot_status load_error(const yaml_parser_t *p, const char *label) {
  return ot_fail(OT_ERR_FORMAT, "%s:%zu:%zu: malformed YAML%s%s%s: %s", label, p->problem_mark.line + 1,
                 p->problem_mark.column + 1, p->context ? " (" : "", p->context ? p->context : "", p->context ? ")" : "",
                 p->problem ? p->problem : "parse error");
}

static ot_status walk_document(walker *w, yaml_parser_t *parser) {
  yaml_node_t *root = yaml_document_get_root_node(w->doc);
  if (!root) return OT_OK; /* an empty file sets nothing */
  if (root->type != YAML_MAPPING_NODE)
    return ot_fail(OT_ERR_FORMAT, "%s:%zu: the configuration must be a mapping of keys (memory:, backend:, ...)",
                   w->label, line_of(root));
  OT_TRY(walk_mapping(w, root, NULL));
  yaml_document_t next;
  if (!yaml_parser_load(parser, &next)) return load_error(parser, w->label);
  int more = yaml_document_get_root_node(&next) != NULL;
  size_t line = more ? line_of(yaml_document_get_root_node(&next)) : 0;
  yaml_document_delete(&next);
  if (more) return ot_fail(OT_ERR_FORMAT, "%s:%zu: a second YAML document; put everything in one", w->label, line);
  return OT_OK;
}

/* A first pass over the event stream that only counts nesting: it stops at
 * the first collection deeper than OT_YAML_MAX_DEPTH, after libyaml has
 * scanned little more than that many tokens (its lookahead is bounded), so
 * the quadratic cost of deep nesting is never paid. Syntax errors are
 * reported as the loader would. */
static ot_status check_depth(const char *text, size_t len, const char *label) {
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p)) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: cannot start the YAML parser", label);
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  ot_status st = OT_OK;
  for (int depth = 0, done = 0; st == OT_OK && !done;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&p, &ev)) {
      st = load_error(&p, label);
      break;
    }
    if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
      if (++depth > OT_YAML_MAX_DEPTH)
        st = ot_fail(OT_ERR_FORMAT, "%s:%zu:%zu: YAML nested more than %d levels deep (a configuration needs two: "
                     "memory: {max_gpu_memory: 3GB}); not a configuration file?",
                     label, ev.start_mark.line + 1, ev.start_mark.column + 1, OT_YAML_MAX_DEPTH);
    } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
      depth--;
    } else if (ev.type == YAML_STREAM_END_EVENT) {
      done = 1;
    }
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&p);
  return st;
}

ot_status ot_settings_load_yaml(ot_settings *s, const char *text, size_t len, const char *label) {
  if (!s || (!text && len) || !label) return ot_fail(OT_ERR_INVALID_ARG, "ot_settings_load_yaml: NULL argument");
  OT_TRY(check_depth(text ? text : "", len, label));
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return ot_fail(OT_ERR_OUT_OF_MEMORY, "%s: cannot start the YAML parser", label);
  yaml_parser_set_input_string(&parser, (const unsigned char *)(text ? text : ""), len);
  yaml_document_t doc;
  ot_status st;
  if (!yaml_parser_load(&parser, &doc)) {
    st = load_error(&parser, label);
  } else {
    walker w = {.s = s, .doc = &doc, .label = label};
    st = walk_document(&w, &parser);
    yaml_document_delete(&doc);
  }
  yaml_parser_delete(&parser);
  if (st == OT_OK) {
    char *copy;
    OT_TRY(ot_io_strdup(label, &copy));
    free(s->file);
    s->file = copy;
  }
  return st;
}

ot_status ot_settings_load_file(ot_settings *s, const char *path) {
  if (!s || !path) return ot_fail(OT_ERR_INVALID_ARG, "ot_settings_load_file: NULL argument");
  char *text;
  size_t len;
  OT_TRY(ot_io_read_text(path, OT_YAML_MAX_BYTES, &text, &len));
  ot_status st = ot_settings_load_yaml(s, text, len, path);
  free(text);
  return st;
}
