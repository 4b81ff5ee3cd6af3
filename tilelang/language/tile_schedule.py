"""``T.PersistentTileScheduler``: the tile order of a persistent kernel (one block per SM that
walks over the output tiles).

Contract:
- ``T.PersistentTileScheduler(num_m_tiles, num_n_tiles, num_workers=None, swizzle_size=1,
  column_major=True, cluster_size=1, stateful=True, name=None)`` is built inside a kernel body.
  The ``num_m_tiles x num_n_tiles`` tile grid is numbered linearly; worker ``w`` (a block, or a
  cluster when ``cluster_size > 1``) takes tiles ``w, w + num_workers, w + 2 * num_workers, ...``
  while they are below the tile count. ``num_workers`` defaults to the SM count divided by
  ``cluster_size`` (the live device's, else the sm_90a data-centre part's: 132).
- Decoding a linear tile id (``coord(tile_id) -> (m, n)``, plain expressions): with
  ``cluster_size > 1`` the M axis counts clusters (``ceildiv(num_m_tiles, cluster_size)`` rows;
  the caller adds its rank in the cluster). ``column_major`` makes M the fast axis (else N).
  ``swizzle_size`` groups the slow axis into panels that many tiles wide; a panel's tiles are
  visited slow-axis-first within each fast-axis step, the last panel narrower when the count does
  not divide. ``swizzle_size=1`` is the plain order.
- ``stateful=True`` (default) allocates four thread-local scalars (``T.alloc_var``; named
  ``<name>_m_idx``, ``<name>_n_idx``, ``<name>_linear_idx``, ``<name>_current_iter`` when
  ``name`` is given): ``init(worker_id)`` starts at tile ``worker_id``, ``valid()`` is the
  condition of the ``while`` loop, ``next_tile()`` steps by ``num_workers``; ``m_idx``,
  ``n_idx``, ``linear_idx`` and ``current_iter`` (tiles done so far: the wave index) read them.
  ``stateful=False`` allocates nothing and offers ``coord`` alone (the other members raise a
  ``RuntimeError`` naming the scheduler).
Everything is built as ordinary IR at the call (stores to the scalars, integer arithmetic), so it
works the same in ``@T.prim_func``, ``@T.macro`` and eager ``@tilelang.jit`` bodies and lowers on
every target.
"""

from __future__ import annotations

from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as builder

from .alloc import alloc_var
from .math import ceildiv
from .math import max as _max
from .math import min as _min

_FALLBACK_SMS = 132   # sm_90a's H100 SXM / H200, as tilelang.targets describes it


def _num_sms() -> int:
    try:
        import torch
        if torch.cuda.is_available():
            return int(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count)
    except Exception:   # noqa: BLE001 - no usable device: the described part
        pass
    from tilelang.targets import sm_count
    return sm_count("sm_90a") or _FALLBACK_SMS


