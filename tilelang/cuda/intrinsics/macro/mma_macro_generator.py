"""``TensorCoreIntrinEmitter``: explicit warp-level mma.sync GEMM steps for hand-written kernels.

A user splits a block GEMM over ``block_row_warps x block_col_warps`` warps, each owning a
``warp_row_tiles x warp_col_tiles`` tile made of ``warp_rows x warp_cols`` mma tiles
(``micro_size_x x micro_size_y``, K step ``micro_size_k``), and calls inside the kernel body:

- ``ldmatrix_a(A_local, A_shared, ki, rk=0)`` / ``ldmatrix_b(B_local, B_shared, ki, rk=0)``: the
  warp's operand registers for K step ``ki`` (of chunk ``rk``) from a shared tile (a buffer or a
  region of one), through ``ldmatrix`` (``tl::ptx_ldmatrix``, src/tl/mma_macro.h), or through
  per-element loads where ldmatrix cannot transpose (8/32-bit elements, transposed storage).
  ``A_local`` holds ``warp_rows * local_size_a`` elements, ``B_local`` ``warp_cols * local_size_b``.
- ``mma(A_local, B_local, C_local, k_inner=0)``: ``C += A * B`` for all the warp's tiles, one
  ``mma.sync m16n8kK`` (``tl::mma_sync``) per 16x8 output (two for a 16-wide tile);
  ``C_local`` holds ``warp_rows * warp_cols * local_size_out`` accumulators.
- ``stmatrix(C_local, C_buf, pid_m=None, pid_n=None)``: the accumulators to a 2-D buffer (block
  coordinates; with ``pid_m`` / ``pid_n``, the global tile of that block) or to a 4-D buffer
  ``[M // micro_size_x, N // micro_size_y, micro_size_x, micro_size_y]``.
- ``make_mma_load_layout(buf, "A" | "B")`` / ``make_mma_store_layout(buf)``: ``T.Fragment``
  layouts of whole block tiles with the same element placement, for ``T.annotate_layout``.

Every step is a ``T.macro`` spliced into the caller, using the kernel's first thread index (or
``thread_var``). A is ``[M, K]`` (``[K, M]`` when ``a_transposed``), B is ``[K, N]`` (``[N, K]``
when ``b_transposed``). Supported mma inputs: fp16/bf16 (fp32 accumulators; fp16 also fp16),
int8/uint8 (int32), fp32 as tf32 (fp32). Other dtypes construct (their shape attributes are
upstream's) but their ``mma`` raises ``NotImplementedError``.
"""

from __future__ import annotations

from enum import IntEnum

from tvm import DataType, tirx

import tilelang.language as T
from tilelang.cuda.intrinsics.layout.utils import (get_ldmatrix_offset, mma_load_a_index, mma_load_b_index,
                                                   mma_store_index_map, mma_store_index_map_fp64)

__all__ = ["TensorCoreIntrinEmitter", "TensorCoreIntrinEmitterWithLadderTransform", "TransformKind"]


class TransformKind(IntEnum):
    NonTransform = 0
    InterWarpTransform = 1
    IntraWarpTransform = 2
    LDMatrixTransform = 3


_ABBREV = {
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64", "int4": "int4",
    "int8": "int8", "uint8": "uint8", "int32": "int32", "float8_e4m3": "e4m3", "float8_e4m3fn": "e4m3",
    "float8_e4m3fnuz": "e4m3", "float8_e5m2": "e5m2", "float8_e5m2fnuz": "e5m2", "float6_e2m3fn": "e2m3",
    "float6_e3m2fn": "e3m2", "float4_e2m1fn": "e2m1",
}
# (A, B, accumulator) combinations tl::mma_sync has an instruction for
_SUPPORTED = {("fp16", "fp16", "fp32"), ("fp16", "fp16", "fp16"), ("bf16", "bf16", "fp32"),
              ("tf32", "tf32", "fp32")} | {(a, b, "int32") for a in ("int8", "uint8") for b in ("int8", "uint8")}


