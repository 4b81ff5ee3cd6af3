"""Forms found in kernels users wrote for upstream TileLang (its issue tracker, kernel libraries
built on it) that ours refused: TVMScript's own names on T (T.If / T.Then / T.Else, T.And, T.Not,
T.Max, T.FloatImm), T.loop_break, T.cdiv, T.fma / T.fmul, the bfloat16 vector dtypes,
T.warpgroup_fence_operand, a tile atomic with a scalar value, T.vectorized(a, b) from a != 0, a
T.reduce_max of an fp8 fragment, a fragment viewed as another type of the same width, a wide
vectorized loop reading one scalar in every lane, a packed atomic from a float view of a 16-bit
shared buffer. Each is lowered and its CUDA compiled with nvcc."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.frontend import ParseError
from tilelang.diagnostics.errors import TileLangCompileError
from tilelang.jit import nvcc


def _cuda(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art.source[art.source.index('extern "C" __global__'):]


def test_tvmscript_if_frames_and_expression_nodes():
    @T.prim_func
    def kernel(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32"), n: T.int32):
        with T.Kernel(T.cdiv(1024, 128), threads=128) as bx:
            i = bx * 128 + T.get_thread_binding()
            acc = T.alloc_var("float32")
            with T.If(T.And(i < n, T.Not(i == 3))):
                with T.Then():
                    acc = T.Max(A[i], T.FloatImm("float32", 0.0))
                with T.Else():
                    acc = T.fma(A[i], A[i], 1.0)
            B[i] = T.fmul(acc, 2.0)

    body = _cuda(kernel)
    assert "__fmaf_rn(" in body and "__fmul_rn(" in body
    assert "} else {" in body and "!= 3" in body and "< n" in body


def test_loop_break():
    @T.prim_func
    def kernel(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                if A[i] < 0:
                    T.loop_break()
                B[0] += A[i]

    body = _cuda(kernel)
    assert "break;" in body


def test_bfloat16_vector_dtypes():
    for lanes in (4, 8, 16, 32, 64):
        assert str(getattr(T, f"bfloat16x{lanes}")) == f"bfloat16x{lanes}"
    assert [str(x) for x in T.index_to_coordinates(11, (2, 3, 4))] == ["0", "2", "3"]


def _one_wgmma(raw):
    """One asynchronous 64x64x64 wgmma and its wait: T.wait_wgmma and a 16-register pin, or
    (``raw``) upstream's T.warpgroup_arrive / commit_batch / wait around it and a whole pin."""
    @T.prim_func
    def kernel(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            if raw:
                T.warpgroup_arrive()
                T.wgmma_gemm(A_s, B_s, C_l, clear_accum=True)
                T.warpgroup_commit_batch()
                T.warpgroup_wait(0)
                T.warpgroup_fence_operand(C_l)
            else:
                T.wgmma_gemm(A_s, B_s, C_l, clear_accum=True)
                T.wait_wgmma(0)
                T.warpgroup_fence_operand(C_l, num_regs=16)
            T.copy(C_l, C)

    return kernel


def test_warpgroup_fence_operand_pins_the_accumulator():
    body = _cuda(_one_wgmma(raw=False))
    wait = body.index("tl::wait_wgmma<0>()")
    assert "tl::wgmma_fence_accumulator<32>" in body[wait:]      # T.wait_wgmma's own fence
    assert "tl::wgmma_fence_accumulator<16>" in body[wait:]      # the explicit one: 16 registers


def test_tile_atomics_with_a_scalar_value():
    @T.prim_func
    def kernel(Cnt: T.Tensor((64, 64), "float32"), H: T.Tensor((8, 16), "int32")):
        with T.Kernel(4, threads=128) as bx:
            T.atomic_add(Cnt, 1.0)                   # every element of the buffer
            T.atomic_max(H[bx, 0:16], bx)            # every element of a slice

    body = _cuda(kernel)
    assert body.count("tl::atomic_add(") == 1 and body.count("tl::atomic_max(") == 1
    assert "0x1p+0f" in body                          # the scalar 1.0, per element


def test_atomic_extent_mismatch_names_the_atomic():
    @T.prim_func
    def kernel(D: T.Tensor((32, 32), "float32"), S: T.Tensor((4, 32, 32), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((4, 32, 32), "float32")
            T.copy(S, s)
            T.atomic_add(D[0:32, 0:32], s[0:4, 0:32, 0:32])

    with pytest.raises(TileLangCompileError, match="T.atomic_add extent mismatch"):
        tilelang.lower(kernel, "sm_90a")


def test_vectorized_loop_from_a_nonzero_start():
    @T.prim_func
    def kernel(H: T.Tensor((8, 16), "int32")):
        with T.Kernel(1, threads=1):
            for i in T.vectorized(4, 8):
                H[0, i] = i

    body = _cuda(kernel)
    assert "make_int4((4)+(1*0)" in body and "H + 4" in body


@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2"])
def test_reduce_max_of_an_fp8_fragment(dtype):
    @T.prim_func
    def kernel(A: T.Tensor((64, 128), dtype), C: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((64, 128), dtype)
            c = T.alloc_fragment((64,), dtype)
            T.copy(A, a)
            T.reduce_max(a, c, dim=1)
            T.copy(c, C)

    assert "tl::warp_allreduce<tl::MaxOp" in _cuda(kernel)


def test_fragment_viewed_as_another_type_of_the_same_width():
    @T.prim_func
    def kernel(X: T.Tensor((32,), "float32"), Z: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            f = T.alloc_fragment((32,), "float32")
            T.copy(X, f)
            bits = T.view(f, (32,), "int32")
            for i in T.Parallel(32):
                Z[i] = bits[i]

    assert "*(int *)(&(" in _cuda(kernel)     # the float register's bits, read as int32


def test_fragment_view_of_another_width_is_refused_at_the_line():
    @T.prim_func
    def kernel(X: T.Tensor((32,), "float32"), Z: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32):
            f = T.alloc_fragment((32,), "float32")
            T.copy(X, f)
            halves = T.view(f, (64,), "float16")
            for i in T.Parallel(64):
                Z[i] = halves[i]

    with pytest.raises(TileLangCompileError, match="same width"):
        tilelang.lower(kernel, "sm_90a")


def test_wide_vectorized_loop_with_a_broadcast_scalar():
    # float32 x 8 lanes with a value every lane reads: split into CUDA-sized vectors (TVM printed
    # make_ulonglong4 with eight arguments, an nvcc error)
    @T.prim_func
    def kernel(X: T.Tensor((4096,), "float32"), V: T.Tensor((4096,), "float32"), O: T.Tensor((4096,), "bfloat16")):
        with T.Kernel(16, threads=32) as bx:
            tx = T.get_thread_binding()
            x = T.alloc_local((8,), "float32")
            v = T.alloc_local((8,), "float32")
            s = T.alloc_local((1,), "float32")
            s[0] = X[0]
            for i in T.vectorized(8):
                x[i] = X[bx * 256 + tx * 8 + i]
                v[i] = V[bx * 256 + tx * 8 + i]
            for i in T.vectorized(8):
                O[bx * 256 + tx * 8 + i] = x[i] + s[0] * v[i]

    assert "make_ulonglong4(" not in _cuda(kernel)


def test_packed_atomic_from_a_float_view_of_a_16_bit_shared_buffer():
    # Megatron's sparse attention backward: float32 partial sums staged through a bf16 buffer's
    # bytes, added to global memory four at a time
    @T.prim_func
    def kernel(K: T.Tensor((32, 64), "bfloat16"), dK: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            K_s = T.alloc_shared((32, 64), "bfloat16")
            T.copy(K, K_s)
            acc = T.view(K_s, (16, 64), "float32")
            for i, j in T.Parallel(16, 64):
                acc[i, j] = T.cast(i * 64 + j, "float32")
            for i, j in T.Parallel(16, 16):
                T.atomic_addx4(dK[i, j * 4], acc[i, j * 4])

    body = _cuda(kernel)
    assert "tl::atomic_addx4(" in body and "tl::ptr_as<float>(" in body


def test_a_value_rebound_in_a_loop_and_read_after_it_is_explained_at_its_line():
    # (a KernelBench-style conv kernel: ``acc = 0.0``, ``acc += ...`` in Python loops, ``acc`` read
    # after them; TVM's well-formedness check only said "Program is not well-formed")
    with pytest.raises(ParseError, match=r"'acc' is read outside the block.*T.alloc_var") as err:
        @T.prim_func
        def kernel(X: T.Tensor((64, 8), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    acc = 0.0
                    for j in range(8):
                        if X[i, j] > 0:
                            acc += X[i, j]
                    acc += 1.0
                    Y[i] = acc

    assert "acc += X[i, j]" in str(err.value)


def test_loop_break_in_an_explicitly_unrolled_loop_is_a_located_error():
    @T.prim_func
    def kernel(A: T.Tensor((128, 8), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            acc = T.alloc_var("float32", init=0.0)
            for i in T.unroll(8, explicit=True):
                if A[tx, i] < 0:
                    T.loop_break()
                acc += A[tx, i]
            B[tx] = acc

    with pytest.raises(TileLangCompileError) as err:
        tilelang.lower(kernel, "sm_90a")
    assert "TL0002" in str(err.value) and "explicit=True" in str(err.value)
    span = err.value.diagnostics[0].span
    assert open(__file__).read().splitlines()[span.line - 1].strip() == "T.loop_break()"


def test_an_alloc_var_read_as_its_one_element():
    """dlss5's ``raw = T.alloc_var("int32", init=v)[0]`` (a value forced into a register): ``[0]``
    reads the variable, as upstream's one-element buffer; a later store does not change ``raw``."""
    @T.prim_func
    def main(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            t = T.get_thread_binding(0)
            raw = T.alloc_var("int32", init=A[t] * 2)[0]
            v = T.alloc_var("int32", init=A[t] + 1)
            old = v[0]
            v = 7
            if raw >= 0:
                B[t] = raw + old + v

    src = tilelang.compile(main, target="cuda -arch=sm_90a").get_kernel_source()
    body = src[src.index("__global__"):]
    assert "B[((int)threadIdx.x)] = " in body
    with pytest.raises(ParseError, match=r"one element: index it with \[0\]"):
        @T.prim_func
        def bad(A: T.Tensor((128,), "int32")):
            with T.Kernel(1, threads=128):
                A[0] = T.alloc_var("int32", init=1)[1]


def test_eval_of_a_string_reads_the_kernels_names():
    """tilelang-bench's harness builds a kernel's epilogue from a string: ``eval("r[0]")`` with ``r`` a
    fragment of the kernel (upstream's builder runs the body as Python, so eval sees its locals)."""
    post = "r[0] * 2"

    @T.prim_func
    def main(A: T.Tensor((64, 256), "float16"), C: T.Tensor((64,), "float16")):
        with T.Kernel(64, threads=128) as bx:
            row = T.alloc_fragment((1, 256), "float")
            r = T.alloc_fragment((1,), "float")
            T.copy(A[bx, 0], row)
            T.reduce_sum(row, r, dim=1, clear=True)
            C[bx] = T.Cast("float16", eval(post))

    src = tilelang.compile(main, target="cuda -arch=sm_90a").get_kernel_source()
    assert "C[((int)blockIdx.x)] = ((half)(r * 0x1p+1f" in src      # (r: the reduced value, one register)


def test_upstreams_submodules_of_t_reach_its_names():
    """``T.builtin.sync_threads()`` (Anjiang-Wei/tilelang_PTX) and ``from tilelang.language.atomic
    import atomic_add``: upstream's submodule names lead to T's own functions."""
    from tilelang.language.atomic import atomic_add

    assert T.builtin.sync_threads is T.sync_threads and atomic_add is T.atomic_add
    with pytest.raises(AttributeError, match="tilelang.language.builtin' has no attribute 'no_such'"):
        T.builtin.no_such


def test_a_bare_return_ending_the_kernel_body_is_dropped():
    """tilelang-debugger's kernels end their ``with T.Kernel`` body with ``return`` (upstream drops
    it); a bare ``return`` anywhere else would drop what follows, so it is refused, located."""
    @T.prim_func
    def tail(x: T.Tensor((32,), "int32"), y: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            y[tx] = x[tx] + 1
            return

    assert "y[((int)threadIdx.x)] = (x[((int)threadIdx.x)] + 1);" in tilelang.compile(
        tail, target="cuda -arch=sm_90a").get_kernel_source()
    with pytest.raises(ParseError, match="a bare `return` inside a kernel only ends its body") as err:
        @T.prim_func
        def early(x: T.Tensor((32,), "int32"), y: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32):
                tx = T.get_thread_binding()
                if tx >= 16:
                    return
                y[tx] = x[tx] + 1
    assert "return" in str(err.value)


def test_a_thread_dimension_the_launch_leaves_at_one_is_zero():
    """``T.get_thread_binding(1)`` of ``threads=32`` (tilelang-debugger): threadIdx.y, always 0, as
    upstream binds it; ``T.get_block_binding(2)`` of a 1-D grid likewise."""
    @T.prim_func
    def main(x: T.Tensor((256,), "int32"), y: T.Tensor((256,), "int32")):
        with T.Kernel(4, threads=32):
            tx = T.get_thread_binding(0) + T.get_thread_binding(1) * 16 + T.get_block_binding(2) * 64
            y[tx] = x[tx] + T.get_thread_extent(2)

    src = tilelang.compile(main, target="cuda -arch=sm_90a").get_kernel_source()
    assert "y[((int)threadIdx.x)] = (x[((int)threadIdx.x)] + 1);" in src
    with pytest.raises(ParseError, match="CUDA has thread dimensions 0, 1 and 2"):
        @T.prim_func
        def bad(x: T.Tensor((32,), "int32")):
            with T.Kernel(1, threads=32):
                x[T.get_thread_binding(3)] = 0


def test_a_fragment_of_symbolic_extent_is_a_located_error():
    """A shared tile of symbolic extent takes run-time dynamic shared memory
    (tests/codegen/test_symbolic_shared.py); a fragment's registers cannot: refused at the
    allocation (an internal TypeError before session 44)."""
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, 256), "float16"), B: T.Tensor((m, 256), "float16")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((m, 256), "float16")
            T.copy(A[0:m, :], f)
            T.copy(f, B[0:m, :])

    with pytest.raises(TileLangCompileError, match=r"TL0002.*'f' is allocated with shape \[m, 256\]") as err:
        tilelang.compile(main, target="cuda -arch=sm_90a")
    assert "f = T.alloc_fragment((m, 256)" in str(err.value)       # shown at the allocation


def test_raw_warpgroup_sequencing():
    """Upstream's T.warpgroup_arrive / warpgroup_commit_batch / warpgroup_wait around an
    asynchronous T.wgmma_gemm: wgmma.fence, commit_group and wait_group, where they are written."""
    body = _cuda(_one_wgmma(raw=True))
    fence, commit, wait = (body.index(x) for x in ("tl::wgmma_fence()", "tl::wgmma_commit()", "tl::wait_wgmma<0>()"))
    assert fence < body.index("tl::wgmma_gemm") < commit < wait < body.index("tl::wgmma_fence_accumulator<32>")
    with pytest.raises(ValueError, match="constant 0..7"):
        T.warpgroup_wait(9)


def test_a_flag_set_under_a_guard_inside_a_pipelined_loop():
    """A paged decode's loop (a vendored copy of upstream's sparse GQA paged decode): inside
    `T.Pipelined`, an `if` on the block table both sets a `T.alloc_var` flag and reads the physical
    block it copies from. Upstream 0.1.15 stops in MakePackedAPI ("variables (phys,) are used, but
    are not passed in as API arguments"); ours keeps the index a value of the guarded iteration."""
    n = T.dynamic("n")

    @T.prim_func
    def kernel(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((64, 64, 64), "float16"),
               idx: T.Tensor((n,), "int32"), table: T.Tensor((64,), "int32"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Qs = T.alloc_shared((64, 64), "float16")
            Ks = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            seen = T.alloc_var("bool")
            T.copy(Q, Qs)
            T.clear(acc)
            seen = False
            for i in T.Pipelined(n, num_stages=2):
                logical = idx[i]
                if logical >= 0:
                    seen = True
                    phys = table[logical]
                    T.copy(K[phys, :, :], Ks)
                    T.gemm(Qs, Ks, acc, transpose_B=True)
            if seen:
                T.copy(acc, O)

    body = _cuda(kernel)
    assert "table[" in body and "wgmma" in body
