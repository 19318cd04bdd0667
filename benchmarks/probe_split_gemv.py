"""Can an M = 1 GEMV of a small decoder shape get closer to a plain read of its weights? Designs not tried before.

    python benchmarks/probe_split_gemv.py --designs rowblock splitk tma     # GPU: the llama-1b / 8b shapes
    python benchmarks/probe_split_gemv.py --designs persist rowblock --norm 1 --shapes 1b_qkv 8b_qkv
    TRITON_INTERPRET=1 python benchmarks/probe_split_gemv.py --tiny --designs splitk persist   # CPU: values only

decode_gemv gives each program BLOCK_N weight rows and streams their whole K (``rowblock``: its M = 1 loop, no
epilogue; ``rowblock-wide`` adds one-row programs, K tiles to 8192 and 16 warps). Against a kernel that only reads
the same bytes (``read``; ``read-tiles``: other read tiles) it loses 0.7-1.3 us on the 33-50 MB shapes. Designs:

    splitk:   program (n, s) reduces K slice s of its rows into WS[s, rows]; the program that finishes a row
              block last (an atomic counter, reset by it) sums WS[:, rows] -> y
    tma:      rowblock with the weight tiles brought in by the bulk tensor copy (a TensorDescriptor), the loop
              software-pipelined STAGES deep into shared memory
    xmode:    rowblock's loop with x loaded as now (0), not at all (1, timing only), or with the weights past L1
              and x kept in it (2): what the per-tile x loads cost
    mma:      the tensor cores (session 30): acc[BLOCK_N, 16] += tl.dot(W tile [BLOCK_N, BLOCK_K], x^T [BLOCK_K, 16]),
              x in column 0 and zeros in the other 15 ("swap AB": the weight rows fill the MMA's M side), the W tiles
              software-pipelined STAGES deep by Triton (a load that feeds a tl.dot); XA=1 puts x on the A side
              instead (x [16, BLOCK_K] @ W^T, as decode_gemv's 2-16 row path). Hypothesis: session 26's Nsight
              counts 318 instructions per persistent block, about 33 of them multiply-adds, the rest bf16 unpacking,
              cross-warp reduction and index math; an MMA consumes the bf16 tile as it is, with no unpack and no
              reduction until the end
    persist:  a persistent grid (P programs per SM): x loaded (and with --norm RMS-normalised) once per program
              and kept in registers, then column blocks pid, pid + grid, ... of whole rows, the next block's rows
              requested before this one is reduced
    --grids:  the persistent design with a given number of programs, e.g. one that divides the blocks evenly
              (session 20, logs/s20_run1: does the last, partly filled round of blocks cost the tail? No: on the
              1B down 342 programs took 10.88 us per call, 396 11.02, 512 and 1024 of 2 blocks each 11.7)

H200, session 17 (logs/s17_run1..6), kernel time of the fastest config by the profiler: split-K (+1.6 us and more)
and TMA (+0.9 to +1.4 us) lose to rowblock on every shape; wider tiles change nothing; the read floor does not move
with its tile (8.83 vs 8.93 us at 33.6 MB). Not loading x makes rowblock 0.6-0.8 us faster on the 33-50 MB shapes
(1B down 9.82 -> 9.25 us, 8B o 9.82 -> 9.06), so the persistent form, which loads x once per program, gains most
of that (1B down 9.44, 8B o 9.28), and more with the norm, whose prologue it runs once per program (8B q/k/v
14.94 -> 13.70 us, 1B 5.28 -> 4.93). ``decode_gemv`` has that form since (``PERSIST``).

H200, session 30 (logs/s30_run1/split_gemv_mma.json, copy bandwidth 4.21 TB/s), kernel us of the fastest config,
mma against persist (and the read floor): 1B o 5.06 vs 3.78 (3.55), 1B q/k/v 5.95 vs 4.70 (4.45), 1B down 12.06 vs
10.27 (8.93), 8B o 11.17 vs 9.44 (8.83), 8B q/k/v 14.88 vs 13.57 (12.54); only the 117 MB 8B down was faster on the
tensor cores, 29.25 vs 32.42 (26.82). The fastest mma tiles were the smallest (16 rows, 2 warps, the most programs):
a program's stream of 128-256 KB is too short for a pipeline that first fills STAGES tiles of shared memory.

Weights are streamed from HBM (enough copies to exceed the L2 three times, in one CUDA graph); every design is
timed over its configs per call in the graph, then its fastest config per kernel by the profiler. Writes
``benchmarks/results/split_gemv_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import copy_bandwidth_gbs  # noqa: E402
from bench_gemv import per_call_ms  # noqa: E402
from bench_gemv_chain import _read_kernel, kernel_us, read  # noqa: E402
from common import write_results  # noqa: E402
from probe_gemv_design import _gemv_probe, reference  # noqa: E402

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

L2_BYTES = 60 * 2**20
SHAPES = {"1b_o": (2048, 2048), "1b_qkv": (3072, 2048), "1b_down": (2048, 8192), "8b_o": (4096, 4096),
          "8b_qkv": (6144, 4096), "8b_down": (4096, 14336)}  # name: (N, K)
TINY = {"o": (48, 64), "down": (16, 256)}


@triton.jit
def _gemv_split(X, W, Y, WS, CNT, N, K, K_SPLIT, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                SPLIT: tl.constexpr, PREFETCH: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = rn < N
    rows = W + rn.to(tl.int64)[:, None] * K
    k_lo = pid_s * K_SPLIT
    k_hi = tl.minimum(k_lo + K_SPLIT, K)
    rk0 = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    if PREFETCH:
        rk = k_lo + rk0
        w = tl.load(rows + rk[None, :], mask=n_ok[:, None] & (rk < k_hi)[None, :], other=0.0,
                    eviction_policy="evict_first")
    for k0 in range(k_lo, k_hi, BLOCK_K):
        rk = k0 + rk0
        if PREFETCH:
            rk_next = rk + BLOCK_K
            w_next = tl.load(rows + rk_next[None, :], mask=n_ok[:, None] & (rk_next < k_hi)[None, :], other=0.0,
                             eviction_policy="evict_first")
        else:
            w = tl.load(rows + rk[None, :], mask=n_ok[:, None] & (rk < k_hi)[None, :], other=0.0,
                        eviction_policy="evict_first")
        x = tl.load(X + rk, mask=rk < k_hi, other=0.0).to(tl.float32)
        acc += tl.sum(w.to(tl.float32) * x[None, :], axis=1)
        if PREFETCH:
            w = w_next
    if SPLIT == 1:
        tl.store(Y + rn, acc.to(Y.dtype.element_ty), mask=n_ok)
    else:
        tl.store(WS + pid_s * N + rn, acc, mask=n_ok)
        tl.debug_barrier()  # every thread's partial is written before the counter moves (release is cumulative)
        done = tl.atomic_add(CNT + pid_n, 1, sem="acq_rel", scope="gpu")
        if done == SPLIT - 1:  # the last split of this row block: every partial is visible to it
            total = tl.zeros([BLOCK_N], dtype=tl.float32)
            for s in range(SPLIT):
                total += tl.load(WS + s * N + rn, mask=n_ok, other=0.0, cache_modifier=".cg")
            tl.store(Y + rn, total.to(Y.dtype.element_ty), mask=n_ok)
            tl.atomic_xchg(CNT + pid_n, 0, sem="relaxed", scope="gpu")  # ready for the next launch


@triton.jit
def _gemv_rows(X, W, Y, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, XMODE: tl.constexpr):
    """rowblock's plain loop (no prefetch, ACC1D) with the x loads varied: 0 as decode_gemv loads them; 1 none (x = 1,
    timing only: what loading x costs); 2 the weights past L1 (.cg) and x kept there (evict_last)."""
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = rn < N
    rows = W + rn.to(tl.int64)[:, None] * K
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        w_mask = n_ok[:, None] & (rk < K)[None, :]
        if XMODE == 2:
            w = tl.load(rows + rk[None, :], mask=w_mask, other=0.0, cache_modifier=".cg")
            x = tl.load(X + rk, mask=rk < K, other=0.0, eviction_policy="evict_last").to(tl.float32)
        else:
            w = tl.load(rows + rk[None, :], mask=w_mask, other=0.0, eviction_policy="evict_first")
            if XMODE == 1:
                x = tl.full([BLOCK_K], 1.0, tl.float32)
            else:
                x = tl.load(X + rk, mask=rk < K, other=0.0).to(tl.float32)
        acc += tl.sum(w.to(tl.float32) * x[None, :], axis=1)
    tl.store(Y + rn, acc.to(Y.dtype.element_ty), mask=n_ok)


@triton.jit
def _gemv_persist(X, NW, W, Y, N, K, NB, eps, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREFETCH: tl.constexpr,
                  NORM: tl.constexpr):
    """A persistent grid: x loaded once per program (BLOCK_K >= K, so it stays in registers), then row blocks
    pid, pid + P, ... each one tile of whole rows, the next block's rows requested before this one is reduced.
    NORM: x is RMS-normalised once per program, as decode_gemv rounds it."""
    T = X.dtype.element_ty
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    rk = tl.arange(0, BLOCK_K)
    k_ok = rk < K
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    if PREFETCH:
        w = tl.load(W + rn.to(tl.int64)[:, None] * K + rk[None, :], mask=(rn < N)[:, None] & k_ok[None, :],
                    other=0.0, eviction_policy="evict_first")
    x = tl.load(X + rk, mask=k_ok, other=0.0).to(tl.float32)
    if NORM:
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / K + eps)
        nw = tl.load(NW + rk, mask=k_ok, other=0.0).to(tl.float32)
        x = ((x * rstd).to(T).to(tl.float32) * nw).to(T).to(tl.float32)
    for rb in range(pid, NB, nprog):
        rn = rb * BLOCK_N + tl.arange(0, BLOCK_N)
        if PREFETCH:
            rn_next = rn + nprog * BLOCK_N
            w_next = tl.load(W + rn_next.to(tl.int64)[:, None] * K + rk[None, :],
                             mask=(rn_next < N)[:, None] & k_ok[None, :], other=0.0, eviction_policy="evict_first")
        else:
            w = tl.load(W + rn.to(tl.int64)[:, None] * K + rk[None, :], mask=(rn < N)[:, None] & k_ok[None, :],
                        other=0.0, eviction_policy="evict_first")
        tl.store(Y + rn, tl.sum(w.to(tl.float32) * x[None, :], axis=1).to(Y.dtype.element_ty), mask=rn < N)
        if PREFETCH:
            w = w_next


@triton.jit
def _gemv_tma(X, w_desc, Y, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        w = w_desc.load([pid * BLOCK_N, k0])  # rows past N / columns past K come back as zeros
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(X + rk, mask=rk < K, other=0.0).to(tl.float32)
        acc += tl.sum(w.to(tl.float32) * x[None, :], axis=1)
    tl.store(Y + rn, acc.to(Y.dtype.element_ty), mask=rn < N)


@triton.jit
def _gemv_mma(X, W, Y, N, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr,
              XA: tl.constexpr):
    """Y[N] = W[N, K] @ X[K] on the tensor cores: x padded to 16 columns (XA = 0) or rows (XA = 1) of zeros."""
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = rn < N
    rows = W + rn.to(tl.int64)[:, None] * K
    pad = tl.arange(0, 16)
    if XA:
        acc = tl.zeros([16, BLOCK_N], dtype=tl.float32)
    else:
        acc = tl.zeros([BLOCK_N, 16], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        w = tl.load(rows + rk[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0,
                    eviction_policy="evict_first")
        if XA:
            xa = tl.load(X + pad[:, None] * 0 + rk[None, :], mask=(pad == 0)[:, None] & k_ok[None, :], other=0.0)
            acc = tl.dot(xa, tl.trans(w), acc)
        else:
            xt = tl.load(X + rk[:, None] + pad[None, :] * 0, mask=k_ok[:, None] & (pad == 0)[None, :], other=0.0)
            acc = tl.dot(w, xt, acc)
    # only x's column (row) 0 is non-zero, so the sum over the padding is that column
    y = tl.sum(acc, axis=0) if XA else tl.sum(acc, axis=1)
    tl.store(Y + rn, y.to(Y.dtype.element_ty), mask=n_ok)


def mma_configs(k: int) -> list[dict]:
    out = []
    for bn, bk, stages, w in itertools.product((16, 32, 64, 128), (128, 256, 512), (3, 4, 6), (2, 4, 8)):
        smem = stages * (bn * bk * 2 + bk * 16 * 2)
        if bk <= k and smem <= 200 * 1024 and (w == 4 or (w == 2 and bn <= 32) or (w == 8 and bn >= 64)):
            out.append(dict(BLOCK_N=bn, BLOCK_K=bk, STAGES=stages, XA=0, num_warps=w))
    # x on the A side: the MMA's M is x's 16 padded rows, so the weight tile is the B operand
    return out + [dict(BLOCK_N=bn, BLOCK_K=bk, STAGES=4, XA=1, num_warps=4) for bn in (16, 32, 64) for bk in (128, 256)
                  if bk <= k]


def rowblock_configs(k: int, wide: bool = False) -> list[dict]:
    """decode_gemv's M = 1 tiles; ``wide``: also one-row programs, K tiles up to 8192, 16 warps, both loops."""
    out = []
    rows, tiles, warps, accs = ((2, 4, 8), (512, 1024, 2048), (None,), (True,))
    if wide:
        rows, tiles, warps, accs = (1, 2, 4, 8), (512, 1024, 2048, 4096, 8192), (4, 8, 16), (True, False)
    for n, bk, w, stages, prefetch, acc1d in itertools.product(rows, tiles, warps, (1, 2), (False, True), accs):
        if bk <= k and n * bk <= (16384 if wide else 8192) and (w is None or 32 * w <= n * bk // 8):
            out.append(dict(BLOCK_N=n, BLOCK_K=bk, ACC1D=acc1d, PREFETCH=prefetch, NORM=0,
                            num_warps=w or (8 if bk == 2048 else 4), num_stages=stages))
    return out


def read_configs() -> list[dict]:
    return [dict(BLOCK=b, num_warps=w) for b in (4096, 8192, 16384, 32768) for w in (4, 8, 16) if 32 * w * 8 <= b]


def read_launch(w, out, c: dict) -> None:
    n = w.numel()
    blocks = triton.cdiv(n, c["BLOCK"])
    _read_kernel[(blocks,)](w, w, w, out, n, n, n, blocks, blocks, **c)


def split_configs(k: int) -> list[dict]:
    out = []
    for split, n, bk, stages in itertools.product((2, 4, 8), (2, 4, 8, 16), (512, 1024), (1, 2)):
        if k // split >= bk and n * bk <= 8192:
            out.append(dict(SPLIT=split, BLOCK_N=n, BLOCK_K=bk, PREFETCH=True, num_warps=4, num_stages=stages))
    return out


def tma_configs(k: int) -> list[dict]:
    out = [dict(BLOCK_N=n, BLOCK_K=256, STAGES=s, num_warps=4) for n in (4, 8, 16, 32) for s in (3, 4, 6, 8)]
    return out + [dict(BLOCK_N=n, BLOCK_K=128, STAGES=s, num_warps=4) for n in (8, 16) for s in (4, 8)]


class Split:
    """One split-K launch's buffers: the fp32 partials and the per-row-block counters (zero between launches)."""

    def __init__(self, n: int, device, max_split: int = 8, max_blocks: int = 4096):
        self.ws = torch.empty(max_split * n, device=device, dtype=torch.float32)
        self.cnt = torch.zeros(max_blocks, device=device, dtype=torch.int32)

    def launch(self, x, w, y, c: dict) -> None:
        n, k = w.shape
        k_split = triton.cdiv(triton.cdiv(k, c["SPLIT"]), c["BLOCK_K"]) * c["BLOCK_K"]
        grid = (triton.cdiv(n, c["BLOCK_N"]), c["SPLIT"])
        _gemv_split[grid](x, w, y, self.ws, self.cnt, n, k, k_split, **c)


def tma_launch(x, desc, y, n: int, k: int, c: dict) -> None:
    _gemv_tma[(triton.cdiv(n, c["BLOCK_N"]),)](x, desc[(c["BLOCK_N"], c["BLOCK_K"])], y, n, k, **c)


def name(design: str, c: dict) -> str:
    return design + " " + " ".join(f"{k}={v}" for k, v in c.items() if k not in ("NORM", "ACC1D"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--shapes", nargs="+", default=None)
    p.add_argument("--designs", nargs="+", default=["rowblock", "splitk", "tma"],
                   choices=["rowblock", "rowblock-wide", "splitk", "tma", "read-tiles", "xmode", "persist", "mma", "none"],
                   help="none: only the read floor and --grids")
    p.add_argument("--norm", type=int, choices=(0, 1), default=0,
                   help="1: rowblock and persist fold RMSNorm in (rowblock as decode_gemv's prologue does)")
    p.add_argument("--grids", nargs="+", type=int, default=[],
                   help="also the persistent design with exactly these many programs (1-2 columns a block)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    if device == "cuda":
        from triton.tools.tensor_descriptor import TensorDescriptor

        copy_tb_s = copy_bandwidth_gbs(device) / 1e3
        print(f"[split] copy bandwidth {copy_tb_s:.3f} TB/s", flush=True)
    else:
        TensorDescriptor = None
        copy_tb_s = None
    records = []
    for lin, (n, k) in (TINY if args.tiny else SHAPES).items():
        if args.shapes and lin not in args.shapes:
            continue
        nbytes = n * k * torch.finfo(dtype).bits // 8
        calls = 2 if args.tiny else max(4, math.ceil(3 * L2_BYTES / nbytes))
        ws = [torch.randn(n, k, device=device, dtype=dtype) * k**-0.5 for _ in range(calls)]
        x = torch.randn(k, device=device, dtype=dtype)
        y = torch.empty(n, device=device, dtype=dtype)
        nw = torch.rand(k, device=device, dtype=dtype) + 0.5
        expected = reference(x, nw, ws[0], args.norm).double()
        split = Split(n, device)
        launches = {}  # name -> fn(w) launching one GEMV of w
        if "rowblock" in args.designs or "rowblock-wide" in args.designs:
            tiny = [dict(BLOCK_N=4, BLOCK_K=32, ACC1D=True, PREFETCH=True, NORM=0, num_warps=4, num_stages=1)]
            for c in rowblock_configs(k, "rowblock-wide" in args.designs) if not args.tiny else tiny:
                c["NORM"] = args.norm
                launches[name("rowblock", c)] = lambda w, c=c: _gemv_probe[(triton.cdiv(n, c["BLOCK_N"]),)](
                    x, nw, w, y, n, k, 1e-5, **c)
        if "read-tiles" in args.designs and not args.tiny:  # other read tiles: is 16 KiB a program the floor?
            partials = torch.empty(triton.cdiv(n * k, 4096), device=device, dtype=torch.float32)
            for c in read_configs():
                launches[name("readtile", c)] = lambda w, c=c: read_launch(w, partials, c)
        if "xmode" in args.designs:
            for xm, bn, bk, w, st in itertools.product((0, 1, 2), (2, 4), (1024, 2048, 4096), (4, 8), (1, 2)):
                c = dict(BLOCK_N=bn, BLOCK_K=bk, XMODE=xm, num_warps=w, num_stages=st)
                if bk <= k or args.tiny:
                    launches[name(f"xmode{xm}", c)] = lambda w, c=c: _gemv_rows[(triton.cdiv(n, c["BLOCK_N"]),)](
                        x, w, y, n, k, **c)
        if "persist" in args.designs:
            sms = torch.cuda.get_device_properties(device).multi_processor_count if device == "cuda" else 2
            bk = triton.next_power_of_2(k)
            for bn, per_sm, w, pf in itertools.product((1, 2, 4), (1, 2, 3, 4, 6, 8), (4, 8, 16), (False, True)):
                if bn * bk > 16384 or 32 * w * 8 > bn * bk:
                    continue
                nb = triton.cdiv(n, bn)
                c = dict(BLOCK_N=bn, BLOCK_K=bk, PREFETCH=pf, NORM=args.norm, num_warps=w)
                launches[name("persist", c) + f" per_sm={per_sm}"] = lambda w, c=c, g=min(nb, sms * per_sm), nb=nb: \
                    _gemv_persist[(g,)](x, nw, w, y, n, k, nb, 1e-5, **c)
        if args.grids:  # the persistent grid sized to an exact number of programs (balanced: blocks % grid == 0)
            bk = triton.next_power_of_2(k)
            for bn, g, w in itertools.product((1, 2), args.grids, (4, 8)):
                if bn * bk > 16384 or 32 * w * 8 > bn * bk:
                    continue
                nb = triton.cdiv(n, bn)
                c = dict(BLOCK_N=bn, BLOCK_K=bk, PREFETCH=True, NORM=args.norm, num_warps=w)
                launches[name("persistgrid", c) + f" grid={g} blocks/program={nb / min(g, nb):.2f}"] = \
                    lambda w, c=c, g=min(nb, g), nb=nb: _gemv_persist[(g,)](x, nw, w, y, n, k, nb, 1e-5, **c)
        if "mma" in args.designs:
            tiny = [dict(BLOCK_N=16, BLOCK_K=32, STAGES=2, XA=xa, num_warps=4) for xa in (0, 1)]
            for c in mma_configs(k) if not args.tiny else tiny:
                launches[name("mma", c)] = lambda w, c=c: _gemv_mma[(triton.cdiv(n, c["BLOCK_N"]),)](
                    x, w, y, n, k, **c)
        if "splitk" in args.designs:
            for c in split_configs(k) if not args.tiny else [dict(SPLIT=s, BLOCK_N=4, BLOCK_K=16, PREFETCH=pf,
                                                                   num_warps=4, num_stages=1)
                                                              for s in (1, 2, 4) for pf in (False, True)]:
                launches[name("splitk", c)] = lambda w, c=c: split.launch(x, w, y, c)
        if "tma" in args.designs and TensorDescriptor is not None and torch.cuda.get_device_capability()[0] >= 9:
            descs = {}
            for c in tma_configs(k):
                for w in ws:
                    descs.setdefault(id(w), {})[(c["BLOCK_N"], c["BLOCK_K"])] = TensorDescriptor.from_tensor(
                        w, [c["BLOCK_N"], c["BLOCK_K"]])
                launches[name("tma", c)] = lambda w, c=c: tma_launch(x, descs[id(w)], y, n, k, c)
        rows = []
        for cfg_name, fn in launches.items():
            # twice: the split counters must be back at zero after a launch (no values to check for the read / no-x)
            try:
                fn(ws[0])
            except Exception as e:  # an MMA tile this GPU / Triton cannot build: not a design result
                if not cfg_name.startswith("mma"):
                    raise
                print(f"[split] {lin} {cfg_name}: skipped ({e})", flush=True)
                continue
            for _ in range(0 if cfg_name.startswith(("readtile", "xmode1")) else 2):
                y.zero_()
                fn(ws[0])
                err = (y.double() - expected).abs().max().item()
                if err > 0.02 * expected.abs().max().item() + 1e-3:
                    raise AssertionError(f"{lin} {cfg_name}: max error {err}")
            if args.tiny:
                rows.append(dict(linear=lin, config=cfg_name, err=err))
                continue
            us = per_call_ms(lambda fn=fn: [fn(w) for w in ws], device, calls=1) * 1e3 / calls
            rows.append(dict(linear=lin, config=cfg_name, design=cfg_name.split()[0], us=round(us, 2),
                             tb_s=round(nbytes / us / 1e6, 3)))
        if args.tiny:
            print(f"[split] {lin}: {len(rows)} configs match the reference", flush=True)
            records += rows
            continue
        floor = per_call_ms(lambda: [read(w) for w in ws], device, calls=1) * 1e3 / calls
        rows.append(dict(linear=lin, config="read", design="read", us=round(floor, 2),
                         tb_s=round(nbytes / floor / 1e6, 3)))
        rows.sort(key=lambda r: r["us"])
        print(f"[split] {lin} N={n} K={k} ({nbytes / 1e6:.1f} MB), per call in a graph; "
              f"85 % of copy = {nbytes / (0.85 * copy_tb_s) / 1e6:.2f} us", flush=True)
        for design in ("read", "readtile", "rowblock", "xmode0", "xmode1", "xmode2", "persist", "persistgrid",
                       "splitk", "tma", "mma"):
            best = next((r for r in rows if r["design"] == design), None)
            if best is None:
                continue
            g = torch.cuda.CUDAGraph()
            fn = (lambda w: read(w)) if design == "read" else launches[best["config"]]
            with torch.cuda.graph(g):
                for w in ws:
                    fn(w)
            g.replay()
            torch.cuda.synchronize()
            durs = sorted(kernel_us(g.replay))
            best["kernel_us"] = round(durs[len(durs) // 2], 2)
            best["pct_copy"] = round(100 * nbytes / best["kernel_us"] / 1e6 / copy_tb_s, 1)
            print(f"    best {design:9s} {best['us']:7.2f} us in graph, kernel {best['kernel_us']:7.2f} us "
                  f"({best['pct_copy']:5.1f} % of copy)  {best['config']}", flush=True)
        for g in args.grids:
            best = next((r for r in rows if r["design"] == "persistgrid" and f" grid={g} " in r["config"]), None)
            if best is not None:
                print(f"    grid {g:5d}: {best['us']:7.2f} us in graph  {best['config']}", flush=True)
        for r in rows:
            r["copy_tb_s"] = round(copy_tb_s, 3)
        records += rows
    if args.tiny:
        return 0
    return write_results(records, "split_gemv", args.out, key=("linear", "config"), device=device)


if __name__ == "__main__":
    sys.exit(main())
