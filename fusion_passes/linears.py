"""Linears in post-grad ATen graphs: finding them and replacing their GEMMs (shared by the families that do).

    x2  = reshape(x, [M, K])                      x [..., K]
    y   = mm(x2, permute(W, [1, 0]))              W [N, K] a graph input (a parameter)   -> [M, N]
    y   = addmm(b, x2, permute(W, [1, 0]))        with a bias b [N]
    # under freezing W.T may be a ``get_attr`` constant instead
    # under autocast an fp32 W (and b) is cast on every call, and so is x, once per linear:
    y   = mm(reshape(cast(x, bf16), [M, K]), permute(cast(W, bf16), [1, 0]))

``gemms_by_input`` groups the GEMMs by the values they read (two casts of ``x`` to one dtype hold the same
values), ``as_linear`` says whether one is a linear on a weight (or why not), ``unpad_rows`` undoes Inductor's row
padding of a GEMM where a family needs the plain linear, and ``replace_output`` / ``FakeEval`` help a family swap
in its op.
"""

from __future__ import annotations

import collections
import operator
from dataclasses import dataclass

import torch
import torch.fx as fx

from . import graph_utils
from .graph_utils import val

__all__ = ["Linear", "gemms_by_input", "as_linear", "cast_placeholder", "unpad_rows", "replace_output", "FakeEval",
           "UNPADDED"]

aten = torch.ops.aten
_RESHAPES = (aten.reshape.default, aten.view.default, aten._unsafe_view.default)


@dataclass
class Linear:
    """One ``x2 @ W.T (+ b)`` in the graph.  x2 [M, K], W [N, K], bias [N] or None -> mm [M, N]

    ``weight`` is the node the GEMM reads W (or W.T) from: a placeholder, or under freezing a ``get_attr``
    constant, whose real value is then in ``constant`` (as W [N, K]). With ``cast`` (autocast's per-call cast of
    a placeholder W, to x2's dtype) ``weight`` is the uncast placeholder; ``bias`` is always the node the GEMM
    adds (in x2's dtype), a cast too if the bias is cast.
    """

    mm: fx.Node
    x2: fx.Node
    weight: fx.Node
    bias: fx.Node | None
    width: int  # N
    k: int
    constant: torch.Tensor | None = None
    cast: torch.dtype | None = None

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the GEMM computes in (x2's; the weight's after its cast)."""
        return val(self.x2).dtype


def gemms_by_input(graph: fx.Graph) -> dict[tuple, list[fx.Node]]:
    """mm/addmm nodes grouped by the values their left operand holds (see ``_input_key``), in graph order."""
    groups: dict[tuple, list[fx.Node]] = collections.defaultdict(list)
    for node in graph.nodes:
        if node.op == "call_function" and node.target in (aten.mm.default, aten.addmm.default):
            x2 = node.args[0] if node.target is aten.mm.default else node.args[1]
            if isinstance(x2, fx.Node):
                groups[_input_key(x2)].append(node)
    return groups


UNPADDED = "fusion_passes_unpadded_rows"  # meta key of a GEMM unpad_rows restored: the rows pad_mm had added


def unpad_rows(graph: fx.Graph, max_rows: int | None = None, min_group: int = 1,
               device_type: str | None = None) -> list[fx.Node]:
    """Undo Inductor's ``pad_mm`` where it padded only the rows of a linear (M not a multiple of 8 in 16-bit):

        xp = constant_pad_nd(x2, [0, 0, 0, p], 0)              x2 [M, K] -> xp [M + p, K]
        y  = slice(mm(xp, W.T), 0, 0, -p)                      -> [M, N]      (or addmm with a bias [N])
        # after
        y  = mm(x2, W.T)                                        the GEMM's ``meta[UNPADDED]`` = p

    Exact: a GEMM computes each output row from its own input row, and the zero rows are sliced off. pad_mm
    decides by timing the padded GEMM on the GPU at compile time, so without this a fusion that needs the plain
    linear would fire in one compile and not the next. Only GEMMs with static M <= ``max_rows`` (if given) on
    ``device_type`` (if given), and only where at least ``min_group`` such linears read the same input (2 for
    packing: a pad per GEMM hides that they share it). Returns the restored GEMMs.
    """
    found = collections.defaultdict(list)
    for sl in graph.nodes:
        padded = _row_padded(sl, max_rows)
        if padded is not None and device_type in (None, val(sl).device.type):
            found[_input_key(padded[1].args[0])].append((sl, *padded))
    restored = []
    for group in found.values():
        if len(group) < min_group:
            continue
        for sl, mm, pad, rows in group:
            args = list(mm.args)
            args[0 if mm.target is aten.mm.default else 1] = pad.args[0]
            with graph.inserting_before(sl):
                gemm = FakeEval(val(pad.args[0])).call(graph, mm.target, *args, **mm.kwargs)
            gemm.meta.update({k: v for k, v in mm.meta.items() if k not in ("val", "tensor_meta")})
            gemm.meta[UNPADDED] = rows
            sl.replace_all_uses_with(gemm)
            graph_utils.erase_dead(graph, [sl, mm, pad])
            restored.append(gemm)
    return restored


def _row_padded(sl: fx.Node, max_rows: int | None) -> tuple[fx.Node, fx.Node, int] | None:
    """(gemm, pad, rows added) if ``sl`` is the row slice of pad_mm's row-padded linear (see ``unpad_rows``)."""
    if not (sl.op == "call_function" and sl.target is aten.slice.Tensor and len(sl.args) >= 4):
        return None
    mm, dim, start, end = sl.args[:4]
    step = sl.args[4] if len(sl.args) > 4 else sl.kwargs.get("step", 1)
    if not (isinstance(mm, fx.Node) and mm.target in (aten.mm.default, aten.addmm.default)
            and len(mm.users) == 1 and dim == 0 and start in (0, None) and step == 1):
        return None
    pad = mm.args[0 if mm.target is aten.mm.default else 1]
    if not (isinstance(pad, fx.Node) and pad.target is aten.constant_pad_nd.default and len(pad.users) == 1):
        return None
    padding, value = list(pad.args[1]), (pad.args[2] if len(pad.args) > 2 else pad.kwargs.get("value", 0))
    x, out = val(pad.args[0]), val(sl)
    if not (isinstance(x, torch.Tensor) and isinstance(out, torch.Tensor) and x.dim() == 2 and value == 0
            and len(padding) == 4 and padding[:3] == [0, 0, 0] and isinstance(padding[3], int) and padding[3] > 0):
        return None
    rows = x.shape[0]
    if not isinstance(rows, int) or (max_rows is not None and rows > max_rows) or out.shape[0] != rows:
        return None  # the slice keeps exactly the original rows, 0 .. M - 1
    if isinstance(as_linear(mm), str):
        return None  # not on a weight, or (addmm) a bias other than [N], which pad_mm pads by rows too
    return mm, pad, padding[3]


