"""More bench_upstream.py cases: the attention-like upstream example families whose tests pass but
that ``_upstream_cases.py`` does not time -- attention_sink (forward and backward), flash_attention's
backward and varlen forward, seer_attention, deepseek_v32 (sparse MLA forward, fp8 lightning indexer,
top-k selector), deepseek_v4, deepseek_mhc and gdn.

Contract (the same as ``_upstream_cases.py``'s), for whichever package named ``tilelang`` is
importable (ours or upstream's wheel):
  * nothing here imports anything of ours but ``tilelang`` / ``tilelang.language`` (public API);
  * a case's ``build(module)`` only compiles (no GPU: ``--compile-only`` calls it alone); it builds
    the kernels with the example's own factories and arguments, as its test / main() does;
  * a case's ``run(module, kernel, h)`` makes random inputs (never zeros) on the GPU, calls the
    kernels as the example does, checks them against the example's reference (or torch) and times
    them and a torch reference, returning ``h.result(...)`` / ``h.result_metric(...)``.

A case made of several kernels (a backward pass) builds a ``_Kernels`` bundle: its source is the
sources joined, and ``ensure_cubin`` compiles each. Factories that size their tiles from
``torch.cuda.get_device_capability()`` are built on a CPU-only machine as on an sm_90 device
(``_as_sm90``); on a GPU the real capability is used.
"""

from __future__ import annotations

import contextlib
import math
import os

import _upstream_cases as _uc   # its DEVICE is read at run time (a CPU dry run may change it)
from _upstream_cases import _T, _rand, case


def _dev():
    return _uc.DEVICE


class _Kernels:
    """Several compiled kernels of one case; ``get_kernel_source`` joins their sources."""

    def __init__(self, **kernels):
        self.kernels = kernels
        for name, k in kernels.items():
            setattr(self, name, k)

    def get_kernel_source(self):
        return "\n\n".join(f"// ---- {n}\n{k.get_kernel_source()}" for n, k in self.kernels.items())

    def ensure_cubin(self):
        for k in self.kernels.values():
            if callable(getattr(k, "ensure_cubin", None)):
                k.ensure_cubin()


@contextlib.contextmanager
def _as_sm90():
    """While building on a machine without a GPU, answer get_device_capability() as an H100/H200."""
    import torch
    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.get_device_capability
    torch.cuda.get_device_capability = lambda *_a, **_k: (9, 0)
    try:
        yield
    finally:
        torch.cuda.get_device_capability = saved


def _close_all(h, pairs, atol, rtol):
    """h.close over (out, ref) pairs -> (all ok, largest maxdiff)."""
    ok, worst = True, 0.0
    for out, ref in pairs:
        o, d = h.close(out, ref, atol, rtol)
        ok, worst = ok and o, max(worst, d)
    return ok, worst


def _grads(out, dout, tensors):
    """Backward of ``out`` with ``dout`` (graph kept) -> the gradients of ``tensors``, cleared after."""
    out.backward(dout, retain_graph=True)
    gs = []
    for t in tensors:
        gs.append(t.grad.clone())
        t.grad = None
    return gs


def _bwd_result(h, O, O_ref, dO, leaves, atol, rtol, flops):
    """Check the forward output and the leaves' gradients against the reference's autograd; time the
    backward pass (all its kernels, as the example's main() does) next to the reference's."""
    got = _grads(O, dO, leaves)
    ref = _grads(O_ref, dO, leaves)
    ok, diff = _close_all(h, [(O.detach(), O_ref.detach())] + list(zip(got, ref)), atol, rtol)
    ms = h.time(lambda: O.backward(dO, retain_graph=True))
    ref_ms = h.time(lambda: O_ref.backward(dO, retain_graph=True))
    return h.result_metric(ok, diff, ms=ms, ref_ms=ref_ms, flops=flops)


# --------------------------------------------------------------------------- attention_sink

def _sink_mha_fwd(window):
    B, H, S, D = 1, 32, 4096, 128
    tag = f" sliding window {window}" if window else " causal, full"

    @case(f"sink_mha_fwd{'_window' if window else ''}", "attention_sink", "example_mha_sink_fwd_bhsd",
          f"fp16 Q,K,V[B,H,S,D] + sinks[H], B={B} H={H} S={S} D={D}{tag}; 128x128 blocks, 2 stages, 256 threads "
          "(its main() config, realistic size)",
          ref="the example's ref_program (torch fp32 einsum + softmax with sinks)")
    def _pair():
        def build(m):
            return m.flashattn(B, H, S, S, D, window, block_M=128, block_N=128, num_stages=2, threads=256,
                               dtype=_T().float16)

        def run(m, k, h):
            import torch
            q, kk, v = _rand(B, H, S, D), _rand(B, H, S, D), _rand(B, H, S, D)
            sinks = _rand(H)
            o = k(q, kk, v, sinks)
            ref = m.ref_program(q, kk, v, sinks, window, dtype=torch.float16)
            flops = 4 * B * H * S * D * (min(window, S) * S if window else S * S * 0.5)
            return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v, sinks)),
                            ref_ms=h.time(lambda: m.ref_program(q, kk, v, sinks, window, dtype=torch.float16)),
                            flops=flops)
        return build, run


_sink_mha_fwd(None)
_sink_mha_fwd(128)


