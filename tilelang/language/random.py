"""Per-thread random numbers: ``T.rng_init(seed, seq, off)``, then ``T.rng_rand()`` (uint32) and
``T.rng_rand_float(bit, dist)`` (uniform in (0, 1] or standard normal).

``T.rng_init`` declares the calling thread's generator state (a 12-word local array, see
``src/tl/random.h``) where it stands; the draws of the same kernel use it. Every generator name
upstream accepts (curand's Philox, XORWOW and MRG32k3a states) gets the Philox4x32-10 generator:
streams are independent per (seed, subsequence) and reproducible, but not curand's bit patterns.
"""

from __future__ import annotations

from tvm import tirx
from tvm.tirx.script.builder import ir as builder
from tvm.script.ir_builder.base import IRBuilder

from ._ops import as_expr

GENERATORS = ("curandStateMRG32k3a_t", "curandStatePhilox4_32_10_t", "curandStateXORWOW_t")
_STATE_WORDS = 12
_last = {"builder": None, "state": None}   # the kernel being built and its generator state


def _u64(value):
    value = as_expr(value)
    return tirx.Cast("uint64", value) if str(value.ty.dtype) != "uint64" else value


def rng_init(seed, seq=None, off=0, generator="curandStatePhilox4_32_10_t"):
    """Start this thread's generator at subsequence ``seq`` (default: the thread's global index)
    and offset ``off`` of the stream of ``seed``."""
    from .kernel import get_block_binding, get_thread_binding, get_thread_extent

    if generator not in GENERATORS:
        raise ValueError(f"T.rng_init: generator must be one of {GENERATORS}, got {generator!r}")
    if seq is None:
        seq = get_thread_binding() + get_block_binding() * get_thread_extent()
    state = builder.alloc_buffer((_STATE_WORDS,), "uint32", scope="local")
    IRBuilder.name("rng_state", state)
    # The analyses see a buffer whose address goes to a call as read there; a first store says
    # the state is this thread's own from here on (nvcc drops it: rng_init overwrites the word).
    builder.buffer_store(state, tirx.IntImm("uint32", 0), [0])
    _last.update(builder=IRBuilder.current(), state=state)
    return tirx.call_extern("int32", "tl::rng_init", _address(state), _u64(seed), _u64(seq), _u64(off))


def _address(state):
    return tirx.address_of(tirx.BufferLoad(state, [tirx.IntImm("int32", 0)]))


def _state(what):
    owner = _last["builder"]
    if owner is None or not IRBuilder.is_in_scope() or not owner.same_as(IRBuilder.current()):
        raise RuntimeError(f"T.{what} needs T.rng_init earlier in the kernel")
    state = _last["state"]
    if state is None:
        raise RuntimeError(f"T.{what} needs T.rng_init earlier in the kernel")
    return state


def rng_rand():
    """The next 32 random bits of this thread's generator."""
    return tirx.call_extern("uint32", "tl::rng_rand", _address(_state("rng_rand")))


def rng_rand_float(bit=32, dist="uniform"):
    """A random float32/float64: ``dist`` "uniform" in (0, 1] or "normal" (mean 0, variance 1)."""
    if bit not in (32, 64):
        raise ValueError(f"T.rng_rand_float: bit must be 32 or 64, got {bit}")
    if dist not in ("uniform", "normal"):
        raise ValueError(f"T.rng_rand_float: dist must be 'uniform' or 'normal', got {dist!r}")
    fn = f"tl::rng_{dist}_f{bit}"
    return tirx.call_extern(f"float{bit}", fn, _address(_state("rng_rand_float")))


__all__ = ["rng_init", "rng_rand", "rng_rand_float"]
