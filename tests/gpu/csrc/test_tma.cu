// Runtime tests of tma.h and barrier.h on an sm_90 GPU: TMA tensor loads of
// rank 1..5 with every swizzle mode (the shared memory image is compared
// byte for byte with the documented layout, out-of-bounds parts included),
// TMA stores, bulk copies, mbarrier phases and transaction counts, and a
// warp-specialized producer/consumer ring that uses setmaxnreg, named
// barriers and elect_one_sync, and a cluster of two blocks sharing a tile by
// TMA multicast (cluster.h).  Prints PASS/FAIL per check and exits
// non-zero when any check fails.
//
// Build: nvcc -std=c++17 -O3 -I src -gencode arch=compute_90a,code=sm_90a
//        tests/gpu/csrc/test_tma.cu -o test_tma
// (no -lcuda: the driver's cuTensorMapEncodeTiled is fetched at run time
// through cudaGetDriverEntryPointByVersion.)
#include "tl.h"

#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK_CUDA(expr)                                                  \
  do {                                                                    \
    cudaError_t err_ = (expr);                                            \
    if (err_ != cudaSuccess) {                                            \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n",                    \
                   cudaGetErrorString(err_), __FILE__, __LINE__);         \
      std::exit(2);                                                       \
    }                                                                     \
  } while (0)

static int g_failures = 0;

// Flushed at once: when stdout is a pipe, unflushed PASS lines would only
// appear after a later "CUDA error" on stderr and hide which check failed.
static void report(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

// TMA (tile mode, interleave NONE) needs the global address of a box's first
// element along the innermost dimension to be 16-byte aligned: the innermost
// coordinate times the element size must be a multiple of 16.  The encoder
// (cuTensorMapEncodeTiled) cannot check it, coordinates being run-time
// operands, and the hardware does not report it as a bad address: the kernel
// dies with "an illegal instruction was encountered", which poisons the
// context so every later check fails too.  The tests below keep to the rule; this guard turns
// a violation into a FAIL instead of a crash.
static bool inner_coord_ok(int c0, int elem_bytes, const char* what) {
  const long long byte_offset = static_cast<long long>(c0) * elem_bytes;
  if (byte_offset % 16 == 0) return true;
  std::printf("  %s: innermost coordinate %d (%lld bytes) is not a multiple of 16 bytes\n", what,
              c0, byte_offset);
  report(false, what);
  return false;
}

// ------------------------------------------------------------------------
// Host side: building tensor maps.  The compiler's encoding for GEMM
// operand tiles is the rank-2 case of make_map (see docs/hopper.md).
// ------------------------------------------------------------------------

static PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !p) {
      std::fprintf(stderr, "cuTensorMapEncodeTiled is not available\n");
      std::exit(2);
    }
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }
  return fn;
}

static CUtensorMapSwizzle swizzle_enum(int sw) {
  switch (sw) {
    case 0: return CU_TENSOR_MAP_SWIZZLE_NONE;
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    default: return CU_TENSOR_MAP_SWIZZLE_128B;
  }
}

// A tensor of `rank` dimensions, dims[0] innermost (contiguous), with the
// byte strides of dimensions 1..rank-1 in strides[0..rank-2] (multiples of
// 16), read or written in boxes of box[0..rank-1] elements; sw is the
// swizzle width in bytes (0, 32, 64 or 128; box[0] * element size must not
// exceed it when it is not 0).  Out-of-bounds elements load as zero.
static CUtensorMap make_map(CUtensorMapDataType dtype, int rank, void* base,
                            const uint64_t* dims, const uint64_t* strides,
                            const uint32_t* box, int sw) {
  CUtensorMap map;
  cuuint64_t d[5], s[4];
  cuuint32_t b[5], e[5];
  for (int i = 0; i < rank; ++i) {
    d[i] = dims[i];
    b[i] = box[i];
    e[i] = 1;
    if (i + 1 < rank) s[i] = strides[i];
  }
  CUresult r = encode_fn()(&map, dtype, rank, base, d, s, b, e, CU_TENSOR_MAP_INTERLEAVE_NONE,
                           swizzle_enum(sw), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed with %d\n", static_cast<int>(r));
    std::exit(2);
  }
  return map;
}

