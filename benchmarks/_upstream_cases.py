"""The cases of bench_upstream.py: upstream TileLang's own example kernels, built the way each
example's main()/test builds them, at the sizes of the example's own benchmark entry point (or the
realistic size named in the case's ``size``), checked against the example's reference (or torch) and
timed next to a torch reference (cuBLAS / SDPA / torch ops) in the same process.

Contract, for whichever package named ``tilelang`` is importable (ours or upstream's wheel):
  * nothing here imports anything of ours but ``tilelang`` / ``tilelang.language`` (public API);
  * a case's ``build(module)`` only compiles (no GPU: ``--compile-only`` calls it alone);
  * a case's ``run(module, kernel, h)`` makes random inputs (never zeros) on the GPU, calls the
    kernel, checks it and times it and the torch reference, returning ``h.result(...)``.

Each example module is imported unchanged from its own folder (``load``). linear_attention's
example imports ``fla`` (flash-linear-attention) at the top for its Triton comparison only; when
``fla`` is missing, placeholders that raise if called stand in while the module is imported.
"""

from __future__ import annotations

import importlib
import math
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass
class Case:
    name: str
    folder: str          # examples/<folder>
    module: str          # the example's module name in that folder
    size: str            # what it computes, for --list and the tables
    build: Callable      # build(module) -> compiled kernel (CPU only)
    run: Callable        # run(module, kernel, h) -> h.result(...)
    ref: str = ""        # what the torch timing measures


CASES: list[Case] = []
DEVICE = "cuda"          # where the cases put their tensors (a CPU dry run of the glue may change it)


def case(name, folder, module, size, ref=""):
    def deco(make):
        build, run = make()
        CASES.append(Case(name, folder, module, size, build, run, ref))
        return make
    return deco


# --------------------------------------------------------------------------- example modules

def _install_fla_placeholders() -> list[str]:
    """Stand-ins for ``fla`` names imported at module level by linear_attention's example (used
    only by its Triton comparison); calling one raises. Returns the names added to sys.modules."""
    try:
        importlib.import_module("fla")
        return []
    except Exception:
        pass

    def missing(*_a, **_k):
        raise RuntimeError("flash-linear-attention (fla) is not installed")

    added = []
    for name in ("fla", "fla.ops", "fla.ops.linear_attn", "fla.modules", "fla.modules.l2norm"):
        mod = types.ModuleType(name)
        mod.__dict__.update(fused_chunk_linear_attn=missing, l2norm_fwd=missing)
        sys.modules[name] = mod
        added.append(name)
    return added


def load(examples: Path, folder: str, module: str):
    """Import examples/<folder>/<module>.py as the example's own tests do (its folder first on
    sys.path; its sibling imports are relative-free)."""
    path = str(examples / folder)
    if not (examples / folder / f"{module}.py").is_file():
        raise FileNotFoundError(f"{examples / folder / (module + '.py')} not found")
    if path in sys.path:
        sys.path.remove(path)
    sys.path.insert(0, path)
    added = _install_fla_placeholders() if folder == "linear_attention" else []
    try:
        return importlib.import_module(module)
    finally:
        for name in added:
            sys.modules.pop(name, None)


def _T():
    import tilelang.language as T
    return T


def _rand(*shape, dtype=None, scale=1.0):
    import torch
    dtype = dtype or torch.float16
    return (torch.randn(*shape, device=DEVICE, dtype=torch.float32) * scale).to(dtype)


# --------------------------------------------------------------------------- gemm


def _gemm_tn(name, dtype, M, N, K, bm, bn, bk, stages, threads, tol):
    # example_gemm_autotune.matmul: C = A @ B.T, the sm_90 heuristic config of its main() and others.
    @case(name, "gemm", "example_gemm_autotune",
          f"{dtype} A[M,K] @ B[N,K].T, M=N=K={M}; tile {bm}x{bn}x{bk}, {stages} stages, {threads} threads, swizzle",
          ref="torch a @ b.T (cuBLAS)")
    def _pair():
        def build(m):
            return m.matmul(M, N, K, bm, bn, bk, stages, threads, True, dtype=getattr(_T(), dtype))

        def run(m, k, h):
            import torch
            tdt = getattr(torch, dtype)
            a, b = _rand(M, K, dtype=tdt), _rand(N, K, dtype=tdt)
            c = k(a, b)
            # checked against an fp32 product (cuBLAS's fp16 path may reduce in fp16); timed as the example's
            ref = m.ref_program(a.float(), b.float()).to(tdt)
            return h.result(c, ref, atol=tol, rtol=tol,
                            ms=h.time(lambda: k(a, b)), ref_ms=h.time(lambda: m.ref_program(a, b)),
                            flops=2 * M * N * K)
        return build, run


