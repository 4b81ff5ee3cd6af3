"""Layout inference: give every fragment a ``Fragment`` layout, every ``T.Parallel`` nest a loop
layout, every shared buffer a ``SharedLayout``, and every ``T.gemm`` a warp partition.

Input: a parsed kernel (``KernelInfo``). Output: ``Layouts``. Never mutates the IR.

Order: (1) strict layouts from ``T.gemm`` (mma accumulator / register operand, swizzled shared
operands) and ``T.annotate_layout``; (2) a fixpoint over the consumers in program order:
a parallel nest adopts the layout of a fragment it indexes with exactly its loop variables,
and passes it on to the other fragments it touches (projected when indexed by a subset of the
loop variables); a reduction derives its output from its input; a copy into a fragment without
a layout gives it a vectorised default (after the loops that read the fragment through other
expressions or only some of their variables, ``c[i, j] = a[i] + b[j]``: they place it). A default
for a fragment reduced along its last dimension (and the fragments one loop indexes beside it)
puts only as many threads on a row as whole 128-byte lines need, the rest on the rows
(``_row_default``): fewer shuffles a row, no exchange across warps where rows suffice. When
nothing progresses, the first undecided consumer gets the default layout and the fixpoint
resumes. A layout that disagrees with one already
chosen is a located ``LoweringError`` (TL0201) naming the buffer and both layouts; when a default
led there, the fixpoint reruns with another root for that group of consumers (upstream tries each
operator as the root; ``_settle``), and the first error stands when none fits.
Fragments indexed by anything else (``a[i, j // 2]``, ``t[j, i]``, ``b[c, h]`` with ``c`` a serial
loop) follow upstream: the loop layout must run every iteration on threads that hold what it
touches (checked by enumeration, ``_serves``); else it is derived from a known fragment's
layout through the access (``_loop_through``, ``_padded_loop``), and an undecided fragment gets
the layout of the threads touching each element (``_fragment_through``), or full replication
when it is only read.
Shared buffers nothing constrains are row-major, except epilogue stages of sm_90a wgmma kernels
(written from a fragment), which take the slab-swizzled operand layout (``_epilogue_staging``).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field, replace

import numpy as np
import tvm
from tvm import ir, tirx

from tilelang.language.dtypes import bits as dtype_bits, nbytes
from tilelang.layout import unpack_layout_expr
from tilelang.layout import (CustomSharedLayout, Fragment, LayoutError, SharedLayout, default_fragment, drop_dim,
                             mma_accumulator, mma_operand_a, project)
from tilelang.layout.axes import LOCAL as LOCAL_KIND, _build as _build_axes, evaluate_index_expr, user_fragment
from tilelang.layout.fragment import replicated_fragment, wgmma_accumulator, wgmma_operand_a
from tilelang import targets
from tilelang.tir_utils import children, const_int, span_line, uses_vars, walk_stmts
from tilelang.transform import thread_regions
from tilelang.transform.lower_gemm_fma import fma_accumulator, fma_operand_a, fma_plan
from tilelang.language.loops import LOOP_LAYOUT_ATTR
from tilelang.transform.kernel import (FRAGMENT_SCOPE, SHARED_SCOPES, VIEW_STAGING, KernelInfo, LoweringError,
                                       buffer_accesses, decode_region, is_parallel_nest, op_name,
                                       parallel_nest, scope_of)


def _operand_a(layout, trans_a: bool):
    """The register A operand's layout over the fragment as stored: ``layout`` over (M, K), or
    for ``transpose_A`` (the fragment holds A as K x M) the same registers with the two tile
    dimensions swapped. Each thread then holds the elements of A the gemm's register templates
    expect (they read A_frag in the (m, k) order of ``layout`` and ignore TRANS_A)."""
    if not trans_a:
        return layout
    axes = tuple(replace(a, dim=None if a.dim is None else 1 - a.dim) for a in layout.axes)
    return replace(layout, shape=tuple(reversed(layout.shape)), axes=axes, name=f"{layout.name} (transposed)",
                   _tables={})


@dataclass
class GemmPlan:
    M: int
    N: int
    K: int
    warp_m: int
    warp_n: int
    trans_a: bool
    trans_b: bool
    kind: str = "mma"       # "mma" (mma.sync, sm_80+) or "wgmma" (sm_90a)
    warpgroups: int = 0     # wgmma: warpgroups splitting M
    warpgroups_n: int = 1   # wgmma: warpgroups splitting N (M too small for all of them: wgmma_split)
    no_wait: bool = False   # T.wgmma_gemm: forced wgmma, left in flight (T.wait_wgmma retires it)
    b_slab_bytes: int = 0   # wgmma: B's slabs narrower than its row's swizzle (narrow_b_slab_bytes)
    fma: object = None      # kind "fma" (CUDA-core fallback): its FmaGrid (lower_gemm_fma.py)
    entry: str = ""         # kind "mma" before sm_80: "mma_sync_" (Turing entry points, m16n8k8 pairs)


@dataclass
class Layouts:
    fragments: dict = field(default_factory=dict)   # buffer -> Fragment
    shared: dict = field(default_factory=dict)      # buffer -> SharedLayout
    loops: dict = field(default_factory=dict)       # outer loop var of a T.Parallel nest -> Fragment
    gemms: dict = field(default_factory=dict)       # Evaluate stmt -> GemmPlan
    origin: dict = field(default_factory=dict)      # buffer -> text saying where its layout came from
    wgmma: bool = False                             # some gemm of the kernel lowers to wgmma (sm_90a)
    mixed: bool = False                             # ... and another to mma.sync (GemmPlan.kind says which)
    unmixed: str = ""                               # why gemms not all fitting wgmma all took mma.sync
    unnarrowed: str = ""                            # why B's narrow wgmma slabs were given up (infer_layouts)
    sparse_gemms: dict = field(default_factory=dict)  # T.gemm_sp stmt -> GemmPlan (kind "mma_sp")
    reducers: dict = field(default_factory=dict)    # reducer buffer -> ReducerPlan (None: whole-block plan)
    conversions: set = field(default_factory=set)   # T.copy stmts between two fragments of different layouts
                                                    # (through a shared workspace: lower_reduce.convert_layout),
                                                    # and T.reduce_* whose result's layout is not the
                                                    # reduction's own (lower_reduce._converted_result)

    def fragment_words(self) -> int:
        """The 32-bit registers a thread's fragments take (every fragment of the kernel, whole)."""
        return sum(self._words_each())

    def largest_fragment_words(self) -> int:
        """The 32-bit registers a thread's largest fragment takes (0 without fragments)."""
        return max(self._words_each(), default=0)

    def _words_each(self) -> list:
        return [-(-int(frag.local_size) * nbytes(str(buf.dtype)) // 4) for buf, frag in self.fragments.items()]


@dataclass(frozen=True)
class ReducerPlan:
    """The narrow plan of a ``T.alloc_reducer`` epoch (``plan_reducer``): the reducer's layout is
    its update loop's layout with the reduced loop dimensions projected out, every replica of
    the loop runs its updates, and ``T.finalize_reducer`` combines only the threads that hold
    partials of one element: ``steps`` lists them as (threads, stride) all-reduce groups, empty
    when each thread's partial is already complete. ``lane``: for a 16-bit float reducer with one
    update site, the loop variable whose parity splits each partial into two independent lanes
    (``<name>_pk`` registers, folded before the collective: half the serial dependency chain)."""
    steps: tuple
    lane: object = None


def warp_partition(M, N, num_warps, policy, span=None):
    """(warp_m, warp_n) for a block tile, following ``T.GemmWarpPolicy``."""
    options = []
    for wm in range(1, num_warps + 1):
        if num_warps % wm:
            continue
        wn = num_warps // wm
        if M % (16 * wm) == 0 and N % (8 * wn) == 0:
            options.append((wm, wn))
    if policy == 1:  # FullRow: as many warps as possible along M
        options.sort(key=lambda p: -p[0])
    elif policy == 2:  # FullCol
        options.sort(key=lambda p: -p[1])
    else:  # Square: per-warp tiles as square as possible
        options.sort(key=lambda p: (abs(M / p[0] - N / p[1]), -p[0]))
    if not options:
        raise LoweringError(
            "TL0103", f"No valid warp partition: T.gemm cannot split a {M}x{N} tile over {num_warps} warps: "
            f"each warp needs a multiple of 16 rows and 8 columns", span)
    return options[0]


WGMMA_DTYPES = {("float16", "float32"), ("bfloat16", "float32"), ("float16", "float16")}
WGMMA_FP8 = ("float8_e4m3fn", "float8_e4m3", "float8_e5m2")


def _least_padding_vector(widest: int, total: int, threads: int) -> int:
    """The vector width (``widest`` halved down to 1) whose partition of ``total`` iterations over
    ``threads`` threads pads the fewest iterations; the wider one on a tie (upstream's choice for
    loops without fragments)."""
    best, pad = widest, None
    v = widest
    while v >= 1:
        part = threads * v
        p = -(-total // part) * part - total
        if pad is None or p < pad:
            best, pad = v, p
        v //= 2
    return best


def gemm_k_step(dtype: str) -> int:
    """The K a T.gemm must be a multiple of, on either tensor-core path: 8 for float32 (tf32's
    m16n8k8 / m64nNk8), 64 for int4 (m16n8k64), 16 otherwise (8-bit wgmma checks its own 32)."""
    return 8 if dtype == "float32" else 64 if dtype in targets.INT4 else 16


def wgmma_blocker(info: KernelInfo, stmt, region=None, split_n: bool = True, narrow: bool = False) -> str | None:
    """Why this ``T.gemm`` cannot lower to wgmma (None: it can). sm_90a only; the conditions are
    those of ``tl::wgmma_gemm_ss/rs``: 16-bit operands (8-bit or T.tfloat32 ones K-major),
    warpgroups splitting M into 64-row multiples (or, where M is too small, N too: ``wgmma_split``) with every thread of the block
    (of its thread region, ``region``, which must start at a multiple of its warpgroups) taking
    part, N <= 256 per warpgroup (wider: ``_wide_n_blocker``), whole 2-D shared operands (in a thread
    region or a T.wgmma_gemm also one stage of a staged buffer, or slabs of one:
    ``wgmma_subtile``). ``narrow`` (off with ``tl.disable_wgmma_narrow_slabs``): an N-major B whose warpgroup
    columns are narrower than its row's swizzle slabs may take narrower slabs (a whole buffer)."""
    args = stmt.value.args
    a, b, c = (decode_region(x) for x in args[:3])
    trans_a = bool(int(args[3].value))
    T = region.count if region is not None else info.num_threads
    ash = [const_int(e) for e in a.nonunit()[1]]
    bsh = [const_int(e) for e in b.nonunit()[1]]
    csh = [const_int(e) for e in c.nonunit()[1]]
    if None in ash + bsh + csh or len(ash) != 2 or len(bsh) != 2 or len(csh) != 2:
        return "operand shapes are not constant 2-D tiles"
    M, N = csh
    K = ash[0] if trans_a else ash[-1]
    da, db, dc = str(a.buffer.dtype), str(b.buffer.dtype), str(c.buffer.dtype)
    fp8 = da in WGMMA_FP8 and db in WGMMA_FP8
    # tf32 (m64nNk8), as upstream: operands declared T.tfloat32 (float32 ones stay on mma.sync,
    # which rounds them to tf32); A in shared memory or in registers
    tf32 = da == db == dc == "float32" and a.buffer in info.tfloat32 and b.buffer in info.tfloat32
    if fp8 and dc not in ("float32", "float16"):
        return f"8-bit wgmma accumulates in float32 (or float16), got {dc}"
    if (fp8 or tf32) and (trans_a or not bool(int(args[4].value))):
        return (f"{'8-bit' if fp8 else 'tf32'} wgmma reads both operands K-major (A as M x K, B as N x K: "
                "transpose_B=True)")
    if fp8:
        # m64nNk32 on 8-bit floats (any e4m3 / e5m2 pairing): A in shared memory too
        if scope_of(a.buffer) not in SHARED_SCOPES:
            return "an 8-bit wgmma A operand must be in shared memory"
        if K % 32:
            return f"K={K} is not a multiple of 32 (8-bit wgmma's k-step)"
        if da != db and is_wgmma_gemm(stmt):
            return f"T.wgmma_gemm takes one 8-bit type for both operands, got {da} and {db} (T.gemm takes mixed ones)"
    elif not tf32 and (da != db or (da, dc) not in WGMMA_DTYPES):
        return (f"wgmma needs float16/bfloat16 operands with float32 (or float16) accumulation (or "
                f"T.tfloat32 ones), got {da}->{dc}")
    if T % 128:
        return f"{T} threads are not whole warpgroups"
    wg = T // 128
    forced = is_wgmma_gemm(stmt)
    split = wgmma_split(M, N, wg, bool(int(args[4].value)), dc, nbytes(db), forced, K, split_n, narrow,
                        info.num_threads)
    if isinstance(split, str):
        return split
    if narrow_b_slab_bytes(N, split[1], bool(int(args[4].value)), nbytes(db)) and (
            forced or region is not None or scope_of(b.buffer) not in SHARED_SCOPES or len(b.buffer.shape) != 2
            or wgmma_column_slice(b) is not None):
        return (f"an N-major B split over {split[1]} warpgroups along N needs narrower swizzle slabs, which "
                "only a whole 2-D shared buffer read by a plain T.gemm takes")
    if region is not None and region.first % (128 * wg):
        return (f"its thread region starts at thread {region.first}, not at a multiple of its {wg} "
                f"warpgroup(s)")
    if K % gemm_k_step(da):
        return f"K={K} is not a multiple of {gemm_k_step(da)} (wgmma's k-step for {da})"
    for r in (a, b):
        if scope_of(r.buffer) in SHARED_SCOPES:
            shape = [const_int(x) for x in r.buffer.shape]
            k_major = (not trans_a) if r is a else bool(int(args[4].value))
            if region is not None or (forced and len(shape) > 2):
                why = wgmma_subtile(r, k_major, K, forced)
                if why:
                    return why
                shape = shape[-2:]
            elif forced and len(shape) == 2 and wgmma_k_slice(r, k_major, K) is not None:
                why = wgmma_k_slice(r, k_major, K)
                if why:
                    return why
            elif len(shape) == 2 and wgmma_column_slice(r) is not None:
                # a column slice (``Q_shared[:, :512]``, ``Q_shared[:, 512:]``): laid out as a buffer of
                # its own shape (``wgmma_column_slice``); the gemms sharing the buffer must agree on
                # its slabs (``wgmma_slab_conflict``)
                why = wgmma_column_slice(r)
                if why:
                    return why
            elif len(shape) != 2 or any(const_int(x) != 0 for x in r.starts) or \
                    [const_int(x) for x in r.extents][-2:] != shape:
                return f"'{r.buffer.name}' is used in part (wgmma operands are whole 2-D shared buffers)"
            if shape[0] % 8 or (shape[1] * nbytes(str(r.buffer.dtype))) % 32:
                return f"'{r.buffer.name}' {shape}: rows must be a multiple of 8 and of 32 bytes"
        elif r is b:
            return "B must be in shared memory"
        elif trans_a:
            return "a register A operand cannot be transposed"
    return None


def _whole_swizzlable(r) -> bool:
    """A 2-D shared tile used whole, rows a multiple of 32 bytes (gemm_sm80.h's swizzle applies)."""
    shape = [const_int(x) for x in r.buffer.shape]
    if len(shape) != 2 or None in shape or (shape[1] * nbytes(str(r.buffer.dtype))) % 32:
        return False
    return all(const_int(x) == 0 for x in r.starts) and [const_int(x) for x in r.extents] == shape


def wgmma_sp_blocker(stmt, num_threads: int) -> str | None:
    """Why a T.gemm_sp cannot take sparse wgmma (m64nNk32, ``tl::wgmma_sp_gemm_ss``), or None: whole
    2-D shared A and B tiles (A's K/2 and B's contiguous extent multiples of 16 elements), float32
    accumulation, N <= 256 and whole warpgroups splitting M into 64-row multiples."""
    args = stmt.value.args
    a, e, b, c = (decode_region(x) for x in args[:4])
    trans_b = bool(int(args[4].value))
    if num_threads % 128:
        return f"{num_threads} threads are not whole warpgroups"
    if str(c.buffer.dtype) != "float32":
        return "the accumulator is not float32"
    for r in (a, b):
        shape = [const_int(x) for x in r.buffer.shape]
        if len(shape) != 2 or None in shape or any(const_int(x) != 0 for x in r.starts) or \
                [const_int(x) for x in r.extents] != shape:
            return f"'{r.buffer.name}' is not a whole 2-D tile"
        if shape[1] % 16:
            return f"'{r.buffer.name}' rows of {shape[1]} elements are not a multiple of 16"
    M = const_int(a.buffer.shape[0])
    N = const_int(b.buffer.shape[0 if trans_b else 1])
    wg = num_threads // 128
    if M % (64 * wg):
        return f"M={M} does not split into 64-row blocks over {wg} warpgroup(s)"
    if N > 256 or N % 8:
        return f"N={N} is not a multiple of 8 up to 256"
    return None


def wgmma_inst_n(N: int) -> int:
    """The wgmma instruction width for a block tile N wide (``wgmma_inst_n`` of src/tl/gemm_sm90.h):
    N itself up to 256, past it the widest multiple of 16 up to 256 dividing N (0: none)."""
    if N <= 256:
        return N
    return next((w for w in range(256, 15, -16) if N % w == 0), 0)


def _wide_n_blocker(N: int, trans_b: bool, forced: bool) -> str | None:
    """Why a block tile N > 256 wide cannot be a row of wgmma instructions (None: it can): each
    instruction takes a W-column slice of B and of the accumulator, W = ``wgmma_inst_n(N)``."""
    inst = wgmma_inst_n(N)
    if forced:
        return f"N={N} is past wgmma's 256 (T.wgmma_gemm issues one instruction width)"
    if N > 512 or inst < 64:
        return f"N={N} out of wgmma's range (it would take {N // inst if inst else 'no'} instructions per k-step)"
    if not trans_b and inst % (wgmma_swizzle_bytes(N * 2) // 2):
        return f"N={N}: an N-major B splits into {inst}-column instructions, which are not whole swizzle slabs"
    return None


SPLIT_N_KEY = "tl.enable_wgmma_split_n"
MIX_KEY = "tl.disable_wgmma_mix"


def budget_fallbacks(layouts) -> list:
    """Pass configs to plan ``layouts``' kernel again with when its lowering exceeds the
    shared-memory budget, in order (engine.pipeline, analysis.resources): wgmma warpgroups
    splitting M only (those splitting N need cross-warpgroup reduction workspaces), then every
    gemm on mma.sync in a kernel that mixes the two (wgmma's tiles are 1024-byte aligned)."""
    out = []
    if any(getattr(p, "warpgroups_n", 1) > 1 for p in layouts.gemms.values()):
        out.append({SPLIT_N_KEY: False})
    if layouts.mixed:
        out.append({MIX_KEY: True})
    return out


def _sixteen_bit(gemm) -> bool:
    """Whether a gemm's operands are 16-bit (the mma.sync path that reads the wgmma slab layout)."""
    return all(nbytes(str(decode_region(x).buffer.dtype)) == 2 for x in gemm.value.args[:2])


def narrow_b_slab_bytes(N: int, wn: int, trans_b: bool, eb: int) -> int:
    """The slab width (bytes) an N-major B of N ``eb``-byte columns needs when ``wn`` warpgroups
    split N into columns that are not whole slabs of its row's swizzle (N=64 16-bit columns over
    two warpgroups: 32 columns each, 64-byte slabs instead of 128): the swizzle width of one
    warpgroup's columns. 0 when the row's own slabs do (or B is K-major, or N is not split)."""
    if wn == 1 or trans_b or N % wn:
        return 0
    nw = N // wn
    if nw % max(1, wgmma_swizzle_bytes(N * eb) // eb) == 0:
        return 0
    return wgmma_swizzle_bytes(nw * eb)


NARROW_SLAB_KEY = "tl.disable_wgmma_narrow_slabs"   # pass config: no narrow_b_slab_bytes (on by default)


# Registers one wgmma instruction needs beside its accumulator slice (descriptors, addresses, a
# register A's k-step): ptxas asked for 154 to issue an m64n256 float32 one (128 accumulators).
WGMMA_INST_OVERHEAD_REGS = 32


def thread_register_cap(threads: int) -> int:
    """The registers a thread may hold under ``__launch_bounds__(threads)``: 64K a block, in steps
    of 8, at most 255 (a warp-specialised kernel of at most 256 threads gains a producer warpgroup
    and raises its consumers' registers with setmaxnreg, so counts from ``threads + 128``)."""
    launched = threads + 128 if threads <= 256 else threads
    return min(255, 65536 // launched // 8 * 8)


def wgmma_split(M: int, N: int, wg: int, trans_b: bool, dc: str, eb: int, forced: bool = False, K: int = 16,
                split_n: bool = True, narrow: bool = False, threads: int | None = None):
    """How ``wg`` warpgroups share an M x N wgmma tile: ``(warpgroups_m, warpgroups_n)``, or why
    they cannot (a str). All of them split M into 64-row multiples when M allows it (the only
    arrangement before N splits existed, kept so those kernels do not change); otherwise the most
    along M that still splits it, the rest splitting N into ``NW = N / warpgroups_n`` columns each
    (a multiple of 8, of 16 for a float16 accumulator; with an N-major B, whole swizzle slabs of
    its ``eb``-byte elements, or with ``narrow`` slabs as wide as its own columns:
    ``narrow_b_slab_bytes``), which every warpgroup covers with m64nNWk16 instructions.
    ``threads`` (the block's): an arrangement whose instruction's accumulator slice does not fit
    the registers a thread has (``thread_register_cap``: 512 threads leave 128, and an m64n256
    float32 instruction needs about 154) is passed over, so 256 x 256 on four warpgroups issues
    m64n128 on a 2 x 2 split instead of an instruction ptxas cannot allocate.
    ``split_n=False``: M only (``infer_layouts``' retry)."""
    step = 16 if dc == "float16" else 8
    cap = thread_register_cap(threads) if threads else 255
    why = None
    for wm in [d for d in range(wg, 0, -1) if wg % d == 0 and (split_n or d == wg)]:
        wn = wg // wm
        if M % (64 * wm):
            why = why or f"M={M} does not split into 64-row blocks over {wg} warpgroup(s)"
            continue
        if N % wn or (N // wn) % step:
            why = (f"M={M} does not split into 64-row blocks over {wg} warpgroup(s), nor N={N} into "
                   f"multiples of {step} columns over {wn}") if wn > 1 else f"N={N} / K={K} out of wgmma's range"
            continue
        NW = N // wn
        inst_regs = wgmma_inst_n(NW) // (4 if dc == "float16" else 2)
        if inst_regs + WGMMA_INST_OVERHEAD_REGS > cap:
            why = (f"an m64n{wgmma_inst_n(NW)} instruction over {wm} x {wn} warpgroups needs about "
                   f"{inst_regs + WGMMA_INST_OVERHEAD_REGS} registers a thread, and {threads} threads leave {cap}")
            continue
        if wn > 1 and not trans_b and NW % max(1, wgmma_swizzle_bytes(N * eb) // eb) and not (
                narrow and NW <= 256 and narrow_b_slab_bytes(N, wn, trans_b, eb)):
            why = (f"M={M} does not split into 64-row blocks over {wg} warpgroup(s), and an N-major B "
                   f"does not split into whole swizzle slabs over {wn} warpgroups along N")
            if NW <= 256 and narrow_b_slab_bytes(N, wn, trans_b, eb):
                why += " (narrower slabs would, but tl.disable_wgmma_narrow_slabs is set)"
            continue
        if NW > 256:
            wide = _wide_n_blocker(NW, trans_b, forced)
            slab = max(1, wgmma_swizzle_bytes(N * eb) // eb)     # B's slabs are those of all N columns
            if not wide and wn > 1 and not trans_b and wgmma_inst_n(NW) % slab:
                wide = f"N={N}: an N-major B splits into instructions that are not whole swizzle slabs"
            if wide:
                why = wide
                continue
        return wm, wn
    return why


def is_wgmma_gemm(stmt) -> bool:
    """A ``T.wgmma_gemm`` (``tl.gemm`` with wg_wait -1): forced wgmma, issued without a wait."""
    args = stmt.value.args
    return len(args) > 8 and const_int(args[8]) == -1


def wgmma_swizzle_bytes(contiguous_bytes: int) -> int:
    """The wgmma swizzle width (128, 64 or 32 bytes) for a contiguous extent; 0 when none fits."""
    return next((w for w in (128, 64, 32) if contiguous_bytes % w == 0), 0)


def wgmma_k_slice(r, k_major: bool, K: int):
    """For a ``T.wgmma_gemm`` shared operand: None when it is the whole buffer, "" when it is a
    usable slice along K of a K-major operand (all rows, columns ``[k0, k0 + K)`` with ``k0`` a
    provable multiple of the swizzle width chosen from ``K``), else why not."""
    shape = [const_int(x) for x in r.buffer.shape]
    starts = [const_int(x) for x in r.starts]
    extents = [const_int(x) for x in r.extents]
    if starts[-2:] == [0, 0] and extents[-2:] == shape[-2:]:
        return None
    name = r.buffer.name
    if not k_major:
        return f"'{name}' is sliced, but a transposed (M/N-major) wgmma operand must be a whole buffer"
    if starts[-2] != 0 or extents[-2] != shape[-2]:
        return f"'{name}' is sliced along its rows; a wgmma operand slice keeps every row"
    sw = wgmma_swizzle_bytes(K * nbytes(str(r.buffer.dtype)))
    if not sw or (shape[-1] * nbytes(str(r.buffer.dtype))) % sw:
        return f"'{name}' {shape}: a K={K} slice needs rows of whole {sw or 32}-byte swizzle atoms"
    return _slice_start_why(r, sw // nbytes(str(r.buffer.dtype)))


def _slice_start_why(r, width: int) -> str:
    """"" when the column slice ``r`` starts at a provable multiple of ``width``, else why not."""
    c0 = const_int(r.starts[-1])
    ok = c0 % width == 0 if c0 is not None else \
        tvm.arith.Analyzer().can_prove(tirx.floormod(r.starts[-1], width) == 0)
    return "" if ok else f"'{r.buffer.name}' slice starts at column {r.starts[-1]}, not a provable multiple of {width}"


def wgmma_column_slice(r):
    """For a plain ``T.gemm`` 2-D shared operand: None when it is the whole buffer, "" when it is a
    usable column slice (every row, columns ``[c0, c0 + n)`` with ``c0`` a provable multiple of the
    slab width chosen from ``n``, the swizzle width of its ``n`` contiguous elements, and rows of
    whole slabs of that width), else why not. Laid out in slabs of that width, such a slice is
    byte for byte a buffer of its own shape: a K slice of a K-major operand, or an M/N slice of
    an M/N-major one, which ``tl::wgmma_gemm_ss/rs`` read from the slice's first slab."""
    shape = [const_int(x) for x in r.buffer.shape]
    starts = [const_int(x) for x in r.starts]
    extents = [const_int(x) for x in r.extents]
    if starts[-2:] == [0, 0] and extents[-2:] == shape[-2:]:
        return None
    name = r.buffer.name
    if starts[-2] != 0 or extents[-2] != shape[-2]:
        return f"'{name}' is sliced along its rows; a wgmma operand slice keeps every row"
    e = nbytes(str(r.buffer.dtype))
    sw = wgmma_swizzle_bytes(extents[-1] * e) if extents[-1] is not None else 0
    if not sw or (shape[-1] * e) % sw:
        return f"'{name}' {shape}: a {extents[-1]}-column slice needs rows of whole {sw or 32}-byte swizzle slabs"
    return _slice_start_why(r, sw // e)


def _slice_slab_bytes(r) -> int:
    """The slab width (bytes) a 2-D column slice of a wgmma operand needs its buffer to have (the
    swizzle width of its columns), or 0 when ``r`` is no such slice."""
    if len(r.buffer.shape) != 2 or wgmma_column_slice(r) != "":
        return 0
    return wgmma_swizzle_bytes(const_int(r.extents[-1]) * nbytes(str(r.buffer.dtype)))


def wgmma_slab_conflict(gemms, regions) -> str | None:
    """Why the plain ``T.gemm`` column slices of the kernel cannot all take wgmma (None: they can).
    A slice reads its buffer as slabs as wide as the swizzle of its own columns; every other wgmma
    operand on that buffer (a whole buffer: the swizzle of its row; another slice: of its columns)
    must read the same slabs, since one buffer has one layout. Only buffers that a plain gemm
    (outside thread regions) reads as a slice are checked: T.wgmma_gemm's own slices keep their
    rules."""
    uses = {}       # buffer -> [(slab bytes, gemm, whether a plain gemm's slice)]
    for g in gemms:
        args = g.value.args
        a, b = (decode_region(x) for x in args[:2])
        for r in (a, b):
            if scope_of(r.buffer) not in SHARED_SCOPES or len(r.buffer.shape) != 2:
                continue
            e = nbytes(str(r.buffer.dtype))
            sliced = _slice_slab_bytes(r)
            row = const_int(r.buffer.shape[-1])
            width = sliced or (wgmma_swizzle_bytes(row * e) if row is not None else 0)
            plain = bool(sliced) and not is_wgmma_gemm(g) and regions.get(g) is None
            uses.setdefault(r.buffer, []).append((width, g, plain))
    for buf, rows in uses.items():
        if not any(plain for _, _, plain in rows):
            continue
        widths = sorted({w for w, _, _ in rows})
        if len(widths) > 1:
            lines = ", ".join(f"line {span_line(g.span)}: {w} bytes" for w, g, _ in rows)
            return (f"the gemms reading '{buf.name}' need different wgmma slab widths ({lines}); a slice "
                    f"is read as slabs as wide as the swizzle of its columns")
    return None


def wgmma_subtile(r, k_major: bool, K: int, forced: bool) -> str | None:
    """For a wgmma shared operand in a thread region (or of a T.wgmma_gemm) that may be part of a
    buffer: None or "" when it is usable, else why not. Usable: a single index in every leading
    dimension (one stage of a ``[stages, rows, cols]`` buffer) and, in the last two, either the
    whole tile, or (a T.wgmma_gemm K-major operand) a K slice as ``wgmma_k_slice`` takes, or every
    row and a column range that is whole slabs of the buffer's own slab layout (the swizzle width
    chosen from the slice's row equals the buffer's, and the slice starts at a provable multiple
    of it): such a slice is laid out byte for byte as a buffer of its own shape."""
    shape = [const_int(x) for x in r.buffer.shape]
    extents = [const_int(x) for x in r.extents]
    name = r.buffer.name
    if len(shape) < 2 or None in shape:
        return f"'{name}' is not a constant tile of at least 2 dimensions"
    if any(e != 1 for e in extents[:-2]):
        return f"'{name}' is used over more than one index of its leading dimensions"
    starts = [const_int(x) for x in r.starts[-2:]]
    if starts == [0, 0] and extents[-2:] == shape[-2:]:
        return None
    if forced and k_major:
        return wgmma_k_slice(r, k_major, K)
    if starts[0] != 0 or extents[-2] != shape[-2]:
        return f"'{name}' is sliced along its rows; a wgmma operand slice keeps every row"
    e = nbytes(str(r.buffer.dtype))
    sw = wgmma_swizzle_bytes(shape[-1] * e)
    if not sw or extents[-1] is None or wgmma_swizzle_bytes(extents[-1] * e) != sw:
        return (f"'{name}' columns [{r.starts[-1]}, +{r.extents[-1]}): a wgmma operand slice must be whole "
                f"{sw or 32}-byte slabs of the buffer's rows")
    width = sw // e
    ok = starts[1] % width == 0 if starts[1] is not None else \
        tvm.arith.Analyzer().can_prove(tirx.floormod(r.starts[-1], width) == 0)
    if not ok:
        return f"'{name}' slice starts at column {r.starts[-1]}, not a provable multiple of {width}"
    return ""


def slab_stage_shape(shape, dtype: str) -> bool:
    """An epilogue stage that can take the 128-byte-swizzled slab layout: 2-D, 16-bit elements,
    rows of whole 128-byte slabs."""
    shape = [const_int(x) for x in shape]
    return len(shape) == 2 and None not in shape and nbytes(dtype) == 2 and shape[1] * 2 % 128 == 0


class _Inference:
    def __init__(self, info: KernelInfo, arch: str = "sm_80", pass_configs: dict | None = None,
                 split_n: bool = True, mix: bool = True, narrow: bool = True, convert: bool = False):
        self.info = info
        self.convert = convert      # fragment copies between two layouts convert (infer_layouts' last resort)
        self.split_n = split_n      # wgmma warpgroups may split N (wgmma_split); off: infer_layouts' retry
        self.narrow = narrow and not (pass_configs or {}).get(NARROW_SLAB_KEY)   # narrow_b_slab_bytes
        self.used_narrow = False    # some wgmma B was planned in narrow slabs (off: infer_layouts' retry)
        self.used_split_n = False   # some gemm was planned with warpgroups splitting N
        self.mix = mix              # gemms wgmma cannot take may take mma.sync beside wgmma ones
        self.wgmma_gemms = set()    # the gemms planned on wgmma (_use_wgmma)
        self.wgmma_sparse = set()   # the T.gemm_sp planned on sparse wgmma (_use_wgmma_sp)
        self.T = info.num_threads
        self.out = Layouts()
        self.gemm_operands = set()
        self.spelt_swizzles = {}   # buffer -> (its T.Layout annotation, span): the compiler's swizzle spelt out
        self.nest_vars = _nest_variables(info)
        self.guard = None       # body_guard of the T.Parallel nest being placed
        self._stepping = None   # the consumer being placed (_settle: where a conflict arose)
        self.free_indexed = set()       # fragments some T.Parallel nest indexes by other expressions
        self.fragments_of = {}          # consumer -> the fragments it touches (_awaits_reduction)
        self.broadcast = set()          # ... or by some of its variables only (``a[i]`` in a loop over i, j)
        for nest in self.nest_vars:
            loop_vars, _, body = parallel_nest(nest)
            for b, idx, _ in buffer_accesses(body):
                if scope_of(b) != FRAGMENT_SCOPE:
                    continue
                dims = _plain_dims(idx, loop_vars)
                if dims is None:
                    self.free_indexed.add(b)
                elif len(dims) < len(loop_vars):
                    self.broadcast.add(b)
        self.arch = arch
        self.configs = pass_configs or {}
        self.regions = thread_regions.regions(info)     # tile work under `if tx < n:` branches
        self.row_reduced = {}       # fragments reduced along their last dimension -> narrowest element (bytes)

    # ----- assignment with conflict detection -------------------------------------------
    def assign(self, buf, layout: Fragment, span, why: str):
        have = self.out.fragments.get(buf)
        if have is None:
            self.out.fragments[buf] = layout.renamed(buf.name)
            self.out.origin[buf] = why
            return
        if have.shape == layout.shape and have.same_as(layout):
            return
        raise LoweringError(
            "TL0201", f"layout conflict for fragment '{buf.name}': {why} needs {layout.describe()}, "
            f"but it already has {have.describe()} (from {self.out.origin.get(buf)})", span,
            notes=["Copy the tile into a second fragment (or through shared memory) to change its layout."])

    def known(self, buf):
        return self.out.fragments.get(buf)

    # ----- phase 1: gemm and annotations -------------------------------------------------
    def plan_gemm(self, stmt):
        args = stmt.value.args
        a, b, c = (decode_region(x) for x in args[:3])
        trans_a, trans_b, policy = bool(int(args[3].value)), bool(int(args[4].value)), int(args[5].value)
        span = stmt.span
        ash = [const_int(e) for e in a.nonunit()[1]]
        bsh = [const_int(e) for e in b.nonunit()[1]]
        csh = [const_int(e) for e in c.nonunit()[1]]
        if None in ash + bsh + csh or len(ash) != 2 or len(bsh) != 2 or len(csh) != 2:
            raise LoweringError("TL0101", "T.gemm operands must be 2-D tiles with constant shapes "
                                f"(got A {ash}, B {bsh}, C {csh})", span)
        M, K = (ash[1], ash[0]) if trans_a else (ash[0], ash[1])
        Kb, N = (bsh[1], bsh[0]) if trans_b else (bsh[0], bsh[1])
        if K != Kb:
            raise LoweringError("TL0101", f"T.gemm K mismatch: A gives K={K}, B gives K={Kb} "
                                f"(transpose_A={trans_a}, transpose_B={trans_b})", span)
        if csh != [M, N]:
            raise LoweringError("TL0101", f"T.gemm C must be {M}x{N} for A {ash} and B {bsh}, got {csh}", span)
        if targets.gemm_uses_fma(str(a.buffer.dtype), str(b.buffer.dtype), str(c.buffer.dtype),
                                 self.arch or "sm_90a"):
            return self.plan_gemm_fma(stmt, a, b, c, M, N, K, trans_a, trans_b)
        step = gemm_k_step(str(a.buffer.dtype))
        if K % step:
            raise LoweringError("TL0101", f"T.gemm K={K} must be a multiple of {step} for "
                                f"{'wgmma' if stmt in self.wgmma_gemms else 'mma.sync'}", span)
        if scope_of(c.buffer) != FRAGMENT_SCOPE:
            raise LoweringError("TL0002", "T.gemm accumulates into a fragment (T.alloc_fragment)", span)
        if str(a.buffer.dtype) in targets.INT4 and (trans_a or not trans_b or scope_of(a.buffer) not in SHARED_SCOPES
                                                    or scope_of(b.buffer) not in SHARED_SCOPES):
            raise LoweringError(
                "TL0102", "an int4 T.gemm reads both operands from shared memory, K-major (A as M x K, B as N x K "
                f"with transpose_B=True): ldmatrix moves their bytes, two elements each; got transpose_A={trans_a}, "
                f"transpose_B={trans_b}, A in {scope_of(a.buffer)}, B in {scope_of(b.buffer)}", span)
        line = span_line(span)
        if stmt in self.wgmma_gemms:
            split = wgmma_split(M, N, self.T // 128, trans_b, str(c.buffer.dtype), nbytes(str(b.buffer.dtype)),
                                is_wgmma_gemm(stmt), split_n=self.split_n, narrow=self.narrow, threads=self.T)
            # (a gemm in a thread region was checked against the region's warpgroups instead)
            wg, wgn = split if isinstance(split, tuple) else (self.T // 128, 1)
            self.used_split_n |= wgn > 1
            plan = GemmPlan(M, N, K, wg, wgn, trans_a, trans_b, "wgmma", wg, no_wait=is_wgmma_gemm(stmt),
                            warpgroups_n=wgn,
                            b_slab_bytes=narrow_b_slab_bytes(N, wgn, trans_b, nbytes(str(b.buffer.dtype))))
            self.out.gemms[stmt] = plan
            self.assign(c.buffer, wgmma_accumulator(M, N, wg, self.T, warpgroups_n=wgn), span,
                        f"T.gemm (line {line}, wgmma)")
            if scope_of(a.buffer) == FRAGMENT_SCOPE:
                layout = wgmma_operand_a(M, K, wg, self.T, warpgroups_n=wgn, elem_bytes=nbytes(str(a.buffer.dtype)))
                self.assign(a.buffer, _operand_a(layout, trans_a), span,
                            f"T.gemm A operand (line {line}, wgmma)")
        else:
            wm, wn = warp_partition(M, N, self.T // 32, policy, span)
            region = self.regions.get(stmt)
            if region is not None and region.first:
                # tl::gemm_ss/rs number warps from thread 0 of the block
                raise LoweringError(
                    "TL0002", f"T.gemm on mma.sync in a thread region that starts at thread {region.first}: "
                    "the mma.sync gemm runs on warps counted from thread 0 (wgmma, sm_90a, takes a region "
                    "starting at a multiple of 128 threads)", span)
            plan = GemmPlan(M, N, K, wm, wn, trans_a, trans_b)
            if self.arch and targets.parse_arch(self.arch) < 80:
                plan.entry = "mma_sync_"
            self.out.gemms[stmt] = plan
            self.assign(c.buffer, mma_accumulator(M, N, wm, wn, self.T), span, f"T.gemm (line {line})")
            if scope_of(a.buffer) == FRAGMENT_SCOPE:
                layout = mma_operand_a(M, K, wm, wn, self.T, elem_bytes=nbytes(str(a.buffer.dtype)))
                self.assign(a.buffer, _operand_a(layout, trans_a), span, f"T.gemm A operand (line {line})")
        for r in (a, b):
            if scope_of(r.buffer) in SHARED_SCOPES:
                self.require_gemm_layout(r.buffer, span)
                self.gemm_operands.add(r.buffer)
                k_major = (not trans_a) if r is a else trans_b
                if r is b and plan.kind == "wgmma" and plan.b_slab_bytes:
                    self.used_narrow = True
                    # an N-major B in slabs narrower than its row's swizzle (narrow_b_slab_bytes):
                    # every wgmma reading it reads those (Lowerer.lower_gemm passes the width where
                    # it differs from the one tl::wgmma_gemm_* derives from a whole operand's row)
                    self.set_shared(r.buffer, True, slab_bytes=plan.b_slab_bytes, span=span)
                    continue
                if plan.no_wait and wgmma_k_slice(r, k_major, K) == "":
                    # a K slice: slabs as wide as the slice's swizzle, so the slice is whole slabs
                    self.set_shared(r.buffer, True, slab_bytes=wgmma_swizzle_bytes(K * nbytes(str(r.buffer.dtype))),
                                    span=span)
                    continue
                sliced = _slice_slab_bytes(r) if plan.kind == "wgmma" and self.regions.get(stmt) is None else 0
                row_bytes = const_int(r.buffer.shape[-1]) * nbytes(str(r.buffer.dtype))
                if sliced and sliced != wgmma_swizzle_bytes(row_bytes):
                    # a plain T.gemm column slice narrower than the buffer's own slabs
                    # (wgmma_slab_conflict checked that every gemm on the buffer reads these slabs)
                    self.set_shared(r.buffer, True, slab_bytes=sliced, span=span)
                    continue
                self.set_shared(r.buffer, True)
                self.check_subtile(r, span, mma=plan.kind == "mma")

    def plan_gemm_fma(self, stmt, a, b, c, M, N, K, trans_a, trans_b):
        """A gemm on CUDA cores (lower_gemm_fma.py): its grid, C's (and a register A's) layout;
        shared operands stay row-major (the FMA loop reads them unswizzled)."""
        span, line = stmt.span, span_line(stmt.span)
        if scope_of(c.buffer) != FRAGMENT_SCOPE:
            raise LoweringError("TL0002", "T.gemm accumulates into a fragment (T.alloc_fragment)", span)
        grid = fma_plan(M, N, K, self.T, str(a.buffer.dtype))
        plan = GemmPlan(M, N, K, 1, 1, trans_a, trans_b, "fma", fma=grid)
        self.out.gemms[stmt] = plan
        self.assign(c.buffer, fma_accumulator(M, N, grid, self.T), span, f"T.gemm (line {line}, FMA)")
        if scope_of(a.buffer) == FRAGMENT_SCOPE:
            self.assign(a.buffer, _operand_a(fma_operand_a(M, K, grid, self.T), trans_a), span,
                        f"T.gemm A operand (line {line}, FMA)")
        for r in (a, b):
            if scope_of(r.buffer) in SHARED_SCOPES:
                have = self.out.shared.get(r.buffer)
                if have is not None and getattr(have, "swizzle", False) and have.group > 1:
                    raise LoweringError("TL0201", f"'{r.buffer.name}' is read row-major by an FMA T.gemm, "
                                        "but it has a swizzled layout", span)
                if have is None:
                    self.set_shared(r.buffer, False)
        return plan

    def plan_gemm_sp(self, stmt):
        """T.gemm_sp (mma.sp m16n8k32, ``tl::gemm_sp_ss``): the mma.sync accumulator layout; whole
        A and B tiles with rows of 32-byte multiples get the mma operands' swizzle, the rest (E,
        parts of tiles) stays row-major."""
        args = stmt.value.args
        a, e, b, c = (decode_region(x) for x in args[:4])
        trans_b, policy = bool(int(args[4].value)), int(args[5].value)
        span = stmt.span
        shapes = [[const_int(x) for x in r.nonunit()[1]] for r in (a, e, b, c)]
        if any(None in sh or len(sh) != 2 for sh in shapes):
            raise LoweringError("TL0101", "T.gemm_sp operands must be 2-D tiles with constant shapes "
                                f"(got A {shapes[0]}, E {shapes[1]}, B {shapes[2]}, C {shapes[3]})", span)
        (M, kh), (Me, ke), bsh, (Mc, N) = shapes
        K = 2 * kh
        Kb, Nb = (bsh[1], bsh[0]) if trans_b else (bsh[0], bsh[1])
        da, db = str(a.buffer.dtype), str(b.buffer.dtype)
        ebits = int(tvm.DataType(str(e.buffer.dtype)).bits)
        why = None
        if (M, N) != (Mc, Nb) or K != Kb or Me != M:
            why = f"shapes do not agree: A_sparse {shapes[0]} (K={K}), E {shapes[1]}, B {bsh}, C {shapes[3]}"
        elif da != db or da not in ("float16", "bfloat16"):
            why = f"mma.sp here takes float16/bfloat16 A and B of one type, got {da} and {db}"
        elif str(c.buffer.dtype) not in ("float32",) + (("float16",) if da == "float16" else ()):
            why = f"the accumulator must be float32 (or float16 for float16 inputs), got {c.buffer.dtype}"
        elif ebits not in (8, 16, 32) or "int" not in str(e.buffer.dtype) or ke * ebits != K:
            why = f"E must be an 8/16/32-bit integer tile of K*{ebits}/... = {K // ebits} columns per row, got {ke}"
        elif K % 32:
            why = f"K={K} must be a multiple of 32 (one mma.sp step)"
        elif any(scope_of(r.buffer) not in SHARED_SCOPES for r in (a, e, b)):
            why = "A_sparse, E and B must be in shared memory"
        elif scope_of(c.buffer) != FRAGMENT_SCOPE:
            why = "C must be a fragment (T.alloc_fragment)"
        if why:
            raise LoweringError("TL0101", f"T.gemm_sp: {why}", span)
        if stmt in self.wgmma_sparse:
            wg = self.T // 128
            plan = GemmPlan(M, N, K, wg, 1, False, trans_b, "wgmma_sp", wg)
            self.out.sparse_gemms[stmt] = plan
            self.assign(c.buffer, wgmma_accumulator(M, N, wg, self.T), span,
                        f"T.gemm_sp (line {span_line(span)}, wgmma)")
            for r in (a, b):    # the wgmma slab layout (whole tiles: wgmma_sp_blocker)
                self.require_gemm_layout(r.buffer, span)
                self.gemm_operands.add(r.buffer)
                self.set_shared(r.buffer, True, slab=True)
            if e.buffer not in self.out.shared:
                self.set_shared(e.buffer, False)
            return
        wm, wn = warp_partition(M, N, self.T // 32, policy, span)
        plan = GemmPlan(M, N, K, wm, wn, False, trans_b, "mma_sp")
        self.out.sparse_gemms[stmt] = plan
        self.assign(c.buffer, mma_accumulator(M, N, wm, wn, self.T), span, f"T.gemm_sp (line {span_line(span)})")
        for r in (a, e, b):
            if r.buffer not in self.out.shared:
                # whole 16-byte-row A and B tiles take the mma operands' XOR swizzle (ldmatrix
                # without bank conflicts in tl::gemm_sp_ss); E, and parts of tiles, row-major
                self.set_shared(r.buffer, r is not e and _whole_swizzlable(r))

    def set_shared(self, buf, swizzle: bool, slab: bool = False, slab_bytes: int = 0, span=None):
        shape = tuple(const_int(s) for s in buf.shape)
        slab = swizzle and (slab or buf in self.gemm_operands) and self.out.wgmma
        have = self.out.shared.get(buf)
        if not slab_bytes and isinstance(have, SharedLayout) and have.slab_bytes:
            slab_bytes = have.slab_bytes    # a T.wgmma_gemm K slice chose the slab width
        elif slab_bytes and isinstance(have, SharedLayout) and have.slab_bytes not in (0, slab_bytes):
            raise LoweringError("TL0002", f"'{buf.name}' is read by wgmma gemms that need {have.slab_bytes}- and "
                                f"{slab_bytes}-byte swizzle slabs; one buffer has one layout", span,
                                notes=["Use a separate shared buffer for each gemm (or leave out "
                                       "set tl.disable_wgmma_narrow_slabs, which gives those gemms mma.sync)."])
        bits = dtype_bits(str(buf.dtype))
        self.out.shared[buf] = SharedLayout(shape, nbytes(str(buf.dtype)), swizzle, slab, slab_bytes,
                                            bits if bits < 8 else 0)

    def check_subtile(self, region, span, mma=False):
        """A gemm on part of a swizzled buffer must start where the XOR pattern restarts (an
        mma.sync operand: at any 16-byte chunk of the row, ``tl::gemm_ss``'s chunk offset)."""
        layout = self.out.shared[region.buffer]
        starts = list(region.starts)
        if len(starts) < 2 or all(const_int(x) == 0 for x in starts):
            return
        row, col = starts[-2], starts[-1]
        col_period = layout.vector if mma else layout.group * layout.vector
        # (a start that moves with a loop, ``h * 64``: a multiple whatever the loop's value)
        ana = tvm.sym.Analyzer()
        if not (ana.can_prove(tirx.floormod(row, 8) == 0) and ana.can_prove(tirx.floormod(col, col_period) == 0)):
            raise LoweringError(
                "TL0002", f"T.gemm on a sub-tile of '{region.buffer.name}' starting at row {row}, column "
                f"{col}: the swizzled layout needs starts that are multiples of 8 (row) and {col_period} "
                "(column)", span,
                notes=["Use separate shared buffers per sub-tile, or align the slice."])

    def require_gemm_layout(self, buf, span):
        have = self.out.shared.get(buf)
        if isinstance(have, SharedLayout) and have.slab_bytes:
            return      # slabs a gemm's slice chose (plan_gemm), not an annotation
        if have is not None and (isinstance(have, CustomSharedLayout) or have.group != SharedLayout(
                have.shape, have.elem_bytes, True, elem_bits=have.elem_bits).group):
            raise LoweringError("TL0201", f"'{buf.name}' is a T.gemm operand, which needs the swizzled shared "
                                f"layout, but T.annotate_layout gave it {have.describe()}", span,
                                notes=["Drop the annotation (gemm operands are swizzled automatically) or use "
                                       "tilelang.layout.make_swizzled_layout."])

    def annotate(self, stmt):
        args = stmt.value.args
        buf = args[0].source
        kind = str(args[1].value)
        if scope_of(buf) == "local":
            # A per-thread buffer (T.alloc_local / T.alloc_var): every thread has all of it, so a
            # layout changes nothing; upstream code annotates such buffers and we accept it.
            return
        if kind == "fragment" or scope_of(buf) == FRAGMENT_SCOPE:
            layout = _annotated_fragment(buf, args, kind, self.T, stmt.span)
            self.assign(buf, layout, stmt.span, f"T.annotate_layout (line {span_line(stmt.span)})")
            return
        if scope_of(buf) == "global":
            # (kernel.apply_global_layouts addresses the tensor through the layout)
            return
        if scope_of(buf) not in SHARED_SCOPES:
            raise LoweringError("TL0002", f"T.annotate_layout on '{buf.name}': only shared-memory and fragment "
                                "layouts can be annotated", stmt.span)
        if kind == "custom":
            n = int(args[2].value)
            shape = [const_int(x) for x in buf.shape]
            try:
                outputs = [unpack_layout_expr(e, n) for e in args[3:]]
                layout = CustomSharedLayout(shape, nbytes(str(buf.dtype)), outputs)
            except ValueError as err:
                raise LoweringError("TL0201", f"T.Layout for '{buf.name}': {err}", stmt.span) from None
            # The compiler's own swizzle spelt as a T.Layout (upstream's bank swizzles, as a
            # wgmma operand's slabs or, where the row is as wide as their pattern, also the
            # mma.sync one): that layout, which gemms and TMA copies know. The gemm planning may
            # pick the buffer's slabs; run() checks that they are still the annotation's.
            self.out.shared[buf] = layout
            if len(shape) >= 2:
                self.set_shared(buf, True)
                swizzle = self.out.shared[buf]
                if any(layout.places_like(replace(swizzle, slab=s)) for s in (False, True)):
                    self.spelt_swizzles[buf] = (layout, stmt.span)
                else:
                    self.out.shared[buf] = layout
        else:
            self.set_shared(buf, kind == "swizzle")
        if buf in self.gemm_operands:
            self.require_gemm_layout(buf, stmt.span)

    # ----- phase 2: consumers --------------------------------------------------------------
    def try_parallel(self, stmt, force: bool) -> bool:
        loop_vars, extents, body = parallel_nest(stmt)
        ext = [const_int(e) for e in extents]
        accesses = [(b, idx, w) for b, idx, w in buffer_accesses(body) if scope_of(b) == FRAGMENT_SCOPE]
        if None in ext:
            # A dynamic extent (``T.Parallel(T.min(n, 512))``) over memory only: the loop layout
            # spans a constant upper bound, the lowering guards the iterations past the extent.
            bound = [_upper_bound(e) for e in extents]
            if accesses or None in bound:
                raise LoweringError("TL0603", "T.Parallel extents must be compile-time constants (or, for a "
                                    "loop that touches no fragment, have a constant upper bound or be a 1-D loop)",
                                    stmt.span)
            self.out.loops[loop_vars[0]] = self.default_loop_layout(body, bound, [], loop_vars[-1],
                                                                    _coalesced_width(stmt))
            return True
        frags = [(b, idx) for b, idx, _ in accesses]
        if LOOP_LAYOUT_ATTR in stmt.annotations:
            if not force and any(self.known(b) is None for b, _ in frags) and any(
                    self.known(b) is not None for b, _ in frags):
                return False    # (its other fragments may be placed by another statement first)
            layout = self._user_loop_layout(stmt, ext, accesses, loop_vars)
            self.out.loops[loop_vars[0]] = layout
            self._place_frags(stmt, layout, frags, accesses, loop_vars, ext)
            return True
        layout = None
        for b, idx in frags:
            if _is_exact(idx, loop_vars) and self.known(b) is not None and list(self.known(b).shape) == ext:
                layout = self.known(b)
                break
        staging = VIEW_STAGING in stmt.annotations and all(self.known(b) is not None
                                                           for b, _, w in accesses if not w)
        if layout is None and frags and not force and not staging and any(
                self.known(b) is None for b, _ in frags) and not any(
                self.known(b) is not None and _dictates(idx, loop_vars, b, ext) and (
                    w or self.known(b).replication < self.T) for b, idx, w in accesses):
            # (a loop touching a known fragment through another index, or over part of it, decides
            # now, as upstream's does: writing ``t[j, i] = x[i, j]`` into a gemm operand, it places
            # the fragments it reads; reading ``y[i, j] = x[i, j + 8]``, or writing ``o[i, j]`` of a
            # wider annotated ``o``, only that fragment's layout can run it, and the fragments it
            # writes follow it; a fragment every thread holds, a reducer's partials, constrains no
            # loop: that one waits)
            return False
        for b, idx in frags:
            # A fragment first met in a loop over part of it (``T.Parallel(100)`` writing ``f[i]``
            # of a (256,) fragment) takes the layout of a loop over its own shape; this loop then
            # runs each iteration on the threads that hold its element (``_loop_from_known``).
            # The loop's own layout would place only its 100 elements.
            # A known fragment of the same shape touched at the same index (``o[i, j] = x[i, j]``
            # over part of both, ``o`` annotated) gives it its layout instead: the loop then serves
            # both, as upstream's, whose loop layout places every fragment it indexes so.
            shape = [const_int(x) for x in b.shape]
            if self.known(b) is None and _is_exact(idx, loop_vars) and None not in shape and shape != ext \
                    and all(e <= x for e, x in zip(ext, shape)):
                twin = next((k for k, kidx in frags if self.known(k) is not None and _is_exact(kidx, loop_vars)
                             and [const_int(x) for x in k.shape] == shape
                             and self.known(k).replication < self.T), None)    # (not a reducer's partials)
                if twin is not None:
                    self.assign(b, self.known(twin), stmt.span, f"'{twin.name}' (the T.Parallel{tuple(ext)} loop at "
                                f"line {span_line(stmt.span)} touches both at the same index, over part of them)")
                    continue
                self.assign(b, self.default_loop_layout(body, shape, [(b, idx)]), stmt.span,
                            f"a loop over its own shape (the T.Parallel{tuple(ext)} loop at line "
                            f"{span_line(stmt.span)} covers part of it)")
        extra = self.nest_vars.get(stmt, [])
        self.guard = body_guard(body)
        if layout is None or not self._serves_known(layout, accesses, loop_vars, ext, extra):
            if layout is None:
                layout = self.default_loop_layout(body, ext, frags, loop_vars[-1], _coalesced_width(stmt))
            if not self._serves_known(layout, accesses, loop_vars, ext, extra):
                # A known fragment read (or written) through an index other than the loop
                # variables (``x[i, j // 2]``, ``s[i]`` in a shorter loop): run each iteration on
                # the threads that hold the element it touches.
                derived = self._loop_from_known(accesses, loop_vars, ext, extra)
                if derived is None:
                    b, idx = next((b, idx) for b, idx, w in accesses if self.known(b) is not None
                                  and _serves(layout, self.known(b), idx, loop_vars, ext, w, extra,
                                              self.guard) is False)
                    if _is_exact(idx, loop_vars) and list(self.known(b).shape) == ext:
                        # two fragments of the loop's shape with different layouts: a plain conflict
                        self.assign(b, layout, stmt.span, f"the T.Parallel loop at line {span_line(stmt.span)}")
                    inner = [v.name for v, _, _ in extra if _bound_inside(v, body) and
                             any(uses_vars(i, [v]) for i in idx)]
                    why = (f"the serial loop variable '{inner[0]}' inside the loop walks across the threads "
                           "that hold it" if inner else "no loop layout runs every iteration on the threads "
                           "that hold the element it touches")
                    raise LoweringError(
                        "TL0201", f"layout conflict for thread-distributed fragment '{b.name}': the "
                        f"T.Parallel{tuple(ext)} loop accesses it as {b.name}[{', '.join(map(str, idx))}], and "
                        f"{why} ({self.known(b).describe()}). Use T.reduce_sum (or another T.reduce_*) for a "
                        f"reduction, a T.Parallel loop over the fragment's own shape for elementwise work, or "
                        f"stage it through shared memory", stmt.span)
                layout = derived
        self.out.loops[loop_vars[0]] = layout
        self._place_frags(stmt, layout, frags, accesses, loop_vars, ext)
        return True

    def _place_frags(self, stmt, layout, frags, accesses, loop_vars, ext):
        """Give the fragments a T.Parallel loop touches the layouts its loop layout implies."""
        line = span_line(stmt.span)
        for b, idx in frags:
            dims = _plain_dims(idx, loop_vars)
            if dims is None:
                if self.known(b) is None:
                    self._place_from_loop(b, idx, layout, loop_vars, ext, accesses, stmt, line)
                continue
            if dims == list(range(len(loop_vars))):
                have = self.known(b)
                if have is not None and (list(have.shape) != ext or not have.same_as(layout)):
                    continue    # another shape or layout: _serves_known checked the threads hold it
                self.assign(b, layout, stmt.span, f"the T.Parallel loop at line {line}")
            elif self.known(b) is None:
                self.assign(b, project(layout, dims), stmt.span, f"the T.Parallel loop at line {line}")
            else:
                self.check_compatible(b, layout, dims, stmt.span)

    def _user_loop_layout(self, stmt, ext, accesses, loop_vars):
        """The loop layout ``T.Parallel(..., loop_layout=T.Fragment(...))`` gives, checked against
        every fragment of known layout the body touches: a read must run on a thread holding the
        element, a write on exactly the threads holding it (a write from any other thread would
        land in a register that holds another element)."""
        from tilelang.layout import UserLayoutError, build_user_fragment

        args = list(stmt.annotations[LOOP_LAYOUT_ATTR])
        n = int(args[1].value)
        declared = [int(a.value) for a in args[2:2 + n]]
        if declared != list(ext):
            raise LoweringError("TL0201", f"T.Parallel{tuple(ext)} has a loop_layout of shape {declared}; it must "
                                "have the loop's extents", stmt.span)
        try:
            layout = build_user_fragment(args, self.T, "loop layout")
        except UserLayoutError as err:
            raise LoweringError(err.code, f"the loop_layout of T.Parallel{tuple(ext)} {err}", stmt.span,
                                notes=[f"The block runs {self.T} threads."]) from None
        extra = self.nest_vars.get(stmt, [])
        for b, idx, write in accesses:
            have = self.known(b)
            if have is None:
                continue
            if _plain_dims(idx, loop_vars) is not None and not _is_exact(idx, loop_vars):
                write = False   # a broadcast operand: its reads decide
            if _serves(layout, have, idx, loop_vars, ext, write, extra, body_guard(parallel_nest(stmt)[2])) is False:
                what = ("written by threads that do not hold it, or not by every thread that holds it"
                        if write else "read by threads that do not hold it")
                raise LoweringError(
                    "TL0201", f"Layout infer conflict between fragment '{b.name}' and the loop_layout of the "
                    f"T.Parallel{tuple(ext)} loop: {b.name}[{', '.join(map(str, idx))}] is {what} "
                    f"(loop: {layout.describe()}; fragment: {have.describe()})", stmt.span,
                    notes=["Give the loop a loop_layout that runs each iteration on the threads holding the "
                           "element it touches (or drop loop_layout and let the compiler choose)."])
        return layout

    def _serves_known(self, layout, accesses, loop_vars, ext, extra=()) -> bool:
        """Every known fragment this loop touches through a non-loop-variable index (or at another
        shape) is held, for each iteration, by the thread that runs it (writes: by exactly those)."""
        for b, idx, write in accesses:
            have = self.known(b)
            if have is None or (have is layout and _is_exact(idx, loop_vars)):
                continue
            if _plain_dims(idx, loop_vars) is not None and not _is_exact(idx, loop_vars):
                write = False   # a broadcast operand (``row[i]`` in an (i, j) loop): its reads decide
            if _serves(layout, have, idx, loop_vars, ext, write, extra, self.guard) is False:
                return False    # (None: not enumerable; the fragment access check has the last word)
        return True

    def _loop_from_known(self, accesses, loop_vars, ext, extra=()):
        """A loop layout derived from a known fragment's layout through its access (upstream's
        ``ComputeLoopLayoutFromBuffer``): written fragments first, then reads; the first candidate
        that serves every known access, or None."""
        order = [a for a in accesses if a[2]] + [a for a in accesses if not a[2]]
        tried = []
        for b, idx, _ in order:
            have = self.known(b)
            if have is None or b in tried:
                continue
            tried.append(b)
            same = have if list(have.shape) == list(ext) else None   # (a guarded shifted read: b[i + 16, j])
            for cand in (_padded_loop(have, idx, loop_vars, ext), _loop_through(have, idx, loop_vars, ext, self.T),
                         same):
                if cand is not None and self._serves_known(cand, accesses, loop_vars, ext, extra):
                    return cand
        for b, idx, _ in order:
            # last: an index through an enclosing serial loop's variable (``x[i, jj * 4 + j]``), the
            # loop derived at its first value and checked at all of them
            have = self.known(b)
            if have is None or not extra:
                continue
            cand = _loop_through(have, idx, loop_vars, ext, self.T, extra)
            if cand is not None and self._serves_known(cand, accesses, loop_vars, ext, extra):
                return cand
        return None

    def _place_from_loop(self, buf, idx, layout, loop_vars, ext, accesses, stmt, line):
        """Layout of a fragment first met through a non-loop-variable index (``x[j, i]``,
        ``x[i, j // 2]``): each element on the threads whose iterations touch it (upstream's
        ``CompleteBufferFragment``); a fragment only read here that no such layout fits is
        replicated on every thread."""
        span = stmt.span
        derived = _fragment_through(layout, idx, loop_vars, ext, [const_int(s) for s in buf.shape], self.T,
                                    self.nest_vars.get(stmt, []))
        if derived is UNTOUCHED:
            raise LoweringError(
                "TL0203", f"fragment '{buf.name}' is indexed with {list(map(str, idx))} inside T.Parallel"
                f"{tuple(ext)}, which reaches only part of it: only loop variables can index a fragment whose "
                f"layout is not known yet (its other elements would have no thread)", span,
                notes=["Give the fragment its layout first (a T.copy, or a loop over its own shape)."])
        if derived is not None:
            self.assign(buf, derived, span, f"the T.Parallel loop at line {line}")
            return
        if not any(w for b, _, w in accesses if b is buf):
            shape = [const_int(s) for s in buf.shape]
            self.assign(buf, replicated_fragment(shape, self.T), span,
                        f"the T.Parallel loop at line {line} (replicated: every thread reads it)")
            return
        raise LoweringError(
            "TL0203", f"fragment '{buf.name}' is written as {buf.name}[{', '.join(map(str, idx))}] inside "
            f"T.Parallel{tuple(ext)} before its layout is known, and no layout places each element on the "
            f"threads that write it", span,
            notes=["Give the fragment its layout first (a T.copy or a loop over its own shape), or write it "
                   "with the loop variables of a loop over its own shape."])

    def default_loop_layout(self, body, ext, frags, inner=None, width=None):
        # (a loop over fragments sizes its vectors by every access: its layout places them)
        vec = max(1, 16 // _widest_vector_element(body, None if frags else inner))
        if width is not None and not frags:
            vec = max(1, min(vec, int(width)))     # T.Parallel(coalesced_width=w): w elements a thread
        if _has_barrier(body):
            vec = 1     # a barrier in the body separates phases of every element: one per thread
        while vec > 1 and ext[-1] % vec:
            vec //= 2
        if frags:
            # a loop over fragments spreads whole vectors over every thread (upstream's plan): a
            # narrower vector before replicas (T.Parallel(128) on 128 threads: one element each)
            while vec > 1 and math.prod(ext) % (self.T * vec):
                vec //= 2
        else:
            # a loop over memory only: the widest vector that leaves the fewest threads idle
            # (T.Parallel(128) on 128 threads: one element per thread, not four on one warp)
            vec = _least_padding_vector(vec, math.prod(ext), self.T)
        row = [self.row_reduced[b] for b, idx in frags
               if b in self.row_reduced and [const_int(x) for x in b.shape] == list(ext) and len(idx) == len(ext)]
        if row:
            return _row_default(ext, self.T, vec, min(row))
        return default_fragment(ext, self.T, vec)

    def check_compatible(self, buf, loop: Fragment, dims, span):
        have = self.known(buf)
        owners = loop.owners()
        coords = np.stack(np.unravel_index(owners, loop.shape), axis=-1)  # [T, L, ndim]
        if dims:
            sub = coords[..., dims]
            flat = np.ravel_multi_index(tuple(sub[..., k] for k in range(len(dims))), have.shape)
        else:   # x[0] of a one-element fragment: every thread running the loop must hold it
            flat = np.zeros(coords.shape[:-1], dtype=np.int64)
        held = have.owners()
        ok = all(np.isin(flat[t], held[t]).all() for t in range(loop.num_threads))
        if not ok:
            raise LoweringError(
                "TL0201", f"layout conflict for fragment '{buf.name}': the T.Parallel loop runs element "
                f"(i...) on threads that do not hold {buf.name}[...] ({have.describe()})", span,
                notes=["Index the fragment with the loop variables of a loop over its own shape, "
                       "or copy it through shared memory."])

    def try_reduce(self, stmt) -> bool:
        args = stmt.value.args
        src, dst = decode_region(args[0]), decode_region(args[1])
        dim = int(args[3].value)
        if scope_of(src.buffer) != FRAGMENT_SCOPE or scope_of(dst.buffer) != FRAGMENT_SCOPE:
            if all(scope_of(r.buffer) in SHARED_SCOPES + (FRAGMENT_SCOPE,) for r in (src, dst)):
                return self.try_copy(stmt)  # a shared operand: rows reduced through shared memory
            if all(scope_of(r.buffer) == "local" for r in (src, dst)):
                return True   # thread-private arrays: every thread reduces its own (lower_reduce)
            raise LoweringError("TL0002", "T.reduce_* works on fragments, shared memory and local arrays "
                                "(both operands local)", stmt.span)
        s = self.known(src.buffer)
        if s is None:
            return False
        rank = len(s.shape)
        if dim < 0:
            dim += rank
        keep = len(dst.buffer.shape) == rank
        expect = [n for d, n in enumerate(s.shape) if d != dim] if not keep else [
            1 if d == dim else n for d, n in enumerate(s.shape)]
        got = [const_int(n) for n in dst.buffer.shape]
        if got != expect and not (not expect and got == [1]):
            raise LoweringError("TL0604", f"reduction of '{src.buffer.name}' {list(s.shape)} over dim {dim} "
                                f"gives shape {expect}, but '{dst.buffer.name}' has shape {got}", stmt.span)
        natural = drop_dim(s, dim, keep_unit=keep)
        d = self.known(dst.buffer)
        if self.convert and d is not None and dst.is_whole() and not (d.shape == natural.shape and d.same_as(natural)):
            # the result's layout is fixed elsewhere (a loop that reads it beside another fragment):
            # reduce in the natural layout, then convert through shared memory (lower_reduce)
            self.out.conversions.add(stmt)
            return True
        self.assign(dst.buffer, natural, stmt.span, f"the reduction at line {span_line(stmt.span)}")
        return True

    def try_copy(self, stmt, force: bool = True) -> bool:
        """A copy between memory and a fragment follows the fragment's layout; an unknown
        fragment gets a vectorised default, but only once nothing else can place it (``force``):
        a T.Parallel loop that reads it next to a gemm result (``mask[j]`` beside ``acc_s[i, j]``)
        knows better which thread needs which element."""
        src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
        line = span_line(stmt.span)
        if scope_of(src.buffer) == FRAGMENT_SCOPE and scope_of(dst.buffer) == FRAGMENT_SCOPE:
            return self._fragment_to_fragment(src, dst, stmt, line)
        if not force and any(scope_of(r.buffer) == FRAGMENT_SCOPE and self.known(r.buffer) is None
                             for r in (src, dst)):
            return False
        for frag, other in ((dst, src), (src, dst)):
            if scope_of(frag.buffer) == FRAGMENT_SCOPE and self.known(frag.buffer) is None:
                shape = [const_int(s) for s in frag.buffer.shape]
                vec = max(1, 16 // max(nbytes(other.dtype), 1))
                while vec > 1 and shape[-1] % vec:
                    vec //= 2
                layout, why = default_fragment(shape, self.T, vec), f"the copy at line {line}"
                if frag.buffer in self.row_reduced:
                    row = _row_default(shape, self.T, vec, self.row_reduced[frag.buffer])
                    lanes = math.prod(a.extent for a in row.thread_axes if a.dim == len(shape) - 1)
                    if not row.same_as(layout):
                        why += f", {lanes} lanes a row for its reduction along the rows"
                    layout = row
                self.assign(frag.buffer, layout, stmt.span, why)
        return True

    def _fragment_to_fragment(self, src, dst, stmt, line):
        """A register copy keeps each element in its thread: both sides share one layout. Where
        both already have layouts, and they differ (attention's ``T.copy(acc_s, acc_s_cast)`` when
        warpgroups split the score tile's columns but the P V gemm needs whole rows of P in each of
        them), the copy converts through shared memory (``Layouts.conversions``) in the plan
        ``infer_layouts`` tries when every other one stops at a conflict (``convert``)."""
        s, d = self.known(src.buffer), self.known(dst.buffer)
        if s is None and d is None:
            return False
        if not (src.is_whole() and dst.is_whole()):
            raise LoweringError("TL0002", "copies between parts of fragments are not supported yet; "
                                "copy whole fragments", stmt.span)
        r = _reshaped(s, dst.buffer.shape) if s is not None else None
        if (self.convert and d is not None and r is not None and not (d.shape == r.shape and d.same_as(r))
                and _frag_elements(s) == _frag_elements(d)):
            self.out.conversions.add(stmt)
            return True
        if s is None:
            self.assign(src.buffer, _reshaped(d, src.buffer.shape), stmt.span, f"the copy at line {line}")
        else:
            self.assign(dst.buffer, _reshaped(s, dst.buffer.shape), stmt.span, f"the copy at line {line}")
        return True

    def _use_wgmma_sp(self, sparse, gemms) -> set:
        """The T.gemm_sp that take sparse wgmma (``tl::wgmma_sp_gemm_ss``, sm_90a): every one that
        fits (``wgmma_sp_blocker``) in a kernel whose dense gemms, if any, all take wgmma (one kind
        of shared operand layout); the others mma.sp."""
        if not sparse or self.arch != "sm_90a" or self.configs.get("tl.disable_wgmma"):
            return set()
        if any(g not in self.wgmma_gemms for g in gemms):
            return set()
        return {g for g in sparse if self.regions.get(g) is None and wgmma_sp_blocker(g, self.T) is None}

    def _use_wgmma(self, gemms) -> set:
        """The gemms that take the wgmma path (sm_90a, not disabled): every one that fits
        (``wgmma_blocker``) where their slices agree on the slabs (``wgmma_slab_conflict``). With
        ``mix`` off that is all of them or none. The others take mma.sync, which reads a shared
        operand in the wgmma slab layout where a wgmma gemm shares it (``tl::gemm_ss``'s SA / SB),
        as upstream gives each gemm its own instruction (a 32-row dQ gemm beside 128-row ones in
        attention backward); a 16-bit one only (the slab layout is the 16-bit ldmatrix path's)."""
        forced = [g for g in gemms if is_wgmma_gemm(g)]
        if forced:
            self._require_wgmma(gemms, forced)
        if not gemms or self.arch != "sm_90a" or self.configs.get("tl.disable_wgmma"):
            return set()
        fits = [g for g in gemms if wgmma_blocker(self.info, g, self.regions.get(g), self.split_n, self.narrow) is None]
        if not fits or wgmma_slab_conflict(fits, self.regions) is not None:
            return set()
        if len(fits) == len(gemms):
            return set(fits)
        if self.configs.get(MIX_KEY):
            self.out.unmixed = f"`{MIX_KEY}` is set"
        elif not self.mix:
            self.out.unmixed = "their fragments cannot take both kinds' layouts"
        elif any(not _sixteen_bit(g) for g in gemms):
            self.out.unmixed = "mma.sync reads the wgmma operands' slab layout for 16-bit operands only"
        else:
            self.out.mixed = True
            return set(fits)
        return set()

    def _require_wgmma(self, gemms, forced):
        """T.wgmma_gemm never falls back to mma.sync: the kernel's gemms must all take wgmma."""
        from tilelang.ir import get_buffer_span

        order = forced + [g for g in gemms if g not in forced]
        for g in order + [None]:
            if g is None:   # every gemm fits on its own: do their slices agree on the slabs?
                why = wgmma_slab_conflict(gemms, self.regions)
                g = forced[0]
            elif self.arch != "sm_90a":
                why = "wgmma needs an sm_90a target"
            elif self.configs.get("tl.disable_wgmma"):
                why = "tl.disable_wgmma is set"
            else:
                why = wgmma_blocker(self.info, g, self.regions.get(g), self.split_n, self.narrow)
            if why is None:
                continue
            a, b, c = (decode_region(x) for x in g.value.args[:3])
            desc = ", ".join(f"{n}(scope={scope_of(r.buffer)}, dtype={r.buffer.dtype})"
                             for n, r in (("A", a), ("B", b), ("C", c)))
            span = next((sp for sp in (get_buffer_span(r.buffer) for r in (a, b, c)) if sp is not None), None)
            what = "" if is_wgmma_gemm(g) else f" (the T.gemm at line {span_line(g.span)} shares its kernel)"
            raise LoweringError(
                "TL0002", f"T.wgmma_gemm() requires Hopper WGMMA lowering, but constraints were not satisfied"
                f"{what}. Got target={self.arch}, {desc}: {why}.", span or g.span,
                notes=["use T.gemm, which falls back to mma.sync, or make the gemm fit wgmma (sm_90a, "
                       "16-bit, 8-bit or T.tfloat32 operands, M a multiple of 64 per warpgroup, shared B)"])

    def run(self) -> Layouts:
        consumers, inner, gemms, sparse = [], set(), [], []

        def visit(s):
            name = op_name(s)
            if is_parallel_nest(s):
                if s.loop_var in inner:
                    return
                inner.update(parallel_nest(s)[0][1:])
            if name == "gemm":
                gemms.append(s)
            elif name == "gemm_sp":
                sparse.append(s)
            elif name == "annotate_layout":
                self.annotate(s)
            elif name == "reducer_decl":   # T.alloc_reducer: every thread holds a partial of every element
                buf = decode_region(s.value.args[0]).buffer
                self.assign(buf, replicated_fragment([const_int(x) for x in buf.shape], self.T), s.span,
                            "T.alloc_reducer")
                reducers.append((buf, bool(int(s.value.args[2].value))))
            elif name == "finalize_reducer" and finalize_parts(s.value.args)[0] is not None:
                published.append(finalize_parts(s.value.args)[0].buffer)
            elif name in ("reduce", "copy", "cumsum", "atomic") or is_parallel_nest(s):
                consumers.append(s)

        published = []   # T.finalize_reducer destinations
        reducers = []    # (T.alloc_reducer buffer, legacy form)
        walk_stmts(self.info.body, visit)
        self.row_reduced = _row_reduced_fragments(consumers)
        self.wgmma_gemms = self._use_wgmma(gemms)
        self.wgmma_sparse = self._use_wgmma_sp(sparse, gemms)
        self.out.wgmma = bool(self.wgmma_gemms) or bool(self.wgmma_sparse)
        for g in gemms:
            with self.threads_of(g):
                self.plan_gemm(g)
        for g in sparse:
            with self.threads_of(g):
                self.plan_gemm_sp(g)
        for buf in published:   # unconstrained: replicated like the reducer (static register indices)
            if self.known(buf) is None:
                self.assign(buf, replicated_fragment([const_int(x) for x in buf.shape], self.T), None,
                            "T.finalize_reducer")
        for buf in _broadcast_read_fragments(self.info.body):
            # read inside a T.Parallel nest at an element no loop variable of the nest indexes
            # (``e_local[i]`` of a serial ``i`` around ``for j in T.Parallel(N)``): every thread
            # reads it, so every thread holds the whole fragment (upstream replicates it too; laid
            # out by its writer loop it was read from other threads' registers)
            if self.known(buf) is None:
                shape = [const_int(x) for x in buf.shape]
                self.assign(buf, replicated_fragment(shape, self.T), None,
                            "its reads inside T.Parallel at elements the loop does not index (replicated: "
                            "every thread reads them)")
        for buf, stmts in _floating_fragments(self.info.body):
            # read or written by scalar code (a ``let``, an ``if`` condition, a serial loop): every
            # thread evaluates that code, so every thread holds every element (upstream's floating
            # fragment buffers); where all that code lies in thread regions of one size (``if tx <
            # 128:`` of a hand warp-specialised kernel), the threads of such a region
            if self.known(buf) is None:
                shape = [const_int(x) for x in buf.shape]
                counts = {getattr(self.regions.get(st), "count", None) for st in stmts}
                threads = counts.pop() if len(counts) == 1 and None not in counts else self.T
                self.assign(buf, replicated_fragment(shape, threads), None,
                            "its use outside tile operations (replicated: every thread evaluates it)")
        self._settle(consumers)
        epoch = [decode_region(s.value.args[0]).buffer for s in _tl_calls(self.info.body, "reducer_init")] + [
            s.value.args[0].source for s in _tl_calls(self.info.body, "reducer_update")] + [
            decode_region(s.value.args[0]).buffer for s in _tl_calls(self.info.body, "finalize_reducer")
            if finalize_parts(s.value.args)[0] is not None]
        for buf, legacy in reducers:
            legacy = legacy or not any(buf.same_as(e) for e in epoch)   # (as lower_reduce._reducer_decls)
            self.out.reducers[buf] = None
            try:
                self._plan_reducer(buf, legacy)
            except (LayoutError, TypeError, ValueError, AttributeError, IndexError):
                pass    # a shape the planner does not follow: the whole-block plan stays
        for buf in self.info.fragment_buffers():
            if buf not in self.out.fragments:
                shape = [const_int(s) for s in buf.shape]
                self.assign(buf, default_fragment(shape, self.T, 1), None, "its default")
        staging = self._epilogue_staging(consumers)
        for buf in self.info.shared_buffers():
            if buf not in self.out.shared:
                if buf in staging:
                    self.set_shared(buf, True, slab=True)
                else:
                    self.set_shared(buf, False)
        for buf, (spelt, span) in self.spelt_swizzles.items():
            have = self.out.shared[buf]
            if spelt.places_like(have):
                continue
            if buf not in self.gemm_operands:
                self.out.shared[buf] = spelt    # (a copy's tile: the annotation as written)
                continue
            raise LoweringError("TL0201", f"T.annotate_layout gives '{buf.name}' a {spelt.describe()}, but "
                                f"its T.gemm reads it with the {have.describe()}", span,
                                notes=["Drop the annotation (gemm operands are swizzled automatically) or use "
                                       "tilelang.layout.make_swizzled_layout."])
        return self.out

    def _plan_reducer(self, buf, legacy=False):
        """Replace the replicated layout of reducer ``buf`` by its narrow plan where every update
        site allows one (upstream's narrow / LocalComplete plans): each index of every
        ``T.reducer_update`` a distinct loop variable of its T.Parallel nest (over the reducer
        dimension's whole extent) or 0 on a unit dimension, the loop layout over the whole block,
        power-of-two collective groups, and the same plan at every site. Otherwise the reducer
        keeps the whole-block plan (replicated partials, one all-reduce over every thread).
        The older form (``acc[i] += x`` in T.Parallel, ``T.clear``, in-place ``T.finalize_reducer``)
        plans the same way when the reducer is touched only so (and read by ``T.copy`` after)."""
        if self.configs.get("tl.reducer_force_baseline"):
            return
        # (a read elsewhere is fine where every thread ends up holding every element)
        only_ops = _reducer_uses_ok(buf, legacy, self.info.body)
        shape = [const_int(x) for x in buf.shape]
        plans = []
        kind = next(str(s.value.args[1].value) for s in _tl_calls(self.info.body, "reducer_decl")
                    if decode_region(s.value.args[0]).buffer.same_as(buf))
        if kind in ("sum", "bitxor") and any(
                decode_region(f.value.args[0]).buffer.same_as(buf)
                and not (isinstance(f.value.args[1], (tirx.IntImm, tirx.FloatImm)) and f.value.args[1].value == 0)
                for f in _tl_calls(self.info.body, "fill")):
            return      # T.fill(acc, x) of the older form: x would enter once per collective lane

        def site(nest):
            loop_vars, extents, body = parallel_nest(nest)
            calls = []

            def on_call(s):
                if isinstance(s, tirx.Evaluate) and op_name(s) == "reducer_update" \
                        and s.value.args[0].source.same_as(buf):
                    calls.append(s.value.args[0])
                    values.append(s.value.args[1])
                elif legacy and isinstance(s, tirx.BufferStore) and s.buffer.same_as(buf):
                    value = _legacy_contribution(s, kind)
                    calls.append(tirx.BufferLoad(buf, list(s.indices)))
                    values.append(value if value is not None else s)

            values = []
            walk_stmts(body, on_call)
            if not calls:
                return
            # every replica runs the update: its value (and whether it runs) must be the same on all
            thread_vars = list(self.info.thread_vars.values())
            conds = []
            walk_stmts(body, lambda st: conds.append(st.condition) if isinstance(st, tirx.IfThenElse) else None)
            for value in values + conds:
                if not isinstance(value, tirx.PrimExpr) or uses_vars(value, thread_vars) or any(
                        scope_of(b) not in (FRAGMENT_SCOPE, *SHARED_SCOPES, "global")
                        for b, _, _ in buffer_accesses(tirx.Evaluate(value))):
                    plans.append(None)
                    return
            serial = []

            def on_loop(s):
                if isinstance(s, tirx.For) and s.kind == tirx.ForKind.SERIAL and \
                        any(c.same_as(t) for t in calls for c in _calls_in(s.body)):
                    serial.append(s)

            walk_stmts(body, on_loop)
            layout = self.out.loops.get(loop_vars[0])
            ext = [const_int(e) for e in extents]
            if layout is None or not hasattr(layout, "axes") or layout.num_threads != self.T \
                    or list(layout.shape) != ext:
                plans.append(None)
                return
            for target in calls:
                dims = []
                for d, i in enumerate(target.indices):
                    pos = next((k for k, v in enumerate(loop_vars) if i.same_as(v)), None)
                    if pos is not None and pos not in dims and ext[pos] == shape[d]:
                        dims.append(pos)
                    elif const_int(i) == 0 and shape[d] == 1:
                        dims.append(None)
                    else:
                        plans.append(None)
                        return
                kept = [p for p in dims if p is not None]
                proj = project(layout, kept)
                slot = [d for d, p in enumerate(dims) if p is not None]
                axes = [a if a.dim is None else replace(a, dim=slot[a.dim]) for a in proj.axes]
                try:
                    induced = _build_axes(shape, self.T, axes, f"{buf.name} (narrow reducer)")
                except LayoutError:
                    plans.append(None)
                    return
                steps = tuple((a.extent, a.stride) for a in sorted(layout.thread_axes, key=lambda a: a.stride)
                              if a.dim is not None and a.dim not in kept and a.extent > 1)
                if any(e & (e - 1) or st & (st - 1) for e, st in steps):
                    plans.append(None)
                    return
                lane = None
                if str(buf.dtype) in ("float16", "bfloat16") and len(calls) == 1 and not legacy:
                    ext_in = const_int(serial[-1].extent) if serial else None
                    if ext_in is not None and ext_in >= 2 and ext_in % 2 == 0:
                        lane = serial[-1].loop_var
                    elif len(loop_vars) - 1 not in kept:
                        last = len(loop_vars) - 1
                        mine = sorted((a for a in layout.axes if a.dim == last), key=lambda a: a.coef)
                        run = math.prod(a.extent for a in mine if a.kind == LOCAL_KIND)
                        if mine and mine[0].kind == LOCAL_KIND and mine[0].extent % 2 == 0 and run >= 2:
                            lane = loop_vars[last]
                plans.append((induced, steps, lane))

        def visit(s):
            if is_parallel_nest(s) and not any(v.same_as(s.loop_var) for inner in seen for v in inner):
                seen.append(parallel_nest(s)[0])
                site(s)

        seen = []
        walk_stmts(self.info.body, visit)
        if not plans or any(p is None for p in plans):
            return
        induced, steps, lane = plans[0]
        if any(p[1] != steps or not p[0].same_as(induced) for p in plans[1:]):
            return
        if len(plans) > 1:
            lane = None
        if not only_ops and induced.local_size < math.prod(shape):
            return
        self.out.fragments[buf] = induced
        self.out.origin[buf] = "T.alloc_reducer (narrow plan: the layout of its update loop, reduced dims dropped)"
        self.out.reducers[buf] = ReducerPlan(steps, lane)

    def _settle(self, consumers):
        """The consumer fixpoint, rerun from other roots where a default was a bad one (upstream
        tries every operator of a group as the root of its free inference and keeps one that
        succeeds). The first run is the plain program-order fixpoint; only when it ends in a
        layout conflict (TL0201 / TL0203) is the last default given in the failing statement's
        group (consumers linked by the fragments they share) ruled out as a root, and the
        fixpoint reruns from the layouts it started with (a rerun failing in any way rules out
        its root too). When no other root fits, the first run's error stands: a real conflict
        is reported as it always was."""
        saved = (dict(self.out.fragments), dict(self.out.origin), dict(self.out.loops))
        group, banned, first_err = None, [], None
        for _ in range(ROOT_RETRIES + 1):
            forced = []
            self._stepping = None
            try:
                self._fixpoint(consumers, banned, forced)
                return
            except Exception as err:     # noqa: BLE001 - a later root failing in any way: not that root
                if first_err is None and not (isinstance(err, LoweringError) and err.code in ("TL0201", "TL0203")):
                    raise
                first_err = first_err or err
                group = group or _consumer_groups(consumers)
                failing = group.get(self._stepping)
                culprit = next((s for s in reversed(forced) if failing is not None and group.get(s) == failing
                                and not any(s is b for b in banned)), None)
                if culprit is None:
                    raise first_err from None
                banned.append(culprit)
                fragments, origin, loops = saved
                self.out.fragments, self.out.origin, self.out.loops = dict(fragments), dict(origin), dict(loops)
        raise first_err

    def _fixpoint(self, consumers, banned, forced):
        """Place consumers in program order until none is left; when none can place anything, give
        a default to one (recorded in ``forced``): a copy's fragment first (vectorised for the
        copy), else the first statement in program order, passing over the ``banned`` roots and
        those that wait for a reduction (``_awaits_reduction``) while another is left."""
        pending = consumers
        while pending:
            # (a statement touching an undecided fragment that a pending reduction writes waits for
            # it, as a default would: placed through the statement, that fragment would only
            # conflict with the reduction's layout, TileOPs' logsumexp ``out[i] = row_max[i] + ...``)
            # (the plan of last resort keeps the program order: it converts such a reduction's result)
            waiting = self._pending_outputs(pending) if not self.convert else []
            rest = [s for s in pending if self._awaits_reduction(s, waiting) or not self.step(s, force=False)]
            if len(rest) == len(pending):
                # (the loop staging a view for a reduction places the fragments it reads first)
                allowed = [s for s in rest if not any(s is b for b in banned)] or rest
                waiting = self._pending_outputs(rest)
                allowed = [s for s in allowed if not self._awaits_reduction(s, waiting)] or allowed
                first = next((s for s in allowed if isinstance(s, tirx.For) and VIEW_STAGING in s.annotations),
                             next((s for s in allowed if op_name(s) in ("copy", "atomic") and not self._defer(s)),
                                  next((s for s in allowed if op_name(s) not in ("copy", "atomic")), allowed[0])))
                forced.append(first)
                self.step(first, force=True)
                rest = [s for s in rest if s is not first]
            pending = rest

    def _pending_outputs(self, pending) -> list:
        """[(reduction, its undecided fragment output)] of the reductions among ``pending``."""
        out = []
        for p in pending:
            if op_name(p) == "reduce":
                dst = decode_region(p.value.args[1]).buffer
                if scope_of(dst) == FRAGMENT_SCOPE and self.known(dst) is None:
                    out.append((p, dst))
        return out

    def _awaits_reduction(self, s, waiting) -> bool:
        """Whether ``s`` touches an undecided fragment that a pending reduction writes (not
        ``s`` itself; ``waiting``: ``_pending_outputs``): the reduction derives that fragment's layout
        from its input, so a default given through ``s`` (the loop zeroing an accumulator for
        ``clear=False``, the copy of a row sum to shared memory) would only conflict with it; ``s``
        follows it instead."""
        outs = [dst for p, dst in waiting if p is not s and self.known(dst) is None]   # (placed this round)
        if not outs:
            return False
        touched = self.fragments_of.get(s)
        if touched is None:
            touched = self.fragments_of[s] = [b for b, _, _ in buffer_accesses(s) if scope_of(b) == FRAGMENT_SCOPE]
        return any(b.same_as(o) for b in touched for o in outs)

    def _defer(self, s) -> bool:
        """A copy into a fragment that some T.Parallel loop reads through a non-loop-variable
        index, or broadcasts over loop variables it is not indexed by (``c[i, j] = a[i] + b[j]``, an
        outer sum of two copied vectors), waits for that loop to place it: the loop knows which
        threads need which element."""
        return any(scope_of(r.buffer) == FRAGMENT_SCOPE and self.known(r.buffer) is None
                   and (r.buffer in self.free_indexed or r.buffer in self.broadcast)
                   for r in (decode_region(s.value.args[0]), decode_region(s.value.args[1])))

    def _epilogue_staging(self, consumers) -> set:
        """Shared tiles written by a ``T.copy`` from a fragment in an sm_90a wgmma kernel (an
        epilogue through shared memory): 2-D, 16-bit, rows a multiple of 128 bytes. They take
        the 128-byte-swizzled slab layout of the wgmma operands: the accumulator's row-wise
        stores hit 8 different bank groups instead of one, and a TMA box store can read it
        (``lower_copy._tma_store``)."""
        if not self.out.wgmma:
            return set()
        out = set()
        for s in consumers:
            if op_name(s) != "copy":
                continue
            src, dst = decode_region(s.value.args[0]), decode_region(s.value.args[1])
            if (scope_of(src.buffer) == FRAGMENT_SCOPE and scope_of(dst.buffer) in SHARED_SCOPES
                    and slab_stage_shape(dst.buffer.shape, str(dst.buffer.dtype))):
                out.add(dst.buffer)
        return out

    def step(self, s, force: bool) -> bool:
        self._stepping = s      # (the statement a layout conflict is raised in: _settle)
        with self.threads_of(s):
            return self._step(s, force)

    @contextlib.contextmanager
    def threads_of(self, s):
        """Lay out ``s`` for the threads that run it: the range of its thread region
        (``thread_regions``), else the whole block."""
        region = self.regions.get(s)
        saved = self.T
        if region is not None:
            self.T = region.count
        try:
            yield
        finally:
            self.T = saved

    def _step(self, s, force: bool) -> bool:
        name = op_name(s)
        if name == "reduce" or name == "cumsum":
            if name == "cumsum":
                return self.try_copy(s)
            if self.try_reduce(s):
                return True
            if force:
                src = decode_region(s.value.args[0]).buffer
                shape = [const_int(x) for x in src.shape]
                self.assign(src, default_fragment(shape, self.T, 1), s.span, "its default")
                return self.try_reduce(s)
            return False
        if name in ("copy", "atomic"):
            return self.try_copy(s, force) or (force and self._force_copy(s))
        return self.try_parallel(s, force)

    def _force_copy(self, s):
        for r in (decode_region(s.value.args[0]), decode_region(s.value.args[1])):
            if scope_of(r.buffer) == FRAGMENT_SCOPE and self.known(r.buffer) is None:
                shape = [const_int(x) for x in r.buffer.shape]
                self.assign(r.buffer, default_fragment(shape, self.T, 1), s.span, "its default")
        return self.try_copy(s)


ROOT_RETRIES = 16   # _settle: other roots tried after a conflict, at most


def _consumer_groups(consumers) -> dict:
    """consumer -> group number: consumers that touch a common fragment are in one group (as in
    upstream's connected components of tile operators)."""
    parent = list(range(len(consumers)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owners = []     # [(fragment, first consumer touching it)]
    for i, s in enumerate(consumers):
        for b, _, _ in buffer_accesses(s):
            if scope_of(b) != FRAGMENT_SCOPE:
                continue
            j = next((k for f, k in owners if f.same_as(b)), None)
            if j is None:
                owners.append((b, i))
            else:
                parent[find(i)] = find(j)
    return {s: find(i) for i, s in enumerate(consumers)}


def finalize_parts(args):
    """(destination region or None, batch) of a ``finalize_reducer`` call's arguments (the batch,
    where given, is a trailing IntImm)."""
    batch = 1
    if isinstance(args[-1], tirx.IntImm):
        batch, args = int(args[-1].value), args[:-1]
    return (decode_region(args[1]) if len(args) > 1 else None), batch


def _tl_calls(stmt, name) -> list:
    out = []
    walk_stmts(stmt, lambda s: out.append(s) if op_name(s) == name else None)
    return out


_LEGACY_COMBINE = {"sum": tirx.Add, "max": tirx.Max, "min": tirx.Min}


def _legacy_contribution(store, kind):
    """``x`` of an older-form reducer update ``acc[i] = acc[i] op x`` (either operand order), or
    None where the store is not that."""
    node = _LEGACY_COMBINE.get(kind)
    value = store.value
    if node is None or not isinstance(value, node):
        return None
    for mine, other in ((value.a, value.b), (value.b, value.a)):
        if isinstance(mine, ir.TensorLoad) and mine.source.same_as(store.buffer) and len(mine.indices) == len(
                store.indices) and all(a.same_as(b) or (const_int(a) is not None and const_int(a) == const_int(b))
                                       for a, b in zip(mine.indices, store.indices)):
            return other
    return None


def _reducer_uses_ok(buf, legacy, body) -> bool:
    """Reducer ``buf`` is touched only by its epoch ops, its updates (inside T.Parallel, each
    reading the reducer only as its own target), ``T.clear``/``T.fill`` and, as the source,
    ``T.copy``: no other statement sees its layout, so a narrow plan may change it."""
    def mine(stmt):
        return [(b, w) for b, _, w in buffer_accesses(stmt) if b.same_as(buf)]

    def go(s):
        if s is None:
            return True
        if isinstance(s, tirx.SeqStmt):
            return all(go(c) for c in s.seq)
        name = op_name(s)
        if name is not None:
            if name in ("reducer_decl", "reducer_init", "reducer_update", "finalize_reducer", "fill"):
                return True
            if name == "copy":
                return not decode_region(s.value.args[1]).buffer.same_as(buf)
            return not mine(s)
        if is_parallel_nest(s):
            _, _, body = parallel_nest(s)
            uses = mine(body)
            if legacy:
                stores = sum(1 for _, w in uses if w)
                return stores == len(uses) - stores
            return not any(w for _, w in uses) and len(uses) == len(
                [t for t in _calls_in(body) if t.source.same_as(buf)])
        if isinstance(s, tirx.For):
            return not mine(tirx.Evaluate(s.extent)) and go(s.body)
        if isinstance(s, tirx.While):
            return not mine(tirx.Evaluate(s.condition)) and go(s.body)
        if isinstance(s, tirx.IfThenElse):
            return not mine(tirx.Evaluate(s.condition)) and go(s.then_case) and go(s.else_case)
        if isinstance(s, tirx.AttrStmt):
            return go(s.body)
        return not mine(s)

    return go(body)


def _broadcast_read_fragments(body) -> list:
    """Fragments read inside a T.Parallel nest at indices that use none of the nest's loop
    variables, in program order; fragments a gemm, reduction or scan takes (their layout is the
    operation's) are left out."""
    written_by_ops = []

    def op_dst(s):
        if op_name(s) in ("gemm", "gemm_sp", "reduce", "cumsum"):
            written_by_ops.extend(b for b, _, _ in buffer_accesses(s))

    walk_stmts(body, op_dst)
    out = []

    def go(s):
        if s is None:
            return
        if is_parallel_nest(s):
            loop_vars, _, inner = parallel_nest(s)
            for b, idx, store in buffer_accesses(inner):
                if (not store and scope_of(b) == FRAGMENT_SCOPE and b not in out and b not in written_by_ops
                        and not any(uses_vars(i, loop_vars) for i in idx)):
                    out.append(b)
            return
        for c in children(s):
            go(c)

    go(body)
    return out


def _floating_fragments(body) -> list:
    """[(fragment, the statements using it)] of the fragments accessed outside every tile
    operation and T.Parallel nest, in program order: by scalar statements (``a = frag[i]``, ``if
    frag[i] >= 0``, ``frag[0] = 0``, a serial loop's bounds). Tile operations' own arguments do not
    count."""
    out = {}

    def note(node, st):
        for b, _, _ in buffer_accesses(node):
            if scope_of(b) == FRAGMENT_SCOPE:
                out.setdefault(b, []).append(st)

    def go(s):
        if s is None or is_parallel_nest(s) or op_name(s) is not None:
            return
        if isinstance(s, tirx.BufferStore):
            note(s, s)
        elif isinstance(s, tirx.Evaluate):
            note(s, s)
        elif isinstance(s, tirx.Bind):
            note(tirx.Evaluate(s.value), s)
        elif isinstance(s, tirx.IfThenElse):
            note(tirx.Evaluate(s.condition), s)
        elif isinstance(s, tirx.While):
            note(tirx.Evaluate(s.condition), s)
        elif isinstance(s, tirx.For):
            note(tirx.Evaluate(s.min), s)
            note(tirx.Evaluate(s.extent), s)
        for c in children(s):
            go(c)

    go(body)
    return list(out.items())


def _calls_in(stmt) -> list:
    """The ``T.reducer_update`` targets under ``stmt``."""
    out = []

    def visit(s):
        if isinstance(s, tirx.Evaluate) and op_name(s) == "reducer_update":
            out.append(s.value.args[0])

    walk_stmts(stmt, visit)
    return out


def _widest_vector_element(body, inner=None) -> int:
    """Bytes of the widest element a T.Parallel body accesses along its innermost loop variable
    ``inner``: the accesses its vectors are made of. An access whose indices do not name ``inner``
    (a gather's row index ``Indices[i]``, a per-row scale) is the same for every lane of a vector
    and does not narrow it, as upstream's vectorizer plans (a bf16 row gathered through int32
    indices: 16-byte vectors of 8, not 4); without ``inner``, or when no access names it, every
    access counts. An access whose last index steps ``c`` > 1 elements per iteration of ``inner``
    (``acc[i, d * 4]`` of a ``T.atomic_addx4``: each iteration already moves 16 bytes) counts ``c``
    elements: consecutive iterations then go to consecutive threads, whose accesses are adjacent,
    as upstream lays such a loop out."""
    widest = named = 0
    for b, idx, _ in buffer_accesses(body):
        size = nbytes(str(b.dtype))
        widest = max(widest, size)
        if inner is not None and any(uses_vars(i, [inner]) for i in idx):
            named = max(named, size * _inner_step(idx[-1], inner) if idx else size)
    return max(1, named or widest)


def _inner_step(index, inner) -> int:
    """The constant number of elements ``index`` advances per step of ``inner`` (1 when it is not
    a linear function of it with a constant coefficient above 1)."""
    if not uses_vars(index, [inner]):
        return 1
    coef = tvm.sym.detect_linear_equation(index, [inner])
    c = const_int(coef[0]) if len(coef) == 2 else None
    return c if c is not None and 1 < c <= 16 else 1


def _coalesced_width(loop):
    """``T.Parallel(..., coalesced_width=w)``'s ``w`` (the outermost loop's annotation), or None."""
    w = loop.annotations.get("tl.coalesced_width") if loop.annotations is not None else None
    return const_int(w) if w is not None else None


def memory_loop_layout(body, ext, num_threads, inner=None):
    """The default layout of a T.Parallel nest over memory only, spread over ``num_threads``
    threads (the lowering's range of threads selected by an ``if`` on the thread index)."""
    vec = max(1, 16 // _widest_vector_element(body, inner))
    while vec > 1 and ext[-1] % vec:
        vec //= 2
    return default_fragment(ext, num_threads, vec)


def _upper_bound(extent):
    """A constant upper bound of a loop extent (its value if constant), or None."""
    n = const_int(extent)
    if n is not None:
        return n
    bound = tvm.sym.Analyzer().const_int_bound(extent)
    hi = int(bound.max_value)
    return hi if 0 < hi < (1 << 20) else None


def _frag_elements(frag) -> int:
    return int(np.prod(frag.shape))


def _reshaped(layout, shape):
    """``layout`` for a tile of ``shape`` that differs from it only in unit dimensions (a copy of
    ``x[k, :]`` (1 x 32) into a fragment of 32): the same threads and registers; else ``layout``."""
    shape = tuple(const_int(n) for n in shape)
    if None in shape or tuple(layout.shape) == shape:
        return layout
    old = [d for d, n in enumerate(layout.shape) if n != 1]
    new = [d for d, n in enumerate(shape) if n != 1]
    if [layout.shape[d] for d in old] != [shape[d] for d in new]:
        return layout
    remap = dict(zip(old, new))
    axes = tuple(replace(a, dim=remap[a.dim]) if a.dim is not None else a for a in layout.axes)
    return type(layout)(shape, layout.num_threads, axes, layout.name)


def _row_default(shape, num_threads, vec, elem_bytes) -> Fragment:
    """The default layout of a fragment reduced along its last dimension: as few threads along
    a row as keep a warp's accesses in whole 128-byte lines (8 threads of 16-byte vectors), the
    rest on the rows. A warp then touches the same number of lines per access as with the
    threads all along the row, but a row's reduction is local to its thread plus log2(8)
    shuffles instead of log2(32), or a shared-memory exchange across warps (64 rows of 128
    fp32 on 128 threads: 4 rows a thread, 3 shuffles each, 12 in all, where one warp a row held
    16 rows a thread, reduced together in 31: ``lower_reduce._rows_at_once``). Rows too few for
    the other threads keep them on the row (no thread is left idle that the plain default would
    use)."""
    plain = default_fragment(shape, num_threads, vec)
    if len(shape) < 2:
        return plain
    line = max(1, 128 // max(1, vec * elem_bytes))
    rows = math.prod(shape[:-1])
    capped = default_fragment(shape, num_threads, vec, last_threads=max(line, num_threads // math.gcd(num_threads, rows)))
    return capped if capped.replication <= plain.replication else plain


def _row_reduced_fragments(consumers) -> dict:
    """fragment -> the narrowest element (bytes) its group moves: the fragments some ``T.reduce_*``
    reduces along their last dimension, with the fragments a ``T.Parallel`` nest over their shape
    indexes beside them with its own loop variables (they share one layout: ``x`` of ``s[i, j] =
    x[i, j] * x[i, j]`` before ``T.reduce_sum(s, r, dim=1)``) or a whole-fragment copy pairs with
    them. The narrowest element of every buffer those statements touch sizes the threads a row
    needs for whole 128-byte lines (``_row_default``): a bf16 row quantised to fp8 stores a
    quarter of the bytes its float4 loads move."""
    parent = {}

    def find(b):
        while not parent.setdefault(b, b).same_as(b):
            b = parent[b]
        return b

    seeds, touched = [], []     # reduced fragments; (fragments of one statement, its narrowest element)
    for s in consumers:
        name = op_name(s)
        if name == "reduce":
            src = decode_region(s.value.args[0]).buffer
            rank, dim = len(src.shape), int(s.value.args[3].value)
            if scope_of(src) == FRAGMENT_SCOPE and rank >= 2 and dim % rank == rank - 1:
                seeds.append(src)
            continue
        if name == "copy":
            bufs = [decode_region(x).buffer for x in s.value.args[:2]]
            frags = [b for b in bufs if scope_of(b) == FRAGMENT_SCOPE]
            linked = frags if len(frags) == 2 else frags[:1]
        elif is_parallel_nest(s):
            loop_vars, _, body = parallel_nest(s)
            accesses = buffer_accesses(body)
            bufs = [b for b, _, _ in accesses]
            linked = list({b: None for b, idx, _ in accesses
                           if scope_of(b) == FRAGMENT_SCOPE and _is_exact(idx, loop_vars)})
        else:
            continue
        if not linked:
            continue
        for b in linked[1:]:
            parent[find(b)] = find(linked[0])
        touched.append((linked[0], min(nbytes(str(b.dtype)) for b in bufs)))
    if not seeds:
        return {}
    narrow = {}
    for b, n in touched:
        r = find(b)
        narrow[r] = min(narrow.get(r, n), n)
    roots = {find(b) for b in seeds}     # (every seed is in ``parent`` from here on)
    return {b: narrow.get(find(b), nbytes(str(b.dtype))) for b in parent if find(b) in roots}


def _is_exact(idx, loop_vars) -> bool:
    return len(idx) == len(loop_vars) and all(
        isinstance(i, tirx.Var) and i.same_as(v) for i, v in zip(idx, loop_vars))


def _plain_dims(idx, loop_vars):
    """Loop dimensions used by ``idx`` when every index is a distinct loop variable, else None."""
    dims = []
    for i in idx:
        if not isinstance(i, tirx.Var):
            if const_int(i) == 0 and len(idx) == 1:
                return []
            return None
        match = [d for d, v in enumerate(loop_vars) if v.same_as(i)]
        if not match or match[0] in dims:
            return None
        dims.append(match[0])
    return dims if dims == sorted(dims) else None



# ----- access-derived layouts (numeric) ----------------------------------------------------
# A loop layout and a fragment layout are compared by enumeration: every (thread, register) of
# the loop layout is an iteration, and every variable an index uses besides the loop variables
# (an enclosing serial loop, a serial loop inside the body, a block index) takes each value of
# its constant range. An index that uses anything else cannot be enumerated: the answer is None.

ENUM_LIMIT = 1 << 21
UNTOUCHED = "untouched"     # _fragment_through: some element is touched by no iteration


def _loop_env(layout, loop_vars, ext, idx, extra):
    """(env, valid) over every iteration of ``layout`` and every value of the extra variables
    ``idx`` uses, flattened per thread to [T, M]; None when too large to enumerate."""
    owners = layout.owners()
    used = [(v, lo, n) for v, lo, n in extra if any(uses_vars(i, [v]) for i in idx)]
    ns = tuple(n for _, _, n in used)
    full = owners.shape + ns
    if int(np.prod(full)) > ENUM_LIMIT:
        return None
    pad = (1,) * len(ns)
    coords = np.unravel_index(owners, layout.shape)
    valid = np.ones(owners.shape, dtype=bool)
    for c, n in zip(coords, ext):
        valid &= c < n
    T = owners.shape[0]
    env = [(v, np.broadcast_to(c.reshape(owners.shape + pad), full).reshape(T, -1)) for v, c in zip(loop_vars, coords)]
    for k, (v, lo, n) in enumerate(used):
        values = (lo + np.arange(n, dtype=np.int64)).reshape((1, 1) + tuple(n if q == k else 1 for q in range(len(ns))))
        env.append((v, np.broadcast_to(values, full).reshape(T, -1)))
    return env, np.broadcast_to(valid.reshape(owners.shape + pad), full).reshape(T, -1)


def _elements(idx, env, shape):
    """Flat element index of ``idx`` per enumerated point; None when it is not index arithmetic
    of the enumerated variables. Points outside the tile are -1."""
    ref = env[0][1]
    try:
        values = [np.broadcast_to(np.asarray(evaluate_index_expr(i, env), dtype=np.int64), ref.shape) for i in idx]
    except ValueError:
        return None
    if len(values) != len(shape):
        return None
    inside = np.ones(ref.shape, dtype=bool)
    for v, n in zip(values, shape):
        inside &= (v >= 0) & (v < n)
    if not values:
        return np.zeros(ref.shape, np.int64)
    flat = np.ravel_multi_index(tuple(np.clip(v, 0, n - 1) for v, n in zip(values, shape)), tuple(shape))
    return np.where(inside, flat, -1)


def body_guard(body):
    """The condition of a T.Parallel body that is one ``if`` without ``else`` (nested ones
    joined), or a sequence of such ``if``s with one condition (``if i < h: a[...] = ...`` then
    ``if i < h: b[...] = ...``): iterations where it is false touch nothing. None otherwise."""
    if isinstance(body, tirx.SeqStmt) and len(body.seq) > 1 and all(
            isinstance(s, tirx.IfThenElse) and s.else_case is None for s in body.seq):
        first = body.seq[0].condition
        if all(tvm.ir.structural_equal(s.condition, first) for s in body.seq[1:]):
            inner = body_guard(tirx.SeqStmt([s.then_case for s in body.seq]))
            return first if inner is None else tirx.And(first, inner)
        return None
    conds = []
    while isinstance(body, tirx.IfThenElse) and body.else_case is None:
        conds.append(body.condition)
        body = body.then_case
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out


def guard_mask(guard, env, shape):
    """Where ``guard`` (index arithmetic of the enumerated variables) holds, or None."""
    if guard is None:
        return None
    try:
        return np.broadcast_to(np.asarray(evaluate_index_expr(guard, env), dtype=bool), shape)
    except ValueError:
        return None


def _serves(loop, frag, idx, loop_vars, ext, write, extra=(), guard=None):
    """True when every iteration runs on a thread that holds the element it touches (for a
    write, also: every thread holding a written element runs an iteration writing it, so the
    replicas stay equal); None when that cannot be enumerated. An index that leaves the tile in
    iterations a ``guard`` (``body_guard``) switches off (``b[i + 16, j]`` under ``if i < 16``)
    is judged on the iterations that run."""
    if loop.num_threads != frag.num_threads:
        return False
    got = _loop_env(loop, loop_vars, ext, idx, extra)
    if got is None:
        return None
    env, valid = got
    elems = _elements(idx, env, frag.shape)
    if elems is None:
        return None
    if (elems[valid] < 0).any():
        mask = guard_mask(guard, env, valid.shape)
        if mask is not None:
            valid = valid & mask
    if (elems[valid] < 0).any():
        return None     # outside the tile: the bounds checks speak to that
    T, numel = frag.num_threads, int(np.prod(frag.shape))
    held = np.zeros((T, numel), dtype=bool)
    held[np.arange(T)[:, None], frag.owners()] = True
    rows = np.broadcast_to(np.arange(T)[:, None], elems.shape)
    if not held[rows[valid], elems[valid]].all():
        return False
    if write:
        touched = np.zeros((T, numel), dtype=bool)
        touched[rows[valid], elems[valid]] = True
        written = touched.any(axis=0)
        if not np.array_equal(touched[:, written], held[:, written]):
            return False
    return True


def _dictates(idx, loop_vars, buf, ext) -> bool:
    """Whether a known fragment touched at ``idx`` in a loop over ``ext`` fixes the loop's layout
    on its own: an index other than the loop variables, or the loop variables over part of it."""
    if _plain_dims(idx, loop_vars) is None:
        return True
    return _is_exact(idx, loop_vars) and [const_int(x) for x in buf.shape] != list(ext)


def _padded_loop(frag, idx, loop_vars, ext):
    """A loop shorter than the fragment it indexes with its own variables (``s[i]``, i < 4, over
    a fragment of 8) runs over the fragment's layout, the extra iterations guarded off."""
    if not _is_exact(idx, loop_vars) or len(frag.shape) != len(ext):
        return None
    if all(n <= m for n, m in zip(ext, frag.shape)) and list(frag.shape) != list(ext):
        return frag
    return None


def _row_ranks(thread):
    flat = thread.reshape(-1)
    order = np.lexsort((np.arange(flat.size), flat))
    ranks = np.empty(flat.size, dtype=np.int64)
    ranks[order] = np.arange(flat.size) - np.searchsorted(flat[order], flat[order], side="left")
    return ranks.reshape(thread.shape)


def _loop_through(frag, idx, loop_vars, ext, T, extra=()):
    """Loop layout whose iteration runs on the threads holding the fragment element it touches
    (the element's replicas: the iteration's replicas), or None where that is no digit map.
    Other variables of the index (an enclosing serial loop: ``x[i, jj * 4 + j]``) take their
    first value here; the caller checks the candidate against all of them (``_serves``)."""
    if not ext or int(np.prod(ext)) * frag.replication > ENUM_LIMIT:
        return None
    grid = np.indices(ext, dtype=np.int64)
    env = [(v, g.reshape(1, -1)) for v, g in zip(loop_vars, grid)]
    env += [(v, np.full((1, grid[0].size), lo, dtype=np.int64)) for v, lo, _ in extra
            if any(uses_vars(i, [v]) for i in idx)]
    elems = _elements(idx, env, frag.shape)
    if elems is None or (elems < 0).any():
        return None
    elems = elems.reshape(tuple(ext))
    owners = frag.owners()
    numel = int(np.prod(frag.shape))
    held = np.zeros((owners.shape[0], numel), dtype=bool)
    held[np.arange(owners.shape[0])[:, None], owners] = True
    R = frag.replication
    if (held.sum(axis=0) != R).any():
        return None
    table = np.argsort(~held, axis=0, kind="stable")[:R]          # [R, numel]: holders, ascending
    thread = table[:, elems]                                       # [R, *ext]
    try:
        return user_fragment(ext, T, thread, _row_ranks(thread[0]), "parallel")
    except LayoutError:
        return None


def _fragment_through(loop, idx, loop_vars, ext, shape, T, extra=()):
    """Fragment layout placing each element on the threads whose iterations touch it, or None
    (an element no iteration touches, unequal replication, or no digit map)."""
    if None in shape:
        return None
    got = _loop_env(loop, loop_vars, ext, idx, extra)
    if got is None:
        return None
    env, valid = got
    elems = _elements(idx, env, shape)
    if elems is None or (elems[valid] < 0).any():
        return None
    numel = int(np.prod(shape))
    touched = np.zeros((T, numel), dtype=bool)
    rows = np.broadcast_to(np.arange(T)[:, None], elems.shape)
    touched[rows[valid], elems[valid]] = True
    counts = touched.sum(axis=0)
    if counts.min() == 0:
        return UNTOUCHED
    if counts.min() != counts.max():
        return None
    R = int(counts[0])
    thread = np.argsort(~touched, axis=0, kind="stable")[:R]       # [R, numel]: holders, ascending
    thread = thread.reshape((R,) + tuple(shape))
    try:
        return user_fragment(shape, T, thread, _row_ranks(thread[0]), "parallel")
    except LayoutError:
        return None


def _bound_inside(var, body) -> bool:
    found = []
    walk_stmts(body, lambda s: found.append(s) if isinstance(s, tirx.For) and s.loop_var.same_as(var) else None)
    return bool(found)


def _nest_variables(info) -> dict:
    """nest -> [(var, first, count)]: the block indices and serial loops around a T.Parallel nest
    and the serial loops inside its body, where their ranges are compile-time constants."""
    launch = []
    for iv, extent in info.launch:
        n = const_int(extent)
        if str(iv.thread_tag).startswith("blockIdx") and n is not None:
            launch.append((iv.var, 0, n))
    out = {}

    def loops_in(s, acc):
        if isinstance(s, tirx.For):
            lo, n = const_int(s.min), const_int(s.extent)
            if lo is not None and n is not None and n > 0:
                acc.append((s.loop_var, lo, n))
        for c in children(s):
            loops_in(c, acc)
        return acc

    def go(s, loops):
        if is_parallel_nest(s):
            body = parallel_nest(s)[2]
            out[s] = launch + loops + loops_in(body, [])
            return
        if isinstance(s, tirx.For):
            lo, n = const_int(s.min), const_int(s.extent)
            if lo is not None and n is not None and n > 0:
                loops = loops + [(s.loop_var, lo, n)]
        for c in children(s):
            go(c, loops)

    go(info.body, [])
    return out


def infer_layouts(info: KernelInfo, arch: str = "sm_80", pass_configs: dict | None = None) -> Layouts:
    """Layouts for ``info`` on ``arch`` (``sm_90a`` selects wgmma for each gemm that allows it,
    mma.sync for the rest: ``_Inference._use_wgmma``). A kernel whose wgmma plan splits
    warpgroups along N but whose fragments cannot take those layouts (a split accumulator copied
    into a replicated register A operand, say) is planned again without N splits: as before they
    existed (mma.sync where M cannot split); one whose gemms mix the two kinds but whose
    fragments cannot take both layouts is planned again with mma.sync for every gemm; one whose
    plan with narrow B slabs fails (a B buffer asked for two slab widths) is planned again
    without them (``Layouts.unnarrowed`` says why), and where that fails too its error stands
    (the kernel's error before narrow slabs existed). Where every plan stops at a layout conflict
    (TL0201), one more lets a whole-fragment copy between two layouts, or a reduction into a fragment
    whose layout is fixed elsewhere, convert through shared memory (``Layouts.conversions``); if that
    fails too, the first plan's error stands."""
    # Warpgroups splitting N: on by default since session 13 (they change only kernels whose M
    # does not split over the warpgroups, which took mma.sync before; upstream takes wgmma
    # there too). `tl.enable_wgmma_split_n: False` turns them off. A plan of theirs that does
    # not fit shared memory is lowered with M splits only (engine.pipeline).
    # `tl.disable_wgmma_mix: True`: all of a kernel's gemms on wgmma or none (before session 16).
    configs = pass_configs or {}

    def attempt(split_n: bool, mix: bool, narrow: bool = True, convert: bool = False) -> Layouts:
        inference = _Inference(info, arch, pass_configs, split_n=split_n, mix=mix, narrow=narrow, convert=convert)
        try:
            return inference.run()
        except (LoweringError, LayoutError) as err:
            if inference.used_narrow:     # e.g. one B read by gemms that want two slab widths
                # (where the plan without them fails too, its error is the one the kernel had
                # before narrow slabs existed: the user's own)
                out = attempt(split_n, mix, False, convert)
                out.unnarrowed = str(getattr(err, "message", None) or err).splitlines()[0]
                return out
            if inference.out.mixed:
                return attempt(split_n, False, narrow, convert)
            if not inference.used_split_n:
                raise
        return attempt(False, mix, narrow, convert)

    split_n, mix = bool(configs.get(SPLIT_N_KEY, True)), not configs.get(MIX_KEY)
    try:
        try:
            return attempt(split_n, mix)
        except LoweringError as err:
            # Last resort, where every plan above stops at a layout conflict: fragment copies
            # between two layouts convert through shared memory (Layouts.conversions). A kernel
            # one of those plans lowers keeps it (the N-split retry's mma.sync, say).
            if err.code != "TL0201":
                raise
            try:
                return attempt(split_n, mix, convert=True)
            except (LoweringError, LayoutError):
                raise err from None
    except LayoutError as err:
        raise LoweringError("TL0202", f"no fragment layout fits: {err}") from None


def _annotated_fragment(buf, args, kind, num_threads, span):
    """The layout ``T.annotate_layout({buf: T.Fragment(...)})`` gives ``buf`` (see
    ``tilelang.layout.build_user_fragment``), or a located error naming the buffer."""
    from tilelang.layout import UserLayoutError, build_user_fragment

    if scope_of(buf) != FRAGMENT_SCOPE:
        raise LoweringError("TL0201", f"T.annotate_layout gives '{buf.name}' a T.Fragment, but it lives in "
                            f"{scope_of(buf)} memory: T.Fragment is for fragments (T.alloc_fragment)", span,
                            notes=["Shared buffers take T.Layout or tilelang.layout.make_swizzled_layout."])
    if kind != "fragment":
        raise LoweringError("TL0201", f"T.annotate_layout gives fragment '{buf.name}' a shared-memory layout "
                            f"({kind}); a fragment takes T.Fragment(shape, forward_fn=...)", span)
    shape = [const_int(x) for x in buf.shape]
    n = int(args[2].value)
    declared = [int(a.value) for a in args[3:3 + n]]
    if shape != declared:
        raise LoweringError("TL0201", f"T.Fragment for '{buf.name}' has shape {declared}, but '{buf.name}' has "
                            f"shape {shape}", span)
    try:
        return build_user_fragment(args[1:], num_threads, buf.name)
    except UserLayoutError as err:
        raise LoweringError(err.code, f"T.Fragment for '{buf.name}' {err}", span,
                            notes=[f"The block runs {num_threads} threads."]) from None


_BARRIER_CALLS = ("__syncthreads", "cooperative_groups::this_grid().sync", "tl::__sync_thread_partial")


def _has_barrier(body) -> bool:
    """Whether a loop body calls a thread-block or grid barrier (T.sync_threads, T.sync_grid)."""
    import tvm_ffi

    found = []

    def on_call(e):
        if isinstance(e, ir.Call) and getattr(e.op, "name", "") == "tirx.call_extern" and e.args and \
                str(getattr(e.args[0], "value", "")) in _BARRIER_CALLS:
            found.append(e)
        return None

    tvm_ffi.structural_walk(body, [(ir.Call, on_call)], order="pre")
    return bool(found)

