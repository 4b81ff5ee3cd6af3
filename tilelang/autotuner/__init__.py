"""``@tilelang.autotune`` and ``AutoTuner``: pick the fastest config of a kernel factory.

    @tilelang.autotune(configs=[dict(block_M=64, num_stages=2), dict(block_M=128, num_stages=3)])
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, num_stages=3): ...

    kernel = matmul(1024, 1024, 1024)   # tunes once, returns the best JITKernel
    kernel.config, kernel.latency       # the winner and its time in ms

Calling the decorated factory compiles every config in parallel (lowering in forked processes
and nvcc in threads, up to one per CPU, each config with a ``timeout``), checks each against
``ref_prog`` when given, times each on the GPU with ``tilelang.profiler.do_bench`` on inputs
made once per run, and returns the fastest config's kernel.  Configs that fail to compile, fail
the check or fail to run are skipped with a one-line reason; only when all fail is
``AutotuneError`` raised, listing them.  Progress goes to stderr (a redrawn bar on a terminal, plain lines otherwise).

The decorator works on either side of ``@tilelang.jit`` (inside it, the kernel is compiled
with jit's ``out_idx``/``target``), and ``tilelang.autotune(configs=...)(jit_fn)`` is the same.
Arguments the caller passes are fixed; the rest of each config is tuned; when the caller
fixes every tuned argument the kernel is just compiled. A keyword argument named in
``do_not_specialize`` is tuned over all the same, the config's value winning (upstream's rule: a
library may pass its default config so, with those names in ``do_not_specialize``, and read the
winner back from ``.config``).

Results are memoised in the process and stored in ``<TILELANG_CACHE_DIR>/autotune/<key>.json``,
the key covering the factory's source and closure, its arguments, the configs, the compile
arguments, the target arch, the tilelang version and the compiler's own sources
(``store.tuning_key``).  A later process with the same key compiles only the stored winner,
with no timing and no GPU needed.  ``TILELANG_AUTOTUNE_FORCE=1`` or ``force_retune=True``
ignores stored results.  Tuning itself needs a CUDA GPU; without one ``AutotuneError`` says
so, while config checking (unknown parameter names, empty lists: ``ConfigError``, a
ValueError; malformed configs: ``ConfigTypeError``, a TypeError) works anywhere.  These errors
leave the public entry points without tilelang's frames in their traceback.
"""

from tilelang.autotuner.capture import get_autotune_inputs, set_autotune_inputs
from tilelang.autotuner.configs import ConfigError, ConfigTypeError
from tilelang.autotuner.runner import AutotuneError, GpuRunner
from tilelang.autotuner.tuner import (AutotunedFactory, AutotuneResult, AutoTuner, CompileArgs, ConfigResult,
                                      ProfileArgs, autotune)
from tilelang.autotuner import param  # noqa: E402 - upstream's ``tilelang.autotuner.param``

__all__ = ["AutoTuner", "AutotuneError", "param", "AutotuneResult", "AutotunedFactory", "CompileArgs", "ConfigError",
           "ConfigResult", "ConfigTypeError", "GpuRunner", "ProfileArgs", "autotune", "get_autotune_inputs",
           "set_autotune_inputs"]
