"""Where does a decode step's time go? Kernel-level profile of one HF Llama decode step, stock vs ours.

    python benchmarks/profile_decode.py                      # GPU: llama-1b, decode at 1024, CUDA graphs
    python benchmarks/profile_decode.py --tiny --device cpu  # CPU smoke run (op-level profile)

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
from bench_e2e import build_model, make_variant, workload_inputs  # noqa: E402
from common import environment, results_path, save_records  # noqa: E402


def profile_step(step, compiled, device: str, steps: int) -> list[dict]:
    """Per-kernel totals over ``steps`` decode steps, divided back to one step, largest first."""
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
    p.add_argument("--model", default="llama-1b")
    p.add_argument("--attn", default="eager")
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--variants", nargs="+", default=["stock+cudagraphs", "fusion_passes+cudagraphs"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="tiny config, short context (CPU smoke run)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.tiny:
        args.model, args.context, args.steps = "tiny", 16, 2
    if not args.device.startswith("cuda"):
        args.variants = [v.removesuffix("+cudagraphs") for v in args.variants]
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    model = build_model(args.model, args.attn, args.device, dtype)
    fresh_step = workload_inputs(model, f"decode-{args.context}", 1, args.device)
    records = []
    for variant in args.variants:
        step = fresh_step()
        if variant.endswith("+cudagraphs"):
            plain = step
            step = lambda m, plain=plain: (torch.compiler.cudagraph_mark_step_begin(), plain(m))[1]  # noqa: E731
        rows = profile_step(step, make_variant(model, variant), args.device, args.steps)
        print(f"\n{variant}: {len(rows)} distinct kernels, {sum(r['us_per_step'] for r in rows):.1f} us per step")
        print(tabulate(rows[: args.top], headers="keys"))
        records.append(dict(model=args.model, attn=args.attn, workload=f"decode-{args.context}", variant=variant,
                            kernels=rows))
    path = save_records(records, args.out or results_path("profile_decode", args.device),
                        key=("model", "attn", "workload", "variant"), device=args.device)
    print(f"\n{environment(args.device)}\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
