// Copyright the TileLang compiler authors.
//
// Common helpers for the TileLang CUDA device library: type aliases,
// conversions, numeric limits and small arithmetic helpers that the other
// headers of this library build on.
//
// Every entity lives in namespace tl and every function is
// `__device__ __forceinline__`, because generated kernels call these helpers
// in their innermost loops and a real call would cost registers and time.
#pragma once

// TVM's CUDA prelude defines `uint`, `uchar`, `ushort`, `int64_t` and
// `uint64_t` as object-like macros.  Those macros break system headers that
// are parsed for the first time after them (for example `typedef long int
// int64_t;` turns into `typedef long int long long;`), so the macros are
// parked while the system headers are read and restored afterwards.  The
// library itself never uses an identifier that any of these macros could
// rewrite into something different in meaning.
#if !defined(__CUDACC_RTC__)
#include "macros_park.h"
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>
#include "macros_restore.h"
#else
// NVRTC knows neither push_macro nor a C++ standard library.  Its CUDA
// headers are not affected by the macros, and the fixed-width integer types
// the library uses are declared here (NVRTC targets are LP64 or LLP64, where
// these are the right widths).  Redeclaring an identical typedef is legal,
// so this coexists with code that declares them too; the 64-bit ones are
// skipped when TVM's macros already stand in for them.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
#ifndef int64_t
typedef long long int64_t;
#endif
#ifndef uint64_t
typedef unsigned long long uint64_t;
#endif
#endif

#ifndef TL_DEVICE
#define TL_DEVICE __device__ __forceinline__
#endif

