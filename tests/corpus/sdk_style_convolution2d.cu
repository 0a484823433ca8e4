/* Style: old SDK-sample 2D convolution in K&R-ish C: unsigned int everywhere, __constant__ filter via cudaMemcpyToSymbol, __device__ helpers, deprecated cache/bank config calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>

#define KERNEL_RADIUS 4
#define KERNEL_LENGTH (2 * KERNEL_RADIUS + 1)
#define IMAGE_W 2048
#define IMAGE_H 2048
#define BLOCKDIM_X 16
#define BLOCKDIM_Y 16

__constant__ float c_Kernel[KERNEL_LENGTH * KERNEL_LENGTH];

static __device__ unsigned int clamp_index(int v, unsigned int limit)
{
    if (v < 0)
        return 0u;
    if ((unsigned int)v >= limit)
        return limit - 1u;
    return (unsigned int)v;
}

static __device__ float fetch_pixel(const float *img, int x, int y,
                                    unsigned int w, unsigned int h)
{
    unsigned int cx, cy;
    cx = clamp_index(x, w);
    cy = clamp_index(y, h);
    return img[cy * w + cx];
}

__global__ void convolution2D(float *d_Dst, const float *d_Src,
                              unsigned int imageW, unsigned int imageH)
{
    unsigned int x, y;
    int i, j;
    float sum;

    x = blockIdx.x * blockDim.x + threadIdx.x;
    y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= imageW || y >= imageH)
        return;

    sum = 0.0f;
    for (j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++)
        for (i = -KERNEL_RADIUS; i <= KERNEL_RADIUS; i++)
            sum += fetch_pixel(d_Src, (int)x + i, (int)y + j, imageW, imageH) *
                   c_Kernel[(j + KERNEL_RADIUS) * KERNEL_LENGTH + (i + KERNEL_RADIUS)];

    d_Dst[y * imageW + x] = sum;
}

static void convolutionCPU(float *h_Dst, const float *h_Src, const float *h_Kernel,
                           unsigned int imageW, unsigned int imageH)
{
    unsigned int x, y;
    int i, j, sx, sy;
    float sum;

    for (y = 0; y < imageH; y++)
        for (x = 0; x < imageW; x++) {
            sum = 0.0f;
            for (j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++)
                for (i = -KERNEL_RADIUS; i <= KERNEL_RADIUS; i++) {
                    sx = (int)x + i;
                    sy = (int)y + j;
                    if (sx < 0) sx = 0;
                    if (sy < 0) sy = 0;
                    if (sx >= (int)imageW) sx = imageW - 1;
                    if (sy >= (int)imageH) sy = imageH - 1;
                    sum += h_Src[sy * imageW + sx] *
                           h_Kernel[(j + KERNEL_RADIUS) * KERNEL_LENGTH + (i + KERNEL_RADIUS)];
                }
            h_Dst[y * imageW + x] = sum;
        }
}

int main(int argc, char **argv)
{
    float *h_Kernel, *h_Input, *h_OutputGPU, *h_OutputCPU;
    float *d_Input, *d_Output;
    unsigned int i, imageBytes;
    double maxErr;
    cudaError_t status;

    imageBytes = IMAGE_W * IMAGE_H * sizeof(float);
    h_Kernel = (float *)malloc(KERNEL_LENGTH * KERNEL_LENGTH * sizeof(float));
    h_Input = (float *)malloc(imageBytes);
    h_OutputGPU = (float *)malloc(imageBytes);
    h_OutputCPU = (float *)malloc(imageBytes);

    srand(2009);
    for (i = 0; i < KERNEL_LENGTH * KERNEL_LENGTH; i++)
        h_Kernel[i] = (float)(rand() % 16) / 128.0f;
    for (i = 0; i < IMAGE_W * IMAGE_H; i++)
        h_Input[i] = (float)(rand() % 256);

    /* legacy knobs, kept as they appear in older samples */
    cudaDeviceSetCacheConfig(cudaFuncCachePreferL1);
    cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeFourByte);
    cudaFuncSetCacheConfig(convolution2D, cudaFuncCachePreferL1);

    cudaMalloc((void **)&d_Input, imageBytes);
    cudaMalloc((void **)&d_Output, imageBytes);
    cudaMemcpy(d_Input, h_Input, imageBytes, cudaMemcpyHostToDevice);
    cudaMemcpyToSymbol(c_Kernel, h_Kernel, KERNEL_LENGTH * KERNEL_LENGTH * sizeof(float));

    {
        dim3 threads(BLOCKDIM_X, BLOCKDIM_Y);
        dim3 grid(IMAGE_W / BLOCKDIM_X, IMAGE_H / BLOCKDIM_Y);
        convolution2D<<<grid, threads>>>(d_Output, d_Input, IMAGE_W, IMAGE_H);
    }
    status = cudaGetLastError();
    if (status != cudaSuccess) {
        fprintf(stderr, "convolution2D launch failed: %s\n", cudaGetErrorString(status));
        return 1;
    }
    cudaDeviceSynchronize();
    cudaMemcpy(h_OutputGPU, d_Output, imageBytes, cudaMemcpyDeviceToHost);

    convolutionCPU(h_OutputCPU, h_Input, h_Kernel, IMAGE_W, IMAGE_H);
    maxErr = 0.0;
    for (i = 0; i < IMAGE_W * IMAGE_H; i++) {
        double d = h_OutputGPU[i] - h_OutputCPU[i];
        if (d < 0) d = -d;
        if (d > maxErr) maxErr = d;
    }
    printf("max abs error: %g -> %s\n", maxErr, maxErr < 1e-3 ? "PASSED" : "FAILED");

    cudaFree(d_Output);
    cudaFree(d_Input);
    free(h_OutputCPU);
    free(h_OutputGPU);
    free(h_Input);
    free(h_Kernel);
    return 0;
}
