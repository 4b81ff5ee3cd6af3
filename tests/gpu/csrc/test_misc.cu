// Runtime tests of the small parts of the device library: warp reductions
// (reduce.h, one value or several rows a lane), atomics (atomic.h), cp.async and vector copies (copy.h), math
// helpers (math.h) and conversions / limits (common.h).  Prints PASS/FAIL
// per check and exits non-zero when any check fails.
//
// Build: nvcc -std=c++17 -O3 -I src -gencode arch=compute_90a,code=sm_90a
//        tests/gpu/csrc/test_misc.cu -o test_misc
#include "tl.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

static int g_failures = 0;

static void report(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  if (!ok) ++g_failures;
}

template <class T>
T hcast(double v) {
  if constexpr (std::is_same<T, half>::value) return __float2half_rn((float)v);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __float2bfloat16_rn((float)v);
  else return static_cast<T>(v);
}
template <class T>
double hval(T v) {
  if constexpr (std::is_same<T, half>::value) return __half2float(v);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __bfloat162float(v);
  else return static_cast<double>(v);
}

// ------------------------------------------------------------------------
// Warp reductions
// ------------------------------------------------------------------------

template <class Op, int LO, int HI, class T>
__global__ void allreduce_kernel(const T* in, T* out) {
  out[threadIdx.x] = tl::warp_allreduce<Op, LO, HI>(in[threadIdx.x]);
}

enum OpKind { kSum, kMax, kMin, kAbsSum, kAbsMax };

