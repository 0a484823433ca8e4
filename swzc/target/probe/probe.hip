// swzc probe (HIP, AMD): the counterpart of probe.cu for AMD Instinct GPUs (CDNA 2/3).
//
// UNTESTED ON AMD HARDWARE: this file was written without hipcc or an AMD GPU at hand. It follows
// the ROCm documentation for the hardware registers and the LLVM AMDGPU memory model; check its
// output (in particular the `part` lines against the documented XCD count) before trusting it.
//
// Build and run by hand (on the machine with the GPU):
//     hipcc -O2 --offload-arch=gfx942 -o swzc-probe probe.hip && ./swzc-probe > probe.txt
// then, anywhere:   swzc probe --base mi300x --from-output probe.txt --output my-mi300x.toml
//
// Options and exit status as in probe.cu.  The output format is probe.cu's, version 1, with:
//     platform hip
//     arch <gfx…>                        hipDeviceProp_t.gcnArchName up to the first ':' (instead of `cc`)
//     sms <n>                            the CU count (hipDeviceProp_t.multiProcessorCount)
//     block <i> sm <cu> start <ns> end <ns>
//         <cu> is a hardware CU key, (xcc << 8) | (se << 5) | (sh << 4) | cu_in_sh, not a dense
//         index: harvested CUs leave holes, and the reader renumbers the keys it sees densely
//     part <cu> <xcc>                    the chiplet (XCD, with its own L2) of each CU key seen
//     lat <cu> <line> <cycles>           cycles of s_memtime (clock64()) per dependent load
// Times come from wall_clock64() (a constant-rate counter) converted to nanoseconds with
// hipDeviceAttributeWallClockRate.

#include <hip/hip_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace {

constexpr int kLineBytes = 128;
constexpr unsigned kCuSlots = 4096;  // CU keys are below 1 << 12

void die(const char* what, hipError_t err, int line) {
    int code = (err == hipErrorNoDevice || err == hipErrorInsufficientDriver) ? 2 : 1;
    std::fprintf(stderr, "swzc-probe: %s failed (line %d): %s\n", what, line, hipGetErrorString(err));
    std::exit(code);
}

#define CHECK(call)                                   \
    do {                                              \
        hipError_t err_ = (call);                     \
        if (err_ != hipSuccess) die(#call, err_, __LINE__); \
    } while (0)

// s_getreg_b32 immediate: bits 5:0 the register, 10:6 the first bit, 15:11 the width minus one.
#define SWZC_GETREG(reg, offset, width) ((((width) - 1) << 11) | ((offset) << 6) | (reg))

// HW_ID (hardware register 4 on GFX9): CU_ID bits 11:8, SH_ID bit 12, SE_ID bits 15:13.
constexpr int kHwRegHwId = 4;
// XCC_ID (hardware register 20 on gfx940/941/942/950): the XCC (XCD) the wave runs on, bits 3:0.
constexpr int kHwRegXccId = 20;

__device__ __forceinline__ unsigned xcc_id() {
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
    return __builtin_amdgcn_s_getreg(SWZC_GETREG(kHwRegXccId, 0, 4));
#else
    return 0;  // one die (MI200 exposes each GCD as its own device)
#endif
}

__device__ __forceinline__ unsigned cu_key() {
    unsigned cu = __builtin_amdgcn_s_getreg(SWZC_GETREG(kHwRegHwId, 8, 4));
    unsigned sh = __builtin_amdgcn_s_getreg(SWZC_GETREG(kHwRegHwId, 12, 1));
    unsigned se = __builtin_amdgcn_s_getreg(SWZC_GETREG(kHwRegHwId, 13, 3));
    return (xcc_id() << 8) | (se << 5) | (sh << 4) | cu;
}

// An agent-scope relaxed atomic load: the compiler gives it the cache bits that skip the per-CU
// vector L1 and read the L2 (glc on gfx90a, sc1 on gfx942).  The line holds its own address.
__device__ __forceinline__ unsigned long long load_l2(unsigned long long address) {
    return __hip_atomic_load(reinterpret_cast<unsigned long long*>(address), __ATOMIC_RELAXED,
                             __HIP_MEMORY_SCOPE_AGENT);
}

struct BlockRecord {
    unsigned long long start;
    unsigned long long end;
    unsigned cu;
    unsigned xcc;
};

__global__ void dispatch_kernel(BlockRecord* records, unsigned long long spin_ticks) {
    unsigned long long start = wall_clock64();
    unsigned long long now = start;
    while (now - start < spin_ticks) now = wall_clock64();
    if (threadIdx.x == 0) {
        BlockRecord r;
        r.start = start;
        r.end = wall_clock64();
        r.cu = cu_key();
        r.xcc = xcc_id();
        records[blockIdx.x] = r;
    }
}

__global__ void init_lines(unsigned long long* buffer, const unsigned long long* offsets, int lines) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < lines) {
        unsigned long long* p = buffer + offsets[j] / sizeof(unsigned long long);
        *p = reinterpret_cast<unsigned long long>(p);
    }
}

