/* report.c — the results of a generation, for people and for scripts. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "omptensor/file.h"
#include "omptensor/memory.h"

ot_status ot_cli_check_output(const char *opt, const char *path) {
  if (!path) return OT_OK;
  if (!strcmp(path, "-")) /* not stdout: the file is written whole (atomically), never a stream */
    return ot_set_error(OT_ERR_INVALID_ARG, "%s -: this output is a file written whole (atomically), not a stream "
                                            "to stdout; give a file name", opt);
  ot_status st = ot_file_check_output(path);
  return st == OT_OK ? OT_OK : ot_prefix_error(st, "%s", opt);
}

ot_status ot_cli_check_trace(const ot_cli_session *s) { return ot_cli_check_output("--trace", s->settings.trace_path); }

void ot_cli_json_probe(json_t *o, const ot_budget_probe *pr) {
  if (pr->done)
    json_object_set_new(o, "budget_probe",
                        json_pack("{s:b, s:b, s:b, s:I, s:I, s:I, s:I, s:I, s:i}", "ok", pr->ok, "conclusive",
                                  pr->conclusive, "alloc_ok", pr->alloc_ok, "free_at_start",
                                  (json_int_t)pr->free_at_start, "probe_bytes", (json_int_t)pr->probe_bytes,
                                  "free_at_peak", (json_int_t)pr->free_at_peak, "planned_bytes",
                                  (json_int_t)pr->planned_bytes, "margin", (json_int_t)OT_PROBE_MARGIN, "op", pr->op));
}

json_t *ot_cli_json_base(ot_cli_session *s, const char *model, const ot_trace_summary *t) {
  json_t *o = json_object();
  int dev = ot_ctx_device(s->ctx, s->sched.device_index);
  json_object_set_new(o, "model", json_string(model));
  json_object_set_new(o, "backend", json_string(ot_backend_name(ot_ctx_backend(s->ctx))));
  json_object_set_new(o, "device", dev == OT_DEVICE_HOST ? json_string("host") : json_integer(dev));
  json_object_set_new(o, "strategy", json_string(ot_strategy_name(s->sched.strategy)));
  uint64_t budget = ot_ctx_budget(s->ctx, s->sched.device_index);
  json_t *devs = json_array(), *budgets = json_array(); /* every device the steps were split over */
  for (int i = 0; i < ot_ctx_num_devices(s->ctx); i++) {
    int d = ot_ctx_device(s->ctx, i);
    uint64_t b = ot_ctx_budget(s->ctx, i);
    json_array_append_new(devs, d == OT_DEVICE_HOST ? json_string("host") : json_integer(d));
    json_array_append_new(budgets, b == UINT64_MAX ? json_null() : json_integer((json_int_t)b));
  }
  json_object_set_new(o, "devices", devs);
  json_object_set_new(o, "device_budgets_bytes", budgets);
  /* null: no limit (the host backend without --gpu-memory-limit) */
  json_object_set_new(o, "budget_bytes", budget == UINT64_MAX ? json_null() : json_integer((json_int_t)budget));
  json_object_set_new(o, "peak_device_bytes", json_integer((json_int_t)t->peak_device_bytes));
  json_object_set_new(o, "bytes_to_device", json_integer((json_int_t)t->bytes_to_device));
  json_object_set_new(o, "bytes_to_host", json_integer((json_int_t)t->bytes_to_host));
  json_object_set_new(o, "bytes_device_to_device", json_integer((json_int_t)t->bytes_peer));
  json_object_set_new(o, "bytes_read_remote", json_integer((json_int_t)t->bytes_remote));
  json_object_set_new(o, "uploads", json_integer(t->uploads));
  json_object_set_new(o, "evictions", json_integer(t->evictions));
  json_object_set_new(o, "writebacks_avoided", json_integer(t->writebacks_avoided));
  json_object_set_new(o, "transfer_overlap_s", json_real(t->overlap_s));
  return o;
}

/* Bytes of a well-formed sequence starting at s (at most n), 0 if none:
 * Unicode's table of well-formed UTF-8 (no overlongs, surrogates or values
 * past U+10FFFF). */
static size_t utf8_ok(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t k = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
  if (!k || k > n) return 0;
  unsigned char lo = s[0] == 0xE0 ? 0xA0 : s[0] == 0xF0 ? 0x90 : 0x80, hi = s[0] == 0xED ? 0x9F : s[0] == 0xF4 ? 0x8F : 0xBF;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < k; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return k;
}

