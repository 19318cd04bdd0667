"""Hardware counters for the decode GEMVs against a kernel that only reads the same weights (Nsight Compute).

    # GPU, under ncu (run_gpu.sh ncu does this): one chain of a few layers per variant, after a warm-up
    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy ... -o ncu \\
        python benchmarks/ncu_gemv.py --model llama-1b --layers 4
    ncu --import ncu.ncu-rep --csv --page details > ncu.csv
    python benchmarks/ncu_gemv.py --summarize ncu.csv --model llama-1b --layers 4   # per linear, ours vs read
    python benchmarks/ncu_gemv.py --tiny --device cpu                               # CPU smoke run (no ncu)

Why: #8 asks each decode GEMV for >= 85 % of the copy bandwidth. Sessions 12-20 timed ten designs against a plain
read of the same bytes (``bench_gemv_chain.py``'s ``read`` variant) and kept one; the 1B down and 8B o are 1-3
points short and the 8B q/k/v 8. Those sessions placed the missing microsecond by timing variants; this probe asks
the counters instead: DRAM throughput over the kernel, achieved occupancy and its limiter (registers per thread),
and what the warps stall on (long scoreboard = waiting on memory; barrier / short scoreboard = the reductions),
for the shipped GEMVs and the read kernel of the same weights, side by side.

The chain is ``bench_gemv_chain.py``'s (same weights, same launches: q/k/v with RoPE and the KV-cache stores, o
with the residual, gate/up with SiLU-mul, down with the residual, then the lm_head), run once per variant after a
warm-up (autotuning stays outside the ranges). Nsight Compute flushes the caches before each kernel it profiles,
so every weight comes from HBM, as in a decode step.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import re
import statistics
import sys
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(__file__))
from bench_e2e import CONFIGS  # noqa: E402
from bench_gemv_chain import LINEARS, add_caches, make_weights, ours_chain, read_chain  # noqa: E402
from common import add_run_args, run_dtype  # noqa: E402

VARIANTS = ("ours", "read")
STALL_METRIC = re.compile(r"smsp__average_warps_issue_stalled_(?P<reason>\w+?)_per_issue_active\.ratio")
# ncu's details page, per profiled kernel: the rows the summary prints, by (section, metric name) as ncu names them
SUMMARY_METRICS = (
    ("GPU Speed Of Light Throughput", "Duration"),
    ("GPU Speed Of Light Throughput", "DRAM Throughput"),
    ("GPU Speed Of Light Throughput", "Memory Throughput"),
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput"),
    ("Memory Workload Analysis", "Memory Throughput"),
    ("Launch Statistics", "Grid Size"),
    ("Launch Statistics", "Registers Per Thread"),
    ("Launch Statistics", "Waves Per SM"),
    ("Occupancy", "Theoretical Occupancy"),
    ("Occupancy", "Achieved Occupancy"),
    ("Occupancy", "Block Limit Registers"),
    ("Warp State Statistics", "Warp Cycles Per Issued Instruction"),
    ("Scheduler Statistics", "Issued Warp Per Scheduler"),
    ("Scheduler Statistics", "No Eligible"),
)


def kernel_labels(n_layers: int) -> list[str]:
    """The chain's launches in order: (q/k/v, o, gate/up, down) per layer, then the lm_head."""
    return [name for _ in range(n_layers) for name in LINEARS] + ["lm_head"]


def profile_chains(model: str, layers: int, device: str, dtype: torch.dtype) -> None:
    """Run each variant's chain once between ``cudaProfilerStart`` and ``Stop`` (ncu --profile-from-start off
    profiles only those launches), inside an NVTX range ``profile_<variant>`` that names them in ncu's report."""
    cfg = dict(CONFIGS[model], num_hidden_layers=layers)
    torch.manual_seed(0)
    ws = make_weights(cfg, device, dtype)
    x = torch.randn(1, ws["hidden"], device=device, dtype=dtype)
    add_caches(ws, 1)
    runs = dict(ours=ours_chain(ws, x, None, "kv"), read=read_chain(ws, x))
    for variant in VARIANTS:
        for _ in range(3):  # autotuning and compiles stay outside the profiled range
            runs[variant]()
        if device.startswith("cuda"):  # ncu --profile-from-start off: only what runs between start and stop
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            torch.cuda.nvtx.range_push(f"profile_{variant}")
        runs[variant]()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            torch.cuda.profiler.stop()
        print(f"[ncu_gemv] {model} {variant}: {len(kernel_labels(layers))} launches profiled", flush=True)


