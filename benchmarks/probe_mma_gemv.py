"""Design 23 (session 50): the decode GEMV on the tensor cores straight from registers, weights loaded before the
PDL wait. Not built into ``decode_gemv``: correct, but no faster than the multiply-adds where it counts.

    python benchmarks/probe_mma_gemv.py     # GPU: chains of 16 PDL launches of the 1B q/k/v and o, with and without
                                            # the RMSNorm prologue, against probe_pdl_preload's kernel and read floor

Each lane loads 16-byte chunks of one weight row ([R, K/2] int32 tile, bf16 pairs) and the same chunks of x. An
m16n8k16 mma fed x as A (every row alike) and w as B computes C[m][n] = sum over quad m's and quad n's lanes; its
diagonal C[m][m] is the sum over the four lanes of quad m of x . w *lane by lane, at the same k*. So no operand has
to be in the mma's fragment layout (no shared-memory round trip, no shuffle before the dot); what the code needs is
that each quad's lanes hold chunks of one row, and that each lane holds >= 8 int32 of a row (the asm's pack): the
static_assert below refuses the configs where Triton's tile leaves fewer (8 warps at K = 2048 summed two rows in
session 50's first run, a relative error of 1.0). An earlier form with a [R, K/32, 4, 4] tile compiled under triton
3.6 to a layout conversion of the weights after the wait (26 STS / LDS a thread): 8.7 us for the q/k/v.

Session 50 (H100 80GB HBM3, torch 2.11, triton 3.6, logs/s50_run4), us per GEMV in the chain: the 1B q/k/v bare
4.75-5.04 (the FMA probe kernel 4.70, read floor 4.23), with the norm 4.90 at best (R = 4 rows, 1 warp; or 8 rows,
2 warps) against 5.00-5.11 for the shipped kernel's norm-only twin at its fastest configs (logs/s50_run2); the 1B o
3.59-3.96 against 3.71. The dot's instructions after the wait fall from ~1,400 to ~400 a warp (offline SASS), yet
the time moves by 0.1 us: the multiply-adds were not what the post-wait path waits on.
"""

import triton
import triton.language as tl

try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - triton before 3.3: no PDL launches to probe
    gdc_launch_dependents = gdc_wait = None


@triton.jit
def _quad_dots(x, w):
    """x, w: int32 (bf16 pairs) of one shape, eight a call (two 16-byte chunks of one row in one lane): four
    chained m16n8k16 mmas with x as A (all rows alike) and w as B; the diagonal C[m][m] is the sum over quad m's
    four lanes of x . w at the same k. Returns it in the quad's lane c == m >> 1 (c = lane % 4), 0 elsewhere."""
    return tl.inline_asm_elementwise(
        """{
        .reg .f32 d<4>, z;
        .reg .b32 l, q;
        .reg .pred pd, po;
        mov.f32 z, 0f00000000;
        mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0, d1, d2, d3}, {$8, $8, $9, $9}, {$16, $17}, {z, z, z, z};
        mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0, d1, d2, d3}, {$10, $10, $11, $11}, {$18, $19}, {d0, d1, d2, d3};
        mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0, d1, d2, d3}, {$12, $12, $13, $13}, {$20, $21}, {d0, d1, d2, d3};
        mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0, d1, d2, d3}, {$14, $14, $15, $15}, {$22, $23}, {d0, d1, d2, d3};
        mov.u32 l, %laneid;
        shr.u32 q, l, 3;
        and.b32 l, l, 3;
        setp.eq.u32 pd, l, q;
        mov.u32 l, %laneid;
        and.b32 l, l, 4;
        setp.ne.u32 po, l, 0;
        selp.f32 d0, d1, d0, po;
        selp.f32 $0, d0, z, pd;
        mov.f32 $1, z;
        mov.f32 $2, z;
        mov.f32 $3, z;
        mov.f32 $4, z;
        mov.f32 $5, z;
        mov.f32 $6, z;
        mov.f32 $7, z;
        }""",
        "=f,=f,=f,=f,=f,=f,=f,=f,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r,r", [x, w], dtype=tl.float32, is_pure=True, pack=8)


@triton.jit
def _pack_bf16x2(lo, hi):
    return tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", [lo, hi], dtype=tl.int32,
                                     is_pure=True, pack=1)


@triton.jit
def _mul_bf16x2(a, b):
    return tl.inline_asm_elementwise("mul.rn.bf16x2 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32, is_pure=True,
                                     pack=1)