_gemm_tn("gemm_fp16_tn_128x256x64_s3", "float16", 4096, 4096, 4096, 128, 256, 64, 3, 256, 1e-2)
_gemm_tn("gemm_fp16_tn_128x128x64_s3", "float16", 4096, 4096, 4096, 128, 128, 64, 3, 256, 1e-2)
_gemm_tn("gemm_fp16_tn_128x128x32_s3_t128", "float16", 4096, 4096, 4096, 128, 128, 32, 3, 128, 1e-2)
_gemm_tn("gemm_fp16_tn_128x256x64_s3_8192", "float16", 8192, 8192, 8192, 128, 256, 64, 3, 256, 1e-2)
_gemm_tn("gemm_bf16_tn_128x256x64_s3", "bfloat16", 4096, 4096, 4096, 128, 256, 64, 3, 256, 2e-2)
_gemm_tn("gemm_bf16_tn_128x128x64_s3", "bfloat16", 4096, 4096, 4096, 128, 128, 64, 3, 256, 2e-2)


def _gemm_nn(name, dtype, M, bm, bn, bk, tol):
    # example_gemm.matmul (the T.const "eager" style): C = A @ B, 3 stages, 128 threads.
    @case(name, "gemm", "example_gemm",
          f"{dtype} A[M,K] @ B[K,N], M=N=K={M}; tile {bm}x{bn}x{bk}, 3 stages, 128 threads",
          ref="torch a @ b (cuBLAS)")
    def _pair():
        def build(m):
            return m.matmul.compile(M=M, N=M, K=M, block_M=bm, block_N=bn, block_K=bk,
                                    dtype=getattr(_T(), dtype))

        def run(m, k, h):
            import torch
            tdt = getattr(torch, dtype)
            a, b = _rand(M, M, dtype=tdt), _rand(M, M, dtype=tdt)
            c = k(a, b)
            return h.result(c, (a.float() @ b.float()).to(tdt), atol=tol, rtol=tol, ms=h.time(lambda: k(a, b)),
                            ref_ms=h.time(lambda: a @ b), flops=2 * M ** 3)
        return build, run


_gemm_nn("gemm_fp16_nn_128x128x32", "float16", 4096, 128, 128, 32, 1e-2)
_gemm_nn("gemm_fp16_nn_128x128x64", "float16", 4096, 128, 128, 64, 1e-2)
_gemm_nn("gemm_fp16_nn_64x128x64", "float16", 4096, 64, 128, 64, 1e-2)
_gemm_nn("gemm_fp16_nn_128x128x64_8192", "float16", 8192, 128, 128, 64, 1e-2)
_gemm_nn("gemm_bf16_nn_128x128x32", "bfloat16", 4096, 128, 128, 32, 2e-2)
_gemm_nn("gemm_bf16_nn_128x128x64", "bfloat16", 4096, 128, 128, 64, 2e-2)


# --------------------------------------------------------------------------- gemm_fp8

@case("gemm_fp8_e4m3_tn_128x128x64", "gemm_fp8", "example_tilelang_gemm_fp8",
      "e4m3 A[M,K] @ B[N,K].T -> e4m3, M=N=K=4096; tile 128x128x64, 3 stages (run_regression_perf)",
      ref="torch._scaled_mm (unit scales), e4m3 out (bf16 if refused)")
def _gemm_fp8():
    M = N = K = 4096

    def build(m):
        return m.matmul.compile(M=M, N=N, K=K, block_M=128, block_N=128, block_K=64,
                                dtype=m.determine_fp8_type())

    def run(m, k, h):
        import torch
        f8 = torch.float8_e4m3fn
        a, b = _rand(M, K, dtype=f8), _rand(N, K, dtype=f8)
        c = k(a, b)
        ref = (a.half() @ b.half().T).to(f8)
        diff = float(m.calc_diff(c, ref))   # the example's own check: 1 - cosine similarity < 1e-3
        one = torch.ones((), device=DEVICE, dtype=torch.float32)

        def scaled(out_dtype):
            return lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=out_dtype)
        try:
            ref_fn = scaled(f8)
            ref_fn()
        except Exception:
            ref_fn = scaled(torch.bfloat16)
        return h.result_metric(diff < 1e-3, diff, ms=h.time(lambda: k(a, b)), ref_ms=h.time(ref_fn),
                               flops=2 * M * N * K, metric="1-cos")
    return build, run


