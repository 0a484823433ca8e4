// Style: GEMM/elementwise with a 1D grid decoded into (tile_m, tile_n) in the kernel, directly and via a local `int bid = blockIdx.x;`.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

constexpr int M = 1024;
constexpr int N = 768;
constexpr int K = 512;
constexpr int TILE_M = 32;
constexpr int TILE_N = 32;

#define CHECK(call)                                                              \
    do {                                                                         \
        cudaError_t e = (call);                                                  \
        if (e != cudaSuccess) {                                                  \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,              \
                         cudaGetErrorString(e));                                 \
            std::exit(1);                                                        \
        }                                                                        \
    } while (0)

// Each block owns a TILE_M x TILE_N tile of C; block is 32x8 threads, 4 rows per thread.
__global__ void gemm_tile_decode(const float *A, const float *B, float *C,
                                 int m, int n, int k, int tiles_n)
{
    int tile_m = blockIdx.x / tiles_n;
    int tile_n = blockIdx.x % tiles_n;

    int col = tile_n * TILE_N + threadIdx.x;
    for (int r = threadIdx.y; r < TILE_M; r += blockDim.y) {
        int row = tile_m * TILE_M + r;
        if (row >= m || col >= n)
            continue;
        float acc = 0.f;
        for (int kk = 0; kk < k; ++kk)
            acc += A[row * k + kk] * B[kk * n + col];
        C[row * n + col] = acc;
    }
}

// Same decode, but the block id is first copied into a local.
__global__ void bias_relu_tile(float *C, const float *bias, int m, int n, int tiles_n)
{
    int bid = blockIdx.x;
    int tm = bid / tiles_n;
    int tn = bid - tm * tiles_n;

    int col = tn * TILE_N + threadIdx.x;
    for (int r = threadIdx.y; r < TILE_M; r += blockDim.y) {
        int row = tm * TILE_M + r;
        if (row < m && col < n) {
            float v = C[row * n + col] + bias[col];
            C[row * n + col] = v > 0.f ? v : 0.f;
        }
    }
}

// Column-major tile order: tile_n is the slow index.
__global__ void scale_tile_colmajor(float *C, int m, int n, int tiles_m, float s)
{
    const int tile_n = blockIdx.x / tiles_m;
    const int tile_m = blockIdx.x % tiles_m;
    int col = tile_n * TILE_N + threadIdx.x;
    for (int r = threadIdx.y; r < TILE_M; r += blockDim.y) {
        int row = tile_m * TILE_M + r;
        if (row < m && col < n)
            C[row * n + col] *= s;
    }
}

int main()
{
    std::vector<float> hA((size_t)M * K), hB((size_t)K * N), hBias(N), hC((size_t)M * N);
    for (size_t i = 0; i < hA.size(); ++i) hA[i] = (float)((i * 7) % 13) * 0.1f;
    for (size_t i = 0; i < hB.size(); ++i) hB[i] = (float)((i * 3) % 11) * 0.1f - 0.5f;
    for (int i = 0; i < N; ++i) hBias[i] = 0.01f * i;

    float *dA, *dB, *dC, *dBias;
    CHECK(cudaMalloc(&dA, hA.size() * sizeof(float)));
    CHECK(cudaMalloc(&dB, hB.size() * sizeof(float)));
    CHECK(cudaMalloc(&dC, hC.size() * sizeof(float)));
    CHECK(cudaMalloc(&dBias, hBias.size() * sizeof(float)));
    CHECK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dBias, hBias.data(), hBias.size() * sizeof(float), cudaMemcpyHostToDevice));

    const int tiles_m = (M + TILE_M - 1) / TILE_M;
    const int tiles_n = (N + TILE_N - 1) / TILE_N;
    dim3 block(TILE_N, 8);
    int num_tiles = tiles_m * tiles_n;

    gemm_tile_decode<<<num_tiles, block>>>(dA, dB, dC, M, N, K, tiles_n);
    CHECK(cudaGetLastError());
    bias_relu_tile<<<dim3(num_tiles), block>>>(dC, dBias, M, N, tiles_n);
    CHECK(cudaGetLastError());
    scale_tile_colmajor<<<tiles_m * tiles_n, block>>>(dC, M, N, tiles_m, 0.5f);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    CHECK(cudaMemcpy(hC.data(), dC, hC.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double checksum = 0.0;
    for (float v : hC) checksum += v;
    std::printf("tiles=%d checksum=%.4f\n", num_tiles, checksum);

    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaFree(dBias);
    return 0;
}
