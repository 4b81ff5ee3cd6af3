// SIMT (CUDA-core FMA) block GEMM: the fallback of T.gemm for operand types
// with no tensor-core instruction on the target (fp64 anywhere, fp32 / bf16 on
// Turing, int32).  C (M x N, registers) += A (M x K) * B (K x N); A and B are
// row-major shared tiles with leading dimensions LDA / LDB (TRANS_A: A is
// stored K x M, TRANS_B: B is stored N x K), or A is a register fragment.
//
// Thread grid and accumulator layout (tilelang/transform/lower_gemm_fma.py
// builds the same fragment for layout inference): the first TX * TY threads
// form a TY x TX grid, thread t -> (ty, tx) = (t / TX, t % TX); threads past
// TX * TY repeat the work of thread t % (TX * TY), so every replica holds the
// result.  With MB = M / TY and NB = N / (TX * VN), register
//   (mb * NB + nb) * VN + v   holds   C[mb * TY + ty][(nb * TX + tx) * VN + v].
// Rows are strided by TY so that a warp reads a transposed A conflict-free;
// each thread owns runs of VN consecutive columns so that B rows are read (and
// C later stored) as vectors.
//
// Register A operand: register mb * K + k holds A[mb * TY + ty][k] (the rows
// of the thread's accumulator, all of K; replicated over tx).
//
// The K loop advances KV elements at a time; operands that are contiguous
// along K (A not transposed, B transposed) are read as KV-element vectors when
// the caller proved 16-byte alignment (ALIGN_A / ALIGN_B).  Products are
// formed in the accumulator type (bf16 / half widened to float first).
// The element types are explicit template arguments and the operands arrive
// untyped: before sm_80 the code generator spells bf16 buffers as ushort.
#pragma once

#include "common.h"

namespace tl {
namespace fma_detail {

template <int BYTES>
struct VecOf;
template <>
struct VecOf<2> { using type = unsigned short; };
template <>
struct VecOf<4> { using type = unsigned int; };
template <>
struct VecOf<8> { using type = uint2; };
template <>
struct VecOf<16> { using type = uint4; };

// Copies V consecutive elements; one vector access when ALIGNED and the run
// is 2, 4, 8 or 16 bytes, else element by element.
template <class T, int V, bool ALIGNED>
TL_DEVICE void load_run(T* dst, const T* src) {
  constexpr int BYTES = V * static_cast<int>(sizeof(T));
  if constexpr (ALIGNED && V > 1 &&
                (BYTES == 2 || BYTES == 4 || BYTES == 8 || BYTES == 16)) {
    using W = typename VecOf<BYTES>::type;
    *reinterpret_cast<W*>(dst) = *reinterpret_cast<const W*>(src);
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) dst[v] = src[v];
  }
}

template <class TC, class T>
TL_DEVICE TC widen(T x) {
  return static_cast<TC>(x);
}

template <int M, int N, int K, int TX, int TY, int VN, int KV, class TC>
struct FmaShape {
  static constexpr int MB = M / TY;
  static constexpr int NB = N / (TX * VN);
  static constexpr int RN = NB * VN;
  static_assert(M % TY == 0, "M must be a multiple of TY");
  static_assert(N % (TX * VN) == 0, "N must be a multiple of TX * VN");
  static_assert(K % KV == 0, "K must be a multiple of KV");
};

template <int TX, int TY>
TL_DEVICE void coords(int& ty, int& tx) {
  const unsigned t = threadIdx.x % static_cast<unsigned>(TX * TY);
  ty = static_cast<int>(t / TX);
  tx = static_cast<int>(t % TX);
}

template <int N_ELEMS, class TC>
TL_DEVICE void clear(TC* C) {
#pragma unroll
  for (int i = 0; i < N_ELEMS; ++i) C[i] = static_cast<TC>(0);
}

// B slice for k0 .. k0 + KV: b[kk][n] = B(k0 + kk, column of register n).
template <class S, int VN, int KV, int TX, bool TRANS_B, int LDB, bool ALIGN_B,
          class TB>
TL_DEVICE void load_b(TB (&b)[KV][S::RN], const TB* B, int tx, int k0) {
  if constexpr (!TRANS_B) {
#pragma unroll
    for (int kk = 0; kk < KV; ++kk)
#pragma unroll
      for (int nb = 0; nb < S::NB; ++nb)
        load_run<TB, VN, ALIGN_B>(
            &b[kk][nb * VN], B + (k0 + kk) * LDB + (nb * TX + tx) * VN);
  } else {
#pragma unroll
    for (int n = 0; n < S::RN; ++n) {
      const int col = ((n / VN) * TX + tx) * VN + n % VN;
      TB run[KV];
      load_run<TB, KV, ALIGN_B>(run, B + col * LDB + k0);
#pragma unroll
      for (int kk = 0; kk < KV; ++kk) b[kk][n] = run[kk];
    }
  }
}

template <class S, int KV, class TA, class TB, class TC, int VN>
TL_DEVICE void fma_step(TC* C, const TA (&a)[KV][S::MB],
                        const TB (&b)[KV][S::RN]) {
#pragma unroll
  for (int kk = 0; kk < KV; ++kk)
#pragma unroll
    for (int mb = 0; mb < S::MB; ++mb) {
      const TC av = widen<TC>(a[kk][mb]);
#pragma unroll
      for (int n = 0; n < S::RN; ++n)
        C[mb * S::RN + n] += av * widen<TC>(b[kk][n]);
    }
}

}  // namespace fma_detail

