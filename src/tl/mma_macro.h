// Copyright the TileLang compiler authors.
//
// Warp-level tensor-core steps for hand-written GEMMs (upstream's
// ``TensorCoreIntrinEmitter``, tilelang/cuda/intrinsics/macro): the Python
// emitter computes each lane's shared-memory address and register offsets and
// calls these wrappers, one PTX instruction each.
//
//   ptx_ldmatrix<NUM, TRANS>(smem, regs)  ldmatrix.sync.aligned.m8n8.xNUM[.trans]
//                                          .shared.b16: NUM 32-bit registers
//                                          stored at `regs` (any element type)
//   mma_sync<TA, TB, TC>(c, a, b)          one mma.sync m16n8kK (K = 32 bytes
//                                          of TA): a = 4 registers, b = 2, c = 4
//                                          accumulator elements (m16n8 layout)
//
// Register arrays are read and written with memcpy, so the element arrays of
// the kernel (`half A_local[32]`) need no 4-byte alignment.
#pragma once

#include "gemm_sm80.h"

namespace tl {

template <int NUM, bool TRANS, class TS, class TR>
TL_DEVICE void ptx_ldmatrix(const TS* smem, TR* regs) {
  static_assert(NUM == 1 || NUM == 2 || NUM == 4, "ldmatrix loads 1, 2 or 4 matrices");
  uint32_t addr = smem_addr(smem);
  uint32_t r[NUM];
  if constexpr (NUM == 4) {
    detail::ldsm_x4<TRANS>(addr, r[0], r[1], r[2], r[3]);
  } else if constexpr (NUM == 2) {
    detail::ldsm_x2<TRANS>(addr, r[0], r[1]);
  } else if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(addr));
  }
  memcpy(regs, r, sizeof(r));
}

template <class TA, class TB, class TC>
TL_DEVICE void mma_sync(TC* c, const TA* a, const TB* b) {
  constexpr int PA = 4 / sizeof(TA), PB = 4 / sizeof(TB);
  uint32_t ra[4], rb[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) ra[i] = detail::pack_reg(a + i * PA);
#pragma unroll
  for (int i = 0; i < 2; ++i) rb[i] = detail::pack_reg(b + i * PB);
  detail::Mma<TA, TB, TC>::run(c, ra, rb);
}

// ---------------------------------------------------------------------------
// 2:4 structured-sparse block GEMM (T.gemm_sp) with mma.sp m16n8k32, 16-bit
// A and B:
//   gemm_sp_ss<M, N, K, WARP_M, WARP_N, TRANS_B, CLEAR_ACCUM, LDA, LDE, LDB>(
//       A, E, B, C)
// C (M x N, the m16n8 accumulator layout of gemm_sm80.h over WARP_M x
// WARP_N warps) += A_dense (M x K) * B.  Shared memory, row-major, no
// swizzle: A holds the kept values, M x K/2 (row stride LDA); E the metadata,
// M x K/EF elements (row stride LDE; EF = 4 * bits(TE) / 4 K elements per
// element): per group of 4 K elements 4 bits (the two kept in-group indices,
// increasing, 2 bits each), groups little-endian; B is K x N (stride LDB) or,
// with TRANS_B, N x K.  Metadata lanes: with sparsity selector 0, lane t of a
// quad (t = 0, 1; 2, 3 repeat them) gives K columns [16t, 16t + 16) of the
// step for rows g (bits 0-15) and g + 8 (bits 16-31).  Where A's and B's rows
// are 16-byte multiples they are read with ldmatrix (B once per k-step for all
// of a warp's rows), optionally from gemm_sm80.h's swizzled layout.
namespace detail {

template <class TE, int LDE>
TL_DEVICE uint32_t sparse_meta16(const TE* E, int row, int k0) {
  constexpr int EF = static_cast<int>(sizeof(TE)) * 8;  // K elements per metadata element
  uint32_t bits = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int k = k0 + 4 * j;
    const uint32_t word = static_cast<uint32_t>(E[row * LDE + k / EF]) & (EF == 32 ? 0xffffffffu : ((1u << EF) - 1));
    bits |= ((word >> ((k % EF) / 4 * 4)) & 0xfu) << (4 * j);
  }
  return bits;
}

