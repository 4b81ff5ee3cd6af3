"""Pass configuration keys (``pass_configs={...}`` of ``@tilelang.jit`` / ``tilelang.compile``).

Contract: every key upstream TileLang defines is accepted, as ``PassConfigKey`` members or as
strings (upstream's ``tirx.`` and our older ``tir.`` prefixes both), each with a documented effect
(``EFFECTS``; ``docs/pass_configs.md`` is generated from it). Keys that mean nothing to our
compiler say so and why. Unknown keys produce a warning naming the key (a typo must not be
silently ignored). ``normalize`` returns the plain dict every pass reads (upstream spellings
mapped onto ours, values validated); ``nvcc_flags`` turns the keys that steer nvcc into flags.
"""

from __future__ import annotations

import enum
import shlex
import warnings


class PassConfigKey(str, enum.Enum):
    # Keys with an effect on our compiler.
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_DISABLE_ASYNC_COPY = "tl.disable_async_copy"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_PERSISTENT = "tl.disable_persistent"
    TL_DISABLE_BLOCK_PAIR = "tl.disable_block_pair"
    TL_DISABLE_RING_EXTRA_STAGE = "tl.disable_ring_extra_stage"
    TL_DISABLE_RING_OVER_PERSISTENCE = "tl.disable_ring_over_persistence"
    TL_DISABLE_EPILOGUE_STAGING = "tl.disable_epilogue_staging"
    TL_CLUSTER_MULTICAST = "tl.cluster_multicast"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DISABLE_WGMMA_OVERLAP = "tl.disable_wgmma_overlap"
    TL_DISABLE_WGMMA_MIX = "tl.disable_wgmma_mix"
    TL_DISABLE_CLEAR_FUSION = "tl.disable_clear_fusion"
    TL_DISABLE_DEFERRED_COPY_WAIT = "tl.disable_deferred_copy_wait"
    TL_DISABLE_SINGLE_WAVE_LAUNCH_BOUND = "tl.disable_single_wave_launch_bound"
    TL_DISABLE_STREAMING_LAUNCH_BOUND = "tl.disable_streaming_launch_bound"
    TL_DISABLE_SINGLE_WAVE_SETMAXNREG = "tl.disable_single_wave_setmaxnreg"
    TL_ENABLE_WGMMA_SPLIT_N = "tl.enable_wgmma_split_n"
    TL_ENABLE_WS_SINGLE_STAGE = "tl.enable_ws_single_stage"
    TL_ENABLE_WS_EARLY_RELEASE = "tl.enable_ws_early_release"
    TL_ENABLE_THREAD_WIDENING = "tl.enable_thread_widening"
    TL_DISABLE_KEPT_BINDS = "tl.disable_kept_binds"
    TL_ENABLE_PIPELINE_EARLY_RELEASE = "tl.enable_pipeline_early_release"
    TL_ENABLE_PIPELINE_SPLIT_GROUPS = "tl.enable_pipeline_split_groups"
    TL_ENABLE_ONE_STAGE_REFILL = "tl.enable_one_stage_refill"
    TL_ENABLE_LOOP_HEAD_BARRIER = "tl.enable_loop_head_barrier"
    TL_ENABLE_ATOMIC_LINE_STAGING = "tl.enable_atomic_line_staging"
    TL_ENABLE_EARLY_PROLOGUE = "tl.enable_early_prologue"
    TL_ENABLE_STMATRIX = "tl.enable_stmatrix"
    TL_ENABLE_EXACT_STORE_FENCES = "tl.enable_exact_store_fences"
    TL_ENABLE_OCCUPANCY_STEP = "tl.enable_occupancy_step"
    TL_ENABLE_WARP_SCAN = "tl.enable_warp_scan"
    TL_ENABLE_OCCUPANCY_NEUTRAL_REUSE = "tl.enable_occupancy_neutral_reuse"
    TL_ENABLE_CHUNKED_EPILOGUE = "tl.enable_chunked_epilogue"
    TL_ENABLE_WARPGROUP_PINGPONG = "tl.enable_warpgroup_pingpong"
    TL_ENABLE_STAGE_PROMOTION = "tl.enable_stage_promotion"
    TL_ENABLE_ZERO_STAGE_PROMOTION = "tl.enable_zero_stage_promotion"
    TL_ENABLE_ZERO_STAGE_PROMOTION_ANY = "tl.enable_zero_stage_promotion_any"
    TL_DISABLE_ATTENTION_SCHEDULE = "tl.disable_attention_schedule"
    TL_DISABLE_TMA_PROLOGUE = "tl.disable_tma_prologue"
    TL_DISABLE_DOUBLE_HEAD_BUFFER = "tl.disable_double_head_buffer"
    TL_DISABLE_PAIRED_TAIL_SPLIT = "tl.disable_paired_tail_split"
    TL_ENABLE_TENSORMAP_PREFETCH = "tl.enable_tensormap_prefetch"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_access"
    TL_ENABLE_WIDE_INDEX = "tl.enable_wide_index"
    TL_DISABLE_WGMMA_NARROW_SLABS = "tl.disable_wgmma_narrow_slabs"
    TL_ENABLE_PIPELINE_TAIL_PEEL = "tl.enable_pipeline_tail_peel"
    TL_ENABLE_LONGEST_FIRST_BLOCKS = "tl.enable_longest_first_blocks"
    TL_ENABLE_MASK_UNSWITCH_BOTH = "tl.enable_mask_unswitch_both"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    # Upstream keys that steer passes or debug output our compiler does not have.
    TIR_DISABLE_VECTORIZE = "tir.disable_vectorize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"
    TL_ENABLE_AUTO_SCHEDULE = "tl.enable_auto_schedule"
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    # (the two layout-visualization keys do act: analysis/layout_visual.py prints and draws layouts)
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tirx.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"


