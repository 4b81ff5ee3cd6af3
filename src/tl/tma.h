// Copyright the TileLang compiler authors.
//
// The Tensor Memory Accelerator (TMA, sm_90+): bulk tensor copies between
// global and shared memory described by a CUtensorMap, and plain bulk
// copies.  Loads complete on an mbarrier (barrier.h); stores complete in
// bulk async-groups.
//
//   tma_load_{1..5}d(smem_dst, desc, bar, c0, ..., c{R-1})
//   tma_store_{1..5}d(desc, smem_src, c0, ..., c{R-1})
//   tma_store_arrive()          closes the group of stores issued so far
//   tma_store_wait<N>()         waits until at most N groups still read smem
//   tma_store_wait<N, READ>()   either of the two (T.tma_store_wait's form)
//   tma_store_wait_all<N>()     ... until at most N groups are incomplete
//   prefetch_tma_descriptor(desc)
//   bulk_copy_g2s(smem_dst, gmem_src, bytes, bar)    no descriptor needed
//   tma_load_bulk(smem_dst, gmem_src, bytes, bar)    the same (T.tma_copy's name)
//   tma_store_bulk(gmem_dst, smem_src, bytes)        shared -> global, joins the bulk group
//
// Coordinates are element indices, c0 along the innermost (contiguous)
// dimension of the tensor map; they are signed, and the parts of a box that
// fall outside the tensor are filled with zeros on load and skipped on store.
//
// The descriptor is built on the host with cuTensorMapEncodeTiled and passed
// by value as a `const __grid_constant__ CUtensorMap` kernel parameter; the
// device functions take its address.  docs/hopper.md gives the exact
// encoding the compiler uses for GEMM operand tiles (the 128-byte swizzle
// layout that gemm_sm90.h reads) and tests/gpu/csrc/test_tma.cu has a host
// helper that builds it.
//
// Rules the caller follows:
// * one thread issues a load (elect_one_sync() or a thread-index test), after
//   mbarrier_arrive_expect_tx(bar, bytes) on the same barrier for the total
//   bytes of the loads of that phase (a full box counts completely, also
//   where it was zero-filled out of bounds);
// * the innermost coordinate c0 times the element size is a multiple of 16
//   bytes (negative values included): the hardware faults otherwise, and the
//   kernel dies with "an illegal instruction was encountered" (the tensor
//   map cannot check this, coordinates are only known at run time);
// * the shared memory destination is 128-byte aligned, and 1024-byte
//   aligned whenever the tensor map uses a swizzle, so that the smem layout
//   is the documented one;
// * threads that wrote the smem source of a store call fence_proxy_async()
//   and then synchronize before the issuing thread stores; the source must
//   not be overwritten before tma_store_arrive() + tma_store_wait<0>();
// * the load destination is a `.shared::cluster` address: in a kernel
//   launched without clusters this is simply the CTA's own shared memory.
//
// Everything here needs sm_90; older targets compile it to a trap.
#pragma once

#include "barrier.h"

// The CUtensorMap type: 64-byte aligned, 128 opaque bytes.  <cuda.h> is read
// with TVM's macros parked, as common.h does for the other system headers.
// NVRTC has no <cuda.h> of its own; there an ABI-identical stand-in is
// declared unless cuda.h was included before this header.
#if !defined(__CUDACC_RTC__)
#include "macros_park.h"
#include <cuda.h>
#include "macros_restore.h"
#elif !defined(CUDA_VERSION)
typedef struct CUtensorMap_st {
  alignas(64) unsigned long long opaque[16];
} CUtensorMap;
#endif

