/* main.c — the `omptensor` command: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "omptensor/version.h"

static const ot_cli_cmd commands[] = {
    {"demo", "the main job: a synthetic Llama 4x the budget, with offloading", ot_cli_demo},
    {"run", "generate from a Hugging Face model directory or a GGUF file (families: run --help)", ot_cli_run},
    {"train", "train a GPT-2 model directory on a token file (--data FILE)", ot_cli_train},
    {"tokenize", "text to token ids with a model's tokenizer.json", ot_cli_tokenize},
    {"detokenize", "token ids to text with a model's tokenizer.json", ot_cli_detokenize},
    {"inspect", "list the tensors of a safetensors or GGUF file or a model directory", ot_cli_inspect},
    {"trace", "summarize or plot a trace (trace summarize|plot TRACE.json)", ot_cli_trace},
    {"info", "devices, backends and the budget that would apply", ot_cli_info},
};

static void usage(FILE *f) {
  fprintf(f, "usage: omptensor COMMAND [options]   (omptensor COMMAND --help for its options)\n"
             "       omptensor --version\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    /* the library's version, not the headers': the command may run with another libomptensor.so */
    printf("omptensor %s (offload: %s)\n", ot_version(), ot_version_offload());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) {
      ot_cli_notices_hold(); /* bad input gets one line: the library's notices wait for the input to pass */
      int rc = commands[i].fn(argc - 1, argv + 1);
      ot_cli_notices_finish(rc);
      return rc;
    }
  fprintf(stderr, "omptensor: unknown command '%s' (commands:", argv[1]);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(stderr, " %s", commands[i].name);
  fprintf(stderr, "; see omptensor --help)\n");
  return 2;
}
