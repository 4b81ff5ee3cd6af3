// Correctness test of tl::gemm_ss and tl::gemm_rs (src/tl/gemm_sm80.h).
//
// For every configuration the kernel stages global A and B into shared
// memory through tl::swizzle_offset, loads the accumulator (and, for
// gemm_rs, the A registers) through the layouts documented in the header,
// runs the GEMM, writes C back through the documented accumulator layout and
// the host compares the result with a double precision reference.  The
// layouts are applied here literally from their formulas, by looping over
// tile coordinates and testing which lane owns them, so that this test
// checks the documentation rather than re-deriving the implementation.
//
// Build: nvcc -std=c++17 -O3 -I src -gencode arch=compute_90a,code=sm_90a
//        tests/gpu/csrc/test_gemm.cu -o test_gemm
// Define TL_TEST_QUICK to compile a reduced set of configurations.
#include "tl.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
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

// Host-side conversions between the test's float values and element types.
template <class T>
T host_from_double(double v) {
  if constexpr (std::is_same<T, half>::value) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
template <class T>
double host_to_double(T v) {
  if constexpr (std::is_same<T, half>::value) {
    return __half2float(v);
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return __bfloat162float(v);
  } else {
    return static_cast<double>(v);
  }
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same<T, half>::value) return "f16";
  if constexpr (std::is_same<T, __nv_bfloat16>::value) return "bf16";
  if constexpr (std::is_same<T, float>::value) return "f32";
  if constexpr (std::is_same<T, int8_t>::value) return "s8";
  if constexpr (std::is_same<T, uint8_t>::value) return "u8";
  if constexpr (std::is_same<T, int>::value) return "s32";
  return "?";
}

// Documented forward layouts (gemm_sm80.h): which lane holds tile element
// (r, c) of accumulator tile (mi, ni), and at which index.
__host__ __device__ inline void acc_forward(int NI, int mi, int ni, int r, int c, int& lane,
                                            int& idx) {
  lane = (r % 8) * 4 + c / 2;
  idx = ((mi * NI + ni) * 2 + r / 8) * 2 + c % 2;
}
// Element (r, k) of A sub-tile (mi, ki), P elements per 32-bit register.
__host__ __device__ inline void afrag_forward(int KI, int P, int mi, int ki, int r, int k,
                                              int& lane, int& idx) {
  lane = (r % 8) * 4 + (k % (4 * P)) / P;
  idx = (((mi * KI + ki) * 2 + k / (4 * P)) * 2 + r / 8) * P + k % P;
}

// Inverses of the two layouts: the coordinates of register `i` of `lane`.
template <int NI>
__host__ __device__ inline void acc_coord(int lane, int i, int& mi, int& ni, int& r, int& c) {
  const int tile = i / 4;
  mi = tile / NI;
  ni = tile % NI;
  r = ((i / 2) % 2) * 8 + lane / 4;
  c = (lane % 4) * 2 + i % 2;
}
template <int KI, int P>
__host__ __device__ inline void afrag_coord(int lane, int i, int& mi, int& ki, int& r, int& k) {
  const int e = i % P, j = (i / P) % 4, blk = i / (4 * P);
  mi = blk / KI;
  ki = blk % KI;
  r = (j % 2) * 8 + lane / 4;
  k = (j / 2) * 4 * P + (lane % 4) * P + e;
}

// Checks on the host that the inverses used by the kernel match the
// documented forward formulas, i.e. that the kernel really exercises the
// documented layouts.
template <int NI, int KI, int P>
bool check_layouts_for() {
  constexpr int MI = 2;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < MI * NI * 4; ++i) {
      int mi, ni, r, c, l2, i2;
      acc_coord<NI>(lane, i, mi, ni, r, c);
      acc_forward(NI, mi, ni, r, c, l2, i2);
      if (l2 != lane || i2 != i || r < 0 || r >= 16 || c < 0 || c >= 8) return false;
    }
    for (int i = 0; i < MI * KI * 4 * P; ++i) {
      int mi, ki, r, k, l2, i2;
      afrag_coord<KI, P>(lane, i, mi, ki, r, k);
      afrag_forward(KI, P, mi, ki, r, k, l2, i2);
      if (l2 != lane || i2 != i || r < 0 || r >= 16 || k < 0 || k >= 8 * P) return false;
    }
  }
  return true;
}

bool check_layouts() {
  const bool ok = check_layouts_for<3, 2, 2>() && check_layouts_for<4, 3, 1>() &&
                  check_layouts_for<1, 2, 4>();
  std::printf("%s layout inverses match the documented formulas\n", ok ? "PASS" : "FAIL");
  return ok;
}

// A: logical M x K, row-major in global memory.  B: logical K x N, row-major.
// C: M x N row-major, initialised from Cin unless CLEAR.
template <int M, int N, int K, int WARP_M, int WARP_N, bool TRANS_A, bool TRANS_B,
          bool RS, bool CLEAR, int PADA, int PADB, class T, class TC>
