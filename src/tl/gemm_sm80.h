// Copyright the TileLang compiler authors.
//
// Warp-level tensor core GEMM for sm_80 and later (it also compiles and runs
// on sm_90a), built from ldmatrix and mma.sync.
//
//   gemm_ss<M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B, CLEAR_ACCUM,
//           LDA, LDB, TA, TB, TC>(const TA* A, const TB* B, TC* C)
//   gemm_rs<M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B, CLEAR_ACCUM,
//           LDB, TA, TB, TC>(const TA* A_frag, const TB* B, TC* C)
//
// compute C += A * B (C = A * B when CLEAR_ACCUM) for one M x N x K block
// tile.  The block must consist of exactly WARP_M * WARP_N warps; warp w
// owns the WM x WN sub-tile at rows wm*WM and columns wn*WN, where
// wm = w % WARP_M, wn = w / WARP_M, WM = M / WARP_M and WN = N / WARP_N.
//
// Element types (TA, TB -> TC), the mma instruction used and KS, the K
// extent of one mma (K must be a multiple of KS):
//   half, half   -> float   m16n8k16, KS = 16
//   bf16, bf16   -> float   m16n8k16, KS = 16
//   half, half   -> half    m16n8k16, KS = 16 (fp16 accumulation)
//   int8/uint8   -> int     m16n8k32, KS = 32
//   s4x2/u4x2    -> int     m16n8k64, KS = 32 bytes = 64 int4 elements (the
//                           caller passes K, LDA, LDB in bytes, both operands
//                           K-major; gemm_ss's PACK: A's code (1: int4, 2:
//                           uint4) + 4 * B's, the pointers are then read as
//                           bytes of two elements)
//   float, float -> float   m16n8k8 on tf32, KS = 8 (inputs are rounded to
//                           tf32 with round-to-nearest, ties away from zero,
//                           except an operand whose bit in TF32 is set)
//
// Shared memory layout.  A is stored as M rows x K columns (!TRANS_A) or
// K rows x M columns (TRANS_A) with a row stride of LDA elements; B is stored
// as K x N (!TRANS_B) or N x K (TRANS_B) with a row stride of LDB.  Stored
// element (r, c) lives at tl::swizzle_offset<LD, sizeof(T)>(r, c), see
// below.  An operand in the slab layout of the wgmma operands (a kernel whose
// other gemms take wgmma, gemm_sm90.h) passes LD = the slab width W and SS =
// ROWS * W, the element stride between slabs: element (r, c) then lives at
// tl::slab_offset<W, sizeof(T), SS>(r, c) (slab c / W, swizzled inside it).
// All 16-bit layouts use ldmatrix.  8-bit and 32-bit elements can
// only use ldmatrix when K is the contiguous dimension (A not transposed,
// B transposed); the other two cases fall back to scalar shared memory loads,
// which are correct but slower.
//
// Accumulator layout (all types).  C holds MI * NI * 4 elements per thread,
// MI = WM / 16 and NI = WN / 8.  Element (r, c) of the warp's m16n8 tile
// (mi, ni), r in [0, 16) and c in [0, 8), belongs to lane (r % 8) * 4 + c / 2
// at index ((mi * NI + ni) * 2 + r / 8) * 2 + c % 2, and is element
// (wm*WM + mi*16 + r, wn*WN + ni*8 + c) of the block tile.
//
// Register A layout (gemm_rs).  With P = 4 / sizeof(TA) elements per 32-bit
// register (2 for 16-bit, 4 for 8-bit, 1 for tf32), KS = 8 * P and
// KI = K / KS, A_frag holds MI * KI * 4 * P elements per thread.  Element
// (r, k) of the warp's 16 x KS sub-tile (mi, ki), r in [0, 16), k in [0, KS),
// is block-tile element (wm*WM + mi*16 + r, ki*KS + k); it belongs to lane
// (r % 8) * 4 + (k % (4 * P)) / P at index
//   (((mi * KI + ki) * 2 + k / (4 * P)) * 2 + r / 8) * P + k % P.
// For 16-bit types this reads: lane (r%8)*4 + (k%8)/2, index
// (((mi*KI + ki)*2 + k/8)*2 + r/8)*2 + k%2.  For int8: lane (r%8)*4 +
// (k%16)/4, index (((mi*KI + ki)*2 + k/16)*2 + r/8)*4 + k%4.  For tf32:
// lane (r%8)*4 + k%4, index ((mi*KI + ki)*2 + k/4)*2 + r/8.  Warps that share
// wm hold identical copies.  TRANS_A is accepted for symmetry and ignored.
//
// Requirements.  Every thread of the block calls the function (ldmatrix and
// mma are warp-synchronous).  It contains no barrier: the caller
// synchronizes between writing the shared memory tiles and the call, and
// before overwriting them afterwards.  A and B must be 16-byte aligned and,
// on the ldmatrix paths, rows must be a multiple of 16 bytes; aligning the
// tiles to 128 bytes makes the swizzle bank-conflict free.  C and A_frag are
// best kept as local arrays that are only indexed with compile-time
// constants, so that they stay in registers.
#pragma once

