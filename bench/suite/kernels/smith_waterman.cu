// SwizzlePerf suite: Smith-Waterman scores of two 8192-long DNA sequences, 64 x 64 tiles, one launch per tile anti-diagonal.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>

#define LEN 8192
#define TILE 64
#define TILES (LEN / TILE)
#define MATCH 2
#define MISMATCH (-1)
#define GAP 1
#define SEED 0x5EEDA010ull

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      exit(2);                                                                               \
    }                                                                                        \
  } while (0)

// splitmix64: a small, fixed-seed host generator.
static uint64_t rng_state = SEED;
static uint64_t next_u64() {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const unsigned char* p = (const unsigned char*)data;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// H is LEN x LEN: H[i][j] is the best local-alignment score ending at a[i], b[j] (linear gap penalty).
// Cells outside the matrix (row -1, column -1) count as 0. One block of TILE threads scores one tile;
// the tiles of one launch lie on the anti-diagonal tile_row + tile_col = diag and are independent of each other.
// Every launch has TILES blocks (a grid fixed at compile time); blocks past the diagonal's `count` tiles exit at once.
__global__ void sw_diagonal(const char* __restrict__ a, const char* __restrict__ b, int* __restrict__ H, int diag, int first_row,
                            int count) {
  __shared__ int h[TILE + 1][TILE + 1];  // h[r + 1][c + 1] is cell (r, c) of the tile; row 0 and column 0 are the halo
  if (blockIdx.x >= count) return;  // the whole block leaves, before any barrier
  const int tile_row = first_row + blockIdx.x;
  const int tile_col = diag - tile_row;
  const int i0 = tile_row * TILE;
  const int j0 = tile_col * TILE;
  const int t = threadIdx.x;

  h[0][t + 1] = (i0 > 0) ? H[(i0 - 1) * LEN + j0 + t] : 0;
  h[t + 1][0] = (j0 > 0) ? H[(i0 + t) * LEN + j0 - 1] : 0;
  if (t == 0) h[0][0] = (i0 > 0 && j0 > 0) ? H[(i0 - 1) * LEN + j0 - 1] : 0;
  const char ai = a[i0 + t];
  __syncthreads();

  // Wavefront inside the tile: thread t owns tile row t and scores column step - t at each step.
  for (int step = 0; step < 2 * TILE - 1; ++step) {
    const int c = step - t;
    if (c >= 0 && c < TILE) {
      const int from_diag = h[t][c] + (ai == b[j0 + c] ? MATCH : MISMATCH);
      const int from_up = h[t][c + 1] - GAP;
      const int from_left = h[t + 1][c] - GAP;
      h[t + 1][c + 1] = max(0, max(from_diag, max(from_up, from_left)));
    }
    __syncthreads();
  }

  for (int r = 0; r < TILE; ++r) H[(i0 + r) * LEN + j0 + t] = h[r + 1][t + 1];
}

static void run_all_diagonals(const char* da, const char* db, int* dH) {
  for (int diag = 0; diag < 2 * TILES - 1; ++diag) {
    const int first = diag < TILES ? 0 : diag - TILES + 1;
    const int last = diag < TILES ? diag : TILES - 1;
    sw_diagonal<<<TILES, TILE>>>(da, db, dH, diag, first, last - first + 1);
  }
}

int main() {
  const char bases[4] = {'A', 'C', 'G', 'T'};
  char* ha = (char*)malloc(LEN);
  char* hb = (char*)malloc(LEN);
  const size_t hbytes = (size_t)LEN * LEN * sizeof(int);
  int* hH = (int*)malloc(hbytes);
  int* ref_prev = (int*)malloc((LEN + 1) * sizeof(int));
  int* ref_cur = (int*)malloc((LEN + 1) * sizeof(int));
  if (!ha || !hb || !hH || !ref_prev || !ref_cur) { fprintf(stderr, "host allocation failed\n"); return 2; }
  for (int i = 0; i < LEN; ++i) ha[i] = bases[next_u64() & 3];
  for (int j = 0; j < LEN; ++j) hb[j] = bases[next_u64() & 3];

  char *da, *db;
  int* dH;
  CHECK(cudaMalloc(&da, LEN));
  CHECK(cudaMalloc(&db, LEN));
  CHECK(cudaMalloc(&dH, hbytes));
  CHECK(cudaMemcpy(da, ha, LEN, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, hb, LEN, cudaMemcpyHostToDevice));

  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));

  CHECK(cudaMemset(dH, 0xff, hbytes));
  run_all_diagonals(da, db, dH);  // warm-up: the whole wavefront
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  CHECK(cudaMemset(dH, 0xff, hbytes));
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  run_all_diagonals(da, db, dH);  // measured: all 2 * TILES - 1 launches
  CHECK(cudaEventRecord(stop));
  CHECK(cudaGetLastError());
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(hH, dH, hbytes, cudaMemcpyDeviceToHost));

  // Check the whole matrix against the row-by-row recurrence on the host.
  size_t bad = 0;
  for (int j = 0; j <= LEN; ++j) ref_prev[j] = 0;
  for (int i = 0; i < LEN; ++i) {
    ref_cur[0] = 0;
    for (int j = 0; j < LEN; ++j) {
      const int d = ref_prev[j] + (ha[i] == hb[j] ? MATCH : MISMATCH);
      const int u = ref_prev[j + 1] - GAP;
      const int l = ref_cur[j] - GAP;
      int v = d > u ? d : u;
      v = v > l ? v : l;
      ref_cur[j + 1] = v > 0 ? v : 0;
      if (hH[(size_t)i * LEN + j] != ref_cur[j + 1]) {
        if (bad < 5) fprintf(stderr, "smith_waterman: H[%d][%d] = %d, expected %d\n", i, j, hH[(size_t)i * LEN + j], ref_cur[j + 1]);
        ++bad;
      }
    }
    int* swap = ref_prev;
    ref_prev = ref_cur;
    ref_cur = swap;
  }

  const uint64_t sum = fnv1a(hH, hbytes, 14695981039346656037ull);
  printf("kernel smith_waterman ms %.4f checksum %016llx\n", ms, (unsigned long long)sum);
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dH));
  free(ha);
  free(hb);
  free(hH);
  free(ref_prev);
  free(ref_cur);
  if (bad) { fprintf(stderr, "smith_waterman: %zu cells wrong\n", bad); return 1; }
  return 0;
}
