"""Names upstream TileLang's TVM fork has and apache-tvm 0.27 spells differently, installed onto
``tvm`` when ``tilelang`` is imported, so that upstream-style code such as

    from tvm import arith, tirx
    analyzer = arith.Analyzer(); isinstance(e, tirx.PrimExpr)

runs unchanged. Contract: ``install()`` only *adds* names that are missing (it never replaces
one apache-tvm defines), is idempotent, and each name is an alias of the 0.27 object that does
the same job (no wrappers that change behaviour), except where noted:

=============================================  ===============================================
upstream name                                  apache-tvm 0.27 object
=============================================  ===============================================
``tvm.arith`` (``Analyzer``, ``ConstIntBound``) ``tvm.sym`` (the module was renamed)
``tvm.tir``                                     ``tvm.tirx``
``tirx.PrimExpr``, ``tvm.ir.PrimExpr``           ``tvm.ir.Expr`` (base of every TIR expression)
``tirx.StringImm``                              ``tvm.ir.StringImm``
``tirx.op.Op``                                  ``tvm.ir.Op``
``tirx.stmt_functor.post_order_visit(n, f)``    ``tvm_ffi.structural_walk``, ``f`` on every
                                                statement and expression, children first
``tirx.stmt_functor.substitute(n, vmap)``       ``tilelang.tir_utils.substitute`` (expressions)
                                                / ``substitute_stmt`` (statements)
``tirx.stmt_functor.ir_transform(n, pre, post)`` a Python rebuild of statements and expressions
                                                (``tir_utils.ir_transform``), with upstream's contract
``tirx.transform.Simplify``                     ``tirx.transform.StmtSimplify``, run as a pass named
                                                ``tirx.Simplify`` (the fork's name, which pass
                                                instruments report); the inner pass runs in a
                                                PassContext with the same config, uninstrumented
``tirx.transform.AnnotateDeviceRegions``       a pass (``tirx.AnnotateDeviceRegions``) returning
                                                the module unchanged: 0.27's ``SplitHostDevice``
                                                finds the device regions (``thread_extent``) itself
``tvm.ir.structural_equal`` / ``_hash``         ``tvm_ffi.structural_equal`` / ``_hash``
``tvm.TVMError``, ``tvm.error.TVMError``        ``RuntimeError`` (what TVM's FFI errors derive from)
``tvm.testing.requires_package``                ``tilelang.testing.requires_package`` (added by
                                                ``import tilelang.testing``)
``PrimFunc.buffer_map``                         ``{param: param}`` for the buffer parameters
                                                (0.27's parameters are the buffers themselves)
``PrimFunc(..., buffer_map=m)``                 a wrapper of 0.27's constructor (noted exception):
                                                a parameter ``m`` gives a buffer for becomes it
``tirx.BufferLoad``                             builds as 0.27's function does; ``isinstance``
                                                checks against ``tvm.ir.TensorLoad``
``PassContext(config={"tl.*": ...})``           apache-tvm rejects keys no C++ pass registered;
                                                those (``tl.*``, the fork's ``tir.*``) are taken
                                                out before TVM sees them and apply, while the
                                                context is entered, to the kernels compiled
                                                inside it (``tl_configs()``; a compile's own
                                                ``pass_configs`` win)
``tirx.Call``                                   ``tvm.ir.Call``, through a small class: an
                                                ``isinstance`` check is one against ``ir.Call``;
                                                ``tirx.Call(dtype, op, args, span=None)`` (the
                                                fork's argument order) builds
                                                ``ir.Call(op, args, ret_ty=dtype, span=span)``
=============================================  ===============================================
"""

from __future__ import annotations

import sys
import threading
import types

from tilelang import knobs

__all__ = ["install"]


def _post_order_visit(node, fvisit) -> None:
    """Call ``fvisit`` on every statement and expression under ``node`` (itself included),
    children first (upstream's signature)."""
    import tvm_ffi
    from tvm import ir, tirx

    def visit(value):
        if isinstance(value, (tirx.Stmt, ir.Expr)):
            fvisit(value)

    tvm_ffi.structural_walk(node, visit, order="post")


def _substitute(node, vmap):
    """Replace variables in an expression or a statement (``vmap``: Var -> expression)."""
    from tvm import tirx

    from tilelang import tir_utils

    if isinstance(node, tirx.Stmt):
        return tir_utils.substitute_stmt(node, dict(vmap))
    return tir_utils.substitute(node, dict(vmap))


def _add(obj, name: str, value) -> None:
    if not hasattr(obj, name):
        setattr(obj, name, value)


def _alias_module(name: str, module) -> None:
    sys.modules.setdefault(name, module)


def _stmt_functor():
    from tilelang import tir_utils

    module = types.ModuleType("tvm.tirx.stmt_functor", "upstream's tvm.tirx.stmt_functor (see tilelang.tvm_compat)")
    module.post_order_visit = _post_order_visit
    module.substitute = _substitute
    module.ir_transform = tir_utils.ir_transform
    return module