_NO_PASS = "accepted; no effect: our compiler has no such pass"
_NO_DEBUG = "accepted; no effect: upstream debug output of a pass our compiler does not have"
_SIMPLIFY_SUB = "accepted as a sub-key of `tl.Simplify`; no effect (our simplification is TVM's, unconfigured)"

EFFECTS = {
    PassConfigKey.TL_ENABLE_FAST_MATH: "compile with nvcc --use_fast_math (exp/exp2/log map to the SFU "
                                       "approximations; division and sqrt lose IEEE rounding)",
    PassConfigKey.TL_DISABLE_ASYNC_COPY: "global->shared copies use plain vector loads/stores instead of cp.async "
                                         "(pipelined loops then overlap less)",
    PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: "on sm_90a, the pipelined loop (GEMM main loop, attention) keeps "
                                               "cp.async feeding from every thread instead of a TMA producer "
                                               "warpgroup with mbarriers",
    PassConfigKey.TL_DISABLE_TMA_LOWER: "on sm_90a, pipelined global->shared copies use cp.async instead of TMA "
                                        "(and so no warp specialisation); deprecated as upstream (a DeprecationWarning: "
                                        "use `T.copy(..., disable_tma=True)`)",
    PassConfigKey.TL_DISABLE_PERSISTENT: "on sm_90a, a warp-specialised GEMM main loop keeps one output tile per "
                                         "block instead of a persistent grid (one block per SM looping over the "
                                         "tiles, its producer loading the next tile during the epilogue)",
    PassConfigKey.TL_DISABLE_BLOCK_PAIR: "on sm_90a, a warp-specialised loop with one consumer warpgroup (a GEMM "
                                         "main loop, or a general body with small enough fragments: attention "
                                         "backward) runs one block per SM instead of two (setmaxnreg 40 / 216 "
                                         "under __launch_bounds__(256, 2))",
    PassConfigKey.TL_DISABLE_RING_EXTRA_STAGE: "on sm_90a, a warp-specialised GEMM main loop's ring keeps num_stages "
                                               "buffers instead of one more for the wgmma group kept in flight",
    PassConfigKey.TL_DISABLE_RING_OVER_PERSISTENCE: "on sm_90a, a persistent GEMM whose ring cannot take its extra "
        "buffer beside the epilogue's stage stays persistent (one buffer fewer) instead of going back to one tile "
        "per block when its main loop has 64 k-steps or more",
    PassConfigKey.TL_DISABLE_EPILOGUE_STAGING: "on sm_90a, a wgmma accumulator copied to a global tensor is "
                                               "stored from registers instead of through a swizzled shared "
                                               "tile and TMA stores",
    PassConfigKey.TL_CLUSTER_MULTICAST: "experimental (sm_90a): a warp-specialised GEMM main loop runs in clusters "
                                        "of two blocks. Persistent (the default grid): clusters (2, 1, 1) take "
                                        "tiles t and t ^ 1, and each operand tile both blocks load (by the user's "
                                        "block order, T.use_swizzle included) is loaded half by each with TMA "
                                        "multicast, the rest whole by each; one tile a block: blocks along "
                                        "blockIdx.y share the tile not indexed by it (B). Halves are half the "
                                        "swizzle slabs, or of one slab's rows. Correct; not faster (session 48, "
                                        "4096^3 bf16 128x256x64: H200 persistent 214-215 us against 210, H100 one "
                                        "tile a block 217 against 215, at the power limit)",
    PassConfigKey.TL_DISABLE_WGMMA: "on sm_90a, T.gemm lowers to mma.sync + ldmatrix (the sm_80 path) instead of wgmma",
    PassConfigKey.TL_DISABLE_ATTENTION_SCHEDULE: "a T.Pipelined loop of one or zero stages with two gemms "
                                                 "(attention, chunked recurrences) keeps each T.copy where it is "
                                                 "written (loaded and waited for on the spot) instead of issuing "
                                                 "its tile loads together at the top of the body",
    PassConfigKey.TL_ENABLE_WGMMA_SPLIT_N: "sm_90a, default True: when M cannot be split into 64-row blocks over "
        "the block's warpgroups (M=64 on 256 threads), the warpgroups split N instead and the gemm takes wgmma "
        "(False: such kernels use mma.sync, as before session 13); a plan that would not fit shared memory "
        "falls back to the M-only one",
    PassConfigKey.TL_ENABLE_PIPELINE_EARLY_RELEASE: "cp.async pipelines: a T.Pipelined body that reads every "
        "staged tile into registers first refills the stage right after the read, S tiles in flight, its "
        "global -> register copies issued before the wait (upstream's schedule of such loops; upstream's "
        "gemv_alloc_reducer 0.0297 -> 0.0264 ms on the H200). On by default where every producer is a plain "
        "cp.async copy; True also takes converting and gathered producers, False keeps the plain schedule",
    PassConfigKey.TL_ENABLE_LOOP_HEAD_BARRIER: "experimental: the barrier of a loop's back edge (the next iteration "
        "would overwrite shared memory this one still reads) goes just before the first statement of the body that "
        "races with the previous iteration's last ones, as upstream places it, instead of at the end of the body "
        "(attention backward: the dQ atomics no longer hold the consumers at the end of each iteration; "
        "transform/thread_sync.py); no faster on attention backward (session 27: within 0.5 %, alone and on top of "
        "tl.enable_atomic_line_staging), on the other kernels it changes not yet measured",
    PassConfigKey.TL_ENABLE_STAGE_PROMOTION: "on by default (false turns it off), sm_90a: a T.Pipelined(num_stages=1) "
        "attention loop (two or more gemms, global -> shared tiles a TMA producer can address, at least 4 trips "
        "where the count is a constant) in a grid of more than one wave runs with two stages where shared memory "
        "holds a second buffer of each tile (attention_schedule.promote_stages): upstream's BSHD / GQA / varlen examples then take the two-stage "
        "BHSD example's path (TMA producer, K / V ring, persistent grid). H200, session 34: mha_fwd_bshd 5.05 -> "
        "3.58 ms, mha_fwd_bshd_causal 2.79 -> 2.10 ms",
    PassConfigKey.TL_ENABLE_ZERO_STAGE_PROMOTION: "on by default since session 57 (false turns it off), sm_80+: "
        "a T.Pipelined(num_stages=0) GEMM main loop (global -> shared T.copy tiles, then only T.gemm of them; no "
        "global writes in the body, no user barriers, not nested or under an if / T.ws, at least 4 trips where the "
        "count is a constant) runs with "
        "three stages (two where only two fit in shared memory): the ordinary pipelined main loop instead of one "
        "round trip a step (attention_schedule.promote_zero_stage; upstream's split-K GEMM example: H100, session 57, "
        "0.516 -> 0.394 ms, upstream 0.590)",
    PassConfigKey.TL_ENABLE_ZERO_STAGE_PROMOTION_ANY: "on by default since session 57 (false turns it off; off too "
        "where tl.enable_zero_stage_promotion is false, unless set): also a zero-stage loop whose body after its "
        "copies holds one gemm among other statements and writes no tensor its copies read (upstream's gdn wy_fast "
        "V loop). H100, session 57: 0.568 -> 0.503 ms, compute-sanitizer clean (an earlier run was wrong: the "
        "early-release loop's middle barrier lacked fence.proxy.async before the wgmma, fixed)",
    PassConfigKey.TL_ENABLE_STMATRIX: "experimental (sm_90a): T.copy of a whole mma / wgmma accumulator fragment "
        "into a 16-bit shared tile (an epilogue's staging tile) stores four 8x8 matrices per warp instruction "
        "(stmatrix.x4, upstream's epilogue) instead of one 32-bit store per element pair "
        "(lower_copy._stmatrix); opt-in: no faster on the H200 (session 34: GEMM 128x256 epilogues within noise, "
        "mha_fwd_bhsd 2.7 % and gdn_scaled_dot_kkt 1 % slower)",
    PassConfigKey.TL_ENABLE_EARLY_PROLOGUE: "experimental (cp.async pipelines): a pipelined loop's prologue (its "
        "first tiles' loads) moves up in front of the kernel's earlier statements it does not depend on (the "
        "copy of Q, the clears, the barrier publishing Q), so the first K / V loads overlap Q's instead of "
        "waiting for it (transform/early_prologue.py); session 27 on the 7 bench kernels it changes: "
        "gemv_alloc_reducer 2 % faster, the others within noise",
    PassConfigKey.TL_ENABLE_ATOMIC_LINE_STAGING: "on by default (false turns it off), sm_90+: a whole float32 "
        "fragment added into a float32 global tensor with a tile T.atomic_add (attention backward's dQ, split-K's "
        "C) goes through a per-warp shared-memory staging region (__syncwarp only, no block barrier) and is read "
        "back row-contiguously into red.global.add.v4.f32, so each warp instruction adds whole 128-byte lines "
        "instead of 8 rows x 32 bytes (transform/atomic_staging.py; narrower runs of whole 16-byte vectors too); "
        "attention backward 3-15 % faster on an H200 (session 27, alone; split-K's epilogue not measured)",
    PassConfigKey.TL_ENABLE_ONE_STAGE_REFILL: "experimental (cp.async pipelines): a one-stage T.Pipelined loop "
        "whose tiles are all plain loads first used at different statements (attention at num_stages=1) loads "
        "K(0) and V(0) before the loop and each tile for the next iteration right after its last reader (K after "
        "S = Q K^T, V after O += P V), one cp.async group per tile, instead of both at the top of each iteration "
        "(transform/attention_schedule.py); session 26: bench_launch's small attention kernel 8.8 -> 7.7 us, "
        "forward attention within +-2 % but varlen causal 1.22 -> 1.37 ms in one round",
    PassConfigKey.TL_ENABLE_PIPELINE_SPLIT_GROUPS: "cp.async pipelines: each staged tile of a T.Pipelined "
        "body whose consumers use the tiles at different statements gets its own cp.async group, waited for "
        "just before its first use and reissued right after its last (upstream's schedule of attention-style "
        "loops; a one-stage loop refills each tile for the next iteration right after its last use). H200, "
        "session 14: faster on the two-stage attention-style loops it changes (upstream's gqa_decode_split 0.035 "
        "-> 0.030 ms, gdn_chunk_fwd_o 0.44 -> 0.41 ms), slower on a body that reads every tile first "
        "(gemv_alloc_reducer 0.030 -> 0.043 ms) and on one-stage 128x128 attention on one warpgroup "
        "(mha_fwd_bshd 9.3 -> 13.2 ms). Unset (the default since session 31): loops of two or more stages whose "
        "tiles are first read at different statements in a grid of at most one wave of blocks (session 31: "
        "gqa_decode_split, 64 blocks, 0.0322 -> 0.0294 ms; sink_gqa_fwd_varlen, many waves, 1.53 -> 1.58 ms, "
        "so not there), loops "
        "with gathered T.Parallel copies (sparse attention: upstream's schedule of them) and "
        "one-stage loops whose fragments fit the attention schedule's register budget (attention at "
        "num_stages=1: K of k+1 loads under the softmax and P V of k), where only False turns it off",
    PassConfigKey.TL_ENABLE_WS_SINGLE_STAGE: "sm_90a: a one-stage T.Pipelined loop with several "
        "gemms (attention at num_stages=1) runs warp-specialised, a TMA producer loading each tile once the "
        "consumers gave back the previous one (K after S = Q K^T, V after O += P V) instead of every thread "
        "loading with cp.async on the spot (also where the attention schedule would issue its loads early). "
        "Unset: where the constant grid is at most one block per SM and the loop's fragments fit the attention "
        "schedule's register budget (attention_schedule.decide_single_stage; H200 session 32: bench_launch's "
        "small attention, 64 blocks, 8.83 -> 8.17 us); True: every such loop (slower on 128x128 one-stage "
        "attention over many waves, RESULTS.md session 22); False: never",
    PassConfigKey.TL_ENABLE_THREAD_WIDENING: "on by default (false turns it off), sm_90a: a kernel of 128 threads "
        "whose T.Pipelined loop of two or more gemms keeps more fragments live than a thread's 255 registers "
        "(upstream's one-stage 128x128 attention: 320) runs on 256 threads, two warpgroups of m64 wgmma, when "
        "nothing in it depends on the thread count (transform/widen_threads.py); upstream's BSHD attention example "
        "9.5 -> 5.1 ms on an H200",
    PassConfigKey.TL_ENABLE_WS_EARLY_RELEASE: "on by default (false turns it off), sm_90a: in a warp-specialised "
        "loop whose body is more than one gemm (block-scaled fp8 GEMM, attention backward), each consumer warp "
        "gives its ring slot back right after the last statement that reads a staged tile (a synchronous gemm, a "
        "T.Parallel nest, a reduction or a copy into registers) instead of at the end of the body, so the producer "
        "refills it while the rest of the body runs (upstream's schedule; attention backward 1-2 % faster on an "
        "H200)",
    PassConfigKey.TL_DISABLE_KEPT_BINDS: "an integer binding whose value divides by a run-time value (T.use_swizzle's "
        "block indices) is left to TVM's simplifier, which repeats the division at every use, inside pipelined loops "
        "too, instead of computing it once (codegen/kept_binds.py)",
    PassConfigKey.TL_DISABLE_WGMMA_OVERLAP: "on sm_90a, a warp-specialised loop body with several gemms (attention) "
                                            "keeps each gemm synchronous instead of running the last gemm of "
                                            "iteration k-1 under the first gemm and the softmax of iteration k",
    PassConfigKey.TL_DISABLE_CLEAR_FUSION: "on sm_90a, where setmaxnreg sets the consumers' registers, a zero fill "
                                           "of a wgmma accumulator under a branch right before the gemm (causal "
                                           "attention's unswitched mask) stays a store per register instead of "
                                           "the gemm's first k-step issuing with scale-d = 0 off that branch "
                                           "(transform/fuse_clear.py)",
    PassConfigKey.TL_DISABLE_WGMMA_MIX: "on sm_90a, a kernel whose gemms do not all fit wgmma (attention "
                                        "backward's 32-row dQ gemm beside 128-row ones) runs every gemm on "
                                        "mma.sync instead of each one that fits on wgmma and the rest on mma.sync "
                                        "(which then reads the wgmma operands' slab layout)",
    PassConfigKey.TL_DISABLE_DEFERRED_COPY_WAIT: "a global->shared T.copy lowered to a lone cp.async (outside a "
                                                 "pipeline, its registers not to spare) waits for its data right "
                                                 "after it instead of just before the first statement that reads "
                                                 "its tile (later lone copies then no longer fly with it)",
    PassConfigKey.TL_DISABLE_SINGLE_WAVE_LAUNCH_BOUND: "a kernel whose constant grid is one wave (at most one block "
                                                       "per SM) of at most 128 threads a block is declared "
                                                       "__launch_bounds__(T) instead of (T, 1)",
    PassConfigKey.TL_DISABLE_SINGLE_WAVE_SETMAXNREG: "a warp-specialised loop body of two gemms or more on one consumer "
                                                     "warpgroup (attention's) whose constant grid is one wave (at most one "
                                                     "block per SM) keeps "
                                                     "__launch_bounds__(T) and its registers as ptxas picks them "
                                                     "instead of (T, 1) with setmaxnreg 24 / 240",
    PassConfigKey.TL_DISABLE_STREAMING_LAUNCH_BOUND: "a kernel that streams global memory through registers in a "
                                                     "loop (a gemv: no tensor cores, cp.async or TMA) is declared "
                                                     "__launch_bounds__(T) instead of (T, 1)",
    PassConfigKey.TL_DISABLE_PAIRED_TAIL_SPLIT: "on sm_90a, a persistent causal attention whose blocks take pairs "
        "of row blocks (x and gx - 1 - x) runs pairs to the end instead of dealing the last rounds' pairs out as "
        "single tiles, longest first (with pairs to the end, U % G blocks run one pair more than the others)",
    PassConfigKey.TL_ENABLE_OCCUPANCY_STEP: "on by default (false turns it off): a kernel whose registers "
        "alone keep one more block off an SM (a constant grid of more than one wave, no launch bound of its own, room in shared memory and "
        "threads) is compiled again under __launch_bounds__(T, blocks + 1), at most 10 % fewer registers a "
        "thread, and that build kept if ptxas fits it without spilling (nvcc only; ptxas runs twice)",
    PassConfigKey.TL_ENABLE_WARP_SCAN: "on by default (false turns it off): T.cumsum / T.cummax (32- and 64-bit sums and maxima) of fewer "
        "rows than the block has threads scan each row with a whole warp, 32 elements at a time (warp shuffles), "
        "instead of with one thread, one element at a time, where that takes fewer dependent steps (a row of "
        "4096 elements: 128 chunks instead of 4096 serial steps; H100, session 48: 13.9 -> 9.9 us)",
    PassConfigKey.TL_ENABLE_EXACT_STORE_FENCES: "opt-in, sm_90a: a barrier after the threads' writes to a shared "
        "buffer that only shares bytes with a TMA store's source (not with a wgmma operand or a TMA load's "
        "destination) goes without fence.proxy.async (the store's own fenced barrier orders those writes); by "
        "default every buffer sharing bytes with one the async proxy reads is fenced. Drops 2 of the 5 fences of "
        "upstream's gdn scaled_dot_kkt; not yet timed on a GPU",
    PassConfigKey.TL_ENABLE_OCCUPANCY_NEUTRAL_REUSE: "opt-in: shared buffers never live at the same time share "
        "bytes only where that lets more blocks share an SM (estimated from shared memory, threads, and a lower "
        "bound of the registers: the largest fragment); otherwise each keeps bytes of its own, and the barriers "
        "that sharing asks for (a write into bytes another buffer was read from) go. Drops 2 of the 7 barriers of "
        "upstream's gdn scaled_dot_kkt; not yet timed on a GPU",
    PassConfigKey.TL_ENABLE_CHUNKED_EPILOGUE: "on by default (false turns it off), sm_90a: a warp-specialised "
        "GEMM whose epilogue stages the whole accumulator through one shared tile "
        "(`T.copy(C_local, C_shared); T.copy(C_shared, C[...])`, or the compiler's own stage) and that keeps one "
        "tile per block because the pipeline's extra buffer and that tile "
        "do not both fit a persistent grid (128x256x64, three stages: 4 x 48 + 64 KiB) stages it 64 columns at a "
        "time through two 64-column tiles (TMA store per chunk), which lets it run persistent with the extra "
        "buffer (session 38: 2-4 % faster on the 128x256x64 GEMMs, bf16 0.96x -> 0.98-0.99x cuBLAS)",
    PassConfigKey.TL_ENABLE_WARPGROUP_PINGPONG: "sm_90a, by default only in the paired persistent schedule of causal "
        "attention (true: every such loop; false: none): in a warp-specialised attention loop whose two "
        "consumer warpgroups split the rows (S = Q K^T issued with the previous P V), the warpgroups take turns "
        "at the tensor cores, each waiting on a named barrier before its gemm issues and releasing the other's "
        "after them, so one warpgroup's softmax runs under the other's gemms (FlashAttention-3's pingpong). "
        "Session 38: causal 1-2 % faster, non-causal up to 2 % slower",
    PassConfigKey.TL_DISABLE_DOUBLE_HEAD_BUFFER: "on sm_90a, the tile a persistent warp-specialised kernel's "
        "producer loads in front of its loop (attention's Q) keeps one buffer instead of two where shared memory "
        "holds two (the producer then loads the next tile's only once the consumers are past this tile's loop, "
        "not as soon as it has issued this tile's K / V)",
    PassConfigKey.TL_DISABLE_TMA_PROLOGUE: "on sm_90a, a tile copied into shared memory in front of a "
                                           "warp-specialised loop with several gemms (attention's Q) is loaded "
                                           "by the consumers with cp.async instead of by the TMA producer "
                                           "(which, in a persistent kernel, loads the next tile's during the "
                                           "epilogue)",
    PassConfigKey.TL_ENABLE_TENSORMAP_PREFETCH: "sm_90a: thread 0 prefetches every tensor map at kernel entry, "
        "before the barrier initialisation, as upstream does (the warp-specialised producer's own prefetches, "
        "right before its first load, are dropped); otherwise a TMA store epilogue's map is fetched when the "
        "store issues. Opt-in: its earlier form (the maps no producer prefetched) changed nothing beyond noise "
        "on 12 short and attention kernels (session 28) except mha_fwd_bshd, 1 % slower in both rounds",
    PassConfigKey.TL_ENABLE_PIPELINE_TAIL_PEEL: "a pipelined loop with one cp.async group per tile runs its last "
        "num_stages iterations, which issue nothing, as a loop of their own, so the others reissue unconditionally "
        "(no `if k + num_stages < n`) and ptxas may hoist a gathered copy's index loads above the barrier before "
        "the reissue, under the last gemm (upstream unrolls that epilogue). Unset (the default): where the loop has "
        "gathered copies (sparse attention; session 30 on the H200: dsv4_sparse_attn_fwd 3.32 -> 2.97 ms, "
        "dsv32_sparse_mla_fwd 7.23 -> 6.69 ms); True: also plain tiles (the one-stage refill, opt-in split "
        "groups; unmeasured); False: never",
    PassConfigKey.TL_ENABLE_MASK_UNSWITCH_BOTH: "a T.Parallel storing if_then_else(mask, a, 0) is unswitched "
        "on both uniform sides, zeros where the mask fails everywhere, the plain store of a where it holds "
        "everywhere, the per-element select otherwise (transform/lower_tile_ops._unswitch_select; off: one "
        "side, the zero side first; either way a side the enclosing loops never reach is skipped, session 59). "
        "An experiment of session 58, not yet measured; it can only help a mask both of whose uniform sides "
        "occur in the loop (a length mask shorter than the loop).",
    PassConfigKey.TL_ENABLE_LONGEST_FIRST_BLOCKS: "a grid whose loops run a number of times that grows (or "
        "shrinks) with blockIdx.x, a compile-time function of it (causal attention: row block bx loops bx + 1 "
        "times), is launched longest row block first, in sections of SMs / row blocks of its (y, z) rows, where "
        "a model of the block scheduler predicts 3 % or more (transform/block_order.py; the blocks are "
        "relabelled, each still computes its one tile). H200, session 31: sink_mha_fwd 1.10x, "
        "gqa_fwd_bshd_causal 1.03x. On by default; False: never",
    PassConfigKey.TL_DISABLE_WGMMA_NARROW_SLABS: "sm_90a: a T.gemm whose warpgroups split N into columns that "
        "are not whole swizzle slabs of an N-major B's row (M=64, N=64 16-bit, 256 threads) takes mma.sync "
        "instead of wgmma with B laid out in slabs as wide as one warpgroup's columns (64 or 32 bytes), the "
        "default since session 29 (upstream's choice; dsv32 sparse MLA backward 13 % faster on the H200). "
        "A kernel whose B buffer would need two slab widths is planned without them on its own",
    PassConfigKey.TL_ENABLE_WIDE_INDEX: "every tensor parameter with a symbolic shape is indexed with 64-bit "
        "offsets (codegen/wide_index.py), so it may span 2**31 elements or more; a JITKernel compiles this "
        "variant itself on the first call that binds such a tensor to its 32-bit kernel",
    PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: "drops the automatic bounds guards on global-tensor elements "
                                                 "(inside T.Parallel and in plain statements: a store skipped, "
                                                 "a load reading 0, a call taking an element's address run only "
                                                 "where it is inside); tile copies stay guarded",
    PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE: "every shared buffer gets bytes of its own: buffers whose "
                                                  "lifetimes do not overlap no longer share them",
    PassConfigKey.TL_DISABLE_DATA_RACE_CHECK: "accepted; no effect (barriers are inserted, not checked)",
    PassConfigKey.TL_DISABLE_BUFFER_INIT_CHECK: "drops the checker's TL0401 (read before initialisation) findings",
    PassConfigKey.TL_DISABLE_OUT_OF_BOUND_WARNING: "drops the checker's TL0601/TL0602 bound findings",
    PassConfigKey.TIR_DISABLE_VECTORIZE: "accepted; vector widths are chosen by alignment analysis",
    PassConfigKey.TL_DISABLE_FAST_MATH: "keeps IEEE math even when `tl.enable_fast_math` is set (fast math is off "
                                        "by default)",
    PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: "an integer in [0, 10]: nvcc --ptxas-options=--register-usage-level=N "
                                                 "(ptxas' register-versus-optimisation trade-off, default 5)",
    PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT: "nvcc --ptxas-options=--verbose (registers, spills and shared "
                                                  "memory of each kernel in the compile log)",
    PassConfigKey.TL_DEVICE_COMPILE_FLAGS: "extra nvcc flags, a list or a shell-quoted string, appended to the "
                                           "compile (and part of the cache key)",
    PassConfigKey.TL_ENABLE_ASYNC_COPY: "False is `tl.disable_async_copy`: no cp.async (True, the default, changes "
                                        "nothing)",
    PassConfigKey.TIR_USE_ASYNC_COPY: "upstream's TIR spelling of `tl.enable_async_copy`",
    PassConfigKey.TL_PASS_PROFILE_THRESHOLD_MS: "a finite number >= 0 (ms): the `tl.pass_profile` report hides "
                                                "passes faster than this (else TILELANG_PASS_PROFILE_THRESHOLD_MS)",
    PassConfigKey.CUDA_KERNELS_OUTPUT_DIR: "a directory: `tilelang.compile` writes each kernel's CUDA source there "
                                           "as `<kernel name>.cu`",
    PassConfigKey.TL_DISABLE_VECTORIZE_256: "accepted; no effect: we never emit 256-bit global loads or stores "
                                            "(16-byte vectors at most)",
    PassConfigKey.TL_ENABLE_FP32X2_REDUCTION: "accepted; no effect: packed float32x2 reduction arithmetic is an "
                                              "sm_100 instruction, and our targets are sm_80 and sm_90a",
    PassConfigKey.TL_ENABLE_AUTO_SCHEDULE: "accepted; no effect: upstream's Ascend (NPU) scheduler",
    PassConfigKey.TL_ENABLE_AUTO_WARP_SPECIALIZATION: "accepted; no effect: our compiler warp-specialises "
        "pipelined loops on sm_90a by itself (`tl.disable_warp_specialized` turns that off); upstream's named "
        "scheduler (`\"role_based\"`) does not exist here",
    PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: "no barrier is planned for the kernel's element accesses to "
        "shared memory (loads, stores, atomics, T.Parallel nests): the user places them (`T.sync_threads`), as "
        "upstream's switch drops its ThreadSync pass. Barriers between tile ops (T.copy, T.gemm, T.fill, ... and "
        "the staging copies our passes add), inside a tile op's lowering and in a pipelined or "
        "warp-specialised loop's schedule stay",
    PassConfigKey.TL_STORAGE_REWRITE_DETECT_INPLACE: _NO_PASS + " (StorageRewrite; local scalars are never shared)",
    PassConfigKey.TL_SIMPLIFY: "accepted; no effect: our simplification is TVM's, unconfigured",
    PassConfigKey.TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES: _SIMPLIFY_SUB,
    PassConfigKey.TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS: _SIMPLIFY_SUB,
    PassConfigKey.TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES: _SIMPLIFY_SUB,
    PassConfigKey.TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL: _SIMPLIFY_SUB,
    PassConfigKey.TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS: _SIMPLIFY_SUB,
    PassConfigKey.TL_SIMPLIFY_ENABLE_LET_INLINE: _SIMPLIFY_SUB,
    PassConfigKey.TL_DISABLE_PRELOWER_SEMANTIC_CHECK: "accepted; no effect: our checks report through diagnostics "
                                                      "(`tl.disable_buffer_init_check` and friends turn codes off)",
    PassConfigKey.TL_EMIT_LINE_DIRECTIVES: "accepted; no effect yet (the generated CUDA carries no #line directives)",
    PassConfigKey.TL_CONFIG_INDEX_BITWIDTH: "accepted; no effect: index width is chosen per kernel (64-bit when a "
                                            "tensor may exceed 2^31 elements)",
    PassConfigKey.TL_ENABLE_REDUCER_PLAN_VERBOSE: _NO_DEBUG,
    PassConfigKey.TL_LAYOUT_COST_MODEL: "accepted; no effect: layout inference has one deterministic rule set, no "
                                        "cost model",
    PassConfigKey.TL_REDUCER_FORCE_BASELINE: "every T.alloc_reducer takes the whole-block plan (replicated partials, "
                                             "one all-reduce over all threads) instead of its narrow plan",
    PassConfigKey.TL_ENABLE_LOWER_LDGSTG: _NO_PASS + " (explicit LDG/STG lowering)",
    PassConfigKey.TL_ENABLE_LOWER_LDGSTG_PREDICATED: _NO_PASS + " (explicit LDG/STG lowering)",
    PassConfigKey.TL_ENABLE_VECTORIZE_PLANNER_VERBOSE: _NO_DEBUG,
    PassConfigKey.TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS: _NO_DEBUG + " (our shared-memory plan shows in the hover)",
    PassConfigKey.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE: "accepted; no effect: buffers with disjoint lifetimes "
                                                            "always share bytes (see `tl.disable_shared_memory_reuse`)",
    PassConfigKey.TL_DISABLE_SHUFFLE_ELECT: _NO_PASS + " (the TMA producer elects thread 0 of its warpgroup)",
    PassConfigKey.TL_DISABLE_LOOP_UNSWITCHING: _NO_PASS + " (loop unswitching)",
    PassConfigKey.TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE: _NO_PASS + " (loop unswitching)",
    PassConfigKey.TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS: _NO_PASS + " (IfStmtBinding)",
    PassConfigKey.TL_FORCE_LET_INLINE: "accepted; no effect: expressions bound without a buffer read are always "
                                       "inlined",
    PassConfigKey.TL_AST_PRINT_ENABLE: _NO_DEBUG + " (use TILELANG_DUMP_IR)",
    PassConfigKey.TL_LAYOUT_VISUALIZATION_ENABLE: "True: the compile prints every inferred fragment layout "
                                                  "(shape, thread and register expressions) and, with "
                                                  "`tl.layout_visualization_formats`, draws the fragments and the "
                                                  "swizzled shared tiles into `./tmp/<buffer>_layout.<format>` "
                                                  "(tilelang/analysis/layout_visual.py; a cached kernel is lowered "
                                                  "again to draw them)",
    PassConfigKey.TL_LAYOUT_VISUALIZATION_FORMATS: "what `tl.layout_visualization_enable` writes: \"txt\" (the default: "
                                                   "print only), \"png\", \"pdf\", \"svg\", \"all\" or a comma list; "
                                                   "png/pdf need matplotlib (`pip install tilelang[plot]`; without it "
                                                   "they become SVG); other values raise ValueError",
    PassConfigKey.TL_ENABLE_DUMP_IR: "accepted; no effect: set TILELANG_DUMP_IR to dump the IR after each pass",
    PassConfigKey.TL_DUMP_IR_DIR: "accepted; no effect: set TILELANG_DUMP_IR=<dir> instead",
    PassConfigKey.TL_PASS_PROFILE: "True: time every pass of the compile (our stages and TVM's codegen passes) "
                                   "and log a report on `tilelang.pass_timing` (also TILELANG_PASS_PROFILE=1)",
    PassConfigKey.TIR_ENABLE_EQUIV_TERMS_IN_CSE: _NO_PASS + " (TIR common-subexpression elimination)",
    PassConfigKey.TIR_DISABLE_CSE: _NO_PASS + " (TIR common-subexpression elimination)",
    PassConfigKey.TIR_SIMPLIFY: "accepted; no effect: our simplification is TVM's, unconfigured",
    PassConfigKey.TIR_DISABLE_STORAGE_REWRITE: _NO_PASS + " (StorageRewrite)",
    PassConfigKey.TIR_ENABLE_DEBUG: "accepted; no effect (add `-G` through `tl.device_compile_flags` for device "
                                    "debug information)",
    PassConfigKey.TIR_MERGE_STATIC_SMEM: "accepted; no effect: all shared buffers always live in one dynamic "
                                         "allocation",
    PassConfigKey.TIR_ADD_LOWER_PASS: "accepted; no effect: our pipeline is a fixed list (tilelang/engine/pipeline.py)",
    PassConfigKey.TIR_NOALIAS: "accepted; no effect: kernel pointer parameters are always `__restrict__` (tensors "
                               "passed to one kernel must not overlap)",
}

