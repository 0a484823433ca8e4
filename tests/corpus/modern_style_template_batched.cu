// Style: modern C++ batched kernels: 3D grid with blockIdx.z as batch, __launch_bounds__, template kernel launched as k<float, 16><<<grid, block, 0, stream>>>, extern "C" __global__, constexpr sizes.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

constexpr int kBatch = 8;
constexpr int kRows = 512;
constexpr int kCols = 384;
constexpr int kInner = 256;
constexpr int kThreads = 256;

#define CUDA_SAFE_CALL(x)                                                         \
    do {                                                                          \
        cudaError_t st = (x);                                                     \
        if (st != cudaSuccess) {                                                  \
            std::fprintf(stderr, "%s -> %s\n", #x, cudaGetErrorString(st));       \
            std::abort();                                                         \
        }                                                                         \
    } while (0)

// Batched GEMM: one z-slice of the grid per matrix in the batch.
template <typename T, int BS>
__global__ void __launch_bounds__(BS * BS)
batched_gemm(const T *__restrict__ A, const T *__restrict__ B, T *__restrict__ C,
             int m, int n, int k)
{
    __shared__ T sA[BS][BS];
    __shared__ T sB[BS][BS];

    const int batch = blockIdx.z;
    const T *a = A + static_cast<size_t>(batch) * m * k;
    const T *b = B + static_cast<size_t>(batch) * k * n;
    T *c = C + static_cast<size_t>(batch) * m * n;

    const int row = blockIdx.y * BS + threadIdx.y;
    const int col = blockIdx.x * BS + threadIdx.x;
    T acc = T(0);
    for (int t = 0; t < k; t += BS) {
        sA[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? a[row * k + t + threadIdx.x] : T(0);
        sB[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? b[(t + threadIdx.y) * n + col] : T(0);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < BS; ++i)
            acc += sA[threadIdx.y][i] * sB[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n)
        c[row * n + col] = acc;
}

// Per-batch row softmax-ish normalisation: grid is (rows, 1, batch).
__global__ void __launch_bounds__(kThreads, 2)
row_normalize(float *C, int m, int n)
{
    __shared__ float red[kThreads];
    float *row = C + (static_cast<size_t>(blockIdx.z) * m + blockIdx.x) * n;

    float s = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        s += fabsf(row[j]);
    red[threadIdx.x] = s;
    __syncthreads();
    for (int off = blockDim.x / 2; off > 0; off >>= 1) {
        if (threadIdx.x < off)
            red[threadIdx.x] += red[threadIdx.x + off];
        __syncthreads();
    }
    const float inv = red[0] > 0.f ? 1.f / red[0] : 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        row[j] *= inv;
}

extern "C" __global__ void fill_batched(float *p, int per_batch, float base)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.z;
    if (idx < per_batch)
        p[static_cast<size_t>(b) * per_batch + idx] = base + 0.001f * ((idx * 31 + b) % 97);
}

int main()
{
    const size_t nA = static_cast<size_t>(kBatch) * kRows * kInner;
    const size_t nB = static_cast<size_t>(kBatch) * kInner * kCols;
    const size_t nC = static_cast<size_t>(kBatch) * kRows * kCols;

    float *dA = nullptr, *dB = nullptr, *dC = nullptr;
    CUDA_SAFE_CALL(cudaMalloc(&dA, nA * sizeof(float)));
    CUDA_SAFE_CALL(cudaMalloc(&dB, nB * sizeof(float)));
    CUDA_SAFE_CALL(cudaMalloc(&dC, nC * sizeof(float)));

    cudaStream_t stream;
    CUDA_SAFE_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    {
        const int perA = kRows * kInner, perB = kInner * kCols;
        fill_batched<<<dim3((perA + kThreads - 1) / kThreads, 1, kBatch), kThreads, 0, stream>>>(dA, perA, 0.5f);
        fill_batched<<<dim3((perB + kThreads - 1) / kThreads, 1, kBatch), kThreads, 0, stream>>>(dB, perB, -0.25f);
    }

    constexpr int BS = 16;
    dim3 block(BS, BS);
    dim3 grid((kCols + BS - 1) / BS, (kRows + BS - 1) / BS, kBatch);
    batched_gemm<float, 16><<<grid, block, 0, stream>>>(dA, dB, dC, kRows, kCols, kInner);
    CUDA_SAFE_CALL(cudaGetLastError());

    dim3 ngrid(kRows, 1, kBatch);
    row_normalize<<<ngrid, kThreads, 0, stream>>>(dC, kRows, kCols);
    CUDA_SAFE_CALL(cudaGetLastError());

    std::vector<float> hC(nC);
    CUDA_SAFE_CALL(cudaMemcpyAsync(hC.data(), dC, nC * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_SAFE_CALL(cudaStreamSynchronize(stream));

    double total = 0.0;
    for (float v : hC) total += v;
    std::printf("batches=%d checksum=%.6f (expect about %d)\n", kBatch, total, -kBatch * kRows);

    CUDA_SAFE_CALL(cudaStreamDestroy(stream));
    CUDA_SAFE_CALL(cudaFree(dA));
    CUDA_SAFE_CALL(cudaFree(dB));
    CUDA_SAFE_CALL(cudaFree(dC));
    return 0;
}