#include "common.h"

namespace tl {

// A byte of a packed int4 / uint4 tile (two elements, element 2i in the low
// nibble): the element type gemm_ss multiplies int4 operands as (Mma below).
struct s4x2_t {
  int8_t bits;
};
struct u4x2_t {
  uint8_t bits;
};

namespace detail {

// The operand of gemm_ss's PACK code (0: as given, 1: int4, 2: uint4) seen as
// its bytes.
template <int CODE, class T>
TL_DEVICE auto packed4(const T* p) {
  if constexpr (CODE == 1) {
    return reinterpret_cast<const s4x2_t*>(p);
  } else if constexpr (CODE == 2) {
    return reinterpret_cast<const u4x2_t*>(p);
  } else {
    return p;
  }
}

// Parameters of the XOR swizzle for a stored matrix with row stride LD
// elements of E bytes.  A 16-byte chunk holds V elements and a row holds NC
// chunks.  Rows whose size is not a multiple of 32 bytes are not swizzled.
// Otherwise the chunk index is XORed with a row-dependent mask of log2(S)
// bits, S = min(largest power of two dividing NC, 8), which changes every
// 8 / S rows: any 8 consecutive rows then spread one logical chunk column
// over 8 distinct 16-byte bank groups of a 128-byte window, which is exactly
// what a conflict-free ldmatrix (8 rows x 16 bytes) needs.
template <int LD, int E>
struct Swizzle {
  static_assert(E == 1 || E == 2 || E == 4 || E == 8, "bad element size");
  static constexpr int V = 16 / E;
  static constexpr bool kEnabled = (LD * E) % 32 == 0;
  static constexpr int NC = LD / V;
  static constexpr int kLowBit = NC & -NC;
  static constexpr int S = kEnabled ? (kLowBit < 8 ? kLowBit : 8) : 1;
  static constexpr int R = 8 / S;

