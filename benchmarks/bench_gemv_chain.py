"""The GEMVs of a whole decode step, back to back: every weight read once from HBM, as in the real step.

    python benchmarks/bench_gemv_chain.py                  # GPU: llama-1b and llama-8b, M = 1
    python benchmarks/bench_gemv_chain.py --tiny           # CPU smoke run (torch implementation, no timing value)

``bench_gemv.py`` times each linear alone, calling it again and again on the same weights, so weights smaller than
the L2 (60 MB on the H200) are served from L2 and look faster than they are in a decode step. Here each layer has
its own weights and the layers run in order, so the chain streams every byte of weights once per step:

    per layer:  qkv = gemv(h, Wq, Wk, Wv, norm=n1)     o: h = gemv(attn, Wo, residual=h)
                (--qkv-form rope: q, k also rotated; kv, the default at one row: also k, v stored into the layer's
                KV caches at position 1000, as the shipped decode step launches it)
                a   = gemv(h, Wg, Wu, norm=n2, silu)   down: h = gemv(a, Wd, residual=h)
    then:       logits = gemv(h, W_lm, norm=nf)

(``attn`` is a slice of ``qkv``: attention itself is not part of this benchmark.) Variants, each captured in one
CUDA graph: ``cublas`` (the GEMMs alone, ``x @ W.T`` per weight, nothing fused: a lower bound for the unfused
path), ``ours`` (decode_gemv as shipped: ``gemv_table``'s measured configs for the shapes it lists, the autotuner
for the rest), ``ours-noprefetch`` (autotuned, its M = 1 loop without the next-tile prefetch), ``ours-late``
(as ``ours``, with ``FUSION_PASSES_GEMV_NORM=late``: the norms' 1/rms applied after the dot) and ``read`` (each
GEMV replaced by a kernel that only reads the same weights: the floor for kernels of these sizes, launch and ramp-up
included). (Session 20 measured ``ours-early``, the persistent residual GEMVs requesting each block's residual with
its rows, and dropped it: 1B down 9.64-9.74 vs 9.55-9.63 us, 8B o 9.62-9.69 vs 9.62-9.63; ``logs/s20_run2``.)
(Session 16 measured two more forms of ours, and neither was faster, so both were dropped: the norm's row loaded in
one tile, and the o / down residual loaded before the K loop; 1B 0.760 ms each vs 0.743, 8B 3.933 and
3.914 vs 3.903; ``gemv_chain_early_*.json``.) (A variant launching ours with programmatic dependent launch was
measured on the H200 and dropped: 0.814 vs 0.804 ms for llama-1b, 4.25 vs 4.32 ms for llama-8b;
``gemv_chain_*.json``. Measured again in session 12 with each kernel letting the next launch first thing and
requesting its first weight tile before waiting for the kernel before it, against the same configs without PDL:
0.805 vs 0.800 ms for llama-1b, 4.245 vs 4.207 ms for llama-8b; ``logs/s12_run1/gemv_chain_pdl.json``: the GEMVs
of the chain are not held up by the launches between them.) Prints ms per chain, the achieved HBM bandwidth and,
for ours, the time of each linear inside the chain (profiler). JSON goes to
``benchmarks/results/gemv_chain_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import CONFIGS, copy_bandwidth_gbs  # noqa: E402
from common import add_run_args, env_set, median_ms, run_dtype, write_results  # noqa: E402

from fusion_passes.kernels import gemv, gemv_table  # noqa: E402

LINEARS = ("qkv", "o", "gate_up", "down")


QKV_FORMS = ("plain", "rope", "kv")
CACHE_LEN, POSITION = 1280, 1000


def make_weights(cfg: dict, device, dtype) -> dict:
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    d = cfg.get("head_dim", h // cfg["num_attention_heads"])
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d

    def w(n, k):
        return torch.randn(n, k, device=device, dtype=dtype) * k**-0.5

    layers = [dict(q=w(q, h), k=w(kv, h), v=w(kv, h), o=w(h, q), g=w(f, h), u=w(f, h), d=w(h, f),
                   n1=torch.ones(h, device=device, dtype=dtype), n2=torch.ones(h, device=device, dtype=dtype))
              for _ in range(cfg["num_hidden_layers"])]
    angles = torch.rand(1, d, device=device) * 6.28
    return dict(layers=layers, lm=w(v, h), nf=torch.ones(h, device=device, dtype=dtype), hidden=h, head_dim=d,
                kv_heads=cfg["num_key_value_heads"], cos=angles.cos().to(dtype), sin=angles.sin().to(dtype))


def add_caches(ws: dict, rows: int) -> None:
    """Per layer a K and a V cache [rows, kv_heads, CACHE_LEN, D] for the q/k/v GEMV's cache-writing form."""
    for L in ws["layers"]:
        L["caches"] = [torch.zeros(rows, ws["kv_heads"], CACHE_LEN, ws["head_dim"], device=ws["lm"].device,
                                   dtype=ws["lm"].dtype) for _ in range(2)]


