"""KernelArtifact: everything the runtime needs to launch one compiled kernel.

Contract between the compiler (``tilelang.engine.lower``) and the runtime:

``ParamSpec`` describes one PrimFunc parameter:
- ``kind`` is "tensor", "scalar" or "pointer"; ``dtype`` a TVM dtype string (see
  ``KNOWN_DTYPES``).
- A "pointer" param (``a: T.ptr``) is a raw device address, passed as an int or as a tensor's
  data pointer and given to the kernel as "ptr".  ``dtype``/``shape``/``strides`` describe the
  tensor ``T.make_tensor`` made over it (``dtype`` "handle" and shape ``[]`` when none was made);
  no symbol is read from them: each symbol they use has a source in ``symbols`` (or a tensor's
  shape).  A pointer is never an output; a tensor map may be built over it.
- ``shape``: for a tensor, one entry per dim, an int or a symbol name (str);
  for a scalar, ``[]``.
- ``strides``: ``None`` means contiguous row-major; otherwise one entry per
  dim, an int or a symbol name, in elements (not bytes).
- ``align`` (optional, default 16): the byte alignment the kernel assumes for
  the tensor's data pointer (vectorised loads, TMA).  Checked at call time.
- It answers upstream's ``KernelParam`` questions (``DtypeQueries``: ``is_scalar()``,
  ``torch_dtype()`` ...; ``torch_dtype`` maps a TVM dtype string to torch's).

``KernelArtifact`` describes the kernel:
- ``name``: the ``extern "C" __global__`` entry point in ``source``.
- ``kernel_args``: the __global__ function's argument order; each entry is a
  tensor param name (its data pointer is passed), a scalar param name (passed
  with the scalar's dtype), a symbol name (passed as int32) or a tensor map
  name (a ``const __grid_constant__ CUtensorMap``, 128 bytes by value, built
  on the host at each call; see ``tensormaps``).
- ``grid``: 3 Python integer expressions over symbol names and int scalar
  params, using only + - * // % unary minus, int literals, min() and max();
  the name ``NUM_SMS`` (the launching device's multiprocessor count) sizes
  the grid of a persistent kernel.
- ``block``: 3 ints; ``dynamic_smem``: bytes of dynamic shared memory, an int,
  or, for a kernel with shared buffers of run-time extent, an integer
  expression of the grid's grammar (without NUM_SMS) evaluated at each launch.
- ``symbols``: symbol -> [param index, dim index] reading the symbol from that
  tensor's shape, or [param index, -1] for an int scalar param.  A symbol that
  appears in shapes/strides but not here is read from its first occurrence.
  An entry ``name -> [i, -1]`` for a non-integer scalar param of that same
  name is allowed and ignored (it names the param, not a symbol).
- ``out_idx``: non-negative indices of output tensor params (may be empty).
- ``kernel_arg_types`` (optional): the C type of each kernel argument as one
  of ``ARG_TYPES`` ("ptr", "int32", "int64", "float32", ...), taken from the
  generated signature.  When None: "ptr" for tensors, the scalar's dtype for
  scalars, "int32" for symbols, "tensormap" for tensor maps.  Give it whenever a symbol is not an int32
  in the signature (e.g. an int64 shape var), since arguments are passed by
  raw bytes.
- ``index_bits`` (optional, default 32): width of the element-index arithmetic
  in the generated code; with 32 every tensor must have < 2**31 elements.
- ``tensormaps`` (optional, default []): the TMA descriptors the kernel
  takes, each a dict ``{"name", "param", "dtype", "dims", "strides", "box",
  "swizzle"}`` (all static ints):
  ``name`` an identifier, unique and distinct from params and symbols;
  ``param`` the index of the tensor param whose data pointer is the global
  address (its ``align`` must be >= 16, as TMA requires);
  ``dtype`` one of ``TENSORMAP_DTYPES``, of the same element size as the param;
  ``dims`` global extents in elements, innermost first, rank 1..5;
  ``strides`` byte strides of dims 1..rank-1 (rank-1 entries, multiples of 16);
  ``box`` box extents in elements, innermost first, each in [1, 256], with
  box[0] * element size a multiple of 16 bytes and, when swizzling, at most
  the swizzle width; ``swizzle`` the swizzle width in bytes (0, 32, 64, 128).
  When the param's shape and strides are static, the map must not address
  bytes beyond the tensor.
- ``parts`` (optional, default []): a prim_func of several ``T.Kernel`` blocks is one
  artifact per block, launched in order on one stream; each part takes ``params`` then the
  ``workspaces`` (scratch tensors ``{"name", "dtype", "shape"}``, shapes over the params'
  symbols, allocated uninitialised at each call) and has no ``out_idx`` of its own.  The
  artifact's own ``source`` is then every part's source, for reading; its launch fields are the
  first part's.
- ``l2_persist`` (optional, default []): ``T.annotate_l2_hit_ratio``, each a dict
  ``{"param", "hit_ratio"}``: the launcher sets a CUDA access-policy window over that tensor
  param's bytes (``hit_ratio`` in [0, 1] of them persisting in L2, the rest streaming) on the
  launch stream, with the persisting-L2 limit raised to it, and resets both after the launch.
- ``host_asserts`` (optional, default []): ``T.assume`` conditions over the params' symbols and
  integer scalars only, each ``{"expr", "text"}``: ``expr`` a Python condition (``parse_bool_expr``:
  integer arithmetic, comparisons, and/or/not), ``text`` the kernel's spelling. The launcher
  evaluates each before the launch and raises RuntimeError ("Assume: <text>") when one is false.
- ``cubin``: the compiled binary, or None (then it is compiled on demand).

``to_json``/``from_json`` round-trip everything except ``cubin``, which is
stored beside the JSON by the cache.  ``check()`` validates the artifact's
internal consistency and raises ``ArtifactError`` (a compiler bug, not a user
error) naming the offending field.

This module is pure Python: no torch, no tvm.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import asdict, dataclass, field, fields

FORMAT_VERSION = 1

# A grid expression may name the device's multiprocessor count (a persistent kernel's grid).
NUM_SMS = "NUM_SMS"

# TVM dtype string -> (bytes per element, category).  Sub-byte types are absent.
KNOWN_DTYPES: dict[str, tuple[int, str]] = {
    "bool": (1, "bool"),
    "int8": (1, "int"), "int16": (2, "int"), "int32": (4, "int"), "int64": (8, "int"),
    "uint8": (1, "uint"), "uint16": (2, "uint"), "uint32": (4, "uint"), "uint64": (8, "uint"),
    "float16": (2, "float"), "bfloat16": (2, "float"), "float32": (4, "float"),
    "float64": (8, "float"),
    "float8_e4m3fn": (1, "float"), "float8_e5m2": (1, "float"),
    "float8_e4m3fnuz": (1, "float"), "float8_e5m2fnuz": (1, "float"),
    "float8_e8m0fnu": (1, "float"),
}

# Sub-byte tensor dtypes -> logical elements per storage byte.  A tensor param of such a dtype
# keeps its logical shape and strides here; at call time it is a 1-byte torch tensor (int8, uint8,
# float4_e2m1fn_x2 ...) whose last dimension holds that many elements per byte, so the logical
# last extent is the tensor's times the factor and every other logical stride is its stride times
# the factor.
PACKED_DTYPES: dict[str, int] = {"float4_e2m1fn": 2, "int4": 2, "uint4": 2}

# TVM dtype -> the torch dtype of the same name where torch has it (``torch_dtype``)
TORCH_NAMES = {
    "bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
    "float8_e8m0fnu": "float8_e8m0fnu",
}
# The torch storage type of a packed sub-byte tensor (outputs of that dtype are allocated as it).
PACKED_STORAGE = {"float4_e2m1fn": "float4_e2m1fn_x2", "int4": "int8", "uint4": "uint8"}


def torch_dtype(tvm_dtype: str):
    """The torch dtype for a TVM dtype string; ArtifactError if torch lacks it."""
    import torch

    if tvm_dtype in PACKED_DTYPES:
        dt = getattr(torch, PACKED_STORAGE[tvm_dtype], None)
        return dt if isinstance(dt, torch.dtype) else torch.int8
    name = TORCH_NAMES.get(tvm_dtype)
    dt = getattr(torch, name, None) if name else None
    if not isinstance(dt, torch.dtype):
        raise ArtifactError(f"dtype {tvm_dtype!r} has no torch equivalent in torch {torch.__version__}")
    return dt


# C-level kinds a kernel argument can have (driver.ARG_FORMATS packs each of them)
ARG_TYPES = ("ptr", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
             "float16", "float32", "float64", "tensormap")
# dtypes a tensor map may have -> CUtensorMapDataType (TMA copies bits, so the 1- and 2-byte
# types without an enum of their own use the unsigned type of their size)
TENSORMAP_DTYPES: dict[str, int] = {
    "uint8": 0, "int8": 0, "float8_e4m3fn": 0, "float8_e5m2": 0, "float8_e4m3fnuz": 0,
    "float8_e5m2fnuz": 0, "float8_e8m0fnu": 0, "uint16": 1, "int16": 1, "uint32": 2, "int32": 3,
    "uint64": 4, "int64": 5, "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9,
}
TENSORMAP_SWIZZLES = (0, 32, 64, 128)
TENSORMAP_KEYS = ("name", "param", "dtype", "dims", "strides", "box", "swizzle")
_INT_ARG_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARCH = re.compile(r"^sm_(\d+)([af]?)$")


class IndexWidthError(ValueError):
    """A call binds a tensor of more than 2**31 elements to a kernel whose ``index_bits`` is 32
    (``JITKernel`` then runs its 64-bit-index variant, pass config ``tl.enable_wide_index``)."""


class ArtifactError(ValueError):
    """The artifact is internally inconsistent: a bug on the compiler side."""


class DtypeQueries:
    """Upstream's questions about a kernel parameter's type (``KernelParam``'s methods), for any
    object with a TVM dtype string ``dtype`` and a ``shape`` list."""

    def is_scalar(self) -> bool:
        return len(self.shape) == 0

    def _dtype_name(self) -> str:
        name = str(self.dtype)
        return name[len("torch."):] if name.startswith("torch.") else name

    def is_unsigned(self) -> bool:
        return self._dtype_name().startswith("uint")

    def is_float8(self) -> bool:
        return self._dtype_name().startswith("float8")

    def is_float4(self) -> bool:
        return self._dtype_name().startswith("float4")

    def is_boolean(self) -> bool:
        return self._dtype_name().startswith("bool")

    def torch_dtype(self):
        """The torch dtype of the parameter's elements (``torch.empty(shape, dtype=p.torch_dtype())``)."""
        return torch_dtype(self._dtype_name())


@dataclass
class ParamSpec(DtypeQueries):
    name: str
    kind: str
    dtype: str
    shape: list = field(default_factory=list)
    strides: list | None = None
    align: int = 16

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def is_pointer(self) -> bool:
        return self.kind == "pointer"


@dataclass
class KernelArtifact:
    name: str
    source: str
    params: list
    kernel_args: list
    grid: list
    block: list
    dynamic_smem: int
    arch: str
    symbols: dict
    out_idx: list
    cubin: bytes | None = None
    compile_flags: list = field(default_factory=list)
    index_bits: int = 32
    kernel_arg_types: list | None = None
    tensormaps: list = field(default_factory=list)
    parts: list = field(default_factory=list)        # several kernels: KernelArtifacts run in order
    workspaces: list = field(default_factory=list)   # their scratch buffers: {"name", "dtype", "shape"}
    l2_persist: list = field(default_factory=list)   # T.annotate_l2_hit_ratio: {"param", "hit_ratio"}
    host_asserts: list = field(default_factory=list)  # host-evaluable T.assume: {"expr", "text"}
    occupancy_step: bool = False    # tl.enable_occupancy_step: nvcc.compile_artifact may bound it (jit/occupancy)

    # ---- serialisation -------------------------------------------------
    def to_dict(self) -> dict:
        """A JSON-able dict of every field except ``cubin``."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cubin"}
        data["params"] = [asdict(p) for p in self.params]
        data["tensormaps"] = [_copy_tensormap(t) for t in self.tensormaps]
        data["parts"] = [p.to_dict() for p in self.parts]
        data["workspaces"] = [dict(w, shape=list(w["shape"])) for w in self.workspaces]
        data["l2_persist"] = [dict(w) for w in self.l2_persist]
        data["host_asserts"] = [dict(a) for a in self.host_asserts]
        data["format_version"] = FORMAT_VERSION
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict, cubin: bytes | None = None) -> "KernelArtifact":
        data = dict(data)
        version = data.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ArtifactError(f"artifact format_version {version} is not {FORMAT_VERSION}")
        known = {f.name for f in fields(cls)} - {"cubin"}
        unknown = set(data) - known
        if unknown:
            raise ArtifactError(f"artifact has unknown fields {sorted(unknown)}")
        data["params"] = [ParamSpec(**p) for p in data["params"]]
        # JSON turns the [param, dim] pairs into lists already; keep them lists.
        data["symbols"] = {k: list(v) for k, v in data["symbols"].items()}
        data["tensormaps"] = [_copy_tensormap(t) for t in data.get("tensormaps") or []]
        data["parts"] = [cls.from_dict(p) for p in data.get("parts") or []]
        data["workspaces"] = [dict(w) for w in data.get("workspaces") or []]
        data["l2_persist"] = [dict(w) for w in data.get("l2_persist") or []]
        data["host_asserts"] = [dict(a) for a in data.get("host_asserts") or []]
        return cls(cubin=cubin, **data)

    @classmethod
    def from_json(cls, text: str, cubin: bytes | None = None) -> "KernelArtifact":
        return cls.from_dict(json.loads(text), cubin=cubin)

    # ---- introspection helpers -----------------------------------------
    @property
    def kernel_source(self) -> str:
        """Upstream's name for ``source`` (``tilelang.lower(f).kernel_source``)."""
        return self.source

    @property
    def device_mod(self):
        """Upstream's device IRModule, as far as it can be read from here: ``.functions`` maps a
        ``GlobalVar`` per ``__global__`` kernel of the source (this one, then its ``parts``) to
        None; the lowered TIR itself is not kept."""
        from types import SimpleNamespace

        from tvm.ir import GlobalVar

        names = [self.name] + [p.name for p in self.parts if p.name != self.name]
        return SimpleNamespace(functions={GlobalVar(n): None for n in dict.fromkeys(names)})

    def param_index(self, name: str) -> int:
        for i, p in enumerate(self.params):
            if p.name == name:
                return i
        raise KeyError(name)

    def input_indices(self) -> list[int]:
        outs = set(self.out_idx)
        return [i for i in range(len(self.params)) if i not in outs]

    def symbol_sources(self) -> dict:
        """``symbols`` without the ignored entries naming non-integer scalar params."""
        out = {}
        for sym, src in self.symbols.items():
            pi, di = src
            if di == -1 and 0 <= pi < len(self.params):
                p = self.params[pi]
                if p.kind == "scalar" and p.name == sym and KNOWN_DTYPES.get(p.dtype, (0, ""))[1] not in ("int", "uint"):
                    continue
            out[sym] = src
        return out

    def all_symbols(self) -> list[str]:
        """Every symbol name, in first-occurrence order (shapes, then strides, then ``symbols``).

        An expression entry (``"m * 2 + 1"``) is not a symbol; the symbols it uses are bound elsewhere."""
        seen: dict[str, None] = {}
        for p in self.params:
            for entry in list(p.shape) + list(p.strides or []):
                if is_symbol(entry):
                    seen.setdefault(entry, None)
        for name in self.symbol_sources():
            seen.setdefault(name, None)
        return list(seen)

    def check(self) -> "KernelArtifact":
        """Raise ArtifactError unless the artifact is internally consistent; return self."""
        _check_header(self)
        _check_parts(self)
        for i, p in enumerate(self.params):
            _check_param(i, p)
        _check_symbols(self)
        _check_pointers(self)
        known = set(self.all_symbols())
        for p in self.params:
            for entry in list(p.shape) + list(p.strides or []):
                unknown = expr_names(entry) - known if is_shape_expr(entry) else set()
                if unknown:
                    raise ArtifactError(f"parameter {p.name!r}: shape entry {entry!r} uses {sorted(unknown)}, which "
                                        "no parameter's shape or scalar determines")
        _check_tensormaps(self)
        _check_l2_persist(self)
        for a in self.host_asserts:
            if set(a) != {"expr", "text"} or not isinstance(a["text"], str):
                raise ArtifactError(f"host_asserts entry {a!r}: needs exactly 'expr' and 'text'")
            parse_bool_expr(a["expr"], set(self.all_symbols()) | _int_scalar_names(self), what="host assert")
        _check_kernel_args(self)
        if isinstance(self.dynamic_smem, str):
            parse_int_expr(self.dynamic_smem, set(self.all_symbols()) | _int_scalar_names(self), what="dynamic_smem")
        for i, expr in enumerate(self.grid):
            tree = parse_int_expr(str(expr), set(self.all_symbols()) | _int_scalar_names(self) | {NUM_SMS},
                                  what=f"grid[{i}]")
            names = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in ("min", "max")]
            limit = 2**31 - 1 if i == 0 else 65535
            if not names and not 0 <= eval(compile(tree, "grid", "eval"), {"__builtins__": {}, "min": min, "max": max}) <= limit:
                raise ArtifactError(f"grid[{i}] = {expr!r} is outside CUDA's range [0, {limit}]")
        return self


    def tensormap_index(self, name: str) -> int:
        for j, t in enumerate(self.tensormaps):
            if t.get("name") == name:
                return j
        raise KeyError(name)


