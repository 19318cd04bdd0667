"""Prefill-side kernels of two families, ours vs what stock Inductor makes of the unfused code, per shape.

    python benchmarks/bench_prefill_kernels.py            # GPU: Llama-1B shapes, 512 / 2048 tokens, batch 1 and 8
    python benchmarks/bench_prefill_kernels.py --tiny     # CPU smoke run

- ``attention``: HF eager attention (``repeat_kv``, scale, causal additive mask, fp32 softmax, bmm) compiled by
  stock ``torch.compile`` vs the SDPA call ``attention_sdpa`` rewrites it into (causal mask proven and dropped:
  ``is_causal=True``, ``enable_gqa=True``), also compiled.
- ``qkv``: three linears on one input compiled by stock ``torch.compile`` vs ``fusion_passes::packed_linear``
  (one GEMM on the packed weights) — the ``qkv_packing`` rewrite.
- ``--sdpa-forms``: which SDPA call the rewrite should make, each form compiled under each ``--backends`` choice
  (``auto``: PyTorch's; or only cuDNN's / flash / the efficient kernel): ``gqa causal`` (what the rewrite makes
  now: ``ours`` is its ``auto`` row), ``repeated causal`` (K/V repeated per query head, as ``repeat_kv`` does,
  then ``is_causal=True``), ``repeated mask`` (the additive causal mask passed, as HF's ``sdpa`` attention does)
  and ``gqa mask`` (the mask
  with K/V un-repeated: what the rewrite could make of a padding mask it cannot drop, if a fused kernel takes it
  faster than the repeated form; the rewrite keeps K/V repeated there on CUDA). Each record names the
  attention kernels one call ran (``kernels``): on the H200 ``auto`` lowered the GQA form to cuDNN's.
Times are per call, from CUDA graphs of back-to-back calls (launch overhead excluded); every case is compiled
fresh (``torch._dynamo.reset()``), for its static shapes. JSON goes to
``benchmarks/results/prefill_kernels_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from bench_decode_attention import eager_attention, repeat_kv  # noqa: E402 - HF's eager attention, repeat_kv
from bench_gemv import per_call_ms  # noqa: E402
from common import write_results  # noqa: E402

import fusion_passes.kernels.packed_linear  # noqa: E402,F401 - registers the op


MODELS = {"llama-1b": (2048, 32, 8, 64), "llama-8b": (4096, 32, 8, 128), "tiny": (64, 4, 2, 16)}  # hidden, heads,
# KV heads, head dim


def sdpa_attention(q, k, v, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)


def sdpa_repeated_causal(q, k, v, scale):
    return F.scaled_dot_product_attention(q, repeat_kv(k, q.shape[1]), repeat_kv(v, q.shape[1]), is_causal=True,
                                          scale=scale)


def sdpa_gqa_mask(q, k, v, mask, scale):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)


def sdpa_repeated_mask(q, k, v, mask, scale):
    return F.scaled_dot_product_attention(q, repeat_kv(k, q.shape[1]), repeat_kv(v, q.shape[1]), attn_mask=mask,
                                          scale=scale)


def three_linears(x, wq, wk, wv):
    return F.linear(x, wq), F.linear(x, wk), F.linear(x, wv)


def backend_context(name: str):
    """``auto``: PyTorch's choice; otherwise only that SDPA backend (a form it cannot run fails its record)."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    if name == "auto":
        return contextlib.nullcontext()
    return sdpa_kernel([{"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                         "efficient": SDPBackend.EFFICIENT_ATTENTION}[name]])


def attention_kernels(fn, device: str) -> list[str]:
    """The distinct kernels (CUDA) or ops (CPU) of one call whose names say attention."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    words = ("attention", "attn", "fmha", "flash", "cudnn", "sdpa", "scaled_dot")
    names = {e.name for e in prof.events() if any(w in e.name.lower() for w in words)}
    return sorted(n[:80] for n in names)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b", choices=[m for m in MODELS if m != "tiny"])
    p.add_argument("--tokens", nargs="+", type=int, default=[512, 2048])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    p.add_argument("--families", nargs="+", default=["attention", "qkv"], choices=["attention", "qkv"])
    p.add_argument("--sdpa-forms", action="store_true", help="also time the SDPA forms under each --backends")
    p.add_argument("--backends", nargs="+", default=["auto", "cudnn", "flash", "efficient"])
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = "tiny" if args.tiny else args.model
    hidden, heads, kv_heads, head_dim = MODELS[model]
    tokens = args.tokens if not args.tiny else [16]
    batches = args.batches if not args.tiny else [1]
    backends = args.backends if device == "cuda" else ["auto"]
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
            # (family, variant) -> (function to compile or None for an op, its arguments, SDPA backend)
            cases = {}
            if "attention" in args.families:
                cases[("attention", "stock")] = (eager_attention, (q, k, v, mask, scale), "auto")
                cases[("attention", "ours")] = (sdpa_attention, (q, k, v, scale), "auto")
                forms = {"gqa causal": (sdpa_attention, (q, k, v, scale)),
                         "repeated causal": (sdpa_repeated_causal, (q, k, v, scale)),
                         "repeated mask": (sdpa_repeated_mask, (q, k, v, mask, scale)),
                         "gqa mask": (sdpa_gqa_mask, (q, k, v, mask, scale))} if args.sdpa_forms else {}
                for form, (fn, fn_args) in forms.items():
                    for backend in backends:
                        if (form, backend) != ("gqa causal", "auto"):  # that is "ours"
                            cases[("attention", f"{form} [{backend}]")] = (fn, fn_args, backend)
            if "qkv" in args.families:
                cases[("qkv", "stock")] = (three_linears, (x, wq, wk, wv), "auto")
                cases[("qkv", "ours")] = (None, (x, [wq, wk, wv]), "auto")
            ref_attn = eager_attention(q.float(), k.float(), v.float(), mask.float(), scale)
            ref_qkv = torch.cat([x.float() @ w.float().t() for w in (wq, wk, wv)], 1)
            for (family, variant), (fn, fn_args, backend) in cases.items():
                torch._dynamo.reset()
                compiled = torch.compile(fn) if fn is not None else torch.ops.fusion_passes.packed_linear

                def call(compiled=compiled, fn_args=fn_args, backend=backend):
                    with backend_context(backend):  # for every call: the compiled code is the one it picked
                        return compiled(*fn_args)

                rec = dict(family=family, model=model, batch=b, tokens=s, variant=variant)
                try:
                    out = call()
                    out = torch.cat(out, 1) if isinstance(out, tuple) else out
                    rec["max_err"] = round((out.float() - (ref_attn if family == "attention" else ref_qkv))
                                           .abs().max().item(), 5)
                    rec["us"] = round(per_call_ms(call, device) * 1e3, 1)
                    if family == "attention":
                        rec["kernels"] = attention_kernels(call, device)
                except Exception as e:  # noqa: BLE001 - e.g. a backend that cannot run this form: a result
                    rec["error"] = f"{type(e).__name__}: {e}"[:300]
                records.append(rec)
                print(f"[prefill] {family} b={b} s={s} {variant}: {rec.get('us')} us err {rec.get('max_err')} "
                      f"{rec.get('kernels', '')}{rec.get('error', '')}", flush=True)
    return write_results(records, "prefill_kernels", args.out, key=("family", "model", "batch", "tokens", "variant"),
                         device=device)


if __name__ == "__main__":
    sys.exit(main())
