"""Host time per call of the ops a 512-token prefill launches, ours vs stock's: where does ours' host time go?

    python benchmarks/probe_host_overhead.py            # GPU: llama-1b shapes, bf16
    python benchmarks/probe_host_overhead.py --tiny     # CPU smoke run

Without CUDA graphs a 1B prefill of 512 tokens at batch 1 is bound by the host: ours launches fewer kernels than
stock (213 vs 279) and keeps the GPU busy for less time (2.54 vs 3.06 ms), but its call took longer (session 20,
``logs/s20_run4``: host 11.6 vs 8.3 ms). This times each op the two graphs differ in, alone, as the host sees it:
``calls`` launches back to back, one sync at the end, wall time per call: the slower of the host and the GPU. At the
model's shapes that can be the GPU (a 512-token GEMM takes about 10 us), so the "host only:" rows repeat the calls
at the tiny config's shapes and one token, where it is the host's time. Then the compiled HF model itself (stock,
ours): back to back, synchronised each call (CUDA events, as ``bench_e2e``), one call with its sync,
``packed_linear``'s counters (is its steady state the one-GEMM path?) and one call's profile (GPU span and busy
time, the longest gaps between kernels, the ops with the most host time). Writes
``benchmarks/results/host_overhead_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import CONFIGS, build_model, make_variant, workload_inputs  # noqa: E402
from common import add_run_args, median_ms, pipelined_ms, run_dtype, write_results  # noqa: E402
import profile_decode  # noqa: E402

from fusion_passes.kernels import packed_linear  # noqa: E402


def host_us(fn, device: str, calls: int = 200) -> float:
    """``common.pipelined_ms`` of ``calls`` calls of ``fn`` in µs per call: the median of 5, after one warm-up."""
    times = [pipelined_ms(fn, device, calls) * 1e3 for _ in range(6)]
    return sorted(times[1:])[2]


def op_rows(cfg: dict, tokens: int, device: str, dtype, label: str = "") -> list[dict]:
    """Each case's ``host_us``, named ``label + case``. At the model's shapes the GPU may take longer than the host
    (a 512-token GEMM does), so the rows with ``label`` "host only: " run the same calls on the tiny config's
    shapes at one token, where the device's work is too small to be the bound."""
    h, f = cfg["hidden_size"], cfg["intermediate_size"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = h // heads
    x = torch.randn(tokens, h, device=device, dtype=dtype)
    wq, wk, wv = (torch.randn(n, h, device=device, dtype=dtype) for n in (h, kv_heads * d, kv_heads * d))
    wg, wu = (torch.randn(f, h, device=device, dtype=dtype) for _ in range(2))
    qkv, gate_up = [wq, wk, wv], [wg, wu]
    op = torch.ops.fusion_passes.packed_linear
    op(x, qkv), op(x, gate_up)  # packs them (once)
    q = torch.randn(1, heads, tokens, d, device=device, dtype=dtype)
    k, v = (torch.randn(1, kv_heads, tokens, d, device=device, dtype=dtype) for _ in range(2))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    cases = {
        "mm x [T, H] @ Wq.T": lambda: torch.mm(x, wq.t()),
        "3 mm (q, k, v)": lambda: [torch.mm(x, w.t()) for w in qkv],
        "packed_linear (q, k, v)": lambda: op(x, qkv),
        "2 mm (gate, up)": lambda: [torch.mm(x, w.t()) for w in gate_up],
        "packed_linear (gate, up)": lambda: op(x, gate_up),
        "_stacked_t (q, k, v), Python": lambda: packed_linear._stacked_t(qkv),
        "sdpa causal, enable_gqa": lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True),
        "sdpa causal, K/V repeated": lambda: sdpa(q, k.repeat_interleave(heads // kv_heads, 1),
                                                  v.repeat_interleave(heads // kv_heads, 1), is_causal=True),
        "bmm q @ k.T (stock's eager attention, 1 of 2)": lambda: torch.bmm(
            q.view(heads, tokens, d), q.view(heads, tokens, d).transpose(1, 2)),
    }
    rows = []
    for name, fn in cases.items():
        fn()
        rows.append(dict(case=label + name, tokens=tokens, host_us=round(host_us(fn, device), 2)))
        print(f"[host] {label + name:60s} {rows[-1]['host_us']:8.2f} us per call", flush=True)
    return rows


def timeline(fn, device: str) -> dict:
    """One synchronised call under the profiler: the GPU's span from its first kernel's start to its last one's end,
    the kernels' summed time, the five longest gaps between kernels (with the kernels on either side), and the ops
    with the most host time of their own."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    with profile(activities=acts) as prof:
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    out = dict(kernels=len(kernels))
    if kernels:
        t = profile_decode.timeline(kernels, steps=1, first=len(kernels))
        out["gpu_span_us"], out["gpu_busy_us"] = t["span_us"], t["busy_us"]
        rows = t["first_kernels"]  # in launch order, each with the gap before it
        gaps = sorted(((b["gap_us"], a["kernel"], b["kernel"]) for a, b in zip(rows, rows[1:])), reverse=True)[:5]
        out["longest_gaps"] = [dict(us=round(g, 1), after=a, before=b) for g, a, b in gaps]
    cpu = sorted((e for e in prof.key_averages() if e.self_cpu_time_total > 0),
                 key=lambda e: -e.self_cpu_time_total)[:12]
    out["host_ops"] = [dict(op=e.key[:70], calls=e.count, self_us=round(e.self_cpu_time_total, 1)) for e in cpu]
    return out


def model_rows(model_name: str, attn: str, tokens: int, device: str, dtype, variants) -> list[dict]:
    model = build_model(model_name, attn, device, dtype)
    step = workload_inputs(model, f"prefill-{tokens}", 1, device)()
    rows = []
    for variant in variants:
        compiled = make_variant(model, variant)
        with torch.no_grad():
            for _ in range(3):
                step(compiled)
            before = dict(packed_linear.STATS)
            us = host_us(lambda: step(compiled), device, calls=20)
            synced = median_ms(lambda: step(compiled), device, iters=30)
            one_call = host_us(lambda: step(compiled), device, calls=1)  # a sync after each call: its latency
            tl = timeline(lambda: step(compiled), device)
        counts = {k: packed_linear.STATS[k] - before.get(k, 0) for k in packed_linear.STATS}
        rows.append(dict(case=f"{model_name} {attn} prefill, {variant}", tokens=tokens, host_us=round(us, 1),
                         synced_ms=round(synced, 3), one_call_us=round(one_call, 1), packed_linear_paths=counts,
                         timeline=tl))
        print(f"[host] {rows[-1]['case']:48s} {us:8.1f} us per call back to back, synced {synced:.3f} ms, one call "
              f"with its sync {one_call:.1f} us; packed_linear paths: {counts}", flush=True)
        print(f"       timeline: {dict((k, v) for k, v in tl.items() if k != 'host_ops')}", flush=True)
        print(f"       host ops: {tl['host_ops']}", flush=True)
        print(f"       Python threads: {[t.name for t in threading.enumerate()]}", flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b")
    p.add_argument("--attn", default="eager")
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--variants", nargs="+", default=["stock", "fusion_passes"],
                   help="bench_e2e variants, e.g. fusion_passes+nopack (without the q/k/v + gate/up packing)")
    p.add_argument("--no-ops", action="store_true", help="only the compiled models")
    p.add_argument("--no-models", action="store_true", help="only the ops")
    add_run_args(p)
    args = p.parse_args(argv)
    model = "tiny" if args.tiny else args.model
    tokens = 16 if args.tiny else args.tokens
    dtype = run_dtype(args, variants_attr=None)
    rows = [] if args.no_ops else (op_rows(CONFIGS[model], tokens, args.device, dtype)
                                   + op_rows(CONFIGS["tiny"], 1, args.device, dtype, label="host only: "))
    if not args.no_models:
        rows += model_rows(model, args.attn, tokens, args.device, dtype, args.variants)
    return write_results(rows, "host_overhead", args.out, key=("case", "tokens"), device=args.device)


if __name__ == "__main__":
    sys.exit(main())
