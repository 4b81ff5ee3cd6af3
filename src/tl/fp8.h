// Copyright the TileLang compiler authors.
//
// 8-bit float (e4m3 / e5m2) support of the device library:
// - `min` / `max` on fp8 scalars (T.min, T.max, T.clamp): CUDA's cuda_fp8.h
//   defines no arithmetic, so the generated unqualified `min(a, b)` needs
//   these overloads.  They compare the exactly widened values and return one
//   of the operands unchanged (fminf/fmaxf semantics: a NaN operand loses).
// - tensor-core operands for tl::gemm on sm_89+: `mma.sync m16n8k32` with
//   e4m3 / e5m2 operands and an f32 accumulator.  The fragments are laid out
//   exactly like the int8 ones (32 bytes of K per mma), so only the
//   instruction differs.
// - `tl::RoundTiesAwayFromZero` for every float type (T.round(x,
//   "ties-away-from-zero")).
#pragma once

#include "common.h"
#include "gemm_sm80.h"

#if !defined(__CUDACC_RTC__)
#include "macros_park.h"
#include <cuda_fp8.h>
#include "macros_restore.h"
#else
#include <cuda_fp8.h>
#endif

#define TL_FP8_MINMAX(T)                                                  \
  TL_DEVICE T min(T a, T b) {                                             \
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);   \
    return (fb < fa || fa != fa) ? b : a;                                 \
  }                                                                       \
  TL_DEVICE T max(T a, T b) {                                             \
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);   \
    return (fb > fa || fa != fa) ? b : a;                                 \
  }
TL_FP8_MINMAX(__nv_fp8_e4m3)
TL_FP8_MINMAX(__nv_fp8_e5m2)
#undef TL_FP8_MINMAX

