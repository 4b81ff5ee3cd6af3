"""The registry of diagnostic codes: every ``TLxxxx`` the compiler, the checker and the server can emit.

Contract:
- A code is ``TL`` plus four digits and never changes meaning once released; retire a code rather
  than reuse it. The hundreds digit groups codes by area: 00 front end, 01 gemm, 02 fragment layout,
  03 memory alignment, 04 dataflow, 05 resources, 06 tile shapes, 07 kernel interface, 08 binding
  of factory parameters, 09 suppression comments.
- Each code's ``doc`` is Markdown with the sections "What it does", "Why is this bad?", "Example"
  and "Fix" (Ruff's rule docs); ``docs/diagnostics.md`` is generated from it by
  ``scripts/gen_diagnostics_doc.py`` and a test keeps the two in step.
- ``Code.url`` is derived from the code alone (rust-analyzer ``DiagnosticCode::url``), so a link
  in an old editor session keeps working as long as the doc page has the anchor.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from enum import Enum

DOCS_URL = "https://tilelang.dev/diagnostics"
DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Fix")
CODE_PATTERN = re.compile(r"TL\d{4}")


class Severity(str, Enum):
    """How bad a finding is. The values are the strings used in JSON, config files and the CLI."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"

    @property
    def rank(self) -> int:
        """1 for error through 4 for hint: lower is more severe (the LSP DiagnosticSeverity numbering)."""
        return _RANK[self]

    def __str__(self) -> str:
        return self.value


_RANK = {Severity.ERROR: 1, Severity.WARNING: 2, Severity.INFO: 3, Severity.HINT: 4}


@dataclass(frozen=True)
class Code:
    """One registered code. ``name`` is a kebab-case slug (``gemm-shape-mismatch``) for humans and configs."""

    code: str
    name: str
    default_severity: Severity
    summary: str
    doc: str

    @property
    def anchor(self) -> str:
        return self.code.lower()

    @property
    def url(self) -> str:
        return f"{DOCS_URL}#{self.anchor}"

    def sections(self) -> dict[str, str]:
        """The doc split at its ``## `` headings: heading -> body (stripped)."""
        parts = re.split(r"^## (.+)$", self.doc, flags=re.MULTILINE)
        return {head.strip(): body.strip() for head, body in zip(parts[1::2], parts[2::2])}

    def __str__(self) -> str:
        return self.code


_REGISTRY: dict[str, Code] = {}


def _define(code: str, name: str, severity: Severity, summary: str, doc: str) -> Code:
    if not CODE_PATTERN.fullmatch(code):
        raise ValueError(f"diagnostic code {code!r} is not TL followed by four digits")
    if code in _REGISTRY:
        raise ValueError(f"diagnostic code {code} is defined twice")
    entry = Code(code, name, severity, summary, textwrap.dedent(doc).strip() + "\n")
    _REGISTRY[code] = entry
    return entry


def get(code: str) -> Code:
    """The registered ``Code``; ``KeyError`` for an unknown code (a bug in the emitter)."""
    try:
        return _REGISTRY[code]
    except KeyError:
        raise KeyError(f"unknown diagnostic code {code!r}") from None


def lookup(code: str) -> Code | None:
    """Like ``get`` but ``None`` for an unknown code (for input read from users or files)."""
    return _REGISTRY.get(code)


def all_codes() -> list[Code]:
    """Every registered code, in code order."""
    return sorted(_REGISTRY.values(), key=lambda c: c.code)


E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO

# 00: front end -------------------------------------------------------------------------------------

SYNTAX_ERROR = _define(
    "TL0001",
    "syntax-error",
    E,
    "The kernel could not be parsed.",
    """
    ## What it does
    Reports source that Python or the TileLang parser cannot read: a Python syntax error, an
    undefined name inside a `@T.prim_func`, or a statement the parser rejects.

    ## Why is this bad?
    Nothing after the first parse error is compiled or checked, so no other diagnostic can be
    trusted until it is fixed.

    ## Example
    ```python
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16")):
        with T.Kernel(T.ceildiv(M, 128), threads=128) as bx:
            T.copy(A[bx * 128, 0], A_sh)  # A_sh was never allocated
    ```

    ## Fix
    Correct the statement the caret points at; here, allocate `A_sh = T.alloc_shared((128, K), "float16")`
    before the copy.
    """,
)

