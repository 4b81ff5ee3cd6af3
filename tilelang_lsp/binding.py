"""Runs in the tilelang-check process and in the worker process (value-free: no tvm).

Concrete values for checking: which arguments each kernel factory of a file is built with.

A factory's parameters are bound from the first of these sources that has anything for it:
1. explicit configuration: ``# tilelang: check matmul(M=1024, N=1024, K=1024)`` pragmas in the file,
   then ``[tool.tilelang.check.bind]`` in the nearest ``pyproject.toml``
   (``matmul = {M = 1024, ...}``, a list of such tables, or ``"path/to/file.py::matmul" = ...``);
2. literal call sites in the file: ``matmul(1024, 1024, 1024)``, ``matmul.get_prim_func(...)``,
   ``kernel = matmul(M, N, K)`` with module-level names (at most ``MAX_CALL_SITES`` distinct ones;
   not for eager-style factories, whose calls pass tensors);
3. calls traced back to their values (``binding_trace``): through ``main()`` and its callers,
   argparse defaults, local assignments, autograd ``apply``, sibling modules and tests; eager
   factories' ``T.const`` names from keywords or from the shapes of the tensors passed;
   data-dependent sizes bound symbolic where the kernel allows it (shown ``<symbolic>``);
   parameters a trace leaves open take the factory's defaults;
4. the factory's defaults, when every parameter has one (``T.const`` names excepted);
5. for an ``@autotune`` factory, the first config (filled in by the worker).
Bindings of sources 2, 3 and 5 are ``soft``: values that do not evaluate in the worker, or still
missing after the autotune config, mean "no values" (TL0801 with the reason), never an error.
What remains unbound is reported (TL0801) and only value-free checks run for it. Arguments stay
source text: the worker evaluates them in the module's namespace, never this process.

``load_config`` reads ``[tool.tilelang.check]``; a malformed table raises ``ConfigError``
(``tilelang-check`` exits with status 3). Keys: ``target``, ``timeout`` (seconds per kernel
build), ``exec`` (bool), ``select``/``ignore`` (lists of codes or prefixes), ``bind``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from tilelang.analysis.source import FileModel
from tilelang.analysis.syntax import directive_comments
from tilelang.diagnostics import Diagnostic, Note, Span

MAX_CALL_SITES = 4
_PRAGMA = re.compile(r"^#\s*tilelang\s*:\s*check\b\s*(?P<call>.*)$")   # needs syntax.DIRECTIVE_HINT
_KEYS = {"target", "timeout", "exec", "select", "ignore", "bind"}


class ConfigError(Exception):
    """``[tool.tilelang.check]`` cannot be used; ``str()`` says where and why."""


@dataclass
class CheckConfig:
    target: str | None = None
    timeout: float | None = None
    exec: bool | None = None
    select: list = field(default_factory=list)
    ignore: list = field(default_factory=list)
    bind: dict = field(default_factory=dict)   # "name" or "relpath::name" -> [dict of values]
    root: Path | None = None                   # directory of the pyproject.toml
    path: Path | None = None


@dataclass(frozen=True)
class Binding:
    """One way to call a factory: argument source texts and where they came from."""

    factory: str
    args: tuple = ()
    kwargs: tuple = ()          # ((name, text), ...)
    origin: str = "the defaults"
    shown: str = ""
    eager: bool = False         # an eager-style factory: keywords are T.const values and scalars
    soft: bool = False          # traced, not written by the user: values that fail mean "no values"
    fill: bool = False          # the worker fills what is missing from the first @autotune config

    def describe(self) -> str:
        return f"{self.shown} from {self.origin}"


@dataclass
class FactoryPlan:
    factory: object             # source.Factory
    bindings: list = field(default_factory=list)
    unbound: list = field(default_factory=list)  # required parameters nothing bound


@dataclass
class FilePlan:
    factories: list = field(default_factory=list)
    diagnostics: list = field(default_factory=list)   # TL0004 for malformed pragmas


# ----- pyproject.toml ------------------------------------------------------------------------

def find_pyproject(start: Path) -> Path | None:
    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path) -> CheckConfig:
    """The ``[tool.tilelang.check]`` table of the nearest pyproject.toml (empty if none)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError("reading pyproject.toml needs Python 3.11 or the tomli package") from None

    path = find_pyproject(start.resolve())
    if path is None:
        return CheckConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read: {err}") from None
    table = data.get("tool", {}).get("tilelang", {}).get("check", {})
    return _config_from_table(table, path)


