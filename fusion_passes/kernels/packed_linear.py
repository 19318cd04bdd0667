"""``fusion_passes::packed_linear``: N linears that read one input, run as one GEMM with no per-call weight copy.

    # before: N GEMMs on the same activation
    y_i = x @ W_i.T                          x [M, K], W_i [N_i, K]  ->  y_i [M, N_i]
    # after: one GEMM on the row-stacked weights; the graph takes y_i = y[:, o_i : o_i + N_i] as views
    y = packed_linear(x, [W_0, ..., W_n])    ->  y [M, sum N_i]
    # with a bias b_i [N_i] on every linear: one addmm, each bias added before the GEMM's one rounding, as
    # addmm(b_i, x, W_i.T) adds it (a bias added to the packed product after it was rounded to bf16 would not be)
    y = packed_linear_bias(x, [W_0, ..., W_n], [b_0, ..., b_n])
    # under autocast (fp32 parameters, bf16 x): the weights (and biases) are cast to x's dtype once per call, on the
    # packed matrix, where the graph cast each W_i on its own (a cast is elementwise: the same values)
    y = packed_linear(x, [W_0, ..., W_n])    x bf16, W_i fp32  ->  x @ cat(W_i).to(bf16).T

The weights are graph inputs (the module's own ``nn.Parameter`` objects), so the op must not ``cat`` them
on every call. How it gets one [sum N_i, K] matrix (and the biases one [sum N_i] vector, the same way):

1. **Steady state, zero copy.** If W_0..W_n are consecutive row blocks of one buffer (each contiguous,
   each starting where the previous one ends, all inside W_0's storage), the op runs one ``mm`` on an
   ``as_strided`` view of that buffer.
2. **Once: pack.** Otherwise it allocates a [sum N_i, K] buffer, copies the weights in, and re-points
   each weight tensor onto its row block (``Tensor.set_``). The parameters stay the same Python objects
   with the same values, shapes and strides; their old storages are freed, so weight memory stays 1x.
   In-place updates after that (``load_state_dict``, ``param.copy_``, optimizer steps) write into the
   packed buffer, so the next call sees them. Reassigning ``param.data = t`` breaks adjacency and the
   next call packs again: results are never stale.
3. **Unpacked fallback.** Re-pointing a weight whose memory some *other* tensor also uses (a user's
   alias, a ``state_dict()`` tensor still held, a flat-parameter buffer) would silently cut that alias
   off, so then the op runs N GEMMs into slices of its output instead (correct, just not fused) and
   tries again on later calls. The same happens during CUDA graph capture, where allocating and
   copying is not allowed.

``unpack_parameters(module)`` gives packed parameters their own storage again (e.g. for a tool that refuses
tensors sharing one storage; ``save_pretrained`` copes, and so does ``safetensors.torch.save_file`` 0.8, which
saves the row blocks, disjoint, as they are).

Both move weights to new addresses, which a CUDA graph captured before reads no more: ``weight_moves()`` counts
the moves, and ``cuda_graph_step`` captures again when it changed (a graph captured by one compiled model, then
another compiled model of the same module packing its weights, would otherwise read freed memory).

Limitations: a weight packed into two different groups (two compiled graphs that group it differently)
is re-packed back and forth (correct, but a copy per switch); the first call of two threads running the
same compiled model at once is not synchronised.
"""

from __future__ import annotations

import collections
import math
import sys
import threading
import warnings

import torch
from torch.multiprocessing.reductions import StorageWeakRef

__all__ = ["packed_linear", "packed_linear_bias", "unpack_parameters", "weight_moves", "STATS"]

# How often each path ran, for tests and reports: "packed" (one GEMM), "repacked" (buffer built),
# "unpacked" (fallback).
STATS: collections.Counter = collections.Counter()

# The buffers this module packed weights into, as weak references keyed by StorageImpl address (a weak
# reference keeps that address from being reused, so a live key is always one of ours).
_packed_storages: dict[int, StorageWeakRef] = {}
_warned: set[str] = set()
_moves = 0  # see weight_moves(); never reset (STATS is, by tests)


