// A small kernel that touches every header of the device library, compiled
// (never run) by tests/test_src_headers.py.  It mimics the shape of
// TVM-generated CUDA source: the prelude's macros for `uint`, `uchar`,
// `ushort`, `int64_t` and `uint64_t` may be defined before `tl.h` is
// included (TL_PRELUDE_BEFORE) or right after it (the default), and both
// orders must compile.
#ifdef TL_PRELUDE_BEFORE
#define uint unsigned int
#define uchar unsigned char
#define ushort unsigned short
#define int64_t long long
#define uint64_t unsigned long long
#endif

#include "tl.h"

#ifndef TL_PRELUDE_BEFORE
#include <cuda_fp16.h>
#define uint unsigned int
#define uchar unsigned char
#define ushort unsigned short
#define int64_t long long
#define uint64_t unsigned long long
#endif

// Generated code spells the element types with the prelude's names.
extern "C" __global__ void __launch_bounds__(128)
    all_headers_kernel(half* __restrict__ A, half* __restrict__ B, float* __restrict__ C,
                       __nv_bfloat16* __restrict__ D, float* __restrict__ F, int* __restrict__ I,
                       int64_t n) {
  __shared__ __align__(128) half A_shared[64 * 32];
  __shared__ __align__(128) half B_shared[32 * 64];
  const uint tid = threadIdx.x;
  const ushort lane = static_cast<ushort>(tid & 31);
  const uchar warp = static_cast<uchar>(tid >> 5);

  // copy.h: two 16-byte chunks of each tile per thread, the second one
  // predicated on the problem size.
  for (int i = 0; i < 2; ++i) {
    const int q = i * 128 + static_cast<int>(tid);
    const int r = q / 4, c = (q % 4) * 8;
    tl::cp_async_gs<16>(A_shared + tl::swizzle_offset<32, 2>(r, c), A + r * 32 + c);
    const int rb = q / 8, cb = (q % 8) * 8;
    tl::cp_async_gs_conditional<16>(B_shared + tl::swizzle_offset<64, 2>(rb, cb),
                                    B + rb * 64 + cb, static_cast<int64_t>(q) < n);
  }
  tl::cp_async_commit();
  tl::cp_async_wait<0>();
  tl::sync_threads();

  // gemm_sm80.h: both entry points.
  float acc[2 * 4 * 4];
  tl::gemm_ss<64, 64, 32, 2, 2, false, false, true, 32, 64>(A_shared, B_shared, acc);
  half a_frag[2 * 2 * 8];
#pragma unroll
  for (int i = 0; i < 32; ++i) a_frag[i] = A[i * 32 + lane];
  tl::gemm_rs<64, 64, 32, 2, 2, false, false, false, 64>(a_frag, B_shared, acc);

  // reduce.h and math.h: an online-softmax style row statistic.
  float row_max = tl::MaxOp::init<float>();
#pragma unroll
  for (int i = 0; i < 32; ++i) row_max = tl::MaxOp::combine(row_max, acc[i]);
  row_max = tl::warp_allreduce<tl::MaxOp, 1, 4>(row_max);
  float row_sum = 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i) row_sum += tl::exp2f_fast(acc[i] - row_max);
  row_sum = tl::warp_allreduce<tl::SumOp, 1, 4>(row_sum);
  const half h = tl::warp_allreduce<tl::AbsMaxOp, 1, 32>(tl::cvt<half>(row_sum));
  const __nv_bfloat16 b = tl::warp_allreduce<tl::AbsSumOp, 4, 32>(tl::sigmoid(D[tid]));

  // atomic.h
  tl::atomic_add(&C[warp], tl::rsqrt(row_sum) + tl::cvt<float>(h));
  tl::atomic_max(&F[0], row_max);
  tl::atomic_min(&F[1], tl::min_value<float>());
  tl::atomic_max(&D[0], b);
  tl::atomic_add(&D[1], tl::infinity<__nv_bfloat16>());
  tl::atomic_add(&A[0], 1.0f);
  tl::atomic_max(&I[0], static_cast<int>(lane));
  uint64_t word = static_cast<uint64_t>(tl::max_value<int>());
  tl::copy_vec<8>(&I[2], &word);
}