def _copy_tensormap(t):
    """A copy of a tensormap entry (lists copied), leaving anything malformed for check()."""
    if not isinstance(t, dict):
        return t
    return {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in t.items()}


def arch_number(arch: str) -> tuple[int, str]:
    """'sm_90a' -> (90, 'a'); raises ArtifactError for anything else."""
    m = _ARCH.match(arch or "")
    if not m:
        raise ArtifactError(f"arch {arch!r} is not of the form sm_<digits>[a|f], e.g. 'sm_90a'")
    return int(m.group(1)), m.group(2)


def _int_scalar_names(art: KernelArtifact) -> set[str]:
    return {p.name for p in art.params
            if p.kind == "scalar" and KNOWN_DTYPES.get(p.dtype, (0, ""))[1] in ("int", "uint")}


def _check_header(art: KernelArtifact) -> None:
    if not isinstance(art.name, str) or not _IDENT.match(art.name):
        raise ArtifactError(f"kernel name {art.name!r} is not a C identifier")
    arch_number(art.arch)
    if len(art.grid) != 3:
        raise ArtifactError(f"grid must have 3 entries, got {art.grid!r}")
    if len(art.block) != 3 or not all(type(b) is int and b >= 1 for b in art.block):
        raise ArtifactError(f"block must be 3 positive ints, got {art.block!r}")
    if art.block[0] * art.block[1] * art.block[2] > 1024:
        raise ArtifactError(f"block {art.block} has more than 1024 threads")
    if not (type(art.dynamic_smem) is int and art.dynamic_smem >= 0) and not isinstance(art.dynamic_smem, str):
        raise ArtifactError(f"dynamic_smem must be a non-negative int or an expression, got {art.dynamic_smem!r}")
    if art.index_bits not in (32, 64):
        raise ArtifactError(f"index_bits must be 32 or 64, got {art.index_bits!r}")
    names = [p.name for p in art.params]
    if len(set(names)) != len(names):
        raise ArtifactError(f"parameter names are not unique: {names}")
    for i in art.out_idx:
        if type(i) is not int or not 0 <= i < len(art.params):
            raise ArtifactError(f"out_idx entry {i!r} is not a parameter index in [0, {len(art.params)})")
        if art.params[i].kind != "tensor":
            raise ArtifactError(f"out_idx entry {i} is the {art.params[i].kind} parameter {art.params[i].name!r}")
    if len(set(art.out_idx)) != len(art.out_idx):
        raise ArtifactError(f"out_idx has duplicates: {art.out_idx}")