json_t *ot_cli_json_text(const char *text, size_t len) {
  /* JSON holds Unicode text; a decoder that passes bytes through can leave
   * a sequence that is not UTF-8, shown as U+FFFD per byte, as a
   * replacing decoder would, instead of failing the whole summary. */
  char *b = malloc(3 * len + 1);
  if (!b) return NULL;
  size_t w = 0;
  for (size_t i = 0; i < len;) {
    size_t k = utf8_ok((const unsigned char *)text + i, len - i);
    if (k) memcpy(b + w, text + i, k), w += k, i += k;
    else memcpy(b + w, "\xEF\xBF\xBD", 3), w += 3, i++;
  }
  json_t *j = json_stringn(b, w);
  free(b);
  return j;
}

ot_status ot_cli_json_print(json_t *o) {
  char *txt = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
  json_decref(o);
  if (!txt) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "cannot format the JSON summary");
  const int bad = puts(txt) < 0 || fflush(stdout) != 0;
  free(txt);
  return bad ? ot_set_error(OT_ERR_IO, "writing the JSON summary to stdout failed: %s", strerror(errno)) : OT_OK;
}

const char *ot_cli_stop_name(const ot_gen_result *r) {
  return r->cancelled ? "interrupted" : r->stopped_at_eos ? "eos" : "length";
}

const char *ot_cli_stop_text(const ot_gen_result *r, char *buf, size_t cap) {
  if (r->cancelled) snprintf(buf, cap, "interrupted (Ctrl-C) after %d tokens", r->n_tokens);
  else if (r->stopped_at_eos && r->n_tokens > 0) snprintf(buf, cap, "at EOS id %d", r->tokens[r->n_tokens - 1]);
  else snprintf(buf, cap, "max_new_tokens reached (%d tokens)", r->n_tokens);
  return buf;
}

void ot_cli_print_setup(ot_cli_session *s, uint64_t weight_bytes, FILE *f) {
  char w[32], b[32];
  ot_size_format(weight_bytes, w, sizeof w);
  uint64_t budget = ot_ctx_budget(s->ctx, s->sched.device_index);
  if (budget == UINT64_MAX) snprintf(b, sizeof b, "unlimited");
  else ot_size_format(budget, b, sizeof b);
  fprintf(f, "weights %s, budget %s, backend %s, offload %s\n", w, b, ot_backend_name(ot_ctx_backend(s->ctx)),
          ot_strategy_name(s->sched.strategy));
  for (int i = 0; ot_ctx_num_devices(s->ctx) > 1 && i < ot_ctx_num_devices(s->ctx); i++) {
    uint64_t bi = ot_ctx_budget(s->ctx, i);
    if (bi == UINT64_MAX) snprintf(b, sizeof b, "unlimited");
    else ot_size_format(bi, b, sizeof b);
    fprintf(f, "%s device %d budget %s", i ? "," : "pipeline over:", ot_ctx_device(s->ctx, i), b);
    if (i == ot_ctx_num_devices(s->ctx) - 1) fputc('\n', f);
  }
}

void ot_cli_json_gen(json_t *o, const ot_gen_result *r) {
  json_t *toks = json_array();
  for (int i = 0; i < r->n_tokens; i++) json_array_append_new(toks, json_integer(r->tokens[i]));
  json_object_set_new(o, "tokens", toks);
  /* the continuation as text, special tokens skipped (a model with a tokenizer.json) */
  if (r->text) json_object_set_new(o, "text", ot_cli_json_text(r->text, r->text_len));
  json_object_set_new(o, "stopped", json_string(ot_cli_stop_name(r)));
  json_object_set_new(o, "tokens_per_second", json_real(r->decode_tokens_per_second));
  json_object_set_new(o, "prefill_ms", json_real(r->prefill_ms));
  json_object_set_new(o, "decode_ms", json_real(r->decode_ms));
}

