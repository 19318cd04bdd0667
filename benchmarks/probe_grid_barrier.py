"""Two decode GEMVs in one kernel with a grid barrier between them: does it take the small GEMV past #8's 85 %?

    python benchmarks/probe_grid_barrier.py                       # GPU: llama-1b and -8b shapes, table + JSON
    TRITON_INTERPRET=1 python benchmarks/probe_grid_barrier.py --tiny     # CPU: values only (one program)

The small GEMVs that miss #8's per-GEMV target (1B q/k/v and o) cannot reach it as kernels of their own: a kernel
that only reads their bytes gets 66 % / 55 % of the copy bandwidth (HISTORY, "Where we lose"). What is left is the
fixed cost at each kernel's start and end (launch, first round trip, the last programs' tail), which a decoder-layer
megakernel hides by running the next GEMV's loads behind the previous one's tail. This probe measures that idea at
the smallest scale that pairs each small GEMV with a large neighbour it depends on:

    o_gateup:  h = x @ W_o.T + residual               [1, H]      then   y = silu(n(h) @ W_g.T) * (n(h) @ W_u.T)  [1, I]
    down_qkv:  h = a @ W_down.T + residual            [1, H]      then   y = n(h) @ W_qkv.T                     [1, Nqkv]
    (n = RMSNorm with a weight, rounded to bf16 where eager rounds; no RoPE / cache store in this probe)

Variants, each timed per layer over L layers of distinct weights captured in one CUDA graph:
    shipped:    fusion_passes' decode_gemv op for each half (the kernels a compiled decode step runs)
    separate:   this probe's two phase kernels, two launches (the same loop code as the fused kernel)
    fused:      one launch, a persistent grid of P programs per SM; each program does its share of the first
                GEMV, stores it, arrives at a grid barrier (an atomic counter: no reset needed, the generation is
                old // grid), then RMS-normalises h and does its share of the second GEMV. PREF=1 has each program
                request its first block of second-GEMV rows into L2 (prefetch.global.L2) before it waits.
The grid must be co-resident for the barrier (configs whose registers or shared memory do not fit P programs per
SM are skipped); a spin limit sets a flag instead of hanging, and such a result is reported invalid.

H200, session 41 (logs/s41_run1, copy bandwidth 4.25 TB/s), us per layer of the best valid config (% of copy bw):

    pair              shipped          separate         fused (P per SM)
    1B o_gateup       21.56 (82.5)     23.14 (76.9)     22.70 (78.4)  P 4     P 1: 37.6, P 2: 26.1
    1B down_qkv       16.09 (67.6)     15.84 (68.6)     16.61 (65.4)  P 4     P 1: 30.4, P 2: 20.2
    8B o_gateup       64.43 (97.9)     68.34 (92.3)     67.42 (93.6)  P 2
    8B down_qkv       43.87 (89.9)     45.54 (86.6)     45.44 (86.8)  P 4

The barrier saves at most 0.9 us per pair against the same loop launched twice, and loses on the 1B down_qkv;
the L2 prefetch before the barrier was slower in every pair (1B o_gateup 22.70 -> 23.66). A persistent grid needs
many programs per SM to match a grid of one block per program, and co-residency caps that. Even applied to the
shipped kernels, 0.9 us would take the 1B o_gateup pair to about 85 % of the copy bandwidth and leave the 1B
down_qkv pair near 68 %: not the way to #8's per-GEMV target.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # fusion_passes (shipped)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_e2e import copy_bandwidth_gbs  # noqa: E402
from common import environment  # noqa: E402

SPIN_LIMIT = 200_000


@triton.jit
def _rstd(h_ptr, eps, K: tl.constexpr, BK: tl.constexpr):
    ss = tl.zeros([BK], tl.float32)
    for k0 in range(0, K, BK):
        v = tl.load(h_ptr + k0 + tl.arange(0, BK), cache_modifier=".cg").to(tl.float32)
        ss += v * v
    return tl.rsqrt(tl.sum(ss, 0) / K + eps)


@triton.jit
def _gemv_blocks(x_ptr, nw_ptr, rstd, w0_ptr, w1_ptr, res_ptr, out_ptr, first, step,
                 N: tl.constexpr, K: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 NORM: tl.constexpr, GATED: tl.constexpr, RES: tl.constexpr):
    """Row blocks first, first + step, ... of out[N] = epilogue(xn @ W.T), xn = x (or its RMS norm)."""
    for blk in range(first, N // BN, step):
        rows = blk * BN + tl.arange(0, BN)
        acc0 = tl.zeros([BN, BK], tl.float32)
        acc1 = tl.zeros([BN, BK], tl.float32)
        for k0 in range(0, K, BK):
            ks = k0 + tl.arange(0, BK)
            if NORM:
                xv = tl.load(x_ptr + ks, cache_modifier=".cg").to(tl.float32)
                xv = (xv * rstd).to(tl.bfloat16).to(tl.float32)
                xv = (xv * tl.load(nw_ptr + ks).to(tl.float32)).to(tl.bfloat16).to(tl.float32)
            else:
                xv = tl.load(x_ptr + ks).to(tl.float32)
            acc0 += tl.load(w0_ptr + rows[:, None] * K + ks[None, :]).to(tl.float32) * xv[None, :]
            if GATED:
                acc1 += tl.load(w1_ptr + rows[:, None] * K + ks[None, :]).to(tl.float32) * xv[None, :]
        y = tl.sum(acc0, 1).to(tl.bfloat16).to(tl.float32)
        if GATED:
            u = tl.sum(acc1, 1).to(tl.bfloat16).to(tl.float32)
            y = (y / (1.0 + tl.exp(-y))).to(tl.bfloat16).to(tl.float32) * u
        if RES:
            y = y + tl.load(res_ptr + rows).to(tl.float32)
        tl.store(out_ptr + rows, y.to(tl.bfloat16))


@triton.jit
def _grid_barrier(cnt_ptr, flag_ptr, GRID: tl.constexpr, LIMIT: tl.constexpr):
    tl.debug_barrier()  # every thread's stores of this program are issued before the release
    old = tl.atomic_add(cnt_ptr, 1, sem="release", scope="gpu")
    target = (old // GRID + 1) * GRID
    cur = tl.atomic_add(cnt_ptr, 0, sem="acquire", scope="gpu")
    spins = tl.full([], 0, tl.int32)
    while (cur < target) & (spins < LIMIT):
        cur = tl.atomic_add(cnt_ptr, 0, sem="acquire", scope="gpu")
        spins += 1
    if spins >= LIMIT:
        tl.store(flag_ptr, 1)
    tl.debug_barrier()


@triton.jit
def _prefetch_l2(w_ptr, first, N: tl.constexpr, K: tl.constexpr, BN: tl.constexpr):
    """Requests program ``first``'s first row block of W [N, K] into L2, one request per 128-byte line."""
    if first < N // BN:
        lines = (first * BN + tl.arange(0, BN))[:, None] * K + (tl.arange(0, K // 64) * 64)[None, :]
        tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [w_ptr + lines],
                                  dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def phase1_kernel(x_ptr, w_ptr, res_ptr, h_ptr, N1: tl.constexpr, K1: tl.constexpr, BN1: tl.constexpr,
                  BK1: tl.constexpr):
    _gemv_blocks(x_ptr, x_ptr, 1.0, w_ptr, w_ptr, res_ptr, h_ptr, tl.program_id(0), tl.num_programs(0),
                 N1, K1, BN1, BK1, False, False, True)


@triton.jit
def phase2_kernel(h_ptr, nw_ptr, wa_ptr, wb_ptr, y_ptr, eps, N2: tl.constexpr, K2: tl.constexpr,
                  BN2: tl.constexpr, BK2: tl.constexpr, GATED: tl.constexpr):
    rstd = _rstd(h_ptr, eps, K2, BK2)
    _gemv_blocks(h_ptr, nw_ptr, rstd, wa_ptr, wb_ptr, h_ptr, y_ptr, tl.program_id(0), tl.num_programs(0),
                 N2, K2, BN2, BK2, True, GATED, False)


@triton.jit
def fused_kernel(x_ptr, w_ptr, res_ptr, h_ptr, nw_ptr, wa_ptr, wb_ptr, y_ptr, eps, cnt_ptr, flag_ptr,
                 N1: tl.constexpr, K1: tl.constexpr, BN1: tl.constexpr, BK1: tl.constexpr,
                 N2: tl.constexpr, BN2: tl.constexpr, BK2: tl.constexpr, GATED: tl.constexpr,
                 GRID: tl.constexpr, PREF: tl.constexpr, LIMIT: tl.constexpr):
    pid = tl.program_id(0)
    _gemv_blocks(x_ptr, x_ptr, 1.0, w_ptr, w_ptr, res_ptr, h_ptr, pid, GRID, N1, K1, BN1, BK1, False, False, True)
    if PREF:
        _prefetch_l2(wa_ptr, pid, N2, N1, BN2)
        if GATED:
            _prefetch_l2(wb_ptr, pid, N2, N1, BN2)
    _grid_barrier(cnt_ptr, flag_ptr, GRID, LIMIT)
    rstd = _rstd(h_ptr, eps, N1, BK2)
    _gemv_blocks(h_ptr, nw_ptr, rstd, wa_ptr, wb_ptr, h_ptr, y_ptr, pid, GRID, N2, N1, BN2, BK2, True, GATED, False)


# ------------------------------------------------------------------------------------------------ host side

SHAPES = {  # name: (H, I, Nqkv)
    "1b": (2048, 8192, 3072),
    "8b": (4096, 14336, 6144),
    "tiny": (64, 128, 96),
}


def reference(x, w1, res, nw, wa, wb, eps):
    h = (x @ w1.t()) + res  # bf16 matmul rounds once, then the add rounds
    hf = h.float()
    xn = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)).to(h.dtype) * nw
    if wb is None:
        return xn @ wa.t()
    return torch.nn.functional.silu(xn @ wa.t()) * (xn @ wb.t())


