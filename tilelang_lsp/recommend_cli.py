"""``tilelang-check --recommend PATH...``: the carver's tile configurations for kernel factories
whose tile sizes are parameters, with the predicted time and gain.

Contract: for every ``@tilelang.jit`` / ``@tilelang.autotune`` factory (or plain factory the
checker binds; eager-style ``T.const`` factories too) with at least one tile parameter
(``tilelang.carver.recommend.tile_params``) among its parameters, the file is loaded the way
the checker's worker loads it (``worker_build.load_module``, in this process), the factory's
values are those the checker would build it with (its first binding: ``# tilelang: bind``
pragma, ``[tool.tilelang.check]``, a call site, a traced call, the defaults, or the first
``@autotune`` config), and ``tilelang.carver.recommend.recommend_factory``
ranks configurations on ``--target`` (default sm_90a). Text output, per factory::

    PATH:LINE: FACTORY: current block_M=128 block_N=128 ... (from <origin>): predicted 2.210 ms
      1. block_M=128 block_N=256 ...: predicted 1.672 ms, 1.32x faster
      model: <what ranked them>

or ``PATH:LINE: FACTORY: no recommendation: <why>``. ``--format json`` prints a list of
``{"path", "line", "factory", "values_from", "current": {"config", "predicted_ms", "why"},
"recommendations": [{"config", "predicted_ms", "gain"}], "model", "reason"}``. Nothing is compiled
with nvcc and no GPU is needed. Exit status 0, or 4 for a PATH that matches nothing (as the checker).
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path


def _fmt(cfg: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def recommend_files(files, target: str, topk: int = 3, fmt: str = "text") -> int:
    from tilelang.carver.recommend import tile_params

    results = []
    for f in files:
        results += _recommend_file(str(Path(f).resolve()), target, topk, tile_params)
    if fmt == "json":
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        print(_text(r))
    if not results:
        print("no kernel factory with tile parameters (block_M, block_N, block_K, num_stages, threads) found")
    return 0


def _text(r: dict) -> str:
    where = f"{_display(r['path'])}:{r['line']}: {r['factory']}"
    cur = r.get("current")
    if r.get("reason") and not r.get("recommendations") and r.get("model") is None:
        head = f"{where}: no recommendation: {r['reason']}"
        if cur and cur.get("config"):
            head += f" (current {_fmt(cur['config'])})"
        return head
    lines = []
    head = f"{where}: current {_fmt(cur['config'])}"
    if r.get("values_from"):
        head += f" ({r['values_from']})"
    head += (f": predicted {cur['predicted_ms']:.3f} ms" if cur.get("predicted_ms") is not None
             else f": no estimate ({cur.get('why') or 'unknown'})")
    lines.append(head)
    for i, c in enumerate(r["recommendations"], 1):
        gain = f", {c['gain']:.2f}x faster" if c.get("gain") else ""
        lines.append(f"  {i}. {_fmt(c['config'])}: predicted {c['predicted_ms']:.3f} ms{gain}")
    if not r["recommendations"]:
        lines.append("  (no better configuration predicted)")
    lines.append(f"  model: {r['model']} on {r['target']}")
    return "\n".join(lines)


def _display(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _recommend_file(path: str, target: str, topk: int, tile_params) -> list:
    from tilelang.analysis.source import parse_file
    from tilelang_lsp import worker_build
    from tilelang_lsp.binding import load_config, plan_file

    try:
        text = Path(path).read_text()
        model = parse_file(path, text)
    except (OSError, SyntaxError, UnicodeDecodeError) as err:
        return [{"path": path, "line": 1, "factory": "-", "reason": f"cannot read the file: {err}", "model": None}]
    plan = plan_file(model, load_config(Path(path).parent))
    wanted = [fp for fp in plan.factories if not fp.factory.is_prim_func and not fp.factory.star_args
              and tile_params([p.name for p in fp.factory.params])]
    if not wanted:
        return []
    modules = {}
    loaded = worker_build.load_module({"path": path, "text": text}, modules)
    module = modules.get(path)
    out = []
    for fp in wanted:
        name, line = fp.factory.name, fp.factory.node.lineno
        entry = {"path": path, "line": line, "factory": name, "target": target, "model": None}
        if module is None or name not in module.__dict__:
            problems = "; ".join(d.get("message", "") for d in loaded.get("diagnostics", []) if isinstance(d, dict))
            entry["reason"] = f"the file does not load{': ' + problems if problems else ''}"
            out.append(entry)
            continue
        if not fp.bindings:
            entry["reason"] = f"no values for {', '.join(fp.unbound) or 'its parameters'} (bind them with a call, " \
                              f"defaults or a '# tilelang: bind' pragma)"
            out.append(entry)
            continue
        out.append(_recommend_one(module, fp, fp.bindings[0], entry, target, topk))
    return out


def _recommend_one(module, fp, binding, entry: dict, target: str, topk: int) -> dict:
    from tilelang.carver.recommend import recommend_factory
    from tilelang_lsp import worker_build

    namespace = module.__dict__
    obj = namespace[fp.factory.name]
    entry["values_from"] = f"from {binding.origin}"
    try:
        args = [eval(t, namespace) for t in binding.args]  # noqa: S307 - the user's own source text
        kwargs = {k: eval(t, namespace) for k, t in binding.kwargs}  # noqa: S307
        function = worker_build._factory_function(obj)
        eager = worker_build._eager_of(obj)
        if binding.fill:
            worker_build._fill_from_autotune(obj, function, eager, args, kwargs)
        sig = inspect.signature(function)
        if eager is not None:   # T.const sizes are keywords the signature does not name; tensors stay positional
            values = {n: p.default for n, p in sig.parameters.items() if p.default is not p.empty}
            values.update(kwargs)
            params = list(sig.parameters) + [k for k in kwargs if k not in sig.parameters]
        else:
            bound = sig.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            values, args = dict(bound.arguments), []
            params = list(sig.parameters)
    except Exception as err:  # noqa: BLE001 - the binding does not evaluate here
        entry["reason"] = f"its values do not evaluate: {type(err).__name__}: {err}"
        return entry

    def build(**kw):
        return eager.get_prim_func(*args, **kw) if eager is not None else function(*args, **kw)

    with worker_build._answer_device_queries(target):
        rec = recommend_factory(build, params, values, arch=target, topk=topk)
    cur = rec.current
    entry["current"] = None if cur is None else {"config": cur.config, "predicted_ms": cur.ms, "why": cur.why}
    if rec.kind is None:
        entry["reason"] = rec.reason
        return entry
    entry["model"] = rec.reason
    entry["recommendations"] = [{"config": c.config, "predicted_ms": c.ms, "gain": c.gain} for c in rec.candidates]
    return entry


__all__ = ["recommend_files"]
