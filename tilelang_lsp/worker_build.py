"""Runs in the worker process: executing a file's definitions and building and checking kernels.

Building a kernel executes the user's Python, so it happens here, never in the language server's
or ``tilelang-check``'s own process. The requests (``worker_main`` dispatches them):

- ``load`` ``{"path", "text"}``: execute the file's module-level definitions (imports, functions,
  classes, constant assignments, and the same inside ``if``/``try`` blocks other than ``if
  __name__ == "__main__"``) under a fresh module name; statements that would run kernels or
  scripts (bare expressions, loops, ``with`` blocks, calls of jitted factories) are skipped at any
  depth, and an assignment that fails is dropped silently. The text comes from the request, so
  unsaved editor buffers work (``linecache`` is primed for TVM's parser). A statement that runs
  past the request's time limit (``WorkerTimeout``, raised by the language server's worker) stops
  the load: TL0803 at its deepest line, and the reply's ``hung`` is its fingerprint ``[first
  line, text]``; a later ``load`` whose ``skip`` lists that fingerprint does not run it (TL0803
  again, at once), so a hang costs one time limit, not one per check. A file in a folder with
  ``__init__.py`` is loaded as part of its package (the topmost such folder's parent goes on
  ``sys.path``, ``__package__`` is set), and modules imported from the folders of earlier loads
  are unloaded first. An import that fails for the environment (a third-party module that is
  not installed, no GPU, a ``SystemExit``) is TL0804 on its line, and the ``NameError``s that
  follow from it are dropped. Reply: ``{"ok": True, "module", "diagnostics", "hung": [line,
  text] or None}``.
- ``build`` ``{"path", "factory", "args", "kwargs", "binding", "target", "prim_func",
  "out_idx_span", "summary"?}``: evaluate the binding's argument texts in the module's namespace,
  call the factory's undecorated function (``factory.factory`` of ``@tilelang.jit``; a plain
  factory itself) and check the PrimFunc with ``tilelang.analysis.analyze`` under the factory's
  ``out_idx`` and ``pass_configs`` (the codes those configs switch off in the compiler are
  dropped here too). An eager-style factory is built through its ``get_prim_func`` (``T.const``
  values as keywords). ``fill``: missing parameters come from the first ``@autotune`` config;
  ``soft``: texts that do not evaluate, or values still missing, give ``"unbound"`` (a reason)
  instead of an error. Device queries (``torch.cuda.get_device_capability``, the carver
  driver's ``get_num_sms``) answer for the checked target. A failure caused by the environment
  gives ``"environment"`` (a note); a parse error keeps its own code and span; any other
  exception is TL0802 at the deepest line of the file in its traceback. Reply: ``{"ok": True,
  "built", "diagnostics", "values"?, "unbound"?, "environment"?, "skipped"?}``, plus ``"summary"``
  (``analysis.summary``, from the same analysis) when the request asks for it. The factory runs
  inside ``worker_targets.building()`` and is checked for the target ``worker_targets`` picks (the
  one it names, sm_100a for tcgen05 / tensor-memory code): a kernel of a target this TileLang does
  not compile gets the target-independent checks and ``"skipped"`` says what was left out.

Diagnostics travel as ``Diagnostic.to_dict()`` dicts. Nothing here raises on a mistake in user
code (it becomes a diagnostic); ``WorkerTimeout`` always propagates.
"""

from __future__ import annotations

import contextlib

import os
import sys
import traceback

from tilelang_lsp.worker_errors import WorkerTimeout

_SKIP_CALLS = ("compile",)


def _keep(stmt, jitted: set) -> bool:
    """Whether a statement is a definition the checker may execute (``if``/``try``: see
    ``_definitions``)."""
    import ast

    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else "")
                if name in jitted or name in _SKIP_CALLS:
                    return False
        return True
    if isinstance(stmt, ast.If):
        return "__name__" not in ast.unparse(stmt.test)
    return isinstance(stmt, ast.Try)


