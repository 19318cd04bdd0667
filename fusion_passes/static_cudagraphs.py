"""Static CUDA graphs: replay a fixed-shape compiled graph with almost no Python per call.

    torch.compile(model, backend=fusion_passes.backend(cudagraphs="static"))

    # Inductor's cudagraph trees (mode="reduce-overhead"), per call, before the GPU starts (1B decode: ~0.3 ms):
    #   check every static input's address, copy the others, replay, rebuild each output's storage, book-keep
    # static, per call (the runner's own share: ~0.02 ms; Dynamo's guards and HF's Python around the graph stay,
    # ~0.3 ms on the H200's host, which only cuda_graph_step below removes):
    #   one C++ address check of the static inputs; one foreach copy of the others into fixed buffers;
    #   graph.replay(); bump the mutated inputs' versions; clone the outputs out of the graph's memory

A decode step (B x 1 tokens over a static KV cache, every shape fixed) is the case it is built for: there the
GPU time is ~1 ms and trees' host time is a third of the step. The first call runs the compiled graph directly
(Triton compiles and autotunes); the second captures it and replays; later calls replay. A new set of static
input addresses captures again: a reassigned parameter, or a new KV cache (HF's ``generate`` allocates a fresh
StaticCache on every call since transformers 5, so each call may capture once). The ``MAX_GRAPHS`` most recently
used graphs are kept; when the addresses move on every call (no kept graph was ever replayed twice), capturing
stops and the graph runs uncaptured.

Equivalence, and where it does not hold, it is not used:
- static inputs (parameters, buffers, tensors marked with ``torch._dynamo.mark_static_address`` such as HF's
  StaticCache) are used in place; their addresses are checked on every call;
- every other tensor input is copied into a buffer of the same strides, so an input the graph mutates in place
  cannot be honoured: found on the first call (its version counter moved), the graph then runs uncaptured;
- outputs are cloned (a later replay overwrites the graph's memory), except views of static inputs, which are
  the caller's memory anyway; an output that aliases a copied input, or two outputs sharing memory (their clones
  would not), means running uncaptured;
- the graph must be inference-only with tensor inputs on one CUDA device, no CPU tensors and no symbolic or
  data-dependent sizes (``blocker`` says which); the backend compiles the others for Inductor's trees instead.
Random ops are replayed correctly: CUDA graphs advance the default generator's offset on every replay.
"""

from __future__ import annotations

import functools
import types
import warnings
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree
from torch import fx

from .kernels import pdl
from .kernels.packed_linear import weight_moves

__all__ = ["StaticCudaGraphs", "blocker", "cuda_graph_step", "MAX_GRAPHS"]

MAX_GRAPHS = 4


def is_static(x: Any) -> bool:
    """A tensor whose address is meant to stay fixed across calls: a parameter, or marked static by Dynamo
    (``torch._dynamo.mark_static_address``, which sets this attribute; read directly, as every call reads it)."""
    return isinstance(x, torch.nn.Parameter) or getattr(x, "_dynamo_static_input_type", None) is not None


