// swzc launch observer: a CUPTI injection library.  With CUDA_INJECTION64_PATH naming it, the CUDA
// driver loads it into the program at cuInit (statically linked cudart included) and calls
// InitializeInjection, which subscribes to the driver's kernel launches.  Every launch is recorded as
// one JSON line in the file SWZC_OBSERVE_OUT names (appended to, so that every process of a shell
// command writes its own lines):
//
//   {"pid": P, "id": I, "kernel": "<symbol>", "grid": [x, y, z], "block": [x, y, z], "shmem": S,
//    "params": [{"offset": O, "size": N, "hex": "..."}, ...]}
//
// once per distinct (kernel, grid, block, dynamic shared memory, parameter bytes), at most
// SWZC_OBSERVE_MAX (default 64) per kernel; at exit one line {"pid": P, "counts": {"I": n, ...},
// "dropped": {"<symbol>": n}} says how often each was launched and how many launches of a kernel
// fell past the cap.  Parameter bytes come from cuFuncGetParamInfo (CUDA 12.4 and later), read up to
// the first index it refuses; on an older driver the list is empty.
//
// Launches are seen at the driver (cuLaunchKernel and its forms).  The runtime's launch calls are
// watched too: one the driver's callbacks did not report while it ran is recorded when it returns,
// from the runtime's own parameters (CUDA 13's <<<>>> path, __cudaLaunchKernel, passes the library
// kernel handle, whose parameter layout cuKernelGetParamInfo gives; cudaLaunchKernel passes only a
// host stub, so its parameters are left out).
#include <cuda.h>
#include <cupti.h>  // with generated_cuda_meta.h: the parameter structs of each driver call
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

typedef CUresult (*ParamInfo)(void* handle, size_t index, size_t* offset, size_t* size);
typedef CUresult (*NameOf)(const char** name, void* handle);

struct Observer {
  std::mutex lock;
  FILE* out = nullptr;
  size_t cap = 64;
  std::map<std::string, size_t> distinct;      // symbol -> configurations recorded
  std::map<std::string, size_t> ids;           // configuration -> id
  std::vector<unsigned long long> counts;      // id -> launches
  std::map<std::string, unsigned long long> dropped;  // symbol -> launches past the cap
  ParamInfo func_param_info = nullptr;
  ParamInfo kernel_param_info = nullptr;
  NameOf func_name = nullptr;
};

// A runtime launch in progress on this thread, and whether the driver reported it.
struct RuntimeLaunch {
  bool active = false;
  bool recorded = false;
};
thread_local RuntimeLaunch runtime_launch;

// The parameters of __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t): CUPTI
// hands them as a struct of the arguments in order, which the generated headers do not declare.
struct LibraryKernelLaunch {
  void* kernel;
  dim3 gridDim;
  dim3 blockDim;
  void** args;
  size_t sharedMem;
  cudaStream_t stream;
};

Observer& observer() {
  static Observer* one = new Observer();  // never destroyed: the exit handler may run after static destructors
  return *one;
}

