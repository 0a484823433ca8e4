// swzc compat: nvcc stand-in for <hip/hip_runtime_api.h>; see hip_runtime.h.
#pragma once
#include "hip_runtime.h"
