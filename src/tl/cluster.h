// Copyright the TileLang compiler authors.
//
// Thread block clusters (sm_90): the blocks of a cluster run at the same time
// on one GPC and can address each other's shared memory.  What a GEMM needs
// to share one operand tile between the blocks of a cluster:
//
//   cluster_ctarank() / cluster_nctarank()   this block's rank in its cluster,
//                                            the cluster's block count
//   cluster_arrive() / cluster_wait()        the cluster-wide barrier, in two
//   cluster_sync()                           halves (release / acquire) or one
//   cluster_arrive_relaxed()                 the arrive half ordering no memory
//   mbarrier_arrive_cluster(bar, cta)        one arrival on the mbarrier at the
//                                            same shared-memory offset as `bar`
//                                            in block `cta` of the cluster
//   map_shared_rank(ptr, cta)               ptr's location in block cta (generic)
//   mbarrier_arrive_cluster_release(bar, cta)  the same arrival, releasing at
//                                            cluster scope
//   tma_store_cluster(dst, src, cta, bytes, bar)  bulk copy of this block's
//                                            smem into block cta's, completing
//                                            on its barrier (T.copy_cluster)
//   tma_load_multicast_2d(dst, desc, bar, mask, c0, c1)   (also _1d .. _5d, and
//   tma_load_multicast_bulk(dst, src, bytes, bar, mask) without a tensor map)
//                                            a TMA box written to `dst` in every
//                                            block whose bit is set in `mask`,
//                                            each completing its bytes on the
//                                            mbarrier at `bar`'s offset in that
//                                            block
//
// Usage rules (PTX ISA 8.0, "Cluster" and "cp.async.bulk.tensor"):
// * A kernel runs in clusters when compiled with __cluster_dims__(x, y, z) or
//   launched with the cluster-dimension attribute; the grid must be a multiple
//   of the cluster shape.
// * Before a block touches another block's shared memory or barriers, both
//   must have started and initialised them: mbarrier_init, fence_barrier_init
//   (release at cluster scope), then cluster_sync() in every thread.
// * A block must not exit while other blocks may still write into its shared
//   memory or arrive on its barriers: end with cluster_sync().
// * A multicast load delivers `box bytes` to each destination block, so each
//   block's full barrier expects the bytes of every box that lands in it,
//   whichever block issued it.
#pragma once

#include "common.h"
#include "barrier.h"
#include "tma.h"

