// Copyright the TileLang compiler authors.
//
// Warpgroup tensor core GEMM for sm_90a (Hopper), built on wgmma.mma_async.
//
//   wgmma_gemm_ss<M, N, K, NUM_WARPGROUPS_M, TRANS_A, TRANS_B, CLEAR_ACCUM,
//                 TA, TB, TC>(const TA* A_smem, const TB* B_smem, TC* C_frag)
//   wgmma_gemm_rs<... same ...>(const TA* A_frag, const TB* B_smem, TC* C_frag)
//   wgmma_gemm_ss_async<... same, TC = float ...>(A_smem, B_smem, C_frag)
//   and wgmma_wait<PENDING, COUNT>(C_frag): wgmma_gemm_ss without the wait
//   wgmma_smem_offset<ROWS, COLS, E>(r, c): the shared memory layout below
//
// compute C += A * B (C = A * B when CLEAR_ACCUM) for one M x N x K block
// tile.  NUM_WARPGROUPS_M warpgroups (128 consecutive threads each, starting
// at a thread index divisible by 128) split M: warpgroup
// wg = (threadIdx.x / 128) % NUM_WARPGROUPS_M owns rows [wg*MW, wg*MW + MW),
// MW = M / NUM_WARPGROUPS_M, a multiple of 64, and all N columns.  Every
// thread of these warpgroups calls the function (the instructions are
// warpgroup-collective); other warpgroups of the block (a TMA producer, say)
// must not, and should be numbered after the GEMM ones so that the formula
// above gives 0..NUM_WARPGROUPS_M-1.  wgmma_gemm_ss/rs end with
// wgmma.wait_group 0, so C_frag is complete and A/B may be overwritten when
// they return (after a barrier, for other threads' writes).
//
// Types (TA, TB -> TC): half, half -> float; bf16, bf16 -> float;
// half, half -> half (fp16 accumulation).  K is a multiple of 16, N a
// multiple of 8 (of 16 for fp16 accumulation).  Each k-step of each 64-row
// block is one m64nNk16 instruction for N <= 256 (the widest there is); past
// 256, N / W instructions of the widest legal width W <= 256 dividing N
// (wgmma_inst_n; select_wgmma_inst_n in Python), over consecutive W-column
// slices of B and of the accumulator (an N-major B needs W to be whole
// swizzle slabs).
//
// Shared memory layout.  A is stored as M rows x K columns (!TRANS_A, "K
// major") or as K rows x M columns (TRANS_A, "M major"); B as N x K (TRANS_B,
// K major) or K x N (!TRANS_B, N major).  For a stored ROWS x COLS matrix of
// E-byte elements (COLS contiguous) the swizzle width is
//   SW = 128 if COLS*E % 128 == 0, else 64 if % 64 == 0, else 32 if % 32 == 0
// (other widths are rejected at compile time), W = SW / E elements.  The
// matrix is cut into COLS / W column slabs of ROWS rows x SW bytes, slab s
// starting at byte s * ROWS * SW; stored element (r, c) sits at byte
//   b = (c / W) * ROWS * SW + r * SW + (c % W) * E
// before swizzling and at byte b ^ (((b >> 7) & (SW/16 - 1)) << 4) after it:
// the 16-byte chunk index inside a 128-byte line is XORed with the line
// index modulo SW/16.  This is byte for byte what a TMA load with
// CU_TENSOR_MAP_SWIZZLE_<SW>B and box {W, ROWS} writes for each slab at
// smem + s * ROWS * SW (docs/hopper.md).  For half/bf16 with COLS a
// multiple of 64: 128-byte rows of 64 elements, chunk (c % 64) / 8 XOR r % 8.
// wgmma_smem_offset<ROWS, COLS, E>(r, c) returns the element offset.
// Requirements: A_smem and B_smem 1024-byte aligned; the contiguous extent
// of each operand (K for K major, M or N for M/N major) a multiple of 16
// elements.  Shared memory written with ordinary stores
// needs fence_proxy_async() in each writing thread before the barrier that
// precedes the call; TMA-written tiles only need the mbarrier wait.
//
// Accumulator layout.  Per thread C_frag holds MI * N / 2 elements of TC,
// MI = MW / 64.  With t = threadIdx.x % 128, w = t / 32 (warp in the
// warpgroup), l = t % 32, element index
//   i = mi * (N/2) + j * 4 + h * 2 + e,   j in [0, N/8), h, e in {0, 1}
// holds block-tile element
//   row = wg * MW + mi * 64 + w * 16 + h * 8 + l / 4
//   col = j * 8 + (l % 4) * 2 + e.
// (This is the m16n8 accumulator layout of gemm_sm80.h with warp w owning
// rows 16w..16w+15 of each 64-row block, NI = N / 8 column blocks.)
//
// Register A layout (wgmma_gemm_rs).  A_frag holds MI * (K/16) * 8 elements
// of TA per thread.  Element (r, k) of the 64 x 16 sub-tile (mi, ki),
// r = w * 16 + rr, is block-tile element (wg * MW + mi * 64 + r, ki * 16 + k)
// and belongs to warp w, lane (rr % 8) * 4 + (k % 8) / 2, at index
//   (((mi * KI + ki) * 2 + k / 8) * 2 + rr / 8) * 2 + k % 2,   KI = K / 16.
// For MI = 1 this equals the accumulator layout for N = K: a float C_frag
// converted element by element to TA is a valid A_frag for the next GEMM
// (P @ V in attention).  TRANS_A is ignored by the register variants.
//
// Compiled for anything but sm_90a the functions trap at run time.
#pragma once

