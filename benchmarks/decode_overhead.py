"""Where does a decode step's wall time go that no kernel accounts for? GPU-busy vs host overhead, per variant.

    python benchmarks/decode_overhead.py                       # GPU: llama-1b, eager attention, decode at 1024
    python benchmarks/decode_overhead.py --tiny --device cpu   # CPU smoke run
    python benchmarks/decode_overhead.py --workload prefill-512 --variants stock fusion_passes   # a prefill call

For each variant (default: stock and ours, both with CUDA graphs) it measures one HF Llama decode step five ways:

    synced_ms     CUDA events around a step, synchronised each step (what bench_e2e reports; greedy generation
                  syncs every token)
    pipelined_ms  40 steps back to back, one sync at the end, divided by 40 (host and device overlap)
    host_ms       wall time of the Python call alone (CUDA-graph replay is asynchronous: this is the host's share)
    *_skip_guards synced / host time with Dynamo's guard evaluation skipped (``set_stance``): the guards' share
    gpu_busy_ms   the sum of the kernel times of one step (profiler)

and the top host functions of ``--cprofile`` steps (cProfile, by own time). ``synced - gpu_busy`` is the time the
GPU waits; when ``host_ms`` is close to ``synced_ms`` the step is bound by the host, not the kernels.
Writes ``benchmarks/results/decode_overhead_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import build_model, make_variant, step_for, workload_inputs  # noqa: E402
from common import (  # noqa: E402
    add_decode_args, add_run_args, median_ms, pipelined_ms, run_dtype, step_workload, write_results,
)


def gpu_busy_ms(fn, steps: int = 10) -> float:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
    us = sum(e.device_time_total for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA)
    return us / steps / 1e3


def host_ms(fn, steps: int = 50) -> float:
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def top_host_functions(fn, steps: int, top: int) -> list[dict]:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():
        rows.append(dict(function=f"{os.path.basename(file)}:{line}:{name}", calls_per_step=ncalls / steps,
                         own_us=round(tottime / steps * 1e6, 1), cum_us=round(cumtime / steps * 1e6, 1)))
    rows.sort(key=lambda r: -r["own_us"])
    return rows[:top]


def main(argv=None) -> int:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_decode_args(p, workload=True)
    p.add_argument("--variants", nargs="+",
                   default=["stock+cudagraphs", "fusion_passes+cudagraphs"])
    p.add_argument("--cprofile", type=int, default=20, help="steps under cProfile (0: skip)")
    p.add_argument("--top", type=int, default=25)
    add_run_args(p)
    args = p.parse_args(argv)
    cuda = args.device.startswith("cuda")
    if args.tiny:
        args.model, args.context, args.cprofile = "tiny", 16, 2
    dtype = run_dtype(args)
    model = build_model(args.model, args.attn, args.device, dtype)
    workload = step_workload(args)
    fresh_step = workload_inputs(model, workload, 1, args.device)
    records = []
    # each decode step writes the next cache slot (the static cache has 256 past the context): ~230 steps per variant
    for variant in args.variants:
        step = functools.partial(step_for(variant, fresh_step()), make_variant(model, variant))
        rec = dict(model=args.model, attn=args.attn, workload=workload, variant=variant)
        with torch.no_grad():
            for _ in range(3):
                step()
            rec["synced_ms"] = round(median_ms(step, args.device, iters=50), 4)
            if cuda:
                rec["pipelined_ms"] = round(pipelined_ms(step, args.device, steps=40), 4)
                rec["host_ms"] = round(host_ms(step, steps=40), 4)
                rec["gpu_busy_ms"] = round(gpu_busy_ms(step), 4)
            # how much of the host's share is Dynamo's guards: the same step with guard evaluation skipped
            # (safe here: every call has the same shapes, dtypes and module state)
            with torch.compiler.set_stance(skip_guard_eval_unsafe=True):
                rec["synced_ms_skip_guards"] = round(median_ms(step, args.device, iters=30), 4)
                if cuda:
                    rec["host_ms_skip_guards"] = round(host_ms(step, steps=30), 4)
            if args.cprofile:
                rec["host_functions"] = top_host_functions(step, args.cprofile, args.top)
        print(f"\n== {variant}: " + ", ".join(f"{k}={v}" for k, v in rec.items() if "_ms" in k))
        if args.cprofile:
            print(tabulate(rec["host_functions"], headers="keys"))
        records.append(rec)
    return write_results(records, "decode_overhead", args.out, key=("model", "attn", "workload", "variant"), device=args.device)


if __name__ == "__main__":
    sys.exit(main())
