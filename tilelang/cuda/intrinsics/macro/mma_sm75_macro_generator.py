"""``TensorCoreIntrinEmitterSM75``: the mma emitter with Turing's instruction shapes.

Turing has no m16n8k16 / m16n8k32: 16-bit inputs use ``m16n8k8`` (8-wide N tiles), 8-bit
integers ``m8n8k16`` and 4-bit integers ``m8n8k32`` (8x8 tiles, two accumulators per lane, whose
lane map is the m8n8 one, ``_use_fp64_store_index_map``). Other dtypes keep the base policy.
The shape attributes are upstream's; ``mma`` itself emits only the sm_80 shapes (see
``mma_macro_generator``) and raises ``NotImplementedError`` for these.
"""

from __future__ import annotations

from tvm import DataType

from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter

__all__ = ["TensorCoreIntrinEmitterSM75"]

_K_BY_BITS = {4: 32, 8: 16, 16: 8}
_PREFIX = {8: "m16n8k8", 16: "m8n8k16", 32: "m8n8k32"}


class TensorCoreIntrinEmitterSM75(TensorCoreIntrinEmitter):
    """Turing (sm_75) mma shapes (see the module docstring)."""

    def _initialize_k_dim(self, a_dtype):
        bits = DataType(str(a_dtype)).bits
        self.k_dim = min(_K_BY_BITS.get(bits, 256 // bits), self.chunk)

    def _initialize_m_dim(self, a_dtype):
        super()._initialize_m_dim(a_dtype)
        if DataType(str(a_dtype)).bits in (4, 8):
            self.M_DIM = 8

    def _initialize_mma_prefix(self, k_dim=16):
        if k_dim in _PREFIX:
            self.mma_prefix = _PREFIX[k_dim]
        else:
            super()._initialize_mma_prefix(k_dim)

    def _initialize_micro_size(self, m_dim=16, k_dim=16):
        if k_dim not in (8, 16, 32):
            return super()._initialize_micro_size(m_dim, k_dim)
        self.n_dim = self.micro_size_y = 8
        self.warp_rows = self.warp_row_tiles // m_dim
        self.warp_cols = self.warp_col_tiles // 8
        self.micro_size_x, self.micro_size_k = m_dim, k_dim