#include "barrier.h"
#include "common.h"

namespace tl {

namespace detail {

// The instruction width for a block tile N wide (see the top of this file).
__host__ __device__ constexpr int wgmma_inst_n(int n) {
  if (n <= 256) return n;
  for (int w = 256; w >= 16; w -= 16) {
    if (n % w == 0) return w;
  }
  return 0;
}

template <bool B, class T, class F>
struct conditional {
  using type = T;
};
template <class T, class F>
struct conditional<false, T, F> {
  using type = F;
};

// The swizzle width in bytes for a contiguous extent of BYTES (0: none fits).
template <int BYTES>
__host__ __device__ constexpr int wgmma_swizzle_width() {
  return BYTES % 128 == 0 ? 128 : BYTES % 64 == 0 ? 64 : BYTES % 32 == 0 ? 32 : 0;
}

}  // namespace detail

// Element offset of stored element (r, c) of a ROWS x COLS matrix of E-byte
// elements in the layout described at the top of this file.
template <int ROWS, int COLS, int E>
TL_DEVICE int wgmma_smem_offset(int r, int c) {
  constexpr int SW = detail::wgmma_swizzle_width<COLS * E>();
  static_assert(SW != 0, "wgmma layout: the contiguous extent must be a multiple of 32 bytes");
  constexpr int W = SW / E;
  const unsigned uc = static_cast<unsigned>(c);
  const unsigned b = (uc / W) * (ROWS * SW) + static_cast<unsigned>(r) * SW + (uc % W) * E;
  return static_cast<int>((b ^ (((b >> 7) & (SW / 16 - 1)) << 4)) / E);
}

namespace detail {

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
#else
#define TL_WG_SS(N, Q, CON, TY, TNA, TNB) sm90_unsupported()
#define TL_WG_RS(N, Q, CON, TY, TNB) sm90_unsupported()
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
    template <class T, bool TNA, bool TNB>                                                 \
    static TL_DEVICE void ss(R* d, uint64_t da, uint64_t db, int sd) {                     \
      if constexpr (is_same_v<T, half>) {                                                  \
        TL_WG_SS_T(N, Q, CON, DT ".f16.f16")                                               \
      } else {                                                                             \
        TL_WG_SS_T(N, Q, CON, DT ".bf16.bf16")                                             \
      }                                                                                    \
    }                                                                                      \
    template <class T, bool TNB>                                                           \
    static TL_DEVICE void rs(R* d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,     \
                             uint64_t db, int sd) {                                        \
      if constexpr (is_same_v<T, half>) {                                                  \
        TL_WG_RS_T(N, Q, CON, DT ".f16.f16")                                               \
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

// Keeps the compiler from moving accesses of accumulator (or register A)
// values across the asynchronous region: each register is "rewritten" by an
// empty volatile asm, ordered with the wgmma fence / wait asm around it.
TL_DEVICE void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
TL_DEVICE void fence_reg(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// Compile-time geometry of one warpgroup GEMM (see the top of this file).
template <int M, int N, int K, int NWG, bool TRANS_A, bool TRANS_B, class TA, class TB,
          class TC, int SWA_OVERRIDE = 0, int SWB_OVERRIDE = 0>
struct WgmmaShape {
  static_assert(is_same_v<TA, TB> && is_16bit_float_v<TA>,
                "tl::wgmma_gemm: A and B must both be half or both bfloat16");
  static_assert(is_same_v<TC, float> || (is_same_v<TC, half> && is_same_v<TA, half>),
                "tl::wgmma_gemm: the accumulator is float, or half for half inputs");
  static constexpr int E = 2;
  static constexpr int kN = wgmma_inst_n(N);  // the instruction's N
  static constexpr int NI = kN ? N / kN : 1;  // instructions across N
  static constexpr int MW = M / NWG;  // rows per warpgroup
  static constexpr int MI = MW / 64;  // m64 blocks per warpgroup
  static constexpr int KI = K / 16;   // k16 steps
  static_assert(NWG >= 1 && M % NWG == 0 && MW % 64 == 0,
                "tl::wgmma_gemm: M / NUM_WARPGROUPS_M must be a multiple of 64");
  static_assert(K % 16 == 0, "tl::wgmma_gemm: K must be a multiple of 16");
  static_assert(N % 8 == 0 && N >= 8 && kN != 0,
                "tl::wgmma_gemm: N must be 8, 16, ..., 256 or a multiple of 16 past 256");
  static_assert(is_same_v<TC, float> || N % 16 == 0,
                "tl::wgmma_gemm: fp16 accumulation needs N to be a multiple of 16");
  static constexpr int kElems = MI * N / 2;  // TC elements of C_frag per thread
  // Accumulator registers: per m64 block (kBlockRegs), per instruction
  // (kInstRegs, at offset ni * kInstRegs in the block) and in all.
  static constexpr int kBlockRegs = is_same_v<TC, float> ? N / 2 : N / 4;
  static constexpr int kInstRegs = is_same_v<TC, float> ? kN / 2 : kN / 4;
  static constexpr int kRegs = MI * kBlockRegs;
  using R = typename conditional<is_same_v<TC, float>, float, uint32_t>::type;

  // Operand geometry: swizzle width SW (bytes), slab width W (elements).
  // (the *_desc entry points give the operands' swizzle widths explicitly)
  static constexpr int SWA =
      SWA_OVERRIDE ? SWA_OVERRIDE : wgmma_swizzle_width<(TRANS_A ? M : K) * E>();
  static constexpr int SWB =
      SWB_OVERRIDE ? SWB_OVERRIDE : wgmma_swizzle_width<(TRANS_B ? K : N) * E>();
  static_assert(SWA != 0, "tl::wgmma_gemm: K (or M when TRANS_A) must be a multiple of 16");
  static_assert(SWB != 0, "tl::wgmma_gemm: K (or N when !TRANS_B) must be a multiple of 16");
  static constexpr int WA = SWA / E, WB = SWB / E;
  static_assert(NI == 1 || TRANS_B || kN % WB == 0,
                "tl::wgmma_gemm: with an N-major B, each instruction's N must be whole swizzle slabs");

  // Descriptor bits other than the start address: LBO [16,30), SBO [32,46)
  // (both >> 4), layout type [62,64) = 1, 2, 3 for 128, 64, 32-byte swizzle.
  // K major: SBO = 8 rows * SW between 8-row core matrix groups, LBO unused
  // (1).  M/N major: SBO = 8 K-rows * SW, LBO = ROWS * SW = K * SW between
  // slabs of W M/N-elements.
  static constexpr __host__ __device__ uint64_t desc_bits(int sw, bool mn_major) {
    const uint64_t lbo = mn_major ? static_cast<uint64_t>(K) * sw / 16 : 1;
    const uint64_t sbo = static_cast<uint64_t>(8 * sw / 16);
    const uint64_t mode = sw == 128 ? 1 : sw == 64 ? 2 : 3;
    return (lbo << 16) | (sbo << 32) | (mode << 62);
  }
  static constexpr uint64_t kDescA = desc_bits(SWA, TRANS_A);
  static constexpr uint64_t kDescB = desc_bits(SWB, !TRANS_B);
  static_assert(K * SWA / 16 < (1 << 14) && K * SWB / 16 < (1 << 14), "tl::wgmma_gemm: K too large");

  // Byte offset of warpgroup wg's first row (block) of A.
  static constexpr uint32_t kAWarpgroupBytes = TRANS_A ? (MW / WA) * K * SWA : MW * SWA;
  // Byte offset of the 64 x 16 A sub-tile at rows m0 (of the warpgroup's
  // rows), k-step ks.
  static constexpr __host__ __device__ uint32_t a_offset(int m0, int ks) {
    const int k0 = ks * 16;
    return TRANS_A ? (m0 / WA) * K * SWA + k0 * SWA
                   : (k0 / WA) * M * SWA + m0 * SWA + (k0 % WA) * E;
  }
  // Byte offset of the kN x 16 B sub-tile at k-step ks, instruction ni
  // (columns [ni * kN, ni * kN + kN) of the block tile).
  static constexpr __host__ __device__ uint32_t b_offset(int ks, int ni = 0) {
    const int k0 = ks * 16, n0 = ni * kN;
    return TRANS_B ? (k0 / WB) * N * SWB + n0 * SWB + (k0 % WB) * E : (n0 / WB) * K * SWB + k0 * SWB;
  }

  // Descriptors.  The start address field is (shared address >> 4) in bits
  // [0, 14): the address is masked to its low 18 bits first, because in a
  // thread block cluster a block's shared::cta addresses carry its rank above
  // them (rank 1: bit 24), which would otherwise land in the LBO field.  Adding
  // a tile offset >> 4 never carries out of the field because shared memory
  // ends below 256 KB.  desc_a0 / desc_b0 are computed once per call, desc_a /
  // desc_b add compile-time offsets per instruction.
  static constexpr uint32_t kAddrMask = (1u << 18) - 1;
  static __host__ __device__ uint64_t desc_a0(uint32_t a_smem, uint32_t wg) {
    return kDescA | (((a_smem + wg * kAWarpgroupBytes) & kAddrMask) >> 4);
  }
  static __host__ __device__ uint64_t desc_b0(uint32_t b_smem) { return kDescB | ((b_smem & kAddrMask) >> 4); }
  static __host__ __device__ uint64_t desc_a(uint64_t a0, int mi, int ks) {
    return a0 + (a_offset(mi * 64, ks) >> 4);
  }
  static __host__ __device__ uint64_t desc_b(uint64_t b0, int ks, int ni = 0) {
    return b0 + (b_offset(ks, ni) >> 4);
  }
};

// The warpgroup index, made provably uniform with a shuffle so that ptxas
// keeps the descriptors in uniform registers.
template <int NWG>
TL_DEVICE int warpgroup_index() {
  if constexpr (NWG == 1) {
    return 0;
  } else {
    return ::__shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128u) % NWG, 0);
  }
}

// Packs pairs of 16-bit values into the 32-bit registers wgmma takes (the
// lower index in the low half), and back.  memcpy keeps this valid for
// arrays aligned only to their element size and compiles to nothing when
// the array already lives in registers.
template <int COUNT, class T>
TL_DEVICE void pack_pairs(uint32_t* dst, const T* src) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) memcpy(&dst[i], src + 2 * i, 4);
}
template <int COUNT, class T>
TL_DEVICE void unpack_pairs(T* dst, const uint32_t* src) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) memcpy(dst + 2 * i, &src[i], 4);
}

