"""Greedy generation with the decode kernels vs eager, in the model dtype: same tokens, or why not.

    python benchmarks/generation_parity.py                   # GPU: llama-1b, bf16, 64 tokens, sdpa and eager attention
    python benchmarks/generation_parity.py --tiny --device cpu   # CPU smoke run (fp32)

For each compiled variant (stock and ours, both with CUDA graphs on GPU) against eager, on a seeded random-weight HF
Llama over a StaticCache:

    free-running   each side generates ``--steps`` greedy tokens from the same prompt; ``same_tokens`` counts
                   the steps before the first difference
    teacher-forced both sides are fed eager's tokens, so every step is compared on the same context: the max
                   |logit difference|, the steps whose argmax differs, and at each such step eager's margin
                   between its top two logits

A bf16 step rounds differently in every fused kernel (and in stock Inductor's), so argmax can flip where eager's
top two logits are closer than that rounding; ``explained`` says whether every flip is such a near tie (eager's
margin at most ``--tie`` times the step's max logit difference). Writes
``benchmarks/results/generation_parity_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import build_model, forced_policies, make_variant, variant_env  # noqa: E402
from common import add_run_args, run_dtype, write_results  # noqa: E402

from fusion_passes.zoo import hf_cache_kwargs  # noqa: E402


KEY = ("model", "attn", "variant", "dtype")


def run_steps(eager, model, prompt, steps: int, forced=None, cudagraphs=False):
    """Greedy decoding over a fresh StaticCache that ``eager`` prefills with the prompt (so both sides start from
    the same cache, allocated outside any CUDA graph); ``model`` decodes: (tokens [B, steps], float logits per
    step). With ``forced`` ([B, steps] tokens), step i is fed forced[:, i - 1] instead of the previous argmax."""
    from transformers import StaticCache

    n, b = prompt.shape[1], prompt.shape[0]
    cache = StaticCache(config=model.config, max_cache_len=n + steps + 1)
    kw = hf_cache_kwargs(eager, cache)
    dev = prompt.device
    with torch.no_grad():
        logits = eager(input_ids=prompt, **kw, cache_position=torch.arange(n, device=dev),
                       use_cache=True).logits
        tok = logits[:, -1:].argmax(-1)
        toks, all_logits = [], []
        for i in range(steps):
            if forced is not None and i > 0:
                tok = forced[:, i - 1 : i]
            pos = torch.tensor([n + i], device=dev)
            if cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()
            logits = model(input_ids=tok, **kw, cache_position=pos,
                           position_ids=pos[None].expand(b, 1), use_cache=True).logits[:, -1].float().clone()
            all_logits.append(logits)
            tok = logits.argmax(-1, keepdim=True)
            toks.append(tok)
    return torch.cat(toks, 1), all_logits


def compare(model, compiled, prompt, steps: int, tie: float, cudagraphs: bool) -> dict:
    ref_toks, _ = run_steps(model, model, prompt, steps)
    got_toks, _ = run_steps(model, compiled, prompt, steps, cudagraphs=cudagraphs)
    same = (ref_toks == got_toks).all(0).int()
    same_tokens = int(same.cumprod(0).sum())
    _, ref_logits = run_steps(model, model, prompt, steps, forced=ref_toks)
    _, got_logits = run_steps(model, compiled, prompt, steps, forced=ref_toks, cudagraphs=cudagraphs)
    flips, max_err = [], 0.0
    for i, (r, g) in enumerate(zip(ref_logits, got_logits)):
        err = float((r - g).abs().max())
        max_err = max(max_err, err)
        for row in range(r.shape[0]):
            if int(r[row].argmax()) != int(g[row].argmax()):
                top2 = r[row].topk(2).values
                flips.append(dict(step=i, row=row, eager_margin=round(float(top2[0] - top2[1]), 5),
                                  step_max_err=round(err, 5), near_tie=bool(top2[0] - top2[1] <= tie * err)))
    return dict(steps=steps, same_tokens=same_tokens, teacher_forced_max_logit_err=round(max_err, 5),
                argmax_flips=len(flips), explained=all(f["near_tie"] for f in flips), flips=flips[:20])


def main(argv=None) -> int:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b")
    p.add_argument("--attn", nargs="+", default=["sdpa", "eager"])
    p.add_argument("--variants", nargs="+", default=["stock+cudagraphs", "fusion_passes+cudagraphs"])
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("--tie", type=float, default=2.0, help="a flip is a near tie if eager's margin <= tie x max err")
    add_run_args(p)
    args = p.parse_args(argv)
    if args.tiny:
        args.model, args.steps, args.prompt = "tiny", 8, 8
    dtype = run_dtype(args)
    records = []
    for attn in args.attn:
        model = build_model(args.model, attn, args.device, dtype)
        g = torch.Generator(device="cpu").manual_seed(2)
        prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt), generator=g).to(args.device)
        for variant in args.variants:
            rec = dict(model=args.model, attn=attn, variant=variant, dtype=str(dtype).removeprefix("torch."),
                       settings=forced_policies(variant))
            with variant_env(variant):  # a suffix's settings (``+normlate``, ...) while the variant compiles and runs
                rec.update(compare(model, make_variant(model, variant), prompt, args.steps, args.tie,
                                   cudagraphs=variant.endswith("+cudagraphs")))
            records.append(rec)
            print({k: v for k, v in rec.items() if k != "flips"}, flush=True)
            write_results(records, "generation_parity", args.out, key=KEY, device=args.device)  # a cut-short run keeps these
        del model
    cols = ["model", "attn", "variant", "dtype", "steps", "same_tokens", "teacher_forced_max_logit_err",
            "argmax_flips", "explained"]
    print(tabulate([[r[c] for c in cols] for r in records], headers=cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