UNSUPPORTED_CONSTRUCT = _define(
    "TL0002",
    "unsupported-construct",
    E,
    "Valid Python that TileLang cannot compile to a kernel.",
    """
    ## What it does
    Reports Python inside a kernel body that has no TileLang meaning: `while` loops over tensor
    values, `try`, `lambda`, calls to arbitrary Python functions on device values, list
    comprehensions over tiles, and similar.

    ## Why is this bad?
    The kernel body is traced into IR, not executed by Python. A construct with no IR counterpart
    either fails later with an obscure message or, worse, runs once at trace time.

    ## Example
    ```python
    for i, j in T.Parallel(128, 128):
        C_local[i, j] = max(C_local[i, j], 0)  # Python's max on a device value
    ```

    ## Fix
    Use the TileLang operation: `T.max(C_local[i, j], T.float32(0))`. Plain Python is fine outside
    the `@T.prim_func` body, where it computes compile-time values.
    """,
)

INTERNAL_ERROR = _define(
    "TL0003",
    "internal-error",
    E,
    "The compiler failed: this is a bug in TileLang, please report it.",
    """
    ## What it does
    Reports an unexpected failure inside the compiler or the checker (an exception in a pass, a
    broken invariant) at the statement being processed when it happened.

    ## Why is this bad?
    It is not your mistake: the kernel may well be valid. The compiler could not finish, so no
    code was produced.

    ## Example
    ```text
    error[TL0003]: internal compiler error in pass lower_tile_op: KeyError 'C_local'
    ```

    ## Fix
    Please report it with the kernel and the full message at the TileLang issue tracker; run with
    `TILELANG_FRONTEND_DEBUG=1` to include the compiler's own traceback. Until then, rewriting the
    flagged statement in a simpler form often avoids the failing path.
    """,
)

INVALID_CONFIGURATION = _define(
    "TL0004",
    "invalid-configuration",
    E,
    "A checker setting (pragma or `[tool.tilelang.check]`) is malformed.",
    """
    ## What it does
    Reports a `# tilelang: check ...` pragma or a `[tool.tilelang.check]` table in `pyproject.toml`
    that cannot be read: an unknown key, a value of the wrong type, a binding for a parameter the
    kernel factory does not have.

    ## Why is this bad?
    The checker falls back to the factory's defaults, so the shapes you meant to check are not
    the ones checked.

    ## Example
    ```toml
    [tool.tilelang.check]
    bind = { matmul = { M = "1024" } }  # a string where an integer is expected
    ```

    ## Fix
    Use the documented keys and types: `bind = { matmul = { M = 1024, N = 1024, K = 1024 } }`.
    """,
)

UNREADABLE_SOURCE = _define(
    "TL0005",
    "unreadable-source",
    E,
    "The file is not Python source text the checker can read.",
    """
    ## What it does
    Reports a file given to the checker that cannot be read as Python source: bytes that are not
    valid in the file's encoding (UTF-8 unless a `# -*- coding: ... -*-` line declares another),
    an encoding declaration Python does not know, or a binary file.

    ## Why is this bad?
    Python refuses to import such a file, so none of its kernels can run; the checker reports
    this once for the file and goes on with the others.

    ## Example
    ```text
    error[TL0005]: cannot read kernels.py as utf-8 text: byte 0xe9 at line 3, column 12 is not valid utf-8
    ```

    ## Fix
    Save the file as UTF-8, or declare the encoding it is written in on its first or second line:
    `# -*- coding: latin-1 -*-`. Leave binary files out of the paths given to the checker.
    """,
)

# 01: gemm ------------------------------------------------------------------------------------------

GEMM_SHAPE_MISMATCH = _define(
    "TL0101",
    "gemm-shape-mismatch",
    E,
    "The operand tiles of `T.gemm` do not form an (M, K) x (K, N) -> (M, N) product.",
    """
    ## What it does
    Checks that `T.gemm(A, B, C)` multiplies an `M x K` tile by a `K x N` tile into an `M x N`
    accumulator, after applying `transpose_A` / `transpose_B`.

    ## Why is this bad?
    The tensor-core instructions consume fixed fragment shapes; mismatched tiles either fail deep
    inside layout inference or read past the end of a shared buffer.

    ## Example
    ```python
    A_shared = T.alloc_shared((block_M, block_K), "float16")
    B_shared = T.alloc_shared((block_N, block_K), "float16")  # stored N-major
    C_local = T.alloc_fragment((block_M, block_N), "float32")
    T.gemm(A_shared, B_shared, C_local)  # K of A (block_K) != rows of B (block_N)
    ```

    ## Fix
    Make the inner dimensions agree, or say how B is stored: `T.gemm(A_shared, B_shared, C_local,
    transpose_B=True)`.
    """,
)