def _definitions(stmt, jitted: set):
    """``stmt`` with only its definitions at every depth (an ``if``/``try`` keeps its own kept
    statements, ``pass`` where none is left), or None when nothing of it may run."""
    import ast
    import copy

    if not _keep(stmt, jitted):
        return None
    if not isinstance(stmt, (ast.If, ast.Try)):
        return stmt
    out = copy.copy(stmt)
    for field in ("body", "orelse", "finalbody"):
        if getattr(stmt, field, None):
            setattr(out, field, _kept_block(getattr(stmt, field), jitted, stmt))
    if isinstance(stmt, ast.Try):
        out.handlers = [copy.copy(h) for h in stmt.handlers]
        for new, old in zip(out.handlers, stmt.handlers):
            new.body = _kept_block(old.body, jitted, old)
    return out


def _kept_block(stmts: list, jitted: set, owner) -> list:
    import ast

    kept = [s for s in (_definitions(s, jitted) for s in stmts) if s is not None]
    return kept or [ast.copy_location(ast.Pass(), owner)]


def load_module(message: dict, modules: dict) -> dict:
    """The ``load`` request: execute the definitions of ``message["text"]`` as a fresh module.

    ``modules[path]`` becomes the module (replacing, and unregistering, the previous one); the
    reply's ``diagnostics`` are TL0802 for imports/definitions that raised and TL0803 for a
    statement that hung (module docstring).
    """
    import ast
    import linecache
    import types

    from tilelang.analysis.source import parse_file

    path, text = message["path"], message["text"]
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    root, package = package_root(path)
    _forget_user_modules(root)
    if root in sys.path:
        sys.path.remove(root)
    sys.path.insert(0, root)
    model = parse_file(path, text)
    jitted = {n for n, f in model.factories.items() if f.jit}
    previous = modules.pop(path, None)
    if previous is not None:
        sys.modules.pop(previous.__name__, None)
    key = f"_tilelang_check_{abs(hash(path)):x}_{len(modules)}"
    module = types.ModuleType(key)
    module.__file__ = path
    module.__package__ = package      # relative imports resolve inside the file's package
    sys.modules[key] = module
    problems, skip = [], {tuple(k) for k in message.get("skip", ())}
    unavailable = set()                # names that imports which failed for the environment would bind
    lines = text.splitlines(True)
    with _tensors_without_gpu():
        _execute(model, jitted, lines, skip, module, path, problems, unavailable)
    modules[path] = module
    _UNAVAILABLE[key] = unavailable
    hung = next((p.pop("_hung_key") for p in problems if "_hung_key" in p), None)
    return {"ok": True, "module": key, "diagnostics": problems, "hung": hung}


_CUDA_MAKERS = ("rand", "randn", "empty", "zeros", "ones", "full", "randint", "tensor", "arange", "eye",
                "linspace", "empty_strided", "as_tensor")