def _div(a, b):
    """``a // b`` of non-negative tile numbers: C division when either side is an expression (no
    floor-division sign fix-ups in the generated code)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return tirx.truncdiv(a, b)


def _mod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return tirx.truncmod(a, b)


def _positive(value, what: str):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"T.PersistentTileScheduler: {what} must be a positive Python int, got {value!r}")
    return value


class BaseTileScheduler:
    """The state and loop protocol of a persistent tile scheduler; subclasses give ``coord`` and
    ``_step`` (see the module docstring)."""

    _STATE = ("m_idx", "n_idx", "linear_idx", "current_iter")

    def __init__(self, stateful: bool = True, name: str | None = None):
        self._stateful = bool(stateful)
        self._name = name
        self._total_tiles = 0
        self._vars = {}
        if self._stateful:
            for field in self._STATE:
                var = alloc_var("int32")
                if name:
                    IRBuilder.name(f"{name}_{field}", var.scalar.source)
                self._vars[field] = var.scalar.source

    # ----- state --------------------------------------------------------------------------------
    def _buffer(self, field):
        if not self._stateful:
            raise RuntimeError(f"T.PersistentTileScheduler{'' if not self._name else ' ' + repr(self._name)} "
                               f"was built with stateful=False: it has no {field}; decode tile ids with "
                               "coord(tile_id)")
        return self._vars[field]

    def _get(self, field):
        return self._buffer(field)[0]

    def _set(self, field, value):
        builder.buffer_store(self._buffer(field), value, [0])

    @property
    def m_idx(self):
        """The current tile's row (a cluster row when ``cluster_size > 1``)."""
        return self._get("m_idx")

    @property
    def n_idx(self):
        """The current tile's column."""
        return self._get("n_idx")

    @property
    def linear_idx(self):
        """The current linear tile id of this worker."""
        return self._get("linear_idx")

    @property
    def current_iter(self):
        """How many tiles this worker has finished (0 in the first wave)."""
        return self._get("current_iter")

    # ----- the loop protocol --------------------------------------------------------------------
    def coord(self, tile_id):
        raise NotImplementedError(f"{type(self).__name__} does not decode tile ids")

    def _decode(self):
        m, n = self.coord(self._get("linear_idx"))
        self._set("m_idx", m)
        self._set("n_idx", n)

    def init(self, linear_init):
        """Start at linear tile ``linear_init`` (the worker's id), iteration 0."""
        self._set("current_iter", tirx.const(0, "int32"))
        self._set("linear_idx", linear_init)
        self._decode()

    def next_tile(self, step=1):
        """Advance by ``step`` linear tiles and count one more iteration."""
        self._set("current_iter", self._get("current_iter") + 1)
        self._set("linear_idx", self._get("linear_idx") + step)
        self._decode()

    def valid(self):
        """Whether the current tile is inside the grid: the persistent loop's condition."""
        return self._get("linear_idx") < self._total_tiles


class PersistentTileScheduler(BaseTileScheduler):
    """Grid-strided persistent tile order with an L2 swizzle and clustering along M; see the
    module docstring."""

    def __init__(self, num_m_tiles, num_n_tiles, num_workers=None, swizzle_size: int = 1,
                 column_major: bool = True, cluster_size: int = 1, stateful: bool = True,
                 name: str | None = None):
        self.cluster_size = _positive(cluster_size, "cluster_size")
        self.swizzle_size = _positive(swizzle_size, "swizzle_size")
        super().__init__(stateful=stateful, name=name)
        if num_workers is None:
            num_workers = max(1, _num_sms() // self.cluster_size)
        self.num_workers = num_workers
        self.column_major = bool(column_major)
        m_rows = ceildiv(num_m_tiles, self.cluster_size) if self.cluster_size > 1 else num_m_tiles
        self._total_tiles = m_rows * num_n_tiles
        # the fast axis is swept whole inside a panel; the slow one is cut into panels
        self._fast, self._slow = (m_rows, num_n_tiles) if self.column_major else (num_n_tiles, m_rows)

    def coord(self, tile_id):
        """``(m, n)`` of linear tile ``tile_id``: expressions only, no state touched."""
        fast, slow, width = self._fast, self._slow, self.swizzle_size
        if width == 1:
            f, s = _mod(tile_id, fast), _div(tile_id, fast)
        else:
            panel_tiles = fast * width
            panel = _div(tile_id, panel_tiles)
            base = panel * width
            # the last panel may be narrower; at least 1 so an id past the end still divides
            cols = _max(1, _min(width, slow - base))
            inside = tile_id - panel * panel_tiles
            f, s = _div(inside, cols), base + _mod(inside, cols)
        return (f, s) if self.column_major else (s, f)

    def init(self, worker_id):
        """Start at this worker's first tile (``worker_id``: the block, or cluster, index)."""
        super().init(worker_id)

    def next_tile(self):
        """Step to this worker's next tile, ``num_workers`` further on."""
        super().next_tile(self.num_workers)


__all__ = ["BaseTileScheduler", "PersistentTileScheduler"]
