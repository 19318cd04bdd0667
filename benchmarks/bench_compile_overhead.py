"""Compile-time cost of the pass manager: stock Inductor vs our backend with no family, with a no-op family
(manager overhead alone: snapshots, graph code before/after, op counts), and with every family.

    python benchmarks/bench_compile_overhead.py [--model llama] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import results_path, save_records  # noqa: E402

import fusion_passes  # noqa: E402
from fusion_passes import zoo  # noqa: E402


class NoOp:
    NAME, HOOK, DESCRIPTION = "noop", "post_grad", "does nothing (measures the manager alone)"

    @staticmethod
    def apply(graph, ctx):
        pass


def compile_seconds(backend, model, args) -> float:
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    t0 = time.perf_counter()
    with torch.no_grad():
        compiled(*args)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="llama", choices=zoo.MODELS)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    fusion_passes.register_pattern(NoOp)
    off = {"fx_graph_cache": False}
    variants = {
        "inductor": lambda g, ex: __import__("torch._inductor.compile_fx", fromlist=["x"]).compile_fx(
            g, ex, config_patches=off),
        "fusion_passes (no family)": fusion_passes.backend(patterns=[], options=off),
        "fusion_passes (no-op family)": fusion_passes.backend(patterns=["noop"], options=off),
        "fusion_passes (all families)": fusion_passes.backend(options=off),
    }
    model, inputs = zoo.build(args.model, batch=2, seq=32)
    times = {k: [] for k in variants}
    for _ in range(args.repeats):  # interleaved, so machine load drifts hit every variant alike
        for name, be in variants.items():
            times[name].append(compile_seconds(be, model, inputs))
    base = sorted(times["inductor"])[len(times["inductor"]) // 2]
    records = []
    for name, ts in times.items():
        med = sorted(ts)[len(ts) // 2]
        records.append(dict(model=args.model, variant=name, compile_s=round(med, 3),
                            overhead_pct=round(100 * (med - base) / base, 1)))
    print(tabulate(records, headers="keys"))
    print("wrote", save_records(records, results_path("compile_overhead", "cpu"), key=("model", "variant"), device="cpu"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
