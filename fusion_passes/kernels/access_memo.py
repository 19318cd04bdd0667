"""Reuse torch's analysis of which arguments our Triton kernels read and write, within one compile.

For every call of a user Triton kernel, torch generates the kernel's TTIR to find which pointer arguments it
stores to: once when a ``triton_op`` is functionalized (our families trace each inserted kernel that way) and
again when Inductor lowers the call. Generating TTIR runs Triton's frontend over the kernel source, about a
tenth of a second for our GEMV kernels, and a 16-layer decoder inserts the same few kernels with the same
arguments in every layer: on an H200 that analysis was most of the ~17 s our families took on a Llama-1B decode
graph. The answer depends only on the kernel and what selects its code (constexpr and integer values, the
dtypes of the tensors, TMA metadata), so while ``memoized()`` is active each distinct call of one of *our*
kernels is analysed once. Other kernels (the user's own) go straight to torch.

    with memoized():          # around compile_fx
        ...                   # torch's identify_*_tensors(kernel, kwargs, tma) -> cached per key
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time

import torch

# torch 2.11 calls the analysis identify_mutated_tensors; later releases identify_accessed_tensors
_NAMES = ("identify_accessed_tensors", "identify_mutated_tensors")
_lock = threading.Lock()
_depth = 0
stats = {"analysed": 0, "reused": 0, "analysis_s": 0.0}


def _ours(kernel) -> bool:
    fn = kernel
    while hasattr(fn, "fn"):  # Autotuner / Heuristics -> JITFunction -> the python function
        fn = fn.fn
    return (getattr(fn, "__module__", None) or "").startswith("fusion_passes.")  # None: made by exec


def _arg_key(value):
    """What of one kernel argument can change the generated TTIR; None when we cannot tell (no reuse)."""
    import sympy

    from torch._inductor.ir import TensorBox

    # torch analyses an empty tensor of the same dtype in place of each (fake) tensor or TensorBox
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype)
    if isinstance(value, TensorBox):  # during lowering
        return ("tensor", value.get_dtype())
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        return (type(value).__name__, value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, sympy.Expr)):
        return ("symbolic", str(value))
    return None


def _key(kernel, kwargs, tma_descriptor_metadata):
    parts = []
    for name in sorted(kwargs):
        k = _arg_key(kwargs[name])
        if k is None:
            return None
        parts.append((name, k))
    try:
        tma = repr(sorted(tma_descriptor_metadata.items()))
    except Exception:
        return None
    return (id(kernel), tuple(parts), tma)


def _wrap(analyse, memo: dict):
    def memoized_analysis(kernel, kwargs, tma_descriptor_metadata, *rest, **kw):
        key = _key(kernel, kwargs, tma_descriptor_metadata) if _ours(kernel) and not rest and not kw else None
        if key is not None and key in memo:
            stats["reused"] += 1
            return copy.deepcopy(memo[key][1])
        start = time.perf_counter()
        result = analyse(kernel, kwargs, tma_descriptor_metadata, *rest, **kw)
        stats["analysed"] += 1
        stats["analysis_s"] += time.perf_counter() - start
        if key is not None:
            memo[key] = (kernel, copy.deepcopy(result))  # the kernel is kept so id(kernel) stays unique
        return result

    memoized_analysis.__wrapped__ = analyse
    return memoized_analysis


@contextlib.contextmanager
def memoized():
    """Within the block, torch's kernel-access analysis is computed once per distinct call of our kernels.
    Re-entrant (a nested compile shares the outer memo); a no-op without triton."""
    global _depth
    try:
        from torch._higher_order_ops import triton_kernel_wrap as wrap
    except ImportError:
        yield
        return
    with _lock:
        _depth += 1
        installed = []
        if _depth == 1:
            memo: dict = {}
            for name in _NAMES:
                original = getattr(wrap, name, None)
                if original is not None:
                    setattr(wrap, name, _wrap(original, memo))
                    installed.append((name, original))
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            for name, original in installed:
                setattr(wrap, name, original)
