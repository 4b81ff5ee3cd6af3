// Copyright the TileLang compiler authors.
//
// Warp-level reductions: a type-generic xor shuffle, reduction operator
// functors and a butterfly all-reduce over a power-of-two group of lanes.
#pragma once

#include "common.h"

#include "fp8.h"

namespace tl {

// Shuffles use the full-warp mask by default: the generated reductions are
// executed by complete warps.  A block smaller than a warp passes the mask
// of its live lanes instead (lanes 0..threads-1).
constexpr unsigned kFullWarpMask = 0xffffffffu;

TL_DEVICE float shfl_xor(float v, int lane_mask, unsigned mask = kFullWarpMask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
TL_DEVICE double shfl_xor(double v, int lane_mask, unsigned mask = kFullWarpMask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
TL_DEVICE int shfl_xor(int v, int lane_mask, unsigned mask = kFullWarpMask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
TL_DEVICE unsigned shfl_xor(unsigned v, int lane_mask, unsigned mask = kFullWarpMask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
TL_DEVICE long long shfl_xor(long long v, int lane_mask, unsigned mask = kFullWarpMask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
TL_DEVICE unsigned long long shfl_xor(unsigned long long v, int lane_mask, unsigned mask = kFullWarpMask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
// int64_t / uint64_t are `long` / `unsigned long` on LP64 hosts: give them exact matches.
TL_DEVICE long shfl_xor(long v, int lane_mask, unsigned mask = kFullWarpMask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
TL_DEVICE unsigned long shfl_xor(unsigned long v, int lane_mask, unsigned mask = kFullWarpMask) {
  return __shfl_xor_sync(mask, v, lane_mask);
}
// 16-bit floats travel as the low half of a 32-bit shuffle.  Moving the raw
// bits avoids depending on the half/bf16 shuffle overloads, which some
// toolkit configurations hide.
TL_DEVICE half shfl_xor(half v, int lane_mask, unsigned mask = kFullWarpMask) {
  const int bits = __shfl_xor_sync(mask, static_cast<int>(__half_as_ushort(v)), lane_mask);
  return __ushort_as_half(static_cast<unsigned short>(bits));
}
TL_DEVICE __nv_bfloat16 shfl_xor(__nv_bfloat16 v, int lane_mask, unsigned mask = kFullWarpMask) {
  const int bits =
      __shfl_xor_sync(mask, static_cast<int>(__bfloat16_as_ushort(v)), lane_mask);
  return __ushort_as_bfloat16(static_cast<unsigned short>(bits));
}

// 8- and 16-bit integers travel widened to int (T.comm_reducer over int8/int16 values).
TL_DEVICE signed char shfl_xor(signed char v, int lane_mask, unsigned mask = kFullWarpMask) {
  return static_cast<signed char>(__shfl_xor_sync(mask, static_cast<int>(v), lane_mask));
}
TL_DEVICE unsigned char shfl_xor(unsigned char v, int lane_mask, unsigned mask = kFullWarpMask) {
  return static_cast<unsigned char>(__shfl_xor_sync(mask, static_cast<int>(v), lane_mask));
}
TL_DEVICE short shfl_xor(short v, int lane_mask, unsigned mask = kFullWarpMask) {
  return static_cast<short>(__shfl_xor_sync(mask, static_cast<int>(v), lane_mask));
}
TL_DEVICE unsigned short shfl_xor(unsigned short v, int lane_mask, unsigned mask = kFullWarpMask) {
  return static_cast<unsigned short>(__shfl_xor_sync(mask, static_cast<int>(v), lane_mask));
}

// 8-bit floats (T.reduce_max / reduce_min of an fp8 fragment) travel as their
// raw byte; max / min are fp8.h's (the exactly widened values compared).
#define TL_FP8_REDUCE(F8)                                                                  \
  TL_DEVICE F8 shfl_xor(F8 v, int lane_mask, unsigned mask = kFullWarpMask) {              \
    F8 out;                                                                               \
    out.__x = static_cast<__nv_fp8_storage_t>(__shfl_xor_sync(mask, static_cast<int>(v.__x), lane_mask)); \
    return out;                                                                           \
  }                                                                                       \
  TL_DEVICE F8 max(F8 a, F8 b) { return ::max(a, b); }                                   \
  TL_DEVICE F8 min(F8 a, F8 b) { return ::min(a, b); }
TL_FP8_REDUCE(__nv_fp8_e4m3)
TL_FP8_REDUCE(__nv_fp8_e5m2)
#undef TL_FP8_REDUCE

// Reduction operators.  Each has `combine`, the associative and commutative
// binary operation, and `init<T>()`, its identity element, which is what an
// accumulator must start from.  The operators are plain structs with
// templated members so that one name serves every element type.

struct SumOp {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return tl::add(a, b); }
  template <class T>
  static TL_DEVICE T init() { return cvt<T>(0); }
};

struct MaxOp {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return tl::max(a, b); }
  template <class T>
  static TL_DEVICE T init() { return neg_infinity<T>(); }
};

struct MinOp {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return tl::min(a, b); }
  template <class T>
  static TL_DEVICE T init() { return infinity<T>(); }
};

// NaN-propagating max/min of 16-bit floats (T.reduce_max(..., nan_propagate=True)):
// a NaN operand makes the result NaN, where MaxOp/MinOp return the other one.
struct MaxOpNan {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return __hmax_nan(a, b); }
  template <class T>
  static TL_DEVICE T init() { return neg_infinity<T>(); }
};

struct MinOpNan {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return __hmin_nan(a, b); }
  template <class T>
  static TL_DEVICE T init() { return infinity<T>(); }
};

// Sum of absolute values.  combine takes |a| + |b| so that the same
// operation is right both when folding a raw (possibly negative) element
// into an accumulator and when combining two partial results: partial
// results are never negative, so taking their absolute value changes
// nothing.
struct AbsSumOp {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return tl::add(tl::abs(a), tl::abs(b)); }
  template <class T>
  static TL_DEVICE T init() { return cvt<T>(0); }
};

// Maximum of absolute values, with the same raw/partial symmetry as
// AbsSumOp.  Its identity is 0 because no absolute value is smaller.
struct AbsMaxOp {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return tl::max(tl::abs(a), tl::abs(b)); }
  template <class T>
  static TL_DEVICE T init() { return cvt<T>(0); }
};

// Bitwise reductions of integers (T.reduce_bitand / bitor / bitxor).
struct BitAndOp {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return a & b; }
  template <class T>
  static TL_DEVICE T init() { return static_cast<T>(~T(0)); }
};