def weight_bytes(ws: dict) -> int:
    per = sum(t.numel() * t.element_size() for L in ws["layers"] for k, t in L.items() if k not in ("n1", "n2"))
    return per + ws["lm"].numel() * ws["lm"].element_size()


def ours_chain(ws: dict, x: torch.Tensor, prefetch: bool | None = None, qkv_form: str = "plain"):
    rope = (ws["cos"].expand(x.shape[0], -1), ws["sin"].expand(x.shape[0], -1), ws["head_dim"], 2)
    position = torch.full((x.shape[0],), POSITION, device=x.device)

    def op(x, w0, w1=None, w2=None, nw=None, res=None, silu=False, caches=None):
        y = torch.empty((x.shape[0], gemv._out_width(w0, w1, w2, res, silu)), dtype=x.dtype, device=x.device)
        rot = rope if qkv_form != "plain" and w2 is not None else (None, None, 0, 0)
        stores = (None, *caches) if caches else (None, None, None)
        if gemv._use_triton(x):
            gemv._launch(x, w0, w1, w2, nw, 1e-5, 0.0, True, res, silu, y, *rot, prefetch=prefetch, caches=stores,
                         cache_index=position if caches else None)
        else:
            y.copy_(gemv.reference(x, w0, w1, w2, nw, 1e-5, 0.0, True, res, silu, *rot))
            if caches:
                gemv.write_cache_reference(y, [w.shape[0] for w in (w0, w1, w2)], stores, position[:1])
        return y

    def run():
        h = x
        for L in ws["layers"]:
            qkv = op(h, L["q"], L["k"], L["v"], nw=L["n1"], caches=L.get("caches") if qkv_form == "kv" else None)
            h = op(qkv[:, : L["q"].shape[0]], L["o"], res=h)
            a = op(h, L["g"], L["u"], nw=L["n2"], silu=True)
            h = op(a, L["d"], res=h)
        return op(h, ws["lm"], nw=ws["nf"])

    return run


def read_chain(ws: dict, x: torch.Tensor):
    """The chain's weight reads alone: one kernel per linear that reads the same tensors and only sums them, so
    it pays what every kernel of that size pays (launch, HBM latency before the first bytes, the last programs'
    tail) and does nothing else. What the GEMVs can approach per linear, not the bandwidth of one long copy."""
    def run():
        for L in ws["layers"]:
            read(L["q"], L["k"], L["v"])
            read(L["o"])
            read(L["g"], L["u"])
            read(L["d"])
        return read(ws["lm"])

    return run


def read(*ws: torch.Tensor) -> torch.Tensor:
    """Partial sums of up to three weights in one launch (every element read once, from HBM in a chain)."""
    if ws[0].device.type != "cuda":
        return torch.stack([w.float().sum() for w in ws])
    block = 8192
    counts = [triton.cdiv(w.numel(), block) for w in ws]
    out = torch.empty(sum(counts), dtype=torch.float32, device=ws[0].device)
    w1, w2 = (ws[i] if len(ws) > i else ws[0] for i in (1, 2))
    _read_kernel[(sum(counts),)](ws[0], w1, w2, out, *(w.numel() for w in (ws[0], w1, w2)), counts[0],
                                 counts[0] + (counts[1] if len(ws) > 1 else 0), BLOCK=block, num_warps=8)
    return out


