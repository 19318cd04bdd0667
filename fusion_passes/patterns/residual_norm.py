"""Residual add + RMSNorm / LayerNorm  ->  one kernel that writes both the residual stream and the norm.

    # before (post-grad ATen, HF Llama RMSNorm; x, residual [B, S, N] bf16, weight [N])
    h  = add(x, residual)                              # [B, S, N] bf16, the residual stream goes on
    hf = convert_element_type(h, f32)
    r  = rsqrt(add(mean(pow(hf, 2), [-1], keepdim), eps))
    y  = mul(weight, convert_element_type(mul(hf, r), bf16))
    # after
    h, y = fusion_passes.add_rms_norm(x, residual, weight, eps, cast_before_weight=True)

Also matched, each with or without the preceding ``add``: Gemma's ``(n * (1.0 + weight.float())).to(T)``,
RMSNorm without a weight or with the weight applied in fp32, and LayerNorm in its decomposed post-grad form
(``var_mean(correction=0)``, ``sub``, ``rsqrt``, ``mul weight``, ``add bias``) or as ``native_layer_norm``
/ ``layer_norm``, with or without weight and bias (-> ``fusion_passes.[add_]layer_norm``). ``eps`` and
Gemma's ``1.0`` are read from the graph.

How it matches: by hand, from each ``mean`` / ``var_mean`` / ``native_layer_norm`` node, because the chain
has optional links (casts that vanish in fp32, Gemma's weight offset, a weight or bias or neither, either
operand order of each ``mul``) that would need dozens of traced patterns, and because every "almost"
deserves a near miss that tells the user why.

It fires only when the rewrite is exact and not slower than what Inductor does on its own:
- the norm is over the last dim only (``keepdim``), variance biased, reductions in fp32 (an fp32 upcast,
  or fp32 input); the add has no ``alpha``, does not broadcast and mixes no dtypes;
- every intermediate (fp32 copy, variance, rstd, normalised value) has no user outside the chain: the
  kernel returns only ``h`` and ``y``;
- the hidden size is static and at most ``norms.MAX_HIDDEN``; ``h`` and ``y`` are contiguous; on CUDA,
  eps is a number or a tensor on the same device (``dynamic=True`` makes it a CPU scalar: not fused);
- autograd is off (the kernel has no backward);
- Inductor would not have fused more: Inductor fuses pointwise producers and consumers into its own
  reduction kernel, but not into ours. So every input must be materialised anyway (a graph input, the
  output of a matmul/attention/custom op, or a tensor with other users), and ``y`` and ``h`` may only
  feed matmuls, graph outputs, ops that also wait for a later matmul (the next residual add), or the
  residual add of a following norm (which the next match absorbs).

On CUDA the op is traced under functionalization into the graph, so Inductor sees and emits the Triton
kernel itself. Elsewhere (CPU) the op node stays and Inductor calls its eager torch implementation: the
same graphs run and match eager, but that is a correctness path, slower than Inductor's own fused C++
(exclude this family for CPU inference).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .. import graph_utils
from . import env_policy
from ..graph_utils import dtype_cast, dtype_of, is_op, same_shape, sole_user, val
from ..kernels import norms

POLICY_ENV = "FUSION_PASSES_RESIDUAL_NORM"
# Where our kernel is not measurably faster than the one Inductor generates for the same ops, "auto" leaves
# the norm to Inductor. Measured on the H200 (benchmarks/results/norm_kernels_h200_torch2.11.0.json): ours was
# within -15%..+7% of Inductor's kernel with no shape consistently ahead, and on CPU our op is an eager
# fallback, slower than Inductor's fused C++. So "auto" fuses nowhere today; "always" fuses every match
# (what the correctness tests use, and the starting point for the decode kernels that fold the norm into GEMV).
POLICIES = ("auto", "always")


def policy() -> str:
    return env_policy(POLICY_ENV, POLICIES)


def cache_key() -> str:
    """Enters the FX-graph-cache key: the policy changes which graphs we produce."""
    return policy()


def _not_faster_reason(norm: "_Norm") -> str | None:
    if policy() == "always":
        return None
    device = val(norm.x).device.type
    where = "on the H200 (benchmarks/results/norm_kernels_h200_*.json)" if device == "cuda" else (
        "on CPU (our op runs as an eager fallback there)")
    return (f"left to Inductor: its own fused kernel is as fast as ours {where}; "
            f"set {POLICY_ENV}=always to use ours anyway")


NAME = "residual_norm"
HOOK = "post_grad"
DESCRIPTION = "residual add + RMSNorm/LayerNorm -> one Triton kernel writing the sum and the norm"
DEPENDS = (norms,)

aten = torch.ops.aten

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
# Views that cost nothing: looking through them to the op that really produced a tensor.
_VIEWS = (aten.view, aten.reshape, aten._unsafe_view, aten.unsqueeze, aten.squeeze)
# ATen ops Inductor runs as extern kernels (their outputs are materialised whatever we do).
_EXTERN = (
    aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.convolution, aten._scaled_mm, aten._int_mm,
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention, aten._scaled_dot_product_flash_attention_for_cpu,
    aten._flash_attention_forward, aten._efficient_attention_forward,
)  # fmt: skip


class _NoMatch(Exception):
    """The chain looked like a norm but cannot be rewritten; the message is the near-miss reason."""


@dataclass
class _Norm:
    """One matched norm: y = norm(x) (or h = add(*addends), y = norm(h)) over the last dim of size n."""

    kind: str  # "rms" or "layer"
    x: fx.Node  # the normalised tensor, dtype T (the add's output when a residual add is absorbed)
    y: fx.Node  # the node whose value the op's y output replaces
    eps: float
    interior: list[fx.Node]  # the nodes before y that only compute y: erased with it
    weight: fx.Node | None = None
    bias: fx.Node | None = None
    eps_tensor: fx.Node | None = None  # 0-d tensor holding eps, when eps is a graph input
    weight_offset: float = 0.0
    cast_before_weight: bool = False
    addends: tuple[fx.Node, ...] = ()  # (x, residual) of the absorbed add; empty for a norm alone
    form: str = ""  # which HF form matched, for the report: llama, gemma, fp32 weight, no weight, layer_norm

    @property
    def n(self) -> int:
        return val(self.x).shape[-1]

    @property
    def op_name(self) -> str:
        return ("add_" if self.addends else "") + ("rms_norm" if self.kind == "rms" else "layer_norm")


# ------------------------------------------------------------------------------------------ apply


def apply(graph: fx.Graph, ctx) -> None:
    """Rewrite every matching norm in ``graph`` (a post-grad ATen graph) in place."""
    rewritten = False
    for node in list(graph.nodes):
        if node.graph is not graph or node.op != "call_function":
            continue  # erased by an earlier rewrite
        try:
            norm = _match_anchor(node)
            if norm is None:
                continue
            if ctx.grad_enabled:
                raise _NoMatch("")
            _absorb_residual(norm, ctx)
            _check_rewritable(norm)
        except _NoMatch as e:
            reason = str(e)
            if ctx.grad_enabled:  # in training the saved intermediates also block it; autograd is the cause
                reason = "autograd is on and the fused kernel has no backward: left to Inductor"
            ctx.near_miss(node, reason)
            continue
        _rewrite(graph, norm, ctx)
        rewritten = True
    if rewritten:
        from torch._inductor.pattern_matcher import stable_topological_sort

        stable_topological_sort(graph)  # the fused op sits after its last input; users may precede it


def _match_anchor(node: fx.Node) -> _Norm | None:
    """The norm anchored at ``node`` (its mean / var_mean / layer_norm), None if not a norm, _NoMatch if it
    is one that cannot be fused."""
    if is_op(node, aten.mean):
        return _match_rms(node)
    if is_op(node, aten.var_mean):
        return _match_layer_norm(node)
    if is_op(node, aten.native_layer_norm, aten.layer_norm):
        return _match_layer_norm_op(node)
    return None


# For families that fold a norm into their own kernel (decode_gemv): the same matcher, by public names.
match_norm = _match_anchor
NoMatch = _NoMatch

# ------------------------------------------------------------------------------------------ matching


def _users(node: fx.Node) -> list[fx.Node]:
    return list(node.users)


def _only_user(node: fx.Node, what: str) -> fx.Node:
    users = _users(node)
    if len(users) != 1:
        names = ", ".join(u.name for u in users) or "nothing"
        raise _NoMatch(f"the {what} ({node.name}) is used by {names}: the kernel does not return it")
    return users[0]


def _other_operand(mul: fx.Node, one: fx.Node):
    """The operand of the binary ``mul`` that is not ``one`` (None when ``one`` is not an operand)."""
    a, b = mul.args[:2]
    if a is one:
        return b
    if b is one:
        return a
    return None


def _last_dim_only(dims, ndim: int) -> bool:
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    return len(dims) == 1 and isinstance(dims[0], int) and dims[0] % ndim == ndim - 1


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _eps_of(add: fx.Node, var: fx.Node, what: str) -> tuple[float, fx.Node | None, list[fx.Node]]:
    """eps from ``add(var, eps)`` / ``add(eps, var)``: (number, None, []) or, when eps is a 0-d tensor (a
    float that ``dynamic=True`` made a graph input), (0.0, that tensor, [its fp32 cast if only eps uses it])."""
    if not is_op(add, aten.add) or len(add.args) != 2 or add.kwargs.get("alpha", 1) != 1:
        raise _NoMatch(f"{what} is followed by {graph_utils.op_name(add)}, not `+ eps`")
    eps = add.args[1] if add.args[0] is var else add.args[0]
    if _number(eps):
        return float(eps), None, []
    v = val(eps)
    if isinstance(eps, fx.Node) and isinstance(v, torch.Tensor) and v.dim() == 0 and v.is_floating_point():
        cast = dtype_cast(eps)
        if cast is not None and len(eps.users) == 1 and dtype_of(eps) == torch.float32 and val(cast[0]).dim() == 0:
            return 0.0, cast[0], [eps]
        return 0.0, eps, []
    raise _NoMatch(f"eps ({eps}) is neither a number nor a 0-d float tensor")


def _upcast_source(xf: fx.Node, chain_users: set[fx.Node]) -> tuple[fx.Node, list[fx.Node]]:
    """The tensor a norm normalises: ``xf`` itself (fp32 input) or the source of its fp32 upcast."""
    if dtype_of(xf) != torch.float32:
        raise _NoMatch(f"the norm is computed in {dtype_of(xf)} without an fp32 upcast; the kernel computes in fp32")
    cast = dtype_cast(xf)
    if cast is None or dtype_of(cast[0]) not in _FLOATS:
        return xf, []
    extra = set(xf.users) - chain_users
    if extra:
        names = ", ".join(sorted(u.name for u in extra))
        raise _NoMatch(f"the fp32 copy of the input ({xf.name}) is also used by {names}: the kernel does not return it")
    return cast[0], [xf]


def _match_rms(mean: fx.Node) -> _Norm | None:
    """``x * rsqrt(mean(x**2, -1, keepdim) + eps)`` followed by an optional weight tail."""
    sq = mean.args[0]
    if not isinstance(sq, fx.Node):
        return None
    if is_op(sq, aten.pow) and sq.args[1] == 2 and isinstance(sq.args[0], fx.Node):
        xf = sq.args[0]
    elif is_op(sq, aten.mul) and len(sq.args) == 2 and sq.args[0] is sq.args[1]:
        xf = sq.args[0]
    else:
        return None  # a mean of something else: not a norm at all
    if not isinstance(val(xf), torch.Tensor):
        return None
    ndim = val(xf).dim()
    dims = mean.args[1] if len(mean.args) > 1 else mean.kwargs.get("dim")
    keepdim = mean.args[2] if len(mean.args) > 2 else mean.kwargs.get("keepdim", False)
    if not _last_dim_only(dims, ndim):
        raise _NoMatch(f"RMSNorm-like mean of squares over dim {dims} of a {ndim}-d tensor, not the last dim only")
    if not keepdim or mean.kwargs.get("dtype") is not None:
        raise _NoMatch("mean of squares without keepdim=True (or with a dtype): not the HF RMSNorm form")
    _only_user(sq, "square")
    add = _only_user(mean, "variance")
    eps, eps_tensor, eps_nodes = _eps_of(add, mean, "the mean of squares")
    rsqrt = _only_user(add, "variance + eps")
    if not is_op(rsqrt, aten.rsqrt):
        raise _NoMatch(f"variance + eps goes to {graph_utils.op_name(rsqrt)}, not rsqrt")
    nmul = _only_user(rsqrt, "rstd")
    if not is_op(nmul, aten.mul) or _other_operand(nmul, rsqrt) is not xf:
        raise _NoMatch(f"rsqrt(variance + eps) is not multiplied with the normalised input ({nmul.name})")
    x, upcast = _upcast_source(xf, {sq, nmul})
    norm = _Norm("rms", x=x, y=nmul, eps=eps, interior=[*upcast, sq, mean, *eps_nodes, add, rsqrt])
    norm.eps_tensor = eps_tensor
    _match_weight_tail(norm, allow_bias=False)
    return norm


def _match_layer_norm(vm: fx.Node) -> _Norm | None:
    """Decomposed LayerNorm: ``(x - mean) * rsqrt(var + eps)`` from ``var_mean(x, [-1], correction=0)``."""
    xf = vm.args[0]
    if not isinstance(xf, fx.Node) or not isinstance(val(xf), torch.Tensor) or vm.kwargs.get("correction", 1) != 0:
        return None  # an unbiased variance is not a LayerNorm
    ndim = val(xf).dim()
    dims = vm.args[1] if len(vm.args) > 1 else vm.kwargs.get("dim")
    if not _last_dim_only(dims, ndim):
        raise _NoMatch(f"LayerNorm-like var_mean over dim {dims} of a {ndim}-d tensor, not the last dim only")
    if not vm.kwargs.get("keepdim", False):
        raise _NoMatch("var_mean without keepdim=True: not the LayerNorm form")
    items = {u.args[1]: u for u in vm.users if u.target is operator.getitem}
    if len(items) != len(vm.users) or set(items) != {0, 1}:
        raise _NoMatch("var_mean's outputs are used directly: not the LayerNorm form")
    var, mean = items[0], items[1]
    sub = _only_user(mean, "mean")
    if not is_op(sub, aten.sub) or sub.args[:2] != (xf, mean) or sub.kwargs.get("alpha", 1) != 1:
        raise _NoMatch(f"the mean is used by {sub.name}, not `x - mean`")
    add = _only_user(var, "variance")
    eps, eps_tensor, eps_nodes = _eps_of(add, var, "the variance")
    rsqrt = _only_user(add, "variance + eps")
    if not is_op(rsqrt, aten.rsqrt):
        raise _NoMatch(f"variance + eps goes to {graph_utils.op_name(rsqrt)}, not rsqrt")
    nmul = _only_user(rsqrt, "rstd")
    if not is_op(nmul, aten.mul) or _other_operand(nmul, rsqrt) is not sub or _only_user(sub, "x - mean") is not nmul:
        raise _NoMatch(f"rsqrt(variance + eps) is not multiplied with x - mean ({nmul.name})")
    x, upcast = _upcast_source(xf, {vm, sub})
    norm = _Norm("layer", x=x, y=nmul, eps=eps, interior=[*upcast, vm, var, mean, sub, *eps_nodes, add, rsqrt])
    norm.eps_tensor = eps_tensor
    _match_weight_tail(norm, allow_bias=True)
    return norm


def _match_layer_norm_op(node: fx.Node) -> _Norm:
    """``native_layer_norm(x, [N], w, b, eps)[0]`` or ``layer_norm(x, [N], w, b, eps)``."""
    x = node.args[0]
    shape = node.args[1]
    args = list(node.args) + [None] * 5
    weight = node.kwargs.get("weight", args[2])
    bias = node.kwargs.get("bias", args[3])
    eps = node.kwargs.get("eps", args[4] if args[4] is not None else 1e-5)
    if len(shape) != 1:
        raise _NoMatch(f"layer norm over the last {len(shape)} dims; the kernel normalises the last dim only")
    if not _number(eps):
        raise _NoMatch("eps is not a constant")
    if dtype_of(x) not in _FLOATS:
        raise _NoMatch(f"layer norm of a {dtype_of(x)} tensor")
    if is_op(node, aten.layer_norm):
        interior, y = [], node
    else:
        items = {u.args[1]: u for u in node.users if u.target is operator.getitem}
        if len(items) != len(node.users) or 0 not in items or any(items[i].users for i in items if i != 0):
            raise _NoMatch("native_layer_norm's mean/rstd outputs are used: the kernel does not return them")
        interior, y = [node, *(items[i] for i in sorted(items) if i != 0)], items[0]
    norm = _Norm("layer", x=x, y=y, eps=float(eps), interior=interior, form="native_layer_norm")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and not _is_vector(t, norm.n):
            raise _NoMatch(f"layer norm {name} is not a [{norm.n}] vector")
    norm.weight, norm.bias = weight, bias
    return norm


def _is_vector(node, n) -> bool:
    v = val(node)
    return (
        isinstance(node, fx.Node)
        and isinstance(v, torch.Tensor)
        and v.dim() == 1
        and statically_known_true(v.shape[0] == n)
        and v.dtype in _FLOATS
    )


def _gemma_weight(w1: fx.Node, n) -> tuple[fx.Node, float, list[fx.Node]] | None:
    """(weight, offset, nodes) when ``w1 = offset + weight.float()`` (Gemma), with no other users."""
    if not is_op(w1, aten.add) or len(w1.args) != 2 or w1.kwargs.get("alpha", 1) != 1 or len(w1.users) != 1:
        return None
    a, b = w1.args
    wf, offset = (a, b) if _number(b) else (b, a)
    if not _number(offset) or not _is_vector(wf, n) or dtype_of(wf) != torch.float32:
        return None
    cast = dtype_cast(wf)
    if cast is not None and len(wf.users) == 1 and _is_vector(cast[0], n):
        return cast[0], float(offset), [wf, w1]
    return wf, float(offset), [w1]


def _match_weight_tail(norm: _Norm, allow_bias: bool) -> None:
    """Extend ``norm.y`` (the fp32 normalised value) over the optional tail:
    ``[cast to T, * weight]`` (Llama) or ``[* weight | * (offset + weight.float())] [+ bias] [final cast]``.

    The kernel computes in fp32 and rounds to out_dtype once at the end (plus, in the Llama form, to T
    before the weight), so the tail stops before any op that would round a second time.
    """
    n, t = norm.n, dtype_of(norm.x)

    def advance(node: fx.Node) -> None:
        norm.interior.append(norm.y)
        norm.y = node

    nxt = sole_user(norm.y)
    cast = dtype_cast(nxt)
    if cast is not None and cast[1] == t and t != torch.float32:
        # Llama: weight * n.to(T). The product is rounded to its dtype: nothing after it can be absorbed.
        advance(nxt)
        after = sole_user(nxt)
        w = _other_operand(after, nxt) if is_op(after, aten.mul) else None
        if w is not None and _is_vector(w, n):
            norm.weight, norm.cast_before_weight, norm.form = w, True, "llama"
            advance(after)
        else:
            norm.form = "no weight"
        return
    if is_op(nxt, aten.mul):
        w1 = _other_operand(nxt, norm.y)
        # the layer-norm ops take no offset: there ``offset + weight.float()`` stays a node, read as the weight
        gemma = _gemma_weight(w1, n) if isinstance(w1, fx.Node) and norm.kind == "rms" else None
        if gemma is not None:  # Gemma: n * (1.0 + weight.float())
            norm.weight, norm.weight_offset, norm.form = gemma[0], gemma[1], "gemma"
            norm.interior.extend(gemma[2])
            advance(nxt)
        elif isinstance(w1, fx.Node) and _is_vector(w1, n):  # n * weight, in fp32
            norm.weight = w1
            advance(nxt)
        nxt = sole_user(norm.y)
    if allow_bias and is_op(nxt, aten.add) and len(nxt.args) == 2 and nxt.kwargs.get("alpha", 1) == 1:
        b = _other_operand(nxt, norm.y)
        if isinstance(b, fx.Node) and _is_vector(b, n) and dtype_of(nxt) == torch.float32:
            norm.bias = b
            advance(nxt)
            nxt = sole_user(norm.y)
    cast = dtype_cast(nxt)
    if cast is not None and dtype_of(norm.y) == torch.float32 and cast[1] in _FLOATS:
        advance(nxt)
    if not norm.form:
        norm.form = "layer_norm" if norm.kind == "layer" else "fp32 weight" if norm.weight is not None else "no weight"


# ------------------------------------------------------------------------------------------ checks


def _absorb_residual(norm: _Norm, ctx) -> None:
    """Take ``h = add(a, b)`` into the kernel when ``norm.x`` is such an add; else leave the norm alone."""
    add = norm.x
    if not is_op(add, aten.add):
        return
    reason = _residual_problem(add) or _computed_from(add, [norm.weight, norm.bias, norm.eps_tensor])
    if reason:
        ctx.near_miss(add, f"residual add not fused into the norm: {reason}")
        return
    norm.addends = tuple(add.args[:2])


def _computed_from(add: fx.Node, args: list) -> str | None:
    """Why the op cannot produce ``add``'s sum: one of its other ``args`` is computed from that sum (a weight made
    from a matmul of ``h``), so the op would need its own output."""
    if any(isinstance(a, fx.Node) and graph_utils.depends_on(a, [add]) for a in args):
        return "the norm's weight, bias or eps is computed from the sum"
    return None


def _residual_problem(add: fx.Node) -> str | None:
    if len(add.args) != 2 or add.kwargs.get("alpha", 1) != 1:
        return "the add has an alpha"
    h = val(add)
    for t in add.args:
        v = val(t)
        if not isinstance(t, fx.Node) or not isinstance(v, torch.Tensor):
            return "one operand is a scalar"
        if v.dtype != h.dtype:
            return f"operands are {val(add.args[0]).dtype} and {val(add.args[1]).dtype} (mixed dtypes)"
        if not same_shape(v.shape, h.shape):
            return f"the add broadcasts ({list(v.shape)} to {list(h.shape)})"
        if v.device != h.device:
            return "operands are on different devices"
    return None


def _contiguous(v: torch.Tensor) -> bool:
    expected = 1
    for size, stride in reversed(list(zip(v.shape, v.stride()))):
        if not statically_known_true(size == 1) and not statically_known_true(stride == expected):
            return False
        expected = expected * size
    return True


def _check_rewritable(norm: _Norm) -> None:
    """Raise _NoMatch when the rewrite would be wrong or slower than what Inductor does alone."""
    xv, yv = val(norm.x), val(norm.y)
    if xv.dtype not in _FLOATS or yv.dtype not in _FLOATS:
        raise _NoMatch(f"dtype {xv.dtype} -> {yv.dtype}; the kernel handles float32/float16/bfloat16")
    n = xv.shape[-1]
    if not isinstance(n, int):
        raise _NoMatch(f"the hidden size is symbolic ({n}); mark only the batch/sequence dims dynamic")
    if n > norms.MAX_HIDDEN:
        raise _NoMatch(f"hidden size {n} > {norms.MAX_HIDDEN}: the kernel holds a row in registers")
    devices = {val(t).device for t in (norm.x, norm.weight, norm.bias) if t is not None}
    if len(devices) != 1:
        raise _NoMatch(f"tensors on several devices: {sorted(map(str, devices))}")
    if norm.eps_tensor is not None and val(norm.eps_tensor).device != xv.device:
        # dynamic=True turns a float attribute (eps) into a CPU scalar input; the kernel cannot read it
        raise _NoMatch(
            "eps is a CPU scalar tensor (dynamic=True made the float a graph input); mark only the batch and "
            "sequence dims dynamic (torch._dynamo.mark_dynamic) or set torch._dynamo.config.specialize_float"
        )
    if not _contiguous(yv) or (norm.addends and not _contiguous(xv)):
        raise _NoMatch("the norm's output is not contiguous; the kernel writes contiguous rows")
    produced = set(norm.interior) | {norm.y} | ({norm.x} if norm.addends else set())
    for t in norm.addends or (norm.x,):
        reason = _fused_producer(t, produced)
        if reason:
            raise _NoMatch(reason)
    first = min(produced, key=_position(norm.y.graph))
    reason = _fused_consumer([norm.y, norm.x] if norm.addends else [norm.y], produced, first)
    if reason:
        raise _NoMatch(reason)
    reason = _not_faster_reason(norm)
    if reason:
        raise _NoMatch(reason)


def _strip_views(node: fx.Node) -> list[fx.Node]:
    """``node`` and the chain of free views above it, up to the op that produced the data."""
    chain = [node]
    while is_op(chain[-1], *_VIEWS) and isinstance(chain[-1].args[0], fx.Node):
        chain.append(chain[-1].args[0])
    return chain


def _is_extern(node: fx.Node) -> bool:
    """Does Inductor materialise this node's output whatever we do (graph input, extern kernel, custom op)?"""
    if node.op in ("placeholder", "get_attr"):
        return True
    if node.op != "call_function":
        return False
    if node.target is operator.getitem and isinstance(node.args[0], fx.Node):
        return _is_extern(node.args[0])
    if node.target is torch.ops.higher_order.triton_kernel_wrapper_functional:
        return True
    if isinstance(node.target, torch._ops.OpOverload):
        return node.target.namespace not in ("aten", "prims") or is_op(node, *_EXTERN)
    return False