GEMM_DTYPE_UNSUPPORTED = _define(
    "TL0102",
    "gemm-dtype-unsupported",
    E,
    "The target's tensor cores have no instruction for this combination of operand and accumulator types.",
    """
    ## What it does
    Checks the operand and accumulator dtypes of `T.gemm` against the MMA / WGMMA instructions of
    the target GPU (for example, `float8_e4m3` operands need sm_89 or newer, and an `float16`
    accumulator with `float8` operands does not exist).

    ## Why is this bad?
    There is no instruction to lower to, so compilation fails late with a message about missing
    intrinsics rather than about your dtypes.

    ## Example
    ```python
    A_shared = T.alloc_shared((128, 32), "float16")
    B_shared = T.alloc_shared((32, 128), "bfloat16")
    C_local = T.alloc_fragment((128, 128), "float32")
    T.gemm(A_shared, B_shared, C_local)  # A and B must have the same dtype
    ```

    ## Fix
    Give A and B the same supported dtype (cast while copying into shared memory) and use a
    `float32` accumulator, or compile for a target that has the instruction.
    """,
)

GEMM_WARP_PARTITION = _define(
    "TL0103",
    "gemm-warp-partition",
    E,
    "The gemm warp policy cannot split the tile over the block's warps.",
    """
    ## What it does
    Checks that the `policy` of `T.gemm` (Square, FullRow, FullCol) can divide the `M x N` tile
    among `threads / 32` warps so that each warp gets a whole number of MMA tiles (16 rows by
    8 columns for mma.sync; 64 rows per warpgroup for wgmma).

    ## Why is this bad?
    A tile that does not partition leaves warps idle or, in upstream TileLang, aborts with an
    internal check such as `warp_n % 32 == 0` and no source location.

    ## Example
    ```python
    with T.Kernel(T.ceildiv(N, 48), T.ceildiv(M, 64), threads=256) as (bx, by):
        C_local = T.alloc_fragment((64, 48), "float32")
        T.gemm(A_shared, B_shared, C_local, policy=T.GemmWarpPolicy.FullCol)  # 8 warps over N=48
    ```

    ## Fix
    Choose tile sizes that are multiples of the per-warp tile times the warp count along the
    split dimension, use fewer threads, or pick another policy (`Square` balances both dimensions).
    """,
)

# 02: fragment layouts ------------------------------------------------------------------------------

FRAGMENT_LAYOUT_CONFLICT = _define(
    "TL0201",
    "fragment-layout-conflict",
    E,
    "Two operations need different thread layouts for the same fragment.",
    """
    ## What it does
    Reports a fragment (`T.alloc_fragment`) whose layout, the map from element to (thread,
    register), is fixed by one operation (typically `T.gemm`) and required to be different by
    another (a `T.Parallel` loop, a reduction, a copy). The notes name both operations and describe
    both layouts.

    ## Why is this bad?
    A fragment lives in registers: each thread holds only its own elements. Two incompatible
    layouts would need a shuffle through shared memory that the compiler does not insert for you,
    so it cannot lower the kernel. (A whole-fragment `T.copy(X_local, Y_local)` between two layouts
    is such a shuffle, and the compiler does insert it: a shared workspace between two barriers.)

    ## Example
    ```python
    T.gemm(A_shared, B_shared, C_local)     # C_local gets the mma accumulator layout
    T.gemm(A_shared, D_shared, E_local)     # so does E_local
    for i, j in T.Parallel(128, 128):
        C_local[i, j] += E_local[j, i]      # the thread holding C[i, j] does not hold E[j, i]
    ```

    ## Fix
    Stage one operand through shared memory, where every thread can read every element:
    `T.copy(E_local, E_shared)`, then read `E_shared[j, i]` in the loop.
    """,
)

NO_FRAGMENT_LAYOUT = _define(
    "TL0202",
    "no-fragment-layout",
    E,
    "Layout inference found no thread mapping for a loop over fragments.",
    """
    ## What it does
    Reports a `T.Parallel` loop for which layout inference cannot find a layout that maps the
    loop's iterations onto the block's threads, for example when the fragment's extent is not a
    multiple of the thread count and nothing else fixes its layout.

    ## Why is this bad?
    Without a layout the loop cannot be lowered. Upstream TileLang reports this as "no available
    layout found" with no source location.

    ## Example
    ```python
    with T.Kernel(T.ceildiv(N, 96), threads=128) as bx:
        x = T.alloc_fragment((96,), "float32")
        for i in T.Parallel(96):                 # 96 elements over 128 threads
            x[i] = A[bx * 96 + i]
    ```

    ## Fix
    Make the fragment's total size a multiple of the thread count (here 128 or 256 elements), use
    fewer threads, or give the fragment a layout with `T.annotate_layout`.
    """,
)