__global__ void gemm_test_kernel(const T* A, const T* B, const TC* Cin, TC* Cout) {
  constexpr int LDA = (TRANS_A ? M : K) + PADA;
  constexpr int ROWS_A = TRANS_A ? K : M;
  constexpr int LDB = (TRANS_B ? K : N) + PADB;
  constexpr int ROWS_B = TRANS_B ? N : K;
  constexpr int E = sizeof(T);
  __shared__ __align__(128) T sA[ROWS_A * LDA];
  __shared__ __align__(128) T sB[ROWS_B * LDB];

  for (int i = threadIdx.x; i < M * K; i += blockDim.x) {
    const int m = i / K, k = i % K;
    const int r = TRANS_A ? k : m, c = TRANS_A ? m : k;
    sA[tl::swizzle_offset<LDA, E>(r, c)] = A[i];
  }
  for (int i = threadIdx.x; i < K * N; i += blockDim.x) {
    const int k = i / N, n = i % N;
    const int r = TRANS_B ? n : k, c = TRANS_B ? k : n;
    sB[tl::swizzle_offset<LDB, E>(r, c)] = B[i];
  }
  __syncthreads();

  constexpr int WM = M / WARP_M, WN = N / WARP_N, MI = WM / 16, NI = WN / 8;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp % WARP_M, wn = warp / WARP_M;

  // Accumulator and A-register positions are computed from the inverse of
  // the documented layouts (see acc_coord / afrag_coord), which keeps every
  // register index a compile-time constant.  check_layouts() verifies on the
  // host that the inverses agree with the documented forward formulas.
  TC acc[MI * NI * 4];
#pragma unroll
  for (int i = 0; i < MI * NI * 4; ++i) {
    int mi, ni, r, c;
    acc_coord<NI>(lane, i, mi, ni, r, c);
    acc[i] = CLEAR ? tl::cvt<TC>(-12345.0f)
                   : Cin[(wm * WM + mi * 16 + r) * N + wn * WN + ni * 8 + c];
  }

  if constexpr (RS) {
    constexpr int P = 4 / E, KS = 8 * P, KI = K / KS;
    T afrag[MI * KI * 4 * P];
#pragma unroll
    for (int i = 0; i < MI * KI * 4 * P; ++i) {
      int mi, ki, r, k;
      afrag_coord<KI, P>(lane, i, mi, ki, r, k);
      afrag[i] = A[(wm * WM + mi * 16 + r) * K + ki * KS + k];
    }
    tl::gemm_rs<M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B, CLEAR, LDB>(afrag, sB, acc);
  } else {
    tl::gemm_ss<M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B, CLEAR, LDA, LDB>(sA, sB, acc);
  }

#pragma unroll
  for (int i = 0; i < MI * NI * 4; ++i) {
    int mi, ni, r, c;
    acc_coord<NI>(lane, i, mi, ni, r, c);
    Cout[(wm * WM + mi * 16 + r) * N + wn * WN + ni * 8 + c] = acc[i];
  }
}

static int g_failures = 0;
static int g_runs = 0;

template <class T>
double random_value(std::mt19937& rng) {
  if constexpr (std::is_same<T, int8_t>::value) {
    return static_cast<double>(static_cast<int>(rng() % 256) - 128);
  } else if constexpr (std::is_same<T, uint8_t>::value) {
    return static_cast<double>(rng() % 256);
  } else {
    // Multiples of 1/8 in [-1, 1] are exact in every floating type tested,
    // so a float accumulator must reproduce the reference exactly.
    return (static_cast<int>(rng() % 17) - 8) / 8.0;
  }
}

template <int M, int N, int K, int WARP_M, int WARP_N, bool TRANS_A, bool TRANS_B,
          bool RS, bool CLEAR, int PADA = 0, int PADB = 0, class T, class TC>