try:
    import triton
    import triton.language as tl

    @triton.jit
    def _read_kernel(W0, W1, W2, OUT, n0, n1, n2, nb0, nb01, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        w, n, blk = W0, n0, pid
        if pid >= nb0:
            w, n, blk = W1, n1, pid - nb0
        if pid >= nb01:
            w, n, blk = W2, n2, pid - nb01
        offs = blk.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(w + offs, mask=offs < n, other=0.0, eviction_policy="evict_first")
        tl.store(OUT + pid, tl.sum(v.to(tl.float32), axis=0))
except ImportError:
    triton = None


def cublas_chain(ws: dict, x: torch.Tensor):
    def run():
        h = x
        for L in ws["layers"]:
            q, _, _ = h @ L["q"].t(), h @ L["k"].t(), h @ L["v"].t()
            h = q @ L["o"].t()
            g, _ = h @ L["g"].t(), h @ L["u"].t()  # the up GEMM runs too; its product is not needed here
            h = g @ L["d"].t()
        return h @ ws["lm"].t()

    return run


def autotuner_picks(prefetch: bool) -> dict:
    """The config the M = 1 autotuner chose per weight shape so far: "K=2048 N=(2048, 512, 512)" -> its config."""
    if not gemv.HAS_TRITON or gemv.INTERPRETED:
        return {}
    tuner = gemv._gemv_m1[prefetch]
    return {f"K={k[0]} N=({k[1]}, {k[2]}, {k[3]})": str(cfg) for k, cfg in tuner.cache.items()}


def graph_ms(run, device: str) -> tuple[float, object]:
    for _ in range(3):
        run()  # autotune / warm up outside the graph
    if not device.startswith("cuda"):
        return median_ms(run, device, iters=3), run
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        run()
    return median_ms(g.replay, device, iters=20), g.replay


def kernel_us(replay) -> list[float]:
    """The time of every kernel of one ``replay()``, in launch order (profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        replay()
        torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                 key=lambda e: e.time_range.start)
    return [e.time_range.elapsed_us() for e in evs]


def per_linear_us(replay, n_layers: int) -> dict:
    """Kernel times of one replay, in launch order, folded onto (qkv, o, gate_up, down) x layers + lm_head."""
    us = kernel_us(replay)
    if len(us) != 4 * n_layers + 1:
        return {}
    out = {name: round(sum(us[j:4 * n_layers:4]) / n_layers, 2) for j, name in enumerate(LINEARS)}
    out["lm_head"] = round(us[-1], 2)
    return out


def main(argv=None) -> int:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["llama-1b", "llama-8b"])
    p.add_argument("--rows", nargs="+", type=int, default=[1])
    p.add_argument("--variants", nargs="+", default=["cublas", "ours"],
                   choices=["cublas", "ours", "ours-noprefetch", "ours-late", "read"])
    p.add_argument("--qkv-form", choices=QKV_FORMS, default="kv",
                   help="ours' q/k/v GEMV: plain, + RoPE, or + RoPE and the KV-cache stores (the shipped step's; "
                        "at more than one row the chain runs rope)")
    add_run_args(p)
    args = p.parse_args(argv)
    cuda = args.device.startswith("cuda")
    if args.tiny:
        args.models = ["tiny"]
    dtype = run_dtype(args, variants_attr=None)
    bw = copy_bandwidth_gbs(args.device)
    records = []
    for model in args.models:
        cfg = CONFIGS[model]
        torch.manual_seed(0)
        ws = make_weights(cfg, args.device, dtype)
        nbytes = weight_bytes(ws)
        for m in args.rows:
            x = torch.randn(m, ws["hidden"], device=args.device, dtype=dtype)
            qkv_form = "rope" if args.qkv_form == "kv" and m > 1 else args.qkv_form
            if qkv_form == "kv":
                add_caches(ws, m)
            for variant in args.variants:
                prefetch = False if variant == "ours-noprefetch" else None  # None: the shipped choice
                chains = dict(cublas=cublas_chain, read=read_chain)
                run = chains[variant](ws, x) if variant in chains else ours_chain(ws, x, prefetch, qkv_form)
                policies = {"ours-late": {gemv_table.NORM_POLICY_ENV: "late"}}.get(variant, {})
                with env_set(policies):  # read at every launch: the warm-up and the capture
                    ms, replay = graph_ms(run, args.device)
                rec = dict(model=model, rows=m, variant=variant,
                           qkv_form=qkv_form if variant.startswith("ours") else "", ms=round(ms, 4),
                           weight_gb=round(nbytes / 1e9, 3),
                           tbps=round(nbytes / (ms * 1e-3) / 1e12, 3))
                if bw:
                    rec["hbm_frac"] = round(nbytes / (ms * 1e-3) / (bw * 1e9), 3)
                if cuda and variant != "cublas":
                    rec["per_linear_us"] = per_linear_us(replay, cfg["num_hidden_layers"])
                if cuda and variant.startswith("ours"):
                    # which loop and tiles each shape got: what a config list pruned for compile time would keep
                    rec["autotuner_picks"] = autotuner_picks(gemv.PREFETCH if prefetch is None else prefetch)
                records.append(rec)
                print(rec, flush=True)
        del ws
    cols = ["model", "rows", "variant", "qkv_form", "ms", "weight_gb", "tbps", "hbm_frac", "per_linear_us"]
    print(tabulate([[r.get(c, "") for c in cols] for r in records], headers=cols))
    return write_results(records, "gemv_chain", args.out, key=("model", "rows", "variant", "qkv_form"),
                         device=args.device)


if __name__ == "__main__":
    sys.exit(main())