namespace tl {

// The compiler spells its element types with these names; they are plain
// aliases so that values flow freely between TVM-generated code (which uses
// `half` and `__nv_bfloat16`) and this library.
using half_t = half;
using bfloat16_t = __nv_bfloat16;

namespace detail {

// Minimal type traits.  The library defines its own instead of using
// <type_traits> so that it also compiles under NVRTC, which ships no C++
// standard library.
template <class A, class B>
constexpr bool is_same_v = false;
template <class A>
constexpr bool is_same_v<A, A> = true;

template <class T>
constexpr bool is_integral_v =
    is_same_v<T, bool> || is_same_v<T, char> || is_same_v<T, signed char> ||
    is_same_v<T, unsigned char> || is_same_v<T, short> ||
    is_same_v<T, unsigned short> || is_same_v<T, int> || is_same_v<T, unsigned> ||
    is_same_v<T, long> || is_same_v<T, unsigned long> || is_same_v<T, long long> ||
    is_same_v<T, unsigned long long>;

template <class T>
constexpr bool is_signed_integral_v =
    is_integral_v<T> && (static_cast<T>(-1) < static_cast<T>(0));

// Whether T is one of the two 16-bit floating point types.  They need
// explicit intrinsics for arithmetic and conversion because kernels may be
// compiled with __CUDA_NO_HALF_OPERATORS__ and friends.
template <class T>
constexpr bool is_16bit_float_v = is_same_v<T, half> || is_same_v<T, __nv_bfloat16>;

// Widening a 16-bit float to float is exact, so every conversion out of a
// 16-bit float goes through float first.
TL_DEVICE float to_float(half x) { return __half2float(x); }
TL_DEVICE float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class To>
TL_DEVICE To from_float(float x) {
  if constexpr (detail::is_same_v<To, half>) {
    return __float2half_rn(x);
  } else if constexpr (detail::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return static_cast<To>(x);
  }
}

template <class To, class From>
struct Cvt {
  static TL_DEVICE To run(From x) {
    if constexpr (detail::is_same_v<To, From>) {
      return x;
    } else if constexpr (detail::is_16bit_float_v<From> &&
                         detail::is_16bit_float_v<To>) {
      // half <-> bf16: float holds either exactly, so there is one rounding.
      return from_float<To>(to_float(x));
    } else if constexpr (detail::is_16bit_float_v<From>) {
      // Integer targets truncate toward zero like a C cast does; the
      // round-to-zero intrinsics avoid a double rounding through float.
      if constexpr (detail::is_same_v<To, int> &&
                    detail::is_same_v<From, half>) {
        return __half2int_rz(x);
      } else if constexpr (detail::is_same_v<To, int>) {
        return __bfloat162int_rz(x);
      } else {
        return static_cast<To>(to_float(x));
      }
    } else if constexpr (detail::is_16bit_float_v<To>) {
      // int -> half/bf16 has a direct correctly rounded intrinsic; other
      // sources are rounded to float first, which is exact for float itself.
      if constexpr (detail::is_same_v<From, int> &&
                    detail::is_same_v<To, half>) {
        return __int2half_rn(x);
      } else if constexpr (detail::is_same_v<From, int>) {
        return __int2bfloat16_rn(x);
      } else if constexpr (detail::is_same_v<From, double> &&
                           detail::is_same_v<To, half>) {
        return __double2half(x);
      } else {
        return from_float<To>(static_cast<float>(x));
      }
    } else {
      return static_cast<To>(x);
    }
  }
};

// Integer limits.  std::numeric_limits cannot be called from device code
// without --expt-relaxed-constexpr, so they are computed here directly.
template <class T>
TL_DEVICE T int_max() {
  if constexpr (detail::is_signed_integral_v<T>) {
    return static_cast<T>((1ull << (8 * sizeof(T) - 1)) - 1);
  } else {
    return static_cast<T>(~0ull);
  }
}
template <class T>
TL_DEVICE T int_lowest() {
  if constexpr (detail::is_signed_integral_v<T>) {
    return static_cast<T>(-int_max<T>() - 1);
  } else {
    return static_cast<T>(0);
  }
}

}  // namespace detail

// Converts between float, double, half, bf16 and the integer types.
// Float-to-integer conversions truncate toward zero (C semantics) and
// conversions to floating point types round to nearest even.
template <class To, class From>
TL_DEVICE To cvt(From x) {
  return detail::Cvt<To, From>::run(x);
}

// A block-wide barrier.  It is a named function so that generated code does
// not depend on the spelling of the CUDA builtin.
TL_DEVICE void sync_threads() { __syncthreads(); }

// The number of blocks of a 1-D grid: a persistent kernel's stride over its
// output tiles (the launcher sizes that grid to the device's SM count).
TL_DEVICE int num_blocks() { return static_cast<int>(gridDim.x); }

// The value itself.  The generated code binds an integer that divides by a
// run-time value through it, so that TVM's simplifier keeps the binding
// instead of repeating the division at every use (tilelang/codegen/kept_binds.py).
template <class T>
TL_DEVICE T opaque(T v) {
  return v;
}

// Positive infinity of T.  Integer types have no infinity, so they get their
// largest value, which is the identity that max/min reductions need.
template <class T>
TL_DEVICE T infinity() {
  if constexpr (detail::is_same_v<T, float>) {
    return __int_as_float(0x7f800000);
  } else if constexpr (detail::is_same_v<T, double>) {
    return __longlong_as_double(0x7ff0000000000000LL);
  } else if constexpr (detail::is_same_v<T, half>) {
    return __ushort_as_half(static_cast<unsigned short>(0x7c00));
  } else if constexpr (detail::is_same_v<T, __nv_bfloat16>) {
    return __ushort_as_bfloat16(static_cast<unsigned short>(0x7f80));
  } else {
    static_assert(detail::is_integral_v<T>, "infinity<T>: unsupported type");
    return detail::int_max<T>();
  }
}

// Largest finite value of T.
template <class T>
TL_DEVICE T max_value() {
  if constexpr (detail::is_same_v<T, float>) {
    return __int_as_float(0x7f7fffff);
  } else if constexpr (detail::is_same_v<T, double>) {
    return __longlong_as_double(0x7fefffffffffffffLL);
  } else if constexpr (detail::is_same_v<T, half>) {
    return __ushort_as_half(static_cast<unsigned short>(0x7bff));
  } else if constexpr (detail::is_same_v<T, __nv_bfloat16>) {
    return __ushort_as_bfloat16(static_cast<unsigned short>(0x7f7f));
  } else {
    static_assert(detail::is_integral_v<T>, "max_value<T>: unsupported type");
    return detail::int_max<T>();
  }
}

// Most negative finite value of T (what std::numeric_limits calls lowest()),
// because that is what the compiler means by the minimum of a type: the
// identity of a max-reduction over finite data.
template <class T>
TL_DEVICE T min_value() {
  if constexpr (detail::is_same_v<T, float>) {
    return __int_as_float(static_cast<int>(0xff7fffffu));
  } else if constexpr (detail::is_same_v<T, double>) {
    return __longlong_as_double(static_cast<long long>(0xffefffffffffffffULL));
  } else if constexpr (detail::is_same_v<T, half>) {
    return __ushort_as_half(static_cast<unsigned short>(0xfbff));
  } else if constexpr (detail::is_same_v<T, __nv_bfloat16>) {
    return __ushort_as_bfloat16(static_cast<unsigned short>(0xff7f));
  } else {
    static_assert(detail::is_integral_v<T>, "min_value<T>: unsupported type");
    return detail::int_lowest<T>();
  }
}

// Negative infinity, the identity of a max-reduction.
template <class T>
TL_DEVICE T neg_infinity() {
  if constexpr (detail::is_integral_v<T>) {
    return detail::int_lowest<T>();
  } else if constexpr (detail::is_same_v<T, half>) {
    return __ushort_as_half(static_cast<unsigned short>(0xfc00));
  } else if constexpr (detail::is_same_v<T, __nv_bfloat16>) {
    return __ushort_as_bfloat16(static_cast<unsigned short>(0xff80));
  } else {
    return -infinity<T>();
  }
}

// Elementwise arithmetic that works for every element type.  The 16-bit
// overloads use intrinsics so that the library compiles even when the half
// and bf16 operators are disabled.  Callers inside this library always
// qualify these calls (tl::max), because TVM's prelude declares a global
// `max(half, half)` that argument-dependent lookup would otherwise pull in
// and make ambiguous.
template <class T>
TL_DEVICE T add(T a, T b) { return a + b; }
TL_DEVICE half add(half a, half b) { return __hadd(a, b); }
TL_DEVICE __nv_bfloat16 add(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }

template <class T>
TL_DEVICE T mul(T a, T b) { return a * b; }
TL_DEVICE half mul(half a, half b) { return __hmul(a, b); }
TL_DEVICE __nv_bfloat16 mul(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }

// The address of an element as a pointer to another element type (an element of a T.view of
// a shared buffer as another type, handed to a device function by address).
template <class T, class U>
TL_DEVICE T* ptr_as(U* p) { return reinterpret_cast<T*>(p); }

template <class T>
TL_DEVICE T max(T a, T b) { return a > b ? a : b; }
TL_DEVICE float max(float a, float b) { return fmaxf(a, b); }
TL_DEVICE double max(double a, double b) { return fmax(a, b); }
TL_DEVICE half max(half a, half b) { return __hmax(a, b); }
TL_DEVICE __nv_bfloat16 max(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmax(a, b); }

template <class T>
TL_DEVICE T min(T a, T b) { return a < b ? a : b; }
TL_DEVICE float min(float a, float b) { return fminf(a, b); }
TL_DEVICE double min(double a, double b) { return fmin(a, b); }
TL_DEVICE half min(half a, half b) { return __hmin(a, b); }
TL_DEVICE __nv_bfloat16 min(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmin(a, b); }

template <class T>
TL_DEVICE T abs(T a) { return a < T(0) ? -a : a; }
TL_DEVICE float abs(float a) { return fabsf(a); }
TL_DEVICE double abs(double a) { return fabs(a); }
TL_DEVICE half abs(half a) { return __habs(a); }
TL_DEVICE __nv_bfloat16 abs(__nv_bfloat16 a) { return __habs(a); }

// Converts a generic pointer into shared memory to the 32-bit shared-window
// address that PTX instructions such as ldmatrix and cp.async expect.
TL_DEVICE uint32_t smem_addr(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Integer division rounding up, for tile counts.
template <class T>
TL_DEVICE constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }

// 1 / x by the hardware approximation (rcp.approx.ftz: about 1 ulp, subnormals flushed) - T.fast_rcp.
TL_DEVICE float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Packed 4-bit elements (int4, uint4, float4_e2m1fn; tilelang/codegen/subbyte.py): element
// `idx` of the array at `base` is the low nibble of byte idx / 2 when idx is even, the high
// nibble when odd.  Loads read the byte; int4 sign-extends.
TL_DEVICE unsigned int nibble(const void *base, long long idx) {
  unsigned int byte = *(reinterpret_cast<const unsigned char *>(base) + (idx >> 1));
  return (byte >> ((idx & 1) * 4)) & 0xFu;
}
TL_DEVICE int int4_load(const void *base, long long idx) {
  return static_cast<int>(nibble(base, idx) << 28) >> 28;
}
TL_DEVICE unsigned int uint4_load(const void *base, long long idx) { return nibble(base, idx); }
// A store changes only the element's nibble.  In global and shared memory it is replaced by
// compare-and-swap on the aligned 32-bit word, so threads writing the other nibbles of that word
// at the same time keep theirs ...
TL_DEVICE void nibble_store(void *base, long long idx, unsigned int v) {
  uintptr_t byte = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(idx >> 1);
  unsigned int *word = reinterpret_cast<unsigned int *>(byte & ~static_cast<uintptr_t>(3));
  unsigned int shift = static_cast<unsigned int>((byte & 3) * 8 + (idx & 1) * 4);
  unsigned int mask = 0xFu << shift;
  unsigned int bits = (v & 0xFu) << shift;
  unsigned int old = *reinterpret_cast<volatile unsigned int *>(word), seen;
  do {
    seen = old;
    old = atomicCAS(word, seen, (seen & ~mask) | bits);
  } while (old != seen);
}
// ... and in a register array (no other thread sees it) a plain read-modify-write of the byte.
TL_DEVICE void nibble_store_local(void *base, long long idx, unsigned int v) {
  unsigned char *byte = reinterpret_cast<unsigned char *>(base) + (idx >> 1);
  unsigned int shift = static_cast<unsigned int>((idx & 1) * 4);
  *byte = static_cast<unsigned char>((*byte & ~(0xFu << shift)) | ((v & 0xFu) << shift));
}

}  // namespace tl

// Upstream TileLang's kernels (and T.extract_lane's conversions) spell the 16-bit float types
// with these names at global scope.
using tl::bfloat16_t;
using tl::half_t;
