"""The q/k/v GEMV with and without the KV-cache update in its epilogue, per kernel config.

    python benchmarks/bench_kv_write.py            # GPU: llama-1b and llama-8b q/k/v shapes, M = 1, bf16
    python benchmarks/bench_kv_write.py --tiny     # CPU smoke run (interpreter or torch; no timing value)

The decode step measured slower with the update folded in (``FUSION_PASSES_DECODE_KV_WRITE=on``): 32 fewer
kernels but a q/k/v GEMV of ~12.4 us instead of ~7.5 us (``logs/s8_kv/profile_decode_kv.json``). This times,
for every M = 1 config the autotuner offers, ``decode_gemv`` (norm + RoPE, concatenated outputs) against
``decode_gemv_kv_write`` (the same plus the k/v stores into a [1, H_kv, 1280, D] cache), and each one's
autotuned call: whether the cost is the stores themselves or the autotuner's pick. Per call, from CUDA graphs of
back-to-back calls. JSON: ``benchmarks/results/kv_write_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_gemv import kernel_bench_target, per_call_ms  # noqa: E402
from common import write_results  # noqa: E402

from fusion_passes.kernels import gemv  # noqa: E402

SHAPES = {"llama-1b": (2048, 32, 8, 64), "llama-8b": (4096, 32, 8, 128), "tiny": (64, 4, 2, 16)}  # K, H, H_kv, D


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["llama-1b", "llama-8b"])
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device, dtype, models = kernel_bench_target(args)
    configs = [None]
    if device == "cuda":
        configs += [dict(**c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages)
                    for c in gemv._configs(dot=False, prefetch=True)]
    records = []
    torch.manual_seed(0)
    for model in models:
        k, h, hkv, d = SHAPES[model]
        x = torch.randn(1, k, device=device, dtype=dtype)
        ws = [torch.randn(n * d, k, device=device, dtype=dtype) / k**0.5 for n in (h, hkv, hkv)]
        nw = torch.rand(k, device=device, dtype=dtype) + 0.5
        cos, sin = (f(torch.rand(1, d, device=device)).to(dtype) for f in (torch.cos, torch.sin))
        caches = [torch.zeros(1, hkv, 1280, d, device=device, dtype=dtype) for _ in range(2)]
        pos = torch.tensor([1000], device=device)
        y = torch.empty(1, (h + 2 * hkv) * d, device=device, dtype=dtype)
        norm = (nw, 1e-5, 0.0, True)
        ops = {  # the autotuned ops, as the compiled graph calls them (off GPU: their torch implementation)
            "plain": lambda: torch.ops.fusion_passes.decode_gemv(x, *ws, *norm, None, False, cos, sin, d, 2),
            "kv_write": lambda: torch.ops.fusion_passes.decode_gemv_kv_write(x, *ws, *norm, cos, sin, d, 2, None,
                                                                             *caches, pos),
        }
        for config in configs:
            row = dict(model=model, config=_name(config))
            for variant, cached in (("plain", (None, None, None)), ("kv_write", (None, *caches))):
                def launch(cached=cached, config=config):
                    gemv._launch(x, *ws, *norm, None, False, y, cos, sin, d, 2, caches=cached, cache_index=pos,
                                 config=config)

                row[f"{variant}_us"] = round(per_call_ms(ops[variant] if config is None else launch, device) * 1e3, 2)
                if config is None and device == "cuda":
                    row[f"{variant}_pick"] = str(gemv._gemv_m1[gemv.PREFETCH].best_config)
            row["extra_us"] = round(row["kv_write_us"] - row["plain_us"], 2)
            records.append(row)
            print(f"[kv_write] {model} {row['config']}: plain {row['plain_us']} us, kv_write {row['kv_write_us']} us",
                  flush=True)
    from tabulate import tabulate

    print(tabulate(records, headers="keys"))
    return write_results(records, "kv_write", args.out, key=("model", "config"), device=device)


def _name(config) -> str:
    if config is None:
        return "autotuned"
    return "N{BLOCK_N} K{BLOCK_K} w{num_warps} s{num_stages}{p}".format(**config, p=" prefetch" * config["PREFETCH"])


if __name__ == "__main__":
    sys.exit(main())
