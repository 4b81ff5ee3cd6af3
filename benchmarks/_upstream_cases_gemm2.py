"""More cases of bench_upstream.py: the GEMM-like example families whose example tests pass but
that ``_upstream_cases.py`` does not time -- gemm_splitk, blocksparse_gemm, deepseek_deepgemm,
fusedmoe, gemm_sp, warp_specialize, dequantize_gemm (all but fp4_hopper) and cast (the
per-group fp8 quantisation). Imported at the end of ``_upstream_cases.py``; each case registers
itself with its ``case`` decorator.

Contract (the same as ``_upstream_cases.py``), for whichever package named ``tilelang`` is
importable (ours or upstream's wheel):
  * nothing here imports anything of ours but ``tilelang`` / ``tilelang.language`` (public API);
  * a case builds its kernel exactly as the example's test or main() does (same factory, same
    arguments), at the example's own benchmark size or a realistic size named in ``size``;
  * a case's ``build(module)`` only compiles (no GPU: ``--compile-only`` calls it alone);
  * a case's ``run(module, kernel, h)`` makes random inputs (never zeros) on the GPU, calls the
    kernel as the example does, checks it against the example's reference (or an equivalent torch
    form, said in a comment) with the example's tolerances, and times it and a torch reference,
    returning ``h.result(...)`` / ``h.result_metric(...)``.
"""

from __future__ import annotations

import math

import _upstream_cases as _uc
from _upstream_cases import _T, _rand, case


def _dev():
    return _uc.DEVICE    # read at run time: a CPU dry run of the glue may change it


# --------------------------------------------------------------------------- gemm_splitk

def _splitk(name, module, desc):
    M = N = K = 4096
    bm, bn, bk, split = 128, 128, 32, 4

    @case(name, "gemm_splitk", module,
          f"fp16 A[M,K] @ B[K,N] -> fp32 C (atomic adds), M=N=K={M}; tile {bm}x{bn}x{bk}, split_k={split}, "
          f"128 threads, {desc} (run_regression_perf)",
          ref="torch a @ b (cuBLAS, fp16 out)")
    def _pair():
        def build(m):
            return m.matmul.compile(M=M, N=N, K=K, block_M=bm, block_N=bn, block_K=bk, split_k=split)

        def run(m, k, h):
            import torch
            a, b = _rand(M, K), _rand(K, N)
            c = torch.zeros(M, N, device=_dev(), dtype=torch.float32)
            k(a, b, c)
            ok, diff = h.close(c, a.float() @ b.float(), 1e-2, 1e-2)
            # timed accumulating into c without re-zeroing it (as run_regression_perf does)
            return h.result_metric(ok, diff, ms=h.time(lambda: k(a, b, c)), ref_ms=h.time(lambda: a @ b),
                                   flops=2 * M * N * K)
        return build, run


_splitk("splitk_gemm", "example_tilelang_gemm_splitk", "element-wise T.atomic_add")
_splitk("splitk_gemm_vec_atomic", "example_tilelang_gemm_splitk_vectorize_atomicadd", "tile T.atomic_add")


# --------------------------------------------------------------------------- blocksparse_gemm

