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
    v   = slice(qkv, 1, Nq + Nk, Nq + Nk + Nv)                    into the consumer, and mixed bias is exact

The weights stay graph inputs: the op stacks them without a per-call copy by making the parameters row
blocks of one buffer the first time it runs (see ``fusion_passes/kernels/packed_linear.py``).

Fires only when: every packed GEMM reads the same tensor (the same node, or reshapes of the same node to
[-1, D]); the weights are distinct graph inputs (placeholders, or ``get_attr`` constants under freezing),
2-D, of one dtype and device, not mutated in the graph, with static sizes; biases are 1-D [N_i]; addmm has
alpha = beta = 1; autograd is off (with gradients on, the op has no backward, so it does not fire).
"""

from __future__ import annotations

import collections
import operator
from dataclasses import dataclass

import torch
import torch.fx as fx

from .. import graph_utils
from ..graph_utils import val
from ..kernels import packed_linear as packed_linear_kernel

NAME = "qkv_packing"
HOOK = "post_grad"
DESCRIPTION = "N>=2 linears on one input (q/k/v, gate/up) -> one GEMM on weights packed once, outputs as views"
DEPENDS = (packed_linear_kernel,)

aten = torch.ops.aten
_RESHAPES = (aten.reshape.default, aten.view.default, aten._unsafe_view.default)
_ALIGN = 16  # bytes: Inductor assumes 16-byte-aligned inputs on GPU, so each row block must start aligned


@dataclass
class _Linear:
    """One ``x2 @ W.T (+ b)`` in the graph.  x2 [M, K], W [N, K], bias [N] or None -> mm [M, N]

    ``weight`` is the node the GEMM reads W (or W.T) from: a placeholder, or under freezing a ``get_attr``
    constant, whose real value is then in ``constant`` (as W [N, K]).
    """

    mm: fx.Node
    x2: fx.Node
    weight: fx.Node
    bias: fx.Node | None
    width: int  # N
    k: int
    constant: torch.Tensor | None = None


def apply(graph: fx.Graph, ctx) -> None:
    order = {n: i for i, n in enumerate(graph.nodes)}
    packed_weights: set[fx.Node] = set()
    for mms in _gemms_by_input(graph).values():
        if len(mms) < 2:
            continue
        group = _packable(mms, packed_weights, ctx)
        if len(group) < 2:
            continue
        reason = _decode_sized(group)
        if reason:
            ctx.near_miss(group[0].mm, reason)
            continue
        if ctx.grad_enabled:
            ctx.near_miss(group[0].mm, "autograd is on with weights that require grad: packed_linear has no "
                          "backward, so these linears are left unpacked (run under torch.no_grad() to pack)")
            continue
        group.sort(key=lambda lin: order[lin.mm])
        _rewrite(graph, group, ctx)
        packed_weights.update(lin.weight for lin in group)


# On the H200 the packed GEMV of a decode step (M = 1) measured slower than cuBLAS's separate GEMVs under
# stock Inductor (llama-1b decode-1024 with CUDA graphs: 2.30 ms packed vs 2.14 ms unpacked;
# benchmarks/results/e2e_decode_h200_torch2.11.0.json), while prefill gains. Static row counts up to this
# bound are left unpacked on CUDA; symbolic row counts are packed (they are usually prefill-sized).
DECODE_MAX_ROWS = 16


def _decode_sized(group: list["_Linear"]) -> str | None:
    x = val(group[0].x2)
    rows = x.shape[0]
    if x.device.type == "cuda" and isinstance(rows, int) and rows <= DECODE_MAX_ROWS:
        return (f"left unpacked: {rows} row(s) is decode-sized, and on CUDA the packed GEMV measured slower than "
                f"separate ones (rows <= {DECODE_MAX_ROWS})")
    return None


# --------------------------------------------------------------------------------------------- matching


def _gemms_by_input(graph: fx.Graph) -> dict[fx.Node, list[fx.Node]]:
    """mm/addmm nodes keyed by the tensor their left operand holds (reshapes to [-1, D] see through)."""
    groups: dict[fx.Node, list[fx.Node]] = collections.defaultdict(list)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in (aten.mm.default, aten.addmm.default):
            x2 = node.args[0] if node.target is aten.mm.default else node.args[1]
            if isinstance(x2, fx.Node):
                groups[_flattened_from(x2)].append(node)
    return groups


def _flattened_from(x2: fx.Node) -> fx.Node:
    """The node ``x2`` flattens: for ``x2 = reshape(x, [M, D])`` with x [..., D], ``x``; else ``x2`` itself.

    Two such reshapes of one ``x`` hold the same values, because a 2-D shape whose last dim is D is unique.
    """
    if x2.op == "call_function" and x2.target in _RESHAPES and isinstance(x2.args[0], fx.Node):
        x, t2, t = x2.args[0], val(x2), val(x2.args[0])
        if isinstance(t, torch.Tensor) and isinstance(t2, torch.Tensor) and t2.dim() == 2 and t.dim() >= 2:
            if isinstance(t.shape[-1], int) and t.shape[-1] == t2.shape[-1]:
                return x
    return x2


def _as_linear(mm: fx.Node) -> _Linear | str:
    """``mm``/``addmm`` as a linear on a weight input, or the reason it is not one."""
    if mm.target is aten.addmm.default:
        bias, x2, wt = mm.args[:3]
        if mm.kwargs.get("beta", 1) != 1 or mm.kwargs.get("alpha", 1) != 1:
            return "addmm with alpha/beta != 1"
    else:
        (x2, wt), bias = mm.args[:2], None
    weight, transposed = _weight_of(wt)
    if weight is None:
        what = graph_utils.op_name(wt) if isinstance(wt, fx.Node) else type(wt).__name__
        return f"its weight operand is {what}, not a weight W.T"
    if weight.op not in ("placeholder", "get_attr"):
        return (f"its weight is computed in the graph ({graph_utils.op_name(weight)}), not a parameter: "
                "packing would need a per-call copy")
    w, x = val(weight), val(x2)
    if not isinstance(w, torch.Tensor) or not isinstance(x, torch.Tensor) or w.dim() != 2:
        return "no 2-D weight metadata"
    if not all(isinstance(s, int) for s in w.shape):
        return "weight has symbolic sizes"
    n, k = (w.shape[0], w.shape[1]) if transposed else (w.shape[1], w.shape[0])
    constant = None
    if weight.op == "get_attr":
        constant = _constant(weight)
        if constant is None:
            return "its weight is a get_attr without a real tensor value"
        constant = constant.t() if not transposed else constant  # as W [N, K]
    elif not transposed:
        return "its weight input is used untransposed ([K, N]); only W [N, K] inputs are packed"
    elif not w.is_contiguous():
        return "its weight is not contiguous"
    if bias is not None:
        b = val(bias)
        if not isinstance(bias, fx.Node) or not isinstance(b, torch.Tensor) or tuple(b.shape) != (n,):
            return "its bias is not a 1-D [N] tensor"
        if b.dtype != w.dtype or b.device != w.device:
            return "its bias dtype/device differs from the weight's"
    if any(_mutates(user, weight) for user in weight.users):
        return "its weight is mutated in this graph"
    return _Linear(mm=mm, x2=x2, weight=weight, bias=bias, width=n, k=k, constant=constant)


def _weight_of(wt) -> tuple[fx.Node | None, bool]:
    """(node holding W, True) for ``wt = permute(W, [1, 0])`` or ``t(W)``; (node, False) for a constant
    that already holds W.T (freezing folds the permute into the constant); (None, _) otherwise."""
    if not isinstance(wt, fx.Node):
        return None, False
    if wt.op == "get_attr":
        return wt, False
    if wt.op == "call_function" and isinstance(wt.args[0], fx.Node):
        if wt.target is aten.t.default or (wt.target is aten.permute.default and list(wt.args[1]) == [1, 0]):
            return wt.args[0], True
    return None, False


def _constant(node: fx.Node) -> torch.Tensor | None:
    """The real tensor behind a ``get_attr`` node (freezing stores the frozen parameters on the module)."""
    try:
        t = node.graph.owning_module
        for part in node.target.split("."):
            t = getattr(t, part)
    except AttributeError:
        return None
    if not isinstance(t, torch.Tensor) or isinstance(t, torch._subclasses.FakeTensor) or t.is_meta:
        return None
    return t


def _mutates(node: fx.Node, arg: fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return False
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(a.name)
            if value is arg:
                return True
    return False


def _packable(mms: list[fx.Node], taken: set[fx.Node], ctx) -> list[_Linear]:
    """The linears among ``mms`` (all reading one input) that can share one GEMM; near misses for the rest."""
    linears, seen = [], set()
    for mm in mms:
        lin = _as_linear(mm)
        if isinstance(lin, str):
            ctx.near_miss(mm, f"linear reads the same input as another linear but is not packed: {lin}")
        elif lin.weight in seen or lin.weight in taken:
            continue  # the same weight twice (a duplicate GEMM) or already packed with another input
        else:
            seen.add(lin.weight)
            linears.append(lin)
    if len({lin.constant is None for lin in linears}) > 1:
        # parameters and frozen constants on one input: pack the larger kind (both kinds are rare together)
        runtime = [lin for lin in linears if lin.constant is None]
        frozen = [lin for lin in linears if lin.constant is not None]
        linears = runtime if len(runtime) >= len(frozen) else frozen
    if len(linears) < 2:
        return linears
    kinds = {(str(val(lin.weight).dtype), str(val(lin.weight).device), lin.k) for lin in linears}
    if len(kinds) > 1:
        ctx.near_miss(linears[0].mm, f"linears on one input have weights of different dtype/device/K {sorted(kinds)}; not packed")
        return []
    row_bytes = linears[0].k * val(linears[0].weight).element_size()
    if linears[0].constant is None and any((lin.width * row_bytes) % _ALIGN for lin in linears[:-1]):
        ctx.near_miss(linears[0].mm, f"a weight block is not a multiple of {_ALIGN} bytes, so the next one would "
                      "start misaligned in the packed buffer; not packed")
        return []
    return linears


# --------------------------------------------------------------------------------------------- rewrite


def _rewrite(graph: fx.Graph, group: list[_Linear], ctx) -> None:
    """Replace the group's GEMMs by one ``packed_linear`` and a column slice (+ bias) per output."""
    first = group[0]
    x2 = first.x2  # defined before the first GEMM, and every GEMM of the group reads the same values
    fake = _FakeEval(val(x2))
    with graph.inserting_before(first.mm):
        if first.constant is None:
            packed = fake.call(graph, torch.ops.fusion_passes.packed_linear.default, x2, [lin.weight for lin in group])
        else:
            packed = _frozen_gemm(graph, x2, group, fake)
        packed.meta["stack_trace"] = first.mm.meta.get("stack_trace")
        inserted, start = [packed], 0
        for lin in group:
            out = fake.call(graph, aten.slice.Tensor, packed, 1, start, start + lin.width)
            inserted.append(out)
            if lin.bias is not None:
                out = fake.call(graph, aten.add.Tensor, out, lin.bias)
                inserted.append(out)
            out.meta["stack_trace"] = lin.mm.meta.get("stack_trace")
            start += lin.width
            inserted += _replace_output(graph, lin.mm, out, fake)
    replaced = [lin.mm for lin in group]
    for lin in group:
        wt = lin.mm.args[2] if lin.bias is not None else lin.mm.args[1]
        _erase_if_dead(graph, lin.mm, wt, lin.x2)
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
        },
        saved_bytes=(len(group) - 1) * graph_utils.tensor_bytes(x2),  # the input is read once, not N times
    )


