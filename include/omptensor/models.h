/* models.h — the library's models: Llama-family and GPT-2 inference from
 * Hugging Face checkpoints. They are written on the public API (ops.h,
 * program.h, lm.h, weightset.h) as a model of your own would be; their
 * sources are src/models/.
 *
 *     ot_lm *m;
 *     ot_model_load(ctx, "path/to/hf_model_dir", OT_DTYPE_KEEP, progress, user, &m);
 *     ... ot_generate(m, ...) ...
 *     ot_lm_destroy(m);
 */
#ifndef OMPTENSOR_MODELS_H
#define OMPTENSOR_MODELS_H

#include "omptensor/hfconfig.h"
#include "omptensor/lm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pass as the weight dtype to keep each tensor's checkpoint dtype. */
#define OT_DTYPE_KEEP ((ot_dtype)-1)

/* Loads a Hugging Face model directory (config.json + safetensors), choosing
 * the architecture from config.json. Matmul weights become `wdtype` (f32,
 * f16, bf16, q8b or OT_DTYPE_KEEP); norms and biases are kept in f32. */
ot_status ot_model_load(ot_ctx *ctx, const char *dir, ot_dtype wdtype, ot_progress_fn progress, void *user,
                        ot_lm **out);

/* The same model with its weights checked but not read: tensors carry names,
 * dtypes and shapes only. It can be recorded and planned (to check a budget
 * before loading gigabytes), never run. */
ot_status ot_model_load_shapes(ot_ctx *ctx, const char *dir, ot_dtype wdtype, ot_lm **out);

ot_status ot_llama_load(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype,
                        ot_progress_fn progress, void *user, ot_lm **out);
ot_status ot_gpt2_load(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype,
                       ot_progress_fn progress, void *user, ot_lm **out);
ot_status ot_llama_shapes(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype, ot_lm **out);
ot_status ot_gpt2_shapes(ot_ctx *ctx, const ot_hf_config *cfg, const ot_ckpt *ck, ot_dtype wdtype, ot_lm **out);

/* For the models' own make functions: an ot_lm shell holding `impl`, with
 * its vtable, context and the config's vocabulary and positions (NULL if out
 * of host memory); and the end of a make: records the weights' bytes and
 * count and hands m out, or destroys it if s failed. */
ot_lm *ot_model_shell(ot_ctx *ctx, const ot_lm_vtable *vt, void *impl, const ot_hf_config *cfg);
ot_status ot_model_finish(ot_lm *m, uint64_t weight_bytes, int n_weights, ot_status s, ot_lm **out);

/* A deterministic synthetic Llama (no checkpoint): weights drawn from `seed`,
 * scaled like a trained model's so activations stay in range. The demo's model. */
ot_status ot_llama_synthetic(ot_ctx *ctx, const ot_hf_config *cfg, ot_dtype wdtype, uint64_t seed,
                             ot_progress_fn progress, void *user, ot_lm **out);
/* A config for ot_llama_synthetic: Llama's defaults (SiLU, RMSNorm eps 1e-5,
 * rope theta 1e4, no BOS, 4096 positions) with these widths; head_dim is
 * hidden / heads. Llama-2-7B is (4096, 11008, 32, 32, 32000, 32). */
void ot_llama_synthetic_config(ot_hf_config *c, int64_t hidden, int64_t intermediate, int64_t heads, int64_t kv_heads,
                               int64_t vocab, int64_t layers);

#ifdef __cplusplus
}
#endif
#endif
