"""``tilelang.contrib.nvcc``: upstream's nvcc helper functions over our toolchain lookup.

Contract:
- ``get_nvcc_compiler()`` is ``tilelang.jit.nvcc.find_nvcc()`` (TILELANG_NVCC, CUDA_HOME, PATH).
- ``compile_cuda(code, target_format="ptx", arch=None, options=None, path_target=None,
  verbose=False) -> bytearray`` runs nvcc once on ``code`` (``-O3 -lineinfo``, our ``src/`` on the
  include path) and returns the ``ptx`` / ``cubin`` / ``fatbin`` bytes. ``arch`` is an nvcc flag
  list (``["-gencode", "arch=...,code=..."]``) or an arch string; None takes it from the current
  ``tvm.target.Target`` (its ``arch`` and optional ``code`` list; several codes need a fatbin,
  so a cubin request becomes one, with a RuntimeWarning), else from the GPU.
  TILELANG_COMPILE_TIMEOUT_SECONDS bounds the run: past it nvcc is killed and RuntimeError names
  the timeout, the command, the source and the target file. A failure is a RuntimeError with
  nvcc's output. Temporary files are removed unless TILELANG_CLEANUP_TEMP_FILES=0.
- ``get_target_code(target)``: a target's SM code list (what ``tilelang.backend.determine_target``
  was given as ``code``), None without one.
- Compute capabilities: ``get_target_compute_version(target=None)`` ("9.0" from ``sm_90a``, the
  current target, or the GPU), ``parse_compute_version``, ``get_target_arch`` ("90a" for 9.x and
  later, as nvcc spells the architecture-specific targets), ``get_cuda_version`` (a tuple).
- ``have_fp16`` / ``have_bf16`` / ``have_fp8`` / ``have_int8`` / ``have_tensorcore`` /
  ``have_tma``: what the architecture supports.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

from tilelang import knobs
from tilelang.backend.target import get_target_code_list, target_code
from tilelang.env import env
from tilelang.jit import nvcc as _toolchain

logger = logging.getLogger(__name__)

FORMATS = ("cubin", "ptx", "fatbin")


def get_nvcc_compiler() -> str:
    return _toolchain.find_nvcc()


def get_nvcc_subprocess_env() -> dict | None:
    """The environment nvcc runs in (None: this process's)."""
    return None


def _get_compile_timeout_seconds() -> float | None:
    return knobs.compile_timeout_seconds()


def _current_target():
    from tvm.target import Target

    return Target.current(allow_none=True)


def _attr(target, name):
    attrs = getattr(target, "attrs", None) or {}
    return attrs[name] if name in attrs else None


def get_target_code(target):
    """The target's ``code`` list: an attribute where TVM keeps one, else what
    ``tilelang.backend.determine_target`` recorded for it (None when neither)."""
    return _attr(target, "code") or target_code(target) or None


def _arch_flags(target_format: str):
    """(nvcc arch flags, target format) for the current target (see ``compile_cuda``)."""
    target = _current_target()
    arch = _attr(target, "arch") if target is not None else None
    codes = get_target_code_list(get_target_code(target)) if target is not None else []
    number = str(arch)[len("sm_"):] if arch is not None else get_target_arch(get_target_compute_version(target))
    if not codes:
        return [f"-arch=sm_{number}"], target_format
    code = codes[0] if len(codes) == 1 else f"[{','.join(codes)}]"
    if target_format == "cubin" and len(codes) > 1:
        warnings.warn("nvcc cannot write one cubin for several code targets; using '--fatbin' instead",
                      RuntimeWarning, stacklevel=3)
        target_format = "fatbin"
    return ["-gencode", f"arch=compute_{number},code={code}"], target_format


def _options(options) -> list[str]:
    if not options:
        return []
    if isinstance(options, str):
        return [options]
    if isinstance(options, (list, tuple)):
        return [str(o) for o in options]
    raise ValueError("options must be a str or a list of str")


def _run(cmd: list[str], src: str, target: str) -> bytes:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=get_nvcc_subprocess_env())
    timeout = _get_compile_timeout_seconds()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        try:
            out, _ = proc.communicate()
        except Exception:  # noqa: BLE001 - the process is gone; keep what it printed
            out = exc.output or b""
        text = (out or b"").decode(errors="replace")
        raise RuntimeError(f"NVCC compilation timed out after {timeout} seconds.\nCommand: {' '.join(cmd)}\n"
                           f"Source: {src}\nTarget: {target}\n" + (f"Output:\n{text}\n" if text else "")) from None
    text = (out or b"").decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"Compilation error:\n{text}\nCommand: {' '.join(cmd)}\nSource: {src}\n")
    return text.encode()


