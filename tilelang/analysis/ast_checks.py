"""Checks that need no concrete values: they read a file's ``ast`` (``source.FileModel``) only.

Two groups:
- ``interface_checks`` always run: ``out_idx`` entries against the kernel's parameter count
  (TL0701) and calls of a kernel with the wrong number of tensors (TL0702);
- ``fallback_checks`` run for a factory whose kernel could not be built (parameters not bound,
  ``--no-exec``, or the factory raised): the missing ``T.clear`` before ``T.gemm`` (TL0401, in
  source order), ``T.gemm`` operand shapes that disagree symbolically (TL0101: an error when two
  integers differ, a warning when two different names must be equal), an output parameter the
  kernel never mentions (TL0402), and a literal ``threads=`` above 1024 (TL0503).
The IR-level checks (``checker``) are exact and supersede the fallbacks when a kernel is built.
"""

from __future__ import annotations

import ast

from tilelang.analysis.source import Factory, FileModel, literal
from tilelang.diagnostics import Diagnostic, Note, Severity

UNBOUND_NOTE = "checked from the source alone, without concrete values for the factory's parameters"


def interface_checks(model: FileModel) -> list:
    out = []
    for factory in model.factories.values():
        out += _check_out_idx(model, factory)
        out += _check_tensors_mentioned(model, factory)
    for call in model.kernel_calls:
        out += _check_kernel_call(model, call)
    return out


def _normalized_outs(factory: Factory, n: int):
    outs = set()
    for i in factory.out_idx or []:
        if isinstance(i, int) and -n <= i < n:
            outs.add(i % n)
    return outs


def _check_out_idx(model, factory) -> list:
    n = factory.kernel_param_count()
    if factory.out_idx is None or n is None:
        return []
    out = []
    node = factory.out_idx_node
    elements = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node] * len(factory.out_idx)
    for i, element in zip(factory.out_idx, elements):
        if not isinstance(i, int) or not -n <= i < n:
            params = ", ".join(a.arg for a in factory.kernel_def.args.args)
            out.append(Diagnostic.from_code(
                "TL0701", f"out_idx {i!r} is out of range for kernel '{factory.kernel_def.name}' with {n} "
                f"parameters (valid: 0..{n - 1} or -{n}..-1)", model.span(element),
                notes=[Note(f"the kernel's parameters are {params}", model.span(factory.kernel_def.args))]))
    return out


def _check_kernel_call(model, call) -> list:
    factory = model.factories.get(call.factory)
    n = factory.kernel_param_count() if factory is not None else None
    if n is None or call.nargs is None or not factory.jit:
        return []
    outs = _normalized_outs(factory, n)
    expected = n - len(outs)
    if call.nargs == expected:
        return []
    names = [a.arg for a in factory.kernel_def.args.args]
    inputs = [p for i, p in enumerate(names) if i not in outs]
    returned = [p for i, p in enumerate(names) if i in outs]
    notes = [Note(f"'{factory.name}' builds a kernel taking {', '.join(inputs) or 'no tensors'}"
                  + (f"; out_idx={factory.out_idx} makes it allocate and return {', '.join(returned)}"
                     if returned else ""), model.span(factory.kernel_def.args))]
    return [Diagnostic.from_code(
        "TL0702", f"the kernel from '{factory.name}' takes {expected} tensor(s), but this call passes "
        f"{call.nargs}", model.span(call.node), notes=notes)]


# ----- fallbacks ---------------------------------------------------------------------------

def fallback_checks(model: FileModel, factory: Factory) -> list:
    body = factory.kernel_def
    if body is None:
        return []
    nodes = list(ast.walk(body))   # one walk of the kernel, shared by the checks below
    allocs = _allocations(nodes)
    ordered = _in_order(nodes)
    out = _check_clear(model, ordered, allocs)
    out += _check_gemm_shapes(model, ordered, allocs)
    out += _check_outputs_mentioned(model, factory)
    out += _check_threads(model, nodes)
    return out