def _check_parts(art: KernelArtifact) -> None:
    """Several kernels: each part takes the params then the workspaces, and launches on its own."""
    if not art.parts:
        if art.workspaces:
            raise ArtifactError("workspaces need parts (the kernels that use them)")
        return
    names = [p.name for p in art.params]
    for w in art.workspaces:
        if set(w) != {"name", "dtype", "shape"} or w["dtype"] not in KNOWN_DTYPES:
            raise ArtifactError(f"workspace {w!r} is not {{'name', 'dtype', 'shape'}} of a known dtype")
    for k, part in enumerate(art.parts):
        if part.parts or part.out_idx:
            raise ArtifactError(f"part {k} ({part.name!r}) has parts or outputs of its own")
        have = [p.name for p in part.params]
        if have != names + [w["name"] for w in art.workspaces]:
            raise ArtifactError(f"part {k} ({part.name!r}) has params {have}, expected the artifact's "
                                f"{names} then its workspaces")
        part.check()


def _check_param(i: int, p: ParamSpec) -> None:
    where = f"parameter #{i} {p.name!r}"
    if not isinstance(p.name, str) or not p.name:
        raise ArtifactError(f"parameter #{i} has no name")
    if p.kind not in ("tensor", "scalar", "pointer"):
        raise ArtifactError(f"{where}: kind {p.kind!r} is not 'tensor', 'scalar' or 'pointer'")
    if p.kind == "pointer" and p.dtype == "handle":
        if p.shape or p.strides:
            raise ArtifactError(f"{where}: an untyped pointer (dtype 'handle') has shape [] and strides None")
        return
    if p.dtype not in KNOWN_DTYPES and not (p.kind != "scalar" and p.dtype in PACKED_DTYPES):
        raise ArtifactError(f"{where}: dtype {p.dtype!r} is not one of {sorted(KNOWN_DTYPES)} "
                            f"(tensors: also {sorted(PACKED_DTYPES)})")
    if p.kind == "scalar":
        if p.shape or p.strides:
            raise ArtifactError(f"{where}: a scalar has shape [] and strides None")
        return
    for label, dims in (("shape", p.shape), ("strides", p.strides or [])):
        for d in dims:
            ok = (type(d) is int and d >= 0) or (isinstance(d, str) and _IDENT.match(d))
            if not ok and is_shape_expr(d):
                parse_int_expr(d, expr_names(d), what=f"{where}: {label} entry")
                ok = True
            if not ok:
                raise ArtifactError(f"{where}: {label} entry {d!r} is not a non-negative int, an identifier "
                                    "or an integer expression of symbols")
    if p.strides is not None and len(p.strides) != len(p.shape):
        raise ArtifactError(f"{where}: strides {p.strides} and shape {p.shape} differ in length")
    if type(p.align) is not int or p.align < 1 or p.align & (p.align - 1):
        raise ArtifactError(f"{where}: align {p.align!r} is not a power of two")


