// Style: textbook naive 2D matmul (row = blockIdx.y*blockDim.y+threadIdx.y), IDX + CUDA_SAFE_CALL macros, sizes from argv.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define IDX(i, j, ld) ((i) * (ld) + (j))

#define CUDA_SAFE_CALL(x)                                                   \
    do {                                                                    \
        cudaError_t err_ = (x);                                             \
        if (err_ != cudaSuccess) {                                          \
            fprintf(stderr, "CUDA error '%s' at %s:%d\n",                   \
                    cudaGetErrorString(err_), __FILE__, __LINE__);          \
            exit(EXIT_FAILURE);                                             \
        }                                                                   \
    } while (0)

#define BLOCK_X 16
#define BLOCK_Y 16

__global__ void matmul_naive(const float *A, const float *B, float *C,
                             int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;

    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[IDX(row, k, K)] * B[IDX(k, col, N)];
        C[IDX(row, col, N)] = acc;
    }
}

__global__ void scale_matrix(float *C, int M, int N, float alpha)
{
    int col = threadIdx.x + blockIdx.x * blockDim.x;
    int row = threadIdx.y + blockIdx.y * blockDim.y;
    if (row >= M || col >= N)
        return;
    C[IDX(row, col, N)] *= alpha;
}

static void fill_random(float *p, int n)
{
    for (int i = 0; i < n; ++i)
        p[i] = (float)(rand() % 100) / 50.0f - 1.0f;
}

static void reference(const float *A, const float *B, float *C, int M, int N, int K)
{
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float s = 0.0f;
            for (int k = 0; k < K; ++k)
                s += A[IDX(i, k, K)] * B[IDX(k, j, N)];
            C[IDX(i, j, N)] = s;
        }
}

int main(int argc, char **argv)
{
    int M = 512, N = 512, K = 512;
    if (argc > 3) {
        M = atoi(argv[1]);
        N = atoi(argv[2]);
        K = atoi(argv[3]);
    }
    printf("naive matmul: M=%d N=%d K=%d\n", M, N, K);

    size_t bytesA = (size_t)M * K * sizeof(float);
    size_t bytesB = (size_t)K * N * sizeof(float);
    size_t bytesC = (size_t)M * N * sizeof(float);

    float *hA = (float *)malloc(bytesA);
    float *hB = (float *)malloc(bytesB);
    float *hC = (float *)malloc(bytesC);
    float *hRef = (float *)malloc(bytesC);
    fill_random(hA, M * K);
    fill_random(hB, K * N);

    float *dA, *dB, *dC;
    CUDA_SAFE_CALL(cudaMalloc((void **)&dA, bytesA));
    CUDA_SAFE_CALL(cudaMalloc((void **)&dB, bytesB));
    CUDA_SAFE_CALL(cudaMalloc((void **)&dC, bytesC));
    CUDA_SAFE_CALL(cudaMemcpy(dA, hA, bytesA, cudaMemcpyHostToDevice));
    CUDA_SAFE_CALL(cudaMemcpy(dB, hB, bytesB, cudaMemcpyHostToDevice));

    dim3 threads(BLOCK_X, BLOCK_Y);
    dim3 blocks((N + threads.x - 1) / threads.x, (M + threads.y - 1) / threads.y);

    cudaEvent_t start, stop;
    CUDA_SAFE_CALL(cudaEventCreate(&start));
    CUDA_SAFE_CALL(cudaEventCreate(&stop));
    CUDA_SAFE_CALL(cudaEventRecord(start, 0));

    matmul_naive<<<blocks, threads>>>(dA, dB, dC, M, N, K);
    CUDA_SAFE_CALL(cudaGetLastError());
    scale_matrix<<<blocks, threads>>>(dC, M, N, 1.0f);
    CUDA_SAFE_CALL(cudaGetLastError());

    CUDA_SAFE_CALL(cudaEventRecord(stop, 0));
    CUDA_SAFE_CALL(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_SAFE_CALL(cudaEventElapsedTime(&ms, start, stop));
    printf("kernel time: %.3f ms\n", ms);

    CUDA_SAFE_CALL(cudaMemcpy(hC, dC, bytesC, cudaMemcpyDeviceToHost));
    reference(hA, hB, hRef, M, N, K);

    int bad = 0;
    for (int i = 0; i < M * N; ++i) {
        float d = hC[i] - hRef[i];
        if (d > 1e-2f || d < -1e-2f)
            ++bad;
    }
    printf("%s (%d mismatches)\n", bad ? "FAILED" : "PASSED", bad);

    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(dA); cudaFree(dB); cudaFree(dC);
    free(hA); free(hB); free(hC); free(hRef);
    return bad ? 1 : 0;
}