__global__ void latency_kernel(const char* buffer, const unsigned long long* offsets, int lines, int repeats,
                               int trials, unsigned* claimed, unsigned* xcc_of, float* out,
                               unsigned long long* sink) {
    if (threadIdx.x != 0) return;
    unsigned s = cu_key();
    if (s >= kCuSlots || atomicCAS(&claimed[s], 0u, 1u) != 0u) return;
    xcc_of[s] = xcc_id();
    unsigned long long p = 0;
    for (int i = 0; i < lines; ++i) {
        int j = static_cast<int>((i + 7ull * s) % lines);
        float best = 3.0e38f;
        for (int t = 0; t < trials; ++t) {
            p = reinterpret_cast<unsigned long long>(buffer + offsets[j]);
            for (int w = 0; w < 4; ++w) p = load_l2(p);
            long long t0 = clock64();
            for (int r = 0; r < repeats; ++r) p = load_l2(p);
            long long t1 = clock64();
            float mean = static_cast<float>(t1 - t0) / static_cast<float>(repeats);
            best = mean < best ? mean : best;
        }
        out[static_cast<size_t>(s) * lines + j] = best;
    }
    if (p == 0) *sink = p;  // never true: keeps the chain alive
}

int arg_int(int argc, char** argv, const char* name, int fallback) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], name) == 0) {
            char* end = nullptr;
            long v = std::strtol(argv[i + 1], &end, 10);
            if (*end != '\0' || v < 0 || v > 1000000) {
                std::fprintf(stderr, "swzc-probe: %s needs a whole number, not %s\n", name, argv[i + 1]);
                std::exit(1);
            }
            return static_cast<int>(v);
        }
    }
    return fallback;
}

