"""The checker builds kernels for targets this TileLang does not compile (sm_100 tcgen05 / tensor
memory, hip) and runs the target-independent checks on them; the compiler keeps refusing them."""

from __future__ import annotations

import textwrap

import pytest

import tilelang
import tilelang.language as T
from tilelang_lsp.worker_check import CheckService

HEAD = textwrap.dedent("""\
    import tilelang
    import tilelang.language as T
    """)

TCGEN05 = HEAD + textwrap.dedent("""\


    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M, block_N, block_K, c_cols, stages, use_2cta=False):
        @T.prim_func
        def main(A: T.Tensor((M, K), T.bfloat16), B: T.Tensor((N, K), T.bfloat16),
                 C: T.Tensor((M, N), T.bfloat16)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                A_shared = T.alloc_shared((stages, block_M, block_K), T.bfloat16)
                B_shared = T.alloc_shared((stages, block_N, block_K), T.bfloat16)
                C_tmem = T.alloc_tmem([2, block_M, c_cols], T.float32)
                mbar = T.alloc_barrier(1)
                C_local = T.alloc_fragment((block_M, block_N), T.float32)
                for k in T.serial(T.ceildiv(K, block_K)):
                    T.copy(A[by * block_M, k * block_K], A_shared[k % stages, :, :])
                    T.copy(B[bx * block_N, k * block_K], B_shared[k % stages, :, :])
                    T.tcgen05_gemm(A_shared[k % stages, :, :], B_shared[k % stages, :, :], C_tmem[k % 2, :, :],
                                   False, True, mbar=mbar, clear_accum=k == 0, use_2cta=use_2cta)
                    T.tcgen05_mma_arrive(mbar)
                    T.mbarrier_wait_parity(mbar, k % 2)
                T.copy(C_tmem[0, :, 0:block_N], C_local)
                T.copy(C_local, C[by * block_M, bx * block_N])

        return main


    matmul({args})
    """)


def _check(tmp_path, text, name="kernel.py", target=None):
    path = tmp_path / name
    path.write_text(text)
    reply = CheckService().check({"path": str(path), "text": text, "target": target, "timeout": 120})
    assert reply["ok"]
    return reply["diagnostics"]


def _codes(diags, severity=None):
    return sorted(d["code"] for d in diags if severity is None or d["severity"] == severity)


def test_a_tcgen05_kernel_is_built_and_checked_for_sm100(tmp_path):
    diags = _check(tmp_path, TCGEN05.format(args="4096, 4096, 4096, 128, 128, 64, 128, 4"))
    notes = [d for d in diags if d["code"] == "TL0804"]
    assert len(notes) == 1 and "sm_100a" in notes[0]["message"] and "skipped" in notes[0]["message"]
    assert notes[0]["span"]["line"] == 1
    # the accumulator tile written by the asynchronous MMA is not "read before written" (TL0401),
    # and tensor memory is not counted as registers (TL0502)
    assert _codes(diags) == ["TL0804"]


def test_a_tcgen05_gemm_shape_mismatch_is_found(tmp_path):
    diags = _check(tmp_path, TCGEN05.format(args="4096, 4096, 4096, 128, 128, 64, 256, 4"))
    errors = [d for d in diags if d["severity"] == "error"]
    assert [d["code"] for d in errors] == ["TL0101"]
    assert "C must be 128x128" in errors[0]["message"] and errors[0]["span"]["line"] == 19


def test_two_cta_tcgen05_gemm_holds_half_of_b_per_cta(tmp_path):
    ok = _check(tmp_path, TCGEN05.format(args="4096, 4096, 4096, 128, 128, 64, 256, 4, use_2cta=True"))
    assert "error" not in {d["severity"] for d in ok}
    bad = _check(tmp_path, TCGEN05.format(args="4096, 4096, 4096, 128, 128, 64, 128, 4, use_2cta=True"))
    assert any(d["code"] == "TL0101" and "use_2cta" in d["message"] for d in bad)


def test_shared_memory_is_checked_against_the_sm100_budget(tmp_path):
    # 6 stages of 128x128 + 128x128 bf16 = 384 KiB > 227 KiB, whatever --target says
    diags = _check(tmp_path, TCGEN05.format(args="4096, 4096, 4096, 128, 128, 128, 128, 6"), target="sm_80")
    smem = [d for d in diags if d["code"] == "TL0501"]
    assert smem and "sm_100a" in smem[0]["message"] and "227 KiB" in smem[0]["message"]


def test_tensor_memory_capacity_is_checked(tmp_path):
    diags = _check(tmp_path, TCGEN05.format(args="4096, 4096, 4096, 128, 128, 64, 512, 2"))
    assert any(d["code"] == "TL0501" and "1024 columns" in d["message"] for d in diags)


