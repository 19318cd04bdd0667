"""How close the graphed decode step gets to its own CUDA graph: ``fusion_passes.cuda_graph_step`` around a 1B
decode step vs the bare ``replay()`` of the graph it captured, in one process.

    python benchmarks/probe_graph_floor.py [--model llama-1b] [--out FILE]     # GPU only

synced_ms: one step with a sync (CUDA events), what greedy generation pays per token; pipelined_ms: 40 steps back
to back, one sync. The difference between the two rows is the wrapper's Python (argument checks, copies, the
output clone). Each is measured twice, interleaved. Writes ``benchmarks/results/graph_floor_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import build_model, make_variant, step_for, workload_inputs  # noqa: E402
from common import median_ms, pipelined_ms, write_results  # noqa: E402


def main(argv=None) -> int:
    from tabulate import tabulate

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    model = build_model(args.model, "eager", "cuda", torch.bfloat16)
    variant = "fusion_passes+graphstep"
    step = step_for(variant, workload_inputs(model, "decode-1024", 1, "cuda")())
    compiled = make_variant(model, variant)
    records = []
    with torch.no_grad():
        for _ in range(3):  # plain, checked, captured
            step(compiled)
        graphed = step.graphed[id(compiled)]
        runner = next(iter(graphed.runners.values()))[0]
        timed = {"graphed step": lambda: step(compiled), "bare replay": runner.recordings[0].graph.replay}
        for repeat in range(2):
            for name, fn in timed.items():
                records.append(dict(model=args.model, attn="eager", workload="decode-1024", what=name, repeat=repeat,
                                    synced_ms=round(median_ms(fn, "cuda", iters=50), 4),
                                    pipelined_ms=round(pipelined_ms(fn, "cuda", 40), 4)))
    print(tabulate(records, headers="keys"))
    return write_results(records, "graph_floor", args.out, key=("model", "attn", "workload", "what", "repeat"),
                         device="cuda")


if __name__ == "__main__":
    sys.exit(main())
