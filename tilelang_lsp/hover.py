"""Runs in the language-server process.

Hover text (Markdown) from the hover data the worker computed with the diagnostics.

Inputs are ``tilelang.analysis.summary`` dicts (one per kernel build) and, for the kernel hover, the
last Compile lens result of the factory (registers from ptxas) and its last Run lens result
(measured time). Every function here is pure
formatting (the fragment picture aside): no IO, no LSP types, no tvm. What each hover shows:

- fragment: shape, dtype, where its layout came from, the layout in words, a thread x register
  table of the first threads, registers per thread and replication, and a picture of the layout
  (``layout_images``: drawn into the cache on the first hover, the one part that does IO);
- shared buffer: bytes x pipeline stages, swizzle, and the kernel's total against the target's
  per-block budget;
- ``T.gemm``: the instruction (wgmma on sm_90a, else mma.sync m16n8k16 with ldmatrix; ``tl::*gemm_ss/rs``)
  and the warp partition;
- ``T.Pipelined``: stages and copy mechanism;
- ``T.Kernel``: grid, threads, shared memory, registers and an occupancy estimate, then the
  roofline (``analysis.roofline``): FLOPs, global / DRAM / shared bytes, arithmetic intensity and
  the predicted time and bound on the architecture's GPU; after a Run lens, the measured time as
  a percentage of the roofline of the GPU it ran on (100 % = at the roofline).

Occupancy per SM follows the CUDA C Programming Guide's per-compute-capability limits (threads,
blocks, shared memory, 64K registers; 1 KiB of shared memory reserved per block; registers
allocated per warp in units of 256).
"""

from __future__ import annotations

KIB = 1024
# cc -> (max threads per SM, max blocks per SM, shared memory per SM in bytes)
SM_LIMITS = {70: (2048, 32, 96 * KIB), 75: (1024, 16, 64 * KIB), 80: (2048, 32, 164 * KIB),
             86: (1536, 16, 100 * KIB), 87: (2048, 32, 164 * KIB), 89: (1536, 24, 100 * KIB),
             90: (2048, 32, 228 * KIB), 100: (2048, 32, 228 * KIB), 120: (1536, 32, 100 * KIB)}
REGISTERS_PER_SM = 65536
RESERVED_SMEM = 1 * KIB


def kib(n) -> str:
    if n is None:
        return "unknown"
    return f"{n // KIB} KiB" if n % KIB == 0 else f"{n / KIB:.1f} KiB"


def _shape(entry) -> str:
    return f"{entry['dtype']}[{', '.join(str(s) for s in entry['shape'])}]"


def _footer(binding: str | None, others: int = 0) -> str:
    if not binding:
        return ""
    more = f" (and {others} other binding{'s' if others > 1 else ''})" if others else ""
    return f"\n\n_checked with {binding}{more}_"


def _cc(arch: str) -> int:
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 90


# ----- buffers ------------------------------------------------------------------------------------

def buffer_markdown(name: str, entry: dict, summary: dict, binding: str | None, others: int = 0) -> str:
    scope = entry["scope"]
    if "fragment" in entry:
        body = fragment_markdown(name, entry)
    elif scope.startswith("shared"):
        body = shared_markdown(name, entry, summary)
    else:
        size = f" · {kib(entry['bytes'])}" if entry.get("bytes") else ""
        body = f"**{name}** · {scope} `{_shape(entry)}`{size}"
        if scope == "local.fragment":
            body += "\n\nNo layout was inferred for this fragment (see the diagnostics)."
    return body + _footer(binding, others)


def fragment_markdown(name: str, entry: dict) -> str:
    frag = entry["fragment"]
    per_thread = frag["local_size"]
    lines = [f"**{name}** · fragment `{_shape(entry)}` · {kib(entry['bytes'])} over {frag['num_threads']} threads",
             "",
             f"- layout from {frag['origin'] or 'the default for parallel loops'}",
             f"- **{per_thread} value{'s' if per_thread != 1 else ''} per thread = {frag['registers']} "
             f"register{'s' if frag['registers'] != 1 else ''}/thread** ({entry['dtype']})",
             f"- replication {frag['replication']}: " + ("each element lives in exactly one thread"
                                                          if frag["replication"] == 1 else
                                                          f"each element is held by {frag['replication']} threads")]
    lines += [f"- {w}" for w in frag["axes"]]
    lines += ["", _table(frag["table"]), "", f"```text\n{frag['describe']}\n```"]
    if frag.get("picture"):
        # the one hover part that does IO: the layout drawn once into the cache (layout_images)
        from tilelang_lsp.layout_images import fragment_image_markdown

        lines += ["", fragment_image_markdown(name, entry)]
    return "\n".join(lines)


