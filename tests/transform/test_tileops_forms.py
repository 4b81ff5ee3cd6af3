"""Forms from TileOPs (tile-ai's kernel library on upstream TileLang) that ours refused or lowered
into slow code (session 41's probe):

* a view of a parameter declared before ``with T.Kernel`` (``x_flat = T.Tensor(shape, dtype,
  x.data)``, its conv kernels) was "the kernel body must be inside T.Kernel": such views now go
  into the kernel as they do when written inside it;
* a ``T.copy`` whose extent is a run-time value (``x[r0:r0 + n, :]`` into ``s[0:n, :]``, its
  ragged pooling) was TL0601: the tile is copied at the extent's bound (the shared side's room),
  each row guarded, 16 bytes at a time along the constant inner extent;
* ``T.fill`` / ``T.clear`` of a plainly laid out shared tile stored one element per store; now
  16-byte stores of the value repeated (``tl::fill_vec``);
* a fragment read inside a T.Parallel at an index the loop does not use (``e_local[i]`` of a
  serial ``i``, its engram decode GEMV) took the layout of the loop that wrote it: a TL0203, or
  at a larger size a kernel reading other threads' elements; it is replicated now (upstream too);
* ``A[i] == m`` of an int64 element and an int32 scalar failed in TVM's script evaluator
  (mismatched types); comparisons promote their operands now, as arithmetic does;
* ``@tilelang.jit`` factories have upstream's ``signature``;
* a host-level ``for`` of constant trip count around ``with T.Kernel`` (its FFT stages) launches
  the kernel once per iteration, the variable a constant in each (was TL0002);
* ``T.ptx_cp_async`` of TVM's ``T.tvm_access_ptr`` operands (its AdaLayerNorm prefetch);
* ``T.wgmma_gemm`` inside ``with T.ws(0)`` of a 384-thread block: the checker that runs at compile
  time laid it out for the whole block (three warp groups) and refused it;
* a gemm operand fragment filled quadrant by quadrant (``T.Parallel(32, 32)`` writing
  ``f[32 + i, j]``, its mamba chunk scan): a quadrant lives on two of the four warps, and there was
  no loop layout for it (TL0201); such a loop now runs over the block counted from the fragment's
  origin, the iterations before it guarded off (session 58);
* its logsumexp: row maxima reduced from a fragment filled row by row (``T.serial`` rows around a
  ``T.Parallel`` of columns), then read by a ``T.Parallel`` over the rows beside a fragment copied
  out: that loop placed the maxima before the reduction did (TL0201); a statement touching a
  fragment a pending reduction writes now waits for it (session 58).
Each kernel's CUDA is compiled with nvcc.
"""

