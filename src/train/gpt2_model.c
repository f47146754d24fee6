/* gpt2_model.c — the GPT-2 trainer's parameters (loaded from a Hugging
 * Face checkpoint, or initialized from config.json alone) and its public calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "memory/device.h"
#include "omptensor/memory.h"
#include "train/gpt2_impl.h"

ot_gpt2_train_opts ot_gpt2_train_opts_default(void) {
  ot_gpt2_train_opts o = {.B = 1, .T = 64, .accum = 1, .adam = ot_adamw_opts_default(), .checkpoint = OT_RECOMPUTE_NONE,
                  .pcie_bytes_per_s = 55e9, .flops_per_s = 20e12, .seed = 1234, .loss_scale_log2 = 16,
                  .scale_growth_interval = 2000, .grad_direct = -1};
  o.adam.weight_decay = 0.0f;
  return o;
}

/* Checks that the checkpoint holds parameter `name` as F32 of `shape`. */
static ot_status find_param(const ot_ckpt *ck, int ndim, const int64_t *shape, const char *name,
                            const ot_st_info **info) {
  OT_TRY(ot_ckpt_find(ck, name, info));
  int ok = (*info)->ndim == ndim;
  for (int d = 0; ok && d < ndim; d++) ok = (*info)->shape[d] == shape[d];
  if (!ok || (*info)->dtype != OT_F32)
    return ot_set_error(OT_ERR_SHAPE, "%s: '%s' must be F32 of the shape config.json implies", ot_ckpt_dir(ck), name);
  return OT_OK;
}

/* A parameter-sized tensor; a plan-only trainer's wraps no memory (it is
 * planned, never run: the plan needs names, dtypes and shapes only). */
static ot_status param_tensor(ot_gpt2_trainer *g, int ndim, const int64_t *shape, ot_tensor **out, const char *prefix,
                              const char *name) {
  return ot_tlist_add(&g->keep, g->ctx, OT_F32, ndim, shape, g->o.plan_only, out, "%s%s", prefix, name);
}

/* Parameter `name` [shape]: read from ck (NULL: initialized, gpt2_init.c),
 * with its gradient and AdamW moments. */
static ot_status add_param(ot_gpt2_trainer *g, const ot_ckpt *ck, int i, int ndim, const int64_t *shape,
                           const char *name) {
  ot_gt_param *p = &g->P[i];
  snprintf(p->name, sizeof p->name, "%s", name);
  const ot_st_info *info = NULL;
  if (ck) OT_TRY(find_param(ck, ndim, shape, name, &info));
  OT_TRY(param_tensor(g, ndim, shape, &p->w, "", name));
  if (!g->o.plan_only) OT_TRY(ck ? ot_ckpt_read(ck, info, ot_tensor_data(p->w), info->bytes) : ot_gt_init_param(g, i));
  OT_TRY(param_tensor(g, ndim, shape, &p->g, "grad.", name));
  OT_TRY(param_tensor(g, ndim, shape, &p->m, "m.", name));
  return param_tensor(g, ndim, shape, &p->v, "v.", name);
}

/* Under mixed precision, the low-precision copy of matmul weight i that
 * the GEMMs read, converted from the master here (AdamW rewrites it after
 * every update). */
static ot_status add_copy(ot_gpt2_trainer *g, int i) {
  ot_gt_param *p = &g->P[i];
  if (g->o.precision == OT_F32) return OT_OK;
  const ot_tensor *w = p->w;
  int64_t shape[2] = {ot_tensor_dim(w, 0), ot_tensor_dim(w, 1)};
  OT_TRY(ot_tlist_add(&g->keep, g->ctx, g->o.precision, 2, shape, g->o.plan_only, &p->c, "%s.%s", p->name,
                      ot_dtype_name(g->o.precision)));
  if (g->o.plan_only) return OT_OK;
  return ot_convert(g->o.precision, ot_tensor_data(p->c), OT_F32, ot_tensor_data(w), ot_tensor_numel(w));
}