  // The mask depends only on r % 8, so it is the same for every row that a
  // lane visits when it steps by multiples of 8 rows.
  static __host__ __device__ constexpr int xor_mask(int r) {
    return kEnabled ? static_cast<int>((static_cast<unsigned>(r) / R) % S) : 0;
  }
};

}  // namespace detail

// Offset in elements of stored element (r, c) of a swizzled matrix with row
// stride LD elements of E bytes each: r * LD + swz(r, c), where swz keeps c
// when rows are not a multiple of 32 bytes and otherwise XORs the 16-byte
// chunk index c / V with detail::Swizzle<LD, E>::xor_mask(r).
template <int LD, int E>
TL_DEVICE int swizzle_offset(int r, int c) {
  using Sw = detail::Swizzle<LD, E>;
  if constexpr (!Sw::kEnabled) {
    return r * LD + c;
  } else {
    const unsigned uc = static_cast<unsigned>(c);
    const int chunk = static_cast<int>(uc / Sw::V) ^ Sw::xor_mask(r);
    return r * LD + chunk * Sw::V + static_cast<int>(uc % Sw::V);
  }
}

// Offset in elements of stored element (r, c) of a matrix in slabs of W
// columns each (SS elements apart, each slab swizzled as a W-wide matrix); SS
// = 0 is the plain layout, swizzle_offset<W, E>.
template <int W, int E, int SS>
TL_DEVICE int slab_offset(int r, int c) {
  if constexpr (SS == 0) {
    return swizzle_offset<W, E>(r, c);
  } else {
    const unsigned uc = static_cast<unsigned>(c);
    return static_cast<int>(uc / W) * SS + swizzle_offset<W, E>(r, static_cast<int>(uc % W));
  }
}

namespace detail {

// ---------------------------------------------------------------------------
// PTX wrappers.  ldmatrix is volatile so that it is never hoisted across a
// barrier when the compiler sees the same shared memory address in two
// iterations of a pipelined loop; mma is a pure register operation and is
// left free for the scheduler.
// ---------------------------------------------------------------------------

template <bool TRANS>
TL_DEVICE void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                       uint32_t& r3) {
  if constexpr (TRANS) {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
        : "r"(addr));
  } else {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
        : "r"(addr));
  }
}

template <bool TRANS>
TL_DEVICE void ldsm_x2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
  if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(addr));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r0), "=r"(r1)
                 : "r"(addr));
  }
}

// Rounds a float to tf32 (10 mantissa bits).  Without this the tensor core
// would simply ignore the low 13 bits, i.e. truncate, which doubles the error.
TL_DEVICE uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// Packs P = 4 / sizeof(T) consecutive elements into one mma operand
// register, element 0 in the low bits.  Narrow elements are moved with a
// 4-byte memcpy rather than assembled one by one: the memcpy is valid for
// arrays that are only aligned to their element size, and it lets the
// compiler keep such an array in 32-bit registers, so that repeated mma on
// an f16 accumulator need no pack/unpack instructions in the main loop.
// Floats are rounded to tf32 on the way (unless ROUND is false: the value
// already is one).
template <bool ROUND = true, class T>
TL_DEVICE uint32_t pack_reg(const T* p) {
  if constexpr (detail::is_same_v<T, float>) {
    return ROUND ? to_tf32(*p) : __float_as_uint(*p);
  } else {
    uint32_t r;
    memcpy(&r, p, 4);
    return r;
  }
}

// The inverse of pack_reg for the f16 accumulator.
TL_DEVICE void unpack_reg(uint32_t r, half* p) { memcpy(p, &r, 4); }

// One m16n8kKS tensor core operation: c += a * b, with the accumulator
// registers in the standard m16n8 layout.
template <class TA, class TB, class TC>
struct Mma {
  static_assert(sizeof(TA) == 0,
                "tl::gemm: unsupported (TA, TB, TC) combination; supported are "
                "(half,half,float), (bf16,bf16,float), (half,half,half), "
                "(int8/uint8,int8/uint8,int), (int4/uint4,int4/uint4,int) and "
                "(float,float,float) via tf32");
};

