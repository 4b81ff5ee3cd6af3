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
//   mbarrier_arrive_cluster(bar, cta)        one arrival on the mbarrier at the
//                                            same shared-memory offset as `bar`
//                                            in block `cta` of the cluster
//   tma_load_multicast_2d(dst, desc, bar, mask, c0, c1)
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

}  // namespace tl