def blocker(gm: fx.GraphModule, example_inputs: Sequence[Any], grad_enabled: bool) -> str | None:
    """Why ``gm`` (a Dynamo graph) cannot run as a static CUDA graph, or None when it can."""
    if grad_enabled:
        return "the graph records gradients (static CUDA graphs are for inference)"
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    devices = set()
    for node, x in zip(placeholders, example_inputs):
        if isinstance(x, torch.SymInt):  # Dynamo's automatic dynamic shapes, after a size changed between calls
            return (f"input {node.name} is a symbolic size: Dynamo compiled this graph for dynamic shapes; pass "
                    "dynamic=False to torch.compile (HF generate: CompileConfig(dynamic=False)) to keep static graphs")
        if not isinstance(x, torch.Tensor):
            return f"input {node.name} is a {type(x).__name__}, not a tensor (a Python value)"
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
    """One captured graph: its static-input addresses, the buffers the other inputs are copied into (``copied``:
    which input goes into each), its outputs and which of them are cloned per call."""

    def __init__(self, graph: torch.cuda.CUDAGraph, ptrs: list, buffers: list, copied: list[int], outputs,
                 cloned: list[bool]):
        self.graph, self.ptrs, self.outputs, self.cloned = graph, ptrs, outputs, cloned
        self.reused = False  # replayed for a call after the one that captured it
        plain = [k for k, b in enumerate(buffers) if 0 not in b.stride()]
        self.plain_dst, self.plain_src = [buffers[k] for k in plain], [copied[k] for k in plain]
        self.expanded = [(buffers[k], copied[k]) for k in range(len(buffers)) if k not in set(plain)]

    def copy_inputs(self, args) -> None:
        """The non-static inputs into the captured buffers: one foreach launch (an expanded dim, stride 0, holds
        one element: that element's slice is copied on its own)."""
        if self.plain_dst:
            torch._foreach_copy_(self.plain_dst, [args[i] for i in self.plain_src])
        for dst, i in self.expanded:
            _copy_expanded(dst, args[i])


class StaticCudaGraphs:
    """``compiled`` (Inductor's callable for one Dynamo graph) replayed as raw CUDA graphs; see the module doc.

    on_skip(reason) is called once if the graph turns out not to be replayable; it then runs uncaptured.
    """

    def __init__(self, compiled: Callable, example_inputs: Sequence[Any], on_skip: Callable[[str], None]):
        self.compiled = compiled
        self.static_idx = [i for i, x in enumerate(example_inputs) if is_static(x)]
        self.copied_idx = [i for i, x in enumerate(example_inputs) if not is_static(x)]
        self.mutated: list[int] = []
        self.recordings: list[_Recording] = []  # most recently used first
        self.calls = 0
        self.captures = 0
        self.skip_reason: str | None = None
        self._on_skip = on_skip

    def __call__(self, *args):
        if self.skip_reason is not None or _capturing():
            return self.compiled(*args)  # (inside a capture of the whole step: the kernels go into that graph)
        for i, rec in enumerate(self.recordings):
            if not self.static_idx or _ptrs_equal(list(args), rec.ptrs, self.static_idx):
                if i:
                    self.recordings.insert(0, self.recordings.pop(i))
                rec.reused = True
                return self._replay(rec, args)
        self.calls += 1
        if self.calls == 1:
            return self._warm_up(args)
        if len(self.recordings) >= MAX_GRAPHS:
            if not any(r.reused for r in self.recordings):  # a capture per call costs more than it saves
                return self._skip(f"static inputs moved on each of the last {MAX_GRAPHS + 1} calls", args)
            del self.recordings[-1]  # the least recently used; its memory pool goes with it
        try:
            rec = self._record(args)
        except Exception as e:  # a capture that fails must not fail the user's call
            return self._skip(f"capture failed: {type(e).__name__}: {e}", args)
        if rec is None:
            return self.compiled(*args)
        self.captures += 1
        self.recordings.insert(0, rec)
        return self._replay(rec, args)

    def _warm_up(self, args):
        before = [x._version for x in args]
        out = self.compiled(*args)
        self.mutated = [i for i, x in enumerate(args) if x._version != before[i]]
        copied = set(self.copied_idx)
        moved = [i for i in self.mutated if i in copied]
        if moved:
            self._skip(f"the graph mutates input {moved[0]}, which has no static address")
        elif any(isinstance(o, torch.Tensor) and o.requires_grad for o in pytree.tree_leaves(out)):
            # autograd recorded the call (a step run with gradients on); a replay would hand back outputs tied to
            # the capture's autograd graph, not this call's
            self._skip("an output requires grad (autograd is on): a replay would not record this call's gradients")
        return out

    def _record(self, args) -> _Recording | None:
        buffers = [torch.empty_strided(args[i].shape, args[i].stride(), dtype=args[i].dtype, device=args[i].device)
                   for i in self.copied_idx]
        for buf, i in zip(buffers, self.copied_idx):
            _copy_expanded(buf, args[i])
        inputs = list(args)
        for i, buf in zip(self.copied_idx, buffers):
            inputs[i] = buf
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.compiled(*inputs)
        static_storages = {args[i].untyped_storage().data_ptr() for i in self.static_idx}
        copied_storages = {b.untyped_storage().data_ptr() for b in buffers}
        cloned, cloned_storages = [], set()
        for o in outputs:
            ptr = o.untyped_storage().data_ptr() if isinstance(o, torch.Tensor) else None
            if ptr in copied_storages:
                self._skip("an output is a view of an input without a static address")
                return None
            cloned.append(isinstance(o, torch.Tensor) and ptr not in static_storages)
            if cloned[-1] and ptr in cloned_storages:  # clones of views of one buffer would no longer alias
                self._skip("two outputs share memory")
                return None
            cloned_storages.add(ptr)
        static = set(self.static_idx)
        ptrs = [x.data_ptr() if i in static else None for i, x in enumerate(args)]
        return _Recording(graph, ptrs, buffers, self.copied_idx, outputs, cloned)

    def _replay(self, rec: _Recording, args):
        rec.copy_inputs(args)
        rec.graph.replay()
        if self.mutated:
            torch._C._increment_version([args[i] for i in self.mutated])
        return type(rec.outputs)(o.clone() if c else o for o, c in zip(rec.outputs, rec.cloned))

    def _skip(self, reason: str, args=None):
        self.skip_reason = reason
        self.recordings.clear()
        self._on_skip(reason)
        return None if args is None else self.compiled(*args)