def _input_key(x2: fx.Node) -> tuple[fx.Node, torch.dtype | None]:
    """(node, dtype) naming the values ``x2`` [M, K] holds: the node it flattens (see ``_flattened_from``), seen
    through a dtype cast, and x2's dtype. Autocast casts x once per linear: those casts, of one node to one
    dtype, hold the same values."""
    x = _flattened_from(x2)
    cast = graph_utils.dtype_cast(x)
    if cast is not None:
        x = _flattened_from(cast[0])
    return x, graph_utils.dtype_of(x2)


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


def as_linear(mm: fx.Node) -> Linear | str:
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
    weight, cast = _uncast(weight)
    if weight.op not in ("placeholder", "get_attr"):
        cast = graph_utils.dtype_cast(weight)
        what = (f"{graph_utils.op_name(cast[0])}, then cast to {cast[1]}" if cast else graph_utils.op_name(weight))
        return f"its weight is computed in the graph ({what}), not a parameter: packing would need a per-call copy"
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
        if b.dtype != (cast or w.dtype) or b.device != w.device:
            return "its bias dtype/device differs from the weight's"
    if any(graph_utils.mutates(user, weight) for user in weight.users):
        return "its weight is mutated in this graph"
    return Linear(mm=mm, x2=x2, weight=weight, bias=bias, width=n, k=k, constant=constant, cast=cast)


_CASTABLE = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def cast_placeholder(node) -> fx.Node | None:
    """The placeholder (a parameter) that ``node`` only casts to a dtype, as autocast does on every call, else
    None."""
    cast = graph_utils.dtype_cast(node)
    return cast[0] if cast is not None and cast[0].op == "placeholder" else None


def _uncast(weight: fx.Node) -> tuple[fx.Node, torch.dtype | None]:
    """(W, dtype) when ``weight`` is a placeholder W cast to another float dtype on every call (autocast);
    else (``weight``, None)."""
    source = cast_placeholder(weight)
    if source is None:
        return weight, None
    dtype = graph_utils.dtype_of(weight)
    if graph_utils.dtype_of(source) not in _CASTABLE or dtype not in _CASTABLE:
        return weight, None
    return source, (dtype if dtype != graph_utils.dtype_of(source) else None)


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


def constant_of(node: fx.Node) -> torch.Tensor | None:
    """The real tensor behind a ``get_attr`` node (freezing stores the frozen parameters on the module), else
    None."""
    return _constant(node) if isinstance(node, fx.Node) and node.op == "get_attr" else None


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


def replace_output(graph: fx.Graph, mm: fx.Node, out: fx.Node, fake) -> list[fx.Node]:
    """Point ``mm``'s users at ``out`` (a column slice of the packed result, or slice + bias).

    If the slice reaches a graph output through views only, the caller would get a view of the packed
    buffer with other strides than eager gives (a ``.view`` that works in eager could fail); if it reaches
    ``as_strided``, whose strides and offset address the storage rather than the tensor, that would read the
    packed buffer's rows instead of the GEMM's. Then the users get a dense copy instead. Direct ``view`` users
    become ``reshape`` (a view of a slice may need it).
    """
    inserted = []
    if out.target is aten.slice.Tensor and _needs_eager_layout(mm):
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


# Views whose strides and offset index the input's storage, not the input: they see its memory layout.
_STORAGE_VIEWS = (aten.as_strided, aten.as_strided_copy, aten.as_strided_scatter)


def _needs_eager_layout(node: fx.Node) -> bool:
    """Does ``node`` reach, through views only, a graph output or an op that reads its storage layout?"""
    stack, seen = [node], set()
    while stack:
        for user in stack.pop().users:
            if user.op == "output" or graph_utils.is_op(user, *_STORAGE_VIEWS):
                return True
            if user not in seen and _is_view(user):
                seen.add(user)
                stack.append(user)
    return False


class FakeEval:
    """Creates nodes with ``meta['val']`` computed on the graph's fake tensors."""

    def __init__(self, example):
        self.mode = torch._guards.detect_fake_mode([example])

    def call(self, graph: fx.Graph, target, *args, **kwargs) -> fx.Node:
        node = graph.call_function(target, args, kwargs)
        fake_args, fake_kwargs = torch.fx.node.map_arg((args, kwargs), val)
        with self.mode:
            node.meta["val"] = target(*fake_args, **fake_kwargs)
        return node
