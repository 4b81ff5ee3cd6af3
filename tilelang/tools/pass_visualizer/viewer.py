"""The pass browser: the structure tree of a kernel after every stage of our lowering, as one
self-contained HTML file (and a text twin for grep).

    python -m tilelang.tools.pass_visualizer.viewer kernel.py --set M=1024 --set N=1024 --set K=1024 \\
        --set block_M=128 --set block_N=128 --set block_K=32 [--factory NAME] [--target sm_90a] [--out x.html]

Contract:
- ``build_pass_data(path, factory, target, kwargs, source)`` imports ``path``, takes the kernel
  named ``factory`` (else the first ``@tilelang.jit`` kernel found), builds its PrimFunc with
  ``kwargs`` and runs ``CUDAPassPipelineBodyPrologue(mod, target)`` (our pipeline's TIR stages,
  ``analyze_kernel`` .. ``lower_tile_ops``, each as a TVM pass ``tl.<stage>``; the static checks
  run first and stop a bad kernel with its diagnostics; codegen is not a stage) under a
  ``StructureTreePassInstrument``, so the stages shown are the passes that actually ran. The
  kernel's pass configs are the jit decorator's over the PrimFunc's, as a compile uses them.
  Returns ``(kernel name, stages)``: "source code" (flag ``source``), "(input)" (``input``),
  then ``[NN] <pass>`` (``changed`` / ``no-op``), each with ``rows`` diffed against the tree
  before that pass (``t``: equal/add/del, ``s`` text, ``h`` highlighted HTML, ``op`` tile op).
  A target that is not CUDA is a ``ValueError``. Only a kernel's first ``T.Kernel`` is shown.
- ``emit_html(name, stages)`` / ``emit_txt(name, stages)`` return the browser / the text dump.
"""

from __future__ import annotations

import argparse
import difflib
import html
import json
import os
import re
import sys

import tvm

from tilelang.tools.pass_visualizer import core as M

__all__ = ["CUDAPassPipelineBodyPrologue", "build_pass_data", "emit_html", "emit_txt", "main",
           "run_pipeline_stages"]

_PASS_CONFIGS: dict = {}     # the configs of the kernel being viewed (set by build_pass_data)
_SKIPPED_STAGES = ("check", "emit_cuda")   # run before the stages / not TIR
LAYOUTS_ATTR = "tl.inferred_layouts"       # (viewer only) the layouts chosen so far, one per line