def _blocksparse_ref(a, b, mask, bm, bn, bk):
    """The example's ref_program (fp32 block products, fp16 out) one K block at a time instead of
    one (i, j, k) block at a time."""
    import torch
    M, K = a.shape
    N = b.shape[1]
    acc = torch.zeros(M, N, device=a.device, dtype=torch.float32)
    for kb in range(K // bk):
        keep = mask[:, :, kb].float().repeat_interleave(bm, 0).repeat_interleave(bn, 1)
        acc += (a[:, kb * bk:(kb + 1) * bk].float() @ b[kb * bk:(kb + 1) * bk].float()) * keep
    return acc.half()


def _blocksparse(name, size, note):
    bm, bn, bk, stages, threads = 128, 128, 32, 2, 128

    @case(name, "blocksparse_gemm", "example_blocksparse_gemm",
          f"fp16 A[M,K] @ B[K,N] over a random (i,j,k) block mask of density 0.5, M=N=K={size}; tile "
          f"{bm}x{bn}x{bk}, {stages} stages, {threads} threads, swizzle (its default config; {note})",
          ref="torch a @ b (dense cuBLAS)")
    def _pair():
        M = N = K = size

        def build(m):
            return m.blocksparse_matmul.compile(M=M, N=N, K=K, block_M=bm, block_N=bn, block_K=bk,
                                                num_stages=stages, thread_num=threads, enable_rasteration=True)

        def run(m, k, h):
            import torch
            a, b = _rand(M, K), _rand(K, N)
            mask = torch.rand((M // bm, N // bn, K // bk), device=_dev()) > 0.5
            c = k(a, b, mask)
            ref = _blocksparse_ref(a, b, mask, bm, bn, bk)
            density = float(mask.float().mean())
            return h.result(c, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(a, b, mask)),
                            ref_ms=h.time(lambda: a @ b), flops=2 * M * N * K * density)
        return build, run


_blocksparse("blocksparse_gemm_1024", 1024, "run_regression_perf size")
_blocksparse("blocksparse_gemm_4096", 4096, "realistic size")


# --------------------------------------------------------------------------- deepseek_deepgemm

def _deepgemm(name, M, N, K, note):
    @case(name, "deepseek_deepgemm", "example_deepgemm_fp8_2xAcc",
          f"e4m3 A[M,K] (1x128 scales) @ B[N,K].T (128x128 scales) -> bf16, M={M} N={N} K={K}; block_N=128, "
          f"64x128x128 tiles, 4 stages, fp32 promotion every K block ({note})",
          ref="torch._scaled_mm, per-tensor unit scales, bf16 out")
    def _pair():
        def build(m):
            T = _T()
            return m.tl_gemm.compile(M=M, N=N, K=K, block_N=128, in_dtype=T.float8_e4m3fn, out_dtype=T.bfloat16,
                                     accum_dtype=T.float32)

        def run(m, k, h):
            import torch
            a32, b32 = _rand(M, K, dtype=torch.bfloat16), _rand(N, K, dtype=torch.bfloat16)
            a, sa = m.per_token_cast_to_fp8(a32.clone())
            b, sb = m.per_block_cast_to_fp8(b32.clone())
            c = k(a, b, sa, sb)
            # the example's ref_deepgemm_fp8 (one _scaled_mm per 128x128x128 block) in one fp32
            # product: the scales are constant over each block, so they factor out
            adq = a.float() * sa.repeat_interleave(128, dim=1)
            bdq = b.float() * sb.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
            ref = (adq @ bdq.T).to(torch.bfloat16)
            diff = float(m.calc_diff(c, ref))      # the example's check: 1 - similarity < 1e-3
            one = torch.ones((), device=_dev(), dtype=torch.float32)
            return h.result_metric(diff < 1e-3, diff, ms=h.time(lambda: k(a, b, sa, sb)),
                                   ref_ms=h.time(lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                                                          out_dtype=torch.bfloat16)),
                                   flops=2 * M * N * K, metric="1-sim")
        return build, run


_deepgemm("deepgemm_fp8_2xacc", 1024, 1024, 8192, "its test's size")
_deepgemm("deepgemm_fp8_2xacc_4096", 4096, 4096, 8192, "realistic size")


# --------------------------------------------------------------------------- fusedmoe

_MOE = dict(dh=7168, de=2048, experts=8, topk=4, tokens=8192)    # the example's main() defaults


def _moe_expert(x, wg, wu, wd):
    """One expert as the kernels compute it: fp32 gate/up products, SiLU(gate) * up rounded to
    fp16 (the kernel stores it so), fp32 down product."""
    import torch
    g = x.float() @ wg.float().T
    u = x.float() @ wu.float().T
    hdn = (g * torch.sigmoid(g) * u).half()
    return hdn.float() @ wd.float().T


@case("fusedmoe_shared", "fusedmoe", "example_fusedmoe_tilelang",
      "fp16 shared expert: SiLU(x Wg.T) * (x Wu.T) -> Wd, tokens=8192 d_hidden=7168 d_expert=2048; 128x128x128 "
      "tiles, 256 threads, 1 stage (the example's main() sizes and custom_kernel config)",
      ref="torch Expert.forward (three cuBLAS GEMMs + SiLU)")
def _moe_shared():
    dh, de, T_ = _MOE["dh"], _MOE["de"], _MOE["tokens"]

    def build(m):
        return m.moe_forward_tilelang_shared.compile(dhidden=dh, dexpert=de, num_tokens=T_, dtype=_T().float16)

    def run(m, k, h):
        import torch
        import torch.nn.functional as F
        x = _rand(T_, dh)
        wg, wu = _rand(de, dh, scale=de ** -0.5), _rand(de, dh, scale=de ** -0.5)
        wd = _rand(dh, de, scale=dh ** -0.5)
        up = torch.empty(T_, de, device=_dev(), dtype=torch.float16)
        out = torch.empty(T_, dh, device=_dev(), dtype=torch.float16)
        k(x, wg, wu, wd, up, out)
        ref = _moe_expert(x, wg, wu, wd).half()
        return h.result(out, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(x, wg, wu, wd, up, out)),
                        ref_ms=h.time(lambda: (F.silu(x @ wg.T) * (x @ wu.T)) @ wd.T), flops=6 * T_ * dh * de)
    return build, run