import re

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _body(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art.source[art.source.index('extern "C" __global__'):]


def view_before_kernel():
    """``y = 2 x`` through views of both parameters declared before ``with T.Kernel``."""
    @T.prim_func
    def kernel(x: T.Tensor((4, 64, 8, 8), "float16"), y: T.Tensor((4, 64, 8, 8), "float16")):
        x_flat = T.Tensor((4, 64, 64), "float16", x.data)
        y_flat = T.Tensor((4, 64, 64), "float16", y.data)
        with T.Kernel(4, threads=128) as bz:
            for i, j in T.Parallel(64, 64):
                y_flat[bz, i, j] = x_flat[bz, i, j] * T.float16(2)
    return kernel


def test_view_of_a_parameter_declared_before_the_kernel():
    body = _body(view_before_kernel())
    assert "*(uint4*)(y + " in body and "*(uint4*)(x + " in body     # the views index the parameters


def ragged(rows_bound=64):
    @T.prim_func
    def kernel(x: T.Tensor((1024, 64), "float16"), lens: T.Tensor((16,), "int32"),
               y: T.Tensor((16, 64, 64), "float16")):
        with T.Kernel(16, threads=128) as bx:
            s = T.alloc_shared((rows_bound, 64), "float16")
            n = lens[bx]
            T.clear(s)
            T.copy(x[bx * 64:bx * 64 + n, 0:64], s[0:n, 0:64])
            T.copy(s, y[bx, :, :])
    return kernel


def test_copy_of_a_run_time_extent_is_guarded_per_row():
    body = _body(ragged())
    # 64 rows x 64 halfs over 128 threads: 4 rounds of 16-byte vectors, row (it * 16 + tx / 8) < n
    assert re.search(r"if \(\(\(it_1 \* 16\) \+ \(\(\(int\)threadIdx.x\) >> 3\)\) < n\) \{\s*"
                     r"(int cse_v\d+ = [^;]*;\s*)*tl::copy_vec<16>", body)


def ragged_global_copy():
    @T.prim_func
    def kernel(x: T.Tensor((1024, 64), "float16"), lens: T.Tensor((16,), "int32"),
               y: T.Tensor((1024, 64), "float16")):
        with T.Kernel(16, threads=128) as bx:
            n = lens[bx]
            T.copy(x[bx * 64:bx * 64 + n, 0:64], y[bx * 64:bx * 64 + n, 0:64])

    return kernel


def test_a_global_copy_of_an_unbounded_run_time_extent_runs_in_chunks():
    """No tile spans an unbounded n: the copy goes element-wise over n x 64 in chunks of the
    block's 128 threads (kernel.expand_unbounded_copies), as upstream runs it (TL0601 before)."""
    body = _body(ragged_global_copy())
    assert re.search(r"for \(int i_flat_chunk = 0; i_flat_chunk < \(\(\(n \* 64\) \+ 127\) >> 7\); \+\+i_flat_chunk\)",
                     body)
    assert "if (((i_flat_chunk * 128) + ((int)threadIdx.x)) < (n * 64))" in body
    assert "< 512)" in body       # (rows past the tensor's 1024: nothing)


def test_fill_of_a_plain_shared_tile_is_16_byte_stores():
    body = _body(ragged())
    assert "tl::fill_vec<16>((&(((half*)smem)[((it * 1024) + (((int)threadIdx.x) * 8))]))" in body


def _gemv_with_a_broadcast_read(M, N):
    # TileOPs' engram decode: e_local[i] of a serial i, read by every iteration of a T.Parallel
    @T.prim_func
    def kernel(e: T.Tensor((M,), "float32"), W: T.Tensor((M, N), "float32"), y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            e_local = T.alloc_fragment((M,), "float32")
            k_local = T.alloc_fragment((N,), "float32")
            for i in T.Parallel(M):
                e_local[i] = e[i]
            for j in T.Parallel(N):
                k_local[j] = 0.0
            for i in T.serial(M):
                for j in T.Parallel(N):
                    k_local[j] += e_local[i] * W[i, j]
            for j in T.Parallel(N):
                y[j] = k_local[j]
    return kernel


def test_fragment_read_at_an_index_the_loop_does_not_use_is_replicated():
    # was TL0203 at 64 x 512, and at 512 x 1024 a kernel that read e_local[i & 3] (another
    # thread's element); every thread holds the whole fragment now, as upstream lays it out
    for M, N in ((64, 512), (512, 1024)):
        body = _body(_gemv_with_a_broadcast_read(M, N))
        assert f"float e_local[{M}];" in body and "e_local[i_1]" in body


def test_comparison_of_an_int64_element_with_an_int32_scalar():
    @T.prim_func
    def kernel(A: T.Tensor((32,), "int64"), B: T.Tensor((32,), "int64"), m: T.int32):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                if A[i] == m:
                    B[i] = 1
                if A[i] < m:
                    B[i] = 2

    body = _body(kernel)
    assert "(A[((int)threadIdx.x)] == ((int64_t)m))" in body


def test_jit_factory_has_a_signature():
    @tilelang.jit(out_idx=[1])
    def make(block_m, threads=64):
        @T.prim_func
        def main(x: T.Tensor((256,), "float32"), y: T.Tensor((256,), "float32")):
            with T.Kernel(256 // block_m, threads=threads) as bx:
                for i in T.Parallel(block_m):
                    y[bx * block_m + i] = x[bx * block_m + i]
        return main

    assert list(make.signature.parameters) == ["block_m", "threads"]


def host_loop_stages():
    """TileOPs' FFT form: ``for s in range(3): with T.Kernel(...)``, ``y = 2 y + s`` a stage."""
    @T.prim_func
    def kernel(y: T.Tensor((512,), "float32")):
        for s in range(3):
            with T.Kernel(4, threads=128) as bx:
                for i in T.Parallel(128):
                    y[bx * 128 + i] = y[bx * 128 + i] * 2.0 + s
    return kernel


def test_host_loop_around_a_kernel_launches_it_per_iteration():
    art = tilelang.lower(host_loop_stages(), "sm_90a")   # the kernel launched once a stage
    assert len(art.parts) == 3
    for s, part in enumerate(art.parts):
        assert nvcc.compile_cubin(part.source, part.arch, part.compile_flags)[:4] == b"\x7fELF"
        if s:       # the stage a constant in each launch (1.0, 2.0)
            assert f"0x1p+1f/*2.000000e+00*/) + 0x1p+{s - 1}f/*{float(s):e}*/)" in part.source


def test_host_loop_of_a_run_time_trip_count_is_a_located_error():
    @T.prim_func
    def kernel(y: T.Tensor((512,), "float32"), n: T.int32):
        for s in range(n):
            with T.Kernel(4, threads=128) as bx:
                for i in T.Parallel(128):
                    y[bx * 128 + i] = y[bx * 128 + i] * 2.0

    try:
        tilelang.lower(kernel, "sm_90a")
    except Exception as e:      # noqa: BLE001
        assert "TL0002" in str(e) and "host-level loop" in str(e) and ":" in str(e)
    else:
        raise AssertionError("a host loop of a run-time trip count compiled")


def test_cp_async_of_tvm_access_pointers():
    # TileOPs' AdaLayerNorm prefetch: TVM's T.tvm_access_ptr(type, buf.data, offset, extent, rw)
    @T.prim_func
    def kernel(x: T.Tensor((1024,), "float16"), y: T.Tensor((1024,), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((1024,), "float16")
            for j in T.Parallel(256):
                T.ptx_cp_async(T.tvm_access_ptr(T.type_annotation("float16"), s.data, j * 4, 4, 2),
                               T.tvm_access_ptr(T.type_annotation("float16"), x.data, j * 4, 4, 1), 4)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            T.copy(s, y)

    body = _body(kernel)
    assert "tl::cp_async_gs<8>" in body


def test_wgmma_gemm_in_one_role_of_a_384_thread_block():
    # TileOPs' prefill attention: T.wgmma_gemm inside `with T.ws(0)` of three warp groups is laid
    # out for that role's 128 threads (the checker, run at compile time, took the whole block)
    @tilelang.jit
    def make(threads=384):
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((128, 64), "float16"),
                 C: T.Tensor((64, 128), "float32")):
            with T.Kernel(1, threads=threads):
                As = T.alloc_shared([64, 64], "float16")
                Bs = T.alloc_shared([128, 64], "float16")
                with T.ws(0):
                    T.copy(A, As)
                    T.copy(B, Bs)
                    acc = T.alloc_fragment([64, 128], "float32")
                    T.wgmma_gemm(As, Bs, acc, transpose_B=True, clear_accum=True)
                    T.wait_wgmma(0)
                    T.copy(acc, C)
        return main

    source = make().get_kernel_source()
    assert "tl::wgmma_gemm_ss_desc<64, 128, 64, 1," in source and "if (((int)threadIdx.x) < 128) {" in source


def quadrants(n=64):
    """C = F @ B with F's quadrants written by four T.Parallel(32, 32) loops: [[A, 0], [2 A, A]]."""
    h = n // 2

    @T.prim_func
    def main(A: T.Tensor((n, n), T.float16), B: T.Tensor((n, n), T.float16), C: T.Tensor((n, n), T.float32)):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((n, n), T.float16)
            b_s = T.alloc_shared((n, n), T.float16)
            f = T.alloc_fragment((n, n), T.float16)
            acc = T.alloc_fragment((n, n), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(acc)
            for i, j in T.Parallel(h, h):
                f[i, j] = a_s[i, j]
            for i, j in T.Parallel(h, h):
                f[i, h + j] = T.float16(0)
            for i, j in T.Parallel(h, h):
                f[h + i, j] = a_s[h + i, j] * T.float16(2)
            for i, j in T.Parallel(h, h):
                f[h + i, h + j] = a_s[h + i, h + j]
            T.gemm(f, b_s, acc)
            T.copy(acc, C)

    return main


def test_fragment_written_by_quadrants_runs_on_its_own_layout():
    body = _body(quadrants())
    assert "wgmma_gemm_rs" in body
    # each quadrant on the threads holding it: rows 0..31 are warps 0 and 1 of the operand layout
    assert body.count("((int)threadIdx.x) < 64") == 2
    assert body.count("32 <= ") == 4       # the offset rows / columns of three quadrants


def logsumexp(M=64, N=256, block_m=16, threads=256):
    @T.prim_func
    def main(x: T.Tensor((M, N), T.float32), y: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_m), threads=threads) as pid:
            xf = T.alloc_fragment((block_m, N), T.float32)
            row_max = T.alloc_fragment((block_m,), T.float32)
            row_sum = T.alloc_fragment((block_m,), T.float32)
            out = T.alloc_fragment((block_m,), T.float32)
            for i in T.serial(block_m):
                for j in T.Parallel(N):
                    xf[i, j] = x[pid * block_m + i, j]
            T.fill(row_max, -T.infinity(T.float32))
            T.reduce_max(xf, row_max, dim=1, clear=False)
            for i in T.serial(block_m):
                for j in T.Parallel(N):
                    xf[i, j] = T.exp(xf[i, j] - row_max[i])
            T.reduce_sum(xf, row_sum, dim=1)
            for i in T.Parallel(block_m):
                out[i] = row_max[i] + T.log(row_sum[i])
            T.copy(out, y[pid * block_m])

    return main


def test_loop_reading_a_reduction_result_waits_for_the_reduction():
    body = _body(logsumexp())
    assert "float row_max[16];" in body          # the reduction's layout: every row on every thread
    assert "out[v_1] = (row_max[" in body


def mixes_bwd(TB=32, M=4):
    """DeepSeek TileKernels' mHC pre-split mixes backward: an annotated fragment written by loops
    at column offsets that read other fragments at the loop's own indices (``o[i, j + M] = b[i, j]``)."""
    M3 = 2 * M + M * M

    @T.prim_func
    def main(a: T.Tensor[(TB, M), T.float32], b: T.Tensor[(TB, M), T.float32], x: T.Tensor[(TB, M3), T.float32],
             out: T.Tensor[(TB, M3), T.float32]):
        with T.Kernel(1):
            a_frag = T.alloc_fragment((TB, M), T.float32)
            b_frag = T.alloc_fragment((TB, M), T.float32)
            x_frag = T.alloc_fragment((TB, M3), T.float32)
            o_frag = T.alloc_fragment((TB, M3), T.float32)
            T.annotate_layout({o_frag: T.Fragment((TB, M3), lambda i, j: (i % 32, i // 32 * M3 + j))})
            T.copy(a, a_frag)
            T.copy(b, b_frag)
            T.copy(x, x_frag)
            for i, j in T.Parallel(TB, M):
                o_frag[i, j] = a_frag[i, j] * 2
            for i, j in T.Parallel(TB, M):
                o_frag[i, j + M] = b_frag[i, j] * a_frag[i, j]
            for i, j in T.Parallel(TB, M3):
                o_frag[i, j] = o_frag[i, j] + x_frag[i, j]
            T.copy(o_frag, out)

    return main


def test_offset_block_reading_other_fragments_keeps_its_own_layout():
    # (widen_fragment_blocks leaves such a loop alone: widened, b_frag would be read at j - 4 in the
    # guarded-off iterations too, TL0203, where the loop as written serves every fragment)
    assert "o_frag[" in _body(mixes_bwd())      # lowered, and compiled by nvcc
