/* mlp_model.c — the student's parameters and AdamW moments, the teacher,
 * and the batches it labels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_impl.h"

/* splitmix64 of a counter: batches depend only on (seed, step, micro-batch, row). */
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static float uniform(uint64_t key) { /* [-1, 1) */
  return (float)((mix(key) >> 40) * 0x1p-24) * 2.0f - 1.0f;
}

static void fill(float *x, int64_t n, uint64_t key, float scale) {
  for (int64_t i = 0; i < n; i++) x[i] = scale * uniform(mix(key) + (uint64_t)i);
}

static float gelu(float x) { /* the tanh form, as ot_op_gelu */
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

/* Wc[l]: W[l] itself (fp32) or its bf16/f16 copy, written here from the f32
 * master (AdamW rewrites it after every update). */
static ot_status low_copy(mlp_trainer *t, int l) {
  if (t->c.precision == MLP_FP32) {
    t->Wc[l] = t->W[l];
    return OT_OK;
  }
  int64_t sW[2] = {t->dims[l + 1], t->dims[l]}, n = sW[0] * sW[1];
  ot_dtype dt = t->c.precision == MLP_BF16 ? OT_BF16 : OT_F16;
  OT_TRY(ot_tlist_new(&t->state, t->ctx, dt, 2, sW, &t->Wc[l], "W%d.%s", l, mlp_precision_name(t->c.precision)));
  float *buf = malloc((size_t)n * sizeof *buf);
  if (!buf) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "mlp: no host memory for the copy of W%d", l);
  ot_status s = ot_tensor_read_f32(t->W[l], buf, n);
  if (s == OT_OK) s = ot_tensor_write_f32(t->Wc[l], buf, n);
  free(buf);
  return s;
}

ot_status mlp_model_init(mlp_trainer *t) {
  const mlp_config *c = &t->c;
  t->w = (ot_wset){.ctx = t->ctx, .seed = c->seed};
  for (int l = 0; l < c->layers; l++) {
    int64_t sW[2] = {t->dims[l + 1], t->dims[l]}, sb[1] = {t->dims[l + 1]};
    /* PyTorch's Linear init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    float bound = 1.0f / sqrtf((float)t->dims[l]);
    OT_TRY(ot_wset_add(&t->w, OT_F32, 2, sW, bound, &t->W[l], "W%d", l));
    OT_TRY(ot_wset_add(&t->w, OT_F32, 1, sb, bound, &t->b[l], "b%d", l));
    OT_TRY(ot_tlist_new(&t->state, t->ctx, OT_F32, 2, sW, &t->mW[l], "m.W%d", l));
    OT_TRY(ot_tlist_new(&t->state, t->ctx, OT_F32, 2, sW, &t->vW[l], "v.W%d", l));
    OT_TRY(ot_tlist_new(&t->state, t->ctx, OT_F32, 1, sb, &t->mb[l], "m.b%d", l));
    OT_TRY(ot_tlist_new(&t->state, t->ctx, OT_F32, 1, sb, &t->vb[l], "v.b%d", l));
    OT_TRY(low_copy(t, l));
  }
  int64_t in = c->in_dim, th = c->teacher_hidden, nc = c->classes;
  t->tW1 = malloc((size_t)(th * in + th + nc * th + nc) * sizeof(float));
  t->xbuf = malloc((size_t)(c->batch * in) * sizeof(float));
  t->ybuf = malloc((size_t)c->batch * sizeof(int32_t));
  if (!t->tW1 || !t->xbuf || !t->ybuf) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "mlp: no host memory for the teacher");
  t->tb1 = t->tW1 + th * in;
  t->tW2 = t->tb1 + th;
  t->tb2 = t->tW2 + nc * th;
  /* the teacher's weights are larger than an init so its classes have sharp,
   * non-linear boundaries */
  uint64_t k = c->seed ^ 0x7eac7e5ull;
  fill(t->tW1, th * in, k + 1, 2.0f / sqrtf((float)in));
  fill(t->tb1, th, k + 2, 0.5f);
  fill(t->tW2, nc * th, k + 3, 2.0f / sqrtf((float)th));
  fill(t->tb2, nc, k + 4, 0.1f);
  return OT_OK;
}

void mlp_model_release(mlp_trainer *t) {
  ot_wset_destroy(&t->w);
  ot_tlist_release(&t->state);
  free(t->tW1);
  free(t->xbuf);
  free(t->ybuf);
}

/* The teacher's class of one input row x [in]. */
static int32_t teacher_label(const mlp_trainer *t, const float *x, float *h /* [th] */) {
  const int in = t->c.in_dim, th = t->c.teacher_hidden, nc = t->c.classes;
  for (int j = 0; j < th; j++) {
    float s = t->tb1[j];
    for (int i = 0; i < in; i++) s += t->tW1[j * in + i] * x[i];
    h[j] = gelu(s);
  }
  int32_t best = 0;
  float bv = -INFINITY;
  for (int c = 0; c < nc; c++) {
    float s = t->tb2[c];
    for (int j = 0; j < th; j++) s += t->tW2[c * th + j] * h[j];
    if (s > bv) bv = s, best = c;
  }
  return best;
}

ot_status mlp_model_batch(mlp_trainer *t, int64_t step, int mb) {
  const int B = t->c.batch, in = t->c.in_dim;
  float *h = malloc((size_t)t->c.teacher_hidden * sizeof *h);
  if (!h) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "mlp: no host memory for a batch");
  uint64_t key = mix(t->c.seed ^ mix((uint64_t)step * 1024u + (uint64_t)mb));
  /* inputs uniform in [-sqrt 3, sqrt 3): unit variance */
  fill(t->xbuf, (int64_t)B * in, key, 1.7320508f);
  for (int r = 0; r < B; r++) t->ybuf[r] = teacher_label(t, t->xbuf + (int64_t)r * in, h);
  free(h);
  OT_TRY(ot_tensor_write_f32(t->x[mb], t->xbuf, (int64_t)B * in));
  memcpy(ot_tensor_data(t->y[mb]), t->ybuf, (size_t)B * sizeof(int32_t));
  return OT_OK;
}