def _moe_routing(T_, E, topk, bt=128):
    """Random top-k routing and the grouped-GEMM metadata, as the example's MoE.forward builds them."""
    import torch
    dev = _dev()
    scores = torch.randn(T_, E, device=dev).softmax(dim=-1)
    w, idx = torch.topk(scores, k=topk, dim=-1, sorted=False)
    flat_idx, flat_w = idx.view(-1), w.view(-1)
    order = flat_idx.argsort()
    counts = flat_idx.bincount(minlength=E).cpu().tolist()
    ends = [sum(counts[:i + 1]) for i in range(E)]
    padded = [0] * E
    for i in range(1, E):
        padded[i] = padded[i - 1] + math.ceil((counts[i - 1] + 1) / bt) * bt
    M = math.ceil(T_ * topk / bt) + E
    group_of_bx = [0] * M
    for bx in range(M):
        for i in range(E):
            if bx * bt >= padded[i]:
                group_of_bx[bx] = i

    def i32(v):
        return torch.tensor(v, device=dev, dtype=torch.int32)
    meta = (i32(counts), i32([e - c for e, c in zip(ends, counts)]), i32(padded), i32(group_of_bx))
    return order // topk, flat_w[order].to(torch.float16), counts, meta


@case("fusedmoe_routed", "fusedmoe", "example_fusedmoe_tilelang",
      "fp16 routed experts as one grouped GEMM pair: 8192 tokens x top-4 of 8 experts, d_hidden=7168 "
      "d_expert=2048; 128x128x128 tiles, 256 threads, 1 stage (the example's main() sizes and custom_kernel config)",
      ref="torch: each expert's Expert.forward on its rows (cuBLAS), times the routing weight")