def _capturing() -> bool:
    """Inside a capture of a larger graph (``cuda_graph_step`` around a compiled model)."""
    return _cuda_available() and torch.cuda.is_current_stream_capturing()


def _python_ptrs_equal(tensors: list, ptrs: list, indices: list[int]) -> bool:
    return all(tensors[i].data_ptr() == ptrs[i] for i in indices)


# the check cudagraph trees run on every call, in C++ (only CUDA builds of torch have it)
_ptrs_equal = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", _python_ptrs_equal)


def _copy_expanded(dst: torch.Tensor, src: torch.Tensor) -> None:
    """dst.copy_(src) where ``dst`` may have expanded dims (stride 0: one stored element, so one slice copied)."""
    for dim in range(dst.dim()):
        if dst.stride(dim) == 0:
            dst, src = dst.narrow(dim, 0, 1), src.narrow(dim, 0, 1)
    dst.copy_(src)


# ------------------------------------------------------------------------------------ a whole step, graphed

def cuda_graph_step(fn: Callable, *, state: Sequence[Any] = ()) -> "GraphedStep":
    """``fn`` (one decode step: e.g. a compiled HF model's call) replayed as one CUDA graph, Python and all.

        model = torch.compile(model, backend=fusion_passes.backend())          # no CUDA graphs of its own
        step = fusion_passes.cuda_graph_step(
            lambda ids, pos: model(input_ids=ids, past_key_values=cache, cache_position=pos,
                                   position_ids=pos[None], use_cache=True).logits)
        logits = step(next_ids, pos)                                           # [B, 1, V], a fresh tensor

    Per call: the tensor arguments are copied into the captured ones and the graph replays; no Python of ``fn`` runs
    (neither HF's nor Dynamo's guards: a 1B decode step's host time drops from ~0.3 ms to ~0.02 ms). The contract
    that makes this equal to calling ``fn``: ``fn``'s result depends only on its tensor arguments and on tensors
    that stay where they are (weights, a static KV cache, updated in place), and a call changes no Python state.
    Weights that ``packed_linear`` moves (another compiled model of the same module packing them) are followed: the
    graphs are dropped and captured again; weights moved or replaced otherwise (``model.half()``,
    ``load_state_dict(..., assign=True)``) are not: make a new step. What is checked: the arguments' shapes, dtypes,
    devices and non-tensor values pick the graph (a new combination is captured, up to ``MAX_GRAPHS``); the second
    call, still uncaptured, compares the Python state it can reach (non-tensor arguments, ``fn``'s closure and
    ``self``, and ``state``: numbers, strings, container lengths, tensor addresses and shapes, a few levels deep)
    before and after, and a change (a Python counter, a growing cache) means ``fn`` always runs uncaptured, with a
    warning. A step whose shapes change every call (a ``DynamicCache``) is refused by the same check. Outputs are
    cloned, as in ``StaticCudaGraphs``.
    """
    return GraphedStep(fn, state)


