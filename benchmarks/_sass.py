"""SASS instruction counts of a compiled kernel, for the benchmark tables.

    count_opcodes(sass_text)  -> {"HGMMA": n, "UTMALDG": n, "HMMA": n, "LDSM": n}
    find_cuobjdump()          -> path of cuobjdump, or None
    sass_counts(kernel)       -> the counts of a JITKernel's cubin, or None when cuobjdump is missing
                                 or fails (the tables then say "n/a")

An instruction is counted by its base opcode, the part before the first dot, so every variant
counts: HGMMA.64x128x16.F32, UTMALDG.2D / .3D.MULTICAST, HMMA.16816.F32.BF16, LDSM.16.M88.4 and
LDSM.16.MT88.4.  Predicated instructions (@P0, @!UPT, ...) count too.  The counts are static (how
often the instruction appears in the binary), not how often it executes.

No torch, no tvm: the counting is unit-tested on canned text (tests/benchmarks/).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

OPCODES = ("HGMMA", "UTMALDG", "HMMA", "LDSM")

# One SASS instruction as cuobjdump / nvdisasm print it:
#   /*0150*/   @!P0 HGMMA.64x128x16.F32 R24, gdesc[UR4], RZ, !UPT ;   /* 0x00e000000418... */
# i.e. an address comment, an optional predicate, then the opcode with its dotted modifiers.
_INSTRUCTION = re.compile(
    r"/\*[0-9a-fA-F]{4,}\*/\s*\{?\s*"      # address, optional dual-issue brace
    r"(?:@!?U?P(?:T|\d+)\s+)?"             # optional predicate guard
    r"([A-Z][A-Z0-9_]*)"                   # base opcode
)


def count_opcodes(sass_text: str, opcodes=OPCODES) -> dict[str, int]:
    """How many instructions of each base opcode in ``opcodes`` the SASS text contains."""
    counts = {op: 0 for op in opcodes}
    for line in sass_text.splitlines():
        m = _INSTRUCTION.search(line)
        if m and m.group(1) in counts:
            counts[m.group(1)] += 1
    return counts


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, else next to nvcc / under CUDA_HOME (via tilelang's tool lookup)."""
    path = shutil.which("cuobjdump")
    if path:
        return path
    try:
        from tilelang.jit.nvcc import find_cuda_tool

        return find_cuda_tool("cuobjdump")
    except Exception:  # noqa: BLE001 - no tilelang here, or its lookup failed: treat as missing
        return None


def _kernel_cubin(kernel) -> bytes | None:
    artifact = getattr(kernel, "artifact", None)
    cubin = getattr(artifact, "cubin", None)
    if cubin is None and hasattr(kernel, "ensure_cubin"):
        cubin = kernel.ensure_cubin()
    return cubin


def sass_of_cubin(cubin: bytes, cuobjdump: str, timeout: float = 120) -> str:
    """``cuobjdump -sass`` of the cubin bytes (written to a temporary file); raises on failure."""
    with tempfile.TemporaryDirectory(prefix="tl-bench-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True,
                              errors="replace", timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump -sass failed ({proc.returncode}): {proc.stderr.strip()[:300]}")
    return proc.stdout


def sass_counts(kernel, opcodes=OPCODES, log=None) -> dict[str, int] | None:
    """The opcode counts of ``kernel``'s cubin, or None (never raises) when they cannot be had.

    ``log`` (a callable taking one string) hears why, when it is None for another reason than a
    missing cuobjdump."""
    tool = find_cuobjdump()
    if tool is None:
        return None
    try:
        cubin = _kernel_cubin(kernel)
        if not cubin:
            raise RuntimeError("the kernel has no cubin")
        text = sass_of_cubin(cubin, tool)
        counts = count_opcodes(text, opcodes)
        if not any(_INSTRUCTION.search(line) for line in text.splitlines()):
            raise RuntimeError("cuobjdump printed no instructions")
        return counts
    except Exception as e:  # noqa: BLE001 - a table cell, not worth aborting a benchmark run for
        if log is not None:
            log(f"SASS counts unavailable: {type(e).__name__}: {e}")
        return None


def format_counts(counts: dict[str, int] | None, opcodes=OPCODES) -> list[str]:
    """One table cell per opcode: the count, or "n/a"."""
    if counts is None:
        return ["n/a"] * len(opcodes)
    return [str(counts.get(op, 0)) for op in opcodes]


if __name__ == "__main__":  # count the opcodes of a cubin or a SASS listing given on the command line
    import sys

    for arg in sys.argv[1:]:
        data = Path(arg).read_bytes()
        if arg.endswith(".cubin") or data[:4] == b"\x7fELF":
            tool = find_cuobjdump()
            if tool is None:
                print(f"{arg}: n/a (no cuobjdump)")
                continue
            text = sass_of_cubin(data, tool)
        else:
            text = data.decode(errors="replace")
        print(f"{arg}: {count_opcodes(text)}")
    if len(sys.argv) < 2:
        print(f"usage: {os.path.basename(sys.argv[0])} FILE.cubin|FILE.sass ...")
