/* omptensor.h — everything public. Include this, link -lomptensor. */
#ifndef OMPTENSOR_H
#define OMPTENSOR_H
#include "omptensor/status.h"
#include "omptensor/dtype.h"
#include "omptensor/memory.h"
#include "omptensor/context.h"
#include "omptensor/tensor.h"
#include "omptensor/trace.h"
#include "omptensor/program.h"
#include "omptensor/sched.h"
#endif
