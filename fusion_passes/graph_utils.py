"""Graph helpers shared by the pass manager, the families and the reports.

Where a family must look at the FX graph by hand (beyond Inductor's pattern matcher), the helpers live here
so there is one definition of "the op a node calls", "where in the user's code it came from" and "how big
the tensor it produces is".
"""

from __future__ import annotations

import collections
import math
import re
from typing import Iterable

import torch
import torch.fx as fx

__all__ = [
    "op_name",
    "op_counts",
    "graph_code",
    "source_location",
    "first_source",
    "tensor_bytes",
    "size_hints",
    "dtype_of",
    "val",
    "snapshot",
    "restore",
    "is_op",
]

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')


def op_name(node: fx.Node) -> str:
    """``aten.mm`` for an ATen call, the function's name for other calls, ``node.op`` otherwise."""
    if node.op != "call_function":
        return node.op if node.op != "call_method" else f"method.{node.target}"
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}"
    if isinstance(target, torch._ops.OpOverloadPacket):
        return f"{target._qualified_op_name.replace('::', '.')}"
    return getattr(target, "__name__", str(target))


def is_op(node: fx.Node | None, *packets) -> bool:
    """True when ``node`` calls one of the given ATen overload packets (any overload); False for None (what
    ``sole_user`` gives for a node with several users) and for anything that is not a node."""
    if not isinstance(node, fx.Node) or node.op != "call_function":
        return False
    if not isinstance(node.target, torch._ops.OpOverload):
        return False
    return any(node.target.overloadpacket is p for p in packets)


def dtype_cast(node) -> tuple[fx.Node, torch.dtype] | None:
    """(source, dtype) when ``node`` only casts its input's dtype (``convert_element_type``, or ``_to_copy`` with
    no argument but the dtype), else None."""
    if not isinstance(node, fx.Node):
        return None
    if is_op(node, torch.ops.prims.convert_element_type) and isinstance(node.args[0], fx.Node):
        return node.args[0], node.args[1]
    if is_op(node, torch.ops.aten._to_copy) and isinstance(node.args[0], fx.Node) and set(node.kwargs) <= {"dtype"}:
        return node.args[0], node.kwargs.get("dtype", val(node.args[0]).dtype)
    return None


def op_counts(graph: fx.Graph) -> dict[str, int]:
    """How many times each op is called in ``graph`` (placeholders and outputs left out)."""
    counts = collections.Counter(op_name(n) for n in graph.nodes if n.op in ("call_function", "call_method"))
    return dict(sorted(counts.items()))


def graph_code(graph: fx.Graph) -> str:
    """Readable Python for ``graph`` (what ``GraphModule.code`` shows), without stack-trace comments."""
    try:
        return graph.python_code(root_module="self", verbose=False).src.strip("\n")
    except Exception:  # a graph mid-rewrite can fail to print; the report then shows its repr
        return str(graph)


def source_location(node: fx.Node) -> str:
    """``file.py:123 in fn: code`` of the innermost user frame that produced ``node``, or ''."""
    trace = node.meta.get("stack_trace") or ""
    lines = trace.strip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        m = _FRAME.search(lines[i])
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.search(lines[i + 1]) else ""
            where = f"{m['file']}:{m['line']} in {m['fn']}"
            return f"{where}: {code}" if code else where
    return ""


def first_source(nodes: Iterable[fx.Node]) -> str:
    """The first non-empty source location among ``nodes``."""
    for n in nodes:
        loc = source_location(n)
        if loc:
            return loc
    return ""


def val(node) -> torch.Tensor | None:
    """The fake tensor (or SymInt/None) a node produces, from ``meta['val']``."""
    return node.meta.get("val") if isinstance(node, fx.Node) else None


def dtype_of(node) -> torch.dtype | None:
    """The dtype of the tensor a node produces, or None when it produces no tensor."""
    t = val(node)
    return t.dtype if isinstance(t, torch.Tensor) else None


def shape_of(node) -> tuple:
    """The shape of the tensor a node produces; () when it is not a tensor."""
    t = val(node)
    return tuple(t.shape) if isinstance(t, torch.Tensor) else ()


