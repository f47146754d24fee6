/* mpi_batch.h (internal) — a batch job's prompts over the ranks of an MPI
 * job: rank 0 hands out the prompts left to do, one at a time as each
 * rank asks (a work queue: a slow rank takes fewer, none holds the job),
 * and is the one writer of OUT, so that the job has one output file with
 * every id once, each line whole and flushed as on one machine, and a
 * rerun of a killed job goes on from it like a single process's. */
#ifndef OT_CLI_MPI_BATCH_H
#define OT_CLI_MPI_BATCH_H

#include <stddef.h>

#include "omptensor/comm.h"
#include "omptensor/status.h"

typedef struct ot_cli_queue ot_cli_queue;

/* Rank 0 writes a line with write(user, line) (append and flush); the
 * other ranks' lines come to it over MPI. */
typedef ot_status (*ot_cli_queue_write)(void *user, const char *line);

/* Every rank calls it with the same n (the prompts left). Rank 0 starts
 * the thread that serves the others. */
ot_status ot_cli_queue_start(ot_comm *c, size_t n, ot_cli_queue_write write, void *user, ot_cli_queue **out);

/* The next of the n to run (0 .. n-1), each handed out once over all
 * ranks; n when none is left (or rank 0's writer failed). */
ot_status ot_cli_queue_next(ot_cli_queue *q, size_t *pos);

/* Rank 0 (Ctrl-C): no more prompts are handed out, to any rank; those
 * running finish. Other ranks: nothing. */
void ot_cli_queue_stop(ot_cli_queue *q);

/* A finished prompt's result line (ending in '\n'): written by rank 0. */
ot_status ot_cli_queue_emit(ot_cli_queue *q, const char *line);

/* This rank's last line is out. Rank 0 waits for every rank's; it returns
 * its writer's first failure, if any. Frees q (NULL is fine: OT_OK). */
ot_status ot_cli_queue_finish(ot_cli_queue *q);

#endif
