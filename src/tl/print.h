// Device-side printing for T.print: one line per value, tagged with the block and thread, so a
// print never changes what the kernel computes (it only reads the value it is given).
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#ifndef __CUDACC_RTC__
#include <cstdio>
#endif

namespace tl {

__device__ __forceinline__ double print_as_double(float v) { return static_cast<double>(v); }
__device__ __forceinline__ double print_as_double(double v) { return v; }
__device__ __forceinline__ double print_as_double(half v) { return static_cast<double>(__half2float(v)); }
__device__ __forceinline__ double print_as_double(__nv_bfloat16 v) {
  return static_cast<double>(__bfloat162float(v));
}
__device__ __forceinline__ double print_as_double(int v) { return static_cast<double>(v); }
__device__ __forceinline__ double print_as_double(unsigned v) { return static_cast<double>(v); }
__device__ __forceinline__ double print_as_double(long long v) { return static_cast<double>(v); }
__device__ __forceinline__ double print_as_double(signed char v) { return static_cast<double>(v); }
__device__ __forceinline__ double print_as_double(unsigned char v) { return static_cast<double>(v); }
__device__ __forceinline__ double print_as_double(bool v) { return v ? 1.0 : 0.0; }
__device__ __forceinline__ double print_as_double(unsigned long long v) { return static_cast<double>(v); }
// Any other element type (16-bit and 64-bit integers, fp8, ...) through its conversion to float.
template <typename T>
__device__ __forceinline__ double print_as_double(T v) {
  return static_cast<double>(static_cast<float>(v));
}

// `msg` alone from every calling thread.
__device__ __forceinline__ int print_msg(const char* msg) {
  printf("%s: block (%d, %d, %d) thread (%d, %d, %d)\n", msg, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x,
         threadIdx.y, threadIdx.z);
  return 0;
}

// `msg: value` from every calling thread.
template <typename T>
__device__ __forceinline__ int print_value(const char* msg, T value) {
  printf("%s: block (%d, %d, %d) thread (%d, %d, %d) value %g\n", msg, blockIdx.x, blockIdx.y, blockIdx.z,
         threadIdx.x, threadIdx.y, threadIdx.z, print_as_double(value));
  return 0;
}

// `msg[index] = value`: one element of a buffer, with the flat row-major index.
template <typename T>
__device__ __forceinline__ int print_element(const char* msg, int index, T value) {
  printf("%s[%d] = %g   (block (%d, %d, %d) thread %d)\n", msg, index, print_as_double(value), blockIdx.x,
         blockIdx.y, blockIdx.z, threadIdx.x);
  return 0;
}

}  // namespace tl