class Layer:
    """One layer's tensors for one pair: phase 1 W [N1, K1] (+ residual), phase 2 Wa (, Wb) [N2, N1]."""

    def __init__(self, pair, shape, device, dtype=torch.bfloat16):
        h, i, nqkv = SHAPES[shape]
        self.n1, self.k1 = (h, h) if pair == "o_gateup" else (h, i)
        self.n2, self.gated = (i, True) if pair == "o_gateup" else (nqkv, False)
        r = lambda *s: torch.randn(*s, device=device, dtype=dtype) * 0.02  # noqa: E731
        self.x, self.w1, self.res = r(1, self.k1) * 50, r(self.n1, self.k1), r(1, self.n1) * 50
        self.nw = 1 + r(self.n1)
        self.wa = r(self.n2, self.n1)
        self.wb = r(self.n2, self.n1) if self.gated else None
        self.h = torch.empty(1, self.n1, device=device, dtype=dtype)
        self.y = torch.empty(1, self.n2, device=device, dtype=dtype)

    def bytes(self):
        return sum(t.numel() * t.element_size() for t in (self.w1, self.wa, self.wb) if t is not None)

    def ref(self, eps):
        return reference(self.x, self.w1, self.res, self.nw, self.wa, self.wb, eps)


EPS = 1e-5


