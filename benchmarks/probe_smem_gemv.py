"""Design 25 (session 54): a decode GEMV that stages its whole share of the weights in shared memory before the PDL
wait, so that the next kernel's programs fit beside its own and stream their weights during its tail.

    python benchmarks/probe_smem_gemv.py            # GPU (sm_90, Gluon): chains of 16 PDL launches of the 1B q/k/v
                                                    # and o, against the shipped kernel and the read floor

Every earlier PDL design held its weight rows in registers: a program of the 1B q/k/v takes 69 registers a thread
for one block of rows, six programs fill an SM's register file, and only one program of the next kernel fits
beside them (session 53's ``--room``), so most of the next kernel's loads wait until this one's programs exit. Here
the weights go to shared memory by TMA (one bulk copy per block of rows, tracked by an mbarrier) and the program
holds none of them in registers until after the wait:

    kernel i:  for each block b of this program: tma_copy(W_i[rows_b, :] -> smem[b])   # all before the wait
               launch_dependents()                  # kernel i+1 may start; its programs fit beside these
               griddepcontrol.wait()                # kernel i-1 has finished: x_i is written
               x = x_i[:]; xn = rms_norm(x) * nw    # fp32, the exact form's roundings
               for each block b: wait(bar[b]); y = smem[b] @ xn; out_i[rows_b] = y (+ residual)

The 1B q/k/v's 12 MiB is 95 KiB an SM over 132 SMs and the o's 8 MiB 64 KiB: two kernels' shares fit in one SM's
228 KiB, so kernel i+1 loads its whole share while kernel i computes. The 8B shapes (48-56 MiB) do not fit in
shared memory at all. Each row is K / 256 segments of 256 columns (a TMA box has at most 256 elements a
dimension): W [N, K] is viewed as [N, K / 256, 256] and a block of R rows is one [R, K / 256, 256] copy.

Warps split a block by rows, so each row's sum stays in one warp (no cross-warp exchange), and every warp keeps
the whole normalised x (its square sum is one warp's reduction, no barrier).
"""

