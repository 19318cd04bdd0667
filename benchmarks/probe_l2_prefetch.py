"""Probe: does prefetching the o-proj weights into L2, during the latency-bound attention, speed up the o GEMV?

    python benchmarks/probe_l2_prefetch.py                 # GPU: llama-1b and llama-8b shapes, 1024 context
    python benchmarks/probe_l2_prefetch.py --tiny          # CPU smoke run (torch, no timing value)

    per layer (its own cache and weights, so each replay streams every byte from HBM once, as a decode step does):
        a = stand_in(k_cache, v_cache)          reads the layer's K/V cache bytes, as decode attention does
        h = decode_gemv(a, Wo, residual=h)      the o-proj GEMV as shipped
    variants: "plain"; "load": the stand-in also loads the layer's Wo, a share per program, evict_last;
              "ptx": the same lines requested with PTX ``prefetch.global.L2::evict_last`` (no registers held);
              "attn": the real decode attention kernel (two kernels: splits, combine) in place of the stand-in;
              "attn_pf": the same, requesting Wo as ``FUSION_PASSES_DECODE_ATTENTION_PREFETCH=on`` does

Decode attention reads a few MB (1B: 2 MB per layer at 1024 context) and is latency-bound, so HBM has bandwidth to
spare while it runs; the o GEMV that follows (1B: 8 MB in 3.9 us, about 52 % of the copy bandwidth) could read
from L2 instead. The stand-in only reads, so this answers whether the bytes arrive in time and stay in L2, not what
the real attention kernel would pay for the extra requests. Prints per variant the chain's ms and, per layer, the
stand-in's and the GEMV's kernel time; JSON to ``benchmarks/results/l2_prefetch_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import CONFIGS  # noqa: E402
from bench_gemv_chain import graph_ms, kernel_us  # noqa: E402
from common import add_run_args, run_dtype, write_results  # noqa: E402

from fusion_passes.kernels import decode_attention, gemv  # noqa: E402,F401 - registers the ops

VARIANTS = ("plain", "load", "ptx", "attn", "attn_pf")
STAND_IN = VARIANTS[:3]
PROGRAMS = 256  # about what decode attention launches on the H200 (kernels.decode_attention._TARGET_PROGRAMS)

try:
    import triton
    import triton.language as tl

    @triton.jit
    def _stand_in_kernel(K, V, W, OUT, n_kv, n_w, PER_KV: tl.constexpr, PER_W: tl.constexpr, BLOCK: tl.constexpr,
                         MODE: tl.constexpr, LINE_ELEMS: tl.constexpr):
        """Sum this program's share of K and V (evict_first); MODE 1 also loads its share of W (evict_last),
        MODE 2 requests W's lines with the decode kernel's PTX prefetches first, in flight while K/V are read."""
        pid = tl.program_id(0).to(tl.int64)
        acc = tl.zeros([BLOCK], tl.float32)
        if MODE == 2:
            decode_attention.prefetch_l2(W, pid * PER_W, n_w, PER_W, LINE_ELEMS)
        for i in range(0, PER_KV, BLOCK):
            offs = pid * PER_KV + i + tl.arange(0, BLOCK)
            acc += tl.load(K + offs, mask=offs < n_kv, other=0.0, eviction_policy="evict_first").to(tl.float32)
            acc += tl.load(V + offs, mask=offs < n_kv, other=0.0, eviction_policy="evict_first").to(tl.float32)
        if MODE == 1:
            for i in range(0, PER_W, BLOCK):
                offs = pid * PER_W + i + tl.arange(0, BLOCK)
                acc += tl.load(W + offs, mask=offs < n_w, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(OUT + pid, tl.sum(acc, axis=0))
except ImportError:
    triton = None


def stand_in(k: torch.Tensor, v: torch.Tensor, w: torch.Tensor, out: torch.Tensor, variant: str) -> torch.Tensor:
    """Read k and v (and with "load"/"ptx" w) once; ``out`` [PROGRAMS] fp32 gets per-program sums."""
    if not k.is_cuda:
        out.fill_(float(k.float().sum() + v.float().sum()))
        return out
    n_kv, n_w = k.numel(), w.numel()
    block = 1024
    per_kv = triton.cdiv(triton.cdiv(n_kv, PROGRAMS), block) * block
    shares = decode_attention.prefetch_shares(w, PROGRAMS)  # whole trips of the prefetch loop, and loads
    per_w = triton.cdiv(shares["PF_PER"], block) * block
    _stand_in_kernel[(PROGRAMS,)](k, v, w, out, n_kv, n_w, PER_KV=per_kv, PER_W=per_w, BLOCK=block,
                                  MODE=VARIANTS.index(variant), LINE_ELEMS=shares["PF_LINE"], num_warps=4)
    return out


def make_layers(cfg: dict, context: int, device, dtype) -> list[dict]:
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    d = cfg.get("head_dim", h // heads)
    kv_shape = (1, cfg["num_key_value_heads"], context, d)
    return [dict(k=torch.randn(kv_shape, device=device, dtype=dtype), v=torch.randn(kv_shape, device=device, dtype=dtype),
                 o=torch.randn(h, heads * d, device=device, dtype=dtype) * (heads * d) ** -0.5)
            for _ in range(cfg["num_hidden_layers"])]


def chain(layers: list[dict], q: torch.Tensor, h0: torch.Tensor, variant: str):
    """Per layer the stand-in or the decode attention of ``q`` [1, H, 1, D] over the layer's cache, then the o GEMV
    on [1, H * D]: the attention's output, or for the stand-in ``q`` itself."""
    out = torch.empty(PROGRAMS, dtype=torch.float32, device=q.device)
    gemv_op, attention = torch.ops.fusion_passes.decode_gemv, torch.ops.fusion_passes.decode_attention
    scale = q.shape[-1] ** -0.5

    def run():
        h = h0
        for L in layers:
            if variant in STAND_IN:
                stand_in(L["k"], L["v"], L["o"], out, variant)
                a = q
            else:
                a = attention(q, L["k"], L["v"], None, scale, False, 0.0, L["o"] if variant == "attn_pf" else None)
            h = gemv_op(a.reshape(1, -1), L["o"], None, None, None, 1e-5, 0.0, True, h, False)
        return h

    return run


