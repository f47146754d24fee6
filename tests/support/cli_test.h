/* cli_test.h — for the tests that run the omptensor command. */
#ifndef OT_CLI_TEST_H
#define OT_CLI_TEST_H

/* The `omptensor` command the CLI tests run: $OT_CLI when set (it must be
 * executable), else the one beside this test binary or one folder up
 * (build/PRESET/omptensor for build/PRESET/tests/test_cli; a flat folder of
 * binaries carried to the GPU machine). Found from the running binary, not a
 * path fixed at build time, so the build folder may move. NULL, with a
 * message on stderr, if there is none. */
const char *ot_test_cli(void);

#endif