from __future__ import annotations

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

    @gluon.jit
    def _gdc_launch_dependents():
        gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // dummy $0", "=r", [], dtype=gl.int32,
                                  is_pure=False, pack=1)

    @gluon.jit
    def _gdc_wait():
        gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False,
                                  pack=1)

    @gluon.jit
    def _request(w_desc, bar, buf, blk, n_blocks, R: gl.constexpr, K: gl.constexpr):
        """Block blk's R weight rows into buf by one TMA copy, arriving on bar (nothing where blk >= n_blocks)."""
        ok = blk < n_blocks
        mbarrier.init(bar, count=1)
        mbarrier.expect(bar, R * K * 2, pred=ok)
        tma_load(w_desc, [blk * R, 0, 0], bar, buf, pred=ok)

    @gluon.jit
    def _block_out(buf, bar, x, blk, n_blocks, res_ptr, out_ptr, R: gl.constexpr, RES: gl.constexpr,
                   READ_ONLY: gl.constexpr, L3: gl.constexpr):
        """out[rows] = buf @ x (+ residual) once block blk's copy has landed; buf [R, S, SEG], x [S, SEG] fp32."""
        if blk < n_blocks:
            mbarrier.wait(bar, 0)
            w = buf.load(L3).to(gl.float32)
            if READ_ONLY:
                y = gl.sum(gl.sum(w, axis=1), axis=1)
            else:
                y = gl.sum(gl.sum(w * x[None, :, :], axis=1), axis=1).to(gl.bfloat16).to(gl.float32)
            rows = blk * R + gl.arange(0, R, layout=gl.SliceLayout(1, gl.SliceLayout(1, L3)))
            if RES:
                y = y + gl.load(res_ptr + rows).to(gl.float32)
            gl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty))

    @gluon.jit
    def smem_gemv_kernel(w_desc, x_ptr, nw_ptr, res_ptr, out_ptr, eps, n_blocks, K: gl.constexpr, R: gl.constexpr,
                         BLOCKS: gl.constexpr, NORM: gl.constexpr, RES: gl.constexpr, READ_ONLY: gl.constexpr,
                         PDL: gl.constexpr, NUM_WARPS: gl.constexpr):
        """out[rows] = W[rows, :] @ xn (+ residual[rows]) for the blocks pid, pid + grid, ... (BLOCKS <= 4 of them,
        R rows each, n_blocks in all); w_desc: W viewed as [N, K / SEG, SEG], box [R, K / SEG, SEG]; x [K]; xn = x,
        or with NORM eager's RMSNorm bf16(bf16(x * rsqrt(mean(x^2) + eps)) * nw). READ_ONLY: out = the rows' sums
        (the floor: the same copies and waits, no x). One buffer per block: Gluon's allocations are powers of two
        in every dimension, and three blocks of 8 rows are what fits two kernels' shares in an SM."""
        gl.static_assert(BLOCKS <= 4)
        S: gl.constexpr = K // SEG
        L3: gl.constexpr = gl.BlockedLayout([1, 1, 8], [1, 1, 32], [NUM_WARPS, 1, 1], [2, 1, 0])
        LX: gl.constexpr = gl.SliceLayout(0, L3)  # [S, SEG], whole in every warp
        pid = gl.program_id(0)
        grid = gl.num_programs(0)
        MB: gl.constexpr = mbarrier.MBarrierLayout()
        buf0 = gl.allocate_shared_memory(w_desc.dtype, [R, S, SEG], w_desc.layout)
        bar0 = gl.allocate_shared_memory(gl.int64, [1], MB)
        _request(w_desc, bar0, buf0, pid, n_blocks, R, K)
        if BLOCKS > 1:
            buf1 = gl.allocate_shared_memory(w_desc.dtype, [R, S, SEG], w_desc.layout)
            bar1 = gl.allocate_shared_memory(gl.int64, [1], MB)
            _request(w_desc, bar1, buf1, pid + grid, n_blocks, R, K)
        if BLOCKS > 2:
            buf2 = gl.allocate_shared_memory(w_desc.dtype, [R, S, SEG], w_desc.layout)
            bar2 = gl.allocate_shared_memory(gl.int64, [1], MB)
            _request(w_desc, bar2, buf2, pid + 2 * grid, n_blocks, R, K)
        if BLOCKS > 3:
            buf3 = gl.allocate_shared_memory(w_desc.dtype, [R, S, SEG], w_desc.layout)
            bar3 = gl.allocate_shared_memory(gl.int64, [1], MB)
            _request(w_desc, bar3, buf3, pid + 3 * grid, n_blocks, R, K)
        seg = gl.arange(0, S, layout=gl.SliceLayout(1, LX))[:, None]
        col = gl.arange(0, SEG, layout=gl.SliceLayout(0, LX))[None, :]
        xo = seg * SEG + col
        if NORM:
            nw = gl.load(nw_ptr + xo).to(gl.float32)
        if PDL:  # below: reads of what earlier kernels write, and this kernel's stores
            _gdc_launch_dependents()
            _gdc_wait()
        x = gl.zeros([S, SEG], gl.float32, LX)
        if not READ_ONLY:
            x = gl.load(x_ptr + xo).to(gl.float32)
            if NORM:
                rstd = gl.rsqrt(gl.sum(gl.sum(x * x, axis=1), axis=0) / K + eps)
                x = (x * rstd).to(gl.bfloat16).to(gl.float32)
                x = (x * nw).to(gl.bfloat16).to(gl.float32)
        _block_out(buf0, bar0, x, pid, n_blocks, res_ptr, out_ptr, R, RES, READ_ONLY, L3)
        if BLOCKS > 1:
            _block_out(buf1, bar1, x, pid + grid, n_blocks, res_ptr, out_ptr, R, RES, READ_ONLY, L3)
        if BLOCKS > 2:
            _block_out(buf2, bar2, x, pid + 2 * grid, n_blocks, res_ptr, out_ptr, R, RES, READ_ONLY, L3)
        if BLOCKS > 3:
            _block_out(buf3, bar3, x, pid + 3 * grid, n_blocks, res_ptr, out_ptr, R, RES, READ_ONLY, L3)


CONFIGS = (  # (R rows a block, programs an SM, warps): at most 4 blocks a program for the 1B q/k/v and o
    (8, 1, 4), (8, 1, 8), (4, 2, 4), (4, 2, 2), (4, 2, 1), (8, 2, 4), (16, 1, 8), (16, 1, 4),
)