def _dt(dtype) -> DataType:
    return DataType(str(dtype))


def _region(buf):
    """(buffer, [start per dimension]) of a Buffer, BufferRegion or BufferLoad of a tile."""
    if isinstance(buf, tirx.Buffer):
        return buf, [0] * len(buf.shape)
    if isinstance(buf, tirx.BufferRegion):
        return buf.buffer, [r.min for r in buf.region]
    if isinstance(buf, tirx.BufferLoad):
        return buf.buffer, [i.base if isinstance(i, tirx.Ramp) else i for i in buf.indices]
    raise TypeError(f"expected a shared-memory buffer or a region of one, got {type(buf).__name__}")


class TensorCoreIntrinEmitter:
    """Warp-level mma.sync steps (see the module docstring)."""

    M_DIM = 16
    n_dim = 16
    WARP_SIZE = 32
    dtype_abbrv = _ABBREV
    is_m_first: bool = False
    warp_rows: int = 1
    warp_cols: int = 1

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16", a_transposed=False,
                 b_transposed=False, block_row_warps=2, block_col_warps=2, warp_row_tiles=8, warp_col_tiles=8,
                 chunk=16, reduce_k=1, num_elems_per_byte=1, is_m_first=False, thread_var=None):
        self.a_dtype, self.b_dtype, self.accum_dtype = str(a_dtype), str(b_dtype), str(accum_dtype)
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        self.block_row_warps, self.block_col_warps = block_row_warps, block_col_warps
        self.warp_row_tiles, self.warp_col_tiles = warp_row_tiles, warp_col_tiles
        self.chunk = chunk
        self._initialize_k_dim(self.a_dtype)
        self._initialize_m_dim(self.a_dtype)
        self._initialize_micro_size(self.M_DIM, self.k_dim)
        self._initialize_local_size(self.M_DIM, self.n_dim, self.k_dim, self.WARP_SIZE)
        self._initialize_abbrev(self.a_dtype, self.b_dtype, self.accum_dtype)
        self._initialize_mma_prefix(self.k_dim)
        if is_m_first is not None:
            self.is_m_first = is_m_first
        self.reduce_k = reduce_k
        self.threads = self.WARP_SIZE * block_row_warps * block_col_warps * reduce_k
        self.num_elems_per_byte = num_elems_per_byte
        self.thread_var = thread_var
        if self.warp_rows == 0 or self.warp_cols == 0:
            raise ValueError(f"Invalid threads configuration for this tile shape, {self.warp_rows} x "
                             f"{self.warp_cols} with threads {self.threads}")

    # ----- shape policy (upstream's attribute names) -------------------------------------------
    def _initialize_k_dim(self, a_dtype):
        self.k_dim = min(256 // _dt(a_dtype).bits, self.chunk)

    def _initialize_m_dim(self, a_dtype):
        if _dt(a_dtype).bits == 64:
            self.M_DIM = 8

    def _initialize_local_size(self, m_dim=16, n_dim=16, k_dim=16, warp_size=32):
        self.local_size_a = m_dim * k_dim // warp_size
        self.local_size_b = n_dim * k_dim // warp_size
        self.local_size_out = m_dim * n_dim // warp_size

    def _get_dtype_abbrv(self, dtype) -> str:
        dtype = str(dtype)
        if "float4_e2m1_unpacked" in dtype:
            return "e2m1"
        if dtype not in self.dtype_abbrv:
            raise ValueError(f"Unsupported dtype: {dtype}")
        return self.dtype_abbrv[dtype]

    def _initialize_abbrev(self, a_dtype, b_dtype, accum_dtype):
        tf32 = str(accum_dtype) == "float32"
        self.a_dtype_abbrv = "tf32" if tf32 and a_dtype == "float32" else self._get_dtype_abbrv(a_dtype)
        self.b_dtype_abbrv = "tf32" if tf32 and b_dtype == "float32" else self._get_dtype_abbrv(b_dtype)
        self.accum_dtype_abbrv = self._get_dtype_abbrv(accum_dtype)

    def _initialize_mma_prefix(self, k_dim=16):
        shapes = {4: "m8n8k4", 8: "m16n8k8", 16: "m16n8k16", 32: "m16n8k32", 64: "m16n8k64",
                  128: "m16n8k128", 256: "m16n8k256"}
        if k_dim not in shapes:
            raise ValueError(f"Unsupported k_dim {k_dim}")
        self.mma_prefix = shapes[k_dim]

    def _initialize_micro_size(self, m_dim=16, k_dim=16):
        wr, wc = self.warp_row_tiles, self.warp_col_tiles
        if k_dim == 4:   # fp64: m8n8k4
            self.n_dim = self.micro_size_y = 8
            self.warp_rows, self.warp_cols = wr // m_dim, wc // 8
        else:
            if wr < 16 or wr % 16:
                raise ValueError(f"warp_row_tiles must be a positive multiple of 16, got {wr}")
            if wc < 8 or wc % 8:
                raise ValueError(f"warp_col_tiles must be a positive multiple of 8, got {wc}")
            self.warp_rows = wr // m_dim
            self.n_dim = self.micro_size_y = 16 if wc % 16 == 0 else 8
            self.warp_cols = wc // self.n_dim
        self.micro_size_x, self.micro_size_k = m_dim, k_dim

    # ----- threads ------------------------------------------------------------------------------
    def get_thread_binding(self):
        if self.thread_var is not None:
            return self.thread_var
        from tilelang.language.kernel import get_thread_binding

        return get_thread_binding(0)

    def extract_thread_binding(self, thread_id, is_m_first=None):
        """``(lane, warp_n, warp_m)`` of ``thread_id``: warps numbered M-fastest, or N-fastest when
        ``is_m_first``."""
        w, rows, cols = self.WARP_SIZE, self.block_row_warps, self.block_col_warps
        if self.is_m_first if is_m_first is None else is_m_first:
            return thread_id % w, (thread_id // w) % cols, (thread_id // (w * cols)) % rows
        return thread_id % w, (thread_id // (w * rows)) % cols, (thread_id // w) % rows

    def _use_fp64_store_index_map(self) -> bool:
        return _dt(self.accum_dtype).bits == 64 or self.local_size_out == 2

    def _store_map(self):
        return mma_store_index_map_fp64 if self._use_fp64_store_index_map() else mma_store_index_map

    def get_store_index_map(self, inverse: bool = False):
        """``IndexMap`` (lane, local) -> (row, col) of the accumulators (or its inverse)."""
        index_map = tirx.IndexMap.from_func(self._store_map(), index_dtype="int32")
        return index_map.inverse([self.WARP_SIZE, self.local_size_out]) if inverse else index_map

    # ----- operand loads ------------------------------------------------------------------------
    def _check_ldmatrix_dtype(self, dtype):
        if _dt(dtype).bits not in (8, 16, 32):
            raise NotImplementedError(f"the mma emitter loads 8-, 16- and 32-bit operands, got {dtype}")

    def ldmatrix_a(self, A_local_buf, A_shared_buf, ki, rk=0):
        self._check_ldmatrix_dtype(self.a_dtype)
        return self._load_operand("A", A_local_buf, A_shared_buf, ki, rk)

    def ldmatrix_b(self, B_local_buf, B_shared_buf, ki, rk=0):
        self._check_ldmatrix_dtype(self.b_dtype)
        return self._load_operand("B", B_local_buf, B_shared_buf, ki, rk)

    def _load_operand(self, matrix, local_buf, shared_buf, ki, rk):
        is_a = matrix == "A"
        dtype = self.a_dtype if is_a else self.b_dtype
        bits = _dt(dtype).bits
        transposed = self.a_transposed if is_a else self.b_transposed
        # storage is (spatial, K) for A plain and B transposed, else (K, spatial)
        k_major = transposed != is_a
        tiles = self.warp_rows if is_a else self.warp_cols
        tile_s = self.micro_size_x if is_a else self.micro_size_y
        warp_tiles = self.warp_row_tiles if is_a else self.warp_col_tiles
        local_size = self.local_size_a if is_a else self.local_size_b
        chunk, micro_k = self.chunk, self.micro_size_k
        n_dim = self.n_dim
        buf, base = _region(shared_buf)
        lead = list(base[:-2])
        b0, b1 = base[-2], base[-1]
        need_trans = transposed if is_a else not transposed
        use_ldmatrix = bits == 16 or not need_trans
        # x4 loads four 8x(16 bytes) matrices; a B tile 8 wide has two
        num = min(4, local_size * bits // 32)
        func = f"tl::ptx_ldmatrix<{num}, {'true' if need_trans else 'false'}>"
        thread = self.get_thread_binding()
        emitter = self

        def stored(row, col):
            return buf[tuple(lead) + (b0 + row, b1 + col)]

        def element(s, k):
            return stored(s, k) if k_major else stored(k, s)

        def ldmatrix_source(lane, warp, i, ki, rk):
            ws = warp * warp_tiles + i * tile_s
            wk = rk * chunk + ki * micro_k
            r, c = get_ldmatrix_offset(matrix, lane, 0, 0, dtype, transposed)
            return T.address_of(stored(ws + r, wk + c) if k_major else stored(wk + r, ws + c))

        def element_source(lane, warp, i, e, ki, rk):
            ws = warp * warp_tiles + i * tile_s
            wk = rk * chunk + ki * micro_k
            s, k = mma_load_a_index(lane, e, bits) if is_a else mma_load_b_index(lane, e, bits, n_dim)
            return element(ws + s, wk + k)

        def lane_warp(thread):
            lane, warp_n, warp_m = emitter.extract_thread_binding(thread)
            return lane, (warp_m if is_a else warp_n)

        # (the macros name no loaded value: a name bound to a load becomes a local variable)
        @T.macro
        def _ldmatrix(local_buf, thread, ki, rk):
            lane, warp = lane_warp(thread)
            for i in T.unroll(tiles):
                T.evaluate(T.call_extern("int32", func, ldmatrix_source(lane, warp, i, ki, rk),
                                         T.address_of(local_buf[i * local_size])))

        @T.macro
        def _elementwise(local_buf, thread, ki, rk):
            lane, warp = lane_warp(thread)
            for i in T.serial(tiles):
                for e in T.serial(local_size):
                    local_buf[i * local_size + e] = element_source(lane, warp, i, e, ki, rk)

        if use_ldmatrix:
            return _ldmatrix(local_buf, thread, ki, rk)
        return _elementwise(local_buf, thread, ki, rk)

    # ----- mma ----------------------------------------------------------------------------------
    def _check_mma(self):
        combo = (self.a_dtype_abbrv, self.b_dtype_abbrv, self.accum_dtype_abbrv)
        if self.mma_prefix not in ("m16n8k16", "m16n8k32", "m16n8k8") or combo not in _SUPPORTED or \
                (self.mma_prefix == "m16n8k8") != (combo[0] == "tf32"):
            raise NotImplementedError(
                f"the mma emitter has no {self.mma_prefix} instruction for {self.a_dtype} x {self.b_dtype} -> "
                f"{self.accum_dtype}; supported: fp16/bf16 -> fp32, fp16 -> fp16, int8/uint8 -> int32, "
                f"fp32 (tf32) -> fp32")

    def mma(self, A_local_buf, B_local_buf, C_local_buf, k_inner=0):
        self._check_mma()
        warp_rows, warp_cols = self.warp_rows, self.warp_cols
        lsa, lsb, lso = self.local_size_a, self.local_size_b, self.local_size_out
        two = self.n_dim == 16
        a_step = k_inner * warp_rows * lsa if A_local_buf.scope() == "local.fragment" else 0
        b_step = k_inner * warp_cols * lsb if B_local_buf.scope() == "local.fragment" else 0

        @T.macro
        def _mma(A_local_buf, B_local_buf, C_local_buf):
            for i, j in T.grid(warp_rows, warp_cols):
                a = a_step + i * lsa
                b = b_step + j * lsb
                c = i * warp_cols * lso + j * lso
                T.evaluate(T.call_extern("int32", "tl::mma_sync", T.address_of(C_local_buf[c]),
                                         T.address_of(A_local_buf[a]), T.address_of(B_local_buf[b])))
                if two:
                    T.evaluate(T.call_extern("int32", "tl::mma_sync", T.address_of(C_local_buf[c + lso // 2]),
                                             T.address_of(A_local_buf[a]), T.address_of(B_local_buf[b + lsb // 2])))

        return _mma(A_local_buf, B_local_buf, C_local_buf)

    @property
    def mma_num_inst_m(self) -> int:
        """mma atoms (m16 rows of 16x16 tiles) per warp along M: ``mma_atom``'s first index range."""
        return self.warp_rows

    @property
    def mma_num_inst_n(self) -> int:
        """mma atoms per warp along N: ``mma_atom``'s second index range."""
        return self.warp_cols

    def mma_atom(self, A_local_buf, B_local_buf, C_local_buf, inst_m_idx, inst_n_idx, k_inner=0):
        """One step of ``mma``: the atom of warp tile ``(inst_m_idx, inst_n_idx)`` (ints or TIR
        expressions). Calling it for every ``(i, j)`` of ``T.grid(mma_num_inst_m, mma_num_inst_n)``
        issues exactly the instructions ``mma`` does, in the same fragment positions."""
        self._check_mma()
        warp_rows, warp_cols = self.warp_rows, self.warp_cols
        lsa, lsb, lso = self.local_size_a, self.local_size_b, self.local_size_out
        two = self.n_dim == 16
        a = (k_inner * warp_rows * lsa if A_local_buf.scope() == "local.fragment" else 0) + inst_m_idx * lsa
        b = (k_inner * warp_cols * lsb if B_local_buf.scope() == "local.fragment" else 0) + inst_n_idx * lsb
        c = inst_m_idx * warp_cols * lso + inst_n_idx * lso

        @T.macro
        def _mma_atom(A_local_buf, B_local_buf, C_local_buf):
            T.evaluate(T.call_extern("int32", "tl::mma_sync", T.address_of(C_local_buf[c]),
                                     T.address_of(A_local_buf[a]), T.address_of(B_local_buf[b])))
            if two:
                T.evaluate(T.call_extern("int32", "tl::mma_sync", T.address_of(C_local_buf[c + lso // 2]),
                                         T.address_of(A_local_buf[a]), T.address_of(B_local_buf[b + lsb // 2])))

        return _mma_atom(A_local_buf, B_local_buf, C_local_buf)

    # ----- accumulator stores -------------------------------------------------------------------
    def stmatrix(self, C_local_buf, C_buf, pid_m=None, pid_n=None):
        warp_rows, warp_cols, lso = self.warp_rows, self.warp_cols, self.local_size_out
        m_dim, n_dim = self.M_DIM, self.n_dim
        block_m = self.block_row_warps * warp_rows
        block_n = self.block_col_warps * warp_cols
        dims = len(C_buf.shape)
        if dims not in (2, 4):
            raise ValueError(f"stmatrix stores to a 2-D or 4-D buffer, got {dims}-D {C_buf.name}")
        to_global = pid_m is not None and pid_n is not None
        store_map = self._store_map()
        thread = self.get_thread_binding()
        emitter = self

        def target(lane, warp_m, warp_n, i, j, e):
            row, col = store_map(lane, e)
            if to_global:
                return ((pid_m * block_m + warp_m * warp_rows + i) * m_dim + row,
                        (pid_n * block_n + warp_n * warp_cols + j) * n_dim + col)
            if dims == 2:
                return (warp_m * warp_rows + i) * m_dim + row, (warp_n * warp_cols + j) * n_dim + col
            return warp_m * warp_rows + i, warp_n * warp_cols + j, row, col

        @T.macro
        def _store(C_local_buf, C_buf, thread):
            lane, warp_n, warp_m = emitter.extract_thread_binding(thread)
            for i, j in T.grid(warp_rows, warp_cols):
                for eo in T.serial(lso // 2):
                    for ei in T.vectorized(2):
                        C_buf[target(lane, warp_m, warp_n, i, j, eo * 2 + ei)] = \
                            C_local_buf[i * warp_cols * lso + j * lso + eo * 2 + ei]

        return _store(C_local_buf, C_buf, thread)

    # ----- T.Fragment layouts -------------------------------------------------------------------
    def _thread_of(self, warp_m, warp_n, lane):
        if self.is_m_first:
            return lane + self.WARP_SIZE * (warp_n + self.block_col_warps * warp_m)
        return lane + self.WARP_SIZE * (warp_m + self.block_row_warps * warp_n)

    def make_mma_load_layout(self, local_buf, matrix="A"):
        """``T.Fragment`` of a block operand tile (``[M, K]`` for A, ``[N, K]`` for B, or their
        transposes as stored): each element on the lane and register ``ldmatrix_*`` puts it."""
        if matrix not in ("A", "B"):
            raise ValueError("matrix should be either A or B")
        is_a = matrix == "A"
        bits = _dt(self.a_dtype if is_a else self.b_dtype).bits
        if bits not in (8, 16, 32):
            raise ValueError(f"Unsupported dtype {self.a_dtype if is_a else self.b_dtype}")
        transposed = self.a_transposed if is_a else self.b_transposed
        s_first = transposed != is_a
        tile_s = self.micro_size_x if is_a else self.micro_size_y
        tile_k = self.micro_size_k
        warp_tiles = self.warp_row_tiles if is_a else self.warp_col_tiles
        tiles = self.warp_rows if is_a else self.warp_cols
        local_size = self.local_size_a if is_a else self.local_size_b
        p = 32 // bits

        def forward(i, j):
            s, k = (i, j) if s_first else (j, i)
            warp, si = s // warp_tiles, s % warp_tiles
            tile, r = si // tile_s, si % tile_s
            kt, kk = k // tile_k, k % tile_k
            kb, kw = kk // (4 * p), kk % (4 * p)
            lane = (r % 8) * 4 + kw // p
            if is_a:
                e = ((r // 8) + 2 * kb) * p + kw % p
                thread = self._thread_of(warp, 0, lane)
            else:
                e = (r // 8) * 2 * p + kb * p + kw % p
                thread = self._thread_of(0, warp, lane)
            return thread, (kt * tiles + tile) * local_size + e

        return T.Fragment(list(local_buf.shape), forward_fn=forward)

    def make_mma_store_layout(self, local_buf):
        """``T.Fragment`` of the block accumulator tile ``[M, N]``: each element on the lane and
        register ``mma`` accumulates it in."""
        m_dim, n_dim, lso = self.M_DIM, self.n_dim, self.local_size_out
        wr, wc, warp_cols = self.warp_row_tiles, self.warp_col_tiles, self.warp_cols
        fp64 = self._use_fp64_store_index_map()

        def forward(i, j):
            wm, wn = i // wr, j // wc
            ti, r = (i % wr) // m_dim, i % m_dim
            tj, c = (j % wc) // n_dim, j % n_dim
            if fp64:
                lane, e = r * 4 + c // 2, c % 2
            else:
                lane = (r % 8) * 4 + (c % 8) // 2
                e = (c // 8) * 4 + (r // 8) * 2 + c % 2
            return self._thread_of(wm, wn, lane), (ti * warp_cols + tj) * lso + e

        return T.Fragment(list(local_buf.shape), forward_fn=forward)


class TensorCoreIntrinEmitterWithLadderTransform(TensorCoreIntrinEmitter):
    """Upstream's emitter for BitBLAS "ladder"-transformed B operands; here the shape attributes
    (the K extent of one mma follows the input dtype), with the plain layouts."""

    def __init__(self, *args, transform_kind_a=TransformKind.NonTransform, transform_kind_b=TransformKind.NonTransform,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.transform_kind_a = TransformKind(transform_kind_a)
        self.transform_kind_b = TransformKind(transform_kind_b)
