// Copyright the TileLang compiler authors.
//
// Data movement primitives: asynchronous global->shared copies (cp.async,
// sm_80+) and plain vectorized copies between any two memory spaces.
#pragma once

#include "common.h"

namespace tl {

namespace detail {

// The global-window address of a pointer.  On every NVIDIA GPU the generic
// and global windows coincide, but converting keeps the PTX strictly within
// the rules for `.global` operands at no cost after ptxas optimization.
TL_DEVICE uint64_t gmem_addr(const void* ptr) {
  return static_cast<uint64_t>(__cvta_generic_to_global(ptr));
}

}  // namespace detail

namespace detail {
// Before sm_80 there is no cp.async: the cp_async_* calls below copy
// synchronously (commit / wait become no-ops), which keeps the same semantics
// for every caller (the data is in shared memory once the wait returns).
template <int BYTES>
TL_DEVICE void sync_copy_gs(void* smem_dst, const void* gmem_src, bool pred) {
  if constexpr (BYTES == 16) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (pred) v = *reinterpret_cast<const uint4*>(gmem_src);
    *reinterpret_cast<uint4*>(smem_dst) = v;
  } else if constexpr (BYTES == 8) {
    uint2 v = make_uint2(0, 0);
    if (pred) v = *reinterpret_cast<const uint2*>(gmem_src);
    *reinterpret_cast<uint2*>(smem_dst) = v;
  } else {
    uint32_t v = 0;
    if (pred) v = *reinterpret_cast<const uint32_t*>(gmem_src);
    *reinterpret_cast<uint32_t*>(smem_dst) = v;
  }
}
}  // namespace detail

// Starts an asynchronous copy of BYTES bytes from global to shared memory.
// The 16-byte form uses cp.async.cg, which bypasses L1: tiles are staged in
// shared memory anyway, so caching them in L1 as well would only evict other
// data.  cp.async.cg only exists for 16 bytes, so the 4- and 8-byte forms use
// cp.async.ca.  Both addresses must be aligned to BYTES.
template <int BYTES>
TL_DEVICE void cp_async_gs(void* smem_dst, const void* gmem_src) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16,
                "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  detail::sync_copy_gs<BYTES>(smem_dst, gmem_src, true);
  return;
#endif
  const uint32_t dst = smem_addr(smem_dst);
  const uint64_t src = detail::gmem_addr(gmem_src);
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
                 "l"(src)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst),
                 "l"(src), "n"(BYTES)
                 : "memory");
  }
}

// Like cp_async_gs, but when pred is false the destination is filled with
// zeros instead.  This uses the src-size operand: with a source size of zero
// the instruction reads no global memory at all and zero-fills all BYTES
// destination bytes, so an out-of-bounds gmem_src is never dereferenced and
// the copy stays branch-free, which keeps the issue order of the pipeline
// identical across threads.
template <int BYTES>
TL_DEVICE void cp_async_gs_conditional(void* smem_dst, const void* gmem_src,
                                       bool pred) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16,
                "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  detail::sync_copy_gs<BYTES>(smem_dst, gmem_src, pred);
  return;
#endif
  const uint32_t dst = smem_addr(smem_dst);
  const uint64_t src = detail::gmem_addr(gmem_src);
  const int src_size = pred ? BYTES : 0;
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(src), "r"(src_size)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst),
                 "l"(src), "n"(BYTES), "r"(src_size)
                 : "memory");
  }
}

// Closes the current group of cp.async operations so that it can be waited
// for as a unit.
TL_DEVICE void cp_async_commit() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most N of the most recently committed cp.async groups are
// still in flight.  The memory clobber stops the compiler from moving shared
// memory reads above the wait.  The copies become visible to other threads
// only after a subsequent barrier.
template <int N>
TL_DEVICE void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group needs a non-negative count");
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

