"""Decode GEMV kernels: ``fusion_passes::decode_gemv`` vs what runs without it, per decoder shape.

    python benchmarks/bench_gemv.py                 # GPU: llama-1b and llama-8b shapes, M = 1 and 8
    python benchmarks/bench_gemv.py --models gemma-2b --rows 1   # any bench_e2e model's shapes
    python benchmarks/bench_gemv.py --tiny          # CPU smoke run (torch implementation, no timing value)

For each linear of a Llama decoder layer (and the lm_head) at M rows, side by side:
- ``cublas``: the GEMMs alone (``x @ W.T`` per weight), no norm / silu / residual;
- ``inductor``: the unfused computation (norm prologue, GEMMs, silu*mul / residual epilogue) compiled by
  stock ``torch.compile``;
- ``ours``: one ``decode_gemv`` launch doing all of it.
Times are per call, from CUDA graphs of back-to-back calls (launch overhead excluded, as in a CUDA-graph decode
step). ``hbm_frac`` = weight bytes / time / measured copy bandwidth. JSON goes to
``benchmarks/results/gemv_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import CONFIGS, copy_bandwidth_gbs  # noqa: E402
from common import write_results  # noqa: E402

import fusion_passes.kernels.gemv  # noqa: E402,F401 - registers the op

def model_shapes(cfg: dict) -> list[tuple[str, int, tuple, str]]:
    """(name, K, weight widths, mode) of a decoder layer's linears and the lm_head for a ``bench_e2e`` config; mode
    "cat" (norm + concatenated outputs), "silu" (norm + gate/up), "res" (+ residual)."""
    h, f, heads = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"]
    d = cfg.get("head_dim", h // heads)
    q, kv = heads * d, cfg["num_key_value_heads"] * d
    return [("qkv", h, (q, kv, kv), "cat"), ("o", q, (h,), "res"), ("gate_up", h, (f, f), "silu"),
            ("down", f, (h,), "res"), ("lm_head", h, (cfg["vocab_size"],), "cat")]


def unfused(x, ws, nw, res, mode):
    t = x.dtype
    xf = x.float()
    if nw is not None:
        x = nw * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(t)
    if mode == "silu":
        return torch.nn.functional.silu(x @ ws[0].t()) * (x @ ws[1].t())
    if mode == "res":
        return res + x @ ws[0].t()
    return [x @ w.t() for w in ws]


def per_call_ms(fn, device: str, calls: int = 50) -> float:
    if not device.startswith("cuda"):
        import time

        fn()  # compile / warm up outside the timing
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
        return (time.perf_counter() - t0) / 3 * 1e3
    for _ in range(3):
        fn()  # autotune / compile / warm up outside the graph
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return sorted(times)[len(times) // 2]


def kernel_bench_target(args) -> tuple[str, torch.dtype, list[str]]:
    """(device, dtype, model shapes) of a kernel benchmark: the GPU in bf16, or with --tiny the tiny shapes on
    CPU in fp32."""
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    return device, torch.bfloat16 if device == "cuda" else torch.float32, ["tiny"] if args.tiny else args.models


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["llama-1b", "llama-8b"], choices=sorted(CONFIGS))
    p.add_argument("--rows", nargs="+", type=int, default=[1, 8])
    p.add_argument("--variants", nargs="+", default=["cublas", "inductor", "ours"])
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device, dtype, models = kernel_bench_target(args)
    bw = copy_bandwidth_gbs(device)
    op = torch.ops.fusion_passes.decode_gemv
    records = []
    torch.manual_seed(0)
    for model in models:
        for name, k, widths, mode in model_shapes(CONFIGS[model]):
            ws = [torch.randn(n, k, device=device, dtype=dtype) / k**0.5 for n in widths]
            nw = torch.rand(k, device=device, dtype=dtype) + 0.5 if mode != "res" else None
            wbytes = sum(w.numel() * w.element_size() for w in ws)
            for m in args.rows:
                x = torch.randn(m, k, device=device, dtype=dtype)
                res = torch.randn(m, widths[0], device=device, dtype=dtype) if mode == "res" else None
                w3 = ws + [None] * (3 - len(ws))

                def ours():
                    return op(x, w3[0], w3[1], w3[2], nw, 1e-5, 0.0, True, res, mode == "silu")

                compiled = torch.compile(unfused)
                variants = {
                    "cublas": lambda: [x @ w.t() for w in ws],
                    "inductor": lambda: compiled(x, ws, nw, res, mode),
                    "ours": ours,
                }
                ref = unfused(x.double(), [w.double() for w in ws], nw.double() if nw is not None else None,
                              res.double() if res is not None else None, mode)
                ref = torch.cat(ref, 1) if isinstance(ref, list) else ref
                err = (ours().double() - ref).abs().max().item()
                for variant, fn in variants.items():
                    if variant not in args.variants:
                        continue
                    ms = per_call_ms(fn, device)
                    rec = dict(model=model, linear=name, mode=mode, rows=m, k=k, widths=list(widths), variant=variant,
                               us=round(ms * 1e3, 2), weight_gb_s=round(wbytes / (ms * 1e-3) / 1e9, 1),
                               hbm_frac=round(wbytes / (ms * 1e-3) / 1e9 / bw, 3) if bw else None,
                               max_err_vs_fp64=round(err, 5) if variant == "ours" else None,
                               copy_gb_s=round(bw, 1) if bw else None)
                    records.append(rec)
                    print(f"[gemv] {model} {name} M={m} {variant}: {rec['us']} us  {rec['hbm_frac']}", flush=True)
    from tabulate import tabulate

    print(tabulate(records, headers="keys"))
    print("copy bandwidth GB/s:", round(bw, 1) if bw else None)
    return write_results(records, "gemv", args.out, key=("model", "linear", "rows", "variant"), device=device)


if __name__ == "__main__":
    sys.exit(main())
