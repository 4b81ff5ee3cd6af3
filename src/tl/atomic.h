// Copyright the TileLang compiler authors.
//
// Atomic read-modify-write operations on global or shared memory.  Every
// function returns the value that was in memory just before the update,
// like the CUDA builtins do.
#pragma once

#include "common.h"

namespace tl {

// ---------------------------------------------------------------------------
// atomic_add
// ---------------------------------------------------------------------------

TL_DEVICE float atomic_add(float* addr, float val) { return atomicAdd(addr, val); }
TL_DEVICE double atomic_add(double* addr, double val) { return atomicAdd(addr, val); }
TL_DEVICE int atomic_add(int* addr, int val) { return atomicAdd(addr, val); }
TL_DEVICE unsigned atomic_add(unsigned* addr, unsigned val) { return atomicAdd(addr, val); }
TL_DEVICE long long atomic_add(long long* addr, long long val) {
  // Two's complement addition is the same operation for signed and unsigned
  // operands, so the unsigned 64-bit builtin serves signed values too.
  return static_cast<long long>(atomicAdd(reinterpret_cast<unsigned long long*>(addr),
                                          static_cast<unsigned long long>(val)));
}
// Native 16-bit float atomics exist from sm_70 (half) and sm_80 (bf16).
TL_DEVICE half atomic_add(half* addr, half val) { return atomicAdd(addr, val); }
TL_DEVICE __nv_bfloat16 atomic_add(__nv_bfloat16* addr, __nv_bfloat16 val) {
  return atomicAdd(addr, val);
}

// Mixed-type form: generated code may add, say, a float to a half buffer.
// The value is converted to the buffer's type first.  Overload resolution
// only picks this template when no exact overload above matches.
template <class T, class U>
TL_DEVICE T atomic_add(T* addr, U val) {
  return atomic_add(addr, cvt<T>(val));
}

// Adds two adjacent 16-bit values with one 32-bit atomic; addr must be
// 4-byte aligned.  Returns the old pair.
TL_DEVICE half2 atomic_add_x2(half* addr, half2 val) {
  return atomicAdd(reinterpret_cast<half2*>(addr), val);
}
TL_DEVICE __nv_bfloat162 atomic_add_x2(__nv_bfloat16* addr, __nv_bfloat162 val) {
  return atomicAdd(reinterpret_cast<__nv_bfloat162*>(addr), val);
}

// ---------------------------------------------------------------------------
// atomic_max / atomic_min
// ---------------------------------------------------------------------------

TL_DEVICE int atomic_max(int* addr, int val) { return atomicMax(addr, val); }
TL_DEVICE int atomic_min(int* addr, int val) { return atomicMin(addr, val); }
TL_DEVICE unsigned atomic_max(unsigned* addr, unsigned val) { return atomicMax(addr, val); }
TL_DEVICE unsigned atomic_min(unsigned* addr, unsigned val) { return atomicMin(addr, val); }

// IEEE floats that are not NaN order like sign-magnitude integers.  For a
// non-negative value (sign bit clear, including +0) the signed integer
// maximum of the bit patterns picks the larger float, whatever the sign of
// the value in memory: any negative float has a negative bit pattern.  For
// a value with the sign bit set (including -0 and -inf) the larger float has
// the smaller magnitude, i.e. the smaller unsigned bit pattern, and any
// non-negative float in memory has a smaller unsigned pattern than any
// negative one.  So one native integer atomic does the job, without a CAS
// loop.  atomic_min mirrors this.
TL_DEVICE float atomic_max(float* addr, float val) {
  const int bits = __float_as_int(val);
  if (bits >= 0) {
    return __int_as_float(atomicMax(reinterpret_cast<int*>(addr), bits));
  }
  return __uint_as_float(atomicMin(reinterpret_cast<unsigned*>(addr), __float_as_uint(val)));
}

TL_DEVICE float atomic_min(float* addr, float val) {
  const int bits = __float_as_int(val);
  if (bits >= 0) {
    return __int_as_float(atomicMin(reinterpret_cast<int*>(addr), bits));
  }
  return __uint_as_float(atomicMax(reinterpret_cast<unsigned*>(addr), __float_as_uint(val)));
}

namespace detail {

TL_DEVICE unsigned short bits16(half x) { return __half_as_ushort(x); }
TL_DEVICE unsigned short bits16(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }
template <class T>
TL_DEVICE T from_bits16(unsigned short b) {
  if constexpr (detail::is_same_v<T, half>) {
    return __ushort_as_half(b);
  } else {
    return __ushort_as_bfloat16(b);
  }
}

// Compare-and-swap loop on a 16-bit location (16-bit atomicCAS needs
// sm_70).  The loop stops early once the value in memory already beats
// `val`, which avoids a write (and contention) when nothing would change.
template <class T, bool IS_MAX>
TL_DEVICE T atomic_minmax16(T* addr, T val) {
  static_assert(sizeof(T) == 2, "16-bit CAS loop");
  unsigned short* p = reinterpret_cast<unsigned short*>(addr);
  const unsigned short desired = bits16(val);
  unsigned short old = *reinterpret_cast<volatile unsigned short*>(p);
  while (true) {
    const T cur = from_bits16<T>(old);
    const float fc = cvt<float>(cur), fv = cvt<float>(val);
    // NaN in memory is never replaced, and a NaN value never wins.
    const bool better = IS_MAX ? (fv > fc) : (fv < fc);
    if (!better) break;
    const unsigned short prev = atomicCAS(p, old, desired);
    if (prev == old) break;
    old = prev;
  }
  return from_bits16<T>(old);
}

// The same loop for 64-bit doubles, which have no native min/max atomic.
template <bool IS_MAX>
TL_DEVICE double atomic_minmax64(double* addr, double val) {
  unsigned long long* p = reinterpret_cast<unsigned long long*>(addr);
  const unsigned long long desired = static_cast<unsigned long long>(__double_as_longlong(val));
  unsigned long long old = *reinterpret_cast<volatile unsigned long long*>(p);
  while (true) {
    const double cur = __longlong_as_double(static_cast<long long>(old));
    const bool better = IS_MAX ? (val > cur) : (val < cur);
    if (!better) break;
    const unsigned long long prev = atomicCAS(p, old, desired);
    if (prev == old) break;
    old = prev;
  }
  return __longlong_as_double(static_cast<long long>(old));
}

}  // namespace detail

TL_DEVICE half atomic_max(half* addr, half val) {
  return detail::atomic_minmax16<half, true>(addr, val);
}
TL_DEVICE half atomic_min(half* addr, half val) {
  return detail::atomic_minmax16<half, false>(addr, val);
}
TL_DEVICE __nv_bfloat16 atomic_max(__nv_bfloat16* addr, __nv_bfloat16 val) {
  return detail::atomic_minmax16<__nv_bfloat16, true>(addr, val);
}
TL_DEVICE __nv_bfloat16 atomic_min(__nv_bfloat16* addr, __nv_bfloat16 val) {
  return detail::atomic_minmax16<__nv_bfloat16, false>(addr, val);
}
TL_DEVICE double atomic_max(double* addr, double val) {
  return detail::atomic_minmax64<true>(addr, val);
}
TL_DEVICE double atomic_min(double* addr, double val) {
  return detail::atomic_minmax64<false>(addr, val);
}

// Mixed-type forms, as for atomic_add.
template <class T, class U>
TL_DEVICE T atomic_max(T* addr, U val) {
  return atomic_max(addr, cvt<T>(val));
}
template <class T, class U>
TL_DEVICE T atomic_min(T* addr, U val) {
  return atomic_min(addr, cvt<T>(val));
}

// ---------------------------------------------------------------------------
// Packed adds (T.atomic_addx2 / T.atomic_addx4) from a source element range
// ---------------------------------------------------------------------------

// Two 16-bit values at src added to dst, dst 4-byte aligned.
TL_DEVICE void atomic_addx2(half* dst, const half* src) {
  atomic_add_x2(dst, *reinterpret_cast<const half2*>(src));
}
TL_DEVICE void atomic_addx2(__nv_bfloat16* dst, const __nv_bfloat16* src) {
  atomic_add_x2(dst, *reinterpret_cast<const __nv_bfloat162*>(src));
}
// Two or four floats: one vector atomic on sm_90+ (dst 8 / 16-byte aligned), else one per element.
TL_DEVICE void atomic_addx2(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), *reinterpret_cast<const float2*>(src));
#else
  atomicAdd(dst, src[0]);
  atomicAdd(dst + 1, src[1]);
