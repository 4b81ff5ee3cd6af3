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
// tile.  Each takes an optional last argument int scale_d0 (default 1): 0 makes
// a call with CLEAR_ACCUM false clear C too, decided at run time (the first K
// step's wgmma issues with scale-d = 0; transform/fuse_clear.py).
// NUM_WARPGROUPS_M warpgroups (128 consecutive threads each, starting
// at a thread index divisible by 128) split M: warpgroup
// wg = (threadIdx.x / 128) % NUM_WARPGROUPS_M owns rows [wg*MW, wg*MW + MW),
// MW = M / NUM_WARPGROUPS_M, a multiple of 64, and all N columns.  In place
// of NUM_WARPGROUPS_M, Warpgroups<NWG_M, NWG_N> also splits N (for M too
// small to split over all warpgroups): warpgroup
// wg = (threadIdx.x / 128) % (NWG_M * NWG_N) = wm + NWG_M * wn owns rows
// [wm*MW, wm*MW + MW), MW = M / NWG_M, and columns [wn*NW, wn*NW + NW),
// NW = N / NWG_N, issuing m64nNWk16 instructions over its slice of B; in
// what follows, read N as NW and add wn*NW to every column.  Every
// thread of these warpgroups calls the function (the instructions are
// warpgroup-collective); other warpgroups of the block (a TMA producer, say)
// must not, and should be numbered after the GEMM ones so that the formula
// above gives 0..NUM_WARPGROUPS_M-1.  wgmma_gemm_ss/rs end with
// wgmma.wait_group 0, so C_frag is complete and A/B may be overwritten when
// they return (after a barrier, for other threads' writes).
//
// Types (TA, TB -> TC): half, half -> float; bf16, bf16 -> float;
// half, half -> half (fp16 accumulation); and, with A and B both in shared
// memory and both K major (!TRANS_A, TRANS_B), 8-bit floats (e4m3 / e5m2, in
// any pairing) -> float or half; and, both K major (A in shared memory or
// registers), float, float -> float as tf32 (the tensor core ignores the low
// 13 mantissa bits: nothing rounds).  K is a multiple of 16 (32 for 8-bit,
// 8 for tf32), N a multiple of 8 (of 16 for fp16 accumulation).  Each k-step
// of each 64-row block is one m64nNk16 (m64nNk32 for 8-bit, m64nNk8 for tf32)
// instruction for N <= 256 (the
// widest there is); past
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
// With NWG_N > 1 the N warpgroups of one wm hold the same A elements.
// For MI = 1 this equals the accumulator layout for N = K: a float C_frag
// converted element by element to TA is a valid A_frag for the next GEMM
// (P @ V in attention).  For tf32 (one element per register, k-step 8, KI =
// K / 8) element (r, k) of the 64 x 8 sub-tile (mi, ki) belongs to lane
// (rr % 8) * 4 + k % 4 at index ((mi * KI + ki) * 2 + k / 4) * 2 + rr / 8:
// in 32-bit words, the 16-bit layout.  TRANS_A is ignored by the register
// variants.
//
// Compiled for anything but sm_90a the functions trap at run time.
#pragma once

#include "barrier.h"
#include "common.h"
#include "fp8.h"
#include "wgmma_inst.h"

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

