"""``tilelang.cuda.language``: upstream's CUDA dialect module path.

Contract: the dialect is ``tilelang.language`` itself (every CUDA-specific operator — TMA,
barriers, wgmma/tcgen05 through ``T.gemm``, warp-group register control — is already there), so
this package re-exports it; ``tilelang.cuda.language.intrinsics`` names the tensor-core emitter
classes where upstream code imports them.
"""

from tilelang.language import *  # noqa: F401,F403
from tilelang.cuda.language import intrinsics  # noqa: F401
