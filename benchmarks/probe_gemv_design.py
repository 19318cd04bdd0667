"""Where the M = 1 GEMV loses to a plain read of its weights: two accumulation designs, every tile, vs the read floor.

    python benchmarks/probe_gemv_design.py                               # GPU: llama-1b shapes
    python benchmarks/probe_gemv_design.py --compile-only --shard 0/8    # warm Triton's cache in parallel first
    TRITON_INTERPRET=1 python benchmarks/probe_gemv_design.py --tiny     # CPU: the kernel's values only

``bench_gemv_chain``'s ``read`` variant reads the step's weights at 4.6 TB/s on the H200 (lm_head) where the
decode GEMV reaches 4.0. A GEMV program keeps a [BLOCK_N, BLOCK_K] fp32 accumulator (twice the weight tile's
registers) and reduces it once at the end, so few programs fit on an SM and few bytes are in flight per SM. This
probe times a bare ``y = W @ x`` (no norm, no epilogue) two ways, over the same tiles:

    acc2d:  acc[BLOCK_N, BLOCK_K] += w * x;  y = sum(acc, 1)        (decode_gemv's M = 1 loop today)
    acc1d:  acc[BLOCK_N] += sum(w * x, 1)                           (reduce each tile: registers for one tile)

each with and without loading tile k+1 before reducing tile k, next to the read kernel (``bench_gemv_chain.read``)
for the same bytes. Weights are streamed from HBM (enough copies to exceed the L2 three times, in one CUDA graph).
Writes ``benchmarks/results/gemv_design_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_gemv import per_call_ms  # noqa: E402
from bench_gemv_chain import read  # noqa: E402
from common import write_results  # noqa: E402

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

L2_BYTES = 60 * 2**20
SHAPES = {"o": (2048, 2048), "qkv": (3072, 2048), "gate_up": (16384, 2048), "down": (2048, 8192),
          "lm_head": (128256, 2048)}  # name: (N, K), llama-1b
TINY = {"o": (48, 64), "down": (16, 256)}


@triton.jit
def _gemv_probe(X, NW, W, Y, N, K, eps, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ACC1D: tl.constexpr,
                PREFETCH: tl.constexpr, NORM: tl.constexpr):
    T = X.dtype.element_ty
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = rn < N
    rows = W + rn.to(tl.int64)[:, None] * K
    rk0 = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    if PREFETCH:
        w = tl.load(rows + rk0[None, :], mask=n_ok[:, None] & (rk0 < K)[None, :], other=0.0,
                    eviction_policy="evict_first")
    if NORM == 1:  # decode_gemv's prologue: a pass over x for 1/rms, then x and the norm weight again per tile
        ss = tl.zeros([BLOCK_K], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            xk = tl.load(X + k0 + rk0, mask=k0 + rk0 < K, other=0.0).to(tl.float32)
            ss += xk * xk
        rstd = tl.rsqrt(tl.sum(ss, axis=0) / K + eps)
    if NORM == 2:  # one tile holds the whole row (BLOCK_K >= K): x and the norm weight read once
        xk = tl.load(X + rk0, mask=rk0 < K, other=0.0).to(tl.float32)
        rstd1 = tl.rsqrt(tl.sum(xk * xk, axis=0) / K + eps)
        nw1 = tl.load(NW + rk0, mask=rk0 < K, other=0.0).to(tl.float32)
        xn1 = ((xk * rstd1).to(T).to(tl.float32) * nw1).to(T).to(tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + rk0
        if PREFETCH:
            rk_next = rk + BLOCK_K
            w_next = tl.load(rows + rk_next[None, :], mask=n_ok[:, None] & (rk_next < K)[None, :], other=0.0,
                             eviction_policy="evict_first")
        else:
            w = tl.load(rows + rk[None, :], mask=n_ok[:, None] & (rk < K)[None, :], other=0.0,
                        eviction_policy="evict_first")
        if NORM == 2:
            x = xn1
        else:
            x = tl.load(X + rk, mask=rk < K, other=0.0).to(tl.float32)
        if NORM == 1:
            nw = tl.load(NW + rk, mask=rk < K, other=0.0).to(tl.float32)
            x = ((x * rstd).to(T).to(tl.float32) * nw).to(T).to(tl.float32)
        prod = w.to(tl.float32) * x[None, :]
        if ACC1D:
            acc += tl.sum(prod, axis=1)
        else:
            acc2 += prod
        if PREFETCH:
            w = w_next
    if not ACC1D:
        acc = tl.sum(acc2, axis=1)
    tl.store(Y + rn, acc.to(Y.dtype.element_ty), mask=n_ok)


def configs(k: int | None = None, norms=(0,)) -> list[dict]:
    out = []
    for norm, n, bk, warps, stages, acc1d, prefetch in itertools.product(
            norms, (2, 4, 8, 16), (256, 512, 1024, 2048, 4096), (4, 8), (1, 2), (False, True), (False, True)):
        if n * bk > 16384 or (k is not None and bk > k) or (norm == 2 and (k is None or bk < k)) \
                or (norm == 0 and bk < 512):
            continue
        out.append(dict(BLOCK_N=n, BLOCK_K=bk, ACC1D=acc1d, PREFETCH=prefetch, NORM=norm, num_warps=warps,
                        num_stages=stages))
    return out


def name(c: dict) -> str:
    return "{d}{nm} N{BLOCK_N} K{BLOCK_K} w{num_warps} s{num_stages}{p}".format(
        **c, d="acc1d" if c["ACC1D"] else "acc2d", nm=("", " norm2pass", " norm1tile")[c["NORM"]],
        p=" prefetch" * c["PREFETCH"])


def launch(x, nw, w, y, c: dict) -> None:
    n, k = w.shape
    _gemv_probe[(triton.cdiv(n, c["BLOCK_N"]),)](x, nw, w, y, n, k, 1e-5, **c)


def reference(x, nw, w, norm: int) -> torch.Tensor:
    if norm:  # eager's RMSNorm: fp32 statistics, rounded to the dtype, times the weight, rounded
        xf = x.float()
        x = ((xf * torch.rsqrt(xf.pow(2).mean() + 1e-5)).to(x.dtype) * nw).to(x.dtype)
    return (w.double() @ x.double()).to(x.dtype)


def timed_us(fn, device: str) -> float:
    """Microseconds per ``fn()``: replayed from a CUDA graph on GPU; off GPU (the interpreter: values only) one call."""
    if device == "cuda":
        return per_call_ms(fn, device, calls=1) * 1e3
    import time

    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--shard", default="0/1")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--linears", nargs="+", default=None)
    p.add_argument("--norms", nargs="+", type=int, default=[0], help="0: none, 1: two-pass prologue, 2: one tile")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    shapes = TINY if args.tiny else SHAPES
    i, n_shards = (int(v) for v in args.shard.split("/"))
    torch.manual_seed(0)
    records = []
    for lin, (n, k) in shapes.items():
        if args.linears and lin not in args.linears:
            continue
        cfgs = configs(k, args.norms)[i::n_shards] if device == "cuda" else [
            dict(BLOCK_N=4, BLOCK_K=bk, ACC1D=a, PREFETCH=pf, NORM=nm, num_warps=4, num_stages=1)
            for a in (False, True) for pf in (False, True) for nm in args.norms
            for bk in ((k,) if nm == 2 else (32,))]  # off GPU: the values of each design, one tile size each
        nbytes = n * k * torch.finfo(dtype).bits // 8
        calls = 2 if args.tiny else max(4, math.ceil(3 * L2_BYTES / nbytes))
        ws = [torch.randn(n, k, device=device, dtype=dtype) * k**-0.5 for _ in range(calls)]
        x = torch.randn(k, device=device, dtype=dtype)
        nw = torch.rand(k, device=device, dtype=dtype) + 0.5
        y = torch.empty(n, device=device, dtype=dtype)
        for c in cfgs:
            launch(x, nw, ws[0], y, c)
            expected = reference(x, nw, ws[0], c["NORM"])
            err = (y.double() - expected.double()).abs().max().item()
            if err > 0.05 * expected.double().abs().max().item():
                raise AssertionError(f"{lin} {name(c)}: max error {err}")
        if args.compile_only:
            continue
        rows = []
        for c in cfgs:
            us = timed_us(lambda c=c: [launch(x, nw, w, y, c) for w in ws], device) / calls
            rows.append(dict(linear=lin, config=name(c), us=round(us, 2), tb_s=round(nbytes / us / 1e6, 3), **c))
        floor = timed_us(lambda: [read(w) for w in ws], device) / calls
        rows.append(dict(linear=lin, config="read", us=round(floor, 2), tb_s=round(nbytes / floor / 1e6, 3)))
        rows.sort(key=lambda r: r["us"])
        records += rows
        print(f"[design] {lin} N={n} K={k} ({nbytes / 1e6:.1f} MB): read {floor:.2f} us", flush=True)
        for key in sorted({(r["NORM"], r["ACC1D"]) for r in rows if "NORM" in r}):
            best = next(r for r in rows if (r.get("NORM"), r.get("ACC1D")) == key)
            print(f"    best of {key}: {best['config']:36s} {best['us']:8.2f} us", flush=True)
        for r in rows[:6]:
            print(f"    {r['config']:36s} {r['us']:8.2f} us  {r['tb_s']:.3f} TB/s", flush=True)
    if args.compile_only:
        return 0
    return write_results(records, "gemv_design", args.out, key=("linear", "config"), device=device)


if __name__ == "__main__":
    sys.exit(main())