// Where byte b of a box (row-major over the box, rows of row_bytes) lands in
// shared memory under swizzle width sw: the 16-byte chunk index bits [4, 7)
// are XORed with bits [7, 10), masked to log2(sw / 16) bits.
static size_t swizzled(size_t b, int sw) {
  if (sw == 0) return b;
  const size_t mask = static_cast<size_t>(sw / 16 - 1);
  return b ^ (((b >> 7) & mask) << 4);
}

// The test data: a 16-bit hash of the element index.
__host__ __device__ inline uint16_t pattern(unsigned long long i) {
  return static_cast<uint16_t>((i * 2654435761ull) >> 7);
}

// ------------------------------------------------------------------------
// Kernels
// ------------------------------------------------------------------------

__device__ unsigned char* aligned_smem() {
  extern __shared__ unsigned char dyn_smem[];
  const uintptr_t p = reinterpret_cast<uintptr_t>(dyn_smem);
  return reinterpret_cast<unsigned char*>((p + 1023) & ~static_cast<uintptr_t>(1023));
}

// Loads one box at coords[0..RANK) and dumps the raw shared memory image.
template <int RANK>
__global__ void load_box_kernel(const __grid_constant__ CUtensorMap map, int4 c_lo, int c4,
                                uint32_t bytes, unsigned char* out) {
  __shared__ uint64_t bar;
  unsigned char* smem = aligned_smem();
  if (threadIdx.x == 0) {
    tl::prefetch_tma_descriptor(&map);
    tl::mbarrier_init(&bar, 1);
    tl::fence_barrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tl::mbarrier_arrive_expect_tx(&bar, bytes);
    if constexpr (RANK == 1) tl::tma_load_1d(smem, &map, &bar, c_lo.x);
    if constexpr (RANK == 2) tl::tma_load_2d(smem, &map, &bar, c_lo.x, c_lo.y);
    if constexpr (RANK == 3) tl::tma_load_3d(smem, &map, &bar, c_lo.x, c_lo.y, c_lo.z);
    if constexpr (RANK == 4) tl::tma_load_4d(smem, &map, &bar, c_lo.x, c_lo.y, c_lo.z, c_lo.w);
    if constexpr (RANK == 5)
      tl::tma_load_5d(smem, &map, &bar, c_lo.x, c_lo.y, c_lo.z, c_lo.w, c4);
  }
  tl::mbarrier_wait(&bar, 0);
  for (uint32_t i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = smem[i];
}

// Loads `tiles` boxes of a 2-D map one after the other through a single
// barrier (phase i & 1 for the i-th) and records a weighted checksum of each.
__global__ void phase_kernel(const __grid_constant__ CUtensorMap map, int tiles, int box_rows,
                             int box_cols, unsigned long long* sums) {
  __shared__ uint64_t bar;
  __shared__ unsigned long long partial;
  unsigned char* smem = aligned_smem();
  const uint16_t* tile = reinterpret_cast<const uint16_t*>(smem);
  if (threadIdx.x == 0) {
    tl::mbarrier_init(&bar, 1);
    tl::fence_barrier_init();
  }
  __syncthreads();
  for (int i = 0; i < tiles; ++i) {
    if (threadIdx.x == 0) {
      partial = 0;
      tl::mbarrier_arrive_expect_tx(&bar, box_rows * box_cols * 2);
      tl::tma_load_2d(smem, &map, &bar, 0, i * box_rows);
    }
    tl::mbarrier_wait(&bar, i & 1);
    unsigned long long s = 0;
    for (int e = threadIdx.x; e < box_rows * box_cols; e += blockDim.x)
      s += static_cast<unsigned long long>(tile[e]) * static_cast<unsigned long long>(e + 1);
    atomicAdd(&partial, s);
    __syncthreads();  // all reads of the tile and partial done
    if (threadIdx.x == 0) sums[i] = partial;
    __syncthreads();
  }
}

// Writes `pattern` into a swizzled box in shared memory and stores it with
// TMA at the given coordinates (RANK 2 or 3).
template <int RANK>
__global__ void store_box_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, int c2,
                                 uint32_t bytes, int sw) {
  unsigned char* smem = aligned_smem();
  for (uint32_t b = 2 * threadIdx.x; b < bytes; b += 2 * blockDim.x) {
    // Box element with linear index b / 2 goes to its swizzled position.
    const uint32_t mask = sw ? static_cast<uint32_t>(sw / 16 - 1) : 0u;
    const uint32_t pos = b ^ (((b >> 7) & mask) << 4);
    *reinterpret_cast<uint16_t*>(smem + pos) = pattern(b / 2);
  }
  tl::fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    if constexpr (RANK == 2) tl::tma_store_2d(&map, smem, c0, c1);
    if constexpr (RANK == 3) tl::tma_store_3d(&map, smem, c0, c1, c2);
    tl::tma_store_arrive();
    tl::tma_store_wait<0>();
    tl::tma_store_wait_all<0>();
  }
}