# --------------------------------------------------------------------------- dequantize_gemm

@case("dequant_gemm_fp16xfp4_hopper", "dequantize_gemm", "example_dequant_gemm_fp4_hopper",
      "fp16 A[M,K] x fp4(e2m1, uint8-packed) B[N,K] -> Ct[N,M], M=N=K=4096; tile 128x128x128, 2 stages, "
      "256 threads (run_regression_perf)",
      ref="cuBLAS fp16 A @ B.T on the dequantized B (the GEMM it replaces)")
def _dequant():
    M = N = K = 4096

    def build(m):
        T = _T()
        return m.matmul(M, N, K, T.float16, T.float16, T.float32, num_bits=4, block_M=128, block_N=128,
                        block_K=128, num_stages=2, threads=256, split=1)

    def run(m, k, h):
        import torch
        a = _rand(M, K)
        qb = torch.randint(0, 256, (N, K // 2), device=DEVICE, dtype=torch.uint8)
        ct = k(a, qb)
        ref = m.ref_program(a, qb)
        bdq = m.torch_convert(qb)
        return h.result(ct, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(a, qb)),
                        ref_ms=h.time(lambda: a @ bdq.T), flops=2 * M * N * K)
    return build, run


# --------------------------------------------------------------------------- gemv

def _gemv(name, factory, kwargs, desc, matrix_first=False):
    N = K = 4096

    @case(name, "gemv", "example_gemv", f"fp16 y[N] = B[N,K] @ x[K], N=K=4096; {desc}",
          ref="torch B @ x (cuBLAS gemv)")
    def _pair():
        def build(m):
            return getattr(m, factory).compile(**kwargs)

        def run(m, k, h):
            x, b = _rand(K), _rand(N, K)
            args = (b, x) if matrix_first else (x, b)     # gemv_alloc_reducer(a[M,N], x[N])
            y = k(*args)
            ref = (b.float() @ x.float()).half()
            # (kernels that multiply in fp16 before accumulating, gemv_alloc_reducer, round each of
            # the K products: ~sqrt(K) * 2**-11 absolute error, up to ~0.12 at K = 4096; the
            # relative L2 check still holds them to 2 %)
            return h.result(y, ref, atol=0.25, rtol=1e-2, ms=h.time(lambda: k(*args)),
                            ref_ms=h.time(lambda: b @ x), bytes_=2 * N * K)
        return build, run


_gemv("gemv_splitk_vectorized", "splitk_gemv_vectorized",
      dict(N=4096, K=4096, BLOCK_N=2, reduce_threads=32), "splitk_gemv_vectorized, BLOCK_N=2, 32 reduce threads")
_gemv("gemv_splitk_vectorized_tvm", "splitk_gemv_vectorized_tvm",
      dict(N=4096, K=4096, BLOCK_N=2, reduce_threads=32),
      "splitk_gemv_vectorized_tvm (tvm_thread_allreduce), BLOCK_N=2, 32 reduce threads")
_gemv("gemv_alloc_reducer", "gemv_alloc_reducer",
      dict(M=4096, N=4096, block_M=128, block_N=128, num_stages=2, threads=256),
      "gemv_alloc_reducer (T.alloc_reducer), 128x128 tiles, 2 stages, 256 threads", matrix_first=True)


# --------------------------------------------------------------------------- grouped_gemm

@case("grouped_gemm_fwd", "grouped_gemm", "example_grouped_gemm_fwd",
      "fp16 groups of 256/512/768/1024 rows x [K=8192] @ B[g][8192,8192]; tile 64x128x64, 2 stages, "
      "256 threads (the example's __main__ config, larger groups)",
      ref="the example's torch_gmm (one cuBLAS mm per group)")
def _grouped():
    sizes, K, N = (256, 512, 768, 1024), 8192, 8192
    bm, bn, bk, stages, threads = 64, 128, 64, 2, 256

    def build(m):
        return m.grouped_gemm.compile(K=K, N=N, batch_sizes_list=sizes, block_M=bm, block_N=bn, block_K=bk,
                                      trans_b=False, num_stages=stages, threads=threads)

    def run(m, k, h):
        import torch
        a, b, bs, bo, bpo = m.construct_inputs(list(sizes), K, N, False, bm, torch.device(DEVICE), torch.float16)
        c = k(a, b, bs, bo, bpo)
        ref = m.torch_gmm(a.float(), b.float(), list(sizes), bo, False).half()   # fp32 product for the check
        return h.result(c, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(a, b, bs, bo, bpo)),
                        ref_ms=h.time(lambda: m.torch_gmm(a, b, list(sizes), bo, False)),
                        flops=2 * sum(sizes) * K * N)
    return build, run


