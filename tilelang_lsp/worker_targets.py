"""Runs in the worker process: building and checking kernels written for targets this TileLang
does not compile (sm_100 tcgen05 / tensor memory, AMD hip), for the checks that do not need the
lowering.

The compiler refuses these kernels (``T.tcgen05_gemm`` raises where it is called; a hip target
string does not parse); the checker's ``build`` runs the factory inside ``building()``, where

- the sm_100 declarations build IR the analyses read (``tilelang.language.tmem.for_checks``: a
  tensor-memory tile is an accumulator tile, ``T.tcgen05_gemm`` a gemm with shapes and types to
  check, ``T.tcgen05_mma_arrive`` an mbarrier arrival), and
- ``tvm.target.Target`` takes TVM's old command-line spelling (``"hip -mcpu=gfx950"``,
  ``"cuda -arch=sm_100a"``) that the user's code builds, a hip target as TVM's ``rocm`` kind.

``Built`` (what ``building()`` yields) records what the build used; ``kernel_target`` picks the
target the checks use: the one the factory's ``@tilelang.jit(target=...)`` names, else sm_100a
for a kernel that uses tensor memory or tcgen05, else the checker's ``--target``.
``after_checks`` drops the findings that need what was skipped (tensor-memory tiles are not
registers and their layouts are tcgen05's; a hip kernel has no register model here, and its
shared memory is checked against the LDS of its processor instead of a CUDA budget) and adds the
kernel's own facts (TL0501 for tensor memory past its 512 columns, or shared memory past the
LDS). The checks of a hip kernel otherwise run for the checker's ``--target``. ``skipped_note`` is the
one line that says which checks were skipped and why (the ``--explain`` line and one TL0804 per
file).
"""

from __future__ import annotations

import contextlib
import math
import re

TMEM_COLUMNS = 512           # sm_100 tensor memory: 128 lanes x 512 columns of 32 bits per SM
SM100 = "sm_100a"
_ARCH = re.compile(r"(?:-arch=|\"arch\"\s*:\s*\"|'arch':\s*')(sm_\d+[af]?)")


class Built:
    """What one build under ``building()`` used: tensor-memory tiles (name, shape, dtype) and the
    hip processor the code asked for (``gfx950``; ``""`` for a plain ``hip``), if any."""

    def __init__(self):
        self.tmem = []
        self.hip = None
        self.target = None    # (kind, arch or processor) the factory names, set by kernel_target


@contextlib.contextmanager
def building():
    """The context of one checker build (see the module docstring); yields a ``Built``."""
    from tvm.target import Target

    from tilelang.language.tmem import for_checks

    built = Built()
    original = Target.__init__

    def init(self, target, host=None):
        if isinstance(target, str) and " -" in target.strip():
            config = _cli_target(target)
            if config is not None:
                if config["kind"] == "rocm":
                    built.hip = config.get("mcpu", "")
                target = config
        return original(self, target, host)

    Target.__init__ = init
    try:
        with for_checks() as tmem:
            built.tmem = tmem
            yield built
    finally:
        Target.__init__ = original


def _cli_target(text: str) -> dict | None:
    """``"hip -mcpu=gfx950"`` -> ``{"kind": "rocm", "mcpu": "gfx950"}``; None for other forms."""
    parts = text.split()
    kind = {"hip": "rocm"}.get(parts[0], parts[0])
    config = {"kind": kind}
    for part in parts[1:]:
        found = re.fullmatch(r"-{1,2}([\w-]+)=(\S+)", part)
        if found is None:
            return None
        config[found.group(1)] = found.group(2)
    return config


def named_target(target) -> tuple | None:
    """(kind, arch) a ``@tilelang.jit(target=...)`` value names: ``("cuda", "sm_100a")``,
    ``("hip", "gfx950")``; None for ``auto``, a plain ``cuda`` or nothing."""
    if target is None:
        return None
    text = str(target) if not isinstance(target, dict) else repr(target)
    low = text.strip().lower()
    if low.startswith(("hip", "rocm")) or '"rocm"' in low or "'rocm'" in low or "'hip'" in low:
        found = re.search(r"gfx\w+", low)
        return "hip", found.group(0) if found else ""
    found = _ARCH.search(text)
    if found is not None:
        return "cuda", found.group(1)
    return None