// mbarrier semantics without TMA: arrival counts, parity, expect_tx with a
// bulk copy, arrive(count).  Results go to flags[]:
//   0: fresh barrier, try_wait(parity 1) is true
//   1: after 1 of 2 arrivals, phase 0 not complete
//   2: after 2 of 2 arrivals, phase 0 complete
//   3: then phase 1 not complete
//   4: arrive(bar, 2) completes phase 1
//   5: expect_tx + arrive + bulk copy completes the phase of a count-1 barrier
//   6: the bulk copy delivered the right bytes
__global__ void mbarrier_kernel(const unsigned char* src, int bytes, int* flags) {
  __shared__ uint64_t bar, bar2;
  unsigned char* smem = aligned_smem();
  if (threadIdx.x != 0) return;
  tl::mbarrier_init(&bar, 2);
  tl::mbarrier_init(&bar2, 1);
  tl::fence_barrier_init();
  flags[0] = tl::mbarrier_try_wait_parity(&bar, 1);
  tl::mbarrier_arrive(&bar);
  flags[1] = !tl::mbarrier_try_wait_parity(&bar, 0);
  tl::mbarrier_arrive(&bar);
  flags[2] = tl::mbarrier_try_wait_parity(&bar, 0);
  flags[3] = !tl::mbarrier_try_wait_parity(&bar, 1);
  tl::mbarrier_arrive(&bar, 2);
  flags[4] = tl::mbarrier_try_wait_parity(&bar, 1);
  tl::mbarrier_expect_tx(&bar2, static_cast<uint32_t>(bytes));
  tl::mbarrier_arrive(&bar2);
  tl::bulk_copy_g2s(smem, src, static_cast<uint32_t>(bytes), &bar2);
  tl::mbarrier_wait(&bar2, 0);
  flags[5] = 1;
  int ok = 1;
  for (int i = 0; i < bytes; ++i) ok &= smem[i] == src[i];
  flags[6] = ok;
}