def _table(rows: list) -> str:
    if not rows or not rows[0]:
        return ""
    width = max(len(r) for r in rows)
    head = "| thread | " + " | ".join(f"r{i}" for i in range(width)) + " |"
    sep = "|---" * (width + 1) + "|"
    body = ["| t" + str(t) + " | " + " | ".join("(" + ",".join(map(str, c)) + ")" for c in row) + " |"
            for t, row in enumerate(rows)]
    return "\n".join([head, sep, *body])


def shared_markdown(name: str, entry: dict, summary: dict) -> str:
    size, stages = entry["bytes"], entry["stages"]
    staged = f"{kib(size)} × {stages} pipeline stages = **{kib(size * stages)}**" if size and stages > 1 \
        else f"**{kib(size)}**" + (" (not staged by a pipeline)" if size else "")
    lines = [f"**{name}** · shared `{_shape(entry)}`", "", f"- {staged}"]
    if entry.get("swizzle"):
        lines.append(f"- swizzle: {entry['swizzle']}")
    if entry.get("shares_with"):
        others = ", ".join(f"`{o}`" for o in entry["shares_with"])
        lines.append(f"- shares its bytes with {others} (never live at the same time)")
    lines.append("- " + budget_line(summary))
    return "\n".join(lines)


def budget_line(summary: dict) -> str:
    total, limit, arch = summary.get("smem_total"), summary.get("smem_limit"), summary.get("arch", "?")
    if total is None and summary.get("smem_runtime"):
        static = summary.get("smem_static") or 0
        return ("kernel total: " + (f"{kib(static)} + " if static else "") + " + ".join(summary["smem_runtime"])
                + f", sized at each launch (at most {kib(limit or 0)} per block on {arch})")
    if total is None or not limit:
        return "kernel total: unknown (a shared buffer has a symbolic shape)"
    share = 100.0 * total / limit
    verdict = "**over budget**" if total > limit else f"{share:.0f}%"
    return f"kernel total: {kib(total)} of {kib(limit)} per block on {arch} ({verdict})"


# ----- tile ops ------------------------------------------------------------------------------------

