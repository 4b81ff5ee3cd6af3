// Copyright the TileLang compiler authors.
//
// Packed two-lane arithmetic (T.add2, T.sub2, T.mul2, T.fma2, T.max2, T.min2, T.abs2) on
// float32x2, float16x2 and bfloat16x2 values.  The compiler passes each vector as an integer of
// the same width (uint64 for float32x2, uint32 for the 16-bit pairs) and names the native pair
// type as the template argument: tl::add2<__nv_bfloat162>(a, b).  The result comes back in the
// same integer.  The 16-bit forms are the native half2 / bfloat162 instructions.
#pragma once

#include "common.h"

namespace tl {

namespace detail {

template <class To, class From>
TL_DEVICE To bit_cast_packed(From x) {
  static_assert(sizeof(To) == sizeof(From), "packed operands keep their width");
  To y;
  memcpy(&y, &x, sizeof(To));
  return y;
}

template <class V> struct packed_carrier;
template <> struct packed_carrier<float2> { using type = uint64_t; };
template <> struct packed_carrier<__half2> { using type = uint32_t; };
template <> struct packed_carrier<__nv_bfloat162> { using type = uint32_t; };

// lane-wise operations on the native pair types (float2: the sm_100 .f32x2 instructions where
// the target has them)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
TL_DEVICE float2 packed_add(float2 a, float2 b) { return __fadd2_rn(a, b); }
TL_DEVICE float2 packed_sub(float2 a, float2 b) { return __fadd2_rn(a, make_float2(-b.x, -b.y)); }
TL_DEVICE float2 packed_mul(float2 a, float2 b) { return __fmul2_rn(a, b); }
TL_DEVICE float2 packed_fma(float2 a, float2 b, float2 c) { return __ffma2_rn(a, b, c); }
#else
TL_DEVICE float2 packed_add(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
TL_DEVICE float2 packed_sub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
TL_DEVICE float2 packed_mul(float2 a, float2 b) { return make_float2(a.x * b.x, a.y * b.y); }
TL_DEVICE float2 packed_fma(float2 a, float2 b, float2 c) {
  return make_float2(fmaf(a.x, b.x, c.x), fmaf(a.y, b.y, c.y));
}
#endif
TL_DEVICE float2 packed_max(float2 a, float2 b) { return make_float2(fmaxf(a.x, b.x), fmaxf(a.y, b.y)); }
TL_DEVICE float2 packed_min(float2 a, float2 b) { return make_float2(fminf(a.x, b.x), fminf(a.y, b.y)); }
TL_DEVICE float2 packed_abs(float2 a) { return make_float2(fabsf(a.x), fabsf(a.y)); }

#define TL_PACKED_HALF_OPS(V)                                                   \
  TL_DEVICE V packed_add(V a, V b) { return __hadd2(a, b); }                    \
  TL_DEVICE V packed_sub(V a, V b) { return __hsub2(a, b); }                    \
  TL_DEVICE V packed_mul(V a, V b) { return __hmul2(a, b); }                    \
  TL_DEVICE V packed_max(V a, V b) { return __hmax2(a, b); }                    \
  TL_DEVICE V packed_min(V a, V b) { return __hmin2(a, b); }                    \
  TL_DEVICE V packed_fma(V a, V b, V c) { return __hfma2(a, b, c); }            \
  TL_DEVICE V packed_abs(V a) { return __habs2(a); }
TL_PACKED_HALF_OPS(__half2)
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800  // bf16x2 arithmetic is sm_80+
TL_PACKED_HALF_OPS(__nv_bfloat162)
#endif
#undef TL_PACKED_HALF_OPS

}  // namespace detail

template <class V>
using packed_t = typename detail::packed_carrier<V>::type;

#define TL_PACKED_BINARY(NAME, OP)                                                         \
  template <class V>                                                                       \
  TL_DEVICE packed_t<V> NAME(packed_t<V> a, packed_t<V> b) {                               \
    using detail::bit_cast_packed;                                                         \
    return bit_cast_packed<packed_t<V>>(detail::OP(bit_cast_packed<V>(a), bit_cast_packed<V>(b))); \
  }
TL_PACKED_BINARY(add2, packed_add)
TL_PACKED_BINARY(sub2, packed_sub)
TL_PACKED_BINARY(mul2, packed_mul)
TL_PACKED_BINARY(max2, packed_max)
TL_PACKED_BINARY(min2, packed_min)
#undef TL_PACKED_BINARY

template <class V>
TL_DEVICE packed_t<V> fma2(packed_t<V> a, packed_t<V> b, packed_t<V> c) {
  using detail::bit_cast_packed;
  return bit_cast_packed<packed_t<V>>(
      detail::packed_fma(bit_cast_packed<V>(a), bit_cast_packed<V>(b), bit_cast_packed<V>(c)));
}

template <class V>
TL_DEVICE packed_t<V> abs2(packed_t<V> a) {
  using detail::bit_cast_packed;
  return bit_cast_packed<packed_t<V>>(detail::packed_abs(bit_cast_packed<V>(a)));
}

// The same operations on the native pair types themselves: tilelang.codegen.cuda rewrites TVM's
// lane-by-lane vector arithmetic (a vectorized T.Parallel) into one call per pair of lanes,
// tl::add2(*(float2*)(&(a.x)), *(float2*)(&(b.x))); float2 only for sm_100 targets, where it is
// one .f32x2 instruction.
#define TL_PACKED_NATIVE(V)                                                                   \
  TL_DEVICE V add2(V a, V b) { return detail::packed_add(a, b); }                             \
  TL_DEVICE V sub2(V a, V b) { return detail::packed_sub(a, b); }                             \
  TL_DEVICE V mul2(V a, V b) { return detail::packed_mul(a, b); }                             \
  TL_DEVICE V fma2(V a, V b, V c) { return detail::packed_fma(a, b, c); }
TL_PACKED_NATIVE(float2)
TL_PACKED_NATIVE(__half2)
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
TL_PACKED_NATIVE(__nv_bfloat162)
#endif
#undef TL_PACKED_NATIVE

// The NaN-propagating max / min of two 16-bit pairs (a T.reduce_max / min / absmax with
// nan_propagate=True folding two registers at a time, tilelang.transform.lower_reduce), in the
// integer-carrier form above: tl::max2_nan<__half2>(a, b).
template <class V>
TL_DEVICE packed_t<V> max2_nan(packed_t<V> a, packed_t<V> b) {
  using detail::bit_cast_packed;
  return bit_cast_packed<packed_t<V>>(__hmax2_nan(bit_cast_packed<V>(a), bit_cast_packed<V>(b)));
}
template <class V>
TL_DEVICE packed_t<V> min2_nan(packed_t<V> a, packed_t<V> b) {
  using detail::bit_cast_packed;
  return bit_cast_packed<packed_t<V>>(__hmin2_nan(bit_cast_packed<V>(a), bit_cast_packed<V>(b)));
}

// Paired vector casts (tilelang.codegen.cuda rewrites TVM's lane-by-lane vector casts into one
// conversion intrinsic per pair of lanes): tl::vpart<P, I>(v) is pair I of the vector v read as
// the pair type P; tl::vjoin<V>(a, b) puts two converted pairs side by side as the vector type V;
// tl::vbits<V>(x) reinterprets x (same width) as V.  All three are register moves only.
template <class V, class X>
TL_DEVICE V vbits(const X &x) {
  static_assert(sizeof(V) == sizeof(X), "a reinterpreted vector keeps its width");
  V y;
  memcpy(&y, &x, sizeof(V));
  return y;
}

template <class P, int I, class V>
TL_DEVICE P vpart(const V &v) {
  static_assert(sizeof(V) >= (I + 1) * sizeof(P), "pair inside the vector");
  P y;
  memcpy(&y, reinterpret_cast<const char *>(&v) + I * sizeof(P), sizeof(P));
  return y;
}

template <class V, class P>
TL_DEVICE V vjoin(const P &lo, const P &hi) {
  static_assert(sizeof(V) == 2 * sizeof(P), "two pairs make the vector");
  V y;
  memcpy(reinterpret_cast<char *>(&y), &lo, sizeof(P));
  memcpy(reinterpret_cast<char *>(&y) + sizeof(P), &hi, sizeof(P));
  return y;
}

}  // namespace tl

// TVM's CUDA codegen prints a four-lane 8-bit ramp (int8x4 / uint8x4, stored as one 32-bit
// integer) as make_int(a, b, c, d) / make_uint(a, b, c, d): lane i is the low byte of argument i.
TL_DEVICE int make_int(int a, int b, int c, int d) {
  return (int)((unsigned)(a & 0xff) | ((unsigned)(b & 0xff) << 8) | ((unsigned)(c & 0xff) << 16) |
               ((unsigned)(d & 0xff) << 24));
}
TL_DEVICE unsigned make_uint(int a, int b, int c, int d) {
  return (unsigned)make_int(a, b, c, d);
}
// ... and an 8- / 16-lane one (int8x8 / int8x16, stored as int2 / int4) as make_int2 / make_int4
// of 8 / 16 arguments.
TL_DEVICE int2 make_int2(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7) {
  return make_int2(make_int(a0, a1, a2, a3), make_int(a4, a5, a6, a7));
}
TL_DEVICE int4 make_int4(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, int a9,
                         int a10, int a11, int a12, int a13, int a14, int a15) {
  return make_int4(make_int(a0, a1, a2, a3), make_int(a4, a5, a6, a7), make_int(a8, a9, a10, a11),
                   make_int(a12, a13, a14, a15));
}
TL_DEVICE uint2 make_uint2(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7) {
  return make_uint2(make_uint(a0, a1, a2, a3), make_uint(a4, a5, a6, a7));
}
TL_DEVICE uint4 make_uint4(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, int a9,
                           int a10, int a11, int a12, int a13, int a14, int a15) {
  return make_uint4(make_uint(a0, a1, a2, a3), make_uint(a4, a5, a6, a7), make_uint(a8, a9, a10, a11),
                    make_uint(a12, a13, a14, a15));
}
