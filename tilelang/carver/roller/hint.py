"""``Hint``: one recommended tile configuration (what ``BaseTemplate.recommend_hints`` returns).

Fields (upstream's names): ``block`` — the output tile a thread block computes (``[block_M,
block_N]`` for a matmul); ``warp`` — the tile one warp computes (``block[i] // warp[i]`` warps
along each axis); ``rstep`` — the reduction step per pipeline stage (``[block_K]``);
``pipeline_stage`` — shared-memory stages (1: no software pipelining); ``rasterization_plan``;
``use_tc`` — tensor-core (mma/wgmma/MFMA) instructions; ``thread`` — warps along each axis.
Cost-model facts the recommender derived are kept for inspection: ``smem_bytes``,
``regs_per_thread``, ``blocks_per_sm``, ``waves``, ``score`` (estimated time in seconds, lower is
better; ``predicted_ms`` the same in ms). ``to_dict()`` gives the tile parameters of an upstream
GEMM config, or ``config`` itself where the template set one (attention: block_M, block_N,
num_stages, threads).
"""

from __future__ import annotations

from tilelang.carver.roller.rasterization import NoRasterization


class Hint:
    def __init__(self) -> None:
        self.arch = None
        self.use_tc = False
        self.block: list[int] = []
        self.warp: list[int] = []
        self.thread: list[int] = []
        self.rstep: list[int] = []
        self.reduce_thread: list[int] = []
        self.pipeline_stage = 1
        self.rasterization_plan = NoRasterization()
        self.cached_tensors: list = []
        self.output_strides: dict = {}
        self.schedule_stages = None
        self.block_reduction_depth = None
        self.smem_bytes = 0
        self.regs_per_thread = 0
        self.blocks_per_sm = 0
        self.waves = 0
        self.score = 0.0
        self.config: dict | None = None   # the kernel parameters, where the template knows them

    @property
    def predicted_ms(self) -> float:
        return self.score * 1e3

    @property
    def num_threads(self) -> int:
        warps = 1
        for b, w in zip(self.block, self.warp):
            warps *= b // w
        return warps * 32

    def to_dict(self) -> dict:
        if self.config is not None:
            return dict(self.config)
        out = {}
        if len(self.block) == 2:
            out.update(block_M=self.block[0], block_N=self.block[1])
        if self.rstep:
            out["block_K"] = self.rstep[0]
        out.update(num_stages=self.pipeline_stage, threads=self.num_threads,
                   enable_rasterization=self.rasterization_plan.panel_width > 0)
        return out

    def __repr__(self) -> str:
        return (f"{{block: {self.block}, warp: {self.warp}, rstep: {self.rstep}, use_tc: {self.use_tc}, "
                f"pipeline_stage: {self.pipeline_stage}, rasterization_plan: {self.rasterization_plan!r}}}")
