/* program.h — recording a tensor program: an ordered list of operations.
 *
 * A model step is recorded once and planned once (sched.h), then replayed as
 * often as needed; scalars that change between replays (the position of a
 * decode step) are run-time scalars, read by the ops when they run.
 *
 *     ot_program *p;
 *     ot_program_create(ctx, &p);
 *     int pos;
 *     ot_program_scalar_create(p, "pos", &pos);
 *     ot_tensor *in[] = {x, w}, *out[] = {y};
 *     ot_op_desc d = {.name = "matmul", .run = my_matmul, .n_in = 2, .in = in,
 *                     .n_out = 1, .out = out, .params = &prm, .params_bytes = sizeof prm};
 *     ot_program_add_op(p, &d);
 *     ot_program_mark_input(p, x);
 *     ot_program_mark_output(p, y);
 *     ... plan (sched.h), then per replay: write x, ot_program_set_scalar(p, pos, t), ot_sched_run
 *
 * Tensors are referenced, not owned: every tensor given to the program must
 * outlive it (and the plans made from it). Residency is per storage: views of
 * one storage move together.
 *
 * Roles come from use (and the marks):
 *   weight      read, never written, not an input: its home is set by the user
 *               once; a device copy is clean and is dropped without write-back;
 *               a plan may keep it resident between runs.
 *   input       ot_program_mark_input: the user writes its home before every
 *               run; device copies never survive a run.
 *   output      ot_program_mark_output: its home holds the result after a run.
 *   persistent  ot_program_mark_persistent, or any written storage whose first
 *               access reads it (a KV cache): its home holds the truth after
 *               every run (it is written home after its last write), and a
 *               clean device copy may stay resident for the next run.
 *   temporary   everything else (activations): dead after its last use, freed
 *               without write-back; written home only if evicted while live.
 * Between runs the caller may change the homes of inputs only. After writing
 * the home of a weight or persistent tensor, call ot_sched_invalidate() on the
 * plans of the program, or the next run may use a stale device copy.
 *
 * An output is assumed fully overwritten by its op. An op that leaves part of
 * a tensor unchanged (writes one row of a cache) must list it as an input
 * too (in-place); an output view that does not cover its whole storage is
 * treated that way automatically.
 */
#ifndef OMPTENSOR_PROGRAM_H
#define OMPTENSOR_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "omptensor/context.h"
#include "omptensor/status.h"
#include "omptensor/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ot_program ot_program;

/* What an op's run() receives. Pointers are DEVICE addresses of element 0
 * of each view (storage device base + the view's byte offset) on `device`,
 * valid only during the call; on the host backend they are home addresses. */
typedef struct ot_op_exec {
  int device;                /* OpenMP device number to run on (the initial device for the host backend) */
  int op_index;              /* position in the program */
  const char *name;          /* the op's name */
  int n_in, n_out;
  void *const *in;           /* [n_in] device addresses */
  void *const *out;          /* [n_out] device addresses */
  ot_tensor *const *in_t;    /* [n_in] the views, for shapes and strides */
  ot_tensor *const *out_t;   /* [n_out] */
  const void *params;        /* the op's params blob (a copy made at recording) */
  size_t params_bytes;
  const int64_t *scalars;    /* [n_scalars] the program's run-time scalars */
  int n_scalars;
  void *run;                 /* the executor's, for ot_op_fill (NULL outside a run) */
} ot_op_exec;

/* Runs the op synchronously on e->device; never moves data. A failure is
 * returned (with ot_fail) and stops the run. */
typedef ot_status (*ot_op_fn)(const ot_op_exec *e);

typedef struct ot_op_desc {
  const char *name;          /* for plans, traces and errors; copied */
  ot_op_fn run;
  int n_in;
  ot_tensor *const *in;      /* [n_in] views read */
  int n_out;
  ot_tensor *const *out;     /* [n_out] views written; an in-place op lists the view in both */
  const void *params;        /* copied (params_bytes bytes); may be NULL */
  size_t params_bytes;
  double flops;              /* cost hints, optional (0: unknown) */
  double bytes;
} ot_op_desc;