static ot_status load(ot_gpt2_trainer *g, const ot_ckpt *ck) {
  const ot_hf_config *c = &g->cfg;
  int64_t D = c->hidden_size, F = c->intermediate_size, V = c->vocab_size, P = c->max_position_embeddings;
  int64_t sVD[2] = {V, D}, sPD[2] = {P, D}, sD[1] = {D}, sD3[2] = {D, 3 * D}, s3[1] = {3 * D}, sDD[2] = {D, D};
  int64_t sDF[2] = {D, F}, sF[1] = {F}, sFD[2] = {F, D};
  OT_TRY(add_param(g, ck, 0, 2, sVD, "transformer.wte.weight"));
  OT_TRY(add_param(g, ck, 1, 2, sPD, "transformer.wpe.weight"));
  static const char *const names[GT_PER_LAYER] = {
      "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
      "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
      "mlp.c_proj.bias"};
  const int64_t *shapes[GT_PER_LAYER] = {sD, sD, sD3, s3, sDD, sD, sD, sD, sDF, sF, sFD, sD};
  static const int ndims[GT_PER_LAYER] = {1, 1, 2, 1, 2, 1, 1, 1, 2, 1, 2, 1};
  OT_TRY(add_copy(g, 0)); /* the tied head's */
  for (int l = 0; l < c->num_layers; l++)
    for (int k = 0; k < GT_PER_LAYER; k++) {
      char n[96];
      snprintf(n, sizeof n, "transformer.h.%d.%s", l, names[k]);
      OT_TRY(add_param(g, ck, 2 + l * GT_PER_LAYER + k, ndims[k], shapes[k], n));
      if (k == GT_ATTN_W || k == GT_PROJ_W || k == GT_FC_W || k == GT_FC2_W)
        OT_TRY(add_copy(g, 2 + l * GT_PER_LAYER + k));
    }
  int last = g->n_params - 2;
  OT_TRY(add_param(g, ck, last, 1, sD, "transformer.ln_f.weight"));
  return add_param(g, ck, last + 1, 1, sD, "transformer.ln_f.bias");
}

/* What config.json asks of training that this trainer does not do, refused
 * by name (run's checks, the activation among them, are config.json's own). */
static ot_status check_trainable(const ot_hf_config *c, const char *model_dir, int no_dropout) {
  if (!c->tie_word_embeddings)
    return ot_set_error(OT_ERR_UNSUPPORTED,
                        "%s/config.json: tie_word_embeddings false is not supported for training: the trainer trains "
                        "GPT-2's tied head (lm_head = wte) only",
                        model_dir);
  const struct { const char *key; double p; } drop[] = {
      {"resid_pdrop", c->resid_pdrop}, {"embd_pdrop", c->embd_pdrop}, {"attn_pdrop", c->attn_pdrop}};
  for (int i = 0; i < 3 && !no_dropout; i++)
    if (drop[i].p != 0)
      return ot_set_error(OT_ERR_UNSUPPORTED,
                          "%s/config.json: %s %g (an absent key is GPT2Config's 0.1): the trainer does not implement "
                          "dropout; give --no-dropout (gpt2_train.h: no_dropout) or set resid_pdrop, embd_pdrop and attn_pdrop to 0 in config.json to train without it",
                          model_dir, drop[i].key, drop[i].p);
  return OT_OK;
}

/* The parameter count (an int: the parameters' indices) and, unless the
 * trainer only plans, the host memory the f32 weights, gradients and AdamW
 * moments take, from config.json's sizes (range-checked when it was read),
 * checked before any is allocated. */
static ot_status count_params(ot_gpt2_trainer *g, const char *model_dir) {
  int ovf = 0;
  int64_t n = ot_sz_add(&ovf, 4, ot_sz_mul(&ovf, g->cfg.num_layers, GT_PER_LAYER));
  if (ovf || ot_i64_to_int(n, &g->n_params))
    return ot_set_error(OT_ERR_FORMAT, "%s/config.json: n_layer %lld makes more parameter tensors than an int counts",
                        model_dir, (long long)g->cfg.num_layers);
  int64_t numel = ot_hf_config_num_params(&g->cfg);
  /* w, grad, m, v: 4 f32 each, and the 2-byte copies (at most one per weight) */
  uint64_t bytes = (uint64_t)ot_sz_mul(&ovf, g->o.precision == OT_F32 ? 16 : 18, numel);
  if (ovf || numel < 0)
    return ot_set_error(OT_ERR_FORMAT, "%s/config.json: the parameters' byte count overflows", model_dir);
  if (g->o.plan_only) return OT_OK;
  ot_status s = ot_host_memory_check(bytes, "the f32 weights, gradients and AdamW moments");
  if (s != OT_OK)
    return ot_set_error(s, "%s/config.json: %lld parameters (n_layer %lld, n_embd %lld, n_inner %lld, vocab_size %lld): %s: "
                        "train a smaller model or on a machine with more memory",
                        model_dir, (long long)numel, (long long)g->cfg.num_layers, (long long)g->cfg.hidden_size,
                        (long long)g->cfg.intermediate_size, (long long)g->cfg.vocab_size, ot_last_error());
  return OT_OK;
}

