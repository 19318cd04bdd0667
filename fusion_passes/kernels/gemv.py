"""``fusion_passes::decode_gemv``: the small-M (decode) linear with its neighbours folded in, one Triton kernel.

    # unfused (a decode step of a Llama layer; x [M, K] with M <= 16, W_i [N_i, K], every line one kernel)
    xn  = rms_norm(x) * norm_weight                          -> [M, K]        (norm prologue, optional)
    y   = cat([xn @ W_0.T, xn @ W_1.T, xn @ W_2.T], 1)       -> [M, sum N_i]  (q/k/v: 1-3 weights, one launch)
    y_i = y_i + b_i                                          (biases, optional: concatenated outputs only)
    y   = silu(xn @ W_0.T) * (xn @ W_1.T)                    -> [M, N_0]      (gate/up, silu_mul=True)
    y   = gelu_tanh(xn @ W_0.T) * (xn @ W_1.T)               -> [M, N_0]      (Gemma's GeGLU: + gelu_tanh=True)
    y   = xn @ W_0.T + residual                              -> [M, N_0]      (o/down proj, residual given)
    y_i = rope(y_i, cos, sin)  for the first rope_weights of the concatenated outputs (q, k; optional)
    # fused
    y = torch.ops.fusion_passes.decode_gemv(x, W_0, W_1, W_2, norm_weight, eps, norm_offset, norm_cast,
                                            residual, silu_mul, rope_cos, rope_sin, rope_dim, rope_weights,
                                            b_0, b_1, b_2, gelu_tanh)

``decode_gemv_kv_write`` is the concatenated form that also writes output i's heads into a KV cache
(HF StaticCache's ``cache_i.index_copy_(2, cache_position, heads_i)``) from the same epilogue.

The weights are read in place (separate pointers, no packing, no copy). Every intermediate is rounded to the
model dtype T where eager rounds it, so the result differs from eager's only by the fp32 summation order:

    xn = ((x * rsqrt(mean(x**2) + eps)) [-> T if norm_cast] * (norm_weight + norm_offset)) -> T
    g  = (xn @ W_0.T) -> T
    y_i = (xn @ W_i.T + b_i) -> T                            one rounding, as eager's addmm
    y  = (silu(g) -> T) * ((xn @ W_1.T) -> T) -> T           silu(g) = g / (1 + exp(-g)), in fp32
    gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))), in fp32, in place of silu
    y  = (g + residual) -> T
    rope, per head of rope_dim columns (h = rope_dim / 2, cos/sin [M, rope_dim] in T, HF's rotate_half form):
    y[j]     = ((y[j] * cos[j]) -> T + (-y[j + h] * sin[j]) -> T) -> T                 j < h
    y[j + h] = ((y[j + h] * cos[j + h]) -> T + (y[j] * sin[j + h]) -> T) -> T

Each program owns BLOCK_N output columns of one weight (with rope: BLOCK_N column pairs j, j + h of its heads,
so the rotation stays inside the program) and streams those weight rows once (the decode step is
bound by reading the weights from HBM); the norm prologue re-reads the M x K input, which stays in L2.
M = 1 accumulates elementwise into [BLOCK_N, BLOCK_K] and reduces once at the end, or (ACC1D) reduces each tile
into [BLOCK_N] as it goes, which leaves registers for more programs per SM; 2 <= M <= 16 uses ``tl.dot`` on a
16-row tile.

The late-norm form (NORM_LATE, M = 1 only, ``FUSION_PASSES_GEMV_NORM=late``; off by default) drops the prologue's
pass over the row: the main loop sums the squares of the x tiles it loads anyway (the persistent form, of the row
it holds, beside the dots instead of before them) and the 1/rms scale, one scalar per row, moves after the dot. It
does not round where eager rounds (within bf16 tolerance, not bit-close):

    y = ((x * (norm_weight + norm_offset)) @ W_0.T) * rsqrt(mean(x**2) + eps)      all in fp32, then -> T

Session 60 (design 29) measured it in the persistent form with PDL: the 1B q/k/v 0.15 us faster without the cache
write and no faster with it, the graphed 1B step 3 % faster (``benchmarks/results/logs/s60_run0`` to ``s60_run2``).

The exact form's prologue reads the row in BLOCK_K tiles, one L2 round trip each. Two ways to shorten the
prologue and the epilogue were built in session 15 and measured on the H200 in session 16. Neither was faster,
so neither was kept (``benchmarks/results/gemv_chain_early_*.json``; 1B chain 0.743 ms as shipped, 0.760 with
each): the whole row loaded in one tile, and the o / down residual loaded before the K loop instead of after it.

The persistent form (PERSIST > 0, M = 1, BLOCK_K >= K; only where ``gemv_table.PERSISTENT`` lists it) launches
PERSIST programs per SM. Each loads the input row once, normalises it once (the exact form's roundings; the late
form scales it by the norm weight only) and keeps it in registers, then takes column blocks pid, pid + grid, ...
across all the weights, each one tile of whole rows, requesting the next block's rows before it reduces this one's.
The tiled form loads x (and the norm weight) again with every K tile of every program: L2 traffic of 1/BLOCK_N of
the weights' bytes, which cost 0.6-0.8 us on the 33-50 MB shapes of the H200 (``benchmarks/probe_split_gemv.py``).
Session 20 tried two more changes to it on the H200, and neither was faster, so neither was kept: each block's
epilogue operands (the o / down residual, RoPE's cos / sin) requested together with its rows, one block ahead (chain,
``benchmarks/results/logs/s20_run2``: 1B down 9.64-9.74 vs 9.55-9.63 us, 8B o 9.62-9.69 vs 9.62-9.63 us); and, with a
grid that is a multiple of a head's blocks, cos / sin loaded once per program (``logs/s20_run3``: the cache-writing
q/k/v still 0.14-0.17 us behind the tiled entry, as in session 17). Sizing the grid so that every program takes the
same number of blocks gained nothing either (``logs/s20_run1/split_gemv_grids.json``).
Session 26 found why the cache-writing q/k/v lost in the persistent form: its per-block column math divided by the
head sizes, then run-time arguments (sm_90: 379 instructions and 80 registers per block, against 318 and 64). With
``ROPE_DIM`` and ``HEAD_DIM`` constexprs it is faster than the tiled form at the 1B and 8B shapes
(``logs/s26_run3``, ``s26_run7``), and ``gemv_table.PERSISTENT`` lists it there. Persistent launches cap the
registers a thread may take (``_with_register_cap``) so that all PERSIST programs fit one SM with any Triton version.
Where a block has two rows per column (the RoPE pair, or gate and up), session 27 reduces both rows' products as
one joined [BLOCK_N, BLOCK_K, 2] sum: one cross-warp exchange and two barriers a block instead of two and four
(``logs/s27_run1``: 1B q/k/v with the cache stores 6.69 -> 5.98 us, 1B gate/up 19.25 -> 18.51 us). Requesting two
blocks ahead instead of one was slower at every config there. PREFETCH requests the next block's rows into
registers, but ptxas issues those loads only after this block's multiply-adds (sm_90), so each program has one block
in flight. Loading each block's own rows and letting Triton's pipeliner stage them two blocks ahead in shared memory
(cp.async, which ptxas cannot sink) was slower for every persistent linear (``logs/s29_run1``: chain q/k/v 1B 5.96 ->
7.13 us, 8B 15.09 -> 15.94; the whole chain 1B 0.713 -> 0.764 ms, 8B 3.75 -> 3.88) and was removed. Session 33
had each program request the next GEMV's weights into L2 with sm_90's bulk prefetch (``cp.async.bulk.prefetch.L2``,
one instruction per 16 KB), at its start or its end: the chain was slower at every size (1B 0.70-0.77 ->
0.75-0.85 ms, 8B 3.64-3.73 -> 3.87-4.39; ``logs/s33_run1``) and it was removed. Session 34 kept every next-block
load ahead of the multiply-adds (each block's dot and epilogue under an always-true branch that ptxas does not
sink loads across): no faster where it fit the register cap (8B q/k/v 15.06 -> 15.17 us in the chain, 8B o 9.76 ->
9.71), and gate/up and the 1B down spilled under it (``logs/s34_run1``, ``s34_run2``); it was removed.
Session 53 had the PDL launch's program request every block it takes after its first into L2
(``prefetch.global.L2``) before the wait: every PDL twin was slower, most below its plain launch (1B q/k/v with
the cache write 5.33 -> 6.97 us, 8B 17.88 -> 28.21, 1B gate/up 22.79 -> 36.80; ``logs/s53_run0``); it was removed.
Session 54 staged each PDL program's whole share of the 1B q/k/v in shared memory by TMA before the wait (a Gluon
kernel, ``benchmarks/probe_smem_gemv.py``), so that no weight sits in registers and the next kernel's programs fit
beside: 4.86 us with the norm only, but 5.45-7.25 us in the step's form against this kernel's 5.33 (its reading
then, that RoPE's row pairs, two copies a block, stream slower, session 55 found wrong), and 6.66 us against 5.34
inside the layer chain (``logs/s54_run0`` to ``s54_run2``); not built in. Session 55 (design 26) requested every
block's cos / sin and the cache position right after the wait, before x, as this kernel does for its first block,
and tried the q/k rows interleaved once per head (one TMA box a block): the early requests gained 0.2-0.5 us, the
interleave nothing (the copies into shared memory stream at 4.7 us however they are cut, against 4.25 for a register
kernel's read); 5.12 us at best (81.6 %) against this kernel's 5.32-5.49 in the same runs, but 8.52-8.68 us against
5.41-5.50 inside the layer (``logs/s55_run0`` to ``s55_run2``); not built in. Session 56 (design 27,
``benchmarks/probe_flag_wait.py``) had each PDL program wait on a counter that every program of the kernel before adds
itself to after its stores (polled, then acquired) instead of ``griddepcontrol.wait``: slower at every config (bare
1B q/k/v 4.75 -> 6.19 us, this kernel's layer chain 43.0 -> 60.0 us, ``logs/s56_run0``); removed.

Tile sizes are autotuned per shape.

On CUDA the op launches through ``wrap_triton`` (Inductor emits the kernel in its generated code, CUDA graphs
capture it); elsewhere the same math runs in plain torch; with ``TRITON_INTERPRET=1`` the kernel runs on CPU
tensors (how it is tested without a GPU).

Without PREFETCH the persistent form gives every column block a program of its own (the launch sizes the grid so;
PERSIST then only sets the register cap): one block of rows in registers and one trip, no request for a next block.

``decode_gemv_pdl`` and ``decode_gemv_kv_write_pdl`` are the same ops launched with programmatic dependent launch
(``kernels.pdl``, sm_90+): extern ops that run the kernel with PDL on, which requests its first block of weight rows
(the persistent form; two blocks where its ``gemv_table`` entry says ``PDL_PRELOAD`` 2; the tiled form, none) and
the norm weight (a parameter too) before ``griddepcontrol.wait``, and reads x, the residual, cos / sin and the cache
positions only after it. From the wait to the stores a program is round trips and reductions, so the first block's
residual and cos / sin are requested right after the wait, beside x, not after its dot (each later block's one
block ahead); with both that and the norm weight, the 1B q/k/v went from 76.7 to 80.3 % of the copy bandwidth on an
H100 and the 8B q/k/v from 86.7 to 96.0 % (session 49, ``benchmarks/results/logs/s49_run3``). Where
``gemv_table.PDL_PERSISTENT`` lists the shape, they run that persistent config (a program for every block: all its
rows before the wait) instead of the plain launch's. The passes use them where a step is replayed from a CUDA graph.

Eager rounds each of RoPE's products to T before adding them; LLVM turns such a product into a half-precision
multiply and fuses it into the add (one rounding fewer), and which of the two products it fused differed between the
PDL and the plain compile of the same code, so the twins differed from the ops in the last bit (session 49).
``_kept`` passes each product through a select the compilers cannot fold; the compile tests check that no kernel of
ours has a half-precision fma.
"""

