"""Where a first call's compile time goes: stock Inductor vs ours, each in a fresh process with empty caches.

    python benchmarks/profile_compile.py                              # GPU: llama-1b decode at 1024 context
    python benchmarks/profile_compile.py --workload prefill-512 --model llama-8b
    python benchmarks/profile_compile.py --tiny --device cpu          # CPU smoke run

Per variant (``stock``, ``fusion_passes``): the first call's wall time (Dynamo, AOT autograd, our passes,
Inductor's code generation, kernel compiles), our families' own seconds from the records (``pass_s``), and with
``--profile`` the functions with the most cumulative time under cProfile, grouped by where they live (ours,
Triton, Inductor, Dynamo, other). Each variant runs in a subprocess with its own empty Inductor / Triton cache
directories, so neither reuses kernels the other compiled. ``--variants fusion_passes-nomemo`` is ours without
``fusion_passes.kernels.access_memo`` (torch's TTIR analysis of our kernels redone at every call site);
``kernel_analysis`` counts analyses done and reused and their seconds.
Writes ``benchmarks/results/compile_<device>_<torch>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

VARIANTS = ("stock", "fusion_passes")
# ours without fusion_passes.kernels.access_memo: what reusing torch's kernel-access analysis saves
EXTRA_VARIANTS = ("eager", "fusion_passes-nomemo")
# cProfile rows are attributed to the first of these path fragments their file contains
AREAS = (("ours", "fusion_passes"), ("triton", "triton"), ("inductor", "torch/_inductor"),
         ("dynamo", "torch/_dynamo"), ("aot", "torch/_functorch"))


def area_of(filename: str) -> str:
    return next((name for name, part in AREAS if part in filename.replace(os.sep, "/")), "other")


def one_variant(args) -> dict:
    """Compile and run the first call of ``args.variant`` in this process (empty caches set by the caller)."""
    import cProfile
    import pstats

    import torch

    import fusion_passes
    from fusion_passes.kernels import access_memo
    from bench_e2e import build_model, workload_inputs
    from common import run_dtype

    dtype = run_dtype(args, None)
    model = build_model(args.model, args.attn, args.device, dtype)
    step = workload_inputs(model, args.workload, 1, args.device)()
    torch._dynamo.reset()
    if args.variant == "fusion_passes-nomemo":
        access_memo.memoized = contextlib.nullcontext
    compiled = model if args.variant == "eager" else torch.compile(
        model, backend="inductor" if args.variant == "stock" else fusion_passes.backend())
    profiler = cProfile.Profile() if args.profile else None
    with torch.no_grad(), fusion_passes.capture() as recs:
        start = time.perf_counter()
        if profiler:
            profiler.enable()
        step(compiled)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        if profiler:
            profiler.disable()
        first_s = time.perf_counter() - start
    pass_s: dict[str, float] = {}
    for r in recs:
        for name, s in r.pass_s.items():
            pass_s[name] = round(pass_s.get(name, 0.0) + s, 3)
    rec = dict(model=args.model, attn=args.attn, workload=args.workload, variant=args.variant,
               first_call_s=round(first_s, 2), graphs=len(recs), pass_s=pass_s,
               passes_total_s=round(sum(pass_s.values()), 3),
               kernel_analysis={k: round(v, 2) for k, v in access_memo.stats.items()})
    if profiler:
        stats = pstats.Stats(profiler).stats  # (file, line, fn) -> (calls, prim calls, tottime, cumtime, callers)
        self_by_area: dict[str, float] = {}
        for (filename, _, _), (_, _, tottime, _, _) in stats.items():
            area = area_of(filename)
            self_by_area[area] = self_by_area.get(area, 0.0) + tottime
        rec["self_s_by_area"] = {k: round(v, 2) for k, v in sorted(self_by_area.items(), key=lambda kv: -kv[1])}
        rows = sorted(stats.items(), key=lambda kv: -kv[1][3])[: args.top]
        rec["top_cumulative"] = [dict(fn=f"{area_of(f)}: {os.path.basename(f)}:{line} {fn}", cum_s=round(v[3], 2),
                                      self_s=round(v[2], 2), calls=v[0]) for (f, line, fn), v in rows]
    return rec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from common import add_run_args

    p.add_argument("--model", default="llama-1b")
    p.add_argument("--attn", default="eager")
    p.add_argument("--workload", default="decode-1024")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=(*VARIANTS, *EXTRA_VARIANTS))
    p.add_argument("--profile", action="store_true", help="cProfile the first call (slows it: compare within)")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--variant", help=argparse.SUPPRESS)  # set in the subprocess: run one variant here
    add_run_args(p)
    args = p.parse_args(argv)
    if args.tiny:
        args.model, args.workload = "tiny", args.workload.split("-")[0] + "-16"
    if args.variant:
        print(json.dumps(one_variant(args)))
        return 0
    from tabulate import tabulate

    from common import write_results

    records = []
    for variant in args.variants:
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
                   "TRITON_CACHE_DIR": os.path.join(cache, "triton"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "0"}
            cmd = [sys.executable, __file__, "--variant", variant, "--model", args.model, "--attn", args.attn,
                   "--workload", args.workload, "--device", args.device, "--top", str(args.top)]
            cmd += ["--profile"] if args.profile else []
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            rec = dict(model=args.model, attn=args.attn, workload=args.workload, variant=variant,
                       error=(done.stderr or done.stdout)[-800:])
        else:
            rec = json.loads(lines[-1])
        print(json.dumps(rec, indent=1), file=sys.stderr, flush=True)
        records.append(rec)
    columns = ("model", "workload", "variant", "first_call_s", "graphs", "passes_total_s", "kernel_analysis",
               "self_s_by_area", "error")
    print(tabulate([{k: r.get(k) for k in columns} for r in records], headers="keys"))
    return write_results(records, "compile", args.out, key=("model", "attn", "workload", "variant"),
                         device=args.device)


if __name__ == "__main__":
    sys.exit(main())
