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
#pragma push_macro("uint")
#pragma push_macro("uchar")
#pragma push_macro("ushort")
#pragma push_macro("int64_t")
#pragma push_macro("uint64_t")
#undef uint
#undef uchar
#undef ushort
#undef int64_t
#undef uint64_t
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <type_traits>
#pragma pop_macro("uint64_t")
#pragma pop_macro("int64_t")
#pragma pop_macro("ushort")
#pragma pop_macro("uchar")
#pragma pop_macro("uint")

#define TL_DEVICE __device__ __forceinline__

namespace tl {

// The compiler spells its element types with these names; they are plain
// aliases so that values flow freely between TVM-generated code (which uses
// `half` and `__nv_bfloat16`) and this library.
using half_t = half;
using bfloat16_t = __nv_bfloat16;

// Trait that tells whether T is one of the two 16-bit floating point types.
// They need explicit intrinsics for arithmetic and conversion because the
// kernels may be compiled with __CUDA_NO_HALF_OPERATORS__ and friends.
template <class T>
struct is_16bit_float : std::false_type {};
template <>
struct is_16bit_float<half> : std::true_type {};
template <>
struct is_16bit_float<__nv_bfloat16> : std::true_type {};

namespace detail {

// Widening a 16-bit float to float is exact, so every conversion out of a
// 16-bit float goes through float first.
TL_DEVICE float to_float(half x) { return __half2float(x); }
TL_DEVICE float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class To>
TL_DEVICE To from_float(float x) {
  if constexpr (std::is_same<To, half>::value) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same<To, __nv_bfloat16>::value) {
    return __float2bfloat16_rn(x);
  } else {
    return static_cast<To>(x);
  }
}

template <class To, class From>
struct Cvt {
  static TL_DEVICE To run(From x) {
    if constexpr (std::is_same<To, From>::value) {
      return x;
    } else if constexpr (is_16bit_float<From>::value &&
                         is_16bit_float<To>::value) {
      // half <-> bf16: float holds either exactly, so there is one rounding.
      return from_float<To>(to_float(x));
    } else if constexpr (is_16bit_float<From>::value) {
      // Integer targets truncate toward zero like a C cast does; the
      // round-to-zero intrinsics avoid a double rounding through float.
      if constexpr (std::is_same<To, int>::value &&
                    std::is_same<From, half>::value) {
        return __half2int_rz(x);
      } else if constexpr (std::is_same<To, int>::value) {
        return __bfloat162int_rz(x);
      } else {
        return static_cast<To>(to_float(x));
      }
    } else if constexpr (is_16bit_float<To>::value) {
      // int -> half/bf16 has a direct correctly rounded intrinsic; other
      // sources are rounded to float first, which is exact for float itself.
      if constexpr (std::is_same<From, int>::value &&
                    std::is_same<To, half>::value) {
        return __int2half_rn(x);
      } else if constexpr (std::is_same<From, int>::value) {
        return __int2bfloat16_rn(x);
      } else if constexpr (std::is_same<From, double>::value &&
                           std::is_same<To, half>::value) {
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
  if constexpr (std::is_signed<T>::value) {
    return static_cast<T>((1ull << (8 * sizeof(T) - 1)) - 1);
  } else {
    return static_cast<T>(~0ull);
  }
}
template <class T>
TL_DEVICE T int_lowest() {
  if constexpr (std::is_signed<T>::value) {
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

// Positive infinity of T.  Integer types have no infinity, so they get their
// largest value, which is the identity that max/min reductions need.
template <class T>
TL_DEVICE T infinity() {
  if constexpr (std::is_same<T, float>::value) {
    return __int_as_float(0x7f800000);
  } else if constexpr (std::is_same<T, double>::value) {
    return __longlong_as_double(0x7ff0000000000000LL);
  } else if constexpr (std::is_same<T, half>::value) {
    return __ushort_as_half(static_cast<unsigned short>(0x7c00));
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return __ushort_as_bfloat16(static_cast<unsigned short>(0x7f80));
  } else {
    static_assert(std::is_integral<T>::value, "infinity<T>: unsupported type");
    return detail::int_max<T>();
  }
}

// Largest finite value of T.
template <class T>
TL_DEVICE T max_value() {
  if constexpr (std::is_same<T, float>::value) {
    return __int_as_float(0x7f7fffff);
  } else if constexpr (std::is_same<T, double>::value) {
    return __longlong_as_double(0x7fefffffffffffffLL);
  } else if constexpr (std::is_same<T, half>::value) {
    return __ushort_as_half(static_cast<unsigned short>(0x7bff));
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return __ushort_as_bfloat16(static_cast<unsigned short>(0x7f7f));
  } else {
    static_assert(std::is_integral<T>::value, "max_value<T>: unsupported type");
    return detail::int_max<T>();
  }
}

// Most negative finite value of T (what std::numeric_limits calls lowest()),
// because that is what the compiler means by the minimum of a type: the
// identity of a max-reduction over finite data.
template <class T>
TL_DEVICE T min_value() {
  if constexpr (std::is_same<T, float>::value) {
    return __int_as_float(static_cast<int>(0xff7fffffu));
  } else if constexpr (std::is_same<T, double>::value) {
    return __longlong_as_double(static_cast<long long>(0xffefffffffffffffULL));
  } else if constexpr (std::is_same<T, half>::value) {
    return __ushort_as_half(static_cast<unsigned short>(0xfbff));
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return __ushort_as_bfloat16(static_cast<unsigned short>(0xff7f));
  } else {
    static_assert(std::is_integral<T>::value, "min_value<T>: unsupported type");
    return detail::int_lowest<T>();
  }
}

// Negative infinity, the identity of a max-reduction.
template <class T>
TL_DEVICE T neg_infinity() {
  if constexpr (std::is_integral<T>::value) {
    return detail::int_lowest<T>();
  } else if constexpr (std::is_same<T, half>::value) {
    return __ushort_as_half(static_cast<unsigned short>(0xfc00));
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
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

}  // namespace tl
