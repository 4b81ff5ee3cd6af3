"""Attention backward's main kernel on sm_90a (upstream's flash_attention / attention_sink
backward examples, session 15):

* its per-row ``lse`` / ``Delta`` vectors (float32, not gemm operands, so no swizzled TMA box)
  no longer keep the loop off warp specialisation: the producer loads them with one unswizzled
  tensor-map box each (``warp_specialize._row_spec``, session 27; before, 1-D bulk copies, which
  compute-sanitizer's racecheck cannot order), or a 1-D bulk copy where no map fits
  (``warp_specialize._bulk_bytes`` / ``_bulk_load``), next to the TMA boxes of Q and dO;
* such a loop runs as a pair of blocks per SM (``warp_specialize._general_pair_candidate``:
  setmaxnreg 40 / 216 under ``__launch_bounds__(256, 2)``), the occupancy of its cp.async form;
* dQ's accumulation, element by element in a ``T.Parallel`` (``attention_schedule.tile_atomics``)
  or as a tile (``lower_copy._fragment_atomic_vector``), adds each thread's column pairs with one
  ``red.global.add.v2.f32`` (``tl::atomic_addx2``) instead of two scalar atomics, where line
  staging (default since session 27: test_atomic_line_staging.py) is turned off;
* what does not qualify keeps its CUDA (a 1-D tile that may overhang its tensor, sm_80)."""

import re
import sys
from pathlib import Path

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"
IN_PLACE = {"tl.enable_atomic_line_staging": False}     # the packed in-place atomics (staging is the default)


def bwd_kernel(seq_len=256, dim=64, block=64, stages=2, tile_atomic=False, lse_len=None, causal=False):
    """The shape of upstream's example_mha_bwd_bhsd main kernel (one batch, one head)."""
    lse_len = lse_len or seq_len
    shape = [seq_len, dim]

    @T.prim_func
    def flash_bwd(Q: T.Tensor(shape, T.float16), K: T.Tensor(shape, T.float16), V: T.Tensor(shape, T.float16),
                  dO: T.Tensor(shape, T.float16), lse: T.Tensor([lse_len], T.float32),
                  Delta: T.Tensor([lse_len], T.float32), dQ: T.Tensor(shape, T.float32),
                  dK: T.Tensor(shape, T.float16), dV: T.Tensor(shape, T.float16)):
        with T.Kernel(T.ceildiv(seq_len, block), threads=128) as by:
            K_shared = T.alloc_shared([block, dim], T.float16)
            dsT_shared = T.alloc_shared([block, block], T.float16)
            q = T.alloc_shared([block, dim], T.float16)
            V_shared = T.alloc_shared([block, dim], T.float16)
            qkT = T.alloc_fragment([block, block], T.float32)
            dsT = T.alloc_fragment([block, block], T.float32)
            qkT_cast = T.alloc_fragment([block, block], T.float16)
            dsT_cast = T.alloc_fragment([block, block], T.float16)
            lse_shared = T.alloc_shared([block], T.float32)
            delta = T.alloc_shared([block], T.float32)
            do = T.alloc_shared([block, dim], T.float16)
            dv = T.alloc_fragment([block, dim], T.float32)
            dk = T.alloc_fragment([block, dim], T.float32)
            dq = T.alloc_fragment([block, dim], T.float32)
            T.copy(K[by * block:(by + 1) * block, :], K_shared)
            T.copy(V[by * block:(by + 1) * block, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            for k in T.Pipelined(by if causal else 0, T.ceildiv(seq_len, block), num_stages=stages):
                T.copy(Q[k * block:(k + 1) * block, :], q)
                T.clear(qkT)
                T.gemm(K_shared, q, qkT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[k * block:(k + 1) * block], lse_shared)
                for i, j in T.Parallel(block, block):
                    qkT[i, j] = T.exp2(qkT[i, j] - lse_shared[j])
                T.copy(dO[k * block:(k + 1) * block, :], do)
                T.clear(dsT)
                T.gemm(V_shared, do, dsT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)
                T.copy(Delta[k * block:(k + 1) * block], delta)
                for i, j in T.Parallel(block, block):
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j])
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dsT_cast, dsT_shared)
                T.clear(dq)
                T.gemm(dsT_shared, K_shared, dq, transpose_A=True)
                if tile_atomic:
                    T.atomic_add(dQ[k * block:(k + 1) * block, :], dq)
                else:
                    for i, j in T.Parallel(block, dim):
                        T.atomic_add(dQ[k * block + i, j], dq[i, j])
            T.copy(dv, dV[by * block:(by + 1) * block, :])
            T.copy(dk, dK[by * block:(by + 1) * block, :])

    return flash_bwd


