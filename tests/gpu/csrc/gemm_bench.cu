// A complete pipelined GEMM built from the library, the way the compiler
// will generate one: 128x128x32 block tiles, 2x2 warps, a multi-stage
// cp.async pipeline into swizzled shared memory and tl::gemm_ss.
//
// It serves three purposes: tests/test_src_headers.py checks with
// `-Xptxas -v` that this kernel neither spills nor uses a stack frame, the
// program verifies the result of a large GEMM against a naive kernel, and it
// reports the throughput reached on the GPU it runs on.
//
// Build: nvcc -std=c++17 -O3 -I src -gencode arch=compute_90a,code=sm_90a
//        tests/gpu/csrc/gemm_bench.cu -o gemm_bench
#include "tl.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(expr)                                                  \
  do {                                                                    \
    cudaError_t err_ = (expr);                                            \
    if (err_ != cudaSuccess) {                                            \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n",                    \
                   cudaGetErrorString(err_), __FILE__, __LINE__);         \
      std::exit(2);                                                       \
    }                                                                     \
  } while (0)

constexpr int BM = 128, BN = 128, BK = 32, WARP_M = 2, WARP_N = 2;
constexpr int kThreads = 32 * WARP_M * WARP_N;

// Stages one BM x BK tile of A (row-major, lda = K) and one BK x BN tile of
// B (row-major, ldb = N, or column-major N x K when TRANS_B) into shared
// memory, one 16-byte chunk per cp.async.  The swizzle only permutes whole
// chunks, so every chunk stays contiguous in shared memory.
template <bool TRANS_B>
__device__ __forceinline__ void load_tiles(half* sA, half* sB, const half* A, const half* B,
                                           int K, int N, int m0, int n0, int k0) {
  constexpr int LDA = BK, LDB = TRANS_B ? BK : BN;
#pragma unroll
  for (int it = 0; it < BM * BK / 8 / kThreads; ++it) {
    const int q = it * kThreads + threadIdx.x;
    const int r = q / (BK / 8), c = (q % (BK / 8)) * 8;
    tl::cp_async_gs<16>(sA + tl::swizzle_offset<LDA, 2>(r, c), A + (size_t)(m0 + r) * K + k0 + c);
  }
#pragma unroll
  for (int it = 0; it < BK * BN / 8 / kThreads; ++it) {
    const int q = it * kThreads + threadIdx.x;
    if constexpr (TRANS_B) {
      const int r = q / (BK / 8), c = (q % (BK / 8)) * 8;
      tl::cp_async_gs<16>(sB + tl::swizzle_offset<LDB, 2>(r, c),
                          B + (size_t)(n0 + r) * K + k0 + c);
    } else {
      const int r = q / (BN / 8), c = (q % (BN / 8)) * 8;
      tl::cp_async_gs<16>(sB + tl::swizzle_offset<LDB, 2>(r, c),
                          B + (size_t)(k0 + r) * N + n0 + c);
    }
  }
}

// C (M x N, float, row-major) = A (M x K) * B.  M, N and K must be multiples
// of the block tile.
template <int STAGES, bool TRANS_B>
__global__ void __launch_bounds__(kThreads)
    gemm_pipelined_kernel(const half* __restrict__ A, const half* __restrict__ B,
                          float* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(128) unsigned char smem[];
  half* sA = reinterpret_cast<half*>(smem);
  half* sB = sA + STAGES * BM * BK;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int KT = K / BK;

  constexpr int WM = BM / WARP_M, WN = BN / WARP_N, MI = WM / 16, NI = WN / 8;
  float acc[MI * NI * 4];
#pragma unroll
  for (int i = 0; i < MI * NI * 4; ++i) acc[i] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_tiles<TRANS_B>(sA + s * BM * BK, sB + s * BK * BN, A, B, K, N, m0, n0, s * BK);
    tl::cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    tl::cp_async_wait<STAGES - 2>();
    tl::sync_threads();
    // The stage refilled here was read in iteration kt - 1, and the barrier
    // above guarantees that every warp has finished reading it.
    const int pf = kt + STAGES - 1;
    if (pf < KT) {
      const int ps = pf % STAGES;
      load_tiles<TRANS_B>(sA + ps * BM * BK, sB + ps * BK * BN, A, B, K, N, m0, n0, pf * BK);
    }
    tl::cp_async_commit();
    const int s = kt % STAGES;
    tl::gemm_ss<BM, BN, BK, WARP_M, WARP_N, false, TRANS_B, false, BK, TRANS_B ? BK : BN>(
        sA + s * BM * BK, sB + s * BK * BN, acc);
  }

  // Epilogue through the documented accumulator layout: register pair
  // (i, i + 1) holds two adjacent columns, so it is stored as one float2.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp % WARP_M, wn = warp / WARP_M;
#pragma unroll
  for (int i = 0; i < MI * NI * 4; i += 2) {
    const int mi = (i / 4) / NI, ni = (i / 4) % NI;
    const int r = ((i / 2) % 2) * 8 + lane / 4, c = (lane % 4) * 2;
    float2 v = make_float2(acc[i], acc[i + 1]);
    *reinterpret_cast<float2*>(C + (size_t)(m0 + wm * WM + mi * 16 + r) * N + n0 + wn * WN +
                               ni * 8 + c) = v;
  }
}

__global__ void reference_kernel(const half* A, const half* B, float* C, int M, int N, int K,
                                 bool trans_b) {
  const int m = blockIdx.y * blockDim.y + threadIdx.y, n = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= M || n >= N) return;
  float s = 0.f;
  for (int k = 0; k < K; ++k)
    s += __half2float(A[(size_t)m * K + k]) *
         __half2float(trans_b ? B[(size_t)n * K + k] : B[(size_t)k * N + n]);
  C[(size_t)m * N + n] = s;
}