static json_t *summary_json(ot_cli_session *s, const char *model, const ot_lm *m, const ot_gen_result *r,
                            const ot_trace_summary *t) {
  json_t *o = ot_cli_json_base(s, model, t);
  json_object_set_new(o, "weight_bytes", json_integer((json_int_t)m->weight_bytes));
  json_object_set_new(o, "kv_dtype", json_string(ot_dtype_name(s->settings.gen.kv_dtype)));
  ot_cli_json_gen(o, r);
  json_object_set_new(o, "n_tokens", json_integer(r->n_tokens));
  json_object_set_new(o, "logits_checksum", json_real(r->logits_checksum));
  json_object_set_new(o, "decode_bytes_to_device_per_token", json_integer((json_int_t)r->decode_plan.bytes_up));
  json_object_set_new(o, "decode_predicted_transfer_s", json_real(r->decode_plan.predicted_s));
  json_object_set_new(o, "decode_handed_over_bytes", json_integer((json_int_t)r->handed_over_bytes));
  if (m->experts) { /* a mixture of experts: the window, and what the decode steps brought into it */
    const ot_experts_stats *x = &r->decode_experts;
    json_object_set_new(o, "experts",
                        json_pack("{s:i, s:I, s:I, s:I, s:I, s:I}", "window_slots", ot_experts_slots(m->experts),
                                  "slot_bytes", (json_int_t)ot_experts_slot_bytes(m->experts), "decode_routed",
                                  (json_int_t)x->routed, "decode_hits", (json_int_t)x->hits, "decode_fills",
                                  (json_int_t)x->fills, "decode_fill_bytes", (json_int_t)x->fill_bytes));
  }
  if (ot_ctx_backend(s->ctx) == OT_BACKEND_USM) {
    const ot_plan_stats *d = &r->decode_plan;
    json_object_set_new(o, "usm_placement",
                        json_pack("{s:s, s:i, s:I, s:i, s:I, s:i, s:I, s:I}", "requested",
                                  ot_usm_placement_name(s->sched.usm_placement), "resident", d->n_resident,
                                  "resident_bytes", (json_int_t)d->resident_bytes, "streamed", d->n_streamed,
                                  "streamed_bytes", (json_int_t)d->streamed_bytes, "remote", d->n_remote,
                                  "remote_bytes", (json_int_t)d->remote_bytes, "remote_read_bytes_per_token",
                                  (json_int_t)d->remote_read_bytes));
  }
  {
    const ot_plan_stats *d = &r->decode_plan;
    json_object_set_new(o, "compute",
                        json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:f}", "requested", ot_compute_name(s->sched.compute),
                                  "used", d->n_host_ops ? "hybrid" : "gpu", "host_ops", d->n_host_ops,
                                  "host_read_bytes_per_token", (json_int_t)d->host_read_bytes,
                                  "pcie_bytes_per_token", (json_int_t)d->bytes_up, "cross_bytes_per_token",
                                  (json_int_t)d->cross_bytes, "host_read_rate", d->host_read_rate));
  }
  if (ot_ctx_host_budget(s->ctx)) {
    const ot_plan_stats *d = &r->decode_plan;
    int nd, nb;
    ot_disk_files_opened(&nd, &nb);
    json_object_set_new(
        o, "disk",
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:i, s:f}", "cpu_budget_bytes",
                  (json_int_t)ot_ctx_host_budget(s->ctx), "host_peak_bytes", (json_int_t)t->peak_host_bytes,
                  "host_weight_bytes", (json_int_t)d->host_weight_bytes, "disk_weight_bytes",
                  (json_int_t)d->disk_weight_bytes, "ring_bytes", (json_int_t)d->ring_bytes, "io",
                  nb ? (nd ? "mixed" : "buffered") : "direct", "decode_disk_bytes_per_token",
                  (json_int_t)d->disk_read_bytes, "disk_bytes_read", (json_int_t)t->bytes_from_disk, "disk_reads",
                  t->disk_reads, "disk_s", t->disk_s));
  }
  ot_cli_json_probe(o, &r->decode_probe);
  return o;
}

/* A host budget: where the weights live, and the trace's proof that the
 * host memory held stayed under it. */
static void print_disk(ot_cli_session *s, const ot_gen_result *r, const ot_trace_summary *t, FILE *f) {
  if (!ot_ctx_host_budget(s->ctx)) return;
  const ot_plan_stats *d = &r->decode_plan;
  char a[32], b[32], c[32], e[32], g[32], h[32];
  int nd, nb;
  ot_disk_files_opened(&nd, &nb);
  fprintf(f, "host budget %s (decode): weights %s in host memory, %s read from the checkpoint (%s per token, %s), "
             "staging ring %s; peak host memory in the trace %s\n",
          ot_size_format(ot_ctx_host_budget(s->ctx), a, sizeof a), ot_size_format(d->host_weight_bytes, b, sizeof b),
          ot_size_format(d->disk_weight_bytes, c, sizeof c), ot_size_format(d->disk_read_bytes, e, sizeof e),
          nb ? "buffered: through the page cache" : "O_DIRECT", ot_size_format(d->ring_bytes, g, sizeof g),
          ot_size_format(t->peak_host_bytes, h, sizeof h));
}

