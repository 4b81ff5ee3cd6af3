"""Layout inference: give every fragment a ``Fragment`` layout, every ``T.Parallel`` nest a loop
layout, every shared buffer a ``SharedLayout``, and every ``T.gemm`` a warp partition.

Input: a parsed kernel (``KernelInfo``). Output: ``Layouts``. Never mutates the IR.

Order: (1) strict layouts from ``T.gemm`` (mma accumulator / register operand, swizzled shared
operands) and ``T.annotate_layout``; (2) a fixpoint over the consumers in program order:
a parallel nest adopts the layout of a fragment it indexes with exactly its loop variables,
and passes it on to the other fragments it touches (projected when indexed by a subset of the
loop variables); a reduction derives its output from its input; a copy into a fragment without
a layout gives it a vectorised default. When nothing progresses, the first undecided consumer
gets the default layout and the fixpoint resumes. A layout that disagrees with one already
chosen is a located ``LoweringError`` (TL0201) naming the buffer and both layouts.
Shared buffers nothing constrains are row-major, except epilogue stages of sm_90a wgmma kernels
(written from a fragment), which take the slab-swizzled operand layout (``_epilogue_staging``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from tvm import tirx

from tilelang.language.dtypes import nbytes
from tilelang.layout import unpack_layout_expr
from tilelang.layout import (CustomSharedLayout, Fragment, LayoutError, SharedLayout, default_fragment, drop_dim,
                             mma_accumulator, mma_operand_a, project)
from tilelang.layout.fragment import wgmma_accumulator, wgmma_operand_a
from tilelang.tir_utils import const_int, span_line, walk_stmts
from tilelang.transform.kernel import (FRAGMENT_SCOPE, SHARED_SCOPES, KernelInfo, LoweringError,
                                       buffer_accesses, decode_region, is_parallel_nest, op_name,
                                       parallel_nest, scope_of)


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


@dataclass
class Layouts:
    fragments: dict = field(default_factory=dict)   # buffer -> Fragment
    shared: dict = field(default_factory=dict)      # buffer -> SharedLayout
    loops: dict = field(default_factory=dict)       # outer loop var of a T.Parallel nest -> Fragment
    gemms: dict = field(default_factory=dict)       # Evaluate stmt -> GemmPlan
    origin: dict = field(default_factory=dict)      # buffer -> text saying where its layout came from
    wgmma: bool = False                             # the kernel's gemms lower to wgmma (sm_90a)


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
            "TL0103", f"T.gemm cannot split a {M}x{N} tile over {num_warps} warps: each warp needs "
            f"a multiple of 16 rows and 8 columns", span)
    return options[0]


WGMMA_DTYPES = {("float16", "float32"), ("bfloat16", "float32"), ("float16", "float16")}


def wgmma_blocker(info: KernelInfo, stmt) -> str | None:
    """Why this ``T.gemm`` cannot lower to wgmma (None: it can). sm_90a only; the conditions are
    those of ``tl::wgmma_gemm_ss/rs``: 16-bit operands, warpgroups splitting M into 64-row
    multiples with every thread of the block taking part, N <= 256, whole 2-D shared operands."""
    args = stmt.value.args
    a, b, c = (decode_region(x) for x in args[:3])
    trans_a = bool(int(args[3].value))
    T = info.num_threads
    ash = [const_int(e) for e in a.nonunit()[1]]
    bsh = [const_int(e) for e in b.nonunit()[1]]
    csh = [const_int(e) for e in c.nonunit()[1]]
    if None in ash + bsh + csh or len(ash) != 2 or len(bsh) != 2 or len(csh) != 2:
        return "operand shapes are not constant 2-D tiles"
    M, N = csh
    K = ash[0] if trans_a else ash[-1]
    da, db, dc = str(a.buffer.dtype), str(b.buffer.dtype), str(c.buffer.dtype)
    if da != db or (da, dc) not in WGMMA_DTYPES:
        return f"wgmma needs float16/bfloat16 operands with float32 (or float16) accumulation, got {da}->{dc}"
    if T % 128:
        return f"{T} threads are not whole warpgroups"
    wg = T // 128
    if M % (64 * wg):
        return f"M={M} does not split into 64-row blocks over {wg} warpgroup(s)"
    if N % (16 if dc == "float16" else 8) or N > 256 or K % 16:
        return f"N={N} / K={K} out of wgmma's range"
    for r in (a, b):
        if scope_of(r.buffer) in SHARED_SCOPES:
            shape = [const_int(x) for x in r.buffer.shape]
            if len(shape) != 2 or any(const_int(x) != 0 for x in r.starts) or \
                    [const_int(x) for x in r.extents][-2:] != shape:
                return f"'{r.buffer.name}' is used in part (wgmma operands are whole 2-D shared buffers)"
            if shape[0] % 8 or (shape[1] * 2) % 32:
                return f"'{r.buffer.name}' {shape}: rows must be a multiple of 8 and of 16 columns"
        elif r is b:
            return "B must be in shared memory"
        elif trans_a:
            return "a register A operand cannot be transposed"
    return None


def slab_stage_shape(shape, dtype: str) -> bool:
    """An epilogue stage that can take the 128-byte-swizzled slab layout: 2-D, 16-bit elements,
    rows of whole 128-byte slabs."""
    shape = [const_int(x) for x in shape]
    return len(shape) == 2 and None not in shape and nbytes(dtype) == 2 and shape[1] * 2 % 128 == 0


class _Inference:
    def __init__(self, info: KernelInfo, arch: str = "sm_80", pass_configs: dict | None = None):
        self.info = info
        self.T = info.num_threads
        self.out = Layouts()
        self.gemm_operands = set()
        self.arch = arch
        self.configs = pass_configs or {}

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
        if K % 16:
            raise LoweringError("TL0101", f"T.gemm K={K} must be a multiple of 16 for mma.sync", span)
        if scope_of(c.buffer) != FRAGMENT_SCOPE:
            raise LoweringError("TL0002", "T.gemm accumulates into a fragment (T.alloc_fragment)", span)
        line = span_line(span)
        if self.out.wgmma:
            wg = self.T // 128
            plan = GemmPlan(M, N, K, wg, 1, trans_a, trans_b, "wgmma", wg)
            self.out.gemms[stmt] = plan
            self.assign(c.buffer, wgmma_accumulator(M, N, wg, self.T), span, f"T.gemm (line {line}, wgmma)")
            if scope_of(a.buffer) == FRAGMENT_SCOPE:
                self.assign(a.buffer, wgmma_operand_a(M, K, wg, self.T), span,
                            f"T.gemm A operand (line {line}, wgmma)")
        else:
            wm, wn = warp_partition(M, N, self.T // 32, policy, span)
            plan = GemmPlan(M, N, K, wm, wn, trans_a, trans_b)
            self.out.gemms[stmt] = plan
            self.assign(c.buffer, mma_accumulator(M, N, wm, wn, self.T), span, f"T.gemm (line {line})")
            if scope_of(a.buffer) == FRAGMENT_SCOPE:
                if trans_a:
                    raise LoweringError("TL0002", "a register A operand cannot be transposed", span)
                self.assign(a.buffer, mma_operand_a(M, K, wm, wn, self.T), span, f"T.gemm A operand (line {line})")
        for r in (a, b):
            if scope_of(r.buffer) in SHARED_SCOPES:
                self.require_gemm_layout(r.buffer, span)
                self.gemm_operands.add(r.buffer)
                self.set_shared(r.buffer, True)
                self.check_subtile(r, span)

    def set_shared(self, buf, swizzle: bool, slab: bool = False):
        shape = tuple(const_int(s) for s in buf.shape)
        slab = swizzle and (slab or buf in self.gemm_operands) and self.out.wgmma
        self.out.shared[buf] = SharedLayout(shape, nbytes(str(buf.dtype)), swizzle, slab)

    def check_subtile(self, region, span):
        """A gemm on part of a swizzled buffer must start where the XOR pattern restarts."""
        layout = self.out.shared[region.buffer]
        starts = [const_int(x) for x in region.starts]
        if len(starts) < 2 or all(x == 0 for x in starts):
            return
        row, col = starts[-2], starts[-1]
        col_period = layout.group * layout.vector
        if row is None or col is None or row % 8 or col % col_period:
            raise LoweringError(
                "TL0002", f"T.gemm on a sub-tile of '{region.buffer.name}' starting at row {starts[-2]}, column "
                f"{starts[-1]}: the swizzled layout needs constant starts with row % 8 == 0 and column % "
                f"{col_period} == 0", span,
                notes=["Use separate shared buffers per sub-tile, or align the slice."])

    def require_gemm_layout(self, buf, span):
        have = self.out.shared.get(buf)
        if have is not None and (isinstance(have, CustomSharedLayout) or have.group != SharedLayout(
                have.shape, have.elem_bytes, True).group):
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
            self.out.shared[buf] = layout
        else:
            self.set_shared(buf, kind == "swizzle")
        if buf in self.gemm_operands:
            self.require_gemm_layout(buf, stmt.span)

    # ----- phase 2: consumers --------------------------------------------------------------
    def try_parallel(self, stmt, force: bool) -> bool:
        loop_vars, extents, body = parallel_nest(stmt)
        ext = [const_int(e) for e in extents]
        if None in ext:
            raise LoweringError("TL0603", "T.Parallel extents must be compile-time constants", stmt.span)
        frags = [(b, idx) for b, idx, _ in buffer_accesses(body) if scope_of(b) == FRAGMENT_SCOPE]
        layout = None
        for b, idx in frags:
            if _is_exact(idx, loop_vars) and self.known(b) is not None:
                if list(self.known(b).shape) != ext:
                    raise LoweringError("TL0603", f"T.Parallel{tuple(ext)} indexes fragment '{b.name}' of shape "
                                        f"{list(self.known(b).shape)} with its loop variables", stmt.span)
                layout = self.known(b)
                break
        if layout is None:
            if frags and not force and any(self.known(b) is None for b, _ in frags):
                return False
            layout = self.default_loop_layout(body, ext, frags)
        self.out.loops[loop_vars[0]] = layout
        line = span_line(stmt.span)
        for b, idx in frags:
            dims = _plain_dims(idx, loop_vars)
            if dims is None:
                if self.known(b) is None:
                    raise LoweringError(
                        "TL0203", f"fragment '{b.name}' is indexed with {list(map(str, idx))} inside "
                        f"T.Parallel: only loop variables can index a fragment whose layout is not known "
                        f"yet (otherwise every thread would hold the whole tile)", stmt.span)
                continue
            if dims == list(range(len(loop_vars))):
                self.assign(b, layout, stmt.span, f"the T.Parallel loop at line {line}")
            elif self.known(b) is None:
                self.assign(b, project(layout, dims), stmt.span, f"the T.Parallel loop at line {line}")
            else:
                self.check_compatible(b, layout, dims, stmt.span)
        return True

    def default_loop_layout(self, body, ext, frags):
        widest = 1
        for b, _, _ in buffer_accesses(body):
            widest = max(widest, nbytes(str(b.dtype)))
        vec = max(1, 16 // widest)
        while vec > 1 and ext[-1] % vec:
            vec //= 2
        # Known partial-index fragments constrain the loop: build the loop layout from one of them.
        for b, idx in frags:
            if self.known(b) is not None:
                break
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
            raise LoweringError("TL0002", "T.reduce_* works on fragments and shared memory", stmt.span)
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
        self.assign(dst.buffer, drop_dim(s, dim, keep_unit=keep), stmt.span,
                    f"the reduction at line {span_line(stmt.span)}")
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
                self.assign(frag.buffer, default_fragment(shape, self.T, vec), stmt.span,
                            f"the copy at line {line}")
        return True

    def _fragment_to_fragment(self, src, dst, stmt, line):
        """A register copy keeps each element in its thread: both sides share one layout."""
        s, d = self.known(src.buffer), self.known(dst.buffer)
        if s is None and d is None:
            return False
        if not (src.is_whole() and dst.is_whole()):
            raise LoweringError("TL0002", "copies between parts of fragments are not supported yet; "
                                "copy whole fragments", stmt.span)
        if s is None:
            self.assign(src.buffer, d, stmt.span, f"the copy at line {line}")
        else:
            self.assign(dst.buffer, s, stmt.span, f"the copy at line {line}")
        return True

    def _use_wgmma(self, gemms) -> bool:
        """All of a kernel's gemms take the wgmma path or none does (sm_90a, not disabled)."""
        if not gemms or self.arch != "sm_90a" or self.configs.get("tl.disable_wgmma"):
            return False
        return all(wgmma_blocker(self.info, g) is None for g in gemms)

    def run(self) -> Layouts:
        consumers, inner, gemms = [], set(), []

        def visit(s):
            name = op_name(s)
            if is_parallel_nest(s):
                if s.loop_var in inner:
                    return
                inner.update(parallel_nest(s)[0][1:])
            if name == "gemm":
                gemms.append(s)
            elif name == "annotate_layout":
                self.annotate(s)
            elif name in ("reduce", "copy", "cumsum", "atomic") or is_parallel_nest(s):
                consumers.append(s)

        walk_stmts(self.info.body, visit)
        self.out.wgmma = self._use_wgmma(gemms)
        for g in gemms:
            self.plan_gemm(g)
        pending = consumers
        while pending:
            rest = [s for s in pending if not self.step(s, force=False)]
            if len(rest) == len(pending):
                # Nothing placed anything: give a default, to a copy's fragment first (vectorised
                # for the copy), else to the first statement in program order.
                first = next((s for s in rest if op_name(s) in ("copy", "atomic")), rest[0])
                self.step(first, force=True)
                rest = [s for s in rest if s is not first]
            pending = rest
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
        return self.out

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


def infer_layouts(info: KernelInfo, arch: str = "sm_80", pass_configs: dict | None = None) -> Layouts:
    """Layouts for ``info`` on ``arch`` (``sm_90a`` selects wgmma gemms where every gemm allows it)."""
    try:
        return _Inference(info, arch, pass_configs).run()
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