def run_separate(lay, cfg):
    bn1, bk1, bn2, bk2, warps, per_sm, sms = cfg["BN1"], cfg["BK1"], cfg["BN2"], cfg["BK2"], cfg["warps"], cfg["P"], cfg["sms"]
    g1 = lay.n1 // bn1 if per_sm == 0 else min(lay.n1 // bn1, per_sm * sms)
    g2 = lay.n2 // bn2 if per_sm == 0 else min(lay.n2 // bn2, per_sm * sms)
    phase1_kernel[(g1,)](lay.x, lay.w1, lay.res, lay.h, lay.n1, lay.k1, bn1, bk1, num_warps=warps)
    phase2_kernel[(g2,)](lay.h, lay.nw, lay.wa, lay.wb if lay.gated else lay.wa, lay.y, EPS, lay.n2, lay.n1, bn2,
                         bk2, lay.gated, num_warps=warps)


def run_fused(lay, cfg, cnt, flag):
    grid = cfg["P"] * cfg["sms"]
    fused_kernel[(grid,)](lay.x, lay.w1, lay.res, lay.h, lay.nw, lay.wa, lay.wb if lay.gated else lay.wa, lay.y, EPS,
                          cnt, flag, lay.n1, lay.k1, cfg["BN1"], cfg["BK1"], lay.n2, cfg["BN2"], cfg["BK2"], lay.gated,
                          grid, cfg["PREF"], SPIN_LIMIT, num_warps=cfg["warps"])


