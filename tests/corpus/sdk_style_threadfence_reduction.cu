// Style: single-pass sum reduction with a last-block-done pattern (__threadfence + atomicInc ticket, result used); inter-block communication a safe swizzle pass must refuse to touch.
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define THREADS 256
#define MAX_BLOCKS 128

#define CUDA_SAFE_CALL(x) do { cudaError_t e__ = (x); if (e__ != cudaSuccess) { \
    printf("%s failed at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e__)); \
    exit(1); } } while (0)

__device__ unsigned int g_retired = 0;

__device__ float block_sum(float v, float *sdata)
{
    unsigned int tid = threadIdx.x;
    sdata[tid] = v;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    return sdata[0];
}

__global__ void reduceSinglePass(const float *g_idata, float *g_partial, float *g_result,
                                 unsigned int n)
{
    __shared__ float sdata[THREADS];
    __shared__ bool amLast;

    /* phase 1: every block reduces a strided slice of the input */
    float mySum = 0.0f;
    unsigned int gridSize = blockDim.x * gridDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridSize)
        mySum += g_idata[i];

    float total = block_sum(mySum, sdata);
    if (threadIdx.x == 0)
        g_partial[blockIdx.x] = total;

    /* phase 2: the block that retires last sums the partials */
    if (threadIdx.x == 0) {
        __threadfence();   /* make g_partial visible before taking a ticket */
        unsigned int ticket = atomicInc(&g_retired, gridDim.x);
        amLast = (ticket == gridDim.x - 1);
    }
    __syncthreads();

    if (amLast) {
        float s = 0.0f;
        for (unsigned int i = threadIdx.x; i < gridDim.x; i += blockDim.x)
            s += g_partial[i];
        float grand = block_sum(s, sdata);
        if (threadIdx.x == 0) {
            g_result[0] = grand;
            g_retired = 0;   /* ready for the next launch */
        }
    }
}

int main(int argc, char **argv)
{
    unsigned int n = 1u << 24;
    if (argc > 1)
        n = (unsigned int)atoi(argv[1]);

    float *h_in = (float *)malloc(n * sizeof(float));
    double cpu = 0.0;
    for (unsigned int i = 0; i < n; i++) {
        h_in[i] = (float)(i & 0xff) / 256.0f;
        cpu += h_in[i];
    }

    float *d_in, *d_partial, *d_result;
    CUDA_SAFE_CALL(cudaMalloc((void **)&d_in, n * sizeof(float)));
    CUDA_SAFE_CALL(cudaMalloc((void **)&d_partial, MAX_BLOCKS * sizeof(float)));
    CUDA_SAFE_CALL(cudaMalloc((void **)&d_result, sizeof(float)));
    CUDA_SAFE_CALL(cudaMemcpy(d_in, h_in, n * sizeof(float), cudaMemcpyHostToDevice));

    unsigned int zero = 0;
    CUDA_SAFE_CALL(cudaMemcpyToSymbol(g_retired, &zero, sizeof(zero)));

    unsigned int blocks = (n + THREADS - 1) / THREADS;
    if (blocks > MAX_BLOCKS)
        blocks = MAX_BLOCKS;

    reduceSinglePass<<<blocks, THREADS>>>(d_in, d_partial, d_result, n);
    CUDA_SAFE_CALL(cudaGetLastError());
    CUDA_SAFE_CALL(cudaDeviceSynchronize());

    float gpu = 0.0f;
    CUDA_SAFE_CALL(cudaMemcpy(&gpu, d_result, sizeof(float), cudaMemcpyDeviceToHost));

    double rel = (gpu - cpu) / cpu;
    if (rel < 0) rel = -rel;
    printf("GPU sum = %f, CPU sum = %f, rel err = %e -> %s\n",
           gpu, cpu, rel, rel < 1e-5 ? "PASSED" : "FAILED");

    CUDA_SAFE_CALL(cudaFree(d_in));
    CUDA_SAFE_CALL(cudaFree(d_partial));
    CUDA_SAFE_CALL(cudaFree(d_result));
    free(h_in);
    return 0;
}
