// Style: PolyBench/GPU-like FDTD-2D: three 2D kernels (ey, ex, hz updates) launched back to back inside a host time loop.
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cuda_runtime.h>

#define TMAX 500
#define NX 2048
#define NY 2048

#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8

typedef float DATA_TYPE;

void init_fields(DATA_TYPE *_fict_, DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz)
{
    int i, j;
    for (i = 0; i < TMAX; i++)
        _fict_[i] = (DATA_TYPE)i;
    for (i = 0; i < NX; i++) {
        for (j = 0; j < NY; j++) {
            ex[i * NY + j] = ((DATA_TYPE)i * (j + 1) + 1) / NX;
            ey[i * NY + j] = ((DATA_TYPE)(i - 1) * (j + 2) + 2) / NX;
            hz[i * NY + j] = ((DATA_TYPE)(i - 9) * (j + 4) + 3) / NX;
        }
    }
}

__global__ void fdtd_step1_kernel(DATA_TYPE *_fict_, DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz, int t)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < NX) && (j < NY)) {
        if (i == 0) {
            ey[i * NY + j] = _fict_[t];
        } else {
            ey[i * NY + j] = ey[i * NY + j] - 0.5f * (hz[i * NY + j] - hz[(i - 1) * NY + j]);
        }
    }
}

__global__ void fdtd_step2_kernel(DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < NX) && (j < NY) && (j > 0)) {
        ex[i * (NY + 1) + j] = ex[i * (NY + 1) + j] - 0.5f * (hz[i * NY + j] - hz[i * NY + (j - 1)]);
    }
}

__global__ void fdtd_step3_kernel(DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;

    if ((i < NX) && (j < NY)) {
        hz[i * NY + j] = hz[i * NY + j] - 0.7f * (ex[i * (NY + 1) + (j + 1)] - ex[i * (NY + 1) + j]
                                                  + ey[(i + 1) * NY + j] - ey[i * NY + j]);
    }
}

void fdtd_cuda(DATA_TYPE *_fict_, DATA_TYPE *ex, DATA_TYPE *ey, DATA_TYPE *hz, DATA_TYPE *hz_out)
{
    DATA_TYPE *fict_gpu, *ex_gpu, *ey_gpu, *hz_gpu;
    int t;

    cudaMalloc((void **)&fict_gpu, sizeof(DATA_TYPE) * TMAX);
    cudaMalloc((void **)&ex_gpu, sizeof(DATA_TYPE) * NX * (NY + 1));
    cudaMalloc((void **)&ey_gpu, sizeof(DATA_TYPE) * (NX + 1) * NY);
    cudaMalloc((void **)&hz_gpu, sizeof(DATA_TYPE) * NX * NY);

    cudaMemcpy(fict_gpu, _fict_, sizeof(DATA_TYPE) * TMAX, cudaMemcpyHostToDevice);
    cudaMemset(ex_gpu, 0, sizeof(DATA_TYPE) * NX * (NY + 1));
    cudaMemset(ey_gpu, 0, sizeof(DATA_TYPE) * (NX + 1) * NY);
    cudaMemcpy(ex_gpu, ex, sizeof(DATA_TYPE) * NX * NY, cudaMemcpyHostToDevice);
    cudaMemcpy(ey_gpu, ey, sizeof(DATA_TYPE) * NX * NY, cudaMemcpyHostToDevice);
    cudaMemcpy(hz_gpu, hz, sizeof(DATA_TYPE) * NX * NY, cudaMemcpyHostToDevice);

    dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
    dim3 grid((size_t)ceil(((float)NY) / ((float)block.x)), (size_t)ceil(((float)NX) / ((float)block.y)));

    for (t = 0; t < TMAX; t++) {
        fdtd_step1_kernel<<<grid, block>>>(fict_gpu, ex_gpu, ey_gpu, hz_gpu, t);
        cudaDeviceSynchronize();
        fdtd_step2_kernel<<<grid, block>>>(ex_gpu, ey_gpu, hz_gpu);
        cudaDeviceSynchronize();
        fdtd_step3_kernel<<<grid, block>>>(ex_gpu, ey_gpu, hz_gpu);
        cudaDeviceSynchronize();
    }

    cudaMemcpy(hz_out, hz_gpu, sizeof(DATA_TYPE) * NX * NY, cudaMemcpyDeviceToHost);

    cudaFree(fict_gpu);
    cudaFree(ex_gpu);
    cudaFree(ey_gpu);
    cudaFree(hz_gpu);
}

int main()
{
    DATA_TYPE *_fict_ = (DATA_TYPE *)malloc(TMAX * sizeof(DATA_TYPE));
    DATA_TYPE *ex = (DATA_TYPE *)malloc(NX * (NY + 1) * sizeof(DATA_TYPE));
    DATA_TYPE *ey = (DATA_TYPE *)malloc((NX + 1) * NY * sizeof(DATA_TYPE));
    DATA_TYPE *hz = (DATA_TYPE *)malloc(NX * NY * sizeof(DATA_TYPE));
    DATA_TYPE *hz_out = (DATA_TYPE *)malloc(NX * NY * sizeof(DATA_TYPE));

    init_fields(_fict_, ex, ey, hz);
    fdtd_cuda(_fict_, ex, ey, hz, hz_out);

    printf("hz_out[NX*NY/2] = %f\n", hz_out[NX * NY / 2]);

    free(_fict_);
    free(ex);
    free(ey);
    free(hz);
    free(hz_out);
    return 0;
}
