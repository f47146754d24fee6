/* mlp_train.c — trains the sample MLP (mlp.h) on its teacher task and prints
 * the loss falling.
 *
 *   mlp_train [--steps N] [--batch N] [--micro-batches N] [--layers N]
 *             [--hidden N] [--lr X] [--seed N] [--checkpoint none|all|auto]
 *             [--gpu-memory-limit SIZE] [--offload none|minimal|balanced|aggressive]
 *             [--backend auto|map|usm|host] [--trace FILE] [--print-every N]
 *             [--precision fp32|bf16|f16] [--loss-scale-log2 K] [--scale-growth-interval N]
 *
 * The whole step is recorded once and replayed; with --trace the Chrome trace
 * of every step is written to FILE and the memory summary printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "omptensor/settings.h"

typedef struct cli {
  mlp_config c;
  int steps, print_every;
  ot_settings set;
} cli;

static int usage(FILE *f) {
  fprintf(f, "usage: mlp_train [--steps N] [--batch N] [--micro-batches N] [--layers N] [--hidden N] [--lr X]\n"
             "                 [--seed N] [--checkpoint none|all|auto] [--gpu-memory-limit SIZE]\n"
             "                 [--offload none|minimal|balanced|aggressive] [--backend auto|map|usm|host]\n"
             "                 [--trace FILE] [--print-every N] [--precision fp32|bf16|f16]\n"
             "                 [--loss-scale-log2 K] [--scale-growth-interval N]\n");
  return f == stdout ? 0 : 2;
}

static int int_arg(const char *opt, const char *v, int lo, int *out) {
  char *end;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || *end || x < lo || x > 1 << 30) {
    fprintf(stderr, "mlp_train: %s needs an integer >= %d, got '%s'\n", opt, lo, v ? v : "");
    return 0;
  }
  *out = (int)x;
  return 1;
}

/* Returns 0 to go on, else the exit status. */
static int parse(cli *a, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1, used = 1;
    if (!strcmp(o, "--help") || !strcmp(o, "-h")) return usage(stdout) + 1000;
    else if (!strcmp(o, "--steps")) ok = int_arg(o, v, 1, &a->steps);
    else if (!strcmp(o, "--batch")) ok = int_arg(o, v, 1, &a->c.batch);
    else if (!strcmp(o, "--micro-batches")) ok = int_arg(o, v, 1, &a->c.micro_batches);
    else if (!strcmp(o, "--layers")) ok = int_arg(o, v, 2, &a->c.layers);
    else if (!strcmp(o, "--hidden")) ok = int_arg(o, v, 1, &a->c.hidden);
    else if (!strcmp(o, "--print-every")) ok = int_arg(o, v, 1, &a->print_every);
    else if (!strcmp(o, "--scale-growth-interval")) ok = int_arg(o, v, 1, &a->c.scale_growth_interval);
    else if (!strcmp(o, "--loss-scale-log2")) {
      ok = v && int_arg(o, v, -126, &a->c.loss_scale_log2) && a->c.loss_scale_log2 <= 127;
      if (v && !ok) fprintf(stderr, "mlp_train: --loss-scale-log2 must be -126..127\n");
    } else if (!strcmp(o, "--precision")) {
      ok = mlp_precision_parse(v, &a->c.precision) == OT_OK;
      if (!ok) fprintf(stderr, "mlp_train: %s\n", ot_last_error());
    }
    else if (!strcmp(o, "--seed")) {
      int s;
      ok = int_arg(o, v, 0, &s);
      a->c.seed = (uint64_t)s;
    } else if (!strcmp(o, "--lr")) {
      char *end;
      a->c.adam.lr = v ? strtof(v, &end) : 0;
      ok = v && !*end && a->c.adam.lr > 0;
      if (!ok) fprintf(stderr, "mlp_train: --lr needs a positive number, got '%s'\n", v ? v : "");
    } else if (!strcmp(o, "--checkpoint")) {
      ok = ot_recompute_parse(v, &a->c.recompute) == OT_OK;
      if (!ok) fprintf(stderr, "mlp_train: %s\n", ot_last_error());
    } else if (!strcmp(o, "--gpu-memory-limit") || !strcmp(o, "--offload") || !strcmp(o, "--backend") ||
               !strcmp(o, "--trace")) {
      ok = v && ot_settings_set_flag(&a->set, o + 2, v) == OT_OK;
      if (!ok) fprintf(stderr, "mlp_train: %s\n", v ? ot_last_error() : "missing value");
    } else {
      fprintf(stderr, "mlp_train: unknown option '%s'\n", o);
      return usage(stderr);
    }
    if (!ok) return 2;
    i += used;
  }
  return 0;
}