def _check_symbols(art: KernelArtifact) -> None:
    for sym, src in art.symbols.items():
        if sym not in art.symbol_sources():
            continue  # a non-integer scalar param naming itself: not a symbol
        if not _IDENT.match(sym):
            raise ArtifactError(f"symbol {sym!r} is not an identifier")
        if len(src) != 2 or not all(type(x) is int for x in src):
            raise ArtifactError(f"symbol {sym!r}: source {src!r} is not [param index, dim index]")
        pi, di = src
        if not 0 <= pi < len(art.params):
            raise ArtifactError(f"symbol {sym!r}: param index {pi} out of range")
        p = art.params[pi]
        if di == -1:
            if p.kind != "scalar" or KNOWN_DTYPES[p.dtype][1] not in ("int", "uint"):
                raise ArtifactError(f"symbol {sym!r}: [{pi}, -1] needs an int scalar param, {p.name!r} is not")
        elif p.kind != "tensor" or not 0 <= di < len(p.shape) or (
                p.shape[di] != sym and affine_in(p.shape[di], sym) is None):
            raise ArtifactError(f"symbol {sym!r}: {p.name}.shape[{di}] is not {sym!r} or an affine expression of it "
                                f"alone (shape {p.shape})")


def _check_pointers(art: KernelArtifact) -> None:
    """Every symbol a pointer's shape or strides use is read from a scalar or a tensor."""
    sources = set(art.symbol_sources())
    tensor_syms = {e for p in art.params if p.kind == "tensor" for e in list(p.shape) + list(p.strides or [])
                   if is_symbol(e)}
    for p in art.params:
        if p.kind != "pointer":
            continue
        for entry in list(p.shape) + list(p.strides or []):
            names = expr_names(entry) if is_shape_expr(entry) else {entry} if isinstance(entry, str) else set()
            missing = sorted(n for n in names if n not in sources and n not in tensor_syms)
            if missing:
                raise ArtifactError(f"pointer parameter {p.name!r}: its shape entry {entry!r} uses {missing}, "
                                    "which no scalar parameter or tensor shape gives (a raw address has no shape)")