template <class Op, OpKind KIND, int LO, int HI, class T>
void test_allreduce(const char* name) {
  std::vector<T> hin(32), hout(32);
  std::vector<double> v(32);
  for (int l = 0; l < 32; ++l) {
    v[l] = ((l * 7 + 3) % 23) - 11;  // small integers of both signs
    hin[l] = hcast<T>(v[l]);
  }
  T *din, *dout;
  CHECK_CUDA(cudaMalloc(&din, 32 * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dout, 32 * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(din, hin.data(), 32 * sizeof(T), cudaMemcpyHostToDevice));
  allreduce_kernel<Op, LO, HI, T><<<1, 32>>>(din, dout);
  CHECK_CUDA(cudaMemcpy(hout.data(), dout, 32 * sizeof(T), cudaMemcpyDeviceToHost));
  cudaFree(din);
  cudaFree(dout);
  // Lanes that differ only in bits [log2 LO, log2 HI) form one group.
  const int group_bits = (HI - 1) & ~(LO - 1);
  bool ok = true;
  for (int l = 0; l < 32; ++l) {
    double acc = 0;
    bool first = true;
    for (int o = 0; o < 32; ++o) {
      if ((o & ~group_bits) != (l & ~group_bits)) continue;
      const double x = v[o];
      if (first) {
        acc = (KIND == kAbsSum || KIND == kAbsMax) ? std::fabs(x) : x;
        first = false;
        continue;
      }
      switch (KIND) {
        case kSum: acc += x; break;
        case kMax: acc = std::max(acc, x); break;
        case kMin: acc = std::min(acc, x); break;
        case kAbsSum: acc += std::fabs(x); break;
        case kAbsMax: acc = std::max(acc, std::fabs(x)); break;
      }
    }
    if (hval(hout[l]) != acc) ok = false;
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "warp_allreduce<%s, %d, %d> %s", name, LO, HI,
                sizeof(T) == 2 ? (std::is_same<T, half>::value ? "half" : "bf16")
                               : (std::is_same<T, float>::value ? "float"
                                  : std::is_same<T, double>::value ? "double" : "int"));
  report(ok, buf);
}

template <class T>
void test_allreduce_type() {
  test_allreduce<tl::SumOp, kSum, 1, 32, T>("SumOp");
  test_allreduce<tl::MaxOp, kMax, 1, 32, T>("MaxOp");
  test_allreduce<tl::MinOp, kMin, 4, 32, T>("MinOp");
  test_allreduce<tl::AbsSumOp, kAbsSum, 1, 4, T>("AbsSumOp");
  test_allreduce<tl::AbsMaxOp, kAbsMax, 2, 16, T>("AbsMaxOp");
}

// warp_allreduce_rows: R rows a lane, every row reduced over the lanes of a group (as
// warp_allreduce<Op, LO, HI> does one), the rows halved between partners and gathered back.
template <class Op, int LO, int HI, int R, class T>
__global__ void allreduce_rows_kernel(const T* in, T* out) {
  T v[R];
  for (int r = 0; r < R; ++r) v[r] = in[threadIdx.x * R + r];
  tl::warp_allreduce_rows<Op, LO, HI, R>(v);
  for (int r = 0; r < R; ++r) out[threadIdx.x * R + r] = v[r];
}

template <class Op, OpKind KIND, int LO, int HI, int R, class T>
void test_allreduce_rows(const char* name) {
  std::vector<T> hin(32 * R), hout(32 * R);
  std::vector<double> v(32 * R);
  for (int i = 0; i < 32 * R; ++i) {
    v[i] = ((i * 13 + 5) % 29) - 14;  // small integers of both signs: exact in every type
    hin[i] = hcast<T>(v[i]);
  }
  T *din, *dout;
  CHECK_CUDA(cudaMalloc(&din, hin.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dout, hin.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(din, hin.data(), hin.size() * sizeof(T), cudaMemcpyHostToDevice));
  allreduce_rows_kernel<Op, LO, HI, R, T><<<1, 32>>>(din, dout);
  CHECK_CUDA(cudaMemcpy(hout.data(), dout, hout.size() * sizeof(T), cudaMemcpyDeviceToHost));
  cudaFree(din);
  cudaFree(dout);
  const int group_bits = (HI - 1) & ~(LO - 1);
  bool ok = true;
  for (int l = 0; l < 32; ++l) {
    for (int r = 0; r < R; ++r) {
      double acc = 0;
      bool first = true;
      for (int o = 0; o < 32; ++o) {
        if ((o & ~group_bits) != (l & ~group_bits)) continue;
        const double x = v[o * R + r];
        if (first) {
          acc = x;
          first = false;
        } else if (KIND == kSum) {
          acc += x;
        } else if (KIND == kMax) {
          acc = std::max(acc, x);
        } else {
          acc = std::min(acc, x);
        }
      }
      if (hval(hout[l * R + r]) != acc) ok = false;
    }
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "warp_allreduce_rows<%s, %d, %d, %d> (%d-byte values)", name, LO, HI, R,
                (int)sizeof(T));
  report(ok, buf);
}

void test_allreduce_rows_all() {
  test_allreduce_rows<tl::MaxOp, kMax, 1, 32, 16, float>("MaxOp");      // the top-k router's
  test_allreduce_rows<tl::SumOp, kSum, 1, 32, 8, float>("SumOp");
  test_allreduce_rows<tl::SumOp, kSum, 1, 16, 8, half>("SumOp");
  test_allreduce_rows<tl::MinOp, kMin, 2, 32, 4, __nv_bfloat16>("MinOp");  // groups of strided lanes
  test_allreduce_rows<tl::MaxOp, kMax, 4, 16, 64, int>("MaxOp");        // more rows than lanes
  test_allreduce_rows<tl::SumOp, kSum, 1, 32, 32, double>("SumOp");     // 8-byte values
}

// ------------------------------------------------------------------------
// Atomics
// ------------------------------------------------------------------------

struct AtomicCells {
  float fsum;
  int isum;
  double dsum;
  half hsum;
  __nv_bfloat16 bsum;
  float fmax_neg, fmax_mixed, fmin_mixed, fmin_pos;
  int imax, imin;
  half hmax, hmin;
  __nv_bfloat16 bmax, bmin;
  double dmax, dmin;
};

// Value of thread i in [-n/2, n/2), spread so that neighbours differ.
__device__ __host__ inline int mixed_value(int i, int n) { return (int)((i * 37u) % n) - n / 2; }

__global__ void atomic_kernel(AtomicCells* c, int* old_seen_f, int* old_seen_i, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float of = tl::atomic_add(&c->fsum, 1.0f);
  old_seen_f[(int)of] += 1;  // each old value must occur exactly once
  const int oi = tl::atomic_add(&c->isum, 1);
  atomicAdd(&old_seen_i[oi], 1);
  tl::atomic_add(&c->dsum, 0.5);
  if (i < 1024) tl::atomic_add(&c->hsum, __float2half(1.0f));
  if (i < 128) tl::atomic_add(&c->bsum, 1.0f);  // mixed-type overload
  const int v = mixed_value(i, n);
  tl::atomic_max(&c->fmax_neg, -1.0f - (float)((i * 37u) % n));
  tl::atomic_max(&c->fmax_mixed, (float)v);
  tl::atomic_min(&c->fmin_mixed, (float)v);
  tl::atomic_min(&c->fmin_pos, 1.0f + (float)((i * 37u) % n));
  tl::atomic_max(&c->imax, v);
  tl::atomic_min(&c->imin, v);
  const float hv = (float)(v % 1000);
  tl::atomic_max(&c->hmax, __float2half(hv));
  tl::atomic_min(&c->hmin, __float2half(hv));
  tl::atomic_max(&c->bmax, __float2bfloat16(hv / 4));
  tl::atomic_min(&c->bmin, __float2bfloat16(hv / 4));
  tl::atomic_max(&c->dmax, (double)v);
  tl::atomic_min(&c->dmin, (double)v);
}

void test_atomics() {
  const int n = 64 * 256;
  AtomicCells h{};
  h.fmax_neg = -INFINITY;
  h.fmax_mixed = -INFINITY;
  h.fmin_mixed = INFINITY;
  h.fmin_pos = INFINITY;
  h.imax = -1 << 30;
  h.imin = 1 << 30;
  h.hmax = __float2half(-INFINITY);
  h.hmin = __float2half(INFINITY);
  h.bmax = __float2bfloat16(-INFINITY);
  h.bmin = __float2bfloat16(INFINITY);
  h.dmax = -INFINITY;
  h.dmin = INFINITY;
  h.hsum = __float2half(0.f);
  h.bsum = __float2bfloat16(0.f);
  AtomicCells* dc;
  int *dseen_f, *dseen_i;
  CHECK_CUDA(cudaMalloc(&dc, sizeof h));
  CHECK_CUDA(cudaMalloc(&dseen_f, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dseen_i, n * sizeof(int)));
  CHECK_CUDA(cudaMemset(dseen_f, 0, n * sizeof(int)));
  CHECK_CUDA(cudaMemset(dseen_i, 0, n * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dc, &h, sizeof h, cudaMemcpyHostToDevice));
  atomic_kernel<<<n / 256, 256>>>(dc, dseen_f, dseen_i, n);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(&h, dc, sizeof h, cudaMemcpyDeviceToHost));
  std::vector<int> seen_f(n), seen_i(n);
  CHECK_CUDA(cudaMemcpy(seen_f.data(), dseen_f, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(seen_i.data(), dseen_i, n * sizeof(int), cudaMemcpyDeviceToHost));
  bool perm_i = true;
  for (int i = 0; i < n; ++i) perm_i = perm_i && seen_i[i] == 1;
  // The float counter's old values are distinct, so each seen_f slot is
  // written by exactly one thread and a plain increment suffices.
  bool perm_f = true;
  for (int i = 0; i < n; ++i) perm_f = perm_f && seen_f[i] == 1;
  int vmax = -n, vmin = n;
  for (int i = 0; i < n; ++i) {
    vmax = std::max(vmax, mixed_value(i, n));
    vmin = std::min(vmin, mixed_value(i, n));
  }
  report(h.fsum == (float)n && perm_f, "atomic_add float (sum and returned old values)");
  report(h.isum == n && perm_i, "atomic_add int (sum and returned old values)");
  report(h.dsum == 0.5 * n, "atomic_add double");
  report(hval(h.hsum) == 1024.0, "atomic_add half");
  report(hval(h.bsum) == 128.0, "atomic_add bf16 (mixed-type)");
  report(h.fmax_neg == -1.0f, "atomic_max float, all values negative, from -inf");
  report(h.fmax_mixed == (float)vmax, "atomic_max float, mixed signs");
  report(h.fmin_mixed == (float)vmin, "atomic_min float, mixed signs");
  report(h.fmin_pos == 1.0f, "atomic_min float, all values positive, from +inf");
  report(h.imax == vmax && h.imin == vmin, "atomic_max/min int");
  report(hval(h.hmax) == 999.0 && hval(h.hmin) == -999.0, "atomic_max/min half");
  report(hval(h.bmax) == hval(hcast<__nv_bfloat16>(999.0 / 4)) &&
             hval(h.bmin) == hval(hcast<__nv_bfloat16>(-999.0 / 4)),
         "atomic_max/min bf16");
  report(h.dmax == vmax && h.dmin == vmin, "atomic_max/min double");
  cudaFree(dc);
  cudaFree(dseen_f);
  cudaFree(dseen_i);
}

// Returned old values of the float max/min trick for the tricky orderings.
__global__ void atomic_old_kernel(float* out) {
  __shared__ float cell;
  if (threadIdx.x != 0) return;
  cell = -INFINITY;
  out[0] = tl::atomic_max(&cell, -3.0f);  // -inf
  out[1] = tl::atomic_max(&cell, -5.0f);  // -3, stays -3
  out[2] = tl::atomic_max(&cell, 0.0f);   // -3
  out[3] = tl::atomic_min(&cell, -0.5f);  // 0
  out[4] = tl::atomic_min(&cell, 2.0f);   // -0.5, stays
  out[5] = cell;                          // -0.5 in shared memory
}

void test_atomic_old() {
  float* d;
  float h[6];
  CHECK_CUDA(cudaMalloc(&d, sizeof h));
  atomic_old_kernel<<<1, 32>>>(d);
  CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  cudaFree(d);
  report(h[0] == -INFINITY && h[1] == -3.f && h[2] == -3.f && h[3] == 0.f && h[4] == -0.5f &&
             h[5] == -0.5f,
         "atomic_max/min float return values in shared memory");
}

// ------------------------------------------------------------------------
// Copies
// ------------------------------------------------------------------------

// Each thread copies one 16-, 8- and 4-byte piece with cp.async.  Odd
// threads use the conditional form with pred = false and a source pointer
// that would fault if it were dereferenced.
__global__ void cp_async_kernel(const int4* src, int4* dst16, int2* dst8, int* dst4, int4* vec) {
  __shared__ int4 s16[64];
  __shared__ int2 s8[64];
  __shared__ int s4[64];
  const int t = threadIdx.x;
  const void* bogus = reinterpret_cast<const void*>(0x10);
  const bool pred = (t % 2) == 0;
  const int* src4 = reinterpret_cast<const int*>(src);
  if (t < 32) {
    tl::cp_async_gs<16>(&s16[t], &src[t]);
    tl::cp_async_gs<8>(&s8[t], reinterpret_cast<const int2*>(src) + t);
    tl::cp_async_gs<4>(&s4[t], src4 + t);
  } else {
    tl::cp_async_gs_conditional<16>(&s16[t], pred ? (const void*)&src[t] : bogus, pred);
    tl::cp_async_gs_conditional<8>(&s8[t], pred ? (const void*)(reinterpret_cast<const int2*>(src) + t) : bogus, pred);
    tl::cp_async_gs_conditional<4>(&s4[t], pred ? (const void*)(src4 + t) : bogus, pred);
  }
  tl::cp_async_commit();
  tl::cp_async_wait<0>();
  __syncthreads();
  tl::copy_vec<16>(&dst16[t], &s16[t]);
  tl::copy_vec<8>(&dst8[t], &s8[t]);
  tl::copy_vec<4>(&dst4[t], &s4[t]);
  // 2-byte copy of the low half of each int.
  tl::copy_vec<2>(reinterpret_cast<short*>(&vec[t]), reinterpret_cast<const short*>(&src[t]));
}

void test_copies() {
  std::vector<int> hsrc(64 * 4);
  for (size_t i = 0; i < hsrc.size(); ++i) hsrc[i] = (int)(i * 2654435761u) | 1;
  int4 *src, *d16, *vec;
  int2* d8;
  int* d4;
  CHECK_CUDA(cudaMalloc(&src, 64 * sizeof(int4)));
  CHECK_CUDA(cudaMalloc(&d16, 64 * sizeof(int4)));
  CHECK_CUDA(cudaMalloc(&vec, 64 * sizeof(int4)));
  CHECK_CUDA(cudaMalloc(&d8, 64 * sizeof(int2)));
  CHECK_CUDA(cudaMalloc(&d4, 64 * sizeof(int)));
  CHECK_CUDA(cudaMemset(vec, 0, 64 * sizeof(int4)));
  CHECK_CUDA(cudaMemcpy(src, hsrc.data(), 64 * sizeof(int4), cudaMemcpyHostToDevice));
  cp_async_kernel<<<1, 64>>>(src, d16, d8, d4, vec);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<int> h16(256), h8(128), h4(64), hv(256);
  CHECK_CUDA(cudaMemcpy(h16.data(), d16, 64 * sizeof(int4), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(h8.data(), d8, 64 * sizeof(int2), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(h4.data(), d4, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hv.data(), vec, 64 * sizeof(int4), cudaMemcpyDeviceToHost));
  bool ok16 = true, ok8 = true, ok4 = true, ok2 = true;
  for (int t = 0; t < 64; ++t) {
    const bool copied = t < 32 || t % 2 == 0;
    for (int j = 0; j < 4; ++j) ok16 = ok16 && h16[t * 4 + j] == (copied ? hsrc[t * 4 + j] : 0);
    for (int j = 0; j < 2; ++j) ok8 = ok8 && h8[t * 2 + j] == (copied ? hsrc[t * 2 + j] : 0);
    ok4 = ok4 && h4[t] == (copied ? hsrc[t] : 0);
    ok2 = ok2 && (hv[t * 4] & 0xffff) == (hsrc[t * 4] & 0xffff) && (hv[t * 4] >> 16) == 0;
  }
  report(ok16, "cp_async_gs<16> / cp_async_gs_conditional<16> (zero fill, no dereference)");
  report(ok8, "cp_async_gs<8> / cp_async_gs_conditional<8>");
  report(ok4, "cp_async_gs<4> / cp_async_gs_conditional<4>");
  report(ok2, "copy_vec<2,4,8,16>");
  cudaFree(src);
  cudaFree(d16);
  cudaFree(vec);
  cudaFree(d8);
  cudaFree(d4);
}

// ------------------------------------------------------------------------
// Math, conversions and limits
// ------------------------------------------------------------------------

__global__ void math_kernel(const float* x, float* out, int n) {
  const int i = threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  out[i * 9 + 0] = tl::exp2f_fast(v);
  out[i * 9 + 1] = __half2float(tl::exp2f_fast(__float2half(v)));
  out[i * 9 + 2] = __bfloat162float(tl::exp2f_fast(__float2bfloat16(v)));
  out[i * 9 + 3] = tl::rsqrt(fabsf(v) + 0.25f);
  out[i * 9 + 4] = __half2float(tl::rsqrt(__float2half(fabsf(v) + 0.25f)));
  out[i * 9 + 5] = __bfloat162float(tl::rsqrt(__float2bfloat16(fabsf(v) + 0.25f)));
  out[i * 9 + 6] = tl::sigmoid(v * 30.f);
  out[i * 9 + 7] = __half2float(tl::sigmoid(__float2half(v)));
  out[i * 9 + 8] = __bfloat162float(tl::sigmoid(__float2bfloat16(v)));
}

void test_math() {
  const int n = 64;
  std::vector<float> hx(n), hout(n * 9);
  for (int i = 0; i < n; ++i) hx[i] = -4.0f + 8.0f * i / (n - 1);
  float *dx, *dout;
  CHECK_CUDA(cudaMalloc(&dx, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dout, n * 9 * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(dx, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  math_kernel<<<1, n>>>(dx, dout, n);
  CHECK_CUDA(cudaMemcpy(hout.data(), dout, n * 9 * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dout);
  bool ok_exp = true, ok_rsqrt = true, ok_sig = true;
  auto close = [](double got, double want, double rel) {
    return std::fabs(got - want) <= rel * std::fabs(want) + 1e-30;
  };
  for (int i = 0; i < n; ++i) {
    const double v = hx[i];
    const float* r = &hout[i * 9];
    ok_exp = ok_exp && close(r[0], std::exp2(v), 1e-6) && close(r[1], std::exp2(v), 4e-3) &&
             close(r[2], std::exp2(v), 2e-2);
    const double rs = 1.0 / std::sqrt(std::fabs(v) + 0.25);
    ok_rsqrt = ok_rsqrt && close(r[3], rs, 1e-6) && close(r[4], rs, 4e-3) && close(r[5], rs, 2e-2);
    const double s30 = 1.0 / (1.0 + std::exp(-v * 30.0)), s = 1.0 / (1.0 + std::exp(-v));
    ok_sig = ok_sig && std::fabs(r[6] - s30) <= 1e-6 && close(r[7], s, 4e-3) && close(r[8], s, 2.5e-2);
  }
  report(ok_exp, "exp2f_fast float/half/bf16");
  report(ok_rsqrt, "rsqrt float/half/bf16");
  report(ok_sig, "sigmoid float/half/bf16 (including saturation)");
}

__global__ void cvt_kernel(float* out) {
  out[0] = __half2float(tl::cvt<half>(1.5f));
  out[1] = __bfloat162float(tl::cvt<__nv_bfloat16>(tl::cvt<half>(3.25f)));
  out[2] = (float)tl::cvt<int>(-2.75f);
  out[3] = __half2float(tl::cvt<half>(7));
  out[4] = (float)tl::cvt<int>(__float2bfloat16(-9.5f));
  out[5] = (float)tl::cvt<int>(__float2half(5.9f));
  out[6] = tl::cvt<float>(__float2bfloat16(0.5f));
  out[7] = __half2float(tl::infinity<half>());
  out[8] = __bfloat162float(tl::infinity<__nv_bfloat16>());
  out[9] = tl::infinity<float>();
  out[10] = __half2float(tl::max_value<half>());
  out[11] = __half2float(tl::min_value<half>());
  out[12] = __bfloat162float(tl::max_value<__nv_bfloat16>());
  out[13] = tl::max_value<float>();
  out[14] = tl::min_value<float>();
  out[15] = (float)tl::max_value<int>();
  out[16] = (float)tl::min_value<int>();
  out[17] = (float)tl::infinity<double>();
  out[18] = (float)tl::cvt<double>(__float2half(0.25f));
  out[19] = __half2float(tl::cvt<half>(0.1));
}

void test_cvt() {
  float* d;
  float h[20];
  CHECK_CUDA(cudaMalloc(&d, sizeof h));
  cvt_kernel<<<1, 1>>>(d);
  CHECK_CUDA(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  cudaFree(d);
  const bool ok = h[0] == 1.5f && h[1] == 3.25f && h[2] == -2.f && h[3] == 7.f && h[4] == -9.f &&
                  h[5] == 5.f && h[6] == 0.5f && std::isinf(h[7]) && h[7] > 0 &&
                  std::isinf(h[8]) && std::isinf(h[9]) && h[10] == 65504.f && h[11] == -65504.f &&
                  h[12] == 3.3895314e38f && h[13] == 3.4028235e38f && h[14] == -3.4028235e38f &&
                  h[15] == 2147483647.f && h[16] == -2147483648.f && std::isinf(h[17]) &&
                  h[18] == 0.25f && h[19] == __half2float(__float2half_rn(0.1f));
  if (!ok)
    for (int i = 0; i < 20; ++i) std::printf("    cvt[%d] = %.9g\n", i, h[i]);
  report(ok, "cvt / infinity / max_value / min_value");
}

int main() {
  test_allreduce_type<float>();
  test_allreduce_type<half>();
  test_allreduce_type<__nv_bfloat16>();
  test_allreduce_type<int>();
  test_allreduce_type<double>();
  test_allreduce_rows_all();
  test_atomics();
  test_atomic_old();
  test_copies();
  test_math();
  test_cvt();
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