def compile_cuda(code, target_format="ptx", arch=None, options=None, path_target=None, verbose=False) -> bytearray:
    """Compile ``code`` with nvcc (see the module docstring)."""
    if arch is None:
        arch, target_format = _arch_flags(target_format)
    if target_format not in FORMATS:
        raise ValueError(f"target_format must be one of {', '.join(FORMATS)}, got {target_format!r}")
    arch_flags = list(arch) if isinstance(arch, (list, tuple)) else ["-arch", str(arch)]
    tmp = Path(tempfile.mkdtemp(prefix="tilelang-nvcc-"))
    src, out = tmp / "tvm_kernels.cu", Path(path_target or tmp / f"tvm_kernels.{target_format}")
    src.write_text(code)
    cmd = [get_nvcc_compiler(), f"--{target_format}", "-O3", "-lineinfo", *arch_flags,
           *_toolchain.include_flags(), *_options(options), "-o", str(out), str(src)]
    try:
        log = _run(cmd, str(src), str(out))
        if verbose:
            logger.info("nvcc: %s\n%s", " ".join(cmd), log.decode(errors="replace"))
        data = bytearray(out.read_bytes())
        if not data:
            raise RuntimeError(f"nvcc wrote an empty {target_format}\nCommand: {' '.join(cmd)}")
        return data
    finally:
        if str(env.TILELANG_CLEANUP_TEMP_FILES).strip().lower() not in ("0", "false", "no", "off"):
            shutil.rmtree(tmp, ignore_errors=True)


def get_cuda_version(cuda_path=None) -> tuple[int, ...]:
    """The toolkit's version, e.g. (13, 0, 88), from ``nvcc --version``."""
    nvcc = os.path.join(cuda_path, "bin", "nvcc") if cuda_path else get_nvcc_compiler()
    text = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"release [\d.]+, V([\d.]+)", text)
    if match is None:
        raise RuntimeError(f"cannot read the CUDA version from `{nvcc} --version`")
    return tuple(int(x) for x in match.group(1).split("."))


def get_target_compute_version(target=None) -> str:
    """"9.0" for ``sm_90a`` (the target's arch, the current target's, else the GPU's)."""
    target = target if target is not None else _current_target()
    arch = _attr(target, "arch") if target is not None else None
    if arch is not None:
        digits = str(arch).split("_")[-1].rstrip("af")
        if len(digits) not in (2, 3) or not digits.isdigit():
            raise ValueError(f"unsupported CUDA arch {arch!r}")
        return f"{digits[:-1]}.{digits[-1]}"
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}.{minor}"
    except ImportError:
        pass
    raise ValueError("no CUDA architecture given and no GPU found; use a target such as "
                     "{'kind': 'cuda', 'arch': 'sm_90a'}")


def parse_compute_version(compute_version) -> tuple[int, int]:
    """ "8.6" -> (8, 6)."""
    try:
        major, minor = str(compute_version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        raise RuntimeError(f"cannot parse compute version {compute_version!r}") from None


def get_target_arch(compute_version) -> str:
    """ "9.0" -> "90a", "8.6" -> "86"."""
    major, minor = (parse_compute_version(compute_version) if isinstance(compute_version, str)
                    else tuple(compute_version))
    return f"{major * 10 + minor}{'a' if major >= 9 else ''}"


def _version(compute_version) -> tuple[int, int]:
    return parse_compute_version(compute_version)


def have_fp16(compute_version) -> bool:
    return _version(compute_version) >= (5, 3)


def have_int8(compute_version) -> bool:
    return _version(compute_version) >= (6, 1)


def have_bf16(compute_version) -> bool:
    return _version(compute_version) >= (8, 0)


def have_fp8(compute_version) -> bool:
    return _version(compute_version) >= (8, 9)


def have_tensorcore(compute_version=None, target=None) -> bool:
    version = compute_version or get_target_compute_version(target)
    return _version(version) >= (7, 0)


def have_tma(target) -> bool:
    return _version(get_target_compute_version(target)) >= (9, 0)


__all__ = ["compile_cuda", "get_cuda_version", "get_nvcc_compiler", "get_target_arch", "get_target_code_list",
           "get_target_compute_version", "have_bf16", "have_fp16", "have_fp8", "have_int8", "have_tensorcore",
           "have_tma", "parse_compute_version"]