def _kernel_rows(path: str):
    """The rows of an ncu ``--csv`` page, one or more per profiled kernel (a units row, and the profiled program's
    own output before the header, skipped)."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rt", newline="") as f:  # the results keep them gzipped
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise SystemExit(f"{path}: no ncu CSV header (a line starting with \"ID\") found")
    return (row for row in csv.DictReader(lines[start:]) if row.get("ID", "").strip().isdigit())


def read_details(path: str) -> list[dict]:
    """ncu's ``--csv --page details`` output: one dict per profiled kernel, in launch order, with ``name`` and
    ``metrics`` {(section, metric): (value, unit)}."""
    kernels: dict[int, dict] = {}
    for row in _kernel_rows(path):
        k = kernels.setdefault(int(row["ID"]), {"name": row["Kernel Name"], "metrics": {}})
        k["metrics"][(row["Section Name"], row["Metric Name"])] = (row["Metric Value"], row["Metric Unit"])
    return [kernels[i] for i in sorted(kernels)]


def read_stalls(path: str, top: int = 4) -> list[dict[str, float]]:
    """ncu's ``--csv --page raw`` output: per profiled kernel in launch order, its ``top`` warp stall reasons,
    {reason: average warp cycles stalled on it per issued instruction} (WarpStateStats' raw metrics)."""
    out = []
    for row in _kernel_rows(path):
        stalls = {}
        for name, value in row.items():
            # smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio (ncu's Warp State section)
            found = STALL_METRIC.fullmatch(name or "")
            if found and _number(value) is not None and not found["reason"].endswith("not_issued"):
                stalls[found["reason"]] = _number(value)
        out.append(dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:top]))
    return out


def _number(value: str) -> float | None:
    try:
        return float(value.replace(",", ""))
    except ValueError:
        return None


def summarize(kernels: list[dict], n_layers: int, stalls: list[dict] | None = None) -> list[dict]:
    """Per variant and linear, the median over layers of each summary metric (and, given ``stalls`` from
    :func:`read_stalls` for the same kernels, the first layer's top stall reasons). The read kernel's launches are
    the ones named ``_read_kernel``; each variant's launches follow the chain's order (:func:`kernel_labels`)."""
    labels = kernel_labels(n_layers)
    if stalls is not None and len(stalls) == len(kernels):
        kernels = [dict(k, stalls=s) for k, s in zip(kernels, stalls)]
    by_variant = {"read": [k for k in kernels if "_read_kernel" in k["name"]],
                  "ours": [k for k in kernels if "_read_kernel" not in k["name"]]}
    rows = []
    for variant, ks in by_variant.items():
        if len(ks) != len(labels):
            print(f"[ncu_gemv] {variant}: {len(ks)} kernels profiled, expected {len(labels)}; skipped",
                  file=sys.stderr)
            continue
        grouped = defaultdict(list)
        for label, k in zip(labels, ks):
            grouped[label].append(k)
        for label in (*LINEARS, "lm_head"):
            row = {"variant": variant, "linear": label, "kernel": grouped[label][0]["name"][:40]}
            for section, metric in SUMMARY_METRICS:
                vals = [k["metrics"].get((section, metric)) for k in grouped[label]]
                nums = [_number(v[0]) for v in vals if v is not None]
                nums = [n for n in nums if n is not None]
                if nums:
                    unit = next(v[1] for v in vals if v is not None)
                    row[f"{metric} [{unit}]" if unit else metric] = round(statistics.median(nums), 3)
            if "stalls" in grouped[label][0]:
                top = grouped[label][0]["stalls"].items()
                row["stalls (cycles / issue)"] = ", ".join(f"{k} {v:.1f}" for k, v in top)
            rows.append(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-1b", choices=sorted(CONFIGS))
    p.add_argument("--layers", type=int, default=4, help="decoder layers in the chain (each its own weights)")
    p.add_argument("--summarize", metavar="CSV", help="summarise a captured ncu details CSV instead of running")
    p.add_argument("--raw", metavar="CSV", help="with --summarize: the same report's raw CSV, for stall reasons")
    add_run_args(p)
    args = p.parse_args(argv)
    if args.summarize:
        from tabulate import tabulate

        rows = summarize(read_details(args.summarize), args.layers, read_stalls(args.raw) if args.raw else None)
        if not rows:
            return 1
        cols = list(dict.fromkeys(c for r in rows for c in r))
        print(tabulate([[r.get(c, "") for c in cols] for r in rows], headers=cols))
        return 0
    if args.tiny:
        args.model = "tiny"
    profile_chains(args.model, args.layers, args.device, run_dtype(args, variants_attr=None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