@contextlib.contextmanager
def _tensors_without_gpu():
    """Without a GPU, the tensors a file makes on ``cuda`` at module level (``A = torch.rand(m, k,
    device="cuda")`` and the sizes read from them: ``M, K = A.shape``) are made on torch's ``meta``
    device while the file loads: shapes and dtypes, no data and no memory. Put back afterwards."""
    try:
        import torch
    except ImportError:
        yield
        return
    if torch.cuda.is_available():
        yield
        return
    patched = []

    def on_cuda(device) -> bool:
        return device is not None and str(device).split(":")[0] == "cuda"

    def wrap(original):
        def maker(*args, **kwargs):
            if on_cuda(kwargs.get("device")):
                kwargs["device"] = "meta"
            return original(*args, **kwargs)
        return maker

    for name in _CUDA_MAKERS:
        original = getattr(torch, name, None)
        if original is not None:
            patched.append((torch, name, original))
            setattr(torch, name, wrap(original))
    cuda_method = torch.Tensor.cuda
    patched.append((torch.Tensor, "cuda", cuda_method))
    torch.Tensor.cuda = lambda self, *a, **k: self.to("meta")
    try:
        yield
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def _execute(model, jitted, lines, skip, module, path, problems, unavailable):
    """Run the definitions of the file's statements into ``module`` (see ``load_module``)."""
    import ast

    for stmt in model.tree.body:
        kept = _definitions(stmt, jitted)
        if kept is None:
            continue
        fingerprint = statement_key(stmt, lines)
        if fingerprint in skip:
            problems.append(_hung(None, path, stmt).to_dict())
            continue
        try:
            # dont_inherit: this module's own ``from __future__ import annotations`` must not turn the
            # user's annotations into strings (a nested kernel's ``T.Tensor(shape)`` would lose ``shape``)
            code = compile(ast.Module(body=[kept], type_ignores=[]), path, "exec", dont_inherit=True)
            exec(code, module.__dict__)  # noqa: S102
        except WorkerTimeout as err:
            problems.append({**_hung(err, path, stmt).to_dict(), "_hung_key": list(fingerprint)})
            break
        except BaseException as err:  # noqa: BLE001 - user code may raise anything, even SystemExit
            if not isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
                continue
            note = environment_problem(err, path)
            if note is None and isinstance(err, SyntaxError) and isinstance(stmt, ast.FunctionDef):
                # The file parsed, so this comes from a decorator compiling a rewritten function.
                note = f"the installed tilelang cannot process '{stmt.name}' (SyntaxError: {err.msg})"
            if note is None and isinstance(err, NameError) and getattr(err, "name", None) in unavailable:
                continue    # follows from an import already noted
            if note is not None:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    unavailable |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
                problems.append(_environment(note, path, stmt.lineno).to_dict())
                continue
            problems += failure_diagnostics(err, path, f"line {stmt.lineno} raised while loading the file:", None)


def package_root(path: str):
    """(the folder to put on ``sys.path``, the file's package or "") for a file: a file in a folder
    with ``__init__.py`` belongs to that package, which starts at the topmost such folder."""
    directory = os.path.dirname(os.path.abspath(path))
    parts = []
    while os.path.exists(os.path.join(directory, "__init__.py")) and len(parts) < 16:
        parts.insert(0, os.path.basename(directory))
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return directory, ".".join(parts)


_USER_ROOTS: set = set()
_BASELINE: set = set()       # modules imported before any user file: never unloaded
_UNAVAILABLE: dict = {}      # module name -> names its environment-failed imports would bind


def _forget_user_modules(root: str) -> None:
    """Unload the modules imported from the folders of files loaded before (a sibling ``utils.py``
    of one example must not stand in for another folder's ``utils.py``) and drop those folders
    from ``sys.path``."""
    for other in list(_USER_ROOTS):
        if other != root and other in sys.path:
            sys.path.remove(other)
    if not _BASELINE:
        _BASELINE.update(sys.modules)
    stale = [n for n, m in list(sys.modules.items())
             if n not in _BASELINE and not n.startswith(("tilelang", "tvm", "torch", "_tilelang_check_"))
             and any(_under(getattr(m, "__file__", None), r) for r in _USER_ROOTS)]
    for name in stale:
        sys.modules.pop(name, None)
    _USER_ROOTS.add(root)


def _under(file, root) -> bool:
    return bool(file) and isinstance(file, str) and file.startswith(root + os.sep) and "site-packages" not in file


def _environment(note: str, path: str, line: int):
    """TL0804 on ``line``: ``note`` says what the environment lacks (and, for torch, how to add it)."""
    from tilelang.diagnostics import Diagnostic, Note

    notes = []
    if "'torch'" in note:
        notes.append(Note("the pre-commit hook's environment has no torch: add it under "
                          "`additional_dependencies: [torch]` of the hook in .pre-commit-config.yaml, "
                          "or run the hook with `language: system`"))
    return Diagnostic.from_code("TL0804", f"{note}; the kernels that need it are checked without values",
                                _line_span(path, line), notes=notes)


def statement_key(stmt, lines: list) -> tuple:
    """(first line, text) of a module-level statement, decorators included: its identity across
    edits (it changes when the statement's text or position does)."""
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return first, "".join(lines[first - 1: stmt.end_lineno])