ot_status ot_program_create(ot_ctx *ctx, ot_program **out);
void ot_program_destroy(ot_program *p); /* NULL is fine */

/* Appends an op. All tensors must belong to the program's context.
 * Plans made before the call are invalid afterwards (running them gives
 * OT_ERR_STATE). */
ot_status ot_program_add_op(ot_program *p, const ot_op_desc *d);

int ot_program_num_ops(const ot_program *p);
const char *ot_program_op_name(const ot_program *p, int i);

/* Run-time scalars: int64 slots, all 0 at creation. Names must be unique. */
ot_status ot_program_scalar_create(ot_program *p, const char *name, int *slot);
ot_status ot_program_set_scalar(ot_program *p, int slot, int64_t value);
int64_t ot_program_get_scalar(const ot_program *p, int slot);

/* Role marks (see above); they apply to the tensor's storage. */
ot_status ot_program_mark_input(ot_program *p, const ot_tensor *t);
ot_status ot_program_mark_output(ot_program *p, const ot_tensor *t);
ot_status ot_program_mark_persistent(ot_program *p, const ot_tensor *t);

/* ---- caches an op fills itself (the experts of a mixture of experts) ----
 *
 * Some ops know what they read only when they run: a mixture-of-experts
 * layer learns which experts a token uses from its router. Such an op keeps
 * those tensors at home (they are not its inputs, so no plan moves them) and
 * brings the ones it needs into a cache: a tensor of the program marked with
 * ot_program_mark_cache and listed by the op as an in-place input (in and
 * out). The planner gives the cache its block like any storage, inside the
 * budget, but never uploads it nor writes it home (its contents are the
 * op's); it may stay resident between runs. Whenever its block is placed
 * anew the contents are lost, and ot_op_cache_epoch says so.
 *
 * Inside run(): ot_op_fill copies a tensor's home into the cache (at a byte
 * offset of input k) on the plan's transfer thread and says where the kernel
 * finds it; ot_op_fill_wait waits for that copy before a kernel reads it.
 * Each fill is an upload in the trace, named for the tensor and flagged
 * OT_TRACE_FILL (no change of device bytes: the cache's block holds it), so
 * the trace shows exactly what crossed. On the host backend nothing is
 * copied and `where` is the home (the upload is recorded all the same); with
 * usm on a GPU the kernel reads the home in place over the bus (no copy,
 * a REMOTE event). */
ot_status ot_program_mark_cache(ot_program *p, const ot_tensor *t);

/* Copies the home of `src` (contiguous; any tensor of the context, normally
 * not one the program uses) into the storage of e->in_t[k] (a cache) at byte
 * `off` from that view's element 0. *where: the address of src's element 0
 * for the kernel; *ticket: what ot_op_fill_wait waits for (0: nothing). */
ot_status ot_op_fill(const ot_op_exec *e, int k, size_t off, const ot_tensor *src, void **where, uint64_t *ticket);
ot_status ot_op_fill_wait(const ot_op_exec *e, uint64_t ticket);

/* Changes whenever the block of e->in_t[k]'s storage was placed anew (its
 * contents lost); unique in the process, never 0. */
uint64_t ot_op_cache_epoch(const ot_op_exec *e, int k);

/* Partial writes. Inside run(), an op that changes only part of an output
 * (a KV cache append: one row per sequence of a cache of gigabytes) says
 * which bytes: [off, off + len) from element 0 of e->out_t[k], one call per
 * range. A write-back of that storage then copies only the ranges declared
 * since its copy last matched its home; an output the op writes without a
 * call for it is taken as written whole (the default, always safe). Ranges
 * must cover every byte the op changes there: a byte left out keeps its old
 * value at home. Outside a run, or where nothing moves, a no-op. */
ot_status ot_op_wrote(const ot_op_exec *e, int k, size_t off, size_t len);

/* The home of input k when it holds exactly what this run's kernels read
 * there: a program input no op writes (its home is uploaded as it is).
 * NULL otherwise. For an op that must know on the host what an input says
 * (the rows a step appends, to declare them with ot_op_wrote). */
const void *ot_op_input_home(const ot_op_exec *e, int k);

#ifdef __cplusplus
}
#endif
#endif
