// Style: SDK/textbook shared-memory tiled matmul, #define TILE_WIDTH 16, bx/by locals copied from blockIdx, __syncthreads() between phases.
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define TILE_WIDTH 16
#define WIDTH 1024   /* square matrices, multiple of TILE_WIDTH */

__global__ void MatrixMulTiled(float *P, const float *M, const float *N, int width)
{
    __shared__ float Ms[TILE_WIDTH][TILE_WIDTH];
    __shared__ float Ns[TILE_WIDTH][TILE_WIDTH];

    int bx = blockIdx.x;
    int by = blockIdx.y;
    int tx = threadIdx.x;
    int ty = threadIdx.y;

    int Row = by * TILE_WIDTH + ty;
    int Col = bx * TILE_WIDTH + tx;

    float Pvalue = 0;
    for (int ph = 0; ph < width / TILE_WIDTH; ++ph) {
        Ms[ty][tx] = M[Row * width + ph * TILE_WIDTH + tx];
        Ns[ty][tx] = N[(ph * TILE_WIDTH + ty) * width + Col];
        __syncthreads();

        #pragma unroll
        for (int k = 0; k < TILE_WIDTH; ++k)
            Pvalue += Ms[ty][k] * Ns[k][tx];
        __syncthreads();
    }
    P[Row * width + Col] = Pvalue;
}

/* Variant with bounds checks for arbitrary sizes */
__global__ void MatrixMulTiledGeneral(float *C, const float *A, const float *B,
                                      int m, int n, int k)
{
    __shared__ float As[TILE_WIDTH][TILE_WIDTH];
    __shared__ float Bs[TILE_WIDTH][TILE_WIDTH];

    int row = blockIdx.y * TILE_WIDTH + threadIdx.y;
    int col = blockIdx.x * TILE_WIDTH + threadIdx.x;
    float acc = 0.0f;

    for (int t = 0; t < (k + TILE_WIDTH - 1) / TILE_WIDTH; ++t) {
        int ac = t * TILE_WIDTH + threadIdx.x;
        int br = t * TILE_WIDTH + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < m && ac < k) ? A[row * k + ac] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (br < k && col < n) ? B[br * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE_WIDTH; ++i)
            acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n)
        C[row * n + col] = acc;
}

int main(void)
{
    int size = WIDTH * WIDTH * sizeof(float);
    float *h_M, *h_N, *h_P;
    float *d_M, *d_N, *d_P, *d_Q;

    cudaMallocHost((void **)&h_M, size);
    cudaMallocHost((void **)&h_N, size);
    cudaMallocHost((void **)&h_P, size);
    for (int i = 0; i < WIDTH * WIDTH; i++) {
        h_M[i] = 1.0f;
        h_N[i] = 0.5f;
    }

    cudaMalloc((void **)&d_M, size);
    cudaMalloc((void **)&d_N, size);
    cudaMalloc((void **)&d_P, size);
    cudaMalloc((void **)&d_Q, size);
    cudaMemcpy(d_M, h_M, size, cudaMemcpyHostToDevice);
    cudaMemcpy(d_N, h_N, size, cudaMemcpyHostToDevice);

    dim3 dimBlock(TILE_WIDTH, TILE_WIDTH);
    dim3 dimGrid(WIDTH / TILE_WIDTH, WIDTH / TILE_WIDTH);

    cudaEvent_t evStart, evStop;
    cudaEventCreate(&evStart);
    cudaEventCreate(&evStop);
    cudaEventRecord(evStart);
    MatrixMulTiled<<<dimGrid, dimBlock>>>(d_P, d_M, d_N, WIDTH);
    cudaEventRecord(evStop);
    cudaEventSynchronize(evStop);

    float msec;
    cudaEventElapsedTime(&msec, evStart, evStop);
    double gflops = 2.0 * WIDTH * WIDTH * (double)WIDTH / (msec * 1.0e6);
    printf("Tiled matmul %dx%d: %.3f ms, %.1f GFLOP/s\n", WIDTH, WIDTH, msec, gflops);

    MatrixMulTiledGeneral<<<dimGrid, dimBlock>>>(d_Q, d_M, d_N, WIDTH, WIDTH, WIDTH);
    if (cudaGetLastError() != cudaSuccess)
        printf("launch error\n");

    cudaMemcpy(h_P, d_P, size, cudaMemcpyDeviceToHost);
    int errors = 0;
    for (int i = 0; i < WIDTH * WIDTH; i++)
        if (h_P[i] != 0.5f * WIDTH)
            errors++;
    printf("%s\n", errors == 0 ? "Test PASSED" : "Test FAILED");

    cudaEventDestroy(evStart);
    cudaEventDestroy(evStop);
    cudaFree(d_M); cudaFree(d_N); cudaFree(d_P); cudaFree(d_Q);
    cudaFreeHost(h_M); cudaFreeHost(h_N); cudaFreeHost(h_P);
    return errors != 0;
}