template <class T>
TL_DEVICE uint32_t pack_pair(T lo, T hi) {
  uint16_t l, h;
  memcpy(&l, &lo, 2);
  memcpy(&h, &hi, 2);
  return static_cast<uint32_t>(l) | (static_cast<uint32_t>(h) << 16);
}

template <class TA, class TC>
struct MmaSp;

#define TL_MMA_SP_F32(TA, TY)                                                                     \
  template <>                                                                                     \
  struct MmaSp<TA, float> {                                                                       \
    static TL_DEVICE void run(float* c, const uint32_t* a, const uint32_t* b, uint32_t e) {       \
      asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32." TY "." TY        \
                   ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, "                \
                   "{%0, %1, %2, %3}, %12, 0x0;\n"                                                \
                   : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                               \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), \
                     "r"(b[3]), "r"(e));                                                          \
    }                                                                                             \
  };
TL_MMA_SP_F32(half, "f16")
TL_MMA_SP_F32(__nv_bfloat16, "bf16")
#undef TL_MMA_SP_F32

template <>
struct MmaSp<half, half> {
  static TL_DEVICE void run(half* c, const uint32_t* a, const uint32_t* b, uint32_t e) {
    uint32_t d[2] = {pack_pair(c[0], c[1]), pack_pair(c[2], c[3])};
    asm volatile(
        "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f16.f16.f16.f16 {%0, %1}, "
        "{%2, %3, %4, %5}, {%6, %7, %8, %9}, {%0, %1}, %10, 0x0;\n"
        : "+r"(d[0]), "+r"(d[1])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]),
          "r"(e));
    memcpy(c, d, 8);
  }
};

}  // namespace detail

// The 16 metadata bits of row `row` for the 32 K elements from k0 (a multiple of 16): the
// metadata is a little-endian bit stream of 4 bits per 4 K elements, so they are the 2 bytes
// from byte k0 / 8 of the row, whatever the element type TE.
template <class TE, int LDE>
TL_DEVICE uint32_t sparse_meta_row(const TE* E, int row, int k0) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(E + row * LDE) + k0 / 8;
  return static_cast<uint32_t>(bytes[0]) | (static_cast<uint32_t>(bytes[1]) << 8);
}

// Element offset of (r, c) in a row-major tile of row stride LD, XOR-swizzled as gemm_sm80.h's
// operands are (swizzle_offset) when SWZ.
template <int LD, bool SWZ>
TL_DEVICE int sp_offset(int r, int c) {
  if constexpr (SWZ) {
    return swizzle_offset<LD, 2>(r, c);
  } else {
    return r * LD + c;
  }
}

// SWZ_A / SWZ_B: A / B are stored with gemm_sm80.h's XOR swizzle (whole tiles; the lowering
// passes them so when layout inference gave them that layout), which the ldmatrix path reads
// without bank conflicts; E is always row-major.
template <int M, int N, int K, int WARP_M, int WARP_N, bool TRANS_B, bool CLEAR_ACCUM, int LDA,
          int LDE, int LDB, bool SWZ_A = false, bool SWZ_B = false, class TA, class TE, class TB, class TC>