def weight_moves() -> int:
    """How many times this module has moved parameters onto new memory (packed or unpacked them)."""
    return _moves


# Defined with the low-level Library API, not ``torch.library.custom_op``: this op runs on every call
# of the compiled model, and custom_op's Python wrapper costs ~50-100 us per call (decode-step latency);
# a plain dispatcher registration costs ~10 us. The op has no autograd kernel: the pass never inserts it
# while autograd is on.
_lib = torch.library.Library("fusion_passes", "FRAGMENT")
_lib.define("packed_linear(Tensor x, Tensor[] weights) -> Tensor")
_lib.define("packed_linear_bias(Tensor x, Tensor[] weights, Tensor[] biases) -> Tensor")


def packed_linear(x: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
    """``cat([x @ w.to(x.dtype).T for w in weights], dim=1)`` as one GEMM.
    x [M, K], weights[i] [N_i, K] (float, of one dtype for packing) -> [M, sum N_i] in x's dtype"""
    _check_castable(x, weights)
    stacked_t = _stacked_t(weights)
    if stacked_t is None and _may_repack(x, weights):
        try:
            stacked_t = _repack(weights).t()
            STATS["repacked"] += 1
        except RuntimeError as e:  # e.g. inference tensors outside inference mode refuse set_
            _warn_once("repack", f"could not pack the weights ({e}); running them unpacked")
    if stacked_t is None:
        STATS["unpacked"] += 1
        return _unpacked(x, weights)
    STATS["packed"] += 1
    return torch.mm(x, stacked_t.to(x.dtype))


def packed_linear_bias(x: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor]) -> torch.Tensor:
    """``cat([addmm(b.to(x.dtype), x, w.to(x.dtype).T) for w, b in zip(weights, biases)], dim=1)`` as one addmm.
    x [M, K], weights[i] [N_i, K], biases[i] [N_i] -> [M, sum N_i] in x's dtype"""
    _check_castable(x, [*weights, *biases])
    stacked_t, bias = _stacked_t(weights), _stacked(biases)
    # only what is re-pointed is checked for aliases (a view made above is one of its storage's users)
    moved = [*(weights if stacked_t is None else []), *(biases if bias is None else [])]
    if moved and _may_repack(x, moved):
        try:
            stacked_t = _repack(weights).t() if stacked_t is None else stacked_t
            bias = _repack(biases) if bias is None else bias
            STATS["repacked"] += 1
        except RuntimeError as e:
            _warn_once("repack", f"could not pack the weights ({e}); running them unpacked")
    if stacked_t is None or bias is None:
        STATS["unpacked"] += 1
        return _unpacked(x, weights, biases)
    STATS["packed"] += 1
    return torch.addmm(bias.to(x.dtype), x, stacked_t.to(x.dtype))


_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _check_castable(x: torch.Tensor, tensors: list[torch.Tensor]) -> None:
    """The ops cast weights and biases to x's dtype (autocast's cast); only between float dtypes."""
    other = [t.dtype for t in tensors if t.dtype != x.dtype]
    if other and (x.dtype not in _FLOATS or any(d not in _FLOATS for d in other)):
        raise ValueError(f"fusion_passes.packed_linear: x is {x.dtype} and the weights/biases "
                         f"{sorted({str(t.dtype) for t in tensors})}; only float weights are cast to a float x's dtype")


def _packed_linear_fake(x: torch.Tensor, weights: list[torch.Tensor], biases=None) -> torch.Tensor:
    return x.new_empty((x.shape[0], sum(w.shape[0] for w in weights)))


_lib.impl("packed_linear", packed_linear, "CompositeExplicitAutograd")
torch.library.register_fake("fusion_passes::packed_linear", _packed_linear_fake, lib=_lib)
_lib.impl("packed_linear_bias", packed_linear_bias, "CompositeExplicitAutograd")
torch.library.register_fake("fusion_passes::packed_linear_bias", _packed_linear_fake, lib=_lib)