#endif
}
TL_DEVICE void atomic_addx4(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float4*>(dst), *reinterpret_cast<const float4*>(src));
#else
  for (int i = 0; i < 4; ++i) atomicAdd(dst + i, src[i]);
#endif
}
// A source handed over as an untyped address (an element of a float32 T.view of a shared buffer
// of another type: tl::ptr_as<float>(...), which the generated code passes as void*).
TL_DEVICE void atomic_addx2(float* dst, const void* src) { atomic_addx2(dst, static_cast<const float*>(src)); }
TL_DEVICE void atomic_addx4(float* dst, const void* src) { atomic_addx4(dst, static_cast<const float*>(src)); }

// ---------------------------------------------------------------------------
// Ordered loads and stores (T.atomic_load / T.atomic_store) and atomic_or.
// ORDER: 0 relaxed, 1 acquire (consume too), 2 release, 3 seq_cst; GPU scope.
// ---------------------------------------------------------------------------

template <int ORDER>
TL_DEVICE unsigned long long load_ordered_bits(const void* addr, int bytes) {
  unsigned long long v = 0;
  if (ORDER == 3) asm volatile("fence.sc.gpu;\n" ::: "memory");
  if (bytes <= 2) {   // 8- and 16-bit elements: loaded into a 16-bit register (a byte zero-extended)
    unsigned short r;
    if (bytes == 1) {
      if (ORDER == 0) {
        asm volatile("ld.relaxed.gpu.b8 %0, [%1];\n" : "=h"(r) : "l"(addr) : "memory");
      } else {
        asm volatile("ld.acquire.gpu.b8 %0, [%1];\n" : "=h"(r) : "l"(addr) : "memory");
      }
    } else if (ORDER == 0) {
      asm volatile("ld.relaxed.gpu.b16 %0, [%1];\n" : "=h"(r) : "l"(addr) : "memory");
    } else {
      asm volatile("ld.acquire.gpu.b16 %0, [%1];\n" : "=h"(r) : "l"(addr) : "memory");
    }
    v = r;
  } else if (bytes == 4) {
    unsigned r;
    if (ORDER == 0) {
      asm volatile("ld.relaxed.gpu.b32 %0, [%1];\n" : "=r"(r) : "l"(addr) : "memory");
    } else {
      asm volatile("ld.acquire.gpu.b32 %0, [%1];\n" : "=r"(r) : "l"(addr) : "memory");
    }
    v = r;
  } else {
    if (ORDER == 0) {
      asm volatile("ld.relaxed.gpu.b64 %0, [%1];\n" : "=l"(v) : "l"(addr) : "memory");
    } else {
      asm volatile("ld.acquire.gpu.b64 %0, [%1];\n" : "=l"(v) : "l"(addr) : "memory");
    }
  }
  return v;
}

