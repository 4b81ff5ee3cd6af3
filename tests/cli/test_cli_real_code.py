"""tilelang-check on code written the way real projects write it: values traced from ``main()``,
a missing third-party import as an environment note, ``--explain``, and the pre-commit hook's
invocation (staged file names on the command line) in a scratch git repository, without network."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

KERNEL = textwrap.dedent(
    """\
    import argparse
    import tilelang
    import tilelang.language as T
    import some_absent_third_party_module  # noqa: F401


    @tilelang.jit(out_idx=[-1])
    def scale(N, block):
        @T.prim_func
        def kernel(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
                x = T.alloc_fragment((block,), "float32")
                T.copy(X[bx * block], x)
                T.copy(x, Y[bx * block])

        return kernel


    def main(n=4096):
        kernel = scale(n, 256)
        return kernel


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--n", type=int, default=2048)
        args = parser.parse_args()
        main(args.n)
    """
)


def _check(*args, cwd):
    exe = Path(sys.executable).with_name("tilelang-check")
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_values_traced_from_main_and_environment_note(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL)
    done = _check("--explain", "kernel.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "info[TL0804]" in done.stdout and "some_absent_third_party_module" in done.stdout
    assert "TL0801" not in done.stdout
    assert "kernel.py: scale: built with scale(N=2048, block=256) from the call at line 20 (with the call at line 28)" in done.stdout
    sarif = json.loads(_check("--format", "sarif", "kernel.py", cwd=tmp_path).stdout)
    (kernel,) = sarif["runs"][0]["properties"]["tilelangKernels"]
    assert kernel["factory"] == "scale" and kernel["built"] and "N=2048" in kernel["values"]


def test_pre_commit_hook_checks_the_staged_files(tmp_path):
    """pre-commit runs ``entry`` with the staged files' names: do the same in a scratch repository."""
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(KERNEL)
    bad.write_text(KERNEL.replace('T.copy(x, Y[bx * block])', 'pass'))   # Y is never written
    (tmp_path / "unstaged.py").write_text("this is not python (\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(git + ["add", "good.py", "bad.py"], cwd=tmp_path, check=True)
    staged = subprocess.run(git + ["diff", "--cached", "--name-only", "--diff-filter=ACM"], cwd=tmp_path,
                            check=True, capture_output=True, text=True).stdout.split()
    hook = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "entry: tilelang-check" in hook and "types: [python]" in hook
    done = _check(*sorted(staged), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bad.py" in done.stdout and "TL0402" in done.stdout and "unstaged.py" not in done.stdout
    assert _check("good.py", cwd=tmp_path).returncode == 0


NESTED = textwrap.dedent(
    """\
    import tilelang
    import tilelang.language as T


    @tilelang.jit(out_idx=[-1])
    def scale(N, block):
        shape = [N]            # read only by the annotations of a kernel defined one level down

        def kernel_func(threads):
            @T.prim_func
            def kernel(X: T.Tensor(shape, "float32"), Y: T.Tensor(shape, "float32")):
                with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
                    x = T.alloc_fragment((block,), "float32")
                    T.copy(X[bx * block], x)
                    T.copy(x, Y[bx * block])

            return kernel

        return kernel_func(128)


    @tilelang.jit(out_idx=[-1])
    def gemm_b_in_registers(M, N, K):
        @T.prim_func
        def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=128) as bx:
                a = T.alloc_shared((M, K), "float16")
                b = T.alloc_fragment((K, N), "float16")
                c = T.alloc_fragment((M, N), "float32")
                T.copy(A[0, 0], a)
                T.copy(B[0, 0], b)
                T.gemm(a, b, c, clear_accum=True)
                T.copy(c, C[0, 0])

        return kernel


    def main():
        scale(4096, 256)
        gemm_b_in_registers(64, 64, 64)
    """
)


def test_nested_kernels_and_compiler_limitations(tmp_path):
    """A kernel whose annotations read the factory's locals builds (the checker must not turn the
    user's annotations into strings); a gemm with B in registers, once a TL0804 note (a limit of
    our compiler), now builds clean (transform/stage_operands.py copies B to shared memory)."""
    (tmp_path / "kernel.py").write_text(NESTED)
    done = _check("--explain", "kernel.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TL0001" not in done.stdout and "error[" not in done.stdout
    assert "kernel.py: scale: built with scale(N=4096, block=256)" in done.stdout
    assert "kernel.py: gemm_b_in_registers: built with gemm_b_in_registers(M=64, N=64, K=64)" in done.stdout
    assert "TL0804" not in done.stdout and "no problems found" in done.stdout


def test_out_idx_is_read_through_autotune(tmp_path):
    """``@tilelang.autotune`` over ``@tilelang.jit(out_idx=...)``: the built kernel is checked with the
    jit's out_idx, so an output never written is reported (upstream's kda/wy_fast.py ``QG``)."""
    source = textwrap.dedent(
        """\
        import tilelang
        import tilelang.language as T


        @tilelang.autotune(configs=[{"block": 256}, {"block": 512}])
        @tilelang.jit(out_idx=[-2, -1])
        def scale(N, block=256):
            @T.prim_func
            def kernel(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"),
                       Z: T.Tensor((N,), "float32")):
                with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
                    x = T.alloc_fragment((block,), "float32")
                    T.copy(X[bx * block], x)
                    T.copy(x, Y[bx * block])

            return kernel


        def main():
            return scale(4096)
        """)
    path = tmp_path / "tuned.py"
    path.write_text(source)
    out = subprocess.run([sys.executable, "-m", "tilelang_lsp.cli", "--format", "json", str(path)],
                         capture_output=True, text=True, timeout=300)
    found = [(d["code"], d["span"]["line"]) for d in json.loads(out.stdout)["diagnostics"]
             if d["severity"] == "warning"]
    assert found == [("TL0402", 10)], out.stdout
