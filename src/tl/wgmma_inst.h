// Copyright the TileLang compiler authors.
//
// The wgmma.mma_async instructions of sm_90a, one struct per accumulator
// width: detail::Wgmma<N, R>::ss<TA, TNA, TNB, TB>(d, desc_a, desc_b, scale_d)
// (both operands in shared memory, through descriptors), ::rs<TA, TNB>(d,
// a0..a3, desc_b, scale_d) (A in four 32-bit registers) and ::sp<TA, TNB>(d,
// desc_a, desc_b, metadata, scale_d) (2:4 sparse A, m64nNk32), for m64nNk16 on
// half / bfloat16, m64nNk32 on 8-bit floats (e4m3 / e5m2 in any pairing) and
// m64nNk8 on tf32 (T = float: the tensor core reads the top 19 bits of each
// float; ss and rs), the last two with both operands K major (no transpose
// immediates).  R is float for f32
// accumulation and uint32_t (two halves) for f16.  The block-level GEMM built
// on them is gemm_sm90.h.  Compiled for anything but sm_90a the instructions
// trap at run time.
#pragma once

#include "barrier.h"
#include "common.h"
#include "fp8.h"

namespace tl {
namespace detail {

// The 8-bit float types wgmma takes (m64nNk32, K-major operands only).
template <class T>
constexpr bool is_fp8_v = is_same_v<T, __nv_fp8_e4m3> || is_same_v<T, __nv_fp8_e5m2>;

// ---------------------------------------------------------------------------
// The wgmma instructions.  Inline asm numbers its outputs first and nvcc has
// no named operands, so the operands whose position must not depend on the
// accumulator count (descriptors, scale-d, register A) are passed as in-out
// operands in front of the accumulators.  TL_WG_R{3,6}_Q lists the 4Q
// accumulator operands starting at %3 / %6 and TL_WG_OPS_Q binds them.
// ---------------------------------------------------------------------------
#define TL_WG_O4(C, d, i) C(d[i]), C(d[i + 1]), C(d[i + 2]), C(d[i + 3])
#define TL_WG_R3_1 "%3, %4, %5, %6"
#define TL_WG_R3_2 TL_WG_R3_1 ", %7, %8, %9, %10"
#define TL_WG_R3_3 TL_WG_R3_2 ", %11, %12, %13, %14"
#define TL_WG_R3_4 TL_WG_R3_3 ", %15, %16, %17, %18"
#define TL_WG_R3_5 TL_WG_R3_4 ", %19, %20, %21, %22"
#define TL_WG_R3_6 TL_WG_R3_5 ", %23, %24, %25, %26"
#define TL_WG_R3_7 TL_WG_R3_6 ", %27, %28, %29, %30"
#define TL_WG_R3_8 TL_WG_R3_7 ", %31, %32, %33, %34"
#define TL_WG_R3_9 TL_WG_R3_8 ", %35, %36, %37, %38"
#define TL_WG_R3_10 TL_WG_R3_9 ", %39, %40, %41, %42"
#define TL_WG_R3_11 TL_WG_R3_10 ", %43, %44, %45, %46"
#define TL_WG_R3_12 TL_WG_R3_11 ", %47, %48, %49, %50"
#define TL_WG_R3_13 TL_WG_R3_12 ", %51, %52, %53, %54"
#define TL_WG_R3_14 TL_WG_R3_13 ", %55, %56, %57, %58"
#define TL_WG_R3_15 TL_WG_R3_14 ", %59, %60, %61, %62"
#define TL_WG_R3_16 TL_WG_R3_15 ", %63, %64, %65, %66"
#define TL_WG_R3_17 TL_WG_R3_16 ", %67, %68, %69, %70"
#define TL_WG_R3_18 TL_WG_R3_17 ", %71, %72, %73, %74"
#define TL_WG_R3_19 TL_WG_R3_18 ", %75, %76, %77, %78"
#define TL_WG_R3_20 TL_WG_R3_19 ", %79, %80, %81, %82"
#define TL_WG_R3_21 TL_WG_R3_20 ", %83, %84, %85, %86"
#define TL_WG_R3_22 TL_WG_R3_21 ", %87, %88, %89, %90"
#define TL_WG_R3_23 TL_WG_R3_22 ", %91, %92, %93, %94"
#define TL_WG_R3_24 TL_WG_R3_23 ", %95, %96, %97, %98"
#define TL_WG_R3_25 TL_WG_R3_24 ", %99, %100, %101, %102"
#define TL_WG_R3_26 TL_WG_R3_25 ", %103, %104, %105, %106"
#define TL_WG_R3_27 TL_WG_R3_26 ", %107, %108, %109, %110"
#define TL_WG_R3_28 TL_WG_R3_27 ", %111, %112, %113, %114"
#define TL_WG_R3_29 TL_WG_R3_28 ", %115, %116, %117, %118"
#define TL_WG_R3_30 TL_WG_R3_29 ", %119, %120, %121, %122"
#define TL_WG_R3_31 TL_WG_R3_30 ", %123, %124, %125, %126"
#define TL_WG_R3_32 TL_WG_R3_31 ", %127, %128, %129, %130"
#define TL_WG_R6_1 "%6, %7, %8, %9"
#define TL_WG_R6_2 TL_WG_R6_1 ", %10, %11, %12, %13"
#define TL_WG_R6_3 TL_WG_R6_2 ", %14, %15, %16, %17"
#define TL_WG_R6_4 TL_WG_R6_3 ", %18, %19, %20, %21"
#define TL_WG_R6_5 TL_WG_R6_4 ", %22, %23, %24, %25"
#define TL_WG_R6_6 TL_WG_R6_5 ", %26, %27, %28, %29"
#define TL_WG_R6_7 TL_WG_R6_6 ", %30, %31, %32, %33"
#define TL_WG_R6_8 TL_WG_R6_7 ", %34, %35, %36, %37"
#define TL_WG_R6_9 TL_WG_R6_8 ", %38, %39, %40, %41"
#define TL_WG_R6_10 TL_WG_R6_9 ", %42, %43, %44, %45"
#define TL_WG_R6_11 TL_WG_R6_10 ", %46, %47, %48, %49"
#define TL_WG_R6_12 TL_WG_R6_11 ", %50, %51, %52, %53"
#define TL_WG_R6_13 TL_WG_R6_12 ", %54, %55, %56, %57"
#define TL_WG_R6_14 TL_WG_R6_13 ", %58, %59, %60, %61"
#define TL_WG_R6_15 TL_WG_R6_14 ", %62, %63, %64, %65"
#define TL_WG_R6_16 TL_WG_R6_15 ", %66, %67, %68, %69"
#define TL_WG_R6_17 TL_WG_R6_16 ", %70, %71, %72, %73"
#define TL_WG_R6_18 TL_WG_R6_17 ", %74, %75, %76, %77"
#define TL_WG_R6_19 TL_WG_R6_18 ", %78, %79, %80, %81"
#define TL_WG_R6_20 TL_WG_R6_19 ", %82, %83, %84, %85"
#define TL_WG_R6_21 TL_WG_R6_20 ", %86, %87, %88, %89"
#define TL_WG_R6_22 TL_WG_R6_21 ", %90, %91, %92, %93"
#define TL_WG_R6_23 TL_WG_R6_22 ", %94, %95, %96, %97"
#define TL_WG_R6_24 TL_WG_R6_23 ", %98, %99, %100, %101"
#define TL_WG_R6_25 TL_WG_R6_24 ", %102, %103, %104, %105"
#define TL_WG_R6_26 TL_WG_R6_25 ", %106, %107, %108, %109"
#define TL_WG_R6_27 TL_WG_R6_26 ", %110, %111, %112, %113"
#define TL_WG_R6_28 TL_WG_R6_27 ", %114, %115, %116, %117"
#define TL_WG_R6_29 TL_WG_R6_28 ", %118, %119, %120, %121"
#define TL_WG_R6_30 TL_WG_R6_29 ", %122, %123, %124, %125"
#define TL_WG_R6_31 TL_WG_R6_30 ", %126, %127, %128, %129"
#define TL_WG_R6_32 TL_WG_R6_31 ", %130, %131, %132, %133"
#define TL_WG_R4_1 "%4, %5, %6, %7"
#define TL_WG_R4_2 TL_WG_R4_1 ", %8, %9, %10, %11"
#define TL_WG_R4_3 TL_WG_R4_2 ", %12, %13, %14, %15"
#define TL_WG_R4_4 TL_WG_R4_3 ", %16, %17, %18, %19"
#define TL_WG_R4_5 TL_WG_R4_4 ", %20, %21, %22, %23"
#define TL_WG_R4_6 TL_WG_R4_5 ", %24, %25, %26, %27"
#define TL_WG_R4_7 TL_WG_R4_6 ", %28, %29, %30, %31"
#define TL_WG_R4_8 TL_WG_R4_7 ", %32, %33, %34, %35"
#define TL_WG_R4_9 TL_WG_R4_8 ", %36, %37, %38, %39"
#define TL_WG_R4_10 TL_WG_R4_9 ", %40, %41, %42, %43"
#define TL_WG_R4_11 TL_WG_R4_10 ", %44, %45, %46, %47"
#define TL_WG_R4_12 TL_WG_R4_11 ", %48, %49, %50, %51"
#define TL_WG_R4_13 TL_WG_R4_12 ", %52, %53, %54, %55"
#define TL_WG_R4_14 TL_WG_R4_13 ", %56, %57, %58, %59"
#define TL_WG_R4_15 TL_WG_R4_14 ", %60, %61, %62, %63"
#define TL_WG_R4_16 TL_WG_R4_15 ", %64, %65, %66, %67"
#define TL_WG_R4_17 TL_WG_R4_16 ", %68, %69, %70, %71"
#define TL_WG_R4_18 TL_WG_R4_17 ", %72, %73, %74, %75"
#define TL_WG_R4_19 TL_WG_R4_18 ", %76, %77, %78, %79"
#define TL_WG_R4_20 TL_WG_R4_19 ", %80, %81, %82, %83"
#define TL_WG_R4_21 TL_WG_R4_20 ", %84, %85, %86, %87"
#define TL_WG_R4_22 TL_WG_R4_21 ", %88, %89, %90, %91"
#define TL_WG_R4_23 TL_WG_R4_22 ", %92, %93, %94, %95"
#define TL_WG_R4_24 TL_WG_R4_23 ", %96, %97, %98, %99"
#define TL_WG_R4_25 TL_WG_R4_24 ", %100, %101, %102, %103"
#define TL_WG_R4_26 TL_WG_R4_25 ", %104, %105, %106, %107"
#define TL_WG_R4_27 TL_WG_R4_26 ", %108, %109, %110, %111"
#define TL_WG_R4_28 TL_WG_R4_27 ", %112, %113, %114, %115"
#define TL_WG_R4_29 TL_WG_R4_28 ", %116, %117, %118, %119"
#define TL_WG_R4_30 TL_WG_R4_29 ", %120, %121, %122, %123"
#define TL_WG_R4_31 TL_WG_R4_30 ", %124, %125, %126, %127"
#define TL_WG_R4_32 TL_WG_R4_31 ", %128, %129, %130, %131"
#define TL_WG_OPS_1(C, d) TL_WG_O4(C, d, 0)
#define TL_WG_OPS_2(C, d) TL_WG_OPS_1(C, d), TL_WG_O4(C, d, 4)
#define TL_WG_OPS_3(C, d) TL_WG_OPS_2(C, d), TL_WG_O4(C, d, 8)
#define TL_WG_OPS_4(C, d) TL_WG_OPS_3(C, d), TL_WG_O4(C, d, 12)
#define TL_WG_OPS_5(C, d) TL_WG_OPS_4(C, d), TL_WG_O4(C, d, 16)
#define TL_WG_OPS_6(C, d) TL_WG_OPS_5(C, d), TL_WG_O4(C, d, 20)
#define TL_WG_OPS_7(C, d) TL_WG_OPS_6(C, d), TL_WG_O4(C, d, 24)
#define TL_WG_OPS_8(C, d) TL_WG_OPS_7(C, d), TL_WG_O4(C, d, 28)
#define TL_WG_OPS_9(C, d) TL_WG_OPS_8(C, d), TL_WG_O4(C, d, 32)
#define TL_WG_OPS_10(C, d) TL_WG_OPS_9(C, d), TL_WG_O4(C, d, 36)
#define TL_WG_OPS_11(C, d) TL_WG_OPS_10(C, d), TL_WG_O4(C, d, 40)
#define TL_WG_OPS_12(C, d) TL_WG_OPS_11(C, d), TL_WG_O4(C, d, 44)
#define TL_WG_OPS_13(C, d) TL_WG_OPS_12(C, d), TL_WG_O4(C, d, 48)
#define TL_WG_OPS_14(C, d) TL_WG_OPS_13(C, d), TL_WG_O4(C, d, 52)
#define TL_WG_OPS_15(C, d) TL_WG_OPS_14(C, d), TL_WG_O4(C, d, 56)
#define TL_WG_OPS_16(C, d) TL_WG_OPS_15(C, d), TL_WG_O4(C, d, 60)
#define TL_WG_OPS_17(C, d) TL_WG_OPS_16(C, d), TL_WG_O4(C, d, 64)
#define TL_WG_OPS_18(C, d) TL_WG_OPS_17(C, d), TL_WG_O4(C, d, 68)
#define TL_WG_OPS_19(C, d) TL_WG_OPS_18(C, d), TL_WG_O4(C, d, 72)
#define TL_WG_OPS_20(C, d) TL_WG_OPS_19(C, d), TL_WG_O4(C, d, 76)
#define TL_WG_OPS_21(C, d) TL_WG_OPS_20(C, d), TL_WG_O4(C, d, 80)
#define TL_WG_OPS_22(C, d) TL_WG_OPS_21(C, d), TL_WG_O4(C, d, 84)
#define TL_WG_OPS_23(C, d) TL_WG_OPS_22(C, d), TL_WG_O4(C, d, 88)
#define TL_WG_OPS_24(C, d) TL_WG_OPS_23(C, d), TL_WG_O4(C, d, 92)
#define TL_WG_OPS_25(C, d) TL_WG_OPS_24(C, d), TL_WG_O4(C, d, 96)
#define TL_WG_OPS_26(C, d) TL_WG_OPS_25(C, d), TL_WG_O4(C, d, 100)
#define TL_WG_OPS_27(C, d) TL_WG_OPS_26(C, d), TL_WG_O4(C, d, 104)
#define TL_WG_OPS_28(C, d) TL_WG_OPS_27(C, d), TL_WG_O4(C, d, 108)
#define TL_WG_OPS_29(C, d) TL_WG_OPS_28(C, d), TL_WG_O4(C, d, 112)
#define TL_WG_OPS_30(C, d) TL_WG_OPS_29(C, d), TL_WG_O4(C, d, 116)
#define TL_WG_OPS_31(C, d) TL_WG_OPS_30(C, d), TL_WG_O4(C, d, 120)
#define TL_WG_OPS_32(C, d) TL_WG_OPS_31(C, d), TL_WG_O4(C, d, 124)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TL_WG_SS(N, Q, CON, TY, TNA, TNB)                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n"                                  \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16." TY " {" TL_WG_R3_##Q           \
               "}, %0, %1, p, 1, 1, " #TNA ", " #TNB ";\n}\n"                               \
               : "+l"(da), "+l"(db), "+r"(sd), TL_WG_OPS_##Q(CON, d))
#define TL_WG_RS(N, Q, CON, TY, TNB)                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"                                  \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16." TY " {" TL_WG_R6_##Q           \
               "}, {%0, %1, %2, %3}, %4, p, 1, 1, " #TNB ";\n}\n"                           \
               : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+l"(db), "+r"(sd),                \
                 TL_WG_OPS_##Q(CON, d))
// 2:4 sparse A (m64nNk32 on 16-bit operands): A (M x K/2 kept values) and B
// through descriptors, the 32-bit metadata e of this thread (sparsity selector
// 0: lanes 0 and 1 of each quad give it, gemm_sp_sm90.h), A K major.
#define TL_WG_SP(N, Q, CON, TY, TNB)                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n"                                  \
               "wgmma.mma_async.sp.sync.aligned.m64n" #N "k32." TY " {" TL_WG_R4_##Q        \
               "}, %0, %1, %2, 0, p, 1, 1, 0, " #TNB ";\n}\n"                              \
               : "+l"(da), "+l"(db), "+r"(e), "+r"(sd), TL_WG_OPS_##Q(CON, d))
// 8-bit (m64nNk32) and tf32 (m64nNk8) operands: both K major, no transpose
// immediates.
#define TL_WG_SSK(N, Q, CON, TY, KS)                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n"                                  \
               "wgmma.mma_async.sync.aligned.m64n" #N "k" #KS "." TY " {" TL_WG_R3_##Q      \
               "}, %0, %1, p, 1, 1;\n}\n"                                                   \
               : "+l"(da), "+l"(db), "+r"(sd), TL_WG_OPS_##Q(CON, d))
#define TL_WG_RSK(N, Q, CON, TY, KS)                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"                                  \
               "wgmma.mma_async.sync.aligned.m64n" #N "k" #KS "." TY " {" TL_WG_R6_##Q      \
               "}, {%0, %1, %2, %3}, %4, p, 1, 1;\n}\n"                                     \
               : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+l"(db), "+r"(sd),                \
                 TL_WG_OPS_##Q(CON, d))
#define TL_WG_SS8(N, Q, CON, TY) TL_WG_SSK(N, Q, CON, TY, 32)
#else
#define TL_WG_SS(N, Q, CON, TY, TNA, TNB) sm90_unsupported()
#define TL_WG_SS8(N, Q, CON, TY) sm90_unsupported()
#define TL_WG_SSK(N, Q, CON, TY, KS) sm90_unsupported()
#define TL_WG_RSK(N, Q, CON, TY, KS) sm90_unsupported()
#define TL_WG_RS(N, Q, CON, TY, TNB) sm90_unsupported()
#define TL_WG_SP(N, Q, CON, TY, TNB) sm90_unsupported()
#endif

#define TL_WG_SS_T(N, Q, CON, TY)                          \
  if constexpr (!TNA && !TNB) {                            \
    TL_WG_SS(N, Q, CON, TY, 0, 0);                         \
  } else if constexpr (!TNA) {                             \
    TL_WG_SS(N, Q, CON, TY, 0, 1);                         \
  } else if constexpr (!TNB) {                             \
    TL_WG_SS(N, Q, CON, TY, 1, 0);                         \
  } else {                                                 \
    TL_WG_SS(N, Q, CON, TY, 1, 1);                         \
  }
#define TL_WG_RS_T(N, Q, CON, TY)  \
  if constexpr (!TNB) {            \
    TL_WG_RS(N, Q, CON, TY, 0);    \
  } else {                         \
    TL_WG_RS(N, Q, CON, TY, 1);    \
  }

// Wgmma<N, R>: m64nNk16 with accumulator registers of type R (float for
// f32, uint32_t holding two halves for f16).  TNA / TNB are the instruction's
// transpose immediates: 1 when the operand is M/N major in shared memory.
template <int N, class R>
struct Wgmma;

#define TL_WGMMA_DEFINE(N, Q, R, CON, DT)                                                  \
  template <>                                                                              \
  struct Wgmma<N, R> {                                                                     \
    template <class T, bool TNA, bool TNB, class TB = T>                                   \
    static TL_DEVICE void ss(R* d, uint64_t da, uint64_t db, int sd) {                     \
      if constexpr (is_same_v<T, half>) {                                                  \
        TL_WG_SS_T(N, Q, CON, DT ".f16.f16")                                               \
      } else if constexpr (is_same_v<T, __nv_bfloat16>) {                                  \
        TL_WG_SS_T(N, Q, CON, DT ".bf16.bf16")                                             \
      } else if constexpr (is_same_v<T, float>) {                                          \
        TL_WG_SSK(N, Q, CON, DT ".tf32.tf32", 8);                                          \
      } else if constexpr (is_same_v<T, __nv_fp8_e4m3> && is_same_v<TB, __nv_fp8_e4m3>) { \
        TL_WG_SS8(N, Q, CON, DT ".e4m3.e4m3");                                             \
      } else if constexpr (is_same_v<T, __nv_fp8_e4m3>) {                                  \
        TL_WG_SS8(N, Q, CON, DT ".e4m3.e5m2");                                             \
      } else if constexpr (is_same_v<TB, __nv_fp8_e4m3>) {                                 \
        TL_WG_SS8(N, Q, CON, DT ".e5m2.e4m3");                                             \
      } else {                                                                             \
        TL_WG_SS8(N, Q, CON, DT ".e5m2.e5m2");                                             \
      }                                                                                    \
    }                                                                                      \
    template <class T, bool TNB>                                                           \
    static TL_DEVICE void sp(R* d, uint64_t da, uint64_t db, uint32_t e, int sd) {         \
      if constexpr (is_same_v<T, half>) {                                                  \
        if constexpr (TNB) { TL_WG_SP(N, Q, CON, DT ".f16.f16", 1); }                      \
        else { TL_WG_SP(N, Q, CON, DT ".f16.f16", 0); }                                    \
      } else {                                                                             \
        if constexpr (TNB) { TL_WG_SP(N, Q, CON, DT ".bf16.bf16", 1); }                    \
        else { TL_WG_SP(N, Q, CON, DT ".bf16.bf16", 0); }                                  \
      }                                                                                    \
    }                                                                                      \
    template <class T, bool TNB>                                                           \
    static TL_DEVICE void rs(R* d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,     \
                             uint64_t db, int sd) {                                        \
      if constexpr (is_same_v<T, half>) {                                                  \
        TL_WG_RS_T(N, Q, CON, DT ".f16.f16")                                               \
      } else if constexpr (is_same_v<T, float>) {                                          \
        TL_WG_RSK(N, Q, CON, DT ".tf32.tf32", 8);                                          \
      } else {                                                                             \
        TL_WG_RS_T(N, Q, CON, DT ".bf16.bf16")                                             \
      }                                                                                    \
    }                                                                                      \
  };

TL_WGMMA_DEFINE(8, 1, float, "+f", "f32") TL_WGMMA_DEFINE(16, 2, float, "+f", "f32")
TL_WGMMA_DEFINE(24, 3, float, "+f", "f32") TL_WGMMA_DEFINE(32, 4, float, "+f", "f32")
TL_WGMMA_DEFINE(40, 5, float, "+f", "f32") TL_WGMMA_DEFINE(48, 6, float, "+f", "f32")
TL_WGMMA_DEFINE(56, 7, float, "+f", "f32") TL_WGMMA_DEFINE(64, 8, float, "+f", "f32")
TL_WGMMA_DEFINE(72, 9, float, "+f", "f32") TL_WGMMA_DEFINE(80, 10, float, "+f", "f32")
TL_WGMMA_DEFINE(88, 11, float, "+f", "f32") TL_WGMMA_DEFINE(96, 12, float, "+f", "f32")
TL_WGMMA_DEFINE(104, 13, float, "+f", "f32") TL_WGMMA_DEFINE(112, 14, float, "+f", "f32")
TL_WGMMA_DEFINE(120, 15, float, "+f", "f32") TL_WGMMA_DEFINE(128, 16, float, "+f", "f32")
TL_WGMMA_DEFINE(136, 17, float, "+f", "f32") TL_WGMMA_DEFINE(144, 18, float, "+f", "f32")
TL_WGMMA_DEFINE(152, 19, float, "+f", "f32") TL_WGMMA_DEFINE(160, 20, float, "+f", "f32")
TL_WGMMA_DEFINE(168, 21, float, "+f", "f32") TL_WGMMA_DEFINE(176, 22, float, "+f", "f32")
TL_WGMMA_DEFINE(184, 23, float, "+f", "f32") TL_WGMMA_DEFINE(192, 24, float, "+f", "f32")
TL_WGMMA_DEFINE(200, 25, float, "+f", "f32") TL_WGMMA_DEFINE(208, 26, float, "+f", "f32")
TL_WGMMA_DEFINE(216, 27, float, "+f", "f32") TL_WGMMA_DEFINE(224, 28, float, "+f", "f32")
TL_WGMMA_DEFINE(232, 29, float, "+f", "f32") TL_WGMMA_DEFINE(240, 30, float, "+f", "f32")
TL_WGMMA_DEFINE(248, 31, float, "+f", "f32") TL_WGMMA_DEFINE(256, 32, float, "+f", "f32")
TL_WGMMA_DEFINE(16, 1, uint32_t, "+r", "f16") TL_WGMMA_DEFINE(32, 2, uint32_t, "+r", "f16")
TL_WGMMA_DEFINE(48, 3, uint32_t, "+r", "f16") TL_WGMMA_DEFINE(64, 4, uint32_t, "+r", "f16")
TL_WGMMA_DEFINE(80, 5, uint32_t, "+r", "f16") TL_WGMMA_DEFINE(96, 6, uint32_t, "+r", "f16")
TL_WGMMA_DEFINE(112, 7, uint32_t, "+r", "f16") TL_WGMMA_DEFINE(128, 8, uint32_t, "+r", "f16")
TL_WGMMA_DEFINE(144, 9, uint32_t, "+r", "f16") TL_WGMMA_DEFINE(160, 10, uint32_t, "+r", "f16")
TL_WGMMA_DEFINE(176, 11, uint32_t, "+r", "f16") TL_WGMMA_DEFINE(192, 12, uint32_t, "+r", "f16")
TL_WGMMA_DEFINE(208, 13, uint32_t, "+r", "f16") TL_WGMMA_DEFINE(224, 14, uint32_t, "+r", "f16")
TL_WGMMA_DEFINE(240, 15, uint32_t, "+r", "f16") TL_WGMMA_DEFINE(256, 16, uint32_t, "+r", "f16")

#undef TL_WGMMA_DEFINE
#undef TL_WG_RS_T
#undef TL_WG_SS_T
#undef TL_WG_RS
#undef TL_WG_SS
#undef TL_WG_SS8
#undef TL_WG_SSK
#undef TL_WG_RSK
#undef TL_WG_SP

}  // namespace detail
}  // namespace tl
