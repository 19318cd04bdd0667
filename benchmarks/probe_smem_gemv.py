"""Designs 25-26 (sessions 54-55): a decode GEMV that stages its whole share of the weights in shared memory before the
PDL wait, so that the next kernel's programs fit beside its own and stream their weights during its tail. Not built
into ``decode_gemv``: in the form a decode step runs (RoPE, the cache write) design 25 was slower than the shipped
kernel; design 26 is 0.2 us faster in a chain of its own twins (81.6 %, short of #8's 85 %) but 3 us slower inside the
layer (below).

    python benchmarks/probe_smem_gemv.py --layer    # GPU (sm_90, Gluon): chains of 16 PDL launches of the 1B q/k/v
                                                    # (and o: --linears qkv o) against the shipped kernel and the
                                                    # read floor; then the layer chain with the fastest q/k/v config
                                                    # (--variants 11 10 01 00: design 26's flags, below)

Every earlier PDL design held its weight rows in registers: a program of the 1B q/k/v takes 69 registers a thread
for one block of rows, six programs fill an SM's register file, and only one program of the next kernel fits
beside them (session 53's ``--room``), so most of the next kernel's loads wait until this one's programs exit. Here
the weights go to shared memory by TMA (copies tracked by an mbarrier) and the program holds none of them in
registers until after the wait:

    kernel i:  for each block b of this program: tma_copy(W_i[rows_b, :] -> smem[b])   # all before the wait
               launch_dependents()                  # kernel i+1 may start; its programs fit beside these
               griddepcontrol.wait()                # kernel i-1 has finished: x_i is written
               x = x_i[:]; xn = rms_norm(x) * nw    # fp32, the exact form's roundings
               for each block b: wait(bar[b]); y = smem[b] @ xn; rope; out_i[rows_b] = y (or the caches)

The 1B q/k/v's 12 MiB is 95 KiB an SM over 132 SMs and the o's 8 MiB 64 KiB: two kernels' shares fit in one SM's
228 KiB. The 8B shapes (48-56 MiB) do not fit in shared memory at all. Each row is K / 256 segments of 256 columns (a
TMA box has at most 256 elements a dimension): W [N, K] is viewed as [N, K / 256, 256]. A block is R / 2 rows of a
head's first half and the R / 2 rows HD / 2 below them (RoPE's pairs), two copies of R / 2 consecutive rows. Warps
split a block by row pairs, so each row's sum and its partner stay in one warp (no cross-warp exchange), and every
warp keeps the whole normalised x (its square sum is one warp's reduction).

Measured on an H100 80GB HBM3 (torch 2.11, triton 3.6; ``results/logs/s54_run0`` to ``s54_run2``), us per GEMV in a
chain of 16 with PDL (every twin equal to its plain launch bit for bit):
- run 0, one box of R consecutive rows a block and no RoPE (the q/k/v with the norm only): 4.86 us (85.5 % of the
  copy bandwidth) at R = 8, 2 programs an SM, 4 warps, 5.23-6.98 at the other configs; its read floor (the same
  copies and waits, no x) 4.23-4.74. The 1B o with the residual 3.83-4.33 against the shipped kernel's 3.28.
- runs 1-2, the step's form (norm, RoPE, k / v to the caches only): 5.45-7.25 us against the shipped kernel's
  5.33-5.34; the blocks' two halves as one 5-D box (run 1) or two 3-D copies (run 2) both copied slower (read floor
  4.66-6.03) than run 0's box of consecutive rows, which session 55 did not reproduce (PAIRED, below); the
  norm-only form here 5.04-5.06 at R = 8, 2 an SM.
- inside the layer chain (q/k/v -> o -> gate/up -> down, the fastest kv config, R = 2, 12 an SM, 1 warp): the q/k/v
  adds 6.66-6.73 us against the shipped kernel's 5.34-5.45 (the layer 44.39 against 43.07-43.11).

Design 26 (session 55, ``--variants``, ``run_gpu.sh s55``) takes on the two costs run 2 showed in the step's form.
Its kv form took 0.55-1.2 us more than its read floor where the norm-only form took 0.1: each block's cos / sin were
requested only after its sums (one more round trip), where the shipped kernel requests its first block's right after
the wait. And the two copies a block seemed to stream slower than one. So (flags of ``smem_gemv_kernel``):

    EARLY:   after the wait, every block's cos / sin (the o: residual) and the cache position, then a barrier, then x
    PAIRED:  W' = paired_rows(W) once (a copy: row 2i of a head is its row i, row 2i + 1 its row i + HD / 2), so a
             block of R consecutive rows of W' is R / 2 whole RoPE pairs: one TMA box, as run 0's

Measured on an H100 80GB HBM3 (torch 2.11, triton 3.6; ``results/logs/s55_run0`` to ``s55_run2``), the step's form,
us per GEMV with PDL, the shipped kernel 5.32-5.49 in the same runs (every twin equal to its plain launch bit for
bit, relative error against fp32 0.006 as before):
- EARLY is worth 0.2-0.5 us: paired 5.49-5.82 -> 5.16-5.38 at the five configs with 2 or more programs an SM
  (R = 4 at 2 an SM: 7.3-7.4 either way); unpaired with EARLY 5.12-5.41 (run 2 without it: 5.46-5.88). The fastest,
  5.12-5.13 (81.4-81.6 %), is unpaired at R = 8, 3 programs an SM, 4 warps; 4.91 would be 85 %.
- PAIRED is worth nothing: the read floors are the same either way (4.68-4.98 at those configs), so session 54's
  reading, that two copies a block stream slower than one box, was wrong; the copies into shared memory stream at
  4.7 us, slower than the 4.25 us of a register kernel's PDL read (``read+pdl``). The norm-only form here 5.08-5.13
  (run 0's 4.86 did not recur).
- Inside the layer chain (fastest EARLY config of each run) the q/k/v adds 8.52-8.68 us against the shipped 5.41-5.50.
So design 26 beats the shipped kernel by 0.2 us in a chain of its own twins and loses 3 us a layer; not built in.
"""

