// Copyright the TileLang compiler authors.
//
// Conditions a kernel states about itself: T.device_assert checks one at run time, T.assume
// promises one to the CUDA compiler (which may then drop bounds checks and widen accesses).
#pragma once

#ifndef __CUDACC_RTC__
#include <cstdio>  // device printf (NVRTC has it built in)
#endif

namespace tl {

// T.device_assert: a failed condition prints the message with the block and thread, then traps
// (the launch fails with an illegal-instruction error the host reports).
__device__ __forceinline__ int device_assert(bool cond, const char* msg) {
  if (!cond) {
    printf("device assertion failed: %s: block (%d, %d, %d) thread (%d, %d, %d)\n", msg, blockIdx.x, blockIdx.y,
           blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
    __trap();
  }
  return 0;
}

// T.assume: the condition holds wherever this point is reached; nothing is checked.
__device__ __forceinline__ int assume(bool cond) {
  __builtin_assume(cond);
  return 0;
}

}  // namespace tl