template <int COUNT, class R>
TL_DEVICE void fence_regs(R* r) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) fence_reg(r[i]);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TL_WG_SYNC_ASM(...) asm volatile(__VA_ARGS__)
#else
#define TL_WG_SYNC_ASM(...) sm90_unsupported()
#endif

TL_DEVICE void wgmma_fence_sync() { TL_WG_SYNC_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
TL_DEVICE void wgmma_commit_sync() {
  TL_WG_SYNC_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
TL_DEVICE void wgmma_wait_sync() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes 0..7");
  TL_WG_SYNC_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
#undef TL_WG_SYNC_ASM

// The issue sequence shared by both operand kinds: fences the accumulators, then
// calls one(acc registers, ks, mi, ni, scale_d) for every (K step, M block,
// N slice) and commits the wgmma it issued as one group.
template <class S, bool CLEAR_ACCUM, class One>
TL_DEVICE void issue_all(typename S::R* acc, One one) {
  fence_regs<S::kRegs>(acc);
  wgmma_fence_sync();
#pragma unroll
  for (int ks = 0; ks < S::KI; ++ks) {
#pragma unroll
    for (int mi = 0; mi < S::MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < S::NI; ++ni) {
        one(acc + mi * S::kBlockRegs + ni * S::kInstRegs, ks, mi, ni, (CLEAR_ACCUM && ks == 0) ? 0 : 1);
      }
    }
  }
  wgmma_commit_sync();
}

// Issues every wgmma of one block GEMM with both operands in shared memory
// and commits them as one group.
template <class S, int NWG, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, class TA>
TL_DEVICE void issue_ss(const void* A, const void* B, typename S::R* acc) {
  const uint32_t wg = static_cast<uint32_t>(warpgroup_index<NWG>());
  const uint64_t da0 = S::desc_a0(smem_addr(A), wg);
  const uint64_t db0 = S::desc_b0(smem_addr(B));
  issue_all<S, CLEAR_ACCUM>(acc, [&](typename S::R* c, int ks, int mi, int ni, int sd) {
    Wgmma<S::kN, typename S::R>::template ss<TA, TRANS_A, !TRANS_B>(c, S::desc_a(da0, mi, ks),
                                                                   S::desc_b(db0, ks, ni), sd);
  });
}

// Issues every wgmma of one block GEMM with A in registers (NA packed 32-bit
// registers) and B in shared memory, and commits them as one group.
template <class S, int NA, bool TRANS_B, bool CLEAR_ACCUM, class TA>
TL_DEVICE void issue_rs(uint32_t* a, const void* B, typename S::R* acc) {
  const uint64_t db0 = S::desc_b0(smem_addr(B));
  fence_regs<NA>(a);
  issue_all<S, CLEAR_ACCUM>(acc, [&](typename S::R* c, int ks, int mi, int ni, int sd) {
    const uint32_t* ar = a + (mi * S::KI + ks) * 4;
    Wgmma<S::kN, typename S::R>::template rs<TA, !TRANS_B>(c, ar[0], ar[1], ar[2], ar[3], S::desc_b(db0, ks, ni),
                                                           sd);
  });
}

}  // namespace detail

