"""Probe: a 1B decode step as fusion_passes.cuda_graph_step runs it vs the bare replay of the same CUDA graph, in
one process (synced = one step with a sync; pipelined = 40 back to back): what the wrapper's Python costs."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import build_model, make_variant, step_for, workload_inputs  # noqa: E402
from common import median_ms, pipelined_ms  # noqa: E402

model = build_model(sys.argv[1] if len(sys.argv) > 1 else "llama-1b", "eager", "cuda", torch.bfloat16)
fresh = workload_inputs(model, "decode-1024", 1, "cuda")
variant = "fusion_passes+graphstep"
step, compiled = step_for(variant, fresh()), make_variant(model, variant)
out = {}
with torch.no_grad():
    for _ in range(3):
        step(compiled)
    cells = dict(zip(step.__code__.co_freevars, step.__closure__))
    graph = cells["graphed"].cell_contents[id(compiled)]  # the GraphedStep
    runner = next(iter(graph.runners.values()))[0]
    replay = runner.recordings[0].graph.replay
    for name, fn in [("graphstep", lambda: step(compiled)), ("bare_replay", replay)] * 2:
        out[name] = dict(synced=round(median_ms(fn, "cuda", iters=50), 4), pipelined=round(pipelined_ms(fn, "cuda", 40), 4))
        print(name, out[name], flush=True)
print(json.dumps(out))
