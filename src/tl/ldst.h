// Copyright the TileLang compiler authors.
//
// Explicit-width memory accesses (T.ldg32 ... T.ldg256, T.stg32 ... T.stg256, T.lds32 ...
// T.lds128, T.sts32 ... T.sts128): one PTX ld/st of 32, 64, 128 or 256 bits at a pointer the
// caller has aligned.  Loads return uint32_t / uint2 / uint4 / ulonglong4 (the types TVM gives
// uint32, uint32x2, uint32x4 and uint32x8); stores take any value of the access width.  The
// `_conditional` forms take a predicate: a load whose predicate is false returns zero and
// touches no memory; a store whose predicate is false writes nothing.
#pragma once

#include "common.h"

// TVM spells uint32x8 `ulonglong4`, which CUDA 13 marks deprecated; naming it here is deliberate.
#pragma nv_diagnostic push
#pragma nv_diag_suppress 1444

namespace tl {

namespace detail {

template <class To, class From>
TL_DEVICE To ldst_bits(const From &x) {
  static_assert(sizeof(To) == sizeof(From), "the value must have the access width");
  To y;
  memcpy(&y, &x, sizeof(To));
  return y;
}

TL_DEVICE unsigned ldst_smem(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

}  // namespace detail

// ----- global loads ------------------------------------------------------------------------------
TL_DEVICE uint32_t load_global_32_conditional(const void *p, bool pred) {
  uint32_t r = 0;
  asm volatile("{.reg .pred q; setp.ne.b32 q, %2, 0; @q ld.global.b32 %0, [%1];}"
               : "+r"(r) : "l"(p), "r"((int)pred) : "memory");
  return r;
}
TL_DEVICE uint2 load_global_64_conditional(const void *p, bool pred) {
  uint2 r = make_uint2(0, 0);
  asm volatile("{.reg .pred q; setp.ne.b32 q, %3, 0; @q ld.global.v2.b32 {%0, %1}, [%2];}"
               : "+r"(r.x), "+r"(r.y) : "l"(p), "r"((int)pred) : "memory");
  return r;
}
TL_DEVICE uint4 load_global_128_conditional(const void *p, bool pred) {
  uint4 r = make_uint4(0, 0, 0, 0);
  asm volatile("{.reg .pred q; setp.ne.b32 q, %5, 0; @q ld.global.v4.b32 {%0, %1, %2, %3}, [%4];}"
               : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w) : "l"(p), "r"((int)pred) : "memory");
  return r;
}
TL_DEVICE ulonglong4 load_global_256_conditional(const void *p, bool pred) {
  uint4 lo = load_global_128_conditional(p, pred);
  uint4 hi = load_global_128_conditional(static_cast<const char *>(p) + 16, pred);
  struct { uint4 a, b; } both = {lo, hi};
  return detail::ldst_bits<ulonglong4>(both);
}
TL_DEVICE uint32_t load_global_32(const void *p) { return load_global_32_conditional(p, true); }
TL_DEVICE uint2 load_global_64(const void *p) { return load_global_64_conditional(p, true); }
TL_DEVICE uint4 load_global_128(const void *p) { return load_global_128_conditional(p, true); }
TL_DEVICE ulonglong4 load_global_256(const void *p) { return load_global_256_conditional(p, true); }

// ----- global stores -----------------------------------------------------------------------------
template <class V>
TL_DEVICE void store_global_32_conditional(void *p, V value, bool pred) {
  uint32_t v = detail::ldst_bits<uint32_t>(value);
  asm volatile("{.reg .pred q; setp.ne.b32 q, %2, 0; @q st.global.b32 [%0], %1;}"
               :: "l"(p), "r"(v), "r"((int)pred) : "memory");
}
template <class V>
TL_DEVICE void store_global_64_conditional(void *p, V value, bool pred) {
  uint2 v = detail::ldst_bits<uint2>(value);
  asm volatile("{.reg .pred q; setp.ne.b32 q, %3, 0; @q st.global.v2.b32 [%0], {%1, %2};}"
               :: "l"(p), "r"(v.x), "r"(v.y), "r"((int)pred) : "memory");
}
template <class V>
TL_DEVICE void store_global_128_conditional(void *p, V value, bool pred) {
  uint4 v = detail::ldst_bits<uint4>(value);
  asm volatile("{.reg .pred q; setp.ne.b32 q, %5, 0; @q st.global.v4.b32 [%0], {%1, %2, %3, %4};}"
               :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"((int)pred) : "memory");
}
template <class V>
TL_DEVICE void store_global_256_conditional(void *p, V value, bool pred) {
  struct Halves { uint4 a, b; };
  Halves v = detail::ldst_bits<Halves>(value);
  store_global_128_conditional(p, v.a, pred);
  store_global_128_conditional(static_cast<char *>(p) + 16, v.b, pred);
}
template <class V> TL_DEVICE void store_global_32(void *p, V v) { store_global_32_conditional(p, v, true); }
template <class V> TL_DEVICE void store_global_64(void *p, V v) { store_global_64_conditional(p, v, true); }
template <class V> TL_DEVICE void store_global_128(void *p, V v) { store_global_128_conditional(p, v, true); }
template <class V> TL_DEVICE void store_global_256(void *p, V v) { store_global_256_conditional(p, v, true); }

// ----- shared memory -----------------------------------------------------------------------------
TL_DEVICE uint32_t load_shared_32(const void *p) {
  uint32_t r;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(r) : "r"(detail::ldst_smem(p)) : "memory");
  return r;
}
TL_DEVICE uint2 load_shared_64(const void *p) {
  uint2 r;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "r"(detail::ldst_smem(p)) : "memory");
  return r;
}
TL_DEVICE uint4 load_shared_128(const void *p) {
  uint4 r;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(detail::ldst_smem(p)) : "memory");
  return r;
}
template <class V>
TL_DEVICE void store_shared_32(void *p, V value) {
  uint32_t v = detail::ldst_bits<uint32_t>(value);
  asm volatile("st.shared.b32 [%0], %1;" :: "r"(detail::ldst_smem(p)), "r"(v) : "memory");
}
template <class V>
TL_DEVICE void store_shared_64(void *p, V value) {
  uint2 v = detail::ldst_bits<uint2>(value);
  asm volatile("st.shared.v2.b32 [%0], {%1, %2};" :: "r"(detail::ldst_smem(p)), "r"(v.x), "r"(v.y) : "memory");
}
template <class V>
TL_DEVICE void store_shared_128(void *p, V value) {
  uint4 v = detail::ldst_bits<uint4>(value);
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};"
               :: "r"(detail::ldst_smem(p)), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

}  // namespace tl

#pragma nv_diagnostic pop
