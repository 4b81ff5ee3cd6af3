"""Pass configuration keys (``pass_configs={...}`` of ``@tilelang.jit`` / ``tilelang.compile``).

Every key upstream TileLang code passes is accepted; each has a documented effect here. Unknown
keys produce a warning naming the key (a typo must not be silently ignored).
"""

from __future__ import annotations

import enum
import warnings


class PassConfigKey(str, enum.Enum):
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_ASYNC_COPY = "tl.disable_async_copy"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_PERSISTENT = "tl.disable_persistent"
    TL_DISABLE_EPILOGUE_STAGING = "tl.disable_epilogue_staging"
    TL_CLUSTER_MULTICAST = "tl.cluster_multicast"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DISABLE_WGMMA_OVERLAP = "tl.disable_wgmma_overlap"
    TL_DISABLE_TMA_PROLOGUE = "tl.disable_tma_prologue"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_access"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TIR_DISABLE_VECTORIZE = "tir.disable_vectorize"


EFFECTS = {
    PassConfigKey.TL_ENABLE_FAST_MATH: "compile with nvcc --use_fast_math (exp/exp2/log map to the SFU "
                                       "approximations; division and sqrt lose IEEE rounding)",
    PassConfigKey.TL_DISABLE_ASYNC_COPY: "global->shared copies use plain vector loads/stores instead of cp.async "
                                         "(pipelined loops then overlap less)",
    PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: "on sm_90a, the pipelined loop (GEMM main loop, attention) keeps "
                                               "cp.async feeding from every thread instead of a TMA producer "
                                               "warpgroup with mbarriers",
    PassConfigKey.TL_DISABLE_TMA_LOWER: "on sm_90a, pipelined global->shared copies use cp.async instead of TMA "
                                        "(and so no warp specialisation)",
    PassConfigKey.TL_DISABLE_PERSISTENT: "on sm_90a, a warp-specialised GEMM main loop keeps one output tile per "
                                         "block instead of a persistent grid (one block per SM looping over the "
                                         "tiles, its producer loading the next tile during the epilogue)",
    PassConfigKey.TL_DISABLE_EPILOGUE_STAGING: "on sm_90a, a wgmma accumulator copied to a global tensor is "
                                               "stored from registers instead of through a swizzled shared "
                                               "tile and TMA stores",
    PassConfigKey.TL_CLUSTER_MULTICAST: "experimental (sm_90a): a warp-specialised GEMM main loop runs in clusters "
                                        "of two blocks along blockIdx.y that share the tile not indexed by it (B), "
                                        "each loading half of it with TMA multicast (correct; measured within 1-2 % "
                                        "of the default, not faster)",
    PassConfigKey.TL_DISABLE_WGMMA: "on sm_90a, T.gemm lowers to mma.sync + ldmatrix (the sm_80 path) instead of wgmma",
    PassConfigKey.TL_DISABLE_WGMMA_OVERLAP: "on sm_90a, a warp-specialised loop body with several gemms (attention) "
                                            "keeps each gemm synchronous instead of running the last gemm of "
                                            "iteration k-1 under the first gemm and the softmax of iteration k",
    PassConfigKey.TL_DISABLE_TMA_PROLOGUE: "on sm_90a, a tile copied into shared memory in front of a "
                                           "warp-specialised loop with several gemms (attention's Q) is loaded "
                                           "by the consumers with cp.async instead of by the TMA producer "
                                           "(which, in a persistent kernel, loads the next tile's during the "
                                           "epilogue)",
    PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: "drops the automatic bounds guards on global-tensor elements "
                                                 "accessed inside T.Parallel (tile copies stay guarded)",
    PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE: "every shared buffer gets bytes of its own: buffers whose "
                                                  "lifetimes do not overlap no longer share them",
    PassConfigKey.TL_DISABLE_DATA_RACE_CHECK: "accepted; no effect (barriers are inserted, not checked)",
    PassConfigKey.TL_DISABLE_BUFFER_INIT_CHECK: "drops the checker's TL0401 (read before initialisation) findings",
    PassConfigKey.TL_DISABLE_OUT_OF_BOUND_WARNING: "drops the checker's TL0601/TL0602 bound findings",
    PassConfigKey.TIR_DISABLE_VECTORIZE: "accepted; vector widths are chosen by alignment analysis",
}

KNOWN = {k.value for k in PassConfigKey}


def normalize(configs) -> dict:
    """Plain ``{str: python value}``; warns about keys we do not know."""
    out = {}
    for key, value in dict(configs or {}).items():
        name = key.value if isinstance(key, PassConfigKey) else str(key)
        if name not in KNOWN:
            warnings.warn(f"unknown pass config key {name!r}; known keys: {', '.join(sorted(KNOWN))}",
                          stacklevel=3)
        out[name] = value if isinstance(value, (bool, int, float, str)) else str(value)
    return out


def markdown() -> str:
    lines = ["# Pass configuration keys", "",
             "Pass them as `pass_configs={key: value}` to `@tilelang.jit` or `tilelang.compile` "
             "(`tilelang.PassConfigKey` has them as an enum). They are part of the kernel cache key.", "",
             "| key | effect |", "|---|---|"]
    lines += [f"| `{k.value}` | {EFFECTS[k]} |" for k in PassConfigKey]
    return "\n".join(lines) + "\n"