def _sink_bwd(name, module, B, H, S, D, groups, window):
    gqa = groups is not None
    hkv = H // groups if gqa else H

    @case(name, "attention_sink", module,
          f"fp16 backward with sinks, Q[B,H,S,D] K,V[B,{hkv},S,D] B={B} H={H} S={S} D={D}"
          f"{' groups=' + str(groups) if gqa else ''}{' window ' + str(window) if window else ' causal'}; "
          "fwd + preprocess + bwd (sm_90 config 128x32, 2 stages, 256 threads) + postprocess + dsink "
          "(its __main__ sizes); timed: the whole backward",
          ref="autograd backward of the example's ref_program (torch fp32)")
    def _pair():
        def build(m):
            T = _T()
            with _as_sm90():
                if gqa:
                    fwd = m.flashattn_fwd(B, H, S, D, groups, window, dtype=T.float16)
                    bwd = m.flashattn_bwd(B, H, S, D, groups, window, dtype=T.float16)
                else:
                    fwd = m.flashattn_fwd(B, H, S, D, window, dtype=T.float16)
                    bwd = m.flashattn_bwd(B, H, S, D, window, dtype=T.float16)
                return _Kernels(fwd=fwd, prep=m.flashattn_bwd_preprocess(B, H, S, D, dtype=T.float16),
                                bwd=bwd, post=m.flashattn_bwd_postprocess(B, H, S, D, dtype=T.float16),
                                dsink=m.flashattn_bwd_dsink(B, H, S, dtype=T.float16))

        def run(m, k, h):
            import torch
            Q = _rand(B, H, S, D).requires_grad_()
            K = _rand(B, hkv, S, D).requires_grad_()
            V = _rand(B, hkv, S, D).requires_grad_()
            sinks = _rand(H).requires_grad_()
            dO = _rand(B, H, S, D)
            O = m.attention(Q, K, V, sinks, window, groups) if gqa else m.attention(Q, K, V, sinks, window)
            O_ref = m.ref_program(Q, K, V, sinks, window, dtype=torch.float16)
            span = min(window, S // 2) * S if window else S * S * 0.5
            return _bwd_result(h, O, O_ref, dO, [Q, K, V, sinks], 1e-2, 1e-2, flops=10 * B * H * span * D)
        return build, run


_sink_bwd("sink_mha_bwd", "example_mha_sink_bwd_bhsd", 1, 64, 4096, 128, None, None)
_sink_bwd("sink_mha_bwd_window", "example_mha_sink_bwd_bhsd", 1, 64, 4096, 128, None, 128)
_sink_bwd("sink_gqa_bwd", "example_gqa_sink_bwd_bhsd", 1, 64, 4096, 128, 8, None)
_sink_bwd("sink_gqa_bwd_window", "example_gqa_sink_bwd_bhsd", 1, 64, 4096, 128, 8, 128)


# --------------------------------------------------------------------------- flash_attention backward

def _mha_bwd(layout):
    B, H, S, D = 8, 32, 1024, 64
    module = f"example_mha_bwd_{layout}"
    shape = (B, S, H, D) if layout == "bshd" else (B, H, S, D)

    @case(f"mha_bwd_{layout}", "flash_attention", module,
          f"fp16 MHA backward, {layout} B={B} H={H} S={S} D={D} non-causal; fwd 64x64 + preprocess + bwd 64x64 "
          "+ postprocess (its main() sizes); timed: the whole backward",
          ref="autograd backward of the example's ref_program (torch fp16 einsum + softmax)")
    def _pair():
        def build(m):
            bn_fwd, bn_bwd = (64 if D <= 128 else 32), (64 if D <= 64 else 32)
            return _Kernels(fwd=m.flashattn_fwd(B, H, S, D, False, 64, bn_fwd),
                            prep=m.flashattn_bwd_preprocess(B, H, S, D),
                            bwd=m.flashattn_bwd(B, H, S, D, False, 64, bn_bwd),
                            post=m.flashattn_bwd_postprocess(B, H, S, D))

        def run(m, k, h):
            Q, K, V = (_rand(*shape).requires_grad_() for _ in range(3))
            dO = _rand(*shape)
            O = m.attention(Q, K, V, False)
            O_ref = m.ref_program(Q, K, V, False)
            return _bwd_result(h, O, O_ref, dO, [Q, K, V], 1e-2, 1e-2, flops=10 * B * H * S * S * D)
        return build, run


_mha_bwd("bshd")
_mha_bwd("bhsd")


@case("gqa_bwd", "flash_attention", "example_gqa_bwd",
      "fp16 GQA backward, Q[B,S,H,192] K[B,S,H/16,192] V[B,S,H/16,128] B=8 H=32 S=1024 groups=16 non-causal; "
      "fwd 128x64 + preprocess + bwd_atomic_add 128x32 (256 threads, 2 stages) + postprocess (its __main__ "
      "sizes, the test's atomic-add path); timed: the whole backward",
      ref="autograd backward of the example's ref_program (torch fp16 einsum + softmax)")
def _gqa_bwd():
    B, H, S, DQK, DV, G = 8, 32, 1024, 192, 128, 16

    def build(m):
        return _Kernels(fwd=m.flashattn_fwd(B, H, S, DQK, DV, False, 128, 64, G),
                        prep=m.flashattn_bwd_preprocess(B, H, S, DV),
                        bwd=m.flashattn_bwd_atomic_add(B, H, S, DQK, DV, False, 128, 32, threads=256, num_stages=2,
                                                       groups=G),
                        post=m.flashattn_bwd_postprocess(B, H, S, DQK))

    def run(m, k, h):
        Q = _rand(B, S, H, DQK).requires_grad_()
        K = _rand(B, S, H // G, DQK).requires_grad_()
        V = _rand(B, S, H // G, DV).requires_grad_()
        dO = _rand(B, S, H, DV)
        O = m.attention(Q, K, V, False, G, True)
        O_ref = m.ref_program(Q, K, V, False, G)
        flops = 2 * B * H * S * S * (3 * DQK + 2 * DV)
        return _bwd_result(h, O, O_ref, dO, [Q, K, V], 1e-2, 1e-2, flops=flops)
    return build, run


# --------------------------------------------------------------------------- flash_attention varlen

_VARLEN_B, _VARLEN_S = 8, 2048


def _varlen_lengths():
    """Fixed per-sequence lengths (the example draws random padding; a fixed draw keeps the kernel's
    UQ/UKV sizes known at build time): between S/2 and S, the same for queries and keys."""
    return [_VARLEN_S - (i * 97) % (_VARLEN_S // 2) for i in range(_VARLEN_B)]


def _cu(lengths):
    import torch
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device=_dev())


def _varlen_sdpa(q, k, v, cu, lengths, causal, groups=1):
    """Per-sequence SDPA over packed [U, H, D] tensors -> packed output."""
    import torch
    import torch.nn.functional as F
    outs, c = [], cu.tolist()
    for b in range(len(lengths)):
        qs, ks, vs = (t[c[b]:c[b + 1]].transpose(0, 1) for t in (q, k, v))
        if groups > 1:
            ks, vs = ks.repeat_interleave(groups, 0), vs.repeat_interleave(groups, 0)
        outs.append(F.scaled_dot_product_attention(qs[None], ks[None], vs[None], is_causal=causal)[0].transpose(0, 1))
    return torch.cat(outs, 0)


def _mha_varlen(causal):
    B, H, D = _VARLEN_B, 64, 128
    lengths = _varlen_lengths()
    U = sum(lengths)

    @case(f"mha_fwd_varlen{'_causal' if causal else ''}", "flash_attention", "example_mha_fwd_varlen",
          f"fp16 varlen Q,K,V[U,H,D] packed, B={B} sequences of {min(lengths)}..{max(lengths)} (U={U}) H={H} "
          f"D={D}{' causal' if causal else ''}; 64x64 blocks, 1 stage, 128 threads (its main() config and sizes, "
          "fixed lengths)",
          ref="F.scaled_dot_product_attention per sequence")
    def _pair():
        def build(m):
            return m.flashattn(B, U, U, H, D, causal, block_M=64, block_N=64, num_stages=1, threads=128)

        def run(m, k, h):
            q, kk, v = _rand(U, H, D), _rand(U, H, D), _rand(U, H, D)
            cu = _cu(lengths)
            mx = max(lengths)
            o = k(q, kk, v, cu, cu, mx)
            ref = _varlen_sdpa(q, kk, v, cu, lengths, causal)
            flops = sum(4 * H * n * n * D * (0.5 if causal else 1.0) for n in lengths)
            return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v, cu, cu, mx)),
                            ref_ms=h.time(lambda: _varlen_sdpa(q, kk, v, cu, lengths, causal)), flops=flops)
        return build, run


_mha_varlen(False)
_mha_varlen(True)


# --------------------------------------------------------------------------- seer_attention

@case("seer_blocksparse_attn", "seer_attention", "block_sparse_attn_tilelang",
      "fp16 Q,K,V[B,H,S,D] B=2 H=32 S=4096 D=64, 64x64 block mask (top-16 of 64 per row, causal); the "
      "example's fixed 64x64 tiles, 1 stage, 128 threads (realistic size; its test is B=4 H=2 S=256)",
      ref="F.scaled_dot_product_attention with the expanded boolean mask")
def _seer():
    B, H, S, D, BLK, TOPK = 2, 32, 4096, 64, 64, 16
    ds = math.ceil(S / BLK)

    def build(m):
        return m.blocksparse_flashattn(B, H, S, S, D, ds, is_causal=True)

    def run(m, k, h):
        import torch
        q, kk, v = _rand(B, H, S, D), _rand(B, H, S, D), _rand(B, H, S, D)
        x = torch.randn([B, H, ds, ds], device=_dev(), dtype=torch.float16)
        x[:, :, :, 0] = 100
        mask = m.get_sparse_attn_mask_from_topk(x, topk=TOPK)
        mask8 = mask.to(torch.int8)
        o = k(q, kk, v, mask8)
        return _uc.block_sparse_result(h, o, q, kk, v, mask, BLK, lambda: k(q, kk, v, mask8))
    return build, run


# --------------------------------------------------------------------------- deepseek_v32

def _similarity_diff(out, ref):
    """1 - 2<x,y>/(|x|^2+|y|^2) over the finite entries (the examples' own similarity measure), and
    whether both have the same non-finite entries."""
    import torch
    fo, fr = torch.isfinite(out), torch.isfinite(ref)
    same = bool(torch.equal(fo, fr))
    x, y = out.masked_fill(~fo, 0).double(), ref.masked_fill(~fr, 0).double()
    den = float((x * x + y * y).sum())
    return same, (0.0 if den == 0 else 1.0 - 2.0 * float((x * y).sum()) / den)


def _causal_topk_indices(B, S, SKV, G, topk, q_start=0):
    """Per query t, ``topk`` distinct random KV positions below min(max(1, t + q_start), SKV), padded
    with SKV (the examples' randperm loops, drawn vectorised)."""
    import torch
    dev = _dev()
    t = torch.arange(S, device=dev)
    allowed = torch.clamp(torch.clamp(t + q_start, min=1), max=SKV)
    score = torch.rand(B, S, G, SKV, device=dev)
    valid = torch.arange(SKV, device=dev)[None, :] < allowed[:, None]            # [S, SKV]
    score = score.masked_fill(~valid[None, :, None, :], -1.0)
    top = score.topk(topk, dim=-1)
    idx = torch.where(top.values >= 0, top.indices, torch.full_like(top.indices, SKV))
    return idx.to(torch.int32).contiguous()


@case("dsv32_sparse_mla_fwd", "deepseek_v32", "sparse_mla_fwd",
      "bf16 sparse MLA forward, q[B,S,H,576] kv[B,SKV,1,576] top-2048 causal indices, B=1 S=4096 SKV=4096 "
      "H=128 DV=512; block_I=64, 2 stages, 256 threads (its __main__ sizes)",
      ref="the example's ref_sparse_mla_fwd_interface (torch fp32 masked attention)")
def _sparse_mla_fwd():
    B, S, SKV, H, DQK, DV, topk = 1, 4096, 4096, 128, 576, 512, 2048

    def build(m):
        return m.sparse_mla_fwd.compile(heads=H, dim=DV, tail_dim=DQK - DV, topk=topk, kv_group=1, sm_scale=None,
                                        is_causal=True, block_I=64, num_stages=2, threads=256)

    def run(m, k, h):
        import torch
        bf = torch.bfloat16
        q, kv = _rand(B, S, H, DQK, dtype=bf), _rand(B, SKV, 1, DQK, dtype=bf)
        idx = _causal_topk_indices(B, S, SKV, 1, topk)
        out, _lse = k(q, kv, idx)
        ref = m.ref_sparse_mla_fwd_interface(q, kv, idx)
        same, diff = _similarity_diff(out.float(), ref.float())
        return h.result_metric(same and diff < 1e-2, diff, ms=h.time(lambda: k(q, kv, idx)),
                               ref_ms=h.time(lambda: m.ref_sparse_mla_fwd_interface(q, kv, idx)),
                               flops=B * S * (DQK + DV) * topk * 2 * H, metric="1-sim")
    return build, run


@case("dsv32_sparse_mla_fwd_pipelined", "deepseek_v32", "sparse_mla_fwd_pipelined",
      "bf16 sparse MLA forward (pipelined, 384 threads), q[B,S,H,576] kv[B,SKV,1,576] (inputs / 10) top-2048 "
      "causal indices, q_start 1024, kv_stride 1, B=1 S=4096 SKV=8192 H=128 DV=512 (its test function's defaults)",
      ref="the example's ref_sparse_mla_fwd_interface (torch fp32 masked attention)")
def _sparse_mla_fwd_pipelined():
    B, S, SKV, H, DQK, DV, topk, q_start = 1, 4096, 8192, 128, 576, 512, 2048, 1024

    def build(m):
        return m.sparse_mla_fwd.compile(heads=H, dim=DV, tail_dim=DQK - DV, topk=topk, kv_stride=1, kv_group=1,
                                        sm_scale=None, is_causal=True, CP0=False)

    def run(m, k, h):
        import torch
        bf = torch.bfloat16
        q, kv = _rand(B, S, H, DQK, dtype=bf, scale=0.1), _rand(B, SKV, 1, DQK, dtype=bf, scale=0.1)
        idx = _causal_topk_indices(B, S, SKV, 1, topk, q_start=q_start)
        qs = torch.tensor([q_start], dtype=torch.int32, device=_dev())
        out, _lse = k(q, kv, idx, qs)
        ref = m.ref_sparse_mla_fwd_interface(q, kv, idx, q_start, 1)
        return h.result(out, ref, atol=1e-3, rtol=1e-3, ms=h.time(lambda: k(q, kv, idx, qs)),
                        ref_ms=h.time(lambda: m.ref_sparse_mla_fwd_interface(q, kv, idx, q_start, 1)),
                        flops=B * S * (DQK + DV) * topk * 2 * H)
    return build, run


@case("dsv32_sparse_mla_bwd", "deepseek_v32", "sparse_mla_bwd",
      "bf16 sparse MLA backward, q[B,S,H,576] kv[B,SKV,1,576] do[B,S,H,512] top-2048 causal indices, B=1 S=4096 "
      "SKV=8192 H=64: preprocess + bwd (block 32, 0 stages) + postprocess (its test function's defaults); "
      "timed: the three kernels and the dKV zeroing, as its sparse_mla_bwd",
      ref="autograd forward + backward of the example's ref_sparse_mla_bwd_interface (torch fp32)")
def _sparse_mla_bwd():
    B, S, SKV, H, DQK, DV, topk = 1, 4096, 8192, 64, 576, 512, 2048

    def build(m):
        return _Kernels(pre=m.preprocess.compile(B=B, S=S, H=H, D=DV),
                        bwd=m.bwd.compile(B=B, S=S, S_kv=SKV, H=H, D=DV, D_tail=DQK - DV, topk=topk, kv_group=1,
                                          sm_scale=None, is_causal=True),
                        post=m.postprocess.compile(B=B, S_kv=SKV, D=DV, D_tail=DQK - DV, kv_group=1))

    def run(m, k, h):
        import torch
        from sparse_mla_fwd import sparse_mla_fwd_interface
        bf = torch.bfloat16
        q, kv, do = _rand(B, S, H, DQK, dtype=bf), _rand(B, SKV, 1, DQK, dtype=bf), _rand(B, S, H, DV, dtype=bf)
        idx = _causal_topk_indices(B, S, SKV, 1, topk)
        o, lse = sparse_mla_fwd_interface(q, kv, idx)

        def fn():
            delta = k.pre(o, do)
            dkv = torch.zeros_like(kv, dtype=torch.float32)
            dq = k.bwd(q, kv, do, idx, lse, delta, dkv)
            return dq, k.post(dkv)
        dq, dkv = fn()
        rdq, rdkv = m.ref_sparse_mla_bwd_interface(q, kv, None, do, idx, None)
        s1, d1 = _similarity_diff(dq.float(), rdq.float())
        s2, d2 = _similarity_diff(dkv.float(), rdkv.float())
        flops = 2 * S * topk * H * (2 * DV + 3 * DQK)
        return h.result_metric(s1 and s2 and max(d1, d2) < 1e-4, max(d1, d2), ms=h.time(fn),
                               ref_ms=h.time(lambda: m.ref_sparse_mla_bwd_interface(q, kv, None, do, idx, None)),
                               flops=flops, metric="1-sim")
    return build, run


@case("dsv32_fp8_indexer", "deepseek_v32", "fp8_lighting_indexer",
      "fp8 lightning indexer logits, q[S,H,D] kv[SKV,D] (per-row kv scales), S=4096 SKV=8192 H=32 D=64, "
      "context-parallel ks/ke ranges; mqa_attn_return_logits (block_N=256, 3 stages, 512 threads) + "
      "clean_logits_ (its test_fp8_lighting_indexer defaults)",
      ref="the example's ref_fp8_mqa_logits (torch fp32 einsum on the bf16 inputs)")
def _fp8_indexer():
    S, SKV, H, D = 4096, 8192, 32, 64

    def build(m):
        return _Kernels(logits=m.mqa_attn_return_logits.compile(heads=H, index_dim=D),
                        clean=m.clean_logits_.compile())

    def run(m, k, h):
        import torch
        from utils import generate_random_cu_seqlens, per_custom_dims_cast_to_fp8
        q = _rand(S, H, D, dtype=torch.bfloat16)
        kv = _rand(SKV, D, dtype=torch.bfloat16)
        weights = _rand(S, H, dtype=torch.float32)
        ks, ke = generate_random_cu_seqlens(per_cp_seqlen=S, cp_size=4, cp_rank=3, kv_stride=1, average_q_len=2048)
        q8 = q.to(torch.float8_e4m3fn).view(S * H, D)
        kv8, kv_scales = per_custom_dims_cast_to_fp8(kv, (0,), False)

        def fn():
            lg = k.logits(q8, kv8, kv_scales, weights, ks, ke)
            k.clean(lg, ks, ke)
            return lg
        logits = fn()
        ref, cost = m.ref_fp8_mqa_logits(q=q, kv=kv, weights=weights, cu_seqlen_ks=ks, cu_seqlen_ke=ke)
        same, diff = _similarity_diff(logits, ref)
        # (q is rounded to e4m3 without a scale: the logits carry fp8 rounding; 1-sim stays ~1e-4)
        return h.result_metric(same and diff < 1e-2, diff, ms=h.time(fn),
                               ref_ms=h.time(lambda: m.ref_fp8_mqa_logits(q=q, kv=kv, weights=weights,
                                                                          cu_seqlen_ks=ks, cu_seqlen_ke=ke)),
                               flops=2 * int(cost) * H * D, metric="1-sim")
    return build, run


@case("dsv32_topk_selector", "deepseek_v32", "topk_selector",
      "fp32 top-2048 indices of each of 64 rows of 32768 scores (radix select); its test sizes",
      ref="torch.topk")
def _topk_selector():
    batch, seq_len, topk = 64, 32 * 1024, 2048

    def build(m):
        return m.tl_topk_impl.compile(topk=topk)

    def run(m, k, h):
        import torch
        x = torch.randn(batch, seq_len, dtype=torch.float32, device=_dev())
        starts = torch.zeros(batch, dtype=torch.int32, device=_dev())
        ends = torch.full((batch,), seq_len, dtype=torch.int32, device=_dev())
        idx = torch.zeros(batch, topk, dtype=torch.int32, device=_dev())
        k(x, idx, starts, ends)
        ref = torch.topk(x, topk, dim=-1)[1].to(torch.int32)
        # the same set of indices per row (the kernel's order is not sorted)
        got_sorted, ref_sorted = idx.sort(-1)[0], ref.sort(-1)[0]
        missing = float((got_sorted != ref_sorted).any(-1).float().sum())
        return h.result_metric(missing == 0, missing, ms=h.time(lambda: k(x, idx, starts, ends)),
                               ref_ms=h.time(lambda: torch.topk(x, topk, dim=-1)), flops=None,
                               metric="rows with another index set")
    return build, run


# --------------------------------------------------------------------------- deepseek_mhc

@case("mhc_pre", "deepseek_mhc", "example_mhc_pre",
      "mHC pre block, residual bf16[n,4,hidden] n=8192 hidden=4096, fn fp32[24,4*hidden]: "
      "mhc_pre_gemm_sqrsum (token_block 32, hidden_block 256) + mhc_pre_big_fuse (sinkhorn x10, "
      "n_splits=1) (the largest size of its main())",
      ref="the example's mhc_pre_ref (torch ops)")
def _mhc_pre():
    n, hidden, hc = 8192, 4096, 4
    hc3 = hc * 2 + hc * hc

    def build(m):
        return _Kernels(gemm=m.mhc_pre_gemm_sqrsum_tilelang.compile(hc_mult3=hc3, hc_hidden_size=hc * hidden),
                        fuse=m.mhc_pre_big_fuse_tilelang.compile(hidden_size=hidden, rms_eps=1e-6, hc_pre_eps=1e-6,
                                                                 hc_sinkhorn_eps=1e-6, hc_post_mult_value=1.0,
                                                                 sinkhorn_repeat=10, n_splits=1, hc_mult=hc))

    def run(m, k, h):
        import torch
        d = m.generate_test_data(n=n, hc_mult=hc, hidden_size=hidden)
        res = d["residual"].view(n, hc, hidden)
        f32 = dict(dtype=torch.float32, device=res.device)
        post_mix, comb_mix = torch.empty(n, hc, **f32), torch.empty(n, hc * hc, **f32)
        layer_input = torch.empty(n, hidden, dtype=torch.bfloat16, device=res.device)
        gemm_mul, gemm_sq = torch.empty(1, n, hc3, **f32), torch.empty(1, n, **f32)

        def fn():
            k.gemm(res.view(n, hc * hidden), d["fn"], gemm_mul.squeeze(0), gemm_sq.squeeze(0))
            k.fuse(gemm_mul, gemm_sq, d["hc_scale"], d["hc_base"], res, post_mix, comb_mix, layer_input)
        fn()
        rp, rc, rl = m.mhc_pre_ref(**d)
        ok, diff = _close_all(h, [(post_mix.view(n, hc, 1), rp), (comb_mix.view(n, hc, hc), rc)], 1e-5, 1.3e-6)
        ok2, diff2 = h.close(layer_input, rl, 1e-5, 1.6e-2)    # torch.testing's defaults, as the test uses
        return h.result_metric(ok and ok2, max(diff, diff2), ms=h.time(fn), ref_ms=h.time(lambda: m.mhc_pre_ref(**d)),
                               flops=2 * n * hc3 * hc * hidden)
    return build, run


@case("mhc_post", "deepseek_mhc", "example_mhc_post",
      "mHC post block, out = x * post_mix + comb_mix^T @ residual, n=4096 hc=4 hidden=7168 bf16 "
      "(the largest size of its main())",
      ref="the example's mhc_post_ref (torch bmm + ops)")
def _mhc_post():
    n, hidden, hc = 4096, 7168, 4

    def build(m):
        return m.mhc_post_tilelang.compile(hc=hc, hidden=hidden)

    def run(m, k, h):
        import torch
        d = m.generate_test_data(n=n, h=hidden, hc_mult=hc)
        out = torch.empty_like(d["residual"])
        plm = d["post_layer_mix"].squeeze(-1)
        args = (d["comb_res_mix"], d["residual"], plm, d["x"], out)
        k(*args)
        ref = m.mhc_post_ref(**d)
        return h.result(out, ref, atol=1e-5, rtol=1.6e-2, ms=h.time(lambda: k(*args)),
                        ref_ms=h.time(lambda: m.mhc_post_ref(**d)), bytes_=2 * (2 * n * hc * hidden + n * hidden))
    return build, run


# --------------------------------------------------------------------------- deepseek_v4

@case("dsv4_act_quant_fp8", "deepseek_v4", "act_quant",
      "bf16 x[M,N] -> e4m3 + fp32 scale per 128-column block, M=8192 N=7168, blk_m=32 (realistic size; its "
      "test is M=64 N=256)",
      ref="the example's fp8_act_quant_ref (torch ops)")
def _act_quant_fp8():
    M, N, bs = 8192, 7168, 128

    def build(m):
        return m.fp8_quant_kernel.compile(N=N, block_size=bs, round_scale=False)

    def run(m, k, h):
        import torch
        x = _rand(M, N, dtype=torch.bfloat16)
        q, s = k(x)
        rq, rs = m.fp8_act_quant_ref(x, block_size=bs, round_scale=False)
        ok_s, d_s = h.close(s.view(M, -1), rs, 1e-5, 1e-5)
        # the test asks for bit-equal values at M=64 N=256; over 58M values a scale one ulp off
        # (amax * (1/448) against amax / 448) may move a rare rounding tie: <= 1e-5 of them allowed
        bad = float((q.float() != rq.float()).float().mean())
        return h.result_metric(ok_s and bad <= 1e-5, max(d_s, bad), ms=h.time(lambda: k(x)),
                               ref_ms=h.time(lambda: m.fp8_act_quant_ref(x, block_size=bs, round_scale=False)),
                               bytes_=M * N * 3, metric="scale maxdiff / share of unequal fp8 values")
    return build, run


@case("dsv4_act_quant_fp4", "deepseek_v4", "act_quant",
      "bf16 x[M,N] -> packed e2m1 + power-of-2 scale per 32-column block, M=8192 N=7168, blk_m=32 (realistic "
      "size; its test is M=64 N=256)",
      ref="the example's fp4_act_quant_ref (torch ops)")
def _act_quant_fp4():
    M, N, bs = 8192, 7168, 32

    def build(m):
        return m.fp4_quant_kernel.compile(N=N, block_size=bs)

    def run(m, k, h):
        import torch
        x = _rand(M, N, dtype=torch.bfloat16)
        q, s = k(x)
        q, s = q.view(M, -1), s.view(M, -1)
        rq, rs = m.fp4_act_quant_ref(x, block_size=bs)
        ok_s, d_s = h.close(s, rs, 1e-5, 1e-5)
        # (nibbles may differ at exact rounding midpoints: compared dequantized, as the test does)
        dq, drq = m.fp4_dequant_to_float(q, s, N), m.fp4_dequant_to_float(rq, rs, N)
        ok_q = bool(torch.allclose(dq, drq, rtol=0.05, atol=1.0))
        d_q = float((dq - drq).abs().max())
        return h.result_metric(ok_s and ok_q, max(d_s, d_q), ms=h.time(lambda: k(x)),
                               ref_ms=h.time(lambda: m.fp4_act_quant_ref(x, block_size=bs)),
                               bytes_=M * N * 2 + M * N // 2)
    return build, run


@case("dsv4_sparse_attn_fwd", "deepseek_v4", "sparse_attn_fwd_sm90",
      "bf16 MQA sparse attention with sinks, q[B,S,H,D] kv[B,SKV,D], top-1024 random indices, B=1 S=4096 "
      "SKV=8192 H=128 D=512; block_N=64, 2 stages, 256 threads (its __main__ sizes)",
      ref="the example's torch_sparse_attention (gather + fp32 einsum)")
def _dsv4_sparse_attn():
    B, S, SKV, H, D, TOPK = 1, 4096, 8192, 128, 512, 1024

    def build(m):
        return m.sparse_attn_fwd(B, H, S, SKV, D, TOPK, dtype=_T().bfloat16)

    def run(m, k, h):
        import torch
        bf = torch.bfloat16
        q, kv, sink = _rand(B, S, H, D, dtype=bf), _rand(B, SKV, D, dtype=bf), _rand(H, dtype=bf)
        idx = torch.randint(0, SKV, (B, S, TOPK), dtype=torch.int32, device=_dev())
        o = k(q, kv, idx, sink)
        scale = 1.0 / math.sqrt(D)
        ref = m.torch_sparse_attention(q, kv, sink, idx, scale)
        return h.result(o, ref, atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kv, idx, sink)),
                        ref_ms=h.time(lambda: m.torch_sparse_attention(q, kv, sink, idx, scale)),
                        flops=4 * B * S * H * TOPK * D)
    return build, run


