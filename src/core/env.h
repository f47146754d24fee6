/* env.h (internal) — the library's own OMPTENSOR_* environment variables:
 * those the layers below the settings read where they act (a debug switch,
 * the disk tier's I/O, the GEMM path), which the settings table (settings.h)
 * does not hold. One table names each variable and the values it takes, so
 * that a value nothing accepts is never a silent default: a notice, once per
 * variable (ot_warn_once), one line naming the variable, the value and the
 * accepted values; then the default applies.
 *
 *     if (ot_env_choice("OMPTENSOR_DISK_IO", 0) == 1) ...   // direct | buffered
 *     if (ot_env_word("OMPTENSOR_DEBUG", "plan")) ...        // plan,probe
 */
#ifndef OT_CORE_ENV_H
#define OT_CORE_ENV_H

#include <stdint.h>

/* The index of the variable's value among the table's values for it (any
 * case); dflt when unset or empty, or, with the notice, when unknown. */
int ot_env_choice(const char *name, int dflt);

/* A comma-separated list of the table's words (OMPTENSOR_DEBUG=plan,probe):
 * whether `word` is in it. Unknown words get the notice. */
int ot_env_word(const char *name, const char *word);

/* A decimal integer in the table's [lo, hi]; dflt when unset or empty, or,
 * with the notice, when it is not such an integer. */
int64_t ot_env_int(const char *name, int64_t dflt);

/* Is name one of the table's variables (whether its reader checks it here or
 * refuses a bad value itself: OMPTENSOR_GPU_WAIT, OMPTENSOR_FAULT, ...)? */
int ot_env_known(const char *name);

/* Checks every variable of the table that is set, as its reader would (the
 * notice now, not when the code that reads it first runs, which may be never
 * in this process): for a program that wants its environment's mistakes told
 * at its start (ot_settings_load_env calls it). */
void ot_env_check(void);

#endif
