// Copyright the TileLang compiler authors.
//
// 2:4 structured-sparse block GEMM on sm_90a tensor cores (T.gemm_sp through
// wgmma.mma_async.sp):
//
//   wgmma_sp_gemm_ss<M, N, K, NUM_WARPGROUPS_M, TRANS_B, CLEAR_ACCUM, LDE,
//                    TA, TE, TB, TC>(A_smem, E_smem, B_smem, C_frag)
//
// computes C += A_dense * B (C = ... when CLEAR_ACCUM) for one M x N x K block
// tile, A_dense being the M x K matrix whose rows keep 2 of every 4 K elements.
// The operands (half or bfloat16, float accumulation):
//   A_smem  the kept values, M x K/2, K major, in the wgmma slab layout of
//           gemm_sm90.h (ROWS = M, COLS = K/2);
//   B_smem  K x N (N major) or, with TRANS_B, N x K (K major), slab layout;
//   E_smem  the metadata, M x K/EF elements of TE (row stride LDE, row-major,
//           EF = bits(TE) K elements per element): per group of 4 K elements 4
//           bits (the two kept in-group indices, increasing), groups
//           little-endian, as for tl::gemm_sp_ss (mma_macro.h).
// NUM_WARPGROUPS_M warpgroups split M into 64-row multiples as for
// wgmma_gemm_ss; C_frag has its accumulator layout.  Each 32-wide K step of
// each 64-row block is one m64nNk32 instruction: A's descriptor steps 16 kept
// columns, B's 32 K rows; the metadata register of a thread is that of mma.sp
// m16n8k32 for its warp's 16 rows (sparsity selector 0: lane t = 0, 1 of a
// quad gives K columns [16t, 16t + 16) of the step for rows g, bits 0-15, and
// g + 8, bits 16-31; lanes 2 and 3 load the same and are ignored).  Ends with
// wgmma.wait_group 0; the same requirements as wgmma_gemm_ss (1024-byte
// aligned A and B, fence_proxy_async after ordinary stores).
#pragma once

#include "gemm_sm90.h"

namespace tl {
namespace detail {

// The 16 metadata bits of K columns [k0, k0 + 16) of row ``row`` (k0 a
// multiple of 16): the row's groups are little-endian 4-bit fields whatever
// TE is, so they are the 16 bits k0/8 bytes into the row, one 16-bit read.
template <class TE, int LDE>
TL_DEVICE uint32_t sparse_meta_half(const TE* E, int row, int k0) {
  const char* p = reinterpret_cast<const char*>(E + row * LDE) + k0 / 8;
  return *reinterpret_cast<const unsigned short*>(p);
}

}  // namespace detail

template <int M, int N, int K, int NUM_WARPGROUPS_M, bool TRANS_B, bool CLEAR_ACCUM, int LDE,
          typename TA, typename TE, typename TB, typename TC>
TL_DEVICE void wgmma_sp_gemm_ss(const TA* A_smem, const TE* E_smem, const TB* B_smem, TC* C_frag) {
  static_assert(detail::is_same_v<TC, float>, "tl::wgmma_sp_gemm_ss: float accumulation");
  static_assert(K % 32 == 0, "tl::wgmma_sp_gemm_ss: K must be a multiple of 32");
  // A's geometry is that of a dense K/2-wide operand (16 kept columns per
  // step), B's that of the dense K x N operand (two dense steps per sparse one).
  using SA = detail::WgmmaShape<M, N, K / 2, NUM_WARPGROUPS_M, false, TRANS_B, TA, TB, TC>;
  using SB = detail::WgmmaShape<M, N, K, NUM_WARPGROUPS_M, false, TRANS_B, TA, TB, TC>;
  static_assert(SA::NI == 1, "tl::wgmma_sp_gemm_ss: N per warpgroup must be at most 256");
  uint32_t wm, wn;
  detail::warpgroup_coords<SA>(wm, wn);
  const uint64_t da0 = SA::desc_a0(smem_addr(A_smem), wm);
  const uint64_t db0 = SB::desc_b0(smem_addr(B_smem), wn);
  const int t = static_cast<int>(threadIdx.x) % 128;
  const int row = static_cast<int>(wm) * SA::MW + (t / 32) * 16 + (t % 32) / 4;
  const int half_k = 16 * (t % 2);
  // every metadata register first: the instructions then issue back to back
  uint32_t e[K / 32][SA::MI];
#pragma unroll
  for (int ks = 0; ks < K / 32; ++ks) {
#pragma unroll
    for (int mi = 0; mi < SA::MI; ++mi) {
      const int r = row + mi * 64, k0 = ks * 32 + half_k;
      e[ks][mi] = detail::sparse_meta_half<TE, LDE>(E_smem, r, k0) |
                  (detail::sparse_meta_half<TE, LDE>(E_smem, r + 8, k0) << 16);
    }
  }
  detail::fence_regs<SA::kRegs>(C_frag);
  detail::wgmma_fence_sync();
#pragma unroll
  for (int ks = 0; ks < K / 32; ++ks) {
#pragma unroll
    for (int mi = 0; mi < SA::MI; ++mi) {
      detail::Wgmma<SA::kN, float>::template sp<TA, !TRANS_B>(
          C_frag + mi * SA::kBlockRegs, SA::desc_a(da0, mi, ks), SB::desc_b(db0, 2 * ks), e[ks][mi],
          (CLEAR_ACCUM && ks == 0) ? 0 : 1);
    }
  }
  detail::wgmma_commit_sync();
  detail::wgmma_wait_sync<0>();
  detail::fence_regs<SA::kRegs>(C_frag);
}

}  // namespace tl