def _hung(err, path: str, stmt):
    """TL0803 for a module-level statement that ran past the time limit (``err``: this time;
    None: on an earlier check, so it was not run)."""
    from tilelang.diagnostics import Diagnostic

    line = None
    for frame in traceback.extract_tb(err.__traceback__) if err is not None else ():
        if frame.filename == path and frame.lineno:
            line = frame.lineno
    what = (f"this statement ran past the time limit ({err}) and was stopped, so the rest of the file was "
            "not loaded" if err is not None else
            "not run: this statement ran past the time limit when the file was checked before (it runs "
            "again once its text changes)")
    return Diagnostic.from_code("TL0803", f"loading the file: {what}; the kernels that need it are not built",
                                _line_span(path, line or stmt.lineno))


def _line_span(path: str, line: int):
    """The span of the text of ``line`` (indentation excluded)."""
    from tilelang.diagnostics import Span

    text = linecache_line(path, line)
    indent = len(text) - len(text.lstrip())
    return Span(path, line, indent + 1, line, max(len(text.rstrip()) + 1, indent + 2))


def _raised(err, path, what, binding):
    """TL0802 at the deepest frame of ``path`` in the traceback of ``err``."""
    from tilelang.diagnostics import Diagnostic

    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == path and frame.lineno:
            line = frame.lineno
    span = _line_span(path, line) if line else None
    message = f"{what} {type(err).__name__}: {err}".rstrip(": ")
    return Diagnostic.from_code("TL0802", message, span, binding=binding)


def linecache_line(path, line) -> str:
    import linecache

    return linecache.getline(path, line).rstrip("\n")


def _factory_function(obj):
    """The undecorated factory behind ``@tilelang.jit`` (and wrappers that keep ``factory``)."""
    for _ in range(8):
        inner = getattr(obj, "factory", None) or getattr(obj, "__wrapped__", None)
        if inner is None or inner is obj:
            break
        obj = inner
    return obj


def build_kernel(module, message: dict) -> dict:
    """The ``build`` request: one bound kernel of a loaded ``module``, built and checked (the
    module docstring says what the reply holds)."""
    from tvm import tirx

    from tilelang_lsp import worker_targets

    binding = message["binding"]
    try:
        with _answer_device_queries(message.get("target")), worker_targets.building() as built:
            func, used = call_factory(module, message)
    except NoValues as why:
        return {"ok": True, "built": False, "diagnostics": [], "unbound": str(why)}
    except WorkerTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - the user's factory failed: report where
        what = f"{message['factory']} raised while building the kernel:"
        note = environment_problem(err, message["path"], _UNAVAILABLE.get(module.__name__, ()))
        if note is not None:
            return {"ok": True, "built": False, "diagnostics": [], "environment": note}
        from tilelang_lsp.binding_trace import is_symbolic_text

        if message.get("soft") and any(is_symbolic_text(t) for _, t in message["kwargs"]):   # our guess failed
            return {"ok": True, "built": False, "diagnostics": [], "unbound": f"with symbolic sizes it raised "
                    f"{type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}"}
        return {"ok": True, "built": False, "diagnostics": failure_diagnostics(err, message["path"], what, binding)}
    if not isinstance(func, tirx.PrimFunc):
        return {"ok": True, "built": False, "diagnostics": []}
    obj = module.__dict__.get(message["factory"])   # the target it names, or sm_100a for tcgen05 code
    message = {**message, "target": worker_targets.kernel_target(_wrapped_attr(obj, "target"), built, func,
                                                                 message.get("target"))}
    with _answer_device_queries(message.get("target")):
        diagnostics, summary = check_kernel(func, module, message)
    guessed = _symbolic_guess_failed(message, diagnostics)
    if guessed:
        return {"ok": True, "built": False, "diagnostics": [], "unbound": guessed}
    reply = {"ok": True, "built": True, "diagnostics": diagnostics, "values": used}
    worker_targets.finish(reply, built, func, message["path"])
    if message.get("summary"):
        reply["summary"] = summary
    return reply