# --------------------------------------------------------------------------- flash_attention

def _sdpa(q, k, v, causal, layout):
    import torch.nn.functional as F
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _attn_flops(B, H, Sq, Skv, D, causal):
    return 4 * B * H * Sq * Skv * D * (0.5 if causal else 1.0)


def _mha_bhsd(causal):
    B, H, S, D = 8, 32, 4096, 128

    @case(f"mha_fwd_bhsd{'_causal' if causal else ''}", "flash_attention", "example_mha_fwd_bhsd",
          f"fp16 Q,K,V[B,H,S,D] B={B} H={H} S={S} D={D}{' causal' if causal else ''}; 128x128 blocks, 2 stages, "
          "256 threads (its get_configs / run_regression_perf)",
          ref="F.scaled_dot_product_attention")
    def _pair():
        def build(m):
            return m.flashattn(B, H, S, S, D, causal, block_M=128, block_N=128, num_stages=2, threads=256)

        def run(m, k, h):
            q, kk, v = _rand(B, H, S, D), _rand(B, H, S, D), _rand(B, H, S, D)
            o = k(q, kk, v)
            ref = m.ref_program(q, kk, v, causal)
            return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v)),
                            ref_ms=h.time(_sdpa(q, kk, v, causal, "bhsd")),
                            flops=_attn_flops(B, H, S, S, D, causal))
        return build, run


_mha_bhsd(False)
_mha_bhsd(True)


def _mha_bshd(causal):
    B, H, S, D = 8, 32, 4096, 128

    @case(f"mha_fwd_bshd{'_causal' if causal else ''}", "flash_attention", "example_mha_fwd_bshd",
          f"fp16 Q,K,V[B,S,H,D] B={B} H={H} S={S} D={D}{' causal' if causal else ''}; 128x128 blocks, 1 stage, "
          "128 threads (its main())",
          ref="F.scaled_dot_product_attention (transposed views)")
    def _pair():
        def build(m):
            return m.flashattn(B, H, S, D, causal, block_M=128, block_N=128, num_stages=1, threads=128)

        def run(m, k, h):
            q, kk, v = _rand(B, S, H, D), _rand(B, S, H, D), _rand(B, S, H, D)
            o = k(q, kk, v)
            ref = m.ref_program(q, kk, v, causal)
            return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v)),
                            ref_ms=h.time(_sdpa(q, kk, v, causal, "bshd")),
                            flops=_attn_flops(B, H, S, S, D, causal))
        return build, run


_mha_bshd(False)
_mha_bshd(True)


def _gqa_bshd(causal):
    B, H, S, D, G = 1, 64, 4096, 128, 16

    @case(f"gqa_fwd_bshd{'_causal' if causal else ''}", "flash_attention", "example_gqa_fwd_bshd",
          f"fp16 Q[B,S,H,D], K,V[B,S,H/{G},D] B={B} H={H} S={S} D={D} groups={G}{' causal' if causal else ''}; "
          "64x64 blocks, 2 stages, 128 threads (its main())",
          ref="F.scaled_dot_product_attention on K,V repeated per group (repeat outside the timing)")
    def _pair():
        def build(m):
            return m.flashattn(B, H, S, D, causal, groups=G, block_M=64, block_N=64, num_stages=2, threads=128)

        def run(m, k, h):
            q, kk, v = _rand(B, S, H, D), _rand(B, S, H // G, D), _rand(B, S, H // G, D)
            o = k(q, kk, v)
            ref = m.ref_program(q, kk, v, causal, groups=G)
            kr, vr = kk.repeat_interleave(G, dim=2), v.repeat_interleave(G, dim=2)
            return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v)),
                            ref_ms=h.time(_sdpa(q, kr, vr, causal, "bshd")),
                            flops=_attn_flops(B, H, S, S, D, causal))
        return build, run


_gqa_bshd(False)
_gqa_bshd(True)


