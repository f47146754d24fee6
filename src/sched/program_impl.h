/* program_impl.h (internal) — the recorded program and its analysis.
 *
 * Residency is per storage: the analysis numbers the distinct storages the
 * ops touch (in first-use order) and gives every op its distinct accesses. */
#ifndef OT_SCHED_PROGRAM_IMPL_H
#define OT_SCHED_PROGRAM_IMPL_H

#include "memory/tensor_impl.h"
#include "omptensor/program.h"
#include "sched/batch.h"

/* storage roles (bits) */
enum {
  OT_ROLE_INPUT = 1,      /* marked input */
  OT_ROLE_OUTPUT = 2,     /* marked output */
  OT_ROLE_PERSIST = 4,    /* marked persistent */
  OT_ROLE_WRITTEN = 8,    /* some op writes it */
  OT_ROLE_NEEDS_HOME = 16, /* its first access reads the value the run starts with */
  OT_ROLE_WRITEBACK = 32, /* its home must hold the result after a run */
  OT_ROLE_KEEP = 64,      /* a clean copy may stay resident for the next run */
  OT_ROLE_CACHE = 128,    /* ot_program_mark_cache: placed without upload, never written home, may stay */
};

typedef struct ot_access {
  int st;             /* storage index */
  unsigned char read; /* the op reads it (or writes only part of it) */
  unsigned char write;
} ot_access;

typedef struct ot_op {
  char *name;
  ot_op_fn run;
  ot_op_emit_fn emit;     /* batch.h: NULL for an op that always runs alone */
  ot_op_launch_fn launch;
  size_t insn_bytes;
  int n_in, n_out;
  ot_tensor **t; /* [n_in + n_out]: inputs then outputs */
  int *ts;       /* [n_in + n_out]: storage index of each */
  void *params;
  size_t params_bytes;
  double flops, bytes;
  int n_acc;
  ot_access *acc; /* distinct storages */
} ot_op;

/* How op o accesses storage st (its entry in o->acc), or NULL if it does not. */
static inline const ot_access *ot_op_access(const ot_op *o, int st) {
  for (int k = 0; k < o->n_acc; k++)
    if (o->acc[k].st == st) return &o->acc[k];
  return NULL;
}

typedef struct ot_prog_storage {
  ot_storage *st;
  uint64_t id;       /* st->id: matches storages across programs without touching st, which may be
                        gone (ot_sched_plan_after's previous program outlives tensors it used) */
  const char *name;  /* the name of the first view that used it */
  size_t bytes;      /* storage bytes */
  size_t block;      /* bytes on the device (rounded up to OT_SCHED_ALIGN; 0 for an empty storage) */
  unsigned role;
  int first_use, last_use, last_write; /* op indices (-1: none) */
  int n_uses;
  int *uses;         /* [n_uses] ops using it, increasing */
} ot_prog_storage;

typedef struct ot_mark {
  const ot_storage *st;
  unsigned role;
} ot_mark;

struct ot_program {
  ot_ctx *ctx;
  int n_ops, cap_ops;
  ot_op *ops;
  int n_st, cap_st;
  ot_prog_storage *st;
  int n_marks, cap_marks;
  ot_mark *marks;
  int n_scalars, cap_scalars;
  int64_t *scalars;
  char **scalar_names;
  int max_args;      /* most tensors of one op */
  uint64_t version;  /* bumped by every change that invalidates plans */
  int analysed;      /* roles and uses are up to date */
};

/* Computes roles, uses and per-op accesses (idempotent). */
ot_status ot_program_analyse(ot_program *p);

/* Bytes a storage takes in the arena. */
size_t ot_sched_block_bytes(size_t bytes);

#endif
