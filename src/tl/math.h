// Copyright the TileLang compiler authors.
//
// Fast math helpers with overloads for float, half and bf16.  The 16-bit
// overloads compute in float and round once at the end: on sm_80+ the
// conversions are single instructions, and float intermediates keep these
// functions accurate to the 16-bit result precision.
#pragma once

#include "common.h"

namespace tl {

// 2^x using the hardware approximation (ex2.approx, about 2 ulp, with
// denormal results flushed to zero).  It is exact for integral x in the
// normal range and returns +inf / 0 for large positive / negative x, which is
// what the online-softmax code that uses it needs.
TL_DEVICE float exp2f_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
TL_DEVICE half exp2f_fast(half x) { return __float2half_rn(exp2f_fast(__half2float(x))); }
TL_DEVICE __nv_bfloat16 exp2f_fast(__nv_bfloat16 x) {
  return __float2bfloat16_rn(exp2f_fast(__bfloat162float(x)));
}

// 1 / sqrt(x) with the hardware approximation (rsqrt.approx, about 2 ulp).
TL_DEVICE float rsqrt(float x) { return rsqrtf(x); }
TL_DEVICE double rsqrt(double x) { return ::rsqrt(x); }
TL_DEVICE half rsqrt(half x) { return __float2half_rn(rsqrtf(__half2float(x))); }
TL_DEVICE __nv_bfloat16 rsqrt(__nv_bfloat16 x) {
  return __float2bfloat16_rn(rsqrtf(__bfloat162float(x)));
}

// The logistic function 1 / (1 + e^-x).  For very negative x, e^-x
// overflows to +inf and the quotient correctly becomes 0; for very positive
// x it becomes exactly 1.  An IEEE division is used because the fast
// division intrinsic returns 0 only for a finite huge divisor and is
// undefined for an infinite one.
TL_DEVICE float sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }
TL_DEVICE half sigmoid(half x) { return __float2half_rn(sigmoid(__half2float(x))); }
TL_DEVICE __nv_bfloat16 sigmoid(__nv_bfloat16 x) {
  return __float2bfloat16_rn(sigmoid(__bfloat162float(x)));
}

// T.any_of / T.all_of: whether any / every one of n consecutive elements is non-zero, as this
// thread sees them (the caller passes a range every thread can read: global, shared or local).
template <typename T> TL_DEVICE bool any_of(const T* p, int n) {
  for (int i = 0; i < n; ++i) {
    if (static_cast<bool>(p[i])) return true;
  }
  return false;
}
template <typename T> TL_DEVICE bool all_of(const T* p, int n) {
  for (int i = 0; i < n; ++i) {
    if (!static_cast<bool>(p[i])) return false;
  }
  return true;
}

// T.dp4a: c += the dot product of four signed bytes of a and of b (the 4 bytes at a and b must be
// 4-byte aligned).
TL_DEVICE int dp4a(const void* a, const void* b, int* c) {
  *c = __dp4a(*static_cast<const int*>(a), *static_cast<const int*>(b), *c);
  return 0;
}

// T.__exp & co. on 16-bit inputs: the float hardware approximation (__expf...) of the widened
// value, rounded once to the input's type.
#define TL_FAST_16(name, f32)                                                          \
  TL_DEVICE half name(half x) { return __float2half_rn(f32(__half2float(x))); }        \
  TL_DEVICE __nv_bfloat16 name(__nv_bfloat16 x) {                                      \
    return __float2bfloat16_rn(f32(__bfloat162float(x)));                              \
  }
TL_FAST_16(fast_exp, __expf)
TL_FAST_16(fast_exp10, __exp10f)
TL_FAST_16(fast_log, __logf)
TL_FAST_16(fast_log2, __log2f)
TL_FAST_16(fast_log10, __log10f)
TL_FAST_16(fast_sin, __sinf)
TL_FAST_16(fast_cos, __cosf)
TL_FAST_16(fast_tan, __tanf)
#undef TL_FAST_16

}  // namespace tl
