"""Compile CUDA source to cubin/PTX with nvcc (or NVRTC), and inspect the result.

Contract:
- ``find_nvcc()`` looks at TILELANG_NVCC, then $CUDA_HOME/bin/nvcc (or
  $CUDA_PATH), then PATH, then /usr/local/cuda/bin/nvcc; raises
  ``NVCCNotFoundError`` naming every place it looked.
- ``compile_cubin(source, arch, flags, include_dirs)`` returns the cubin bytes
  for exactly one target: ``-gencode arch=compute_90a,code=sm_90a`` for
  arch "sm_90a" (no PTX embedded, no -G: compile time is kept minimal).  The
  repo's ``src/`` (see ``tilelang.knobs.src_dir``) is always on the include
  path so generated code can ``#include "tl.h"``.
- With TILELANG_USE_NVRTC=1 and ``cuda.bindings.nvrtc`` importable, NVRTC is
  used instead (best effort: unknown nvcc-only flags are dropped).
- Every failure raises ``NVCCError`` (a RuntimeError) carrying the compiler's
  output (``.log``), the command (``.command``) and the path of the kept
  source (``.source_path``); the temp dir is kept on failure, and always when
  TILELANG_KEEP_TEMPS=1.
- ``compile_artifact(art)`` builds a KernelArtifact's cubin, with the occupancy step where its
  lowering asked for one (``tilelang.jit.occupancy``: the kernel's source may change).
- ``ptxas_info`` parses ``-Xptxas -v`` into ``PtxasInfo`` per entry function;
  ``disassemble_sass`` runs ``cuobjdump -sass`` (nvdisasm as fallback) and
  raises ``CudaToolNotFoundError`` when neither exists.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from tilelang import knobs
from tilelang.artifact import arch_number

DEFAULT_FLAGS = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo"]
_MAX_LOG_IN_MESSAGE = 8000


class NVCCError(RuntimeError):
    """CUDA compilation failed; ``log`` holds the compiler output."""

    def __init__(self, message: str, log: str = "", command: list[str] | None = None,
                 source_path: str | None = None):
        super().__init__(message)
        self.log = log
        self.command = command or []
        self.source_path = source_path


class NVCCNotFoundError(NVCCError):
    """No nvcc executable could be found."""


class CudaToolNotFoundError(NVCCError):
    """A CUDA binary utility (cuobjdump, nvdisasm) is missing."""


@dataclass
class PtxasInfo:
    """Resource usage of one entry function as reported by ``ptxas -v``."""
    function: str
    arch: str = ""
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    smem: int = 0
    barriers: int = 0


# ---------------------------------------------------------------- locating tools
def _candidates_nvcc() -> list[Path]:
    found: list[Path] = []
    explicit = knobs.nvcc_path()
    if explicit:
        return [explicit]  # an explicit choice is never second-guessed
    home = knobs.cuda_home()
    if home:
        found.append(home / "bin" / "nvcc")
    on_path = shutil.which("nvcc")
    if on_path:
        found.append(Path(on_path))
    found.append(Path("/usr/local/cuda/bin/nvcc"))
    return found


def find_nvcc() -> str:
    """Path of the nvcc executable to use; raises NVCCNotFoundError."""
    candidates = _candidates_nvcc()
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    where = ", ".join(str(c) for c in candidates)
    raise NVCCNotFoundError(
        f"nvcc not found (looked at: {where}); install the CUDA toolkit, or set "
        "TILELANG_NVCC to the nvcc executable or CUDA_HOME to the toolkit root")


def find_cuda_tool(name: str) -> str | None:
    """A CUDA binary utility next to nvcc, under CUDA_HOME, or on PATH; else None."""
    dirs = []
    try:
        dirs.append(Path(find_nvcc()).resolve().parent)
    except NVCCError:
        pass
    home = knobs.cuda_home()
    if home:
        dirs.append(home / "bin")
    for d in dirs:
        if (d / name).is_file():
            return str(d / name)
    return shutil.which(name)


@functools.lru_cache(maxsize=8)
def _version_of(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


def nvcc_version() -> str:
    """nvcc's last ``--version`` line, e.g. 'Build cuda_13.0.r13.0/compiler.36424714_0'."""
    return _version_of(find_nvcc())


def toolchain_fingerprint() -> str:
    """A cheap identity of the nvcc in use (path, size, mtime) for cache keys; no subprocess."""
    try:
        path = Path(find_nvcc()).resolve()
        st = path.stat()
        return f"{path}:{st.st_size}:{st.st_mtime_ns}"
    except (NVCCError, OSError):
        return "no-nvcc"


