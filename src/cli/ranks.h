/* ranks.h (internal) — the command under mpirun / srun: the job's ranks,
 * the GPU each takes, who prints, and how a failure ends the job. */
#ifndef OT_CLI_RANKS_H
#define OT_CLI_RANKS_H

#include "common.h"

/* After parsing, before ot_cli_session_start: s->comm from the launcher's
 * environment (comm.h: ot_comm_launched_size). No launcher: NULL, one
 * process. A launcher of several ranks and a build without MPI: an error
 * that says so (every rank would otherwise run the whole job). With
 * several ranks the session's settings are made per rank: the device is
 * local_rank % GPUs unless --device (OMPTENSOR_DEVICE) says one, and
 * --trace FILE becomes FILE.rankN.json (N the rank). */
ot_status ot_cli_ranks_start(ot_cli_session *s);

/* Ranks in the job (1 without a comm), this one's, and whether it is
 * rank 0, the one that prints the job's summary and saves. */
int ot_cli_ranks(const ot_cli_session *s);
int ot_cli_rank(const ot_cli_session *s);
int ot_cli_is_root(const ot_cli_session *s);

/* Every rank's status once its input is checked (the model loaded, the
 * work planned), so that all start the work or none does: OT_OK if every
 * rank's st was; else this rank's failure, or (this one was fine)
 * OT_ERR_STATE "rank N failed", printed by the rank that failed. Rank 0
 * prints its own failure; another rank prints its own only when rank 0 did
 * not fail (one line for the same bad input everywhere). *quiet is set
 * when this rank's message is another's to print. */
ot_status ot_cli_ranks_agree(ot_cli_session *s, ot_status st, int *quiet);

/* The exit of a rank: with several ranks a failure after the agreement
 * above, while the others may wait inside a collective for this one, ends
 * the whole job (MPI_Abort with rc; the command's message was printed
 * first). Otherwise returns rc. */
int ot_cli_ranks_exit(ot_cli_session *s, int rc);

#endif