template <int ORDER, class T>
TL_DEVICE T atomic_load(const T* addr) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "atomic_load needs an 8-, 16-, 32- or 64-bit element");
  unsigned long long bits = load_ordered_bits<ORDER>(addr, sizeof(T));
  T out;
  memcpy(&out, &bits, sizeof(T));
  return out;
}

template <int ORDER, class T, class U>
TL_DEVICE int atomic_store(T* addr, U value) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "atomic_store needs an 8-, 16-, 32- or 64-bit element");
  T v = cvt<T>(value);
  if (ORDER == 3) asm volatile("fence.sc.gpu;\n" ::: "memory");
  if (sizeof(T) <= 2) {   // from a 16-bit register (a byte: its low 8 bits)
    unsigned short b = 0;
    memcpy(&b, &v, sizeof(T));
    if (sizeof(T) == 1) {
      if (ORDER == 2) {
        asm volatile("st.release.gpu.b8 [%0], %1;\n" ::"l"(addr), "h"(b) : "memory");
      } else {
        asm volatile("st.relaxed.gpu.b8 [%0], %1;\n" ::"l"(addr), "h"(b) : "memory");
      }
    } else if (ORDER == 2) {
      asm volatile("st.release.gpu.b16 [%0], %1;\n" ::"l"(addr), "h"(b) : "memory");
    } else {
      asm volatile("st.relaxed.gpu.b16 [%0], %1;\n" ::"l"(addr), "h"(b) : "memory");
    }
  } else if (sizeof(T) == 4) {
    unsigned b;
    memcpy(&b, &v, 4);
    if (ORDER == 2) {
      asm volatile("st.release.gpu.b32 [%0], %1;\n" ::"l"(addr), "r"(b) : "memory");
    } else {
      asm volatile("st.relaxed.gpu.b32 [%0], %1;\n" ::"l"(addr), "r"(b) : "memory");
    }
  } else {
    unsigned long long b;
    memcpy(&b, &v, 8);
    if (ORDER == 2) {
      asm volatile("st.release.gpu.b64 [%0], %1;\n" ::"l"(addr), "l"(b) : "memory");
    } else {
      asm volatile("st.relaxed.gpu.b64 [%0], %1;\n" ::"l"(addr), "l"(b) : "memory");
    }
  }
  return 0;
}