def _moe_routed():
    dh, de, E, topk, T_ = _MOE["dh"], _MOE["de"], _MOE["experts"], _MOE["topk"], _MOE["tokens"]

    def build(m):
        return m.moe_forward_tilelang_routed.compile(
            dhidden=dh, dexpert=de, n_routed_experts=E, dtype=_T().float16, group_sum=T_ * topk, group_count=E,
            block_token=128, block_dhidden=128, block_dexpert=128, threads=256, num_stages=1)

    def run(m, k, h):
        import torch
        import torch.nn.functional as F
        x = _rand(T_, dh)
        wg, wu = _rand(E, de, dh, scale=de ** -0.5), _rand(E, de, dh, scale=de ** -0.5)
        wd = _rand(E, dh, de, scale=dh ** -0.5)
        tok, rw, counts, (gs, go, gpo, gbx) = _moe_routing(T_, E, topk)
        xs = x[tok].contiguous()                      # the stacked expert tokens, grouped by expert
        up = torch.empty(T_ * topk, de, device=_dev(), dtype=torch.float16)
        out = torch.empty(T_ * topk, dh, device=_dev(), dtype=torch.float16)
        args = (xs, wg, wu, wd, rw, gs, go, gpo, gbx, up, out)
        k(*args)
        bounds = [0]
        for c in counts:
            bounds.append(bounds[-1] + c)
        ref = torch.empty_like(out)
        for e in range(E):
            s, t = bounds[e], bounds[e + 1]
            if t > s:
                ref[s:t] = (_moe_expert(xs[s:t], wg[e], wu[e], wd[e]) * rw[s:t, None].float()).half()

        def torch_experts():
            for e in range(E):
                s, t = bounds[e], bounds[e + 1]
                if t > s:
                    r = xs[s:t]
                    (F.silu(r @ wg[e].T) * (r @ wu[e].T)) @ wd[e].T * rw[s:t, None]
        return h.result(out, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(*args)), ref_ms=h.time(torch_experts),
                        flops=6 * T_ * topk * dh * de)
    return build, run


# --------------------------------------------------------------------------- gemm_sp

def _gemm_sp(name, size, bm, bn, bk, stages, threads, note):
    @case(name, "gemm_sp", "example_gemm_sp",
          f"fp16 2:4-sparse A[M,K] (int16 metadata) @ B[K,N] -> fp32, M=N=K={size}; tile {bm}x{bn}x{bk}, "
          f"{stages} stages, {threads} threads, Square policy, swizzle ({note})",
          ref="torch a @ b (dense cuBLAS, fp16 out)")
    def _pair():
        def build(m):
            T = _T()
            return m.matmul_sp_fp16(size, size, size, T.float, T.int16, bm, bn, bk, stages, threads,
                                    T.GemmWarpPolicy.Square, True)

        def run(m, k, h):
            import torch
            a = m.randn_semi_sparse(size, size, device=_dev(), dtype=torch.half)
            b = _rand(size, size)
            a_sparse, e = m.compress(a, meta_dtype=torch.int16)
            c = k(a_sparse, e, b)
            return h.result(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(a_sparse, e, b)),
                            ref_ms=h.time(lambda: a @ b), flops=2 * size ** 3)
        return build, run


_gemm_sp("gemm_sp_fp16_128x128x64", 4096, 128, 128, 64, 2, 128, "its test's config, realistic size")
_gemm_sp("gemm_sp_fp16_128x256x128", 8192, 128, 256, 128, 2, 256, "its __main__ config, at 8192")


# --------------------------------------------------------------------------- warp_specialize

def _ws(name, module, factory, desc):
    M = N = K = 4096

    @case(name, "warp_specialize", module,
          f"fp16 A[M,K] @ B[K,N] -> fp16, M=N=K={M}; 128x128x64 tiles, 256 threads, {desc} (realistic size; its "
          "test is 1024)",
          ref="torch a @ b (cuBLAS)")
    def _pair():
        def build(m):
            return getattr(m, factory).compile(M=M, N=N, K=K, block_M=128, block_N=128, block_K=64)

        def run(m, k, h):
            import torch
            a, b = _rand(M, K), _rand(K, N)
            c = k(a, b)
            return h.result(c, (a.float() @ b.float()).to(torch.float16), atol=1e-2, rtol=1e-2,
                            ms=h.time(lambda: k(a, b)), ref_ms=h.time(lambda: a @ b), flops=2 * M * N * K)
        return build, run


_ws("ws_gemm_barrierpipe_stage2", "example_warp_specialize_gemm_barrierpipe_stage2", "matmul",
    "T.ws producer/consumer with explicit mbarriers, 2 stages")
_ws("ws_gemm_copy_0_gemm_1", "example_warp_specialize_gemm_copy_0_gemm_1", "matmul_warp_specialize_copy_0_gemm_1",
    "T.ws(0) TMA copy / T.ws(1) gemm, no pipelining")
