/* mpi_batch.c — the work queue and the one writer of a batch job over MPI
 * ranks (mpi_batch.h).
 *
 * Messages to rank 0 (tag TAG_ASK), the first byte says what:
 *   'N'         give me the next prompt: answered (tag TAG_ANSWER) with
 *               its position, or n when none is left;
 *   'L' LINE    a finished prompt's result line, to append to OUT;
 *   'D'         this rank is done (after its last line: messages between
 *               two ranks arrive in order).
 * Rank 0 serves them on a thread of its own while its main thread runs
 * prompts like every other rank; one mutex orders the hand-outs and the
 * writes of both. Why rank 0 writes everything rather than every rank
 * appending to OUT itself: O_APPEND is not atomic across the machines of
 * a network file system (NFS), and one file is what a rerun reads. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_batch.h"

enum { TAG_ASK = 7701, TAG_ANSWER = 7702 };

struct ot_cli_queue {
  ot_comm *c;
  size_t n, next; /* rank 0: the positions handed out so far */
  ot_cli_queue_write write;
  void *user;
  pthread_mutex_t mu;
  pthread_t server;
  int serving;
  int stopped; /* rank 0: ot_cli_queue_stop was called */
  ot_status err; /* rank 0: the first failure of the writer or the server, with its message */
  char err_msg[512];
};

static void fail_once(ot_cli_queue *q, ot_status st) {
  if (q->err != OT_OK) return;
  q->err = st;
  snprintf(q->err_msg, sizeof q->err_msg, "%s", ot_last_error());
}

/* Rank 0, under the mutex: the next position, n once none is left, OUT
 * cannot be written (the ranks then stop instead of running prompts whose
 * lines would be lost) or the job was stopped. */
static size_t take(ot_cli_queue *q) {
  return q->err == OT_OK && !q->stopped && q->next < q->n ? q->next++ : q->n;
}

void ot_cli_queue_stop(ot_cli_queue *q) {
  if (ot_comm_rank(q->c) != 0) return;
  pthread_mutex_lock(&q->mu);
  q->stopped = 1;
  pthread_mutex_unlock(&q->mu);
}

static void put(ot_cli_queue *q, const char *line) {
  if (q->err == OT_OK) {
    ot_status st = q->write(q->user, line);
    if (st != OT_OK) fail_once(q, st);
  }
}

static void *serve(void *arg) {
  ot_cli_queue *q = arg;
  int left = ot_comm_size(q->c) - 1; /* ranks not done yet */
  while (left > 0) {
    void *msg = NULL;
    size_t len = 0;
    int from = 0;
    ot_status st = ot_comm_recv(q->c, OT_COMM_ANY, TAG_ASK, &msg, &len, &from);
    if (st != OT_OK) {
      pthread_mutex_lock(&q->mu);
      fail_once(q, st);
      pthread_mutex_unlock(&q->mu);
      break; /* the comm itself failed: the command ends the job */
    }
    const char kind = len ? *(const char *)msg : '?';
    pthread_mutex_lock(&q->mu);
    if (kind == 'N') {
      uint64_t pos = take(q);
      pthread_mutex_unlock(&q->mu);
      st = ot_comm_send(q->c, from, TAG_ANSWER, &pos, sizeof pos);
      pthread_mutex_lock(&q->mu);
      if (st != OT_OK) fail_once(q, st);
    } else if (kind == 'L') {
      char *line = malloc(len); /* the text after the kind byte, NUL-terminated */
      if (line) {
        memcpy(line, (const char *)msg + 1, len - 1);
        line[len - 1] = '\0';
        put(q, line);
        free(line);
      } else {
        fail_once(q, ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for a result line of rank %d", from));
      }
    } else {
      left--;
    }
    pthread_mutex_unlock(&q->mu);
    free(msg);
  }
  return NULL;
}

ot_status ot_cli_queue_start(ot_comm *c, size_t n, ot_cli_queue_write write, void *user, ot_cli_queue **out) {
  *out = NULL;
  ot_cli_queue *q = calloc(1, sizeof *q);
  if (!q) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory");
  q->c = c;
  q->n = n;
  q->write = write;
  q->user = user;
  pthread_mutex_init(&q->mu, NULL);
  if (ot_comm_rank(c) == 0 && ot_comm_size(c) > 1) {
    if (pthread_create(&q->server, NULL, serve, q) != 0) {
      pthread_mutex_destroy(&q->mu);
      free(q);
      return ot_set_error(OT_ERR_OUT_OF_MEMORY, "cannot start the thread that serves the batch job's ranks");
    }
    q->serving = 1;
  }
  *out = q;
  return OT_OK;
}

ot_status ot_cli_queue_next(ot_cli_queue *q, size_t *pos) {
  if (ot_comm_rank(q->c) == 0) {
    pthread_mutex_lock(&q->mu);
    *pos = take(q);
    pthread_mutex_unlock(&q->mu);
    return OT_OK;
  }
  const char ask = 'N';
  OT_TRY(ot_comm_send(q->c, 0, TAG_ASK, &ask, 1));
  void *msg = NULL;
  size_t len = 0;
  OT_TRY(ot_comm_recv(q->c, 0, TAG_ANSWER, &msg, &len, NULL));
  uint64_t p = 0;
  if (len == sizeof p) memcpy(&p, msg, sizeof p);
  free(msg);
  if (len != sizeof p || p > q->n)
    return ot_set_error(OT_ERR_STATE, "rank 0 answered the batch job's work queue with %zu bytes", len);
  *pos = (size_t)p;
  return OT_OK;
}

ot_status ot_cli_queue_emit(ot_cli_queue *q, const char *line) {
  if (ot_comm_rank(q->c) == 0) {
    pthread_mutex_lock(&q->mu);
    put(q, line);
    const ot_status err = q->err;
    pthread_mutex_unlock(&q->mu);
    return err == OT_OK ? OT_OK : ot_set_error(err, "%s", q->err_msg);
  }
  const size_t n = strlen(line);
  char *m = malloc(n + 1);
  if (!m) return ot_set_error(OT_ERR_OUT_OF_MEMORY, "no memory for a result line");
  m[0] = 'L';
  memcpy(m + 1, line, n);
  ot_status st = ot_comm_send(q->c, 0, TAG_ASK, m, n + 1);
  free(m);
  return st;
}

ot_status ot_cli_queue_finish(ot_cli_queue *q) {
  if (!q) return OT_OK;
  ot_status st = OT_OK;
  if (ot_comm_rank(q->c) != 0) {
    const char done = 'D';
    st = ot_comm_send(q->c, 0, TAG_ASK, &done, 1);
  } else if (q->serving) {
    pthread_join(q->server, NULL);
  }
  if (st == OT_OK && q->err != OT_OK) st = ot_set_error(q->err, "%s", q->err_msg);
  pthread_mutex_destroy(&q->mu);
  free(q);
  return st;
}
