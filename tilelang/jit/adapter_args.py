"""Argument checking and packing for JITKernel: a generated fast path plus a slow diagnoser.

Contract:
- ``ArgPlan(artifact, launch, stream)`` precomputes everything per kernel and
  generates one Python function, ``plan.entry(*args)``, made of straight-line
  checks specialised to the kernel's ParamSpecs (the text is in
  ``plan.source``).  On a valid call it allocates any outputs, computes the
  grid, calls ``launch(device, gx, gy, gz, stream(device), values)`` with the
  kernel arguments in ``kernel_args`` order (and, for a kernel whose
  ``dynamic_smem`` is an expression, that call's size as a seventh argument),
  and returns the outputs.
- The fast path only decides "all good" or "something is wrong"; on the latter
  it calls ``plan.diagnose(args)``, which re-checks in a fixed order and
  raises the precise error: TypeError for the argument count, a non-tensor,
  a wrong dtype or a wrong scalar type; ValueError for ndim, dims, symbols,
  strides, devices, alignment and ranges; RuntimeError("no CUDA device: ...")
  when everything else is right but the tensors are not on CUDA and torch
  sees no GPU.  Every message names the parameter and its position.
- Both paths share the same predicates, so they accept exactly the same
  calls; a test checks this on many mutated argument lists.
- Accepted calls: all params, or (out_idx non-empty) the inputs only, in which
  case outputs are allocated with torch.empty on the inputs' device.
- Per call the fast path does only what the arguments require: a tensor of constant shape is
  checked with one tuple comparison (rank and extents), and once the launcher has launched on a
  device (``bind_direct``) the generated code launches there itself: one ``struct.pack_into``
  of the launch config and the arguments, under the launcher's lock, then cuLaunchKernelEx
  (``driver.KernelLauncher.direct_state``). Another device, another current context, launch
  attributes (PDL, L2 window, cooperative) keep going through the launcher.
- A grid outside CUDA's range (a dim of 0, negative or too large) is a ValueError, as upstream's.
- A kernel argument naming one of ``artifact.tensormaps`` is passed as the
  128 encoded bytes of a CUtensorMap over its tensor's data pointer, from
  ``encode_tensormap(dtype, dims, strides, box, swizzle, address)``
  (``ArgPlan(..., encode_tensormap=fn)``; default ``driver.encode_tensormap``),
  memoised per plan and tensor map by (device, address).

Nothing from the artifact is pasted into the generated code except ints and
grid expressions that ``artifact.parse_int_expr`` has restricted to integer
arithmetic over known names; param and symbol names become generated locals.
"""

from __future__ import annotations

import ast
import math
import numbers
import operator

import torch

from tilelang import targets
from tilelang.artifact import (KNOWN_DTYPES, NUM_SMS, PACKED_DTYPES, ArtifactError, IndexWidthError, KernelArtifact,
                               affine_in, expr_names, is_shape_expr, parse_bool_expr, parse_int_expr, torch_dtype)
from tilelang.artifact import PACKED_STORAGE as _PACKED_STORAGE, TORCH_NAMES as _TORCH_NAMES
from tilelang.jit import driver as _driver

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
GRID_X_MAX, GRID_YZ_MAX = 2**31 - 1, 65535
_F32_MAX = 3.4028234663852886e38
_F16_MAX = 65504.0
TENSORMAP_CACHE_SIZE = 64  # encoded tensor maps kept per plan and tensor map (then cleared)

# scalar dtype -> kernel argument kind understood by driver.arg_layout
_SCALAR_KINDS = {"bool": "bool", "float16": "float16", "float32": "float32", "float64": "float64",
                 **{t: t for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}}