# ---------------------------------------------------------------- commands
def gencode_flags(arch: str) -> list[str]:
    """'sm_90a' -> ['-gencode', 'arch=compute_90a,code=sm_90a'] (SASS only, no PTX)."""
    num, suffix = arch_number(arch)
    return ["-gencode", f"arch=compute_{num}{suffix},code=sm_{num}{suffix}"]


def include_flags(include_dirs=()) -> list[str]:
    dirs = [str(knobs.src_dir())] + [str(d) for d in include_dirs]
    flags: list[str] = []
    for d in dict.fromkeys(dirs):  # keep order, drop duplicates
        flags += ["-I", d]
    return flags


def build_command(mode: str, arch: str, flags=(), include_dirs=(), src: str = "kernel.cu",
                  out: str = "kernel.cubin") -> list[str]:
    """The nvcc command line; ``mode`` is 'cubin' or 'ptx'."""
    if mode not in ("cubin", "ptx"):
        raise ValueError(f"mode must be 'cubin' or 'ptx', got {mode!r}")
    return ([find_nvcc(), f"-{mode}", *DEFAULT_FLAGS, *gencode_flags(arch),
             *include_flags(include_dirs), *[str(f) for f in flags], "-o", out, src])


_LAST_LOG = threading.local()     # this thread's last nvcc log (``_compile_reporting``)


def _run_nvcc(source: str, mode: str, arch: str, flags, include_dirs) -> tuple[bytes, str]:
    """Compile in a fresh temp dir; return (output bytes, combined compiler log)."""
    build_command(mode, arch, flags, include_dirs)  # fail on a missing nvcc/bad arch before making files
    tmp = Path(tempfile.mkdtemp(prefix="tilelang-nvcc-"))
    src, out = tmp / "kernel.cu", tmp / f"kernel.{mode}"
    src.write_text(source)
    cmd = build_command(mode, arch, flags, include_dirs, str(src), str(out))
    timeout = knobs.compile_timeout_seconds()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", cwd=tmp, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NVCCError(f"nvcc timed out after {timeout} seconds (TILELANG_COMPILE_TIMEOUT_SECONDS)\n"
                        f"  source kept at: {src}\n  command: {' '.join(cmd)}", command=cmd,
                        source_path=str(src)) from None
    log = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or not out.is_file():
        (tmp / "nvcc.log").write_text(log + "\n")
        raise NVCCError(_failure_message("nvcc", proc.returncode, cmd, src, log),
                        log=log, command=cmd, source_path=str(src))
    data = out.read_bytes()
    _LAST_LOG.text = log
    if not knobs.keep_temps():
        shutil.rmtree(tmp, ignore_errors=True)
    return data, log


_MAX_ERROR_LINES = 8


# ptxas's register-allocation failures (C7600: the kernel as a whole, C7602: one instruction)
_REGISTER_FAILURE = re.compile(r"\(C760[02]\)|Register allocation failed|Insufficient registers")
_REGISTER_HINT = (
    "hint: ptxas ran out of registers. Each thread holds its share of every fragment (an accumulator of "
    "block_M x block_N floats over T threads takes block_M * block_N / T registers a thread, see warning "
    "TL0502), and a thread has at most 255, or 65536 / threads under __launch_bounds__(threads); use "
    "smaller tiles, more threads, or a 16-bit accumulator")


def _without_unused_warnings(log: str) -> str:
    """``log`` without nvcc's "declared but never referenced" warnings (#177-D) and the two lines
    (source, caret) each carries: the preamble's helpers the kernel does not call raise them by
    the dozen, and they hide the line that matters."""
    out, skip = [], 0
    for ln in log.splitlines():
        if skip:
            skip -= 1
            continue
        if "warning #177-D" in ln:
            skip = 2
            continue
        out.append(ln)
    return "\n".join(out).strip("\n")


def _failure_message(tool: str, rc, cmd: list[str], src: Path | None, log: str) -> str:
    shown = _without_unused_warnings(log)
    if len(shown) > _MAX_LOG_IN_MESSAGE:
        shown = shown[:_MAX_LOG_IN_MESSAGE] + "\n... (truncated; see .log)"
    kept = f"\n  source kept at: {src}" if src else ""
    # the errors first: a long log of warnings would otherwise push them out of the message
    errors = [ln.strip() for ln in log.splitlines() if re.search(r"\berror\b|\bfatal\b", ln)][:_MAX_ERROR_LINES]
    first = "".join(f"\n  {ln}" for ln in errors)
    hint = f"\n  {_REGISTER_HINT}" if _REGISTER_FAILURE.search(log) else ""
    return (f"{tool} failed (exit status {rc}){first}{hint}{kept}\n  command: {' '.join(cmd)}\n"
            f"--- compiler output ---\n{shown}")


