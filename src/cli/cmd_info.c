/* cmd_info.c — `omptensor info`: what this build and machine offer. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "omptensor/omptensor.h"

int ot_cli_info(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: omptensor info\n\nPrints the build's offload target, the OpenMP devices found, the movement\n"
             "backends available and the device memory budget that would apply.\n");
      return 0;
    }
    fprintf(stderr, "omptensor info: %s '%s' (info takes none; see omptensor info --help)\n",
            argv[i][0] == '-' ? "unknown option" : "unexpected argument", argv[i]);
    return 2;
  }
  ot_ctx_opts o = ot_ctx_opts_default();
  ot_info_print(stdout, &o);
  return 0;
}