template <>
struct Mma<half, half, float> {
  static constexpr int kK = 16;
  static TL_DEVICE void run(float* c, const uint32_t* a, const uint32_t* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    // Turing has no m16n8k16: two m16n8k8 halves of K (a[0..1] / b[0] hold
    // k 0..7, a[2..3] / b[1] hold k 8..15).
    for (int h = 0; h < 2; ++h)
      asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
          "{%4, %5}, {%6}, {%0, %1, %2, %3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a[2 * h]), "r"(a[2 * h + 1]), "r"(b[h]));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

template <>
struct Mma<__nv_bfloat16, __nv_bfloat16, float> {
  static constexpr int kK = 16;
  static TL_DEVICE void run(float* c, const uint32_t* a, const uint32_t* b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

template <>
struct Mma<half, half, half> {
  static constexpr int kK = 16;
  static TL_DEVICE void run(half* c, const uint32_t* a, const uint32_t* b) {
    // The f16 accumulator is two registers of two halves each; the pairs are
    // assembled from and split back into the element array so that the
    // caller's half array needs no 4-byte alignment.
    uint32_t c0 = pack_reg(c), c1 = pack_reg(c + 2);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    for (int h = 0; h < 2; ++h)   // Turing: two m16n8k8 halves of K
      asm("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {%0, %1}, "
          "{%2, %3}, {%4}, {%0, %1};\n"
          : "+r"(c0), "+r"(c1)
          : "r"(a[2 * h]), "r"(a[2 * h + 1]), "r"(b[h]));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, "
        "{%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
        : "+r"(c0), "+r"(c1)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
    unpack_reg(c0, c);
    unpack_reg(c1, c + 2);
  }
};

// Integer operands into an int accumulator, 32 bytes of K per mma either way:
// int8 / uint8 with m16n8k32; int4 / uint4 as the bytes that hold them, two
// elements each (element 2i in the low nibble), with m16n8k64 -- its A and B
// fragments are the m16n8k32 int8 ones with every byte two elements, so the
// operands go through the int8 path unchanged (ldmatrix on K-contiguous rows;
// gemm_ss's PACK gives the operand pointers the s4x2_t / u4x2_t type).
template <class TA, class TB>
struct Mma<TA, TB, int> {
  static constexpr bool k4 = detail::is_same_v<TA, s4x2_t> || detail::is_same_v<TA, u4x2_t>;
  static_assert(sizeof(TA) == 1 && sizeof(TB) == 1 &&
                    k4 == (detail::is_same_v<TB, s4x2_t> || detail::is_same_v<TB, u4x2_t>),
                "tl::gemm: integer operands are int8/uint8 or int4/uint4 (both of one width)");
  static constexpr int kK = 32;
  static TL_DEVICE void run(int* c, const uint32_t* a, const uint32_t* b) {
    constexpr bool sa = detail::is_same_v<TA, int8_t> || detail::is_same_v<TA, s4x2_t>;
    constexpr bool sb = detail::is_same_v<TB, int8_t> || detail::is_same_v<TB, s4x2_t>;
#define TL_MMA_INT(SHAPE, A, B)                                                 \
  asm("mma.sync.aligned." SHAPE ".row.col.s32." A "." B                         \
      ".s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])                          \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#define TL_MMA_INT_SIGNS(SHAPE, S, U) \
  if constexpr (sa && sb) {           \
    TL_MMA_INT(SHAPE, S, S);          \
  } else if constexpr (sa) {          \
    TL_MMA_INT(SHAPE, S, U);          \
  } else if constexpr (sb) {          \
    TL_MMA_INT(SHAPE, U, S);          \
  } else {                            \
    TL_MMA_INT(SHAPE, U, U);          \
  }
    if constexpr (k4) {
      TL_MMA_INT_SIGNS("m16n8k64", "s4", "u4")
    } else {
      TL_MMA_INT_SIGNS("m16n8k32", "s8", "u8")
    }
#undef TL_MMA_INT_SIGNS
#undef TL_MMA_INT
  }
};

template <>
struct Mma<float, float, float> {
  static constexpr int kK = 8;
  static TL_DEVICE void run(float* c, const uint32_t* a, const uint32_t* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// Compile-time shape of one block GEMM, shared by gemm_ss and gemm_rs.
template <int M, int N, int K, int WARP_M, int WARP_N, class TA, class TB,
          class TC>
struct GemmShape {
  static_assert(sizeof(TA) == sizeof(TB), "A and B need equally wide elements");
  static constexpr int E = sizeof(TA);   // bytes per element
  static constexpr int P = 4 / E;        // elements per 32-bit register
  static constexpr int KS = Mma<TA, TB, TC>::kK;
  static_assert(KS == 8 * P, "one mma consumes 32 bytes of K");
  static constexpr int WM = M / WARP_M;
  static constexpr int WN = N / WARP_N;
  static constexpr int MI = WM / 16;
  static constexpr int NI = WN / 8;
  static constexpr int KI = K / KS;
  static_assert(M % WARP_M == 0 && WM % 16 == 0, "M / WARP_M must be a multiple of 16");
  static_assert(N % WARP_N == 0 && WN % 8 == 0, "N / WARP_N must be a multiple of 8");
  static_assert(K % KS == 0, "K must be a multiple of the mma K (16, 32 for int8, 8 for tf32)");
};

// Per-lane ldmatrix addressing into a swizzled matrix.  The lane's row and
// chunk are fixed at construction; every access adds compile-time offsets
// dr (a multiple of 8 rows, so the XOR mask does not change) and dc chunks.
// The expensive part of the swizzle is therefore computed once per GEMM.
// SS > 0: slabs of LD columns, SS elements apart (slab_offset); the mask is
// below the chunks per slab, so the XOR stays inside the chunk's slab.
template <int LD, int E, int SS = 0>
struct LdsmAddr {
  static constexpr int kSlabChunks = LD * E / 16;
  uint32_t row_base;
  int chunk;
  int mask;
  TL_DEVICE LdsmAddr(const void* base, int row, int chunk0)
      : row_base(smem_addr(base) + static_cast<uint32_t>(row * LD * E)),
        chunk(chunk0),
        mask(Swizzle<LD, E>::xor_mask(row)) {}
  // Byte offset, from the start of its row, of 16-byte chunk c of a row whose
  // XOR mask is `mask` (host-callable: tests/test_wgmma_mix.py checks it
  // against the Python layouts).
  static __host__ __device__ constexpr uint32_t chunk_offset(int c, int mask) {
    if constexpr (SS == 0) {
      return static_cast<uint32_t>((c ^ mask) * 16);
    } else {
      static_assert((kSlabChunks & (kSlabChunks - 1)) == 0, "slabs are 32, 64 or 128 bytes wide");
      const unsigned u = static_cast<unsigned>(c);
      return (u / kSlabChunks) * static_cast<unsigned>(SS * E) +
             ((u ^ static_cast<unsigned>(mask)) % kSlabChunks) * 16;
    }
  }
  TL_DEVICE uint32_t at(int dr, int dc) const {
    // Checked here rather than at class scope because the scalar fallback
    // paths construct this helper without ever using it.
    static_assert((LD * E) % 16 == 0, "ldmatrix needs 16-byte aligned rows");
    return row_base + static_cast<uint32_t>(dr * LD * E) + chunk_offset(chunk + dc, mask);
  }
};

// Loads the A fragments of one k-step for all MI row blocks of the warp.
// C0: the operand starts C0 16-byte chunks into its swizzled rows (a column sub-tile; the pointer
// is the start of its first row), so the XOR applies to the buffer's own chunk index.
// ROUND: float elements are rounded to tf32 (false: they already are tf32).
template <class Shape, class T, int LDA, bool TRANS, int C0 = 0, int SS = 0, bool ROUND = true>
struct SmemA {
  static constexpr int P = Shape::P, KS = Shape::KS, MI = Shape::MI;
  // A transposed (K x M stored) needs a 16-bit transpose, which ldmatrix
  // provides only for 16-bit elements.
  static constexpr bool kLdsm = !TRANS || Shape::E == 2;
  const T* ptr;
  int row0, lane;
  LdsmAddr<LDA, Shape::E, SS> addr;

  // Lane l addresses row l % 8 of matrix l / 8 of an ldmatrix.x4.  The four
  // matrices must come back as the mma A registers {rows 0-7, k 0-7},
  // {rows 8-15, k 0-7}, {rows 0-7, k 8-15}, {rows 8-15, k 8-15} (k in units
  // of 8 16-bit elements, i.e. one 16-byte chunk).
  static TL_DEVICE int lane_row(int wm, int l) {
    return TRANS ? ((l >> 4) << 3) + (l & 7) : wm * Shape::WM + (l & 15);
  }
  static TL_DEVICE int lane_chunk(int wm, int l) {
    return TRANS ? (wm * Shape::WM) / 8 + ((l >> 3) & 1) : (l >> 4);
  }
  TL_DEVICE SmemA(const T* A, int wm, int l)
      : ptr(A), row0(wm * Shape::WM), lane(l),
        addr(A, kLdsm ? lane_row(wm, l) : 0, kLdsm ? lane_chunk(wm, l) + C0 : 0) {}

  TL_DEVICE void load(uint32_t (&a)[MI][4], int ki) const {
    if constexpr (kLdsm) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        const uint32_t p = TRANS ? addr.at(ki * 16, mi * 2) : addr.at(mi * 16, ki * 2);
        ldsm_x4<TRANS>(p, a[mi][0], a[mi][1], a[mi][2], a[mi][3]);
      }
    } else {
      // Scalar fallback: gather each element of the fragment individually.
      const int g = lane >> 2, t = lane & 3;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          T v[P];
          const int r = row0 + mi * 16 + g + (j & 1) * 8;
#pragma unroll
          for (int e = 0; e < P; ++e) {
            const int k = ki * KS + (j >> 1) * 4 * P + t * P + e;
            v[e] = ptr[TRANS ? slab_offset<LDA, Shape::E, SS>(k, r + C0 * (16 / Shape::E))
                             : slab_offset<LDA, Shape::E, SS>(r, k + C0 * (16 / Shape::E))];
          }
          a[mi][j] = pack_reg<ROUND>(v);
        }
      }
    }
    if constexpr (Shape::E == 4 && kLdsm && ROUND) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int j = 0; j < 4; ++j) a[mi][j] = to_tf32(__uint_as_float(a[mi][j]));
    }
  }
};

// Loads the B fragments of one k-step for all NI column blocks of the warp.
// The mma B operand of column block ni is {k 0-7, k 8-15} (in 16-byte chunks
// of K) for the 8 columns of that block.
template <class Shape, class T, int LDB, bool TRANS, int C0 = 0, int SS = 0, bool ROUND = true>
struct SmemB {
  static constexpr int P = Shape::P, KS = Shape::KS, NI = Shape::NI;
  // B not transposed (K x N stored) needs a 16-bit transpose.
  static constexpr bool kLdsm = TRANS || Shape::E == 2;
  const T* ptr;
  int col0, lane;
  LdsmAddr<LDB, Shape::E, SS> addr;