/* The loss's chunks of rows: all B*T rows when the logits are kept, the
 * caller's size, or as many rows as 256 MiB of logits hold. */
static void choose_chunks(ot_gpt2_trainer *g) {
  const int64_t BT = (int64_t)g->o.B * g->o.T;
  int64_t n = g->o.loss_chunk_rows;
  if (!n) n = (int64_t)((256u << 20) / ot_dtype_bytes(g->o.precision, g->cfg.vocab_size > 0 ? g->cfg.vocab_size : 1));
  if (g->o.keep_logits || n > BT) n = BT;
  if (n < 1) n = 1;
  g->chunk_rows = n;
  g->n_chunks = (BT + n - 1) / n;
}

const char *ot_grad_reduce_name(ot_grad_reduce r) {
  switch (r) {
  case OT_GRAD_LOCAL: return "local";
  case OT_GRAD_ORDERED: return "ordered";
  case OT_GRAD_ALLREDUCE: return "allreduce";
  }
  return "?";
}

ot_status ot_grad_reduce_parse(const char *s, ot_grad_reduce *out) {
  for (int r = OT_GRAD_LOCAL; r <= OT_GRAD_ALLREDUCE; r++)
    if (s && !strcmp(s, ot_grad_reduce_name((ot_grad_reduce)r))) return *out = (ot_grad_reduce)r, OT_OK;
  return ot_set_error(OT_ERR_INVALID_ARG, "'%s': expected local, ordered or allreduce", s ? s : "");
}

/* Whether MPI may be handed the device memory itself: a CUDA-aware MPI on
 * a CUDA GPU, or device memory that is the host's (the host backend, the
 * x86_64 host-offload plugin's emulated devices). */
static int mpi_reads_device(const ot_gpt2_trainer *g, int dev) {
  if (ot_ctx_backend(g->ctx) == OT_BACKEND_HOST || ot_dev_is_host(dev) || !strcmp(OT_OFFLOAD_NAME, "host")) return 1;
  return ot_dev_is_gpu(dev) && ot_comm_cuda_aware(g->comm);
}

/* Data parallel (dp.h): asked for by a comm or by grad_reduce; a bucket
 * per update group. */
static ot_status setup_dp(ot_gpt2_trainer *g) {
  g->reduce = g->o.grad_reduce;
  if (!g->o.comm && g->reduce == OT_GRAD_LOCAL) return OT_OK;
  if (g->reduce == OT_GRAD_LOCAL) g->reduce = OT_GRAD_ORDERED;
  if ((unsigned)g->reduce > OT_GRAD_ALLREDUCE)
    return ot_set_error(OT_ERR_INVALID_ARG, "gpt2_train: grad_reduce %d is not local, ordered or allreduce",
                        (int)g->reduce);
  g->comm = g->o.comm;
  if (!g->comm) OT_TRY(ot_comm_self(&g->own_comm));
  if (!g->comm) g->comm = g->own_comm;
  const int dev = ot_ctx_device(g->ctx, g->so.device_index);
  int direct = 0;
  if (g->reduce == OT_GRAD_ALLREDUCE && g->o.grad_direct != 0) {
    const int can = mpi_reads_device(g, dev);
    if (g->o.grad_direct == 1 && !can)
      return ot_set_error(OT_ERR_UNSUPPORTED,
                          "gpt2_train: grad_direct: %s cannot read device memory (it is not CUDA-aware); use host "
                          "staging (grad_direct 0 or -1)",
                          ot_comm_describe(g->comm));
    /* auto: direct only where it saves the copies: a CUDA-aware MPI on a GPU */
    direct = g->o.grad_direct == 1 || (can && ot_dev_is_gpu(dev));
  }
  ot_dp_opts d = {.comm = g->comm, .mode = g->reduce, .rounds = g->o.accum, .direct = direct};
  OT_TRY(ot_dp_create(&d, &g->dp));
  for (int k = 0; k < ot_gt_num_groups(g); k++) {
    int i0, n, id;
    ot_gt_group(g, k, &i0, &n);
    ot_tensor *t[GT_PER_LAYER];
    for (int j = 0; j < n; j++) t[j] = g->P[i0 + j].g;
    OT_TRY(ot_dp_add_bucket(g->dp, n, t, &id));
  }
  const size_t n = (size_t)g->o.accum * (size_t)g->o.B * (size_t)g->o.T;
  const size_t nl = (size_t)ot_comm_size(g->comm) * (size_t)g->o.accum * (size_t)g->n_chunks;
  g->mb_in = malloc(n * sizeof *g->mb_in);
  g->mb_tg = malloc(n * sizeof *g->mb_tg);
  g->losses = malloc(nl * sizeof *g->losses);
  if (!g->mb_in || !g->mb_tg || !g->losses) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
  return OT_OK;
}

