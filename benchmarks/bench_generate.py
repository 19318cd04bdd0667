"""Greedy generation, end to end: HF's own ``generate`` (uncompiled, stock-compiled, ours under Inductor's cudagraph
trees, ours with static CUDA graphs) and a plain loop whose step is replayed by ``fusion_passes.cuda_graph_step``.

    python benchmarks/bench_generate.py                       # GPU: llama-1b, sdpa, 1024-token prompt
    python benchmarks/bench_generate.py --tiny --device cpu   # CPU smoke run

ms_per_token is ``(T(new) - T(few)) / (new - few)`` for two generations from the same prompt (``--new`` and
``--few`` tokens): prefill, cache set-up and HF's per-call work cancel out, what is left is one decode step as the
loop runs it, host included. Each length is timed ``--repeats`` times, alternating, and the fastest of each is
kept (noise only adds time); where the difference is not positive the noise exceeded the decode steps, and the
record says so (``ms_per_token`` None, ``noise``) instead of printing a meaningless number. Every variant's
tokens are compared with uncompiled ``generate``'s (``same_tokens``). Variants:

    eager             model.generate(..., disable_compile=True)
    stock             generate with CompileConfig(backend="inductor")            (mode="reduce-overhead": trees)
    fusion_passes     generate with CompileConfig(backend="fusion_passes")       (trees)
    fusion_passes+static   generate with CompileConfig(backend=fusion_passes.backend(cudagraphs="static"))
    graphed_loop      a greedy loop over HF's StaticCache, the step = cuda_graph_step(compiled model's call)
    stock+dynamic     generate with HF's default DynamicCache, model.forward = torch.compile(model.forward)
    fusion_passes+dynamic   the same with backend="fusion_passes": the cache grows every step, so after two
                      lengths Dynamo compiles one graph with a symbolic cache length (no CUDA graphs)

Writes ``benchmarks/results/generate_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import CONFIGS, build_model  # noqa: E402
from common import add_run_args, write_results  # noqa: E402

import fusion_passes  # noqa: E402

VARIANTS = ("eager", "stock", "fusion_passes", "fusion_passes+static", "graphed_loop", "stock+dynamic",
            "fusion_passes+dynamic")


def hf_generate(model, variant: str, device: str):
    """``run(prompt, n) -> tokens [B, P + n]`` with HF's ``generate`` as ``variant`` compiles its decode step."""
    from transformers import CompileConfig

    backend = {"stock": "inductor", "fusion_passes": "fusion_passes",
               "fusion_passes+static": fusion_passes.backend(cudagraphs="static")}.get(variant)
    config = None
    if backend is not None:
        # dynamic=False: the two generation lengths give caches of two lengths; with Dynamo's automatic dynamic
        # shapes the second would be compiled with a symbolic cache length, which static graphs cannot replay
        config = CompileConfig(backend=backend, fullgraph=True, dynamic=False)
        config._compile_all_devices = True  # HF compiles the decode step on CPU only when asked

    def run(prompt, n):
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, cache_implementation="static", pad_token_id=0)
        if config is None:
            return model.generate(prompt, **kw, disable_compile=True)
        return model.generate(prompt, **kw, compile_config=config)

    return run


def dynamic_cache_generate(model, variant: str):
    """``run(prompt, n)``: HF's ``generate`` with its default DynamicCache, ``model.forward`` compiled by the
    variant's backend for the call (what a user who never picks a cache writes)."""
    backend = "inductor" if variant.startswith("stock") else "fusion_passes"
    forward = torch.compile(model.forward, backend=backend)

    def run(prompt, n):
        model.forward = forward
        try:
            return model.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0,
                                  disable_compile=True)
        finally:
            del model.forward  # the class's forward again

    return run


