"""analysis/fragments._split_element, the test behind TL0405, on hand-made iteration tables
(tests/fixtures/check/split_accumulation.py runs the whole check on a kernel)."""

import numpy as np

from tilelang.analysis.fragments import _split_element


def _table(threads_iters, elem_of):
    owners = np.array(threads_iters, dtype=np.int64)           # [T, L] flat iteration index
    return owners, [np.vectorize(elem_of)(owners)]


def test_an_element_whose_iterations_two_threads_share_is_split():
    # 4 iterations (i = it // 2, j = it % 2) of acc[i]: thread 0 runs j = 0, thread 1 j = 1
    owners, values = _table([[0, 2], [1, 3]], lambda it: it // 2)
    assert _split_element(owners, values, None) == (0, 1, 2)


def test_a_replicated_loop_whose_threads_each_run_every_iteration_is_not():
    # both threads run all iterations of both elements: each copy holds the whole sum
    owners, values = _table([[0, 1, 2, 3], [0, 1, 2, 3]], lambda it: it // 2)
    assert _split_element(owners, values, None) is None


def test_whole_rows_per_thread_are_not_split_and_a_guard_counts():
    owners, values = _table([[0, 1], [2, 3]], lambda it: it // 2)
    assert _split_element(owners, values, None) is None
    # iterations switched off by a body-wide guard do not count: only j = 0 runs
    owners, values = _table([[0, 2], [1, 3]], lambda it: it // 2)
    active = owners % 2 == 0
    assert _split_element(owners, values, active) is None
