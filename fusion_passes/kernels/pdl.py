"""Programmatic dependent launch (PDL, sm_90 and later) for our decode kernels: the next kernel starts early.

A kernel launched with PDL may start while the kernel before it in the stream still runs: as soon as every
program of that kernel has called ``launch_dependents`` (or exited). Until its ``griddepcontrol.wait`` returns it
must read nothing an earlier kernel writes and write nothing at all; after it, every earlier kernel has finished
and its stores are visible. What it may do before the wait is read its weights (and a GEMV's norm weight), which no
kernel of the step writes:

    decode GEMV (PDL):   launch_dependents()          # the next kernel may be scheduled now
                         w = W[first block's rows, :]  # parameters, straight from HBM, during the previous kernel's tail
                         griddepcontrol.wait()         # the kernel before has finished; its stores are visible
                         x = X[...]; y = epilogue(w @ x); store
    attention (PDL):     launch_dependents(); griddepcontrol.wait(); ...   # lets the o GEMV load its weights early

So HBM keeps streaming across the boundary between two kernels, which a kernel that starts from nothing (launch,
first round trip, the last programs' tail) leaves idle for 1-2 us (``benchmarks/probe_pdl_preload.py``).

Why reading weights before the wait is safe where the passes use it (``decode_gemv._pdl_launch``): a kernel
launched *without* PDL starts only once everything before it in the stream has finished, and a PDL kernel finishes
only after its own wait, so everything before it has finished too. The passes launch with PDL only ops with a data
input computed by another kernel of ours in the same graph (launched earlier), so the graph's first kernel of ours
is a plain launch: by the time any PDL kernel of the graph starts, all work queued before the graph has finished
(a weight update the user made, say), and no kernel of the graph writes a weight (the passes take only parameters
the graph does not mutate; a norm weight that an op of the graph computes or writes keeps its GEMV a plain launch).

The launches go through Triton's launcher (``kernel[grid](..., launch_pdl=True)``): Inductor's code for a traced
user kernel has no way to ask for PDL. So a PDL op is an extern op that runs Python on every call: worth it only
where the call is replayed from a CUDA graph. Policy ``FUSION_PASSES_PDL``: ``auto`` (the default) uses PDL where
the compile is for CUDA graphs (Inductor's, ``cudagraphs="static"``, or inside ``cuda_graph_step``'s calls) on a
GPU that has it; ``off`` never; ``on`` wherever the GPU has it (for measuring). Default since session 48: on an
H100 the twins equal the plain ops bit for bit (GPU tests; ``probe_pdl_preload``'s checks), and the graphed 1B
decode step took 1.133 ms against 1.227 with the GPU's own GEMV configs, 1.036 against 1.113 with the H200's
(``benchmarks/results/logs/s48_run2``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools

import torch

from . import is_interpreted

try:
    import triton
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # no triton, or one before griddepcontrol (3.3): the kernels are compiled with PDL off only
    triton = gdc_launch_dependents = gdc_wait = None

__all__ = ["POLICY_ENV", "POLICIES", "HAS_GDC", "gdc_launch_dependents", "gdc_wait", "policy", "supported",
           "graphed_compile", "compiling_for_graphs", "wanted"]

POLICY_ENV = "FUSION_PASSES_PDL"
POLICIES = ("auto", "off", "on")
MIN_CAPABILITY = (9, 0)  # griddepcontrol: Hopper and later

HAS_GDC = gdc_wait is not None
if triton is not None:

    @triton.jit
    def _noop():
        pass

    INTERPRETED = is_interpreted(_noop)
else:
    INTERPRETED = False

_graphed: contextvars.ContextVar[bool] = contextvars.ContextVar("fusion_passes_graphed_compile", default=False)


def policy() -> str:
    from ..patterns import env_policy  # the registry's parser: one error message for every setting

    return env_policy(POLICY_ENV, POLICIES)


@functools.lru_cache(maxsize=None)
def _capability(index) -> tuple[int, int]:
    try:
        return torch.cuda.get_device_capability(index)
    except (RuntimeError, AssertionError):  # no CUDA runtime (fake CUDA tensors in the CPU tests)
        return (0, 0)


def supported(device: torch.device) -> bool:
    """Whether kernels on ``device`` can be launched with PDL: CUDA sm_90+, a Triton with griddepcontrol, and
    not Triton's interpreter (which has no PTX)."""
    if not HAS_GDC or INTERPRETED or device.type != "cuda":
        return False
    return _capability(device.index) >= MIN_CAPABILITY  # (None: the current device)


@contextlib.contextmanager
def graphed_compile(graphed: bool = True):
    """Within the block, graphs compiled by our backend are taken to be replayed from a CUDA graph (``graphed``)
    or not: ``cuda_graph_step``'s first calls run the step plainly, and Dynamo compiles it there."""
    token = _graphed.set(graphed)
    try:
        yield
    finally:
        _graphed.reset(token)


def compiling_for_graphs() -> bool:
    return _graphed.get()


def wanted(device: torch.device, graphed: bool) -> bool:
    """Whether a pass should give a kernel on ``device`` the PDL launch, in a compile for CUDA graphs (``graphed``)
    or not."""
    chosen = policy()
    if chosen == "off" or device.type != "cuda":
        return False
    return (chosen == "on" or graphed) and supported(device)
