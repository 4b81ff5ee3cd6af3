// Copyright the TileLang compiler authors.
//
// Packed two-lane arithmetic (T.add2, T.sub2, T.mul2, T.fma2, T.max2, T.min2, T.abs2) on
// float32x2, float16x2 and bfloat16x2 values.  The compiler passes each vector as an integer of
// the same width (uint64 for float32x2, uint32 for the 16-bit pairs) and reads the result back
// the same way; the 16-bit forms are the native half2 / bfloat162 instructions.
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

}  // namespace detail

#define TL_PACKED_BINARY(NAME, SUFFIX, CARRIER, VEC, EXPR)                      \
  TL_DEVICE CARRIER NAME##_##SUFFIX(CARRIER pa, CARRIER pb) {                    \
    VEC a = detail::bit_cast_packed<VEC>(pa), b = detail::bit_cast_packed<VEC>(pb); \
    return detail::bit_cast_packed<CARRIER>(EXPR);                               \
  }

TL_PACKED_BINARY(add2, f32x2, uint64_t, float2, make_float2(a.x + b.x, a.y + b.y))
TL_PACKED_BINARY(sub2, f32x2, uint64_t, float2, make_float2(a.x - b.x, a.y - b.y))
TL_PACKED_BINARY(mul2, f32x2, uint64_t, float2, make_float2(a.x * b.x, a.y * b.y))
TL_PACKED_BINARY(max2, f32x2, uint64_t, float2, make_float2(fmaxf(a.x, b.x), fmaxf(a.y, b.y)))
TL_PACKED_BINARY(min2, f32x2, uint64_t, float2, make_float2(fminf(a.x, b.x), fminf(a.y, b.y)))
TL_PACKED_BINARY(add2, f16x2, uint32_t, half2, __hadd2(a, b))
TL_PACKED_BINARY(sub2, f16x2, uint32_t, half2, __hsub2(a, b))
TL_PACKED_BINARY(mul2, f16x2, uint32_t, half2, __hmul2(a, b))
TL_PACKED_BINARY(max2, f16x2, uint32_t, half2, __hmax2(a, b))
TL_PACKED_BINARY(min2, f16x2, uint32_t, half2, __hmin2(a, b))
TL_PACKED_BINARY(add2, bf16x2, uint32_t, __nv_bfloat162, __hadd2(a, b))
TL_PACKED_BINARY(sub2, bf16x2, uint32_t, __nv_bfloat162, __hsub2(a, b))
TL_PACKED_BINARY(mul2, bf16x2, uint32_t, __nv_bfloat162, __hmul2(a, b))
TL_PACKED_BINARY(max2, bf16x2, uint32_t, __nv_bfloat162, __hmax2(a, b))
TL_PACKED_BINARY(min2, bf16x2, uint32_t, __nv_bfloat162, __hmin2(a, b))
#undef TL_PACKED_BINARY

TL_DEVICE uint64_t fma2_f32x2(uint64_t pa, uint64_t pb, uint64_t pc) {
  float2 a = detail::bit_cast_packed<float2>(pa), b = detail::bit_cast_packed<float2>(pb);
  float2 c = detail::bit_cast_packed<float2>(pc);
  return detail::bit_cast_packed<uint64_t>(make_float2(fmaf(a.x, b.x, c.x), fmaf(a.y, b.y, c.y)));
}
TL_DEVICE uint32_t fma2_f16x2(uint32_t pa, uint32_t pb, uint32_t pc) {
  return detail::bit_cast_packed<uint32_t>(__hfma2(detail::bit_cast_packed<half2>(pa), detail::bit_cast_packed<half2>(pb),
                                                   detail::bit_cast_packed<half2>(pc)));
}
TL_DEVICE uint32_t fma2_bf16x2(uint32_t pa, uint32_t pb, uint32_t pc) {
  using V = __nv_bfloat162;
  return detail::bit_cast_packed<uint32_t>(
      __hfma2(detail::bit_cast_packed<V>(pa), detail::bit_cast_packed<V>(pb), detail::bit_cast_packed<V>(pc)));
}

TL_DEVICE uint64_t abs2_f32x2(uint64_t pa) {
  float2 a = detail::bit_cast_packed<float2>(pa);
  return detail::bit_cast_packed<uint64_t>(make_float2(fabsf(a.x), fabsf(a.y)));
}
TL_DEVICE uint32_t abs2_f16x2(uint32_t pa) {
  return detail::bit_cast_packed<uint32_t>(__habs2(detail::bit_cast_packed<half2>(pa)));
}
TL_DEVICE uint32_t abs2_bf16x2(uint32_t pa) {
  return detail::bit_cast_packed<uint32_t>(__habs2(detail::bit_cast_packed<__nv_bfloat162>(pa)));
}

}  // namespace tl