namespace tl {

TL_DEVICE uint32_t cluster_ctarank() {
#if TL_HAS_SM90
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#else
  return detail::sm90_unsupported(), 0u;
#endif
}

TL_DEVICE uint32_t cluster_nctarank() {
#if TL_HAS_SM90
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
#else
  return detail::sm90_unsupported(), 1u;
#endif
}

// Every thread of every block of the cluster calls arrive, then wait.
TL_DEVICE void cluster_arrive() {
#if TL_HAS_SM90
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#else
  detail::sm90_unsupported();
#endif
}

// The arrive without release semantics (T.cluster_arrive_relaxed): orders no memory.
TL_DEVICE void cluster_arrive_relaxed() {
#if TL_HAS_SM90
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#else
  detail::sm90_unsupported();
#endif
}

TL_DEVICE void cluster_wait() {
#if TL_HAS_SM90
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  detail::sm90_unsupported();
#endif
}

TL_DEVICE void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// One arrival on the mbarrier at `bar`'s offset in block `cta` of the cluster
// (this block included), with the default semantics (release at CTA scope, as
// CUTLASS's ClusterBarrier::arrive uses): a consumer's release of a stage its
// wgmma reads are done with.  Measured on an H200: with .release.cluster the
// 2x1-cluster GEMM ran at 0.66x of the same kernel without clusters (its
// warps stalled on the releases); with the default, 0.98x.
template <class Bar>
TL_DEVICE void mbarrier_arrive_cluster(Bar* bar, uint32_t cta) {
#if TL_HAS_SM90
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(detail::bar_addr(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// The box at (c0, c1) of `desc`, written to `smem_dst` in every block of the
// cluster whose bit is set in `mask`; each of them gets `box bytes`
// transactions on the mbarrier at `bar`'s offset in its own shared memory.
template <class Bar>
TL_DEVICE void tma_load_multicast_2d(void* smem_dst, const CUtensorMap* desc, Bar* bar,
                                     uint16_t mask, int c0, int c1) {
#if TL_HAS_SM90
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;\n" ::"r"(smem_addr(smem_dst)),
      "l"(detail::desc_addr(desc)), "r"(detail::bar_addr(bar)), "h"(mask), "r"(c0), "r"(c1)
      : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// The same for boxes of rank 1, 3, 4 and 5 (T.tma_copy / T.copy_cluster with
// cluster_mask), and tma_load_multicast_bulk: `bytes` contiguous bytes of
// global memory (no tensor map) written to `smem_dst` in every block of
// `mask`, each completing `bytes` transactions on its barrier at `bar`'s
// offset.  Addresses are 16-byte aligned and bytes is a multiple of 16.
#if TL_HAS_SM90
#define TL_TMA_LOAD_MC(RANK, COORDS, ...)                                              \
  asm volatile("cp.async.bulk.tensor." #RANK                                           \
               "d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster" \
               " [%0], [%1, {" COORDS "}], [%2], %3;\n" ::"r"(smem_addr(smem_dst)),     \
               "l"(detail::desc_addr(desc)), "r"(detail::bar_addr(bar)), "h"(mask),       \
               __VA_ARGS__                                                             \
               : "memory")
#else
#define TL_TMA_LOAD_MC(RANK, COORDS, ...) detail::sm90_unsupported()
#endif
template <class Bar>
TL_DEVICE void tma_load_multicast_1d(void* smem_dst, const CUtensorMap* desc, Bar* bar,
                                     uint16_t mask, int c0) {
  TL_TMA_LOAD_MC(1, "%4", "r"(c0));
}
template <class Bar>
TL_DEVICE void tma_load_multicast_3d(void* smem_dst, const CUtensorMap* desc, Bar* bar,
                                     uint16_t mask, int c0, int c1, int c2) {
  TL_TMA_LOAD_MC(3, "%4, %5, %6", "r"(c0), "r"(c1), "r"(c2));
}
template <class Bar>
TL_DEVICE void tma_load_multicast_4d(void* smem_dst, const CUtensorMap* desc, Bar* bar,
                                     uint16_t mask, int c0, int c1, int c2, int c3) {
  TL_TMA_LOAD_MC(4, "%4, %5, %6, %7", "r"(c0), "r"(c1), "r"(c2), "r"(c3));
}
template <class Bar>
TL_DEVICE void tma_load_multicast_5d(void* smem_dst, const CUtensorMap* desc, Bar* bar,
                                     uint16_t mask, int c0, int c1, int c2, int c3, int c4) {
  TL_TMA_LOAD_MC(5, "%4, %5, %6, %7, %8", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4));
}
#undef TL_TMA_LOAD_MC

template <class Bar>
TL_DEVICE void tma_load_multicast_bulk(void* smem_dst, const void* gmem_src, uint32_t bytes,
                                       Bar* bar, uint16_t mask) {
#if TL_HAS_SM90
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1], %2, [%3], %4;\n" ::"r"(smem_addr(smem_dst)),
      "l"(static_cast<uint64_t>(__cvta_generic_to_global(gmem_src))), "r"(bytes),
      "r"(detail::bar_addr(bar)), "h"(mask)
      : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// The address of `ptr`'s shared-memory location in block `cta` of the cluster,
// as a generic pointer (plain loads and stores reach the peer's shared
// memory through it; order them with cluster_sync or a cluster-scope
// release before the peer reads).
template <class T>
TL_DEVICE T* map_shared_rank(T* ptr, uint32_t cta) {
#if TL_HAS_SM90
  uint64_t out;
  asm volatile("mapa.u64 %0, %1, %2;\n"
               : "=l"(out)
               : "l"(reinterpret_cast<uint64_t>(ptr)), "r"(cta));
  return reinterpret_cast<T*>(out);
#else
  return detail::sm90_unsupported(), ptr;
#endif
}

// `*map_shared_rank(dst, cta) = value`: one element of a SIMT cluster copy.
template <class T, class V>
TL_DEVICE void map_shared_rank_store(T* dst, uint32_t cta, V value) {
  *map_shared_rank(dst, cta) = static_cast<T>(value);
}

// One arrival on the mbarrier at `bar`'s offset in block `cta`, releasing at
// cluster scope this thread's earlier writes (and, after a block barrier,
// the block's) to the peer's shared memory.
template <class Bar>
TL_DEVICE void mbarrier_arrive_cluster_release(Bar* bar, uint32_t cta) {
#if TL_HAS_SM90
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(detail::bar_addr(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote)
               : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// Copies `bytes` contiguous bytes of this block's shared memory at `src` to
// `dst`'s offset in block `cta` (bulk async copy), completing them on the
// mbarrier at `bar`'s offset in that block, after one arrival there that
// expects them.  Call from one thread, after the block's writes to `src`
// were fenced (fence_proxy_async) and synchronised.  16-byte aligned, bytes a
// multiple of 16.
template <class Bar>
TL_DEVICE void tma_store_cluster(void* dst, const void* src, uint32_t cta, uint32_t bytes,
                                 Bar* bar) {
#if TL_HAS_SM90
  uint32_t rdst, rbar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(rdst)
               : "r"(smem_addr(dst)), "r"(cta));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(rbar)
               : "r"(detail::bar_addr(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%0], %1;\n" ::"r"(rbar),
               "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          rdst),
      "r"(smem_addr(src)), "r"(bytes), "r"(rbar)
      : "memory");
#else
  detail::sm90_unsupported();
#endif
}

}  // namespace tl