def known_equal(a, b) -> bool:
    """a == b for ints or SymInts, without adding a guard (unknown counts as not equal)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    try:
        return bool(statically_known_true(a == b))
    except Exception:  # noqa: BLE001 - an unbacked or odd symbol: not known
        return False


def same_shape(a, b) -> bool:
    """Two shapes (tuples of ints / SymInts) known to be equal."""
    return len(a) == len(b) and all(known_equal(x, y) for x, y in zip(a, b))


def sole_user(node: fx.Node) -> fx.Node | None:
    """The one node that uses ``node``, or None when it has no user or several."""
    return next(iter(node.users)) if len(node.users) == 1 else None


def read_sizes_early(graph: fx.Graph) -> int:
    """Make every size query ``sym_size(x, d)`` read the earliest value in ``graph`` known to hold the same size
    (a SymInt input, or a dim of an earlier tensor); returns how many it moved.

    Under dynamic shapes the graph can ask an intermediate for a size it cannot write from the inputs (a view's
    ``-1`` dim, ``(2*s0**2)//s0`` when duck sizing gave two dims one symbol). Such a query is one more user of,
    say, the attention scores, and the families' "used only inside the match" checks would refuse them; read from
    earlier, the value is the same and the intermediate keeps only its real users.

    In a joint (training) graph nothing computed from a ``tangents_*`` input is a source: a forward size query
    pointed at a gradient's dim would make the forward depend on the backward, which the partitioner rejects."""
    aten = torch.ops.aten
    if not any(is_op(node, aten.sym_size) for node in graph.nodes):
        return 0  # a graph of static shapes: nothing to move
    scalars: dict = {}  # size expression -> (the first node whose value is that SymInt, the SymInt)
    dims: dict = {}  # size expression -> (the first tensor with a dim of that size, the dim, the SymInt)
    backward: set = set()  # nodes computed from a tangent
    moved = 0
    for node in list(graph.nodes):
        if (node.op == "placeholder" and "tangents" in str(node.target)) or any(
                a in backward for a in node.all_input_nodes):
            backward.add(node)
            continue
        value = val(node)
        if is_op(node, aten.sym_size) and len(node.args) == 2 and isinstance(value, torch.SymInt):
            scalar = _same_size(value, scalars)
            if scalar is not None:
                node.replace_all_uses_with(scalar[0])
                graph.erase_node(node)
                moved += 1
                continue
            dim = _same_size(value, dims)
            if dim is not None and dim[0] is not node.args[0]:
                node.args = dim[:2]
                moved += 1
        if isinstance(value, torch.SymInt):
            scalars.setdefault(value.node.expr, (node, value))
        elif isinstance(value, torch.Tensor):
            for d, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt):
                    dims.setdefault(size.node.expr, (node, d, size))
    return moved


def _same_size(size: torch.SymInt, seen: dict) -> tuple | None:
    """The entry of ``seen`` (expression -> (..., SymInt)) whose size is known to equal ``size``."""
    if size.node.expr in seen:
        return seen[size.node.expr]
    return next((entry for entry in seen.values() if known_equal(entry[-1], size)), None)


_ERASABLE = ("call_function", "get_attr")


def depends_on(node: fx.Node, targets=(), where=None) -> bool:
    """Whether any of ``targets`` (or a node for which ``where(node)`` holds) is ``node`` or one of its inputs,
    transitively."""
    targets = set(targets)
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n in targets or (where is not None and where(n)):
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return False