FRAGMENT_NOT_BIJECTIVE = _define(
    "TL0203",
    "fragment-not-bijective",
    E,
    "A fragment is indexed with something other than loop variables where its layout cannot follow.",
    """
    ## What it does
    Reports a fragment access inside `T.Parallel` whose index is not a plain loop variable (for
    example `x[i, j // 2]`) when the element it names is not held by the thread running that
    iteration, or when the fragment has no layout yet to check against.

    ## Why is this bad?
    A fragment lives in registers spread over the threads; a thread cannot read another thread's
    register. Upstream TileLang replicates the whole tile into every thread instead: register use
    explodes, everything spills to local memory, and nvcc can take a minute on the result
    (measured: 58 s for a 128 x 128 tile). We refuse it at the user's line.

    ## Example
    ```python
    for i, j in T.Parallel(128, 128):
        y[i, j] = x[i, j // 2]   # x is a (128, 64) fragment
    ```

    ## Fix
    Read the operand from shared memory instead (`x_shared[i, j // 2]`), or iterate over the
    fragment's own shape and write each element once.
    """,
)

# 03: memory alignment ------------------------------------------------------------------------------

TMA_MISALIGNED = _define(
    "TL0301",
    "tma-misaligned",
    W,
    "A global tensor's inner extent or stride is not a multiple of 16 bytes, so the copy cannot use TMA.",
    """
    ## What it does
    On sm_90 and newer, checks that every global tensor copied with the Tensor Memory Accelerator
    has a base address, row strides and an innermost box extent that are multiples of 16 bytes.
    The note says which dimension breaks the rule with the bound values.

    ## Why is this bad?
    The hardware refuses such a TMA descriptor. The compiler then falls back to ordinary loads,
    which silently costs much of the kernel's bandwidth (upstream TileLang said nothing; at run
    time it used to fail with "Failed to initialize the TMA descriptor").

    ## Example
    ```python
    kernel = matmul(1024, 1024, 1001)   # A is (M, K) float16: a row is 2002 bytes
    ```

    ## Fix
    Pad the inner dimension to a multiple of 8 elements for 16-bit types (4 for 32-bit, 16 for
    8-bit) and mask the tail, or accept the fallback and silence the warning with
    `# tilelang: ignore[TL0301]`.
    """,
)

VECTOR_ALIGNMENT_LOST = _define(
    "TL0302",
    "vector-alignment-lost",
    W,
    "A copy could not be vectorized because an offset or stride is not aligned to the vector width.",
    """
    ## What it does
    Reports a `T.copy` or `T.Parallel` loop whose accesses the compiler had to split into scalar
    loads or stores because an offset, a stride or an extent is not a multiple of the 128-bit
    vector width (8 `float16` or 4 `float32` elements).

    ## Why is this bad?
    Scalar memory instructions move a quarter to an eighth of the data per instruction; a
    bandwidth-bound kernel slows down by about that much.

    ## Example
    ```python
    T.copy(A[by * block_M, ko * block_K + 1], A_shared)   # shifted by one element
    ```

    ## Fix
    Keep tile offsets and inner extents multiples of the vector width, or make the shape
    arguments multiples of it so the compiler can prove alignment.
    """,
)

# 04: dataflow --------------------------------------------------------------------------------------

UNINITIALIZED_ACCUMULATOR = _define(
    "TL0401",
    "uninitialized-accumulator",
    W,
    "An accumulator is read (by `T.gemm` or `+=`) before anything has written it.",
    """
    ## What it does
    Tracks fragments and local buffers from allocation and reports the first operation that reads
    one before any `T.clear`, `T.fill`, copy or assignment has written it. `T.gemm` reads its
    accumulator unless called with `clear_accum=True`.

    ## Why is this bad?
    Registers start with whatever the previous kernel left there; the result is garbage or NaN
    and changes from run to run.

    ## Example
    ```python
    C_local = T.alloc_fragment((block_M, block_N), "float32")
    for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
        ...
        T.gemm(A_shared, B_shared, C_local)   # C_local was never cleared
    ```

    ## Fix
    Add `T.clear(C_local)` before the loop.
    """,
)

OUTPUT_NEVER_WRITTEN = _define(
    "TL0402",
    "output-never-written",
    W,
    "An output tensor of the kernel is never written.",
    """
    ## What it does
    Reports a kernel parameter listed in `out_idx` that no statement writes (or, without `out_idx`,
    a tensor neither read nor written by a kernel that writes no tensor at all: an input left unread
    for the bound values, `if use_bias:`, is no output).

    ## Why is this bad?
    The kernel runs and returns uninitialised memory: the classic forgotten write-back.

    ## Example
    ```python
    T.clear(C_local)
    for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
        ...
        T.gemm(A_shared, B_shared, C_local)
    # missing: T.copy(C_local, C[by * block_M, bx * block_N])
    ```

    ## Fix
    Copy the result out: `T.copy(C_local, C[by * block_M, bx * block_N])`.
    """,
)

