"""Prefill-side kernels of two families, ours vs what stock Inductor makes of the unfused code, per shape.

    python benchmarks/bench_prefill_kernels.py            # GPU: Llama-1B shapes, 512 / 2048 tokens, batch 1 and 8
    python benchmarks/bench_prefill_kernels.py --tiny     # CPU smoke run

- ``attention``: HF eager attention (``repeat_kv``, scale, causal additive mask, fp32 softmax, bmm) compiled by
  stock ``torch.compile`` vs the SDPA call ``attention_sdpa`` rewrites it into (causal mask proven and dropped:
  ``is_causal=True``, ``enable_gqa=True``), also compiled.
- ``qkv``: three linears on one input compiled by stock ``torch.compile`` vs ``fusion_passes::packed_linear``
  (one GEMM on the packed weights) — the ``qkv_packing`` rewrite.
Times are per call, from CUDA graphs of back-to-back calls (launch overhead excluded). JSON goes to
``benchmarks/results/prefill_kernels_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from bench_decode_attention import eager_attention  # noqa: E402 - HF's eager attention with repeat_kv
from bench_gemv import per_call_ms  # noqa: E402
from common import write_results  # noqa: E402

import fusion_passes.kernels.packed_linear  # noqa: E402,F401 - registers the op


def sdpa_attention(q, k, v, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)


def three_linears(x, wq, wk, wv):
    return F.linear(x, wq), F.linear(x, wk), F.linear(x, wv)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", nargs="+", type=int, default=[512, 2048])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    hidden, heads, kv_heads, head_dim = (2048, 32, 8, 64) if not args.tiny else (64, 4, 2, 16)
    tokens = args.tokens if not args.tiny else [16]
    batches = args.batches if not args.tiny else [1]
    records = []
    torch.manual_seed(0)
    wq = torch.randn(heads * head_dim, hidden, device=device, dtype=dtype) / hidden**0.5
    wk, wv = (torch.randn(kv_heads * head_dim, hidden, device=device, dtype=dtype) / hidden**0.5 for _ in range(2))
    for b in batches:
        for s in tokens:
            q = torch.randn(b, heads, s, head_dim, device=device, dtype=dtype)
            k, v = (torch.randn(b, kv_heads, s, head_dim, device=device, dtype=dtype) for _ in range(2))
            mask = torch.full((s, s), torch.finfo(dtype).min, device=device, dtype=dtype).triu(1)[None, None]
            x = torch.randn(b * s, hidden, device=device, dtype=dtype)
            scale = head_dim**-0.5
            stock_attn, ours_attn = torch.compile(eager_attention), torch.compile(sdpa_attention)
            stock_qkv = torch.compile(three_linears)
            cases = {
                ("attention", "stock"): lambda: stock_attn(q, k, v, mask, scale),
                ("attention", "ours"): lambda: ours_attn(q, k, v, scale),
                ("qkv", "stock"): lambda: stock_qkv(x, wq, wk, wv),
                ("qkv", "ours"): lambda: torch.ops.fusion_passes.packed_linear(x, [wq, wk, wv]),
            }
            ref_attn = eager_attention(q.float(), k.float(), v.float(), mask.float(), scale)
            ref_qkv = torch.cat([x.float() @ w.float().t() for w in (wq, wk, wv)], 1)
            for (family, variant), fn in cases.items():
                out = fn()
                out = torch.cat(out, 1) if isinstance(out, tuple) else out
                err = (out.float() - (ref_attn if family == "attention" else ref_qkv)).abs().max().item()
                us = per_call_ms(fn, device) * 1e3
                rec = dict(family=family, batch=b, tokens=s, variant=variant, us=round(us, 1), max_err=round(err, 5))
                records.append(rec)
                print(f"[prefill] {family} b={b} s={s} {variant}: {rec['us']} us err {rec['max_err']}", flush=True)
    return write_results(records, "prefill_kernels", args.out, key=("family", "batch", "tokens", "variant"), device=device)


if __name__ == "__main__":
    sys.exit(main())
