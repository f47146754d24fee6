/* interrupt.h (internal) — Ctrl-C during `run`: the generation stops at the
 * next token boundary (ot_gen_opts.should_stop), the summary of what was
 * made is printed, and the command exits 130 (128 + SIGINT, as a shell
 * reports a process that SIGINT ended). The handler only sets a flag; the
 * library never installs one. */
#ifndef OT_CLI_INTERRUPT_H
#define OT_CLI_INTERRUPT_H

#define OT_CLI_EXIT_INTERRUPTED 130

/* From here on SIGINT sets the flag instead of ending the process; a
 * second SIGINT ends it as usual (the handler is reset by the first). A
 * process started with SIGINT ignored keeps ignoring it. */
void ot_cli_interrupt_arm(void);
/* SIGINT does what it did before the arm again (the flag stays as it is). */
void ot_cli_interrupt_disarm(void);
/* Whether SIGINT came since ot_cli_interrupt_arm. */
int ot_cli_interrupted(void);
/* For ot_gen_opts.should_stop: ot_cli_interrupted(), user unused. */
int ot_cli_should_stop(void *user);

#endif