def _config_from_table(table, path: Path) -> CheckConfig:
    where = f"{path}: [tool.tilelang.check]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = set(table) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_KEYS))}")
    cfg = CheckConfig(root=path.parent, path=path)
    cfg.target = _typed(table, "target", str, where)
    timeout = _typed(table, "timeout", (int, float), where)
    cfg.timeout = float(timeout) if timeout is not None else None
    cfg.exec = _typed(table, "exec", bool, where)
    for key in ("select", "ignore"):
        value = _typed(table, key, list, where) or []
        if not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: {key} must be a list of strings (codes or prefixes)")
        setattr(cfg, key, value)
    cfg.bind = _bind_table(table.get("bind", {}), where)
    return cfg


def _typed(table, key, kind, where):
    value = table.get(key)
    if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
        raise ConfigError(f"{where}: {key} has the wrong type ({type(value).__name__})")
    return value


def _bind_table(bind, where) -> dict:
    if not isinstance(bind, dict):
        raise ConfigError(f"{where}: bind must be a table of factory names")
    out = {}
    for name, value in bind.items():
        items = value if isinstance(value, list) else [value]
        if not items or not all(isinstance(v, dict) for v in items):
            raise ConfigError(f"{where}: bind.{name} must be a table of parameter values or a list of them")
        out[name] = items
    return out


# ----- pragmas ------------------------------------------------------------------------------

@dataclass
class Pragma:
    line: int
    span: Span
    call: ast.Call | None
    error: str | None = None


def find_pragmas(path: str, text: str) -> list:
    """Every ``# tilelang: check`` comment of ``text`` (comments from ``syntax.directive_comments``)."""
    out = []
    for tok in directive_comments(text):
        match = _PRAGMA.match(tok.string)
        if match is None:
            continue
        line, col = tok.start
        span = Span(path, line, col + match.start() + 1, line, col + len(tok.string) + 1)
        source = match.group("call").strip()
        try:
            node = ast.parse(source, mode="eval").body
        except SyntaxError:
            node = None
        ok = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        out.append(Pragma(line, span, node if ok else None,
                          None if ok else f"expected `# tilelang: check factory(name=value, ...)`, got `{source}`"))
    return out


# ----- planning ----------------------------------------------------------------------------

def plan_file(model: FileModel, config: CheckConfig | None = None) -> FilePlan:
    """The bindings of every factory in ``model`` (see the module docstring for the order)."""
    config = config or CheckConfig()
    plan = FilePlan()
    pragmas = _pragma_bindings(model, plan)
    configured = _config_bindings(model, config, plan)
    for name, factory in model.factories.items():
        fp = FactoryPlan(factory)
        if factory.is_prim_func:
            fp.bindings = [Binding(name, origin="the module", shown=name)]
        else:
            fp.bindings = (pragmas.get(name) or configured.get(name) or _call_site_bindings(model, factory)
                           or _traced_bindings(model, factory) or _default_bindings(factory)
                           or _autotune_bindings(factory))
            if not fp.bindings:
                fp.unbound = _needed(factory)
        plan.factories.append(fp)
    return plan