# --------------------------------------------------------------------------- flash_decoding

@case("gqa_decode_split", "flash_decoding", "example_gqa_decode",
      "fp16 decode q[B,H,D] over K,V[B,S,G,D] + uint8 mask, B=1 H=32 G=8 S=8192 D=128; block_N=128 block_H=64, "
      "8 splits, 2 stages, 128 threads (its sm_90 heuristic config)",
      ref="the example's ref_program (torch einsum + softmax)")
def _gqa_decode():
    B, H, G, S, D = 1, 32, 8, 8192, 128

    def build(m):
        return m.flashattn(B, H, G, S, D, block_N=128, block_H=64, num_split=8, num_stages=2, threads=128)

    def run(m, k, h):
        import torch
        q, kk, v = _rand(B, H, D), _rand(B, S, G, D), _rand(B, S, G, D)
        mask = torch.randint(0, 2, (B, S, G), device=DEVICE, dtype=torch.uint8)
        o = k(q, kk, v, mask)
        ref = m.ref_program(q, kk, v, mask)
        return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v, mask)),
                        ref_ms=h.time(lambda: m.ref_program(q, kk, v, mask)), bytes_=2 * 2 * B * S * G * D)
    return build, run


@case("mha_inference_split", "flash_decoding", "example_mha_inference",
      "fp16 Q[B,Sq,H,D] K,V[B,Skv,H,D], B=1 H=32 Sq=128 Skv=8192 D=128, 4 KV splits; 128x64 blocks "
      "(its main())",
      ref="F.scaled_dot_product_attention (transposed views)")
def _mha_inference():
    B, H, Sq, Skv, D = 1, 32, 128, 8192, 128

    def build(m):
        return m.flashattn(B, H, Sq, Skv, D, False, 128, 64)

    def run(m, k, h):
        q, kk, v = _rand(B, Sq, H, D), _rand(B, Skv, H, D), _rand(B, Skv, H, D)
        o = k(q, kk, v)
        ref = m.ref_program(q, kk, v, False)
        return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v)),
                        ref_ms=h.time(_sdpa(q, kk, v, False, "bshd")),
                        flops=_attn_flops(B, H, Sq, Skv, D, False))
    return build, run


# --------------------------------------------------------------------------- deepseek_mla

@case("mla_decode", "deepseek_mla", "example_mla_decode",
      "fp16 MLA decode, batch=132 heads=128 kv_heads=1 kv_ctx=8192 dim=512 pe_dim=64; block_N=64 block_H=64, "
      "no split (its __main__ sizes)",
      ref="the example's ref_program (torch einsum + softmax)")
def _mla():
    B, H, HKV, S, D, P = 132, 128, 1, 8192, 512, 64

    def build(m):
        return m.flashattn(B, H, HKV, S, D, P, 64, min(64, H // HKV), 1, (D + P) ** -0.5)

    def run(m, k, h):
        q, qpe = _rand(B, H, D), _rand(B, H, P)
        kv, kpe = _rand(B, S, HKV, D), _rand(B, S, HKV, P)
        o = k(q, qpe, kv, kpe)
        ref = m.ref_program(q, qpe, kv, kpe)
        return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, qpe, kv, kpe)),
                        ref_ms=h.time(lambda: m.ref_program(q, qpe, kv, kpe)),
                        flops=2 * B * H * S * (D + P) + 2 * B * H * S * D)
    return build, run


# --------------------------------------------------------------------------- deepseek_nsa

