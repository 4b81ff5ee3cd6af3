"""Early tile loads in zero-stage loops (transform/attention_schedule.py, issue 18/20).

A ``T.Pipelined(n, num_stages=0)`` loop of a chunked recurrence (gdn's ``chunk_delta_bwd``: a
512-step loop, each step loading K, G, dv, Q, W and dO tiles) waited for each load where it was
written, one global round trip after another. The loads whose tiles nothing earlier in the step
touches are now issued together at the top of the step, each waited for just before its first
reader; the others stay where they are. Checked here: the IR rewrite, the generated loop, what
stays in place (a tile touched before its copy, rows chosen by a value the step computes), the
per-loop fragment estimate, and upstream's example itself.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

import tilelang.language as T
from tilelang.engine.lower import lower
from tilelang.transform import attention_schedule

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM_GDN = ROOT.parent / "shared" / "conformance" / "upstream" / "examples" / "gdn"
S, D, B = 256, 64, 4


def recurrence(variant="plain", stages=0, big_tail=False):
    """h (64 x 32 per block, carried) over S / 64 steps: v = K h, scaled by exp(G) (a strided
    4-byte column), O = v; h += K^T Dv (Dv's columns start at bv * 32). ``variant``: "touched"
    (K_s read before K's copy), "indexed" (Dv's rows chosen by Idx[i], read in the step),
    "pointer" (a call handed h_s by address right after Dv's copy: IR only), "view" (K_s read
    through a T.view of it before K's copy)."""
    @T.prim_func
    def k(K: T.Tensor((B, S, D), "bfloat16"), G: T.Tensor((B, S, 2), "float32"),
          Dv: T.Tensor((S, D), "bfloat16"), Idx: T.Tensor((S // 64,), "int32"),
          O: T.Tensor((B, S, D), "float32"), H: T.Tensor((B, D, D), "float32")):
        with T.Kernel(2, B, threads=128) as (bv, b):
            h = T.alloc_fragment((D, 32), "float32")
            h_s = T.alloc_shared((D, 32), "bfloat16")
            K_s = T.alloc_shared((64, D), "bfloat16")
            D_s = T.alloc_shared((64, 32), "bfloat16")
            G_s = T.alloc_shared((64,), "float32")
            v = T.alloc_fragment((64, 32), "float32")
            tail = T.alloc_fragment((128, 256) if big_tail else (1,), "float32")
            K_v = T.view(K_s, (64, 32), "float32")
            T.clear(h)
            T.clear(K_s)
            for i in T.Pipelined(S // 64, num_stages=stages):
                T.copy(h, h_s)
                if variant == "touched":
                    for r, c in T.Parallel(64, 32):
                        h[r, c] += K_s[r, c]
                if variant == "view":
                    for r, c in T.Parallel(64, 32):
                        h[r, c] += K_v[r, c]
                T.copy(K[b, i * 64:(i + 1) * 64, :], K_s)
                T.gemm(K_s, h_s, v, clear_accum=True)
                T.copy(G[b, i * 64:(i + 1) * 64, 1], G_s)
                for r, c in T.Parallel(64, 32):
                    v[r, c] = v[r, c] * T.exp(G_s[r])
                T.copy(v, O[b, i * 64:(i + 1) * 64, bv * 32:(bv + 1) * 32])
                if variant == "indexed":
                    row = Idx[i]
                    T.copy(Dv[row * 64:(row + 1) * 64, bv * 32:(bv + 1) * 32], D_s)
                else:
                    T.copy(Dv[i * 64:(i + 1) * 64, bv * 32:(bv + 1) * 32], D_s)
                if variant == "pointer":
                    T.evaluate(T.call_extern("int32", "opaque_read", T.address_of(h_s[0, 0])))
                T.gemm(K_s, D_s, h, transpose_A=True)
            if big_tail:
                T.clear(tail)
                for r, c in T.Parallel(D, 32):
                    h[r, c] += tail[r, c]
            T.copy(h, H[b, :, bv * 32:(bv + 1) * 32])

    return k


def _loop(src):
    at = src.index("for (int i = 0")
    return src[at:]


def _async_copies(func):
    new = attention_schedule.schedule(func, "sm_90a", {})
    if new.same_as(func):
        return None
    return [ln.strip() for ln in str(new.body).splitlines() if "tl_copy(" in ln and ln.strip().endswith(", 3)")]


def test_the_three_loads_move_to_the_top():
    copies = _async_copies(recurrence())
    assert copies is not None and len(copies) == 3
    assert [c.split("T.tl_region(")[1].split("[")[0] for c in copies] == ["K", "G", "Dv"]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_loop_issues_all_loads_before_its_first_gemm(arch):
    loop = _loop(lower(recurrence(), target=arch).source)
    first_gemm = loop.index("gemm_")
    head = loop[:first_gemm]
    assert head.count("tl::cp_async_commit()") == 3
    assert "tl::cp_async_wait<2>()" in head                     # K landed, G and Dv in flight
    assert "Dv[" in head and "G[" in head
    rest = loop[first_gemm:]
    # G waited for before its scale reads it, Dv before the second gemm
    assert rest.index("tl::cp_async_wait<1>()") < rest.index("expf(") < rest.index("tl::cp_async_wait<0>()") \
        < rest.index("gemm_", 1)
    # off: every load waited for where it is written
    plain = _loop(lower(recurrence(), target=arch, pass_configs={attention_schedule.DISABLE_KEY: True}).source)
    assert "Dv[" not in plain[:plain.index("gemm_")]


def test_a_tile_touched_before_its_copy_stays():
    copies = _async_copies(recurrence("touched"))
    assert copies is not None
    assert [c.split("T.tl_region(")[1].split("[")[0] for c in copies] == ["G", "Dv"]      # not K


def test_a_tile_touched_through_a_view_before_its_copy_stays():
    copies = _async_copies(recurrence("view"))
    assert copies is not None
    assert [c.split("T.tl_region(")[1].split("[")[0] for c in copies] == ["G", "Dv"]      # not K


def test_rows_chosen_in_the_step_stay():
    copies = _async_copies(recurrence("indexed"))
    assert copies is not None
    assert [c.split("T.tl_region(")[1].split("[")[0] for c in copies] == ["K", "G"]       # not Dv


def test_a_call_given_shared_memory_by_address_waits_for_the_loads_before_it():
    # what the call reads through the pointer is unknown: Dv's tile lands before it, not before the gemm
    func = recurrence("pointer")
    text = str(attention_schedule.schedule(func, "sm_90a", {}).body)
    assert text.index("tl::cp_async_wait<0>") < text.index("opaque_read") < text.index("tl_gemm(T.tl_region(K_s[0, 0], 1, 64, 64), T.tl_region(D_s")


def test_two_or_more_stages_are_the_pipeliner_s():
    func = recurrence(stages=2)
    assert attention_schedule.schedule(func, "sm_90a", {}).same_as(func)


def test_registers_are_counted_per_loop():
    # a 128 x 256 fragment used only after the loop: the kernel's total is over the budget, the
    # loop's live fragments are not
    func = recurrence(big_tail=True)
    total = sum(attention_schedule.fragment_bytes(func.body).values()) / 4 / attention_schedule._threads(func.body)
    assert total > attention_schedule.REGISTER_BUDGET
    assert _async_copies(func) is not None


def test_vector_alignment_is_proven_for_symbolic_starts():
    from tvm import tirx

    from tilelang.tir_utils import walk_stmts
    from tilelang.transform.kernel import decode_region

    found = []
    walk_stmts(recurrence().body, lambda s: found.append(s) if isinstance(s, tirx.Evaluate) and "Dv[" in str(s)
               else None)
    src, dst = (decode_region(a) for a in found[0].value.args[:2])
    assert attention_schedule._whole_vectors(src, dst)          # start bv * 32: 64-byte aligned
    # a start of bv * 4 elements (8 bytes) is no whole 16-byte vector
    from tilelang.language._ops import region

    bv = src.starts[-1] // 32
    odd = decode_region(region(src.buffer, [src.starts[0], bv * 4], [64, 32], 1))
    assert not attention_schedule._whole_vectors(odd, dst)


def _upstream_delta_bwd():
    if not (UPSTREAM_GDN / "example_chunk_delta_bwd.py").is_file():
        pytest.skip("upstream's examples are not beside the checkout")
    if str(UPSTREAM_GDN) not in sys.path:
        sys.path.insert(0, str(UPSTREAM_GDN))
    mod = importlib.import_module("example_chunk_delta_bwd")
    factory = mod.tilelang_chunk_gated_delta_rule_bwd_dhu
    factory = getattr(factory, "_target", factory)
    return factory.get_prim_func(1, 32768, 32, 128, 128, "bfloat16", "bfloat16", "float32", "float32", "float32",
                                 64, 1.0, True, True, True, 32, 128, 0)


def test_upstream_chunk_delta_bwd_loads_every_tile_at_the_top():
    func = _upstream_delta_bwd()
    src = lower(func, target="sm_90a", out_idx=[-3, -2, -1]).source
    loop = src[src.index("for (int i_s"):]
    head = loop[:loop.index("wgmma_gemm")]
    assert head.count("tl::cp_async_commit()") == 6          # K, G, dv, Q, W, dO
    assert "tl::cp_async_wait<5>()" in head                   # only K waited for before the first gemm


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_upstream_chunk_delta_bwd_registers_no_spill():
    from tilelang.jit import nvcc

    src = lower(_upstream_delta_bwd(), target="sm_90a", out_idx=[-3, -2, -1]).source
    info = next(iter(nvcc.ptxas_info(src, "sm_90a", []).values()))
    assert info.spill_stores == 0 and info.spill_loads == 0


def test_the_pipeline_hover_says_which_loads_move_and_why_the_others_stay():
    from tilelang.analysis.summary import summarize

    moved = summarize(recurrence(), "sm_90a")["pipelines"][0]["mechanism"]
    assert "the loads of `K_s`, `G_s`, `D_s` are issued together at the top of each iteration" in moved
    stay = summarize(recurrence("touched"), "sm_90a")["pipelines"][0]["mechanism"]
    assert "the loads of `G_s`, `D_s`" in stay
    line = next(n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                if "h[r, c] += K_s[r, c]" in text) - 1      # (its T.Parallel nest)
    assert f"`K_s` is loaded where written (line {line} touches the tile before the copy)" in stay
    off = summarize(recurrence(), "sm_90a", {attention_schedule.DISABLE_KEY: True})["pipelines"][0]["mechanism"]
    assert off.startswith("not pipelined (num_stages < 2)")