// Keeps the compiler from moving accesses of accumulator (or register A)
// values across the asynchronous region: each register is "rewritten" by an
// empty volatile asm, ordered with the wgmma fence / wait asm around it.
TL_DEVICE void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
TL_DEVICE void fence_reg(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// Compile-time geometry of one warpgroup GEMM (see the top of this file).
template <int M, int N, int K, int NWG, bool TRANS_A, bool TRANS_B, class TA, class TB,
          class TC, int SWA_OVERRIDE = 0, int SWB_OVERRIDE = 0, int NWG_N = 1>
struct WgmmaShape {
  static constexpr bool kFp8 = is_fp8_v<TA> && is_fp8_v<TB>;
  static constexpr bool kTf32 = is_same_v<TA, float> && is_same_v<TB, float>;
  static_assert((is_same_v<TA, TB> && is_16bit_float_v<TA>) || kFp8 || kTf32,
                "tl::wgmma_gemm: A and B must both be half, both bfloat16, both 8-bit floats or both "
                "float (tf32)");
  static_assert(!(kFp8 || kTf32) || (!TRANS_A && TRANS_B),
                "tl::wgmma_gemm: 8-bit and tf32 operands must both be K major (A M x K, B N x K)");
  static_assert(is_same_v<TC, float> ||
                    (is_same_v<TC, half> && (is_same_v<TA, half> || kFp8)),
                "tl::wgmma_gemm: the accumulator is float, or half for half or 8-bit inputs");
  static constexpr int E = sizeof(TA);  // operand element bytes
  static constexpr int KS = 32 / E;     // K per instruction: k16 (16-bit), k32 (8-bit), k8 (tf32)
  static constexpr int kWarpgroupsM = NWG, kWarpgroupsN = NWG_N;
  static_assert(NWG_N >= 1 && N % NWG_N == 0, "tl::wgmma_gemm: N must split evenly over the N warpgroups");
  static constexpr int NW = N / NWG_N;  // columns per warpgroup
  static constexpr int kN = wgmma_inst_n(NW);  // the instruction's N
  static constexpr int NI = kN ? NW / kN : 1;  // instructions across a warpgroup's columns
  static constexpr int MW = M / NWG;  // rows per warpgroup
  static constexpr int MI = MW / 64;  // m64 blocks per warpgroup
  static constexpr int KI = K / KS;   // instruction k-steps
  static_assert(NWG >= 1 && M % NWG == 0 && MW % 64 == 0,
                "tl::wgmma_gemm: M / NUM_WARPGROUPS_M must be a multiple of 64");
  static_assert(K % KS == 0, "tl::wgmma_gemm: K must be a multiple of 16 (32 for 8-bit, 8 for tf32 operands)");
  static_assert(NW % 8 == 0 && NW >= 8 && kN != 0,
                "tl::wgmma_gemm: N per warpgroup must be 8, 16, ..., 256 or a multiple of 16 past 256");
  static_assert(is_same_v<TC, float> || NW % 16 == 0,
                "tl::wgmma_gemm: fp16 accumulation needs N per warpgroup to be a multiple of 16");
  static constexpr int kElems = MI * NW / 2;  // TC elements of C_frag per thread
  // Accumulator registers: per m64 block (kBlockRegs), per instruction
  // (kInstRegs, at offset ni * kInstRegs in the block) and in all.
  static constexpr int kBlockRegs = is_same_v<TC, float> ? NW / 2 : NW / 4;
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
  static_assert(NWG_N == 1 || TRANS_B || NW % WB == 0,
                "tl::wgmma_gemm: with an N-major B, each N warpgroup's columns must be whole swizzle slabs");

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
  // Byte offset of the 64 x KS A sub-tile at rows m0 (of the warpgroup's
  // rows), k-step ks.
  static constexpr __host__ __device__ uint32_t a_offset(int m0, int ks) {
    const int k0 = ks * KS;
    return TRANS_A ? (m0 / WA) * K * SWA + k0 * SWA
                   : (k0 / WA) * M * SWA + m0 * SWA + (k0 % WA) * E;
  }
  // Byte offset of N warpgroup wn's first column of B.
  static constexpr uint32_t kBWarpgroupBytes = TRANS_B ? NW * SWB : (NW / WB) * K * SWB;
  // Byte offset of the kN x KS B sub-tile at k-step ks, instruction ni
  // (columns [ni * kN, ni * kN + kN) of the warpgroup's columns).
  static constexpr __host__ __device__ uint32_t b_offset(int ks, int ni = 0) {
    const int k0 = ks * KS, n0 = ni * kN;
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
  static __host__ __device__ uint64_t desc_b0(uint32_t b_smem, uint32_t wn = 0) {
    return kDescB | (((b_smem + wn * kBWarpgroupBytes) & kAddrMask) >> 4);
  }
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

// The calling thread's (M warpgroup, N warpgroup) of the block GEMM of shape
// S: warpgroup wg = wm + NWG_M * wn.
template <class S>
TL_DEVICE void warpgroup_coords(uint32_t& wm, uint32_t& wn) {
  const uint32_t wg = static_cast<uint32_t>(warpgroup_index<S::kWarpgroupsM * S::kWarpgroupsN>());
  if constexpr (S::kWarpgroupsN == 1) {
    wm = wg;
    wn = 0;
  } else {
    wm = wg % S::kWarpgroupsM;
    wn = wg / S::kWarpgroupsM;
  }
}

// Packs an array into the 32-bit registers wgmma takes, 4 bytes each (two
// 16-bit values with the lower index in the low half, or one float), and
// back.  memcpy keeps this valid for arrays aligned only to their element
// size and compiles to nothing when the array already lives in registers.
template <int COUNT, class T>
TL_DEVICE void pack_pairs(uint32_t* dst, const T* src) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16- or 32-bit elements");
#pragma unroll
  for (int i = 0; i < COUNT; ++i) memcpy(&dst[i], reinterpret_cast<const char*>(src) + 4 * i, 4);
}
template <int COUNT, class T>
TL_DEVICE void unpack_pairs(T* dst, const uint32_t* src) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16- or 32-bit elements");
#pragma unroll
  for (int i = 0; i < COUNT; ++i) memcpy(reinterpret_cast<char*>(dst) + 4 * i, &src[i], 4);
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
// scale_d0 is the first K step's scale-d where CLEAR_ACCUM is false: 0 (a run-time
// clear, transform/fuse_clear.py) or 1 (accumulate).
template <class S, bool CLEAR_ACCUM, class One>
TL_DEVICE void issue_all(typename S::R* acc, One one, int scale_d0 = 1) {
  if constexpr (CLEAR_ACCUM) {
    // Zeros, not the registers' stale values, go into the fence below: ptxas then
    // issues the first wgmma with RZ inputs and the old values die where they were
    // last read (fenced as they are, they would stay live up to here).
#pragma unroll
    for (int i = 0; i < S::kRegs; ++i) acc[i] = typename S::R(0);
  }
  fence_regs<S::kRegs>(acc);
  wgmma_fence_sync();
#pragma unroll
  for (int ks = 0; ks < S::KI; ++ks) {
#pragma unroll
    for (int mi = 0; mi < S::MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < S::NI; ++ni) {
        one(acc + mi * S::kBlockRegs + ni * S::kInstRegs, ks, mi, ni, ks == 0 ? (CLEAR_ACCUM ? 0 : scale_d0) : 1);
      }
    }
  }
  wgmma_commit_sync();
}

// Issues every wgmma of one block GEMM with both operands in shared memory
// and commits them as one group.
template <class S, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, class TA, class TB = TA>
TL_DEVICE void issue_ss(const void* A, const void* B, typename S::R* acc, int scale_d0 = 1) {
  uint32_t wm, wn;
  warpgroup_coords<S>(wm, wn);
  const uint64_t da0 = S::desc_a0(smem_addr(A), wm);
  const uint64_t db0 = S::desc_b0(smem_addr(B), wn);
  issue_all<S, CLEAR_ACCUM>(acc, [&](typename S::R* c, int ks, int mi, int ni, int sd) {
    Wgmma<S::kN, typename S::R>::template ss<TA, TRANS_A, !TRANS_B, TB>(c, S::desc_a(da0, mi, ks),
                                                                       S::desc_b(db0, ks, ni), sd);
  }, scale_d0);
}

// Issues every wgmma of one block GEMM with A in registers (NA packed 32-bit
// registers) and B in shared memory, and commits them as one group.
template <class S, int NA, bool TRANS_B, bool CLEAR_ACCUM, class TA>
TL_DEVICE void issue_rs(uint32_t* a, const void* B, typename S::R* acc, int scale_d0 = 1) {
  uint32_t wm = 0, wn = 0;
  if constexpr (S::kWarpgroupsN > 1) warpgroup_coords<S>(wm, wn);
  const uint64_t db0 = S::desc_b0(smem_addr(B), wn);
  fence_regs<NA>(a);
  issue_all<S, CLEAR_ACCUM>(acc, [&](typename S::R* c, int ks, int mi, int ni, int sd) {
    const uint32_t* ar = a + (mi * S::KI + ks) * 4;
    Wgmma<S::kN, typename S::R>::template rs<TA, !TRANS_B>(c, ar[0], ar[1], ar[2], ar[3], S::desc_b(db0, ks, ni),
                                                           sd);
  }, scale_d0);
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

// The warpgroup arrangement of a block GEMM whose warpgroups split N (or both
// M and N): Warpgroups<NWG_M, NWG_N> in place of NUM_WARPGROUPS_M (which is
// Warpgroups<NUM_WARPGROUPS_M, 1>).  SWA / SWB (bytes, 0: derived from the
// operand's row) give an operand laid out in swizzle slabs narrower than its
// row's: an N-major B whose N warpgroups' columns are not whole slabs of the
// row's swizzle takes slabs as wide as those columns.
template <int NWG_M, int NWG_N, int SWA = 0, int SWB = 0>
struct Warpgroups {
  static constexpr int kM = NWG_M, kN = NWG_N, kSwA = SWA, kSwB = SWB;
};

// Block GEMM with both operands in shared memory (see the top of this file).
template <int M, int N, int K, class WG, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, typename TA,
          typename TB, typename TC>
TL_DEVICE void wgmma_gemm_ss(const TA* A_smem, const TB* B_smem, TC* C_frag, int scale_d0 = 1) {
  using S = detail::WgmmaShape<M, N, K, WG::kM, TRANS_A, TRANS_B, TA, TB, TC, WG::kSwA, WG::kSwB, WG::kN>;
  if constexpr (detail::is_same_v<TC, float>) {
    detail::issue_ss<S, TRANS_A, TRANS_B, CLEAR_ACCUM, TA, TB>(A_smem, B_smem, C_frag, scale_d0);
    detail::wgmma_wait_sync<0>();
    detail::fence_regs<S::kRegs>(C_frag);
  } else {
    uint32_t acc[S::kRegs];
    detail::pack_pairs<S::kRegs>(acc, C_frag);
    detail::issue_ss<S, TRANS_A, TRANS_B, CLEAR_ACCUM, TA, TB>(A_smem, B_smem, acc, scale_d0);
    detail::wgmma_wait_sync<0>();
    detail::fence_regs<S::kRegs>(acc);
    detail::unpack_pairs<S::kRegs>(C_frag, acc);
  }
}
template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_A, bool TRANS_B,
          bool CLEAR_ACCUM, typename TA, typename TB, typename TC>
TL_DEVICE void wgmma_gemm_ss(const TA* A_smem, const TB* B_smem, TC* C_frag, int scale_d0 = 1) {
  wgmma_gemm_ss<M, N, K, Warpgroups<NUM_WARPGROUPS_M, 1>, TRANS_A, TRANS_B, CLEAR_ACCUM, TA, TB, TC>(
      A_smem, B_smem, C_frag, scale_d0);
}

// wgmma_gemm_ss without the final wait (float accumulators only): the
// wgmma run in the background while the warpgroup goes on, e.g. to wait for
// the next stage's TMA.  Before C_frag is read or written again, and before
// A or B are overwritten, call wgmma_wait<P, MI * N / 2>(C_frag) with P the
// number of later groups that may stay in flight (N / NWG_N for N
// warpgroups).
template <int M, int N, int K, class WG, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, typename TA,
          typename TB>
TL_DEVICE void wgmma_gemm_ss_async(const TA* A_smem, const TB* B_smem, float* C_frag, int scale_d0 = 1) {
  using S = detail::WgmmaShape<M, N, K, WG::kM, TRANS_A, TRANS_B, TA, TB, float, WG::kSwA, WG::kSwB, WG::kN>;
  detail::issue_ss<S, TRANS_A, TRANS_B, CLEAR_ACCUM, TA, TB>(A_smem, B_smem, C_frag, scale_d0);
}
template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_A, bool TRANS_B,
          bool CLEAR_ACCUM, typename TA, typename TB>
TL_DEVICE void wgmma_gemm_ss_async(const TA* A_smem, const TB* B_smem, float* C_frag, int scale_d0 = 1) {
  wgmma_gemm_ss_async<M, N, K, Warpgroups<NUM_WARPGROUPS_M, 1>, TRANS_A, TRANS_B, CLEAR_ACCUM, TA, TB>(
      A_smem, B_smem, C_frag, scale_d0);
}

// Block GEMM with A in registers (layout at the top of this file) and B in
// shared memory.  TRANS_A is ignored.  With N warpgroups each holds the whole
// A rows of its M warpgroup (A_frag is replicated over them).
template <int M, int N, int K, class WG, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, typename TA,
          typename TB, typename TC>
TL_DEVICE void wgmma_gemm_rs(const TA* A_frag, const TB* B_smem, TC* C_frag, int scale_d0 = 1) {
  static_assert(!detail::is_fp8_v<TA>, "tl::wgmma_gemm: an 8-bit A operand must be in shared memory");
  using S = detail::WgmmaShape<M, N, K, WG::kM, false, TRANS_B, TA, TB, TC, WG::kSwA, WG::kSwB, WG::kN>;
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
  detail::issue_rs<S, NA, TRANS_B, CLEAR_ACCUM, TA>(a, B_smem, acc, scale_d0);
  detail::wgmma_wait_sync<0>();
  // The A registers are read asynchronously: keep them alive until here.
  detail::fence_regs<NA>(a);
  detail::fence_regs<S::kRegs>(acc);
  if constexpr (!detail::is_same_v<TC, float>) detail::unpack_pairs<S::kRegs>(C_frag, acc_buf);
}
template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_A, bool TRANS_B,
          bool CLEAR_ACCUM, typename TA, typename TB, typename TC>
TL_DEVICE void wgmma_gemm_rs(const TA* A_frag, const TB* B_smem, TC* C_frag, int scale_d0 = 1) {
  wgmma_gemm_rs<M, N, K, Warpgroups<NUM_WARPGROUPS_M, 1>, TRANS_A, TRANS_B, CLEAR_ACCUM, TA, TB, TC>(
      A_frag, B_smem, C_frag, scale_d0);
}

// wgmma_gemm_rs without the final wait (float accumulators only): the wgmma
// run in the background.  Until wgmma_wait<P, COUNT>(C_frag) retires the
// group, neither A_frag nor C_frag may be written; call
// wgmma_fence_operand<NA>(A_frag) right after that wait so that A_frag stays
// live (in registers) up to it.  ptxas checks the register operands of
// in-flight wgmma itself and serialises them (with a performance warning)
// where it cannot prove them safe.
template <int M, int N, int K, class WG, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, typename TA,
          typename TB>
TL_DEVICE void wgmma_gemm_rs_async(const TA* A_frag, const TB* B_smem, float* C_frag, int scale_d0 = 1) {
  static_assert(!detail::is_fp8_v<TA>, "tl::wgmma_gemm: an 8-bit A operand must be in shared memory");
  using S = detail::WgmmaShape<M, N, K, WG::kM, false, TRANS_B, TA, TB, float, WG::kSwA, WG::kSwB, WG::kN>;
  constexpr int NA = S::MI * S::KI * 4;  // A registers per thread
  uint32_t a[NA];
  detail::pack_pairs<NA>(a, A_frag);
  detail::issue_rs<S, NA, TRANS_B, CLEAR_ACCUM, TA>(a, B_smem, C_frag, scale_d0);
}
template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_A, bool TRANS_B,
          bool CLEAR_ACCUM, typename TA, typename TB>
TL_DEVICE void wgmma_gemm_rs_async(const TA* A_frag, const TB* B_smem, float* C_frag, int scale_d0 = 1) {
  wgmma_gemm_rs_async<M, N, K, Warpgroups<NUM_WARPGROUPS_M, 1>, TRANS_A, TRANS_B, CLEAR_ACCUM, TA, TB>(
      A_frag, B_smem, C_frag, scale_d0);
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

// (Warpgroups<NWG_M, NWG_N> in place of NWG: warpgroups splitting N too.)
template <int M, int N, int K, class WG, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, int SWA,
          int SWB, typename TA, typename TC>
TL_DEVICE void wgmma_gemm_ss_desc(uint64_t desc_a, uint64_t desc_b, TC* C_frag) {
  using S = detail::WgmmaShape<M, N, K, WG::kM, TRANS_A, TRANS_B, TA, TA, TC, SWA, SWB, WG::kN>;
  using R = typename S::R;
  uint32_t wm, wn;
  detail::warpgroup_coords<S>(wm, wn);
  const uint64_t da0 = desc_a + ((wm * S::kAWarpgroupBytes) >> 4);
  uint64_t db0 = desc_b;
  if constexpr (WG::kN > 1) db0 += (wn * S::kBWarpgroupBytes) >> 4;
  auto issue = [&](R* acc) {
    detail::issue_all<S, CLEAR_ACCUM>(acc, [&](R* c, int ks, int mi, int ni, int sd) {
      detail::Wgmma<S::kN, R>::template ss<TA, TRANS_A, !TRANS_B>(c, S::desc_a(da0, mi, ks),
                                                                 S::desc_b(db0, ks, ni), sd);
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
template <int M, int N, int K, int NWG, bool TRANS_A, bool TRANS_B, bool CLEAR_ACCUM, int SWA,
          int SWB, typename TA, typename TC>
TL_DEVICE void wgmma_gemm_ss_desc(uint64_t desc_a, uint64_t desc_b, TC* C_frag) {
  wgmma_gemm_ss_desc<M, N, K, Warpgroups<NWG, 1>, TRANS_A, TRANS_B, CLEAR_ACCUM, SWA, SWB, TA, TC>(
      desc_a, desc_b, C_frag);
}

template <int M, int N, int K, class WG, bool TRANS_B, bool CLEAR_ACCUM, int SWB, typename TA,
          typename TC>
TL_DEVICE void wgmma_gemm_rs_desc(const TA* A_frag, uint64_t desc_b, TC* C_frag) {
  static_assert(!detail::is_fp8_v<TA>, "tl::wgmma_gemm: an 8-bit A operand must be in shared memory");
  using S = detail::WgmmaShape<M, N, K, WG::kM, false, TRANS_B, TA, TA, TC, 0, SWB, WG::kN>;
  using R = typename S::R;
  constexpr int NA = S::MI * S::KI * 4;  // A registers per thread
  uint32_t a[NA];
  detail::pack_pairs<NA>(a, A_frag);
  uint64_t db0 = desc_b;
  if constexpr (WG::kN > 1) {
    uint32_t wm, wn;
    detail::warpgroup_coords<S>(wm, wn);
    db0 += (wn * S::kBWarpgroupBytes) >> 4;
  }
  auto issue = [&](R* acc) {
    detail::fence_regs<NA>(a);
    detail::issue_all<S, CLEAR_ACCUM>(acc, [&](R* c, int ks, int mi, int ni, int sd) {
      const uint32_t* ar = a + (mi * S::KI + ks) * 4;
      detail::Wgmma<S::kN, R>::template rs<TA, !TRANS_B>(c, ar[0], ar[1], ar[2], ar[3],
                                                         S::desc_b(db0, ks, ni), sd);
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
template <int M, int N, int K, int NWG, bool TRANS_B, bool CLEAR_ACCUM, int SWB, typename TA,
          typename TC>
TL_DEVICE void wgmma_gemm_rs_desc(const TA* A_frag, uint64_t desc_b, TC* C_frag) {
  wgmma_gemm_rs_desc<M, N, K, Warpgroups<NWG, 1>, TRANS_B, CLEAR_ACCUM, SWB, TA, TC>(A_frag, desc_b, C_frag);
}

template <int PENDING>
TL_DEVICE void wait_wgmma() {
  detail::wgmma_wait_sync<PENDING>();
}
template <int COUNT>
TL_DEVICE void wgmma_fence_accumulator(float* C_frag) {
  detail::fence_regs<COUNT>(C_frag);
}

// Keeps the COUNT 16-bit (or 32-bit, tf32) values of a register fragment live
// up to this point (after the wgmma_wait that retires an asynchronous wgmma
// reading them).
template <int COUNT, typename T>
TL_DEVICE void wgmma_fence_operand(T* frag) {
  static_assert((sizeof(T) == 2 && COUNT % 2 == 0) || sizeof(T) == 4,
                "16-bit fragments of an even size, or 32-bit ones");
  constexpr int W = COUNT * sizeof(T) / 4;
  uint32_t r[W];
  detail::pack_pairs<W>(r, frag);
  detail::fence_regs<W>(r);
  detail::unpack_pairs<W>(frag, r);
}

}  // namespace tl
