// Timing macros that expand to whole statements, so a call site needs no ';' after them.
#pragma once
#include <chrono>
#include <cstdio>

#ifdef ENABLE_TIMING
#define TIMED_BEGIN auto timed_start_ = std::chrono::steady_clock::now();
#define TIMED_END(label)                                                                             \
  cudaDeviceSynchronize();                                                                           \
  printf("%s: %.3f ms\n", label,                                                                     \
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - timed_start_).count());
#else
#define TIMED_BEGIN
#define TIMED_END(label)
#endif

#define CHECK_LAST_ERROR(what)                                                    \
  {                                                                               \
    cudaError_t e_ = cudaGetLastError();                                          \
    if (e_ != cudaSuccess) fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e_)); \
  }
