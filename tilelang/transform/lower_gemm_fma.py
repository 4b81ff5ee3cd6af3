"""The SIMT (CUDA-core FMA) fallback of ``T.gemm``: its thread grid, its fragment layouts and its call.

Contract: ``targets.gemm_uses_fma`` decides which gemms take this path (operand types without a
tensor-core instruction in our library on the target: fp64, fp32 / bf16 before sm_80, int32).
``fma_plan`` splits the M x N tile over the block: a TY x TX thread grid, each thread owning
``M / TY`` rows strided by TY and runs of VN consecutive columns strided by ``TX * VN`` (threads
that do not fit the grid repeat the work of thread ``tid % (TX * TY)``, so every replica holds the
result). ``fma_accumulator`` / ``fma_operand_a`` are the fragments layout inference gives C and a
register A; ``lower_fma_gemm`` emits ``tl::gemm_fma_ss`` / ``tl::gemm_fma_rs``
(src/tl/gemm_fma.h, which documents the same register order). The operands are read row-major
(no swizzle), so layout inference leaves the shared operands of these gemms unswizzled.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilelang.language.dtypes import nbytes
from tilelang.layout.axes import LOCAL, THREAD, Axis, AxisFragment
from tilelang.tir_utils import const_int

VECTOR_BYTES = 16
MAX_STAGED_REGISTERS = 32     # operand registers per K step (a + b) before KV shrinks


@dataclass(frozen=True)
class FmaGrid:
    TX: int          # threads along N
    TY: int          # threads along M
    VN: int          # consecutive columns per run
    KV: int          # K elements per step of the inner loop

    @property
    def threads(self) -> int:
        return self.TX * self.TY


def fma_plan(M: int, N: int, K: int, num_threads: int, dtype: str) -> FmaGrid:
    """The thread grid for an M x N x K gemm with ``dtype`` operands over ``num_threads`` threads.

    Most threads first (the largest divisor of the block that the tile splits over), then the
    squarest per-thread tile (fewest shared reads per FMA), then more threads along N (a warp
    reads one B row as consecutive vectors)."""
    e = nbytes(dtype)
    best = None
    vn = max(1, min(4, VECTOR_BYTES // e))
    while N % vn:
        vn //= 2
    for used in sorted((u for u in range(1, num_threads + 1) if num_threads % u == 0), reverse=True):
        for tx in range(1, used + 1):
            if used % tx:
                continue
            ty = used // tx
            if M % ty or N % (tx * vn):
                continue
            rm, rn = M // ty, N // tx
            key = (abs(rm - rn), -tx)
            if best is None or key < best[0]:
                best = (key, tx, ty)
        if best is not None:
            break
    _, tx, ty = best
    rm, rn = M // ty, N // tx
    kv = max(1, VECTOR_BYTES // e)
    while kv > 1 and (K % kv or (rm + rn) * kv > MAX_STAGED_REGISTERS):
        kv //= 2
    return FmaGrid(tx, ty, vn, kv)


def _fragment(shape, num_threads, grid, axes, name):
    if num_threads > grid.threads:
        axes.append(Axis("repeat", THREAD, num_threads // grid.threads, grid.threads, None))
    return AxisFragment(tuple(shape), int(num_threads), tuple(a for a in axes if a.extent > 1), name)


def fma_accumulator(M, N, grid: FmaGrid, num_threads, name="FMA gemm accumulator"):
    """C: register ``(mb * NB + nb) * VN + v`` holds ``C[mb * TY + ty, (nb * TX + tx) * VN + v]``."""
    TX, TY, VN = grid.TX, grid.TY, grid.VN
    NB = N // (TX * VN)
    axes = [Axis("tx", THREAD, TX, 1, 1, VN), Axis("ty", THREAD, TY, TX, 0, 1),
            Axis("v", LOCAL, VN, 1, 1, 1), Axis("nb", LOCAL, NB, VN, 1, VN * TX),
            Axis("mb", LOCAL, M // TY, VN * NB, 0, TY)]
    return _fragment((M, N), num_threads, grid, axes, name)


def fma_operand_a(M, K, grid: FmaGrid, num_threads, name="FMA gemm A operand"):
    """Register A: register ``mb * K + k`` holds ``A[mb * TY + ty, k]`` (replicated over tx)."""
    TX, TY = grid.TX, grid.TY
    axes = [Axis("tx", THREAD, TX, 1, None), Axis("ty", THREAD, TY, TX, 0, 1),
            Axis("k", LOCAL, K, 1, 1, 1), Axis("mb", LOCAL, M // TY, K, 0, TY)]
    return _fragment((M, K), num_threads, grid, axes, name)


def _aligned(region, ld: int, e: int) -> bool:
    """Whether every run the kernel reads starts 16-byte aligned: constant column start, rows of
    whole 16-byte vectors (the shared planner places buffers, and stages, at 16-byte multiples)."""
    col = const_int(region.starts[-1]) if len(region.starts) else 0
    shape = [const_int(s) for s in region.buffer.shape]
    if col is None or None in shape or (ld * e) % VECTOR_BYTES or (col * e) % VECTOR_BYTES:
        return False
    return True


_CTYPES = {"float64": "double", "float32": "float", "bfloat16": "__nv_bfloat16", "float16": "half",
           "int32": "int", "int8": "int8_t", "uint8": "uint8_t"}


def _ctype(buf) -> str:
    return _CTYPES[str(buf.dtype)]


def fma_call(plan, a, b, c, a_shared: bool, clear: str) -> str:
    """The template head of the ``tl::gemm_fma_*`` call for ``plan`` (a GemmPlan of kind "fma")."""
    g = plan.fma
    b_e = nbytes(str(b.buffer.dtype))
    ldb = const_int(b.buffer.shape[-1])
    grid = f"{plan.M}, {plan.N}, {plan.K}, {g.TX}, {g.TY}, {g.VN}, {g.KV}"
    b_flag = "true" if plan.trans_b else "false"
    align_b = "true" if _aligned(b, ldb, b_e) else "false"
    types = f"{_ctype(a.buffer)}, {_ctype(b.buffer)}, {_ctype(c.buffer)}"
    if a_shared:
        lda = const_int(a.buffer.shape[-1])
        align_a = "true" if _aligned(a, lda, nbytes(str(a.buffer.dtype))) else "false"
        a_flag = "true" if plan.trans_a else "false"
        return (f"tl::gemm_fma_ss<{grid}, {a_flag}, {b_flag}, {clear}, {lda}, {ldb}, {align_a}, {align_b}, {types}>")
    return f"tl::gemm_fma_rs<{grid}, {b_flag}, {clear}, {ldb}, {align_b}, {types}>"
