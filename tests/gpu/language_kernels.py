"""Small kernels exercising the language surface; shared by the GPU tests (which run them against
torch) and the CPU tests (which lower and compile them)."""

import tilelang
import tilelang.language as T


def dynamic_gemm(N=256, K=256, block_M=64, block_N=64, block_K=32):
    M = T.dynamic("M")

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return kernel


def split_k_gemm(M=128, N=128, K=512, splits=4, block_M=64, block_N=64, block_K=32):
    k_per = K // splits

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), splits, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(k_per // block_K, num_stages=2):
                T.copy(A[by * block_M, bz * k_per + k * block_K], A_s)
                T.copy(B[bz * k_per + k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l)
            T.atomic_add(C[by * block_M, bx * block_N], C_l)

    return kernel


def element_atomic(N=4096, bins=16):
    @T.prim_func
    def kernel(X: T.Tensor((N,), "int32"), H: T.Tensor((bins,), "int32")):
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            tx = T.get_thread_binding(0)
            i = bx * 256 + tx
            if i < N:
                T.atomic_add(H[X[i] % bins], 1)

    return kernel


def reductions(M=64, N=256):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Mn: T.Tensor((M,), "float32"), As: T.Tensor((M,), "float32"),
               Am: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((M, N), "float32")
            a = T.alloc_fragment((M,), "float32")
            b = T.alloc_fragment((M,), "float32")
            c = T.alloc_fragment((M,), "float32")
            T.copy(X, x)
            T.reduce_min(x, a, dim=1)
            T.reduce_abssum(x, b, dim=1)
            T.reduce_absmax(x, c, dim=-1)
            T.copy(a, Mn)
            T.copy(b, As)
            T.copy(c, Am)

    return kernel


def column_reduce(M=128, N=64):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((N,), "float32")
            T.copy(X, x)
            T.reduce_sum(x, s, dim=0)
            T.copy(s, S)

    return kernel


def cumsum_rows(M=32, N=128):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, N), "float32")
            T.copy(X, s)
            T.cumsum(s, dim=1)
            T.copy(s, Y)

    return kernel


def scalar_features(N=1024):
    """alloc_var, T.serial / T.unroll / T.vectorized, if_then_else, max_value, thread tuple."""

    @T.prim_func
    def kernel(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 256), threads=(32, 8)) as bx:
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            base = bx * 256 + ty * 32 + tx
            acc = T.alloc_var("float32")
            acc = 0.0
            for r in T.serial(4):
                acc = acc + T.cast(r, "float32")
            tmp = T.alloc_local((4,), "float32")
            for v in T.vectorized(4):
                tmp[v] = 1.0
            for u in T.unroll(4):
                acc = acc + tmp[u]
            if base < N:
                Y[base] = T.if_then_else(X[base] > 0, X[base] + acc, T.min(X[base], T.max_value("float32")))

    return kernel


def grid_3d(B=2, H=3, S=64):
    @T.prim_func
    def kernel(X: T.Tensor((B, H, S), "float16"), Y: T.Tensor((B, H, S), "float16")):
        with T.Kernel(S // 32, H, B, threads=32) as (bs, bh, bb):
            s = T.alloc_shared((32,), "float16")
            T.copy(X[bb, bh, bs * 32:(bs + 1) * 32], s)
            for i in T.Parallel(32):
                s[i] = s[i] * 2.0
            T.copy(s, Y[bb, bh, bs * 32:(bs + 1) * 32])

    return kernel


def annotated_swizzle(M=64, N=64):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, N), "float16")
            T.annotate_layout({s: tilelang.layout.make_swizzled_layout(s)})
            T.copy(X, s)
            T.copy(s, Y)

    return kernel


ALL = {
    "dynamic_gemm": dynamic_gemm, "split_k_gemm": split_k_gemm, "element_atomic": element_atomic,
    "reductions": reductions, "column_reduce": column_reduce, "cumsum_rows": cumsum_rows,
    "scalar_features": scalar_features, "grid_3d": grid_3d, "annotated_swizzle": annotated_swizzle,
}


def printed(M=4, N=8):
    """The same computation with T.print of a fragment, a shared buffer and a scalar."""

    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((M, N), "float32")
            x = T.alloc_fragment((M, N), "float32")
            T.copy(X, s)
            T.print(s, msg="s")
            T.copy(s, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] + 1.0
            T.print(x, msg="x")
            T.print(x[0, 0] if False else X[0, 0], msg="x00")
            T.copy(x, Y)

    return kernel


ALL["printed"] = printed


def custom_layout(M=32, N=64):
    """A padded shared layout (one extra column per row, the classic bank-conflict fix)."""

    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N, M), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, N), "float32")
            T.annotate_layout({s: T.Layout((M, N), lambda i, j: [i, j + i % 2])})
            T.copy(X, s)
            for j, i in T.Parallel(N, M):
                Y[j, i] = s[i, j]

    return kernel


ALL["custom_layout"] = custom_layout


def strided_copy(M=64, N=64, ld=80):
    """Read a (M, N) view of a wider tensor (row stride ld) through T.StridedTensor."""

    @T.prim_func
    def kernel(X: T.StridedTensor((M, N), (ld, 1), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, N), "float16")
            T.copy(X, s)
            T.copy(s, Y)

    return kernel


ALL["strided_copy"] = strided_copy


# Seed-style kernels written without looking at the compiler (coverage of unseen patterns).
def gemm_bias(M, N, K, block_M=128, block_N=128, block_K=64, threads=256):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), Bias: T.Tensor((N,), "float32"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_N, block_K), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] += Bias[bx * block_N + j]
            T.copy(C_local, C[by * block_M, bx * block_N])
    return kernel