def _nsa_indices(B, T, H, S, bs):
    """The example's block selection (S random earlier blocks per token, padded with T, sorted),
    drawn vectorised instead of per token."""
    import torch
    nb = max(1, T // bs)
    t = torch.arange(T, device=DEVICE)
    allowed = torch.clamp(t // bs, min=1)                                    # randperm(max(1, t // bs))
    score = torch.rand(B, T, H, nb, device=DEVICE)
    valid = torch.arange(nb, device=DEVICE)[None, :] < allowed[:, None]     # [T, nb]
    score = score.masked_fill(~valid[None, :, None, :], -1.0)
    top = score.topk(min(S, nb), dim=-1)
    idx = torch.where(top.values >= 0, top.indices, torch.full_like(top.indices, T))
    if idx.shape[-1] < S:
        idx = torch.cat([idx, torch.full((B, T, H, S - idx.shape[-1]), T, device=DEVICE, dtype=idx.dtype)], -1)
    idx = idx.sort(-1)[0]
    counts = (idx != T).sum(-1)
    return idx.long(), counts.long()


@case("nsa_fwd", "deepseek_nsa", "example_tilelang_nsa_fwd",
      "fp16 NSA selected-block attention, B=2 T=4096 HQ=64 H=4 (groups 16) D=128, 16 blocks of 64 per token, "
      "causal (realistic size; the example's main() is B=2 T=64 D=32)",
      ref="none (the example's naive_nsa loops per token: used for the check only)")
def _nsa():
    B, T, HQ, H, D, S, bs = 2, 4096, 64, 4, 128, 16, 64
    scale = D ** -0.5

    def build(m):
        return m.native_sparse_attention.compile(batch=B, heads=HQ, seq_len=T, dim=D, is_causal=True,
                                                 block_size=bs, groups=HQ // H, selected_blocks=S, scale=scale)

    def run(m, k, h):
        import torch
        q, kk, v = _rand(B, T, HQ, D), _rand(B, T, H, D), _rand(B, T, H, D)
        idx, counts = _nsa_indices(B, T, H, S, bs)
        idx32 = idx.to(torch.int32)
        o = k(q, kk, v, idx32)
        g = torch.ones((B, T, HQ), dtype=torch.float16, device=DEVICE)
        ref = m.naive_nsa(q=q, k=kk, v=v, g_slc=g, g_swa=g, block_indices=idx, block_counts=counts,
                          block_size=bs, scale=scale)
        return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v, idx32)), ref_ms=None,
                        flops=4 * B * T * HQ * S * bs * D)
    return build, run


# --------------------------------------------------------------------------- blocksparse_attention

@case("blocksparse_attn_topk", "blocksparse_attention", "example_tilelang_block_sparse_attn",
      "fp16 Q,K,V[B,H,S,D] B=2 H=32 S=4096 D=128, 64x64 block mask (top-16 of 64 per row, causal); the example's "
      "fixed 64x64 tiles, 1 stage, 128 threads (realistic size; its test is B=1 H=1 S=256)",
      ref="F.scaled_dot_product_attention with the expanded boolean mask")
def _blocksparse():
    B, H, S, D, BLK, TOPK = 2, 32, 4096, 128, 64, 16
    ds = math.ceil(S / BLK)

    def build(m):
        return m.blocksparse_flashattn(B, H, S, D, ds, is_causal=True)

    def run(m, k, h):
        import torch
        q, kk, v = _rand(B, H, S, D), _rand(B, H, S, D), _rand(B, H, S, D)
        x = torch.randn([B, H, ds, ds], device=DEVICE, dtype=torch.bfloat16)
        x[:, :, :, 0] = 100
        mask = m.get_sparse_attn_mask_from_topk(x, topk=TOPK)
        o = k(q, kk, v, mask)
        return block_sparse_result(h, o, q, kk, v, mask, BLK, lambda: k(q, kk, v, mask))
    return build, run


def block_sparse_result(h, o, q, kk, v, mask, blk, call):
    """``h.result`` of a causal block-sparse attention output ``o`` (B, H, S, D) against torch with the
    block mask expanded to elements (and timed next to SDPA with that boolean mask)."""
    import torch
    import torch.nn.functional as F
    S, D = q.shape[-2], q.shape[-1]
    full = torch.kron(mask.float(), torch.ones(blk, blk, device=q.device))[..., :S, :S].bool()
    full = full & torch.tril(torch.ones_like(full))
    attn = torch.einsum("bhsd,bhtd->bhst", q, kk) * (1.0 / D ** 0.5)
    attn = F.softmax(attn.masked_fill(~full, float("-inf")), dim=-1)
    ref = torch.einsum("bhst,bhtd->bhsd", attn, v)
    del attn
    density = float(full.float().mean())
    return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(call),
                    ref_ms=h.time(lambda: F.scaled_dot_product_attention(q, kk, v, attn_mask=full)),
                    flops=4 * q.shape[0] * q.shape[1] * S * S * D * density)


# --------------------------------------------------------------------------- linear attention / gdn

@case("linear_attn_fused_chunk_fwd", "linear_attention", "example_linear_attn_fwd",
      "fp16 q,k (l2-normalised), v[B,S,H,D] B=8 S=1024 H=32 D=128, chunk 64, BK=BV=64 (its __main__ sizes); "
      "O accumulated with atomics into an fp32 buffer, final state out",
      ref="the example's ref_program (torch chunked form)")