  // With an x4 load, matrices 0/1 are the two k halves of column block ni
  // and matrices 2/3 those of ni + 1; an x2 load uses lanes 0-15 only, so the
  // same per-lane address serves both.
  static TL_DEVICE int lane_row(int wn, int l) {
    return TRANS ? wn * Shape::WN + ((l >> 4) << 3) + (l & 7) : (l & 15);
  }
  static TL_DEVICE int lane_chunk(int wn, int l) {
    return TRANS ? ((l >> 3) & 1) : (wn * Shape::WN) / 8 + (l >> 4);
  }
  TL_DEVICE SmemB(const T* B, int wn, int l)
      : ptr(B), col0(wn * Shape::WN), lane(l),
        addr(B, kLdsm ? lane_row(wn, l) : 0, kLdsm ? lane_chunk(wn, l) + C0 : 0) {}

  TL_DEVICE uint32_t at(int ni, int ki) const {
    return TRANS ? addr.at(ni * 8, ki * 2) : addr.at(ki * 16, ni);
  }

  TL_DEVICE void load(uint32_t (&b)[NI][2], int ki) const {
    if constexpr (kLdsm) {
#pragma unroll
      for (int ni = 0; ni + 1 < NI; ni += 2) {
        ldsm_x4<!TRANS>(at(ni, ki), b[ni][0], b[ni][1], b[ni + 1][0], b[ni + 1][1]);
      }
      if constexpr (NI % 2 == 1) {
        ldsm_x2<!TRANS>(at(NI - 1, ki), b[NI - 1][0], b[NI - 1][1]);
      }
      if constexpr (Shape::E == 4 && ROUND) {
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int j = 0; j < 2; ++j) b[ni][j] = to_tf32(__uint_as_float(b[ni][j]));
      }
    } else {
      const int g = lane >> 2, t = lane & 3;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int n = col0 + ni * 8 + g;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          T v[P];
#pragma unroll
          for (int e = 0; e < P; ++e) {
            const int k = ki * KS + j * 4 * P + t * P + e;
            v[e] = ptr[TRANS ? slab_offset<LDB, Shape::E, SS>(n, k + C0 * (16 / Shape::E))
                             : slab_offset<LDB, Shape::E, SS>(k, n + C0 * (16 / Shape::E))];
          }
          b[ni][j] = pack_reg<ROUND>(v);
        }
      }
    }
  }
};

