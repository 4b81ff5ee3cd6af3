"""Session 11 codegen: no vector access of the generated CUDA can be misaligned.

A 16-byte vector access (``uint4`` / ``float4`` / ``tl::copy_vec<16>`` / ``cp.async`` of 16 bytes)
faults with "misaligned address" unless its address is a multiple of 16. These CPU checks read the
generated source of kernels where that is easy to get wrong:
- sub-byte elements (float4_e2m1fn: two per byte): a vector of ``v`` elements is ``v / 2`` bytes,
  so the byte count of the access and each thread's byte step must agree (the fp4 act-quant kernel
  of upstream's deepseek_v4 example faulted on ``copy_vec<16>`` at 8-byte steps);
- sub-byte tiles are never stored by the TMA unit (its byte counts would be off by the packing);
- global tensors whose rows are not a multiple of the vector, and tile starts that are not,
  keep narrower (or scalar) accesses; TMA stores need 16-byte rows.
"""

import re

import pytest

import tilelang
import tilelang.language as T

ARCH = "sm_90a"


def _source(func, arch=ARCH):
    return tilelang.lower(func, arch).source


def _kernel_text(src):
    return src[src.index('extern "C" __global__'):]


_VEC_CALL = re.compile(r"tl::(copy_vec|cp_async_gs|cp_async_gs_conditional|zero_vec)<(\d+)>")
_SMEM_NIBBLE_OFFSET = re.compile(r"smem \+ \(\(\(int\)threadIdx\.x\) \* (\d+)\)")


