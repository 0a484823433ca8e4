// Style: SDK-like matrix transpose: naive, 32x32 shared tile padded to 33 columns, and a diagonal block-reordered variant (already swizzles blockIdx).
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define TILE_DIM 32
#define BLOCK_ROWS 8
#define NUM_REPS 20

const int size_x = 4096;
const int size_y = 4096;

__global__ void transposeNaive(float *odata, const float *idata, int width, int height)
{
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + width * yIndex;
    int index_out = yIndex + height * xIndex;

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS)
        odata[index_out + i] = idata[index_in + i * width];
}

__global__ void transposeCoalesced(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];   /* +1 avoids bank conflicts */

    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < width && y + j < height)
            tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];

    __syncthreads();

    /* swap the block coordinates for the write */
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < height && y + j < width)
            odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}

__global__ void transposeDiagonal(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int blockIdx_x, blockIdx_y;
    if (width == height) {
        blockIdx_y = blockIdx.x;
        blockIdx_x = (blockIdx.x + blockIdx.y) % gridDim.x;
    } else {
        int bid = blockIdx.x + gridDim.x * blockIdx.y;
        blockIdx_y = bid % gridDim.y;
        blockIdx_x = ((bid / gridDim.y) + blockIdx_y) % gridDim.x;
    }

    int xIndex = blockIdx_x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx_y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + yIndex * width;

    xIndex = blockIdx_y * TILE_DIM + threadIdx.x;
    yIndex = blockIdx_x * TILE_DIM + threadIdx.y;
    int index_out = xIndex + yIndex * height;

    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS)
        tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
    __syncthreads();
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS)
        odata[index_out + i * height] = tile[threadIdx.x][threadIdx.y + i];
}

typedef void (*transpose_fn)(float *, const float *, int, int);

static float time_kernel(transpose_fn k, dim3 grid, dim3 threads, float *d_out, const float *d_in)
{
    cudaEvent_t start, stop;
    float ms = 0.0f;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    k<<<grid, threads>>>(d_out, d_in, size_x, size_y);   /* warm-up */
    cudaEventRecord(start, 0);
    for (int r = 0; r < NUM_REPS; r++)
        k<<<grid, threads>>>(d_out, d_in, size_x, size_y);
    cudaEventRecord(stop, 0);
    cudaEventSynchronize(stop);
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms / NUM_REPS;
}

int main(int argc, char **argv)
{
    const size_t mem_size = sizeof(float) * size_x * size_y;
    float *h_idata = (float *)malloc(mem_size);
    float *h_odata = (float *)malloc(mem_size);
    for (int i = 0; i < size_x * size_y; ++i)
        h_idata[i] = (float)i;

    float *d_idata, *d_odata;
    cudaMalloc((void **)&d_idata, mem_size);
    cudaMalloc((void **)&d_odata, mem_size);
    cudaMemcpy(d_idata, h_idata, mem_size, cudaMemcpyHostToDevice);

    dim3 grid(size_x / TILE_DIM, size_y / TILE_DIM), threads(TILE_DIM, BLOCK_ROWS);

    float t_naive = time_kernel(transposeNaive, grid, threads, d_odata, d_idata);
    float t_coal = time_kernel(transposeCoalesced, grid, threads, d_odata, d_idata);
    transposeDiagonal<<<grid, threads>>>(d_odata, d_idata, size_x, size_y);
    cudaDeviceSynchronize();

    cudaMemcpy(h_odata, d_odata, mem_size, cudaMemcpyDeviceToHost);
    int ok = 1;
    for (int y = 0; y < size_y && ok; y++)
        for (int x = 0; x < size_x; x++)
            if (h_odata[x * size_y + y] != h_idata[y * size_x + x]) { ok = 0; break; }

    double gb = 2.0 * mem_size / 1.0e6;
    printf("naive: %.3f ms (%.1f GB/s), coalesced: %.3f ms (%.1f GB/s), %s\n",
           t_naive, gb / t_naive, t_coal, gb / t_coal, ok ? "PASSED" : "FAILED");

    cudaFree(d_idata);
    cudaFree(d_odata);
    free(h_idata);
    free(h_odata);
    return ok ? 0 : 1;
}