def _check_l2_persist(art: "KernelArtifact") -> None:
    for w in art.l2_persist:
        pi, ratio = w.get("param"), w.get("hit_ratio")
        if set(w) != {"param", "hit_ratio"} or not isinstance(pi, int) or not 0 <= pi < len(art.params) \
                or art.params[pi].kind != "tensor":
            raise ArtifactError(f"l2_persist entry {w!r}: needs exactly 'param' (a tensor param index) and "
                                "'hit_ratio'")
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= ratio <= 1.0:
            raise ArtifactError(f"l2_persist entry {w!r}: hit_ratio must be a number in [0, 1]")


def _check_kernel_args(art: KernelArtifact) -> None:
    params = {p.name for p in art.params}
    symbols = set(art.all_symbols())
    clash = params & symbols
    for name in clash:
        # a scalar param that is itself the symbol source is fine; anything else is ambiguous
        src = art.symbols.get(name)
        if not (src and src[1] == -1 and art.params[src[0]].name == name):
            raise ArtifactError(f"name {name!r} is both a parameter and a symbol")
    tmaps = {t["name"] for t in art.tensormaps}
    for a in art.kernel_args:
        if a not in params and a not in symbols and a not in tmaps:
            raise ArtifactError(f"kernel_args entry {a!r} is neither a parameter nor a symbol (nor a tensor map)")
    if art.kernel_arg_types is None:
        return
    if len(art.kernel_arg_types) != len(art.kernel_args):
        raise ArtifactError(f"kernel_arg_types {art.kernel_arg_types} and kernel_args {art.kernel_args} "
                            "differ in length")
    kinds = {p.name: p for p in art.params}
    for a, t in zip(art.kernel_args, art.kernel_arg_types):
        p = kinds.get(a)
        if a in tmaps:
            ok = t == "tensormap"
        elif p is not None and p.kind in ("tensor", "pointer"):
            ok = t == "ptr"
        elif p is not None:
            cat = KNOWN_DTYPES[p.dtype][1]
            ok = t in (_INT_ARG_TYPES if cat in ("int", "uint") else ("bool",) if cat == "bool"
                       else ("float16", "float32", "float64"))
        else:
            ok = t in _INT_ARG_TYPES
        if not ok:
            raise ArtifactError(f"kernel argument {a!r} cannot be passed as {t!r}")