@contextlib.contextmanager
def _answer_device_queries(target):
    """Without a GPU, ``torch.cuda.get_device_capability()`` and the carver driver's
    ``get_num_sms()`` raise; while a factory is built, one that sizes itself from them
    (``sm_major, sm_minor = ...``, a persistent grid of one block per SM) gets the checked target's
    flagship GPU instead. The originals are put back afterwards (the worker may share its process)."""
    import re

    patched = []   # (owner, name, original)

    def patch(owner, name, value):
        patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    try:
        import torch
    except ImportError:
        torch = None
    found = re.fullmatch(r"(?:sm_)?(\d+?)(\d)[af]?", target or "")
    if torch is not None and found is not None and not torch.cuda.is_available():
        capability = (int(found.group(1)), int(found.group(2)))
        patch(torch.cuda, "get_device_capability", lambda device=None: capability)
        sms = _SM_COUNTS.get(capability[0] * 10 + capability[1], 132)
        try:
            from tilelang.carver.arch import driver as package
            from tilelang.carver.arch.driver import cuda_driver
        except ImportError:
            package = cuda_driver = None
        for owner in (package, cuda_driver):
            if owner is not None and hasattr(owner, "get_num_sms"):
                patch(owner, "get_num_sms", lambda device_id=0: sms)
    try:
        yield
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


_SM_COUNTS = {80: 108, 86: 84, 89: 142, 90: 132, 100: 148, 103: 148, 120: 188}   # the targets' flagship parts


class NoValues(Exception):
    """A traced binding (``soft``) cannot be used: an argument text does not evaluate, or values
    are still missing after the first ``@autotune`` config; ``str()`` says which."""


def call_factory(module, message: dict):
    """``(what message["factory"] of module returns, the values used as text)`` for the binding's
    argument texts (evaluated in the module's namespace); a module-level ``@T.prim_func`` itself.
    An eager-style factory is built by its ``get_prim_func`` (keywords: ``T.const`` values and
    scalars, tensors optional). With ``fill``, parameters still missing come from the first
    ``@autotune`` config. Raises what the user's code raises; ``NoValues`` for a ``soft``
    binding whose texts do not evaluate or that still lacks values."""
    namespace = module.__dict__
    name = message["factory"]
    if name not in namespace:
        raise NoValues(f"'{name}' is not defined once the file is loaded")
    obj = namespace[name]
    if message.get("prim_func"):
        return obj, name
    soft = message.get("soft")
    try:
        args = [eval(t, namespace) for t in message["args"]]  # noqa: S307 - the user's own source text
        kwargs = {k: eval(t, namespace) for k, t in message["kwargs"]}  # noqa: S307
    except WorkerTimeout:
        raise
    except Exception as err:  # noqa: BLE001 - a traced value that does not evaluate here
        if not soft:
            raise
        raise NoValues(f"a traced value does not evaluate here ({type(err).__name__}: {err})") from None
    eager = _eager_of(obj)
    function = _factory_function(obj)
    if message.get("fill"):
        message["config_pass_configs"] = _fill_from_autotune(obj, function, eager, args, kwargs)
    if soft:
        _require_values(function, eager, args, kwargs)
    used = _used_text(name, function, args, kwargs)
    if eager is not None:
        return eager.get_prim_func(*args, **kwargs), used
    return function(*args, **kwargs), used


def _eager_of(obj):
    """The ``EagerJit`` behind ``obj`` (itself or under ``@autotune``), or None."""
    from tilelang.jit.eager import EagerJit

    for _ in range(8):
        if isinstance(obj, EagerJit):
            return obj
        inner = getattr(obj, "_target", None) or getattr(obj, "factory", None)
        if inner is None or inner is obj:
            return None
        obj = inner
    return None


def _autotune_configs(obj):
    for _ in range(8):
        configs = getattr(obj, "_configs", None)
        if configs is not None:
            return configs
        inner = getattr(obj, "_target", None) or getattr(obj, "factory", None) or getattr(obj, "__wrapped__", None)
        if inner is None or inner is obj:
            return None
        obj = inner
    return None