// Warp specialization: warpgroups 0 and 1 consume, warpgroup 2 produces.
// The producer streams TILES boxes of 64 rows x 64 half (128B swizzle)
// through a STAGES-deep ring guarded by full/empty barriers; each consumer
// thread sums one column over 16 rows of every tile.
constexpr int kWsStages = 3;
constexpr int kWsTiles = 12;
__global__ void __launch_bounds__(384, 1)
    warp_specialized_kernel(const __grid_constant__ CUtensorMap map, float* out, int* elected) {
  __shared__ uint64_t full[kWsStages], empty[kWsStages];
  unsigned char* smem = aligned_smem();
  constexpr int kTileBytes = 64 * 64 * 2;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWsStages; ++s) {
      tl::mbarrier_init(&full[s], 1);
      tl::mbarrier_init(&empty[s], 2);  // one arrival per consumer warpgroup
    }
    tl::fence_barrier_init();
  }
  __syncthreads();
  if (tl::elect_one_sync()) atomicAdd(elected, 1);
  const int row0 = blockIdx.x * kWsTiles * 64;
  if (wg == 2) {
    tl::setmaxnreg_dec<40>();
    if (threadIdx.x == 256) {
      for (int t = 0; t < kWsTiles; ++t) {
        const int s = t % kWsStages;
        tl::mbarrier_wait(&empty[s], ((t / kWsStages) & 1) ^ 1);
        tl::mbarrier_arrive_expect_tx(&full[s], kTileBytes);
        tl::tma_load_2d(smem + s * kTileBytes, &map, &full[s], 0, row0 + t * 64);
      }
    }
  } else {
    tl::setmaxnreg_inc<232>();
    const int tc = threadIdx.x;  // 0..255
    const int col = tc % 64, r0 = (tc / 64) * 16;
    float acc = 0.f;
    for (int t = 0; t < kWsTiles; ++t) {
      const int s = t % kWsStages;
      tl::mbarrier_wait(&full[s], (t / kWsStages) & 1);
      const half* tile = reinterpret_cast<const half*>(smem + s * kTileBytes);
      for (int r = r0; r < r0 + 16; ++r)
        acc += __half2float(tile[tl::wgmma_smem_offset<64, 64, 2>(r, col)]);
      tl::named_barrier_sync(1 + wg, 128);
      if (threadIdx.x % 128 == 0) tl::mbarrier_arrive(&empty[s]);
    }
    out[blockIdx.x * 256 + tc] = acc;
  }
}

// ------------------------------------------------------------------------
// Host tests
// ------------------------------------------------------------------------

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) { CHECK_CUDA(cudaMalloc(&p, n)); }
  ~DevBuf() { cudaFree(p); }
};