def resident_programs(lay, cfg, cnt, flag) -> int:
    """How many programs of the fused kernel with ``cfg`` fit one SM at once (registers, warps, shared memory):
    the grid barrier needs the whole grid resident."""
    grid = cfg["P"] * cfg["sms"]
    k = fused_kernel.warmup(lay.x, lay.w1, lay.res, lay.h, lay.nw, lay.wa, lay.wb if lay.gated else lay.wa, lay.y,
                            EPS, cnt, flag, lay.n1, lay.k1, cfg["BN1"], cfg["BK1"], lay.n2, cfg["BN2"], cfg["BK2"],
                            lay.gated, grid, cfg["PREF"], SPIN_LIMIT, num_warps=cfg["warps"], grid=(grid,))
    if hasattr(k, "_init_handles"):
        k._init_handles()  # n_regs is read when the module is loaded
    warps = cfg["warps"]
    regs = -(-k.n_regs * 32 // 256) * 256 * warps  # allocated per warp in 256-register units
    props = torch.cuda.get_device_properties(lay.x.device)
    smem = getattr(props, "shared_memory_per_multiprocessor", 233472)
    by_smem = smem // max(k.metadata.shared + 1024, 1)
    return min(65536 // regs, 64 // warps, 32, by_smem)


def run_shipped(lay, cfg):
    from fusion_passes.kernels import gemv  # noqa: F401  (registers the op)
    op = torch.ops.fusion_passes.decode_gemv
    h = op(lay.x, lay.w1, None, None, None, EPS, 0.0, True, lay.res, False)
    # outputs of the captured ops live in the graph's pool: kept apart from the buffers the probe's kernels write
    lay.y_shipped = op(h, lay.wa, lay.wb, None, lay.nw, EPS, 0.0, True, None, lay.gated)


def time_layers(layers, step, reps=20):
    """us per layer: ``step(layer)`` for every layer, captured in one CUDA graph and replayed ``reps`` times."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for lay in layers:
            step(lay)  # warm-up (compiles)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for lay in layers:
            step(lay)
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(reps):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) * 1000 / reps / len(layers))
    return best


def check(lay, out, eps=EPS):
    ref = lay.ref(eps).float()
    return float((out.float() - ref).abs().max() / ref.abs().max())


def tiny():
    """Both pairs on CPU in the interpreter with one program (the barrier passes at once): the fused kernel equals
    the separate launches (the same loop) and the reference to bf16 rounding. Exits non-zero otherwise."""
    torch.manual_seed(0)
    cfg = dict(BN1=2, BK1=32, BN2=4, BK2=32, warps=4, P=1, sms=1, PREF=0)
    for pair in ("o_gateup", "down_qkv"):
        lay = Layer(pair, "tiny", "cpu")
        cnt, flag = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
        run_separate(lay, {**cfg, "P": 0})
        separate = lay.y.clone()
        run_fused(lay, cfg, cnt, flag)
        err = check(lay, lay.y)
        same = torch.equal(lay.y, separate)
        print(f"tiny {pair}: fused rel err {err:.4f}, equal to separate {same}, counter {int(cnt)}, flag {int(flag)}")
        if not same or err > 0.05 or int(cnt) != 1 or int(flag):
            raise SystemExit(f"{pair}: the fused kernel computed something else")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--shapes", nargs="+", default=["1b", "8b"])
    ap.add_argument("--pairs", nargs="+", default=["o_gateup", "down_qkv"])
    ap.add_argument("--per-sm", nargs="+", type=int, default=[1, 2, 4], help="fused: programs per SM")
    ap.add_argument("--prefetch", nargs="+", type=int, default=[0, 1], help="fused: PREF values")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "grid_barrier_probe.json"))
    args = ap.parse_args()
    if args.tiny:
        return tiny()
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    bw = copy_bandwidth_gbs("cuda") / 1e3  # TB/s
    rows = []
    for shape in args.shapes:
        n_layers = 16 if shape == "1b" else 8
        for pair in args.pairs:
            layers = [Layer(pair, shape, dev) for _ in range(n_layers)]
            nbytes = layers[0].bytes()
            ideal = nbytes / (bw * 1e12) * 1e6

            def record(variant, cfg, us, err, valid=True):
                row = dict(shape=shape, pair=pair, variant=variant, cfg=cfg, us_per_layer=round(us, 3),
                           pct_copy_bw=round(100 * ideal / us, 1), rel_err=err, valid=valid, bytes=nbytes)
                rows.append(row)
                print(json.dumps(row), flush=True)

            us = time_layers(layers, lambda lay: run_shipped(lay, None))
            record("shipped", {}, us, check(layers[0], layers[0].y_shipped))
            best_sep = None
            for warps in (4, 8):
                for bn in (2, 4):
                    for bk in (1024, 2048):
                        for per_sm in (0, 4):
                            cfg = dict(BN1=bn, BK1=bk, BN2=bn, BK2=bk, warps=warps, P=per_sm, sms=sms)
                            try:
                                us = time_layers(layers, lambda lay: run_separate(lay, cfg))
                            except Exception as e:  # noqa: BLE001 - a config that does not compile is skipped
                                print("skip", cfg, type(e).__name__, str(e)[:100])
                                continue
                            err = check(layers[0], layers[0].y)
                            record("separate", cfg, us, err, valid=err < 0.05)
                            if best_sep is None or us < best_sep[0]:
                                best_sep = (us, cfg)
            tiles = {(best_sep[1]["warps"], best_sep[1]["BN1"], best_sep[1]["BK1"]), (8, 2, 2048), (4, 4, 1024)}
            for per_sm in args.per_sm:
                for pref in args.prefetch:
                    for warps, bn, bk in sorted(tiles):
                        cfg = dict(BN1=bn, BK1=bk, BN2=bn, BK2=bk, warps=warps, P=per_sm, sms=sms, PREF=pref)
                        cnt = torch.zeros(1, dtype=torch.int32, device=dev)
                        flag = torch.zeros(1, dtype=torch.int32, device=dev)
                        fits = resident_programs(layers[0], cfg, cnt, flag)
                        if fits < per_sm:
                            print("skip", cfg, f"only {fits} programs fit an SM")
                            rows.append(dict(shape=shape, pair=pair, variant="fused", cfg=cfg, skipped=f"{fits} fit an SM",
                                             valid=False))
                            continue
                        try:
                            us = time_layers(layers, lambda lay: run_fused(lay, cfg, cnt, flag))
                        except Exception as e:  # noqa: BLE001
                            print("skip", cfg, type(e).__name__, str(e)[:100])
                            continue
                        err = check(layers[0], layers[0].y)
                        record("fused", cfg, us, err, valid=int(flag.item()) == 0 and err < 0.05)
    summary = []
    for shape in args.shapes:
        for pair in args.pairs:
            sel = [r for r in rows if r["shape"] == shape and r["pair"] == pair and r["valid"]]
            for variant in ("shipped", "separate", "fused"):
                vs = [r for r in sel if r["variant"] == variant]
                if vs:
                    b = min(vs, key=lambda r: r["us_per_layer"])
                    summary.append(b)
    print(f"\ncopy bandwidth {bw:.2f} TB/s; best valid config per variant (us per layer, % of copy bandwidth)")
    print(f"{'shape':6} {'pair':10} {'variant':9} {'us':>8} {'%bw':>6} {'rel_err':>8}  cfg")
    for r in summary:
        print(f"{r['shape']:6} {r['pair']:10} {r['variant']:9} {r['us_per_layer']:8.2f} {r['pct_copy_bw']:6.1f} "
              f"{r['rel_err']:8.4f}  {r['cfg']}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(**environment("cuda"),
                       copy_tb_s=bw, summary=summary, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