def test_the_compiler_still_refuses_tcgen05_and_3d_tensor_memory():
    with pytest.raises(NotImplementedError, match="does not generate sm_100"):
        T.tcgen05_gemm(None, None, None)
    with pytest.raises(NotImplementedError, match="does not generate sm_100"):
        T.tcgen05_mma_arrive(None)

    def kernel():
        @T.prim_func
        def main(A: T.Tensor((128, 128), T.float32)):
            with T.Kernel(1, threads=128):
                T.alloc_tmem([2, 128, 128], T.float32)

        return main

    with pytest.raises(Exception, match="2-D"):
        kernel()

    def kernel2():
        @T.prim_func
        def main(A: T.Tensor((128, 128), T.float32)):
            with T.Kernel(1, threads=128):
                C = T.alloc_tmem([128, 128], T.float32)
                T.clear(C)

        return main

    with pytest.raises(Exception, match="tensor memory"):
        tilelang.compile(kernel2(), target="sm_90a")


NAMED = HEAD + textwrap.dedent("""\


    @tilelang.jit(target="cuda -arch=sm_80")
    def big(n):
        @T.prim_func
        def main(A: T.Tensor((n, n), T.float16)):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((n, n), T.float16)
                T.copy(A, S)
                T.copy(S, A)

        return main


    big(300)
    """)


def test_the_target_the_file_names_gives_the_limits(tmp_path):
    # 300x300 fp16 = 175.8 KiB: fits sm_90a's 227 KiB, not sm_80's 163 KiB
    diags = _check(tmp_path, NAMED, target="sm_90a")
    smem = [d for d in diags if d["code"] == "TL0501"]
    assert smem and "sm_80" in smem[0]["message"]
    assert not any(d["code"] == "TL0804" for d in diags)


HIP = HEAD + textwrap.dedent("""\
    from tvm import target as tvm_target


    @tilelang.jit(out_idx=[-1], target="hip -mcpu=gfx950")
    def add(n, block):
        where = tvm_target.Target("hip -mcpu=gfx950")
        assert where.kind.name == "rocm"

        @T.prim_func
        def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
            with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
                a = T.alloc_fragment((block,), T.float32)
                b = T.alloc_fragment((block,), T.float32)
                T.copy(A[bx * block], a)
                for i in T.Parallel(block):
                    b[i] = a[i] + b[i]
                T.copy(b, B[bx * block])

        return main


    add(1024, 128)
    """)


def test_a_hip_kernel_is_built_and_checked(tmp_path):
    diags = _check(tmp_path, HIP)
    notes = [d for d in diags if d["code"] == "TL0804"]
    assert len(notes) == 1 and "hip (gfx950)" in notes[0]["message"]
    # the target-independent checks ran: 'b' is read before it is written
    assert any(d["code"] == "TL0401" and "'b'" in d["message"] for d in diags)


def test_the_hip_target_string_still_does_not_parse_outside_the_checker():
    from tvm.target import Target

    with pytest.raises(Exception, match="Cannot parse target string"):
        Target("hip -mcpu=gfx950")


ROLES = HEAD + textwrap.dedent("""\


    @tilelang.jit
    def roles(n):
        @T.prim_func
        def main(A: T.Tensor((n, 128), T.float32)):
            with T.Kernel(1, threads=256):
                tid = T.get_thread_binding()
                acc = T.alloc_fragment((128,), T.float32)
                if tid < 128:
                    T.fill(acc, 0)
                for k in T.serial(n):
                    if tid < 128:
                        for i in T.Parallel(128):
                            acc[i] = acc[i] + A[k, i]
                if tid < 128:
                    T.copy(acc, A[0, :])

        return main


    roles(4)
    """)


def test_a_register_initialised_by_its_warp_role_is_not_read_uninitialised(tmp_path):
    diags = _check(tmp_path, ROLES)
    assert not any(d["code"] == "TL0401" for d in diags)


def test_a_hip_kernel_is_checked_against_the_lds_of_its_processor(tmp_path):
    big = HIP.replace("a = T.alloc_fragment((block,), T.float32)",
                      "a = T.alloc_fragment((block,), T.float32)\n"
                      "            s = T.alloc_shared((block, 400), T.float32)\n"
                      "            T.fill(s, 0)\n"
                      "            T.copy(s[0, 0:block], A[bx * block])")
    diags = _check(tmp_path, big)   # 128 x 400 x 4 = 200 KiB: past gfx950's 160 KiB, within sm_90a's 227
    smem = [d for d in diags if d["code"] == "TL0501"]
    assert len(smem) == 1 and "gfx950" in smem[0]["message"] and "LDS" in smem[0]["message"]


WHILE = HEAD + textwrap.dedent("""\


    @tilelang.jit(out_idx=[-1])
    def persistent(n):
        @T.prim_func
        def main(A: T.Tensor((n, 128), T.float32), B: T.Tensor((n, 128), T.float32)):
            with T.Kernel(4, threads=128) as bid:
                tile = T.alloc_var(T.int32)
                tile = bid
                while tile < n:
                    T.copy(A[tile, :], B[tile, :])
                    tile = tile + 4

        return main


    persistent(64)
    """)


def test_the_body_of_a_while_loop_reads_and_writes(tmp_path):
    diags = _check(tmp_path, WHILE)
    assert not any(d["code"] in ("TL0402", "TL0403") for d in diags), diags