// Warpgroup-collective fence / commit / wait, for callers that issue their
// own sequences (wgmma_gemm_ss_async).  wgmma_wait<P, COUNT>(C) also pins the
// COUNT float accumulators so that no access to them moves above the wait.
TL_DEVICE void wgmma_fence() { detail::wgmma_fence_sync(); }
TL_DEVICE void wgmma_commit() { detail::wgmma_commit_sync(); }
template <int PENDING>
TL_DEVICE void wgmma_wait() {
  detail::wgmma_wait_sync<PENDING>();
}
template <int PENDING, int COUNT>
TL_DEVICE void wgmma_wait(float* C_frag) {
  detail::wgmma_wait_sync<PENDING>();
  detail::fence_regs<COUNT>(C_frag);
}

// Block GEMM with both operands in shared memory (see the top of this file).
template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_A, bool TRANS_B,
          bool CLEAR_ACCUM, typename TA, typename TB, typename TC>
TL_DEVICE void wgmma_gemm_ss(const TA* A_smem, const TB* B_smem, TC* C_frag) {
  using S = detail::WgmmaShape<M, N, K, NUM_WARPGROUPS_M, TRANS_A, TRANS_B, TA, TB, TC>;
  if constexpr (detail::is_same_v<TC, float>) {
    detail::issue_ss<S, NUM_WARPGROUPS_M, TRANS_A, TRANS_B, CLEAR_ACCUM, TA>(A_smem, B_smem,
                                                                             C_frag);
    detail::wgmma_wait_sync<0>();
    detail::fence_regs<S::kRegs>(C_frag);
  } else {
    uint32_t acc[S::kRegs];
    detail::pack_pairs<S::kRegs>(acc, C_frag);
    detail::issue_ss<S, NUM_WARPGROUPS_M, TRANS_A, TRANS_B, CLEAR_ACCUM, TA>(A_smem, B_smem, acc);
    detail::wgmma_wait_sync<0>();
    detail::fence_regs<S::kRegs>(acc);
    detail::unpack_pairs<S::kRegs>(C_frag, acc);
  }
}

