"""``T.rng_init`` / ``T.rng_rand`` / ``T.rng_rand_float`` (issue 17, deliverable 2): per-thread
Philox streams whose state the kernel declares where ``T.rng_init`` stands."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False


def _kernel(generator="curandStatePhilox4_32_10_t"):
    @T.prim_func
    def k(A: T.Tensor((256,), T.uint32), B: T.Tensor((256,), T.float32), C: T.Tensor((256,), T.float64)):
        with T.Kernel(2, threads=128) as bx:
            tx = T.get_thread_binding()
            T.rng_init(42, generator=generator)
            A[bx * 128 + tx] = T.rng_rand()
            B[bx * 128 + tx] = T.rng_rand_float() + T.rng_rand_float(dist="normal")
            C[bx * 128 + tx] = T.rng_rand_float(bit=64, dist="normal")

    return k


@pytest.mark.parametrize("generator", ["curandStatePhilox4_32_10_t", "curandStateXORWOW_t"])
def test_random_draws_use_the_threads_state(generator):
    art = tilelang.lower(_kernel(generator), "sm_80")
    body = art.source[art.source.index("__global__"):]
    for call in ("tl::rng_init((&(rng_state[0]))", "tl::rng_rand((&(rng_state[0])))",
                 "tl::rng_uniform_f32(", "tl::rng_normal_f32(", "tl::rng_normal_f64("):
        assert call in body, call
    # The default subsequence is the thread's global index.
    assert "blockIdx.x) * 128" in body
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, "sm_80", art.compile_flags)[:4] == b"\x7fELF"


def test_draw_without_init_and_bad_arguments_are_reported():
    with pytest.raises(Exception, match="needs T.rng_init"):
        @T.prim_func
        def k(A: T.Tensor((4,), T.uint32)):
            with T.Kernel(1, threads=4):
                A[0] = T.rng_rand()

    with pytest.raises(ValueError, match="generator"):
        T.rng_init(0, 0, 0, generator="mt19937")
    with pytest.raises(ValueError, match="bit"):
        T.rng_rand_float(bit=16)