def mutates(node: fx.Node, arg: fx.Node) -> bool:
    """Whether ``node`` writes ``arg`` in place (an argument its op's schema marks as written, e.g. ``copy_``'s
    destination, or one tensor of a written tensor list)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.is_mutable:
        return False
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(a.name)
            if value is arg or (isinstance(value, (list, tuple)) and any(v is arg for v in value)):
                return True
    return False


def deterministic_op(n: fx.Node) -> bool:
    """An ATen op whose value depends only on its arguments: no random numbers, no uninitialised memory."""
    return (n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
            and torch.Tag.nondeterministic_seeded not in n.target.tags and "empty" not in n.target.__name__)


def lifted_constant(n: fx.Node) -> torch.Tensor | None:
    """The real tensor behind ``n`` if it is a constant the tracer lifted out of the model's code (a ``get_attr``
    of ``_tensor_constantN``: e.g. transformers 4.x's ``torch.tensor(0.0)`` in its mask), else None. Parameters
    and buffers are graph inputs in these graphs; a ``get_attr`` of any other name is not trusted to be constant."""
    from torch._subclasses.fake_tensor import FakeTensor

    if n.op != "get_attr" or not n.target.startswith("_tensor_constant") or n.graph.owning_module is None:
        return None
    t = getattr(n.graph.owning_module, n.target, None)
    real = isinstance(t, torch.Tensor) and not isinstance(t, (FakeTensor, torch.nn.Parameter))
    return t if real else None


def run_nodes(nodes: list[fx.Node], env: dict) -> dict:
    """Run ``nodes`` (in graph order) on real tensors at compile time, whatever fake mode the pass runs under:
    ``env`` maps the nodes they read to values and is returned with each node's value added. A lifted constant
    among ``nodes`` (``lifted_constant``) gives its tensor."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        for n in nodes:
            if n.op == "get_attr":
                env[n] = lifted_constant(n)
                continue
            args, kwargs = fx.node.map_arg((n.args, n.kwargs), env.__getitem__)
            env[n] = n.target(*args, **kwargs)
    return env


def set_args(node: fx.Node, args) -> None:
    """Give the call ``node`` new positional ``args``. Where tracing recorded its inputs' values
    (``meta["eager_input_vals"]``: Inductor lays a custom op's inputs out as those), they are kept in step, or
    Inductor would pair the new arguments with the old values."""
    node.args = tuple(args)
    if "eager_input_vals" in node.meta:
        node.meta["eager_input_vals"] = fx.node.map_arg((node.args, dict(node.kwargs)), val)


def structure(node: fx.Node, memo: dict | None = None, depth: int = 0):
    """A hashable description of the value ``node`` computes: pure ATen ops by target and (described) arguments,
    so that two layers' identical slices or conversions of one model-level tensor (the mask, RoPE's cos/sin)
    compare equal; anything else (inputs, random or mutating ops, or past a depth where it no longer matters) by
    identity."""
    memo = {} if memo is None else memo
    if node in memo:
        return memo[node]
    pure = depth < 32 and deterministic_op(node) and not node.target._schema.is_mutable

    def arg(a):
        if isinstance(a, fx.Node):
            return structure(a, memo, depth + 1)
        if isinstance(a, (list, tuple)):
            return tuple(arg(x) for x in a)
        if isinstance(a, dict):
            return tuple(sorted((k, arg(v)) for k, v in a.items()))
        return a

    memo[node] = (node.target, arg(node.args), arg(node.kwargs)) if pure else node
    return memo[node]


def materialise_shared(graph: fx.Graph, value: fx.Node, user: fx.Node, shared: dict) -> tuple[fx.Node, list]:
    """One materialised buffer per distinct value, for kernels in every layer to read: (the node ``user`` should
    read instead of ``value``, the nodes inserted). ``shared`` maps ``structure`` keys to buffers made so far.

    A cheap pointwise value (a mask, a cos/sin table) is below Inductor's threshold for materialising a reused
    result, so Inductor computes it again for every kernel (an extern or user-defined Triton kernel) that reads
    it: one small kernel per layer. ``inductor_force_stride_order`` makes it one buffer, computed once."""
    key = structure(value)
    node = shared.get(key)
    if node is not None and precedes(node, user):
        return node, []
    import torch._inductor.inductor_prims  # noqa: F401 - registers the prim (Inductor has, when it runs our passes)

    t = val(value)
    # a contiguous buffer, not the value's own layout: that may overlap itself (an expanded mask has stride 0
    # along the batch), and a buffer cannot be written so (the readers take any strides)
    stride = list(torch._prims_common.make_contiguous_strides_for(t.shape))
    with graph.inserting_after(value):
        node = graph.call_function(torch.ops.prims.inductor_force_stride_order.default, (value, []))  # args below
    # its value: a fresh buffer of that layout (the prim's own eager impl copies, which needs a device)
    with torch._guards.detect_fake_mode([t]):
        node.meta["val"] = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    with graph.inserting_before(node):
        stride_args, made = _contiguous_stride_args(graph, value, tuple(t.shape))
    node.args = (value, stride_args)
    shared[key] = node
    return node, [*made, node]


