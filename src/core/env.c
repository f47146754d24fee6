/* env.c — the library's own OMPTENSOR_* variables (env.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"

typedef enum kind {
  CHOICE, /* one of values[] */
  WORDS,  /* a comma-separated list of values[] */
  INT,    /* a decimal integer in [lo, hi] */
  READER, /* checked where it is read, which refuses or warns itself */
} kind;

typedef struct env_var {
  const char *name;
  kind kind;
  const char *values[4]; /* CHOICE, WORDS; NULL-ended */
  int64_t lo, hi;        /* INT */
  const char *what;      /* the accepted values for the notice */
} env_var;

static const env_var vars[] = {
    {"OMPTENSOR_DEBUG", WORDS, {"plan", "probe"}, 0, 0,
     "plan (print every plan), probe (check the budget against the GPU), comma-separated"},
    {"OMPTENSOR_DISK_IO", CHOICE, {"direct", "buffered"}, 0, 0,
     "direct (the default: O_DIRECT where the filesystem has it) or buffered"},
    {"OMPTENSOR_GEMM", CHOICE, {"portable", "auto", "cublas"}, 0, 0, "auto (the default), portable or cublas"},
    {"OMPTENSOR_GEMV_GRID", INT, {NULL}, 0, INT32_MAX, "a number of blocks, 0 (the default) for one row per warp"},
    {"OMPTENSOR_GEMV_M1", CHOICE, {"0", "1"}, 0, 0, "1 (the default: the decode GEMV's own kernel) or 0"},
    {"OMPTENSOR_GEMV_QG", CHOICE, {"0", "1"}, 0, 0,
     "0 (the default) or 1 (q8b and q4b decode GEMVs read 16 bytes a lane, kernels/qgroup.h: for measuring)"},
    {"OMPTENSOR_STEP_KERNEL", CHOICE, {"0", "1", "nofuse"}, 0, 0,
     "0 (the default until a wrong result on the GPU is found: one launch per op), 1 (runs of decode ops in one "
     "launch on a GPU, kernels/step_gpu.h) or nofuse (one launch, no norm fused into the GEMV after it: for "
     "measuring)"},
    {"OMPTENSOR_STEP_MMA", CHOICE, {"0", "1"}, 0, 0,
     "0 (the default until measured on a GPU) or 1: a batched decode step's GEMMs of 9 to 32 bf16 rows on tensor "
     "cores inside the step kernel (kernels/mma_gpu.h; with OMPTENSOR_STEP_KERNEL=1) instead of one cuBLAS call "
     "and wait each"},
    {"OMPTENSOR_VERIFY", CHOICE, {"0", "1", "2"}, 0, 0,
     "0 (off, the default), 1 (checksums) or 2 (also read device copies back)"},
    {"OMPTENSOR_PREFILL_DTYPE", READER, {NULL}, 0, 0, NULL}, /* refused by name where generation starts */
    {"OMPTENSOR_GPU_WAIT", READER, {NULL}, 0, 0, NULL},      /* refused by name when a context starts */
    {"OMPTENSOR_FAULT", READER, {NULL}, 0, 0, NULL},         /* its own parser's notice */
};

static const env_var *find(const char *name) {
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (!strcmp(vars[i].name, name)) return &vars[i];
  return NULL;
}

int ot_env_known(const char *name) { return name && find(name) != NULL; }

/* The one line, once per variable; the value shown as messages show them
 * (cut, control bytes escaped) so that it stays one line. */
static void notice(const env_var *v, const char *value) {
  char shown[80];
  size_t k = 0;
  for (size_t i = 0; value[i] && k + 5 < sizeof shown && i < 48; i++) {
    unsigned char c = (unsigned char)value[i];
    k += (size_t)snprintf(shown + k, sizeof shown - k, c < 0x20 || c >= 0x7f ? "\\x%02x" : "%c", c);
  }
  ot_warn_once(v->name, "%s='%s' ignored: use %s", v->name, shown, v->what);
}

static int choice_of(const env_var *v, const char *e, int dflt) {
  for (int i = 0; v->values[i]; i++)
    if (!strcasecmp(e, v->values[i])) return i;
  notice(v, e);
  return dflt;
}

int ot_env_choice(const char *name, int dflt) {
  const env_var *v = find(name);
  const char *e = getenv(name);
  if (!v || v->kind != CHOICE || !e || !*e) return dflt;
  return choice_of(v, e, dflt);
}

/* Every word of e is one of v's (else the notice); *has: whether `word` is. */
static void words_of(const env_var *v, const char *e, const char *word, int *has) {
  int bad = 0;
  *has = 0;
  for (const char *p = e; *p;) {
    size_t n = strcspn(p, ",");
    int known = 0;
    for (int i = 0; v->values[i]; i++)
      if (strlen(v->values[i]) == n && !strncasecmp(p, v->values[i], n)) known = 1;
    if (word && strlen(word) == n && !strncasecmp(p, word, n)) *has = 1;
    bad |= !known;
    p += n + (p[n] == ',');
  }
  if (bad) notice(v, e);
}

int ot_env_word(const char *name, const char *word) {
  const env_var *v = find(name);
  const char *e = getenv(name);
  int has = 0;
  if (v && v->kind == WORDS && e) words_of(v, e, word, &has);
  return has;
}

static int64_t int_of(const env_var *v, const char *e, int64_t dflt) {
  char *end;
  long long x = strtoll(e, &end, 10);
  if (e[0] < '0' || e[0] > '9' || *end || x < v->lo || x > v->hi) {
    notice(v, e);
    return dflt;
  }
  return x;
}

int64_t ot_env_int(const char *name, int64_t dflt) {
  const env_var *v = find(name);
  const char *e = getenv(name);
  if (!v || v->kind != INT || !e || !*e) return dflt;
  return int_of(v, e, dflt);
}

void ot_env_check(void) {
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const env_var *v = &vars[i];
    const char *e = getenv(v->name);
    int has;
    if (!e || !*e) continue;
    switch (v->kind) {
    case CHOICE: (void)choice_of(v, e, 0); break;
    case WORDS: words_of(v, e, NULL, &has); break;
    case INT: (void)int_of(v, e, 0); break;
    case READER: break;
    }
  }
}
