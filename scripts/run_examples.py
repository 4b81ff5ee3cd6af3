#!/usr/bin/env python3
"""The main job: run every example on a GPU, or, without one, lower every example kernel and
compile its CUDA with nvcc for sm_90a and sm_80 (what CI can prove without a device).

Usage: python scripts/run_examples.py [examples_dir] [--arch sm_90a,sm_80] [--only NAME]
Exit status: 0 when everything passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def example_modules(folder: Path, only=None):
    names = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    return [n for n in names if only is None or n in only]


def compile_all(folder: Path, names, archs) -> int:
    import tilelang
    from tilelang.jit import nvcc

    sys.path.insert(0, str(folder))
    failures = 0
    for name in names:
        module = importlib.import_module(name)
        for func in module.kernels():
            for arch in archs:
                start = time.time()
                try:
                    artifact = tilelang.lower(func, arch)
                    nvcc.compile_cubin(artifact.source, arch, artifact.compile_flags)
                    print(f"ok    {name:<20} {arch:<7} {time.time() - start:5.2f}s  "
                          f"smem {artifact.dynamic_smem} B", flush=True)
                except Exception as err:  # noqa: BLE001 - report every failure, keep going
                    failures += 1
                    print(f"FAIL  {name:<20} {arch:<7} {err}", flush=True)
    return failures


def run_all(folder: Path, names) -> int:
    failures = 0
    for name in names:
        print(f"== {name}", flush=True)
        proc = subprocess.run([sys.executable, str(folder / f"{name}.py")], cwd=folder)
        if proc.returncode != 0:
            failures += 1
            print(f"FAIL  {name} (exit {proc.returncode})", flush=True)
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(ROOT / "examples"))
    parser.add_argument("--arch", default="sm_90a,sm_80")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    names = example_modules(folder, args.only)
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if gpu and not args.compile_only:
        failures = run_all(folder, names)
    else:
        if not gpu:
            print("no CUDA device: lowering every example and compiling it with nvcc instead")
        failures = compile_all(folder, names, args.arch.split(","))
    print(f"{'all examples passed' if not failures else f'{failures} failure(s)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
