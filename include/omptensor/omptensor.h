/* omptensor.h — everything public. Include this, link -lomptensor (or use
 * find_package(omptensor) / pkg-config omptensor). Each header below holds
 * one concept and its contract; they can be included on their own. Kernels
 * of your own use the directive layer, "omptensor/ot_pragmas.h" (not
 * included here: it includes <omp.h>). */
#ifndef OMPTENSOR_H
#define OMPTENSOR_H
/* the version (ot_version: the library's; OT_VERSION_STRING: these headers') */
#include "omptensor/version.h"
/* the runtime */
#include "omptensor/status.h"
#include "omptensor/dtype.h"
#include "omptensor/memory.h"
#include "omptensor/context.h"
#include "omptensor/tensor.h"
#include "omptensor/tlist.h"
#include "omptensor/tokenizer.h"
#include "omptensor/textstream.h"
#include "omptensor/trace.h"
#include "omptensor/program.h"
#include "omptensor/rope.h"
#include "omptensor/ops.h"
#include "omptensor/experts.h"
#include "omptensor/sched.h"
/* files and settings */
#include "omptensor/file.h"
#include "omptensor/safetensors.h"
#include "omptensor/npy.h"
#include "omptensor/gguf.h"
#include "omptensor/tokens.h"
#include "omptensor/hfconfig.h"
#include "omptensor/settings.h"
#include "omptensor/args.h"
/* models and training */
#include "omptensor/lm.h"
#include "omptensor/weightset.h"
#include "omptensor/models.h"
#include "omptensor/gpt2_train.h"
#endif
