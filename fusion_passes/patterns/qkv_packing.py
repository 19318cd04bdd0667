"""qkv_packing: N >= 2 linears that read the same activation -> one GEMM, the outputs split off as views.

    # before (post-grad ATen, e.g. q/k/v of a GQA attention; gate/up of a SwiGLU MLP likewise)
    x2  = reshape(x, [B*S, D])                                   x [B, S, D]
    q   = mm(x2, permute(W_q, [1, 0]))                           W_q [Nq, D]  -> q [B*S, Nq]
    k   = addmm(b_k, x2, permute(W_k, [1, 0]))                   W_k [Nk, D]  -> k [B*S, Nk]
    v   = mm(x2, permute(W_v, [1, 0]))                           W_v [Nv, D]  -> v [B*S, Nv]
    # after
    qkv = fusion_passes.packed_linear(x2, [W_q, W_k, W_v])       -> [B*S, Nq + Nk + Nv]   (one GEMM)
    q   = slice(qkv, 1, 0, Nq)                                    a view
    k   = slice(qkv, 1, Nq, Nq + Nk) + b_k                        bias added in the graph: Inductor fuses it
    v   = slice(qkv, 1, Nq + Nk, Nq + Nk + Nv)                    into the consumer (fp32 / fp64 only, see below)
    # with a bias on every linear (Qwen2, BERT, OPT): one addmm, each bias added before its one rounding
    qkv = fusion_passes.packed_linear_bias(x2, [W_q, W_k, W_v], [b_q, b_k, b_v])
    # under torch.autocast (fp32 parameters, bf16 compute) each linear casts x and its W (and b) on its own:
    q   = mm(reshape(cast(x, bf16), [B*S, D]), permute(cast(W_q, bf16), [1, 0]))      ... and so k, v
    # after: x cast once; the op packs the fp32 W_i and casts the packed rows once per call (the same values)
    qkv = fusion_passes.packed_linear(reshape(cast(x, bf16), [B*S, D]), [W_q, W_k, W_v])

Inductor's pad_mm may pad each of these GEMMs' rows to a multiple of 8 (on a GPU, when timing says so), each
with its own pad of the shared input; where 2 or more such linears read one tensor, ``linears.unpad_rows``
restores them first (exact), so packing does not hang on that timing.

The weights stay graph inputs: the op stacks them without a per-call copy by making the parameters row
blocks of one buffer the first time it runs (see ``fusion_passes/kernels/packed_linear.py``).

Fires only when: every packed GEMM reads the same tensor (the same node, or reshapes of the same node to [-1, D], or
casts of that node to one dtype); the weights are distinct graph inputs (placeholders, or ``get_attr`` constants
under freezing), 2-D, of one dtype and device, all cast per call to the input's dtype or none, not mutated in the
graph, with static sizes, each its own memory (not a view into a larger tensor, unless all are the row blocks of one
buffer, in graph order); biases are 1-D [N_i], and in bf16 / fp16 either on every linear (stored in the weights'
dtype, cast per call or not) or on none packed (a bias added after the packed GEMM's rounding rounds twice, where
addmm rounds once: the biased ones then stay unpacked, with a near miss); addmm has alpha = beta = 1; autograd is
off (with gradients on, the op has no backward, so it does not fire); on CUDA the row count is not a static 1 (a
one-sequence decode step, where cuBLAS's separate GEMVs measured faster and decode_gemv takes what it can;
``FUSION_PASSES_QKV_PACKING_DECODE`` changes that, see ``DECODE_MAX_ROWS``).
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .. import graph_utils, linears
from ..graph_utils import val
from ..kernels import packed_linear as packed_linear_kernel
from . import env_policy

NAME = "qkv_packing"
HOOK = "post_grad"
DESCRIPTION = "N>=2 linears on one input (q/k/v, gate/up) -> one GEMM on weights packed once, outputs as views"
DEPENDS = (packed_linear_kernel, linears)

# Decode-sized groups (static rows <= DECODE_MAX_ROWS on CUDA; decode_gemv, which runs first, takes the ones its
# GEMV is faster for): "auto" packs them from 2 rows up and leaves a single row unpacked, "unpacked" leaves every
# one unpacked, "packed" packs every one. See DECODE_MAX_ROWS for what the H200 measured.
DECODE_POLICY_ENV = "FUSION_PASSES_QKV_PACKING_DECODE"
DECODE_POLICIES = ("auto", "unpacked", "packed")

aten = torch.ops.aten
_ALIGN = 16  # bytes: Inductor assumes 16-byte-aligned inputs on GPU, so each row block must start aligned


def apply(graph: fx.Graph, ctx) -> None:
    if not ctx.grad_enabled:
        linears.unpad_rows(graph, min_group=2)
    order = {n: i for i, n in enumerate(graph.nodes)}
    packed_weights: set[fx.Node] = set()
    for mms in linears.gemms_by_input(graph).values():
        if len(mms) < 2:
            continue
        group = _packable(mms, packed_weights, ctx, order)
        if len(group) < 2:
            continue
        reason = _decode_sized(group)
        if reason:
            ctx.near_miss(group[0].mm, reason)
            continue
        if ctx.grad_enabled:
            # (the graph records gradients: some input or parameter requires grad, not necessarily these weights)
            ctx.near_miss(group[0].mm, "autograd is on (an input or parameter of this graph requires grad): "
                          "packed_linear has no backward, so these linears are left unpacked (run under "
                          "torch.no_grad() to pack)")
            continue
        group.sort(key=lambda lin: order[lin.mm])
        _rewrite(graph, group, ctx)
        packed_weights.update(lin.weight for lin in group)


# On the H200 the packed GEMV of a decode step (M = 1) measured slower than cuBLAS's separate GEMVs under
# stock Inductor (llama-1b decode-1024 with CUDA graphs: 2.30 ms packed vs 2.14 ms unpacked;
# benchmarks/results/e2e_decode_h200_torch2.11.0.json), while prefill gains. At 2-16 rows (several sequences
# decoded at once) packing what decode_gemv leaves to cuBLAS measured faster (session 30, logs/s30_run4, graphed
# step, step / rate in ms: llama-8b x 8, q/k/v and gate/up, 5.45 / 5.40 -> 5.11 / 4.98, 646 -> 454 kernels;
# llama-1b x 4, gate/up, 1.267 / 1.257 -> 1.261 / 1.211; x 16 a tie, 1.581 / 1.501 -> 1.565 / 1.515). So by default
# a static row count of 1 is left unpacked on CUDA and 2-16 are packed; symbolic row counts are packed (they are
# usually prefill-sized).
DECODE_MAX_ROWS = 16


def decode_policy() -> str:
    return env_policy(DECODE_POLICY_ENV, DECODE_POLICIES)


def cache_key() -> str:
    return f"decode={decode_policy()}"


def _decode_sized(group: list["linears.Linear"]) -> str | None:
    x = val(group[0].x2)
    rows = x.shape[0]
    if x.device.type != "cuda" or not isinstance(rows, int) or rows > DECODE_MAX_ROWS:
        return None
    policy = decode_policy()
    if policy == "unpacked" or (policy == "auto" and rows == 1):
        bound = f"rows <= {DECODE_MAX_ROWS}" if policy == "unpacked" else "one row"
        return (f"left unpacked: {rows} row(s) is decode-sized, and on CUDA the packed GEMV measured slower than "
                f"separate ones ({bound}; {DECODE_POLICY_ENV}=packed packs it)")
    return None


# --------------------------------------------------------------------------------------------- matching


def _packable(mms: list[fx.Node], taken: set[fx.Node], ctx, order: dict) -> list[linears.Linear]:
    """The linears among ``mms`` (all reading one input) that can share one GEMM; near misses for the rest.
    ``order``: each node's position in the graph (the packed GEMM stacks the weights in that order)."""
    found, seen = [], set()
    for mm in mms:
        lin = linears.as_linear(mm)
        if isinstance(lin, str):
            ctx.near_miss(mm, f"linear reads the same input as another linear but is not packed: {lin}")
        elif lin.weight in seen or lin.weight in taken:
            continue  # the same weight twice (a duplicate GEMM) or already packed with another input
        else:
            seen.add(lin.weight)
            found.append(lin)
    if len({lin.constant is None for lin in found}) > 1:
        # parameters and frozen constants on one input: pack the larger kind (both kinds are rare together)
        runtime = [lin for lin in found if lin.constant is None]
        frozen = [lin for lin in found if lin.constant is not None]
        found = runtime if len(runtime) >= len(frozen) else frozen
    if len(found) < 2:
        return found
    kinds = {(str(val(lin.weight).dtype), str(val(lin.weight).device), lin.k, str(lin.cast)) for lin in found}
    if len(kinds) > 1:
        ctx.near_miss(found[0].mm, f"found on one input have weights of different dtype/device/K/per-call cast "
                                   f"{sorted(kinds)}; not packed")
        return []
    row_bytes = found[0].k * val(found[0].weight).element_size()
    if found[0].constant is None and any((lin.width * row_bytes) % _ALIGN for lin in found[:-1]):
        ctx.near_miss(found[0].mm, f"a weight block is not a multiple of {_ALIGN} bytes, so the next one would "
                      "start misaligned in the packed buffer; not packed")
        return []
    found = _own_memory(found, ctx, order)
    found = _biases_in_time(found, ctx) if len(found) >= 2 else found
    return _exact_biases(found, ctx) if len(found) >= 2 else found