void run_case() {
  std::mt19937 rng(1234u + M * 7 + N * 13 + K * 17 + TRANS_A * 3 + TRANS_B * 5);
  std::vector<T> hA(M * K), hB(K * N);
  std::vector<TC> hC(M * N), hOut(M * N);
  std::vector<double> ref(M * N);
  for (auto& v : hA) v = host_from_double<T>(random_value<T>(rng));
  for (auto& v : hB) v = host_from_double<T>(random_value<T>(rng));
  for (auto& v : hC) v = host_from_double<TC>(std::is_integral<TC>::value ? double(rng() % 1000) - 500.0
                                                                        : random_value<half>(rng));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = CLEAR ? 0.0 : host_to_double(hC[m * N + n]);
      for (int k = 0; k < K; ++k) s += host_to_double(hA[m * K + k]) * host_to_double(hB[k * N + n]);
      ref[m * N + n] = s;
    }

  T *dA, *dB;
  TC *dC, *dOut;
  CHECK_CUDA(cudaMalloc(&dA, sizeof(T) * M * K));
  CHECK_CUDA(cudaMalloc(&dB, sizeof(T) * K * N));
  CHECK_CUDA(cudaMalloc(&dC, sizeof(TC) * M * N));
  CHECK_CUDA(cudaMalloc(&dOut, sizeof(TC) * M * N));
  CHECK_CUDA(cudaMemcpy(dA, hA.data(), sizeof(T) * M * K, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dB, hB.data(), sizeof(T) * K * N, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dC, hC.data(), sizeof(TC) * M * N, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dOut, 0xff, sizeof(TC) * M * N));
  gemm_test_kernel<M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B, RS, CLEAR, PADA, PADB, T, TC>
      <<<1, 32 * WARP_M * WARP_N>>>(dA, dB, dC, dOut);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(hOut.data(), dOut, sizeof(TC) * M * N, cudaMemcpyDeviceToHost));

  // fp16 accumulation rounds every partial sum to 11 bits; everything else
  // is exact for these inputs (tf32 holds multiples of 1/8 exactly).
  const bool half_acc = std::is_same<TC, half>::value;
  const double atol = half_acc ? 0.05 : 1e-6, rtol = half_acc ? 1e-2 : 1e-6;
  int bad = 0;
  double max_err = 0;
  for (int i = 0; i < M * N; ++i) {
    const double got = host_to_double(hOut[i]);
    const double err = std::fabs(got - ref[i]);
    if (!(err <= atol + rtol * std::fabs(ref[i]))) {
      if (bad < 3)
        std::printf("    mismatch at (%d, %d): got %g expected %g\n", i / N, i % N, got, ref[i]);
      ++bad;
    }
    if (err > max_err || std::isnan(got)) max_err = std::isnan(got) ? INFINITY : err;
  }
  ++g_runs;
  if (bad) ++g_failures;
  std::printf("%s gemm_%s %dx%dx%d warps %dx%d trans_a=%d trans_b=%d clear=%d pad=%d/%d %s->%s "
              "max_err=%.3g\n",
              bad ? "FAIL" : "PASS", RS ? "rs" : "ss", M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B,
              CLEAR, PADA, PADB, type_name<T>(), type_name<TC>(), max_err);
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  cudaFree(dOut);
}

// All four transpose combinations of gemm_ss, and gemm_rs for both B
// layouts (TRANS_A does not apply to register operands).
template <int M, int N, int K, int WARP_M, int WARP_N, class T, class TC>
void run_shape() {
  run_case<M, N, K, WARP_M, WARP_N, false, false, false, false, 0, 0, T, TC>();
  run_case<M, N, K, WARP_M, WARP_N, false, true, false, true, 0, 0, T, TC>();
  run_case<M, N, K, WARP_M, WARP_N, true, false, false, false, 0, 0, T, TC>();
  run_case<M, N, K, WARP_M, WARP_N, true, true, false, false, 0, 0, T, TC>();
  run_case<M, N, K, WARP_M, WARP_N, false, false, true, true, 0, 0, T, TC>();
  run_case<M, N, K, WARP_M, WARP_N, false, true, true, false, 0, 0, T, TC>();
}

template <class T, class TC>
void run_type() {
#ifdef TL_TEST_QUICK
  run_shape<64, 64, 64, 2, 2, T, TC>();
#else
  run_shape<128, 128, 32, 2, 2, T, TC>();
  run_shape<64, 64, 64, 2, 2, T, TC>();
  run_shape<128, 256, 32, 2, 4, T, TC>();
  run_shape<64, 128, 16, 1, 4, T, TC>();
  run_shape<16, 8, 16, 1, 1, T, TC>();
#endif
}

int main() {
  if (!check_layouts()) ++g_failures;
  run_type<half, float>();
  run_type<__nv_bfloat16, float>();
  run_type<half, half>();
  // Padded row strides: 80-byte rows are not swizzled at all, 96-byte rows
  // give S = 2 for 16-bit elements and 48 floats S = 4 for tf32.
  run_case<64, 64, 32, 2, 2, false, false, false, false, 8, 8, half, float>();
  run_case<64, 64, 32, 2, 2, true, true, false, false, 8, 8, __nv_bfloat16, float>();
  run_case<64, 64, 32, 2, 2, true, false, false, false, 16, 16, half, float>();
  run_case<32, 48, 32, 1, 2, false, false, false, false, 0, 16, half, float>();
  run_case<32, 24, 16, 2, 1, false, true, false, false, 0, 0, half, float>();
  run_case<32, 24, 16, 2, 1, false, false, true, false, 0, 0, __nv_bfloat16, float>();
  // int8 (m16n8k32) and tf32 (m16n8k8), all layouts.
  run_shape<64, 64, 64, 2, 2, int8_t, int>();
  run_case<32, 32, 32, 1, 1, false, true, false, false, 0, 0, uint8_t, int>();
  run_shape<64, 64, 32, 2, 2, float, float>();
  run_case<32, 48, 16, 1, 2, true, false, false, false, 4, 16, float, float>();
#ifndef TL_TEST_QUICK
  run_shape<128, 128, 64, 2, 2, int8_t, int>();
  run_shape<128, 128, 32, 2, 2, float, float>();
  run_shape<16, 8, 32, 1, 1, int8_t, int>();
  run_shape<16, 8, 8, 1, 1, float, float>();
#endif
  std::printf("%d/%d configurations passed\n", g_runs - g_failures, g_runs);
  return g_failures ? 1 : 0;
}