def _check_tensormaps(art: KernelArtifact) -> None:
    if not isinstance(art.tensormaps, list):
        raise ArtifactError(f"tensormaps must be a list, got {type(art.tensormaps).__name__}")
    taken = {p.name for p in art.params} | set(art.all_symbols())
    seen: set[str] = set()
    for j, t in enumerate(art.tensormaps):
        if not isinstance(t, dict):
            raise ArtifactError(f"tensormaps[{j}] must be a dict, got {type(t).__name__}")
        name = t.get("name")
        where = f"tensormaps[{j}] {name!r}"
        if set(t) != set(TENSORMAP_KEYS):
            raise ArtifactError(f"{where}: has fields {sorted(t)}, expected exactly {sorted(TENSORMAP_KEYS)}")
        if not isinstance(name, str) or not _IDENT.match(name):
            raise ArtifactError(f"{where}: name is not an identifier")
        if name in seen:
            raise ArtifactError(f"{where}: name is not unique among tensormaps")
        if name in taken:
            raise ArtifactError(f"{where}: name clashes with a parameter or symbol of the same name")
        seen.add(name)
        pi = t["param"]
        if type(pi) is not int or not 0 <= pi < len(art.params):
            raise ArtifactError(f"{where}: param {pi!r} is not a parameter index in [0, {len(art.params)})")
        p = art.params[pi]
        if p.kind not in ("tensor", "pointer"):
            raise ArtifactError(f"{where}: param {pi} is the scalar parameter {p.name!r}, not a tensor")
        if p.align < 16:
            raise ArtifactError(f"{where}: param {p.name!r} has align {p.align}, but TMA needs a "
                                "16-byte aligned global address (align >= 16)")
        dtype = t["dtype"]
        if dtype not in TENSORMAP_DTYPES:
            raise ArtifactError(f"{where}: dtype {dtype!r} is not one of {sorted(TENSORMAP_DTYPES)}")
        esize = KNOWN_DTYPES[dtype][0]
        psize = KNOWN_DTYPES[p.dtype][0] if p.dtype in KNOWN_DTYPES else 1   # packed: addressed as bytes
        if esize != psize:
            raise ArtifactError(f"{where}: dtype {dtype} ({esize} B) and param {p.name!r}'s dtype {p.dtype} "
                                f"({psize} B) differ in element size")
        dims, strides, box, swizzle = t["dims"], t["strides"], t["box"], t["swizzle"]
        for label, v in (("dims", dims), ("strides", strides), ("box", box)):
            if not isinstance(v, list) or not all(type(x) is int for x in v):
                raise ArtifactError(f"{where}: {label} {v!r} is not a list of ints")
        rank = len(dims)
        if not 1 <= rank <= 5:
            raise ArtifactError(f"{where}: dims {dims} has rank {rank}, not in [1, 5]")
        for k, d in enumerate(dims):
            if not 1 <= d <= 2**32:
                raise ArtifactError(f"{where}: dims[{k}] = {d} is not in [1, 2**32]")
        if len(strides) != rank - 1:
            raise ArtifactError(f"{where}: strides {strides} must have rank - 1 = {rank - 1} entries "
                                "(byte strides of dims 1..rank-1)")
        for k, s in enumerate(strides):
            if s <= 0 or s % 16 or s >= 2**40:
                raise ArtifactError(f"{where}: strides[{k}] = {s} bytes is not a positive multiple of 16 "
                                    "below 2**40")
        if len(box) != rank:
            raise ArtifactError(f"{where}: box {box} and dims {dims} differ in length")
        for k, b in enumerate(box):
            if not 1 <= b <= 256:
                raise ArtifactError(f"{where}: box[{k}] = {b} is not in [1, 256]")
        if box[0] * esize % 16:
            raise ArtifactError(f"{where}: box[0] * element size = {box[0] * esize} bytes is not a multiple of 16")
        if type(swizzle) is not int or swizzle not in TENSORMAP_SWIZZLES:
            raise ArtifactError(f"{where}: swizzle {swizzle!r} is not one of {list(TENSORMAP_SWIZZLES)}")
        if swizzle and box[0] * esize > swizzle:
            raise ArtifactError(f"{where}: box[0] * element size = {box[0] * esize} bytes exceeds the "
                                f"swizzle width of {swizzle} bytes")
        _check_tensormap_bounds(where, p, esize, dims, strides)


