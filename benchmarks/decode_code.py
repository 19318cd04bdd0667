"""Which kernels does Inductor generate for one HF Llama decode step, and from which graph nodes?

    python benchmarks/decode_code.py                          # GPU: llama-1b, eager attention, our backend
    python benchmarks/decode_code.py --tiny --device cpu      # CPU smoke run (C++ kernels)

Compiles one decode step with a ``bench_e2e`` variant, writes Inductor's generated module to ``--code-out`` and
prints every kernel the step's ``call`` launches, in order, with Inductor's "Original ATen" comment for the
generated kernels: where a profile shows an unexplained kernel per layer, this says which ops it computes.
Returns its summary as JSON (``benchmarks/results/decode_code_<device>_<torch>.json``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import build_model, make_variant, step_for, variant_env, workload_inputs  # noqa: E402
from common import add_decode_args, add_run_args, run_dtype, write_results  # noqa: E402


def kernel_launches(code: str) -> list[dict]:
    """The kernels ``call`` launches, in order: each kernel's name, and the source nodes (HF's variable names)
    and ATen ops of Inductor's comment above the launch ("" where there is none)."""
    lines = code.splitlines()
    kernels = {m.group(1) for line in lines if (m := re.match(r"(\w+) = async_compile\.\w+\(", line))}
    start = next((i for i, line in enumerate(lines) if re.match(r"\s+def call\(", line)), len(lines))
    rows, note = [], ("", "")
    for line in lines[start:]:
        if comment := re.search(r"# Topologically Sorted Source Nodes: \[(.*?)\], Original ATen: \[(.*?)\]", line):
            note = comment.groups()
            continue
        launch = re.match(r"\s+(\w+)(?:\.run)?\(", line)
        extern = re.match(r"\s+(?:\w+ = )?(extern_kernels\.\w+|torch\.ops\.[\w.]+)\(", line)
        if launch and launch.group(1) in kernels or extern:
            name = launch.group(1) if launch and launch.group(1) in kernels else extern.group(1)
            rows.append(dict(kernel=name, sources=note[0], aten=note[1]))
            note = ("", "")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_decode_args(p)
    p.add_argument("--variant", default="fusion_passes")
    p.add_argument("--code-out", default=None, help="where to write the generated module (default: not written)")
    add_run_args(p)
    args = p.parse_args(argv)
    if args.tiny:
        args.model, args.context = "tiny", 16
    args.variants = [args.variant]
    dtype = run_dtype(args)
    from torch._inductor.utils import run_and_get_code

    model = build_model(args.model, args.attn, args.device, dtype)
    step = step_for(args.variants[0], workload_inputs(model, f"decode-{args.context}", 1, args.device)())
    with variant_env(args.variants[0]), torch.no_grad():
        compiled = make_variant(model, args.variants[0])
        _, codes = run_and_get_code(lambda: step(compiled))
    code = max(codes, key=len)  # the step's graph (a decode step compiles one)
    if args.code_out:
        with open(args.code_out, "w") as f:
            f.write(code)
    rows = kernel_launches(code)
    for i, r in enumerate(rows):
        print(f"{i:4d}  {r['kernel'][:60]:60s}  {r['sources'][:150]}")
    print(f"{len(rows)} kernel launches in the step's generated code")
    record = dict(model=args.model, attn=args.attn, workload=f"decode-{args.context}", variant=args.variants[0],
                  launches=len(rows), kernels=rows)
    return write_results([record], "decode_code", args.out, key=("model", "attn", "workload", "variant"),
                         device=args.device)


if __name__ == "__main__":
    sys.exit(main())
