"""Runs in the language-server process.

Code lenses over kernel factories and the reports of their commands.

Two lenses sit on each kernel factory (and module-level ``@T.prim_func``): **Compile for
<target>** (command ``tilelang.compile``) and **Run** (``tilelang.run``), both with the arguments
``[document uri, factory name]``. After a Run, the Run lens's title carries the measured time and its
percentage of the roofline estimate (``run_title``). The server executes them in its tools worker
(``worker_tools.compile_kernel`` / ``run_kernel``) and answers ``workspace/executeCommand`` with
``command_result``: ``{"kind", "ok", "title", "report" (Markdown), "data" (the worker's dict)}``
plus ``"cuda_source"`` and ``"language": "cuda"`` for a compile, which an editor opens as a new,
untitled document (the VS Code extension does). Pure formatting: no IO, no LSP types.
"""

from __future__ import annotations

COMPILE = "tilelang.compile"
RUN = "tilelang.run"
COMMANDS = (COMPILE, RUN)


def lenses_for(model, uri: str, target: str, runs: dict | None = None) -> list:
    """[{line, title, command, arguments}] for every kernel factory of ``model``; ``runs``
    (``{(uri, factory): run result}``) puts the last measured time in the Run lens's title."""
    out = []
    for factory in model.factories:
        line = factory.first_line
        args = [uri, factory.name]
        ran = (runs or {}).get((uri, factory.name))
        out.append({"line": line, "title": f"▶ Compile for {target}", "command": COMPILE, "arguments": args})
        out.append({"line": line, "title": "▶ Run" + (f" · last: {run_title(ran)}" if ran else ""),
                    "command": RUN, "arguments": args})
    return out


def _duration(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def run_title(r: dict) -> str:
    """``"0.41 ms, 78 % of roofline (memory-bound)"``: a Run result in a few words."""
    if r.get("error") or not r.get("ran"):
        return "failed" if r.get("error") else "not run"
    text = _duration(r["ms"] / 1e3)
    if r.get("roofline_percent") is not None:
        text += f", {r['roofline_percent']:.0f} % of roofline ({r['roofline']['bound']}-bound)"
    return text


def roofline_line(r: dict) -> str | None:
    """The Run report's roofline line: the estimate on the GPU the kernel ran on and the percentage
    the measured time reaches (100 % = at the roofline)."""
    est = r.get("roofline")
    if not est:
        return None
    if r.get("roofline_percent") is None:
        return f"- roofline: no estimate ({est.get('no_estimate', 'no time predicted')})"
    return (f"- **{r['roofline_percent']:.0f} % of roofline**: predicted {_duration(est['time_s'])} on "
            f"{est['device']}, {est['bound']}-bound (FLOPs over the tensor-core peak, DRAM bytes over "
            "the bandwidth: the kernel hover's numbers)")


def compile_report(r: dict) -> str:
    if r.get("error"):
        log = f"\n\n```text\n{r['log']}\n```" if r.get("log") else ""
        return f"**Compile failed**: {r['error']}{log}"
    spills = (r.get("spill_stores") or 0) + (r.get("spill_loads") or 0)
    smem = r.get("dynamic_smem", 0) + (r.get("static_smem") or 0)
    t = r.get("times", {})
    mix = ", ".join(f"{k} {v}" for k, v in r.get("instructions", {}).items() if v)
    lines = [f"**{r['factory']}** compiled for {r['target']} in {r['compile_ms'] / 1e3:.2f} s "
             f"(lower {t.get('lower_ms', 0):.0f} ms, PTX {t.get('ptx_ms', 0):.0f} ms, ptxas {t.get('ptxas_ms', 0):.0f} ms)",
             "",
             f"- registers: **{r.get('registers')}**/thread, spills: "
             + (f"**{r.get('spill_stores')} bytes stored, {r.get('spill_loads')} loaded**" if spills else "none"),
             f"- shared memory: {smem} bytes ({r.get('dynamic_smem', 0)} dynamic)",
             f"- grid {' × '.join(map(str, r.get('grid', [])))}, block {' × '.join(map(str, r.get('block', [])))}",
             f"- PTX instruction mix (static counts): {mix or 'none of the tracked families'}",
             f"- {r.get('binding', '')}"]
    return "\n".join(lines)


def run_report(r: dict) -> str:
    if r.get("error"):
        return f"**Run failed**: {r['error']}"
    if not r.get("ran"):
        return r.get("message", "nothing was run")
    speed = f"{r['tflops']:.1f} TFLOP/s" if r.get("tflops") else f"{r.get('gbps', 0):.1f} GB/s"
    lines = [f"**{r['factory']}** on {r['device']}: **{r['ms'] * 1e3:.1f} µs** ({speed})", f"- {r['binding']}"]
    if roofline_line(r):
        lines.append(roofline_line(r))
    if "reference_ms" in r:
        ratio = r["reference_ms"] / r["ms"] if r["ms"] else 0.0
        verdict = "outputs match" if r.get("matches_reference") else "**outputs differ**"
        lines.append(f"- ref_program: {r['reference_ms'] * 1e3:.1f} µs ({ratio:.2f}× speed-up), {verdict}")
    if r.get("mismatch"):
        lines.append(f"- {r['mismatch']}")
    if r.get("reference_error"):
        lines.append(f"- ref_program failed: {r['reference_error']}")
    return "\n".join(lines)


def command_result(kind: str, data: dict) -> dict:
    ok = not data.get("error") and data.get("ok", True)
    report = compile_report(data) if kind == "compile" else run_report(data)
    out = {"kind": kind, "ok": bool(ok), "title": f"TileLang {kind}: {data.get('factory', '')}",
           "report": report, "data": {k: v for k, v in data.items() if k != "cuda_source"}}
    if kind == "compile" and data.get("cuda_source"):
        out["cuda_source"] = data["cuda_source"]
        out["language"] = "cuda"
    return out


def refusal(kind: str, reason: str) -> dict:
    return {"kind": kind, "ok": False, "title": f"TileLang {kind}", "report": reason, "data": {"error": reason}}