UNUSED_FRAGMENT = _define(
    "TL0403",
    "unused-fragment",
    W,
    "A fragment is computed but its value is never used.",
    """
    ## What it does
    Reports a fragment or shared buffer that is written and then never read or copied out.

    ## Why is this bad?
    It costs registers or shared memory and instructions for nothing, and usually means a result
    was written to the wrong buffer.

    ## Example
    ```python
    T.reduce_max(S_local, m_new, dim=1)
    for i, j in T.Parallel(block_M, block_N):
        P_local[i, j] = T.exp2(S_local[i, j] - m_old[i])   # meant m_new
    ```

    ## Fix
    Use the value, or remove the computation.
    """,
)

UNORDERED_EXCHANGE = _define(
    "TL0404",
    "unordered-shared-exchange",
    W,
    "Threads exchange data through shared memory where no barrier can order them.",
    """
    ## What it does
    Reports a shared-memory read, inside an `if` that only some threads of the block take, of an
    element that another thread of that branch writes there, where no barrier can order the two.
    The branch's condition selects part of several warps (`tx < 48`, `tx % 4 == 0`) or depends
    on a per-thread value (`c = Mask[tx] != 0; if c:`), and the write and the read are one
    statement, or lie under a `while` or a loop whose trip count differs between threads.

    ## Why is this bad?
    Between two statements of such a branch the compiler splits the `if` and places the barrier
    outside it, where every thread meets it (`if c: write; barrier; if c: read`, as upstream
    does). Within one statement, or inside a loop that the threads run a different number of
    times, no barrier can be placed: a barrier there would wait for threads that never arrive.
    The read may see the value from before the write. The result changes from run to run.

    ## Example
    ```python
    if tx < 48:
        for k in T.serial(Counts[tx]):      # a trip count per thread
            S[tx] = A[tx] + acc
            acc = acc + S[47 - tx]          # written by another thread of the branch
    ```

    ## Fix
    Give the loop a trip count every thread shares (guard the body instead: `for k in
    T.serial(max_count): if k < Counts[tx]: ...`), split the statement in two, or read after the
    branch (the compiler orders the two with a barrier all threads meet).
    """,
)

SPLIT_ACCUMULATION = _define(
    "TL0405",
    "split-accumulation",
    W,
    "A fragment element is accumulated inside T.Parallel by several threads, each into its own copy.",
    """
    ## What it does
    Reports a statement inside `T.Parallel` that updates a fragment from its own value
    (`acc[i] += ...`, `acc[i] = T.max(acc[i], ...)`) at an index that leaves out a loop
    variable of the nest, where the loop's inferred layout gives the iterations of one element to
    more than one thread.

    ## Why is this bad?
    A fragment lives in registers: each thread that runs some of those iterations updates its
    own copy of `acc[i]` with its own share of the sum. Nothing adds the copies together, so every
    copy holds a partial result, and whatever reads `acc[i]` afterwards (a `T.copy` to global
    memory) gets one part of it. The kernel compiles, runs and returns wrong numbers.

    ## Example
    ```python
    acc = T.alloc_fragment((128,), "float32")
    for i, j in T.Parallel(128, 128):       # 256 threads: 16 of them share each row i
        acc[i] += a_frag[i, j] * x_frag[j]
    ```

    ## Fix
    Make `acc` a reducer (`acc = T.alloc_reducer(128, "float32", replication="all")`, and
    `T.finalize_reducer(acc)` after the loop: the copies are combined), or keep the products in a
    fragment indexed by both variables and reduce it with `T.reduce_sum(prod, acc, dim=1)`.
    """,
)

PIPELINE_AS_WRITTEN = _define(
    "TL0406",
    "pipeline-as-written",
    I,
    "A T.Pipelined loop runs as written because its body synchronises through the user's own barriers.",
    """
    ## What it does
    Reports a `T.Pipelined(..., num_stages=S)` loop (S >= 2) in a kernel without `T.ws` blocks
    whose body orders its own loads: a `T.tma_copy` on an mbarrier, a `T.copy_cluster(...,
    cluster_mask=...)` multicast, or an mbarrier operation. The compiler runs such a loop as
    written, one iteration after another, and `num_stages` has no effect.

    ## Why is this bad?
    It is not wrong: the results are right. But the loads of the next iterations are not issued
    ahead, so the loop is as slow as a `T.serial` loop, which `num_stages` suggests it is not.
    A multicast load waits for the whole cluster at each iteration (its barrier also orders the
    peer blocks' reads of the tile it overwrites); upstream TileLang pipelines such a loop.

    ## Example
    ```python
    for ko in T.Pipelined(K // block_K, num_stages=2):
        T.copy_cluster(A[by * block_M, ko * block_K], A_s, cluster_mask=0b11)
        T.copy(B[ko * block_K, bx * block_N], B_s)
        T.gemm(A_s, B_s, C_f)
    ```

    ## Fix
    Where the loads are the kernel's time, use plain `T.copy` loads (the compiler pipelines them,
    and on sm_90a `tl.cluster_multicast` shares operand tiles between the blocks of a cluster),
    or order the stages yourself: `T.ws` blocks with one mbarrier per stage.
    """,
)

