/* cli.h (internal) — subcommands of the `omptensor` command.
 * Each takes (argc, argv) with argv[0] the subcommand name and returns the
 * process exit status: 0 ok, 1 runtime failure, 2 bad usage or bad input. */
#ifndef OT_CLI_H
#define OT_CLI_H

typedef struct ot_cli_cmd {
  const char *name, *help;
  int (*fn)(int argc, char **argv);
} ot_cli_cmd;

int ot_cli_info(int argc, char **argv);
int ot_cli_run(int argc, char **argv);
int ot_cli_train(int argc, char **argv);
int ot_cli_demo(int argc, char **argv);
int ot_cli_inspect(int argc, char **argv);
int ot_cli_trace(int argc, char **argv);
int ot_cli_tokenize(int argc, char **argv);
int ot_cli_detokenize(int argc, char **argv);

#endif