def run_pipeline_stages(mod, target):
    """Run our pipeline's TIR stages on ``mod``'s kernel, each as a TVM module pass named
    ``tl.<stage>`` (what an instrument in the current PassContext sees); returns the lowered module."""
    from tilelang.engine.lower import LowerState, normalize_target
    from tilelang.engine.pipeline import PASSES
    from tilelang.transform.kernel import split_kernels
    from tilelang.transform.pointer_ops import lower_pointer_ops
    from tilelang.utils.pass_diff import layout_lines

    funcs = [(gv, f) for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    if len(funcs) != 1:
        raise ValueError(f"pass visualizer: expected one PrimFunc in the module, got {len(funcs)}")
    gv, func = funcs[0]
    split = split_kernels(func)
    if split is not None:
        func = split.funcs[0]
    st = LowerState(func, normalize_target(target), gv.name_hint, dict(_PASS_CONFIGS))
    st.func = lower_pointer_ops(st.func)
    stages = [(name, run) for name, run in PASSES if name not in _SKIPPED_STAGES]
    for name, run in PASSES:
        if name == "check":
            run(st)

    def stage_pass(name, run):
        def apply(_mod, _ctx):
            run(st)
            func = st.lowered if st.lowered is not None else st.func
            lines = layout_lines(st.layouts)
            if lines:   # what infer_layouts decided, shown among the attrs of the tree
                func = func.with_attr(LAYOUTS_ATTR, "\n".join(lines))
            return tvm.IRModule({gv.name_hint: func})

        return tvm.transform.module_pass(apply, opt_level=0, name=f"tl.{name}")

    for name, run in stages:
        mod = stage_pass(name, run)(mod)
    return mod


# Upstream's name for the pipeline entry the viewer observes (tests replace it by that name).
CUDAPassPipelineBodyPrologue = run_pipeline_stages


# ----------------------------------------------------------------------------- rows
_TILE_OPS = tuple(M._TILE_OP_FIELDS) + ("clear", "cummax", "finalize_reducer", "reducer_init", "reducer_update")
_SYNC_OPS = ("tvm_storage_sync", "__syncthreads", "named_barrier_sync", "mbarrier_wait", "mbarrier_arrive",
             "fence_proxy_async", "barrier_arrive", "barrier_wait")
_HW_OPS = ("ptx_mma", "ptx_ldmatrix", "wgmma", "tma_load", "tma_store", "cp_async", "tvm_access_ptr", "mma_sync")
_TILE_RE = re.compile(r"\bT\.(" + "|".join(map(re.escape, _TILE_OPS)) + r")\b")
_SYNC_RE = re.compile(r"\b(?:T\.|tl::)?(" + "|".join(map(re.escape, _SYNC_OPS)) + r")\w*")
_HW_RE = re.compile(r"\b(?:T\.|tl::)?(" + "|".join(map(re.escape, _HW_OPS)) + r")\w*")
_NODE_RE = re.compile(r"\b(PrimFunc|AttrStmt|For|While|IfThenElse|Evaluate|BufferStore|AllocBuffer|DeclBuffer|Bind|"
                      r"LetStmt)\b")


def _highlight(line: str) -> str:
    text = html.escape(line)
    text = _TILE_RE.sub(r'<span class="op-tile">\g<0></span>', text)
    text = _SYNC_RE.sub(r'<span class="op-sync">\g<0></span>', text)
    text = _HW_RE.sub(r'<span class="op-hw">\g<0></span>', text)
    return _NODE_RE.sub(r'<span class="node">\1</span>', text)


def _row(kind, line) -> dict:
    return {"t": kind, "s": line, "h": _highlight(line), "op": bool(_TILE_RE.search(line))}


def _diff_rows(before, after) -> list[dict]:
    """``after`` as rows, with the lines ``before`` had and ``after`` lacks shown as ``del``."""
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, list(before), list(after), autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [_row("equal", s) for s in after[j1:j2]]
            continue
        rows += [_row("del", s) for s in before[i1:i2]]
        rows += [_row("add", s) for s in after[j1:j2]]
    return rows


# ----------------------------------------------------------------------------- data
def build_pass_data(path: str, factory: str | None, target, kwargs: dict, source: str):
    """(kernel name, stages) for the kernel in ``path`` (module docstring)."""
    from tilelang.language.builtins import kernel_pass_configs
    from tilelang.transform.pass_config import normalize

    module = M.load_user_module(path)
    if factory is not None:
        if not hasattr(module, factory):
            raise ValueError(f"pass visualizer: no '{factory}' in {path}")
        kernels = {factory: getattr(module, factory)}
    else:
        kernels = M.discover_jit_kernels(module)
        if not kernels:
            raise ValueError(f"pass visualizer: no @tilelang.jit kernel in {path} (name a factory with --factory)")
    name, kernel = next(iter(kernels.items()))
    func = M.kernel_to_tir(kernel, **dict(kwargs or {}))
    mod, resolved = M.build_module(func, target=target)
    if resolved.kind.name != "cuda":
        raise ValueError(f"Pass Visualizer currently supports only CUDA targets, got {resolved.kind.name!r}")
    configs = {**normalize(kernel_pass_configs(func)), **dict(getattr(kernel, "pass_configs", None) or {})}

    instrument = M.StructureTreePassInstrument()
    global _PASS_CONFIGS
    saved, _PASS_CONFIGS = _PASS_CONFIGS, configs
    try:
        with tvm.transform.PassContext(opt_level=3, instruments=[instrument]):
            mod = CUDAPassPipelineBodyPrologue(mod, resolved)
    finally:
        _PASS_CONFIGS = saved

    stages = [{"name": "source code", "flag": "source", "rows": [_row("equal", s) for s in source.split("\n")]}]
    first = instrument.input_lines if instrument.input_lines is not None else M.capture_structure(mod)
    stages.append({"name": "(input)", "flag": "input", "rows": _diff_rows([], first)})
    for k, record in enumerate(instrument.ordered_records(), 1):
        stages.append({"name": f"[{k:02d}] {record.name.rsplit('.', 1)[-1]}",
                       "flag": "changed" if record.changed else "no-op",
                       "rows": _diff_rows(record.before_lines, record.after_lines)})
    return name, stages


# ----------------------------------------------------------------------------- output
def emit_txt(name: str, stages) -> str:
    """The stages as text: each tree with ``+``/``-`` marks on what its pass changed."""
    out = [f"kernel: {name}", ""]
    marks = {"add": "+ ", "del": "- ", "equal": "  "}
    for stage in stages:
        out.append(f"===== {stage['name']}  ({stage['flag']})")
        out += [marks[r["t"]] + r["s"] for r in stage["rows"]]
        out.append("")
    return "\n".join(out) + "\n"


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Pass browser - @TITLE@</title>
<style>
:root { --bg:#1c1d21; --fg:#d5d7dc; --panel:#25272d; --line:#3a3d45; --sel:#25406b; --muted:#858a94;
  --add-bg:#183321; --add:#7fd48a; --del-bg:#3a1e21; --del:#e07f86; }
* { box-sizing:border-box; }
body { margin:0; display:flex; height:100vh; overflow:hidden; background:var(--bg); color:var(--fg);
  font:13px/1.5 ui-monospace, Menlo, Consolas, monospace; }
#left { width:340px; flex-shrink:0; overflow-y:auto; background:var(--panel); border-right:1px solid var(--line); }
#left h2 { margin:0; padding:10px 14px; font-size:12px; color:var(--muted); letter-spacing:.06em;
  text-transform:uppercase; border-bottom:1px solid var(--line); position:sticky; top:0; background:var(--panel); }
.pass { padding:7px 14px; cursor:pointer; display:flex; gap:8px; border-bottom:1px solid #2c2e34; white-space:nowrap; }
.pass:hover { background:#2e3038; } .pass.sel { background:var(--sel); }
.pass .nm { flex:1; overflow:hidden; text-overflow:ellipsis; }
.badge { font-size:10px; padding:0 7px; border-radius:9px; background:#33363e; color:var(--muted); }
.badge.changed { background:var(--add-bg); color:var(--add); } .badge.source { color:#f0b36a; }
.delta { font-size:10px; color:var(--muted); }
#right { flex:1; overflow:auto; }
#head { position:sticky; top:0; padding:9px 16px; background:var(--panel); border-bottom:1px solid var(--line); }
#tree { margin:0; padding:8px 0; }
.r { padding:0 16px; white-space:pre; } .r.add { background:var(--add-bg); color:var(--add); }
.r.del { background:var(--del-bg); color:var(--del); opacity:.7; text-decoration:line-through; }
.node { color:#5fc9b5; }
.op-tile { background:#e8923a; color:#1c1d21; font-weight:700; padding:0 3px; border-radius:3px; }
.op-sync { background:#9b7cf0; color:#1c1d21; font-weight:700; padding:0 3px; border-radius:3px; }
.op-hw { background:#5aaed0; color:#1c1d21; padding:0 3px; border-radius:3px; }
</style></head>
<body>
<div id="left"><h2>Pass browser: @TITLE@</h2><div id="passlist"></div></div>
<div id="right"><div id="head"></div><div id="tree"></div></div>
<script>
const STAGES = @DATA@;
const list = document.getElementById('passlist'), tree = document.getElementById('tree'),
      head = document.getElementById('head');
let current = 0;
function esc(s) { return s.replace(/&/g, '&amp;').replace(/</g, '&lt;'); }
STAGES.forEach((st, i) => {
  const add = st.rows.filter(r => r.t === 'add').length, del = st.rows.filter(r => r.t === 'del').length;
  const el = document.createElement('div');
  el.className = 'pass';
  el.innerHTML = '<span class="nm">' + esc(st.name) + '</span>' +
    (st.flag === 'changed' ? '<span class="delta">+' + add + ' -' + del + '</span>' : '') +
    '<span class="badge ' + st.flag + '">' + st.flag + '</span>';
  el.onclick = () => show(i);
  list.appendChild(el);
});
function show(i) {
  current = i;
  [...list.children].forEach((el, k) => el.classList.toggle('sel', k === i));
  head.textContent = STAGES[i].name + '  (' + STAGES[i].flag + ')';
  tree.innerHTML = STAGES[i].rows.map(r => '<div class="r ' + r.t + '">' + (r.h || '&nbsp;') + '</div>').join('');
}
document.addEventListener('keydown', e => {
  if (e.key === 'ArrowDown' && current < STAGES.length - 1) { show(current + 1); e.preventDefault(); }
  if (e.key === 'ArrowUp' && current > 0) { show(current - 1); e.preventDefault(); }
});
show(STAGES.length > 2 ? 2 : 0);
</script>
</body></html>
"""


def emit_html(name: str, stages) -> str:
    """The self-contained browser: pass list on the left (arrow keys step), tree on the right."""
    data = json.dumps(list(stages)).replace("</", "<\\/")
    return _PAGE.replace("@TITLE@", html.escape(str(name))).replace("@DATA@", data)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilelang.tools.pass_visualizer.viewer",
                                     description="Structure tree of a kernel after each lowering stage, as HTML.")
    parser.add_argument("path", help="Python file with a @tilelang.jit kernel")
    parser.add_argument("--factory", default=None, help="the kernel to show (default: the first found)")
    parser.add_argument("--target", default="auto", help="CUDA target: auto, sm_90a, sm_80...")
    parser.add_argument("--set", dest="assignments", action="append", default=[], metavar="K=V",
                        help="an argument of the kernel factory (repeatable)")
    parser.add_argument("--out", default=None, help="output HTML (default: <kernel>_passes.html beside the source)")
    args = parser.parse_args(argv)
    with open(args.path, encoding="utf-8") as f:
        source = f.read()
    name, stages = build_pass_data(args.path, args.factory, args.target, M.parse_assignments(args.assignments),
                                   source)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.path)), f"{name}_passes.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(emit_html(name, stages))
    txt = os.path.splitext(out)[0] + ".txt"
    with open(txt, "w", encoding="utf-8") as f:
        f.write(emit_txt(name, stages))
    print(f"pass browser: {out}\ntext dump:    {txt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
