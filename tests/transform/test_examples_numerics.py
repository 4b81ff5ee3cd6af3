"""Thread -> element mappings behind four upstream examples that compiled but computed wrong
results on the GPU (dequantize_gemm w4a8, flash_decoding varlen logits, gemm_sp's compressor,
blocksparse attention). Each test simulates the per-thread index arithmetic of the lowered IR
(or the inferred layouts) on the CPU and checks that every element lands where it belongs.

The kernels are shared with tests/gpu/test_examples_numerics_gpu.py, which runs them against torch.
"""

import numpy as np
import pytest
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.layout.axes import evaluate_index_expr, mma_operand_a
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import infer_layouts


# ----- kernels (also run on the GPU) ----------------------------------------------------------

def int4_gemm(M=64, N=32, K=128, threads=128):
    """Ct = dequant(B) @ A^T with B's int4 pairs unpacked in registers (``B_l[i, j // 2]``)
    into the register A operand of an int8 mma (``gemm_rs``)."""

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "int8"), B: T.Tensor((N, K // 2), "uint8"), Ct: T.Tensor((N, M), "int32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, K), "int8")
            B_s = T.alloc_shared((N, K // 2), "uint8")
            B_l = T.alloc_fragment((N, K // 2), "uint8")
            B_d = T.alloc_fragment((N, K), "int8")
            C_l = T.alloc_fragment((N, M), "int32")
            T.clear(C_l)
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.copy(B_s, B_l)
            for i, j in T.Parallel(N, K):
                nib = (B_l[i, j // 2] >> (T.Cast("uint8", j % 2) * T.uint8(4))) & T.uint8(15)
                B_d[i, j] = T.reinterpret("int8", nib << T.uint8(4)) >> T.int8(4)
            T.gemm(B_d, A_s, C_l, transpose_B=True)
            T.copy(C_l, Ct[0, 0])

    return kernel


def partial_epilogue(rows=4, M=64, N=64, K=64):
    """O = (A @ B)[:rows]: only the first ``rows`` rows of the accumulator go to shared memory
    (flash decoding's ``T.copy(acc_o[:valid_block_H, :], O_shared)``)."""

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), O: T.Tensor((rows, N), "float16")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            O_s = T.alloc_shared((rows, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.gemm(A_s, B_s, acc)
            T.copy(acc[:rows, :], O_s)
            T.copy(O_s, O[0, 0])

    return kernel


def local_rows(S=64, D=128, per=32):
    """Every thread copies its own ``per``-long row slice into a T.alloc_local buffer, doubles it
    and writes it back (gemm_sp's compressor: a local buffer belongs to each thread)."""

    @T.prim_func
    def kernel(X: T.Tensor((S, D), "float16"), Y: T.Tensor((S, D), "float16")):
        with T.Kernel(1, threads=(S, D // per)) as bx:
            tm = T.get_thread_binding(0)
            tn = T.get_thread_binding(1)
            loc = T.alloc_local([per], "float16")
            T.copy(X[tm, tn * per:(tn + 1) * per], loc)
            for i in T.unroll(per):
                loc[i] = loc[i] * T.float16(2)
            T.copy(loc, Y[tm, tn * per:(tn + 1) * per])

    return kernel


def bool_row_mask(rows=4, n=4, D=64):
    """O[r, :] = sum of the X blocks whose mask bit ``mask[r, k]`` is set (a 4-bool row copied
    into a fragment, as blocksparse attention's ``T.copy(BlockSparseMask[.., bx, :], block_mask)``)."""

    @T.prim_func
    def kernel(mask: T.Tensor((rows, n), "bool"), X: T.Tensor((n, D), "float32"), O: T.Tensor((rows, D), "float32")):
        with T.Kernel(rows, threads=128) as bx:
            m = T.alloc_fragment([n], "bool")
            acc = T.alloc_fragment([D], "float32")
            T.copy(mask[bx, :], m)
            T.clear(acc)
            for k in T.serial(n):
                if m[k]:
                    for j in T.Parallel(D):
                        acc[j] += X[k, j]
            T.copy(acc, O[bx, 0])

    return kernel


# ----- helpers ---------------------------------------------------------------------------------

def lowered(func, arch="sm_90a"):
    from tilelang.engine.lower import LowerState
    from tilelang.engine.pipeline import PASSES

    st = LowerState(func, arch, "main", pass_configs={})
    for name, run in PASSES:
        if name == "emit_cuda":
            break
        run(st)
    return st


def stores_into(body, name):
    """[(store, [enclosing conditions], [enclosing loops])] for every BufferStore into a buffer
    named ``name``."""
    out = []

    def go(s, conds, loops):
        if isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                go(x, conds, loops)
        elif isinstance(s, tirx.IfThenElse):
            go(s.then_case, conds + [s.condition], loops)
            if s.else_case is not None:
                go(s.else_case, conds + [tirx.Not(s.condition)], loops)
        elif isinstance(s, tirx.For):
            go(s.body, conds, loops + [s])
        elif isinstance(s, tirx.BufferStore):
            if s.buffer.name == name:
                out.append((s, conds, loops))
        elif hasattr(s, "body"):
            go(s.body, conds, loops)

    go(body, [], [])
    return out


def evaluate(expr, env):
    """Integer value of ``expr`` with the variables of ``env`` bound (a vector's first lane)."""
    if isinstance(expr, tirx.Ramp):
        expr = expr.base
    return int(evaluate_index_expr(expr, list(env.items())))


def iterations(loops):
    """Every assignment of the loops' variables (constant extents)."""
    grids = [range(int(lp.min.value), int(lp.min.value) + int(lp.extent.value)) for lp in loops]
    for combo in np.ndindex(*[len(g) for g in grids]):
        yield {lp.loop_var: g[c] for lp, g, c in zip(loops, grids, combo)}


def thread_var(st, tag="threadIdx.x"):
    return st.info.thread_vars[tag]


# ----- 1. dequantize_gemm w4a8: the int8 register A operand -------------------------------------

def gemm_rs_int8_owner(M, K, warp_m, warp_n, t, v):
    """Element (row, col) of register ``v`` of thread ``t`` in tl::gemm_rs's int8 A layout
    (src/tl/gemm_sm80.h: lane (r%8)*4 + (k%16)/4, index (((mi*KI + ki)*2 + k/16)*2 + r/8)*4 + k%4)."""
    WM, KI = M // warp_m, K // 32
    lane, wm = t % 32, (t // 32) % warp_m
    e, h, kh, ki, mi = v % 4, (v // 4) % 2, (v // 8) % 2, (v // 16) % KI, v // (16 * KI)
    return wm * WM + mi * 16 + h * 8 + lane // 4, ki * 32 + kh * 16 + (lane % 4) * 4 + e


@pytest.mark.parametrize("M,K,wm,wn", [(32, 128, 2, 2), (64, 64, 4, 1), (32, 256, 1, 4)])
def test_int8_register_a_operand_is_the_gemm_rs_layout(M, K, wm, wn):
    frag = mma_operand_a(M, K, wm, wn, 128, elem_bytes=1)
    own = frag.owners()
    assert own.shape == (128, M * K // (32 * wm))
    for t in range(128):
        for v in range(own.shape[1]):
            r, c = gemm_rs_int8_owner(M, K, wm, wn, t, v)
            assert own[t, v] == r * K + c


def test_tf32_register_a_operand_is_the_gemm_rs_layout():
    # lane (r%8)*4 + k%4, index ((mi*KI + ki)*2 + k/4)*2 + r/8 (src/tl/gemm_sm80.h)
    M, K, KI = 32, 16, 2
    own = mma_operand_a(M, K, 2, 2, 128, elem_bytes=4).owners()
    for t in range(128):
        lane, wm = t % 32, (t // 32) % 2
        for v in range(own.shape[1]):
            h, kh, ki = v % 2, (v // 2) % 2, (v // 4) % KI
            r, c = wm * 16 + h * 8 + lane // 4, ki * 8 + kh * 4 + lane % 4
            assert own[t, v] == r * K + c


def test_16bit_register_a_operand_unchanged():
    a, b = mma_operand_a(64, 32, 2, 2, 128), mma_operand_a(64, 32, 2, 2, 128, elem_bytes=2)
    assert a.same_as(b)
    own = a.owners()
    lane, v = 5, 3      # lane (r%8)*4 + (k%8)/2, index (((mi*KI + ki)*2 + k/8)*2 + r/8)*2 + k%2
    assert own[lane, v] == (8 + 1) * 32 + 2 * 1 + 1


def test_int4_unpack_reads_the_byte_its_thread_holds():
    layouts = infer_layouts(analyze_kernel(int4_gemm()), "sm_90a")
    frags = {b.name: f for b, f in layouts.fragments.items()}
    assert frags["B_d"].same_as(mma_operand_a(32, 128, 2, 2, 128, elem_bytes=1))
    loop = next(iter(layouts.loops.values()))
    assert loop.same_as(frags["B_d"])
    own, held = loop.owners(), frags["B_l"].owners()
    for t in range(128):
        i, j = np.divmod(own[t], 128)
        assert set((i * 64 + j // 2).tolist()) <= set(held[t].tolist())


def test_int4_gemm_passes_int8_fragment_to_gemm_rs():
    src = tilelang.compile(int4_gemm(), target="sm_90a").get_kernel_source()
    assert "tl::gemm_rs<32, 64, 128, 2, 2" in src


# ----- 2. flash_decoding: a copy of part of a fragment ------------------------------------------

@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_partial_fragment_copy_writes_only_its_rows_once(arch):
    rows, N = 4, 64
    st = lowered(partial_epilogue(rows=rows, N=N), arch)
    tid = thread_var(st)
    found = [(s, c, lp) for s, c, lp in stores_into(st.lowered.body, "O_s")
             if "acc[" in str(s.value)]
    assert len(found) == 1
    store, conds, loops = found[0]
    loops = [lp for lp in loops if not lp.loop_var.same_as(tid)]
    written = {}
    lanes = store.value.dtype.lanes
    for t in range(128):
        for env in iterations(loops):
            env[tid] = t
            if all(evaluate(c, env) for c in conds):
                off = evaluate(store.indices[0], env)
                for ln in range(lanes):
                    assert off + ln not in written, f"thread {t} and thread {written[off + ln]} write one address"
                    written[off + ln] = t
    assert len(written) == rows * N


# ----- 3. gemm_sp's compressor: T.copy into T.alloc_local is per thread -------------------------

def _name(load):
    """Name of the buffer a (Buffer|Tensor)Load reads."""
    return (load.buffer if hasattr(load, "buffer") else load.source).name


def copies(body, callee="copy_vec"):
    """[(dst BufferLoad, src BufferLoad, bytes, [conditions], [loops])] of every ``tl::copy_vec``."""
    out = []

    def go(s, conds, loops):
        if isinstance(s, tirx.SeqStmt):
            for x in s.seq:
                go(x, conds, loops)
        elif isinstance(s, tirx.IfThenElse):
            go(s.then_case, conds + [s.condition], loops)
        elif isinstance(s, tirx.For):
            go(s.body, conds, loops + [s])
        elif isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call) and s.value.args \
                and callee in str(s.value.args[0]):
            dst, src = (a.args[0] for a in s.value.args[1:3])
            nbytes = int(str(s.value.args[0].value).split("<")[1].rstrip(">"))
            out.append((dst, src, nbytes, conds, loops))
        elif hasattr(s, "body"):
            go(s.body, conds, loops)

    go(body, [], [])
    return out


def test_copy_into_local_is_done_by_every_thread():
    S, D, per = 64, 128, 32
    st = lowered(local_rows(S, D, per))
    tm, tn = thread_var(st, "threadIdx.x"), thread_var(st, "threadIdx.y")
    moves = copies(st.lowered.body)
    load = [m for m in moves if _name(m[1]) == "X"]
    assert len(load) == 1
    dst, src, nbytes, conds, loops = load[0]
    assert _name(dst) == "loc" and not conds
    for m in range(0, S, 7):
        for n in range(D // per):
            got = {}
            for env in iterations(loops):
                env.update({tm: m, tn: n})
                d = evaluate(dst.indices[0], env)
                r, c = (evaluate(i, env) for i in src.indices)
                for e in range(nbytes // 2):
                    got[d + e] = (r, c + e)
            # the thread's whole slice, every element in its own place
            assert got == {i: (m, n * per + i) for i in range(per)}


# ----- 4. blocksparse attention: a bool row copied into a fragment ------------------------------

def test_bool_fragment_copy_is_not_a_wide_vector():
    src = tilelang.compile(bool_row_mask(), target="sm_90a").get_kernel_source()
    body = src[src.find("__global__"):]
    for wide in ("ushort", "uint2", "int2", "uchar4", "char4", "uint4"):
        assert f"({wide}*)" not in body and f"*({wide}" not in body, body
    assert "mask[" in body