struct BitOrOp {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return a | b; }
  template <class T>
  static TL_DEVICE T init() { return T(0); }
};

struct BitXorOp {
  template <class T>
  static TL_DEVICE T combine(T a, T b) { return a ^ b; }
  template <class T>
  static TL_DEVICE T init() { return T(0); }
};

// Butterfly all-reduce among lanes whose indices differ only in the bits
// from LO up to (but excluding) HI: the value is combined with the lanes at
// xor-distance LO, 2*LO, ..., HI/2.  With LO = 1 and HI = 32 every lane of
// the warp ends up with the reduction of all 32 values; with LO = 4, HI = 32
// lanes that agree in their low two bits are reduced together (the layout
// of an mma accumulator row, for example).  Every lane receives the result.
template <class Op, int LO, int HI, unsigned Mask = kFullWarpMask, class T>
TL_DEVICE T warp_allreduce(T v) {
  static_assert(LO > 0 && (LO & (LO - 1)) == 0, "LO must be a power of two");
  static_assert(HI > 0 && (HI & (HI - 1)) == 0 && HI <= 32, "HI must be a power of two <= 32");
#pragma unroll
  for (int offset = LO; offset < HI; offset *= 2) {
    v = Op::combine(v, shfl_xor(v, offset, Mask));
  }
  return v;
}

