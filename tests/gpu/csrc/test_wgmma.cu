// Runtime tests of gemm_sm90.h on an sm_90a GPU.
//
// Part 1, single tiles: A and B are placed in shared memory in the
// documented layout, either by TMA loads (the encoding the compiler uses,
// see operand_map) or by plain stores through tl::wgmma_smem_offset; the
// block runs wgmma_gemm_ss / _rs / _ss_async once and writes C through the
// documented accumulator layout (an independent copy of the formula lives in
// acc_coord).  The inputs are small multiples of 0.5, so every product and
// sum is exact and the result must equal the CPU reference bit for bit; one
// shape also runs on random data with a tolerance.
//
// Part 2, a warp-specialized pipelined GEMM (one TMA producer warpgroup,
// two wgmma consumer warpgroups, 4 stages, setmaxnreg): checked in full on
// a small problem and by samples on 4096^3, where it also prints TFLOP/s.
//
// Prints PASS/FAIL per check; exits non-zero when any check fails.
// Build: nvcc -std=c++17 -O3 -I src -gencode arch=compute_90a,code=sm_90a
//        tests/gpu/csrc/test_wgmma.cu -o test_wgmma
// -DTL_TEST_QUICK builds a reduced set of tile shapes (compile checks).
#include "tl.h"

#include <cudaTypedefs.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
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

using bf16 = __nv_bfloat16;

static int g_failures = 0;

static void report(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

template <class T>
static T from_float(float v) {
  if constexpr (std::is_same<T, half>::value) return __float2half_rn(v);
  else if constexpr (std::is_same<T, bf16>::value) return __float2bfloat16_rn(v);
  else return v;
}
template <class T>
static float to_float(T v) {
  if constexpr (std::is_same<T, half>::value) return __half2float(v);
  else if constexpr (std::is_same<T, bf16>::value) return __bfloat162float(v);
  else return v;
}
template <class T>
static const char* type_name() {
  return std::is_same<T, half>::value ? "half" : std::is_same<T, bf16>::value ? "bf16" : "float";
}

static uint32_t hash32(uint64_t i, uint32_t seed) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(seed) << 32);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<uint32_t>(x);
}
// Exact test data: {-1, -0.5, 0, 0.5, 1}.
static float small_value(uint64_t i, uint32_t seed) {
  return 0.5f * static_cast<float>(static_cast<int>(hash32(i, seed) % 5) - 2);
}
static float random_value(uint64_t i, uint32_t seed) {
  return static_cast<float>(hash32(i, seed) & 0xffffff) / 8388608.0f - 1.0f;
}

// ------------------------------------------------------------------------
// Host: the tensor map encoding of a GEMM operand (docs/hopper.md).
// ------------------------------------------------------------------------

static PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !p) {
      std::fprintf(stderr, "cuTensorMapEncodeTiled is not available\n");
      std::exit(2);
    }
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }
  return fn;
}

// The swizzle width gemm_sm90.h uses for a contiguous extent of `bytes`.
static int swizzle_width(int bytes) {
  return bytes % 128 == 0 ? 128 : bytes % 64 == 0 ? 64 : bytes % 32 == 0 ? 32 : 0;
}

// A row-major `rows` x `cols` matrix of 16-bit elements with a row pitch of
// `ld` elements, read in tiles of tile_rows x tile_cols (cols contiguous):
//   dtype  FLOAT16 / BFLOAT16, rank 2
//   dims   {cols, rows}           (innermost first, in elements)
//   stride {ld * 2}               (bytes, for dimension 1 only)
//   box    {SW / 2, tile_rows}    SW = swizzle_width(tile_cols * 2)
//   swizzle CU_TENSOR_MAP_SWIZZLE_<SW>B, interleave NONE, element strides 1,
//   L2 promotion 128B, OOB fill NONE (zeros).
// A tile at (row0, col0) is tile_cols / (SW/2) loads: load s goes to
// smem_tile + s * tile_rows * SW bytes at coordinates (col0 + s*SW/2, row0).
static CUtensorMap operand_map(const void* base, bool is_bf16, uint64_t rows, uint64_t cols,
                               uint64_t ld, int tile_rows, int tile_cols) {
  const int sw = swizzle_width(tile_cols * 2);
  CUtensorMap map;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {ld * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(sw / 2), static_cast<cuuint32_t>(tile_rows)};
  const cuuint32_t estr[2] = {1, 1};
  const CUtensorMapSwizzle swz = sw == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                 : sw == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                            : CU_TENSOR_MAP_SWIZZLE_32B;
  const CUresult r = encode_fn()(
      &map, is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, swz,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed with %d\n", static_cast<int>(r));
    std::exit(2);
  }
  return map;
}