@triton.jit
def mma_gemv_kernel(x_ptr, w_ptr, nw_ptr, out_ptr, eps, K: tl.constexpr, R: tl.constexpr, NORM: tl.constexpr,
                    PDL: tl.constexpr, NUM_WARPS: tl.constexpr):
    """out[pid*R + r] = W[pid*R + r, :] . xn, W [N, K] bf16 viewed as int32 [N, K/2]: tile [R, K/2], x and W in one
    layout (four int32 a lane along the row, lanes and warps along it: a quad's lanes hold one row); xn = x, or with
    NORM eager's RMSNorm (bf16(bf16(x * rsqrt(mean(x^2) + eps)) * nw))."""
    tl.static_assert(K // 2 >= 8 * 32 * NUM_WARPS, "each lane must hold 8 int32 of a row (the mma's pack)")
    pid = tl.program_id(0)
    r = tl.arange(0, R)[:, None]
    k2 = tl.arange(0, K // 2)[None, :]
    wi = w_ptr.to(tl.pointer_type(tl.int32), bitcast=True)
    if PDL:
        gdc_launch_dependents()
    w = tl.load(wi + (pid * R + r) * (K // 2) + k2, eviction_policy="evict_first")
    if NORM:
        nw = tl.load(nw_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + k2)
    if PDL:
        gdc_wait()
    x = tl.load(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True) + k2)
    if NORM:
        lo = (x << 16).to(tl.float32, bitcast=True)
        hi = (x & -65536).to(tl.float32, bitcast=True)
        rstd = tl.rsqrt(tl.sum(lo * lo + hi * hi, axis=1) / K + eps)
        x = _mul_bf16x2(_pack_bf16x2(lo * rstd[:, None], hi * rstd[:, None]), nw)
    d = _quad_dots(tl.broadcast_to(x, (R, K // 2)), w)
    y = tl.sum(d, axis=1)
    tl.store(out_ptr + pid * R + tl.arange(0, R), y.to(out_ptr.dtype.element_ty))


CONFIGS = ((8, 4), (4, 1), (4, 2), (8, 2), (16, 4), (2, 1))  # (R, warps)


def launch_mma(lin, x, R, warps, norm, pdl):
    """The kernel on ``lin``'s weights into ``lin.out``: R rows a program."""
    opts = dict(num_warps=warps)
    if pdl:
        opts["launch_pdl"] = True
    mma_gemv_kernel[(lin.n // R,)](x, lin.w, lin.nw, lin.out, 1e-5, lin.k, R, norm, pdl, warps, **opts)
    return lin.out


def main():
    import argparse
    import os
    import sys

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import probe_pdl_preload as p

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "mma_gemv_probe.json"))
    args = ap.parse_args()
    bw = p.copy_bandwidth_gbs("cuda") / 1e3
    rows = []
    for linear in ("qkv", "o"):
        torch.manual_seed(0)
        lins = [p.Linear("1b", linear, torch.device("cuda")) for _ in range(16)]
        if linear == "o":  # the o has no norm in a decoder; a norm weight here times the prologue on its shape
            for lin in lins:
                lin.nw = (torch.rand(lin.k, device="cuda") + 0.5).to(torch.bfloat16)
        xs, ideal = p.chain_inputs(lins), lins[0].bytes() / (bw * 1e12) * 1e6

        def rec(variant, cfg, us, err=None):
            rows.append(dict(chain=linear, variant=variant, cfg=cfg, us_per_gemv=round(us, 3),
                             pct_copy_bw=round(100 * ideal / us, 1), rel_err_vs_fp32=err))
            print(f"{linear:4} {variant:10} {str(cfg):28} {us:6.2f} us {100 * ideal / us:6.1f} %  err {err}", flush=True)

        for norm in (False, True):
            for R, warps in CONFIGS:
                cfg = dict(R=R, warps=warps)
                us = p.time_graph(lambda: [launch_mma(l, x, R, warps, norm, True) for l, x in zip(lins, xs)]) / 16
                torch.cuda.synchronize()
                # the reference with the o's residual taken off again: this kernel has no epilogue
                err = max(p.rel_err(launch_mma(l, x, R, warps, norm, True).clone(),
                                    p.shipped_reference(l, x, norm, False) - (l.res.float() if l.res_on else 0))
                          for l, x in zip(lins, xs))
                rec("mma+norm" if norm else "mma", cfg, us, round(err, 5))
        cfg = dict(R=8, warps=4, pdl=True)
        rec("probe", cfg, p.time_graph(lambda: [p.launch(l, x, cfg) for l, x in zip(lins, xs)]) / 16)
        rec("read", cfg, p.time_graph(lambda: [p.launch(l, x, cfg, True) for l, x in zip(lins, xs)]) / 16)
    p.save(args.out, bw, [], rows, quiet=True)  # the rows were printed as they came


if __name__ == "__main__":
    main()
