"""Probe: a decode step's floor under one raw CUDA graph (no Dynamo, no cudagraph trees per call) vs trees."""
import functools, os, sys, time, json
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import build_model, make_variant, step_for, workload_inputs
from common import median_ms, pipelined_ms
from decode_overhead import host_ms

model_name = sys.argv[1] if len(sys.argv) > 1 else "llama-1b"
attn = sys.argv[2] if len(sys.argv) > 2 else "eager"
model = build_model(model_name, attn, "cuda", torch.bfloat16)
fresh = workload_inputs(model, "decode-1024", 1, "cuda")
out = {}
with torch.no_grad():
    for variant in ["stock+cudagraphs", "fusion_passes+cudagraphs", "fusion_passes"]:
        step = functools.partial(step_for(variant, fresh()), make_variant(model, variant))
        for _ in range(3):
            step()
        r = dict(synced=median_ms(step, "cuda", iters=50), pipelined=pipelined_ms(step, "cuda", steps=40),
                 host=host_ms(step, steps=30))
        if not variant.endswith("cudagraphs"):
            s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step()
            r.update(raw_synced=median_ms(g.replay, "cuda", iters=50), raw_pipelined=pipelined_ms(g.replay, "cuda", steps=40),
                     raw_host=host_ms(g.replay, steps=30))
        out[variant] = {k: round(v, 4) for k, v in r.items()}
        print(variant, out[variant], flush=True)
print(json.dumps(out))