namespace tl {

// round() rounds halfway cases away from zero; the 16- and 8-bit types go
// through float, which holds every one of their values exactly.
TL_DEVICE float RoundTiesAwayFromZero(float x) { return roundf(x); }
TL_DEVICE double RoundTiesAwayFromZero(double x) { return ::round(x); }
TL_DEVICE half RoundTiesAwayFromZero(half x) {
  return __float2half_rn(roundf(__half2float(x)));
}
TL_DEVICE __nv_bfloat16 RoundTiesAwayFromZero(__nv_bfloat16 x) {
  return __float2bfloat16_rn(roundf(__bfloat162float(x)));
}
TL_DEVICE __nv_fp8_e4m3 RoundTiesAwayFromZero(__nv_fp8_e4m3 x) {
  return __nv_fp8_e4m3(roundf(static_cast<float>(x)));
}
TL_DEVICE __nv_fp8_e5m2 RoundTiesAwayFromZero(__nv_fp8_e5m2 x) {
  return __nv_fp8_e5m2(roundf(static_cast<float>(x)));
}

namespace detail {

template <class T>
struct Fp8Name;
template <>
struct Fp8Name<__nv_fp8_e4m3> {
  static constexpr bool kE4M3 = true;
};
template <>
struct Fp8Name<__nv_fp8_e5m2> {
  static constexpr bool kE4M3 = false;
};

template <class TA, class TB>
struct MmaFp8 {
  static constexpr int kK = 32;
  static TL_DEVICE void run(float* c, const uint32_t* a, const uint32_t* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
    static_assert(sizeof(TA) == 0, "tl::gemm: fp8 tensor-core operands need sm_89 or newer");
#else
    constexpr bool ea = Fp8Name<TA>::kE4M3;
    constexpr bool eb = Fp8Name<TB>::kE4M3;
#define TL_MMA_F8(TYPES)                                                   \
  asm("mma.sync.aligned.m16n8k32.row.col.f32." TYPES                       \
      ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                     \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
    if constexpr (ea && eb) {
      TL_MMA_F8("e4m3.e4m3");
    } else if constexpr (ea) {
      TL_MMA_F8("e4m3.e5m2");
    } else if constexpr (eb) {
      TL_MMA_F8("e5m2.e4m3");
    } else {
      TL_MMA_F8("e5m2.e5m2");
    }
#undef TL_MMA_F8
#endif
  }
};
template <>
struct Mma<__nv_fp8_e4m3, __nv_fp8_e4m3, float> : MmaFp8<__nv_fp8_e4m3, __nv_fp8_e4m3> {};
template <>
struct Mma<__nv_fp8_e4m3, __nv_fp8_e5m2, float> : MmaFp8<__nv_fp8_e4m3, __nv_fp8_e5m2> {};
template <>
struct Mma<__nv_fp8_e5m2, __nv_fp8_e4m3, float> : MmaFp8<__nv_fp8_e5m2, __nv_fp8_e4m3> {};
template <>
struct Mma<__nv_fp8_e5m2, __nv_fp8_e5m2, float> : MmaFp8<__nv_fp8_e5m2, __nv_fp8_e5m2> {};

}  // namespace detail
}  // namespace tl

// ---------------------------------------------------------------------------
// Stochastic rounding of one float (T.cast(x, dtype, round="rs", rbits=r)):
// `cvt.rs.satfinite` adds the random bits `rbits` below the kept mantissa
// before truncating.  The instruction converts pairs / quadruples; the single
// value is fed to every input slot and the lowest result taken.  It exists on
// the sm_100a family only: elsewhere a call fails to compile with a message
// naming the requirement (the helpers are templates, so merely including this
// header never trips the assertion).
// ---------------------------------------------------------------------------
#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL) || \
    defined(__CUDA_ARCH_FEAT_SM110_ALL)
#define TL_HAS_CVT_RS 1
#else
#define TL_HAS_CVT_RS 0
#endif

template <int kNever = 0>
TL_DEVICE half __tl_cvt_f32x1_to_f16x1_rs_sat(float x, uint32_t rbits) {
#if TL_HAS_CVT_RS
  uint32_t d;
  asm volatile("cvt.rs.satfinite.f16x2.f32 %0, %1, %1, %2;\n" : "=r"(d) : "f"(x), "r"(rbits));
  return __ushort_as_half(static_cast<unsigned short>(d & 0xFFFFu));
#else
  static_assert(kNever != 0, "Stochastic rounding f32-to-FP16 requires sm_100a (cvt.rs)");
  return half();
#endif
}

template <int kNever = 0>
TL_DEVICE __nv_bfloat16 __tl_cvt_f32x1_to_bf16x1_rs_sat(float x, uint32_t rbits) {
#if TL_HAS_CVT_RS
  uint32_t d;
  asm volatile("cvt.rs.satfinite.bf16x2.f32 %0, %1, %1, %2;\n" : "=r"(d) : "f"(x), "r"(rbits));
  return __ushort_as_bfloat16(static_cast<unsigned short>(d & 0xFFFFu));
#else
  static_assert(kNever != 0, "Stochastic rounding f32-to-BF16 requires sm_100a (cvt.rs)");
  return __nv_bfloat16();
#endif
}

#define TL_CVT_RS_FP8(TAG, T, PTX)                                                        \
  template <int kNever = 0>                                                               \
  TL_DEVICE T __tl_cvt_f32x1_to_##TAG##x1_rs_sat(float x, uint32_t rbits) {               \
    TL_CVT_RS_FP8_BODY(T, PTX)                                                            \
  }
#if TL_HAS_CVT_RS
#define TL_CVT_RS_FP8_BODY(T, PTX)                                                        \
  uint32_t d;                                                                             \
  asm volatile("cvt.rs.satfinite." PTX ".f32 %0, {%1, %1, %1, %1}, %2;\n"                 \
               : "=r"(d) : "f"(x), "r"(rbits));                                           \
  T r;                                                                                    \
  r.__x = static_cast<unsigned char>(d & 0xFFu);                                          \
  return r;
#else
#define TL_CVT_RS_FP8_BODY(T, PTX)                                                        \
  static_assert(kNever != 0, "Stochastic rounding f32-to-FP8 requires sm_100a (cvt.rs)"); \
  return T();
#endif
TL_CVT_RS_FP8(e4m3, __nv_fp8_e4m3, "e4m3x4")
TL_CVT_RS_FP8(e5m2, __nv_fp8_e5m2, "e5m2x4")
#undef TL_CVT_RS_FP8
#undef TL_CVT_RS_FP8_BODY

#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ > 12 || \
    (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8))