ot_status ot_gpt2_train_create(ot_ctx *ctx, const char *model_dir, const ot_gpt2_train_opts *o, const ot_sched_opts *so,
                       ot_gpt2_trainer **out) {
  *out = NULL;
  ot_gpt2_trainer *g = calloc(1, sizeof *g);
  if (!g) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
  g->ctx = ctx;
  g->o = o ? *o : ot_gpt2_train_opts_default();
  g->so = so ? *so : ot_sched_opts_default();
  g->so.defer_writeback = 1; /* the state stays on the device between steps; ot_gpt2_train_sync writes it home */
  ot_ckpt *ck = NULL;
  ot_status s = ot_hf_config_load(model_dir, &g->cfg);
  if (s == OT_OK && g->cfg.arch != OT_ARCH_GPT2)
    s = ot_set_error(OT_ERR_UNSUPPORTED, "%s: gpt2_train trains gpt2 models, not '%s'", model_dir, g->cfg.model_type);
  if (s == OT_OK) s = check_trainable(&g->cfg, model_dir, g->o.no_dropout);
  if (s == OT_OK && (g->o.B < 1 || g->o.T < 1 || g->o.T > g->cfg.max_position_embeddings))
    s = ot_set_error(OT_ERR_INVALID_ARG, "gpt2_train: B %d and T %d must be >= 1, T <= n_positions %lld", g->o.B,
                     g->o.T, (long long)g->cfg.max_position_embeddings);
  if (s == OT_OK && g->o.precision != OT_F32 && g->o.precision != OT_BF16 && g->o.precision != OT_F16)
    s = ot_set_error(OT_ERR_UNSUPPORTED,
                     "gpt2_train: precision %s: the GPT-2 trainer computes in f32, or in bf16 or f16 (mixed "
                     "precision)",
                     ot_dtype_name(g->o.precision));
  if (s == OT_OK && g->o.precision == OT_F16 && (g->o.loss_scale_log2 < -126 || g->o.loss_scale_log2 > 127 ||
                                                 g->o.scale_growth_interval < 1))
    s = ot_set_error(OT_ERR_INVALID_ARG,
                     "gpt2_train: f16 loss scale 2^%d must have -126 <= k <= 127 and a growth interval %d >= 1",
                     g->o.loss_scale_log2, g->o.scale_growth_interval);
  g->scale_k = g->o.loss_scale_log2;
  if (s == OT_OK && g->o.loss_chunk_rows < 0)
    s = ot_set_error(OT_ERR_INVALID_ARG, "gpt2_train: loss_chunk_rows %d must be >= 0 (0: automatic)",
                     g->o.loss_chunk_rows);
  if (s == OT_OK) s = count_params(g, model_dir);
  if (s == OT_OK) choose_chunks(g);
  if (s == OT_OK) {
    g->P = calloc((size_t)g->n_params, sizeof *g->P);
    if (!g->P) s = ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
  }
  if (s == OT_OK && (g->o.accum < 1 || (g->o.keep_logits && g->o.accum != 1)))
    s = ot_set_error(OT_ERR_INVALID_ARG, "gpt2_train: accum %d must be >= 1 (and 1 to keep the logits)", g->o.accum);
  if (s == OT_OK) {
    size_t na = (size_t)g->o.accum;
    g->recompute = calloc((size_t)g->cfg.num_layers, sizeof *g->recompute);
    g->ids = calloc(na, sizeof *g->ids);
    g->targets = calloc(na, sizeof *g->targets);
    g->loss = calloc(na, sizeof *g->loss);
    if (!g->recompute || !g->ids || !g->targets || !g->loss)
      s = ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
  }
  if (s == OT_OK && (unsigned)g->o.checkpoint > OT_RECOMPUTE_AUTO)
    s = ot_set_error(OT_ERR_INVALID_ARG, "gpt2_train: checkpoint mode %d is not none, all or auto", (int)g->o.checkpoint);
  if (s == OT_OK && g->o.checkpoint == OT_RECOMPUTE_AUTO && !(g->o.pcie_bytes_per_s > 0 && g->o.flops_per_s > 0))
    s = ot_set_error(OT_ERR_INVALID_ARG, "gpt2_train: the auto checkpoint cost model needs positive rates");
  if (s == OT_OK && !g->o.init_random) s = ot_ckpt_open(model_dir, &ck);
  if (s == OT_OK) s = load(g, ck);
  ot_ckpt_close(ck);
  if (s == OT_OK) s = setup_dp(g);
  if (s == OT_OK) s = ot_gt_choose_and_plan(g);
  if (s == OT_OK && g->dp && !g->o.plan_only) s = ot_dp_prepare(g->dp, ot_ctx_device(ctx, g->so.device_index));
  if (s != OT_OK) {
    ot_gpt2_train_destroy(g);
    return s;
  }
  *out = g;
  return OT_OK;
}