from __future__ import annotations

import torch

import probe_pdl_preload as p  # first: it puts the repository (fusion_passes) on the path
from fusion_passes.kernels.pdl import gdc_launch_dependents, gdc_wait  # Gluon kernels call them as Triton's do

try:
    import triton
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:  # pragma: no cover - a triton without Gluon (before 3.4): nothing to probe
    gluon = None

SEG_COLS = 256  # a TMA box's widest dimension: each weight row is K / SEG_COLS segments

if gluon is not None:
    SEG = gl.constexpr(SEG_COLS)
    # the TMA load into shared memory: async_copy_global_to_shared in triton 3.4-3.6 (the GPU machine's), async_load
    # since (3.9 raises on the old name)
    tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    thread_barrier = getattr(gl, "thread_barrier", None) or gl.barrier  # the CTA's barrier: 3.6's name, then 3.9's
    from fusion_passes.kernels.gemv import _kept  # RoPE's products each rounded on their own, as eager's

    @gluon.jit
    def _request(w_desc, bar, buf, blk, n_blocks, R: gl.constexpr, K: gl.constexpr, HD: gl.constexpr,
                 PAIRED: gl.constexpr):
        """Block blk's weight rows into buf [R, S, SEG], arriving on bar (nothing where blk >= n_blocks). PAIRED
        (the weight's rows interleaved once by ``paired_rows``): one TMA copy of R consecutive rows, R / 2 RoPE
        pairs. Else two copies of R / 2 consecutive rows (3-D boxes: run 1's single 5-D box of both was slower to
        copy): R / 2 rows of a head's first half, then the R / 2 rows HD / 2 below them (RoPE's pairs)."""
        ok = blk < n_blocks
        mbarrier.init(bar, count=1)
        mbarrier.expect(bar, R * K * 2, pred=ok)
        if PAIRED:
            tma_load(w_desc, [blk * R, 0, 0], bar, buf, pred=ok)
        else:
            per_head: gl.constexpr = HD // R
            row = (blk // per_head) * HD + (blk % per_head) * (R // 2)
            tma_load(w_desc, [row, 0, 0], bar, buf.slice(0, R // 2), pred=ok)
            tma_load(w_desc, [row + HD // 2, 0, 0], bar, buf.slice(R // 2, R // 2), pred=ok)

    @gluon.jit
    def _operands(blk, n_blocks, res_ptr, cos_ptr, sin_ptr, R: gl.constexpr, HD: gl.constexpr, RES: gl.constexpr,
                  ROPE_HEADS: gl.constexpr, PAIRED: gl.constexpr, L4: gl.constexpr):
        """Block blk's epilogue operands in its sums' layout: (j, cos / sin at j and j + HD / 2, the residual at its
        two columns), j the columns of the block's first-half rows within their head ([1, R / 2], PAIRED [R / 2,
        1]); zeros for what the form does not read."""
        LY: gl.constexpr = gl.SliceLayout(2, gl.SliceLayout(3, L4))  # the block's sums, [2, R / 2] (PAIRED [R / 2, 2])
        per_head: gl.constexpr = HD // R
        head = blk // per_head
        if PAIRED:
            j = ((blk % per_head) * (R // 2) + gl.arange(0, R // 2, layout=gl.SliceLayout(1, LY)))[:, None]
        else:
            j = ((blk % per_head) * (R // 2) + gl.arange(0, R // 2, layout=gl.SliceLayout(0, LY)))[None, :]
        zero = (j * 0).to(gl.float32)
        c1, s1, c2, s2, r1, r2 = zero, zero, zero, zero, zero, zero
        if ROPE_HEADS > 0:  # every head's j is a valid column of cos / sin [1, HD]
            c1 = gl.load(cos_ptr + j).to(gl.float32)
            s1 = gl.load(sin_ptr + j).to(gl.float32)
            c2 = gl.load(cos_ptr + j + HD // 2).to(gl.float32)
            s2 = gl.load(sin_ptr + j + HD // 2).to(gl.float32)
        if RES:
            ok = (j * 0 + blk) < n_blocks
            r1 = gl.load(res_ptr + head * HD + j, mask=ok, other=0.0).to(gl.float32)
            r2 = gl.load(res_ptr + head * HD + j + HD // 2, mask=ok, other=0.0).to(gl.float32)
        return j, c1, s1, c2, s2, r1, r2

    @gluon.jit
    def _block_out(buf, bar, x, blk, n_blocks, early, res_ptr, out_ptr, cos_ptr, sin_ptr, kc_ptr, vc_ptr, pos,
                   cache_len, R: gl.constexpr, HD: gl.constexpr, RES: gl.constexpr, ROPE_HEADS: gl.constexpr,
                   Q_HEADS: gl.constexpr, KV_HEADS: gl.constexpr, READ_ONLY: gl.constexpr, PAIRED: gl.constexpr,
                   EARLY: gl.constexpr, L4: gl.constexpr):
        """Block blk's outputs once its copies have landed: buf [R, S, SEG] (rows j, then j + HD / 2 of one
        head; PAIRED: the pairs one after the other), x [S, SEG] fp32; ``early``: its ``_operands`` where EARLY
        requested them (else they are requested here, after the sums). Heads below ROPE_HEADS rotated (HF's
        rotate_half, eager's roundings); heads below Q_HEADS stored to out (+ residual), the next KV_HEADS to the
        k cache, the rest to the v cache (both [1, KV_HEADS, cache_len, HD], at position pos)."""
        if blk < n_blocks:
            mbarrier.wait(bar, 0)
            S: gl.constexpr = buf.shape[1]
            HALF: gl.constexpr = 1 if PAIRED else 0  # the axis of a row's half in the block's sums
            if PAIRED:
                w = buf.reshape([R // 2, 2, S, SEG]).load(L4).to(gl.float32)
            else:
                w = buf.reshape([2, R // 2, S, SEG]).load(L4).to(gl.float32)
            if READ_ONLY:
                y = gl.sum(gl.sum(w, axis=3), axis=2)
            else:
                y = gl.sum(gl.sum(w * x[None, None, :, :], axis=3), axis=2).to(gl.bfloat16).to(gl.float32)
            LY: gl.constexpr = gl.SliceLayout(2, gl.SliceLayout(3, L4))
            half_of = gl.arange(0, 2, layout=gl.SliceLayout(1 - HALF, LY))
            half_of = half_of[None, :] if PAIRED else half_of[:, None]
            a = gl.expand_dims(gl.sum(gl.where(half_of == 0, y, 0.0), axis=HALF), HALF)  # rows j
            b = gl.expand_dims(gl.sum(gl.where(half_of == 1, y, 0.0), axis=HALF), HALF)  # rows j + HD / 2
            if EARLY:
                ops = early
            else:
                ops = _operands(blk, n_blocks, res_ptr, cos_ptr, sin_ptr, R, HD, RES, ROPE_HEADS, PAIRED, L4)
            j, c1, s1, c2, s2, r1, r2 = ops
            head = blk // (HD // R)
            if ROPE_HEADS > 0:
                if head < ROPE_HEADS:
                    ra = (_kept((a * c1).to(gl.bfloat16)).to(gl.float32)
                          + _kept((-b * s1).to(gl.bfloat16)).to(gl.float32)).to(gl.bfloat16).to(gl.float32)
                    b = (_kept((b * c2).to(gl.bfloat16)).to(gl.float32)
                         + _kept((a * s2).to(gl.bfloat16)).to(gl.float32)).to(gl.bfloat16).to(gl.float32)
                    a = ra
            if head < Q_HEADS:
                col = head * HD + j
                if RES:
                    a = a + r1
                    b = b + r2
                gl.store(out_ptr + col, a.to(out_ptr.dtype.element_ty))
                gl.store(out_ptr + col + HD // 2, b.to(out_ptr.dtype.element_ty))
            else:
                cache = kc_ptr
                kv_head = head - Q_HEADS
                if kv_head >= KV_HEADS:
                    cache = vc_ptr
                    kv_head -= KV_HEADS
                at = (kv_head * cache_len + pos) * HD + j
                gl.store(cache + at, a.to(cache.dtype.element_ty))
                gl.store(cache + at + HD // 2, b.to(cache.dtype.element_ty))

    @gluon.jit
    def smem_gemv_kernel(w_desc, x_ptr, nw_ptr, res_ptr, out_ptr, cos_ptr, sin_ptr, kc_ptr, vc_ptr, pos_ptr, eps,
                         n_blocks, cache_len, K: gl.constexpr, R: gl.constexpr, HD: gl.constexpr,
                         BLOCKS: gl.constexpr, NORM: gl.constexpr, RES: gl.constexpr, ROPE_HEADS: gl.constexpr,
                         Q_HEADS: gl.constexpr, KV_HEADS: gl.constexpr, READ_ONLY: gl.constexpr, PDL: gl.constexpr,
                         NUM_WARPS: gl.constexpr, PAIRED: gl.constexpr = False, EARLY: gl.constexpr = False):
        """The blocks pid, pid + grid, ... (BLOCKS <= 4 of them, R rows each, n_blocks in all) of W [N, K] (w_desc
        over its [N, K / SEG, SEG] view; PAIRED: of ``paired_rows(W)``): y = W @ xn, xn = x [K], or with NORM
        eager's RMSNorm bf16(bf16(x * rsqrt(mean(x^2) + eps)) * nw); then ``_block_out``'s epilogue. EARLY: every
        block's epilogue operands (cos / sin, the residual) requested right after the wait, before x, as the shipped
        kernel does for its first block. READ_ONLY: y = the rows' sums (the floor: the same copies and waits, no
        x). One buffer per block: Gluon's allocations are powers of two in every dimension, and three blocks of 8
        rows are what fits two kernels' shares in an SM."""
        gl.static_assert(BLOCKS <= 4)
        S: gl.constexpr = K // SEG
        # a block [2, R / 2, S, SEG] (PAIRED [R / 2, 2, S, SEG]): warps split it by row pairs, so each row's sum and
        # its RoPE partner stay in one warp
        WARPS: gl.constexpr = [NUM_WARPS, 1, 1, 1] if PAIRED else [1, NUM_WARPS, 1, 1]
        L4: gl.constexpr = gl.BlockedLayout([1, 1, 1, 8], [1, 1, 1, 32], WARPS, [3, 2, 1, 0])
        # x [S, SEG], whole in each warp; nested so that x[None, None] (expanded at axes 0, then 1) is L4's
        LX: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(1, L4))
        pid = gl.program_id(0)
        grid = gl.num_programs(0)
        MB: gl.constexpr = mbarrier.MBarrierLayout()
        shape: gl.constexpr = [R, S, SEG]
        buf0 = gl.allocate_shared_memory(w_desc.dtype, shape, w_desc.layout)
        bar0 = gl.allocate_shared_memory(gl.int64, [1], MB)
        _request(w_desc, bar0, buf0, pid, n_blocks, R, K, HD, PAIRED)
        if BLOCKS > 1:
            buf1 = gl.allocate_shared_memory(w_desc.dtype, shape, w_desc.layout)
            bar1 = gl.allocate_shared_memory(gl.int64, [1], MB)
            _request(w_desc, bar1, buf1, pid + grid, n_blocks, R, K, HD, PAIRED)
        if BLOCKS > 2:
            buf2 = gl.allocate_shared_memory(w_desc.dtype, shape, w_desc.layout)
            bar2 = gl.allocate_shared_memory(gl.int64, [1], MB)
            _request(w_desc, bar2, buf2, pid + 2 * grid, n_blocks, R, K, HD, PAIRED)
        if BLOCKS > 3:
            buf3 = gl.allocate_shared_memory(w_desc.dtype, shape, w_desc.layout)
            bar3 = gl.allocate_shared_memory(gl.int64, [1], MB)
            _request(w_desc, bar3, buf3, pid + 3 * grid, n_blocks, R, K, HD, PAIRED)
        seg = gl.arange(0, S, layout=gl.SliceLayout(1, LX))[:, None]
        col = gl.arange(0, SEG, layout=gl.SliceLayout(0, LX))[None, :]
        xo = seg * SEG + col
        if NORM:
            nw = gl.load(nw_ptr + xo).to(gl.float32)
        if PDL:  # below: reads of what earlier kernels write, and this kernel's stores
            gdc_launch_dependents()
            gdc_wait()
        e0, e1, e2, e3 = 0, 0, 0, 0  # unused unless EARLY
        pos = 0
        if EARLY:  # ptxas issues these after x's loads have returned unless a barrier keeps them ahead
            if KV_HEADS > 0:
                pos = gl.load(pos_ptr)
            e0 = _operands(pid, n_blocks, res_ptr, cos_ptr, sin_ptr, R, HD, RES, ROPE_HEADS, PAIRED, L4)
            if BLOCKS > 1:
                e1 = _operands(pid + grid, n_blocks, res_ptr, cos_ptr, sin_ptr, R, HD, RES, ROPE_HEADS, PAIRED, L4)
            if BLOCKS > 2:
                e2 = _operands(pid + 2 * grid, n_blocks, res_ptr, cos_ptr, sin_ptr, R, HD, RES, ROPE_HEADS, PAIRED,
                               L4)
            if BLOCKS > 3:
                e3 = _operands(pid + 3 * grid, n_blocks, res_ptr, cos_ptr, sin_ptr, R, HD, RES, ROPE_HEADS, PAIRED,
                               L4)
            thread_barrier()
        x = gl.zeros([S, SEG], gl.float32, LX)
        if not READ_ONLY:
            x = gl.load(x_ptr + xo).to(gl.float32)
            if NORM:
                rstd = gl.rsqrt(gl.sum(gl.sum(x * x, axis=1), axis=0) / K + eps)
                x = (x * rstd).to(gl.bfloat16).to(gl.float32)
                x = (x * nw).to(gl.bfloat16).to(gl.float32)
        if KV_HEADS > 0 and not EARLY:
            pos = gl.load(pos_ptr)
        _block_out(buf0, bar0, x, pid, n_blocks, e0, res_ptr, out_ptr, cos_ptr, sin_ptr, kc_ptr, vc_ptr, pos,
                   cache_len, R, HD, RES, ROPE_HEADS, Q_HEADS, KV_HEADS, READ_ONLY, PAIRED, EARLY, L4)
        if BLOCKS > 1:
            _block_out(buf1, bar1, x, pid + grid, n_blocks, e1, res_ptr, out_ptr, cos_ptr, sin_ptr, kc_ptr, vc_ptr,
                       pos, cache_len, R, HD, RES, ROPE_HEADS, Q_HEADS, KV_HEADS, READ_ONLY, PAIRED, EARLY, L4)
        if BLOCKS > 2:
            _block_out(buf2, bar2, x, pid + 2 * grid, n_blocks, e2, res_ptr, out_ptr, cos_ptr, sin_ptr, kc_ptr,
                       vc_ptr, pos, cache_len, R, HD, RES, ROPE_HEADS, Q_HEADS, KV_HEADS, READ_ONLY, PAIRED, EARLY,
                       L4)
        if BLOCKS > 3:
            _block_out(buf3, bar3, x, pid + 3 * grid, n_blocks, e3, res_ptr, out_ptr, cos_ptr, sin_ptr, kc_ptr,
                       vc_ptr, pos, cache_len, R, HD, RES, ROPE_HEADS, Q_HEADS, KV_HEADS, READ_ONLY, PAIRED, EARLY,
                       L4)


# (R rows a block, programs an SM, warps): run 2's, the fastest there first (the module doc has each run's figures)
CONFIGS = (
    (8, 2, 4), (8, 1, 4), (2, 12, 1), (8, 3, 4), (4, 6, 2), (16, 2, 8), (4, 2, 4), (16, 1, 8),
)
FORMS = {  # name: (norm, rope, kv cache write), for the q/k/v; the o has a residual and none of them
    "kv": (True, True, True), "norm": (True, False, False),
}
# design 26 (session 55): (paired, early) for each of CONFIGS; run 2's form is (False, False)
VARIANTS = ((True, True), (True, False), (False, True))


def paired_rows(w: torch.Tensor, hd: int) -> torch.Tensor:
    """W [N, K] with each head's rows interleaved once (a copy): row 2i of a head is its row i, row 2i + 1 its row
    i + hd / 2 (RoPE's partner), so R consecutive rows are R / 2 whole pairs, one TMA box."""
    n, k = w.shape
    return w.view(n // hd, 2, hd // 2, k).transpose(1, 2).reshape(n, k).contiguous()


def weight_descriptor(w, rows: int, paired: bool = False):
    """W [N, K] bf16 as a TMA descriptor over its [N, K / 256, 256] view, box [rows / 2, K / 256, 256] (rows / 2
    consecutive rows; ``paired``: rows, over ``paired_rows(W)``), unswizzled (each lane reads 16 consecutive bytes
    of a segment: no bank conflict without a swizzle)."""
    n, k = w.shape
    s = k // SEG_COLS
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=3)  # as descriptor_type's
    return TensorDescriptor(w, [n, s, SEG_COLS], [k, SEG_COLS, 1], [rows if paired else rows // 2, s, SEG_COLS],
                            layout)


def descriptor_type(rows: int, k: int, paired: bool = False) -> str:
    """``weight_descriptor``'s argument type as Triton's signature spells it (compiling without a GPU)."""
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=3)
    return f"tensordesc<bf16[{rows if paired else rows // 2}, {k // SEG_COLS}, {SEG_COLS}],{layout!r}>"


def blocks_per_program(n: int, rows: int, grid: int) -> int:
    return triton.cdiv(n // rows, grid)


def launch_smem(lin, x, cfg: dict, sms: int, form: str, pdl: bool, read_only: bool = False):
    """The kernel on ``lin`` (probe_pdl_preload.Linear: w [N, K], nw, res, cos / sin, caches) into ``lin.out``
    (and for the "kv" form the caches of ``probe_pdl_preload.launch_shipped_kv``); form: a FORMS name (q/k/v)
    or "res" (the o). cfg: R, per_sm, warps, and optionally paired / early (design 26)."""
    rows, per_sm, warps = cfg["R"], cfg["per_sm"], cfg["warps"]
    paired, early = cfg.get("paired", False), cfg.get("early", False)
    norm, rope, kv = FORMS.get(form, (False, False, False))
    if getattr(lin, "caches", None) is None and kv:
        p.launch_shipped_kv(lin, x)  # makes the caches and the position
    if getattr(lin, "descs", None) is None:
        lin.descs = {}
    if (rows, paired) not in lin.descs:
        w = lin.w
        if paired:
            if getattr(lin, "w_paired", None) is None:
                lin.w_paired = paired_rows(lin.w, lin.hd)
            w = lin.w_paired
        lin.descs[rows, paired] = weight_descriptor(w, rows, paired)
    heads, q_heads = lin.n // lin.hd, lin.k // lin.hd
    kv_heads = (heads - q_heads) // 2 if kv else 0
    grid = min(sms * per_sm, lin.n // rows)
    caches = lin.caches if kv else (lin.out, lin.out)
    opts = dict(num_warps=warps)
    if pdl:
        opts["launch_pdl"] = True
    smem_gemv_kernel[(grid,)](lin.descs[rows, paired], x, lin.nw if norm else lin.w,
                              lin.res if lin.res_on else lin.out, lin.out, lin.cos, lin.sin, *caches,
                              lin.position if kv else lin.out, 1e-5, lin.n // rows, p.CACHE_LEN, lin.k, rows, lin.hd,
                              blocks_per_program(lin.n, rows, grid), norm, lin.res_on,
                              q_heads + kv_heads if rope else 0, q_heads if kv else heads, kv_heads, read_only, pdl,
                              warps, paired, early, **opts)
    return lin.out


def reference(lin, x, form: str) -> tuple:
    """What ``launch_smem`` computes, in fp32 (probe_pdl_preload.shipped_reference): q's columns and, for the "kv"
    form, k's and v's heads at the cache position (what the caches get there)."""
    norm, rope, kv = FORMS.get(form, (False, False, False))
    y = p.shipped_reference(lin, x, norm, rope)
    if not kv:
        return (y,)
    kvn = (lin.n - lin.k) // 2
    return y[:, :lin.k], y[:, lin.k:lin.k + kvn], y[:, lin.k + kvn:]


def outputs_of(lin, form: str) -> tuple:
    """``launch_smem``'s outputs as ``reference`` gives them."""
    if not FORMS.get(form, (False, False, False))[2]:
        return (lin.out.clone(),)
    at = p.CACHE_LEN // 2
    return (lin.out[:, :lin.k].clone(), *[c[0, :, at].reshape(1, -1).clone() for c in lin.caches])


def layer_rows(bw: float, sms: int, cfg: dict, layers: int = 16) -> list[dict]:
    """probe_pdl_preload's layer chain (q/k/v in the cache-writing form -> o -> gate/up -> down, 16 layers, the first
    GEMV plain and every later one a PDL twin) with the shipped q/k/v and with this kernel's at ``cfg``, each timed
    whole and without the q/k/v: us per layer and what the q/k/v adds to it (% of the copy bandwidth)."""
    torch.manual_seed(0)
    chains = {linear: [p.Linear("1b", linear, torch.device("cuda")) for _ in range(layers)] for linear in p.LINEARS}
    qkv = chains["qkv"][0]
    ideal_qkv = qkv.bytes() / (bw * 1e12) * 1e6
    layer_bytes = sum(chains[linear][0].bytes() for linear in p.LINEARS)
    smem_kv = lambda lin, x, pdl: launch_smem(lin, x, cfg, sms, "kv", pdl)  # noqa: E731
    rows = []

    def layer_us(qkv_launch) -> float:
        launches = {"qkv": qkv_launch, "o": p.launch_shipped, "gate_up": p.launch_shipped, "down": p.launch_shipped}
        linears = p.LINEARS if qkv_launch else p.LINEARS[1:]
        layer = [(chains[linear][i], launches[linear]) for i in range(layers) for linear in linears]
        xs = p.chain_inputs([lin for lin, _ in layer])
        return p.time_graph(lambda: [go(lin, x, j > 0) for j, ((lin, go), x) in enumerate(zip(layer, xs))]) / layers

    without = layer_us(None)
    for name, go in (("shipped q/k/v", p.launch_kv_unset_y), (f"smem q/k/v {cfg}", smem_kv)):
        whole = layer_us(go)
        for variant, us, ideal in ((f"layer, {name}", whole, layer_bytes / (bw * 1e12) * 1e6),
                                   (f"q/k/v in the layer, {name}", whole - without, ideal_qkv)):
            rows.append(dict(chain="layer", variant=variant, cfg=cfg, us_per_gemv=round(us, 3),
                             pct_copy_bw=round(100 * ideal / us, 1)))
            print(f"layer {variant:50} {us:7.2f} us {100 * ideal / us:6.1f} %", flush=True)
    return rows


def main():
    import argparse
    import os

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "smem_gemv_probe.json"))
    ap.add_argument("--linears", nargs="+", default=["qkv", "o"])
    ap.add_argument("--layer", action="store_true", help="then the shipped layer chain with the fastest q/k/v "
                    "config of the run in its place: the layer, and what the q/k/v adds to it")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), type=lambda v: tuple(c == "1" for c in v),
                    help="(paired, early) pairs as two digits each, e.g. 11 10 01 00 (00: run 2's form)")
    args = ap.parse_args()
    bw = p.copy_bandwidth_gbs("cuda") / 1e3
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for linear in args.linears:
        torch.manual_seed(0)
        lins = [p.Linear("1b", linear, torch.device("cuda")) for _ in range(16)]
        xs, ideal = p.chain_inputs(lins), lins[0].bytes() / (bw * 1e12) * 1e6

        def rec(variant, cfg, us, err=None, equal=None):
            rows.append(dict(chain=linear, variant=variant, cfg=cfg, us_per_gemv=round(us, 3),
                             pct_copy_bw=round(100 * ideal / us, 1), rel_err_vs_fp32=err, equals_plain=equal))
            print(f"{linear:4} {variant:18} {str(cfg):76} {us:6.2f} us {100 * ideal / us:6.1f} %  err {err} "
                  f"equal {equal}", flush=True)

        def chain(go):
            return p.time_graph(lambda: [go(lin, x) for lin, x in zip(lins, xs)]) / len(lins)

        def outputs(go, form):
            for lin, x in zip(lins, xs):
                go(lin, x)
            torch.cuda.synchronize()
            return [outputs_of(lin, form) for lin in lins]

        # the shipped kernel first: a run cut short by its time limit still has what the variants are measured against
        if linear == "qkv":
            rec("shipped+pdl kv", {}, chain(lambda l, x: p.launch_kv_unset_y(l, x, True)))
            rec("shipped kv", {}, chain(lambda l, x: p.launch_kv_unset_y(l, x, False)))
            rec("shipped+pdl rope", {}, chain(lambda l, x: p.launch_shipped(l, x, True)))
        else:
            rec("shipped+pdl", {}, chain(lambda l, x: p.launch_shipped(l, x, True)))
        cfg = dict(R=8, warps=4, pdl=True)
        rec("read+pdl", cfg, chain(lambda l, x: p.launch(l, x, cfg, True)))
        forms = ("kv", "norm") if linear == "qkv" else ("res",)
        for form in forms:
            # the norm-only form has no epilogue operands to request early: one box of consecutive rows is run 0's
            variants = args.variants if form != "norm" else ((True, False),)
            for (paired, early), (r, per_sm, warps) in [(v, c) for v in variants
                                                        for c in (CONFIGS if form != "norm" else CONFIGS[:3])]:
                cfg = dict(R=r, per_sm=per_sm, warps=warps, paired=paired, early=early)
                try:
                    us = chain(lambda l, x: launch_smem(l, x, cfg, sms, form, True))
                    twin = outputs(lambda l, x: launch_smem(l, x, cfg, sms, form, True), form)
                    plain_us = chain(lambda l, x: launch_smem(l, x, cfg, sms, form, False))
                    plain = outputs(lambda l, x: launch_smem(l, x, cfg, sms, form, False), form)
                    # each link against its reference from its input (the previous link's output, as the chain
                    # left it)
                    err = max(p.rel_err(o, r) for outs, l, x in zip(plain, lins, xs)
                              for o, r in zip(outs, reference(l, x, form)))
                    same = all(torch.equal(a, b) for ta, tb in zip(twin, plain) for a, b in zip(ta, tb))
                    rec(f"smem+pdl {form}", cfg, us, round(err, 5), same)
                    rec(f"smem {form}", cfg, plain_us)
                    if form != "norm":
                        floor = chain(lambda l, x: launch_smem(l, x, cfg, sms, form, True, True))
                        rec(f"smem-read+pdl {form}", cfg, floor)
                except Exception as e:  # a config that does not compile or fit: say so, go on
                    print(f"{linear} {form} {cfg}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                    rows.append(dict(chain=linear, variant=f"smem+pdl {form}", cfg=cfg,
                                     error=f"{type(e).__name__}: {e}"[:500]))
            if form == "kv" and args.layer:  # before the norm form: a run cut short still has it
                kv_rows = [r for r in rows if r["variant"] == "smem+pdl kv" and r.get("equals_plain")
                           and (r.get("rel_err_vs_fp32") or 1) < 0.02]
                if kv_rows:
                    rows += layer_rows(bw, sms, min(kv_rows, key=lambda r: r["us_per_gemv"])["cfg"])
    p.save(args.out, bw, [], rows, quiet=True)  # the rows were printed as they came


if __name__ == "__main__":
    main()