__global__ void fill_kernel(half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2half_rn(((int)(h % 17) - 8) / 8.0f);
  }
}

template <int STAGES, bool TRANS_B>
bool run(int M, int N, int K) {
  half *A, *B;
  float *C, *R;
  CHECK_CUDA(cudaMalloc(&A, sizeof(half) * M * K));
  CHECK_CUDA(cudaMalloc(&B, sizeof(half) * K * N));
  CHECK_CUDA(cudaMalloc(&C, sizeof(float) * M * N));
  CHECK_CUDA(cudaMalloc(&R, sizeof(float) * M * N));
  fill_kernel<<<1024, 256>>>(A, (size_t)M * K, 1u);
  fill_kernel<<<1024, 256>>>(B, (size_t)K * N, 2u);
  const int smem = STAGES * (BM * BK + BK * BN) * (int)sizeof(half);
  auto kern = gemm_pipelined_kernel<STAGES, TRANS_B>;
  CHECK_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  dim3 grid(N / BN, M / BM);
  kern<<<grid, kThreads, smem>>>(A, B, C, M, N, K);
  reference_kernel<<<dim3(N / 16, M / 16), dim3(16, 16)>>>(A, B, R, M, N, K, TRANS_B);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> hC((size_t)M * N), hR((size_t)M * N);
  CHECK_CUDA(cudaMemcpy(hC.data(), C, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hR.data(), R, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < hC.size(); ++i)
    if (!(std::fabs(hC[i] - hR[i]) <= 1e-3f * (1.f + std::fabs(hR[i])))) ++bad;

  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) kern<<<grid, kThreads, smem>>>(A, B, C, M, N, K);
  const int iters = 20;
  cudaEventRecord(e0);
  for (int i = 0; i < iters; ++i) kern<<<grid, kThreads, smem>>>(A, B, C, M, N, K);
  cudaEventRecord(e1);
  CHECK_CUDA(cudaEventSynchronize(e1));
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  ms /= iters;
  std::printf("%s pipelined gemm %dx%dx%d stages=%d trans_b=%d: %.3f ms, %.1f TFLOP/s, %zu bad\n",
              bad ? "FAIL" : "PASS", M, N, K, STAGES, TRANS_B, ms,
              2.0 * M * N * K / (ms * 1e-3) / 1e12, bad);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cudaFree(R);
  return bad == 0;
}

int main(int argc, char** argv) {
  const int S = argc > 1 ? std::atoi(argv[1]) : 4096;
  bool ok = run<3, false>(S, S, S);
  ok = run<4, false>(S, S, S) && ok;
  ok = run<4, true>(S, S, S) && ok;
  return ok ? 0 : 1;
}
