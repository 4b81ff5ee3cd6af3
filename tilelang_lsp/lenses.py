"""Runs in the language-server process.

Code lenses over kernel factories and the reports of their commands.

Two lenses sit on each kernel factory (and module-level ``@T.prim_func``): **Compile for
<target>** (command ``tilelang.compile``) and **Run** (``tilelang.run``), both with the arguments
``[document uri, factory name]``. The server executes them in its tools worker
(``worker_tools.compile_kernel`` / ``run_kernel``) and answers ``workspace/executeCommand`` with
``command_result``: ``{"kind", "ok", "title", "report" (Markdown), "data" (the worker's dict)}``
plus ``"cuda_source"`` and ``"language": "cuda"`` for a compile, which an editor opens as a new,
untitled document (the VS Code extension does). Pure formatting: no IO, no LSP types.
"""

from __future__ import annotations

COMPILE = "tilelang.compile"
RUN = "tilelang.run"
COMMANDS = (COMPILE, RUN)


def lenses_for(model, uri: str, target: str) -> list:
    """[{line, title, command, arguments}] for every kernel factory of ``model``."""
    out = []
    for factory in model.factories:
        line = factory.first_line
        args = [uri, factory.name]
        out.append({"line": line, "title": f"▶ Compile for {target}", "command": COMPILE, "arguments": args})
        out.append({"line": line, "title": "▶ Run", "command": RUN, "arguments": args})
    return out


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