def _shown(factory, args, kwargs, values) -> str:
    names = [p.name for p in factory.params]
    parts = []
    for i, text in enumerate(args):
        label = names[i] if i < len(names) else f"arg{i}"
        parts.append(f"{label}={_value_text(text, values)}")
    parts += [f"{k}={_value_text(v, values)}" for k, v in kwargs]
    return f"{factory.name}({', '.join(parts)})"


def _value_text(text, values) -> str:
    if text in values and isinstance(values[text], (int, float, str, bool, tuple, list)):
        return repr(values[text])
    return text


def _problem(factory, args, kwargs) -> str | None:
    """Why ``factory(*args, **kwargs)`` cannot be a call, or None."""
    names = [p.name for p in factory.params]
    if len(args) > len(names) and not factory.star_args:
        return f"{factory.name} takes {len(names)} parameters, {len(args)} given"
    given = set(names[: len(args)])
    for k, _ in kwargs:
        if k not in names and not factory.star_args:
            return f"{factory.name} has no parameter '{k}'"
        if k in given:
            return f"parameter '{k}' is given twice"
        given.add(k)
    missing = [n for n in factory.required() if n not in given]
    if missing and not factory.star_args:
        return f"no value for {', '.join(missing)}"
    return None


def _call_site_bindings(model, factory) -> list:
    from tilelang_lsp.binding_trace import eager_signature

    if eager_signature(factory.node) is not None:
        return []       # an eager kernel's calls pass tensors: traced (T.const values) instead
    out, seen = [], set()
    for site in model.calls:
        if site.factory != factory.name or not site.static:
            continue
        kwargs = tuple(site.kwargs.items())
        key = (tuple(site.args), kwargs)
        if key in seen or _problem(factory, site.args, kwargs) is not None:
            continue
        seen.add(key)
        shown = _shown(factory, site.args, kwargs, site.values)
        out.append(Binding(factory.name, tuple(site.args), kwargs, f"the call at line {site.node.lineno}", shown,
                           soft=True))
        if len(out) == MAX_CALL_SITES:
            break
    return out


def _default_bindings(factory) -> list:
    if _needed(factory) or factory.star_args and not factory.params:
        return []
    return [Binding(factory.name, origin="the defaults", shown=f"{factory.name}()")]


def _consts(factory) -> list:
    """The ``T.const`` names of an eager-style factory (each needs a value), else []."""
    from tilelang_lsp.binding_trace import eager_signature

    eager = eager_signature(factory.node)
    return eager[0] if eager else []


def _needed(factory) -> list:
    """What has no value: required parameters (an eager factory's tensors excepted) and T.const names."""
    from tilelang_lsp.binding_trace import eager_signature

    eager = eager_signature(factory.node)
    if not eager:
        return factory.required()
    consts, tensors = eager
    return [n for n in factory.required() if n not in tensors] + list(consts)


def _autotuned(factory) -> bool:
    return any(_decorator_root(d) == "autotune" for d in factory.node.decorator_list)


def _decorator_root(dec) -> str:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""


def _traced_bindings(model, factory) -> list:
    """Bindings traced from the calls of ``factory`` in this file and its siblings
    (``binding_trace``), with the first ``@autotune`` config for what they leave open."""
    from tilelang_lsp.binding_trace import eager_signature, is_symbolic_text, traced_bindings

    autotuned = _autotuned(factory)
    eager = eager_signature(factory.node) is not None
    out = []
    for traced in traced_bindings(model.path, model.text, factory.node, autotuned):
        kwargs = tuple(traced.values.items())
        parts = [f"{k}={'<symbolic>' if is_symbolic_text(v) else v}" for k, v in kwargs]
        shown = f"{factory.name}({', '.join(parts)})"
        out.append(Binding(factory.name, (), kwargs, traced.origin, shown, eager=eager, soft=True,
                           fill=bool(traced.unresolved) or autotuned))   # autotuned: config over None defaults
    return out