def _own_memory(found: list[linears.Linear], ctx, order: dict) -> list[linears.Linear]:
    """``found`` less the weights that are views into a larger tensor (Dbrx's experts: ``w1.view(E, F, H)[e]``
    passed to a graph as an input): re-pointing such a view at the packed buffer would cut it off from the
    parameter it views, so ``packed_linear`` would refuse it at run time and run unpacked anyway. Weights that
    are already the row blocks of one buffer in the graph's order (a fused weight, or the buffer ``packed_linear``
    made before a recompile) are kept: the op reads them in place."""
    if found[0].constant is not None:  # frozen constants are stacked into a new constant: no aliasing
        return found
    fakes = [val(lin.weight) for lin in found]
    own = [w.storage_offset() == 0 and w.untyped_storage().nbytes() == w.numel() * w.element_size() for w in fakes]
    if all(own) or _one_packed_buffer([val(lin.weight) for lin in sorted(found, key=lambda lin: order[lin.mm])]):
        return found  # (the group's weights are stacked in graph order: see apply)
    for lin, w, is_own in zip(found, fakes, own):
        if not is_own:
            ctx.near_miss(lin.mm, f"its weight ({lin.weight.name}, {w.numel() * w.element_size()} bytes at offset "
                                  f"{w.storage_offset()}) is a view into a {w.untyped_storage().nbytes()}-byte tensor "
                                  "(e.g. one expert of a stacked parameter); packing would cut that view off the "
                                  "tensor, so it is not packed")
    return [lin for lin, is_own in zip(found, own) if is_own]


