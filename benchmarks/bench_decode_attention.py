"""Decode attention: ``fusion_passes::decode_attention`` vs stock Inductor's compiled HF eager attention and SDPA.

    python benchmarks/bench_decode_attention.py           # GPU: llama-1b / llama-8b head shapes, 1024 context

One query token per sequence over a static cache of ``--cache`` keys (HF's additive mask blocks the unwritten
tail), GQA 32/8 heads, head dim 64 and 128. Per-call times from CUDA graphs of back-to-back calls. JSON goes to
``benchmarks/results/decode_attention_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_gemv import per_call_ms  # noqa: E402
from common import write_results  # noqa: E402

import fusion_passes.kernels.decode_attention as kernel  # noqa: E402


def repeat_kv(t, heads: int):
    """[B, Hkv, S, D] -> [B, heads, S, D], each KV head repeated for its query heads (HF's ``repeat_kv``)."""
    return t[:, :, None].expand(-1, -1, heads // t.shape[1], -1, -1).reshape(t.shape[0], heads, *t.shape[2:])


def eager_attention(q, k, v, mask, scale):
    """HF ``eager_attention_forward`` with ``repeat_kv``: q [B, H, Sq, D], k/v [B, Hkv, Sk, D], mask [.., Sq, Sk]."""
    k, v = repeat_kv(k, q.shape[1]), repeat_kv(v, q.shape[1])
    s = q @ k.transpose(2, 3) * scale + mask
    return torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype) @ v


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache", type=int, default=1280)
    p.add_argument("--context", type=int, default=1025)
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    records = []
    for b in args.batches:
        for dim in (64, 128):
            q = torch.randn(b, 32, 1, dim, device=device, dtype=dtype)
            k, v = (torch.randn(b, 8, args.cache, dim, device=device, dtype=dtype) for _ in range(2))
            mask = torch.zeros(b, 1, 1, args.cache, device=device, dtype=dtype)
            mask[..., args.context:] = torch.finfo(dtype).min
            scale = dim**-0.5
            compiled = torch.compile(eager_attention)
            variants = {
                "inductor_eager_attention": lambda: compiled(q, k, v, mask, scale),
                "sdpa_repeated_kv": lambda: torch.nn.functional.scaled_dot_product_attention(
                    q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), attn_mask=mask, scale=scale),
                "ours": lambda: torch.ops.fusion_passes.decode_attention(q, k, v, mask, scale, False),
            }
            ref = kernel.reference(q, k, v, mask, scale).float()
            for name, fn in variants.items():
                err = (fn().float() - ref).abs().max().item()
                us = per_call_ms(fn, device) * 1e3
                rec = dict(batch=b, head_dim=dim, cache=args.cache, variant=name, us=round(us, 2), max_err=round(err, 5))
                records.append(rec)
                print(f"[attn] b={b} d={dim} {name}: {rec['us']} us err {rec['max_err']}", flush=True)
    return write_results(records, "decode_attention", args.out, key=("batch", "head_dim", "variant"), device=device)


if __name__ == "__main__":
    sys.exit(main())
