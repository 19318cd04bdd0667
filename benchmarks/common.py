"""Shared benchmark plumbing: timing, environment facts, and the JSON results file."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import time

import torch

RESULTS = os.path.join(os.path.dirname(__file__), "results")


def environment(device: str) -> dict:
    """Device, torch, triton, transformers (and Liger-Kernel) versions, stored with every results file, and the
    FUSION_PASSES_* settings the run was started with (a variant's own settings are in its records)."""
    env = {"device": torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "cpu",
           "torch": torch.__version__, "python": platform.python_version()}
    for mod in ("triton", "transformers"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - optional package
            env[mod] = None
    try:  # a peer bench_e2e measures (its liger variants); read from its metadata, not by importing its kernels
        env["liger_kernel"] = importlib.metadata.version("liger-kernel")
    except importlib.metadata.PackageNotFoundError:
        env["liger_kernel"] = None
    env["settings"] = {k: v for k, v in sorted(os.environ.items())
                       if k.startswith("FUSION_PASSES_") and k != "FUSION_PASSES_RAISE"}
    return env


def add_run_args(p) -> None:
    """--device / --tiny / --out, as every benchmark script takes them."""
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true", help="tiny config (CPU smoke run)")
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/<kind>_<device>_<torch>.json)")


def add_decode_args(p, workload: bool = False) -> None:
    """--model / --attn / --context, for the scripts that look at one decode step; ``workload``: also --workload,
    another bench_e2e workload in its place (read with :func:`step_workload`)."""
    p.add_argument("--model", default="llama-1b")
    p.add_argument("--attn", default="eager")
    p.add_argument("--context", type=int, default=1024)
    if workload:
        p.add_argument("--workload", default=None,
                       help="a bench_e2e workload in place of decode at --context, e.g. prefill-512 (batch 1)")


def step_workload(args) -> str:
    """The bench_e2e workload of the step a script looks at: --workload, or decode at --context; with --tiny at
    16 tokens."""
    if not args.workload:
        return f"decode-{16 if args.tiny else args.context}"
    return args.workload.split("-")[0] + "-16" if args.tiny else args.workload


def run_dtype(args, variants_attr: str | None = "variants") -> torch.dtype:
    """bf16 on GPU, fp32 on CPU; off GPU also drops the ``+cudagraphs`` variants' suffix (no CUDA graphs there)."""
    cuda = args.device.startswith("cuda")
    if not cuda and variants_attr and getattr(args, variants_attr, None):
        setattr(args, variants_attr, list(dict.fromkeys(v.removesuffix("+cudagraphs")
                                                         for v in getattr(args, variants_attr))))
    return torch.bfloat16 if cuda else torch.float32


def median_ms(fn, device: str, iters: int = 50, warmup: int = 3) -> float:
    """Median time of ``fn()`` in ms: CUDA events on GPU, perf_counter on CPU."""
    for _ in range(warmup):
        fn()
    times = []
    cuda = device.startswith("cuda")
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def pipelined_ms(fn, device: str, steps: int = 50) -> float:
    """Time per call of ``steps`` calls back to back with one synchronisation at the end: the host runs ahead of
    the device, so this is the device's rate (unless the host is slower), not host + device per call. Off CUDA
    there is nothing to synchronise: the wall time per call."""
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    if cuda:
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3 / steps


def results_path(kind: str, device: str) -> str:
    tag = "cpu" if not device.startswith("cuda") else torch.cuda.get_device_name().split()[-1].lower()
    return os.path.join(RESULTS, f"{kind}_{tag}_torch{torch.__version__.split('+')[0]}.json")


def save_records(records: list[dict], path: str, key: tuple[str, ...], device: str) -> str:
    """Merge ``records`` into the JSON file at ``path`` (same key -> replaced) with ``device``'s environment."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    old = []
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f).get("records", [])
    new_keys = {tuple(r.get(k) for k in key) for r in records}
    merged = [r for r in old if tuple(r.get(k) for k in key) not in new_keys] + records
    # the whole text first, then one rename: a failure part-way must not leave an earlier run's results truncated
    text = json.dumps({"environment": environment(device), "records": merged}, indent=1, default=str)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    return path


def write_results(records: list[dict], kind: str, out: str | None, key: tuple[str, ...], device: str) -> int:
    """Merge ``records`` into ``out`` (default ``results/<kind>_<device>_<torch>.json``), say where, return 0."""
    path = save_records(records, out or results_path(kind, device), key=key, device=device)
    print(f"\n{environment(device)}\nwrote {path}")
    return 0


@contextlib.contextmanager
def env_set(values: dict[str, str]):
    """Set these environment variables for the block (the passes and kernels read their settings when they run),
    then restore each as it was."""
    old = {env: os.environ.get(env) for env in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for env, value in old.items():
            if value is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = value