// ------------------------------------------------------------------------
// Device helpers
// ------------------------------------------------------------------------

__device__ unsigned char* aligned_smem() {
  extern __shared__ unsigned char dyn_smem[];
  const uintptr_t p = reinterpret_cast<uintptr_t>(dyn_smem);
  return reinterpret_cast<unsigned char*>((p + 1023) & ~static_cast<uintptr_t>(1023));
}

// The documented accumulator layout: element i of C_frag of thread t in
// warpgroup wg holds block-tile element (row, col).
__device__ __forceinline__ void acc_coord(int i, int N, int MW, int wg, int t, int& row,
                                          int& col) {
  const int mi = i / (N / 2), rem = i % (N / 2);
  const int j = rem / 4, h = (rem / 2) % 2, e = rem % 2;
  const int w = (t % 128) / 32, l = t % 32;
  row = wg * MW + mi * 64 + w * 16 + h * 8 + l / 4;
  col = j * 8 + (l % 4) * 2 + e;
}

enum Mode { kPlainSS = 0, kTmaSS = 1, kRS = 2, kAsyncSS = 3 };

// One block tile.  A is stored TA ? K x M : M x K and B TB ? N x K : K x N,
// both row-major and dense in global memory.
template <int M, int N, int K, int NWG, bool TA, bool TB, bool CLEAR, class T, class TC, int MODE>
__global__ void __launch_bounds__(128 * NWG)
    tile_kernel(const T* A, const T* B, const TC* C_in, TC* C_out,
                const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB) {
  constexpr int RA = TA ? K : M, CA = TA ? M : K, RB = TB ? N : K, CB = TB ? K : N;
  constexpr int WA = tl::detail::wgmma_swizzle_width<CA * 2>() / 2;
  constexpr int WB = tl::detail::wgmma_swizzle_width<CB * 2>() / 2;
  constexpr int A_ELEMS = (RA * CA + 511) / 512 * 512;  // keep B 1024-byte aligned
  __shared__ uint64_t bar;
  T* As = reinterpret_cast<T*>(aligned_smem());
  T* Bs = As + A_ELEMS;
  const int tid = threadIdx.x;
  if constexpr (MODE == kTmaSS) {
    if (tid == 0) {
      tl::mbarrier_init(&bar, 1);
      tl::fence_barrier_init();
    }
    __syncthreads();
    if (tid == 0) {
      tl::mbarrier_arrive_expect_tx(&bar, (RA * CA + RB * CB) * 2);
      for (int s = 0; s < CA / WA; ++s) tl::tma_load_2d(As + s * RA * WA, &mapA, &bar, s * WA, 0);
      for (int s = 0; s < CB / WB; ++s) tl::tma_load_2d(Bs + s * RB * WB, &mapB, &bar, s * WB, 0);
    }
    tl::mbarrier_wait(&bar, 0);
  } else {
    for (int i = tid; i < RA * CA; i += blockDim.x)
      As[tl::wgmma_smem_offset<RA, CA, 2>(i / CA, i % CA)] = A[i];
    for (int i = tid; i < RB * CB; i += blockDim.x)
      Bs[tl::wgmma_smem_offset<RB, CB, 2>(i / CB, i % CB)] = B[i];
    tl::fence_proxy_async();
    __syncthreads();
  }
  constexpr int MW = M / NWG, MI = MW / 64, KI = K / 16, NE = MI * N / 2;
  const int wg = (tid / 128) % NWG;
  TC acc[NE];
  if constexpr (!CLEAR) {
#pragma unroll
    for (int i = 0; i < NE; ++i) {
      int r, c;
      acc_coord(i, N, MW, wg, tid, r, c);
      acc[i] = C_in[r * N + c];
    }
  }
  if constexpr (MODE == kRS) {
    T af[MI * KI * 8];
#pragma unroll
    for (int idx = 0; idx < MI * KI * 8; ++idx) {
      const int e = idx % 2, rh = (idx / 2) % 2, kh = (idx / 4) % 2, ki = (idx / 8) % KI,
                mi = idx / (8 * KI);
      const int w = (tid % 128) / 32, l = tid % 32;
      const int row = wg * MW + mi * 64 + w * 16 + rh * 8 + l / 4;
      const int k = ki * 16 + kh * 8 + (l % 4) * 2 + e;
      af[idx] = TA ? A[k * M + row] : A[row * K + k];
    }
    tl::wgmma_gemm_rs<M, N, K, NWG, TA, TB, CLEAR>(af, Bs, acc);
  } else if constexpr (MODE == kAsyncSS) {
    static_assert(std::is_same<TC, float>::value, "async needs float accumulators");
    tl::wgmma_gemm_ss_async<M, N, K, NWG, TA, TB, CLEAR>(As, Bs, acc);
    tl::wgmma_wait<0, NE>(acc);
  } else {
    tl::wgmma_gemm_ss<M, N, K, NWG, TA, TB, CLEAR>(As, Bs, acc);
  }
#pragma unroll
  for (int i = 0; i < NE; ++i) {
    int r, c;
    acc_coord(i, N, MW, wg, tid, r, c);
    C_out[r * N + c] = acc[i];
  }
}