def source(func, target=SM90, **configs):
    return tilelang.compile(func, target=target, pass_configs=configs).get_kernel_source()


def test_lse_and_delta_are_row_boxes_of_the_warp_specialised_loop():
    src = source(bwd_kernel())
    assert "cp_async" not in src
    # a pair of blocks per SM, as the cp.async form ran (186 registers x 128 threads): the
    # producer warpgroup gives its registers to the consumer (``_general_pair_candidate``)
    assert "__launch_bounds__(256, 2)" in src
    assert "tl::setmaxnreg_dec<40>();" in src and "tl::setmaxnreg_inc<216>();" in src
    prod = src[src.index("for (int k_tma = 0;"):]
    prod = prod[:prod.index("} else {")]
    # lse and Delta (1-D tensors): one box of 64 floats each at column k_tma * 64, on the same
    # full barrier as Q and dO's swizzled boxes
    box = r"tl::tma_load_1d\(\(&\(\(\(float\*\)smem\)\[[^;]*?TL_TMAP\((\d)\), [^;]*?, \(k_tma \* 64\)\);"
    rows = re.findall(box, prod)
    assert len(rows) == 2 and "bulk_copy_g2s" not in src
    assert prod.count("tl::tma_load_2d") == 2                   # Q and dO: swizzled boxes
    maps = tilelang.compile(bwd_kernel(), target=SM90).artifact.tensormaps
    row_maps = [maps[int(j)] for j in rows]
    assert [(m["dtype"], m["dims"], m["box"], m["swizzle"]) for m in row_maps] == [("float32", [256], [64], 0)] * 2
    # one full barrier per stage counts the bytes of all four tiles: 2 x 64x64 fp16 + 2 x 64 fp32
    assert f"tl::mbarrier_arrive_expect_tx((&(((uint64_t*)smem)" in prod and ", 16896);" in prod


def _consumer_loop(src):
    """The consumers' main loop of the warp-specialised kernel, up to its closing brace."""
    body = src[src.index("} else {"):]
    body = body[body.index("for (int k = "):]
    return body[:body.index("\n    }\n")]


def test_the_consumers_meet_before_ds_is_stored_not_after_the_dq_atomics():
    """The barrier that keeps an iteration's store into dsT_shared from overwriting what the
    previous iteration's dq gemm reads goes right before that store (upstream's place, next to the
    barrier publishing it), not at the end of the body: the dQ atomics run on into the next
    iteration instead of every consumer waiting there for the slowest (``lower_loop_body``)."""
    body = _consumer_loop(source(bwd_kernel(), **{"tl.enable_loop_head_barrier": True}, **IN_PLACE))
    after_dk = body[body.rindex("tl::wgmma_gemm_rs<"):]
    store = after_dk.index("*(half2*)(((half*)smem)")
    assert after_dk[:store].count("tl::named_barrier_sync(1, 128);") == 1
    assert after_dk[store:after_dk.index("tl::wgmma_gemm_ss<")].count("tl::named_barrier_sync(1, 128);") == 1
    assert "named_barrier_sync" not in body[body.rindex("tl::atomic_addx2("):]


def test_element_atomics_of_a_fragment_become_vector_atomics():
    src = source(bwd_kernel(), **IN_PLACE)
    assert "tl::atomic_add(" not in src
    adds = re.findall(r"tl::atomic_addx2\(\(&\(dQ\[[^;]*\(&\(dq\[\(w_?\d* \* 2\)\]\)\)\);", src)
    assert len(adds) == 1
    assert "for (int w_2 = 0; w_2 < 16; ++w_2)" in src or re.search(r"for \(int w\w* = 0; w\w* < 16;", src)


def test_tile_atomic_from_a_fragment_is_packed():
    src = source(bwd_kernel(tile_atomic=True), **IN_PLACE)
    assert "tl::atomic_add(" not in src and src.count("tl::atomic_addx2(") == 1


def test_sm80_keeps_scalar_atomics():
    for tile_atomic in (False, True):
        src = source(bwd_kernel(tile_atomic=tile_atomic), target="cuda -arch=sm_80")
        assert "tl::atomic_add((&(dQ[" in src and "atomic_addx2" not in src


def test_a_vector_that_may_overhang_keeps_the_cp_async_path():
    # lse shorter than the loop's tiles: a bulk copy is not clipped at the tensor's end, so the
    # loop is not warp-specialised (its copies keep cp.async with their bounds guards)
    src = source(bwd_kernel(lse_len=200))
    assert "bulk_copy_g2s" not in src and "mbarrier" not in src and "cp_async" in src