def _attr(call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else ""


def _name(node) -> str | None:
    if isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _allocations(nodes) -> dict:
    """name -> (kind, shape element nodes or None) for ``name = T.alloc_*(shape, ...)``."""
    out = {}
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and _attr(node.value).startswith("alloc_"):
            shape = node.value.args[0] if node.value.args else None
            elts = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else None
            out[node.targets[0].id] = (_attr(node.value), elts)
    return out


def _in_order(nodes):
    """The calls and assignments among ``nodes`` (the kernel's walk), in source order."""
    found = [n for n in nodes if isinstance(n, (ast.Call, ast.Assign, ast.AugAssign))]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _keyword(call, name):
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _initialises(node, name) -> bool:
    if isinstance(node, ast.Assign):
        allocation = isinstance(node.value, ast.Call) and _attr(node.value).startswith("alloc_")
        return not allocation and any(_name(t) == name for t in node.targets)
    if not isinstance(node, ast.Call):
        return False
    op, args = _attr(node), node.args
    if op in ("clear", "fill") and args:
        return _name(args[0]) == name
    if op in ("copy", "cumsum") or op.startswith("reduce"):
        return len(args) > 1 and _name(args[1]) == name
    if op == "gemm" and len(args) > 2 and _name(args[2]) == name:
        flag = _keyword(node, "clear_accum")
        return flag is not None and not (isinstance(flag, ast.Constant) and not flag.value)
    return False


def _check_clear(model, ordered, allocs) -> list:
    done, out = set(), []
    fragments = {n for n, (kind, _) in allocs.items() if kind in ("alloc_fragment", "alloc_local")}
    for node in ordered:
        for name in fragments - done:
            if _initialises(node, name):
                done.add(name)
            elif _accumulates(node, name):
                done.add(name)
                target = node.args[2] if isinstance(node, ast.Call) else node.target
                out.append(Diagnostic.from_code(
                    "TL0401", f"'{name}' is accumulated into before anything initialises it "
                    f"(no T.clear/T.fill or clear_accum=True before this line)", model.span(target),
                    notes=[Note(UNBOUND_NOTE)]))
    return out


def _accumulates(node, name) -> bool:
    if isinstance(node, ast.AugAssign):
        return _name(node.target) == name
    return isinstance(node, ast.Call) and _attr(node) == "gemm" and len(node.args) > 2 \
        and _name(node.args[2]) == name and not _initialises(node, name)


def _check_gemm_shapes(model, ordered, allocs) -> list:
    out = []
    for node in ordered:
        if not (isinstance(node, ast.Call) and _attr(node) == "gemm" and len(node.args) >= 3):
            continue
        shapes = [allocs.get(_name(a) or "", (None, None))[1] for a in node.args[:3]]
        flags = [_flag(node, "transpose_A", 3), _flag(node, "transpose_B", 4)]
        if any(s is None or len(s) != 2 for s in shapes) or None in flags:
            continue
        a, b, c = ([ast.unparse(e) for e in s] for s in shapes)
        M, K = (a[1], a[0]) if flags[0] else (a[0], a[1])
        Kb, N = (b[1], b[0]) if flags[1] else (b[0], b[1])
        for what, left, right, operand in (("K", K, Kb, node.args[1]), ("M", M, c[0], node.args[2]),
                                           ("N", N, c[1], node.args[2])):
            severity = _disagree(left, right)
            if severity is not None:
                out.append(Diagnostic.from_code(
                    "TL0101", f"T.gemm {what} mismatch: {what} is `{left}` from one operand but `{right}` "
                    f"from another; they must be equal for every binding", model.span(operand),
                    notes=[Note(UNBOUND_NOTE)], severity=severity))
                break
    return out


def _flag(call, name, index):
    node = _keyword(call, name) or (call.args[index] if len(call.args) > index else None)
    if node is None:
        return False
    ok, value = literal(node, {})
    return bool(value) if ok else None


def _disagree(left: str, right: str):
    if left == right:
        return None
    if left.isdigit() and right.isdigit():
        return Severity.ERROR
    if left.isidentifier() and right.isidentifier():
        return Severity.WARNING
    return None


def _check_outputs_mentioned(model, factory) -> list:
    fn, n = factory.kernel_def, factory.kernel_param_count()
    if factory.out_idx is None or n is None:
        return []
    used = {node.id for stmt in fn.body for node in ast.walk(stmt) if isinstance(node, ast.Name)}
    out = []
    for i in sorted(_normalized_outs(factory, n)):
        arg = fn.args.args[i]
        if arg.arg not in used:
            out.append(Diagnostic.from_code(
                "TL0402", f"output '{arg.arg}' is never written: the kernel body never mentions it",
                model.span(arg), notes=[Note(f"out_idx={factory.out_idx} makes '{arg.arg}' an output")]))
    return out


def _check_tensors_mentioned(model, factory) -> list:
    """Without ``out_idx``, a tensor parameter the kernel's source never names (not even under a
    Python ``if`` that is off for some values) is a kernel that forgets one of its tensors; with
    ``out_idx``, ``_check_outputs_mentioned`` covers the outputs."""
    fn = factory.kernel_def
    if fn is None or factory.out_idx is not None:
        return []
    used = {node.id for stmt in fn.body for node in ast.walk(stmt) if isinstance(node, ast.Name)}
    tensors = [arg for arg in fn.args.args if arg.annotation is not None
               and any(word in ast.unparse(arg.annotation) for word in ("Tensor", "Buffer"))]
    if any(_writes_name(node, {a.arg for a in tensors}) for stmt in fn.body for node in ast.walk(stmt)):
        return []   # (as the IR check: an input that a feature leaves unread is no forgotten output)
    out = []
    for arg in tensors:
        if arg.arg in used:
            continue
        out.append(Diagnostic.from_code(
            "TL0402", f"tensor '{arg.arg}' is never used: the kernel body never mentions it, so if it is an "
            "output nothing writes it", model.span(arg)))
    return out


def _writes_name(node, names) -> bool:
    """Whether ``node`` stores into one of the tensors ``names``: ``Y[i] = ...`` / ``Y[i] += ...``,
    or a tile op's destination (``T.copy(x, Y[...])``, the second argument)."""
    def root(e):
        while isinstance(e, (ast.Subscript, ast.Attribute)):
            e = e.value
        return e.id if isinstance(e, ast.Name) else None

    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Subscript) and root(t) in names for t in targets)
    if isinstance(node, ast.Call) and node.args:
        if _attr(node) in ("fill", "clear"):
            return root(node.args[0]) in names
        if len(node.args) > 1 and _attr(node) in ("copy", "atomic_add", "atomic_max", "atomic_min", "atomic_addx2",
                                                  "atomic_addx4"):
            return root(node.args[1]) in names
    return False


def _check_threads(model, nodes) -> list:
    out = []
    for node in nodes:
        if isinstance(node, ast.Call) and _attr(node) == "Kernel":
            threads = _keyword(node, "threads")
            ok, value = literal(threads, model.constants) if threads is not None else (False, None)
            if ok and isinstance(value, int) and value > 1024:
                out.append(Diagnostic.from_code(
                    "TL0503", f"the block has {value} threads, more than the 1024 a GPU allows",
                    model.span(threads)))
    return out