// Issues the MI x NI mma of one k-step.  Odd rows walk the columns backwards
// (a serpentine order) so that consecutive mma share an operand register set.
template <class Shape, class TA, class TB, class TC>
TL_DEVICE void mma_tile(TC* C, const uint32_t (&a)[Shape::MI][4],
                        const uint32_t (&b)[Shape::NI][2]) {
#pragma unroll
  for (int mi = 0; mi < Shape::MI; ++mi) {
#pragma unroll
    for (int n = 0; n < Shape::NI; ++n) {
      const int ni = (mi & 1) ? Shape::NI - 1 - n : n;
      Mma<TA, TB, TC>::run(C + (mi * Shape::NI + ni) * 4, a[mi], b[ni]);
    }
  }
}

template <class Shape, class TC>
TL_DEVICE void clear_accum(TC* C) {
#pragma unroll
  for (int i = 0; i < Shape::MI * Shape::NI * 4; ++i) C[i] = cvt<TC>(0.0f);
}

// The warp index of the calling thread.  It is deliberately not broadcast
// with a shuffle: a shuffle cannot be hoisted out of the caller's main loop,
// while plain arithmetic on threadIdx.x lets the compiler compute all
// per-lane shared memory offsets once, before the loop.
TL_DEVICE int warp_id() { return static_cast<int>(threadIdx.x / 32u); }