// Any 32- or 64-bit integer (int64_t is `long` or `long long` depending on the platform).
template <class T>
TL_DEVICE T atomic_or(T* addr, T val) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic_or needs a 32- or 64-bit integer");
  if (sizeof(T) == 4) {
    return (T)atomicOr(reinterpret_cast<unsigned*>(addr), (unsigned)val);
  }
  return (T)atomicOr(reinterpret_cast<unsigned long long*>(addr), (unsigned long long)val);
}

// ---------------------------------------------------------------------------
// Read-modify-write atomics with a memory order (T.atomic_add / max / min with
// memory_order=...).  atomicAdd and friends are relaxed GPU-scope atomics; the
// order comes from fences around them, the PTX memory model's release and
// acquire patterns: a fence before a relaxed strong write releases, a fence
// after a relaxed strong read acquires.
// ORDER: 0 relaxed, 1 acquire (consume too), 2 release, 3 seq_cst, 4 acq_rel.
// ---------------------------------------------------------------------------

template <int ORDER>
TL_DEVICE void rmw_fence_before() {
  if (ORDER == 3) {
    asm volatile("fence.sc.gpu;\n" ::: "memory");
  } else if (ORDER == 2 || ORDER == 4) {
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
  }
}

template <int ORDER>
TL_DEVICE void rmw_fence_after() {
  if (ORDER == 1 || ORDER == 3 || ORDER == 4) asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}

// tl::atomic_add_ordered<ORDER>(addr, val) and the max / min ones: the fences of ORDER around the
// relaxed atomic; the old value, as the relaxed one returns it.
#define TL_ORDERED_RMW(OP)                                \
  template <int ORDER, class T, class U>                  \
  TL_DEVICE T OP##_ordered(T* addr, U val) {              \
    rmw_fence_before<ORDER>();                            \
    T old = OP(addr, val);                                \
    rmw_fence_after<ORDER>();                             \
    return old;                                           \
  }
TL_ORDERED_RMW(atomic_add)
TL_ORDERED_RMW(atomic_max)
TL_ORDERED_RMW(atomic_min)
#undef TL_ORDERED_RMW

}  // namespace tl