#if !defined(__CUDACC_RTC__)
#include "macros_park.h"
#include <cuda_fp4.h>
#include "macros_restore.h"
#else
#include <cuda_fp4.h>
#endif
template <int kNever = 0>
TL_DEVICE __nv_fp4_e2m1 __tl_cvt_f32x1_to_e2m1x1_rs_sat(float x, uint32_t rbits) {
#if TL_HAS_CVT_RS
  unsigned short d;
  asm volatile("cvt.rs.satfinite.e2m1x4.f32 %0, {%1, %1, %1, %1}, %2;\n"
               : "=h"(d) : "f"(x), "r"(rbits));
  __nv_fp4_e2m1 r;
  r.__x = static_cast<__nv_fp4_storage_t>(d & 0xFu);
  return r;
#else
  static_assert(kNever != 0, "Stochastic rounding f32-to-FP4 requires sm_100a (cvt.rs)");
  return __nv_fp4_e2m1();
#endif
}

// Scalar fp4 stores (tilelang/codegen/subbyte.py): tl::nibble_store (common.h) with the
// element's 4 bits.
namespace tl {
TL_DEVICE void fp4_store(void *base, long long idx, __nv_fp4_e2m1 v) {
  nibble_store(base, idx, static_cast<unsigned int>(v.__x));
}
TL_DEVICE void fp4_store_local(void *base, long long idx, __nv_fp4_e2m1 v) {
  nibble_store_local(base, idx, static_cast<unsigned int>(v.__x));
}
// An element's 4-bit code in a byte, and back (a T.view of fp4 shared memory
// as bytes, or of bytes as fp4: tilelang/transform/kernel.py).
TL_DEVICE unsigned char fp4_bits(__nv_fp4_e2m1 v) { return static_cast<unsigned char>(v.__x & 0xFu); }
TL_DEVICE __nv_fp4_e2m1 fp4_from_bits(unsigned int bits) {
  __nv_fp4_e2m1 r;
  r.__x = static_cast<__nv_fp4_storage_t>(bits & 0xFu);
  return r;
}
}  // namespace tl
#endif

// ---------------------------------------------------------------------------
// Paired fp8 conversions (a vectorized T.cast / T.copy between fp8 and a
// wider float type: tilelang.codegen.cuda emits one call per pair of lanes).
// fp8 pairs travel as their 16-bit storage; `interp` says e4m3 or e5m2.
// Conversions towards fp8 saturate to the finite range (as the scalar
// __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors do).
// ---------------------------------------------------------------------------
TL_DEVICE float2 __tl_cvt_fp8x2_to_float2(const __nv_fp8x2_storage_t x,
                                          const __nv_fp8_interpretation_t interp) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(x, interp)));
}

TL_DEVICE half2 __tl_cvt_fp8x2_to_half2(const __nv_fp8x2_storage_t x,
                                        const __nv_fp8_interpretation_t interp) {
  return half2(__nv_cvt_fp8x2_to_halfraw2(x, interp));
}

TL_DEVICE __nv_fp8x2_storage_t __tl_cvt_half2_to_fp8x2(const half2 x,
                                                       const __nv_fp8_interpretation_t interp) {
  return __nv_cvt_halfraw2_to_fp8x2(__half2_raw(x), __NV_SATFINITE, interp);
}

#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ > 12 || \
    (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8))
// e8m0 (power-of-two scale factors): rounding towards +inf, as __nv_fp8_e8m0's constructors do
TL_DEVICE __nv_bfloat162 __tl_cvt_e8m0x2_to_bfloat162(const __nv_fp8x2_storage_t x) {
  return __nv_bfloat162(__nv_cvt_e8m0x2_to_bf162raw(x));
}

TL_DEVICE __nv_fp8x2_storage_t __tl_cvt_bfloat162_to_e8m0x2(const __nv_bfloat162 x) {
  return __nv_cvt_bfloat162raw_to_e8m0x2(__nv_bfloat162_raw(x), __NV_SATFINITE, cudaRoundPosInf);
}

TL_DEVICE __nv_fp8x2_storage_t __tl_cvt_float2_to_e8m0x2(const float2 x) {
  return __nv_cvt_float2_to_e8m0x2(x, __NV_SATFINITE, cudaRoundPosInf);
}

TL_DEVICE __nv_fp8x2_storage_t __tl_cvt_double2_to_e8m0x2(const double2 x) {
  return __nv_cvt_double2_to_e8m0x2(x, __NV_SATFINITE, cudaRoundPosInf);
}
#endif