def _fp4_copy_kernel(M, N, disable_tma):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float4_e2m1fn), B: T.Tensor((M, N), T.float4_e2m1fn)):
        with T.Kernel(M // 32, N // 32, threads=128) as (bx, by):
            s = T.alloc_shared((32, 32), T.float4_e2m1fn)
            T.copy(A[bx * 32, by * 32], s, disable_tma=disable_tma)
            T.copy(s, B[bx * 32, by * 32], disable_tma=disable_tma)

    return main


def _fp4_quant_kernel(M, N, block=32):
    """The fp4 half of upstream's deepseek_v4 act_quant example (bf16 in, scaled fp4 out)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), T.bfloat16), Q: T.Tensor((M, N), T.float4_e2m1fn),
             S: T.Tensor((M, N // block), T.float32)):
        with T.Kernel(T.ceildiv(M, 32), N // block, threads=128) as (bx, by):
            x_shared = T.alloc_shared((32, block), T.bfloat16)
            x_local = T.alloc_fragment((32, block), T.bfloat16)
            amax = T.alloc_fragment((32,), T.float32)
            y_local = T.alloc_fragment((32, block), T.float4_e2m1fn)
            y_shared = T.alloc_shared((32, block), T.float4_e2m1fn)
            T.copy(X[bx * 32, by * block], x_shared, disable_tma=True)
            T.copy(x_shared, x_local)
            T.reduce_absmax(x_local, amax, dim=1)
            for i, j in T.Parallel(32, block):
                y_local[i, j] = T.clamp(x_local[i, j] / T.max(amax[i], 1e-4), -6.0, 6.0)
            for i in T.Parallel(32):
                S[bx * 32 + i, by] = amax[i]
            T.copy(y_local, y_shared)
            T.copy(y_shared, Q[bx * 32, by * block], disable_tma=True)

    return main


def _check_fp4_vectors(src):
    """Every vector call on the fp4 tile moves as many bytes as a thread steps over: the shared
    side's offset is ``tid * K`` nibbles, so K / 2 bytes per thread."""
    body = _kernel_text(src)
    calls = [line for line in body.splitlines() if "__nv_fp4_e2m1*)(smem" in line and _VEC_CALL.search(line)]
    assert calls, body
    for line in calls:
        nbytes = int(_VEC_CALL.search(line).group(2))
        steps = _SMEM_NIBBLE_OFFSET.findall(line)
        assert steps, line
        for k in steps:
            assert int(k) % 2 == 0 and int(k) // 2 == nbytes, f"{nbytes}-byte vector at {int(k) / 2}-byte steps: {line}"
    return calls


@pytest.mark.parametrize("disable_tma", [True, False])
def test_fp4_threaded_copy_vectors_are_whole_and_aligned(disable_tma):
    src = _source(_fp4_copy_kernel(64, 256, disable_tma))
    calls = _check_fp4_vectors(src)
    # in and out: plain 16-byte copies (a lone global->shared copy is not cp.async)
    assert all("copy_vec<16>" in c for c in calls) and len(calls) >= 2
    # a 32 x 32 fp4 tile is 512 bytes: 32 threads of 16 bytes each
    assert "((int)threadIdx.x) < 32" in src
    # and its global side advances a whole row (256 fp4 = 128 bytes) per thread
    assert "(((int)threadIdx.x) * 256)" in src


def test_fp4_tile_is_not_a_tma_store():
    src = _kernel_text(_source(_fp4_copy_kernel(64, 256, False)))
    assert "tma_store" not in src and "tma_load" not in src


@pytest.mark.parametrize("M,N", [(64, 256), (128, 512)])
def test_fp4_act_quant_store(M, N):
    src = _source(_fp4_quant_kernel(M, N))
    calls = _check_fp4_vectors(src)
    # the fragment -> shared copy moves each thread's 8 nibbles as one 4-byte word (not nibble by
    # nibble through compare-and-swap), the shared -> global copy 16 bytes a thread
    assert sorted(_VEC_CALL.search(c).group(2) for c in calls) == ["16", "4"], calls
    assert "y_local" in next(c for c in calls if "copy_vec<4>" in c)
    assert "tl::fp4_store(" not in src


def _fp4_fragment_kernel(M, N):
    """fp4 through registers: global -> shared -> fragment -> shared -> B, and fragment -> C."""

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float4_e2m1fn), B: T.Tensor((M, N), T.float4_e2m1fn),
             C: T.Tensor((M, N), T.float4_e2m1fn)):
        with T.Kernel(M // 32, N // 32, threads=128) as (bx, by):
            s = T.alloc_shared((32, 32), T.float4_e2m1fn)
            f = T.alloc_fragment((32, 32), T.float4_e2m1fn)
            t = T.alloc_shared((32, 32), T.float4_e2m1fn)
            T.copy(A[bx * 32, by * 32], s, disable_tma=True)
            T.copy(s, f)
            T.copy(f, t)
            T.copy(t, B[bx * 32, by * 32], disable_tma=True)
            T.copy(f, C[bx * 32, by * 32])

    return main


def test_fp4_fragment_copies_move_whole_bytes():
    body = _kernel_text(_source(_fp4_fragment_kernel(64, 256)))
    assert "fp4_store" not in body, body          # no nibble-by-nibble read-modify-write
    # shared -> fragment, fragment -> shared, fragment -> global: a thread's 16 nibbles, 8 bytes
    calls = [ln for ln in body.splitlines() if "(f + 0 / 2)" in ln]
    assert len(calls) == 3 and all("copy_vec<8>" in c for c in calls), body


def _half_copy(N, col0, rows=32, cols=32):
    @T.prim_func
    def main(A: T.Tensor((64, N), T.float16), B: T.Tensor((64, N), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((rows, cols), T.float16)
            T.copy(A[bx * 32, col0], s, disable_tma=True)
            T.copy(s, B[bx * 32, col0], disable_tma=True)

    return main


@pytest.mark.parametrize("N,col0,allowed", [
    (256, 0, 16),      # aligned rows and start: 8 halves (16 bytes)
    (260, 0, 8),       # 520-byte rows: 8 bytes at most
    (257, 0, 2),       # odd rows: element by element
    (256, 1, 2),       # a start one column in: element by element
    (256, 4, 8),       # a start 8 bytes in: 8-byte vectors
])
def test_threaded_copy_width_follows_row_and_start(N, col0, allowed):
    src = _kernel_text(_source(_half_copy(N, col0)))
    widths = [int(b) for _, b in _VEC_CALL.findall(src)]
    assert all(w <= allowed for w in widths), (widths, src)
    if allowed == 16:
        assert 16 in widths
    if allowed == 2:
        assert not widths


def _parallel_store(N, shift):
    @T.prim_func
    def main(A: T.Tensor((32, N), T.float16), B: T.Tensor((32, N), T.float16)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(32, 64):
                B[i, j + shift] = A[i, j + shift] + A[i, j + shift]

    return main


@pytest.mark.parametrize("N,shift,wide", [(128, 0, True), (128, 1, False), (129, 0, False), (130, 0, False)])
def test_parallel_vectors_need_aligned_rows_and_offsets(N, shift, wide):
    src = _kernel_text(_source(_parallel_store(N, shift)))
    has_vec = bool(re.search(r"\*\(uint4\*\)|\*\(uint2\*\)|\*\(half4\*\)|\*\(float4\*\)", src))
    if wide:
        assert "uint4" in src, src
    else:
        # a row of N halves (or a shifted column) leaves no 16-byte vector provably aligned
        assert "*(uint4*)" not in src, src
        if N % 4 and shift % 4:
            assert not has_vec, src


def _tile_store(N):
    @T.prim_func
    def main(B: T.Tensor((64, N), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((32, 32), T.float16)
            T.fill(s, 1.0)
            T.copy(s, B[bx * 32, 0])

    return main


def test_tma_store_needs_16_byte_rows():
    assert "tma_store" in _kernel_text(_source(_tile_store(256)))
    # 100 halves = 200-byte rows: TMA strides must be multiples of 16 bytes -> the threaded copy
    src = _kernel_text(_source(_tile_store(100)))
    assert "tma_store" not in src
    assert all(int(b) <= 8 for _, b in _VEC_CALL.findall(src))


def _padded_shared_copy(pad):
    @T.prim_func
    def main(A: T.Tensor((64, 256), T.float16), B: T.Tensor((64, 256), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((32, 32 + pad), T.float16)
            T.copy(A[bx * 32:bx * 32 + 32, 0:32], s[:, 0:32], disable_tma=True)
            T.copy(s[:, 0:32], B[bx * 32:bx * 32 + 32, 0:32], disable_tma=True)

    return main


@pytest.mark.parametrize("pad,allowed", [(0, 16), (8, 16), (4, 8), (1, 2)])
def test_shared_row_stride_limits_the_vector(pad, allowed):
    """A padded shared tile: row r starts at r * (32 + pad) elements, so a row of 36 halves
    (72 bytes) allows 8-byte vectors only, whatever the column start."""
    src = _kernel_text(_source(_padded_shared_copy(pad)))
    widths = [int(b) for _, b in _VEC_CALL.findall(src)]
    assert all(w <= allowed for w in widths), (widths, src)
    if allowed > 2:
        assert allowed in widths, (widths, src)
    else:
        assert not widths, src
