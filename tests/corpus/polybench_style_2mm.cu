// Style: PolyBench/GPU-like 2mm (D = alpha*A*B*C + beta*D) with NI/NJ/NK/NL size macros, DIM_THREAD_BLOCK_X/Y and ceil()-computed grids.
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <sys/time.h>
#include <cuda_runtime.h>

/* Problem size */
#define NI 4096
#define NJ 4096
#define NK 4096
#define NL 4096

/* Thread block dimensions */
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

#define GPU_DEVICE 0
#define PERCENT_DIFF_ERROR_THRESHOLD 0.05

typedef float DATA_TYPE;

double wall_seconds()
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1.0e-6;
}

void init_arrays(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *D)
{
    int i, j;
    for (i = 0; i < NI; i++)
        for (j = 0; j < NK; j++)
            A[i * NK + j] = ((DATA_TYPE)i * j) / NI;
    for (i = 0; i < NK; i++)
        for (j = 0; j < NJ; j++)
            B[i * NJ + j] = ((DATA_TYPE)i * (j + 1)) / NJ;
    for (i = 0; i < NL; i++)
        for (j = 0; j < NJ; j++)
            C[i * NJ + j] = ((DATA_TYPE)i * (j + 3)) / NL;
    for (i = 0; i < NI; i++)
        for (j = 0; j < NL; j++)
            D[i * NL + j] = ((DATA_TYPE)i * (j + 2)) / NK;
}

void select_device()
{
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, GPU_DEVICE);
    printf("setting device %d with name %s\n", GPU_DEVICE, prop.name);
    cudaSetDevice(GPU_DEVICE);
}

/* tmp = alpha * A * B */
__global__ void mm2_kernel1(DATA_TYPE *tmp, DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE alpha)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < NI) && (j < NJ)) {
        int k;
        DATA_TYPE sum = 0;
        for (k = 0; k < NK; k++) {
            sum += alpha * A[i * NK + k] * B[k * NJ + j];
        }
        tmp[i * NJ + j] = sum;
    }
}

/* D = beta * D + tmp * C */
__global__ void mm2_kernel2(DATA_TYPE *tmp, DATA_TYPE *C, DATA_TYPE *D, DATA_TYPE beta)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < NI) && (j < NL)) {
        int k;
        D[i * NL + j] *= beta;
        for (k = 0; k < NJ; k++) {
            D[i * NL + j] += tmp[i * NJ + k] * C[k * NL + j];
        }
    }
}

void mm2_cuda(DATA_TYPE *A, DATA_TYPE *B, DATA_TYPE *C, DATA_TYPE *D, DATA_TYPE *D_out)
{
    DATA_TYPE *tmp_gpu, *A_gpu, *B_gpu, *C_gpu, *D_gpu;
    DATA_TYPE alpha = 32412.0f, beta = 2123.0f;
    double t_start, t_end;

    cudaMalloc((void **)&tmp_gpu, sizeof(DATA_TYPE) * NI * NJ);
    cudaMalloc((void **)&A_gpu, sizeof(DATA_TYPE) * NI * NK);
    cudaMalloc((void **)&B_gpu, sizeof(DATA_TYPE) * NK * NJ);
    cudaMalloc((void **)&C_gpu, sizeof(DATA_TYPE) * NL * NJ);
    cudaMalloc((void **)&D_gpu, sizeof(DATA_TYPE) * NI * NL);

    cudaMemcpy(A_gpu, A, sizeof(DATA_TYPE) * NI * NK, cudaMemcpyHostToDevice);
    cudaMemcpy(B_gpu, B, sizeof(DATA_TYPE) * NK * NJ, cudaMemcpyHostToDevice);
    cudaMemcpy(C_gpu, C, sizeof(DATA_TYPE) * NL * NJ, cudaMemcpyHostToDevice);
    cudaMemcpy(D_gpu, D, sizeof(DATA_TYPE) * NI * NL, cudaMemcpyHostToDevice);

    dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
    dim3 grid1((size_t)ceil(((float)NJ) / ((float)block.x)), (size_t)ceil(((float)NI) / ((float)block.y)));
    dim3 grid2((size_t)ceil(((float)NL) / ((float)block.x)), (size_t)ceil(((float)NI) / ((float)block.y)));

    t_start = wall_seconds();
    mm2_kernel1<<<grid1, block>>>(tmp_gpu, A_gpu, B_gpu, alpha);
    cudaDeviceSynchronize();
    mm2_kernel2<<<grid2, block>>>(tmp_gpu, C_gpu, D_gpu, beta);
    cudaDeviceSynchronize();
    t_end = wall_seconds();
    fprintf(stdout, "GPU Runtime: %0.6lfs\n", t_end - t_start);

    cudaMemcpy(D_out, D_gpu, sizeof(DATA_TYPE) * NI * NL, cudaMemcpyDeviceToHost);

    cudaFree(tmp_gpu);
    cudaFree(A_gpu);
    cudaFree(B_gpu);
    cudaFree(C_gpu);
    cudaFree(D_gpu);
}

int main(int argc, char **argv)
{
    DATA_TYPE *A = (DATA_TYPE *)malloc(NI * NK * sizeof(DATA_TYPE));
    DATA_TYPE *B = (DATA_TYPE *)malloc(NK * NJ * sizeof(DATA_TYPE));
    DATA_TYPE *C = (DATA_TYPE *)malloc(NL * NJ * sizeof(DATA_TYPE));
    DATA_TYPE *D = (DATA_TYPE *)malloc(NI * NL * sizeof(DATA_TYPE));
    DATA_TYPE *D_out = (DATA_TYPE *)malloc(NI * NL * sizeof(DATA_TYPE));

    init_arrays(A, B, C, D);
    select_device();
    mm2_cuda(A, B, C, D, D_out);

    printf("D_out[0] = %f, D_out[last] = %f\n", D_out[0], D_out[NI * NL - 1]);

    free(A);
    free(B);
    free(C);
    free(D);
    free(D_out);
    return 0;
}
