// Copyright the TileLang compiler authors.
//
// Synchronization primitives for Hopper-style kernels (sm_90 and later):
// shared-memory mbarriers, the fences that order them against the async
// proxy (TMA, wgmma), named barriers and the register reallocation of warp
// specialization.  See docs/hopper.md for how a kernel strings them together.
//
//   mbarrier_init(bar, count)          one thread; then fence_barrier_init()
//                                      and a block barrier before first use
//   mbarrier_arrive(bar)               one arrival (count 1) by this thread
//   mbarrier_arrive(bar, count)        `count` arrivals at once (sm_90)
//   mbarrier_cp_async_arrive_noinc(bar) one arrival once this thread's
//                                      earlier cp.async copies landed
//   mbarrier_expect_tx(bar, bytes)     raise the phase's transaction count
//   mbarrier_arrive_expect_tx(bar, b)  both at once: what a TMA producer does
//   mbarrier_try_wait_parity(bar, ph)  true once phase parity `ph` completed
//   mbarrier_wait(bar, ph)             spins on try_wait_parity
//   fence_barrier_init()               makes mbarrier_init visible to the
//                                      async proxy and the cluster
//   fence_proxy_async()                orders this thread's generic-proxy
//                                      shared memory accesses before later
//                                      async-proxy ones (wgmma, TMA store)
//   named_barrier_sync(id, threads)    bar.sync id, threads
//   named_barrier_arrive(id, threads)  bar.arrive id, threads
//   __sync_thread_partial(id, threads) the same, upstream's names
//   __named_barrier_arrive(id, threads)
//   setmaxnreg_inc<N>() / _dec<N>()    warpgroup register reallocation
//   elect_one_sync()                   true in exactly one lane of the warp
//   tl_shuffle_elect<N>()              true in the first thread of each N
//
// Phases.  An mbarrier counts completed phases; the phase in progress after
// init is phase 0.  mbarrier_wait(bar, p) returns once the phase whose parity
// is p has completed, i.e. as soon as the barrier's current phase parity
// differs from p.  A consumer that waits for the i-th completion of a
// barrier (i = 0, 1, ...) therefore passes p = i & 1.  Waiting with parity 1
// on a fresh barrier returns at once, the idiom a producer uses for the
// "empty" barriers of a ring it has not filled yet.
//
// Barriers are passed as pointers to a 64-bit word in shared memory.  The
// pointer type is a template parameter so that both `unsigned long*`
// (<cstdint>'s uint64_t on LP64) and `unsigned long long*` (TVM's
// `#define uint64_t unsigned long long`) are accepted; it must be 8 bytes
// wide and 8-byte aligned.
//
// Architecture.  The header compiles for every target.  mbarrier init,
// arrive and wait exist since sm_80 and work there (waiting falls back to
// test_wait); everything else needs sm_90, and setmaxnreg sm_90a (or an
// arch-specific sm_100+ target).  Elsewhere the sm_90 operations trap at run
// time, elect_one_sync picks lane 0 and setmaxnreg does nothing (it is only
// a hint about register use), so a multi-architecture build compiles
// unchanged.
#pragma once

#include "common.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TL_HAS_SM90 1
#else
#define TL_HAS_SM90 0
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) ||                                   \
    (defined(__CUDA_ARCH_SPECIFIC__) && __CUDA_ARCH_SPECIFIC__ >= 1000) || \
    (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000)
#define TL_HAS_SETMAXNREG 1
#else
#define TL_HAS_SETMAXNREG 0
#endif

namespace tl {

namespace detail {

// Reached only when a kernel that uses an sm_90 feature was compiled for an
// older target and then run anyway.
TL_DEVICE void sm90_unsupported() {
#if defined(__CUDA_ARCH__)
  __trap();
#endif
}

// The shared-window address of an mbarrier word.
template <class Bar>
TL_DEVICE uint32_t bar_addr(Bar* bar) {
  static_assert(sizeof(Bar) == 8, "an mbarrier is one 64-bit word");
  return smem_addr(bar);
}

}  // namespace detail

// Initializes the barrier with an expected arrival count of `count` per
// phase and no pending transactions.  Exactly one thread calls it.
template <class Bar>
TL_DEVICE void mbarrier_init(Bar* bar, int count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(detail::bar_addr(bar)),
               "r"(count)
               : "memory");
}

// Makes preceding mbarrier_init calls of this thread visible to the async
// proxy (TMA completes transactions on the barrier) and to the other CTAs of
// the cluster.  Call it in the initializing thread, then a block barrier.
TL_DEVICE void fence_barrier_init() {
#if TL_HAS_SM90
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  detail::sm90_unsupported();
#endif
}

// One arrival (release semantics at CTA scope).
template <class Bar>
TL_DEVICE void mbarrier_arrive(Bar* bar) {
  uint64_t state;
  asm volatile("mbarrier.arrive.shared.b64 %0, [%1];\n"
               : "=l"(state)
               : "r"(detail::bar_addr(bar))
               : "memory");
  (void)state;
}