# --------------------------------------------------------------------------- gdn
# The kernels of test_example_gdn_compilation.py (other than chunk_fwd_o, in _upstream_cases.py),
# built with that test's flags and tile config (block_DK=64 block_DV=32, 128 threads, no pipelining)
# at the sequence length of the examples' main() (S=32768). The examples check against fla's
# Triton kernels (absent here): the forward kernels are checked against torch forms of the same
# computation written here; the backward ones (whose tests only compile and run them) only for
# finite outputs, with no torch timing. TL_BENCH_GDN_SIZE="B,S,H" shrinks the problem (same tiles,
# same kernel code, a smaller grid): compute-sanitizer's racecheck runs out of time at full size.

_GB, _GS, _GH, _GDK, _GDV, _GBS = 1, 32768, 32, 128, 128, 64
if os.environ.get("TL_BENCH_GDN_SIZE"):
    _GB, _GS, _GH = (int(x) for x in os.environ["TL_BENCH_GDN_SIZE"].split(","))
_GDESC = f"B={_GB} S={_GS} H={_GH} DK={_GDK} DV={_GDV} chunk {_GBS}, bf16 in/out, fp32 gates"
_GTILE = "block_DK=64 block_DV=32, 128 threads, 0 stages (its test's config; its main()'s S)"