// Splits a warp index into its (wm, wn) coordinates with unsigned
// arithmetic, which is cheaper than signed division for non-power-of-two
// WARP_M.
template <int WARP_M>
TL_DEVICE void warp_coords(int warp, int& wm, int& wn) {
  wm = static_cast<int>(static_cast<unsigned>(warp) % WARP_M);
  wn = static_cast<int>(static_cast<unsigned>(warp) / WARP_M);
}

}  // namespace detail

// Block GEMM with both operands in shared memory (see the top of this file).
// CA / CB: an operand that is a column sub-tile of its swizzled buffer starts CA / CB 16-byte
// chunks into the row its pointer addresses (SmemA / SmemB).  SA / SB: the operand's slab
// stride in elements (its LD is then the slab width; 0: the plain layout).
// TF32 (float operands): bit 0 / bit 1 set when A / B already hold tf32 values
// (a tile the kernel declares T.tfloat32), which then go to the tensor core
// as they are instead of being rounded every k-step.
template <int M, int N, int K, int WARP_M, int WARP_N, bool TRANS_A,
          bool TRANS_B, bool CLEAR_ACCUM, int LDA, int LDB, int CA = 0, int CB = 0,
          int SA = 0, int SB = 0, int TF32 = 0, int PACK = 0, typename TA, typename TB, typename TC>