def gemm_markdown(g: dict, binding: str | None, others: int = 0) -> str:
    wm, wn = g["warp_m"], g["warp_n"]
    tile_m, tile_n = g["M"] // wm, g["N"] // wn
    if g.get("kind") == "wgmma":
        per = (tile_m // 64) * max(g["K"] // 16, 1)
        split = (f"- warpgroup partition: **{wm} warpgroup(s) along M**, each computes a {tile_m}×{tile_n} tile "
                 f"({per} wgmma of 64×{tile_n}×16 per warpgroup per call)")
    else:
        mmas = (tile_m // 16) * (tile_n // 8) * max(g["K"] // g["k_step"], 1)
        split = (f"- warp partition: **{wm} × {wn} warps**, each computes a {tile_m}×{tile_n} tile "
                 f"({tile_m // 16}×{tile_n // 8} mma tiles of 16×8, {mmas} mma per warp per call)")
    lines = [f"**T.gemm** `{g['c']}[{g['M']}×{g['N']}] += {g['a']}[{g['M']}×{g['K']}] · {g['b']}[{g['K']}×{g['N']}]`"
             f" ({g['a_dtype']} → {g['c_dtype']})", "",
             f"- instruction: `{g['instruction']}`",
             f"- via `{g['variant']}`",
             split,
             f"- transpose_A={g['trans_a']}, transpose_B={g['trans_b']}"]
    if g.get("why_not_wgmma"):
        lines.append(f"- not wgmma on sm_90a: {g['why_not_wgmma']}")
    return "\n".join(lines) + _footer(binding, others)


def pipeline_markdown(p: dict, summary: dict, binding: str | None, others: int = 0) -> str:
    staged = [summary["buffers"][n] for n in p["producers"] if n in summary.get("buffers", {})]
    ring = sum((b["bytes"] or 0) * b["stages"] for b in staged)
    lines = [f"**T.Pipelined** · {p['extent']} iterations · **num_stages={p['stages']}**", "",
             f"- copies: {p['mechanism']}"]
    if p["producers"]:
        lines.append(f"- staged tiles: {', '.join(p['producers'])} ({kib(ring)} of shared memory in all)")
    lines.append("- " + budget_line(summary))
    return "\n".join(lines) + _footer(binding, others)


def raster_markdown(r: dict, summary: dict, binding: str | None, others: int = 0) -> str:
    """``T.use_swizzle``: the A and B bytes a wave of blocks reads per K step with this panel,
    the best panel and plain order (``tilelang.analysis.raster``)."""
    gx, gy = r["grid"]
    kb = lambda n: f"{n / KIB:.0f} KiB"  # noqa: E731
    lines = [f"**T.use_swizzle** · panels of **{r['panel']}** block rows (blockIdx.y) · grid {gx} x {gy}", "",
             f"- about {r['wave']} blocks in flight (one per SM of {summary.get('gpu') or summary['arch']}) read "
             f"**{kb(r['bytes'])}** of A and B tiles per K step from L2 (averaged over the first waves; plain "
             f"order: {kb(r['plain_bytes'])})"]
    if r["best_panel"] != r["panel"] and r["best_bytes"] < r["bytes"]:
        lines.append(f"- `T.use_swizzle({r['best_panel']})` would read {kb(r['best_bytes'])} "
                     f"({100 * (1 - r['best_bytes'] / r['bytes']):.0f} % less)")
    else:
        lines.append("- the fewest bytes of any panel")
    lines.append("- fewer bytes: fewer L2 reads and DRAM refills, and a higher clock under the power cap "
                 "(assumes blockIdx.y picks the A tile and blockIdx.x the B tile, as in a GEMM)")
    return "\n".join(lines) + _footer(binding, others)


# ----- the kernel ----------------------------------------------------------------------------------

def occupancy(arch: str, threads: int, smem: int | None, registers: int | None) -> dict:
    """Resident blocks per SM and what limits them (an estimate)."""
    cc = _cc(arch)
    known = [k for k in SM_LIMITS if k <= cc]
    max_threads, max_blocks, smem_sm = SM_LIMITS[max(known)] if known else SM_LIMITS[80]
    limits = {"blocks": max_blocks, "threads": max_threads // max(threads, 1)}
    if smem:
        limits["shared memory"] = smem_sm // (smem + RESERVED_SMEM)
    if registers:
        warps = -(-threads // 32)
        per_warp = -(-registers * 32 // 256) * 256
        limits["registers"] = REGISTERS_PER_SM // (per_warp * warps)
    blocks = min(limits.values())
    by = sorted(k for k, v in limits.items() if v == blocks)
    return {"blocks": blocks, "limited_by": by, "warps": blocks * (-(-threads // 32)),
            "max_warps": max_threads // 32, "limits": limits}


def kernel_markdown(summary: dict, binding: str | None, compiled: dict | None, others: int = 0,
                    ran: dict | None = None) -> str:
    launch = summary.get("launch") or {}
    threads = launch.get("num_threads") or 0
    grid = " × ".join(str(g) for g in launch.get("grid", []))
    smem = summary.get("smem_total")
    regs = compiled.get("registers") if compiled else None
    lines = [f"**T.Kernel** · grid {grid} · **{threads} threads** ({threads // 32} warps)", "",
             "- shared memory: " + budget_line(summary)]
    if launch.get("written_threads"):
        lines.append(f"- thread widening: written for {launch['written_threads']} threads, launched with {threads} "
                     "(two warpgroups share the loop's fragments, which would not fit one thread's 255 registers "
                     "with " + f"{launch['written_threads']}; tl.enable_thread_widening=False keeps them)")
    if any(p.get("warp_specialized") for p in summary.get("pipelines", [])):
        lines.append(f"- warp-specialised: the block runs **{threads + 128} threads**, a TMA producer warpgroup "
                     f"after the {threads} consumer threads")
        threads += 128
    if summary.get("persistent"):
        lines.append("- persistent: a grid of min(tiles, SMs) blocks, each looping over output tiles (the "
                     "producer loads the next tile during the epilogue)")
        if summary.get("persistent_pairs"):
            gx = summary["persistent_pairs"]
            lines.append(f"  - its loop runs a number of times that depends on blockIdx.x: a block takes row blocks x "
                         f"and {gx - 1} - x together, whose loops together run the same number of times for every x"
                         + ("; the last rounds' pairs go out as single row blocks, longest first, so that the blocks "
                            "finish together" if summary.get("persistent_tail_split") else ""))
    elif summary.get("persistent_why"):
        lines.append(f"- one output tile per block, not a persistent grid: {summary['persistent_why']}")
    if summary.get("epilogue_stage"):
        at = ", ".join(f"line {n}" for n in summary["epilogue_stage"] if n)
        lines.append("- epilogue: the accumulator goes through a swizzled shared tile and TMA stores"
                     + (f" ({at}); counted in the shared memory above" if at else ""))
    for line, why in summary.get("epilogue_registers") or []:
        lines.append(f"- epilogue{f' (line {line})' if line else ''}: stored from registers, because {why} "
                     "(a shared-memory stage with TMA stores measured 3-4 % faster on an H200)")
    if regs is not None:
        spill = compiled.get("spill_stores") or 0
        bound = compiled.get("min_blocks_per_sm")
        lines.append(f"- registers: **{regs}/thread** from ptxas ({compiled.get('target')})"
                     + (f", {spill} bytes spilled" if spill else ", no spills")
                     + (f"; compiled under __launch_bounds__(T, {bound}) for one block more an SM (the "
                        "occupancy step; tl.enable_occupancy_step=False keeps the first build)" if bound else ""))
    else:
        lines.append(f"- registers: at least {summary.get('fragment_registers', 0)}/thread for fragments "
                     "(run the Compile lens for the ptxas count)")
    occ = occupancy(summary.get("arch", "sm_90a"), threads, smem, regs)
    lines.append(f"- occupancy estimate: **{occ['blocks']} block{'s' if occ['blocks'] != 1 else ''}/SM** "
                 f"({occ['warps']} of {occ['max_warps']} warps), limited by {', '.join(occ['limited_by'])}"
                 + ("" if regs is not None else "; registers not counted yet"))
    lines += roofline_lines(summary.get("roofline"), summary.get("arch", "?"), ran)
    return "\n".join(lines) + _footer(binding, others)


def amount(n: float, unit: str) -> str:
    """``35651584, "B"`` -> ``"35.7 MB"`` (decimal prefixes, as bandwidths are quoted)."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= factor:
            return f"{n / factor:.3g} {prefix}{unit}"
    return f"{n:.0f} {unit}"


def duration(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def roofline_lines(r: dict | None, arch: str, ran: dict | None = None) -> list:
    """The kernel hover's roofline lines (``analysis.roofline.on_arch`` dicts; ``ran``: the last
    Run lens result, whose ``roofline`` is estimated for the GPU it ran on)."""
    if not r:
        return []
    if "flops" not in r:
        return [f"- roofline: no estimate: {r.get('no_estimate')}"]
    work = (f"{amount(r['flops'], 'FLOP')} (T.gemm, {', '.join(sorted(r['flops_by_dtype']))})" if r["flops"] else
            "no T.gemm (elementwise arithmetic is not counted)")
    traffic = (f"{amount(r['global_bytes'], 'B')} requested from global memory by the blocks, "
               f"**{amount(r['dram_bytes'], 'B')} from DRAM** (each tensor once per direction; re-reads hit the L2)")
    shared = (f"{amount(r['shared_bytes'], 'B')} (tile copies and gemm operand reads per warp)"
              if r.get("shared_bytes") is not None else f"not estimated: {r.get('shared_why')}")
    out = [f"- work per launch: {work}", f"- traffic: {traffic}", f"- shared-memory traffic: {shared}"]
    if "time_s" not in r:
        return out + [f"- roofline: no estimate: {r.get('no_estimate')}"]
    intensity = "∞" if r.get("intensity") is None else f"{r['intensity']:.1f}"
    ridge = f" (ridge point {r['ridge']:.0f})" if r.get("ridge") else ""
    compute = ("no tensor-core work" if not r["flops"] else
               f"compute {duration(r['compute_s'])} at {r['peak_tflops']} TFLOP/s" if r.get("compute_s") is not None
               else "compute time unknown (no tensor-core peak for a gemm dtype)")
    out += [f"- arithmetic intensity: **{intensity} FLOP/B**{ridge}",
            f"- roofline on {r['device']} ({arch}): **{duration(r['time_s'])}, {r['bound']}-bound** "
            f"({compute}; memory {duration(r['memory_s'])} at {r['bandwidth_gbps']:.0f} GB/s)"]
    if ran and ran.get("ran") and ran.get("ms"):
        out.append("- last Run: " + run_summary(ran))
    return out


def run_summary(ran: dict) -> str:
    """``"0.41 ms on NVIDIA H200, 78 % of roofline (memory-bound)"`` of a Run lens result."""
    text = f"{duration(ran['ms'] / 1e3)} on {ran.get('device', 'the GPU')}"
    r, pct = ran.get("roofline") or {}, ran.get("roofline_percent")
    if pct is not None:
        text += f", **{pct:.0f} % of roofline** ({r.get('bound')}-bound, {duration(r['time_s'])} on {r.get('device')})"
    elif r.get("no_estimate"):
        text += f" (no roofline estimate: {r['no_estimate']})"
    return text


# ----- T members and fallbacks ----------------------------------------------------------------------

def member_markdown(prefix: str, member: dict) -> str:
    sig = member.get("signature") or ""
    text = f"```python\n{prefix}.{member['name']}{sig}\n```"
    if member.get("doc"):
        text += "\n\n" + member["doc"]
    return text


def pending_markdown(name: str, detail: str, reason: str) -> str:
    head = f"**{name}**" + (f" = `{detail}`" if detail else "")
    return f"{head}\n\n_{reason}_"