def _stacked_t(weights: list[torch.Tensor]) -> torch.Tensor | None:
    """The [sum N_i, K] matrix the weights already form in memory, as its transpose [K, sum N_i] (what ``mm``
    takes), or None if they are not adjacent rows.

    Adjacent: each weight contiguous, K wide, and starting where the previous one ends, all inside the first
    weight's storage, so that one ``as_strided`` view of it covers them all (``as_strided`` itself refuses a view
    past its storage's end, e.g. separate allocations that happen to lie back to back). Runs on every call of the
    compiled model, so it is a few pointer comparisons and that one view, made transposed: about 1.9 us for three
    weights on a CPU, against 3.1 us for a bounds check of its own and a ``.t()`` after the view.
    """
    first = weights[0]
    k = first.shape[1]
    row_bytes = k * first.element_size()
    start = first.data_ptr()
    rows = 0
    for w in weights:
        n, w_k = w.shape
        if w_k != k or w.data_ptr() != start + rows * row_bytes or not w.is_contiguous():
            return None
        rows += n
    try:
        return first.as_strided((k, rows), (1, k))
    except RuntimeError:  # past the end of the first weight's storage: adjacent by chance, not one buffer
        return None


def _stacked(biases: list[torch.Tensor]) -> torch.Tensor | None:
    """The [sum N_i] vector the 1-D ``biases`` already form in memory (as ``_stacked_t`` for the weights), or None."""
    first = biases[0]
    start, size, n = first.data_ptr(), first.element_size(), 0
    for b in biases:
        if b.data_ptr() != start + n * size or not b.is_contiguous():
            return None
        n += b.shape[0]
    try:
        return first.as_strided((n,), (1,))
    except RuntimeError:
        return None


def _storage_users(t: torch.Tensor) -> int:
    """How many tensors (TensorImpls) hold ``t``'s storage, ``t`` included."""
    storage = t.untyped_storage()
    return torch._C._storage_Use_Count(storage._cdata) - 1  # minus the `storage` object just made


def _may_repack(x: torch.Tensor, weights: list[torch.Tensor]) -> bool:
    """Whether re-pointing the weights is safe: nothing outside ``weights`` shares their memory."""
    if x.is_cuda and torch.cuda.is_current_stream_capturing():
        _warn_once("capture", "weights are not packed yet during CUDA graph capture; running them unpacked")
        return False
    if len({(w.dtype, w.device) for w in weights}) > 1:  # a weight re-pointed onto another dtype's bytes reads garbage
        _warn_once("dtypes", "the weights differ in dtype or device; running them unpacked")
        return False
    spans = sorted((w.data_ptr(), w.data_ptr() + w.numel() * w.element_size()) for w in weights)
    if any(end > next_start for (_, end), (next_start, _) in zip(spans, spans[1:])):
        _warn_once("overlap", "two projection weights overlap in memory (aliases of one tensor); running them unpacked")
        return False  # they alias each other: separate copies would go stale when one is written
    in_list = collections.Counter(w.untyped_storage().data_ptr() for w in weights)
    for alias in _checker_aliases(weights):
        in_list[alias.untyped_storage().data_ptr()] += 1
    if all(_storage_users(w) == in_list[w.untyped_storage().data_ptr()] for w in weights):
        return True
    _warn_once(
        "alias",
        "a projection weight shares memory with another tensor (an alias, a held state_dict(), a flat "
        "parameter buffer); packing it would cut that alias off, so it runs unpacked until the alias is gone",
    )
    return False