def per_kernel_us(replay, n_layers: int, variant: str) -> dict:
    """Per layer: each kernel's time (us), from one profiled replay."""
    names = ("stand_in", "o_gemv") if variant in STAND_IN else ("attention", "combine", "o_gemv")
    us = kernel_us(replay)
    if len(us) != len(names) * n_layers:
        return {}
    return {name: round(sum(us[j::len(names)]) / n_layers, 2) for j, name in enumerate(names)}


def main(argv=None) -> int:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["llama-1b", "llama-8b"], choices=sorted(CONFIGS))
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    add_run_args(p)
    args = p.parse_args(argv)
    cuda = args.device.startswith("cuda")
    models = ["tiny"] if args.tiny else args.models
    dtype = run_dtype(args, variants_attr=None)
    records = []
    for model in models:
        cfg = CONFIGS[model]
        torch.manual_seed(0)
        context = 16 if args.tiny else args.context
        layers = make_layers(cfg, context, args.device, dtype)
        heads = cfg["num_attention_heads"]
        q = torch.randn(1, heads, 1, cfg.get("head_dim", cfg["hidden_size"] // heads), device=args.device,
                        dtype=dtype)
        h0 = torch.randn(1, cfg["hidden_size"], device=args.device, dtype=dtype)
        expected = {}  # per group (stand-in, attention): the first variant's result
        for variant in args.variants:
            if variant == "ptx" and not cuda:
                continue  # PTX: NVIDIA GPUs only
            run = chain(layers, q, h0, variant)
            result = run().clone()
            expected.setdefault(variant in STAND_IN, result)
            ms, replay = graph_ms(run, args.device)
            rec = dict(model=model, context=context, variant=variant, ms=round(ms, 4),
                       same_result=bool(torch.equal(result, expected[variant in STAND_IN])))
            if cuda:
                rec.update(per_kernel_us(replay, cfg["num_hidden_layers"], variant))
            records.append(rec)
            print(rec, flush=True)
        del layers
    print(tabulate(records, headers="keys"))
    return write_results(records, "l2_prefetch", args.out, key=("model", "context", "variant"), device=args.device)


if __name__ == "__main__":
    sys.exit(main())