template <int RANK>
static void launch_load(const CUtensorMap& map, const int* c, uint32_t bytes, unsigned char* out) {
  const int4 lo = make_int4(c[0], RANK > 1 ? c[1] : 0, RANK > 2 ? c[2] : 0, RANK > 3 ? c[3] : 0);
  const int smem = static_cast<int>(bytes) + 1024;
  CHECK_CUDA(cudaFuncSetAttribute(load_box_kernel<RANK>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  load_box_kernel<RANK><<<1, 128, smem>>>(map, lo, RANK > 4 ? c[4] : 0, bytes, out);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
}

// Loads one box of a rank-RANK uint16 tensor and checks every byte of the
// shared memory image against the documented placement.
template <int RANK>
static void test_load(const char* name, const uint64_t* dims, const uint64_t* pitch_elems,
                      const uint32_t* box, int sw, const int* coords) {
  if (!inner_coord_ok(coords[0], 2, name)) return;
  // Host tensor with element strides: stride[0] = 1, stride[i] = pitch_elems[i-1].
  uint64_t stride[5] = {1, 0, 0, 0, 0};
  for (int i = 1; i < RANK; ++i) stride[i] = pitch_elems[i - 1];
  const uint64_t total = stride[RANK - 1] * dims[RANK - 1];
  std::vector<uint16_t> h(total);
  for (uint64_t i = 0; i < total; ++i) h[i] = pattern(i);
  DevBuf g(total * 2);
  CHECK_CUDA(cudaMemcpy(g.p, h.data(), total * 2, cudaMemcpyHostToDevice));
  uint64_t strides_bytes[4];
  for (int i = 1; i < RANK; ++i) strides_bytes[i - 1] = stride[i] * 2;
  const CUtensorMap map = make_map(CU_TENSOR_MAP_DATA_TYPE_UINT16, RANK, g.p, dims, strides_bytes, box, sw);
  uint32_t elems = 1;
  for (int i = 0; i < RANK; ++i) elems *= box[i];
  const uint32_t bytes = elems * 2;
  DevBuf out(bytes);
  launch_load<RANK>(map, coords, bytes, static_cast<unsigned char*>(out.p));
  std::vector<unsigned char> img(bytes);
  CHECK_CUDA(cudaMemcpy(img.data(), out.p, bytes, cudaMemcpyDeviceToHost));
  bool ok = true;
  int shown = 0;
  for (uint32_t e = 0; e < elems; ++e) {
    // Box index -> tensor coordinates.
    uint32_t rem = e;
    bool inside = true;
    uint64_t off = 0;
    for (int i = 0; i < RANK; ++i) {
      const int64_t x = coords[i] + static_cast<int64_t>(rem % box[i]);
      rem /= box[i];
      if (x < 0 || x >= static_cast<int64_t>(dims[i])) inside = false;
      else off += static_cast<uint64_t>(x) * stride[i];
    }
    const uint16_t want = inside ? h[off] : 0;
    uint16_t got;
    std::memcpy(&got, &img[swizzled(static_cast<size_t>(e) * 2, sw)], 2);
    if (got != want) {
      ok = false;
      if (shown++ < 5)
        std::printf("  box element %u: got 0x%04x want 0x%04x (inside=%d)\n", e, got, want, inside);
    }
  }
  report(ok, name);
}

static void test_loads() {
  // 2-D: 300 x 200 uint16 with a row pitch of 208 elements, boxes of 64 rows.
  const uint64_t dims2[2] = {200, 300};
  const uint64_t pitch2[1] = {208};
  const int interior[2] = {64, 128}, edge[2] = {168, 270}, negative[2] = {-8, -3};
  for (int sw : {0, 32, 64, 128}) {
    const uint32_t box[2] = {static_cast<uint32_t>(sw ? sw / 2 : 32), 64};
    char name[96];
    std::snprintf(name, sizeof name, "tma_load_2d swizzle %dB interior", sw);
    test_load<2>(name, dims2, pitch2, box, sw, interior);
    std::snprintf(name, sizeof name, "tma_load_2d swizzle %dB out-of-bounds zero fill", sw);
    test_load<2>(name, dims2, pitch2, box, sw, edge);
    std::snprintf(name, sizeof name, "tma_load_2d swizzle %dB negative coordinates", sw);
    test_load<2>(name, dims2, pitch2, box, sw, negative);
  }
  // The GEMM operand case: 256-row box of 64 half, 128B swizzle.
  {
    const uint64_t dims[2] = {512, 512};
    const uint64_t pitch[1] = {512};
    const uint32_t box[2] = {64, 256};
    const int c[2] = {192, 256};
    test_load<2>("tma_load_2d 256 x 64 box, 128B swizzle (GEMM operand)", dims, pitch, box, 128, c);
  }
  {
    // 896 elements = 1792 bytes, 16-byte aligned (see inner_coord_ok; the
    // 900 = 1800 bytes used before was not); the box still runs 152 elements
    // past the end of the tensor.
    const uint64_t dims[1] = {1000};
    const uint32_t box[1] = {256};
    const int c[1] = {896};
    test_load<1>("tma_load_1d with out-of-bounds tail", dims, nullptr, box, 0, c);
  }
  {
    const uint64_t dims[3] = {64, 7, 5};
    const uint64_t pitch[2] = {64, 64 * 7};
    const uint32_t box[3] = {64, 4, 2};
    const int c[3] = {0, 5, 1};
    test_load<3>("tma_load_3d 128B swizzle", dims, pitch, box, 128, c);
  }
  {
    const uint64_t dims[4] = {64, 7, 5, 3};
    const uint64_t pitch[3] = {72, 72 * 7, 72 * 7 * 5};
    const uint32_t box[4] = {64, 4, 2, 2};
    const int c[4] = {0, 2, 3, 2};
    test_load<4>("tma_load_4d 128B swizzle, padded rows", dims, pitch, box, 128, c);
  }
  {
    const uint64_t dims[5] = {32, 5, 4, 3, 2};
    const uint64_t pitch[4] = {32, 32 * 5, 32 * 5 * 4, 32 * 5 * 4 * 3};
    const uint32_t box[5] = {32, 2, 2, 2, 2};
    const int c[5] = {0, 4, 1, 2, 0};
    test_load<5>("tma_load_5d 64B swizzle", dims, pitch, box, 64, c);
  }
}

static void test_phases() {
  const int tiles = 6, rows = 32, cols = 64;
  std::vector<uint16_t> h(tiles * rows * cols);
  for (size_t i = 0; i < h.size(); ++i) h[i] = pattern(i);
  DevBuf g(h.size() * 2), sums(tiles * 8);
  CHECK_CUDA(cudaMemcpy(g.p, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  const uint64_t dims[2] = {static_cast<uint64_t>(cols), static_cast<uint64_t>(tiles * rows)};
  const uint64_t strides[1] = {static_cast<uint64_t>(cols) * 2};
  const uint32_t box[2] = {static_cast<uint32_t>(cols), static_cast<uint32_t>(rows)};
  const CUtensorMap map = make_map(CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, g.p, dims, strides, box, 0);
  phase_kernel<<<1, 128, rows * cols * 2 + 1024>>>(map, tiles, rows, cols,
                                                  static_cast<unsigned long long*>(sums.p));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<unsigned long long> got(tiles);
  CHECK_CUDA(cudaMemcpy(got.data(), sums.p, tiles * 8, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < tiles; ++i) {
    unsigned long long want = 0;
    for (int e = 0; e < rows * cols; ++e)
      want += static_cast<unsigned long long>(h[i * rows * cols + e]) * (e + 1);
    ok &= got[i] == want;
  }
  report(ok, "mbarrier phases: 6 TMA loads through one barrier (parity i & 1)");
}

template <int RANK>
static void test_store(const char* name, const uint64_t* dims, const uint32_t* box, int sw,
                       const int* c) {
  if (!inner_coord_ok(c[0], 2, name)) return;
  uint64_t total = 1;
  for (int i = 0; i < RANK; ++i) total *= dims[i];
  const uint16_t sentinel = 0xdead;
  std::vector<uint16_t> h(total, sentinel);
  DevBuf g(total * 2);
  CHECK_CUDA(cudaMemcpy(g.p, h.data(), total * 2, cudaMemcpyHostToDevice));
  uint64_t strides[4];
  uint64_t acc = 2;
  for (int i = 0; i + 1 < RANK; ++i) strides[i] = (acc *= dims[i]);
  const CUtensorMap map = make_map(CU_TENSOR_MAP_DATA_TYPE_UINT16, RANK, g.p, dims, strides, box, sw);
  uint32_t elems = 1;
  for (int i = 0; i < RANK; ++i) elems *= box[i];
  const int smem = static_cast<int>(elems * 2) + 1024;
  CHECK_CUDA(cudaFuncSetAttribute(store_box_kernel<RANK>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  store_box_kernel<RANK><<<1, 128, smem>>>(map, c[0], c[1], RANK > 2 ? c[2] : 0, elems * 2, sw);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(h.data(), g.p, total * 2, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (uint64_t off = 0; off < total; ++off) {
    uint64_t rem = off, e = 0, mul = 1;
    bool in_box = true;
    for (int i = 0; i < RANK; ++i) {
      const int64_t x = static_cast<int64_t>(rem % dims[i]) - c[i];
      rem /= dims[i];
      if (x < 0 || x >= static_cast<int64_t>(box[i])) in_box = false;
      else e += static_cast<uint64_t>(x) * mul;
      mul *= box[i];
    }
    const uint16_t want = in_box ? pattern(e) : sentinel;
    ok &= h[off] == want;
  }
  report(ok, name);
}

static void test_stores() {
  const uint64_t dims2[2] = {160, 100};
  const uint32_t box2[2] = {64, 64};
  const int inside[2] = {64, 16}, clipped[2] = {128, 70};
  test_store<2>("tma_store_2d 128B swizzle", dims2, box2, 128, inside);
  test_store<2>("tma_store_2d 128B swizzle, clipped at the tensor edge", dims2, box2, 128, clipped);
  const uint64_t dims3[3] = {32, 9, 4};
  const uint32_t box3[3] = {32, 8, 2};
  const int c3[3] = {0, 1, 2};
  test_store<3>("tma_store_3d 64B swizzle", dims3, box3, 64, c3);
}

static void test_mbarrier() {
  const int bytes = 4096;
  std::vector<unsigned char> h(bytes);
  for (int i = 0; i < bytes; ++i) h[i] = static_cast<unsigned char>(pattern(i));
  DevBuf src(bytes), flags(7 * sizeof(int));
  CHECK_CUDA(cudaMemcpy(src.p, h.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(flags.p, 0, 7 * sizeof(int)));
  mbarrier_kernel<<<1, 32, bytes + 1024>>>(static_cast<const unsigned char*>(src.p), bytes,
                                           static_cast<int*>(flags.p));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int f[7];
  CHECK_CUDA(cudaMemcpy(f, flags.p, sizeof f, cudaMemcpyDeviceToHost));
  const char* what[7] = {
      "mbarrier fresh barrier: parity 1 counts as completed",
      "mbarrier 1 of 2 arrivals: phase 0 incomplete",
      "mbarrier 2 of 2 arrivals: phase 0 complete",
      "mbarrier phase 1 incomplete after phase 0",
      "mbarrier_arrive(bar, 2) completes phase 1",
      "mbarrier_expect_tx + arrive + bulk_copy_g2s completes",
      "bulk_copy_g2s delivers the bytes",
  };
  for (int i = 0; i < 7; ++i) report(f[i] == 1, what[i]);
}

static void test_warp_specialized() {
  const int blocks = 4, rows = blocks * kWsTiles * 64;
  std::vector<half> h(rows * 64);
  std::vector<float> hv(rows * 64);
  for (int i = 0; i < rows * 64; ++i) {
    hv[i] = static_cast<float>(static_cast<int>(pattern(i) % 9) - 4);
    h[i] = __float2half(hv[i]);
  }
  DevBuf g(h.size() * 2), out(blocks * 256 * 4), elected(4);
  CHECK_CUDA(cudaMemcpy(g.p, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(elected.p, 0, 4));
  const uint64_t dims[2] = {64, static_cast<uint64_t>(rows)};
  const uint64_t strides[1] = {128};
  const uint32_t box[2] = {64, 64};
  const CUtensorMap map = make_map(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, g.p, dims, strides, box, 128);
  const int smem = kWsStages * 64 * 64 * 2 + 1024;
  CHECK_CUDA(cudaFuncSetAttribute(warp_specialized_kernel,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  warp_specialized_kernel<<<blocks, 384, smem>>>(map, static_cast<float*>(out.p),
                                                 static_cast<int*>(elected.p));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> got(blocks * 256);
  int n_elected = 0;
  CHECK_CUDA(cudaMemcpy(got.data(), out.p, got.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&n_elected, elected.p, 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int b = 0; b < blocks; ++b)
    for (int tc = 0; tc < 256; ++tc) {
      const int col = tc % 64, r0 = (tc / 64) * 16;
      float want = 0.f;
      for (int t = 0; t < kWsTiles; ++t)
        for (int r = r0; r < r0 + 16; ++r) want += hv[(b * kWsTiles * 64 + t * 64 + r) * 64 + col];
      ok &= got[b * 256 + tc] == want;
    }
  report(ok, "warp-specialized TMA ring (setmaxnreg, named barriers, 3 stages)");
  report(n_elected == blocks * 12, "elect_one_sync picks one lane per warp");
}

// Clusters of two blocks (cluster.h): each block loads one half of a 128 x 64
// tile and multicasts it to both, so each block's full barrier expects the
// whole tile; then every block arrives on both blocks' "done" barrier
// (remote arrivals) and the cluster meets once more before exiting.
// errors[0] counts wrong elements, ranks[] records cluster_ctarank() and
// cluster_nctarank() per block.
constexpr int kClusterRows = 128, kClusterCols = 64;

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128)
    cluster_multicast_kernel(const __grid_constant__ CUtensorMap map, const uint16_t* src, int* errors,
                             uint32_t* ranks) {
  unsigned char* smem = aligned_smem();
  uint16_t* tile = reinterpret_cast<uint16_t*>(smem);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kClusterRows * kClusterCols * 2);
  uint64_t* done = full + 1;
  const uint32_t rank = tl::cluster_ctarank();
  if (threadIdx.x == 0) {
    tl::mbarrier_init(full, 1);
    tl::mbarrier_init(done, 2);
    tl::fence_barrier_init();
  }
  __syncthreads();
  tl::cluster_sync();   // both blocks' barriers exist before anyone multicasts into them
  const int half = kClusterRows / 2;
  if (threadIdx.x == 0) {
    tl::mbarrier_arrive_expect_tx(full, kClusterRows * kClusterCols * 2);   // both halves land here
    tl::tma_load_multicast_2d(tile + rank * half * kClusterCols, &map, full, uint16_t(0b11), 0,
                              static_cast<int>(blockIdx.y) * kClusterRows + static_cast<int>(rank) * half);
  }
  tl::mbarrier_wait(full, 0);
  const uint16_t* want = src + static_cast<size_t>(blockIdx.y) * kClusterRows * kClusterCols;
  for (int i = threadIdx.x; i < kClusterRows * kClusterCols; i += blockDim.x) {
    if (tile[i] != want[i]) atomicAdd(errors, 1);
  }
  if (threadIdx.x == 0) {
    tl::mbarrier_arrive_cluster(done, 0);
    tl::mbarrier_arrive_cluster(done, 1);
  }
  tl::mbarrier_wait(done, 0);   // both blocks have read their tile
  if (threadIdx.x == 0) {
    ranks[2 * (blockIdx.y * gridDim.x + blockIdx.x)] = rank;
    ranks[2 * (blockIdx.y * gridDim.x + blockIdx.x) + 1] = tl::cluster_nctarank();
  }
  tl::cluster_sync();   // no block exits while its peer may still arrive on its barriers
}

static void test_cluster_multicast() {
  const int tiles = 3;
  const uint64_t total = static_cast<uint64_t>(tiles) * kClusterRows * kClusterCols;
  std::vector<uint16_t> h(total);
  for (uint64_t i = 0; i < total; ++i) h[i] = pattern(i);
  DevBuf g(total * 2), errors(sizeof(int)), ranks(2 * 2 * tiles * sizeof(uint32_t));
  CHECK_CUDA(cudaMemcpy(g.p, h.data(), total * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(errors.p, 0, sizeof(int)));
  const uint64_t dims[2] = {kClusterCols, static_cast<uint64_t>(tiles) * kClusterRows};
  const uint64_t strides[1] = {kClusterCols * 2};
  const uint32_t box[2] = {kClusterCols, kClusterRows / 2};
  const CUtensorMap map = make_map(CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, g.p, dims, strides, box, 0);
  const int smem = kClusterRows * kClusterCols * 2 + 16 + 1024;
  cluster_multicast_kernel<<<dim3(2, tiles), 128, smem>>>(map, static_cast<const uint16_t*>(g.p),
                                                         static_cast<int*>(errors.p),
                                                         static_cast<uint32_t*>(ranks.p));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  int n_errors = -1;
  std::vector<uint32_t> r(2 * 2 * tiles);
  CHECK_CUDA(cudaMemcpy(&n_errors, errors.p, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(r.data(), ranks.p, r.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  bool ranks_ok = true;
  for (int b = 0; b < 2 * tiles; ++b) ranks_ok &= r[2 * b] == static_cast<uint32_t>(b % 2) && r[2 * b + 1] == 2;
  report(n_errors == 0, "cluster of 2: each block multicasts half a tile, both receive all of it");
  report(ranks_ok, "cluster_ctarank / cluster_nctarank");
}

int main() {
  int dev = 0;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major < 9) {
    std::printf("FAIL: TMA needs an sm_90 GPU\n");
    return 1;
  }
  test_loads();
  test_phases();
  test_stores();
  test_mbarrier();
  test_warp_specialized();
  test_cluster_multicast();   // last: a fault here must not hide the results above
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
