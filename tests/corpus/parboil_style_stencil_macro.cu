// Style: Parboil-like 3D 7-point stencil marching in z; thread coordinates come from macros whose bodies read blockIdx (GLOBAL_ROW/GLOBAL_COL); sizes from argv.
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define GLOBAL_COL (blockIdx.x * blockDim.x + threadIdx.x)
#define GLOBAL_ROW (blockIdx.y * blockDim.y + threadIdx.y)
#define Index3D(_nx, _ny, _i, _j, _k) ((_i) + (_nx) * ((_j) + (_ny) * (_k)))

#define CUDA_SAFE_CALL(call) do {                                            \
    cudaError_t _e = call;                                                   \
    if (_e != cudaSuccess) {                                                 \
        fprintf(stderr, "Cuda error in file '%s' in line %i : %s.\n",        \
                __FILE__, __LINE__, cudaGetErrorString(_e));                 \
        exit(EXIT_FAILURE);                                                  \
    } } while (0)

__global__ void stencil7(float c0, float c1, const float *A0, float *Anext,
                         int nx, int ny, int nz)
{
    int i = GLOBAL_COL;
    int j = GLOBAL_ROW;
    if (i < 1 || j < 1 || i >= nx - 1 || j >= ny - 1)
        return;

    for (int k = 1; k < nz - 1; k++) {
        Anext[Index3D(nx, ny, i, j, k)] =
            (A0[Index3D(nx, ny, i, j, k + 1)] +
             A0[Index3D(nx, ny, i, j, k - 1)] +
             A0[Index3D(nx, ny, i, j + 1, k)] +
             A0[Index3D(nx, ny, i, j - 1, k)] +
             A0[Index3D(nx, ny, i + 1, j, k)] +
             A0[Index3D(nx, ny, i - 1, j, k)]) * c1
            - A0[Index3D(nx, ny, i, j, k)] * c0;
    }
}

/* copies the boundary planes so both buffers agree at the edges */
__global__ void copy_boundary(const float *src, float *dst, int nx, int ny, int nz)
{
    if (GLOBAL_COL >= nx || GLOBAL_ROW >= ny)
        return;
    int base0 = Index3D(nx, ny, GLOBAL_COL, GLOBAL_ROW, 0);
    int baseN = Index3D(nx, ny, GLOBAL_COL, GLOBAL_ROW, nz - 1);
    dst[base0] = src[base0];
    dst[baseN] = src[baseN];
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: %s nx ny nz iterations\n", argv[0]);
        return 1;
    }
    int nx = atoi(argv[1]);
    int ny = atoi(argv[2]);
    int nz = atoi(argv[3]);
    int iters = atoi(argv[4]);
    float c0 = 1.0f / 6.0f;
    float c1 = 1.0f / 6.0f / 6.0f;

    size_t count = (size_t)nx * ny * nz;
    float *h_A0 = (float *)malloc(count * sizeof(float));
    for (size_t n = 0; n < count; n++)
        h_A0[n] = (float)(n % 97) * 0.01f;

    float *d_A0, *d_Anext;
    CUDA_SAFE_CALL(cudaMalloc((void **)&d_A0, count * sizeof(float)));
    CUDA_SAFE_CALL(cudaMalloc((void **)&d_Anext, count * sizeof(float)));
    CUDA_SAFE_CALL(cudaMemcpy(d_A0, h_A0, count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_SAFE_CALL(cudaMemcpy(d_Anext, d_A0, count * sizeof(float), cudaMemcpyDeviceToDevice));

    dim3 block(32, 4, 1);
    dim3 grid((nx + block.x - 1) / block.x, (ny + block.y - 1) / block.y, 1);

    copy_boundary<<<grid, block>>>(d_A0, d_Anext, nx, ny, nz);
    for (int t = 0; t < iters; t++) {
        stencil7<<<grid, block>>>(c0, c1, d_A0, d_Anext, nx, ny, nz);
        float *tmp = d_A0;
        d_A0 = d_Anext;
        d_Anext = tmp;
    }
    CUDA_SAFE_CALL(cudaGetLastError());
    CUDA_SAFE_CALL(cudaDeviceSynchronize());

    CUDA_SAFE_CALL(cudaMemcpy(h_A0, d_A0, count * sizeof(float), cudaMemcpyDeviceToHost));
    double sum = 0.0;
    for (size_t n = 0; n < count; n++)
        sum += h_A0[n];
    printf("nx=%d ny=%d nz=%d iters=%d sum=%f\n", nx, ny, nz, iters, sum);

    CUDA_SAFE_CALL(cudaFree(d_A0));
    CUDA_SAFE_CALL(cudaFree(d_Anext));
    free(h_A0);
    return 0;
}
