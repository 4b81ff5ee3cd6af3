// Copyright the TileLang compiler authors.
//
// Per-thread random numbers for T.rng_init / T.rng_rand / T.rng_rand_float: the counter-based
// Philox4x32-10 generator (Salmon et al., SC'11), the algorithm of curand's Philox state.  The
// state lives in the calling thread's registers as 12 words: key (2), counter (4), the current
// block of 4 outputs (4) and the index of the next unused output.  rng_init(seed, subsequence,
// offset) starts subsequence `subsequence` (2^66 numbers apart) `offset` numbers in.
#pragma once

#include "common.h"

namespace tl {

namespace detail {

TL_DEVICE void philox_block(const uint32_t* ctr, const uint32_t* key, uint32_t* out) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// Add a 64-bit amount to the low half of the 128-bit counter (carrying into the high half).
TL_DEVICE void philox_advance(uint32_t* ctr, unsigned long long n) {
  unsigned long long lo = ((unsigned long long)ctr[1] << 32 | ctr[0]) + n;
  if (lo < n) {  // carry
    if (++ctr[2] == 0) ++ctr[3];
  }
  ctr[0] = (uint32_t)lo;
  ctr[1] = (uint32_t)(lo >> 32);
}

}  // namespace detail

TL_DEVICE int rng_init(uint32_t* s, unsigned long long seed, unsigned long long subsequence,
                       unsigned long long offset) {
  s[0] = (uint32_t)seed;
  s[1] = (uint32_t)(seed >> 32);
  s[2] = 0; s[3] = 0;
  s[4] = (uint32_t)subsequence;
  s[5] = (uint32_t)(subsequence >> 32);
  detail::philox_advance(s + 2, offset / 4);
  detail::philox_block(s + 2, s, s + 6);
  s[10] = (uint32_t)(offset % 4);
  return 0;
}

TL_DEVICE uint32_t rng_rand(uint32_t* s) {
  if (s[10] == 4) {
    detail::philox_advance(s + 2, 1);
    detail::philox_block(s + 2, s, s + 6);
    s[10] = 0;
  }
  return s[6 + s[10]++];
}

// Uniform in (0, 1], as curand_uniform: never 0, so log() of it is finite.
TL_DEVICE float rng_uniform_f32(uint32_t* s) {
  return rng_rand(s) * 2.3283064365386963e-10f + 1.1641532182693481e-10f;
}
TL_DEVICE double rng_uniform_f64(uint32_t* s) {
  unsigned long long hi = rng_rand(s), lo = rng_rand(s);
  unsigned long long bits = (hi << 21) ^ lo;  // 53 random bits
  return (double)(bits & ((1ull << 53) - 1)) * 1.1102230246251565e-16 + 5.551115123125783e-17;
}

// Standard normal by Box-Muller (two uniforms per value).
TL_DEVICE float rng_normal_f32(uint32_t* s) {
  float u = rng_uniform_f32(s), v = rng_uniform_f32(s);
  return sqrtf(-2.0f * logf(u)) * cospif(2.0f * v);
}
TL_DEVICE double rng_normal_f64(uint32_t* s) {
  double u = rng_uniform_f64(s), v = rng_uniform_f64(s);
  return sqrt(-2.0 * log(u)) * cospi(2.0 * v);
}

}  // namespace tl