def _one_packed_buffer(weights: list[torch.Tensor]) -> bool:
    """Whether the (fake) ``weights`` [N_i, K] are, in this order, adjacent row blocks that fill one storage."""
    storage = weights[0].untyped_storage()
    if any(w.untyped_storage()._cdata != storage._cdata or not w.is_contiguous() for w in weights):
        return False
    end = 0
    for w in weights:
        if w.storage_offset() != end:
            return False
        end += w.numel()
    return end * weights[0].element_size() == storage.nbytes()


def _biases_in_time(found: list[linears.Linear], ctx) -> list[linears.Linear]:
    """``found`` (in graph order) less the linears whose bias the graph computes after the first GEMM: the packed
    GEMM and the biases added to its slices take that GEMM's place, where such a bias does not exist yet. A cast
    of a placeholder (autocast's, of an fp32 bias) is in time: the rewrite moves it up (``_bias_casts_first``)."""
    if all(lin.bias is None or lin.bias.op in ("placeholder", "get_attr") or linears.cast_placeholder(lin.bias)
           for lin in found):
        return found
    defined = set()
    for node in found[0].mm.graph.nodes:
        if node is found[0].mm:
            break
        defined.add(node)
    late = [lin for lin in found[1:]
            if lin.bias is not None and lin.bias not in defined and not linears.cast_placeholder(lin.bias)]
    for lin in late:
        ctx.near_miss(lin.mm, f"its bias ({lin.bias.name}) is computed after the first linear on this input, where "
                              "the packed GEMM would run; not packed")
    return [lin for lin in found if lin not in late]


