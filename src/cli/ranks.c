/* ranks.c — the command as one rank of an MPI job (ranks.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"

/* A failure every rank knows of (ot_cli_ranks_agree): they all leave
 * normally. One process runs one command, so one flag will do. */
static int agreed_failure;

/* FILE.json -> FILE.rankN.json (FILE -> FILE.rankN): every rank traces. */
static ot_status trace_per_rank(ot_cli_session *s) {
  char *p = s->settings.trace_path;
  if (!p) return OT_OK;
  const size_t n = strlen(p);
  const int json = n > 5 && !strcmp(p + n - 5, ".json");
  char *q = malloc(n + 32);
  if (!q) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory");
  snprintf(q, n + 32, "%.*s.rank%d%s", (int)(json ? n - 5 : n), p, ot_comm_rank(s->comm), json ? ".json" : "");
  free(p);
  s->settings.trace_path = q;
  return OT_OK;
}

/* A per-device limit list ("0:20GB,1:30GB") is the job's: each rank keeps
 * the entries of the devices it runs on and drops those its siblings on
 * this machine run on (ranks take devices local_rank % gpus). What is left
 * for another device is one no rank uses, which the settings refuse. */
static void keep_own_limits(ot_cli_session *s, int gpus) {
  const int first = s->settings.device, n = s->settings.devices > 1 ? s->settings.devices : 1;
  const int local = ot_comm_local_size(s->comm), used = local < gpus ? local : gpus;
  for (int d = 0; d < used && d < OT_MAX_DEVICES; d++)
    if (d < first || d >= first + n) s->settings.gpu_memory_limit.per_device[d].kind = OT_SIZE_UNSET;
}

ot_status ot_cli_ranks_start(ot_cli_session *s) {
  const int launched = ot_comm_launched_size();
  if (!launched || s->comm) return OT_OK;
  if (!ot_comm_mpi_built()) {
    if (launched == 1) return OT_OK; /* one task of a launcher: the job is this process's */
    return ot_set_error(OT_ERR_UNSUPPORTED,
                        "started by mpirun/srun as one of %d ranks, but this omptensor was built without MPI "
                        "(OT_MPI=OFF), so every rank would run the whole job: mpirun needs an MPI build "
                        "(cmake -DOT_MPI=ON; Debian: apt-get install libopenmpi-dev), or run one process (a Slurm job "
                        "array splits a batch job without MPI: samples/slurm/)",
                        launched);
  }
  OT_TRY(ot_cli_session_settings(s));
  OT_TRY(ot_comm_world(&s->comm));
  if (ot_comm_size(s->comm) < 2) return OT_OK;
  /* one GPU per rank of a machine, unless the command names one */
  const int gpus = ot_device_count();
  if (s->settings.source[OT_SET_DEVICE] == OT_SRC_DEFAULT && gpus > 0) {
    s->settings.device = ot_comm_local_rank(s->comm) % gpus;
    keep_own_limits(s, gpus);
  }
  return trace_per_rank(s);
}

int ot_cli_ranks(const ot_cli_session *s) { return ot_comm_size(s->comm); }
int ot_cli_rank(const ot_cli_session *s) { return ot_comm_rank(s->comm); }
int ot_cli_is_root(const ot_cli_session *s) { return ot_comm_rank(s->comm) == 0; }

ot_status ot_cli_ranks_agree(ot_cli_session *s, ot_status st, int *quiet) {
  *quiet = 0;
  if (ot_cli_ranks(s) < 2) return st;
  /* [0]: the worst exit code of any rank, [1]: rank 0's */
  const int rc = st == OT_OK ? 0 : ot_cli_exit_code(st);
  int64_t v[2] = {rc, ot_cli_is_root(s) ? rc : 0};
  ot_status a = ot_comm_allreduce_i64(s->comm, v, 2, 1);
  if (a != OT_OK) return a;
  if (st != OT_OK) {
    agreed_failure = 1;
    *quiet = !ot_cli_is_root(s) && v[1] != 0;
    return st;
  }
  if (!v[0]) return OT_OK;
  agreed_failure = 1;
  *quiet = 1;
  return ot_set_error(v[0] == 2 ? OT_ERR_INVALID_ARG : OT_ERR_STATE, "another rank failed (its message is above)");
}

int ot_cli_ranks_exit(ot_cli_session *s, int rc) {
  if (rc && ot_cli_ranks(s) > 1 && !agreed_failure) {
    fflush(stdout);
    fflush(stderr);
    ot_comm_abort(s->comm, rc);
  }
  return rc;
}