import contextvars
import functools
from typing import Optional

import torch
from torch.library import triton_op, wrap_triton

from . import gemv_table, ieee_fp32_dot, is_interpreted, launch_options, pdl
from .pdl import gdc_launch_dependents, gdc_wait  # noqa: F401 - the kernel's PDL branch calls them

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU-only torch without triton: the op exists and runs its torch implementation
    triton = None

__all__ = ["decode_gemv", "decode_gemv_kv_write", "reference", "write_cache_reference", "MAX_ROWS", "HAS_TRITON", "INTERPRETED"]

HAS_TRITON = triton is not None
MAX_ROWS = 16  # the kernel's largest M: one 16-row tile (decode of up to 16 sequences)
PREFETCH = True  # M = 1: the autotuner may pick the loop that loads the next K tile early (see _configs)
ACC1D_INTERPRETED = False  # the interpreter's one config: the tests run it both ways
PERSIST_INTERPRETED = 0  # > 0: the interpreter's M = 1 config is the persistent form, this many programs per "SM"
PDL_PRELOAD_INTERPRETED = 1  # the interpreter's persistent config: blocks requested before the wait with PDL


if triton is not None:

    def _configs(dot: bool, prefetch: bool = False) -> list:
        # (BLOCK_N, BLOCK_K, warps, stages). Few rows of W per program and long K tiles keep many loads in
        # flight per SM; the autotuner picks per (K, N) shape. Small tiles suit the two-weight silu form (two
        # fp32 accumulators), wide ones the 128K-row lm_head. The 16-row tl.dot tile needs BLOCK_N >= 16.
        # prefetch: also offer each M = 1 shape with the loop loading tile k+1 before reducing tile k (Triton
        # pipelines only loads that feed a tl.dot, so without it each program waits out one HBM round trip per
        # K tile). Neither form wins everywhere on the H200 (1B o/down gain 30 %/18 %, 8B o loses 36 %), so the
        # autotuner chooses per shape.
        if dot:
            shapes = [
                (16, 128, 4, 4), (16, 256, 4, 3), (16, 512, 4, 3), (16, 512, 8, 3), (32, 128, 4, 4),
                (32, 256, 4, 3), (32, 256, 8, 4), (32, 512, 8, 3), (64, 128, 4, 4), (64, 256, 8, 3),
            ]  # fmt: skip
        else:
            shapes = [
                (4, 512, 4, 4), (4, 1024, 4, 2), (8, 256, 4, 4), (8, 512, 4, 3), (8, 512, 8, 3), (8, 1024, 8, 2),
                (16, 256, 4, 3), (16, 256, 8, 4), (16, 512, 4, 2), (16, 512, 8, 3), (32, 256, 4, 3),
                (32, 256, 8, 2), (32, 512, 8, 2), (64, 128, 4, 3), (64, 256, 8, 2), (128, 128, 8, 3),
            ]  # fmt: skip
        forms = (False, True) if prefetch and not dot else (False,)
        configs = [triton.Config({"BLOCK_N": n, "BLOCK_K": k, "PREFETCH": p, "ACC1D": False, "PERSIST": 0,
                                  "PDL_PRELOAD": 1},
                                 num_warps=w, num_stages=s) for p in forms for n, k, w, s in shapes]
        if prefetch and not dot:
            # the prefetching loop reducing each tile as it goes: with one tile's registers per program, more
            # programs fit on an SM; with the norm prologue it reads within 1-8 % of a plain read of the same
            # weights on the H200 (logs/s12_run5/gemv_design_norm.json)
            configs += [triton.Config({"BLOCK_N": n, "BLOCK_K": k, "PREFETCH": True, "ACC1D": True, "PERSIST": 0,
                                       "PDL_PRELOAD": 1}, num_warps=w, num_stages=s)
                        for n, k, w, s in ((2, 1024, 4, 1), (4, 1024, 4, 1), (8, 1024, 4, 1), (4, 1024, 4, 2),
                                           (8, 1024, 4, 2), (2, 2048, 8, 2), (4, 2048, 8, 2))]
        return configs

    @triton.jit
    def _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO: tl.constexpr, BLOCK_K: tl.constexpr):
        """Columns k0 .. k0 + BLOCK_K of x [BLOCK_M, BLOCK_K] and of the program's weight rows [BLOCK_N, BLOCK_K]
        (u: the second weight's rows when TWO, else w again); zeros past K."""
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        x = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        w_mask = n_ok[:, None] & k_ok[None, :]
        w = tl.load(w_rows + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
        u = w
        if TWO:
            u = tl.load(w_rows2 + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
        return x, w, u

    @triton.jit
    def _cache_positions(IDX, rm, seq_len, cache_len, IDX_BASE: tl.constexpr):
        """The cache position of each row m = b * S + s: IDX[s], or IDX[0] + s with IDX_BASE (HF's
        ``arange(S) + cumulative_length``, no kernel of its own to compute); a negative one counts from the end.
        Loaded in the prologue: in the epilogue its latency was one more round trip at the end of every program."""
        if IDX_BASE:
            pos = tl.load(IDX + rm * 0).to(tl.int64) + (rm % seq_len)
        else:
            pos = tl.load(IDX + rm % seq_len).to(tl.int64)  # in bounds for the masked rows too
        return tl.where(pos < 0, pos + cache_len, pos)

    @triton.jit
    def _store_cache_rows(C0, C1, C2, pos, y, cols, w_idx, rm, mask, seq_len, cache_len, sc_b, sc_h, sc_l, sc_d,
                          CACHE_MASK: tl.constexpr, HEAD_DIM: tl.constexpr):
        """y [BLOCK_M, BLOCK_N] (rows rm, columns ``cols`` of output w_idx) into C_{w_idx}[b, col // HD, pos[m],
        col % HD] for row m = b * S + s, as ``C.index_put_([None, None, IDX], heads)`` stores them (pos from
        ``_cache_positions``); one past either end is skipped (eager raises there)."""
        ok = mask & ((pos >= 0) & (pos < cache_len))[:, None]
        off = ((rm // seq_len).to(tl.int64) * sc_b + pos * sc_l)[:, None] + \
            ((cols // HEAD_DIM).to(tl.int64) * sc_h + (cols % HEAD_DIM).to(tl.int64) * sc_d)[None, :]
        # a block is one output's columns, so a branch on w_idx picks its one store (a masked store to every cache
        # issues them all in every block; measured the same time on the H100, logs/s52_run1)
        if CACHE_MASK & 1:
            if w_idx == 0:
                tl.store(C0 + off, y, mask=ok)
        if CACHE_MASK & 2:
            if w_idx == 1:
                tl.store(C1 + off, y, mask=ok)
        if CACHE_MASK & 4:
            if w_idx == 2:
                tl.store(C2 + off, y, mask=ok)

    @triton.jit
    def _store_y(ptrs, v, mask, w_idx, CACHE_MASK: tl.constexpr, CACHED_Y: tl.constexpr):
        """v into Y at ``ptrs`` unless CACHED_Y is off and block output w_idx is a cached one (its only reader was
        the cache update the kernel makes)."""
        if CACHED_Y or CACHE_MASK == 0:
            tl.store(ptrs, v, mask=mask)
        else:
            keep = w_idx >= 0
            if CACHE_MASK & 1:
                keep = keep & (w_idx != 0)
            if CACHE_MASK & 2:
                keep = keep & (w_idx != 1)
            if CACHE_MASK & 4:
                keep = keep & (w_idx != 2)
            if keep:
                tl.store(ptrs, v, mask=mask)

    @triton.jit
    def _weight_block(pid, W0, W1, W2, N0, N1, N2, CONCAT_W: tl.constexpr, PAIR: tl.constexpr,
                      BLOCK_N: tl.constexpr):
        """Which weight column block ``pid`` is (blocks cover cdiv(N0) + cdiv(N1) + cdiv(N2) in turn): its weight's
        pointer, block index within that weight, the weight's width, its first output column and its index."""
        w_ptr = W0
        blk = pid
        n_lim = N0 + pid * 0
        col0 = pid * 0
        w_idx = pid * 0
        if CONCAT_W >= 2:
            nb0 = tl.cdiv(N0 // PAIR, BLOCK_N)
            if pid >= nb0:
                w_ptr = W1
                blk = pid - nb0
                n_lim = N1 + pid * 0
                col0 = N0 + pid * 0
                w_idx = 1 + pid * 0
            if CONCAT_W == 3:
                nb01 = nb0 + tl.cdiv(N1 // PAIR, BLOCK_N)
                if pid >= nb01:
                    w_ptr = W2
                    blk = pid - nb01
                    n_lim = N2 + pid * 0
                    col0 = N0 + N1 + pid * 0
                    w_idx = 2 + pid * 0
        return w_ptr, blk, n_lim, col0, w_idx

    @triton.jit
    def _block_rows(w_ptr, W1, blk, n_lim, K, ROPE: tl.constexpr, ROPE_DIM: tl.constexpr, SILU_MUL: tl.constexpr,
                    BLOCK_N: tl.constexpr):
        """The block's output columns rn [BLOCK_N] (with rope: the first of each pair j, j + h; rj = j within its
        head), which of them exist, and the row pointers of the weight (w_rows) and of the second operand (w_rows2:
        the up projection, or the pair's other half) [BLOCK_N, 1]."""
        rn = blk * BLOCK_N + tl.arange(0, BLOCK_N)
        rj = rn
        if ROPE:  # program column t -> the pair (j, j + h) of head t // h, j = t % h
            half: tl.constexpr = ROPE_DIM // 2
            n_ok = rn < n_lim // 2
            rj = rn % half
            rn = (rn // half) * ROPE_DIM + rj
            w_rows2 = w_ptr + (rn + half).to(tl.int64)[:, None] * K
        else:
            n_ok = rn < n_lim
        w_rows = w_ptr + rn.to(tl.int64)[:, None] * K
        if SILU_MUL:
            w_rows2 = W1 + rn.to(tl.int64)[:, None] * K
        elif not ROPE:
            w_rows2 = w_rows  # never read: only SILU_MUL / ROPE load a second weight
        return rn, rj, n_ok, w_rows, w_rows2

    @triton.jit
    def _kept(v):
        """v, through a select the compilers cannot fold. Without it LLVM computes a product rounded to bf16 / fp16
        that feeds an add as a half-precision multiply, and fuses it into the add (fma.rn.bf16): one rounding
        fewer than eager's, and which of RoPE's two products it fuses differed between two compiles of the same
        code (the PDL launch's and the plain one's; session 49)."""
        return tl.where(v == v, v, v + v)

    @triton.jit
    def _epilogue_loads(R, COS, SIN, rm, m_ok, rn, rj, n_ok, stride_r, stride_cs, HAS_RES: tl.constexpr,
                        ROPE: tl.constexpr, ROPE_DIM: tl.constexpr):
        """The epilogue's operands that earlier kernels write, each [BLOCK_M, BLOCK_N] in fp32 (zeros where the
        launch has none): the residual r, and RoPE's cos / sin at columns j (c1, s1) and j + h (c2, s2)."""
        out_mask = m_ok[:, None] & n_ok[None, :]
        r = (rm[:, None] * 0 + rn[None, :] * 0).to(tl.float32)
        c1, s1, c2, s2 = r, r, r, r
        if HAS_RES:
            r = tl.load(R + rm[:, None] * stride_r + rn[None, :], mask=out_mask, other=0.0).to(tl.float32)
        if ROPE:
            half: tl.constexpr = ROPE_DIM // 2
            cs = rm[:, None] * stride_cs + rj[None, :]
            c1 = tl.load(COS + cs, mask=out_mask, other=0.0).to(tl.float32)
            s1 = tl.load(SIN + cs, mask=out_mask, other=0.0).to(tl.float32)
            c2 = tl.load(COS + cs + half, mask=out_mask, other=0.0).to(tl.float32)
            s2 = tl.load(SIN + cs + half, mask=out_mask, other=0.0).to(tl.float32)
        return r, c1, s1, c2, s2

    @triton.jit
    def _block_epilogue_loads(blk_id, W0, W1, W2, N0, N1, N2, K, R, COS, SIN, rm, m_ok, stride_r, stride_cs,
                              CONCAT_W: tl.constexpr, PAIR: tl.constexpr, ROPE: tl.constexpr, ROPE_DIM: tl.constexpr,
                              SILU_MUL: tl.constexpr, HAS_RES: tl.constexpr, BLOCK_N: tl.constexpr):
        """``_epilogue_loads`` of the persistent form's column block blk_id (zeros past the last block)."""
        w_ptr, blk, n_lim, _, _ = _weight_block(blk_id, W0, W1, W2, N0, N1, N2, CONCAT_W, PAIR, BLOCK_N)
        rn, rj, n_ok, _, _ = _block_rows(w_ptr, W1, blk, n_lim, K, ROPE, ROPE_DIM, SILU_MUL, BLOCK_N)
        return _epilogue_loads(R, COS, SIN, rm, m_ok, rn, rj, n_ok, stride_r, stride_cs, HAS_RES, ROPE, ROPE_DIM)

    @triton.jit
    def _epilogue(y, y_u, rm, m_ok, rn, rj, n_ok, B0, B1, B2, col0, w_idx, pos, r, c1, s1, c2, s2, Y, C0, C1, C2,
                  stride_y, rope_weights, seq_len, cache_len, sc_b, sc_h, sc_l, sc_d, SILU_MUL: tl.constexpr,
                  GELU_TANH: tl.constexpr, HAS_RES: tl.constexpr, BIAS_MASK: tl.constexpr, ROPE: tl.constexpr,
                  ROPE_DIM: tl.constexpr, CACHE_MASK: tl.constexpr, HEAD_DIM: tl.constexpr, CACHED_Y: tl.constexpr):
        """From the fp32 dot products y (and y_u: the up projection's, or the pair's other half) [BLOCK_M, BLOCK_N]
        of one column block to its stored outputs: bias, rounding, silu * up, residual, rope, cache and y stores
        (r, c1, s1, c2, s2: ``_epilogue_loads``)."""
        T = Y.dtype.element_ty
        if BIAS_MASK:  # in fp32 before the one rounding, as addmm's epilogue (B0-B2 all given: stand-ins for absent)
            b_ptr = B0
            if w_idx == 1:
                b_ptr = B1
            if w_idx == 2:
                b_ptr = B2
            # bit w_idx of the mask, as a [BLOCK_N] vector (the interpreter mis-broadcasts a scalar bool in a mask)
            b_ok = n_ok & ((rn * 0 + (BIAS_MASK >> w_idx)) % 2 == 1)
            y = y + tl.load(b_ptr + rn, mask=b_ok, other=0.0).to(tl.float32)[None, :]
            if ROPE:
                y_u = y_u + tl.load(b_ptr + rn + ROPE_DIM // 2, mask=b_ok, other=0.0).to(tl.float32)[None, :]
        y = y.to(T)  # the GEMM's output dtype, as eager rounds it
        out_mask = m_ok[:, None] & n_ok[None, :]
        if SILU_MUL:
            g = y.to(tl.float32)
            if GELU_TANH:  # tanh(z) = 1 - 2 / (exp(2z) + 1): exact at both infinities, no libdevice
                z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
                s = (0.5 * g * (2.0 - 2.0 / (tl.exp(2.0 * z) + 1.0))).to(T)
            else:
                s = (g / (1.0 + tl.exp(-g))).to(T)
            y = (s.to(tl.float32) * y_u.to(T).to(tl.float32)).to(T)
        if HAS_RES:
            y = (y.to(tl.float32) + r).to(T)
        if ROPE:
            half: tl.constexpr = ROPE_DIM // 2
            y2 = y_u.to(T)  # the pair's other half: columns j + h
            a, b = y.to(tl.float32), y2.to(tl.float32)
            ra = (_kept((a * c1).to(T)).to(tl.float32) + _kept((-b * s1).to(T)).to(tl.float32)).to(T)
            rb = (_kept((b * c2).to(T)).to(tl.float32) + _kept((a * s2).to(T)).to(tl.float32)).to(T)
            rotate = w_idx < rope_weights
            y = tl.where(rotate, ra, y)
            y2 = tl.where(rotate, rb, y2)
            _store_y(Y + rm[:, None] * stride_y + (col0 + rn + half)[None, :], y2, out_mask, w_idx, CACHE_MASK,
                     CACHED_Y)
        if CACHE_MASK != 0:
            _store_cache_rows(C0, C1, C2, pos, y, rn, w_idx, rm, out_mask, seq_len, cache_len, sc_b, sc_h, sc_l, sc_d,
                              CACHE_MASK, HEAD_DIM)
            if ROPE:
                _store_cache_rows(C0, C1, C2, pos, y2, rn + ROPE_DIM // 2, w_idx, rm, out_mask, seq_len, cache_len,
                                  sc_b, sc_h, sc_l, sc_d, CACHE_MASK, HEAD_DIM)
        _store_y(Y + rm[:, None] * stride_y + (col0 + rn)[None, :], y, out_mask, w_idx, CACHE_MASK, CACHED_Y)

    @triton.jit
    def _gemv_kernel(
        X,  # [M, K] input, dtype T, row stride stride_x
        NW,  # [K] norm weight (None unless HAS_NORM)
        W0,  # [N0, K] contiguous
        W1,  # [N1, K] (second concatenated weight, or the up projection when SILU_MUL; else W0)
        W2,  # [N2, K] (third concatenated weight; else W0)
        B0,  # [N0] bias of output 0 (None unless BIAS_MASK; then B1/B2 stand in for absent ones, never read)
        B1,  # [N1]
        B2,  # [N2]
        R,  # [M, N0] residual (None unless HAS_RES)
        COS,  # [M, ROPE_DIM] (None unless ROPE)
        SIN,  # [M, ROPE_DIM] (None unless ROPE)
        Y,  # [M, N_out] output, row stride stride_y
        C0,  # [B, H_0, L, HD] KV cache output 0's heads are also written to (None unless CACHE_MASK & 1)
        C1,  # ... output 1's (None unless CACHE_MASK & 2)
        C2,  # ... output 2's (None unless CACHE_MASK & 4)
        IDX,  # [S] cache positions of a batch's S rows, or [1] their base with IDX_BASE (None unless CACHE_MASK)
        M,
        K,
        N0,
        N1,
        N2,
        stride_x,
        stride_r,
        stride_y,
        stride_cs,  # row stride of COS and SIN
        eps,
        norm_offset,
        rope_weights,  # the first rope_weights weights' outputs are rotated
        seq_len,  # S: output row m is token m % S of sequence m // S (cache writes only)
        cache_len,  # L
        sc_b,  # the caches' strides (every cache has the same layout)
        sc_h,
        sc_l,
        sc_d,
        CONCAT_W: tl.constexpr,  # 1-3 weights whose outputs are concatenated (1 with SILU_MUL / HAS_RES)
        HAS_NORM: tl.constexpr,
        NORM_LATE: tl.constexpr,  # M = 1 only: 1/rms applied after the dot (tiled: squares summed in the main loop)
        NORM_CAST: tl.constexpr,
        NORM_OFFSET: tl.constexpr,
        SILU_MUL: tl.constexpr,  # y = act(g) * u, act silu ...
        GELU_TANH: tl.constexpr,  # ... or gelu with the tanh approximation
        HAS_RES: tl.constexpr,
        BIAS_MASK: tl.constexpr,  # bit i: output i has a bias, added before the rotation and the cache write
        ROPE: tl.constexpr,  # programs own column pairs (j, j + ROPE_DIM/2) of every weight
        CACHE_MASK: tl.constexpr,  # bit i: output i's heads are written into C_i at IDX (a KV-cache update)
        ROPE_DIM: tl.constexpr,  # columns per rotated head (0 without rope)
        HEAD_DIM: tl.constexpr,  # HD: cache head h holds output columns h * HD .. (h + 1) * HD (1 without caches)
        IDX_BASE: tl.constexpr,  # the positions are IDX[0] + s, s < S (else IDX[s])
        CACHED_Y: tl.constexpr,  # cached outputs (CACHE_MASK) are stored into Y too (else their Y columns are unset)
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        PREFETCH: tl.constexpr,  # M = 1 only: load the next K tile (persistent: block) while reducing this one
        ACC1D: tl.constexpr,  # M = 1 only: reduce each tile into [BLOCK_N] (registers for one tile, not two)
        PERSIST: tl.constexpr,  # M = 1, BLOCK_K >= K only: programs per SM of the persistent form (0: tiled)
        IEEE_F32: tl.constexpr,  # fp32: the 16-row tile's dots in full precision, not TF32 (kernels.ieee_fp32_dot)
        PDL: tl.constexpr,  # launched with programmatic dependent launch (kernels.pdl): weights first, then the wait
        PDL_PRELOAD: tl.constexpr,  # persistent form with PDL: blocks of rows requested before the wait (1, 2)
    ):
        T = X.dtype.element_ty
        PRECISION: tl.constexpr = "ieee" if IEEE_F32 else None  # None: Triton's default (TF32 for fp32)
        PAIR: tl.constexpr = 2 if ROPE else 1  # output columns per program column
        TWO: tl.constexpr = SILU_MUL or ROPE  # a second accumulator: the up projection, or the pair's other half
        # two blocks requested before the wait, then the loop two ahead: the whole weight before the wait where the
        # grid has 1-2 blocks a program (the small q/k/v), as session 45's probe did, at no more rows in registers
        # in the loop; but the norm prologue then runs beside two blocks (gate/up and the 1B down spill: 1 there)
        AHEAD2: tl.constexpr = PDL and PDL_PRELOAD == 2 and PREFETCH
        pid = tl.program_id(0)
        rm = tl.arange(0, BLOCK_M)
        m_ok = rm < M
        if PDL:
            gdc_launch_dependents()
        if PERSIST:
            # x, normalised once, stays in registers; the program takes column blocks pid, pid + P, ... of every
            # weight, each one tile of whole rows, and requests the next block's rows before reducing this one's
            n_blocks = tl.cdiv(N0 // PAIR, BLOCK_N)
            if CONCAT_W >= 2:
                n_blocks += tl.cdiv(N1 // PAIR, BLOCK_N)
            if CONCAT_W == 3:
                n_blocks += tl.cdiv(N2 // PAIR, BLOCK_N)
            step = tl.num_programs(0)
            # the first block's rows (AHEAD2: the second's too): parameters, which no kernel of the step writes, so
            # with PDL they stream in while the kernel before this one finishes
            w, u = _load_block(W0, W1, W2, N0, N1, N2, pid, K, CONCAT_W, PAIR, ROPE, ROPE_DIM, SILU_MUL,
                               TWO, BLOCK_N, BLOCK_K)
            if AHEAD2:
                w_next, u_next = _load_block(W0, W1, W2, N0, N1, N2, pid + step, K, CONCAT_W, PAIR, ROPE,
                                             ROPE_DIM, SILU_MUL, TWO, BLOCK_N, BLOCK_K)
            rk = tl.arange(0, BLOCK_K)
            if PDL and HAS_NORM:  # a parameter too: its round trip off the path that starts at the wait
                nw = tl.load(NW + rk, mask=rk < K, other=0.0)
        if PDL:  # below: reads of what earlier kernels write (x, residual, cos / sin, positions), and every store
            gdc_wait()
        pos = rm * 0
        if CACHE_MASK != 0:
            pos = _cache_positions(IDX, rm, seq_len, cache_len, IDX_BASE)

        if PERSIST:
            if PDL:
                # the first block's residual / cos / sin requested beside x, not after its dot (each later block's
                # one block ahead): with the weights in registers at the wait, the path from the wait to the
                # stores is round trips and reductions, and these were one more round trip on it
                epi = _block_epilogue_loads(pid, W0, W1, W2, N0, N1, N2, K, R, COS, SIN, rm, m_ok, stride_r,
                                            stride_cs, CONCAT_W, PAIR, ROPE, ROPE_DIM, SILU_MUL, HAS_RES, BLOCK_N)
                if HAS_RES or ROPE:  # ptxas issues those loads after x's have returned unless a barrier keeps
                    tl.debug_barrier()  # them ahead of x's
            xf = tl.load(X + rk[None, :], mask=rk[None, :] < K, other=0.0).to(tl.float32)  # [1, BLOCK_K]
            if HAS_NORM:  # the whole row in one tile
                rstd = tl.rsqrt(tl.sum(xf * xf, axis=1) / K + eps)
                # the exact form rounds as eager does; the late form applies 1/rms after the dots, which then need
                # not wait for the sum
                if not NORM_LATE:
                    xf = xf * rstd[:, None]
                    if NORM_CAST:
                        xf = xf.to(T).to(tl.float32)
                if not PDL:
                    nw = tl.load(NW + rk, mask=rk < K, other=0.0)
                nw = nw.to(tl.float32)
                if NORM_OFFSET:
                    nw = nw + norm_offset
                xf = xf * nw[None, :]
                if not NORM_LATE:
                    xf = xf.to(T).to(tl.float32)
            stop = n_blocks
            if not PREFETCH:  # a program for every block (the launch's grid): one trip, one block in registers
                stop = pid + 1
            for blk_id in range(pid, stop, step):
                if PREFETCH and not AHEAD2:
                    w_next, u_next = _load_block(W0, W1, W2, N0, N1, N2, blk_id + step, K, CONCAT_W, PAIR,
                                                 ROPE, ROPE_DIM, SILU_MUL, TWO, BLOCK_N, BLOCK_K)
                w_ptr, blk, n_lim, col0, w_idx = _weight_block(blk_id, W0, W1, W2, N0, N1, N2, CONCAT_W, PAIR,
                                                               BLOCK_N)
                rn, rj, n_ok, w_rows, w_rows2 = _block_rows(w_ptr, W1, blk, n_lim, K, ROPE, ROPE_DIM, SILU_MUL,
                                                            BLOCK_N)
                if TWO:  # one reduction of both rows' products: half the cross-warp exchanges and barriers
                    y, y_u = tl.split(tl.sum(tl.join(w.to(tl.float32) * xf, u.to(tl.float32) * xf), axis=1))
                    y, y_u = y[None, :], y_u[None, :]
                else:
                    y = tl.sum(w.to(tl.float32) * xf, axis=1)[None, :]
                    y_u = y
                if HAS_NORM and NORM_LATE:
                    y = y * rstd[:, None]
                    y_u = y_u * rstd[:, None]
                if not PDL:
                    epi = _epilogue_loads(R, COS, SIN, rm, m_ok, rn, rj, n_ok, stride_r, stride_cs, HAS_RES, ROPE,
                                          ROPE_DIM)
                r, c1, s1, c2, s2 = epi
                _epilogue(y, y_u, rm, m_ok, rn, rj, n_ok, B0, B1, B2, col0, w_idx, pos, r, c1, s1, c2, s2, Y, C0, C1,
                          C2, stride_y, rope_weights, seq_len, cache_len, sc_b, sc_h, sc_l, sc_d, SILU_MUL, GELU_TANH,
                          HAS_RES, BIAS_MASK, ROPE, ROPE_DIM, CACHE_MASK, HEAD_DIM, CACHED_Y)
                if PDL:
                    epi = _block_epilogue_loads(blk_id + step, W0, W1, W2, N0, N1, N2, K, R, COS, SIN, rm, m_ok,
                                                stride_r, stride_cs, CONCAT_W, PAIR, ROPE, ROPE_DIM, SILU_MUL,
                                                HAS_RES, BLOCK_N)
                if PREFETCH:
                    w, u = w_next, u_next
                if AHEAD2:  # two blocks ahead, requested once this one is reduced
                    w_next, u_next = _load_block(W0, W1, W2, N0, N1, N2, blk_id + 2 * step, K, CONCAT_W, PAIR,
                                                 ROPE, ROPE_DIM, SILU_MUL, TWO, BLOCK_N, BLOCK_K)
        else:
            w_ptr, blk, n_lim, col0, w_idx = _weight_block(pid, W0, W1, W2, N0, N1, N2, CONCAT_W, PAIR, BLOCK_N)
            rn, rj, n_ok, w_rows, w_rows2 = _block_rows(w_ptr, W1, blk, n_lim, K, ROPE, ROPE_DIM, SILU_MUL, BLOCK_N)
            y, y_u = _tiled_dot(X, NW, w_rows, w_rows2, rm, m_ok, n_ok, K, stride_x, eps, norm_offset, HAS_NORM,
                                NORM_LATE, NORM_CAST, NORM_OFFSET, TWO, BLOCK_M, BLOCK_N, BLOCK_K, PREFETCH, ACC1D,
                                PRECISION)
            r, c1, s1, c2, s2 = _epilogue_loads(R, COS, SIN, rm, m_ok, rn, rj, n_ok, stride_r, stride_cs, HAS_RES,
                                                ROPE, ROPE_DIM)
            _epilogue(y, y_u, rm, m_ok, rn, rj, n_ok, B0, B1, B2, col0, w_idx, pos, r, c1, s1, c2, s2, Y, C0, C1, C2,
                      stride_y, rope_weights, seq_len, cache_len, sc_b, sc_h, sc_l, sc_d, SILU_MUL, GELU_TANH, HAS_RES,
                      BIAS_MASK, ROPE, ROPE_DIM, CACHE_MASK, HEAD_DIM, CACHED_Y)

    @triton.jit
    def _load_block(W0, W1, W2, N0, N1, N2, blk_id, K, CONCAT_W: tl.constexpr, PAIR: tl.constexpr,
                    ROPE: tl.constexpr, ROPE_DIM: tl.constexpr, SILU_MUL: tl.constexpr, TWO: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """The persistent form's weight rows [BLOCK_N, BLOCK_K] of column block blk_id (u: the second operand's rows
        when TWO, else w again), whole rows (BLOCK_K >= K); zeros past the last block."""
        w_ptr, blk, n_lim, _, _ = _weight_block(blk_id, W0, W1, W2, N0, N1, N2, CONCAT_W, PAIR, BLOCK_N)
        _, _, n_ok, w_rows, w_rows2 = _block_rows(w_ptr, W1, blk, n_lim, K, ROPE, ROPE_DIM, SILU_MUL, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        w_mask = n_ok[:, None] & (rk < K)[None, :]
        w = tl.load(w_rows + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
        u = w
        if TWO:
            u = tl.load(w_rows2 + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
        return w, u

    @triton.jit
    def _tiled_dot(X, NW, w_rows, w_rows2, rm, m_ok, n_ok, K, stride_x, eps, norm_offset, HAS_NORM: tl.constexpr,
                   NORM_LATE: tl.constexpr, NORM_CAST: tl.constexpr, NORM_OFFSET: tl.constexpr, TWO: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREFETCH: tl.constexpr,
                   ACC1D: tl.constexpr, PRECISION: tl.constexpr):
        """The tiled form's fp32 dot products y, y_u [BLOCK_M, BLOCK_N] of one column block (y_u: the second
        operand's, when TWO): a loop over K tiles, with the norm as a prologue pass over x (or, NORM_LATE, summed
        in the loop and applied after it)."""
        T = X.dtype.element_ty
        if PREFETCH:  # the first weight tile is requested before the norm prologue, so HBM starts streaming at once
            x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, 0, K, stride_x, TWO, BLOCK_K)
        if HAS_NORM and NORM_LATE:
            ss1 = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
        elif HAS_NORM:  # per-row 1/rms over the whole row (the row is small and L2-resident)
            if BLOCK_M == 1:  # squares summed per lane, one cross-warp reduction at the end (not one per tile)
                ss1 = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
            else:
                ss = tl.zeros([BLOCK_M], dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                rk = k0 + tl.arange(0, BLOCK_K)
                xk = tl.load(X + rm[:, None] * stride_x + rk[None, :], mask=m_ok[:, None] & (rk[None, :] < K), other=0.0)
                xk = xk.to(tl.float32)
                if BLOCK_M == 1:
                    ss1 += xk * xk
                else:
                    ss += tl.sum(xk * xk, axis=1)
            if BLOCK_M == 1:
                ss = tl.sum(ss1, axis=1)
            rstd = tl.rsqrt(ss / K + eps)

        if BLOCK_M == 1 and ACC1D:
            acc = tl.zeros([BLOCK_N], dtype=tl.float32)
            if TWO:
                acc_u = tl.zeros([BLOCK_N], dtype=tl.float32)
        elif BLOCK_M == 1:
            acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
            if TWO:
                acc_u = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
        else:
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            if TWO:
                acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)

        for k0 in range(0, K, BLOCK_K):
            if PREFETCH:
                x_nxt, w_nxt, u_nxt = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0 + BLOCK_K, K, stride_x, TWO,
                                                 BLOCK_K)
            else:
                x, w, u = _load_tile(X, w_rows, w_rows2, rm, m_ok, n_ok, k0, K, stride_x, TWO, BLOCK_K)
            rk = k0 + tl.arange(0, BLOCK_K)
            k_ok = rk < K
            if HAS_NORM and NORM_LATE:
                xf = x.to(tl.float32)
                ss1 += xf * xf
                nw = tl.load(NW + rk, mask=k_ok, other=0.0).to(tl.float32)
                if NORM_OFFSET:
                    nw = nw + norm_offset
                x = xf * nw[None, :]  # fp32 into the dot: the 1/rms scale comes after it
            elif HAS_NORM:
                xf = x.to(tl.float32) * rstd[:, None]
                if NORM_CAST:
                    xf = xf.to(T).to(tl.float32)
                nw = tl.load(NW + rk, mask=k_ok, other=0.0).to(tl.float32)
                if NORM_OFFSET:
                    nw = nw + norm_offset
                x = (xf * nw[None, :]).to(T)
            if BLOCK_M == 1 and ACC1D:
                xr = x.to(tl.float32)
                acc += tl.sum(w.to(tl.float32) * xr, axis=1)
                if TWO:
                    acc_u += tl.sum(u.to(tl.float32) * xr, axis=1)
            elif BLOCK_M == 1:
                xr = x.to(tl.float32)  # [1, BLOCK_K] broadcasts over the BLOCK_N weight rows
                acc += w.to(tl.float32) * xr
                if TWO:
                    acc_u += u.to(tl.float32) * xr
            else:
                acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION)
                if TWO:
                    acc_u = tl.dot(x, tl.trans(u), acc_u, input_precision=PRECISION)
            if PREFETCH:
                x, w, u = x_nxt, w_nxt, u_nxt

        if BLOCK_M == 1 and ACC1D:
            y = acc[None, :]
            y_u = y
            if TWO:
                y_u = acc_u[None, :]
        elif BLOCK_M == 1:
            y = tl.sum(acc, axis=1)[None, :]
            y_u = y
            if TWO:
                y_u = tl.sum(acc_u, axis=1)[None, :]
        else:
            y = acc
            y_u = y
            if TWO:
                y_u = acc_u
        if HAS_NORM and NORM_LATE:
            rstd = tl.rsqrt(tl.sum(ss1, axis=1) / K + eps)
            y = y * rstd[:, None]
            if TWO:
                y_u = y_u * rstd[:, None]
        return y, y_u


    # One autotuner per M tile (configs differ); both run the same kernel. Not prune_configs_by: Inductor's
    # support for user-defined autotuned kernels does not cover every pruning hook.
    _KEY = ["K", "N0", "N1", "N2", "CONCAT_W", "HAS_NORM", "NORM_LATE", "SILU_MUL", "GELU_TANH", "HAS_RES",
            "BIAS_MASK", "ROPE", "ROPE_DIM", "CACHE_MASK", "HEAD_DIM", "IEEE_F32"]
    _gemv_m1 = {p: triton.autotune(configs=_configs(dot=False, prefetch=p), key=_KEY)(_gemv_kernel)
                for p in (False, True)}  # keyed by "may prefetch"; the benchmarks time both
    _gemv_m16 = triton.autotune(configs=_configs(dot=True), key=_KEY)(_gemv_kernel)



REGISTERS_PER_SM = 65536  # every NVIDIA GPU since Volta; allocated per warp, in units of 8 registers a thread


def _with_register_cap(config: dict) -> dict:
    """A persistent config (PERSIST > 0) with ``maxnreg``: its PERSIST programs per SM must all reside at once (each
    takes every P-th block; one that does not fit waits for a second wave). Registers depend on the Triton version:
    triton 3.8 compiles the 1B down (3 programs of 8 warps a SM) to 86 a thread, past the 85 that fit, and to 80
    with no spill under the cap (tests/kernels/test_compile_for_hopper.py). ``maxnreg`` sits among the config's
    kwargs, not in ``triton.Config(maxnreg=)``: Inductor's code for a user kernel keeps the kwargs of its configs
    and drops that field (``config_to_dict``), then turns the key back into the option (``config_from_dict``)."""
    if not config.get("PERSIST"):
        return config
    cap = REGISTERS_PER_SM // (config["PERSIST"] * config["num_warps"] * 32) // 8 * 8
    return {**config, "maxnreg": min(cap, 255)}


@functools.lru_cache(maxsize=None)
def _fixed_kernel(entry: tuple):
    """The kernel with one config, ``gemv_table``'s (BLOCK_N, BLOCK_K, PREFETCH, num_warps, num_stages[, ACC1D]):
    an autotuner of one config, which Inductor launches without timing anything."""
    c = _with_register_cap(gemv_table.as_config(entry))
    warps, stages = c.pop("num_warps"), c.pop("num_stages")
    return triton.autotune(configs=[triton.Config(c, num_warps=warps, num_stages=stages)], key=_KEY)(_gemv_kernel)


def _m1_kernel(device: torch.device, meta: dict, k: int, n0: int, n1: int, n2: int, prefetch: Optional[bool]):
    """What an M = 1 launch runs: the measured config of ``gemv_table`` for this device and shape (always one for
    the cache-writing form), else the autotuner (``prefetch``: offer the prefetching loop too; a caller that
    chooses it explicitly, as the benchmarks do, gets the autotuner)."""
    entry = gemv_table.lookup(_device_name(device), meta, k, n0, n1, n2) if prefetch is None else None
    if entry is None and meta["CACHE_MASK"]:
        entry = gemv_table.KV_FALLBACK
    if entry is not None:
        return _fixed_kernel(entry)
    return _gemv_m1[PREFETCH if prefetch is None else prefetch]


def _device_name(device: torch.device) -> str:
    """The name ``gemv_table`` looks this device up by (``FUSION_PASSES_GEMV_TABLE_DEVICE``): by default its own,
    or the GPU ``gemv_table.SAME_CONFIGS`` gives it."""
    chosen = gemv_table.device_policy()
    if chosen not in ("auto", "own"):
        return chosen
    try:
        name = torch.cuda.get_device_name(device)
    except (RuntimeError, AssertionError):  # no CUDA runtime (fake CUDA tensors in the CPU tests)
        return ""
    return gemv_table.SAME_CONFIGS.get(name, name) if chosen == "auto" else name


INTERPRETED = triton is not None and is_interpreted(_gemv_kernel)


@functools.lru_cache(maxsize=None)
def _sm_count(device: torch.device) -> int:
    """Multiprocessors the persistent form's grid is sized by; 2 off CUDA (the interpreter: programs that take
    several blocks each, as on a GPU), and 2 where no CUDA runtime answers (fake CUDA tensors in the CPU tests)."""
    if device.type != "cuda":
        return 2
    try:
        return torch.cuda.get_device_properties(device).multi_processor_count
    except (RuntimeError, AssertionError):
        return 2


def _block_m(m: int) -> int:
    return 1 if m == 1 else 16


def _launch(x, w0, w1, w2, norm_weight, eps, norm_offset, norm_cast, residual, silu_mul, y,
            rope_cos=None, rope_sin=None, rope_dim=0, rope_weights=0, prefetch: Optional[bool] = None,
            caches=(None, None, None), cache_index=None, index_base: bool = False,
            config: Optional[dict] = None, biases=(None, None, None), gelu_tanh: bool = False,
            pdl_launch: bool = False, cached_y: bool = True):
    """Launch the kernel into ``y``; ``config`` (BLOCK_N, BLOCK_K, PREFETCH, num_warps, num_stages) skips the
    autotuner (the interpreter always does: it would time every config), and then the compiled kernel is returned
    (its ``n_regs`` and ``n_spills``, for the benchmarks). ``pdl_launch``: launched by Triton's launcher with
    programmatic dependent launch where the GPU has it (``kernels.pdl``), never through ``wrap_triton``.
    ``cached_y`` False: the columns of outputs written into a cache are left unset in ``y``."""
    m, k = x.shape
    concat = 1 if (silu_mul or residual is not None) else 1 + (w1 is not None) + (w2 is not None)
    n0 = w0.shape[0]
    n1 = w1.shape[0] if w1 is not None else 0
    n2 = w2.shape[0] if w2 is not None else 0
    rope = rope_weights > 0
    widths = tuple(n // 2 if rope else n for n in (n0, n1, n2)[:concat])  # with rope a program column is a pair

    def grid(meta):
        blocks = sum(triton.cdiv(n, meta["BLOCK_N"]) for n in widths)
        if meta.get("PERSIST", 0) and meta["PREFETCH"]:  # the persistent form: PERSIST programs per SM, each
            return (min(blocks, _sm_count(x.device) * meta["PERSIST"]),)  # taking every P-th block
        return (blocks,)

    seq_len, cache_len, head_dim, *cache_strides = _cache_layout(caches, cache_index, index_base, m)
    launch_pdl = pdl_launch and pdl.supported(x.device)
    meta = dict(
        CONCAT_W=concat,
        HAS_NORM=norm_weight is not None,
        NORM_LATE=norm_weight is not None and _block_m(int(m)) == 1 and gemv_table.norm_policy() == "late",
        NORM_CAST=norm_cast,
        NORM_OFFSET=norm_offset != 0.0,
        SILU_MUL=silu_mul,
        GELU_TANH=gelu_tanh,
        HAS_RES=residual is not None,
        BIAS_MASK=sum(1 << i for i, b in enumerate(biases) if b is not None),
        ROPE=rope,
        CACHE_MASK=sum(1 << i for i, c in enumerate(caches) if c is not None),
        # constexprs, not arguments: the per-block column math then divides by constants (shifts), which took a
        # persistent program's loop from 379 to 318 instructions per block for the cache-writing q/k/v (sm_90)
        ROPE_DIM=rope_dim if rope else 0,
        HEAD_DIM=head_dim,
        IDX_BASE=index_base,
        CACHED_Y=cached_y,
        BLOCK_M=_block_m(int(m)),
        IEEE_F32=ieee_fp32_dot(x.dtype),
        PDL=launch_pdl,
    )
    args = (
        x, norm_weight, w0, w1 if w1 is not None else w0, w2 if w2 is not None else w0,
        *_bias_pointers(biases), residual, rope_cos,
        rope_sin, y, *caches, cache_index,
        m, k, n0, n1, n2,
        x.stride(0), residual.stride(0) if residual is not None else 0, y.stride(0),
        rope_cos.stride(0) if rope else 0,
        eps, norm_offset, rope_weights, seq_len, cache_len, *cache_strides,
    )  # fmt: skip
    if config is None and INTERPRETED and x.device.type != "cuda":
        config = dict(BLOCK_N=16, BLOCK_K=64, PREFETCH=(PREFETCH if prefetch is None else prefetch)
                      and meta["BLOCK_M"] == 1, ACC1D=ACC1D_INTERPRETED, num_warps=4)
        if PERSIST_INTERPRETED and meta["BLOCK_M"] == 1:
            config.update(BLOCK_N=4, BLOCK_K=triton.next_power_of_2(k), PERSIST=PERSIST_INTERPRETED,
                          PDL_PRELOAD=PDL_PRELOAD_INTERPRETED)
    if config is not None:
        config = {"ACC1D": False, "PERSIST": 0, "PDL_PRELOAD": 1, **config}
        if config["PERSIST"] and (meta["BLOCK_M"] != 1 or config["BLOCK_K"] < k):
            raise ValueError(f"decode_gemv: the persistent form needs M = 1 and BLOCK_K >= K ({k}), got M = {m}, "
                             f"BLOCK_K = {config['BLOCK_K']}")
        if x.device.type == "cuda":  # the interpreter takes no compiler options
            config = _with_register_cap(config)
        return _gemv_kernel[grid(config)](*args, **meta, **config, **launch_options(launch_pdl))
    kernel = _gemv_m16 if meta["BLOCK_M"] > 1 else _m1_kernel(x.device, meta, k, n0, n1, n2, prefetch)
    # PDL needs Triton's own launcher; otherwise wrap_triton, so that tracing puts the kernel into the graph
    (kernel if launch_pdl else wrap_triton(kernel))[grid](*args, **meta, **launch_options(launch_pdl))


def _bias_pointers(biases) -> tuple:
    """B0, B1, B2: the biases given, a present one standing in for each absent one (BIAS_MASK keeps it unread)."""
    present = next((b for b in biases if b is not None), None)
    return tuple(b if b is not None else present for b in biases)


def _cache_layout(caches, cache_index, index_base: bool, rows: int) -> tuple:
    """(S, L, HD, stride_b, stride_h, stride_l, stride_d) of the caches written, zeros when there are none."""
    cache = next((c for c in caches if c is not None), None)
    if cache is None:
        return (1, 0, 1, 0, 0, 0, 0)
    seq_len = rows // cache.shape[0] if index_base else cache_index.shape[0]
    return (seq_len, cache.shape[2], cache.shape[3], *cache.stride())


def _use_triton(x: torch.Tensor) -> bool:
    if not HAS_TRITON:
        return False
    return x.device.type == "cuda" or (INTERPRETED and type(x) is torch.Tensor)


def _out_width(w0, w1, w2, residual, silu_mul) -> int:
    if silu_mul or residual is not None:
        return w0.shape[0]
    return sum(w.shape[0] for w in (w0, w1, w2) if w is not None)


def rope(y: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF's ``y * cos + rotate_half(y) * sin`` per head: y [M, heads * D], cos/sin [M, D], eager's roundings."""
    m, n = y.shape
    d = cos.shape[-1]
    yh = y.reshape(m, n // d, d)
    rot = torch.cat([-yh[..., d // 2:], yh[..., : d // 2]], dim=-1)
    return (yh * cos[:, None] + rot * sin[:, None]).reshape(m, n)


def reference(x, w0, w1=None, w2=None, norm_weight=None, eps=1e-6, norm_offset=0.0, norm_cast=True,
              residual=None, silu_mul=False, rope_cos=None, rope_sin=None, rope_dim=0, rope_weights=0,
              biases=(None, None, None), gelu_tanh=False) -> torch.Tensor:
    """The op's math in plain torch, rounding where eager rounds (the CPU implementation and the tests' oracle)."""
    t = x.dtype
    if norm_weight is not None:
        xf = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        if norm_cast:
            xf = xf.to(t).float()
        x = (xf * (norm_weight.float() + norm_offset)).to(t)
    if silu_mul:
        g = (x @ w0.t()).float()
        act = torch.nn.functional.gelu(g, approximate="tanh") if gelu_tanh else g / (1.0 + torch.exp(-g))
        return (act.to(t) * (x @ w1.t())).contiguous()
    if residual is not None:
        return x @ w0.t() + residual
    outs = [x @ w.t() if b is None else torch.addmm(b, x, w.t()) for w, b in zip((w0, w1, w2), biases)
            if w is not None]
    outs = [rope(o, rope_cos, rope_sin) if i < rope_weights else o for i, o in enumerate(outs)]
    return torch.cat(outs, dim=1)


_define_op = triton_op if HAS_TRITON else torch.library.custom_op


@_define_op("fusion_passes::decode_gemv", mutates_args=())
def decode_gemv(
    x: torch.Tensor,
    w0: torch.Tensor,
    w1: Optional[torch.Tensor],
    w2: Optional[torch.Tensor],
    norm_weight: Optional[torch.Tensor],
    eps: float,
    norm_offset: float,
    norm_cast: bool,
    residual: Optional[torch.Tensor],
    silu_mul: bool,
    rope_cos: Optional[torch.Tensor] = None,
    rope_sin: Optional[torch.Tensor] = None,
    rope_dim: int = 0,
    rope_weights: int = 0,
    bias0: Optional[torch.Tensor] = None,
    bias1: Optional[torch.Tensor] = None,
    bias2: Optional[torch.Tensor] = None,
    gelu_tanh: bool = False,
) -> torch.Tensor:
    """x [M, K] (M <= 16), W_i [N_i, K] -> [M, sum N_i], or [M, N_0] with silu_mul / residual (see module doc).
    With rope_weights > 0 (concatenated outputs only), the first rope_weights outputs are rotated per head of
    rope_dim columns by rope_cos / rope_sin [M, rope_dim]; every N_i must be a multiple of rope_dim.
    bias_i [N_i] (concatenated outputs only) is added to output i before the rotation. gelu_tanh (with silu_mul):
    the gate's activation is gelu's tanh form instead of silu."""
    return _run(x, w0, w1, w2, norm_weight, eps, norm_offset, norm_cast, residual, silu_mul, rope_cos, rope_sin,
                rope_dim, rope_weights, biases=(bias0, bias1, bias2), gelu_tanh=gelu_tanh)


def _run(x, w0, w1, w2, norm_weight, eps, norm_offset, norm_cast, residual, silu_mul, rope_cos, rope_sin, rope_dim,
         rope_weights, caches=(None, None, None), cache_index=None, index_base=False,
         biases=(None, None, None), gelu_tanh=False, cached_y=True) -> torch.Tensor:
    """Every op's body: the kernel on CUDA (or in the interpreter), else the torch reference (which sets every
    column of y: ``cached_y`` only lets the kernel skip some)."""
    if rope_weights and (silu_mul or residual is not None or rope_dim % 2
                         or any(w is not None and w.shape[0] % rope_dim for w in (w0, w1, w2))):
        raise ValueError("decode_gemv: rope needs concatenated outputs whose widths are multiples of an even rope_dim")
    _check_biases(x, (w0, w1, w2), biases, silu_mul or residual is not None)
    if gelu_tanh and not silu_mul:
        raise ValueError("decode_gemv: gelu_tanh picks the gate's activation: it needs silu_mul=True")
    if not _use_triton(x) or not _kernel_takes(x, (w0, w1, w2), norm_weight, residual, rope_cos, rope_sin, rope_dim,
                                               rope_weights):
        y = reference(x, w0, w1, w2, norm_weight, eps, norm_offset, norm_cast, residual, silu_mul, rope_cos,
                      rope_sin, rope_dim, rope_weights, biases, gelu_tanh)
        if cache_index is not None:
            if index_base:  # the positions the kernel computes: p + s, s < S
                seq_len = _cache_layout(caches, cache_index, True, x.shape[0])[0]
                cache_index = cache_index.reshape(()) + torch.arange(seq_len, device=cache_index.device)
            write_cache_reference(y, [w.shape[0] for w in (w0, w1, w2) if w is not None], caches, cache_index)
        return y
    x, w0, w1, w2, norm_weight, residual, rope_cos, rope_sin, *biases = (
        t.contiguous() if t is not None else None
        for t in (x, w0, w1, w2, norm_weight, residual, rope_cos, rope_sin, *biases)
    )  # no-ops for what the pass inserts: activations and parameters are contiguous (never the caches: written)
    y = torch.empty((x.shape[0], _out_width(w0, w1, w2, residual, silu_mul)), dtype=x.dtype, device=x.device)
    _launch(x, w0, w1, w2, norm_weight, eps, norm_offset, norm_cast, residual, silu_mul, y, rope_cos, rope_sin,
            rope_dim, rope_weights, caches=caches, cache_index=cache_index, index_base=index_base, biases=biases,
            gelu_tanh=gelu_tanh, pdl_launch=_PDL_LAUNCH.get(), cached_y=cached_y)
    return y


def _kernel_takes(x, weights, norm_weight, residual, rope_cos, rope_sin, rope_dim, rope_weights) -> bool:
    """Whether the kernel computes what ``reference`` does: it writes one tile of MAX_ROWS rows, indexes the norm
    weight, residual and cos/sin as [K], [M, N_0] and [M, rope_dim] (no broadcasting) and multiplies weights of
    x's dtype (eager's matmul refuses others). The pass gives it only such inputs; a direct call may not."""
    m, k = x.shape
    if m > MAX_ROWS or any(w is not None and (w.shape[1:] != (k,) or w.dtype != x.dtype) for w in weights):
        return False
    if norm_weight is not None and norm_weight.shape != (k,):
        return False
    if residual is not None and (residual.shape != (m, weights[0].shape[0]) or residual.dtype != x.dtype):
        return False
    return not rope_weights or all(t.shape == (m, rope_dim) and t.dtype == x.dtype for t in (rope_cos, rope_sin))


def _check_biases(x, weights, biases, single_output: bool) -> None:
    for i, (w, b) in enumerate(zip(weights, biases)):
        if b is None:
            continue
        if single_output or w is None:
            raise ValueError("decode_gemv: biases are for concatenated outputs, each with its weight")
        if b.shape != (w.shape[0],) or b.dtype != x.dtype:
            raise ValueError(f"decode_gemv: bias{i} must be [{w.shape[0]}] in {x.dtype}, got {list(b.shape)} "
                             f"{b.dtype}")


@decode_gemv.register_fake
def _decode_gemv_fake(x, w0, w1, w2, norm_weight, eps, norm_offset, norm_cast, residual, silu_mul, rope_cos=None,
                      rope_sin=None, rope_dim=0, rope_weights=0, bias0=None, bias1=None, bias2=None, gelu_tanh=False):
    return x.new_empty((x.shape[0], _out_width(w0, w1, w2, residual, silu_mul)))


@_define_op("fusion_passes::decode_gemv_kv_write", mutates_args=("cache0", "cache1", "cache2"))
def decode_gemv_kv_write(
    x: torch.Tensor,
    w0: torch.Tensor,
    w1: Optional[torch.Tensor],
    w2: Optional[torch.Tensor],
    norm_weight: Optional[torch.Tensor],
    eps: float,
    norm_offset: float,
    norm_cast: bool,
    rope_cos: Optional[torch.Tensor],
    rope_sin: Optional[torch.Tensor],
    rope_dim: int,
    rope_weights: int,
    cache0: Optional[torch.Tensor],
    cache1: Optional[torch.Tensor],
    cache2: Optional[torch.Tensor],
    cache_index: torch.Tensor,
    index_base: bool = False,
    bias0: Optional[torch.Tensor] = None,
    bias1: Optional[torch.Tensor] = None,
    bias2: Optional[torch.Tensor] = None,
    cached_y: bool = True,
) -> torch.Tensor:
    """``decode_gemv`` with concatenated outputs (q/k/v) that also stores output i's heads into the KV cache
    cache_i [B, H_i, L, HD] at the positions cache_index [S] (rows m = b * S + s), the update HF's StaticCache
    makes with ``cache_i.index_copy_(2, cache_index, heads_i)``, heads_i = y_i.view(B, S, H_i, HD).transpose(1, 2).
    With ``index_base`` cache_index is one integer p (shape [] or [1]) and the positions are p + arange(S), S = M / B
    (StaticCache's ``arange(S) + cumulative_length``, read by the kernel instead of computed by one of its own).
    Returns y [M, sum N_i] (bias_i added to output i, as in ``decode_gemv``); the caches are written in place
    (every cache has one layout). ``cached_y=False``: the columns of the outputs written into a cache may be left
    unset in y (for a caller that reads them from the caches only: on the 1B q/k/v with PDL 5.42 -> 5.33 us,
    ``logs/s52_run1``)."""
    caches = (cache0, cache1, cache2)
    _check_cache_args(x, (w0, w1, w2), caches, cache_index, index_base)
    return _run(x, w0, w1, w2, norm_weight, eps, norm_offset, norm_cast, None, False, rope_cos, rope_sin, rope_dim,
                rope_weights, caches, cache_index, index_base, biases=(bias0, bias1, bias2), cached_y=cached_y)


@decode_gemv_kv_write.register_fake
def _kv_write_fake(x, w0, w1, w2, norm_weight, eps, norm_offset, norm_cast, rope_cos, rope_sin, rope_dim, rope_weights,
                   cache0, cache1, cache2, cache_index, index_base=False, bias0=None, bias1=None, bias2=None,
                   cached_y=True):
    return x.new_empty((x.shape[0], _out_width(w0, w1, w2, None, False)))


# The same ops launched with programmatic dependent launch (``kernels.pdl``): extern ops of the same schemas, which
# Inductor calls through the dispatcher (Python on every call: for steps replayed from CUDA graphs). Each runs its
# op eagerly (no tracing: Triton's launcher, which takes ``launch_pdl``) with ``_PDL_LAUNCH`` set. Defined with the
# low-level Library API, as ``decode_attention``: a ``custom_op`` wrapper costs more per call.
_PDL_LAUNCH: contextvars.ContextVar[bool] = contextvars.ContextVar("fusion_passes_gemv_pdl", default=False)
_lib = torch.library.Library("fusion_passes", "FRAGMENT")
PDL_TWINS: dict = {}  # op overload -> its PDL twin


def _define_pdl_twin(op) -> None:
    """``fusion_passes::<op>_pdl``: ``op`` (an OpOverload of ours) launched with PDL."""
    name = op._schema.name.split("::")[1] + "_pdl"
    _lib.define(name + str(op._schema)[len(op._schema.name):])

    def run(*args, **kwargs):
        token = _PDL_LAUNCH.set(True)
        try:
            return op(*args, **kwargs)
        finally:
            _PDL_LAUNCH.reset(token)

    _lib.impl(name, run, "CompositeExplicitAutograd")
    torch.library.register_fake(f"fusion_passes::{name}", _FAKES[op], lib=_lib)
    PDL_TWINS[op] = getattr(torch.ops.fusion_passes, name).default


def _check_cache_args(x, weights, caches, cache_index, index_base: bool) -> None:
    written = [(w, c) for w, c in zip(weights, caches) if c is not None]
    if not written or any(w is None for w, _ in written):
        raise ValueError("decode_gemv_kv_write: every cache needs its weight, and at least one cache is needed")
    first = written[0][1]
    if cache_index.dtype not in (torch.int32, torch.int64):  # the kernel would cast a bool or float index to one
        raise ValueError(f"decode_gemv_kv_write: cache_index needs integer positions (int32/int64), got "
                         f"{cache_index.dtype}")
    if index_base:
        if cache_index.dim() > 1 or cache_index.numel() != 1:
            raise ValueError(f"decode_gemv_kv_write: index_base needs one integer position, got "
                             f"{list(cache_index.shape)} {cache_index.dtype}")
        s = x.shape[0] // first.shape[0] if first.dim() == 4 and first.shape[0] else -1
    else:
        s = cache_index.shape[0] if cache_index.dim() == 1 else -1
    for w, c in written:
        if c.dim() != 4 or c.shape[0] * s != x.shape[0] or c.shape[1] * c.shape[3] != w.shape[0]:
            raise ValueError(f"decode_gemv_kv_write: cache {list(c.shape)} does not hold {x.shape[0]} rows of "
                             f"{w.shape[0]} columns at {s} positions per sequence")
        if c.shape != first.shape or c.stride() != first.stride() or c.dtype != x.dtype:
            raise ValueError("decode_gemv_kv_write: the caches need one shape, layout and the input's dtype")


def write_cache_reference(y: torch.Tensor, widths: list[int], caches, cache_index: torch.Tensor) -> None:
    """Store y's column blocks (widths N_i) into the non-None caches as HF's StaticCache update does."""
    start = 0
    for width, cache in zip(widths, caches):
        if cache is not None:
            b, h, _, d = cache.shape
            cache[:, :, cache_index] = y[:, start:start + width].reshape(b, -1, h, d).transpose(1, 2)
        start += width


_FAKES = {torch.ops.fusion_passes.decode_gemv.default: _decode_gemv_fake,
          torch.ops.fusion_passes.decode_gemv_kv_write.default: _kv_write_fake}
for _op in _FAKES:
    _define_pdl_twin(_op)