def size_arg(graph: fx.Graph, value: fx.Node, d: int, made: list[fx.Node]) -> int | fx.Node:
    """``value``'s size along ``d`` as a call's argument: the int where it is static, else a ``sym_size`` node of
    ``value`` inserted at the graph's insertion point and appended to ``made`` (a SymInt written into the arguments
    would name a symbol the graph does not define)."""
    size = val(value).shape[d]
    if isinstance(size, int):
        return size
    node = graph.call_function(torch.ops.aten.sym_size.int, (value, d))
    node.meta["val"] = size
    made.append(node)
    return node


def _contiguous_stride_args(graph: fx.Graph, value: fx.Node, shape: tuple) -> tuple[list, list[fx.Node]]:
    """Contiguous strides for ``value`` [*shape] as a call's argument, and the nodes made for it: an int where the
    stride is static, else a node computing it from ``value``'s sizes (see ``size_arg``)."""
    import operator

    strides: list = []
    made: list[fx.Node] = []
    acc: int | fx.Node = 1
    value_of = lambda a: val(a) if isinstance(a, fx.Node) else a  # noqa: E731
    for d in reversed(range(len(shape))):
        strides.append(acc)
        size = shape[d]
        if d == 0:
            break  # the outermost size is in no stride
        size = size_arg(graph, value, d, made)
        if isinstance(acc, int) and isinstance(size, int):
            acc = acc * size
            continue
        product = graph.call_function(operator.mul, (acc, size))
        product.meta["val"] = value_of(acc) * value_of(size)
        made.append(product)
        acc = product
    return strides[::-1], made


def precedes(a: fx.Node, b: fx.Node) -> bool:
    """Whether ``a`` comes before ``b`` (or is ``b``) in their graph's order."""
    node = a
    while node.op != "root":
        if node is b:
            return True
        node = node.next
    return False


