"""``Kernel``: the facts about one parsed kernel that several checks share.

Built once per ``check`` call from ``transform.kernel.analyze_kernel``: the tile-op statements
in program order, the allocation statement of every buffer, the outermost ``T.Parallel`` nests,
and (once layout inference ran) the ``Layouts``. Read-only for the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import tirx

from tilelang.tir_utils import walk_stmts
from tilelang.transform.kernel import is_parallel_nest, op_name, parallel_nest, scope_of


@dataclass
class Kernel:
    func: object
    info: object           # transform.kernel.KernelInfo
    arch: str
    ctx: object            # report.CheckContext
    layouts: object = None  # transform.layout_inference.Layouts, when inference succeeded
    lowerer: object = None  # the Lowerer the sm_90a carve-out check built (the hover summary reuses it)
    ops: list = field(default_factory=list)        # Evaluate statements of tl.* ops, program order
    allocs: dict = field(default_factory=dict)     # buffer -> AllocBuffer statement
    nests: list = field(default_factory=list)      # outermost For of every T.Parallel nest
    siblings: list = field(default_factory=list)   # KernelInfo of the other kernels one prim_func launches
    written_threads: int | None = None   # the thread count as written, where the compiler widens it
    single_stage_auto: bool = False      # tl.enable_ws_single_stage decided by the one-wave default

    @classmethod
    def build(cls, func, info, arch, ctx) -> "Kernel":
        k = cls(func, info, arch, ctx)
        inner = set()

        def visit(s):
            if op_name(s) is not None:
                k.ops.append(s)
            elif isinstance(s, tirx.AllocBuffer):
                k.allocs[s.buffer] = s
            elif is_parallel_nest(s) and s.loop_var not in inner:
                inner.update(parallel_nest(s)[0][1:])
                k.nests.append(s)

        walk_stmts(info.body, visit)
        return k

    def tile_ops(self, name: str | None = None) -> list:
        return [s for s in self.ops if name is None or op_name(s) == name]

    def params(self) -> list:
        """The tensor (buffer) parameters of the kernel, in order."""
        return [p for p in self.func.params if tirx.is_buffer_var(p)]

    def scope(self, buf) -> str:
        return scope_of(buf)