template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(size_t n) { CHECK_CUDA(cudaMalloc(&p, n * sizeof(T) + 16)); }
  ~Dev() { cudaFree(p); }
};

template <int M, int N, int K, int NWG, bool TA, bool TB, bool CLEAR, class T, class TC, int MODE>
static void run_tile(bool random_data = false) {
  constexpr int RA = TA ? K : M, CA = TA ? M : K, RB = TB ? N : K, CB = TB ? K : N;
  std::vector<float> a(M * K), b(K * N), cin(M * N);  // logical A[m][k], B[k][n]
  std::vector<T> ag(M * K), bg(K * N);
  std::vector<TC> cg(M * N);
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) {
      const float v = random_data ? random_value(m * K + k, 1) : small_value(m * K + k, 1);
      const T t = from_float<T>(v);
      a[m * K + k] = to_float(t);
      ag[TA ? k * M + m : m * K + k] = t;
    }
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) {
      const float v = random_data ? random_value(k * N + n, 2) : small_value(k * N + n, 2);
      const T t = from_float<T>(v);
      b[k * N + n] = to_float(t);
      bg[TB ? n * K + k : k * N + n] = t;
    }
  for (int i = 0; i < M * N; ++i) {
    cin[i] = CLEAR ? 0.f : static_cast<float>(static_cast<int>(hash32(i, 3) % 7) - 3);
    cg[i] = from_float<TC>(cin[i]);
  }
  Dev<T> dA(M * K), dB(K * N);
  Dev<TC> dC(M * N), dCin(M * N);
  CHECK_CUDA(cudaMemcpy(dA.p, ag.data(), M * K * sizeof(T), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dB.p, bg.data(), K * N * sizeof(T), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dCin.p, cg.data(), M * N * sizeof(TC), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dC.p, 0xff, M * N * sizeof(TC)));
  CUtensorMap mapA, mapB;
  std::memset(&mapA, 0, sizeof mapA);
  std::memset(&mapB, 0, sizeof mapB);
  constexpr bool kBf16 = std::is_same<T, bf16>::value;
  if (MODE == kTmaSS) {
    mapA = operand_map(dA.p, kBf16, RA, CA, CA, RA, CA);
    mapB = operand_map(dB.p, kBf16, RB, CB, CB, RB, CB);
  }
  const int a_elems = (RA * CA + 511) / 512 * 512;
  const int smem = (a_elems + RB * CB) * 2 + 1024;
  auto kernel = tile_kernel<M, N, K, NWG, TA, TB, CLEAR, T, TC, MODE>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<1, 128 * NWG, smem>>>(dA.p, dB.p, dCin.p, dC.p, mapA, mapB);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(cg.data(), dC.p, M * N * sizeof(TC), cudaMemcpyDeviceToHost));
  int bad = 0;
  double max_err = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double ref = cin[m * N + n];
      for (int k = 0; k < K; ++k) ref += static_cast<double>(a[m * K + k]) * b[k * N + n];
      const double got = to_float(cg[m * N + n]);
      const double err = std::fabs(got - ref);
      max_err = err > max_err ? err : max_err;
      const bool ok = random_data ? err <= 1e-3 + 1e-3 * std::fabs(ref) : err == 0.0;
      if (!ok && bad++ < 4)
        std::printf("  C[%d][%d] = %g, want %g\n", m, n, got, ref);
    }
  static const char* modes[] = {"ss (plain stores)", "ss (TMA)", "rs", "ss_async"};
  char name[192];
  std::snprintf(name, sizeof name, "wgmma %s M=%d N=%d K=%d wg=%d%s%s %s->%s%s%s", modes[MODE], M,
                N, K, NWG, TA ? " A^T" : "", TB ? " B^T" : "", type_name<T>(), type_name<TC>(),
                CLEAR ? "" : " accumulate", random_data ? " random data" : "");
  if (bad) std::printf("  %d mismatches, max error %g\n", bad, max_err);
  report(bad == 0, name);
}

