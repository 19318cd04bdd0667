"""Static CUDA graphs: replay a fixed-shape compiled graph with almost no Python per call.

    torch.compile(model, backend=fusion_passes.backend(cudagraphs="static"))

    # Inductor's cudagraph trees (mode="reduce-overhead"), per call, before the GPU starts (1B decode: ~0.3 ms):
    #   check every static input's address, copy the others, replay, rebuild each output's storage, book-keep
    # static, per call (~0.02 ms):
    #   one C++ address check of the static inputs; one foreach copy of the others into fixed buffers;
    #   graph.replay(); bump the mutated inputs' versions; clone the outputs out of the graph's memory

A decode step (B x 1 tokens over a static KV cache, every shape fixed) is the case it is built for: there the
GPU time is ~1 ms and trees' host time is a third of the step. The first call runs the compiled graph directly
(Triton compiles and autotunes); the second captures it and replays; later calls replay. A new set of static
input addresses (a reassigned parameter) captures again, up to ``MAX_GRAPHS`` graphs.

Equivalence, and where it does not hold, it is not used:
- static inputs (parameters, buffers, tensors marked with ``torch._dynamo.mark_static_address`` such as HF's
  StaticCache) are used in place; their addresses are checked on every call;
- every other tensor input is copied into a buffer of the same strides, so an input the graph mutates in place
  cannot be honoured: found on the first call (its version counter moved), the graph then runs uncaptured;
- outputs are cloned (a later replay overwrites the graph's memory), except views of static inputs, which are
  the caller's memory anyway; an output that aliases a copied input means running uncaptured;
- the graph must be inference-only with tensor inputs on one CUDA device, no CPU tensors and no symbolic or
  data-dependent sizes (``blocker`` says which); the backend compiles the others for Inductor's trees instead.
Random ops are replayed correctly: CUDA graphs advance the default generator's offset on every replay.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import torch
from torch import fx

__all__ = ["StaticCudaGraphs", "blocker", "MAX_GRAPHS"]

MAX_GRAPHS = 4


def is_static(x: Any) -> bool:
    """A tensor whose address is meant to stay fixed across calls: a parameter, or marked static by Dynamo."""
    from torch._dynamo.utils import get_static_address_type

    return isinstance(x, torch.nn.Parameter) or get_static_address_type(x) is not None


def blocker(gm: fx.GraphModule, example_inputs: Sequence[Any], grad_enabled: bool) -> str | None:
    """Why ``gm`` (a Dynamo graph) cannot run as a static CUDA graph, or None when it can."""
    if grad_enabled:
        return "the graph records gradients (static CUDA graphs are for inference)"
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    devices = set()
    for node, x in zip(placeholders, example_inputs):
        if not isinstance(x, torch.Tensor):
            return f"input {node.name} is a {type(x).__name__}, not a tensor (symbolic shape or Python value)"
        devices.add(x.device)
    if len(devices) != 1 or next(iter(devices)).type != "cuda":
        return f"inputs on {sorted(map(str, devices)) or 'no device'}, not on one CUDA device"
    for node in gm.graph.nodes:
        val = node.meta.get("example_value", node.meta.get("val"))
        for v in val if isinstance(val, (list, tuple)) else (val,):
            if isinstance(v, torch.SymInt) or (isinstance(v, torch.Tensor) and _symbolic(v)):
                return f"{node.name} has a symbolic or data-dependent size"
            if isinstance(v, torch.Tensor) and v.device.type != "cuda":
                return f"{node.name} makes a {v.device.type} tensor"
    return None


def _symbolic(t: torch.Tensor) -> bool:
    return any(isinstance(s, torch.SymInt) for s in (*t.shape, *t.stride()))


class _Recording:
    """One captured graph: its static-input addresses, the buffers the other inputs are copied into, outputs."""

    def __init__(self, graph: torch.cuda.CUDAGraph, ptrs: list, buffers: list, outputs, cloned: list[bool]):
        self.graph, self.ptrs, self.buffers, self.outputs, self.cloned = graph, ptrs, buffers, outputs, cloned


class StaticCudaGraphs:
    """``compiled`` (Inductor's callable for one Dynamo graph) replayed as raw CUDA graphs; see the module doc.

    on_skip(reason) is called once if the graph turns out not to be replayable; it then runs uncaptured.
    """

    def __init__(self, compiled: Callable, example_inputs: Sequence[Any], on_skip: Callable[[str], None]):
        self.compiled = compiled
        self.static_idx = [i for i, x in enumerate(example_inputs) if is_static(x)]
        self.copied_idx = [i for i, x in enumerate(example_inputs) if not is_static(x)]
        self.mutated: list[int] = []
        self.recordings: list[_Recording] = []
        self.calls = 0
        self.skip_reason: str | None = None
        self._on_skip = on_skip

    def __call__(self, *args):
        if self.skip_reason is not None:
            return self.compiled(*args)
        for rec in self.recordings:
            if _ptrs_equal(list(args), rec.ptrs, self.static_idx):
                return self._replay(rec, args)
        self.calls += 1
        if self.calls == 1:
            return self._warm_up(args)
        if len(self.recordings) >= MAX_GRAPHS:
            return self._skip(f"static inputs moved {MAX_GRAPHS} times", args)
        try:
            rec = self._record(args)
        except Exception as e:  # a capture that fails must not fail the user's call
            return self._skip(f"capture failed: {type(e).__name__}: {e}", args)
        if rec is None:
            return self.compiled(*args)
        self.recordings.append(rec)
        return self._replay(rec, args)

    def _warm_up(self, args):
        before = [x._version for x in args]
        out = self.compiled(*args)
        self.mutated = [i for i, x in enumerate(args) if x._version != before[i]]
        moved = [i for i in self.mutated if i in set(self.copied_idx)]
        if moved:
            self._skip(f"the graph mutates input {moved[0]}, which has no static address")
        return out

    def _record(self, args) -> _Recording | None:
        buffers = [torch.empty_strided(args[i].shape, args[i].stride(), dtype=args[i].dtype, device=args[i].device)
                   for i in self.copied_idx]
        _copy_into(buffers, [args[i] for i in self.copied_idx])
        inputs = list(args)
        for i, buf in zip(self.copied_idx, buffers):
            inputs[i] = buf
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.compiled(*inputs)
        static_storages = {args[i].untyped_storage().data_ptr() for i in self.static_idx}
        copied_storages = {b.untyped_storage().data_ptr() for b in buffers}
        cloned = []
        for o in outputs:
            ptr = o.untyped_storage().data_ptr() if isinstance(o, torch.Tensor) else None
            if ptr in copied_storages:
                self._skip("an output is a view of an input without a static address")
                return None
            cloned.append(isinstance(o, torch.Tensor) and ptr not in static_storages)
        ptrs = [x.data_ptr() if i in set(self.static_idx) else None for i, x in enumerate(args)]
        return _Recording(graph, ptrs, buffers, outputs, cloned)

    def _replay(self, rec: _Recording, args):
        if rec.buffers:
            _copy_into(rec.buffers, [args[i] for i in self.copied_idx])
        rec.graph.replay()
        if self.mutated:
            torch._C._increment_version([args[i] for i in self.mutated])
        return type(rec.outputs)(o.clone() if c else o for o, c in zip(rec.outputs, rec.cloned))

    def _skip(self, reason: str, args=None):
        self.skip_reason = reason
        self.recordings.clear()
        self._on_skip(reason)
        return None if args is None else self.compiled(*args)


def _python_ptrs_equal(tensors: list, ptrs: list, indices: list[int]) -> bool:
    return all(tensors[i].data_ptr() == ptrs[i] for i in indices)


# the check cudagraph trees run on every call, in C++ (only CUDA builds of torch have it)
_ptrs_equal = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", _python_ptrs_equal)


def _copy_into(dst: list[torch.Tensor], src: list[torch.Tensor]) -> None:
    """dst[i].copy_(src[i]) for all i, in one launch where the layouts allow (an expanded dim, stride 0, holds
    one element: copy that element's slice only)."""
    plain = [(d, s) for d, s in zip(dst, src) if 0 not in d.stride()]
    if plain:
        torch._foreach_copy_([d for d, _ in plain], [s for _, s in plain])
    for d, s in zip(dst, src):
        if 0 in d.stride():
            for dim in range(d.dim()):
                if d.stride(dim) == 0:
                    d, s = d.narrow(dim, 0, 1), s.narrow(dim, 0, 1)
            d.copy_(s)