void append_json_string(std::string& out, const char* text) {
  out += '"';
  for (const char* c = text; *c; ++c) {
    if (*c == '"' || *c == '\\') { out += '\\'; out += *c; }
    else if ((unsigned char)*c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", (unsigned char)*c); out += buf; }
    else out += *c;
  }
  out += '"';
}

// The parameter list as JSON: offset, size and bytes of each parameter, from the kernel's own layout.
std::string parameters(CUfunction f, void** params, void** extra) {
  Observer& o = observer();
  if (f == nullptr) return "[]";
  const unsigned char* buffer = nullptr;
  size_t buffer_size = 0;
  for (void** e = extra; e != nullptr && *e != CU_LAUNCH_PARAM_END; e += 2) {
    if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = (const unsigned char*)e[1];
    else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) buffer_size = *(const size_t*)e[1];
  }
  ParamInfo info = o.func_param_info;
  std::string json = "[";
  for (size_t i = 0; i < 1024; ++i) {
    size_t offset = 0, size = 0;
    if (info == nullptr || info((void*)f, i, &offset, &size) != CUDA_SUCCESS) {
      // the runtime may launch a library kernel (CUkernel) through this call: ask for its layout instead
      if (i == 0 && info == o.func_param_info && o.kernel_param_info != nullptr &&
          o.kernel_param_info((void*)f, i, &offset, &size) == CUDA_SUCCESS) {
        info = o.kernel_param_info;
      } else {
        break;
      }
    }
    const unsigned char* bytes = nullptr;
    if (params != nullptr) bytes = (const unsigned char*)params[i];
    else if (buffer != nullptr && offset + size <= buffer_size) bytes = buffer + offset;
    if (bytes == nullptr || size > 256) break;
    char head[64];
    std::snprintf(head, sizeof head, "%s{\"offset\": %zu, \"size\": %zu, \"hex\": \"", i ? ", " : "", offset, size);
    json += head;
    static const char digits[] = "0123456789abcdef";
    for (size_t b = 0; b < size; ++b) { json += digits[bytes[b] >> 4]; json += digits[bytes[b] & 15]; }
    json += "\"}";
  }
  return json + "]";
}

void record(const char* symbol, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
            unsigned bz, unsigned shmem, void** params, void** extra) {
  Observer& o = observer();
  if (o.out == nullptr) return;
  const char* name = symbol;
  if ((name == nullptr || *name == 0) && o.func_name != nullptr && o.func_name(&name, (void*)f) != CUDA_SUCCESS) name = nullptr;
  if (name == nullptr) name = "?";
  char dims[160];
  std::snprintf(dims, sizeof dims, "\"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"shmem\": %u", gx, gy, gz, bx, by, bz, shmem);
  const std::string args = parameters(f, params, extra);
  const std::string key = std::string(name) + '\n' + dims + '\n' + args;
  std::lock_guard<std::mutex> guard(o.lock);
  auto known = o.ids.find(key);
  if (known != o.ids.end()) { ++o.counts[known->second]; return; }
  size_t& seen = o.distinct[name];
  if (seen >= o.cap) { ++o.dropped[name]; return; }
  ++seen;
  const size_t id = o.counts.size();
  o.ids[key] = id;
  o.counts.push_back(1);
  std::string line = "{\"pid\": " + std::to_string((long long)getpid()) + ", \"id\": " + std::to_string(id) + ", \"kernel\": ";
  append_json_string(line, name);
  line += std::string(", ") + dims + ", \"params\": " + args + "}\n";
  std::fwrite(line.data(), 1, line.size(), o.out);
  std::fflush(o.out);
}

void from_runtime(CUpti_CallbackId id, const CUpti_CallbackData* cb) {
  const dim3* grid = nullptr;
  const dim3* block = nullptr;
  size_t shmem = 0;
  void* handle = nullptr;  // a library kernel handle where the call passes one
  void** args = nullptr;
  switch (id) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000: {
      const cudaLaunchKernel_v7000_params* p = (const cudaLaunchKernel_v7000_params*)cb->functionParams;
      grid = &p->gridDim; block = &p->blockDim; shmem = p->sharedMem;
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
    case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
      const cudaLaunchKernelExC_v11060_params* p = (const cudaLaunchKernelExC_v11060_params*)cb->functionParams;
      if (p->config == nullptr) return;
      grid = &p->config->gridDim; block = &p->config->blockDim; shmem = p->config->dynamicSmemBytes;
      break;
    }
#if CUDA_VERSION >= 13000
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000:
    case CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000: {
      const LibraryKernelLaunch* p = (const LibraryKernelLaunch*)cb->functionParams;
      grid = &p->gridDim; block = &p->blockDim; shmem = p->sharedMem; handle = p->kernel; args = p->args;
      break;
    }
#endif
    default:
      return;
  }
  record(cb->symbolName, (CUfunction)handle, grid->x, grid->y, grid->z, block->x, block->y, block->z, (unsigned)shmem,
         handle != nullptr ? args : nullptr, nullptr);
}