def _check_tensormap_bounds(where: str, p: ParamSpec, esize: int, dims, strides) -> None:
    """For a static tensor, the map must stay inside the tensor's bytes."""
    if not all(type(e) is int for e in list(p.shape) + list(p.strides or [])):
        return
    if p.strides is None:
        pstrides, acc = [], 1
        for e in reversed(p.shape):
            pstrides.insert(0, acc)
            acc *= e
    else:
        pstrides = p.strides
    if any(e == 0 for e in p.shape):
        have = 0
    else:
        have = (1 + sum((e - 1) * s for e, s in zip(p.shape, pstrides))) * esize
    need = dims[0] * esize + sum((d - 1) * s for d, s in zip(dims[1:], strides))
    if need > have:
        raise ArtifactError(f"{where}: dims {dims} with byte strides {strides} span {need} bytes, more than "
                            f"the {have} bytes of param {p.name!r} (shape {p.shape})")


_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def is_symbol(entry) -> bool:
    """A shape/stride entry that names a symbol (``"M"``), as opposed to an int or an expression."""
    return isinstance(entry, str) and entry.isidentifier()


def is_shape_expr(entry) -> bool:
    """A shape/stride entry that is an integer expression of symbols (``"m * 2 + 1"``)."""
    return isinstance(entry, str) and not entry.isidentifier()


