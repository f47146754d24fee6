/* program.c — recording ops, scalars and role marks; liveness analysis. */
#include <stdlib.h>
#include <string.h>

#include "memory/context_impl.h"
#include "core/error.h"
#include "core/vec.h"
#include "omptensor/sched.h"
#include "sched/program_impl.h"

size_t ot_sched_block_bytes(size_t bytes) {
  return (bytes + OT_SCHED_ALIGN - 1) & ~(size_t)(OT_SCHED_ALIGN - 1);
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

ot_status ot_program_create(ot_ctx *ctx, ot_program **out) {
  if (!out) return ot_fail(OT_ERR_INVALID_ARG, "ot_program_create: out is NULL");
  *out = NULL;
  if (!ctx) return ot_fail(OT_ERR_INVALID_ARG, "ot_program_create: context is NULL");
  ot_program *p = calloc(1, sizeof *p);
  if (!p) return ot_fail(OT_ERR_OUT_OF_MEMORY, "ot_program_create: no host memory");
  p->ctx = ctx;
  *out = p;
  return OT_OK;
}

static void op_free(ot_op *o) {
  free(o->name);
  free(o->t);
  free(o->ts);
  free(o->params);
  free(o->acc);
}

void ot_program_destroy(ot_program *p) {
  if (!p) return;
  for (int i = 0; i < p->n_ops; i++) op_free(&p->ops[i]);
  free(p->ops);
  for (int i = 0; i < p->n_st; i++) free(p->st[i].uses);
  free(p->st);
  free(p->marks);
  for (int i = 0; i < p->n_scalars; i++) free(p->scalar_names[i]);
  free(p->scalar_names);
  free(p->scalars);
  free(p);
}

/* Index of storage `st` in the program, registering it if new. */
static ot_status storage_index(ot_program *p, const ot_tensor *t, int *idx) {
  for (int i = 0; i < p->n_st; i++)
    if (p->st[i].st == t->st) {
      *idx = i;
      return OT_OK;
    }
  OT_TRY(ot_grow((void **)&p->st, &p->cap_st, p->n_st + 1, sizeof *p->st, "program storages"));
  ot_prog_storage *s = &p->st[p->n_st];
  memset(s, 0, sizeof *s);
  s->st = t->st;
  s->id = t->st->id;
  s->name = t->name;
  s->bytes = t->st->bytes;
  s->block = ot_sched_block_bytes(s->bytes);
  *idx = p->n_st++;
  return OT_OK;
}

/* A write through a view that does not cover its whole storage keeps the
 * rest: it needs the old contents like a read. */
static int writes_part(const ot_tensor *t) {
  size_t first, end;
  ot_tensor_byte_span(t, &first, &end);
  return !ot_tensor_is_contiguous(t) || first != 0 || end != t->st->bytes;
}

static ot_status add_access(ot_program *p, ot_op *o, const ot_tensor *t, int write, int *si_out) {
  int si;
  OT_TRY(storage_index(p, t, &si));
  *si_out = si;
  int k = 0;
  while (k < o->n_acc && o->acc[k].st != si) k++;
  if (k == o->n_acc) o->acc[o->n_acc++] = (ot_access){si, 0, 0};
  if (write) {
    o->acc[k].write = 1;
    if (writes_part(t)) o->acc[k].read = 1;
  } else {
    o->acc[k].read = 1;
  }
  return OT_OK;
}

static ot_status check_desc(const ot_program *p, const ot_op_desc *d) {
  const char *nm = d->name ? d->name : "(unnamed)";
  if (!d->run) return ot_fail(OT_ERR_INVALID_ARG, "op '%s' (#%d): run function is NULL", nm, p->n_ops);
  if (d->n_in < 0 || d->n_out < 0 || (d->n_in && !d->in) || (d->n_out && !d->out))
    return ot_fail(OT_ERR_INVALID_ARG, "op '%s' (#%d): bad tensor lists (n_in %d, n_out %d)", nm, p->n_ops, d->n_in,
                   d->n_out);
  if (d->params_bytes && !d->params)
    return ot_fail(OT_ERR_INVALID_ARG, "op '%s' (#%d): params is NULL but params_bytes is %zu", nm, p->n_ops,
                   d->params_bytes);
  for (int i = 0; i < d->n_in + d->n_out; i++) {
    const ot_tensor *t = i < d->n_in ? d->in[i] : d->out[i - d->n_in];
    if (!t) return ot_fail(OT_ERR_INVALID_ARG, "op '%s' (#%d): tensor %d is NULL", nm, p->n_ops, i);
    if (t->st->ctx != p->ctx)
      return ot_fail(OT_ERR_INVALID_ARG, "op '%s' (#%d): tensor '%s' belongs to another context", nm, p->n_ops,
                     t->name);
  }
  return OT_OK;
}

ot_status ot_program_add_op(ot_program *p, const ot_op_desc *d) {
  if (!p || !d) return ot_fail(OT_ERR_INVALID_ARG, "ot_program_add_op: NULL argument");
  OT_TRY(check_desc(p, d));
  OT_TRY(ot_grow((void **)&p->ops, &p->cap_ops, p->n_ops + 1, sizeof *p->ops, "program ops"));
  int n = d->n_in + d->n_out;
  ot_op o = {0};
  o.name = dup_str(d->name ? d->name : "(unnamed)");
  o.t = malloc((size_t)(n ? n : 1) * sizeof *o.t);
  o.ts = malloc((size_t)(n ? n : 1) * sizeof *o.ts);
  o.acc = malloc((size_t)(n ? n : 1) * sizeof *o.acc);
  o.params = d->params_bytes ? malloc(d->params_bytes) : NULL;
  if (!o.name || !o.t || !o.ts || !o.acc || (d->params_bytes && !o.params)) {
    op_free(&o);
    return ot_fail(OT_ERR_OUT_OF_MEMORY, "op '%s': no host memory", d->name ? d->name : "");
  }
  o.run = d->run;
  o.n_in = d->n_in;
  o.n_out = d->n_out;
  o.params_bytes = d->params_bytes;
  if (o.params) memcpy(o.params, d->params, d->params_bytes);
  o.flops = d->flops;
  o.bytes = d->bytes;
  for (int i = 0; i < n; i++) {
    o.t[i] = i < d->n_in ? d->in[i] : d->out[i - d->n_in];
    ot_status s = add_access(p, &o, o.t[i], i >= d->n_in, &o.ts[i]);
    if (s != OT_OK) {
      op_free(&o);
      return s;
    }
  }
  p->ops[p->n_ops++] = o;
  if (n > p->max_args) p->max_args = n;
  p->version++;
  p->analysed = 0;
  return OT_OK;
}

ot_status ot_program_set_batch(ot_program *p, int op, ot_op_emit_fn emit, ot_op_launch_fn launch, size_t insn_bytes) {
  if (!p || op < 0 || op >= p->n_ops || !emit || !launch || !insn_bytes)
    return ot_fail(OT_ERR_INVALID_ARG, "ot_program_set_batch: no such op, or a NULL function");
  p->ops[op].emit = emit;
  p->ops[op].launch = launch;
  p->ops[op].insn_bytes = insn_bytes;
  return OT_OK;
}

int ot_program_num_ops(const ot_program *p) { return p ? p->n_ops : 0; }
const char *ot_program_op_name(const ot_program *p, int i) {
  return p && i >= 0 && i < p->n_ops ? p->ops[i].name : "?";
}

ot_status ot_program_scalar_create(ot_program *p, const char *name, int *slot) {
  if (!p || !name || !slot) return ot_fail(OT_ERR_INVALID_ARG, "ot_program_scalar_create: NULL argument");
  for (int i = 0; i < p->n_scalars; i++)
    if (strcmp(p->scalar_names[i], name) == 0)
      return ot_fail(OT_ERR_INVALID_ARG, "program scalar '%s' exists already (slot %d)", name, i);
  int cap = p->cap_scalars; /* the two arrays grow alike */
  OT_TRY(ot_grow((void **)&p->scalars, &cap, p->n_scalars + 1, sizeof *p->scalars, "program scalars"));
  cap = p->cap_scalars;
  OT_TRY(ot_grow((void **)&p->scalar_names, &cap, p->n_scalars + 1, sizeof *p->scalar_names, "program scalars"));
  p->cap_scalars = cap;
  char *nm = dup_str(name);
  if (!nm) return ot_fail(OT_ERR_OUT_OF_MEMORY, "program scalar '%s': no host memory", name);
  p->scalar_names[p->n_scalars] = nm;
  p->scalars[p->n_scalars] = 0;
  *slot = p->n_scalars++;
  return OT_OK;
}

ot_status ot_program_set_scalar(ot_program *p, int slot, int64_t value) {
  if (!p || slot < 0 || slot >= p->n_scalars)
    return ot_fail(OT_ERR_INVALID_ARG, "program scalar slot %d does not exist (%d slots)", slot, p ? p->n_scalars : 0);
  p->scalars[slot] = value;
  return OT_OK;
}

int64_t ot_program_get_scalar(const ot_program *p, int slot) {
  return p && slot >= 0 && slot < p->n_scalars ? p->scalars[slot] : 0;
}

static ot_status mark(ot_program *p, const ot_tensor *t, unsigned role, const char *what) {
  if (!p || !t) return ot_fail(OT_ERR_INVALID_ARG, "ot_program_mark_%s: NULL argument", what);
  if (t->st->ctx != p->ctx)
    return ot_fail(OT_ERR_INVALID_ARG, "mark %s: tensor '%s' belongs to another context", what, t->name);
  for (int i = 0; i < p->n_marks; i++)
    if (p->marks[i].st == t->st) {
      p->marks[i].role |= role;
      p->version++;
      p->analysed = 0;
      return OT_OK;
    }
  OT_TRY(ot_grow((void **)&p->marks, &p->cap_marks, p->n_marks + 1, sizeof *p->marks, "program marks"));
  p->marks[p->n_marks++] = (ot_mark){t->st, role};
  p->version++;
  p->analysed = 0;
  return OT_OK;
}

ot_status ot_program_mark_input(ot_program *p, const ot_tensor *t) { return mark(p, t, OT_ROLE_INPUT, "input"); }
ot_status ot_program_mark_output(ot_program *p, const ot_tensor *t) { return mark(p, t, OT_ROLE_OUTPUT, "output"); }
ot_status ot_program_mark_persistent(ot_program *p, const ot_tensor *t) {
  return mark(p, t, OT_ROLE_PERSIST, "persistent");
}
ot_status ot_program_mark_cache(ot_program *p, const ot_tensor *t) { return mark(p, t, OT_ROLE_CACHE, "cache"); }

/* Roles from use (program.h):
 *   NEEDS_HOME  the first access reads (the value the run starts with)
 *   WRITEBACK   written, and an output, persistent, or state (needs its
 *               starting value, i.e. read before written, and not an input)
 *   KEEP        not an input, and either never written (a weight) or
 *               write-back (clean after it): may stay resident for next run
 * A cache (program.h) is none of the first three whatever its uses and
 * marks: its home never holds what the op put in it. */
static void classify(ot_prog_storage *s, const ot_program *p) {
  for (int i = 0; i < p->n_marks; i++)
    if (p->marks[i].st == s->st) s->role |= p->marks[i].role;
  if (s->role & OT_ROLE_CACHE) {
    s->role = (s->role & OT_ROLE_WRITTEN) | OT_ROLE_CACHE | OT_ROLE_KEEP;
    return;
  }
  int input = s->role & OT_ROLE_INPUT;
  int written = s->role & OT_ROLE_WRITTEN;
  int state = (s->role & OT_ROLE_NEEDS_HOME) && written && !input;
  if (written && (s->role & (OT_ROLE_OUTPUT | OT_ROLE_PERSIST) || state)) s->role |= OT_ROLE_WRITEBACK;
  if (!input && (!written || (s->role & OT_ROLE_WRITEBACK))) {
    /* an output whose first access writes it is dead after its last use */
    if (!written || (s->role & OT_ROLE_NEEDS_HOME) || (s->role & OT_ROLE_PERSIST)) s->role |= OT_ROLE_KEEP;
  }
}

ot_status ot_program_analyse(ot_program *p) {
  if (p->analysed) return OT_OK;
  for (int i = 0; i < p->n_st; i++) {
    ot_prog_storage *s = &p->st[i];
    free(s->uses);
    s->uses = NULL;
    s->n_uses = 0;
    s->role = 0;
    s->first_use = s->last_use = s->last_write = -1;
  }
  for (int i = 0; i < p->n_ops; i++)
    for (int k = 0; k < p->ops[i].n_acc; k++) {
      ot_access a = p->ops[i].acc[k];
      ot_prog_storage *s = &p->st[a.st];
      if (s->first_use < 0) {
        s->first_use = i;
        if (a.read) s->role |= OT_ROLE_NEEDS_HOME;
      }
      s->last_use = i;
      s->n_uses++;
      if (a.write) {
        s->role |= OT_ROLE_WRITTEN;
        s->last_write = i;
      }
    }
  for (int i = 0; i < p->n_st; i++) {
    ot_prog_storage *s = &p->st[i];
    s->uses = malloc((size_t)(s->n_uses ? s->n_uses : 1) * sizeof *s->uses);
    if (!s->uses) return ot_fail(OT_ERR_OUT_OF_MEMORY, "program analysis: no host memory");
    s->n_uses = 0;
    classify(s, p);
  }
  for (int i = 0; i < p->n_ops; i++)
    for (int k = 0; k < p->ops[i].n_acc; k++) {
      ot_prog_storage *s = &p->st[p->ops[i].acc[k].st];
      s->uses[s->n_uses++] = i;
    }
  p->analysed = 1;
  return OT_OK;
}