def erase_dead(graph: fx.Graph, nodes) -> list[fx.Node]:
    """Erase those of ``nodes`` (and what only they used) that nothing uses any more: the ops a rewrite replaced,
    their transposes and reshapes, constants only they read. Impure nodes stay. Any order; returns the erased."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    pending = {n for n in nodes if isinstance(n, fx.Node) and n in order}
    erased = []
    while pending:
        node = max(pending, key=order.__getitem__)  # consumers before producers
        pending.discard(node)
        if node.users or node.op not in _ERASABLE or node.is_impure():
            continue
        inputs = node.all_input_nodes
        graph.erase_node(node)
        erased.append(node)
        pending.update(i for i in inputs if i.op in _ERASABLE)
    return erased


def copy_stack_trace(sources, nodes) -> None:
    """Give ``nodes`` (inserted by a rewrite) the stack trace of the first of ``sources`` (the replaced nodes, in
    order of preference) that has one, so reports and Inductor's comments point at the user's line."""
    trace = next((n.meta["stack_trace"] for n in sources if n is not None and n.meta.get("stack_trace")), None)
    for node in nodes:
        if trace and not node.meta.get("stack_trace"):
            node.meta["stack_trace"] = trace


def size_hints(t: torch.Tensor) -> tuple[int, ...] | None:
    """``t``'s sizes, a symbolic size at the hint it was traced with; None if one has no hint (unbacked).

    Never ``int(size)``: on a SymInt that installs a guard that specialises the graph to this size, so
    ``dynamic=True`` would recompile for every new shape.
    """
    sizes = []
    for s in t.shape:
        if isinstance(s, torch.SymInt):
            if not s.node.has_hint():
                return None
            s = s.node.hint
        sizes.append(int(s))
    return tuple(sizes)


def tensor_bytes(node_or_tensor) -> int:
    """Bytes of the tensor a node produces (or of a tensor), symbolic sizes at their hints; 0 when unknown."""
    t = val(node_or_tensor) if isinstance(node_or_tensor, fx.Node) else node_or_tensor
    sizes = size_hints(t) if isinstance(t, torch.Tensor) else None
    return 0 if sizes is None else math.prod(sizes) * t.element_size()


def snapshot(graph: fx.Graph) -> fx.Graph:
    """A copy of ``graph`` (nodes and meta) that ``restore`` can put back."""
    copy = fx.Graph(owning_module=graph.owning_module)
    out = copy.graph_copy(graph, {})
    copy.output(out)
    return copy


def restore(graph: fx.Graph, saved: fx.Graph) -> None:
    """Make ``graph`` hold exactly the nodes of ``saved`` again (in place, for a pass that failed midway)."""
    # Unlink every node before erasing any: a failed pass may have left a node after one of its users, so no
    # erase order is safe while the use lists still hold (and clearing them by hand corrupts erase_node's updates).
    nodes = list(graph.nodes)
    for node in nodes:
        node.args, node.kwargs = (), {}
    for node in nodes:
        graph.erase_node(node)
    out = graph.graph_copy(saved, {})
    graph.output(out)


def insert_traced(graph: fx.Graph, op, args: list, written: tuple[str, ...],
                  mutated: tuple[int, ...] = ()) -> tuple[list, list]:
    """Insert ``op(*args)`` (args: nodes for tensors, python values for the rest) traced under
    functionalization: the Triton kernel calls of a ``triton_op`` become ``triton_kernel_wrapper_functional``
    nodes inlined here, so Inductor sees and emits the kernels themselves. ``written`` names the kernel
    arguments the kernels store to. ``mutated``: positions of args the op writes in place, whose new values
    (functional copies, which Inductor's reinplacing turns back into the writes where it can) follow the op's
    outputs. Returns (output nodes, inserted nodes)."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.functional_tensor import dispatch_functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    nodes = [a for a in args if isinstance(a, fx.Node)]
    vals = [val(a) for a in nodes]

    def call(*tensors):
        it = iter(tensors)
        actual = [next(it) if isinstance(a, fx.Node) else a for a in args]
        out = op(*actual)
        return (*(out if isinstance(out, (tuple, list)) else (out,)), *(actual[i] for i in mutated))

    with detect_fake_mode(vals):
        gm = make_fx(dispatch_functionalize(call), tracing_mode="real")(*vals)
    gm.graph.eliminate_dead_code()
    _clone_written_only(gm.graph, written)
    env, inserted, outs = {}, [], None
    placeholders = iter(nodes)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(placeholders)
        elif node.op == "output":
            outs = [env[o] for o in node.args[0]]
        else:
            new = graph.node_copy(node, lambda a: env[a])
            env[node] = new
            inserted.append(new)
    return outs, inserted


def _clone_written_only(graph: fx.Graph, written: tuple[str, ...]) -> None:
    """Functionalization clones every tensor Triton's analysis thinks the kernel writes; when that analysis
    cannot run (no GPU driver, or a Triton it does not understand) it assumes all of them, which would copy
    the inputs (weights included) on every call. Our kernels store only to their ``written`` arguments, so
    only those are cloned (and Inductor's reinplacing then drops those clones of fresh ``empty`` buffers)."""
    for node in graph.nodes:
        if node.target is not torch.ops.higher_order.triton_kernel_wrapper_functional:
            continue
        keep = [k for k in node.kwargs["tensors_to_clone"] if k in written]
        used = {u.args[1] for u in node.users}
        if not used <= set(keep):
            raise RuntimeError(f"the traced kernel returns {sorted(used)}, expected only {written}")
        node.kwargs = {**node.kwargs, "tensors_to_clone": keep}