def kernel_target(declared, built: Built, func, default: str):
    """The ``sm_XX`` the checks use for a kernel built under ``building()`` (module docstring);
    ``declared``: the factory's ``@tilelang.jit(target=...)`` value, or None."""
    named = named_target(declared)
    if named is None and built.hip is not None:
        named = ("hip", built.hip)
    built.target = named
    if named is not None and named[0] == "cuda":
        return named[1]
    if named is None and (built.tmem or _uses_tcgen05(func)):
        built.target = ("cuda", SM100)
        return SM100
    return default


def _uses_tcgen05(func) -> bool:
    from tilelang.tir_utils import walk_stmts
    from tilelang.transform.kernel import op_name

    found = []
    walk_stmts(func.body, lambda s: found.append(s) if op_name(s) == "tcgen05_gemm" else None)
    return bool(found)


def foreign(built: Built) -> bool:
    """Whether the kernel is one this TileLang does not compile (tensor memory, tcgen05, hip)."""
    return bool(built.tmem) or built.target is not None and (
        built.target[0] == "hip" or _cc(built.target[1]) >= 100)


def _cc(arch: str) -> int:
    found = re.match(r"sm_(\d+)", arch or "")
    return int(found.group(1)) if found else 0


# Codes that need the unsupported lowering's model: registers (tensor-memory tiles are not
# registers; hip's register file is not modelled), initialisation of a tensor-memory tile (the
# asynchronous tcgen05 MMA of another warp role writes it, ordered by mbarriers the data flow does
# not follow), the layouts of tensor-memory tiles (TL02xx: tcgen05.ld/st shapes, not register
# fragments) and, for hip, the shared-memory budget.
_TMEM_DROPPED = ("TL0502", "TL0401")
_HIP_DROPPED = ("TL0501", "TL0502")


def after_checks(diagnostics: list, built: Built, func) -> list:
    """The checks' diagnostic dicts with the findings ``building()``'s kernels cannot have dropped,
    plus the tensor-memory capacity check (TL0501)."""
    names = {buf.name for buf, _, _ in built.tmem}
    hip = built.target is not None and built.target[0] == "hip"
    kept = []
    for d in diagnostics:
        if hip and d.get("code") in _HIP_DROPPED:
            continue
        code = d.get("code", "")
        if (code in _TMEM_DROPPED or code.startswith("TL02")) and names and \
                any(f"'{n}'" in d.get("message", "") for n in names):
            continue
        kept.append(d)
    kept += _tmem_capacity(built, func)
    if hip:
        kept += _lds_budget(func, built.target[1])
    elif any(d.get("code") == "TL0501" and "shared memory" in d.get("message", "") for d in kept):
        usage = (_shared_usage(func) or (None, None))[0]
        arch = built.target[1] if built.target is not None else SM100
        if usage and sum(size * n for _, size, n in usage) <= _smem_limit(arch):
            # only our sm_90a placement's padding goes past the budget; sm_100's is not ours to model
            kept = [d for d in kept if not (d.get("code") == "TL0501" and "shared memory" in d.get("message", ""))]
    return kept


def _smem_limit(arch: str) -> int:
    from tilelang import targets

    return targets.smem_per_block(arch)


def _shared_usage(func):
    """``analysis.resources.shared_usage`` of ``func`` ((buffer, bytes, stages) per shared
    buffer), with the ``Kernel`` it needs; None when the kernel analysis fails."""
    from tilelang.analysis.kernel import Kernel
    from tilelang.analysis.report import CheckContext
    from tilelang.analysis.resources import shared_usage
    from tilelang.transform.kernel import analyze_kernel

    try:
        info = analyze_kernel(func)
    except Exception:  # noqa: BLE001 - the checks reported it already
        return None
    k = Kernel.build(func, info, "sm_80", CheckContext())
    return shared_usage(k), k


# LDS (shared memory) one workgroup may use, by AMD processor; CDNA3 and older parts: 64 KiB.
_LDS_BYTES = {"gfx950": 160 * 1024}


