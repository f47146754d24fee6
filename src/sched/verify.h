/* verify.h (internal) — integrity mode, OMPTENSOR_VERIFY (issue 8).
 *
 *   OMPTENSOR_VERIFY=1  every home a transfer reads or writes is checksummed
 *                       on the transfer thread: a write-back records the
 *                       checksum of the home it wrote; an upload checks the
 *                       home still has the checksum last recorded for it
 *                       (from a write-back, or from its previous upload),
 *                       then records it. A mismatch fails the run with
 *                       OT_ERR_INTEGRITY naming the tensor: its home changed
 *                       behind the scheduler's back (a weight or persistent
 *                       tensor modified without ot_sched_invalidate, or a
 *                       stray write / memory corruption).
 *   OMPTENSOR_VERIFY=2  also reads every device copy back (one more copy per
 *                       transfer) right after an upload or a write-back and
 *                       compares it with the home.
 *
 * Inputs are exempt across runs (the caller rewrites them before each run)
 * but not within one. ot_sched_invalidate forgets every record; so does a
 * failed run (its homes are in an unknown state). Only the copying
 * movement backend (map, and usm on an emulated device) verifies: on the
 * host backend nothing moves, and with usm on a GPU the home *is* the
 * device copy (reading it on the host would migrate its pages). */
#ifndef OT_SCHED_VERIFY_H
#define OT_SCHED_VERIFY_H

#include <stddef.h>
#include <stdint.h>

typedef struct ot_verify_rec {
  uint64_t sum; /* checksum the home must have */
  int has;      /* 0: nothing recorded yet */
} ot_verify_rec;

/* 0 (off), 1 or 2, from OMPTENSOR_VERIFY, read once (anything else than
 * 0/1/2 is reported once on stderr and means 0). */
int ot_verify_level(void);
/* Tests: overrides the level for plans that start running afterwards. */
void ot_verify_set_level(int level);

/* A fast 64-bit checksum (four multiply-rotate lanes over 8-byte words,
 * then the tail bytes; not cryptographic). */
uint64_t ot_checksum64(const void *p, size_t n);

#endif