def _fill_from_autotune(obj, function, eager, args, kwargs) -> dict | None:
    """Fill ``kwargs`` from the first ``@autotune`` config (only what the factory takes); returns
    that config's ``pass_configs`` (a tuning dimension upstream allows), or None."""
    import inspect

    configs = _autotune_configs(obj)
    if callable(configs):
        try:
            configs = configs(*args, **kwargs)
        except Exception:  # noqa: BLE001 - a config generator that needs more than we have
            return None
    try:
        first = next(iter(configs)) if configs is not None else None
    except (TypeError, StopIteration):
        return None
    if not isinstance(first, dict):
        return None
    sig = inspect.signature(function)
    params = list(sig.parameters)
    open_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    given = set(params[: len(args)]) | set(kwargs)
    for key, value in first.items():
        if key not in given and (key in params or open_kwargs or eager is not None and key != "pass_configs"):
            kwargs[key] = value
    extra = first.get("pass_configs")
    return dict(extra) if isinstance(extra, dict) and "pass_configs" not in params else None


def _require_values(function, eager, args, kwargs) -> None:
    import inspect

    from tilelang_lsp.binding_trace import eager_signature

    try:
        sig = inspect.signature(function)
    except (TypeError, ValueError):
        return
    tensors, consts = set(), []
    if eager is not None:
        import ast
        import textwrap

        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
            found = eager_signature(tree.body[0])
        except (OSError, TypeError, SyntaxError, IndexError):
            found = None
        if found:
            consts, tensors = found[0], set(found[1])
    params = list(sig.parameters.values())
    given = {p.name for p in params[: len(args)]} | set(kwargs)
    missing = [p.name for p in params if p.default is p.empty and p.name not in given and p.name not in tensors
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    missing += [c for c in consts if c not in given]
    if missing:
        raise NoValues(f"no value for {', '.join(missing)}")


def _used_text(name, function, args, kwargs) -> str:
    import inspect

    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        names = []
    parts = [f"{names[i] if i < len(names) else f'arg{i}'}={_short(v)}" for i, v in enumerate(args)]
    parts += [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _short(value) -> str:
    text = str(value) if type(value).__module__.startswith(("tvm", "tilelang")) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_CUDA_WORDS = ("cuda", "nvidia driver", "no gpu", "gpu", "cudnn", "nvml")


def environment_problem(err, path, unavailable=()):
    """A note (str) when ``err`` comes from the environment, not the user's code: a missing
    third-party module, no GPU or CUDA driver, a name an import that failed so would bind
    (``unavailable``); else None."""
    import re

    text = str(getattr(err, "message", None) or err)
    found = re.search(r"Undefined variable: (\w+)|name '(\w+)' is not defined", text)
    name = found and (found.group(1) or found.group(2))
    if name and name in unavailable:
        return f"it needs '{name}', whose import failed in the checker's environment"
    if "module 'tilelang" in text and "has no attribute" in text:
        return f"the installed tilelang lacks what this code uses ({text.splitlines()[0][:120]})"
    if isinstance(err, ModuleNotFoundError):
        missing = (err.name or "").split(".")[0]
        if missing and not _own_module(missing, path):
            return f"the module '{err.name}' is not installed in the checker's environment"
        return None
    gap = _tilelang_gap(err)
    if gap is not None:
        return gap
    if isinstance(err, SystemExit):
        return f"the file exits while it is loaded (SystemExit: {err.code}), presumably for want of a device"
    if isinstance(err, AttributeError) and "module 'tilelang" in str(err):
        return f"the installed tilelang lacks what this code uses ({err})"
    text = str(err).lower()
    if isinstance(err, (RuntimeError, AssertionError, OSError, AttributeError)) and \
            any(w in text for w in _CUDA_WORDS) and ("driver" in text or "device" in text or "not compiled" in text
                                                     or "available" in text or "gpu" in text):
        return f"needs a GPU ({type(err).__name__}: {str(err).splitlines()[0][:120]})"
    return None


def _tilelang_gap(err):
    """A note when ``err`` says the installed tilelang lacks an API the code uses (an attribute of
    a tilelang object, a keyword of a tilelang function) or a target (``hip``); else None."""
    import tilelang

    if isinstance(err, AttributeError):
        owner = type(getattr(err, "obj", None))
        if owner.__module__.startswith("tilelang") and owner.__name__ != "NoneType":
            return f"the installed tilelang lacks what this code uses ({err})"
        return None
    frames = traceback.extract_tb(err.__traceback__)
    root = os.path.dirname(os.path.abspath(tilelang.__file__))
    inside = bool(frames) and os.path.abspath(frames[-1].filename).startswith(root + os.sep)
    text = str(err)
    if isinstance(err, TypeError) and inside and ("unexpected keyword argument" in text or "positional" in text):
        return f"the installed tilelang lacks what this code uses ({text.splitlines()[0][:120]})"
    if "Cannot parse target string" in text or "target string" in text and "hip" in text:
        return f"the installed tilelang does not support this target ({text.splitlines()[0][:100]})"
    return None


def _own_module(name: str, path: str) -> bool:
    """Whether ``name`` is a module of the user's (a file or package next to ``path`` or above it
    in its package)."""
    directory = os.path.dirname(os.path.abspath(path))
    for _ in range(6):
        if os.path.exists(os.path.join(directory, name + ".py")) or \
                os.path.isdir(os.path.join(directory, name)):
            return True
        if not os.path.exists(os.path.join(directory, "__init__.py")):
            return False
        directory = os.path.dirname(directory)
    return False


_PARSE_CODES = (("at most 1024 threads", "TL0503"),)


def failure_diagnostics(err, path, what, binding) -> list:
    """Diagnostic dicts for an exception from user code: its own diagnostics (a compile or parse
    error), else TL0802 "``what`` <error>" at the deepest line of ``path`` in its traceback."""
    from tilelang.diagnostics import Severity, TileLangCompileError
    from tilelang.frontend import ParseError

    if isinstance(err, TileLangCompileError):
        return [_limitation(_with_binding(d, binding)).to_dict() for d in err.diagnostics]
    if isinstance(err, ParseError):
        diag = _narrow_undefined(err.to_diagnostic())
        for needle, code in _PARSE_CODES:
            if needle in err.message:
                diag.code = code
        diag.severity = Severity.ERROR
        return [_limitation(_with_binding(diag, binding)).to_dict()]
    return [_raised(err, path, what, binding).to_dict()]


def _narrow_undefined(diag):
    """Point "Undefined variable: x" at the name ``x`` inside the statement's span."""
    import re

    from tilelang.diagnostics import Span

    match = re.match(r"Undefined variable: (\w+)", diag.message)
    span = diag.span
    if match is None or span is None:
        return diag
    text = linecache_line(span.file, span.line)
    end = span.end_column - 1 if not span.is_multiline else len(text)
    found = re.search(rf"\b{re.escape(match.group(1))}\b", text[span.column - 1:end])
    if found is not None:
        start = span.column + found.start()
        diag.span = Span(span.file, span.line, start, span.line, start + len(match.group(1)))
    return diag


def _with_binding(diag, binding):
    diag.binding = diag.binding or binding
    return diag


def _symbolic_guess_failed(message: dict, diagnostics: list) -> str | None:
    """Why a traced binding's symbolic sizes (``soft``, e.g. ``UQ`` bound as ``T.dynamic``) are to
    blame for the kernel's errors, or None. The guess holds where a size only shapes tensors, but a
    kernel may need the number (``T.annotate_layout`` on a global tensor of that shape,
    ``T.Parallel(M * N)`` over a fragment): an error naming a symbolic size, in its message or on
    the source line it points at, is the guess failing, not the user's code, and the kernel counts
    as built without values, as when the factory raises under the guess."""
    import re

    from tilelang_lsp.binding_trace import is_symbolic_text

    if not message.get("soft"):
        return None
    import linecache

    names = [name for name, text in message["kwargs"] if is_symbolic_text(text)]
    for d in diagnostics:
        if d.get("severity") != "error":
            continue
        span = d.get("span") or {}
        # the size named in the message, or on the source line it points at (``T.Parallel(M * N)``:
        # "extents must be compile-time constants")
        text = d.get("message", "") + "\n" + (linecache.getline(span["file"], span["line"])
                                              if span.get("file") and span.get("line") else "")
        hit = next((n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w(])", text)), None)
        if hit is not None:
            return f"with {hit} symbolic the kernel reports {d.get('code')}: {d.get('message', '').splitlines()[0][:120]}"
    return None


def check_kernel(func, module, message: dict):
    """``(diagnostic dicts, hover summary or None)`` of a built kernel: one
    ``tilelang.analysis.analyze`` run with the factory's ``out_idx`` and ``pass_configs``, the
    binding and the file's text (from ``linecache``) in its context; the summary (when the
    request asks for it) reads the same analysis."""
    import linecache

    from tilelang.analysis import CheckContext, analyze
    from tilelang.analysis.jit import silenced_codes
    from tilelang.diagnostics import Span

    obj = module.__dict__[message["factory"]]
    out_idx = _wrapped_attr(obj, "out_idx")    # through @autotune and other wrappers
    if isinstance(out_idx, int):
        out_idx = [out_idx]
    configs = pass_configs_of(obj)
    if message.get("config_pass_configs"):     # the autotune config's own, over the decorator's
        import warnings

        from tilelang.transform.pass_config import normalize

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            configs = {**configs, **normalize(message["config_pass_configs"])}
    span = message.get("out_idx_span")
    ctx = CheckContext(out_idx=list(out_idx) if out_idx is not None else None, binding=message["binding"],
                       sources={message["path"]: "".join(linecache.getlines(message["path"]))},
                       read_source=lambda f: "".join(linecache.getlines(f)) or None,
                       out_idx_span=Span.from_dict(span) if span else None, pass_configs=configs)
    kernel, found = analyze(func, message["target"], ctx)
    off = silenced_codes(configs)
    diagnostics = [_limitation(d).to_dict() for d in found if d.code not in off]
    return diagnostics, (_summary(kernel, message["target"]) if message.get("summary") else None)


# Errors that name something upstream TileLang compiles but ours does not yet: the user's code is
# fine, the installed compiler lacks the feature (code, message pattern, what it lacks).
_LIMITATIONS = (
    ("TL0102", r"no instruction for u?int4 operands", "int4 tensor-core gemms (mma.sync .s4 on sm_80 and newer)"),
    ("TL0001", r"does not generate sm_100 tcgen05", "sm_100 tcgen05 / tensor-memory kernels"),
    ("TL0001", r"T\.alloc_tmem: tensor memory tiles are 2-D", "multi-buffered (3-D) tensor-memory tiles"),
    ("TL0001", r"does not generate sm_120 block-scaled MMA", "sm_120 block-scaled MMA (mma.sync ...block_scale)"),
)


def _limitation(diag):
    """``diag`` itself, or, for an error that only says the installed compiler lacks a feature
    (``_LIMITATIONS``), a TL0804 note at the same place: not a mistake in the user's code."""
    import re

    from tilelang.diagnostics import Severity

    for code, pattern, lacks in _LIMITATIONS:
        if diag.code == code and re.search(pattern, diag.message):
            diag.code, diag.severity = "TL0804", Severity.INFO
            diag.message = f"the installed tilelang does not compile {lacks} yet ({diag.message})"
            diag.fix = None
            break
    return diag


def pass_configs_of(obj) -> dict:
    """The ``pass_configs`` of a ``@tilelang.jit`` factory (any wrapper that keeps them), as the
    compiler normalises them; ``{}`` for a plain factory."""
    import warnings

    from tilelang.transform.pass_config import normalize

    configs = _wrapped_attr(obj, "pass_configs")
    if not configs:
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # an unknown key: the compile warns, not the checker
        return normalize(configs)


def _wrapped_attr(obj, name: str):
    """``obj.<name>``, or the first wrapped object's (``factory`` / ``__wrapped__``: ``@autotune``
    over ``@tilelang.jit``) that has a value for it; None when none has."""
    for _ in range(8):
        value = getattr(obj, name, None)
        if value is not None and value != {}:
            return value
        inner = getattr(obj, "factory", None) or getattr(obj, "__wrapped__", None)
        if inner is None or inner is obj:
            break
        obj = inner
    return None


def _summary(kernel, arch: str) -> dict:
    from tilelang.analysis.summary import summarize_kernel

    try:
        return summarize_kernel(kernel, arch)
    except Exception as err:  # noqa: BLE001 - hover data are optional; never fail the check
        return {"arch": arch, "error": f"{type(err).__name__}: {err}"}