# 05: resources -------------------------------------------------------------------------------------

SHARED_MEMORY_OVER_BUDGET = _define(
    "TL0501",
    "shared-memory-over-budget",
    E,
    "The kernel needs more shared memory per block than the target GPU provides.",
    """
    ## What it does
    Adds up the shared buffers live at the same time, multiplied by the pipeline's stage count,
    and compares the total with the target's per-block limit (227 KiB on H100/H200, 163 KiB on
    A100, 99 KiB on RTX 4090). The notes list the largest buffers.

    ## Why is this bad?
    The launch fails at run time with "too many resources requested", or, in upstream TileLang,
    the kernel compiles without a word and fails only on the GPU.

    ## Example
    ```python
    A_shared = T.alloc_shared((256, 128), "float16")   # 64 KiB
    B_shared = T.alloc_shared((128, 256), "float16")   # 64 KiB
    for ko in T.Pipelined(T.ceildiv(K, 128), num_stages=3):   # x3 = 384 KiB
        ...
    ```

    ## Fix
    Use smaller tiles (often `block_K`), fewer pipeline stages, or lower-precision staging buffers.
    """,
)

REGISTER_PRESSURE = _define(
    "TL0502",
    "register-pressure",
    W,
    "Fragments alone need more than the 255 registers a thread can address.",
    """
    ## What it does
    Estimates the registers each thread needs for its share of the live fragments (from their
    inferred layouts) and reports when the estimate exceeds 255, the hardware limit per thread.

    ## Why is this bad?
    What does not fit spills to local memory, which is cached DRAM: the kernel slows down by a
    large factor, and compile times grow.

    ## Example
    ```python
    with T.Kernel(..., threads=128) as (bx, by):
        C_local = T.alloc_fragment((256, 256), "float32")   # 512 values per thread
    ```

    ## Fix
    Use more threads per block, a smaller tile, or a 16-bit accumulator where precision allows.
    """,
)

THREADS_PER_BLOCK = _define(
    "TL0503",
    "threads-per-block",
    E,
    "`T.Kernel` asks for more threads per block than the GPU allows.",
    """
    ## What it does
    Checks the `threads=` of `T.Kernel` (the product of its dimensions) against the 1024 threads
    per block that every supported NVIDIA GPU allows, and that it is a multiple of the 32-thread
    warp size.

    ## Why is this bad?
    A launch with more than 1024 threads fails; a thread count that is not a multiple of 32
    wastes lanes and breaks the warp partition of tile operations.

    ## Example
    ```python
    with T.Kernel(T.ceildiv(N, 2048), threads=2048) as bx:
        ...
    ```

    ## Fix
    Use at most 1024 threads and let each thread handle several elements: `T.Parallel` loops over
    fragments distribute the extra work automatically.
    """,
)

# 06: tile shapes -----------------------------------------------------------------------------------

COPY_EXTENT_MISMATCH = _define(
    "TL0601",
    "copy-extent-mismatch",
    E,
    "The source and destination of `T.copy` have different extents.",
    """
    ## What it does
    Compares the region read by `T.copy(src, dst)` with the region written, dimension by
    dimension, after dropping unit dimensions. When one side is a single element (`A[i, j]`),
    its extent is taken from the other side, as TileLang does.

    Where the extents differ but pair up dimension by dimension, the copy compiles as upstream
    TileLang compiles it, moving the extents of the more local side (a fragment before shared
    memory before a global tensor; the source's when both are alike) and this is a warning. It is
    an error where those extents are smaller than the source's in some dimension (elements would
    be dropped) or the dimensions do not pair up.

    ## Why is this bad?
    A copy between regions of different shapes either drops data or reads beyond the smaller
    region.

    ## Example
    ```python
    A_shared = T.alloc_shared((block_M, block_K), "float16")
    T.copy(A[by * block_M : by * block_M + block_M, 0:block_N], A_shared)  # block_N != block_K
    ```

    ## Fix
    Make the regions agree, or copy from a single element and let the destination set the
    extent: `T.copy(A[by * block_M, ko * block_K], A_shared)`.
    """,
)

