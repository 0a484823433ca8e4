// swzc probe (CUDA): measures what a swzc hardware model needs on the local GPU and prints it as text.
//
// Build and run by hand (on the machine with the GPU):
//     nvcc -O2 -arch=sm_90 -o swzc-probe probe.cu && ./swzc-probe > probe.txt
// then, anywhere:   swzc probe --base h200 --from-output probe.txt --output my-h200.toml
// `swzc probe` with no --from-output does the same build and run itself.
//
// Options (all optional):  --device N  --spin-us N (50)  --waves N (4)  --lines N (128)
//                          --buffer-mb N (16)  --repeats N (256)  --trials N (3)
// Exit status: 0 done; 2 no usable CUDA device; 1 any other failure (a message on stderr).
//
// Output format, version 1: one fact per line, a keyword then values separated by single spaces;
// lines starting with '#' are comments; a reader ignores keywords it does not know.
//     swzc-probe 1                       format and version (always the first line)
//     platform cuda
//     device <name ...>                  the rest of the line
//     date <YYYY-MM-DD>                  UTC date of the run
//     cc <major>.<minor>                 compute capability
//     sms <n>                            cudaDeviceProp.multiProcessorCount
//     l2_bytes <n>                       cudaDeviceProp.l2CacheSize
//     warp_size <n>
//     max_threads_per_sm <n>             cudaDeviceProp.maxThreadsPerMultiProcessor
//     max_blocks_per_sm <n>              cudaDeviceProp.maxBlocksPerMultiProcessor
//     regs_per_sm <n>                    cudaDeviceProp.regsPerMultiprocessor (32-bit registers)
//     smem_per_sm <n>                    cudaDeviceProp.sharedMemPerMultiprocessor (bytes)
//     clock_khz <n>                      SM clock (cudaDevAttrClockRate), 0 if unknown
//     dispatch threads <t> blocks <n> spin_ns <ns> occupancy <k>
//         one launch of n one-warp blocks; each spins spin_ns so that waves form; k is what
//         cudaOccupancyMaxActiveBlocksPerMultiprocessor says fits on one SM
//     block <i> sm <s> start <ns> end <ns>
//         one line per block, in block index order: the SM (%smid) it ran on and its start and
//         end in %globaltimer nanoseconds, relative to the earliest start
//     latency lines <L> buffer_bytes <B> repeats <R> trials <T> line_bytes 128
//         an L2 hit latency table: L cache lines spread over a B-byte buffer (well below the L2
//         size, so it stays resident); from each SM, one thread times R dependent ld.global.cg
//         loads (L1 bypassed) of each line, best of T trials
//     lat <sm> <line> <cycles>           mean SM clock cycles per dependent load
//     end                                the run finished (a reader refuses output without it)
// The HIP version (probe.hip) prints the same format with `platform hip`, `arch <gfx…>` instead of
// `cc`, and `part <cu> <xcc>` lines giving each CU's chiplet (XCD).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

