"""What HF's ``generate`` does with our compiled decode step: which graphs it compiles, how each is replayed, and
where the host time of a generation goes.

    python benchmarks/diag_generate_graphs.py                       # GPU: llama-1b, static graphs, dynamic=False
    python benchmarks/diag_generate_graphs.py --cudagraphs trees --dynamic auto

Runs generations of 16 and 128 new tokens from a 1024-token prompt (16, 16, 128, 16, 128: the two lengths give
two cache lengths), printing each one's wall time, then per compiled graph how it runs (``cudagraphs``: static,
trees, or none with the reason), the static runners' state (graphs captured, calls, why one stopped replaying),
and the top of a cProfile of one more 128-token generation. ``logs/s12_run3/diag_generate.log`` is the first
version of this script (Dynamo's automatic dynamic shapes compiled the second cache length with a symbolic size,
so static graphs fell back to trees), ``logs/s12_run5/diag_generate2.log`` the run with ``dynamic=False``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import build_model  # noqa: E402

import fusion_passes  # noqa: E402
from fusion_passes.static_cudagraphs import StaticCudaGraphs  # noqa: E402


def main(argv=None) -> int:
    from transformers import CompileConfig

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b")
    p.add_argument("--cudagraphs", default="static", choices=["static", "trees"])
    p.add_argument("--dynamic", default="false", choices=["false", "auto"])
    args = p.parse_args(argv)
    model = build_model(args.model, "sdpa", "cuda", torch.bfloat16)
    prompt = torch.randint(0, 1000, (1, 1024), generator=torch.Generator().manual_seed(0)).cuda()
    config = CompileConfig(backend=fusion_passes.backend(cudagraphs=args.cudagraphs), fullgraph=True,
                           dynamic=False if args.dynamic == "false" else None)
    kw = dict(do_sample=False, cache_implementation="static", pad_token_id=0, compile_config=config)
    with fusion_passes.capture() as recs, torch.no_grad():
        for n in (16, 16, 128, 16, 128):
            torch.cuda.synchronize()
            start = time.perf_counter()
            model.generate(prompt, max_new_tokens=n, min_new_tokens=n, **kw)
            torch.cuda.synchronize()
            print(f"generate {n} tokens: {time.perf_counter() - start:.4f} s", flush=True)
        prof = cProfile.Profile()
        prof.enable()
        model.generate(prompt, max_new_tokens=128, min_new_tokens=128, **kw)
        torch.cuda.synchronize()
        prof.disable()
    for r in recs:
        print(f"graph {r.graph_id}: cudagraphs {r.cudagraphs!r}, {len(r.matches)} rewrites, {r.num_nodes} nodes")
    for o in gc.get_objects():
        try:
            if isinstance(o, StaticCudaGraphs):
                print(f"static runner: {len(o.recordings)} graph(s) kept of {o.captures} captured, "
                      f"{o.calls} call(s) that did not replay, "
                      f"stopped: {o.skip_reason}, {len(o.static_idx)} static / {len(o.copied_idx)} copied inputs")
        except ReferenceError:  # gc also lists dead weak proxies
            pass
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(22)
    print(out.getvalue()[-5000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