namespace detail {

// The integer vector type that moves exactly BYTES bytes in one instruction.
template <int BYTES>
struct VecType;
template <>
struct VecType<1> {
  using type = char;
};
template <>
struct VecType<2> {
  using type = short;
};
template <>
struct VecType<4> {
  using type = int;
};
template <>
struct VecType<8> {
  using type = int2;
};
template <>
struct VecType<16> {
  using type = int4;
};

// The vector type a BYTES-byte copy of T elements moves through: T's own CUDA vector where it has
// one (float4, float2, half2, ...), else the integer vector of VecType. nvcc forwards a store to a
// later load of the same bytes, and drops a store that the thread overwrites before anything
// reads it, only when the two accesses have one type: a tile copied into shared memory through
// int4 and read back as float4 (a T.Parallel over it) kept every store and reloaded the tile
// (rms_norm_splitk: 50 STS.128 against 3).
template <class T, int BYTES>
struct ElemVec {
  using type = typename VecType<BYTES>::type;
};
#define TL_ELEM_VEC(T, BYTES, V) \
  template <>                    \
  struct ElemVec<T, BYTES> {     \
    using type = V;              \
  };
TL_ELEM_VEC(float, 16, float4)
TL_ELEM_VEC(float, 8, float2)
TL_ELEM_VEC(float, 4, float)
TL_ELEM_VEC(half, 4, half2)
TL_ELEM_VEC(__nv_bfloat16, 4, __nv_bfloat162)
#undef TL_ELEM_VEC

}  // namespace detail

// Synchronous vectorized copy of BYTES bytes between any two memory spaces, one load and one
// store of BYTES bytes whatever the element type (through ElemVec: the destination element's own
// vector type where it has one, else an integer vector); both pointers must be aligned to BYTES.
template <int BYTES, class T>
TL_DEVICE void copy_vec(T* dst, const void* src) {
  using V = typename detail::ElemVec<T, BYTES>::type;
  *reinterpret_cast<V*>(dst) = *reinterpret_cast<const V*>(src);
}

// BYTES / sizeof(T) copies of value at dst with one vector store (T.fill / T.clear of a plainly
// laid out shared tile); dst must be aligned to BYTES.
template <int BYTES, class T>
TL_DEVICE void fill_vec(T* dst, T value) {
  static_assert(BYTES % sizeof(T) == 0, "a whole number of elements per vector");
  using V = typename detail::ElemVec<T, BYTES>::type;
  union {
    V v;
    T e[BYTES / sizeof(T)];
  } u;
#pragma unroll
  for (int i = 0; i < int(BYTES / sizeof(T)); ++i) u.e[i] = value;
  *reinterpret_cast<V*>(dst) = u.v;
}

// Zero BYTES bytes at dst with one vector store (the value an out-of-bounds
// T.copy read gives); dst must be aligned to BYTES.
template <int BYTES, class T>
TL_DEVICE void zero_vec(T* dst) {
  using V = typename detail::ElemVec<T, BYTES>::type;
  *reinterpret_cast<V*>(dst) = V{};
}

// Four 8x8 matrices of 16-bit elements stored from the registers of a warp (stmatrix.x4, sm_90):
// lane L supplies two adjacent elements of row L / 4 of each matrix (v0, v1 of matrix 0, v2, v3
// of matrix 1, ...) and, in ``row``, the address of row L % 8 of matrix L / 8 (16 aligned bytes).
// Values of another type are rounded to T first.
template <typename T, typename S>
TL_DEVICE uint32_t pack_b16x2(S lo, S hi) {
  static_assert(sizeof(T) == 2, "stmatrix stores 16-bit elements");
  T a = cvt<T>(lo), b = cvt<T>(hi);
  return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(&a)) |
         (static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(&b)) << 16);
}

template <typename T, typename S>
TL_DEVICE void stmatrix_x4(T* row, S v0, S v1, S v2, S v3, S v4, S v5, S v6, S v7) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :: "r"(smem_addr(row)), "r"(pack_b16x2<T>(v0, v1)), "r"(pack_b16x2<T>(v2, v3)),
                  "r"(pack_b16x2<T>(v4, v5)), "r"(pack_b16x2<T>(v6, v7))
               : "memory");
#else
  __trap();   // sm_90 and later only; the compiler emits it for sm_90 targets only
#endif
}

}  // namespace tl