def graphed_loop(model, device: str):
    """``run(prompt, n)``: prefill with the uncompiled model, then ``n - 1`` steps of the compiled model replayed by
    ``cuda_graph_step`` (one graph per prompt length's cache, captured on first use)."""
    from transformers import StaticCache

    from fusion_passes.zoo import hf_cache_kwargs

    compiled = torch.compile(model, backend=fusion_passes.backend())
    loops = {}

    def run(prompt, n):
        p = prompt.shape[1]
        if p not in loops:  # one cache per prompt length, reused (reset) by every run: its addresses stay
            cache = StaticCache(config=model.config, max_cache_len=p + 512)
            kw = hf_cache_kwargs(model, cache)
            step = fusion_passes.cuda_graph_step(
                lambda ids, pos: compiled(input_ids=ids, **kw, cache_position=pos, position_ids=pos[None].expand(
                    ids.shape[0], 1), use_cache=True).logits)
            loops[p] = (cache, kw, step)
        cache, kw, step = loops[p]
        cache.reset()
        logits = model(input_ids=prompt, **kw, cache_position=torch.arange(p, device=device), use_cache=True).logits
        ids = logits[:, -1:].argmax(-1)
        out = [prompt, ids]
        for i in range(n - 1):
            ids = step(ids, torch.tensor([p + i], device=device))[:, -1:].argmax(-1)
            out.append(ids)
        return torch.cat(out, dim=1)

    return run


def timed(run, prompt, n, device) -> tuple[torch.Tensor, float]:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    tokens = run(prompt, n)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return tokens, time.perf_counter() - start


def per_token_ms(t_new: float, t_few: float, steps: int) -> dict:
    """One decode step from the two lengths' fastest times (s); None with the reason where noise swamped it."""
    if t_new <= t_few:
        return dict(ms_per_token=None, noise=f"T(new) {t_new * 1e3:.1f} ms <= T(few) {t_few * 1e3:.1f} ms: "
                                               "raise --new or --repeats")
    return dict(ms_per_token=round((t_new - t_few) * 1e3 / steps, 4))


def main(argv=None) -> int:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b", choices=sorted(CONFIGS))
    p.add_argument("--attn", default="sdpa")
    p.add_argument("--prompt", type=int, default=1024)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--new", type=int, default=128)
    p.add_argument("--few", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3,
                   help="timed pairs per variant (the fastest of each length is kept)")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    add_run_args(p)
    args = p.parse_args(argv)
    if args.tiny:
        args.model, args.prompt, args.new, args.few, args.repeats = "tiny", 8, 8, 3, 3
    cuda = args.device.startswith("cuda")
    model = build_model(args.model, args.attn, args.device, torch.bfloat16 if cuda else torch.float32)
    prompt = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt),
                           generator=torch.Generator().manual_seed(0)).to(args.device)
    records, expected = [], None
    with torch.no_grad():
        for variant in args.variants:
            torch._dynamo.reset()
            if variant == "graphed_loop":
                run = graphed_loop(model, args.device)
            elif variant.endswith("+dynamic"):
                run = dynamic_cache_generate(model, variant)
            else:
                run = hf_generate(model, variant, args.device)
            rec = dict(model=args.model, attn=args.attn, prompt=args.prompt, batch=args.batch, variant=variant)
            with fusion_passes.capture() as graphs:  # how each of our graphs ran (static, trees, none)
                try:
                    _, first_s = timed(run, prompt, args.few, args.device)  # compiles, captures
                    run(prompt, args.few)
                    t_new, t_few = [], []
                    for _ in range(args.repeats):
                        tokens, t = timed(run, prompt, args.new, args.device)
                        t_new.append(t)
                        t_few.append(timed(run, prompt, args.few, args.device)[1])
                    if expected is None:
                        expected = tokens
                    rec.update(per_token_ms(min(t_new), min(t_few), args.new - args.few),
                               first_call_s=round(first_s, 2), same_tokens=bool(torch.equal(tokens, expected)))
                except Exception as e:  # noqa: BLE001 - a failing variant is a result, not a crash
                    rec["error"] = f"{type(e).__name__}: {e}"[:500]
            rec["cudagraphs"] = sorted({r.cudagraphs for r in graphs if r.cudagraphs}) or None
            print(rec, file=sys.stderr, flush=True)
            records.append(rec)
    print(tabulate(records, headers="keys"))
    return write_results(records, "generate", args.out, key=("model", "attn", "prompt", "batch", "variant"),
                         device=args.device)


if __name__ == "__main__":
    sys.exit(main())