def _fused_producer(t: fx.Node, chain: set[fx.Node]) -> str | None:
    """Why Inductor would beat us on input ``t``: it is a pointwise result only this norm reads."""
    views = _strip_views(t)
    src = views[-1]
    if _is_extern(src):
        return None
    if any(set(v.users) - chain - set(views) for v in views):
        return None  # other users: materialised (or recomputed) for them anyway
    return (
        f"the input {t.name} comes from {graph_utils.op_name(src)} ({src.name}) and nothing else reads it: "
        "Inductor fuses that op into its own norm kernel, ours would re-read it from memory; left to Inductor"
    )


def _fused_consumer(outs: list[fx.Node], chain: set[fx.Node], start: fx.Node) -> str | None:
    """Why Inductor would beat us on an output (y, or h): a pointwise consumer that Inductor would fuse
    into its own norm kernel. A consumer that also waits for a matmul (or other extern kernel) run after
    the norm, like the next residual add, could not be fused there either, so it does not count."""
    order = {n: i for i, n in enumerate(start.graph.nodes)}
    pending, seen = list(outs), set(chain)
    while pending:
        node = pending.pop()
        for u in node.users:
            if u in seen:
                continue
            seen.add(u)
            if is_op(u, *_VIEWS) and u.args[0] is node:
                pending.append(u)
            elif u.op == "output" or _is_extern(u) or _feeds_norm(u) or _waits_for_extern(u, order, order[start]):
                continue
            else:
                return (
                    f"the norm's output feeds {graph_utils.op_name(u)} ({u.name}), which Inductor fuses into its "
                    "own norm kernel but cannot fuse into ours; left to Inductor"
                )
    return None


