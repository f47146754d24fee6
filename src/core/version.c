/* version.c — the runtime's version and the offload target it was built for
 * (OT_OFFLOAD_DESC comes from CMake, see version.h). */
#include "omptensor/version.h"

const char *ot_version(void) { return OT_VERSION_STRING; }

const char *ot_version_offload(void) { return OT_OFFLOAD_DESC; }