TILE_OUT_OF_BOUNDS = _define(
    "TL0602",
    "tile-out-of-bounds",
    E,
    "A tile reaches past the end of a tensor and nothing guards the access.",
    """
    ## What it does
    With the bound shapes, checks the global-tensor accesses the compiler does not guard itself.
    Tile copies, `T.Parallel` accesses and plain scalar element accesses are guarded (a store past
    the end is skipped, a load there reads 0, a call taking an element's address runs only where it
    is inside, as upstream TileLang does), so what is checked is a vector access (`T.Ramp` index)
    outside `T.Parallel` or an address taken in a store's value, and every access when
    `tl.disable_safe_memory_access` turns the guards off. An access counts as guarded under a
    condition or `T.if_then_else` that keeps it inside.

    ## Why is this bad?
    An unguarded out-of-bounds access reads another tensor's data or faults with an illegal
    memory access, often only for some shapes.

    ## Example
    ```python
    kernel = vector_add(1000)   # 128 threads x 4 lanes a block: the last block reaches 1023
    ...
    C[T.Ramp(idx * 4, 1, 4)] = A[T.Ramp(idx * 4, 1, 4)]   # no `if idx * 4 + 3 < N`
    ```

    ## Fix
    Guard the access (`if idx * 4 + 3 < N:`), or only bind sizes that are multiples of the tile.
    """,
)

PARALLEL_EXTENT_MISMATCH = _define(
    "TL0603",
    "parallel-extent-mismatch",
    E,
    "A `T.Parallel` loop's extents do not match the fragment it indexes.",
    """
    ## What it does
    Compares the extents of a `T.Parallel` loop with the shape of each fragment it indexes directly
    by the loop variables.

    ## Why is this bad?
    Layout inference maps loop iterations onto the fragment's layout. A loop that covers only part
    of the fragment, or more than all of it, either fails with "Layout may conflict" or leaves
    elements unwritten.

    ## Example
    ```python
    C_local = T.alloc_fragment((block_M, block_N), "float32")
    for i, j in T.Parallel(block_M, block_K):
        C_local[i, j] = 0
    ```

    ## Fix
    Iterate over the fragment's shape: `T.Parallel(block_M, block_N)`.
    """,
)

REDUCE_SHAPE_MISMATCH = _define(
    "TL0604",
    "reduce-shape-mismatch",
    E,
    "The output of a reduction does not have the input's shape without the reduced dimension.",
    """
    ## What it does
    Checks that `T.reduce_sum/max/min(src, dst, dim=d)` writes a `dst` whose shape is `src`'s
    shape with dimension `d` removed, and that `d` is a valid dimension of `src`.

    ## Why is this bad?
    A wrongly shaped output means the wrong dimension is being reduced, or the result cannot be
    laid out over the threads that hold the input rows.

    ## Example
    ```python
    S_local = T.alloc_fragment((block_M, block_N), "float32")
    m_local = T.alloc_fragment((block_N,), "float32")
    T.reduce_max(S_local, m_local, dim=1)   # dim=1 keeps block_M values
    ```

    ## Fix
    Allocate the output with the kept dimension (`(block_M,)`), or reduce over the dimension you
    meant (`dim=0`).
    """,
)

# 07: kernel interface ------------------------------------------------------------------------------

OUT_IDX_OUT_OF_RANGE = _define(
    "TL0701",
    "out-idx-out-of-range",
    E,
    "`out_idx` names a parameter the kernel does not have.",
    """
    ## What it does
    Checks every entry of `@tilelang.jit(out_idx=...)` against the number of tensor parameters of
    the returned `@T.prim_func` (negative indices count from the end).

    ## Why is this bad?
    The JIT allocates and returns the outputs named by `out_idx`; an index that does not exist
    fails at the first call with an unrelated-looking error.

    ## Example
    ```python
    @tilelang.jit(out_idx=[3])
    def matmul(M, N, K):
        @T.prim_func
        def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                   C: T.Tensor((M, N), "float16")):   # parameters 0..2
            ...
    ```

    ## Fix
    Use `out_idx=[-1]` (the last parameter) or the right position.
    """,
)

WRONG_ARGUMENT_COUNT = _define(
    "TL0702",
    "wrong-argument-count",
    E,
    "A compiled kernel is called with the wrong number of tensors.",
    """
    ## What it does
    Checks calls of a compiled kernel in the same file against its parameters minus the outputs
    named by `out_idx`, which the kernel allocates and returns itself.

    ## Why is this bad?
    The call fails at run time ("Kernel expected N inputs, but M are provided"), after the
    compile has already been paid for.

    ## Example
    ```python
    kernel = matmul(1024, 1024, 1024)   # out_idx=[-1]: C is returned
    c = torch.empty(1024, 1024, dtype=torch.float16, device="cuda")
    kernel(a, b, c)
    ```

    ## Fix
    Pass only the inputs (`c = kernel(a, b)`), or drop `out_idx` and pass every tensor.
    """,
)

# 08: binding factory parameters --------------------------------------------------------------------