def accumulate(value="plain"):
    """A gemm's accumulator added element by element into rows of a [S, H, D] tensor (the head
    index between the two tile dimensions, as in upstream's bshd examples)."""

    @T.prim_func
    def f(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16), C: T.Tensor((128, 4, 64), T.float32)):
        with T.Kernel(2, 4, threads=128) as (bx, by):
            a = T.alloc_shared((64, 64), T.float16)
            b = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c)
            for i, j in T.Parallel(64, 64):
                if value == "plain":
                    T.atomic_add(C[bx * 64 + i, by, j], c[i, j])
                elif value == "scaled":
                    T.atomic_add(C[bx * 64 + i, by, j], c[i, j] * 2.0)
                else:       # transposed: j walks the rows
                    T.atomic_add(C[bx * 64 + j, by, i], c[i, j])

    return f


def test_element_atomics_with_a_middle_index_are_packed():
    src = source(accumulate(), **IN_PLACE)
    assert "tl::atomic_add(" not in src and src.count("tl::atomic_addx2(") == 1


def test_other_element_atomics_keep_their_form():
    for value in ("scaled", "transposed"):
        src = source(accumulate(value))
        assert "tl::atomic_add((&(C[" in src and "atomic_addx2" not in src, value


def test_wider_fragments_keep_one_block_per_sm():
    # 64x128 head dimension: dv, dk and dq take 64 words each, past the pair's budget
    src = source(bwd_kernel(dim=128))
    assert src.count("tl::tma_load_1d(") == 2 and "__launch_bounds__(256)" in src and "setmaxnreg" not in src


def test_a_causal_loop_start_still_proves_the_row_loads_inside():
    # k runs from the block's own row tile: its constant range is still [0, seq_len / block)
    src = source(bwd_kernel(causal=True))
    assert src.count("tl::tma_load_1d(") == 2 and "for (int k_tma = ((int)blockIdx.x); k_tma < 4;" in src


def test_rows_no_tensor_map_fits_stay_bulk_copies():
    # lse / Delta of 258 floats: a tensor map's rows must be whole 16-byte vectors, so they keep
    # the 1-D bulk copy (every tile still inside the tensor), and the loop its block pair
    src = source(bwd_kernel(lse_len=258))
    assert src.count("tl::bulk_copy_g2s(") == 2 and "tma_load_1d" not in src
    assert "__launch_bounds__(256, 2)" in src


def test_summary_names_the_row_loaded_tiles():
    # the hover's pipeline line (analysis.summary._pipelines) says how the 1-D tiles are loaded
    from tilelang.analysis.summary import summarize

    for lse_len, text in ((None, "one unswizzled 1-D box each"), (258, "one 1-D bulk copy each, no tensor map")):
        loops = summarize(bwd_kernel(lse_len=lse_len), "sm_90a")["pipelines"]
        ws = [p for p in loops if p["warp_specialized"]]
        assert len(ws) == 1
        assert text in ws[0]["mechanism"]
        assert "`lse_s`" in ws[0]["mechanism"] or "`lse_shared`" in ws[0]["mechanism"]


def _before_release(body):
    """The statement in front of the consumers' release of their ring slot."""
    at = body.index("tl::mbarrier_arrive((&")
    return body[:at].rstrip().rsplit("\n", 1)[-1].strip()


def test_every_consumer_thread_gives_the_slot_back_right_after_its_last_reader():
    """Early release (on by default): every consumer thread arrives on the slot's empty barrier
    (initialised with the 128 consumer threads) right after dK's gemm, the last statement reading
    the slot, with no lane test: ptxas would sink an arrive predicated on lane 0 below the code
    that follows. Each thread's arrive releases its own plain reads of lse and Delta from the slot
    (the PTX memory model), so no ``__syncwarp()`` is needed in front of it. Released at the end
    of the body, the arrive follows the loop-back barrier."""
    src = source(bwd_kernel())
    early = _consumer_loop(src)
    assert _before_release(early).startswith("tl::wgmma_gemm_rs<64, 64, 64, 1,")   # no __syncwarp()
    assert re.search(r"tl::mbarrier_init\(\(&\(\(\(uint64_t\*\)smem\)\[7298\]\)\), 128\);", src)
    late = _consumer_loop(source(bwd_kernel(), **{"tl.enable_ws_early_release": False}, **IN_PLACE))
    assert "__syncwarp" not in late
    assert _before_release(late) == "tl::named_barrier_sync(1, 128);"


def test_a_gemm_loop_releases_without_a_fence():
    """A consumer that reads its slot only through wgmma (an address, not a load) gives it back
    with no ``__syncwarp()``: examples/gemm.py's warp-specialised GEMM."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import gemm

    src = source(gemm.matmul.get_prim_func(512, 512, 512, block_M=128, block_N=128, block_K=64, num_stages=3))
    assert "tl::mbarrier_arrive((&" in src and "__syncwarp" not in src