def _frozen_gemm(graph: fx.Graph, x2: fx.Node, group: list[_Linear], fake) -> fx.Node:
    """Under freezing the weights are constants: stack them once now, as a new constant [sum N, K]."""
    module = graph.owning_module
    stacked = torch.cat([lin.constant for lin in group], dim=0)
    name, i = "_fusion_packed_weight", 0
    while hasattr(module, f"{name}{i}"):
        i += 1
    module.register_buffer(f"{name}{i}", stacked, persistent=False)
    weight = graph.get_attr(f"{name}{i}")
    weight.meta["val"] = fake.mode.from_tensor(stacked, static_shapes=True)
    return fake.call(graph, aten.mm.default, x2, fake.call(graph, aten.permute.default, weight, [1, 0]))


def _replace_output(graph: fx.Graph, mm: fx.Node, out: fx.Node, fake) -> list[fx.Node]:
    """Point ``mm``'s users at ``out`` (a column slice of the packed result, or slice + bias).

    If the slice reaches a graph output through views only, the caller would get a view of the packed
    buffer with other strides than eager gives (a ``.view`` that works in eager could fail), so then the
    users get a dense copy instead. Direct ``view`` users become ``reshape`` (a view of a slice may need it).
    """
    inserted = []
    if out.target is aten.slice.Tensor and _reaches_output_through_views(mm):
        with graph.inserting_after(out):
            out = fake.call(graph, aten.clone.default, out, memory_format=torch.contiguous_format)
        inserted.append(out)
    for user in list(mm.users):
        if user.target in (aten.view.default, aten._unsafe_view.default):
            user.target = aten.reshape.default
        user.replace_input_with(mm, out)
    return inserted