static int fail(const char *what) {
  fprintf(stderr, "mlp_train: %s: %s\n", what, ot_last_error());
  return 1;
}

int main(int argc, char **argv) {
  cli a = {.c = mlp_config_default(), .steps = 200, .print_every = 20};
  ot_settings_init(&a.set);
  int rc = parse(&a, argc, argv);
  if (rc) {
    ot_settings_release(&a.set);
    return rc >= 1000 ? 0 : rc;
  }
  ot_ctx_opts co = ot_ctx_opts_default();
  ot_ctx *ctx = NULL;
  mlp_trainer *t = NULL;
  ot_trace *tr = NULL;
  if (ot_settings_load_env(&a.set) != OT_OK || ot_settings_to_ctx_opts(&a.set, &co) != OT_OK) {
    rc = fail("settings");
    goto done;
  }
  if (ot_ctx_create(&co, &ctx) != OT_OK) {
    rc = fail("context");
    goto done;
  }
  ot_sched_opts so = ot_sched_opts_default();
  so.strategy = a.set.offload;
  if (ot_trace_create(&tr) != OT_OK || mlp_trainer_create(ctx, &a.c, &so, &t) != OT_OK) {
    rc = fail("building the training step");
    goto done;
  }
  printf("mlp: %d layers, hidden %d, batch %d x %d micro-batches, backend %s, budget %llu bytes, offload %s, "
         "checkpoint %s, precision %s (recomputed layers:",
         a.c.layers, a.c.hidden, a.c.batch, a.c.micro_batches, ot_backend_name(ot_ctx_backend(ctx)),
         (unsigned long long)ot_ctx_budget(ctx, 0), ot_strategy_name(so.strategy), ot_recompute_name(a.c.recompute),
         mlp_precision_name(a.c.precision));
  int any = 0;
  for (int l = 0; l < a.c.layers; l++)
    if (mlp_trainer_recomputed(t, l)) printf(" %d", l), any = 1;
  printf("%s)\n", any ? "" : " none");
  uint64_t minb;
  if (mlp_trainer_min_budget(t, &minb) == OT_OK)
    printf("step: %d ops, %llu bytes in all, smallest feasible budget %llu bytes\n",
           ot_program_num_ops(mlp_trainer_program(t)), (unsigned long long)mlp_trainer_total_bytes(t),
           (unsigned long long)minb);
  float first = 0, loss = 0;
  for (int s = 0; s < a.steps; s++) {
    if (mlp_trainer_step(t, a.set.trace_path ? tr : NULL, &loss) != OT_OK) {
      rc = fail("step");
      goto done;
    }
    if (s == 0) first = loss;
    if (s == 0 || (s + 1) % a.print_every == 0 || s + 1 == a.steps) printf("step %5d  loss %.6f\n", s + 1, loss);
  }
  printf("loss %.6f -> %.6f (%.1f%% of the first)\n", first, loss, first > 0 ? 100.0 * loss / first : 0.0);
  if (a.c.precision == MLP_F16)
    printf("f16 loss scaling: %lld of %d steps skipped (Inf/NaN gradients), scale now 2^%d\n",
           (long long)mlp_trainer_skipped_steps(t), a.steps, mlp_trainer_loss_scale_log2(t));
  if (a.set.trace_path) {
    ot_trace_summary sum = ot_trace_summarize(tr);
    ot_trace_summary_print(&sum, stdout);
    if (ot_trace_write_chrome(tr, a.set.trace_path) != OT_OK) rc = fail("trace");
  }
done:
  mlp_trainer_destroy(t);
  ot_trace_destroy(tr);
  ot_ctx_destroy(ctx);
  ot_settings_release(&a.set);
  return rc;
}