# ---------------------------------------------------------------- NVRTC
def _nvrtc_module():
    """cuda.bindings.nvrtc when TILELANG_USE_NVRTC=1 and importable, else None."""
    if not knobs.use_nvrtc():
        return None
    try:
        from cuda.bindings import nvrtc  # type: ignore
    except ImportError:
        return None
    return nvrtc


def nvrtc_options(arch: str, flags=(), include_dirs=()) -> list[str]:
    """Translate our nvcc options into NVRTC's; nvcc-only flags are dropped."""
    num, suffix = arch_number(arch)
    # NVRTC (13.0) rejects --expt-relaxed-constexpr; constexpr host functions then need __device__
    opts = [f"--gpu-architecture=sm_{num}{suffix}", "-std=c++17", "-lineinfo", "-default-device"]
    for d in dict.fromkeys([str(knobs.src_dir())] + [str(x) for x in include_dirs]):
        opts.append(f"-I{d}")
    # NVRTC does not know where the toolkit headers are; point it at the toolkit in use
    toolkits = [knobs.cuda_home()]
    try:
        toolkits.append(Path(find_nvcc()).resolve().parent.parent)
    except NVCCError:
        pass
    for home in dict.fromkeys(t for t in toolkits if t):
        opts += [f"-I{d}" for d in cuda_include_dirs(str(home)) if Path(d).is_dir()]
    nvcc_only = {"-O3", "-O2", "-O1", "-O0", "-lineinfo", "-std=c++17", "--expt-relaxed-constexpr"}
    opts += [str(f) for f in flags if str(f) not in nvcc_only]
    return opts


def cuda_include_dirs(cuda_home: str, machine: str | None = None, system: str | None = None) -> list[str]:
    """The header directories of the CUDA toolkit at ``cuda_home`` that exist: the flat
    ``include`` (pip wheels, most toolkits) and ``targets/<arch>-linux/include`` (system
    packages), each followed by its ``cccl`` subdirectory (CUDA 13 moved CCCL there). When none
    exists, the conventional ones are returned so the compiler names the missing header. On
    Windows only the flat layout exists."""
    flat = os.path.join(cuda_home, "include")
    if (system or sys.platform).startswith("win32"):
        return [flat, os.path.join(flat, "cccl")]
    arch = "sbsa-linux" if (machine or platform.machine()) in ("aarch64", "arm64") else "x86_64-linux"
    target = os.path.join(cuda_home, "targets", arch, "include")
    found = []
    for base in (flat, target):
        if os.path.isdir(base):
            found.append(base)
            if os.path.isdir(os.path.join(base, "cccl")):
                found.append(os.path.join(base, "cccl"))
    return found or [flat, target, os.path.join(target, "cccl")]


def _nvrtc_check(nvrtc, result, what: str, prog=None, cmd=None) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if err == nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return
    log = _nvrtc_log(nvrtc, prog) if prog is not None else ""
    raise NVCCError(_failure_message(f"NVRTC {what}", err, cmd or [], None, log), log=log, command=cmd)


def _nvrtc_log(nvrtc, prog) -> str:
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.decode(errors="replace").rstrip("\x00 \n")


def _compile_nvrtc(nvrtc, source: str, mode: str, arch: str, flags, include_dirs) -> bytes:
    opts = nvrtc_options(arch, flags, include_dirs)
    res = nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], [])
    _nvrtc_check(nvrtc, res, "create", cmd=opts)
    prog = res[1]
    try:
        _nvrtc_check(nvrtc, nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts]),
                     "compile", prog, opts)
        size_fn, get_fn = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if mode == "cubin"
                           else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
        res = size_fn(prog)
        _nvrtc_check(nvrtc, res, "size", prog, opts)
        buf = b" " * res[1]
        _nvrtc_check(nvrtc, get_fn(prog, buf), "get", prog, opts)
        return buf
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


# ---------------------------------------------------------------- public compile API
def compile_cubin(source: str, arch: str, flags=(), include_dirs=()) -> bytes:
    """Compile CUDA ``source`` for ``arch`` (e.g. 'sm_90a'); return cubin bytes."""
    nvrtc = _nvrtc_module()
    if nvrtc is not None:
        return _compile_nvrtc(nvrtc, source, "cubin", arch, flags, include_dirs)
    return _run_nvcc(source, "cubin", arch, flags, include_dirs)[0]


