"""Compile-only checks of the Hopper part of the CUDA device library
(src/tl/barrier.h, tma.h, gemm_sm90.h); no GPU needed.

Skipped when nvcc is not installed.  The SASS checks additionally need
`cuobjdump` (and the `nvdisasm` it calls) on PATH and are skipped without
it.  tests/gpu/csrc/run_sm90.sh runs the programs on an sm_90 GPU.

* test_tma.cu and test_wgmma.cu build into executables for sm_90a; their
  PTX holds wgmma.mma_async, cp.async.bulk.tensor and mbarrier.try_wait,
  their SASS HGMMA and UTMALDG, and no kernel spills or uses a stack frame;
* a small kernel shaped like TVM-generated code (the prelude's `uint`,
  `uint64_t`, ... macros defined before or after tl.h) that uses every new
  header compiles for sm_90a, and also for sm_80, sm_90 and sm_100a, where
  the instructions a target lacks must not be emitted;
* the documented layouts hold: the descriptor constants of a few shapes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CSRC = ROOT / "tests" / "gpu" / "csrc"
NVCC = shutil.which("nvcc")
CUOBJDUMP = shutil.which("cuobjdump")
HAVE_SASS = CUOBJDUMP is not None and shutil.which("nvdisasm") is not None

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")

GENCODE = {
    "sm_80": ["-gencode", "arch=compute_80,code=sm_80"],
    "sm_90": ["-gencode", "arch=compute_90,code=sm_90"],
    "sm_90a": ["-gencode", "arch=compute_90a,code=sm_90a"],
    "sm_100a": ["-gencode", "arch=compute_100a,code=sm_100a"],
}
BASE_FLAGS = ["-std=c++17", "-O3", "-I", str(SRC)]


def nvcc(args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [NVCC, *BASE_FLAGS, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def ptxas_report(text: str) -> dict[str, dict[str, int]]:
    """Parses `-Xptxas -v` output into {function: {registers, stack, spill_*}}."""
    funcs: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line) or re.search(
            r"Function properties for (\S+)", line
        )
        if m:
            current = funcs.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current["stack"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
    return funcs


def sass_of(binary: Path) -> str:
    proc = subprocess.run([CUOBJDUMP, "-sass", str(binary)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


class Built:
    def __init__(self, exe: Path, ptx: str, log: str):
        self.exe, self.ptx, self.log = exe, ptx, log


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Built]:
    """Builds both GPU programs once, in parallel (executables, PTX kept,
    ptxas report)."""
    jobs = {}
    for prog in ["test_tma", "test_wgmma"]:
        d = tmp_path_factory.mktemp(prog)
        cmd = [NVCC, *BASE_FLAGS, *GENCODE["sm_90a"], "-Xptxas", "-v", "-keep", "-keep-dir", str(d),
               str(CSRC / f"{prog}.cu"), "-o", str(d / prog)]
        jobs[prog] = (d, cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    out: dict[str, Built] = {}
    for prog, (d, cmd, proc) in jobs.items():
        log, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed:\n{log}")
        ptx = "\n".join(p.read_text() for p in d.glob("*.ptx"))
        assert ptx, f"nvcc -keep left no PTX for {prog}"
        out[prog] = Built(d / prog, ptx, log)
    return out


@pytest.mark.parametrize(
    "prog, needles",
    [
        ("test_wgmma", ["wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16",
                        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
                        "wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16",
                        "wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                        "wgmma.wait_group.sync.aligned 1", "cp.async.bulk.tensor.2d",
                        "mbarrier.try_wait.parity", "setmaxnreg.inc.sync.aligned.u32 232"]),
        ("test_tma", ["cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes",
                      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                      "cp.async.bulk.tensor.5d.shared::cluster.global", "cp.async.bulk.tensor.2d.global.shared::cta",
                      "cp.async.bulk.tensor.3d.global.shared::cta", "cp.async.bulk.commit_group",
                      "cp.async.bulk.wait_group.read 0", "mbarrier.try_wait.parity",
                      "mbarrier.arrive.expect_tx", "mbarrier.expect_tx", "fence.mbarrier_init",
                      "fence.proxy.async.shared::cta", "prefetch.tensormap", "elect.sync",
                      "setmaxnreg.dec.sync.aligned.u32 40", "bar.sync"]),
    ],
)
def test_ptx_contains(programs, prog, needles):
    ptx = programs[prog].ptx
    for needle in needles:
        assert needle in ptx, f"{needle!r} missing from the PTX of {prog}"
    assert "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.skipif(not HAVE_SASS, reason="cuobjdump / nvdisasm not installed")
def test_sass_uses_hgmma_and_tma(programs):
    wg = sass_of(programs["test_wgmma"].exe)
    assert "HGMMA.64x256x16.F32" in wg and "HGMMA.64x128x16.F16" in wg
    assert "UTMALDG.2D" in wg and "USETMAXREG" in wg
    tma = sass_of(programs["test_tma"].exe)
    for needle in ["UTMALDG.1D", "UTMALDG.3D", "UTMALDG.4D", "UTMALDG.5D", "UTMASTG.2D",
                   "SYNCS.PHASECHK.TRANS64.TRYWAIT", "UBLKCP"]:
        assert needle in tma, needle


@pytest.mark.parametrize("prog", ["test_tma", "test_wgmma"])
def test_no_spills(programs, prog):
    report = ptxas_report(programs[prog].log)
    assert report, programs[prog].log
    for name, info in report.items():
        if "registers" not in info:
            continue
        assert info.get("spill_stores", 0) == 0 and info.get("spill_loads", 0) == 0, (name, info)
        assert info.get("stack", 0) == 0, (name, info)
    # setmaxnreg took effect (no C7508 "ignored" warning).
    assert "C7508" not in programs[prog].log


# A kernel shaped like generated code that touches every Hopper entry point.
TINY_KERNEL = r"""
#ifdef TL_PRELUDE_BEFORE
#define uint unsigned int
#define uchar unsigned char
#define ushort unsigned short
#define int64_t long long
#define uint64_t unsigned long long
#endif
#include "tl.h"
#ifndef TL_PRELUDE_BEFORE
#define uint unsigned int
#define uchar unsigned char
#define ushort unsigned short
#define int64_t long long
#define uint64_t unsigned long long
#endif