def _bias_casts_first(group: list[linears.Linear]) -> None:
    """Move the biases that are casts of placeholders (they need nothing else) before the group's first GEMM,
    where the packed GEMM and the slices' bias adds go."""
    for lin in group[1:]:
        if linears.cast_placeholder(lin.bias) and not graph_utils.precedes(lin.bias, group[0].mm):
            group[0].mm.prepend(lin.bias)


def _exact_biases(found: list[linears.Linear], ctx) -> list[linears.Linear]:
    """``found`` less the linears whose bias the packed GEMM could not add as eager does.

    addmm adds the bias before its one rounding. With a bias on every linear the packed GEMM is one addmm too
    (``packed_linear_bias``; frozen: a stacked constant bias). With some biased and some not, the biases are added
    to the packed product's column slices after it: exact in fp32 / fp64, a second rounding in bf16 / fp16 (up to
    one ulp of the output), so there the biased ones stay unpacked."""
    dtype = found[0].dtype
    if _bias_mode(found) != "slices" or dtype in _BIAS_AFTER_EXACT:
        return found
    if all(lin.bias is not None for lin in found) and found[0].constant is None and _packed_biases(found) is None:
        why = (f"the biases are stored in another dtype than the weights' {val(found[0].weight).dtype}, and one "
               "packed buffer holds one dtype")
    else:
        why = f"packed as one addmm only with a bias on every linear, each bias block a multiple of {_ALIGN} bytes"
    for lin in found:
        if lin.bias is not None:
            ctx.near_miss(lin.mm, f"biased linear not packed in {dtype}: its bias would be added after the packed "
                                  f"GEMM rounds (addmm adds it before; {why})")
    return [lin for lin in found if lin.bias is None]


_BIAS_AFTER_EXACT = (torch.float32, torch.float64)  # a bias added after the GEMM rounds as addmm's


def _bias_mode(group: list[linears.Linear]) -> str:
    """"none" (no bias), "packed" (one addmm on the stacked biases: a bias on every linear, each row block of the
    packed bias aligned, or under freezing every bias a constant) or "slices" (each added to its output slice)."""
    if all(lin.bias is None for lin in group):
        return "none"
    if any(lin.bias is None for lin in group):
        return "slices"
    if group[0].constant is not None:
        return "packed" if all(linears.constant_of(lin.bias) is not None for lin in group) else "slices"
    biases = _packed_biases(group)
    if biases is None:
        return "slices"
    size = val(biases[0]).element_size()
    return "slices" if any((lin.width * size) % _ALIGN for lin in group[:-1]) else "packed"


def _packed_biases(group: list[linears.Linear]) -> list[fx.Node] | None:
    """The bias inputs b_i [N_i] ``packed_linear_bias`` stacks (and casts to x's dtype per call), all of the weights'
    dtype: each linear's bias, or for a per-call cast of a placeholder (autocast's), the uncast placeholder. None
    when a bias is of another dtype: the op stacks weights and biases only when they share one dtype (it runs
    unpacked otherwise), and the graph's own cast of such a bias (autocast over bf16 weights and fp32 biases) comes
    after the group's first GEMM, where the packed op goes (session 42's tenth audit: the op read it before it was
    defined, so the family raised and the graph fell back)."""
    sources = []
    for lin in group:
        bias = linears.cast_placeholder(lin.bias)  # the op casts the stacked placeholders
        if bias is None and lin.cast is not None:
            return None  # a weight cast per call and a bias that is not: x's dtype, not the weights'
        bias = bias if bias is not None else lin.bias  # as the GEMM adds it: in the weights' dtype (as_linear)
        if val(bias).dtype != val(lin.weight).dtype:
            return None
        sources.append(bias)
    return sources