class GraphedStep:
    """See :func:`cuda_graph_step`. ``skip_reason`` says why it runs uncaptured, when it does."""

    def __init__(self, fn: Callable, state: Sequence[Any] = ()):
        self.fn = fn
        self.state = tuple(state)
        self.runners: dict = {}  # argument signature -> (StaticCudaGraphs, [output TreeSpec])
        self.skip_reason: str | None = None
        self.weight_moves = weight_moves()

    def __call__(self, *args, **kwargs):
        if self.skip_reason is not None or not _cuda_available():
            return self.fn(*args, **kwargs)
        with pdl.graphed_compile():  # what Dynamo compiles during these calls is replayed from our graph
            return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict):
        moves = weight_moves()
        if moves != self.weight_moves:  # the graphs read weights at addresses since freed
            self.weight_moves = moves
            self.runners.clear()
        leaves, spec = _flatten(args, kwargs)
        key = (spec, tuple(map(_signature, leaves)))
        entry = self.runners.get(key)
        if entry is None:
            return self._first_call(key, leaves, spec, args, kwargs)
        runner, out_spec = entry
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        if runner.calls == 0:
            objects = ([(f"argument {i}", x) for i, x in enumerate(leaves) if not isinstance(x, torch.Tensor)]
                       + [(f"state[{i}]", x) for i, x in enumerate(self.state)] + _reachable(self.fn))
            before = _fingerprint(objects)
            outputs = runner(*tensors)
            changed = _first_difference(before, _fingerprint(objects))
            if changed is not None:
                self._skip(f"a call changes Python state ({changed}), which a replay would not")
        else:
            outputs = runner(*tensors)
        return outputs[0] if out_spec[0] is None else _unflatten(list(outputs), out_spec[0])

    def _first_call(self, key, leaves: list, spec, args, kwargs):
        """A new argument signature: run ``fn`` plainly (it compiles, initialises, autotunes: not checked) and set
        up the runner that checks the next call and captures the one after."""
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        if len(self.runners) >= MAX_GRAPHS:
            self._skip(f"{MAX_GRAPHS} argument signatures already captured")
        elif not all(map(_capturable, tensors)):
            self._skip("a tensor argument is not on a CUDA device")
        if self.skip_reason is not None:
            with pdl.graphed_compile(False):  # never captured
                return self.fn(*args, **kwargs)
        out_spec: list = [None]
        runner = StaticCudaGraphs(self._flat_fn(leaves, spec, out_spec), tensors, on_skip=self._skip)
        self.runners[key] = (runner, out_spec)
        return self.fn(*args, **kwargs)

    def _flat_fn(self, leaves: list, spec, out_spec: list) -> Callable:
        """``fn`` on the flat tensor list; ``out_spec[0]`` gets the output's structure (None: one tensor)."""
        slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]

        def flat(*tensors):
            filled = list(leaves)
            for i, t in zip(slots, tensors):
                filled[i] = t
            args, kwargs = _unflatten(filled, spec)
            out = self.fn(*args, **kwargs)
            if isinstance(out, torch.Tensor):
                out_spec[0] = None
                return [out]
            outs, out_spec[0] = pytree.tree_flatten(out)
            return outs

        return flat

    def _skip(self, reason: str) -> None:
        if self.skip_reason is None:
            self.skip_reason = reason
            self.runners.clear()
            warnings.warn(f"fusion_passes.cuda_graph_step: runs uncaptured: {reason}", stacklevel=4)