extern "C" __global__ void __launch_bounds__(384, 1)
    tiny_sm90_kernel(const __grid_constant__ CUtensorMap A_desc,
                     const __grid_constant__ CUtensorMap B_desc,
                     const __grid_constant__ CUtensorMap C_desc, float* __restrict__ C,
                     half* __restrict__ D) {
  extern __shared__ __align__(1024) unsigned char buf_dyn_shmem[];
  half* A_shared = reinterpret_cast<half*>(buf_dyn_shmem);
  half* B_shared = A_shared + 128 * 64;
  __shared__ uint64_t full[2], empty[2];
  const uint tid = threadIdx.x;
  if (tid == 0) {
    tl::mbarrier_init(&full[0], 1);
    tl::mbarrier_init(&empty[0], 256);
    tl::fence_barrier_init();
  }
  __syncthreads();
  if (tid >= 256) {
    tl::setmaxnreg_dec<40>();
    if (tid / 32 == 8 && tl::elect_one_sync()) {
      tl::prefetch_tma_descriptor(&A_desc);
      tl::mbarrier_wait(&empty[0], 1);
      tl::mbarrier_arrive_expect_tx(&full[0], 2 * 128 * 64 * 2);
      tl::tma_load_2d(A_shared, &A_desc, &full[0], 0, blockIdx.y * 128);
      tl::tma_load_3d(B_shared, &B_desc, &full[0], 0, 0, blockIdx.x);
    }
  } else {
    tl::setmaxnreg_inc<232>();
    tl::mbarrier_wait(&full[0], 0);
    float C_local[64];
    tl::wgmma_gemm_ss<128, 128, 64, 2, false, true, true>(A_shared, B_shared, C_local);
    half P_local[32];
    for (int i = 0; i < 32; ++i) P_local[i] = tl::cvt<half>(C_local[i]);
    tl::wgmma_gemm_rs<128, 64, 64, 2, false, true, false>(P_local, B_shared, C_local);
    half H_local[64];
    tl::wgmma_gemm_ss<128, 128, 64, 2, false, false, true>(A_shared, B_shared, H_local);
    tl::wgmma_gemm_ss_async<128, 128, 64, 2, false, false, false>(A_shared, B_shared, C_local);
    tl::wgmma_wait<0, 64>(C_local);
    tl::mbarrier_arrive(&empty[0]);
    tl::named_barrier_sync(1, 256);
    for (int i = 0; i < 64; ++i) {
      C[tid * 64 + i] = C_local[i];
      D[tid * 64 + i] = H_local[i];
    }
    float* staging = reinterpret_cast<float*>(B_shared);
    staging[tid] = C_local[0];
    tl::fence_proxy_async();
    tl::named_barrier_sync(1, 256);
    if (tid == 0) {
      tl::tma_store_2d(&C_desc, staging, 0, blockIdx.y);
      tl::tma_store_arrive();
      tl::tma_store_wait<0>();
    }
  }
}
"""

# PTX that each target must (True) or must not (False) contain.
EXPECT = {
    "sm_90a": {"wgmma.mma_async": True, "cp.async.bulk.tensor": True, "mbarrier.try_wait": True,
               "setmaxnreg": True},
    "sm_90": {"wgmma.mma_async": False, "cp.async.bulk.tensor": True, "mbarrier.try_wait": True,
              "setmaxnreg": False},
    "sm_100a": {"wgmma.mma_async": False, "cp.async.bulk.tensor": True, "mbarrier.try_wait": True,
                "setmaxnreg": True},
    "sm_80": {"wgmma.mma_async": False, "cp.async.bulk.tensor": False, "mbarrier.try_wait": False,
              "mbarrier.test_wait": True, "setmaxnreg": False},
}


@pytest.mark.parametrize("arch", list(EXPECT))
@pytest.mark.parametrize("prelude", ["after", "before"])
def test_tiny_kernel_compiles_per_arch(arch, prelude, tmp_path):
    if prelude == "before" and arch not in ("sm_90a", "sm_80"):
        pytest.skip("prelude order is checked on sm_90a and sm_80 only")
    src = tmp_path / "tiny.cu"
    src.write_text(TINY_KERNEL)
    flags = ["-DTL_PRELUDE_BEFORE"] if prelude == "before" else []
    nvcc([*GENCODE[arch], *flags, "-ptx", str(src), "-o", str(tmp_path / "tiny.ptx")])
    ptx = (tmp_path / "tiny.ptx").read_text()
    for needle, wanted in EXPECT[arch].items():
        assert (needle in ptx) == wanted, f"{needle!r} {'missing from' if wanted else 'in'} {arch} PTX"
    if not EXPECT[arch]["wgmma.mma_async"]:
        assert "trap;" in ptx  # the wgmma calls compile to a trap on this target
    # And it assembles.
    nvcc([*GENCODE[arch], *flags, "-cubin", str(src), "-o", str(tmp_path / "tiny.cubin")])


def test_descriptor_and_layout_constants(tmp_path):
    """Host-evaluated constants of gemm_sm90.h against the documented values."""
    src = tmp_path / "consts.cu"
    src.write_text(r"""