def _lds_budget(func, processor: str) -> list:
    """TL0501 when a hip kernel's shared buffers (pipeline stages and reuse as the compiler
    places them) exceed the processor's LDS."""
    from tilelang.analysis.resources import planned_smem
    from tilelang.diagnostics import Diagnostic, Note

    usage, k = _shared_usage(func) or (None, None)
    if not usage:
        return []
    total, _ = planned_smem(k, usage)
    limit = _LDS_BYTES.get(processor, 64 * 1024)
    if total <= limit:
        return []
    usage.sort(key=lambda u: -u[1] * u[2])
    notes = [Note(f"'{buf.name}' {size * n} bytes" + (f" ({n} pipeline stages)" if n > 1 else ""),
                  _alloc_span(func, buf.name)) for buf, size, n in usage]
    where = f"hip {processor}" if processor else "hip"
    diag = Diagnostic.from_code(
        "TL0501", f"the kernel needs {total} bytes of shared memory (LDS) per workgroup, but {where} allows "
        f"{limit}: use smaller tiles or fewer pipeline stages", _alloc_span(func, usage[0][0].name), notes=notes)
    return [diag.to_dict()]


def _tmem_capacity(built: Built, func) -> list:
    """TL0501 when the kernel's tensor-memory tiles need more than the SM's 512 columns."""
    from tilelang.diagnostics import Diagnostic, Note, Span
    from tilelang.tir_utils import const_int

    if not built.tmem:
        return []
    used, parts = 0, []
    for buf, shape, dtype in built.tmem:
        name = buf.name
        dims = [const_int(s) if not isinstance(s, int) else s for s in shape]
        if None in dims:
            return []
        bits = int(re.sub(r"\D", "", dtype) or 32)
        columns = math.ceil(dims[-1] * bits / 32) * math.prod(dims[:-2])
        used += columns
        parts.append(f"'{name}' {'x'.join(map(str, dims))} {dtype}: {columns} columns")
    if used <= TMEM_COLUMNS:
        return []
    span = _alloc_span(func, built.tmem[0][0].name)
    diag = Diagnostic.from_code(
        "TL0501", f"the kernel's tensor-memory tiles need {used} columns, more than the {TMEM_COLUMNS} of "
        f"an sm_100 SM (128 lanes x 512 columns of 32 bits)", span,
        notes=[Note("; ".join(parts))])
    return [diag.to_dict()]


def _alloc_span(func, name: str):
    from tvm import tirx

    from tilelang.diagnostics import Span
    from tilelang.tir_utils import walk_stmts

    found = []
    walk_stmts(func.body, lambda s: found.append(s) if isinstance(s, tirx.AllocBuffer) and s.buffer.name == name
               and getattr(s, "span", None) is not None else None)
    return Span.from_tvm(found[0].span) if found else None


def skipped_note(built: Built) -> str | None:
    """The line that says what was checked and what skipped for a kernel of a target this TileLang
    does not compile; None for an ordinary kernel."""
    if not foreign(built):
        return None
    if built.target is not None and built.target[0] == "hip":
        where = f"hip ({built.target[1]})" if built.target[1] else "hip"
        return (f"target {where} is not compiled by this TileLang: checked without its lowering, shared memory "
                f"against the LDS of the processor; skipped the register budget and the CUDA-specific "
                f"shared-memory carve-out")
    arch = built.target[1] if built.target is not None else SM100
    return (f"target {arch} (tcgen05 / tensor memory) is not compiled by this TileLang: checked without its "
            f"lowering (tensor-memory tiles as accumulator tiles, T.tcgen05_gemm as a gemm); skipped the "
            f"register count and initialisation of tensor-memory tiles and the tcgen05 instruction, type, layout and "
            f"warp checks")


def finish(reply: dict, built: Built, func, path: str) -> None:
    """Complete a ``build`` reply for a kernel built under ``building()``: the findings
    ``after_checks`` keeps, ``"skipped"`` (``skipped_note``) and its TL0804 note on line 1 (the
    same for every kernel of the file, so one per file survives deduplication)."""
    from tilelang.diagnostics import Diagnostic, Span

    note = skipped_note(built)
    if note is None:
        return
    reply["diagnostics"] = after_checks(reply["diagnostics"], built, func)
    reply["skipped"] = note
    reply["diagnostics"].append(Diagnostic.from_code("TL0804", note, Span.point(path, 1)).to_dict())