// wgmma_gemm_ss without the final wait (float accumulators only): the
// wgmma run in the background while the warpgroup goes on, e.g. to wait for
// the next stage's TMA.  Before C_frag is read or written again, and before
// A or B are overwritten, call wgmma_wait<P, MI * N / 2>(C_frag) with P the
// number of later groups that may stay in flight.
template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_A, bool TRANS_B,
          bool CLEAR_ACCUM, typename TA, typename TB>
TL_DEVICE void wgmma_gemm_ss_async(const TA* A_smem, const TB* B_smem, float* C_frag) {
  using S = detail::WgmmaShape<M, N, K, NUM_WARPGROUPS_M, TRANS_A, TRANS_B, TA, TB, float>;
  detail::issue_ss<S, NUM_WARPGROUPS_M, TRANS_A, TRANS_B, CLEAR_ACCUM, TA>(A_smem, B_smem, C_frag);
}

// Block GEMM with A in registers (layout at the top of this file) and B in
// shared memory.  TRANS_A is ignored.
template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_A, bool TRANS_B,
          bool CLEAR_ACCUM, typename TA, typename TB, typename TC>
TL_DEVICE void wgmma_gemm_rs(const TA* A_frag, const TB* B_smem, TC* C_frag) {
  using S = detail::WgmmaShape<M, N, K, NUM_WARPGROUPS_M, false, TRANS_B, TA, TB, TC>;
  using R = typename S::R;
  constexpr int NA = S::MI * S::KI * 4;  // A registers per thread
  uint32_t a[NA];
  detail::pack_pairs<NA>(a, A_frag);
  uint32_t acc_buf[detail::is_same_v<TC, float> ? 1 : S::kRegs];
  R* acc;
  if constexpr (detail::is_same_v<TC, float>) {
    acc = C_frag;
  } else {
    detail::pack_pairs<S::kRegs>(acc_buf, C_frag);
    acc = acc_buf;
  }
  detail::issue_rs<S, NA, TRANS_B, CLEAR_ACCUM, TA>(a, B_smem, acc);
  detail::wgmma_wait_sync<0>();
  // The A registers are read asynchronously: keep them alive until here.
  detail::fence_regs<NA>(a);
  detail::fence_regs<S::kRegs>(acc);
  if constexpr (!detail::is_same_v<TC, float>) detail::unpack_pairs<S::kRegs>(C_frag, acc_buf);
}

