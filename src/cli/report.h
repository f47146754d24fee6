/* report.h (internal) — what `run`, `demo` and `train` print when done. */
#ifndef OT_CLI_REPORT_H
#define OT_CLI_REPORT_H

#include <jansson.h>

#include "common.h"

/* Human lines (ids, why it stopped, tokens/s, memory summary) on `f`, or
 * with --json one JSON object on stdout with the fields the README
 * documents. --trace is written first: the summary is printed only once
 * every output is (a failed trace write is the command's failure, never
 * after a success object). */
ot_status ot_cli_report(ot_cli_session *s, const char *model, const ot_lm *m, const ot_gen_result *r, FILE *f);

/* The fields every command's --json shares: model, backend, device(s),
 * strategy, budget(s), and the trace's peak, bytes moved, uploads,
 * evictions, overlap. A new object the caller adds to. */
json_t *ot_cli_json_base(ot_cli_session *s, const char *model, const ot_trace_summary *t);
/* Prints o compactly on stdout as one line and releases it (NULL: out of
 * memory); stdout is flushed, and a failed write (a full disk) is
 * OT_ERR_IO. */
ot_status ot_cli_json_print(json_t *o);
/* What a generation made, the same in `run --json` and a batch job's result
 * lines: tokens, text (with a tokenizer), stopped ("eos"/"length"),
 * tokens_per_second, prefill_ms, decode_ms. */
void ot_cli_json_gen(json_t *o, const ot_gen_result *r);
/* Why a generation stopped, as --json and a batch job's lines say it:
 * "eos", "length" (max_new_tokens made) or "interrupted" (Ctrl-C). */
const char *ot_cli_stop_name(const ot_gen_result *r);
/* The same for people, into buf: "at EOS id 2", "max_new_tokens reached
 * (20 tokens)", "interrupted (Ctrl-C) after 7 tokens". */
const char *ot_cli_stop_text(const ot_gen_result *r, char *buf, size_t cap);
/* Adds "budget_probe" (sched.h's ot_budget_probe: ok, conclusive, the bytes
 * it read and allocated) to o where the probe ran (OMPTENSOR_DEBUG=probe). */
void ot_cli_json_probe(json_t *o, const ot_budget_probe *pr);
/* Text as a JSON string; bytes that are not UTF-8 become U+FFFD (NULL: no memory). */
json_t *ot_cli_json_text(const char *text, size_t len);
/* "weights W, budget B, backend X, offload Y" (and the pipeline's devices). */
void ot_cli_print_setup(ot_cli_session *s, uint64_t weight_bytes, FILE *f);

/* The output file `opt` names can be written (omptensor/file.h's
 * ot_file_check_output), checked before the work that produces it; the
 * message starts with the option. NULL path: nothing to check; "-" is
 * refused by name (these outputs are written whole, never to stdout). */
ot_status ot_cli_check_output(const char *opt, const char *path);
/* The same for --trace (from a flag, the environment or --config): call
 * after ot_cli_session_start, which loads the settings. */
ot_status ot_cli_check_trace(const ot_cli_session *s);

#endif