def _flatten(args: tuple, kwargs: dict):
    """(leaves, spec) of a call's arguments: one level when no argument is a container (the common step call,
    cheap), else torch's pytree."""
    leaves = [*args, *kwargs.values()]
    if any(type(x) in pytree.SUPPORTED_NODES for x in leaves):
        return pytree.tree_flatten((args, kwargs))
    return leaves, (len(args), tuple(kwargs))


def _unflatten(leaves: list, spec):
    if isinstance(spec, tuple):
        n, names = spec
        return leaves[:n], dict(zip(names, leaves[n:]))
    return pytree.tree_unflatten(leaves, spec)


@functools.lru_cache(maxsize=None)  # asked on every call; it does not change within a process
def _cuda_available() -> bool:
    return torch.cuda.is_available()


def _capturable(t: torch.Tensor) -> bool:
    return t.is_cuda


def _signature(x: Any):
    if isinstance(x, torch.Tensor):
        # the stride of a size-1 dim is never used to index (a [B, 1] slice and a fresh [B, 1] tensor match)
        stride = tuple(0 if n == 1 else st for n, st in zip(x.shape, x.stride()))
        return ("tensor", x.shape, stride, x.dtype, x.device, is_static(x))
    if isinstance(x, (int, float, bool, str, bytes, type(None))):
        return (type(x), x)
    return ("object", id(x))


_SCALARS = (int, float, bool, str, bytes, type(None), torch.dtype, torch.device)


def _reachable(fn: Callable) -> list[tuple[str, Any]]:
    """(name, object) for what a step function reads besides its arguments: its closure and its ``self``."""
    cells = zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()), getattr(fn, "__closure__", None) or ())
    found = [(name, c.cell_contents) for name, c in cells if _has_contents(c)]
    if getattr(fn, "__self__", None) is not None:
        found.append(("self", fn.__self__))
    return found


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True


def _fingerprint(objects: list[tuple[str, Any]], depth: int = 6) -> list[tuple]:
    """(path, value) for the Python state reachable from the (name, object) pairs: scalars, container lengths and keys,
    tensors' address / shape / dtype; each object once, ``depth`` levels deep."""
    out: list[tuple] = []
    seen: set[int] = set()

    def walk(x, path: str, d: int):
        if isinstance(x, torch.Tensor):
            out.append((path, x.data_ptr(), tuple(x.shape), x.dtype))
        elif isinstance(x, _SCALARS):
            out.append((path, x))
        elif d > 0 and id(x) not in seen:
            seen.add(id(x))
            if isinstance(x, (types.FunctionType, types.MethodType)):  # what a nested step function reads
                for name, v in _reachable(x):
                    walk(v, f"{path}.<{name}>", d - 1)
            elif callable(x) and not isinstance(x, torch.nn.Module):
                return  # builtins, partials, classes: not followed
            elif isinstance(x, (list, tuple)):
                out.append((path, len(x)))
                for i, v in enumerate(x):
                    walk(v, f"{path}[{i}]", d - 1)
            elif isinstance(x, dict):
                out.append((path, tuple(map(str, x))))
                for k, v in x.items():
                    walk(v, f"{path}[{k!r}]", d - 1)
            elif hasattr(x, "__dict__"):
                for k, v in vars(x).items():
                    walk(v, f"{path}.{k}", d - 1)

    for name, obj in objects:
        walk(obj, name, depth)
    return out


def _first_difference(before: list[tuple], after: list[tuple]) -> str | None:
    for a, b in zip(before, after):
        if a != b:
            return f"{a[0]}: {a[1:]} -> {b[1:]}" if a[0] == b[0] else f"{a[0]} -> {b[0]}"
    if len(before) != len(after):
        longer = after if len(after) > len(before) else before
        return f"{longer[min(len(before), len(after))][0]} appeared or went"
    return None