void check_args(int argc, char** argv) {
    static const char* known[] = {"--device", "--spin-us", "--waves", "--lines", "--buffer-mb", "--repeats", "--trials"};
    for (int i = 1; i < argc; i += 2) {
        bool ok = false;
        for (const char* k : known) ok = ok || std::strcmp(argv[i], k) == 0;
        if (!ok || i + 1 >= argc) {
            std::fprintf(stderr, "swzc-probe: unknown or incomplete option %s\n", argv[i]);
            std::exit(1);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    check_args(argc, argv);
    const int device = arg_int(argc, argv, "--device", 0);
    const int spin_us = std::max(1, arg_int(argc, argv, "--spin-us", 50));
    const int waves = std::max(2, arg_int(argc, argv, "--waves", 4));
    const int lines = std::max(2, arg_int(argc, argv, "--lines", 128));
    const int buffer_mb = std::max(1, arg_int(argc, argv, "--buffer-mb", 16));
    const int repeats = std::max(1, arg_int(argc, argv, "--repeats", 256));
    const int trials = std::max(1, arg_int(argc, argv, "--trials", 3));

    int count = 0;
    hipError_t err = hipGetDeviceCount(&count);
    if (err != hipSuccess || count == 0) {
        std::fprintf(stderr, "swzc-probe: no HIP device: %s\n",
                     err != hipSuccess ? hipGetErrorString(err) : "hipGetDeviceCount found none");
        return 2;
    }
    if (device >= count) {
        std::fprintf(stderr, "swzc-probe: no HIP device %d (there are %d)\n", device, count);
        return 2;
    }
    CHECK(hipSetDevice(device));
    hipDeviceProp_t prop;
    CHECK(hipGetDeviceProperties(&prop, device));
    int clock_khz = 0;
    if (hipDeviceGetAttribute(&clock_khz, hipDeviceAttributeClockRate, device) != hipSuccess) clock_khz = 0;
    int wall_khz = 0;
    if (hipDeviceGetAttribute(&wall_khz, hipDeviceAttributeWallClockRate, device) != hipSuccess || wall_khz <= 0) {
        std::fprintf(stderr, "swzc-probe: the device does not report its wall clock rate\n");
        return 1;
    }
    (void)hipGetLastError();

    char date[16] = "unknown";
    std::time_t now = std::time(nullptr);
    std::tm utc;
    if (gmtime_r(&now, &utc) != nullptr) std::strftime(date, sizeof date, "%Y-%m-%d", &utc);

    char arch[sizeof prop.gcnArchName + 1];
    std::snprintf(arch, sizeof arch, "%s", prop.gcnArchName);
    if (char* colon = std::strchr(arch, ':')) *colon = '\0';

    const int cus = prop.multiProcessorCount;
    std::printf("swzc-probe 1\n");
    std::printf("# swzc probe (HIP); the format is described at the top of probe.cu and probe.hip\n");
    std::printf("platform hip\n");
    std::printf("device %s\n", prop.name[0] ? prop.name : arch);
    std::printf("date %s\n", date);
    std::printf("arch %s\n", arch);
    std::printf("sms %d\n", cus);
    std::printf("l2_bytes %d\n", prop.l2CacheSize);
    std::printf("warp_size %d\n", prop.warpSize);
    std::printf("max_threads_per_sm %d\n", prop.maxThreadsPerMultiProcessor);
    std::printf("max_blocks_per_sm %d\n", prop.maxBlocksPerMultiProcessor);
    std::printf("regs_per_sm %d\n", prop.regsPerMultiprocessor);
    std::printf("smem_per_sm %zu\n", prop.maxSharedMemoryPerMultiProcessor);
    std::printf("clock_khz %d\n", clock_khz);
    std::fflush(stdout);

    std::vector<unsigned> xcc_of_key(kCuSlots, ~0u);

    {
        const int threads = prop.warpSize;
        int occupancy = 0;
        CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, dispatch_kernel, threads, 0));
        occupancy = std::max(1, occupancy);
        const long long blocks = static_cast<long long>(cus) * occupancy * waves;
        const unsigned long long spin_ns = 1000ull * spin_us;
        const unsigned long long spin_ticks = std::max(1ull, spin_ns * static_cast<unsigned long long>(wall_khz) / 1000000ull);
        BlockRecord* d_records = nullptr;
        CHECK(hipMalloc(&d_records, blocks * sizeof(BlockRecord)));
        CHECK(hipMemset(d_records, 0, blocks * sizeof(BlockRecord)));
        hipLaunchKernelGGL(dispatch_kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0, 0, d_records, spin_ticks);
        CHECK(hipGetLastError());
        CHECK(hipDeviceSynchronize());
        std::vector<BlockRecord> records(blocks);
        CHECK(hipMemcpy(records.data(), d_records, blocks * sizeof(BlockRecord), hipMemcpyDeviceToHost));
        CHECK(hipFree(d_records));
        unsigned long long origin = records[0].start;
        for (const BlockRecord& r : records) origin = std::min(origin, r.start);
        auto ns = [&](unsigned long long ticks) { return (ticks - origin) * 1000000ull / static_cast<unsigned long long>(wall_khz); };
        std::printf("dispatch threads %d blocks %lld spin_ns %llu occupancy %d\n", threads, blocks, spin_ns, occupancy);
        for (long long i = 0; i < blocks; ++i) {
            const BlockRecord& r = records[i];
            if (r.cu < kCuSlots) xcc_of_key[r.cu] = r.xcc;
            std::printf("block %lld sm %u start %llu end %llu\n", i, r.cu, ns(r.start), ns(r.end));
        }
        std::fflush(stdout);
    }

    {
        size_t buffer_bytes = static_cast<size_t>(buffer_mb) << 20;
        buffer_bytes = std::max(buffer_bytes / (static_cast<size_t>(lines) * kLineBytes), size_t{1}) *
                       static_cast<size_t>(lines) * kLineBytes;
        const size_t stride = buffer_bytes / lines;
        const size_t slots = stride / kLineBytes;
        std::vector<unsigned long long> offsets(lines);
        for (int j = 0; j < lines; ++j) {
            size_t jitter = (static_cast<size_t>(j) * 2654435761ull) % slots;
            offsets[j] = static_cast<unsigned long long>(j * stride + jitter * kLineBytes);
        }
        char* d_buffer = nullptr;
        unsigned long long* d_offsets = nullptr;
        unsigned* d_claimed = nullptr;
        unsigned* d_xcc = nullptr;
        float* d_out = nullptr;
        unsigned long long* d_sink = nullptr;
        CHECK(hipMalloc(&d_buffer, buffer_bytes));
        CHECK(hipMemset(d_buffer, 0, buffer_bytes));
        CHECK(hipMalloc(&d_offsets, lines * sizeof(unsigned long long)));
        CHECK(hipMemcpy(d_offsets, offsets.data(), lines * sizeof(unsigned long long), hipMemcpyHostToDevice));
        CHECK(hipMalloc(&d_claimed, kCuSlots * sizeof(unsigned)));
        CHECK(hipMemset(d_claimed, 0, kCuSlots * sizeof(unsigned)));
        CHECK(hipMalloc(&d_xcc, kCuSlots * sizeof(unsigned)));
        CHECK(hipMemset(d_xcc, 0xff, kCuSlots * sizeof(unsigned)));
        CHECK(hipMalloc(&d_out, static_cast<size_t>(kCuSlots) * lines * sizeof(float)));
        CHECK(hipMemset(d_out, 0, static_cast<size_t>(kCuSlots) * lines * sizeof(float)));
        CHECK(hipMalloc(&d_sink, sizeof(unsigned long long)));
        hipLaunchKernelGGL(init_lines, dim3((lines + 127) / 128), dim3(128), 0, 0,
                           reinterpret_cast<unsigned long long*>(d_buffer), d_offsets, lines);
        CHECK(hipGetLastError());
        CHECK(hipDeviceSynchronize());

        std::vector<unsigned> claimed(kCuSlots, 0);
        std::vector<unsigned> xcc(kCuSlots, ~0u);
        int have = 0;
        for (int attempt = 0; attempt < 6 && have < cus; ++attempt) {
            hipLaunchKernelGGL(latency_kernel, dim3(static_cast<unsigned>(cus) * 4), dim3(prop.warpSize), 0, 0,
                               d_buffer, d_offsets, lines, repeats, trials, d_claimed, d_xcc, d_out, d_sink);
            CHECK(hipGetLastError());
            CHECK(hipDeviceSynchronize());
            CHECK(hipMemcpy(claimed.data(), d_claimed, kCuSlots * sizeof(unsigned), hipMemcpyDeviceToHost));
            have = static_cast<int>(std::count(claimed.begin(), claimed.end(), 1u));
        }
        CHECK(hipMemcpy(xcc.data(), d_xcc, kCuSlots * sizeof(unsigned), hipMemcpyDeviceToHost));
        for (unsigned s = 0; s < kCuSlots; ++s)
            if (claimed[s] && xcc[s] != ~0u) xcc_of_key[s] = xcc[s];
        if (have < cus) std::printf("# latency measured on %d of %d CUs\n", have, cus);
        std::vector<float> out(static_cast<size_t>(kCuSlots) * lines);
        CHECK(hipMemcpy(out.data(), d_out, out.size() * sizeof(float), hipMemcpyDeviceToHost));
        for (unsigned s = 0; s < kCuSlots; ++s)
            if (xcc_of_key[s] != ~0u) std::printf("part %u %u\n", s, xcc_of_key[s]);
        std::printf("latency lines %d buffer_bytes %zu repeats %d trials %d line_bytes %d\n", lines, buffer_bytes,
                    repeats, trials, kLineBytes);
        for (int j = 0; j < lines; ++j) std::printf("# line %d offset %llu\n", j, offsets[j]);
        for (unsigned s = 0; s < kCuSlots; ++s) {
            if (!claimed[s]) continue;
            for (int j = 0; j < lines; ++j) std::printf("lat %u %d %.1f\n", s, j, out[static_cast<size_t>(s) * lines + j]);
        }
        CHECK(hipFree(d_buffer));
        CHECK(hipFree(d_offsets));
        CHECK(hipFree(d_claimed));
        CHECK(hipFree(d_xcc));
        CHECK(hipFree(d_out));
        CHECK(hipFree(d_sink));
    }

    std::printf("end\n");
    std::fflush(stdout);
    return 0;
}
