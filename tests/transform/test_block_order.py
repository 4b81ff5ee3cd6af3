"""``transform/block_order.py`` on CPU: a grid whose blocks loop a number of times that grows with
blockIdx.x is launched longest row block first, in sections of rows, where the block-scheduler
model predicts a gain; the plain order stays for a grid of many waves, a trip count read from
memory, a user's T.use_swizzle, and with ``tl.enable_longest_first_blocks`` False."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.transform import block_order

NB, B = 32, 64        # row blocks (blockIdx.x), columns a block


def prefix_blocks(rows, swizzle=False, data_count=False):
    """Y[:, bx block] = the sum of X's column blocks 0..bx, rows in 32-row blocks along
    blockIdx.y: block bx loops bx + 1 times (or Count[bx] times, ``data_count``)."""
    @T.prim_func
    def k(X: T.Tensor((rows, NB * B), "float32"), Count: T.Tensor((NB,), "int32"),
          Y: T.Tensor((rows, NB * B), "float32")):
        with T.Kernel(NB, rows // 32, threads=128) as (bx, by):
            if swizzle:
                T.use_swizzle(4)
            acc = T.alloc_fragment((32, B), "float32")
            t = T.alloc_shared((32, B), "float32")
            T.clear(acc)
            for i in T.serial(Count[bx] if data_count else bx + 1):
                T.copy(X[by * 32:(by + 1) * 32, i * B:(i + 1) * B], t)
                for a, c in T.Parallel(32, B):
                    acc[a, c] += t[a, c]
            T.copy(acc, Y[by * 32, bx * B])
    return k


def _src(func, **configs):
    return tilelang.lower(func, target="sm_90a", pass_configs=configs).source


def test_growing_trip_counts_launch_longest_first():
    src = _src(prefix_blocks(64 * 32))         # 2048 blocks
    # sections of 8 rows (the smallest divisor of 64 from ceil(132 / 32) = 5): row block 31 first
    bind = re.search(r"int bx_lf = \((.*)\);", src)
    assert bind is not None, src
    assert bind.group(1).startswith("31 - ") and "% 256) / 8" in bind.group(1)
    assert re.search(r"int by_lf = .*% 8\)", src)
    # the loop runs bx_lf + 1 times (TVM's simplifier substitutes the binding into the bound)
    assert re.search(r"for \(int i = 0; i < \(32 - ", src)
    assert "blockIdx.x) + 1)" not in src


def test_config_false_keeps_the_plain_order():
    src = _src(prefix_blocks(64 * 32), **{"tl.enable_longest_first_blocks": False})
    assert "_lf" not in src
    assert "for (int i = 0; i < (((int)blockIdx.x) + 1); ++i)" in src


@pytest.mark.parametrize("why", ["many waves", "data", "swizzle"])
def test_plain_order_stays(why):
    if why == "many waves":
        func = prefix_blocks(4096 * 32)        # 131072 blocks: past MAX_SIMULATED, the tail is nothing
    elif why == "data":
        func = prefix_blocks(64 * 32, data_count=True)
    else:
        func = prefix_blocks(64 * 32, swizzle=True)
    assert "_lf" not in _src(func)


def test_direction_and_sections():
    assert block_order.direction([1, 2, 3]) == 1
    assert block_order.direction([3, 3, 1]) == -1
    assert block_order.direction([2, 2, 2]) == 0
    assert block_order.direction([1, 3, 2]) == 0
    assert block_order.section_rows(256, 5) == 8      # a divisor: constant divisions
    assert block_order.section_rows(7, 5) == 7        # at most the rows there are
    assert block_order.section_rows(101, 5) == 5      # none within 2x: the last section shorter


def test_predicted_gain_follows_the_waves():
    causal = list(range(1, 33))
    few = block_order.predicted_gain(causal, 32, 8, 1, 132)       # 1024 blocks, one per SM
    many = block_order.predicted_gain(causal, 256, 8, 1, 132)     # 8192 blocks
    assert few > 1.10 and 1.0 <= many < block_order.MIN_GAIN
    # shrinking trip counts are already longest first within a row: sections still balance
    assert block_order.predicted_gain(causal[::-1], 32, 8, -1, 132) >= 1.0
    assert block_order.predicted_gain([4] * 32, 32, 8, 1, 132) == 1.0
