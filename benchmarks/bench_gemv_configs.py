"""Every M = 1 decode GEMV config, per decoder linear, with its weights streamed from HBM: the measured table.

    python benchmarks/bench_gemv_configs.py --model llama-1b                       # GPU: time every config
    python benchmarks/bench_gemv_configs.py --model llama-1b --compile-only --shard 0/8   # warm Triton's cache
    python benchmarks/bench_gemv_configs.py --tiny                                 # CPU smoke run (interpreter)

The compiled decode step used to autotune each GEMV shape in place. Inductor's autotuner times a config by calling
it again and again on the same weights (L2-hot for the 1B shapes), and it clones every tensor a kernel writes (the
whole KV caches for the cache-writing form), so its pick is not the fastest config in a real step, and it adds
compile time. Here each linear of a decoder layer runs, for every config, over enough copies of its weights to
exceed the L2 several times over (as the step's 16 or 32 layers do), in one CUDA graph; the per-call time is the
graph's time over the number of calls. Forms are those the decode step launches:

    qkv:     y = rope(rmsnorm(x) @ [Wq; Wk; Wv].T)           (q, k rotated)
    qkv_kv:  the same, also storing k and v into the caches at cache_position
    o, down: y = x @ W.T + residual
    gate_up: y = silu(rmsnorm(x) @ Wg.T) * (rmsnorm(x) @ Wu.T)
    lm_head: y = rmsnorm(x) @ W.T                            (the vocabulary's logits)

``--compile-only --shard i/n`` launches each config once without timing, so n processes can fill Triton's disk
cache in parallel before one process times them all. Prints the fastest config per linear next to the
autotuner's pick and writes ``benchmarks/results/gemv_configs_<device>_<torch>.json``; the fastest configs are
what ``fusion_passes/kernels/gemv_table.py`` holds.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import CONFIGS  # noqa: E402
from bench_gemv import model_shapes, per_call_ms  # noqa: E402
from common import write_results  # noqa: E402

from fusion_passes.kernels import gemv  # noqa: E402

LINEARS = ("qkv", "qkv_kv", "o", "gate_up", "down", "lm_head")
L2_BYTES = 60 * 2**20
# Tiles beyond the autotuner's list: longer K tiles and two-row programs put more bytes in flight per program.
EXTRA_SHAPES = [(2, 1024, 4, 2), (2, 2048, 4, 2), (4, 2048, 4, 2), (4, 2048, 8, 2), (8, 2048, 8, 2),
                (4, 1024, 4, 3), (4, 1024, 8, 2), (2, 4096, 8, 2), (4, 4096, 8, 2)]


def sweep_configs() -> list[dict]:
    """The autotuner's M = 1 configs (both loops) and the extra tiles, as ``gemv._launch`` config dicts."""
    out = [dict(**c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages)
           for c in gemv._configs(dot=False, prefetch=True)]
    out += [dict(BLOCK_N=n, BLOCK_K=k, PREFETCH=p, ACC1D=a, num_warps=w, num_stages=s)
            for p, a in ((False, False), (True, False), (True, True)) for n, k, w, s in EXTRA_SHAPES]
    return out


# A config's largest error against gemv.reference, in the model dtype's units (outputs of order 1: x is normalised
# and the weights scaled by K**-0.5); fp32 sums in another order move a bf16 output by a rounding step or two.
MAX_ERROR = {torch.bfloat16: 0.0625, torch.float16: 0.01, torch.float32: 1e-3}
PER_SM = (2, 3, 4, 6, 8)  # the persistent form's programs per SM, as swept by default


def persistent_configs(k: int, per_sm=PER_SM, block_n=(1, 2, 4), warps=(4, 8, 16)) -> list[dict]:
    """The persistent form's configs for rows of K: the whole row in one tile, ``block_n`` columns a block,
    ``per_sm`` programs per SM; at least 8 elements of a tile per thread."""
    bk = triton_next_pow2(k)
    return [dict(BLOCK_N=n, BLOCK_K=bk, PREFETCH=True, ACC1D=True, PERSIST=p, num_warps=w, num_stages=1)
            for n in block_n for w in warps for p in per_sm if n * bk <= 16384 and 256 * w <= n * bk]


def triton_next_pow2(k: int) -> int:
    return 1 << (k - 1).bit_length()


