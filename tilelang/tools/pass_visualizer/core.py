"""The pass visualizer's model: load a kernel file, render a module as a structure tree, and record
that tree around every top-level pass of a pipeline through a TVM ``PassInstrument``.

Contract:
- ``inspect_structure(mod)`` prints each PrimFunc as a tree: params and attrs, then the body's
  nesting (thread launches, loops with their kind and annotations, branches, buffer
  allocations) with every tile op expanded one operand per line, by field name (``a_region``,
  ``b_region``, ``c_region``, ``trans_a``... for ``T.gemm``); ``capture_structure`` returns those
  lines.
- ``StructureTreePassInstrument``: put it in a ``PassContext(instruments=[...])``; each pass run
  at depth 0 (not from inside another instrumented pass) becomes a ``PassStructureRecord``
  (PassInfo name, start sequence, tree before and after). Entering a context forgets earlier
  records; passes that started but never finished (an exception) are listed in
  ``incomplete_passes`` when the context exits, and recorded nowhere else.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
from dataclasses import dataclass

import tvm
from tvm import tirx

__all__ = ["PassStructureRecord", "StructureTreePassInstrument", "build_module", "capture_structure",
           "discover_jit_kernels", "inspect_structure", "kernel_to_tir", "load_user_module"]


# ----------------------------------------------------------------------------- loading
def load_user_module(path: str):
    """Import the Python file at ``path`` as a fresh module."""
    spec = importlib.util.spec_from_file_location("_tilelang_pass_visualizer_input", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"pass visualizer: cannot import a Python module from {path!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _is_jit(obj) -> bool:
    return not isinstance(obj, type) and callable(getattr(obj, "get_tir", None))


def discover_jit_kernels(module) -> dict:
    """name -> ``@tilelang.jit`` kernel, for each one defined at the module's top level."""
    return {name: obj for name, obj in vars(module).items() if not name.startswith("__") and _is_jit(obj)}


def kernel_to_tir(kernel, **kwargs) -> tirx.PrimFunc:
    """The PrimFunc of a ``@tilelang.jit`` kernel (``get_tir(**kwargs)``), of a factory returning
    one, or a PrimFunc itself."""
    if isinstance(kernel, tirx.PrimFunc):
        return kernel
    if _is_jit(kernel):
        return kernel.get_tir(**kwargs)
    if callable(kernel):
        func = kernel(**kwargs)
        if not isinstance(func, tirx.PrimFunc):
            raise TypeError(f"pass visualizer: the factory returned {type(func).__name__}, not a PrimFunc "
                            "(return the inner @T.prim_func)")
        return func
    raise TypeError(f"pass visualizer: cannot make TIR from a {type(kernel).__name__}")


def build_module(func: tirx.PrimFunc, target="auto"):
    """(IRModule holding ``func`` under its global symbol, the resolved ``tvm.target.Target``).
    ``target``: a Target, "auto"/"cuda..."/"sm_XX" (our CUDA arch spelling) or any TVM target
    string (the viewer refuses what is not CUDA)."""
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else "main"
    mod = tvm.IRModule({name: func})
    if isinstance(target, tvm.target.Target):
        return mod, target
    text = "auto" if target is None else str(target)
    if text == "auto" or text.startswith("cuda") or text.startswith("sm_"):
        from tilelang.engine.lower import normalize_target

        return mod, tvm.target.Target({"kind": "cuda", "arch": normalize_target(text)})
    return mod, tvm.target.Target(text)


