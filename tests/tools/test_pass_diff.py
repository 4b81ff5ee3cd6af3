"""tilelang.utils.pass_diff / pass_diff_hook and the ThreadSync pass they are shown with."""

import os
import re

import pytest
import tvm
from tvm.script import tirx as TS

import tilelang
import tilelang.language as T
from tilelang.env import env
from tilelang.utils import pass_diff_hook
from tilelang.utils.pass_diff import (_compute_diff, _generate_html, _parse_diff_into_rows, _split_rows_by_hunk,
                                      pass_diff)


@pytest.fixture(autouse=True)
def _no_hook(monkeypatch):
    monkeypatch.setenv("TILELANG_PASS_DIFF", "0")
    monkeypatch.delenv("TILELANG_PASS_DIFF_OUTPUT", raising=False)
    pass_diff_hook.uninstall_pass_diff_hook()
    yield
    pass_diff_hook.uninstall_pass_diff_hook()


@T.prim_func
def add_one(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        tid = T.get_thread_binding()
        B[tid] = A[tid] + 1.0


@T.prim_func
def staged(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        S = T.alloc_shared((128,), "float32")
        T.copy(A, S)
        T.copy(S, B)


def _shifted_read():
    @TS.prim_func(private=True)
    def func(A: TS.Buffer((16,), "float32"), E: TS.Buffer((16,), "float32")):
        _bx = TS.launch_thread("blockIdx.x", 1)
        S = TS.alloc_buffer((16,), "float32", scope="shared")
        D = TS.alloc_buffer((16,), "float32", scope="shared.dyn")
        tx = TS.launch_thread("threadIdx.x", 16)
        S_1 = TS.decl_buffer((16,), data=S.data, scope="shared")
        D_1 = TS.decl_buffer((16,), data=D.data, scope="shared.dyn")
        A_1 = TS.decl_buffer((16,), data=A.data)
        E_1 = TS.decl_buffer((16,), data=E.data)
        S_1[tx] = A_1[tx]
        E_1[tx] = S_1[(tx + 1) % 16]
        D_1[tx] = A_1[tx]
        E_1[tx] = D_1[(tx + 3) % 16]

    return func


def _syncs(text, scope="shared"):
    return text.count(f'T.tvm_storage_sync("{scope}")')


# ------------------------------------------------------------------ ThreadSync
def test_thread_sync_places_one_barrier_per_scope():
    mod = tvm.IRModule({"main": _shifted_read()})
    shared = tilelang.transform.ThreadSync("shared")(mod).script()
    dyn = tilelang.transform.ThreadSync("shared.dyn")(mod).script()
    assert (_syncs(shared), _syncs(shared, "shared.dyn")) == (1, 0)
    assert (_syncs(dyn), _syncs(dyn, "shared.dyn")) == (0, 1)
    # the barrier sits right before the read of the other thread's element
    lines = shared.splitlines()
    k = next(i for i, line in enumerate(lines) if "tvm_storage_sync" in line)
    assert "S_1[(tx + 1) % 16]" in lines[k + 1]


def test_thread_sync_loop_carried_and_divergent_branches():
    @TS.prim_func(private=True)
    def func(A: TS.Buffer((64,), "float32")):
        S = TS.alloc_buffer((32,), "float32", scope="shared")
        tx = TS.launch_thread("threadIdx.x", 32)
        S_1 = TS.decl_buffer((32,), data=S.data, scope="shared")
        A_1 = TS.decl_buffer((64,), data=A.data)
        for k in range(2):
            S_1[tx] = A_1[k * 32 + tx]
            A_1[k * 32 + tx] = S_1[31 - tx]
        if tx < 16:
            S_1[tx] = TS.float32(0)
            A_1[tx] = S_1[tx + 16]

    text = tilelang.transform.ThreadSync("shared")(tvm.IRModule({"main": func})).script()
    lines = [line.strip() for line in text[text.index("for k"):text.index("if tx < 16")].splitlines()]
    # in the loop: before the read, and at the end of the iteration (the next write races with
    # this read); after it, before the branch writing S (conservative: the loop is one statement)
    assert lines[1:6] == ["S_1[tx] = A_1[k * 32 + tx]", 'T.tvm_storage_sync("shared")',
                          "A_1[k * 32 + tx] = S_1[31 - tx]", 'T.tvm_storage_sync("shared")',
                          'T.tvm_storage_sync("shared")']
    # never inside a branch only some threads take
    assert _syncs(text[text.index("if tx < 16"):]) == 0


def test_thread_sync_rejects_other_scopes():
    with pytest.raises(ValueError, match="storage scope must be one of"):
        tilelang.transform.ThreadSync("global")


@pytest.mark.parametrize("order,call", [(0, "tl::atomic_add("), (3, "tl::atomic_add_ordered<2>("),
                                        (2, "tl::atomic_add_ordered<1>("), (5, "tl::atomic_add_ordered<3>(")])
def test_atomic_add_elem_op_lowers_to_device_atomic(order, call):
    """std::memory_order's numbering: 0 relaxed, 2 acquire, 3 release, 5 seq_cst."""
    from tilelang.codegen.cuda import emit_cuda

    @TS.prim_func(private=True)
    def func(A: TS.Buffer((128,), "float32")):
        _bx = TS.launch_thread("blockIdx.x", 1)
        tx = TS.launch_thread("threadIdx.x", 128)
        A_1 = TS.decl_buffer((128,), data=A.data)
        TS.evaluate(TS.call_intrin("float32", tvm.ir.Op.get("tl.atomic_add_elem_op"),
                                   TS.tvm_access_ptr(TS.type_annotation("float32"), A_1.data, tx, 1, 3),
                                   TS.float32(1), TS.int32(order)))

    # one statement of atomics from every thread: nothing to order
    mod = tilelang.transform.ThreadSync("shared")(tvm.IRModule({"main": func}))
    assert "tvm_storage_sync" not in mod.script()
    source = emit_cuda(mod["main"], "sm_90a", "atomic_k").source
    assert call in source


# ------------------------------------------------------------------ pass_diff
def test_pass_diff_chain_names_and_counts(capsys):
    steps = pass_diff(_shifted_read(), [("sync", tilelang.transform.ThreadSync("shared")),
                                        tvm.tirx.transform.Simplify()], mode="terminal", context=1)
    assert [s["name"] for s in steps] == ["sync", "tirx.Simplify"]
    first = steps[0]
    assert first["changed"] and (first["insertions"], first["deletions"]) == (1, 0)
    added = [line for line in first["diff_lines"] if line.startswith("+") and not line.startswith("+++")]
    assert [line.replace(" ", "") for line in added] == ['+T.tvm_storage_sync("shared")']
    assert steps[1]["before_script"] == first["after_script"]
    out = capsys.readouterr().out
    assert "Pass 1/2: sync" in out and "Pass 2/2: tirx.Simplify" in out


def test_pass_diff_rejects_bad_mode_and_inputs():
    with pytest.raises(ValueError, match="mode must be one of"):
        pass_diff(_shifted_read(), tvm.tirx.transform.Simplify(), mode="pdf")
    with pytest.raises(TypeError, match="expected a PrimFunc or an IRModule"):
        pass_diff("not ir", tvm.tirx.transform.Simplify())


def test_rows_keep_line_numbers_and_pair_replacements():
    before = [f"l{i}" for i in range(1, 31)]
    after = list(before)
    after[9] = "changed"
    del after[20]
    diff = _compute_diff(before, after, 2)
    rows, sections = _parse_diff_into_rows(diff, before, after, max_expand=5)
    pair = next(r for r in rows if r["type"] == "pair")
    assert (pair["left"], pair["right"], pair["left_num"], pair["right_num"]) == ("l10", "changed", 10, 10)
    deleted = next(r for r in rows if r["type"] == "del")
    assert (deleted["left"], deleted["left_num"]) == ("l21", 21)
    assert len(_split_rows_by_hunk(rows)) == 2
    first_up = sections[0]
    assert (first_up["hunk_idx"], first_up["position"], first_up["count"]) == (0, "before", 5)
    assert [line["left_num"] for line in first_up["lines"]] == [3, 4, 5, 6, 7]
    last = sections[-1]
    assert last["position"] == "after" and last["lines"][0]["left_num"] == 24


def test_html_report_is_self_contained(tmp_path):
    path = str(tmp_path / "sub" / "report.html")
    steps = pass_diff(_shifted_read(), [("sync <1>", tilelang.transform.ThreadSync("shared"))], mode="html",
                      html_path=path)
    text = open(path, encoding="utf-8").read()
    assert text.startswith("<!DOCTYPE html>") and "sync &lt;1&gt;" in text
    assert "http://" not in text and "https://" not in text      # no external resources
    assert 'class="pass-section open"' in text and "+1" in text
    assert re.search(r'<span class="hl">[^<]*tvm_storage_sync', text) is None   # an added line, not a pair
    assert "tvm_storage_sync" in text
    assert _generate_html(steps, path) == path


# ------------------------------------------------------------------ hook
def test_env_modes(monkeypatch):
    for value, mode in (("off", None), ("", None), ("ON", "terminal"), ("html", "html"), ("Both", "both"),
                        ("whatever", "terminal")):
        monkeypatch.setenv("TILELANG_PASS_DIFF", value)
        assert env.get_pass_diff_mode() == mode


def test_hook_shows_every_stage_of_a_real_compile(monkeypatch, capsys):
    from tvm.ir.transform import Pass

    import importlib

    lower_mod = importlib.import_module("tilelang.engine.lower")
    original = Pass.__call__
    monkeypatch.setenv("TILELANG_PASS_DIFF", "terminal")
    pass_diff_hook.install_pass_diff_hook()
    assert Pass.__call__ is not original and pass_diff_hook._observe in lower_mod.PASS_OBSERVERS
    tilelang.lower(staged, target="sm_90a")
    out = capsys.readouterr().out
    for stage in ("check", "analyze_kernel", "infer_layouts", "lower_tile_ops", "emit_cuda"):
        assert f": {stage} [kernel staged]" in out
    assert "# ---- layouts (infer_layouts) ----" in out and "# shared S: SharedLayout" in out
    assert "+extern \"C\" __global__" in re.sub(r"\x1b\[[0-9;]*m", "", out)   # the CUDA, as insertions
    pass_diff_hook.uninstall_pass_diff_hook()
    assert Pass.__call__ is original and pass_diff_hook._observe not in lower_mod.PASS_OBSERVERS
    tilelang.lower(add_one, target="sm_90a")
    assert "lower_tile_ops" not in capsys.readouterr().out


def test_hook_html_report(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_PASS_DIFF", "html")
    monkeypatch.setenv("TILELANG_PASS_DIFF_OUTPUT", str(tmp_path / "out"))
    pass_diff_hook.install_pass_diff_hook()
    path = pass_diff_hook._html_path
    assert os.path.dirname(path) == str(tmp_path / "out") and os.path.basename(path).startswith("pass_diff_")
    tilelang.lower(add_one, target="sm_90a")
    text = open(path, encoding="utf-8").read()
    assert "lower_tile_ops [kernel add_one]" in text and "emit_cuda [kernel add_one]" in text