# Spellings upstream code uses for keys we name differently -> our key.
ALIASES = {
    "tl.disable_safe_memory_legalize": PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS.value,
    "tirx.disable_vectorize": PassConfigKey.TIR_DISABLE_VECTORIZE.value,
    **{"tir." + k.value[len("tirx."):]: k.value for k in PassConfigKey if k.value.startswith("tirx.")},
}
KNOWN = {k.value for k in PassConfigKey} | set(ALIASES)


def _check_register_level(value) -> int:
    try:
        level = int(value)
    except (TypeError, ValueError):
        level = -1
    if isinstance(value, bool) or not 0 <= level <= 10:
        raise ValueError(f"tl.ptxas_register_usage_level must be an integer in [0, 10], got {value!r}")
    return level


def _check_threshold(value) -> float:
    from tilelang import knobs

    return knobs.parse_threshold_ms(value, PassConfigKey.TL_PASS_PROFILE_THRESHOLD_MS.value)


def _plain(value):
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k.value if isinstance(k, PassConfigKey) else k): _plain(v) for k, v in value.items()}
    return str(value)


def normalize(configs) -> dict:
    """Plain ``{str: python value}`` in our spellings; warns about keys we do not know and
    raises ValueError for a value a key cannot take."""
    out = {}
    for key, value in dict(configs or {}).items():
        name = key.value if isinstance(key, PassConfigKey) else str(key)
        if name not in KNOWN:
            warnings.warn(f"unknown pass config key {name!r}; known keys: {', '.join(sorted(KNOWN))}",
                          stacklevel=3)
        if name == PassConfigKey.TL_DISABLE_TMA_LOWER.value:
            warnings.warn("`tl.disable_tma_lower` is deprecated (upstream removes it in v0.1.10); use "
                          "T.copy(..., disable_tma=True) on the copies that should not use TMA",
                          DeprecationWarning, stacklevel=3)
        out[ALIASES.get(name, name)] = _plain(value)
    if PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL.value in out:
        _check_register_level(out[PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL.value])
    if PassConfigKey.TL_PASS_PROFILE_THRESHOLD_MS.value in out:
        _check_threshold(out[PassConfigKey.TL_PASS_PROFILE_THRESHOLD_MS.value])
    for switch in (PassConfigKey.TL_ENABLE_ASYNC_COPY.value, PassConfigKey.TIR_USE_ASYNC_COPY.value):
        if switch in out and not out[switch]:
            out.setdefault(PassConfigKey.TL_DISABLE_ASYNC_COPY.value, True)
    return out