def linear_shape(name: str, cfg: dict) -> tuple[str, int, tuple]:
    """(``gemv_table`` form, K, weight widths) of one decoder linear."""
    shapes = {n: (k, widths) for n, k, widths, _ in model_shapes(cfg)}
    k, widths = shapes["qkv" if name == "qkv_kv" else name]
    forms = {"qkv": "rope", "qkv_kv": "kv", "o": "res", "gate_up": "silu", "down": "res", "lm_head": "cat"}
    return forms[name], k, widths


def table_entry(name: str, cfg: dict) -> list[dict]:
    """``gemv_table``'s config for this linear of this model on this GPU, as a one-element list (or none)."""
    from fusion_passes.kernels import gemv_table

    form, k, widths = linear_shape(name, cfg)
    entry = gemv_table.TABLE.get((torch.cuda.get_device_name(), form, k, *(widths + (0, 0))[:3]))
    return [] if entry is None else [gemv_table.as_config(entry)]


def config_name(c: dict) -> str:
    return "N{BLOCK_N} K{BLOCK_K} w{num_warps} s{num_stages}{p}{a}{r}".format(
        **c, p=" prefetch" * c["PREFETCH"], a=" acc1d" * c.get("ACC1D", False),
        r=f" persist{c['PERSIST']}" if c.get("PERSIST") else "")


