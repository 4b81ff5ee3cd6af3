"""The configs of a tuning run: expanded, checked against the factory, merged with the call.

Contract:
- ``expand(configs)``: a list or tuple of dicts is taken as given (each copied); a dict maps
  parameter names to lists of values and stands for their cartesian product in key order
  (a value that is not a list or tuple is a single choice).  Anything else is a
  ``ConfigTypeError`` (a TypeError) saying what is accepted.
- ``resolve(configs, signature, args, kwargs, name) -> (fixed, configs)``: calls ``configs``
  with the factory's arguments when it is callable, expands it, and checks that every key
  names a parameter of the factory (unless it takes ``**kwargs``): an unknown key is a
  ``ConfigError`` (a ValueError) naming the key, the config and the factory's parameters.  ``fixed`` holds the
  arguments the caller passed (positionally or by keyword); they are not tuned, so their
  keys are dropped from every config, and configs that then coincide are merged.  A keyword
  argument named in ``do_not_specialize`` is tuned over all the same, each config's value
  winning over it (upstream keys its tuning runs without those names, so it tunes them).  A config
  that leaves a required parameter unset is a ``ConfigTypeError``; an empty list is a
  ``ConfigError``.
- ``call_args(signature, fixed, config) -> (args, kwargs)``: how to call the factory for
  one config (positional-only and ``*args``/``**kwargs`` parameters included).
- ``describe(config)``: ``block_M=64, threads=128`` (``defaults`` for an empty config).
- A config may also hold ``pass_configs`` (a dict, upstream's per-config compile option): it is
  not a factory argument (``call_args`` leaves it out, the name check allows it) and
  ``compile_overrides(config)`` returns it, to be merged over the run's own pass configs.

Nothing here imports tvm or torch, and nothing needs a GPU.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any, Callable

Config = dict[str, Any]

# Config keys that steer the compile of a config rather than the factory call.
COMPILE_KEYS = ("pass_configs",)


class ConfigError(ValueError):
    """A config names something the factory does not take, or there are no configs."""


class ConfigTypeError(TypeError):
    """``configs`` has the wrong shape, or a config leaves a required argument unset."""


def expand(configs) -> list[Config]:
    """A list of config dicts from a list of dicts or a dict of value lists."""
    if isinstance(configs, dict):
        names = list(configs)
        choices = [v if isinstance(v, (list, tuple)) else [v] for v in configs.values()]
        return [dict(zip(names, combo)) for combo in itertools.product(*choices)]
    if isinstance(configs, (list, tuple)):
        bad = [c for c in configs if not isinstance(c, dict)]
        if bad:
            raise ConfigTypeError(f"autotune configs must be dicts of keyword arguments; got {type(bad[0]).__name__} "
                            f"{bad[0]!r}")
        return [dict(c) for c in configs]
    raise ConfigTypeError("autotune configs must be a list of dicts, a dict of value lists, or a callable "
                    f"returning one of these; got {type(configs).__name__}")


def resolve(configs: list | dict | Callable, signature: inspect.Signature, args: tuple, kwargs: dict,
            name: str, do_not_specialize=()) -> tuple[dict, list[Config]]:
    """The caller's fixed arguments and the configs left to try (see the module docstring)."""
    fixed = dict(signature.bind_partial(*args, **kwargs).arguments)
    given = set(fixed)
    for pname, p in signature.parameters.items():
        if p.kind is p.VAR_KEYWORD:
            given |= set(fixed.get(pname, {}))
    # upstream's rule: a keyword argument named in do_not_specialize is tuned over, the config's
    # value winning (TileOPs passes its default config so and reads the winner from .config)
    given -= set(kwargs) & set(do_not_specialize or ())
    if callable(configs):
        configs = configs(*args, **kwargs)
    expanded = expand(configs)
    _check_names(expanded, signature, name)
    out: list[Config] = []
    seen: set[str] = set()
    for i, config in enumerate(expanded):
        tuned = {k: v for k, v in config.items() if k not in given}
        call, call_kw = call_args(signature, fixed, tuned)
        try:
            signature.bind(*call, **call_kw)
        except TypeError as e:
            raise ConfigTypeError(f"autotune {name}: config #{i} {{{describe(config)}}} cannot be used: {e}") from None
        marker = repr(sorted(tuned.items(), key=lambda kv: kv[0]))
        if marker not in seen:
            seen.add(marker)
            out.append(tuned)
    if not out:
        raise ConfigError(f"autotune {name}: the config list is empty; give at least one config")
    return fixed, out


def _check_names(configs: list[Config], signature: inspect.Signature, name: str) -> None:
    params = signature.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    tunable = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    for i, config in enumerate(configs):
        extra = config.get("pass_configs")
        if "pass_configs" not in tunable and extra is not None and not isinstance(extra, dict):
            raise ConfigTypeError(f"autotune {name}: config #{i} sets pass_configs to {type(extra).__name__}; "
                                  "it must be a dict of pass config keys")
        for key in config:
            if key not in tunable and key not in COMPILE_KEYS:
                raise ConfigError(f"autotune {name}: config #{i} {{{describe(config)}}} sets {key!r}, which is not "
                                 f"a parameter of {name}({', '.join(tunable)})")


def compile_overrides(config: Config, signature: inspect.Signature | None = None) -> dict:
    """The ``pass_configs`` a config adds over the run's own (empty when it sets none, or when
    ``pass_configs`` is a parameter of the factory, which then receives it)."""
    if signature is not None and "pass_configs" in signature.parameters:
        return {}
    return dict(config.get("pass_configs") or {})


def call_args(signature: inspect.Signature, fixed: dict, config: Config) -> tuple[tuple, dict]:
    """Positional and keyword arguments calling the factory with ``fixed`` and ``config``."""
    compile_only = [k for k in COMPILE_KEYS if k not in signature.parameters]
    merged = {k: v for k, v in {**fixed, **config}.items() if k not in compile_only}
    ordered: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    var_kw = None
    for pname, p in signature.parameters.items():
        if p.kind is p.VAR_KEYWORD:
            var_kw = pname
        elif pname in merged:
            ordered[pname] = merged[pname]
    if var_kw is not None:
        extra = {k: v for k, v in merged.items() if k not in signature.parameters}
        extra.update(merged.get(var_kw, {}))
        ordered[var_kw] = extra
    bound = inspect.BoundArguments(signature, ordered)
    return bound.args, bound.kwargs


def describe(config: Config) -> str:
    """``block_M=64, threads=128``; ``defaults`` for an empty config."""
    return ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in config.items()) or "defaults"