void ot_gpt2_train_destroy(ot_gpt2_trainer *g) {
  if (!g) return;
  if (g->ids) ot_gt_release_recording(g);
  ot_dp_destroy(g->dp); /* after the plan: no op of it runs any more */
  ot_comm_destroy(g->own_comm);
  free(g->mb_in);
  free(g->mb_tg);
  free(g->losses);
  ot_tlist_release(&g->keep);
  free(g->ids);
  free(g->targets);
  free(g->loss);
  free(g->recompute);
  free(g->host_ops);
  free(g->P);
  free(g);
}

/* The sum over the step's micro-batches of each one's mean loss (each
 * chunk's loss is the mean over its rows: weighted by its share), in the
 * order of the global micro-batches: with data parallelism every rank's
 * chunk losses are gathered first, so every rank (and any number of
 * ranks) adds the same numbers in the same order. */
static ot_status step_loss(ot_gpt2_trainer *g, double *sum) {
  const int R = ot_gt_ranks(g), A = g->o.accum;
  const int64_t C = g->n_chunks;
  const double n = (double)g->o.B * (double)g->o.T;
  if (g->dp) {
    float *mine = g->losses + (size_t)ot_comm_rank(g->comm) * (size_t)A * (size_t)C;
    for (int mb = 0; mb < A; mb++) memcpy(mine + mb * C, ot_tensor_data(g->loss[mb]), (size_t)C * sizeof *mine);
    const size_t bytes = (size_t)A * (size_t)C * sizeof *mine;
    float *own = malloc(bytes); /* allgather's send and receive buffers must not overlap */
    if (!own) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "gpt2_train: no host memory");
    memcpy(own, mine, bytes);
    ot_status st = ot_comm_allgather(g->comm, own, bytes, g->losses);
    free(own);
    OT_TRY(st);
  }
  *sum = 0;
  for (int k = 0; k < A * R; k++) { /* global micro-batch k: rank k % R's local k / R */
    const float *l = g->dp ? g->losses + ((size_t)(k % R) * (size_t)A + (size_t)(k / R)) * (size_t)C
                           : (const float *)ot_tensor_data(g->loss[k]);
    for (int64_t c = 0; c < C; c++) *sum += (double)l[c] * (double)ot_gt_chunk_rows(g, c) / n;
  }
  return OT_OK;
}

