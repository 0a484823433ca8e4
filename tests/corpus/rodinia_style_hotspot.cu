// Style: Rodinia-like thermal (hotspot/Jacobi-2D) solver: shared-memory tile with halo, ping-pong buffers swapped in a host time loop, sizes from argv.
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define BLOCK_SIZE 16
#define HALO 1
#define TILE (BLOCK_SIZE - 2 * HALO)   /* interior points each block writes */

#define MAX_PD (3.0e6)
#define PRECISION 0.001
#define SPEC_HEAT_SI 1.75e6
#define K_SI 100
#define FACTOR_CHIP 0.5

#define IN_RANGE(x, lo, hi) ((x) >= (lo) && (x) <= (hi))
#define CLAMP_RANGE(x, lo, hi) (x = (x < (lo)) ? (lo) : ((x > (hi)) ? (hi) : x))

static void fatal(const char *s)
{
    fprintf(stderr, "error: %s\n", s);
    exit(1);
}

__global__ void calculate_temp(const float *power, const float *temp_src, float *temp_dst,
                               int grid_cols, int grid_rows,
                               float Cap, float Rx, float Ry, float Rz, float step, float amb_temp)
{
    __shared__ float temp_on_cuda[BLOCK_SIZE][BLOCK_SIZE];

    int bx = blockIdx.x;
    int by = blockIdx.y;
    int tx = threadIdx.x;
    int ty = threadIdx.y;

    /* blocks overlap by the halo, so the tile origin is TILE apart */
    int blkY = TILE * by - HALO;
    int blkX = TILE * bx - HALO;
    int yidx = blkY + ty;
    int xidx = blkX + tx;

    int loadY = yidx, loadX = xidx;
    CLAMP_RANGE(loadY, 0, grid_rows - 1);
    CLAMP_RANGE(loadX, 0, grid_cols - 1);
    temp_on_cuda[ty][tx] = temp_src[grid_cols * loadY + loadX];
    __syncthreads();

    float step_div_Cap = step / Cap;
    float Rx_1 = 1 / Rx, Ry_1 = 1 / Ry, Rz_1 = 1 / Rz;

    bool interior = IN_RANGE(tx, HALO, BLOCK_SIZE - 1 - HALO) &&
                    IN_RANGE(ty, HALO, BLOCK_SIZE - 1 - HALO);
    if (interior && IN_RANGE(yidx, 0, grid_rows - 1) && IN_RANGE(xidx, 0, grid_cols - 1)) {
        float c = temp_on_cuda[ty][tx];
        float n = temp_on_cuda[ty - 1][tx];
        float s = temp_on_cuda[ty + 1][tx];
        float w = temp_on_cuda[ty][tx - 1];
        float e = temp_on_cuda[ty][tx + 1];
        temp_dst[grid_cols * yidx + xidx] = c + step_div_Cap *
            (power[grid_cols * yidx + xidx] + (s + n - 2.0f * c) * Ry_1 +
             (e + w - 2.0f * c) * Rx_1 + (amb_temp - c) * Rz_1);
    }
}

static int compute_tran_temp(float *d_power, float *d_temp[2], int col, int row, int total_iterations)
{
    dim3 dimBlock(BLOCK_SIZE, BLOCK_SIZE);
    dim3 dimGrid((col + TILE - 1) / TILE, (row + TILE - 1) / TILE);

    float chip_height = 0.016f, chip_width = 0.016f, t_chip = 0.0005f, amb_temp = 80.0f;
    float grid_height = chip_height / row;
    float grid_width = chip_width / col;
    float Cap = FACTOR_CHIP * SPEC_HEAT_SI * t_chip * grid_width * grid_height;
    float Rx = grid_width / (2.0 * K_SI * t_chip * grid_height);
    float Ry = grid_height / (2.0 * K_SI * t_chip * grid_width);
    float Rz = t_chip / (K_SI * grid_height * grid_width);
    float max_slope = MAX_PD / (FACTOR_CHIP * t_chip * SPEC_HEAT_SI);
    float step = PRECISION / max_slope;

    int src = 1, dst = 0;
    for (int t = 0; t < total_iterations; t++) {
        int tmp = src;
        src = dst;
        dst = tmp;
        calculate_temp<<<dimGrid, dimBlock>>>(d_power, d_temp[src], d_temp[dst],
                                              col, row, Cap, Rx, Ry, Rz, step, amb_temp);
    }
    return dst;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        fatal("usage: hotspot <grid_rows/grid_cols> <sim_time>");
    int grid_rows = atoi(argv[1]);
    int grid_cols = grid_rows;
    int total_iterations = atoi(argv[2]);
    if (grid_rows <= 0 || total_iterations <= 0)
        fatal("bad arguments");

    int size = grid_rows * grid_cols;
    float *FilesavingTemp = (float *)malloc(size * sizeof(float));
    float *FilesavingPower = (float *)malloc(size * sizeof(float));
    float *MatrixOut = (float *)calloc(size, sizeof(float));
    if (!FilesavingTemp || !FilesavingPower || !MatrixOut)
        fatal("unable to allocate memory");
    for (int i = 0; i < size; i++) {
        FilesavingTemp[i] = 320.0f + (float)(i % 17);
        FilesavingPower[i] = 0.001f * (float)(i % 5);
    }

    float *MatrixTemp[2], *MatrixPower;
    cudaMalloc((void **)&MatrixTemp[0], sizeof(float) * size);
    cudaMalloc((void **)&MatrixTemp[1], sizeof(float) * size);
    cudaMalloc((void **)&MatrixPower, sizeof(float) * size);
    cudaMemcpy(MatrixTemp[0], FilesavingTemp, sizeof(float) * size, cudaMemcpyHostToDevice);
    cudaMemcpy(MatrixTemp[1], FilesavingTemp, sizeof(float) * size, cudaMemcpyHostToDevice);
    cudaMemcpy(MatrixPower, FilesavingPower, sizeof(float) * size, cudaMemcpyHostToDevice);

    int ret = compute_tran_temp(MatrixPower, MatrixTemp, grid_cols, grid_rows, total_iterations);
    cudaDeviceSynchronize();
    cudaMemcpy(MatrixOut, MatrixTemp[ret], sizeof(float) * size, cudaMemcpyDeviceToHost);

    printf("%d\t%g\n", size / 2, MatrixOut[size / 2]);

    cudaFree(MatrixPower);
    cudaFree(MatrixTemp[0]);
    cudaFree(MatrixTemp[1]);
    free(MatrixOut);
    free(FilesavingPower);
    free(FilesavingTemp);
    return 0;
}
