"""state_updates: N independent ``buf += c`` updates of graph inputs -> one foreach add (one kernel).

    # before (post-grad ATen: the per-layer counters of a decode step, e.g. HF's static cache layers'
    # ``self.cumulative_length += 1``, functionalised into an add and a copy back into the buffer)
    a_i = add(buf_i, c)                    buf_i: a graph input (a module buffer), any shape; c: a Python number
    copy_(buf_i, a_i)                      i = 1 .. N, each update its own buffer
    # after
    a   = _foreach_add([buf_1 .. buf_N], c)   Inductor emits one foreach kernel on GPU
    copy_(buf_i, a[i])

Inductor fuses two pointwise nodes only when they share memory, so on GPU N such updates are N launches: 16 of the
~156 kernels of a Llama-1B decode step (about 1 us each). The values are the same adds, so the result is exact.

Fires only when: each buffer is a placeholder, written in the graph only by its update's ``copy_``, read by the
add itself (not a view); the add has no alpha (or alpha 1), its other operand is a Python number (an int for an
integer buffer), its result has the buffer's dtype (not complex) and shape, and its only user is the copy; at
least two updates share dtype, device and c, bit for bit (0.0 and -0.0 are two steps). The foreach add reads
every buffer just before the group's first copy, where no buffer of the group has been written yet.
"""

from __future__ import annotations

import operator
import struct

import torch
import torch.fx as fx

from .. import graph_utils
from ..graph_utils import val
from ..linears import FakeEval

NAME = "state_updates"
HOOK = "post_grad"
DESCRIPTION = "N independent in-place `buffer += c` updates (e.g. per-layer cache counters) -> one foreach kernel"

aten = torch.ops.aten
_ADDS = (aten.add.Tensor, aten.add.Scalar)


def apply(graph: fx.Graph, ctx) -> None:
    groups: dict[tuple, list[tuple[fx.Node, fx.Node]]] = {}
    for copy in [n for n in graph.nodes if n.target is aten.copy_.default]:
        update = _update(copy)
        if isinstance(update, str):
            if update:
                ctx.near_miss(copy, update)
            continue
        buf, add, c = update
        t = val(buf)
        groups.setdefault((t.dtype, t.device, type(c), _bits(c)), []).append((copy, add, c))
    for members in groups.values():
        if len(members) >= 2:
            _rewrite(graph, [m[:2] for m in members], members[0][2], ctx)


def _bits(c):
    """``c`` as a group key: equal only for the same value bit for bit (0.0 == -0.0 in Python, but x + 0.0 and
    x + -0.0 differ for x = -0.0)."""
    return struct.pack("<d", c) if isinstance(c, float) else c


def _update(copy: fx.Node):
    """(buffer, add, c) when ``copy`` is ``copy_(buf, add(buf, c))`` that can join a foreach; else a near-miss
    reason ("" for copies that are not buffer updates at all)."""
    buf, add = copy.args[0], copy.args[1]
    if buf.op != "placeholder" or not isinstance(add, fx.Node) or add.target not in _ADDS or add.args[0] is not buf:
        return ""
    c = add.args[1]
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        return ""  # a tensor operand: not a constant step
    if add.kwargs.get("alpha", 1) != 1:
        return "buffer update with alpha != 1 is left alone"
    t, out = val(buf), val(add)
    if t is None or out is None or out.dtype != t.dtype or tuple(out.shape) != tuple(t.shape):
        return "buffer update changes dtype or shape (type promotion or broadcasting); left alone"
    if t.dtype.is_complex:  # Inductor cannot lower a foreach over complex tensors: the compile would fall back
        return "complex buffer (Inductor cannot compile a complex foreach add); left alone"
    if isinstance(c, float) and not t.dtype.is_floating_point:
        return "float step on an integer buffer (promotes); left alone"
    if len(add.users) != 1:
        return "the updated value is also read elsewhere; left alone"
    if sum(graph_utils.mutates(user, buf) for user in buf.users) != 1:
        return "buffer is written more than once in the graph; left alone"
    return buf, add, c


def _rewrite(graph: fx.Graph, members: list[tuple[fx.Node, fx.Node]], c, ctx) -> None:
    order = {n: i for i, n in enumerate(graph.nodes)}
    members.sort(key=lambda m: order[m[0]])
    first_copy = members[0][0]
    bufs = [copy.args[0] for copy, _ in members]
    fake = FakeEval(val(bufs[0]))
    with graph.inserting_before(first_copy):
        summed = fake.call(graph, aten._foreach_add.Scalar, bufs, c)
        summed.meta["stack_trace"] = members[0][1].meta.get("stack_trace")
        for i, (copy, add) in enumerate(members):
            item = graph.call_function(operator.getitem, (summed, i))
            item.meta["val"] = summed.meta["val"][i]
            copy.replace_input_with(add, item)
    adds = [add for _, add in members]
    ctx.matched(adds, [summed], detail={"updates": len(members), "step": c, "buffers": [b.name for b in bufs]})
    graph_utils.erase_dead(graph, adds)