def linear_calls(name: str, cfg: dict, device, dtype, copies: int | None = None):
    """(weight bytes of one call, calls, launch(config)) for one linear: ``calls`` launches, each on its own copy of
    the weights, into one output."""
    h = cfg["hidden_size"]
    d = cfg.get("head_dim", h // cfg["num_attention_heads"])
    _, k, widths = linear_shape(name, cfg)
    nbytes = sum(widths) * k * torch.finfo(dtype).bits // 8
    calls = copies or max(4, math.ceil(3 * L2_BYTES / nbytes))
    sets = [[torch.randn(n, k, device=device, dtype=dtype) * k**-0.5 for n in widths] for _ in range(calls)]
    x = torch.randn(1, k, device=device, dtype=dtype)
    nw = torch.rand(k, device=device, dtype=dtype) + 0.5 if name in ("qkv", "qkv_kv", "gate_up", "lm_head") else None
    res = torch.randn(1, h, device=device, dtype=dtype) if name in ("o", "down") else None
    silu = name == "gate_up"
    rope = (torch.rand(1, d, device=device).cos().to(dtype), torch.rand(1, d, device=device).sin().to(dtype), d, 2) \
        if name.startswith("qkv") else (None, None, 0, 0)
    caches = (None, *(torch.zeros(1, cfg["num_key_value_heads"], 1280, d, device=device, dtype=dtype)
                      for _ in range(2))) if name == "qkv_kv" else (None, None, None)
    pos = torch.tensor([1000], device=device)
    first = sets[0] + [None] * (3 - len(widths))  # w0, w1, w2 of the first copy
    y = torch.empty(1, gemv._out_width(*first, res, silu), device=device, dtype=dtype)
    expected = gemv.reference(x, *first, nw, 1e-5, 0.0, True, res, silu, *rope)

    def check(config) -> tuple[float, object]:
        """One launch of ``config`` on the first weights: its largest error against the torch reference (so that a
        fast config that computes something else is caught here, not in a decode step), and the compiled kernel
        ``gemv._launch`` returns (its registers)."""
        kernel = gemv._launch(x, *first, nw, 1e-5, 0.0, True, res, silu, y, *rope, caches=caches, cache_index=pos,
                              config=config)
        return (y.float() - expected.float()).abs().max().item(), kernel

    def launch(config, prefetch=None):
        """``config``: one config; None with ``prefetch`` set: the autotuner (None with None: the shipped choice)."""
        for ws in sets:
            w3 = ws + [None] * (3 - len(ws))
            gemv._launch(x, *w3, nw, 1e-5, 0.0, True, res, silu, y, *rope, prefetch=prefetch, caches=caches,
                         cache_index=pos, config=config)

    return nbytes, calls, launch, check


def us_per_call(launch, calls: int, device: str) -> float:
    """One ``launch`` (``calls`` GEMVs) captured in a CUDA graph and replayed: microseconds per GEMV."""
    return per_call_ms(launch, device, calls=1) * 1e3 / calls


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b", choices=sorted(CONFIGS))
    p.add_argument("--linears", nargs="+", default=list(LINEARS), choices=LINEARS)
    p.add_argument("--compile-only", action="store_true")
    p.add_argument("--acc1d-only", action="store_true",
                   help="only the configs reducing each tile, and gemv_table's entry for each linear to compare")
    p.add_argument("--persistent-only", action="store_true",
                   help="only the persistent form's configs, and gemv_table's entry for each linear to compare")
    p.add_argument("--per-sm", nargs="+", type=int, default=list(PER_SM),
                   help="with --persistent-only: the programs per SM to try")
    p.add_argument("--block-n", nargs="+", type=int, default=[1, 2, 4],
                   help="with --persistent-only: the columns per block to try")
    p.add_argument("--warps", nargs="+", type=int, default=[4, 8, 16],
                   help="with --persistent-only: the warps per program to try")
    p.add_argument("--shard", default="0/1", help="i/n: this process takes every n-th config from the i-th")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    if device == "cpu" and not gemv.INTERPRETED:
        print("needs a GPU, or TRITON_INTERPRET=1 with --tiny")
        return 1
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = "tiny" if args.tiny else args.model
    cfg = CONFIGS[model]
    i, n = (int(v) for v in args.shard.split("/"))
    configs = sweep_configs()[i::n] if device == "cuda" else [dict(BLOCK_N=4, BLOCK_K=32, PREFETCH=True,
                                                                   num_warps=4, num_stages=2)]
    torch.manual_seed(0)
    records = []
    for name in args.linears:
        nbytes, calls, launch, check = linear_calls(name, cfg, device, dtype, copies=2 if args.tiny else None)
        if args.acc1d_only and device == "cuda":
            configs = [c for c in sweep_configs() if c.get("ACC1D")][i::n] + table_entry(name, cfg)
        if args.persistent_only:
            k = linear_shape(name, cfg)[1]
            configs = (persistent_configs(k, args.per_sm, args.block_n, args.warps)[i::n] + table_entry(name, cfg)) \
                if device == "cuda" else [
                dict(BLOCK_N=2, BLOCK_K=triton_next_pow2(k), PREFETCH=True, ACC1D=True, PERSIST=2, num_warps=4,
                     num_stages=1)]
        if args.compile_only:
            for c in configs:
                launch(c)
            if device == "cuda":
                torch.cuda.synchronize()
            print(f"[configs] {model} {name}: compiled {len(configs)} configs", flush=True)
            continue
        rows = []
        for c in configs:
            err, kernel = check(c)
            if not err <= MAX_ERROR[dtype]:  # also NaN
                raise SystemExit(f"[configs] {model} {name} {config_name(c)}: max error {err} against the reference")
            us = us_per_call(lambda c=c: launch(c), calls, device)
            # registers: a persistent config whose PERSIST programs do not fit one SM runs twice
            regs = dict(n_regs=getattr(kernel, "n_regs", None), n_spills=getattr(kernel, "n_spills", None))
            rows.append(dict(model=model, linear=name, config=config_name(c), us=round(us, 2),
                             tb_s=round(nbytes / us / 1e6, 3), max_error=err, **regs, **c))
        rows.sort(key=lambda r: r["us"])
        for rank, r in enumerate(rows):
            r["rank"] = rank
        records += rows
        best = rows[0]
        tuned = {}
        if device == "cuda" and name != "qkv_kv":  # the autotuner, as the step used to launch it
            tuned_us = us_per_call(lambda: launch(None, gemv.PREFETCH), calls, device)
            pick = gemv._gemv_m1[gemv.PREFETCH].best_config
            tuned = dict(autotuned_us=round(tuned_us, 2), autotuned_pick=str(pick))
            records.append(dict(model=model, linear=name, config="autotuned", us=round(tuned_us, 2),
                                tb_s=round(nbytes / tuned_us / 1e6, 3), pick=str(pick)))
        print(f"[configs] {model} {name} ({nbytes / 1e6:.1f} MB x {calls}): best {best['config']} {best['us']} us "
              f"({best['tb_s']} TB/s); {tuned}", flush=True)
        for r in rows[:5]:
            print(f"    {r['config']:28s} {r['us']:8.2f} us  {r['tb_s']:.3f} TB/s  regs {r['n_regs']}", flush=True)
    if args.compile_only:
        return 0
    return write_results(records, f"gemv_configs_{model}", args.out, key=("model", "linear", "config"),
                         device=device)


if __name__ == "__main__":
    sys.exit(main())