def expr_names(expr: str) -> set[str]:
    """The names an entry expression uses (``min``/``max`` excluded)."""
    try:
        tree = ast.parse(str(expr).strip(), mode="eval")
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - {"min", "max"}


def affine_in(entry, sym: str) -> tuple[int, int] | None:
    """``(a, b)`` when the entry expression is ``a * sym + b`` (a != 0) and uses no other name, else None:
    the argument binder then solves ``sym`` from the dimension (``n * 4 + 1`` given 17 -> 4)."""
    if not is_shape_expr(entry) or expr_names(entry) != {sym}:
        return None
    try:
        code = compile(parse_int_expr(entry, {sym}), "<shape entry>", "eval")
        values = [eval(code, {"__builtins__": {}, "min": min, "max": max}, {sym: x}) for x in range(4)]  # noqa: S307
    except (ArtifactError, ArithmeticError):
        return None
    a, b = values[1] - values[0], values[0]
    if a == 0 or any(v != a * x + b for x, v in enumerate(values)):
        return None
    return a, b


def parse_int_expr(expr: str, names: set[str], what: str = "expression") -> ast.Expression:
    """Parse an integer expression, allowing only names in ``names``, int literals,
    + - * // %, unary +/- and min()/max() calls.  Raises ArtifactError otherwise.

    The restriction matters: artifacts are read back from a disk cache and then
    evaluated, so nothing but integer arithmetic may be expressible."""
    try:
        tree = ast.parse(str(expr).strip(), mode="eval")
    except SyntaxError as e:
        raise ArtifactError(f"{what} {expr!r} is not a Python expression: {e.msg}") from None
    _check_int_node(tree.body, names, what, expr)
    return tree


def parse_bool_expr(expr: str, names: set[str], what: str = "condition") -> ast.Expression:
    """Parse a condition: ``parse_int_expr``'s integer expressions compared (== != < <= > >=) and
    combined with and / or / not. Raises ArtifactError otherwise."""
    try:
        tree = ast.parse(str(expr).strip(), mode="eval")
    except SyntaxError as e:
        raise ArtifactError(f"{what} {expr!r} is not a Python expression: {e.msg}") from None

    def check(node):
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                check(v)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            check(node.operand)
        elif isinstance(node, ast.Compare) and all(isinstance(o, _ALLOWED_CMPOPS) for o in node.ops):
            for v in [node.left, *node.comparators]:
                _check_int_node(v, names, what, expr)
        else:
            raise ArtifactError(f"{what} {expr!r}: {ast.unparse(node)!r} is not a comparison or and/or/not of them")

    check(tree.body)
    return tree


_ALLOWED_CMPOPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _check_int_node(node: ast.AST, names: set[str], what: str, expr: str) -> None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ALLOWED_BINOPS):
        _check_int_node(node.left, names, what, expr)
        _check_int_node(node.right, names, what, expr)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check_int_node(node.operand, names, what, expr)
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        pass
    elif isinstance(node, ast.Name) and node.id in names:
        pass
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
          and node.func.id in ("min", "max") and node.args and not node.keywords):
        for arg in node.args:
            _check_int_node(arg, names, what, expr)
    else:
        hint = ""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            hint = " (use // for integer division)"
        elif isinstance(node, ast.Name):
            hint = " (unknown name)"
        raise ArtifactError(f"{what} {expr!r}: {ast.unparse(node)!r} is not allowed{hint}; "
                            f"known names: {sorted(names)}")