def _simplify():
    """``tirx.transform.Simplify()``: 0.27's ``StmtSimplify`` under the fork's pass name."""
    import tvm
    from tvm.ir.transform import PassContext

    @tvm.transform.module_pass(opt_level=0, name="tirx.Simplify")
    def simplify(mod, _ctx):
        cur = PassContext.current()
        with PassContext(opt_level=cur.opt_level, required_pass=list(cur.required_pass),
                         disabled_pass=list(cur.disabled_pass), config=dict(cur.config)):
            return tvm.tirx.transform.StmtSimplify()(mod)

    return simplify


def _annotate_device_regions():
    """``tirx.transform.AnnotateDeviceRegions()``: nothing left to annotate in 0.27 (see above)."""
    import tvm

    @tvm.transform.module_pass(opt_level=0, name="tirx.AnnotateDeviceRegions")
    def annotate_device_regions(mod, _ctx):
        return mod

    return annotate_device_regions


def _buffer_map(func) -> dict:
    from tvm import tirx

    return {p: p for p in func.params if tirx.is_buffer_var(p)}


def _param(x):
    """A parameter as 0.27 takes it: ``buf.data`` (a fresh ``tirx.buffer_data(buf)`` call each
    time in 0.27, where the fork has one pointer Var) stands for ``buf``; anything else as is."""
    from tvm import ir

    if isinstance(x, ir.Call) and getattr(x.op, "name", "") == "tirx.buffer_data" and len(x.args) == 1:
        return x.args[0]
    return x


def _accept_buffer_map(cls) -> None:
    """``PrimFunc(params, body, ..., buffer_map={param: buffer})`` (the fork's keyword): 0.27's
    parameters are the buffers themselves, so a parameter the map gives a buffer for is replaced
    by that buffer (``buffer_map`` of a 0.27 function maps each buffer to itself); a parameter
    written ``buf.data`` (the fork's pointer Var) stands for ``buf``."""
    init = cls.__init__
    if getattr(init, "_tl_buffer_map", False):
        return

    def __init__(self, params, body, *args, buffer_map=None, **kwargs):
        params = [_param(p) for p in params]
        if buffer_map:
            params = [next((b for k, b in buffer_map.items() if _param(k).same_as(p)), p) for p in params]
        init(self, params, body, *args, **kwargs)

    __init__._tl_buffer_map = True
    cls.__init__ = __init__


class _CallMeta(type):
    def __instancecheck__(cls, obj):
        from tvm import ir

        return isinstance(obj, ir.Call)

    def __subclasscheck__(cls, sub):
        from tvm import ir

        return issubclass(sub, ir.Call)

    def __call__(cls, dtype, op, args, span=None):
        from tvm import ir

        if isinstance(op, str):
            op = ir.Op.get(op)
        return ir.Call(op, list(args), span=span, ret_ty=str(dtype))


class Call(metaclass=_CallMeta):
    """``tirx.Call`` as upstream's TVM fork has it (see the module docstring)."""


class _BufferLoadMeta(type):
    build = None   # 0.27's tirx.BufferLoad (a function building an ir.TensorLoad)

    def __instancecheck__(cls, obj):
        from tvm import ir

        return isinstance(obj, ir.TensorLoad)

    def __subclasscheck__(cls, sub):
        from tvm import ir

        return issubclass(sub, ir.TensorLoad)

    def __call__(cls, *args, **kwargs):
        return _BufferLoadMeta.build(*args, **kwargs)


class BufferLoad(metaclass=_BufferLoadMeta):
    """``tirx.BufferLoad`` usable in ``isinstance`` (an ``ir.TensorLoad``), built as 0.27 builds it."""


# handle of a PassContext -> (the object, kept alive so that its handle is not reused; its keys TVM
# does not know), from construction until it is left for the last time
_TL_CONFIGS: dict = {}
_ENTERED = threading.local()      # .stack: (handle, those keys) of the entered contexts, outermost first


def tl_configs() -> dict:
    """The pass configs apache-tvm does not register (``tl.*`` and friends) of the PassContexts
    entered on this thread, inner ones winning."""
    merged = {}
    for _, configs in getattr(_ENTERED, "stack", ()):
        merged.update(configs)
    return merged


def tl_configs_key() -> tuple:
    """``tl_configs()`` as a hashable key, plus the text of ``TILELANG_PASS_CONFIGS`` when set
    (both go under a kernel's own configs: ``jit.with_context_configs``), ``()`` outside any
    PassContext and without the variable (cheap: the launch path of eager kernels asks on every
    call)."""
    env = knobs.raw("TILELANG_PASS_CONFIGS")
    env = (("TILELANG_PASS_CONFIGS", env),) if env else ()
    stack = getattr(_ENTERED, "stack", ())
    if not stack:
        return env
    return tuple(sorted((str(k), repr(v)) for k, v in tl_configs().items())) + env