void CUPTIAPI on_launch(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const CUpti_CallbackData* cb = (const CUpti_CallbackData*)data;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (cb->callbackSite == CUPTI_API_ENTER) {
      runtime_launch.active = true;
      runtime_launch.recorded = false;
    } else {
      if (runtime_launch.active && !runtime_launch.recorded) from_runtime(id, cb);
      runtime_launch.active = false;
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cb->callbackSite != CUPTI_API_ENTER) return;
  if (runtime_launch.active) runtime_launch.recorded = true;
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
      const cuLaunchKernel_params* p = (const cuLaunchKernel_params*)cb->functionParams;
      record(cb->symbolName, p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
             p->sharedMemBytes, p->kernelParams, p->extra);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      const cuLaunchKernel_ptsz_params* p = (const cuLaunchKernel_ptsz_params*)cb->functionParams;
      record(cb->symbolName, p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
             p->sharedMemBytes, p->kernelParams, p->extra);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      const cuLaunchKernelEx_params* p = (const cuLaunchKernelEx_params*)cb->functionParams;
      const CUlaunchConfig* c = p->config;
      if (c != nullptr)
        record(cb->symbolName, p->f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
               c->sharedMemBytes, p->kernelParams, p->extra);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const cuLaunchKernelEx_ptsz_params* p = (const cuLaunchKernelEx_ptsz_params*)cb->functionParams;
      const CUlaunchConfig* c = p->config;
      if (c != nullptr)
        record(cb->symbolName, p->f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
               c->sharedMemBytes, p->kernelParams, p->extra);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: {
      const cuLaunchCooperativeKernel_params* p = (const cuLaunchCooperativeKernel_params*)cb->functionParams;
      record(cb->symbolName, p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
             p->sharedMemBytes, p->kernelParams, nullptr);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
      const cuLaunchCooperativeKernel_ptsz_params* p = (const cuLaunchCooperativeKernel_ptsz_params*)cb->functionParams;
      record(cb->symbolName, p->f, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ,
             p->sharedMemBytes, p->kernelParams, nullptr);
      break;
    }
    default:
      break;
  }
}

void at_exit() {
  Observer& o = observer();
  std::lock_guard<std::mutex> guard(o.lock);
  if (o.out == nullptr) return;
  std::string line = "{\"pid\": " + std::to_string((long long)getpid()) + ", \"counts\": {";
  for (size_t id = 0; id < o.counts.size(); ++id)
    line += (id ? ", \"" : "\"") + std::to_string(id) + "\": " + std::to_string(o.counts[id]);
  line += "}, \"dropped\": {";
  bool first = true;
  for (const auto& d : o.dropped) {
    if (!first) line += ", ";
    first = false;
    append_json_string(line, d.first.c_str());
    line += ": " + std::to_string(d.second);
  }
  line += "}}\n";
  std::fwrite(line.data(), 1, line.size(), o.out);
  std::fclose(o.out);
  o.out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection(void) {
  Observer& o = observer();
  const char* path = std::getenv("SWZC_OBSERVE_OUT");
  if (path == nullptr || o.out != nullptr) return 1;
  o.out = std::fopen(path, "a");
  if (o.out == nullptr) return 1;
  if (const char* cap = std::getenv("SWZC_OBSERVE_MAX")) o.cap = (size_t)std::strtoull(cap, nullptr, 10);
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver != nullptr) {
    o.func_param_info = (ParamInfo)dlsym(driver, "cuFuncGetParamInfo");
    o.kernel_param_info = (ParamInfo)dlsym(driver, "cuKernelGetParamInfo");
    o.func_name = (NameOf)dlsym(driver, "cuFuncGetName");
  }
  CUpti_SubscriberHandle subscriber;
  if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_launch, nullptr) != CUPTI_SUCCESS) return 1;
  const CUpti_CallbackId launches[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz};
  for (CUpti_CallbackId id : launches) cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  const CUpti_CallbackId runtime_launches[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
#if CUDA_VERSION >= 13000
      CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
#endif
  };
  for (CUpti_CallbackId id : runtime_launches) cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  std::atexit(at_exit);
  return 1;
}