def elementwise_global(N, BLOCK=256):
    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=128) as bx:
            for i in T.Parallel(BLOCK):
                if bx * BLOCK + i < N:
                    C[bx * BLOCK + i] = A[bx * BLOCK + i] * B[bx * BLOCK + i]
    return kernel


def reduce_shared(M, N, block_M=64, block_N=128):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            X_shared = T.alloc_shared((block_M, block_N), "float16")
            X_local = T.alloc_fragment((block_M, block_N), "float32")
            acc = T.alloc_fragment((block_M,), "float32")
            part = T.alloc_fragment((block_M,), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                T.copy(X[bx * block_M, k * block_N], X_shared)
                T.copy(X_shared, X_local)
                T.reduce_sum(X_local, part, dim=1)
                for i in T.Parallel(block_M):
                    acc[i] += part[i]
            T.copy(acc, Y[bx * block_M])
    return kernel


def serial_inner(M, N, block_M=64):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            acc = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], acc)
            for r in T.serial(3):
                for i, j in T.Parallel(block_M, N):
                    acc[i, j] = acc[i, j] * 0.5 + T.cast(r, "float32")
            T.copy(acc, Y[bx * block_M, 0])
    return kernel


def local_vec(N):
    @T.prim_func
    def kernel(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 512), threads=128) as bx:
            tx = T.get_thread_binding()
            buf = T.alloc_local((4,), "float32")
            for v in T.vectorized(4):
                buf[v] = X[bx * 512 + tx * 4 + v]
            for v in T.unroll(4):
                buf[v] = buf[v] * 2.0
            for v in T.vectorized(4):
                Y[bx * 512 + tx * 4 + v] = buf[v]
    return kernel


def gemm_rs_square(M, N, K):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 32), "float16")
            A_local = T.alloc_fragment((128, 32), "float16")
            B_shared = T.alloc_shared((32, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=3):
                T.copy(A[by * 128, k * 32], A_shared)
                T.copy(A_shared, A_local)
                T.copy(B[k * 32, bx * 128], B_shared)
                T.gemm(A_local, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 128])
    return kernel


ALL.update({"gemm_bias": lambda: gemm_bias(512, 512, 512), "elementwise_global": lambda: elementwise_global(1000),
            "reduce_shared": lambda: reduce_shared(1000, 1000), "serial_inner": lambda: serial_inner(256, 64),
            "local_vec": lambda: local_vec(4096), "gemm_rs_square": lambda: gemm_rs_square(512, 512, 512)})


def cumsum_fragment(M=64, N=32):
    """Prefix sums on a fragment (staged through shared memory), reversed, along dim 0."""

    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((M, N), "float32")
            T.copy(X, x)
            T.cumsum(x, dim=0, reverse=True)
            T.copy(x, Y)

    return kernel


ALL["cumsum_fragment"] = cumsum_fragment


def gemm_generic(M, N, K, dtype, accum, out_dtype, bm=64, bn=64, bk=32, threads=128, stages=2):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), accum)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return kernel


def batched_gemm(Bt, M, N, K, bm=64, bn=64, bk=32):
    @T.prim_func
    def kernel(A: T.Tensor((Bt, M, K), "float16"), B: T.Tensor((Bt, K, N), "float16"), C: T.Tensor((Bt, M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), Bt, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[bz, by * bm:(by + 1) * bm, k * bk:(k + 1) * bk], A_s)
                T.copy(B[bz, k * bk:(k + 1) * bk, bx * bn:(bx + 1) * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[bz, by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])
    return kernel


ALL.update({
    "gemm_bf16_f32": lambda: gemm_generic(256, 256, 256, "bfloat16", "float32", "float32"),
    "gemm_int8": lambda: gemm_generic(256, 256, 256, "int8", "int32", "int32", bk=64),
    "gemm_tf32": lambda: gemm_generic(256, 256, 256, "float32", "float32", "float32"),
    "gemm_fp16_accum": lambda: gemm_generic(256, 256, 256, "float16", "float16", "float16"),
    "gemm_bk16_2warps": lambda: gemm_generic(256, 256, 256, "float16", "float32", "float16", bk=16, threads=64),
    "batched_gemm": lambda: batched_gemm(4, 256, 256, 128),
})


def ragged_parallel(M=100, N=130, bm=64, bn=64):
    """Global accesses straight from T.Parallel on a tile that overhangs the tensor."""

    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] * 2.0

    return kernel


ALL["ragged_parallel"] = ragged_parallel


def a_in_registers(M=1024, K=64, blocks_k=16):
    """C[i] = sum_k A[i] B_k^T for 128-row blocks i and 64-row slices B_k of B, with A's tile
    copied into registers in front of a warp-specialised loop (attention's Q as the register
    operand of Q K^T): the tile is read only before the loop, while the producer already fills
    the ring."""

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((blocks_k * 64, K), "float16"),
               C: T.Tensor((M, 64), "float32")):
        with T.Kernel(M // 128, threads=128) as bx:
            A_s = T.alloc_shared((128, K), "float16")
            B_s = T.alloc_shared((64, K), "float16")
            A_r = T.alloc_fragment((128, K), "float16")
            acc = T.alloc_fragment((128, 64), "float32")
            T.copy(A[bx * 128, 0], A_s)
            T.copy(A_s, A_r)
            T.clear(acc)
            for k in T.Pipelined(blocks_k, num_stages=2):
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_r, B_s, acc, transpose_B=True)
            T.copy(acc, C[bx * 128, 0])

    return kernel