def _autotune_bindings(factory) -> list:
    """The first config of an ``@autotune`` factory, with its defaults, when nothing else binds it."""
    from tilelang_lsp.binding_trace import eager_signature

    if not _autotuned(factory):
        return []
    return [Binding(factory.name, (), (), "the first @autotune config", f"{factory.name}(<first config>)",
                    eager=eager_signature(factory.node) is not None, soft=True, fill=True)]


def _pragma_bindings(model, plan) -> dict:
    out = {}
    for pragma in find_pragmas(model.path, model.text):
        error = pragma.error
        factory = model.factories.get(pragma.call.func.id) if pragma.call is not None else None
        if error is None and (factory is None or factory.is_prim_func):
            error = f"'{pragma.call.func.id}' is not a kernel factory defined in this file"
        if error is None:
            args = tuple(ast.unparse(a) for a in pragma.call.args)
            kwargs = tuple((kw.arg, ast.unparse(kw.value)) for kw in pragma.call.keywords)
            error = _problem(factory, args, kwargs) if None not in dict(kwargs) else "** is not allowed"
        if error is not None:
            plan.diagnostics.append(Diagnostic.from_code("TL0004", f"invalid check pragma: {error}", pragma.span))
            continue
        values = {t: v for t in args + tuple(v for _, v in kwargs) for ok, v in [_literal(t)] if ok}
        shown = _shown(factory, args, kwargs, values)
        out.setdefault(factory.name, []).append(
            Binding(factory.name, args, kwargs, f"the pragma at line {pragma.line}", shown))
    return out


def _literal(text):
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False, None


def _config_bindings(model, config, plan) -> dict:
    out = {}
    rel = _relative(model.path, config.root)
    for key, tables in config.bind.items():
        path_part, _, name = key.rpartition("::")
        if path_part and path_part != rel:
            continue
        factory = model.factories.get(name)
        if factory is None or factory.is_prim_func:
            continue
        for table in tables:
            kwargs = tuple((k, repr(v)) for k, v in table.items())
            error = _problem(factory, (), kwargs)
            if error is not None:
                plan.diagnostics.append(Diagnostic.from_code(
                    "TL0004", f"invalid binding for '{name}' in {config.path}: {error}", model.span(factory.node),
                    notes=[Note(f"[tool.tilelang.check.bind] {key} = {table}")]))
                continue
            shown = _shown(factory, (), kwargs, {})
            out.setdefault(name, []).append(Binding(name, (), kwargs, "[tool.tilelang.check] in pyproject.toml", shown))
    return out


def _relative(path: str, root: Path | None) -> str:
    if root is None:
        return path
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path


def factory_name_span(model: FileModel, factory) -> Span | None:
    """The factory's name in its ``def`` line (where TL0801 points)."""
    node = factory.node
    lines = model.lines
    if node.lineno <= len(lines):
        line = lines[node.lineno - 1]
        col = line.find(f"def {node.name}")
        if col >= 0:
            start = col + 5
            return Span(model.path, node.lineno, start, node.lineno, start + len(node.name))
    return model.span(node)


def unbound_diagnostic(model: FileModel, fp: FactoryPlan, reason: str | None = None) -> Diagnostic:
    if reason is not None:   # values were traced but could not be used
        names = _needed(fp.factory)
        return Diagnostic.from_code(
            "TL0801", f"no usable values for '{fp.factory.name}' ({reason}), so only the checks that need "
            f"no values ran", factory_name_span(model, fp.factory),
            notes=[Note(f"add `# tilelang: check {fp.factory.name}({', '.join(f'{n}=...' for n in names)})`")])
    names = ", ".join(fp.unbound)
    return Diagnostic.from_code(
        "TL0801", f"no values for {names} of '{fp.factory.name}': no check pragma, no configured binding, no "
        f"literal call in this file and no defaults, so only the checks that need no values ran",
        factory_name_span(model, fp.factory),
        notes=[Note(f"add `# tilelang: check {fp.factory.name}({', '.join(f'{n}=...' for n in fp.unbound)})`")])