UNBOUND_VALUES = _define(
    "TL0801",
    "unbound-values",
    I,
    "The checker found no concrete values for a kernel factory, so shape checks were skipped.",
    """
    ## What it does
    Reports a `@tilelang.jit` kernel factory whose parameters have no defaults, no literal call
    site in the file and no configured binding. Only the checks that need no shapes ran.

    ## Why is this bad?
    It is not wrong, but shape, alignment and budget checks (TL01xx, TL03xx, TL05xx, TL06xx) need
    numbers; without them those mistakes go unreported until the kernel is compiled.

    ## Example
    ```python
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M, block_N, block_K):   # called only from another module
        ...
    ```

    ## Fix
    Give the tile parameters defaults, call the factory with literals in the file
    (`matmul(1024, 1024, 1024, 128, 128, 32)`), or configure a binding:
    `# tilelang: check matmul(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32)`.
    """,
)

KERNEL_BUILD_FAILED = _define(
    "TL0802",
    "kernel-build-failed",
    E,
    "The kernel factory raised an exception while building the kernel for the bound values.",
    """
    ## What it does
    Reports an exception raised by your own Python code in the kernel factory (an `assert`, a
    division by zero, an index error) while the checker built the kernel with the bound values.
    The span points at the line of your code that raised.

    ## Why is this bad?
    Calling the factory with these values fails the same way at run time.

    ## Example
    ```python
    def matmul(M, N, K, block_K=32):
        assert K % block_K == 0
        ...
    kernel = matmul(1024, 1024, 1000)
    ```

    ## Fix
    Fix the values at the call site or the factory's own checks.
    """,
)

KERNEL_BUILD_TIMEOUT = _define(
    "TL0803",
    "kernel-build-timeout",
    W,
    "Building the kernel for the bound values took longer than the checker's time limit.",
    """
    ## What it does
    The checker runs kernel factories in a worker process with a time limit; this reports a
    factory that did not finish in time. Checks that need the built kernel were skipped.

    ## Why is this bad?
    Usually the factory does expensive work at import or build time (autotuning, reading data),
    or loops forever for these values.

    ## Example
    ```python
    @tilelang.autotune(configs=get_configs())   # compiles and benchmarks every configuration
    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M, block_N):
        ...
    ```

    ## Fix
    Move expensive work out of the factory, bind a single configuration for the checker, or raise
    the limit with `timeout` in `[tool.tilelang.check]`.
    """,
)

ENVIRONMENT = _define(
    "TL0804",
    "environment",
    I,
    "A kernel could not be built because of the checker's environment, not because of the code.",
    """
    ## What it does
    Notes an import of a third-party module that is not installed where the checker runs, or a
    kernel factory that needs a GPU or a CUDA driver while it builds (a CUDA tensor made at
    module level or inside the factory). The note sits on the import line or on the factory;
    the kernels that need it were checked without values.

    ## Why is this bad?
    It is not a mistake in your code: the checker's environment lacks something your code
    uses, so some checks could not run. Under pre-commit the hook runs in its own virtual
    environment, which has only `tilelang` unless you add more.

    ## Example
    ```python
    import einops        # not installed in the hook's environment
    ```

    ## Fix
    Install the module where the checker runs: for the pre-commit hook, list it (and `torch`)
    under `additional_dependencies`, or use `language: system` to run in your own environment.
    """,
)

# 09: suppression comments --------------------------------------------------------------------------

UNUSED_IGNORE = _define(
    "TL0901",
    "unused-ignore",
    W,
    "A `# tilelang: ignore[...]` comment suppresses nothing.",
    """
    ## What it does
    Reports an ignore comment, or a code in one, that matched no diagnostic on its line.

    ## Why is this bad?
    Stale suppressions hide the next real problem on that line and mislead readers.

    ## Example
    ```python
    T.gemm(A_shared, B_shared, C_local)  # tilelang: ignore[TL0101]  (the shapes are fine now)
    ```

    ## Fix
    Remove the comment, or the codes in it that no longer apply.
    """,
)

INVALID_IGNORE = _define(
    "TL0902",
    "invalid-ignore",
    W,
    "A `# tilelang: ignore[...]` comment names a code that does not exist or is malformed.",
    """
    ## What it does
    Reports an ignore comment whose bracket is not a comma-separated list of `TLxxxx` codes known
    to this version of TileLang.

    ## Why is this bad?
    A typo in a suppression suppresses nothing, and the diagnostic it was meant for still fires,
    or fires again once the typo's neighbour is fixed.

    ## Example
    ```python
    T.copy(A[by * 128, k * 32], A_shared)  # tilelang: ignore[TL301]
    ```

    ## Fix
    Write the full four-digit code: `# tilelang: ignore[TL0301]`.
    """,
)

del E, W, I