// wgmma_gemm_rs without the final wait (float accumulators only): the wgmma
// run in the background.  Until wgmma_wait<P, COUNT>(C_frag) retires the
// group, neither A_frag nor C_frag may be written; call
// wgmma_fence_operand<NA>(A_frag) right after that wait so that A_frag stays
// live (in registers) up to it.  ptxas checks the register operands of
// in-flight wgmma itself and serialises them (with a performance warning)
// where it cannot prove them safe.
template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_A, bool TRANS_B,
          bool CLEAR_ACCUM, typename TA, typename TB>
TL_DEVICE void wgmma_gemm_rs_async(const TA* A_frag, const TB* B_smem, float* C_frag) {
  using S = detail::WgmmaShape<M, N, K, NUM_WARPGROUPS_M, false, TRANS_B, TA, TB, float>;
  constexpr int NA = S::MI * S::KI * 4;  // A registers per thread
  uint32_t a[NA];
  detail::pack_pairs<NA>(a, A_frag);
  detail::issue_rs<S, NA, TRANS_B, CLEAR_ACCUM, TA>(a, B_smem, C_frag);
}

// ---------------------------------------------------------------------------
// Descriptor entry points (T.wgmma_gemm).  The caller builds the operand
// descriptors, so an operand may be a K slice of a larger shared buffer:
//   initialize_wgmma_descriptor<SW, LBO, SBO>(smem_address): layout type of an
//     SW-byte swizzle (128 / 64 / 32), LBO and SBO in 16-byte units, start
//     address = the operand's first byte (a 1024-byte aligned buffer base
//     plus whole swizzle atoms);
//   increase_descriptor_offset(desc, bytes): the same start moved by a
//     runtime multiple of 16 bytes.
// The operand is laid out as described at the top of this file for a matrix
// of the operand's rows and SW-byte slabs: a K slice [k0, k0 + K) of a
// K-major buffer whose slabs are SW bytes wide (SW from K) is exactly that.
//   wgmma_gemm_ss_desc<M, N, K, NWG, TRANS_A, TRANS_B, CLEAR_ACCUM, SWA, SWB,
//                      TA>(desc_a, desc_b, C_frag)
//   wgmma_gemm_rs_desc<M, N, K, NWG, TRANS_B, CLEAR_ACCUM, SWB>(A_frag, desc_b,
//                      C_frag)
// issue and commit one group and do not wait when the accumulator is float:
// wait_wgmma<P>() retires it (then wgmma_fence_accumulator<COUNT>(C_frag),
// and wgmma_fence_operand<COUNT>(A_frag) for a register A).  A half
// accumulator is repacked around the wgmma, so that call waits itself.
template <int SW, int LBO, int SBO>
TL_DEVICE uint64_t initialize_wgmma_descriptor(uint32_t smem_address) {
  static_assert(SW == 128 || SW == 64 || SW == 32, "wgmma swizzle widths are 128, 64 and 32 bytes");
  constexpr uint64_t mode = SW == 128 ? 1 : SW == 64 ? 2 : 3;
  return (static_cast<uint64_t>(LBO) << 16) | (static_cast<uint64_t>(SBO) << 32) | (mode << 62) |
         ((smem_address & ((1u << 18) - 1)) >> 4);
}
TL_DEVICE uint64_t increase_descriptor_offset(uint64_t desc, int bytes) {
  return desc + static_cast<uint64_t>(static_cast<uint32_t>(bytes) >> 4);
}