namespace {

constexpr int kLineBytes = 128;
constexpr unsigned kSmSlots = 4096;  // %smid values are below %nsmid, far below this

void die(const char* what, cudaError_t err, int line) {
    int code = (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) ? 2 : 1;
    std::fprintf(stderr, "swzc-probe: %s failed (line %d): %s\n", what, line, cudaGetErrorString(err));
    std::exit(code);
}

#define CHECK(call)                                   \
    do {                                              \
        cudaError_t err_ = (call);                    \
        if (err_ != cudaSuccess) die(#call, err_, __LINE__); \
    } while (0)

__device__ __forceinline__ unsigned sm_id() {
    unsigned r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ long long cycles() {
    long long c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    return c;
}

// A load cached in L2 only (.cg): the line holds its own address, so each load depends on the last.
__device__ __forceinline__ unsigned long long load_cg(unsigned long long address) {
    unsigned long long value;
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(value) : "l"(address) : "memory");
    return value;
}

struct BlockRecord {
    unsigned long long start;
    unsigned long long end;
    unsigned sm;
    unsigned pad;
};

__global__ void dispatch_kernel(BlockRecord* records, unsigned long long spin_ns) {
    unsigned long long start = global_ns();
    unsigned long long now = start;
    while (now - start < spin_ns) now = global_ns();
    if (threadIdx.x == 0) {
        BlockRecord r;
        r.start = start;
        r.end = global_ns();
        r.sm = sm_id();
        r.pad = 0;
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

// The first block to reach an SM claims it and times every line from there; later blocks on an
// already claimed SM leave at once.  SMs start at different lines so they do not queue on one slice.
__global__ void latency_kernel(const char* buffer, const unsigned long long* offsets, int lines, int repeats,
                               int trials, unsigned* claimed, float* out, unsigned long long* sink) {
    if (threadIdx.x != 0) return;
    unsigned s = sm_id();
    if (s >= kSmSlots || atomicCAS(&claimed[s], 0u, 1u) != 0u) return;
    unsigned long long p = 0;
    for (int i = 0; i < lines; ++i) {
        int j = static_cast<int>((i + 7ull * s) % lines);
        float best = 3.0e38f;
        for (int t = 0; t < trials; ++t) {
            p = reinterpret_cast<unsigned long long>(buffer + offsets[j]);
            for (int w = 0; w < 4; ++w) p = load_cg(p);  // warm: the line is in L2 (and no L1 copy is used)
            long long t0 = cycles();
            for (int r = 0; r < repeats; ++r) p = load_cg(p);
            long long t1 = cycles();
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
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        std::fprintf(stderr, "swzc-probe: no CUDA device: %s\n",
                     err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount found none");
        return 2;
    }
    if (device >= count) {
        std::fprintf(stderr, "swzc-probe: no CUDA device %d (there are %d)\n", device, count);
        return 2;
    }
    CHECK(cudaSetDevice(device));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, device));
    int clock_khz = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) clock_khz = 0;
    (void)cudaGetLastError();

    char date[16] = "unknown";
    std::time_t now = std::time(nullptr);
    std::tm utc;
    if (gmtime_r(&now, &utc) != nullptr) std::strftime(date, sizeof date, "%Y-%m-%d", &utc);

    const int sms = prop.multiProcessorCount;
    std::printf("swzc-probe 1\n");
    std::printf("# swzc probe (CUDA); the format is described at the top of probe.cu\n");
    std::printf("platform cuda\n");
    std::printf("device %s\n", prop.name);
    std::printf("date %s\n", date);
    std::printf("cc %d.%d\n", prop.major, prop.minor);
    std::printf("sms %d\n", sms);
    std::printf("l2_bytes %d\n", prop.l2CacheSize);
    std::printf("warp_size %d\n", prop.warpSize);
    std::printf("max_threads_per_sm %d\n", prop.maxThreadsPerMultiProcessor);
    std::printf("max_blocks_per_sm %d\n", prop.maxBlocksPerMultiProcessor);
    std::printf("regs_per_sm %d\n", prop.regsPerMultiprocessor);
    std::printf("smem_per_sm %zu\n", prop.sharedMemPerMultiprocessor);
    std::printf("clock_khz %d\n", clock_khz);
    std::fflush(stdout);

    // Dispatch order and residency: several waves of one-warp blocks, so that the block limit per SM
    // (not the thread limit) decides how many are resident at once.
    {
        const int threads = prop.warpSize;
        int occupancy = 0;
        CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, dispatch_kernel, threads, 0));
        occupancy = std::max(1, occupancy);
        const long long blocks = static_cast<long long>(sms) * occupancy * waves;
        const unsigned long long spin_ns = 1000ull * spin_us;
        BlockRecord* d_records = nullptr;
        CHECK(cudaMalloc(&d_records, blocks * sizeof(BlockRecord)));
        CHECK(cudaMemset(d_records, 0, blocks * sizeof(BlockRecord)));
        dispatch_kernel<<<static_cast<unsigned>(blocks), threads>>>(d_records, spin_ns);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        std::vector<BlockRecord> records(blocks);
        CHECK(cudaMemcpy(records.data(), d_records, blocks * sizeof(BlockRecord), cudaMemcpyDeviceToHost));
        CHECK(cudaFree(d_records));
        unsigned long long origin = records[0].start;
        for (const BlockRecord& r : records) origin = std::min(origin, r.start);
        std::printf("dispatch threads %d blocks %lld spin_ns %llu occupancy %d\n", threads, blocks, spin_ns, occupancy);
        for (long long i = 0; i < blocks; ++i) {
            const BlockRecord& r = records[i];
            std::printf("block %lld sm %u start %llu end %llu\n", i, r.sm, r.start - origin, r.end - origin);
        }
        std::fflush(stdout);
    }

    // L2 hit latency from every SM to lines spread over a buffer that stays in L2.
    {
        size_t buffer_bytes = static_cast<size_t>(buffer_mb) << 20;
        if (prop.l2CacheSize > 0) buffer_bytes = std::min(buffer_bytes, static_cast<size_t>(prop.l2CacheSize) / 4);
        buffer_bytes = std::max(buffer_bytes / (static_cast<size_t>(lines) * kLineBytes), size_t{1}) *
                       static_cast<size_t>(lines) * kLineBytes;
        const size_t stride = buffer_bytes / lines;
        const size_t slots = stride / kLineBytes;
        std::vector<unsigned long long> offsets(lines);
        for (int j = 0; j < lines; ++j) {
            // a line per stride, at a varying place inside it, so many address bits vary
            size_t jitter = (static_cast<size_t>(j) * 2654435761ull) % slots;
            offsets[j] = static_cast<unsigned long long>(j * stride + jitter * kLineBytes);
        }
        char* d_buffer = nullptr;
        unsigned long long* d_offsets = nullptr;
        unsigned* d_claimed = nullptr;
        float* d_out = nullptr;
        unsigned long long* d_sink = nullptr;
        CHECK(cudaMalloc(&d_buffer, buffer_bytes));
        CHECK(cudaMemset(d_buffer, 0, buffer_bytes));
        CHECK(cudaMalloc(&d_offsets, lines * sizeof(unsigned long long)));
        CHECK(cudaMemcpy(d_offsets, offsets.data(), lines * sizeof(unsigned long long), cudaMemcpyHostToDevice));
        CHECK(cudaMalloc(&d_claimed, kSmSlots * sizeof(unsigned)));
        CHECK(cudaMemset(d_claimed, 0, kSmSlots * sizeof(unsigned)));
        CHECK(cudaMalloc(&d_out, static_cast<size_t>(kSmSlots) * lines * sizeof(float)));
        CHECK(cudaMemset(d_out, 0, static_cast<size_t>(kSmSlots) * lines * sizeof(float)));
        CHECK(cudaMalloc(&d_sink, sizeof(unsigned long long)));
        init_lines<<<(lines + 127) / 128, 128>>>(reinterpret_cast<unsigned long long*>(d_buffer), d_offsets, lines);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());

        std::vector<unsigned> claimed(kSmSlots, 0);
        int have = 0;
        for (int attempt = 0; attempt < 6 && have < sms; ++attempt) {
            latency_kernel<<<static_cast<unsigned>(sms) * 4, 32>>>(d_buffer, d_offsets, lines, repeats, trials,
                                                                   d_claimed, d_out, d_sink);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(claimed.data(), d_claimed, kSmSlots * sizeof(unsigned), cudaMemcpyDeviceToHost));
            have = static_cast<int>(std::count(claimed.begin(), claimed.end(), 1u));
        }
        if (have < sms) std::printf("# latency measured on %d of %d SMs\n", have, sms);
        std::vector<float> out(static_cast<size_t>(kSmSlots) * lines);
        CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
        std::printf("latency lines %d buffer_bytes %zu repeats %d trials %d line_bytes %d\n", lines, buffer_bytes,
                    repeats, trials, kLineBytes);
        for (int j = 0; j < lines; ++j) std::printf("# line %d offset %llu\n", j, offsets[j]);
        for (unsigned s = 0; s < kSmSlots; ++s) {
            if (!claimed[s]) continue;
            for (int j = 0; j < lines; ++j) std::printf("lat %u %d %.1f\n", s, j, out[static_cast<size_t>(s) * lines + j]);
        }
        CHECK(cudaFree(d_buffer));
        CHECK(cudaFree(d_offsets));
        CHECK(cudaFree(d_claimed));
        CHECK(cudaFree(d_out));
        CHECK(cudaFree(d_sink));
    }

    std::printf("end\n");
    std::fflush(stdout);
    return 0;
}