namespace tl {

namespace detail {

TL_DEVICE uint64_t desc_addr(const CUtensorMap* desc) {
  return reinterpret_cast<uint64_t>(desc);
}

}  // namespace detail

// Loads the box at coordinates (c0, ...) of the tensor described by `desc`
// into shared memory at `smem_dst`, completing `box bytes` transactions on
// `bar`.
#if TL_HAS_SM90
#define TL_TMA_LOAD(RANK, COORDS, ...)                                            \
  asm volatile("cp.async.bulk.tensor." #RANK                                      \
               "d.shared::cluster.global.mbarrier::complete_tx::bytes"          \
               " [%0], [%1, {" COORDS "}], [%2];\n" ::"r"(smem_addr(smem_dst)),  \
               "l"(detail::desc_addr(desc)), "r"(detail::bar_addr(bar)), __VA_ARGS__ \
               : "memory")
#define TL_TMA_STORE(RANK, COORDS, ...)                                         \
  asm volatile("cp.async.bulk.tensor." #RANK "d.global.shared::cta.bulk_group"  \
               " [%0, {" COORDS "}], [%1];\n" ::"l"(detail::desc_addr(desc)), \
               "r"(smem_addr(smem_src)), __VA_ARGS__                            \
               : "memory")
#else
#define TL_TMA_LOAD(RANK, COORDS, ...) detail::sm90_unsupported()
#define TL_TMA_STORE(RANK, COORDS, ...) detail::sm90_unsupported()
#endif

template <class Bar>
TL_DEVICE void tma_load_1d(void* smem_dst, const CUtensorMap* desc, Bar* bar, int c0) {
  TL_TMA_LOAD(1, "%3", "r"(c0));
}
template <class Bar>
TL_DEVICE void tma_load_2d(void* smem_dst, const CUtensorMap* desc, Bar* bar, int c0,
                           int c1) {
  TL_TMA_LOAD(2, "%3, %4", "r"(c0), "r"(c1));
}
template <class Bar>
TL_DEVICE void tma_load_3d(void* smem_dst, const CUtensorMap* desc, Bar* bar, int c0,
                           int c1, int c2) {
  TL_TMA_LOAD(3, "%3, %4, %5", "r"(c0), "r"(c1), "r"(c2));
}
template <class Bar>
TL_DEVICE void tma_load_4d(void* smem_dst, const CUtensorMap* desc, Bar* bar, int c0,
                           int c1, int c2, int c3) {
  TL_TMA_LOAD(4, "%3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
}
template <class Bar>
TL_DEVICE void tma_load_5d(void* smem_dst, const CUtensorMap* desc, Bar* bar, int c0,
                           int c1, int c2, int c3, int c4) {
  TL_TMA_LOAD(5, "%3, %4, %5, %6, %7", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4));
}

// Stores the box at `smem_src` to the tensor at coordinates (c0, ...).  The
// store joins the current bulk async-group (see tma_store_arrive).
TL_DEVICE void tma_store_1d(const CUtensorMap* desc, const void* smem_src, int c0) {
  TL_TMA_STORE(1, "%2", "r"(c0));
}
TL_DEVICE void tma_store_2d(const CUtensorMap* desc, const void* smem_src, int c0, int c1) {
  TL_TMA_STORE(2, "%2, %3", "r"(c0), "r"(c1));
}
TL_DEVICE void tma_store_3d(const CUtensorMap* desc, const void* smem_src, int c0, int c1,
                            int c2) {
  TL_TMA_STORE(3, "%2, %3, %4", "r"(c0), "r"(c1), "r"(c2));
}
TL_DEVICE void tma_store_4d(const CUtensorMap* desc, const void* smem_src, int c0, int c1,
                            int c2, int c3) {
  TL_TMA_STORE(4, "%2, %3, %4, %5", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
}
TL_DEVICE void tma_store_5d(const CUtensorMap* desc, const void* smem_src, int c0, int c1,
                            int c2, int c3, int c4) {
  TL_TMA_STORE(5, "%2, %3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4));
}

#undef TL_TMA_LOAD
#undef TL_TMA_STORE

// Closes the bulk async-group of the TMA stores this thread issued since the
// previous call.
TL_DEVICE void tma_store_arrive() {
#if TL_HAS_SM90
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#else
  detail::sm90_unsupported();
#endif
}

// Waits until at most N of this thread's committed store groups are still
// reading their shared memory source, which may be overwritten afterwards.
template <int N>
TL_DEVICE void tma_store_wait() {
  static_assert(N >= 0, "tma_store_wait needs a non-negative count");
#if TL_HAS_SM90
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// Waits until at most N of this thread's committed store groups are
// incomplete, i.e. their writes to global memory were performed.
template <int N>
TL_DEVICE void tma_store_wait_all() {
  static_assert(N >= 0, "tma_store_wait_all needs a non-negative count");
#if TL_HAS_SM90
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// Upstream's spelling, T.tma_store_wait(count, read): READ waits only for
// the reads of shared memory (tma_store_wait), else for the whole stores.
template <int N, bool READ>
TL_DEVICE void tma_store_wait() {
  if constexpr (READ) {
    tma_store_wait<N>();
  } else {
    tma_store_wait_all<N>();
  }
}

// Brings the descriptor into the TMA unit's cache ahead of its first use;
// any thread may call it, typically the one that issues the loads.
TL_DEVICE void prefetch_tma_descriptor(const CUtensorMap* desc) {
#if TL_HAS_SM90
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(detail::desc_addr(desc)) : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// Copies `bytes` contiguous bytes from global to shared memory without a
// tensor map, completing `bytes` transactions on `bar`.  Both addresses are
// 16-byte aligned and bytes is a multiple of 16.
template <class Bar>
TL_DEVICE void bulk_copy_g2s(void* smem_dst, const void* gmem_src, uint32_t bytes, Bar* bar) {
#if TL_HAS_SM90
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(smem_addr(smem_dst)),
      "l"(static_cast<uint64_t>(__cvta_generic_to_global(gmem_src))), "r"(bytes),
      "r"(detail::bar_addr(bar))
      : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// The same bulk copy under the name T.tma_copy's 1-D lowering uses (a
// contiguous run needs no tensor map).
template <class Bar>
TL_DEVICE void tma_load_bulk(void* smem_dst, const void* gmem_src, uint32_t bytes, Bar* bar) {
  bulk_copy_g2s(smem_dst, gmem_src, bytes, bar);
}

// Copies `bytes` contiguous bytes from shared to global memory without a
// tensor map; the copy joins the current bulk async-group like a TMA store
// (tma_store_arrive / tma_store_wait).  Both addresses are 16-byte aligned
// and bytes is a multiple of 16.
TL_DEVICE void tma_store_bulk(void* gmem_dst, const void* smem_src, uint32_t bytes) {
#if TL_HAS_SM90
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(
                   static_cast<uint64_t>(__cvta_generic_to_global(gmem_dst))),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
#else
  detail::sm90_unsupported();
#endif
}

}  // namespace tl
