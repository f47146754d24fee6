/* interrupt.c — see interrupt.h. */
#include <signal.h>
#include <string.h>

#include "interrupt.h"

static volatile sig_atomic_t got_sigint;
static struct sigaction before; /* SIGINT's action when armed, put back when disarmed */
static int armed;

static void on_sigint(int sig) {
  (void)sig;
  got_sigint = 1;
}

void ot_cli_interrupt_arm(void) {
  if (armed || sigaction(SIGINT, NULL, &before) != 0) return;
  if (before.sa_handler == SIG_IGN) return; /* started with SIGINT ignored (nohup, a batch system): it stays so */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  /* SA_RESETHAND: a second Ctrl-C ends the process at once; SA_RESTART: a
   * write to stdout or OUT that the signal interrupts goes on */
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  armed = sigaction(SIGINT, &sa, NULL) == 0;
}

void ot_cli_interrupt_disarm(void) {
  if (armed) sigaction(SIGINT, &before, NULL);
  armed = 0;
}

int ot_cli_interrupted(void) { return got_sigint != 0; }

int ot_cli_should_stop(void *user) {
  (void)user;
  return ot_cli_interrupted();
}