_REGISTERED: set = set()


def _tvm_config_names(PassContext) -> set:
    """The config keys apache-tvm's passes registered (its PassContext rejects any other key)."""
    if not _REGISTERED:
        _REGISTERED.update(str(k) for k in PassContext.list_configs())
    return _REGISTERED


def _install_pass_context_configs(PassContext) -> None:
    if getattr(PassContext, "_tilelang_configs", False):
        return
    init, enter, exit_ = PassContext.__init__, PassContext.__enter__, PassContext.__exit__

    def __init__(self, opt_level=2, required_pass=None, disabled_pass=None, instruments=None, config=None):
        ours = {}
        if config:
            config = dict(config)
            registered = _tvm_config_names(PassContext)
            ours = {str(getattr(k, "value", k)): config.pop(k)
                    for k in [k for k in config if str(getattr(k, "value", k)) not in registered]}
        init(self, opt_level, required_pass, disabled_pass, instruments, config or None)
        if ours:
            _TL_CONFIGS[self.__chandle__()] = (self, ours)

    def __enter__(self):
        result = enter(self)
        if not hasattr(_ENTERED, "stack"):
            _ENTERED.stack = []
        handle = self.__chandle__()
        _ENTERED.stack.append((handle, _TL_CONFIGS.get(handle, (None, {}))[1]))
        return result

    def __exit__(self, ptype, value, trace):
        stack = getattr(_ENTERED, "stack", None)
        if stack:
            handle, _ = stack.pop()
            if all(h != handle for h, _ in stack):
                _TL_CONFIGS.pop(handle, None)
        return exit_(self, ptype, value, trace)

    PassContext.__init__, PassContext.__enter__, PassContext.__exit__ = __init__, __enter__, __exit__
    tvm_config = PassContext.__dict__.get("config")
    if tvm_config is not None and hasattr(tvm_config, "__get__"):
        def config(self):
            """TVM's config, with the keys this context holds for TileLang (a plain dict then)."""
            base = tvm_config.__get__(self, type(self))
            ours = _TL_CONFIGS.get(self.__chandle__(), (None, None))[1]
            return base if not ours else {**dict(base.items()), **ours}

        PassContext.config = property(config)
    PassContext._tilelang_configs = True


def _safe_repr(cls) -> None:
    """``repr`` of a node whose constructor raised (its handle still null) names its type: the
    script printer dereferenced the null handle and killed the process, and pytest's traceback
    reprs ``self`` of every frame of a failing constructor call."""
    rep = cls.__repr__
    if getattr(rep, "_tl_safe", False):
        return

    def __repr__(self):
        if not self.__chandle__():
            return f"<{type(self).__name__} (not constructed)>"
        return rep(self)

    __repr__._tl_safe = True
    cls.__repr__ = __repr__


def install() -> None:
    """Add the upstream names to ``tvm`` (see the module docstring)."""
    import tvm
    import tvm.sym
    import tvm.tirx.op
    import tvm.tirx.transform
    import tvm_ffi
    from tvm import ir, tirx

    _add(tvm, "arith", tvm.sym)
    _alias_module("tvm.arith", tvm.sym)
    _add(tvm, "tir", tirx)
    _alias_module("tvm.tir", tirx)
    _add(tirx, "PrimExpr", ir.Expr)
    _add(ir, "PrimExpr", ir.Expr)      # (the fork has it in tvm.ir too: TileOPs' trace records)
    _add(tirx, "StringImm", ir.StringImm)
    _add(tirx, "Call", Call)
    if not isinstance(tirx.BufferLoad, type):   # a function in 0.27: isinstance checks need a class
        _BufferLoadMeta.build = tirx.BufferLoad
        tirx.BufferLoad = BufferLoad
    _add(tirx.PrimFunc, "buffer_map", property(_buffer_map))
    _accept_buffer_map(tirx.PrimFunc)
    _add(tvm.tirx.op, "Op", ir.Op)
    if not hasattr(tirx, "stmt_functor"):
        tirx.stmt_functor = _stmt_functor()
        _alias_module("tvm.tirx.stmt_functor", tirx.stmt_functor)
    _add(tvm.tirx.transform, "Simplify", _simplify)
    _add(tvm.tirx.transform, "AnnotateDeviceRegions", _annotate_device_regions)
    _add(ir, "structural_equal", tvm_ffi.structural_equal)
    _add(ir, "structural_hash", tvm_ffi.structural_hash)
    _add(tvm, "TVMError", RuntimeError)
    _add(tvm.error, "TVMError", RuntimeError)
    _install_pass_context_configs(ir.transform.PassContext)
    _safe_repr(ir.base.Node)