// warp_allreduce of R values at once (R a power of two): v[0..R) hold one partial result of R
// different rows, and each row is all-reduced over the same lanes as warp_allreduce<Op, LO, HI>.
// Instead of R butterflies (R * log2(HI / LO) shuffles) the rows are halved at each of the first
// steps: the lane whose offset bit is clear keeps the lower half of its rows and sends the upper
// half to its partner, which does the opposite (a reduce-scatter), so after k steps a lane holds
// R >> k rows; the steps left reduce those whole; the same steps backwards gather every row into
// every lane again.  R = 16 over 32 lanes: 31 shuffles instead of 80 (shuffles issue at a quarter
// of the rate of the selects this adds).  Every lane ends with the same values as warp_allreduce
// gives (a sum in another association).
namespace detail {
// log2 of a power of two, at compile time (no compiler builtin: NVRTC too).
__host__ __device__ constexpr int log2_exact(int n) { return n <= 1 ? 0 : 1 + log2_exact(n / 2); }
// (a, b) swapped where `swap` is all ones, kept where it is zero: bit operations, which the
// compiler keeps as such (a `? :` on the lane's bit may become a branch around the shuffles).
template <class Bits, class T>
TL_DEVICE void swap_bits_if(T& a, T& b, Bits swap) {
  Bits x = 0, y = 0;
  memcpy(&x, &a, sizeof(T));
  memcpy(&y, &b, sizeof(T));
  const Bits d = (x ^ y) & swap;
  x ^= d;
  y ^= d;
  memcpy(&a, &x, sizeof(T));
  memcpy(&b, &y, sizeof(T));
}
template <class T>
TL_DEVICE void swap_if(T& a, T& b, unsigned swap) {
  static_assert(sizeof(T) <= 8, "swap_if: values of at most 8 bytes");
  if constexpr (sizeof(T) > 4) {
    // 0 or all ones, widened by sign extension
    swap_bits_if<unsigned long long>(a, b, static_cast<unsigned long long>(static_cast<long long>(static_cast<int>(swap))));
  } else {
    swap_bits_if<unsigned>(a, b, swap);
  }
}
// One reduce-scatter step of warp_allreduce_rows: 2 * Half rows in, Half out.
template <class Op, int Offset, int Half, unsigned Mask, class T>
TL_DEVICE void rows_scatter_step(T* v, unsigned upper) {
#pragma unroll
  for (int i = 0; i < Half; ++i) {
    T keep = v[i], send = v[i + Half];  // the lower lane keeps row i, sends row i + Half
    swap_if(keep, send, upper);
    v[i] = Op::combine(keep, shfl_xor(send, Offset, Mask));
  }
}
// One all-gather step: Held rows in, 2 * Held out.
template <int Offset, int Held, unsigned Mask, class T>
TL_DEVICE void rows_gather_step(T* v, unsigned upper) {
#pragma unroll
  for (int i = 0; i < Held; ++i) {
    T lo = v[i];
    T hi = shfl_xor(lo, Offset, Mask);  // the lower lane's rows first
    swap_if(lo, hi, upper);
    v[i] = lo;
    v[i + Held] = hi;
  }
}
// Steps S.. of warp_allreduce_rows (offset (HI / 2) >> S): scatter while S < Split, whole rows
// until the lanes run out, then gather on the way back (every trip count a constant).
template <class Op, int LO, int HI, int R, unsigned Mask, int Split, int S, class T>
TL_DEVICE void rows_steps(T* v, unsigned lane) {
  constexpr int kOffset = (HI / 2) >> S;
  if constexpr (kOffset >= LO) {
    if constexpr (S < Split) {
      const unsigned upper = 0u - ((lane / kOffset) & 1u);  // all ones in the upper lane
      rows_scatter_step<Op, kOffset, (R >> (S + 1)), Mask>(v, upper);
      rows_steps<Op, LO, HI, R, Mask, Split, S + 1>(v, lane);
      rows_gather_step<kOffset, (R >> (S + 1)), Mask>(v, upper);
    } else {
#pragma unroll
      for (int i = 0; i < (R >> Split); ++i) v[i] = Op::combine(v[i], shfl_xor(v[i], kOffset, Mask));
      rows_steps<Op, LO, HI, R, Mask, Split, S + 1>(v, lane);
    }
  }
}
}  // namespace detail

template <class Op, int LO, int HI, int R, unsigned Mask = kFullWarpMask, class T>
TL_DEVICE void warp_allreduce_rows(T* v) {
  static_assert(LO > 0 && (LO & (LO - 1)) == 0, "LO must be a power of two");
  static_assert(HI > LO && (HI & (HI - 1)) == 0 && HI <= 32, "HI must be a power of two <= 32");
  static_assert(R > 0 && (R & (R - 1)) == 0, "R must be a power of two");
  constexpr int kLaneSteps = detail::log2_exact(HI) - detail::log2_exact(LO);
  constexpr int kRowSteps = detail::log2_exact(R);
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  detail::rows_steps<Op, LO, HI, R, Mask, (kLaneSteps < kRowSteps ? kLaneSteps : kRowSteps), 0>(v, lane);
}

// Inclusive scan across the 32 lanes of a warp: lane i receives the combination of the values of
// lanes 0..i (Hillis-Steele steps of __shfl_up_sync).  Every lane of the warp must call it.  The
// generated code scans a row of a tile 32 elements at a time with it (T.cumsum / T.cummax of few
// rows: lower_reduce._warp_scan), carrying each chunk's total from lane 31 (warp_lane_value).
template <class Op, class T>
TL_DEVICE T warp_inclusive_scan(T v) {
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const T other = __shfl_up_sync(kFullWarpMask, v, offset);
    if (lane >= static_cast<unsigned>(offset)) v = Op::combine(v, other);
  }
  return v;
}