#include "tl.h"
#include <cstdio>
using tl::detail::WgmmaShape;
template <class S> void show(const char* name) {
  std::printf("%s %llx %llx %u %u %u %u\n", name, (unsigned long long)S::kDescA,
              (unsigned long long)S::kDescB, S::kAWarpgroupBytes, S::a_offset(64, 5),
              S::b_offset(5), S::kRegs);
}
int main() {
  show<WgmmaShape<128, 256, 128, 2, false, false, half, half, float>>("kn");
  show<WgmmaShape<128, 128, 64, 1, true, true, half, half, float>>("mk");
  show<WgmmaShape<64, 96, 32, 1, false, false, __nv_bfloat16, __nv_bfloat16, float>>("sw64");
  show<WgmmaShape<64, 64, 64, 1, false, true, half, half, half>>("f16");
  return 0;
}
""")
    exe = tmp_path / "consts"
    nvcc([*GENCODE["sm_90a"], str(src), "-o", str(exe)])
    lines = dict(line.split(" ", 1) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                              check=True).stdout.splitlines())

    def desc(lbo: int, sbo: int, mode: int) -> str:
        return format((lbo >> 4) << 16 | (sbo >> 4) << 32 | mode << 62, "x")

    # A K-major 128B: SBO 1024, LBO 16 (unused); B N-major: LBO = K * 128, SBO 1024.
    # Warpgroup 1 starts 64 rows * 128 B in; rows 64, k-step 5 (k0 = 80 -> slab 1,
    # 16 elements in) = 1 * 128 * 128 + 64 * 128 + 32; B k-step 5 = 80 rows * 128.
    assert lines["kn"].split() == [desc(16, 1024, 1), desc(128 * 128, 1024, 1), str(64 * 128),
                                   str(128 * 128 + 64 * 128 + 32), str(80 * 128), "128"]
    # A M-major: slab of 64 M at LBO = K * 128; m0 = 64 -> slab 1; k-step 5 -> 80 rows.
    # B K-major (N x K): k-step 5 = slab 1 (N * 128 bytes) + 32 bytes.
    assert lines["mk"].split() == [desc(64 * 128, 1024, 1), desc(16, 1024, 1), str(2 * 64 * 128),
                                   str(64 * 128 + 80 * 128), str(128 * 128 + 32), "128"]
    # K = 32 bf16 -> 64-byte rows (mode 2, SBO 512); N = 96 -> 64B swizzle, LBO = K * 64.
    assert lines["sw64"].split()[:2] == [desc(16, 512, 2), desc(32 * 64, 512, 2)]
    # fp16 accumulation: N / 4 registers per m64 block.
    assert lines["f16"].split()[-1] == "16"


# Shapes (M, N, K, NWG, TRANS_A, TRANS_B) whose descriptors are checked
# against the documented layout by test_descriptors_address_the_layout.
DESC_SHAPES = [
    (64, 64, 64, 1, False, False), (64, 64, 64, 1, False, True), (64, 64, 64, 1, True, False),
    (64, 64, 64, 1, True, True), (128, 256, 128, 2, False, False), (256, 128, 64, 2, True, True),
    (128, 64, 192, 1, False, True), (64, 96, 32, 1, False, False), (64, 32, 16, 1, True, False),
    (64, 16, 48, 1, False, False), (64, 8, 64, 1, False, True), (64, 24, 96, 1, True, True),
]


def _swizzle(addr: int, sw: int) -> int:
    return addr ^ (((addr >> 7) & (sw // 16 - 1)) << 4)


def _width(nbytes: int) -> int:
    return 128 if nbytes % 128 == 0 else 64 if nbytes % 64 == 0 else 32


def _layout_addr(base: int, rows: int, cols: int, r: int, c: int) -> int:
    """The documented smem layout (byte address of stored element (r, c))."""
    sw = _width(cols * 2)
    w = sw // 2
    return base + _swizzle((c // w) * rows * sw + r * sw + (c % w) * 2, sw)


def _desc_addr(desc: int, mn: int, k: int, mn_major: bool) -> int:
    """Where a wgmma descriptor points for element (mn, k) of its 64/N x 16
    operand, after the canonical layouts of the PTX ISA (CUTLASS's
    make_gmma_desc comments): K major ((8,m),(T,2)):((SW,SBO),(1,-)),
    M/N major ((W,n),(8,k)):((1,LBO),(SW,SBO)), then the address swizzle."""
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    assert (desc >> 49) & 0x7 == 0, "base offset must be 0"
    sw = {1: 128, 2: 64, 3: 32}[desc >> 62]
    if mn_major:
        w = sw // 2
        raw = start + (mn // w) * lbo + (mn % w) * 2 + (k // 8) * sbo + (k % 8) * sw
    else:
        raw = start + (mn // 8) * sbo + (mn % 8) * sw + k * 2
    return _swizzle(raw, sw)


@pytest.mark.parametrize("high", [0, 1 << 24], ids=["cta", "cluster-rank-1"])
def test_descriptors_address_the_layout(tmp_path, high):
    """Every element every wgmma of a GEMM reads, as addressed by the
    descriptors gemm_sm90.h builds, is the element the layout puts there.
    In a cluster a block's shared addresses carry its rank above bit 18 (rank 1:
    bit 24): the descriptors must keep them out of their other fields."""
    a_base, b_base = 1024, 1024 * 64
    lines = []
    for i, (m, n, k, nwg, ta, tb) in enumerate(DESC_SHAPES):
        lines.append(
            f"  dump<WgmmaShape<{m}, {n}, {k}, {nwg}, {str(ta).lower()}, {str(tb).lower()}, half, half,"
            f" float>>({i}, {nwg});"
        )
    src = tmp_path / "descs.cu"
    src.write_text(
        "#include \"tl.h\"\n#include <cstdio>\nusing tl::detail::WgmmaShape;\n"
        "template <class S> void dump(int id, int nwg) {\n"
        "  for (int wg = 0; wg < nwg; ++wg)\n"
        "    for (int mi = 0; mi < S::MI; ++mi)\n"
        "      for (int ks = 0; ks < S::KI; ++ks)\n"
        f"        std::printf(\"A %d %d %d %d %llu\\n\", id, wg, mi, ks,\n"
        f"                    (unsigned long long)S::desc_a(S::desc_a0({a_base | high}u, wg), mi, ks));\n"
        "  for (int ks = 0; ks < S::KI; ++ks)\n"
        f"    std::printf(\"B %d %d %llu\\n\", id, ks, (unsigned long long)S::desc_b(S::desc_b0({b_base | high}u), ks));\n"
        "}\nint main() {\n" + "\n".join(lines) + "\n  return 0;\n}\n"
    )
    exe = tmp_path / "descs"
    nvcc([*GENCODE["sm_90a"], str(src), "-o", str(exe)])
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    seen_a, seen_b = set(), set()
    for line in filter(None, out):
        f = line.split()
        if f[0] == "A":
            i, wg, mi, ks, desc = map(int, f[1:])
            m, n, k, nwg, ta, tb = DESC_SHAPES[i]
            mw = m // nwg
            for r in range(64):
                for kk in range(16):
                    row, col = wg * mw + mi * 64 + r, ks * 16 + kk
                    want = (_layout_addr(a_base, k, m, col, row) if ta
                            else _layout_addr(a_base, m, k, row, col))
                    assert _desc_addr(desc, r, kk, ta) == want, (DESC_SHAPES[i], "A", wg, mi, ks, r, kk)
                    seen_a.add((i, row, col))
        else:
            i, ks, desc = map(int, f[1:])
            m, n, k, nwg, ta, tb = DESC_SHAPES[i]
            for c in range(n):
                for kk in range(16):
                    row = ks * 16 + kk
                    want = (_layout_addr(b_base, n, k, c, row) if tb
                            else _layout_addr(b_base, k, n, row, c))
                    assert _desc_addr(desc, c, kk, not tb) == want, (DESC_SHAPES[i], "B", ks, c, kk)
                    seen_b.add((i, row, c))
    # Every element of A and B was read exactly by some instruction.
    for i, (m, n, k, nwg, ta, tb) in enumerate(DESC_SHAPES):
        assert sum(1 for s in seen_a if s[0] == i) == m * k
        assert sum(1 for s in seen_b if s[0] == i) == k * n