def _waits_for_extern(node: fx.Node, order: dict, start: int) -> bool:
    """Does ``node`` depend on an extern kernel that comes after position ``start`` in the graph?"""
    stack, seen = list(node.all_input_nodes), set()
    while stack:
        n = stack.pop()
        if n in seen or order[n] <= start:
            continue
        seen.add(n)
        if n.op == "call_function" and _is_extern(n) and n.target is not operator.getitem:
            return True
        stack.extend(n.all_input_nodes)
    return False


def _feeds_norm(add: fx.Node) -> bool:
    """Is ``add`` a residual add whose result a following norm normalises (so that match absorbs it)?"""
    if not is_op(add, aten.add):
        return False
    for u in add.users:
        cast = dtype_cast(u)
        for v in list(u.users) if cast is not None else [u]:
            if is_op(v, aten.var_mean, aten.native_layer_norm, aten.layer_norm):
                return True
            if is_op(v, aten.pow) and any(is_op(m, aten.mean) for m in v.users):
                return True
    return False


# ------------------------------------------------------------------------------------------ rewrite


def _op_call(norm: _Norm) -> tuple[torch._ops.OpOverload, list]:
    """The op overload and its positional args (nodes for tensors, python values for the rest)."""
    out_dtype = val(norm.y).dtype
    args = list(norm.addends or (norm.x,)) + [norm.weight]
    if norm.kind == "rms":
        args += [norm.eps, norm.weight_offset, norm.cast_before_weight, out_dtype, norm.eps_tensor]
    else:
        args += [norm.bias, norm.eps, out_dtype, norm.eps_tensor]
    return getattr(torch.ops.fusion_passes, norm.op_name).default, args