static void test_tiles() {
  // The shapes of the brief and every transpose.
  run_tile<64, 64, 64, 1, false, false, true, half, float, kPlainSS>();
  run_tile<64, 64, 64, 1, false, false, true, half, float, kTmaSS>();
  run_tile<64, 64, 64, 1, false, true, true, half, float, kTmaSS>();
  run_tile<64, 64, 64, 1, true, false, true, half, float, kTmaSS>();
  run_tile<64, 64, 64, 1, true, true, true, half, float, kTmaSS>();
  run_tile<128, 128, 64, 2, false, false, true, half, float, kTmaSS>();
  run_tile<128, 128, 64, 2, false, true, true, half, float, kTmaSS>();
  run_tile<128, 256, 64, 2, false, false, true, half, float, kTmaSS>();
  run_tile<128, 128, 64, 2, false, false, true, half, float, kRS>();
  run_tile<64, 128, 64, 1, false, false, false, half, half, kPlainSS>();
#ifndef TL_TEST_QUICK
  run_tile<128, 128, 64, 2, true, false, false, half, float, kPlainSS>();
  run_tile<128, 128, 64, 2, true, true, true, bf16, float, kTmaSS>();
  run_tile<128, 256, 64, 2, false, true, true, bf16, float, kTmaSS>();
  run_tile<64, 256, 64, 1, false, true, true, half, float, kPlainSS>();
  // Several m64 blocks per warpgroup, several K slabs.
  run_tile<128, 64, 128, 1, false, false, true, half, float, kTmaSS>();
  run_tile<256, 128, 64, 2, true, false, true, bf16, float, kTmaSS>();
  run_tile<64, 128, 192, 1, false, true, true, bf16, float, kTmaSS>();
  // 64- and 32-byte swizzles and narrow N.
  run_tile<64, 96, 64, 1, false, false, true, bf16, float, kTmaSS>();
  run_tile<64, 64, 32, 1, false, true, true, half, float, kTmaSS>();
  run_tile<64, 32, 16, 1, false, false, true, half, float, kTmaSS>();
  run_tile<64, 16, 48, 1, false, false, true, half, float, kPlainSS>();
  run_tile<64, 8, 64, 1, false, true, true, half, float, kTmaSS>();
  run_tile<64, 24, 64, 1, true, true, true, half, float, kPlainSS>();
  // fp16 accumulation.
  run_tile<128, 256, 64, 2, false, true, true, half, half, kTmaSS>();
  run_tile<64, 64, 64, 1, true, false, false, half, half, kTmaSS>();
  // Register A.
  run_tile<64, 64, 64, 1, false, false, true, half, float, kRS>();
  run_tile<128, 128, 64, 2, false, true, false, bf16, float, kRS>();
  run_tile<64, 256, 128, 1, false, false, true, bf16, float, kRS>();
  run_tile<64, 64, 64, 1, false, true, true, half, half, kRS>();
  // Without the built-in wait.
  run_tile<128, 128, 64, 2, false, false, true, half, float, kAsyncSS>();
  run_tile<128, 64, 128, 1, false, true, false, bf16, float, kAsyncSS>();
  // Random data, tolerance instead of exactness.
  run_tile<128, 128, 128, 2, false, false, true, bf16, float, kTmaSS>(true);
  run_tile<64, 128, 64, 1, false, true, true, half, float, kTmaSS>(true);
#endif
}