/* -v / the text report: where the decode step's tensors live, and the probe. */
static void print_placement(ot_cli_session *s, const ot_gen_result *r, FILE *f) {
  char a[32], b[32], c[32], d[32];
  const ot_plan_stats *st = &r->decode_plan;
  if (ot_ctx_backend(s->ctx) == OT_BACKEND_USM) {
    ot_size_format(st->resident_bytes, a, sizeof a);
    ot_size_format(st->streamed_bytes, b, sizeof b);
    ot_size_format(st->remote_bytes, c, sizeof c);
    ot_size_format(st->remote_read_bytes, d, sizeof d);
    fprintf(f, "usm placement %s (decode): %d resident (%s), %d streamed (%s per token), %d remote (%s, %s read in "
               "place per token); predicted transfer %.1f ms per token\n",
            ot_usm_placement_name(s->sched.usm_placement), st->n_resident, a, st->n_streamed, b, st->n_remote, c, d,
            st->predicted_s * 1e3);
  }
  if (st->n_host_ops) {
    ot_size_format(st->host_read_bytes, a, sizeof a);
    ot_size_format(st->bytes_up, b, sizeof b);
    ot_size_format(st->cross_bytes, c, sizeof c);
    fprintf(f, "compute hybrid (decode): %d ops on the host's cores read %s per token in host memory (at %.1f GB/s "
               "predicted), the device's streams %s over PCIe; %s of activations cross\n",
            st->n_host_ops, a, st->host_read_rate * 1e-9, b, c);
  } else if (s->sched.compute == OT_COMPUTE_HYBRID) {
    fprintf(f, "compute hybrid (decode): every op on the device (nothing streams, or no op pays on the host)\n");
  }
  const ot_budget_probe *pr = &r->decode_probe;
  if (pr->done) {
    ot_size_format(pr->probe_bytes, a, sizeof a);
    ot_size_format(pr->free_at_start, b, sizeof b);
    ot_size_format(pr->free_at_start > pr->free_at_peak ? pr->free_at_start - pr->free_at_peak : 0, c, sizeof c);
    fprintf(f, "budget probe at the decode peak: cudaMalloc of %s (free at start %s - budget - margin) %s, "
               "cudaMemGetInfo drop %s: %s\n",
            a, b, pr->alloc_ok ? "succeeded" : "failed", c,
            !pr->conclusive ? "inconclusive (managed pages migrated; a cudaMalloc can evict them)"
            : pr->ok        ? "the budget held"
                            : "FAILED: the process holds more device memory than its budget");
  }
}

ot_status ot_cli_report(ot_cli_session *s, const char *model, const ot_lm *m, const ot_gen_result *r, FILE *f) {
  ot_trace_summary t = ot_trace_summarize(s->trace);
  /* the promise of --cpu-memory-limit, checked from the trace as the device budget is */
  if (ot_ctx_host_budget(s->ctx) && s->trace) OT_TRY(ot_trace_check_host_budget(s->trace, ot_ctx_host_budget(s->ctx)));
  if (s->settings.trace_path) OT_TRY(ot_trace_write_chrome(s->trace, s->settings.trace_path));
  if (s->settings.json) {
    OT_TRY(ot_cli_json_print(summary_json(s, model, m, r, &t)));
  } else {
    char why[96];
    fprintf(f, "tokens:");
    for (int i = 0; i < r->n_tokens; i++) fprintf(f, "%s%d", i ? "," : " ", r->tokens[i]);
    fprintf(f, "\nstopped: %s\n", ot_cli_stop_text(r, why, sizeof why));
    fprintf(f, "prompt: %.1f ms; decode: %d tokens in %.1f ms = %.2f tokens/s\n", r->prefill_ms,
            r->n_tokens > 0 ? r->n_tokens - 1 : 0, r->decode_ms, r->decode_tokens_per_second);
    ot_cli_print_setup(s, m->weight_bytes, f);
    print_placement(s, r, f);
    print_disk(s, r, &t, f);
    if (m->experts) {
      const ot_experts_stats *x = &r->decode_experts;
      const int steps = r->n_tokens > 1 ? r->n_tokens - 1 : 1;
      char win[32], per[32];
      ot_size_format((uint64_t)ot_experts_slot_bytes(m->experts) * (uint64_t)ot_experts_slots(m->experts), win,
                     sizeof win);
      ot_size_format(x->fill_bytes / (uint64_t)steps, per, sizeof per);
      fprintf(f, "experts: a window of %d (%s of the budget); decode: %llu chosen, %llu found in the window, "
                 "%llu brought in (%s per token)\n",
              ot_experts_slots(m->experts), win, (unsigned long long)x->routed, (unsigned long long)x->hits,
              (unsigned long long)x->fills, per);
    }
    ot_trace_summary_print(&t, f);
  }
  return OT_OK;
}