TL_DEVICE void gemm_sp_ss(const TA* A, const TE* E, const TB* B, TC* C) {
  static_assert(sizeof(TA) == 2 && detail::is_same_v<TA, TB>, "tl::gemm_sp: 16-bit A and B of one type");
  static_assert(K % 32 == 0, "tl::gemm_sp: K must be a multiple of 32");
  constexpr int WM = M / WARP_M, WN = N / WARP_N, MI = WM / 16, NI = WN / 8;
  static_assert(WM % 16 == 0 && WN % 8 == 0, "tl::gemm_sp: each warp takes 16-row x 8-column blocks");
  const int warp = static_cast<int>(threadIdx.x / 32) % (WARP_M * WARP_N);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  const int row0 = (warp % WARP_M) * WM, col0 = (warp / WARP_M) * WN;
  if constexpr (CLEAR_ACCUM) {
#pragma unroll
    for (int i = 0; i < MI * NI * 4; ++i) C[i] = TC(0);
  }
  static_assert(!(SWZ_A || SWZ_B) || (LDA % 8 == 0 && LDB % 8 == 0), "tl::gemm_sp: swizzled rows are 16-byte multiples");
  if constexpr (LDA % 8 == 0 && LDB % 8 == 0) {
    // Rows of 16-byte multiples: the operands come in with ldmatrix, B once per k-step for all of
    // the warp's rows. ldmatrix lane i addresses row i % 8 of matrix i / 8; register j of lane
    // (g, t) is matrix j's row g, elements 2t and 2t + 1 (with .trans: column g, rows 2t, 2t + 1).
    const int mrow = lane % 8, mat = lane / 8;
#pragma unroll 1
    for (int ks = 0; ks < K / 32; ++ks) {
      uint32_t b[NI][4];
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int n0 = col0 + ni * 8;
        // matrix q: K rows [ks * 32 + 8q, + 8) at N columns [n0, n0 + 8)
        const TB* p = TRANS_B ? B + sp_offset<LDB, SWZ_B>(n0 + mrow, ks * 32 + 8 * mat)
                              : B + sp_offset<LDB, SWZ_B>(ks * 32 + 8 * mat + mrow, n0);
        detail::ldsm_x4<!TRANS_B>(smem_addr(p), b[ni][0], b[ni][1], b[ni][2], b[ni][3]);
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const int r0 = row0 + mi * 16;
        // matrices: rows r0 / r0 + 8 (mat % 2) x compressed columns ks * 16 / + 8 (mat / 2)
        uint32_t a[4];
        detail::ldsm_x4<false>(smem_addr(A + sp_offset<LDA, SWZ_A>(r0 + mrow + 8 * (mat % 2), ks * 16 + 8 * (mat / 2))),
                               a[0], a[1], a[2], a[3]);
        const int km = ks * 32 + 16 * (t % 2);
        const uint32_t e = sparse_meta_row<TE, LDE>(E, r0 + g, km) |
                           (sparse_meta_row<TE, LDE>(E, r0 + g + 8, km) << 16);
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) detail::MmaSp<TA, TC>::run(C + (mi * NI + ni) * 4, a, b[ni], e);
      }
    }
    return;
  }
#pragma unroll 1
  for (int ks = 0; ks < K / 32; ++ks) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int r = row0 + mi * 16 + g;
      const int kc = ks * 16 + 2 * t;  // compressed column
      uint32_t a[4];
      a[0] = detail::pack_pair(A[r * LDA + kc], A[r * LDA + kc + 1]);
      a[1] = detail::pack_pair(A[(r + 8) * LDA + kc], A[(r + 8) * LDA + kc + 1]);
      a[2] = detail::pack_pair(A[r * LDA + kc + 8], A[r * LDA + kc + 9]);
      a[3] = detail::pack_pair(A[(r + 8) * LDA + kc + 8], A[(r + 8) * LDA + kc + 9]);
      const int km = ks * 32 + 16 * (t % 2);
      const uint32_t e = detail::sparse_meta16<TE, LDE>(E, r, km) |
                         (detail::sparse_meta16<TE, LDE>(E, r + 8, km) << 16);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int n = col0 + ni * 8 + g;
        uint32_t b[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int k = ks * 32 + 8 * q + 2 * t;
          b[q] = TRANS_B ? detail::pack_pair(B[n * LDB + k], B[n * LDB + k + 1])
                         : detail::pack_pair(B[k * LDB + n], B[(k + 1) * LDB + n]);
        }
        detail::MmaSp<TA, TC>::run(C + (mi * NI + ni) * 4, a, b, e);
      }
    }
  }
}

}  // namespace tl
