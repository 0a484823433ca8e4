// NVIDIA's occupancy calculator (cuda_occupancy.h, host code only), for tests/test_residency.py to check
// swzc.residency.occupancy against.  Arguments: compute capability (90), max threads per SM, registers per
// SM, warp size, shared memory per SM.  Reads "threads registers static_shared_bytes" lines from stdin and
// prints the blocks per SM of each (-1 when the calculator refuses the figures).
#include <cstdio>
#include <cstdlib>
#include <cuda_occupancy.h>

int main(int argc, char** argv) {
    if (argc != 6) return 2;
    cudaOccDeviceProp props;
    props.computeMajor = atoi(argv[1]) / 10;
    props.computeMinor = atoi(argv[1]) % 10;
    props.maxThreadsPerBlock = 1024;
    props.maxThreadsPerMultiprocessor = atoi(argv[2]);
    props.regsPerBlock = props.regsPerMultiprocessor = atoi(argv[3]);
    props.warpSize = atoi(argv[4]);
    props.sharedMemPerMultiprocessor = atoi(argv[5]);
    props.reservedSharedMemPerBlock = props.computeMajor >= 8 ? 1024 : 0;
    props.sharedMemPerBlock = 49152;
    props.sharedMemPerBlockOptin = props.sharedMemPerMultiprocessor - props.reservedSharedMemPerBlock;
    props.numSms = 1;
    cudaOccDeviceState state;
    int threads, regs, smem;
    while (scanf("%d %d %d", &threads, &regs, &smem) == 3) {
        cudaOccFuncAttributes attrs;
        attrs.maxThreadsPerBlock = 1024;
        attrs.numRegs = regs;
        attrs.sharedSizeBytes = smem;
        attrs.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
        attrs.maxDynamicSharedSizeBytes = props.sharedMemPerBlockOptin;
        attrs.numBlockBarriers = 1;
        cudaOccResult result;
        cudaOccError status = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &props, &attrs, &state, threads, 0);
        printf("%d\n", status == CUDA_OCC_SUCCESS ? result.activeBlocksPerMultiprocessor : -1);
    }
    return 0;
}