def _linear_attn():
    B, S, H, D = 8, 1024, 32, 128

    def build(m):
        return m.tl_fused_chunk_fwd_kernel(B, S, H, D, D)

    def run(m, k, h):
        import torch
        import torch.nn.functional as F
        q = F.normalize(_rand(B, S, H, D).float(), dim=-1).half()
        kk = F.normalize(_rand(B, S, H, D).float(), dim=-1).half()
        v = _rand(B, S, H, D)
        o = torch.zeros((B, S, H, D), device=DEVICE, dtype=torch.float32)
        hs = k(q, kk, v, o)
        o_ref, h_ref = m.ref_program(q, kk, v)
        ok_o, d_o = h.close(o, o_ref, 1e-2, 1e-2)
        ok_h, d_h = h.close(hs, h_ref, 1e-2, 1e-2)
        # timed without re-zeroing o between calls (as the example's run_regression_perf does)
        return h.result_metric(ok_o and ok_h, max(d_o, d_h), ms=h.time(lambda: k(q, kk, v, o)),
                               ref_ms=h.time(lambda: m.ref_program(q, kk, v)), flops=None)
    return build, run


def _chunk_o_ref(Q, K, V, HID, G, scale, BS):
    """Torch form of example_chunk_o's kernel (the example compares with fla, absent here): per chunk
    O = scale * (exp(g_i) * q_i H + sum_{j<=i, g_i-g_j<=0} exp(g_i-g_j) (q_i.k_j) v_j), with the
    intra-chunk scores rounded to the input dtype as the kernel stages them in shared memory."""
    import torch
    B, S, H, DK = Q.shape
    NT = S // BS
    q = Q.float().view(B, NT, BS, H, DK)
    k = K.float().view(B, NT, BS, H, DK)
    v = V.float().view(B, NT, BS, H, -1)
    g = G.float().view(B, NT, BS, H).permute(0, 1, 3, 2)                    # [B,NT,H,BS]
    inter = torch.einsum("bnshk,bnhkv->bnhsv", q, HID.float()) * torch.exp(g)[..., None]
    a = torch.einsum("bnihk,bnjhk->bnhij", q, k)
    gd = g[..., :, None] - g[..., None, :]
    a = torch.where(gd <= 0, a * torch.exp(gd), torch.zeros_like(a))
    a = torch.tril(a).to(Q.dtype).float()
    o = (inter + torch.einsum("bnhij,bnjhv->bnhiv", a, v)) * scale        # [B,NT,H,BS,DV]
    return o.permute(0, 1, 3, 2, 4).reshape(B, S, H, -1).to(Q.dtype)


@case("gdn_chunk_fwd_o", "gdn", "example_chunk_o",
      "bf16 gated chunk output, B=1 S=32768 H=32 DK=DV=128 chunk 64, fp32 gates; block_DK=block_DV=128, "
      "128 threads, 1 stage (its main())",
      ref="a torch form of the same computation (the example's reference is fla's Triton kernel)")
def _gdn_chunk_o():
    B, S, H, DK, DV, BS = 1, 32768, 32, 128, 128, 64
    scale = 1.0 / DK ** 0.5

    def build(m):
        T = _T()
        return m.tilelang_chunk_fwd_o(B, S, H, DK, DV, T.bfloat16, T.bfloat16, T.float32, T.float32, BS, scale,
                                      True, BS, 128, 128, 128, 1)

    def run(m, k, h):
        import torch
        bf = torch.bfloat16
        Q, K, V = _rand(B, S, H, DK, dtype=bf), _rand(B, S, H, DK, dtype=bf), _rand(B, S, H, DV, dtype=bf)
        HID = _rand(B, S // BS, H, DK, DV, dtype=bf)
        G = torch.randn(B, S, H, device=DEVICE, dtype=torch.float32)
        o = k(Q, K, V, HID, G)
        ref = _chunk_o_ref(Q, K, V, HID, G, scale, BS)
        # (bf16 operands of the intra-chunk product: outputs up to ~40 carry bf16 rounding of a
        # few 0.1; the relative L2 check holds them to 2 %)
        return h.result(o, ref, atol=0.25, rtol=2e-2, ms=h.time(lambda: k(Q, K, V, HID, G)),
                        ref_ms=h.time(lambda: _chunk_o_ref(Q, K, V, HID, G, scale, BS)), flops=None)
    return build, run


# --------------------------------------------------------------------------- norm / elementwise / topk / cast

def _rms(name, factory, kwargs, desc):
    M = N = 8192

    @case(name, "norm", "rms_norm", f"fp32 RMSNorm rows of x[M,N], M=N=8192; {desc} (its __main__ sizes)",
          ref="the example's ref_program (torch ops)")
    def _pair():
        def build(m):
            return getattr(m, factory).compile(M=M, N=N, **kwargs)

        def run(m, k, h):
            import torch
            x = _rand(M, N, dtype=torch.float32)
            y = k(x)
            return h.result(y, m.ref_program(x), atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(x)),
                            ref_ms=h.time(lambda: m.ref_program(x)), bytes_=2 * 4 * M * N)
        return build, run


