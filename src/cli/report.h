/* report.h (internal) — what `run` and `demo` print after generating. */
#ifndef OT_CLI_REPORT_H
#define OT_CLI_REPORT_H

#include "cli/common.h"

/* Human lines (ids, tokens/s, memory summary) on `f`, or with --json one
 * JSON object on stdout with the fields the README documents. */
ot_status ot_cli_report(ot_cli_session *s, const char *model, const ot_lm *m, const ot_gen_result *r, FILE *f);

#endif