# --------------------------------------------------------------------------------------------- rewrite


def _rewrite(graph: fx.Graph, group: list[linears.Linear], ctx) -> None:
    """Replace the group's GEMMs by one ``packed_linear`` and a column slice (+ bias) per output."""
    first = group[0]
    x2 = first.x2  # defined before the first GEMM, and every GEMM of the group reads the same values
    fake = linears.FakeEval(val(x2))
    biases = _packed_biases(group) if _bias_mode(group) == "packed" else None  # else: added to the slices
    if biases is None:
        _bias_casts_first(group)
    with graph.inserting_before(first.mm):
        if first.constant is not None:
            packed = _frozen_gemm(graph, x2, group, fake, biases)
        elif biases:
            packed = fake.call(graph, torch.ops.fusion_passes.packed_linear_bias.default, x2,
                               [lin.weight for lin in group], biases)
        else:
            packed = fake.call(graph, torch.ops.fusion_passes.packed_linear.default, x2, [lin.weight for lin in group])
        packed.meta["stack_trace"] = first.mm.meta.get("stack_trace")
        inserted, start = [packed], 0
        for lin in group:
            out = fake.call(graph, aten.slice.Tensor, packed, 1, start, start + lin.width)
            inserted.append(out)
            if lin.bias is not None and not biases:
                out = fake.call(graph, aten.add.Tensor, out, lin.bias)
                inserted.append(out)
            out.meta["stack_trace"] = lin.mm.meta.get("stack_trace")
            start += lin.width
            inserted += linears.replace_output(graph, lin.mm, out, fake)
    replaced = [lin.mm for lin in group]
    for lin in group:
        wt = lin.mm.args[2] if lin.bias is not None else lin.mm.args[1]
        graph_utils.erase_dead(graph, [lin.mm, wt, lin.x2])
    ctx.matched(
        replaced,
        inserted[:1],
        detail={
            "linears": len(group),
            "widths": [lin.width for lin in group],
            "in_features": first.k,
            "weights_packed": "at compile time (frozen constants)" if first.constant is not None else "at run time, once",
            "bias": [lin.bias is not None for lin in group],
            "weights": [lin.weight.name for lin in group],
            **({"cast_per_call": f"{val(first.weight).dtype} -> {first.cast}, once on the packed weights"}
               if first.cast else {}),
        },
        saved_bytes=(len(group) - 1) * graph_utils.tensor_bytes(x2),  # the input is read once, not N times
    )


def _frozen_gemm(graph: fx.Graph, x2: fx.Node, group: list[linears.Linear], fake, biases=None) -> fx.Node:
    """Under freezing the weights (and ``biases``, constants too) are constants: stack them once now, as new
    constants [sum N, K] (and [sum N])."""
    weight = _new_constant(graph, torch.cat([lin.constant for lin in group], dim=0), fake)
    wt = fake.call(graph, aten.permute.default, weight, [1, 0])
    if biases is None:
        return fake.call(graph, aten.mm.default, x2, wt)
    bias = _new_constant(graph, torch.cat([linears.constant_of(b) for b in biases]), fake)
    return fake.call(graph, aten.addmm.default, bias, x2, wt)


def _new_constant(graph: fx.Graph, value: torch.Tensor, fake) -> fx.Node:
    module = graph.owning_module
    name, i = "_fusion_packed_weight", 0
    while hasattr(module, f"{name}{i}"):
        i += 1
    module.register_buffer(f"{name}{i}", value, persistent=False)
    node = graph.get_attr(f"{name}{i}")
    node.meta["val"] = fake.mode.from_tensor(value, static_shapes=True)
    return node