_ws("ws_gemm_copy_1_gemm_0", "example_warp_specialize_gemm_copy_1_gemm_0", "matmul_warp_specialize_copy_1_gemm_0",
    "T.ws(1) TMA copy / T.ws(0) gemm, 2 stages")
_ws("ws_gemm_softpipe_stage2", "example_warp_specialize_gemm_softpipe_stage2", "matmul",
    "T.ws TMA copy / gemm in a 2-stage T.Pipelined")


# --------------------------------------------------------------------------- dequantize_gemm

@case("dequant_gemv_fp16xint4", "dequantize_gemm", "example_dequant_gemv_fp16xint4",
      "fp16 a[1,K] x uint4 (int8-packed, interleaved, lop3 fast decode) B[N,K] -> fp16 (fp16 accumulation), "
      "N=K=8192; 4 partitions x 32 reduce threads (run_regression_perf)",
      ref="torch a @ B.T on the dequantized fp16 B (cuBLAS gemv)")
def _dq_gemv():
    M, N, K = 1, 8192, 8192

    def build(m):
        T = _T()
        return m.dequantize_gemv(M, N, K, T.float16, T.float16, T.float16, 4, T.int8, "uint", 4, 32, True, False,
                                 True, -1, False)

    def run(m, k, h):
        import torch
        from quantize.utils import interleave_weight   # the example folder's package (on sys.path)
        a = torch.rand(M, K, device=_dev(), dtype=torch.float16)
        q = torch.randint(0, 127, (N, K // 2), device=_dev(), dtype=torch.int8)
        qi = interleave_weight(q, 4, "float16")
        c = torch.zeros(M, N, device=_dev(), dtype=torch.float16)
        k(a, qi, c)
        qu = q.to(torch.uint8)
        bdq = torch.stack((qu & 0x0F, qu >> 4), dim=-1).reshape(N, K).to(torch.float16)
        # the example's own check (against the nibbles of the interleaved bytes, atol=1e3
        # rtol=0.1), and a relative L2 error below 1% against the un-interleaved decode: the values
        # the lop3 fast decode restores (outputs ~2e4 carry fp16-accumulation error; maxdiff of it)
        qiu = qi.to(torch.uint8)
        bex = torch.stack((qiu & 0x0F, qiu >> 4), dim=-1).reshape(N, K).to(torch.float16)
        ok = bool(torch.allclose(c.float(), (a.float() @ bex.float().T), atol=1e3, rtol=1e-1))
        ref = a.float() @ bdq.float().T
        err = c.float() - ref
        ok = ok and bool(torch.isfinite(c).all()) and float(err.norm()) <= 1e-2 * float(ref.norm())
        diff = float(err.abs().max())
        return h.result_metric(ok, diff, ms=h.time(lambda: k(a, qi, c)), ref_ms=h.time(lambda: a @ bdq.T),
                               bytes_=N * K // 2, metric="maxdiff vs un-interleaved decode")
    return build, run


@case("dequant_gemm_bf16xmxfp4_hopper", "dequantize_gemm", "example_dequant_gemm_bf16_mxfp4_hopper",
      "bf16 A[M,K] x mxfp4 (e2m1 uint8-packed, 2^s scales per 32) B[N,K] -> bf16, M=N=K=4096; fast (twiddling) "
      "dequant, no bias; tile 256x128x128, 2 stages, 256 threads (run_regression_perf)",
      ref="cuBLAS bf16 A @ B.T on the dequantized B (the GEMM it replaces)")
def _dq_mxfp4():
    M = N = K = 4096

    def build(m):
        T = _T()
        return m.matmul(M, N, K, T.bfloat16, T.bfloat16, T.float32, num_bits=4, scale_size=32, block_M=256,
                        block_N=128, block_K=128, num_stages=2, threads=256, split=1, fast_dequant=True,
                        with_bias=False)

    def run(m, k, h):
        import torch
        a = _rand(M, K, dtype=torch.bfloat16)
        qb = torch.randint(0, 256, (N, K // 2), device=_dev(), dtype=torch.uint8)
        # exponents 0..2 as the example's TensorSupplyType.Auto draws uint8 values
        sc = torch.randint(0, 3, (N, K // 32), device=_dev(), dtype=torch.uint8)
        bias = _rand(M, N, dtype=torch.bfloat16)      # an argument of the kernel; unused without with_bias
        c = k(a, qb, sc, bias)
        ref = m.ref_program_twiddling(a, qb, sc)
        bdq = m.torch_convert_bit_twiddling(qb) * (2.0 ** sc.float()).repeat_interleave(32, dim=1).to(torch.bfloat16)
        return h.result(c, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(a, qb, sc, bias)),
                        ref_ms=h.time(lambda: a @ bdq.T), flops=2 * M * N * K)
    return build, run


@case("dequant_gemm_w4a8", "dequantize_gemm", "example_dequant_gemm_w4a8",
      "int8 A[M,K] x int4 (uint8-packed) B[N,K] -> int32 Ct[N,M], M=N=K=4096; tile 32x32x128, 1 stage, "
      "128 threads (run_regression_perf)",
      ref="torch._int_mm on the unpacked int8 B (fp16 mm if refused)")
def _dq_w4a8():
    M = N = K = 4096

    def build(m):
        T = _T()
        return m.matmul_int8xint4(M, N, K, T.int8, T.int32, T.int32, num_bits=4, block_M=32, block_N=32,
                                  block_K=128, num_stages=1, threads=128)

    def run(m, k, h):
        import torch
        a = torch.randint(-128, 128, (M, K), device=_dev(), dtype=torch.int8)
        qb = torch.randint(0, 256, (N, K // 2), device=_dev(), dtype=torch.uint8)
        ct = k(a, qb)
        ref = m.ref_program(a, qb)        # exact: |C| < 2^24, so the fp32 product is exact
        bdq = m.torch_convert(qb)
        try:
            ref_fn = lambda: torch._int_mm(a, bdq.t())      # noqa: E731
            ref_fn()
        except Exception:  # noqa: BLE001 - cuBLASLt may refuse this layout
            ah, bh = a.half(), bdq.half()
            ref_fn = lambda: ah @ bh.T                      # noqa: E731
        return h.result(ct, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(a, qb)), ref_ms=h.time(ref_fn),
                        flops=2 * M * N * K)
    return build, run


# --------------------------------------------------------------------------- cast

@case("group_cast_fp8", "cast", "example_group_per_split_token_cast_to_fp8",
      "bf16 x[M,N] split into 2 groups of 2048/6144 rows -> e4m3 [2,6144,N] + per-(row, 128-column group) scales, "
      "M=N=8192, blk_m=8 (its main())",
      ref="the example's ref_program (torch ops per group)")
def _group_cast():
    M = N = 8192
    sizes, blk_m = [2048, 6144], 8
    m_max = math.ceil(max(sizes) / 128) * 128

    def build(m):
        return m.group_per_split_token_cast_to_fp8.compile(M=M, N=N, BG=len(sizes), M_max=m_max, blk_m=blk_m)

    def run(m, k, h):
        import torch
        x = _rand(M, N, dtype=torch.bfloat16)
        bs = torch.tensor(sizes, device=_dev(), dtype=torch.int32)
        xq, xs = k(x, bs)
        rq, rs = m.ref_program(x, bs)
        # x / s against x * (448 / amax): an fp8 rounding may differ in rare ties (<= 0.1% allowed)
        bad = ((xq.float() - rq.float()).abs() > 1e-2 + 1e-2 * rq.float().abs()).float().mean().item()
        ok_s, d_s = h.close(xs, rs, 1e-2, 1e-2)
        return h.result_metric(ok_s and bad <= 1e-3, d_s, ms=h.time(lambda: k(x, bs)),
                               ref_ms=h.time(lambda: m.ref_program(x, bs)), bytes_=M * N * 3,
                               metric="scale maxdiff")
    return build, run