def _is_view(node: fx.Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:  # an element of split/unbind
        return True
    schema = getattr(node.target, "_schema", None)
    return schema is not None and not schema.is_mutable and any(r.alias_info is not None for r in schema.returns)


def _reaches_output_through_views(node: fx.Node) -> bool:
    stack, seen = [node], set()
    while stack:
        for user in stack.pop().users:
            if user.op == "output":
                return True
            if user not in seen and _is_view(user):
                seen.add(user)
                stack.append(user)
    return False


def _erase_if_dead(graph: fx.Graph, *nodes: fx.Node) -> None:
    """Erase the replaced GEMM and the transposes/reshapes/frozen constants only it used."""
    for node in nodes:
        if isinstance(node, fx.Node) and node.op in ("call_function", "get_attr") and not node.users:
            graph.erase_node(node)


class _FakeEval:
    """Creates nodes with ``meta['val']`` computed on the graph's fake tensors."""

    def __init__(self, example):
        self.mode = torch._guards.detect_fake_mode([example])

    def call(self, graph: fx.Graph, target, *args, **kwargs) -> fx.Node:
        node = graph.call_function(target, args, kwargs)
        fake_args, fake_kwargs = torch.fx.node.map_arg((args, kwargs), val)
        with self.mode:
            node.meta["val"] = target(*fake_args, **fake_kwargs)
        return node
