"""Resolving a user's target spelling to a CUDA target.

    target = determine_target({"kind": "cuda", "arch": "sm_100f", "code": ["sm_100a", "sm_103a"]},
                              return_object=True)
    with target:
        cubin = tilelang.contrib.nvcc.compile_cuda(src, target_format="fatbin")

Contract:
- ``determine_target(target="auto", return_object=False)``: "auto" is the current
  ``tvm.target.Target`` if one is entered, else the GPU's (``auto_detect_target``); a string
  ("cuda", "sm_90a", "cuda -arch=sm_80"), a dict ``{"kind": "cuda", "arch": ..., "code": [...]}``
  or a ``Target`` is taken as given. Returns the target as a string, or with ``return_object``
  a ``tvm.target.Target``. Anything but a CUDA target is a ValueError.
- ``code`` (optional) lists the exact SM codes to build for (``get_target_code_list`` checks
  them); TVM's Target has no such field, so it is remembered beside the Target object and read
  back with ``target_code(target)`` (what ``contrib.nvcc.compile_cuda`` uses: several codes make
  a fatbin).
"""

from __future__ import annotations

import re
import threading

_CODE = re.compile(r"^sm_[A-Za-z0-9]+$")
_CODE_MSG = 'CUDA target code must be a non-empty list of exact SM code tokens, for example ["sm_100a", "sm_103a"]'
_CODES: list = []          # (Target, [codes]) for targets determine_target built with a code list
_LOCK = threading.Lock()


def auto_detect_target() -> dict:
    """The local GPU's target, ``{"kind": "cuda", "arch": "sm_XX"}`` (sm_90a when none is visible)."""
    from tilelang.engine.lower import normalize_target

    return {"kind": "cuda", "arch": normalize_target("auto")}


def get_target_code_list(target_code) -> list[str]:
    """Validate a target's ``code`` list (``["sm_100a", "sm_103a"]``); None gives []."""
    if target_code is None:
        return []
    if isinstance(target_code, str):
        raise ValueError(_CODE_MSG)
    try:
        codes = list(target_code)
    except TypeError:
        raise ValueError(_CODE_MSG) from None
    if not codes or not all(isinstance(c, str) and _CODE.fullmatch(c) for c in codes):
        raise ValueError(_CODE_MSG)
    return codes


def target_code(target) -> list[str]:
    """The ``code`` list ``determine_target`` was given for ``target`` ([] if none)."""
    if target is None:
        return []
    with _LOCK:
        for known, codes in _CODES:
            if known.same_as(target):
                return list(codes)
    return []


def _from_dict(spec: dict):
    from tvm.target import Target

    spec = dict(spec)
    kind = spec.get("kind", "cuda")
    if kind != "cuda":
        raise ValueError(f"determine_target: unsupported target kind {kind!r}; TileLang here compiles for CUDA GPUs")
    codes = get_target_code_list(spec.pop("code")) if "code" in spec else []
    target = Target(spec)
    if codes:
        with _LOCK:
            _CODES.append((target, codes))
    return target


def determine_target(target="auto", return_object: bool = False):
    """See the module docstring."""
    from tvm.target import Target

    if isinstance(target, str) and target == "auto":
        current = Target.current(allow_none=True)
        resolved = current if current is not None else Target(auto_detect_target())
    elif isinstance(target, Target):
        resolved = target
    elif isinstance(target, dict):
        resolved = _from_dict(target)
    elif isinstance(target, str):
        tokens = target.replace("=", " ").split()
        if not tokens or not (tokens[0] == "cuda" or tokens[0].startswith("sm_")):
            raise ValueError(f"determine_target: unsupported target {target!r}; use 'auto', 'cuda', 'sm_XX' "
                             "or {'kind': 'cuda', 'arch': 'sm_XX'}")
        arch = next((t for t in tokens if t.startswith("sm_")), None)
        resolved = Target({"kind": "cuda", **({"arch": arch} if arch else {})})
    else:
        raise TypeError(f"determine_target: a target is a str, dict or tvm Target, not {type(target).__name__}")
    if str(resolved.kind.name) != "cuda":
        raise ValueError(f"determine_target: unsupported target {resolved}; TileLang here compiles for CUDA GPUs")
    return resolved if return_object else str(resolved)