// Both operands in shared memory.
template <int M, int N, int K, int TX, int TY, int VN, int KV, bool TRANS_A,
          bool TRANS_B, bool CLEAR_ACCUM, int LDA, int LDB, bool ALIGN_A,
          bool ALIGN_B, typename TA, typename TB, typename TC>
TL_DEVICE void gemm_fma_ss(const void* A_ptr, const void* B_ptr, TC* C) {
  const TA* A = static_cast<const TA*>(A_ptr);
  const TB* B = static_cast<const TB*>(B_ptr);
  using S = fma_detail::FmaShape<M, N, K, TX, TY, VN, KV, TC>;
  int ty, tx;
  fma_detail::coords<TX, TY>(ty, tx);
  if constexpr (CLEAR_ACCUM) fma_detail::clear<S::MB * S::RN>(C);
#pragma unroll 2
  for (int k0 = 0; k0 < K; k0 += KV) {
    TA a[KV][S::MB];
    TB b[KV][S::RN];
#pragma unroll
    for (int mb = 0; mb < S::MB; ++mb) {
      const int row = mb * TY + ty;
      if constexpr (TRANS_A) {
#pragma unroll
        for (int kk = 0; kk < KV; ++kk) a[kk][mb] = A[(k0 + kk) * LDA + row];
      } else {
        TA run[KV];
        fma_detail::load_run<TA, KV, ALIGN_A>(run, A + row * LDA + k0);
#pragma unroll
        for (int kk = 0; kk < KV; ++kk) a[kk][mb] = run[kk];
      }
    }
    fma_detail::load_b<S, VN, KV, TX, TRANS_B, LDB, ALIGN_B>(b, B, tx, k0);
    fma_detail::fma_step<S, KV, TA, TB, TC, VN>(C, a, b);
  }
}

// A in registers (layout at the top of this file), B in shared memory.
template <int M, int N, int K, int TX, int TY, int VN, int KV, bool TRANS_B,
          bool CLEAR_ACCUM, int LDB, bool ALIGN_B, typename TA, typename TB,
          typename TC>
TL_DEVICE void gemm_fma_rs(const void* A_ptr, const void* B_ptr, TC* C) {
  const TA* A_frag = static_cast<const TA*>(A_ptr);
  const TB* B = static_cast<const TB*>(B_ptr);
  using S = fma_detail::FmaShape<M, N, K, TX, TY, VN, KV, TC>;
  int ty, tx;
  fma_detail::coords<TX, TY>(ty, tx);
  if constexpr (CLEAR_ACCUM) fma_detail::clear<S::MB * S::RN>(C);
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += KV) {
    TA a[KV][S::MB];
    TB b[KV][S::RN];
#pragma unroll
    for (int mb = 0; mb < S::MB; ++mb)
#pragma unroll
      for (int kk = 0; kk < KV; ++kk) a[kk][mb] = A_frag[mb * K + k0 + kk];
    fma_detail::load_b<S, VN, KV, TX, TRANS_B, LDB, ALIGN_B>(b, B, tx, k0);
    fma_detail::fma_step<S, KV, TA, TB, TC, VN>(C, a, b);
  }
}

}  // namespace tl