_rms("rms_norm", "rms_norm", dict(blk_m=1), "rms_norm, blk_m=1 (whole row in registers)")
_rms("rms_norm_splitk", "rms_norm_splitk", dict(blk_m=1, blk_k=512), "rms_norm_splitk, blk_m=1 blk_k=512")


@case("elementwise_add", "elementwise", "example_elementwise_add",
      "fp32 C = A + B, M=N=4096; 32x32 tiles, 128 threads (run_regression_perf)", ref="torch a + b")
def _add():
    M = N = 4096

    def build(m):
        T = _T()
        return m.elementwise_add.compile(M=M, N=N, block_M=32, block_N=32, in_dtype=T.float32,
                                         out_dtype=T.float32, threads=128)

    def run(m, k, h):
        import torch
        a = torch.randn(M, N, device=DEVICE)
        b = torch.randn(M, N, device=DEVICE)
        c = k(a, b)
        return h.result(c, a + b, atol=1e-5, rtol=1e-5, ms=h.time(lambda: k(a, b)),
                        ref_ms=h.time(lambda: a + b), bytes_=3 * 4 * M * N)
    return build, run


@case("topk_router", "topk", "example_topk",
      "fp32 top-6 of 128 expert logits for 8192 tokens; blk_m=64, 128 threads (realistic token count; "
      "its main() uses 320)",
      ref="torch.topk")
def _topk():
    M, N, K = 8192, 128, 6

    def build(m):
        return m.tl_topk.compile(M=M, N=N, topk=K, blk_m=64, threads=128)

    def run(m, k, h):
        import torch
        # distinct values per row (a permutation of k/N): with ties the kernel and torch.topk may
        # legitimately pick different indices
        logits = torch.rand((M, N), device=DEVICE).argsort(dim=1).to(torch.float32) / N
        gates, idx = k(logits)
        rg, ri = m.ref_program(logits, K)
        ok, diff = h.close(gates, rg, 1e-6, 1e-6)
        ok = ok and bool(torch.equal(idx, ri))
        return h.result_metric(ok, diff, ms=h.time(lambda: k(logits)),
                               ref_ms=h.time(lambda: m.ref_program(logits, K)), flops=None)
    return build, run


@case("per_token_cast_fp8", "cast", "example_per_token_cast_to_fp8",
      "fp32 x[M,N] -> e4m3 + per-(row, 128-column group) scales, M=N=8192, blk_m=8 (its main())",
      ref="the example's ref_program (torch ops)")
def _cast():
    M = N = 8192

    def build(m):
        return m.per_token_cast_to_fp8.compile(M=M, N=N, blk_m=8)

    def run(m, k, h):
        import torch
        x = _rand(M, N, dtype=torch.float32)
        xq, xs = k(x)
        rq, rs = m.ref_program(x)
        # x / s against x * (448 / amax): an fp8 rounding may differ in rare ties (<= 0.1% allowed)
        bad = ((xq.float() - rq.float()).abs() > 1e-2 + 1e-2 * rq.float().abs()).float().mean().item()
        ok_s, d_s = h.close(xs, rs, 1e-2, 1e-2)
        return h.result_metric(ok_s and bad <= 1e-3, d_s, ms=h.time(lambda: k(x)),
                               ref_ms=h.time(lambda: m.ref_program(x)), flops=None, metric="scale maxdiff")
    return build, run


# --------------------------------------------------------------------------- more families
# (the example families whose tests pass but that the cases above do not time; each file registers
# its cases with ``case`` as above, after these)
for _more in ("_upstream_cases_gemm2", "_upstream_cases_attn2"):
    try:
        importlib.import_module(_more)
    except ModuleNotFoundError as _err:
        if _err.name != _more:
            raise