template <int M, int N, int K, int NWG, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, int SWA,
          int SWB, typename TA, typename TC>
TL_DEVICE void wgmma_gemm_ss_desc(uint64_t desc_a, uint64_t desc_b, TC* C_frag) {
  using S = detail::WgmmaShape<M, N, K, NWG, TRANS_A, TRANS_B, TA, TA, TC, SWA, SWB>;
  using R = typename S::R;
  const uint32_t wg = static_cast<uint32_t>(detail::warpgroup_index<NWG>());
  const uint64_t da0 = desc_a + ((wg * S::kAWarpgroupBytes) >> 4);
  auto issue = [&](R* acc) {
    detail::issue_all<S, CLEAR_ACCUM>(acc, [&](R* c, int ks, int mi, int ni, int sd) {
      detail::Wgmma<S::kN, R>::template ss<TA, TRANS_A, !TRANS_B>(c, S::desc_a(da0, mi, ks),
                                                                 S::desc_b(desc_b, ks, ni), sd);
    });
  };
  if constexpr (detail::is_same_v<TC, float>) {
    issue(C_frag);
  } else {
    uint32_t acc[S::kRegs];
    detail::pack_pairs<S::kRegs>(acc, C_frag);
    issue(acc);
    detail::wgmma_wait_sync<0>();
    detail::fence_regs<S::kRegs>(acc);
    detail::unpack_pairs<S::kRegs>(C_frag, acc);
  }
}