def _device_flags(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def nvcc_flags(configs) -> list[str]:
    """The nvcc flags the pass configs ask for (fast math, ptxas options, extra device flags)."""
    configs = normalize(configs)
    get = configs.get
    flags = []
    if get(PassConfigKey.TL_ENABLE_FAST_MATH.value) and not get(PassConfigKey.TL_DISABLE_FAST_MATH.value):
        flags.append("--use_fast_math")
    level = get(PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL.value)
    if level is not None:
        flags.append(f"--ptxas-options=--register-usage-level={_check_register_level(level)}")
    if get(PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT.value):
        flags.append("--ptxas-options=--verbose")
    flags += _device_flags(get(PassConfigKey.TL_DEVICE_COMPILE_FLAGS.value))
    return flags


def markdown() -> str:
    lines = ["# Pass configuration keys", "",
             "Pass them as `pass_configs={key: value}` to `@tilelang.jit` or `tilelang.compile` "
             "(`tilelang.PassConfigKey` has them as an enum). They are part of the kernel cache key.", "",
             "| key | effect |", "|---|---|"]
    lines += [f"| `{k.value}` | {EFFECTS[k]} |" for k in PassConfigKey]
    lines += ["", "Other spellings accepted for the same keys (upstream's `tirx.` prefix, our older `tir.`):", "",
              "| spelling | key |", "|---|---|"]
    lines += [f"| `{a}` | `{k}` |" for a, k in sorted(ALIASES.items())]
    return "\n".join(lines) + "\n"