def _checker_aliases(weights: list[torch.Tensor]) -> list[torch.Tensor]:
    """Aliases of the weights held by AOTAutograd's first-call custom-op aliasing check, if it is running.

    On the first call of a compiled graph, ``_AnalyzeCustomOpInputOutputMode.__torch_dispatch__``
    (torch/_functorch/_aot_autograd/runtime_wrappers.py) runs this op and, in torch 2.13, keeps
    ``param.data`` of a parameter argument in a local meanwhile. Those locals die when the op returns, so
    they do not make re-pointing unsafe. Only looked for when a weight shows an extra user (slow path).
    """
    frame = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            return []
        if frame.f_code.co_name == "__torch_dispatch__":
            if type(frame.f_locals.get("self")).__name__ != "_AnalyzeCustomOpInputOutputMode":
                return []
            ids = {id(w) for w in weights}
            ptrs = {w.untyped_storage().data_ptr() for w in weights}
            return [
                t
                for t in frame.f_locals.values()
                if isinstance(t, torch.Tensor) and id(t) not in ids and t.untyped_storage().data_ptr() in ptrs
            ]
        frame = frame.f_back
    return []


def _repack(weights: list[torch.Tensor]) -> torch.Tensor:
    """Copy the weights [N_i, K] (or biases [N_i]) into one [sum N_i, K] ([sum N_i]) buffer and make each a row
    block of it (one time)."""
    global _moves
    first = weights[0]
    rest = tuple(first.shape[1:])  # (K,), or () for biases
    k = math.prod(rest)  # elements per row
    rows = sum(w.shape[0] for w in weights)
    with torch.no_grad():
        packed = _alloc_and_fill(weights, (rows, *rest))
        storage = packed.untyped_storage()
        row = 0
        for w in weights:
            w.set_(storage, row * k, (w.shape[0], *rest), packed.stride())
            row += w.shape[0]
    _moves += 1
    for key in [k for k, ref in _packed_storages.items() if ref.expired()]:
        del _packed_storages[key]
    _packed_storages[storage._cdata] = StorageWeakRef(storage)
    return packed


def _alloc_and_fill(weights: list[torch.Tensor], shape: tuple[int, int]) -> torch.Tensor:
    """``cat(weights)`` into a new buffer. On CUDA it is allocated and filled on a helper thread: a CUDA-graph
    warm-up routes the allocations of the *calling thread* into the graph's private pool, and long-lived
    parameters must not land there (cudagraph trees then fail with "tensors in the cudagraph pool not
    tracked as outputs"). The device is synchronised around it (one time)."""
    first = weights[0]
    if not first.is_cuda:
        packed = torch.empty(shape, dtype=first.dtype, device=first.device)
        return torch.cat(weights, dim=0, out=packed)
    device = first.device
    torch.cuda.synchronize(device)
    result: list = []

    def fill() -> None:
        try:
            with torch.cuda.device(device), torch.no_grad():
                packed = torch.empty(shape, dtype=first.dtype, device=device)
                torch.cat(weights, dim=0, out=packed)
                torch.cuda.synchronize(device)
                result.append(packed)
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            result.append(e)

    worker = threading.Thread(target=fill, name="fusion_passes-pack")
    worker.start()
    worker.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def _unpacked(x: torch.Tensor, weights: list[torch.Tensor], biases=None) -> torch.Tensor:
    """N GEMMs (addmms with ``biases``), each writing its column block of the [M, sum N_i] output (no copy)."""
    out = x.new_empty((x.shape[0], sum(w.shape[0] for w in weights)))
    col = 0
    for i, w in enumerate(weights):
        block = out[:, col : col + w.shape[0]]
        if biases is None:
            torch.mm(x, w.to(x.dtype).t(), out=block)
        else:
            torch.addmm(biases[i].to(x.dtype), x, w.to(x.dtype).t(), out=block)
        col += w.shape[0]
    return out


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"fusion_passes.packed_linear: {message}", stacklevel=3)


def unpack_parameters(module: torch.nn.Module) -> int:
    """Give every parameter of ``module`` that ``packed_linear`` packed its own storage again.

    Returns how many were unpacked. A compiled model packs them again on its next call.
    """
    global _moves
    count = 0
    with torch.no_grad():
        for p in module.parameters():
            ref = _packed_storages.get(p.untyped_storage()._cdata)
            if ref is not None and not ref.expired():
                p.data = p.detach().clone()
                count += 1
    if count:
        _moves += 1
    return count
