// Drives swzc/native/launch_observer.cpp on the CPU for tests/test_observe.py: the callback is handed
// launches as CUPTI would hand them, with stand-ins for the driver's parameter-layout calls.
//
//   launch_observer_driver OUT   writes the observer's JSON lines to OUT
#include "launch_observer.cpp"

#include <cstdint>

namespace {

// A kernel (float* c, int n, float alpha): offsets 0, 8, 12.  Handle 0x1 stands for a CUkernel, which
// cuFuncGetParamInfo refuses and cuKernelGetParamInfo describes.
CUresult layout(size_t index, size_t* offset, size_t* size) {
  static const size_t offsets[] = {0, 8, 12}, sizes[] = {8, 4, 4};
  if (index >= 3) return CUDA_ERROR_INVALID_VALUE;
  *offset = offsets[index];
  *size = sizes[index];
  return CUDA_SUCCESS;
}
CUresult func_info(void* handle, size_t index, size_t* offset, size_t* size) {
  return (uintptr_t)handle == 0x1 ? CUDA_ERROR_INVALID_HANDLE : layout(index, offset, size);
}
CUresult kernel_info(void* handle, size_t index, size_t* offset, size_t* size) {
  return (uintptr_t)handle == 0x1 ? layout(index, offset, size) : CUDA_ERROR_INVALID_HANDLE;
}

void launch(CUpti_CallbackId id, const void* params, const char* symbol, CUpti_ApiCallbackSite site = CUPTI_API_ENTER,
            CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_DRIVER_API) {
  CUpti_CallbackData cb;
  std::memset(&cb, 0, sizeof cb);
  cb.callbackSite = site;
  cb.functionParams = params;
  cb.symbolName = symbol;
  on_launch(nullptr, domain, id, &cb);
}

void runtime(CUpti_CallbackId id, const void* params, const char* symbol, CUpti_ApiCallbackSite site) {
  launch(id, params, symbol, site, CUPTI_CB_DOMAIN_RUNTIME_API);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  Observer& o = observer();
  o.out = std::fopen(argv[1], "a");
  o.cap = 2;
  o.func_param_info = func_info;
  o.kernel_param_info = kernel_info;

  void* c = (void*)0x7f0000001000ull;
  int n = 2048;
  float alpha = 0.5f;
  void* params[] = {&c, &n, &alpha};
  cuLaunchKernel_params plain = {(CUfunction)0x2, 128, 64, 1, 16, 16, 1, 0, nullptr, params, nullptr};
  for (int i = 0; i < 3; ++i) launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z5scalePfif");
  launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z5scalePfif", CUPTI_API_EXIT);  // exits are not launches
  n = 4096;  // a second configuration of the same kernel, through the per-thread-stream entry point
  cuLaunchKernel_ptsz_params ptsz = {(CUfunction)0x2, 256, 64, 1, 16, 16, 1, 0, nullptr, params, nullptr};
  launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &ptsz, "_Z5scalePfif");
  n = 8192;  // a third: past the cap of two
  launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z5scalePfif");
  launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z5scalePfif");

  // cuLaunchKernelEx with the parameters packed in one buffer, on a library kernel handle
  unsigned char packed[16];
  const int m = 77;
  const float beta = -2.0f;
  std::memcpy(packed, &c, 8);
  std::memcpy(packed + 8, &m, 4);
  std::memcpy(packed + 12, &beta, 4);
  size_t packed_size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size, CU_LAUNCH_PARAM_END};
  CUlaunchConfig config;
  std::memset(&config, 0, sizeof config);
  config.gridDimX = 7; config.gridDimY = 5; config.gridDimZ = 3;
  config.blockDimX = 32; config.blockDimY = 4; config.blockDimZ = 1;
  config.sharedMemBytes = 49152;
  cuLaunchKernelEx_params ex = {&config, (CUfunction)0x1, nullptr, extra};
  launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &ex, "_Z4tileIfLi64EEvPT_iS0_");

  // A runtime launch the driver reports while it runs is recorded once, from the driver.
  cudaLaunchKernel_v7000_params stub = {(const void*)0x99, dim3(128, 64, 1), dim3(16, 16, 1), params, 0, nullptr};
  n = 2048;
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &stub, "_Z5scalePfif", CUPTI_API_ENTER);
  launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &plain, "_Z5scalePfif");
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &stub, "_Z5scalePfif", CUPTI_API_EXIT);
  // One the driver does not report is recorded when the runtime call returns: from <<<>>>'s entry point,
  // with the library kernel's parameters; from cudaLaunchKernel's host stub, without.
  const int k = 5;
  const float gamma = 3.0f;
  void* kernel_args[] = {&c, (void*)&k, (void*)&gamma};
  LibraryKernelLaunch chevrons = {(void*)0x1, dim3(9, 1, 1), dim3(64, 1, 1), kernel_args, 1024, nullptr};
  runtime(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, &chevrons, "_Z4tileIfLi64EEvPT_iS0_", CUPTI_API_ENTER);
  runtime(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, &chevrons, "_Z4tileIfLi64EEvPT_iS0_", CUPTI_API_EXIT);
  cudaLaunchKernel_v7000_params other = {(const void*)0x98, dim3(11, 1, 1), dim3(32, 1, 1), kernel_args, 0, nullptr};
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &other, "_Z4stubPfif", CUPTI_API_ENTER);
  runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &other, "_Z4stubPfif", CUPTI_API_EXIT);

  at_exit();
  return 0;
}