def _gdn_dtypes():
    T = _T()
    return T.bfloat16, T.bfloat16, T.float32, T.float32, T.float32     # input, output, accum, gate, state


def _finite_result(h, outs, ms):
    import torch
    ok = all(bool(torch.isfinite(o.float()).all()) for o in outs)
    return h.result_metric(ok, 0.0, ms=ms, ref_ms=None, flops=None, metric="finite outputs (no reference)")


def _chunks(x, BS):
    """[B,S,H,...] -> [B,NT,BS,H,...] (float)."""
    B, S = x.shape[:2]
    return x.float().reshape(B, S // BS, BS, *x.shape[2:])


@case("gdn_cumsum", "gdn", "example_cumsum",
      f"fp32 chunk-local cumsum of G[B,S,H], {_GDESC}; block_S=64, 128 threads, shared-memory cumsum (its test's "
      "flags)",
      ref="torch cumsum over the chunk-reshaped gates")
def _gdn_cumsum():
    def build(m):
        T = _T()
        return m.tilelang_chunk_local_cumsum_scalar(B=_GB, S=_GS, H=_GH, chunk_size=_GBS, reverse=False,
                                                    head_first=False, input_dtype=T.float32,
                                                    output_dtype=T.float32, block_S=_GBS, threads=128,
                                                    use_fragment=False)

    def run(m, k, h):
        import torch
        G = _rand(_GB, _GS, _GH, dtype=torch.float32)
        out = k(G)

        def ref_fn():
            return G.view(_GB, _GS // _GBS, _GBS, _GH).cumsum(2).view(_GB, _GS, _GH)
        return h.result(out, ref_fn(), atol=1e-4, rtol=1e-5, ms=h.time(lambda: k(G)), ref_ms=h.time(ref_fn),
                        bytes_=2 * 4 * _GB * _GS * _GH)
    return build, run


def _kkt_ref(K, Beta, G, BS):
    import torch
    kc, bc, gc = _chunks(K, BS), _chunks(Beta, BS), _chunks(G, BS)        # [B,NT,BS,H,DK], [B,NT,BS,H]
    kb = (kc * bc[..., None]).to(K.dtype).float()
    a = torch.einsum("bnihk,bnjhk->bnhij", kb, kc)
    g = gc.permute(0, 1, 3, 2)                                            # [B,NT,H,BS]
    gd = g[..., :, None] - g[..., None, :]
    low = torch.ones(BS, BS, dtype=torch.bool, device=K.device).tril(-1)
    a = torch.where((gd <= 0) & low, a * torch.exp(gd), torch.zeros_like(a))
    B, NT = a.shape[:2]
    return a.permute(0, 1, 3, 2, 4).reshape(B, NT * BS, -1, BS).to(K.dtype)


@case("gdn_scaled_dot_kkt", "gdn", "example_chunk_scaled_dot_kkt",
      f"bf16 A = strictly-lower gated (beta K) K^T per chunk, {_GDESC}; block_DK=64, 128 threads, 0 stages "
      "(its test's config; its main()'s S)",
      ref="a torch form of the same computation")
def _gdn_kkt():
    def build(m):
        i, o, a, _g, _s = _gdn_dtypes()
        return m.tilelang_chunk_scaled_dot_kkt_fwd(_GB, _GS, _GH, _GDK, _GBS, i, o, a, True, _GBS, 64, 128, 0)

    def run(m, k, h):
        import torch
        K, Beta, G = m.prepare_input(_GB, _GS, _GH, _GDK, torch.bfloat16, torch.bfloat16, torch.float32)
        A = k(K, Beta, G)
        return h.result(A, _kkt_ref(K, Beta, G, _GBS), atol=0.1, rtol=2e-2, ms=h.time(lambda: k(K, Beta, G)),
                        ref_ms=h.time(lambda: _kkt_ref(K, Beta, G, _GBS)),
                        flops=2 * _GB * _GS * _GH * _GBS * _GDK)
    return build, run


def _wy_ref(K, V, Beta, G, A, BS):
    import torch
    kc, vc, bc, gc, ac = (_chunks(t, BS) for t in (K, V, Beta, G, A))
    ub = (vc * bc[..., None]).to(K.dtype).float()
    # (beta K is a bf16 product, as the kernel stages it, before the fp32 gate multiplies it)
    wb = ((kc * bc[..., None]).to(K.dtype).float() * torch.exp(gc)[..., None]).to(K.dtype).float()
    ab = ac.to(A.dtype).float()                                             # [B,NT,i,H,j]
    u = torch.einsum("bnihj,bnjhv->bnihv", ab, ub)
    w = torch.einsum("bnihj,bnjhk->bnihk", ab, wb)
    B, NT = u.shape[:2]
    return (w.reshape(B, NT * BS, *w.shape[3:]).to(A.dtype), u.reshape(B, NT * BS, *u.shape[3:]).to(A.dtype))


@case("gdn_wy_fast", "gdn", "example_wy_fast",
      f"bf16 recompute W = A (beta exp(g) K), U = A (beta V) per chunk, {_GDESC}; {_GTILE}",
      ref="a torch form of the same computation")
def _gdn_wy():
    def build(m):
        i, o, a, g, _s = _gdn_dtypes()
        return m.tilelang_recompute_w_u_fwd(_GB, _GS, _GH, _GDK, _GDV, i, o, g, a, _GBS, block_S=_GBS, block_DK=64,
                                            block_DV=32, threads=128, num_stages=0)

    def run(m, k, h):
        import torch
        K, V, Beta, G, A = m.prepare_input(_GB, _GS, _GH, _GDK, _GDV, _GBS, torch.bfloat16, torch.bfloat16,
                                           gate_dtype=torch.float32)
        W, U = k(K, V, Beta, G, A)
        rW, rU = _wy_ref(K, V, Beta, G, A, _GBS)
        ok, diff = _close_all(h, [(W, rW), (U, rU)], 0.1, 2e-2)
        return h.result_metric(ok, diff, ms=h.time(lambda: k(K, V, Beta, G, A)),
                               ref_ms=h.time(lambda: _wy_ref(K, V, Beta, G, A, _GBS)),
                               flops=2 * _GB * _GS * _GH * _GBS * (_GDK + _GDV))
    return build, run


def _delta_h_ref(K, W, U, G, h0, BS):
    """The kernel's recurrence over chunks (state staged in bf16 for the products, kept in fp32)."""
    import torch
    bf = K.dtype
    B, S, H, DK = K.shape
    state = h0.float()                                                      # [B,H,DK,DV]
    hs, vs = [], []
    for t in range(S // BS):
        sl = slice(t * BS, (t + 1) * BS)
        hb = state.to(bf).float()
        hs.append(hb.to(bf))
        w, u, kk = (x[:, sl].float().permute(0, 2, 1, 3) for x in (W, U, K))   # [B,H,BS,*]
        v = u - w @ hb
        vs.append(v.to(bf))
        g = G[:, sl].float().permute(0, 2, 1)                               # [B,H,BS]
        gl = g[..., -1:]
        d = gl - g
        v = torch.where((d <= 0)[..., None], v * torch.exp(d)[..., None], torch.zeros_like(v))
        state = state * torch.exp(gl)[..., None] + kk.transpose(-1, -2) @ v.to(bf).float()
    return torch.stack(hs, 1), state, torch.cat(vs, 2).permute(0, 2, 1, 3)


@case("gdn_chunk_delta_h", "gdn", "example_chunk_delta_h",
      f"gated delta-rule forward state recurrence (h per chunk, final state, new V), {_GDESC}, initial state; "
      f"{_GTILE}",
      ref="a torch loop over chunks of the same recurrence")
def _gdn_delta_h():
    def build(m):
        i, o, a, g, s = _gdn_dtypes()
        return m.tilelang_chunk_gated_delta_rule_fwd_h(_GB, _GS, _GH, _GDK, _GDV, i, o, a, g, s, _GBS, True, True, True,
                                                       True, block_DK=64, block_DV=32, threads=128, num_stages=0)

    def run(m, k, h):
        import torch
        K, W, U, G, h0 = m.prepare_input(_GB, _GS, _GH, _GDK, _GDV, _GBS, torch.bfloat16, torch.bfloat16,
                                         torch.float32, torch.float32)
        hh, fin, vn = k(K, W, U, G, h0)
        rh, rfin, rvn = _delta_h_ref(K, W, U, G, h0, _GBS)
        ok, diff = _close_all(h, [(hh, rh), (fin, rfin), (vn, rvn)], 1e-2, 2e-2)
        return h.result_metric(ok, diff, ms=h.time(lambda: k(K, W, U, G, h0)),
                               ref_ms=h.time(lambda: _delta_h_ref(K, W, U, G, h0, _GBS)),
                               flops=4 * _GB * _GS * _GH * _GDK * _GDV)
    return build, run


def _chunk_local_cumsum(g, chunk):
    """fla's ``chunk_local_cumsum`` of a [B, S, H] gate (the cumulative sum within each chunk of
    ``chunk`` steps), which the examples' ``prepare_input`` applies only when fla is installed:
    without it the gates are not log-decays of a chunk and the recurrences overflow."""
    B, S, H = g.shape
    return g.view(B, S // chunk, chunk, H).cumsum(2).view(B, S, H).contiguous()


def _gdn_bwd_finite(name, module, factory, tail, size, ref, gate_arg=None):
    """A gdn backward kernel built as ``factory(B, S, H, DK, DV, <dtypes>, chunk, *tail)``, run on the
    example's ``prepare_input`` and checked for finite outputs (no usable reference here).
    ``gate_arg``: the index of the gate among the inputs, chunk-cumsummed as fla would."""
    @case(name, "gdn", module, size, ref=ref)
    def _pair():
        def build(m):
            return getattr(m, factory)(_GB, _GS, _GH, _GDK, _GDV, *_gdn_dtypes(), _GBS, *tail)

        def run(m, k, h):
            import torch
            args = list(m.prepare_input(_GB, _GS, _GH, _GDK, _GDV, _GBS, torch.bfloat16, torch.bfloat16,
                                        torch.float32, torch.float32, torch.float32))
            if gate_arg is not None:
                args[gate_arg] = _chunk_local_cumsum(args[gate_arg], _GBS)
            outs = k(*args)
            return _finite_result(h, outs, h.time(lambda: k(*args)))
        return build, run


_gdn_bwd_finite("gdn_chunk_o_bwd", "example_chunk_o_bwd", "tilelang_chunk_o_bwd_dqkwg", (1.0, True, True, 64, 32, 128, 0),
                f"chunk output backward dq, dk, dw, dg (use_g, use_dw, scale 1.0), {_GDESC}; block_DK=64 "
                "block_DV=32, 128 threads, 0 stages (its test's config; its main()'s S)",
                "none (the example's reference is fla's Triton kernel): checked for finite outputs only")
_gdn_bwd_finite("gdn_chunk_delta_bwd", "example_chunk_delta_bwd", "tilelang_chunk_gated_delta_rule_bwd_dhu",
                (1.0, True, True, True, 32, 128, 0),
                f"gated delta-rule backward dh, dh0, dv2 (use_g, initial state, final-state gradient, scale 1.0), "
                f"{_GDESC}; block_DV=32, 128 threads, 0 stages (its test's config; its main()'s S)",
                "none (the example's torch reference loops per element; fla's Triton kernel is absent): finite "
                "outputs only (the gates chunk-cumsummed, as prepare_input does with fla)", gate_arg=3)


@case("gdn_wy_fast_bwd", "gdn", "example_wy_fast_bwd_split",
      f"WY backward: tilelang_wy_fast_bwd (dA, dk, dv, dbeta, dg) then tilelang_wy_fast_bwd_split (in place), "
      f"{_GDESC}; {_GTILE}; timed: both kernels",
      ref="none (the example's reference is fla's Triton kernel): checked for finite outputs only")
def _gdn_wy_bwd():
    def build(m):
        i, o, a, g, s = _gdn_dtypes()
        cfg = (_GB, _GS, _GH, _GDK, _GDV, i, o, a, g, s, _GBS, 64, 32, 128, 0)
        return _Kernels(bwd=m.tilelang_wy_fast_bwd(*cfg), split=m.tilelang_wy_fast_bwd_split(*cfg))

    def run(m, k, h):
        import torch
        K, V, Beta, G, A, dw, du = m.prepare_input(_GB, _GS, _GH, _GDK, _GDV, _GBS, torch.bfloat16, torch.bfloat16,
                                                   torch.float32, torch.float32, torch.float32)
        dev = K.device
        dbeta_k = torch.empty(_GB, _GS, _GH, dtype=torch.bfloat16, device=dev)
        dg_pos = torch.empty(_GB, _GS, _GH, _GBS, dtype=torch.float32, device=dev)
        dg_neg = torch.empty(_GB, _GS, _GH, _GBS, dtype=torch.float32, device=dev)

        def fn():
            dA, dk, dv, dbeta, dg = k.bwd(K, V, Beta, G, A, dw, du)
            k.split(K, V, Beta, G, A, dw, du, dA, dk, dv, dbeta_k, dg_pos, dg_neg)
            return dA, dk, dv, dbeta + dbeta_k, dg + dg_pos.sum(-1) - dg_neg.sum(-1)
        outs = fn()
        return _finite_result(h, outs, h.time(fn))
    return build, run


# --------------------------------------------------------------------------- attention_sink varlen

_SV_H, _SV_G, _SV_D = 64, 16, 128


def _sink_varlen_inputs(grad):
    lengths = _varlen_lengths()
    U = sum(lengths)
    q = _rand(U, _SV_H, _SV_D)
    k = _rand(U, _SV_H // _SV_G, _SV_D)
    v = _rand(U, _SV_H // _SV_G, _SV_D)
    sinks = _rand(_SV_H)
    if grad:
        for t in (q, k, v, sinks):
            t.requires_grad_(True)
    return lengths, U, q, k, v, sinks


@case("sink_gqa_fwd_varlen", "attention_sink", "example_gqa_sink_fwd_varlen",
      f"fp16 varlen GQA with sinks, packed Q[U,{_SV_H},{_SV_D}] K,V[U,{_SV_H // _SV_G},{_SV_D}], {_VARLEN_B} sequences "
      f"of 1369..2048 (fixed lengths, same for q and k), causal; 128x128 blocks, 2 stages, 256 threads (its main() "
      "config, its __main__ batch)",
      ref="the example's ref_program (torch per sequence, fp32)")
def _sink_fwd_varlen():
    lengths = _varlen_lengths()
    U = sum(lengths)

    def build(m):
        return m.flashattn_sink(_VARLEN_B, _SV_G, U, U, _SV_H, _SV_D, True, window_size=None, block_M=128,
                                block_N=128, num_stages=2, threads=256)

    def run(m, k, h):
        _l, _u, q, kk, v, sinks = _sink_varlen_inputs(False)
        cu, mx = _cu(lengths), max(lengths)
        o = k(q, kk, v, cu, cu, mx, sinks)

        def ref_fn():
            return m.ref_program(q, kk, v, cu, cu, mx, mx, sinks, _VARLEN_B, True, sliding_window=None, groups=_SV_G)
        flops = sum(2 * _SV_H * n * n * _SV_D for n in lengths)
        return h.result(o, ref_fn(), atol=1e-2, rtol=1e-2, ms=h.time(lambda: k(q, kk, v, cu, cu, mx, sinks)),
                        ref_ms=h.time(ref_fn), flops=flops)
    return build, run


@case("sink_gqa_bwd_varlen", "attention_sink", "example_gqa_sink_bwd_varlen",
      f"fp16 varlen GQA backward with sinks, packed Q[U,{_SV_H},{_SV_D}] K,V[U,{_SV_H // _SV_G},{_SV_D}], "
      f"{_VARLEN_B} sequences of 1369..2048 (fixed), causal; fwd 64x64 + preprocess + bwd (sm_90 config) + "
      "postprocess + dsink (its main(), its __main__ batch); timed: the whole backward",
      ref="autograd backward of the example's ref_program (torch per sequence, fp32)")
def _sink_bwd_varlen():
    lengths = _varlen_lengths()
    U, mx, N_CTX = sum(lengths), max(lengths), _VARLEN_S

    def build(m):
        f16 = _T().float16
        B, G, H, D = _VARLEN_B, _SV_G, _SV_H, _SV_D
        with _as_sm90():
            return _Kernels(
                fwd=m.flashattn_fwd(B, G, U, U, N_CTX, H, mx, D, True, window_size=None, block_M=64, block_N=64,
                                    num_stages=1, threads=128, dtype=f16),
                prep=m.flashattn_bwd_preprocess(B, H, U, N_CTX, mx, D, dtype=f16),
                bwd=m.flashattn_bwd(B, G, U, U, N_CTX, H, mx, D, True, window_size=None, dtype=f16),
                post=m.flashattn_bwd_postprocess(U, H, D, dtype=f16),
                dsink=m.flashattn_bwd_dsink(B, H, N_CTX, mx, dtype=f16))

    def run(m, k, h):
        _l, _u, q, kk, v, sinks = _sink_varlen_inputs(True)
        cu = _cu(lengths)
        dO = _rand(U, _SV_H, _SV_D)
        O = m.attention(q, kk, v, sinks, cu, cu, N_CTX, mx, mx, None, _SV_G, True)
        O_ref = m.ref_program(q, kk, v, cu, cu, mx, mx, sinks, _VARLEN_B, True, sliding_window=None, groups=_SV_G)
        flops = sum(5 * _SV_H * n * n * _SV_D for n in lengths)
        return _bwd_result(h, O, O_ref, dO, [q, kk, v, sinks], 1e-2, 1e-2, flops=flops)
    return build, run