# ----------------------------------------------------------------------------- structure tree
# Operand names of our tile ops (tilelang/language: the argument order each T.<op> emits).
_TILE_OP_FIELDS = {
    "copy": ["src_region", "dst_region", "coalesced_width", "tma_flag", "barrier", "scope", "mask"],
    "fill": ["dst_region", "value"],
    "gemm": ["a_region", "b_region", "c_region", "trans_a", "trans_b", "policy", "clear_accum", "k_pack",
             "wg_wait"],
    "gemm_sp": ["a_region", "e_region", "b_region", "c_region", "trans_b", "policy", "clear_accum"],
    "reduce": ["src_region", "dst_region", "kind", "dim", "clear", "batch", "nan_propagate"],
    "cumsum": ["src_region", "dst_region", "dim", "reverse", "kind"],
    "atomic": ["dst_region", "src_region", "kind"],
    "im2col": ["img_region", "col_region", "nhw_step", "c_step", "kernel", "stride", "dilation", "pad", "policy"],
}


def _shape(buf) -> list:
    out = []
    for d in buf.shape:
        try:
            out.append(int(d))
        except (TypeError, ValueError):
            out.append(str(d))
    return out


def _buffer(buf) -> str:
    return f"Buffer({buf.name}, shape={_shape(buf)}, dtype={buf.dtype}, scope={buf.scope()})"


def _branch(items, indent):
    """(connector, item) pairs for a tree level."""
    for k, item in enumerate(items):
        yield ("└─" if k == len(items) - 1 else "├─"), item


def _region_text(arg) -> str:
    from tilelang.language._ops import is_tl_call

    if is_tl_call(arg, "region"):
        load, access, extents = arg.args[0], int(arg.args[1].value), list(arg.args[2:])
        starts = ", ".join(str(i) for i in load.indices)
        mode = {1: "r", 2: "w", 3: "rw"}.get(access, str(access))
        return f"{load.source.name}[{starts}] extent={[str(e) for e in extents]} ({mode})"
    return str(arg)


def _evaluate(call, indent, out):
    op = getattr(call, "op", None)
    name = str(getattr(op, "name", "")) if op is not None else ""
    if not name:
        out.append(f"{indent}Evaluate: {call}")
        return
    short = name[3:] if name.startswith("tl.") else name.split(".")[-1]
    out.append(f"{indent}Evaluate: T.{short}")
    args = list(call.args)
    fields = _TILE_OP_FIELDS.get(short) if name.startswith("tl.") else None
    labels = [(fields[k] if fields and k < len(fields) else f"arg{k}") for k in range(len(args))]
    for conn, (label, arg) in _branch(list(zip(labels, args)), indent):
        out.append(f"{indent}    {conn} {label:<15}= {_region_text(arg)}")


def _walk(node, indent, out):
    if isinstance(node, tirx.SeqStmt):
        for s in node.seq:
            _walk(s, indent, out)
    elif isinstance(node, tirx.AttrStmt):
        if node.attr_key == "thread_extent":
            iv = node.node
            label = iv.var.name or str(iv.thread_tag)
            if iv.var.name and str(iv.thread_tag) != iv.var.name:
                label += f" = {iv.thread_tag}"
            out.append(f"{indent}AttrStmt[launch_thread {label} (extent={node.value})]")
        else:
            out.append(f"{indent}AttrStmt[{node.attr_key}]")
            out.append(f"{indent}    └─ value = {node.value}")
        _walk(node.body, indent + "    ", out)
    elif isinstance(node, tirx.For):
        kind = tirx.ForKind(int(node.kind)).name.lower()
        out.append(f"{indent}For({node.loop_var.name} in {node.min}..{node.min + node.extent}, kind={kind})")
        for key, value in (node.annotations or {}).items():
            out.append(f"{indent}    @ann {key} = {value}")
        _walk(node.body, indent + "    ", out)
    elif isinstance(node, tirx.While):
        out.append(f"{indent}While({node.condition})")
        _walk(node.body, indent + "    ", out)
    elif isinstance(node, tirx.IfThenElse):
        out.append(f"{indent}IfThenElse({node.condition})")
        _walk(node.then_case, indent + "    ", out)
        if node.else_case is not None:
            out.append(f"{indent}else")
            _walk(node.else_case, indent + "    ", out)
    elif isinstance(node, tirx.Evaluate):
        _evaluate(node.value, indent, out)
    elif isinstance(node, tirx.BufferStore):
        out.append(f"{indent}BufferStore: {node.buffer.name}[{', '.join(str(i) for i in node.indices)}]")
        out.append(f"{indent}    └─ value = {node.value}")
    elif isinstance(node, (tirx.AllocBuffer, tirx.DeclBuffer)):
        out.append(f"{indent}{type(node).__name__}: {_buffer(node.buffer)}")
        body = getattr(node, "body", None)
        if body is not None:
            _walk(body, indent, out)
    elif isinstance(node, (tirx.Bind, tirx.LetStmt)):
        out.append(f"{indent}{type(node).__name__}: {node.var.name} = {node.value}")
        body = getattr(node, "body", None)
        if body is not None:
            _walk(body, indent, out)
    else:
        out.append(f"{indent}{type(node).__name__}")


