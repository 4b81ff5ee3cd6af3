// Copyright the TileLang compiler authors.
//
// Warp vote, ballot, shuffle and match helpers (T.any_sync, T.ballot_sync, T.shfl_sync, ...) and
// the thread-position queries (T.get_lane_idx, T.get_warp_idx, ...).  Positions count threads in
// the block's linear order (x fastest), the order warps are formed in.
#pragma once

#include "common.h"

namespace tl {

TL_DEVICE int linear_thread_idx() {
  return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}
TL_DEVICE int get_lane_idx(int warp_size = 32) { return linear_thread_idx() % warp_size; }
TL_DEVICE int get_warp_idx(int warp_size = 32) { return linear_thread_idx() / warp_size; }
// The warp index made warp-uniform by a broadcast from lane 0, so the compiler may keep it in a
// uniform register (CUTLASS canonical_warp_idx_sync).
TL_DEVICE int get_warp_idx_sync(int warp_size = 32) {
  // the broadcast is only valid when a "warp" is the hardware warp; other sizes compute it directly
  if (warp_size != 32) return linear_thread_idx() / warp_size;
  return ::__shfl_sync(0xffffffffu, linear_thread_idx() / warp_size, 0);
}
TL_DEVICE int get_warp_group_idx(int warp_size = 32, int warps_per_group = 4) {
  return linear_thread_idx() / (warp_size * warps_per_group);
}

// Vote: the 32-bit CUDA results, ballots widened to 64 bits as upstream returns them.
TL_DEVICE int any_sync(unsigned mask, int pred) { return __any_sync(mask, pred); }
TL_DEVICE int all_sync(unsigned mask, int pred) { return __all_sync(mask, pred); }
TL_DEVICE uint64_t ballot_sync(unsigned mask, int pred) { return (uint64_t)__ballot_sync(mask, pred); }
TL_DEVICE uint64_t activemask() { return (uint64_t)__activemask(); }
// Match compares the value's bits (int, unsigned, 64-bit integers, float or double).
template <typename T> TL_DEVICE unsigned match_any_sync(unsigned mask, T value) {
  return __match_any_sync(mask, value);
}
template <typename T> TL_DEVICE unsigned match_all_sync(unsigned mask, T value) {
  int pred;
  return __match_all_sync(mask, value, &pred);
}

// Shuffles for every register type: the types CUDA's __shfl*_sync take (32/64-bit integers and
// floats, 16-bit floats and their pairs) as they are; any other (8-bit floats, chars, shorts,
// small structs) as the bits of a 32- or 64-bit word.
namespace detail {
template <typename T>
constexpr bool shfl_native_v =
    is_same_v<T, int> || is_same_v<T, unsigned> || is_same_v<T, long> || is_same_v<T, unsigned long> ||
    is_same_v<T, long long> || is_same_v<T, unsigned long long> || is_same_v<T, float> ||
    is_same_v<T, double> || is_same_v<T, half> || is_same_v<T, half2> || is_same_v<T, __nv_bfloat16> ||
    is_same_v<T, __nv_bfloat162>;
template <bool Narrow> struct shfl_word_of { using type = unsigned; };
template <> struct shfl_word_of<false> { using type = unsigned long long; };
template <typename T>
struct shfl_word {
  static_assert(sizeof(T) <= 8, "a shuffled value is at most 8 bytes");
  using type = typename shfl_word_of<sizeof(T) <= 4>::type;
  static TL_DEVICE type pack(T v) {
    type w = 0;
    memcpy(&w, &v, sizeof(T));
    return w;
  }
  static TL_DEVICE T unpack(type w) {
    T v;
    memcpy(&v, &w, sizeof(T));
    return v;
  }
};
}  // namespace detail

#define TL_SHUFFLE(NAME, CUDA, OFFSET_T)                                                        \
  template <typename T> TL_DEVICE T NAME(unsigned mask, T v, OFFSET_T offset, int width) {      \
    if constexpr (detail::shfl_native_v<T>) {                                                   \
      return ::CUDA(mask, v, offset, width);                                                    \
    } else {                                                                                    \
      using W = detail::shfl_word<T>;                                                           \
      return W::unpack(::CUDA(mask, W::pack(v), offset, width));                                \
    }                                                                                           \
  }
TL_SHUFFLE(shfl_sync, __shfl_sync, int)
TL_SHUFFLE(shfl_xor_sync, __shfl_xor_sync, int)
TL_SHUFFLE(shfl_down_sync, __shfl_down_sync, unsigned)
TL_SHUFFLE(shfl_up_sync, __shfl_up_sync, unsigned)

// One lane of each group of `extent` threads (0: of the whole block) is elected: the group's
// first thread.
TL_DEVICE bool shuffle_elect(int extent) {
  int t = linear_thread_idx();
  return extent == 0 ? t == 0 : t % extent == 0;
}

// Position of the offset-th set bit of mask at or after base (CUDA __fns), and of the lowest set
// bit (one-based; 0 for none).
TL_DEVICE unsigned fns(unsigned mask, unsigned base, int offset) { return __fns(mask, base, offset); }
TL_DEVICE int ffs(int v) { return __ffs(v); }
TL_DEVICE int ffs(unsigned v) { return __ffs((int)v); }
TL_DEVICE int ffs(long long v) { return __ffsll(v); }
TL_DEVICE int ffs(unsigned long long v) { return __ffsll((long long)v); }
TL_DEVICE int ffs(long v) { return __ffsll((long long)v); }
TL_DEVICE int ffs(unsigned long v) { return __ffsll((long long)v); }

// The same operations under CUDA's own names (what upstream's generated source shows): the
// T.* intrinsics emit these.
TL_DEVICE int __any_sync(unsigned mask, int pred) { return ::__any_sync(mask, pred); }
TL_DEVICE int __all_sync(unsigned mask, int pred) { return ::__all_sync(mask, pred); }
TL_DEVICE uint64_t __ballot_sync(unsigned mask, int pred) { return (uint64_t)::__ballot_sync(mask, pred); }
TL_DEVICE uint64_t __activemask() { return (uint64_t)::__activemask(); }
template <typename T> TL_DEVICE unsigned __match_any_sync(unsigned mask, T value) {
  return ::__match_any_sync(mask, value);
}
template <typename T> TL_DEVICE unsigned __match_all_sync(unsigned mask, T value) {
  int pred;
  return ::__match_all_sync(mask, value, &pred);
}
TL_SHUFFLE(__shfl_sync, __shfl_sync, int)
TL_SHUFFLE(__shfl_xor_sync, __shfl_xor_sync, int)
TL_SHUFFLE(__shfl_down_sync, __shfl_down_sync, unsigned)
TL_SHUFFLE(__shfl_up_sync, __shfl_up_sync, unsigned)
#undef TL_SHUFFLE
TL_DEVICE int __ffs(int v) { return ::__ffs(v); }
TL_DEVICE int __ffs(unsigned v) { return ::__ffs((int)v); }
TL_DEVICE int __ffsll(long long v) { return ::__ffsll(v); }
TL_DEVICE int __ffsll(unsigned long long v) { return ::__ffsll((long long)v); }
TL_DEVICE int __ffsll(long v) { return ::__ffsll((long long)v); }
TL_DEVICE int __ffsll(unsigned long v) { return ::__ffsll((long long)v); }
TL_DEVICE unsigned __fns(unsigned mask, unsigned base, int offset) { return ::__fns(mask, base, offset); }

}  // namespace tl