TL_DEVICE void gemm_ss(const TA* A, const TB* B, TC* C) {
  if constexpr (PACK != 0) {   // int4 / uint4 operands (A: PACK & 3, B: PACK >> 2): their bytes
    gemm_ss<M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B, CLEAR_ACCUM, LDA, LDB, CA, CB, SA, SB, TF32>(
        detail::packed4<(PACK & 3)>(A), detail::packed4<(PACK >> 2)>(B), C);
  } else {
    using Shape = detail::GemmShape<M, N, K, WARP_M, WARP_N, TA, TB, TC>;
    const int lane = static_cast<int>(threadIdx.x) & 31;
    int wm, wn;
    detail::warp_coords<WARP_M>(detail::warp_id(), wm, wn);
    if constexpr (CLEAR_ACCUM) detail::clear_accum<Shape>(C);
    const detail::SmemA<Shape, TA, LDA, TRANS_A, CA, SA, !(TF32 & 1)> sa(A, wm, lane);
    const detail::SmemB<Shape, TB, LDB, TRANS_B, CB, SB, !(TF32 & 2)> sb(B, wn, lane);
#pragma unroll
    for (int ki = 0; ki < Shape::KI; ++ki) {
      uint32_t a[Shape::MI][4];
      uint32_t b[Shape::NI][2];
      sa.load(a, ki);
      sb.load(b, ki);
      detail::mma_tile<Shape, TA, TB, TC>(C, a, b);
    }
  }
}

// Block GEMM with A in registers (layout at the top of this file) and B in
// shared memory.  TF32 as for gemm_ss.
template <int M, int N, int K, int WARP_M, int WARP_N, bool TRANS_A,
          bool TRANS_B, bool CLEAR_ACCUM, int LDB, int CB = 0, int SB = 0, int TF32 = 0,
          typename TA, typename TB, typename TC>
TL_DEVICE void gemm_rs(const TA* A_frag, const TB* B, TC* C) {
  using Shape = detail::GemmShape<M, N, K, WARP_M, WARP_N, TA, TB, TC>;
  constexpr int P = Shape::P;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  int wm, wn;
  detail::warp_coords<WARP_M>(detail::warp_id(), wm, wn);
  if constexpr (CLEAR_ACCUM) detail::clear_accum<Shape>(C);
  const detail::SmemB<Shape, TB, LDB, TRANS_B, CB, SB, !(TF32 & 2)> sb(B, wn, lane);
#pragma unroll
  for (int ki = 0; ki < Shape::KI; ++ki) {
    uint32_t a[Shape::MI][4];
    uint32_t b[Shape::NI][2];
#pragma unroll
    for (int mi = 0; mi < Shape::MI; ++mi)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        a[mi][j] = detail::pack_reg<!(TF32 & 1)>(A_frag + ((mi * Shape::KI + ki) * 4 + j) * P);
    sb.load(b, ki);
    detail::mma_tile<Shape, TA, TB, TC>(C, a, b);
  }
}

// Entry points of the pre-sm_80 (Turing) targets: the same block GEMMs, whose
// 16-bit mma issue two m16n8k8 instructions per k-step (Mma<half, ...> above).
template <int M, int N, int K, int WARP_M, int WARP_N, bool TRANS_A,
          bool TRANS_B, bool CLEAR_ACCUM, int LDA, int LDB, int CA = 0, int CB = 0,
          int SA = 0, int SB = 0, int TF32 = 0, typename TA, typename TB, typename TC>
TL_DEVICE void mma_sync_gemm_ss(const TA* A, const TB* B, TC* C) {
  gemm_ss<M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B, CLEAR_ACCUM, LDA, LDB, CA, CB, SA, SB, TF32>(
      A, B, C);
}

template <int M, int N, int K, int WARP_M, int WARP_N, bool TRANS_A,
          bool TRANS_B, bool CLEAR_ACCUM, int LDB, int CB = 0, int SB = 0, int TF32 = 0,
          typename TA, typename TB, typename TC>
TL_DEVICE void mma_sync_gemm_rs(const TA* A_frag, const TB* B, TC* C) {
  gemm_rs<M, N, K, WARP_M, WARP_N, TRANS_A, TRANS_B, CLEAR_ACCUM, LDB, CB, SB, TF32>(
      A_frag, B, C);
}

}  // namespace tl
