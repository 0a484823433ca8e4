// Style: SHOC-like histogram with shared + global atomics (order-insensitive) and grid-stride loops sized from the SM count; one extern "C" kernel.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define NUM_BINS 256
#define BLOCK_SIZE 256

#define CUDA_SAFE_CALL(call)                                                   \
    {                                                                          \
        cudaError_t err = call;                                                \
        if (cudaSuccess != err) {                                              \
            fprintf(stderr, "Cuda error in file '%s' in line %i : %s.\n",      \
                    __FILE__, __LINE__, cudaGetErrorString(err));              \
            exit(EXIT_FAILURE);                                                \
        }                                                                      \
    }

__global__ void histogram_shared(const unsigned char *data, unsigned int n,
                                 unsigned int *bins)
{
    __shared__ unsigned int local[NUM_BINS];
    for (unsigned int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
        local[b] = 0;
    __syncthreads();

    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();

    for (unsigned int b = threadIdx.x; b < NUM_BINS; b += blockDim.x)
        if (local[b])
            atomicAdd(&bins[b], local[b]);
}

/* straight global atomics, one element per thread, no grid-stride */
__global__ void histogram_global(const unsigned char *data, unsigned int n, unsigned int *bins)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&bins[data[i]], 1u);
}

extern "C" __global__ void normalize_bins(const unsigned int *bins, float *pdf,
                                          unsigned int nbins, float inv_total)
{
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < nbins;
         i += blockDim.x * gridDim.x)
        pdf[i] = bins[i] * inv_total;
}

int main(int argc, char *argv[])
{
    unsigned int n = (argc > 1) ? (unsigned int)atoi(argv[1]) : (64u << 20);
    int passes = (argc > 2) ? atoi(argv[2]) : 10;

    unsigned char *h_data = (unsigned char *)malloc(n);
    unsigned int h_ref[NUM_BINS];
    memset(h_ref, 0, sizeof(h_ref));
    srand(7);
    for (unsigned int i = 0; i < n; i++) {
        h_data[i] = (unsigned char)(rand() & 0xff);
        h_ref[h_data[i]]++;
    }

    int dev = 0, numSMs = 0;
    CUDA_SAFE_CALL(cudaGetDevice(&dev));
    CUDA_SAFE_CALL(cudaDeviceGetAttribute(&numSMs, cudaDevAttrMultiProcessorCount, dev));

    unsigned char *d_data;
    unsigned int *d_bins;
    float *d_pdf;
    CUDA_SAFE_CALL(cudaMalloc((void **)&d_data, n));
    CUDA_SAFE_CALL(cudaMalloc((void **)&d_bins, NUM_BINS * sizeof(unsigned int)));
    CUDA_SAFE_CALL(cudaMalloc((void **)&d_pdf, NUM_BINS * sizeof(float)));
    CUDA_SAFE_CALL(cudaMemcpy(d_data, h_data, n, cudaMemcpyHostToDevice));

    int gridStrideBlocks = numSMs * 8;
    unsigned int oneToOneBlocks = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;

    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    float best = 1e30f;
    for (int p = 0; p < passes; p++) {
        CUDA_SAFE_CALL(cudaMemset(d_bins, 0, NUM_BINS * sizeof(unsigned int)));
        cudaEventRecord(t0);
        histogram_shared<<<gridStrideBlocks, BLOCK_SIZE>>>(d_data, n, d_bins);
        cudaEventRecord(t1);
        cudaEventSynchronize(t1);
        float ms;
        cudaEventElapsedTime(&ms, t0, t1);
        if (ms < best) best = ms;
    }
    printf("histogram_shared best: %.3f ms (%.2f GB/s)\n", best, n / (best * 1.0e6));

    unsigned int h_bins[NUM_BINS];
    CUDA_SAFE_CALL(cudaMemcpy(h_bins, d_bins, sizeof(h_bins), cudaMemcpyDeviceToHost));
    int mismatch = memcmp(h_bins, h_ref, sizeof(h_bins)) != 0;

    CUDA_SAFE_CALL(cudaMemset(d_bins, 0, NUM_BINS * sizeof(unsigned int)));
    histogram_global<<<oneToOneBlocks, BLOCK_SIZE>>>(d_data, n, d_bins);
    normalize_bins<<<1, NUM_BINS>>>(d_bins, d_pdf, NUM_BINS, 1.0f / n);
    CUDA_SAFE_CALL(cudaGetLastError());
    CUDA_SAFE_CALL(cudaMemcpy(h_bins, d_bins, sizeof(h_bins), cudaMemcpyDeviceToHost));
    mismatch |= memcmp(h_bins, h_ref, sizeof(h_bins)) != 0;

    printf("%s\n", mismatch ? "FAILED" : "PASSED");

    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cudaFree(d_data);
    cudaFree(d_bins);
    cudaFree(d_pdf);
    free(h_data);
    return mismatch;
}