def _compile_reporting(source: str, arch: str, flags, include_dirs) -> tuple[bytes, dict | None]:
    """``compile_cubin`` with ``-Xptxas -v``: (cubin, ptxas's resource usage per entry, or None where
    no ptxas log came back: NVRTC, or a ``compile_cubin`` replaced in a test)."""
    if _nvrtc_module() is not None:
        return compile_cubin(source, arch, flags, include_dirs), None
    _LAST_LOG.text = None
    cubin = compile_cubin(source, arch, [*flags, "-Xptxas", "-v"], include_dirs)
    log = getattr(_LAST_LOG, "text", None)
    return cubin, (parse_ptxas_info(log) if log else None)


def compile_artifact(art, include_dirs=()) -> bytes:
    """The cubin of a ``KernelArtifact`` (one kernel). Where its lowering asked for the occupancy
    step (``art.occupancy_step``: ``tl.enable_occupancy_step``) and ptxas's registers are all that
    keeps one more block off an SM, the kernel is compiled again under a launch bound that asks
    for it (``occupancy.step``); that build, and its source, are kept if ptxas fits it without
    spilling."""
    if not getattr(art, "occupancy_step", False):
        return compile_cubin(art.source, art.arch, art.compile_flags, include_dirs)
    from tilelang.jit import occupancy

    cubin, info = _compile_reporting(art.source, art.arch, art.compile_flags, include_dirs)
    if not info or len(info) != 1:
        return cubin

    def build(source):
        try:
            data, usage = _compile_reporting(source, art.arch, art.compile_flags, include_dirs)
        except NVCCError:   # ptxas could not fit an instruction in the bound's registers: keep the first build
            return None, None
        return data, (next(iter(usage.values())) if usage and len(usage) == 1 else None)

    kept = occupancy.attempt(art, next(iter(info.values())), build)
    return cubin if kept is None else kept[0]


def compile_ptx(source: str, arch: str, flags=(), include_dirs=()) -> str:
    """Compile CUDA ``source`` to PTX text for ``arch``."""
    nvrtc = _nvrtc_module()
    if nvrtc is not None:
        data = _compile_nvrtc(nvrtc, source, "ptx", arch, flags, include_dirs)
    else:
        data = _run_nvcc(source, "ptx", arch, flags, include_dirs)[0]
    return data.decode(errors="replace").rstrip("\x00")


def ptxas_info(source: str, arch: str, flags=(), include_dirs=()) -> dict[str, PtxasInfo]:
    """Compile with ``-Xptxas -v`` (always via nvcc) and parse resource usage per entry."""
    _, log = _run_nvcc(source, "cubin", arch, [*flags, "-Xptxas", "-v"], include_dirs)
    return parse_ptxas_info(log)


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BARS = re.compile(r"used (\d+) barriers")


def parse_ptxas_info(log: str) -> dict[str, PtxasInfo]:
    """Parse ``ptxas -v`` output into {entry function name: PtxasInfo}."""
    result: dict[str, PtxasInfo] = {}
    cur: PtxasInfo | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            cur = result[m.group(1)] = PtxasInfo(function=m.group(1), arch=m.group(2))
            continue
        if cur is None:
            continue
        m = _PROPS.search(line)
        if m:
            cur.stack_frame, cur.spill_stores, cur.spill_loads = map(int, m.groups())
        m = _USED.search(line)
        if m:
            cur.registers = int(m.group(1))
            sm, bars = _SMEM.search(line), _BARS.search(line)
            cur.smem = int(sm.group(1)) if sm else 0
            cur.barriers = int(bars.group(1)) if bars else 0
    return result


def disassemble_sass(cubin: bytes) -> str:
    """SASS text of ``cubin`` via ``cuobjdump -sass`` (or ``nvdisasm``)."""
    tools = [(find_cuda_tool("cuobjdump"), ["-sass"]), (find_cuda_tool("nvdisasm"), [])]
    tools = [(t, args) for t, args in tools if t]
    if not tools:
        raise CudaToolNotFoundError(
            "cannot disassemble: neither cuobjdump nor nvdisasm was found next to nvcc, "
            "under CUDA_HOME/bin or on PATH (they ship with the CUDA toolkit)")
    with tempfile.TemporaryDirectory(prefix="tilelang-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        errors = []
        for tool, args in tools:
            proc = subprocess.run([tool, *args, str(path)], capture_output=True, text=True, errors="replace")
            if proc.returncode == 0:
                return proc.stdout
            errors.append(f"{tool}: {proc.stderr.strip()}")
    raise NVCCError("disassembly failed:\n" + "\n".join(errors))