def _rewrite(graph: fx.Graph, norm: _Norm, ctx) -> None:
    op, args = _op_call(norm)
    add = norm.x if norm.addends else None
    last_arg = max((a for a in args if isinstance(a, fx.Node)), key=_position(graph))
    with graph.inserting_before(last_arg.next):
        if val(norm.x).device.type == "cuda":
            outs, inserted = graph_utils.insert_traced(graph, op, args, written=("H", "Y"))
        else:
            outs, inserted = _insert_op_node(graph, op, args, add, norm.y)
    graph_utils.copy_stack_trace([norm.y, add], inserted)
    h_out, y_out = outs if add is not None else (None, outs[-1])
    replaced = ([add] if add is not None else []) + norm.interior + [norm.y]
    saved = sum(graph_utils.tensor_bytes(nd) for nd in norm.interior)
    ctx.matched(
        replaced,
        inserted,
        detail={
            "op": f"fusion_passes.{norm.op_name}",
            "form": norm.form,
            "eps": norm.eps if norm.eps_tensor is None else f"tensor {norm.eps_tensor.name}",
            "hidden": norm.n,
            "dtype": str(val(norm.x).dtype).replace("torch.", ""),
            "residual": add is not None,
            "weight": norm.weight is not None,
            "bias": norm.bias is not None,
            "weight_offset": norm.weight_offset,
            "kernel": "triton" if val(norm.x).device.type == "cuda" else "torch",
        },
        saved_bytes=saved,
    )
    norm.y.replace_all_uses_with(y_out)
    if add is not None:
        add.replace_all_uses_with(h_out)
    for node in reversed(replaced):
        if not node.users:
            graph.erase_node(node)


def _position(graph: fx.Graph):
    order = {n: i for i, n in enumerate(graph.nodes)}
    return lambda n: order[n]


def _insert_op_node(graph, op, args, add, y):
    """The op as one node (plus getitems): Inductor calls its torch implementation as an extern kernel."""
    node = graph.call_function(op, tuple(args))
    if add is None:
        node.meta["val"] = val(y)
        return [node], [node]
    node.meta["val"] = (val(add), val(y))
    outs = []
    for i in (0, 1):
        outs.append(graph.call_function(operator.getitem, (node, i)))
        outs[-1].meta["val"] = node.meta["val"][i]
    return outs, [node, *outs]