def weight_descriptor(w, rows: int):
    """W [N, K] bf16 as a TMA descriptor over its [N, K / 256, 256] view, box [rows, K / 256, 256], unswizzled
    (each lane reads 16 consecutive bytes of a segment: no bank conflict without a swizzle)."""
    n, k = w.shape
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=3)
    return TensorDescriptor(w, [n, k // SEG_COLS, SEG_COLS], [k, SEG_COLS, 1], [rows, k // SEG_COLS, SEG_COLS], layout)


def blocks_per_program(n: int, rows: int, grid: int) -> int:
    return triton.cdiv(n // rows, grid)


def launch_smem(lin, x, cfg: dict, sms: int, norm: bool, pdl: bool, read_only: bool = False):
    """The kernel on ``lin`` (probe_pdl_preload.Linear: w [N, K], nw, res, out) into ``lin.out``."""
    rows, per_sm, warps = cfg["R"], cfg["per_sm"], cfg["warps"]
    if getattr(lin, "descs", None) is None:
        lin.descs = {}
    if rows not in lin.descs:
        lin.descs[rows] = weight_descriptor(lin.w, rows)
    grid = min(sms * per_sm, lin.n // rows)
    opts = dict(num_warps=warps)
    if pdl:
        opts["launch_pdl"] = True
    smem_gemv_kernel[(grid,)](lin.descs[rows], x, lin.nw if norm else lin.w, lin.res if lin.res_on else lin.out,
                              lin.out, 1e-5, lin.n // rows, lin.k, rows, blocks_per_program(lin.n, rows, grid), norm,
                              lin.res_on, read_only, pdl, warps, **opts)
    return lin.out


def main():
    import argparse
    import json
    import os
    import sys

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import probe_pdl_preload as p

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "smem_gemv_probe.json"))
    ap.add_argument("--linears", nargs="+", default=["qkv", "o"])
    args = ap.parse_args()
    bw = p.copy_bandwidth_gbs("cuda") / 1e3
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for linear in args.linears:
        torch.manual_seed(0)
        lins = [p.Linear("1b", linear, torch.device("cuda")) for _ in range(16)]
        xs, ideal = p.chain_inputs(lins), lins[0].bytes() / (bw * 1e12) * 1e6
        norm = linear == "qkv"

        def rec(variant, cfg, us, err=None, equal=None):
            rows.append(dict(chain=linear, variant=variant, cfg=cfg, us_per_gemv=round(us, 3),
                             pct_copy_bw=round(100 * ideal / us, 1), rel_err_vs_fp32=err, equals_plain=equal))
            print(f"{linear:4} {variant:14} {str(cfg):40} {us:6.2f} us {100 * ideal / us:6.1f} %  err {err} "
                  f"equal {equal}", flush=True)

        def chain(go):
            return p.time_graph(lambda: [go(lin, x) for lin, x in zip(lins, xs)]) / len(lins)

        def outputs(go):
            for lin, x in zip(lins, xs):
                go(lin, x)
            torch.cuda.synchronize()
            return [lin.out.clone() for lin in lins]

        for cfg in CONFIGS:
            cfg = dict(R=cfg[0], per_sm=cfg[1], warps=cfg[2])
            try:
                us = chain(lambda l, x: launch_smem(l, x, cfg, sms, norm, True))
                twin = outputs(lambda l, x: launch_smem(l, x, cfg, sms, norm, True))
                plain_us = chain(lambda l, x: launch_smem(l, x, cfg, sms, norm, False))
                plain = outputs(lambda l, x: launch_smem(l, x, cfg, sms, norm, False))
                # each link against its reference from its input (the previous link's output, as the chain left it)
                err = max(p.rel_err(out, p.shipped_reference(l, x, norm, False)) for out, l, x in zip(plain, lins, xs))
                same = all(torch.equal(a, b) for a, b in zip(twin, plain))
                rec("smem+pdl", cfg, us, round(err, 5), same)
                rec("smem", cfg, plain_us)
                rec("smem-read+pdl", cfg, chain(lambda l, x: launch_smem(l, x, cfg, sms, norm, True, True)))
            except Exception as e:  # a config that does not compile or fit: say so, go on
                print(f"{linear} {cfg}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                rows.append(dict(chain=linear, variant="smem+pdl", cfg=cfg, error=f"{type(e).__name__}: {e}"[:500]))
        if linear == "qkv":
            rec("shipped+pdl (kv)", {}, chain(lambda l, x: p.launch_shipped_kv(l, x, True)))
            rec("shipped+pdl", {}, chain(lambda l, x: p.launch_shipped(l, x, True)))
        else:
            rec("shipped+pdl", {}, chain(lambda l, x: p.launch_shipped(l, x, True)))
        cfg = dict(R=8, warps=4, pdl=True)
        rec("read+pdl", cfg, chain(lambda l, x: p.launch(l, x, cfg, True)))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(**p.environment("cuda"), copy_tb_s=bw, rows=rows), f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
