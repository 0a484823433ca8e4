// swzc compat: a stand-in for <hip/hip_fp16.h> on top of CUDA's half type (see hip_runtime.h).
#pragma once

#include "hip_runtime.h"
