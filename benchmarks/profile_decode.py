"""Where does a decode step's time go? Kernel-level profile of one HF Llama decode step, stock vs ours.

    python benchmarks/profile_decode.py                      # GPU: llama-1b, decode at 1024, CUDA graphs
    python benchmarks/profile_decode.py --tiny --device cpu  # CPU smoke run (op-level profile)
    python benchmarks/profile_decode.py --workload prefill-512 --attn sdpa  # a prefill call's kernels instead

For each variant prints the top kernels by total device time (name, calls per step, us per step, share) and
writes ``benchmarks/results/profile_decode_<device>_<torch>.json``. This is the starting point of the
decode-kernel work: which GEMVs run below bandwidth, how many small kernels sit between them.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import build_model, make_variant, step_for, variant_env, workload_inputs  # noqa: E402
from common import add_decode_args, add_run_args, run_dtype, step_workload, write_results  # noqa: E402


def timeline(kernel_events: list, steps: int, first: int) -> dict:
    """One step's kernels in launch order (the last of ``steps`` back-to-back steps): each kernel's time and the
    gap before it, plus totals. ``span_us`` is the first kernel's start to the last one's end; ``between_steps_us``
    is the idle time from the previous step's last kernel to this step's first (the host's share)."""
    evs = sorted(kernel_events, key=lambda e: e.time_range.start)
    per_step = len(evs) // steps
    prev, step = evs[-2 * per_step: -per_step], evs[-per_step:]
    rows, busy, last_end = [], 0.0, None
    for e in step:
        start, end = e.time_range.start, e.time_range.end
        gap = start - last_end if last_end is not None else 0.0
        rows.append(dict(kernel=e.name[:60], us=round(end - start, 2), gap_us=round(gap, 2)))
        busy += end - start
        last_end = end
    span = step[-1].time_range.end - step[0].time_range.start
    return dict(kernels=per_step, span_us=round(span, 1), busy_us=round(busy, 1), gaps_us=round(span - busy, 1),
                between_steps_us=round(step[0].time_range.start - prev[-1].time_range.end, 1) if prev else None,
                first_kernels=rows[:first])


def profile_step(step, compiled, device: str, steps: int, trace: dict | None = None) -> list[dict]:
    """Per-kernel totals over ``steps`` decode steps, divided back to one step, largest first. With ``trace`` (a
    dict) on CUDA, also fills it with :func:`timeline` of the last step."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with torch.no_grad():
        for _ in range(3):  # compile, CUDA-graph warm-up and record
            step(compiled)
        with profile(activities=activities) as prof:
            for _ in range(steps):
                step(compiled)
            if cuda:
                torch.cuda.synchronize()
    if cuda and trace is not None:
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        trace.update(timeline(kernels, steps, first=40))
    rows = []
    for e in prof.key_averages():
        us = (e.device_time_total if cuda else e.self_cpu_time_total) / steps
        if us <= 0 or (cuda and e.device_type != torch.autograd.DeviceType.CUDA):
            continue
        rows.append(dict(kernel=e.key[:90], calls_per_step=round(e.count / steps, 2), us_per_step=round(us, 2)))
    rows.sort(key=lambda r: -r["us_per_step"])
    total = sum(r["us_per_step"] for r in rows) or 1.0
    for r in rows:
        r["share"] = round(r["us_per_step"] / total, 4)
    return rows


def main(argv=None) -> int:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_decode_args(p, workload=True)
    p.add_argument("--variants", nargs="+", default=["stock+cudagraphs", "fusion_passes+cudagraphs"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--top", type=int, default=15)
    add_run_args(p)
    args = p.parse_args(argv)
    if args.tiny:
        args.model, args.context, args.steps = "tiny", 16, 2
    dtype = run_dtype(args)
    model = build_model(args.model, args.attn, args.device, dtype)
    workload = step_workload(args)
    fresh_step = workload_inputs(model, workload, 1, args.device)
    records = []
    for variant in args.variants:
        step = step_for(variant, fresh_step())
        trace: dict = {}
        with variant_env(variant):  # a variant's policies hold while it compiles (on its first step)
            rows = profile_step(step, make_variant(model, variant), args.device, args.steps, trace)
        print(f"\n{variant}: {len(rows)} distinct kernels, {sum(r['us_per_step'] for r in rows):.1f} us per step")
        print(tabulate(rows[: args.top], headers="keys"))
        if trace:
            print("timeline of one step: " + ", ".join(f"{k}={v}" for k, v in trace.items() if k != "first_kernels"))
            print(tabulate(trace["first_kernels"], headers="keys"))
        records.append(dict(model=args.model, attn=args.attn, workload=workload, variant=variant,
                            kernels=rows, timeline=trace))
    return write_results(records, "profile_decode", args.out, key=("model", "attn", "workload", "variant"), device=args.device)


if __name__ == "__main__":
    sys.exit(main())