template <int M, int N, int K, int NWG, bool TRANS_B, bool CLEAR_ACCUM, int SWB, typename TA,
          typename TC>
TL_DEVICE void wgmma_gemm_rs_desc(const TA* A_frag, uint64_t desc_b, TC* C_frag) {
  using S = detail::WgmmaShape<M, N, K, NWG, false, TRANS_B, TA, TA, TC, 0, SWB>;
  using R = typename S::R;
  constexpr int NA = S::MI * S::KI * 4;  // A registers per thread
  uint32_t a[NA];
  detail::pack_pairs<NA>(a, A_frag);
  auto issue = [&](R* acc) {
    detail::fence_regs<NA>(a);
    detail::issue_all<S, CLEAR_ACCUM>(acc, [&](R* c, int ks, int mi, int ni, int sd) {
      const uint32_t* ar = a + (mi * S::KI + ks) * 4;
      detail::Wgmma<S::kN, R>::template rs<TA, !TRANS_B>(c, ar[0], ar[1], ar[2], ar[3],
                                                         S::desc_b(desc_b, ks, ni), sd);
    });
  };
  if constexpr (detail::is_same_v<TC, float>) {
    issue(C_frag);
  } else {
    uint32_t acc[S::kRegs];
    detail::pack_pairs<S::kRegs>(acc, C_frag);
    issue(acc);
    detail::wgmma_wait_sync<0>();
    detail::fence_regs<NA>(a);
    detail::fence_regs<S::kRegs>(acc);
    detail::unpack_pairs<S::kRegs>(C_frag, acc);
  }
}

template <int PENDING>
TL_DEVICE void wait_wgmma() {
  detail::wgmma_wait_sync<PENDING>();
}
template <int COUNT>
TL_DEVICE void wgmma_fence_accumulator(float* C_frag) {
  detail::fence_regs<COUNT>(C_frag);
}

// Keeps the COUNT 16-bit values of a register fragment live up to this point
// (after the wgmma_wait that retires an asynchronous wgmma reading them).
template <int COUNT, typename T>
TL_DEVICE void wgmma_fence_operand(T* frag) {
  static_assert(sizeof(T) == 2 && COUNT % 2 == 0, "16-bit fragments of an even size");
  uint32_t r[COUNT / 2];
  detail::pack_pairs<COUNT / 2>(r, frag);
  detail::fence_regs<COUNT / 2>(r);
  detail::unpack_pairs<COUNT / 2>(frag, r);
}

}  // namespace tl