ot_status ot_gpt2_train_step(ot_gpt2_trainer *g, const int32_t *inputs, const int32_t *targets, ot_trace *trace, float *loss) {
  if (g->o.plan_only)
    return ot_set_error(OT_ERR_INVALID_ARG, "gpt2_train: the trainer was made with plan_only; it cannot run a step");
  const size_t n = (size_t)g->o.B * (size_t)g->o.T;
  if (g->dp) { /* this rank's micro-batches of the global batch: j * size + rank */
    const int R = ot_comm_size(g->comm), me = ot_comm_rank(g->comm);
    for (int mb = 0; mb < g->o.accum; mb++) {
      const size_t k = (size_t)mb * (size_t)R + (size_t)me;
      memcpy(g->mb_in + mb * n, inputs + k * n, n * sizeof *inputs);
      memcpy(g->mb_tg + mb * n, targets + k * n, n * sizeof *targets);
    }
    inputs = g->mb_in;
    targets = g->mb_tg;
  }
  for (size_t i = 0; g->n_chunks > 1 && i < n * (size_t)g->o.accum; i++)
    if (targets[i] == -100)
      return ot_set_error(OT_ERR_INVALID_ARG,
                          "gpt2_train: target %zu is -100 (ignored), but the loss is computed in %lld chunks of %lld "
                          "rows, each the mean of its own rows; set loss_chunk_rows to B*T (%zu) for one chunk",
                          i, (long long)g->n_chunks, (long long)g->chunk_rows, n);
  for (int mb = 0; mb < g->o.accum; mb++) {
    memcpy(ot_tensor_data(g->ids[mb]), inputs + mb * n, n * sizeof *inputs);
    memcpy(ot_tensor_data(g->targets[mb]), targets + mb * n, n * sizeof *targets);
  }
  OT_TRY(ot_program_set_scalar(g->prog, g->step_slot, g->updates + 1));
  if (g->o.precision == OT_F16) OT_TRY(ot_program_set_scalar(g->prog, g->scale_slot, g->scale_k));
  OT_TRY(ot_sched_run(g->plan, trace));
  g->steps_done++;
  /* f16: the device skipped the update if the gradients overflowed */
  const int skipped = g->o.precision == OT_F16 && ((const float *)ot_tensor_data(g->stats))[1] != 0.0f;
  if (skipped) g->skipped++;
  else g->updates++;
  if (g->o.precision == OT_F16) ot_loss_scale_next(&g->scale_k, &g->good_run, g->o.scale_growth_interval, skipped);
  double sum;
  OT_TRY(step_loss(g, &sum));
  if (loss) *loss = (float)(sum / (double)(g->o.accum * ot_gt_ranks(g))); /* one division: the same for any split of accum x ranks */
  /* Issue 14: non-finite logits make a non-finite loss, checked once per step
   * (the update has used it already: the weights are no longer finite) */
  if (!isfinite(sum))
    return ot_set_error(OT_ERR_NUMERIC,
                        "gpt2_train: step %lld: the loss is %s: the logits or the weights are no longer finite; "
                        "lower the learning rate (--lr), and check the weights (and the data's ids) if it happens "
                        "at the first step",
                        (long long)g->steps_done, isnan(sum) ? "NaN" : "infinite");
  return OT_OK;
}

ot_status ot_gpt2_train_sync(ot_gpt2_trainer *g) { return g->plan ? ot_sched_sync(g->plan) : OT_OK; }

int64_t ot_gpt2_train_skipped_steps(const ot_gpt2_trainer *g) { return g->skipped; }
ot_grad_reduce_stats ot_gpt2_train_reduce_stats(const ot_gpt2_trainer *g) {
  return g->dp ? ot_dp_stats(g->dp) : (ot_grad_reduce_stats){0};
}
int ot_gpt2_train_loss_scale_log2(const ot_gpt2_trainer *g) { return g->o.precision == OT_F16 ? g->scale_k : 0; }
int ot_gpt2_train_num_params(const ot_gpt2_trainer *g) { return g->n_params; }
const char *ot_gpt2_train_param_name(const ot_gpt2_trainer *g, int i) { return i >= 0 && i < g->n_params ? g->P[i].name : NULL; }
const ot_tensor *ot_gpt2_train_param(const ot_gpt2_trainer *g, int i) { return i >= 0 && i < g->n_params ? g->P[i].w : NULL; }
const ot_tensor *ot_gpt2_train_grad(const ot_gpt2_trainer *g, int i) { return i >= 0 && i < g->n_params ? g->P[i].g : NULL; }
const ot_tensor *ot_gpt2_train_logits(const ot_gpt2_trainer *g) { return g->logits; }
const ot_program *ot_gpt2_train_program(const ot_gpt2_trainer *g) { return g->prog; }
const ot_plan *ot_gpt2_train_plan(const ot_gpt2_trainer *g) { return g->plan; }
const ot_hf_config *ot_gpt2_train_config(const ot_gpt2_trainer *g) { return &g->cfg; }
int ot_gpt2_train_recomputed(const ot_gpt2_trainer *g, int layer) {
  return layer >= 0 && layer < g->cfg.num_layers ? g->recompute[layer] : 0;
}

int64_t ot_gpt2_train_num_weights(const ot_gpt2_trainer *g) {
  int64_t n = 0;
  for (int i = 0; i < g->n_params; i++) n += ot_tensor_numel(g->P[i].w);
  return n;
}