// `count` arrivals by this thread at once.
template <class Bar>
TL_DEVICE void mbarrier_arrive(Bar* bar, int count) {
#if TL_HAS_SM90
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   detail::bar_addr(bar)),
               "r"(count)
               : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// One arrival, triggered once every cp.async this thread issued before has
// completed; .noinc: it is one of the arrivals the barrier was initialised
// with (the pending count is not raised first).
template <class Bar>
TL_DEVICE void mbarrier_cp_async_arrive_noinc(Bar* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                   detail::bar_addr(bar))
               : "memory");
}

// Adds `bytes` to the transaction count of the current phase without
// arriving.  The phase completes when all arrivals happened and all
// expected bytes were delivered by complete_tx operations (TMA loads).
template <class Bar>
TL_DEVICE void mbarrier_expect_tx(Bar* bar, uint32_t bytes) {
#if TL_HAS_SM90
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(
                   detail::bar_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// expect_tx(bytes) followed by one arrival, atomically.  The usual TMA
// producer step: one thread calls this, then issues loads totalling `bytes`
// that complete on the same barrier.
template <class Bar>
TL_DEVICE void mbarrier_arrive_expect_tx(Bar* bar, uint32_t bytes) {
#if TL_HAS_SM90
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   detail::bar_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  detail::sm90_unsupported();
#endif
}

// Non-blocking probe with acquire semantics: true when the phase with parity
// `phase` has completed.  On sm_90 this is try_wait, which may suspend the
// thread for a hardware-chosen time before giving up; before sm_90 it is
// test_wait, which returns at once.
template <class Bar>
TL_DEVICE bool mbarrier_try_wait_parity(Bar* bar, int phase) {
  uint32_t done;
#if TL_HAS_SM90
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(detail::bar_addr(bar)), "r"(phase)
      : "memory");
#else
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(detail::bar_addr(bar)), "r"(phase)
      : "memory");
#endif
  return done != 0;
}

// Blocks until the phase with parity `phase` has completed (see the top of
// this file).  Afterwards the data delivered by the phase's TMA loads and the
// shared memory writes released by its arrivals are visible to this thread.
template <class Bar>
TL_DEVICE void mbarrier_wait(Bar* bar, int phase) {
  while (!mbarrier_try_wait_parity(bar, phase)) {
  }
}

// Orders this thread's earlier generic-proxy accesses to shared memory
// (ordinary stores, stmatrix) before its later async-proxy accesses, and
// with a following barrier before those of other threads: every thread
// that wrote a tile calls it before the barrier after which wgmma reads or a
// TMA store copies that tile.
TL_DEVICE void fence_proxy_async() {
#if TL_HAS_SM90
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
  detail::sm90_unsupported();
#endif
}

// Named barriers 1..15 (0 is __syncthreads).  `threads` counts threads, is a
// multiple of 32 and is the same in every participating warp; sync waits for
// all of them, arrive only counts this warp in and continues.
TL_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

TL_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Upstream TileLang's spellings (T.sync_threads(id, n), T.named_barrier_arrive).
TL_DEVICE void __sync_thread_partial(int id, int threads) { named_barrier_sync(id, threads); }
TL_DEVICE void __named_barrier_arrive(int id, int threads) { named_barrier_arrive(id, threads); }

// Warp specialization: every thread of a warpgroup calls one of these with
// the same N (24..256, a multiple of 8) to shrink (dec) or grow (inc) the
// per-thread register budget of the warpgroup.  They take effect only in a
// kernel compiled with a register cap, i.e. __launch_bounds__(threads, 1)
// or -maxrregcount, and when each warpgroup role is one branch of an
// if/else; ptxas reports it otherwise (warning C7508).
template <int N>
TL_DEVICE void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24..256 in steps of 8");
#if TL_HAS_SETMAXNREG
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

template <int N>
TL_DEVICE void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24..256 in steps of 8");
#if TL_HAS_SETMAXNREG
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// True in exactly one active lane of the (converged) warp.  Use it to let a
// single thread issue TMA operations without a divergent lane-id test.
TL_DEVICE bool elect_one_sync() {
#if TL_HAS_SM90
  uint32_t pred;
  asm volatile(
      "{\n.reg .pred p;\n.reg .b32 lane;\n"
      "elect.sync lane|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(pred));
  return pred != 0;
#else
  return (threadIdx.x & 31u) == 0u;
#endif
}

// True in the first thread of every group of N consecutive threads of the
// block (N a multiple of 32 dividing the block): the leader that issues a
// T.tma_copy for its group.  Lane 0's answer is shared with the warp so the
// branch is warp-uniform.
template <int N>
TL_DEVICE bool tl_shuffle_elect() {
  static_assert(N >= 32 && N % 32 == 0, "tl_shuffle_elect scopes are whole warps");
  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int first_warp = ::__shfl_sync(0xffffffffu, static_cast<int>((tid % N) < 32u), 0);
  return first_warp && (tid & 31u) == 0u;
}

}  // namespace tl