// ------------------------------------------------------------------------
// Part 2: warp-specialized pipelined GEMM, C (float, M x N) = A (M x K,
// row-major) * B (K x N row-major, or N x K row-major when TB).
// ------------------------------------------------------------------------

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 4;
constexpr int kStageBytes = (kBM * kBK + kBK * kBN) * 2;

template <bool TB, class T>
__global__ void __launch_bounds__(384, 1)
    pipelined_gemm(const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB,
                   float* C, int Mt, int Nt, int Kt) {
  __shared__ uint64_t full[kStages], empty[kStages];
  unsigned char* smem = aligned_smem();
  const int wg = threadIdx.x / 128;  // 0, 1: consumers; 2: producer
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN, KT = Kt / kBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tl::mbarrier_init(&full[s], 1);
      tl::mbarrier_init(&empty[s], 8);  // one arrival per consumer warp
    }
    tl::fence_barrier_init();
  }
  __syncthreads();
  if (wg == 2) {
    tl::setmaxnreg_dec<40>();
    if (threadIdx.x == 256) {
      tl::prefetch_tma_descriptor(&mapA);
      tl::prefetch_tma_descriptor(&mapB);
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % kStages;
        T* As = reinterpret_cast<T*>(smem + s * kStageBytes);
        T* Bs = As + kBM * kBK;
        tl::mbarrier_wait(&empty[s], ((kt / kStages) & 1) ^ 1);
        tl::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
        tl::tma_load_2d(As, &mapA, &full[s], kt * kBK, m0);
        if constexpr (TB) {
          tl::tma_load_2d(Bs, &mapB, &full[s], kt * kBK, n0);
        } else {
#pragma unroll
          for (int j = 0; j < kBN / 64; ++j)
            tl::tma_load_2d(Bs + j * kBK * 64, &mapB, &full[s], n0 + j * 64, kt * kBK);
        }
      }
    }
  } else {
    tl::setmaxnreg_inc<232>();
    constexpr int NE = kBN / 2;  // MI = 1
    float acc[NE];
#pragma unroll
    for (int i = 0; i < NE; ++i) acc[i] = 0.f;
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % kStages;
      const T* As = reinterpret_cast<const T*>(smem + s * kStageBytes);
      const T* Bs = As + kBM * kBK;
      tl::mbarrier_wait(&full[s], (kt / kStages) & 1);
      tl::wgmma_gemm_ss_async<kBM, kBN, kBK, 2, false, TB, false>(As, Bs, acc);
      tl::wgmma_wait<1, NE>(acc);  // the previous stage's group is done
      if (kt > 0 && tl::elect_one_sync()) tl::mbarrier_arrive(&empty[(kt - 1) % kStages]);
    }
    tl::wgmma_wait<0, NE>(acc);
#pragma unroll
    for (int i = 0; i < NE; ++i) {
      int r, c;
      acc_coord(i, kBN, kBM / 2, wg, threadIdx.x, r, c);
      C[static_cast<size_t>(m0 + r) * Nt + n0 + c] = acc[i];
    }
  }
}