def _structure_lines(mod) -> list[str]:
    out = []
    for gv, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        out.append(f"PrimFunc `{gv.name_hint}`")
        out.append("├─ params       →")
        for p in func.params:
            out.append(f"│      {_buffer(p) if tirx.is_buffer_var(p) else f'{p.name}: {p.ty}'}")
        out.append("├─ attrs        →")
        for key, value in (func.attrs or {}).items():
            text = str(value)
            if "\n" in text:   # a multi-line note (the viewer's inferred layouts): one entry a line
                out.append(f"│      {key} →")
                out += [f"│          {line}" for line in text.splitlines()]
            else:
                out.append(f"│      {key} = {text}")
        out.append("└─ body")
        _walk(func.body, "       ", out)
        out.append("")
    return out


def inspect_structure(mod) -> None:
    """Print the structure tree of every PrimFunc in ``mod`` (module docstring)."""
    for line in _structure_lines(mod):
        print(line)


def capture_structure(mod) -> list[str]:
    """``inspect_structure``'s lines."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        inspect_structure(mod)
    return buf.getvalue().splitlines()


# ----------------------------------------------------------------------------- recording
@dataclass
class PassStructureRecord:
    """One top-level pass: its name, start order and the structure tree around it."""

    name: str
    sequence: int
    before_lines: list
    after_lines: list

    @property
    def changed(self) -> bool:
        return list(self.before_lines) != list(self.after_lines)


@tvm.instrument.pass_instrument
class StructureTreePassInstrument:
    """Records the structure tree around every top-level pass (module docstring)."""

    def __init__(self):
        self.records: list[PassStructureRecord] = []
        self.input_lines: list[str] | None = None
        self.incomplete_passes: list[str] = []
        self._stack: list = []          # (name, sequence, before lines or None for nested passes)
        self._sequence = 0

    def enter_pass_ctx(self):
        self.records = []
        self.input_lines = None
        self.incomplete_passes = []
        self._stack = []
        self._sequence = 0

    def exit_pass_ctx(self):
        self.incomplete_passes.extend(name for name, _, _ in self._stack)
        self._stack = []

    def run_before_pass(self, mod, info):
        name = str(info.name)
        if self._stack:                 # run from inside another pass: part of that one
            self._stack.append((name, None, None))
            return
        before = capture_structure(mod)
        if self.input_lines is None:
            self.input_lines = before
        self._stack.append((name, self._sequence, before))
        self._sequence += 1

    def run_after_pass(self, mod, info):
        if not self._stack:
            return
        name, sequence, before = self._stack.pop()
        if sequence is not None:
            self.records.append(PassStructureRecord(name, sequence, before, capture_structure(mod)))

    def ordered_records(self) -> list[PassStructureRecord]:
        """The records in the order their passes started."""
        return sorted(self.records, key=lambda r: r.sequence)


def parse_assignments(pairs) -> dict:
    """``["M=1024", "dtype=float16"]`` -> ``{"M": 1024, "dtype": "float16"}`` (Python literals
    where they parse, else strings)."""
    out = {}
    for pair in pairs or []:
        key, sep, raw = str(pair).partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out