// The value `v` of lane `src` of the warp, in every lane.
template <class T>
TL_DEVICE T warp_lane_value(T v, int src) {
  return __shfl_sync(kFullWarpMask, v, src);
}

// All-reduce over groups of Threads threads that are Stride apart in the block's linear thread
// order (Threads and Stride powers of two; Threads = blockDim and Stride = 1: the whole block).
// Lanes of one warp combine by xor shuffles; the rest through `ws`, a shared workspace of one
// element per thread of the block.  Every thread of the block must call it (it synchronizes the
// block when a group spans warps); every member of a group receives the group's result.  `tid`,
// where given, is the caller's linear thread index in the block (the generated code passes
// threadIdx.x for a one-dimensional block: no index arithmetic over threadIdx.y / .z).
template <class Op, int Threads, int Stride = 1, unsigned Mask = kFullWarpMask>
struct AllReduce {
  static_assert(Threads > 0 && (Threads & (Threads - 1)) == 0, "Threads must be a power of two");
  static_assert(Stride > 0 && (Stride & (Stride - 1)) == 0, "Stride must be a power of two");
  static constexpr int kInWarp = Stride >= 32 ? 1 : (Threads * Stride <= 32 ? Threads : 32 / Stride);
  static constexpr int kWarps = Threads / kInWarp;

  // Groups inside one warp (Threads * Stride <= 32) need no workspace.
  template <class T>
  static TL_DEVICE T run(T v) {
    static_assert(kWarps == 1, "a group spanning warps needs the shared workspace: run(v, ws)");
#pragma unroll
    for (int offset = kInWarp / 2; offset > 0; offset /= 2) {
      v = Op::combine(v, shfl_xor(v, offset * Stride, Mask));
    }
    return v;
  }

  template <class T>
  static TL_DEVICE T run(T v, T* ws) {
    return run(v, ws, threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  }

  template <class T>
  static TL_DEVICE T run(T v, T* ws, unsigned tid) {
#pragma unroll
    for (int offset = kInWarp / 2; offset > 0; offset /= 2) {
      v = Op::combine(v, shfl_xor(v, offset * Stride, Mask));
    }
    if constexpr (kWarps > 1) {
      constexpr unsigned kStep = Stride * kInWarp;
      __syncthreads();  // the previous user of `ws` is done with it
      ws[tid] = v;
      __syncthreads();
      // the group's first member: the bits that number the group's warps cleared (powers of two)
      const unsigned base = tid & ~((kWarps - 1) * kStep);
      T acc = ws[base];
#pragma unroll
      for (int i = 1; i < kWarps; ++i) {
        acc = Op::combine(acc, ws[base + i * kStep]);
      }
      v = acc;
    }
    return v;
  }
};

// AllReduce of Batch consecutive values x[0..Batch) at once: the in-warp shuffles of each, then
// (groups spanning warps) one pair of block barriers for the whole batch instead of one per
// value.  `ws` holds Batch * WsStride elements (WsStride >= the block's thread count).
template <class Op, int Threads, int Stride, int Batch, int WsStride, unsigned Mask = kFullWarpMask>
struct AllReduceBatch {
  static_assert(Batch > 0, "Batch must be positive");
  using One = AllReduce<Op, Threads, Stride, Mask>;

  template <class T>
  static TL_DEVICE void run_batch(T* x, T* ws) {
    run_batch(x, ws, threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  }

  template <class T>
  static TL_DEVICE void run_batch(T* x, T* ws, unsigned tid) {
#pragma unroll
    for (int b = 0; b < Batch; ++b) {
#pragma unroll
      for (int offset = One::kInWarp / 2; offset > 0; offset /= 2) {
        x[b] = Op::combine(x[b], shfl_xor(x[b], offset * Stride, Mask));
      }
    }
    if constexpr (One::kWarps > 1) {
      constexpr unsigned kStep = Stride * One::kInWarp;
      __syncthreads();  // the previous user of `ws` is done with it
#pragma unroll
      for (int b = 0; b < Batch; ++b) {
        ws[b * WsStride + tid] = x[b];
      }
      __syncthreads();
      const unsigned base = tid & ~((One::kWarps - 1) * kStep);
#pragma unroll
      for (int b = 0; b < Batch; ++b) {
        T acc = ws[b * WsStride + base];
#pragma unroll
        for (int i = 1; i < One::kWarps; ++i) {
          acc = Op::combine(acc, ws[b * WsStride + base + i * kStep]);
        }
        x[b] = acc;
      }
    }
  }
};

}  // namespace tl