# Packed sub-byte tensors (artifact.PACKED_DTYPES) travel in any 1-byte torch tensor; outputs of
# such a dtype are allocated as artifact.PACKED_STORAGE's type.
_PACKED_OK = tuple(dt for dt in {getattr(torch, n, None) for n in (
    "int8", "uint8", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float4_e2m1fn_x2")} if isinstance(dt, torch.dtype))


def _packed_shape(shape, k: int) -> tuple:
    """The logical shape of a packed tensor: the last extent holds k elements per byte."""
    return (*shape[:-1], shape[-1] * k) if len(shape) else tuple(shape)


def _packed_strides(strides, k: int) -> tuple:
    """The logical strides of a packed tensor (in elements): all but the last scale by k."""
    return (*(x * k for x in strides[:-1]), strides[-1]) if len(strides) else tuple(strides)


def _storage_dims(dims, k: int, last_is_extent: bool) -> tuple:
    """Logical shape (or strides) -> the packed storage tensor's."""
    if not len(dims):
        return tuple(dims)
    if last_is_extent:
        return (*dims[:-1], -(-dims[-1] // k))
    return (*(x // k for x in dims[:-1]), dims[-1])


# ---------------------------------------------------------------- scalar predicates
def _int_pred(lo: int, hi: int):
    def ok(x) -> bool:
        if type(x) is not int and not isinstance(x, numbers.Integral):
            return False
        return lo <= x <= hi
    return ok


def _float_pred(limit: float):
    def ok(x) -> bool:
        if type(x) is not float and not isinstance(x, numbers.Real):
            return False
        # NaN and +-inf are representable; finite values beyond the type's range are not
        return x != x or abs(x) == math.inf or abs(x) <= limit
    return ok


def _bool_ok(x) -> bool:
    return type(x) is bool or (isinstance(x, numbers.Integral) and x in (0, 1))


def int_range(dtype: str) -> tuple[int, int]:
    size, cat = KNOWN_DTYPES[dtype]
    if cat == "uint":
        return 0, 2 ** (8 * size) - 1
    return -(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1


def float_limit(dtype: str) -> float:
    return {"float16": _F16_MAX, "float32": _F32_MAX}.get(dtype, math.inf)


def scalar_rule(dtype: str, passed_as=()) -> tuple:
    """("bool",) | ("int", lo, hi) | ("float", limit): the values a scalar param accepts, given
    its dtype and the (possibly narrower) C types it is passed to the kernel as."""
    cat = KNOWN_DTYPES[dtype][1]
    if cat == "bool":
        return ("bool",)
    if cat in ("int", "uint"):
        lo, hi = int_range(dtype)
        for t in passed_as:
            tlo, thi = int_range(t)
            lo, hi = max(lo, tlo), min(hi, thi)
        return ("int", lo, hi)
    return ("float", min([float_limit(dtype)] + [float_limit(t) for t in passed_as]))


def scalar_predicate(rule: tuple):
    if rule[0] == "bool":
        return _bool_ok
    if rule[0] == "int":
        return _int_pred(rule[1], rule[2])
    return _float_pred(rule[1])


def _span(shape, strides) -> int:
    """Largest element offset + 1 addressed by a strided tensor (0 when empty)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * t for s, t in zip(shape, strides))


def _stream_getter():
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream


# KernelLauncher.direct_state keys the inline launch uses (as generated locals "_d" + key)
_DIRECT_KEYS = ("lock", "get_current", "cur_ptr", "cur", "ctx", "pack", "buf", "off", "launch_ex", "cfg", "func",
                "params", "fail")

_DRIVER_ENCODE = _driver.encode_tensormap

_SM_COUNTS: dict = {}


def device_sm_count(device: int) -> int:
    """Multiprocessors of CUDA device ``device`` (cached): a persistent kernel's grid size.
    Device -1 (a CPU-side test of the fast path) counts as 132, an H100/H200's."""
    n = _SM_COUNTS.get(device)
    if n is None:
        n = _SM_COUNTS[device] = (targets.sm_count("sm_90a") if device < 0 else
                                  torch.cuda.get_device_properties(device).multi_processor_count)
    return n


_CUDA_SEEN = []   # non-empty once torch has seen a GPU (availability does not go away)


def _current_device() -> int:
    """torch's current CUDA device (for a kernel without tensor arguments)."""
    if not _CUDA_SEEN:
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device: torch.cuda.is_available() is False")
        _CUDA_SEEN.append(True)
    return torch.cuda.current_device()


class ArgPlan:
    """Per-kernel argument plan: bindings, generated fast path and slow diagnoser."""

    def __init__(self, artifact: KernelArtifact, launch=None, stream=None, device_type: str = "cuda",
                 encode_tensormap=None):
        # device_type="cpu" exists for tests only: it lets CPU tensors through so the
        # whole fast path (packing, grid, outputs) can be checked without a GPU.
        if device_type not in ("cuda", "cpu"):
            raise ValueError(f"device_type must be 'cuda' or 'cpu', got {device_type!r}")
        self.device_type = device_type
        self.art = artifact.check()
        self.name = artifact.name
        self.params = artifact.params
        self.outputs = list(artifact.out_idx)
        self.inputs = artifact.input_indices()
        self.all = list(range(len(self.params)))
        self.dtypes = [torch_dtype(p.dtype) if p.kind == "tensor" else None for p in self.params]
        self.packs = [PACKED_DTYPES.get(p.dtype, 1) if p.kind == "tensor" else 1 for p in self.params]
        self.symbols = artifact.all_symbols()
        self.scalar_syms = {}  # param index -> symbols it defines
        for sym, (pi, di) in artifact.symbol_sources().items():
            if di == -1:
                self.scalar_syms.setdefault(pi, []).append(sym)
        self.tensormaps = list(artifact.tensormaps)
        self.encode_tensormap = encode_tensormap or _driver.encode_tensormap
        self.arg_refs, self.arg_kinds = self._kernel_arg_refs()
        # T.annotate_l2_hit_ratio: the tensor whose address follows the kernel arguments in the
        # launch values (the launcher's access-policy window; one per stream, the last one wins)
        self.l2_param = artifact.l2_persist[-1]["param"] if getattr(artifact, "l2_persist", None) else None
        self.ptr_params = self._ptr_params()
        self.sym_ranges = self._symbol_ranges()
        self.rules = [self._scalar_rule(i) if p.kind == "scalar" else None for i, p in enumerate(self.params)]
        self.preds = [scalar_predicate(r) if r else None for r in self.rules]
        self.alloc_problem = self._alloc_problem()
        self.const_shapes = frozenset(i for i, p in enumerate(self.params) if p.kind == "tensor"
                                      and all(type(e) is int for e in p.shape))
        self.launch = launch
        self.stream = stream or _stream_getter()
        self.source = self._generate()
        ns = self._namespace()
        exec(compile(self.source, f"<tilelang arg plan for {self.name}>", "exec"), ns)
        self._ns = ns
        self.entry = ns["_entry"]

    def set_launch(self, launch) -> None:
        """Replace the launch callable the generated code calls (looked up per call). A launcher
        with ``direct_state`` (driver.KernelLauncher) is also inlined into the fast path after its
        first successful launch (``bind_direct``)."""
        self.launch = launch
        self._ns["_ddev"] = None
        self._ns["_launch"] = self._launch_then_bind if hasattr(launch, "direct_state") else launch

    def _launch_then_bind(self, device, gx, gy, gz, stream, values, smem=None) -> None:
        launch = self.launch
        launch(device, gx, gy, gz, stream, values, smem)
        if launch is self.launch and smem is None:     # (a run-time size is never bound)
            self.bind_direct(device)

    def bind_direct(self, device: int) -> bool:
        """Let the generated code launch on ``device`` itself (``KernelLauncher.direct_state``):
        it packs the launch config and the arguments with one ``struct.pack_into`` and calls
        cuLaunchKernelEx, skipping the launcher's call. Calls on other devices, or with another
        context current, keep going through the launcher. False when the launcher offers no
        inline launch for this kernel (launch attributes, cooperative, old driver)."""
        launch, ns = self.launch, self._ns
        state = launch.direct_state(device) if self.l2_param is None else None
        if (state is None or tuple(state["block"]) != tuple(self.art.block)
                or state["smem"] != self.art.dynamic_smem):
            ns["_launch"] = launch
            return False
        ns.update({"_d" + key: state[key] for key in _DIRECT_KEYS})
        ns["_launch"] = launch
        ns["_ddev"] = device     # last: the generated code tests it before using the others
        return True

    # ------------------------------------------------------------ construction helpers
    def _kernel_arg_refs(self):
        """For each kernel arg: ('ptr', i) | ('scalar', i) | ('sym', name) | ('tmap', j), and its
        driver kind."""
        by_name = {p.name: i for i, p in enumerate(self.params)}
        tmaps = {t["name"]: j for j, t in enumerate(self.tensormaps)}
        refs, kinds = [], []
        declared = self.art.kernel_arg_types
        for n, a in enumerate(self.art.kernel_args):
            i = by_name.get(a)
            if a in tmaps:
                refs.append(("tmap", tmaps[a]))
                kinds.append("tensormap")
            elif i is not None and self.params[i].kind in ("tensor", "pointer"):
                refs.append(("ptr", i))
                kinds.append("ptr")
            elif i is not None:
                dtype = self.params[i].dtype
                if dtype not in _SCALAR_KINDS:
                    raise ArtifactError(f"scalar parameter {a!r} has dtype {dtype}, which cannot be "
                                        f"passed to a kernel; use one of {sorted(_SCALAR_KINDS)}")
                refs.append(("scalar", i))
                kinds.append(_SCALAR_KINDS[dtype])
            else:
                refs.append(("sym", a))
                kinds.append("int32")
            if declared is not None:
                kinds[-1] = declared[n]  # the generated signature is the authority on the ABI
        return refs, kinds

    def _ptr_params(self) -> list[int]:
        """Tensor params whose data pointer the launch needs (passed, or under a tensor map)."""
        out: list[int] = []
        for kind, ref in self.arg_refs:
            i = ref if kind == "ptr" else self.tensormaps[ref]["param"] if kind == "tmap" else None
            if i is not None and i not in out:
                out.append(i)
        if self.l2_param is not None and self.l2_param not in out:
            out.append(self.l2_param)
        return out

    def _make_tensormap(self, j: int):
        """``_tm{j}(address, device) -> bytes``: tensor map j encoded over ``address``, memoised."""
        t = self.tensormaps[j]
        dtype, swizzle = t["dtype"], t["swizzle"]
        dims, strides, box = tuple(t["dims"]), tuple(t["strides"]), tuple(t["box"])
        encode, cache, kname = self.encode_tensormap, {}, self.name
        pname = self.params[t["param"]].name
        if encode is _DRIVER_ENCODE:   # the driver's own: checked and prepared once, not per address
            fast = _driver.tensormap_encoder(dtype, dims, strides, box, swizzle)

            def encode(dtype, dims, strides, box, swizzle, address):
                return fast(address)

        def tensormap(address, device):
            blob = cache.get((device, address))
            if blob is None:
                try:
                    blob = encode(dtype, dims, strides, box, swizzle, address)
                except _driver.CudaDriverError as e:
                    raise _driver.CudaDriverError(f"{kname}: encoding tensor map {t['name']!r} over parameter "
                                                  f"{pname!r}: {e}", e.code, e.name) from e
                if type(blob) is not bytes or len(blob) != _driver.TENSORMAP_SIZE:
                    raise RuntimeError(f"{kname}: the tensor map encoder returned {type(blob).__name__} of "
                                       f"length {len(blob) if hasattr(blob, '__len__') else '?'} for "
                                       f"{t['name']!r}, not {_driver.TENSORMAP_SIZE} bytes")
                if len(cache) >= TENSORMAP_CACHE_SIZE:
                    cache.clear()
                cache[(device, address)] = blob
            return blob

        tensormap.cache = cache
        return tensormap

    def _scalar_rule(self, i: int) -> tuple:
        passed_as = [t for (kind, ref), t in zip(self.arg_refs, self.arg_kinds) if kind == "scalar" and ref == i]
        return scalar_rule(self.params[i].dtype, passed_as)

    def _symbol_ranges(self) -> dict:
        """symbol -> (lo, hi): the values it may take, from the int types it is passed as (a
        symbol the kernel receives as int64 is used in 64-bit arithmetic there); a symbol it does
        not receive is int32 when the kernel indexes with 32 bits."""
        ranges = {}
        for (kind, ref), t in zip(self.arg_refs, self.arg_kinds):
            if kind == "sym":
                size, cat = KNOWN_DTYPES[t]
                lo, hi = (0, 2 ** (8 * size) - 1) if cat == "uint" else (-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1)
                old = ranges.get(ref, (-(2**63), 2**64))
                ranges[ref] = (max(lo, old[0]), min(hi, old[1]))
        for sym in self.symbols:
            if sym not in ranges:
                ranges[sym] = (INT32_MIN, INT32_MAX) if self.art.index_bits == 32 else (-(2**63), 2**63 - 1)
        return ranges

    def occurrences(self, indices) -> list[tuple[str, int, int, object]]:
        """(where, param index, dim, entry) for every shape/stride entry and scalar symbol source."""
        occ = []
        for i in indices:
            p = self.params[i]
            if p.kind == "tensor":
                occ += [("shape", i, d, e) for d, e in enumerate(p.shape) if not is_shape_expr(e)]
                occ += [("stride", i, d, e) for d, e in enumerate(p.strides or []) if not is_shape_expr(e)]
            else:
                occ += [("scalar", i, -1, s) for s in self.scalar_syms.get(i, [])]
        return occ

    def expr_occurrences(self, indices) -> list[tuple[str, int, int, str]]:
        """(where, param index, dim, expression) for the shape/stride entries that are expressions."""
        occ = []
        for i in indices:
            p = self.params[i]
            if p.kind == "tensor":
                occ += [("shape", i, d, e) for d, e in enumerate(p.shape) if is_shape_expr(e)]
                occ += [("stride", i, d, e) for d, e in enumerate(p.strides or []) if is_shape_expr(e)]
        return occ

    def solved_symbols(self, indices) -> list[tuple[str, int, int, int, int]]:
        """(symbol, param, dim, a, b) for the symbols read off a dimension ``a * sym + b``."""
        out = []
        for sym, (pi, di) in self.art.symbol_sources().items():
            if di >= 0 and pi in indices and is_shape_expr(self.params[pi].shape[di]):
                out.append((sym, pi, di, *affine_in(self.params[pi].shape[di], sym)))
        return out

    @staticmethod
    def _entry_code(e, var) -> str:
        """Python code for a shape/stride entry, symbols read from the locals in ``var``."""
        if isinstance(e, int):
            return str(e)
        if not is_shape_expr(e):
            return var[e]
        tree = parse_int_expr(e, set(var), what="shape entry")

        class _Rename(ast.NodeTransformer):
            def visit_Name(self, node):  # noqa: N802 - ast's name
                return ast.copy_location(ast.Name(var[node.id], ast.Load()), node) if node.id in var else node

        return "(" + ast.unparse(_Rename().visit(tree)) + ")"

    @staticmethod
    def _entry_value(e, env) -> int:
        """An entry's value given ``env`` (symbol -> (value, where)), for diagnosis."""
        if isinstance(e, int):
            return e
        if not is_shape_expr(e):
            return env[e][0]
        code = compile(parse_int_expr(e, set(env), what="shape entry"), "<shape entry>", "eval")
        return eval(code, {"__builtins__": {}, "min": min, "max": max}, {k: v[0] for k, v in env.items()})  # noqa: S307

    def _alloc_problem(self) -> str | None:
        """Why an inputs-only call cannot allocate the outputs, or None."""
        if not self.outputs:
            return None
        bound = {e for _, _, _, e in self.occurrences(self.inputs) if isinstance(e, str)}
        bound |= {sym for sym, *_ in self.solved_symbols(self.inputs)}
        for sym in self.symbols:
            if sym not in bound:
                users = [self.params[i].name for i in self.outputs
                         if any(sym == e or (is_shape_expr(e) and sym in expr_names(e))
                                for e in self.params[i].shape + (self.params[i].strides or []))]
                what = f"the shape of output {users[0]!r} uses" if users else "the kernel needs"
                return (f"{what} symbol {sym!r}, which no input determines; "
                        f"pass all {len(self.params)} arguments instead")
        return None

    def _namespace(self) -> dict:
        ns = {"_ddev": None, "_T": torch.Tensor, "_fail": self.fail, "_empty": torch.empty,
              "_empty_strided": torch.empty_strided, "_index": operator.index,
              "_span": _span, "_cur_dev": _current_device, "_odd_grid": self._odd_grid,
              "_assume_failed": self._assume_failed,
              "_no_alloc": self._no_alloc, "_launch": self.launch, "_stream": self.stream,
              "_fail_none": self._fail_with_none,
              "_num_sms": device_sm_count, "_pk_shape": _packed_shape, "_pk_strides": _packed_strides,
              "_st_dims": _storage_dims,
              "_IMAX": INT32_MAX, "_IMIN": INT32_MIN}
        for i, dt in enumerate(self.dtypes):
            ns[f"_dt{i}"] = dt
            ns[f"_dts{i}"] = _PACKED_OK
            ns[f"_ok{i}"] = self.preds[i]
        for j in range(len(self.tensormaps)):
            ns[f"_tm{j}"] = self._make_tensormap(j)
            ns[f"_tmc{j}"] = ns[f"_tm{j}"].cache
        for i, p in enumerate(self.params):
            if p.kind == "pointer":
                ns[f"_addr{i}"] = pointer_address(p.dtype, self.device_type)
        return ns

    # ------------------------------------------------------------ code generation
    def _generate(self, null=frozenset(), name="_entry") -> str:
        if null:
            return self._generate_plain(null, name).replace("return _fail(args)", "return _fail_none(args)")
        return self._generate_plain(null, name)

    def _generate_plain(self, null, name) -> str:
        lines = [f"def {name}(*args):", "    n = len(args)"]
        if self.outputs:
            lines.append(f"    if n == {len(self.inputs)}:")
            if self.alloc_problem:
                lines.append("        return _no_alloc(args)")
            else:
                lines += ["        " + s for s in self._body(self.inputs, self.outputs, null)]
        lines.append(f"    if n == {len(self.params)}:")
        lines += ["        " + s for s in self._body(self.all, [], null)]
        lines.append("    return _fail(args)")
        return "\n".join(lines) + "\n"

    def _nullable(self) -> frozenset:
        """Tensor params that may be passed as None (a null pointer, as upstream allows): inputs
        whose shape and strides are all constants, so that no symbol depends on them."""
        return frozenset(i for i in self.inputs if self.params[i].kind == "tensor"
                         and all(isinstance(e, int) for e in self.params[i].shape + (self.params[i].strides or [])))

    def _nullable_for(self, nones: frozenset) -> bool:
        """Whether one call may pass None for the tensor inputs ``nones``: each is ``_nullable``, or
        has extents that are constants or plain symbols another tensor or scalar of this call binds
        too (``mask: (n,)`` beside ``x: (n,)``: TileKernels' optional tensors), constant strides,
        and no tensor map."""
        memo = self.__dict__.setdefault("_nullable_memo", {})
        if nones not in memo:
            memo[nones] = self._nullable_check(nones)
        return memo[nones]

    def _nullable_check(self, nones: frozenset) -> bool:
        if not nones <= set(self.inputs):
            return False
        const = self._nullable()
        if nones <= const:
            return True
        bound = {e for _, _, _, e in self.occurrences([j for j in self.inputs if j not in nones]) if isinstance(e, str)}
        own = self._own_symbols(nones)
        mapped = {t["param"] for t in self.tensormaps}
        for i in nones - const:
            p = self.params[i]
            if p.kind != "tensor" or i in mapped:
                return False
            for e in list(p.shape) + list(p.strides or []):
                if isinstance(e, int) or (not is_shape_expr(e) and (e in bound or e in own)):
                    continue
                if is_shape_expr(e) and expr_names(e) <= bound:
                    continue
                return False
        return True

    def _own_symbols(self, nones) -> set:
        """Shape and stride symbols of the tensors ``nones`` that nothing else has (no other
        parameter, not the grid): null tensors leave them 0 (TileKernels' optional tensors, such as
        ``to_physical_map: (num_logical_experts, num_duplicate_experts)`` or a ``T.StridedTensor``
        output; the kernel must not touch them)."""
        def names(entries):
            out = set()
            for e in entries:
                if isinstance(e, str):
                    out |= expr_names(e) if is_shape_expr(e) else {e}
            return out

        def of(j):
            p = self.params[j]
            if p.kind != "tensor":
                return set(self.scalar_syms.get(j, []))
            return names(list(p.shape) + list(p.strides or []))
        mine = set().union(*(of(i) for i in nones)) if nones else set()
        taken = set().union(*(of(j) for j in range(len(self.params)) if j not in nones))
        taken |= names([g for g in list(self.art.grid) + [self.art.dynamic_smem] if isinstance(g, str)])
        return mine - taken

    def _null_entry(self, nones: frozenset = None):
        """The entry that accepts None for the tensors ``nones`` (default: the ``_nullable`` ones;
        built on first use, one per set). Their checks run under ``if a is not None``, after every
        other parameter's, so the symbols they share are bound by then."""
        null = self._nullable() if nones is None else frozenset(nones) | self._nullable()
        entries = self.__dict__.setdefault("_null_entries", {})
        entry = entries.get(null)
        if entry is None:
            name = f"_entry_null{len(entries)}"
            source = self._generate(null, name)
            exec(compile(source, f"<tilelang arg plan for {self.name}, None allowed>", "exec"), self._ns)
            entry = entries[null] = self._ns[name]
        return entry

    def _body(self, indices: list[int], alloc: list[int], null=frozenset()) -> list[str]:
        fail = "return _fail(args)"
        out = [f"{''.join(f'a{i}, ' for i in indices)}= args"] if indices else []
        var: dict[str, str] = {}  # symbol -> local holding its value
        order = [i for i in indices if i not in null] + [i for i in indices if i in null]
        own = self._own_symbols(null) if null else set()
        out += [f"y{self.symbols.index(sym)} = 0" for sym in sorted(own)]   # (a null tensor's own: 0)
        for where, i, d, e in self._ordered(order):
            if where == "shape" and i in self.const_shapes:
                continue   # checked at the head, in one comparison
            lines = self._emit_entry(where, i, d, e, var, fail)
            if i in null:   # constants, or symbols bound above (_nullable_for): checks under a guard
                lines = [f"if a{i} is not None:"] + ["    " + ln for ln in lines] if where == "head" else \
                    ["    " + ln for ln in lines]
            out += lines
        for sym, i, d, a, b in self.solved_symbols(indices):   # `n * 4` given the dimension: n
            if sym not in var:
                var[sym] = v = f"y{self.symbols.index(sym)}"
                out += [f"{v} = (s{i}[{d}] - {b}) // {a}", f"if {v} < 0 or {v} * {a} + {b} != s{i}[{d}]: {fail}"]
        for where, i, d, e in self.expr_occurrences(indices):   # after every symbol is bound
            if all(n in var for n in expr_names(e)):
                guard = f"a{i} is not None and " if i in null else ""
                have = f"{'s' if where == 'shape' else 't'}{i}[{d}]"
                out.append(f"if {guard}{have} != {self._entry_code(e, var)}: {fail}")
        scalar_bound = {e for w, _, _, e in self.occurrences(indices) if w == "scalar"}
        for sym, v in var.items():
            lo, hi = self.sym_ranges[sym]
            # shape/stride values are never negative; scalar-bound symbols may be
            low = f" or {v} < {lo}" if sym in scalar_bound or (lo > 0 and sym not in own) else ""
            out.append(f"if {v} > {hi}{low}: {fail}")
        out += self._emit_span_checks(indices, var, fail, null)
        out += self._emit_device(indices, fail, null)
        for i in self.ptr_params:
            if i in indices:
                if self.params[i].kind != "pointer":   # a pointer's address is taken at its head
                    out.append(f"p{i} = a{i}.data_ptr()" + (f" if a{i} is not None else 0" if i in null else ""))
                if self.params[i].align > 1:
                    out.append(f"if p{i} & {self.params[i].align - 1}: {fail}")
        for o in alloc:
            out += self._emit_alloc(o, var)
        return out + self._emit_launch(var, indices)

    def _ordered(self, indices):
        """Per param: the tensor header, then its shape/stride entries (scalars: one check)."""
        occ = self.occurrences(indices)
        for i in indices:
            yield ("head", i, None, None)
            for o in occ:
                if o[1] == i:
                    yield o

    def _emit_entry(self, where, i, d, e, var, fail) -> list[str]:
        p = self.params[i]
        if where == "head":
            if p.kind == "scalar":
                return [f"if not {self._inline_scalar_check(i)} and not _ok{i}(a{i}): {fail}"]
            if p.kind == "pointer":
                return [f"p{i} = _addr{i}(a{i})", f"if p{i} is None: {fail}"]
            k = self.packs[i]
            dtype_ok = f"a{i}.dtype is not _dt{i}" if k == 1 else f"a{i}.dtype not in _dts{i}"
            lines = [f"if not isinstance(a{i}, _T) or {dtype_ok}: {fail}", f"s{i} = a{i}.shape"]
            if i in self.const_shapes:   # one comparison covers the rank and every extent
                if k != 1:
                    lines.append(f"s{i} = _pk_shape(s{i}, {k})")
                lines.append(f"if s{i} != {tuple(p.shape)!r}: {fail}")
            else:
                lines.append(f"if len(s{i}) != {len(p.shape)}: {fail}")
                if k != 1:  # checks and symbols see the logical (unpacked) extents
                    lines.append(f"s{i} = _pk_shape(s{i}, {k})")
            if p.strides is None:
                lines.append(f"if not a{i}.is_contiguous(): {fail}")
            else:
                lines.append(f"t{i} = a{i}.stride()" if k == 1 else f"t{i} = _pk_strides(a{i}.stride(), {k})")
            return lines
        value = f"_index(a{i})" if where == "scalar" else f"{'s' if where == 'shape' else 't'}{i}[{d}]"
        if isinstance(e, int):
            return [f"if {value} != {e}: {fail}"]
        if e in var:
            return [f"if {value} != {var[e]}: {fail}"]
        var[e] = f"y{self.symbols.index(e)}"
        return [f"{var[e]} = {value}"]

    def _inline_scalar_check(self, i: int) -> str:
        """A cheap test accepting the common case (a plain int/float in range); anything it
        rejects goes to the shared predicate, so the accepted set is unchanged."""
        rule = self.rules[i]
        if rule[0] == "int":
            return f"(type(a{i}) is int and {rule[1]} <= a{i} <= {rule[2]})"
        if rule[0] == "float" and rule[1] != math.inf:
            return f"(type(a{i}) is float and -{rule[1]!r} <= a{i} <= {rule[1]!r})"
        if rule[0] == "float":
            return f"type(a{i}) is float"
        return f"type(a{i}) is bool"

    def _wide_index(self, i) -> bool:
        """Whether tensor param ``i`` is indexed in 64 bits anyway: a shape or stride symbol of it
        is passed as a 64-bit integer (``T.symbolic("n", "int64")``), which makes TVM compute its
        element offsets in int64."""
        p = self.params[i]
        names = set()
        for e in list(p.shape) + list(p.strides or []):
            if isinstance(e, str):
                names |= expr_names(e) if is_shape_expr(e) else {e}
        return any(self.sym_ranges.get(n, (0, 0))[1] > INT32_MAX for n in names)

    def _emit_span_checks(self, indices, var, fail, null=frozenset()) -> list[str]:
        if self.art.index_bits != 32:
            return []
        lines = []
        for i in indices:
            p = self.params[i]
            if p.kind != "tensor" or self._wide_index(i):
                continue
            if p.strides is not None:
                guard = f"a{i} is not None and " if i in null else ""
                lines.append(f"if {guard}_span(s{i}, t{i}) > _IMAX + 1: {fail}")
            elif any(isinstance(e, str) for e in p.shape):
                # dims are already checked against symbols, so numel is their product
                prod = " * ".join(self._entry_code(e, var) for e in p.shape)
                line = f"if {prod} > _IMAX + 1: {fail}"
                if line not in lines:
                    lines.append(line)
        return lines

    def _emit_device(self, indices, fail, null=frozenset()) -> list[str]:
        tensors = [i for i in indices if self.params[i].kind == "tensor" and i not in null]
        maybe = [i for i in indices if i in null]
        attr = f"is_{self.device_type}"
        if not tensors:
            lines = ["d = _cur_dev()" if self.device_type == "cuda" else "d = -1"]
        else:
            first = tensors[0]
            lines = [f"if not a{first}.{attr}: {fail}", f"d = a{first}.get_device()"]
            lines += [f"if not a{i}.{attr} or a{i}.get_device() != d: {fail}" for i in tensors[1:]]
        lines += [f"if a{i} is not None and (not a{i}.{attr} or a{i}.get_device() != d): {fail}" for i in maybe]
        return lines

    def _dims_expr(self, entries, var) -> str:
        items = [self._entry_code(e, var) for e in entries]
        return "(" + "".join(f"{x}, " for x in items) + ")"

    def _emit_alloc(self, o: int, var) -> list[str]:
        p = self.params[o]
        shape = self._dims_expr(p.shape, var)
        lines, dev = [], "d" if self.device_type == "cuda" else "'cpu'"
        if self.art.index_bits == 32 and any(isinstance(e, str) for e in p.shape + (p.strides or [])):
            strides = self._dims_expr(p.strides, var) if p.strides is not None else None
            span = f"_span({shape}, {strides})" if strides else " * ".join(
                [self._entry_code(e, var) for e in p.shape] or ["1"])
            lines.append(f"if {span} > _IMAX + 1: return _fail(args)")
        k = self.packs[o]
        if k != 1:
            shape = f"_st_dims({shape}, {k}, True)"
        if p.strides is None:
            lines.append(f"a{o} = _empty({shape}, dtype=_dt{o}, device={dev})")
        else:
            strides = self._dims_expr(p.strides, var)
            if k != 1:
                strides = f"_st_dims({strides}, {k}, False)"
            lines.append(f"a{o} = _empty_strided({shape}, {strides}, dtype=_dt{o}, device={dev})")
        if o in self.ptr_params:
            lines.append(f"p{o} = a{o}.data_ptr()")
        return lines

    def _grid_code(self, var) -> list[str]:
        return [self._int_code(var, expr, f"grid[{k}]") for k, expr in enumerate(self.art.grid)]

    def _int_code(self, var, expr, what) -> str:
        """Python code of the artifact's integer expression ``expr`` (a grid dim, a run-time
        dynamic_smem) over the call's bound symbols and scalars."""
        names = {s: v for s, v in var.items()}
        names[NUM_SMS] = "_num_sms(d)"
        for i, p in enumerate(self.params):
            if p.kind == "scalar":
                names.setdefault(p.name, f"a{i}")
        tree = parse_int_expr(str(expr), set(names), what=what)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in names:
                node.id = names[node.id]
        return ast.unparse(tree)

    def _host_names(self, var) -> dict:
        names = {s: v for s, v in var.items()}
        for i, p in enumerate(self.params):
            if p.kind == "scalar":
                names.setdefault(p.name, f"a{i}")
        return names

    def _assert_code(self, var) -> list[str]:
        """``host_asserts``: each condition over the bound symbols, failing into ``_assume_failed``."""
        asserts = getattr(self.art, "host_asserts", None) or []
        if not asserts:
            return []
        names, lines = self._host_names(var), []
        for k, a in enumerate(asserts):
            tree = parse_bool_expr(a["expr"], set(names), what="host assert")
            used = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and node.id in names:
                    node.id = names[node.id]
            values = "{" + ", ".join(f"{u!r}: {names[u]}" for u in used) + "}"
            lines.append(f"if not ({ast.unparse(tree)}): _assume_failed({k}, {values})")
        return lines

    def _assume_failed(self, k, values):
        shown = ", ".join(f"{n} = {v}" for n, v in values.items())
        raise RuntimeError(f"{self.name}: Assume: {self.art.host_asserts[k]['text']} does not hold for this call "
                           f"({shown}); the kernel was compiled assuming it (T.assume)")

    def _emit_launch(self, var, indices) -> list[str]:
        grid = self._grid_code(var)
        lines = self._assert_code(var) + [f"g{k} = {c}" for k, c in enumerate(grid)]
        values = []
        for kind, ref in self.arg_refs:
            if kind == "tmap":
                values.append(f"_tm{ref}(p{self.tensormaps[ref]['param']}, d)")
            else:
                values.append(f"p{ref}" if kind == "ptr" else f"a{ref}" if kind == "scalar" else var[ref])
        if self.l2_param is not None:
            values.append(f"p{self.l2_param}")
        outs = [f"a{o}" for o in self.outputs]
        ret = "None" if not outs else outs[0] if len(outs) == 1 else "[" + ", ".join(outs) + "]"
        # ctypes would silently truncate an oversized grid dim, so the limits are checked here
        limits = (GRID_X_MAX, GRID_YZ_MAX, GRID_YZ_MAX)
        dynamic = [f"not 0 < g{k} <= {limits[k]}" for k, c in enumerate(grid)
                   if not c.isdigit() or not 0 < int(c) <= limits[k]]
        if dynamic:
            lines.append(f"if {' or '.join(dynamic)}: return _odd_grid(args, (g0, g1, g2), {ret})")
        for k, (kind, ref) in enumerate(self.arg_refs):   # tensor maps: found (or encoded) first
            if kind == "tmap":
                p = f"p{self.tensormaps[ref]['param']}"
                lines.append(f"m{k} = _tmc{ref}.get((d, {p})) or _tm{ref}({p}, d)")
                values[k] = f"m{k}"
        smem = ""
        if isinstance(self.art.dynamic_smem, str):
            # shared buffers of run-time extent: the launch sizes the dynamic shared memory (never
            # the inline launch, whose config holds a fixed size: bind_direct declines)
            lines.append(f"s = {self._int_code(var, self.art.dynamic_smem, 'dynamic_smem')}")
            smem = ", s"
        elif self.l2_param is None:
            # the inline launch (bind_direct): config and arguments packed in one call, then
            # cuLaunchKernelEx; anything unusual goes to the launcher below
            bx, by, bz = (int(b) for b in self.art.block)
            packed = "".join(f", {v}" for v in values)
            lines += ["if d == _ddev:",
                      "    with _dlock:",
                      "        _dget_current(_dcur_ptr)",
                      "        if _dcur.value == _dctx:",
                      f"            _dpack(_dbuf, _doff, g0, g1, g2, {bx}, {by}, {bz}, {int(self.art.dynamic_smem)}, "
                      f"_stream(d){packed})",
                      "            rc = _dlaunch_ex(_dcfg, _dfunc, _dparams, None)",
                      f"            if not rc: return {ret}",
                      "            _dfail(rc, d, (g0, g1, g2))"]
        tup = "(" + "".join(f"{v}, " for v in values) + ")"
        lines.append(f"_launch(d, g0, g1, g2, _stream(d), {tup}{smem})")
        lines.append(f"return {ret}")
        return lines

    # ------------------------------------------------------------ runtime helpers
    def _odd_grid(self, args, grid, ret):
        """A grid outside (0, limit]: always an error (negative, empty or too large)."""
        if any(g < 0 for g in grid):
            raise ValueError(f"{self.name}: the grid {grid} computed from {list(self.art.grid)} is negative; "
                             "check the scalar arguments")
        if grid[0] > GRID_X_MAX or grid[1] > GRID_YZ_MAX or grid[2] > GRID_YZ_MAX:
            raise ValueError(f"{self.name}: the grid {grid} computed from {list(self.art.grid)} exceeds "
                             f"CUDA's limits (x <= {GRID_X_MAX}, y and z <= {GRID_YZ_MAX})")
        # CUDA cannot launch an empty grid; like upstream, say so instead of skipping the launch
        raise ValueError(f"{self.name}: the grid {grid} computed from {list(self.art.grid)} has a zero dimension, "
                         "and CUDA cannot launch an empty grid; skip the call when there is no work")

    def _no_alloc(self, args):
        self.diagnose_count(len(args))
        raise ValueError(f"{self.name}: cannot be called with the {len(self.inputs)} inputs only: "
                         f"{self.alloc_problem}")

    def fail(self, args):
        """Slow path: a call with None for nullable tensors runs through ``_null_entry``; any other
        call the fast path rejected gets its precise error."""
        nones = [k for k, a in enumerate(args) if a is None]
        if nones and len(args) in (len(self.params), len(self.inputs)):
            indices = self.all if len(args) == len(self.params) else self.inputs
            nset = frozenset(indices[k] for k in nones)
            if self._nullable_for(nset):
                return self._null_entry(nset)(*args)
        self.diagnose(args)
        raise RuntimeError(f"{self.name}: internal error: the argument fast path rejected the call "
                           "but no problem was found; please report this with the argument list")

    def _fail_with_none(self, args):
        """``fail`` for the None-accepting entry: diagnose only (it must not re-enter that entry)."""
        self.diagnose(args)
        raise RuntimeError(f"{self.name}: internal error: the argument fast path rejected the call "
                           "but no problem was found; please report this with the argument list")

    # ------------------------------------------------------------ slow path: diagnosis
    def describe_params(self, indices=None) -> str:
        """e.g. "A: float16[M, 128], n: int32" for the given (default: all) params."""
        parts = []
        for i in self.all if indices is None else indices:
            p = self.params[i]
            dims = ", ".join(str(e) for e in p.shape)
            parts.append(f"{p.name}: {p.dtype}[{dims}]" if p.kind == "tensor" else f"{p.name}: {_pointer_text(p)}"
                         if p.kind == "pointer" else f"{p.name}: {p.dtype}")
        return ", ".join(parts)

    def where(self, i: int, indices) -> str:
        pos = indices.index(i)
        call = f", argument {pos} of this call" if pos != i else ""
        return f"{self.name}: parameter {self.params[i].name!r} (#{i}{call})"

    def diagnose_count(self, n: int) -> list[int]:
        """The param indices the ``n`` arguments stand for; TypeError when ``n`` fits no form."""
        if n == len(self.params):
            return self.all
        if self.outputs and n == len(self.inputs):
            return self.inputs
        msg = (f"{self.name}() takes {len(self.params)} arguments "
               f"({self.describe_params()}), got {n}")
        if self.outputs:
            outs = ", ".join(repr(self.params[i].name) for i in self.outputs)
            msg += (f"; since out_idx={self.outputs} marks {outs} as output, it also accepts just the "
                    f"{len(self.inputs)} inputs ({self.describe_params(self.inputs)}) and allocates the output")
        raise TypeError(msg)

    def diagnose(self, args) -> None:
        """Raise the first problem with ``args``, checking in a fixed order; return if none."""
        indices = self.diagnose_count(len(args))
        vals = dict(zip(indices, args))
        nones = frozenset(i for i, a in vals.items() if a is None)
        env: dict[str, tuple[int, str]] = {}
        for i in indices:
            self._diag_param(i, vals[i], env, indices, nones)
        for sym, i, d, a, b in self.solved_symbols(indices):
            x, e = vals[i], self.params[i].shape[d]
            if x is None or sym in env:
                continue
            dim, label = x.shape[d], f"{self.params[i].name}.shape[{d}]"
            if (dim - b) % a or (dim - b) // a < 0:
                raise ValueError(f"{self.where(i, indices)}: {label} is {dim}, which is not {e} for any {sym} >= 0")
            env[sym] = ((dim - b) // a, label)
        for where, i, d, e in self.expr_occurrences(indices):
            if expr_names(e) <= set(env) and vals[i] is not None:
                want = self._entry_value(e, env)
                x = vals[i]
                actual = self.logical_shape(i, x)[d] if where == "shape" else self.logical_strides(i, x)[d]
                if actual != want:
                    label = f"{self.params[i].name}.shape[{d}]" if where == "shape" else f"{self.params[i].name}.stride({d})"
                    raise ValueError(f"{self.where(i, indices)}: {label} must be {e} = {want}, got {actual}")
        for sym, (v, src) in env.items():
            lo, hi = self.sym_ranges[sym]
            if not lo <= v <= hi:
                raise ValueError(f"{self.name}: symbol {sym} = {v} (from {src}) is outside [{lo}, {hi}], "
                                 "the range of the integer type the kernel uses for it")
        self._diag_spans(indices, vals, env)
        self._diag_devices(indices, vals)
        self._diag_alignment(indices, vals)

    def _diag_param(self, i, x, env, indices, nones=frozenset()) -> None:
        p, w = self.params[i], self.where(i, indices)
        if p.kind == "scalar":
            if not self.preds[i](x):
                cat = KNOWN_DTYPES[p.dtype][1]
                if not isinstance(x, numbers.Integral if cat in ("int", "uint", "bool") else numbers.Real):
                    raise TypeError(f"{w} expects a {p.dtype} scalar, got {type(x).__name__} {x!r}")
                rule = self.rules[i]
                where = f"[{rule[1]}, {rule[2]}]" if rule[0] == "int" else f"+-{rule[1]}"
                raise ValueError(f"{w}: value {x!r} is out of range for {p.dtype} as the kernel takes it ({where})")
            for sym in self.scalar_syms.get(i, []):
                self._diag_entry(env, w, f"{p.name} (#{i})", operator.index(x), sym, p)
            return
        if p.kind == "pointer":
            self._diag_pointer(i, x, indices)
            return
        if x is None and self._nullable_for(nones | {i}):
            return   # a null pointer (the kernel must not touch it)
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{w} must be a torch.Tensor ({self.describe_params([i])}), "
                            f"got {type(x).__name__}")
        if self.packs[i] != 1:
            if x.dtype not in _PACKED_OK:
                raise TypeError(f"{w}: expected a 1-byte tensor holding packed {p.dtype} "
                                f"({self.packs[i]} per byte: {sorted(map(str, _PACKED_OK))}), got {x.dtype}")
        elif x.dtype is not self.dtypes[i]:
            raise TypeError(f"{w}: expected dtype {p.dtype} ({self.dtypes[i]}), got {x.dtype}")
        shape = self.logical_shape(i, x)
        if len(shape) != len(p.shape):
            raise ValueError(f"{w}: expected a {len(p.shape)}-d tensor of shape {_fmt(p.shape)}, "
                             f"got a {len(shape)}-d tensor of shape {list(shape)}")
        for d, e in enumerate(p.shape):
            if not is_shape_expr(e):
                self._diag_entry(env, w, f"{p.name}.shape[{d}]", shape[d], e, p)
        if p.strides is None:
            if not x.is_contiguous():
                raise ValueError(f"{w}: must be contiguous (row-major), got strides {list(x.stride())} for "
                                 f"shape {list(shape)}; pass .contiguous()")
            return
        strides = self.logical_strides(i, x)
        for d, e in enumerate(p.strides):
            if not is_shape_expr(e):
                self._diag_entry(env, w, f"{p.name}.stride({d})", strides[d], e, p)

    def logical_shape(self, i: int, x) -> tuple:
        """Tensor argument ``x``'s shape in param i's elements (packed sub-byte: unpacked)."""
        return tuple(x.shape) if self.packs[i] == 1 else _packed_shape(tuple(x.shape), self.packs[i])

    def logical_strides(self, i: int, x) -> tuple:
        return tuple(x.stride()) if self.packs[i] == 1 else _packed_strides(tuple(x.stride()), self.packs[i])

    def _diag_entry(self, env, w, label, actual, e, p) -> None:
        if isinstance(e, int):
            if actual != e:
                want = f"shape {_fmt(p.shape)}" + (f", strides {_fmt(p.strides)}" if p.strides else "")
                raise ValueError(f"{w}: {label} must be {e}, got {actual} (expected {want})")
        elif e in env:
            if actual != env[e][0]:
                raise ValueError(f"{w}: {e} is {env[e][0]} from {env[e][1]} but {actual} from {label}")
        else:
            env[e] = (actual, label)

    def _diag_spans(self, indices, vals, env) -> None:
        if self.art.index_bits != 32:
            return
        checks = []  # (where, element span)
        for i in indices:
            p, x = self.params[i], vals[i]
            if p.kind != "tensor" or x is None or self._wide_index(i):
                continue
            if p.strides is not None:
                checks.append((self.where(i, indices), _span(self.logical_shape(i, x), self.logical_strides(i, x))))
            elif any(isinstance(e, str) for e in p.shape):
                checks.append((self.where(i, indices), x.numel()))
        if indices is self.inputs:
            for o in self.outputs:
                p = self.params[o]
                if any(isinstance(e, str) for e in p.shape + (p.strides or [])) and not self._wide_index(o):
                    shape = [self._entry_value(e, env) for e in p.shape]
                    strides = [self._entry_value(e, env) for e in p.strides] if p.strides else None
                    span = _span(shape, strides) if strides else math.prod(shape)
                    checks.append((f"{self.name}: output {p.name!r} (#{o}) of shape {shape}", span))
        for w, span in checks:
            if span > INT32_MAX + 1:
                raise IndexWidthError(f"{w} spans {span} elements, but the kernel indexes with 32-bit integers "
                                      "(at most 2**31 elements per tensor)")

    def _diag_devices(self, indices, vals) -> None:
        tensors = [i for i in indices if self.params[i].kind == "tensor" and vals[i] is not None]
        for i in tensors:
            x = vals[i]
            if self.device_type == "cpu":
                if not x.is_cpu:
                    raise ValueError(f"{self.where(i, indices)} must be a CPU tensor (test mode), got {x.device}")
                continue
            if not x.is_cuda:
                if not torch.cuda.is_available():
                    raise RuntimeError(
                        f"no CUDA device: torch.cuda.is_available() is False, so kernel {self.name!r} cannot "
                        f"be launched (parameter {self.params[i].name!r} is on {x.device}); a JITKernel can "
                        "still be built and inspected without a GPU")
                raise ValueError(f"{self.where(i, indices)} must be a CUDA tensor, got one on {x.device}")
        if tensors:
            first, d = tensors[0], vals[tensors[0]].get_device()
            for i in tensors[1:]:
                if vals[i].get_device() != d:
                    raise ValueError(f"{self.where(i, indices)} is on {vals[i].device} but "
                                     f"{self.params[first].name!r} is on cuda:{d}; all tensors must be on one device")

    def _diag_pointer(self, i, x, indices) -> None:
        p, w = self.params[i], self.where(i, indices)
        if isinstance(x, torch.Tensor):
            want = torch_dtype(p.dtype) if p.dtype in _TORCH_NAMES else None
            if p.dtype in PACKED_DTYPES and x.dtype not in _PACKED_OK:
                raise TypeError(f"{w}: expected a 1-byte tensor holding packed {p.dtype}, got {x.dtype}")
            if want is not None and x.dtype is not want:
                raise TypeError(f"{w}: a tensor passed for this pointer must have dtype {p.dtype} ({want}), "
                                f"got {x.dtype}; or pass its address, x.data_ptr()")
            on = x.is_cuda if self.device_type == "cuda" else x.is_cpu
            if not on:
                raise ValueError(f"{w}: a tensor passed for this pointer must be on "
                                 f"{'a CUDA device' if self.device_type == 'cuda' else 'the CPU (test mode)'}, "
                                 f"got one on {x.device}")
            return
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise TypeError(f"{w} is a raw pointer ({_pointer_text(p)}): pass a device address (an int, "
                            f"e.g. tensor.data_ptr()) or a torch.Tensor, got {type(x).__name__}")
        if not 0 <= int(x) < 2**64:
            raise ValueError(f"{w}: address {int(x)} is not a 64-bit unsigned value")

    def _diag_alignment(self, indices, vals) -> None:
        for i in self.ptr_params:
            if i not in vals or vals[i] is None or self.params[i].align <= 1:
                continue
            if self.params[i].kind == "pointer":
                address, align = pointer_address(self.params[i].dtype, self.device_type)(vals[i]), self.params[i].align
                if address is not None and address % align:
                    raise ValueError(f"{self.where(i, indices)}: address {address:#x} is not {align}-byte aligned, "
                                     "which the kernel assumes")
                continue
            x, align = vals[i], self.params[i].align
            if x.data_ptr() % align:
                raise ValueError(
                    f"{self.where(i, indices)}: data pointer {x.data_ptr():#x} is not {align}-byte aligned, "
                    f"which the kernel assumes (the tensor is a view at storage offset {x.storage_offset()}); "
                    "pass a copy (.clone()) instead")


def pointer_address(dtype: str, device_type: str = "cuda"):
    """``addr(x)``: the address a pointer parameter of element type ``dtype`` takes from ``x`` (an
    int in [0, 2**64), or a tensor of that dtype on the device: its data pointer), or None."""
    want = torch_dtype(dtype) if dtype in _TORCH_NAMES else None
    packed = dtype in PACKED_DTYPES
    on_device = "is_cuda" if device_type == "cuda" else "is_cpu"

    def addr(x):
        if type(x) is int:
            return x if 0 <= x < 2**64 else None
        if isinstance(x, torch.Tensor):
            if (packed and x.dtype not in _PACKED_OK) or (want is not None and x.dtype is not want):
                return None
            return x.data_ptr() if getattr(x, on_device) else None
        if isinstance(x, numbers.Integral) and not isinstance(x, bool):
            return addr(int(x))
        return None

    return addr


def _pointer_text(p) -> str:
    """``ptr`` or ``ptr to float16[M, K]`` for messages."""
    if p.dtype == "handle":
        return "ptr"
    return f"ptr to {p.dtype}[{', '.join(str(e) for e in p.shape)}]"


def _fmt(entries) -> str:
    return "[" + ", ".join(str(e) for e in entries) + "]"