template <bool TB, class T>
static void run_pipelined(int Mt, int Nt, int Kt, int samples, int timing_iters) {
  std::vector<T> ag(static_cast<size_t>(Mt) * Kt), bg(static_cast<size_t>(Kt) * Nt);
  for (size_t i = 0; i < ag.size(); ++i) ag[i] = from_float<T>(small_value(i, 11));
  for (size_t i = 0; i < bg.size(); ++i) bg[i] = from_float<T>(small_value(i, 12));
  Dev<T> dA(ag.size()), dB(bg.size());
  Dev<float> dC(static_cast<size_t>(Mt) * Nt);
  CHECK_CUDA(cudaMemcpy(dA.p, ag.data(), ag.size() * sizeof(T), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dB.p, bg.data(), bg.size() * sizeof(T), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dC.p, 0xff, static_cast<size_t>(Mt) * Nt * 4));
  constexpr bool kBf16 = std::is_same<T, bf16>::value;
  const CUtensorMap mapA = operand_map(dA.p, kBf16, Mt, Kt, Kt, kBM, kBK);
  const CUtensorMap mapB = TB ? operand_map(dB.p, kBf16, Nt, Kt, Kt, kBN, kBK)
                              : operand_map(dB.p, kBf16, Kt, Nt, Nt, kBK, kBN);
  const int smem = kStages * kStageBytes + 1024;
  auto kernel = pipelined_gemm<TB, T>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(Nt / kBN, Mt / kBM);
  kernel<<<grid, 384, smem>>>(mapA, mapB, dC.p, Mt, Nt, Kt);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> c(static_cast<size_t>(Mt) * Nt);
  CHECK_CUDA(cudaMemcpy(c.data(), dC.p, c.size() * 4, cudaMemcpyDeviceToHost));
  auto ref = [&](int m, int n) {
    double s = 0;
    for (int k = 0; k < Kt; ++k) {
      const double av = to_float(ag[static_cast<size_t>(m) * Kt + k]);
      const double bv = to_float(TB ? bg[static_cast<size_t>(n) * Kt + k] : bg[static_cast<size_t>(k) * Nt + n]);
      s += av * bv;
    }
    return s;
  };
  int bad = 0;
  const long total = static_cast<long>(Mt) * Nt;
  const long count = samples > 0 ? samples : total;
  for (long q = 0; q < count; ++q) {
    const long idx = samples > 0 ? static_cast<long>(hash32(q, 99) % total) : q;
    const int m = static_cast<int>(idx / Nt), n = static_cast<int>(idx % Nt);
    const double want = ref(m, n);
    if (c[idx] != want && bad++ < 4) std::printf("  C[%d][%d] = %g, want %g\n", m, n, c[idx], want);
  }
  char name[160];
  std::snprintf(name, sizeof name, "pipelined warp-specialized GEMM %dx%dx%d%s %s (%s)", Mt, Nt, Kt,
                TB ? " B^T" : "", type_name<T>(), samples > 0 ? "sampled" : "every element");
  report(bad == 0, name);
  if (timing_iters > 0) {
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    for (int i = 0; i < 3; ++i) kernel<<<grid, 384, smem>>>(mapA, mapB, dC.p, Mt, Nt, Kt);
    CHECK_CUDA(cudaEventRecord(e0));
    for (int i = 0; i < timing_iters; ++i) kernel<<<grid, 384, smem>>>(mapA, mapB, dC.p, Mt, Nt, Kt);
    CHECK_CUDA(cudaEventRecord(e1));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    const double s = ms / 1e3 / timing_iters;
    std::printf("INFO %s: %.3f ms, %.1f TFLOP/s\n", name, s * 1e3, 2.0 * Mt * Nt * Kt / s / 1e12);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
}

int main() {
  int dev = 0;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major != 9) {
    std::printf("FAIL: wgmma needs an sm_90 GPU\n");
    return 1;
  }
  test_tiles();
  run_pipelined<false, half>(256, 384, 1024, 0, 0);
  run_pipelined<true, bf16>(384, 256, 512, 0, 0);
#ifndef TL_TEST_QUICK
  run_pipelined<false, half>(4096, 4096, 4096, 2048, 10);
  run_pipelined<true, bf16>(4096, 4096, 4096, 2048, 10);
#endif
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
