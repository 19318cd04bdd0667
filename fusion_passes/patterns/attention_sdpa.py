"""Eager attention (HF ``eager_attention_forward`` and friends) -> one ``scaled_dot_product_attention`` call.

Unfused (what the ATen graph holds; q [B, H, Sq, D], k/v [B, Hkv, Sk, D], mask broadcastable to [B, H, Sq, Sk]):

    k, v   = repeat_kv(k), repeat_kv(v)                 # unsqueeze -> expand -> clone -> view: [B, H, Sk, D]
    scores = bmm(q.view(B*H, Sq, D), k.mT.view(B*H, D, Sk)).view(B, H, Sq, Sk)
    scores = scores * scale  (or / d, or nothing)       # a Python number, a constant or a 0-d tensor
    scores = scores + mask   (either order; or where(cond, scores, -inf|finfo.min), or masked_fill)
    p      = softmax(scores.float(), dim=-1).to(q.dtype)           # amax/sub/exp/sum/div in the graph
    out    = bmm(p.view(B*H, Sq, Sk), v.view(B*H, Sk, D)).view(B, H, Sq, D)
    # Bloom's ALiBi: the bias and the scale in one baddbmm, K transposed after it was flattened
    scores = baddbmm(alibi, q.view(B*H, Sq, D), k.view(B*H, Sk, D).mT, beta=1, alpha=s).view(B, H, Sq, Sk)
    #        = bmm(q, k.mT) * s + alibi.view(B, H, 1|Sq, Sk): the scale, then an additive mask term
    # DeBERTa's relative-position bias, added to the flat scores before their view; K^T divided before the bmm
    scores = (bmm(q.view(B*H, Sq, D), kt) + rel).view(B, H, Sq, Sk)    # kt = k.view(B*H, Sk, D).mT / c
    #        = q @ kt.view(B, H, D, Sk) + rel.view(B, H, Sq|1, Sk): SDPA's K is kt's view transposed, scale 1

Fused:

    out = scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=H != Hkv)
    # traced as PyTorch picks the backend op for the device (cuDNN's on the H200: faster there than flash)
    # a compile-time constant mask is dropped: is_causal=True when it equals tril(ones(Sq, Sk)); nothing when
    # it allows every key (an HF decode step). Constant: built from arange / full / literals, tensors the
    # tracer lifted out of the model's code included (transformers 4.x's torch.tensor(0.0)); never from an
    # input, a parameter or a buffer (GPT-2's ``bias`` under transformers 4.x: passed on as the mask)

An SDPA call already in the graph over a prompt (HF's default ``sdpa`` attention) loses what it does not need:

    out = scaled_dot_product_attention(q, repeat_kv(k), repeat_kv(v), attn_mask=causal)   # bool or additive
    # fused
    out = scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    # only when the mask is proven constant as above (the bool mask under SDPA's where(mask, 0, -65504) for cuDNN
    # included); then repeat_kv's copies go too. On the H200, 1B/8B shapes, that form ran 2-3x faster than HF's.
    out = scaled_dot_product_attention(q, k, v, attn_mask=padding, enable_gqa=True)   # a mask that stays
    # where a fused kernel takes GQA with a mask (CPU's flash; cuDNN on the H200, 1.04-1.4x faster than over the
    # copies); elsewhere (CUDA's flash, fp32 on CUDA) the repeated K/V stay, and a call that gains nothing else
    # stays as it was, with a near miss saying why

At decode (q_len <= 16, on CUDA; fp32, fp16 or bf16, as the kernel computes in fp32) both forms go to our GQA decode
kernel instead, and so does an SDPA call that is already in the graph, whose K/V are then taken from before
``repeat_kv``:

    k, v = repeat_kv(k), repeat_kv(v)                            # a copy of the whole cache, every step
    out  = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=c, scale=s)
    # fused
    out  = fusion_passes.decode_attention(q, k_cache, v_cache, mask, s or 1/sqrt(D), c)
    # on CUDA its two Triton launches are traced into the graph, so Inductor emits them (no Python per step
    # without CUDA graphs); FUSION_PASSES_DECODE_ATTENTION_INLINE=off keeps it an extern op, and so does a compile
    # for CUDA graphs on sm_90+ (kernels.pdl), where decode_gemv may then launch it with PDL
    # Gemma2's logit softcapping, scores = cap * tanh(scores * s / cap) before the mask, only at decode size:
    out  = fusion_passes.decode_attention(q, k_cache, v_cache, mask, s / cap, c, cap)
    # FUSION_PASSES_DECODE_ATTENTION_PREFETCH=on (off by default: measured slower on the H200): where the output
    # reaches a linear through views only (HF's o_proj), the kernel also requests that weight into L2
    out  = fusion_passes.decode_attention(q, k_cache, v_cache, mask, s, c, 0.0, W_o)

How it matches: from every ``bmm`` it walks forward along the single-user chain (scores -> scale -> mask ->
softmax -> casts -> bmm with V) and backward from the two bmm operands through the views matmul adds, so
the match is structural (no shape ints baked in; dynamic shapes work). A flat [N, ., .] operand or mask term it
cannot trace back to the query's batch dims (DeBERTa's K^T / c, its bias) is viewed to them: the query was
flattened row-major, so a row-major view pairs the same matrices as the bmm did. The replacement is traced with
Inductor's ``fwd_only``, so the graph gets the backend op SDPA picks for this device and these shapes.

A softmax over another dim than the keys' (not attention as SDPA computes it) is left as it is, but moved onto
transposed scores, so that Inductor's own SDPA rewrite, which runs after this pass and ignores the softmax dim
(pytorch/pytorch#196468: a silent wrong result), cannot match it either:

    p = softmax(scores, dim=-2)                               # amax/sub/exp/sum/div over dim -2
    # shielded: the same values, the reduction on the last dim of a transposed view
    p = softmax(scores.transpose(-2, -1), dim=-1).transpose(-2, -1)

When it does not fire (each recorded as a near miss): attention written with ``torch.einsum`` (5-d permutes
around each bmm, not followed); softmax over another dim; scores or weights with another
user (``output_attentions=True``, or autograd reading them for the backward pass); any op between scores and
softmax other than scale / additive mask / where-mask / upcast / a reshape there and straight back (what
functionalisation makes of transformers 4.x T5's ``scores += position_bias``) (tanh softcapping only at decode
size, before the mask); dropout p>0 in
training; mixed q/k/v dtypes or devices; a mask in another dtype than q (except an fp32 one under a bf16 query,
as under autocast, that the graph provably builds from 0, fp32's minimum and -inf alone: ``_why_not_only_blocks``;
it is given to SDPA with bf16's minimum, which blocks the same keys); a where-mask whose fill is not
-inf / the dtype's minimum; shapes/dtypes for which SDPA has no fused kernel here (its math fallback would
only redo bmm/softmax/bmm).

Exactness: the scale is applied where SDPA applies it, a constant as its dtype holds it (``full((), 0.1,
dtype=bf16)`` is 0.10009765625); several constant factors fold into one only when all enlarge or all shrink the
scores (``* 1e38 * 1e-38`` overflows in eager: a near miss); a where-mask ``where(c, s, fill)`` becomes the additive mask ``where(c, 0,
fill)`` (``s + fill == fill`` in fp32/bf16 for any real score, so even rows with every key masked give eager's
uniform weights; SDPA's fused CUDA kernels do not give that, nor does the decode kernel in fp16, so rows that the
mask blocks entirely with the minimum get the mean of V after them; in fp16, eager's additive form of such rows
can still differ). Mask terms
combine in the graph's order (a
where-mask replaces what the terms before it added, as eager's overwrite does; two fills of the dtype's minimum
do not sum to -inf). A fill is taken as the scores' dtype stores it (bf16 holds ``finfo(float32).min`` as -inf).
Where a kept mask may block a whole row with -inf (a -inf fill, a constant additive mask holding -inf, an
additive mask the graph builds with a -inf fill or with ops that may overflow to -inf: arithmetic, a cast to a
narrower float; or additive terms summed), those rows are set to NaN after SDPA or the decode kernel, as eager's
softmax leaves them (SDPA's safe softmax gives 0). An additive mask read from an input is taken to block
with finite values, as transformers' masks do (``finfo(dtype).min``): a row of -inf there gives 0, not eager's
NaN. The weights may pass through a cast to attn @ V's dtype or a wider float only.
"""

from __future__ import annotations

import contextlib
import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F

from . import env_policy
from .. import graph_utils, linears
from ..graph_utils import (
    copy_stack_trace, dtype_cast, dtype_of, erase_dead, is_op, known_equal, op_name, same_shape, shape_of, sole_user,
    tensor_bytes, val,
)
from ..kernels import decode_attention as decode_kernel, pdl

NAME = "attention_sdpa"
HOOK = "joint"
DESCRIPTION = ("eager attention (bmm -> scale -> mask -> softmax -> bmm, incl. repeat_kv GQA) -> one SDPA call; "
               "SDPA over repeat_kv -> SDPA(enable_gqa), a constant causal mask -> is_causal; "
               "at q_len <= 16 on CUDA both -> a GQA decode kernel")
DEPENDS = (decode_kernel, linears, pdl)

DECODE_POLICY_ENV = "FUSION_PASSES_DECODE_ATTENTION"
DECODE_POLICIES = ("auto", "always")
INLINE_POLICY_ENV = "FUSION_PASSES_DECODE_ATTENTION_INLINE"
INLINE_POLICIES = ("on", "off")  # "on" since the H200 measured it (logs/s8_inline: no-graph 1B decode 8.7 -> 3.5 ms)
PREFETCH_POLICY_ENV = "FUSION_PASSES_DECODE_ATTENTION_PREFETCH"
# off: on the H200 the prefetches cost the attention kernel more than they save the o GEMV (session 15:
# probe_l2_prefetch.py, 1B attention 2.96 -> 5.08 us, o GEMV 3.89 -> 3.51 us; graphed 1B step 0.858 -> 0.900 ms)
PREFETCH_POLICIES = ("off", "on")


def decode_policy() -> str:
    """"auto": decode-sized attention on CUDA runs ``fusion_passes.decode_attention``; "always": on every
    device (elsewhere the op runs as torch: for tests)."""
    return env_policy(DECODE_POLICY_ENV, DECODE_POLICIES)


def inline_policy() -> str:
    """"on": on CUDA the decode kernel is traced into the graph and Inductor emits its two kernels (no Python per
    step); "off": it runs as an extern op, launching them through Triton's Python launcher every layer and step."""
    return env_policy(INLINE_POLICY_ENV, INLINE_POLICIES)


def prefetch_policy() -> str:
    """"on": on CUDA the decode kernel also requests the o-proj weight that reads its output into L2 (see
    ``kernels.decode_attention``); "off" (default): not, until the H200 has measured it."""
    return env_policy(PREFETCH_POLICY_ENV, PREFETCH_POLICIES)


def cache_key() -> str:
    return f"{decode_policy()},{inline_policy()},{prefetch_policy()},pdl={pdl.policy()}"

aten = torch.ops.aten
prims = torch.ops.prims

_FLATTEN = (aten.view, aten._unsafe_view, aten.reshape)
_RESHAPING = (aten.permute, aten.transpose, aten.unsqueeze, aten.squeeze, aten.expand)  # other layout-only ops
# torch.einsum's attention reaches the graph as 5-d unsqueeze / permute / view chains around each bmm
_EINSUM_HINT = " (permutes around the bmm, as torch.einsum writes attention, are not followed: use matmul)"
_MAX_CHAIN = 16  # ops between the two bmms we are willing to walk
_MAX_CONST_NODES = 256  # size of a mask subgraph we evaluate at compile time to prove it causal
_MAX_CONST_NUMEL = 1 << 26
_SOFTMAX_OPS = (aten.amax, aten._softmax, aten.softmax)


class _Miss(Exception):
    """This bmm is not a rewritable attention. ``report``: it looked like attention, so tell the user why."""

    def __init__(self, node: fx.Node, reason: str, report: bool = True, shield: _Softmax | None = None):
        super().__init__(reason)
        self.node, self.reason, self.report = node, reason, report
        self.shield = shield  # a softmax to move onto transposed scores (see _shield_softmax)


@dataclass
class _MaskTerm:
    """One term of the additive mask. kind: "add" (tensor added to the scores), "keep" (where(cond, scores,
    fill): cond True keeps the score) or "fill" (masked_fill / where(cond, fill, scores))."""

    kind: str
    tensor: fx.Node
    fill: float = 0.0


@dataclass
class _Attention:
    """A matched attention: SDPA(q, k, v, mask, scale) replaces ``output``; ``chain`` is erased."""

    q: fx.Node  # [*batch, Sq, D]
    k: fx.Node  # [*batch, Sk, D], or [B, Hkv, Sk, D] with enable_gqa
    v: fx.Node  # [*batch, Sk, Dv], or [B, Hkv, Sk, Dv] with enable_gqa
    output: fx.Node  # [*batch, Sq, Dv], the node whose value SDPA reproduces
    chain: list[fx.Node]  # bmm1 ... output (each used only inside the match), then the operands' views:
    #                       what the rewrite may leave dead
    k_is_transposed: bool = False  # k is [*batch, D, Sk] (no permute to strip): SDPA gets k.mT
    scale: float = 1.0
    scale_grows: bool | None = None  # whether the constant factors folded into ``scale`` enlarge (or shrink) scores
    scale_tensors: list[tuple[str, fx.Node]] = field(default_factory=list)  # ("mul"|"div", 0-d node), folded into q
    mask: list[_MaskTerm] = field(default_factory=list)
    is_causal: bool = False
    mask_dropped: str = ""  # "causal" / "none": a constant mask SDPA does not need (see _constant_mask_kind)
    enable_gqa: bool = False
    decode: bool = False  # decode-sized: our decode kernel instead of SDPA
    repeat: int = 1  # kv heads repeated by repeat_kv (1: plain MHA)
    kv_sources: tuple | None = None  # (k, v, nodes) before repeat_kv, used when enable_gqa is chosen
    repeated_kv: tuple | None = None  # (k, v, len(chain)) as matched, before enable_gqa took kv_sources
    softmax: fx.Node | None = None  # the softmax output: its source line is the one the report shows
    tanh: fx.Node | None = None  # Gemma2's logit softcapping: scores = softcap * tanh(scores * scale) (decode only)
    softcap: float = 0.0  # the constant scaling after the tanh
    prefetch: str = ""  # the weight the decode kernel requests into L2 (the o-proj's), if any
    nan_rows: bool = False  # a kept mask may block a whole row with -inf: those rows are NaN, as eager's softmax
    made: list[fx.Node] = field(default_factory=list)  # nodes the match inserted: erased if the rewrite does not fire


# --------------------------------------------------------------------------------------------- small helpers


def _fmt(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _is_identity(node: fx.Node) -> bool:
    """Ops that leave the values (and the shape and dtype) of their first input unchanged."""
    if is_op(node, aten.clone, aten.alias, aten.contiguous):
        return True
    if is_op(node, prims.convert_element_type, aten._to_copy):
        src, out = val(node.args[0]), val(node)
        return isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor) and src.dtype == out.dtype
    if is_op(node, aten.expand, aten.slice, *_FLATTEN):
        step_ok = not is_op(node, aten.slice) or (node.args[4] if len(node.args) > 4 else 1) == 1
        # same dtype: aten.view.dtype reinterprets the bits (a bf16 -> fp16 view keeps the shape, not the values)
        return (step_ok and same_shape(shape_of(node.args[0]), shape_of(node))
                and dtype_of(node.args[0]) == dtype_of(node))
    return False


def _skip_identity(node, seen: list) -> Any:
    """Walk back from ``node`` through value-preserving ops; ``seen`` collects the ops walked through."""
    while isinstance(node, fx.Node) and node.op == "call_function" and _is_identity(node):
        seen.append(node)
        node = node.args[0]
    return node


def _const_scalar(x) -> float | None:
    """A Python number for ``x`` if it is one, or a 0-d/size-1 ``full``/``scalar_tensor`` constant, as its dtype
    holds it (``full((), 0.1, dtype=bf16)`` is 0.10009765625)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    if not isinstance(x, fx.Node):
        return None
    seen: list = []
    x = _skip_identity(x, seen)
    number = None
    if is_op(x, aten.full) and all(known_equal(s, 1) for s in x.args[0]):
        number = _const_scalar(x.args[1])
    elif is_op(x, aten.scalar_tensor):
        number = _const_scalar(x.args[0])
    dtype = dtype_of(x) if number is not None else None
    return number if dtype is None else _as_dtype(number, dtype)


def _as_dtype(number: float, dtype: torch.dtype) -> float:
    """``number`` rounded to ``dtype``, as a tensor of that dtype stores it (-inf past its range)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return torch.tensor(number, dtype=torch.float64).to(dtype).item()


def _is_0d_tensor(x) -> bool:
    t = val(x)
    return isinstance(t, torch.Tensor) and t.dim() == 0


# --------------------------------------------------------------------------------------------- softmax


@dataclass
class _Softmax:
    input: fx.Node
    output: fx.Node
    dim: int
    nodes: list[fx.Node]


def _softmax_at(x: fx.Node) -> _Softmax | None:
    """The softmax whose input is ``x``: ``_softmax(x, dim)`` or Inductor's decomposition of it,
    ``div(exp(x - amax(x, dim)), sum(exp(...), dim))`` with every intermediate used only inside."""
    users = list(x.users)
    if len(users) == 1 and is_op(users[0], aten._softmax, aten.softmax):
        sm = users[0]
        return _Softmax(x, sm, sm.args[1], [sm])
    amax = [u for u in users if is_op(u, aten.amax) and u.args[0] is x]
    if len(amax) != 1 or len(users) != 2:
        return None
    amax = amax[0]
    sub = next((u for u in users if is_op(u, aten.sub) and u.args[:2] == (x, amax) and u.kwargs.get("alpha", 1) == 1),
               None)
    exp = sub and sole_user(sub)
    if exp is None or len(amax.users) != 1 or not is_op(exp, aten.exp) or len(exp.users) != 2:
        return None
    total = next((u for u in exp.users if is_op(u, aten.sum) and u.args[0] is exp), None)
    div = total and sole_user(total)
    if (div is None or not is_op(div, aten.div) or div.args[:2] != (exp, total) or div not in exp.users
            or div.kwargs.get("rounding_mode") is not None):
        return None
    dims = list(amax.args[1]) if len(amax.args) > 1 else []
    keep = (amax.args[2] if len(amax.args) > 2 else False) and (total.args[2] if len(total.args) > 2 else False)
    if len(dims) != 1 or list(total.args[1]) != dims or not keep:
        return None
    return _Softmax(x, div, dims[0], [amax, sub, exp, total, div])


def _shield_softmax(graph: fx.Graph, softmax: _Softmax) -> None:
    """Recompute ``softmax`` (over a dim d other than the last of its n-d input) on the input with d and the last
    dim swapped, and swap them back after: the same values, op for op (the same softmax op, or the same
    amax/sub/exp/sum/div decomposition), but no longer the chain Inductor's SDPA patterns look for."""
    ndim = len(shape_of(softmax.input))
    dim, perm = softmax.dim % ndim, list(range(ndim))
    perm[dim], perm[-1] = perm[-1], perm[dim]
    single = softmax.nodes[0] if len(softmax.nodes) == 1 else None

    def last_dim_softmax(x: torch.Tensor) -> torch.Tensor:
        xt = x.permute(perm)
        if single is not None:  # _softmax(x, dim, half_to_float) / softmax(x, dim, dtype)
            out = single.target(xt, -1, *single.args[2:], **single.kwargs)
        else:
            e = torch.exp(xt - torch.amax(xt, [-1], keepdim=True))
            out = e / torch.sum(e, [-1], keepdim=True)
        return out.permute(perm)

    with graph.inserting_before(softmax.output):
        [out], inserted = graph_utils.insert_traced(graph, last_dim_softmax, [softmax.input], written=())
    softmax.output.replace_all_uses_with(out)
    erase_dead(graph, softmax.nodes)
    copy_stack_trace(softmax.nodes, inserted)


def _ops_ahead(node: fx.Node, packets, depth: int = 6) -> list[fx.Node]:
    """The calls of ``packets`` within ``depth`` ops downstream of ``node``."""
    found, frontier = [], [node]
    for _ in range(depth):
        frontier = [u for n in frontier for u in n.users]
        found += [u for u in frontier if is_op(u, *packets)]
    return found


def _attention_ahead(node: fx.Node) -> bool:
    """Is there a softmax and then a bmm downstream of the scores ``node``? Misses are reported only then."""
    return any(_ops_ahead(sm, (aten.bmm,), depth=10) for sm in _ops_ahead(node, _SOFTMAX_OPS))


# --------------------------------------------------------------------------------------------- operands


def _unflatten(flat: fx.Node, prep: list, report: bool = True) -> fx.Node:
    """The tensor [*batch, M, K] that bmm operand ``flat`` [N, M, K] flattens (``matmul``'s expand/clone/view);
    ``flat`` itself when the bmm was called on 3-D tensors."""
    node = _skip_identity(flat, prep)
    if node.op == "call_function" and is_op(node, *_FLATTEN):
        prep.append(node)
        src = _skip_identity(node.args[0], prep)
        src_shape, flat_shape = shape_of(src), shape_of(flat)
        if len(src_shape) >= 3 and same_shape(src_shape[-2:], flat_shape[-2:]):
            return src
        raise _Miss(flat, f"a bmm operand {_fmt(flat_shape)} is not a flattened [*batch, M, K] tensor "
                    f"(it views {_fmt(src_shape)})", report)
    return node


def _strip_transpose(kt: fx.Node, prep: list) -> fx.Node | None:
    """k for ``kt = k.transpose(-2, -1)`` (a permute swapping the last two dims), else None."""
    if is_op(kt, aten.permute):
        n = len(kt.args[1])
        if [d % n for d in kt.args[1]] == [*range(n - 2), n - 1, n - 2]:
            prep.append(kt)
            return kt.args[0]
    if is_op(kt, aten.transpose):
        n = len(shape_of(kt))
        if sorted(d % n for d in kt.args[1:3]) == [n - 2, n - 1]:
            prep.append(kt)
            return kt.args[0]
    return None


def _flattened_then_transposed(kt: fx.Node, batch: tuple, prep: list) -> fx.Node | None:
    """k [*batch, Sk, D] when the bmm operand ``kt`` [N, D, Sk] transposes k flattened to [N, Sk, D] (Bloom's
    ``key.reshape(B * H, Sk, D).transpose(1, 2)``, the same values as flattening k^T), else None."""
    if len(batch) < 2 or len(shape_of(kt)) != 3:
        return None
    seen: list = []
    inner = _strip_transpose(kt, seen)
    if inner is None or not is_op(_skip_identity(inner, []), *_FLATTEN):
        return None
    k = _unflatten(inner, seen)
    if not same_shape(shape_of(k)[:-2], batch):
        return None
    prep.extend(seen)
    return k


def _repeat_kv_source(node: fx.Node, prep: list) -> tuple[fx.Node, int] | None:
    """(kv [B, Hkv, S, D], n_rep) when ``node`` [B, Hkv*n_rep, S, D] is HF's repeat_kv of kv:
    ``kv[:, :, None].expand(B, Hkv, n_rep, S, D).reshape(B, Hkv*n_rep, S, D)``, or a dtype cast of that (autocast
    casts SDPA's operands: the cast of the copies is the copies of the cast, so ``_sdpa`` casts kv instead)."""
    seen: list = []
    flat = _skip_identity(node, seen)
    cast = dtype_cast(flat)
    if cast is not None and all(d is not None and d.is_floating_point for d in (dtype_of(cast[0]), cast[1])):
        seen.append(flat)
        flat = _skip_identity(cast[0], seen)
    if not is_op(flat, *_FLATTEN) or len(shape_of(flat)) != 4:
        return None
    expand = _skip_identity(flat.args[0], seen)
    if not is_op(expand, aten.expand) or len(shape_of(expand)) != 5:
        return None
    unsq = _skip_identity(expand.args[0], seen)
    if not is_op(unsq, aten.unsqueeze) or unsq.args[1] % 5 != 2:
        return None
    kv = _skip_identity(unsq.args[0], seen)
    b, hkv, rep, s, d = shape_of(expand)
    if not (same_shape(shape_of(kv), (b, hkv, s, d)) and same_shape(shape_of(flat), (b, hkv * rep, s, d))):
        return None
    if not isinstance(rep, int):
        return None
    prep.extend([*seen, flat, expand, unsq])
    return kv, rep


def _repeat_kv_pair(k: fx.Node, v: fx.Node) -> tuple[fx.Node, fx.Node, int, list] | None:
    """(k_src, v_src, n_rep, the repeat_kv ops) when both K and V are ``repeat_kv`` of same-batch/heads sources
    repeated alike."""
    prep: list = []
    k_src, v_src = _repeat_kv_source(k, prep), _repeat_kv_source(v, prep)
    if k_src and v_src and k_src[1] == v_src[1] and same_shape(shape_of(k_src[0])[:2], shape_of(v_src[0])[:2]):
        return k_src[0], v_src[0], k_src[1], prep
    return None


# --------------------------------------------------------------------------------------------- the match


def _match(bmm1: fx.Node, grad_enabled: bool, made: list[fx.Node]) -> _Attention:
    """Match the attention starting at the scores ``bmm1`` (a bmm, or Bloom's ALiBi ``baddbmm``); raises ``_Miss``
    when it is not one we can rewrite. ``made``: collects the nodes the match inserts (the caller erases them
    if the rewrite does not fire)."""
    chain: list[fx.Node] = [bmm1]
    prep: list[fx.Node] = []
    try:
        q = _unflatten(_scores_operands(bmm1)[0], prep, report=False)
    except _Miss as miss:  # reported only where a softmax and a bmm with V follow: attention the matcher cannot read
        miss.reason, miss.report = miss.reason + _EINSUM_HINT, _attention_ahead(bmm1)
        raise
    batch = shape_of(q)[:-2]

    attn = _Attention(q=q, k=q, v=q, output=bmm1, chain=chain, made=made)
    if is_op(bmm1, aten.baddbmm):
        _baddbmm_terms(bmm1, attn)
    node = _scores_in_batch_dims(bmm1, batch, attn, grad_enabled) if len(batch) > 1 else bmm1
    softmax = _walk_scores(node, attn, grad_enabled)
    attn.softmax = softmax.output
    scores_ndim = len(shape_of(softmax.input))
    if softmax.dim % scores_ndim != scores_ndim - 1:
        if not _ops_ahead(softmax.output, (aten.bmm,), depth=10):
            _walk_weights(softmax.output, attn, grad_enabled)  # its own miss, unless a bmm with V is further on
        # whatever follows the softmax, Inductor's SDPA patterns must not see it: apply() shields it
        raise _Miss(softmax.output, f"softmax over dim {softmax.dim}, not the last dim: SDPA normalises over the "
                                    "keys; moved onto transposed scores, so that Inductor's own SDPA rewrite, which "
                                    "ignores the softmax dim (pytorch/pytorch#196468), cannot match it either",
                    shield=softmax)
    bmm2 = _walk_weights(softmax.output, attn, grad_enabled)
    _match_operands(bmm1, bmm2, batch, attn, prep)
    _check(attn)
    attn.chain.extend(prep)  # erased once dead; kept where something else still uses them
    return attn


def _scores_operands(bmm1: fx.Node) -> tuple[fx.Node, fx.Node]:
    """(q, k^T) as ``bmm1`` multiplies them: bmm(q, kt), or baddbmm(bias, q, kt)."""
    return tuple(bmm1.args[1:3]) if is_op(bmm1, aten.baddbmm) else tuple(bmm1.args[:2])


def _baddbmm_terms(bmm1: fx.Node, attn: _Attention) -> None:
    """Bloom's ALiBi scores ``baddbmm(bias, q, kt, beta=1, alpha=a)`` [N, Sq, Sk] are ``bmm(q, kt) * a + bias``: the
    scale a, then the additive term bias (broadcastable to [N, Sq, Sk]; ``_scores_in_batch_dims`` views it to the
    query's batch dims with the scores)."""
    beta, alpha = bmm1.kwargs.get("beta", 1), bmm1.kwargs.get("alpha", 1)
    if beta != 1:
        raise _Miss(bmm1, f"baddbmm with beta={beta}: its bias is scaled, which SDPA's mask is not")
    if not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha == 0:
        raise _Miss(bmm1, f"baddbmm with alpha={alpha}: not a finite, non-zero scale")
    if alpha != 1:
        _check_scale_direction(bmm1, float(alpha), attn)
        attn.scale *= float(alpha)
    bias = bmm1.args[0]
    if not isinstance(bias, fx.Node) or not shape_of(bias):
        raise _Miss(bmm1, "baddbmm adds a number, not a tensor: not a mask")
    attn.mask.append(_MaskTerm("add", bias))


def _scores_in_batch_dims(bmm1: fx.Node, batch: tuple, attn: _Attention, grad_enabled: bool) -> fx.Node:
    """The scores [*batch, Sq, Sk]: ``bmm1``'s [N, Sq, Sk] (N = prod(batch)) viewed back to the query's batch dims.
    Scale and mask ops may come before that view (DeBERTa adds its relative-position bias [N, Sq, Sk] to the flat
    scores; Bloom's baddbmm adds ALiBi's): their mask terms are viewed to the batch dims too, as the scores are."""
    node = bmm1
    for _ in range(_MAX_CHAIN):
        user = sole_user(node)
        if user is not None and is_op(user, *_FLATTEN) and same_shape(shape_of(user), (*batch, *shape_of(node)[1:])):
            for term in attn.mask:  # all added before the view (the walk to the softmax starts there)
                term.tensor = _per_batch(term.tensor, batch, attn, before=user, what="mask")
            attn.chain.append(user)
            return user
        if user is None or _softmax_at(node) is not None:
            break
        try:
            _scores_op(user, node, attn)
        except _Miss as miss:
            if node is bmm1 and is_op(user, *_FLATTEN, *_RESHAPING):  # einsum's 5-d views: the hint below
                break
            miss.report = miss.report and _attention_ahead(node)  # an op SDPA cannot express: that is the reason
            raise
        attn.chain.append(user)
        node = user
    raise _Miss(bmm1, "the scores bmm is not viewed back to the query's batch dims" + _EINSUM_HINT,
                report=_attention_ahead(bmm1))


def _per_batch(node: fx.Node, batch: tuple, attn: _Attention, before: fx.Node, what: str) -> fx.Node:
    """``node`` as it broadcasts against a bmm's [N, M, K] (N = prod(batch)), viewed to broadcast the same way
    against [*batch, M, K]: a 3-d tensor with N rows is reshaped to [*batch, M', K'] (row-major, as the query
    was flattened, so bmm's n-th matrix is batch index n's); one with a single row, or fewer dims, is left as it
    is. The reshape (and the symbolic sizes it reads) is inserted before ``before``, into ``attn.made``."""
    shape = shape_of(node)
    if not (len(shape) == 3 and known_equal(shape[0], math.prod(batch))):
        if len(shape) < 3 or known_equal(shape[0], 1):
            return node
        raise _Miss(node, f"the {what} {_fmt(shape)} does not have one row per matrix of the flattened "
                          f"{_fmt(batch)} batch")
    graph = node.graph
    with graph.inserting_before(before):
        sizes = [graph_utils.size_arg(graph, n, d, attn.made) for n, d in
                 [*((attn.q, i) for i in range(len(batch))), (node, 1), (node, 2)]]
        reshaped = linears.FakeEval(val(node)).call(graph, aten.reshape.default, node, sizes)
    attn.made.append(reshaped)
    return reshaped


def _users_miss(node: fx.Node, what: str, grad_enabled: bool) -> _Miss:
    if grad_enabled:
        return _Miss(node, f"autograd is on and the backward pass reads the attention {what}: compile under "
                           "torch.no_grad() / torch.inference_mode() (or eval) to get SDPA")
    return _Miss(node, f"the attention {what} have another user (e.g. output_attentions=True, or they are "
                       "returned): SDPA never materialises them")


def _walk_scores(node: fx.Node, attn: _Attention, grad_enabled: bool) -> _Softmax:
    """Walk from the scores to the softmax, collecting the scale and the mask terms."""
    for _ in range(_MAX_CHAIN):
        softmax = _softmax_at(node)
        if softmax is not None:
            attn.chain.extend(softmax.nodes)
            return softmax
        user = sole_user(node)
        if user is None:
            if not _attention_ahead(node):
                raise _Miss(node, "scores have several users", report=False)
            raise _users_miss(node, "scores", grad_enabled)
        back = _reshape_round_trip(user, node)
        if back is not None:
            attn.chain.extend([user, back])
            node = back
            continue
        try:
            _scores_op(user, node, attn)
        except _Miss as miss:
            miss.report = miss.report and _attention_ahead(node)
            raise
        attn.chain.append(user)
        node = user
    raise _Miss(node, "too many ops between the scores and the softmax", report=False)


def _reshape_round_trip(op: fx.Node, prev: fx.Node) -> fx.Node | None:
    """The second of two reshapes that take the scores ``prev`` to another shape and straight back, or None.

    Functionalisation writes one when the model adds to its scores in place (transformers 4.x T5's ``scores +=
    position_bias``, the scores being a view of the bmm's 3-d output): [B, H, S, S] -> [B*H, S, S] -> [B, H, S, S].
    Row-major reshapes compose, so the pair leaves every value where it was."""
    back = sole_user(op) if is_op(op, *_FLATTEN) and op.args[0] is prev else None
    if back is None or not is_op(back, *_FLATTEN) or back.args[0] is not op:
        return None
    return back if same_shape(shape_of(back), shape_of(prev)) else None


def _scores_op(op: fx.Node, prev: fx.Node, attn: _Attention) -> None:
    """Record what ``op`` (applied to the scores ``prev``) does, or raise ``_Miss``."""
    shape = shape_of(prev)
    if _is_identity(op) and op.args[0] is prev:
        return
    if is_op(op, prims.convert_element_type, aten._to_copy):
        src, dst = dtype_of(prev), dtype_of(op)
        if dst != torch.float32 or src not in (torch.float16, torch.bfloat16):  # SDPA's softmax runs in fp32
            raise _Miss(op, f"the scores are cast from {src} to {dst} before the softmax (only an fp32 upcast of "
                            "fp16/bf16 scores matches SDPA)")
        return
    if is_op(op, aten.mul, aten.div):
        other = op.args[1] if op.args[0] is prev else op.args[0]
        if is_op(op, aten.div) and op.args[0] is not prev:
            raise _Miss(op, "the scores are the divisor of a div")
        if op.kwargs.get("rounding_mode") is not None:  # floor(s / c) or trunc(s / c): not a scale
            raise _Miss(op, f"the scores are divided with rounding_mode={op.kwargs['rounding_mode']!r}, which "
                            "SDPA's scale does not round")
        if attn.mask:
            raise _Miss(op, "the scores are scaled after the mask is added: SDPA scales before adding the mask")
        number = _const_scalar(other)
        if number is not None and (not math.isfinite(number) or (number == 0 and is_op(op, aten.div))):
            raise _Miss(op, f"the scores are {'divided' if is_op(op, aten.div) else 'multiplied'} by {number}")
        if attn.tanh is not None:  # after the softcapping tanh: its cap
            if number is None:
                raise _Miss(op, "the softcapped scores are scaled by a tensor, not by a constant cap")
            attn.softcap *= number if is_op(op, aten.mul) else 1.0 / number
            return
        if number is not None:
            factor = number if is_op(op, aten.mul) else 1.0 / number
            _check_scale_direction(op, factor, attn)
            attn.scale *= factor
        elif _is_0d_tensor(other):
            attn.scale_tensors.append(("mul" if is_op(op, aten.mul) else "div", other))
        else:
            raise _Miss(op, f"the scores are scaled by a tensor of shape {_fmt(shape_of(other))}, not a scalar")
        return
    if is_op(op, aten.add) and op.kwargs.get("alpha", 1) == 1 and len(op.args) == 2:
        other = op.args[1] if op.args[0] is prev else op.args[0]
        if not isinstance(other, fx.Node) or not isinstance(val(other), torch.Tensor) or other is prev:
            raise _Miss(op, "the scores are added to a constant or to themselves, not to a mask")
        _check_broadcast(op, prev, other)
        attn.mask.append(_MaskTerm("add", other))
        return
    if is_op(op, aten.where) and len(op.args) == 3 and prev in op.args[1:]:
        keep = op.args[1] is prev
        _check_broadcast(op, prev, op.args[0])
        attn.mask.append(_MaskTerm("keep" if keep else "fill", op.args[0], _mask_fill(op, op.args[2 if keep else 1])))
        return
    if is_op(op, aten.masked_fill) and op.args[0] is prev:
        _check_broadcast(op, prev, op.args[1])
        attn.mask.append(_MaskTerm("fill", op.args[1], _mask_fill(op, op.args[2])))
        return
    if is_op(op, aten.tanh) and op.args[0] is prev and not attn.mask and attn.tanh is None:
        attn.tanh, attn.softcap = op, 1.0  # logit softcapping: the decode kernel takes it (see _check_softcap)
        return
    what = op_name(op)
    if is_op(op, aten.tanh):
        what += " (logit softcapping)"
    raise _Miss(op, f"{what} between the attention scores {_fmt(shape)} and the softmax cannot be expressed by SDPA")


def _check_scale_direction(op: fx.Node, factor: float, attn: _Attention) -> None:
    """Constant factors fold into one scale only when they all enlarge the scores or all shrink them: then no step
    of eager's product overflows or underflows where the folded scale would not (``* 1e38 * 1e-38`` is inf in
    eager for scores above 3.4, and a scale of 1.0 folded)."""
    if abs(factor) == 1.0:
        return
    grows = abs(factor) > 1.0
    if attn.scale_grows is not None and attn.scale_grows != grows:
        raise _Miss(op, f"the scores are scaled both up and down by constants (by {attn.scale:g}, then {factor:g}): "
                        "folded into one scale, a step that overflows or underflows in eager would not")
    attn.scale_grows = grows


def _check_softcap(attn: _Attention) -> None:
    """Softcapped scores (``cap * tanh(scores * scale)``, before the mask) only go to the decode kernel: SDPA has
    no softcap."""
    if attn.tanh is None:
        return
    if not attn.decode:
        raise _Miss(attn.tanh, f"aten.tanh (logit softcapping) between the attention scores "
                               f"{_fmt(shape_of(attn.tanh))} and the softmax cannot be expressed by SDPA (the decode "
                               f"kernel takes it at q_len <= {DECODE_MAX_QUERY})")
    if attn.scale_tensors or not attn.softcap:
        raise _Miss(attn.tanh, "softcapped scores with a runtime scale or a zero cap: not folded")


def _check_broadcast(op: fx.Node, scores: fx.Node, other: fx.Node) -> None:
    if not same_shape(shape_of(op), shape_of(scores)):
        raise _Miss(op, f"the mask {_fmt(shape_of(other))} does not broadcast to the scores {_fmt(shape_of(scores))}")


def _mask_fill(op: fx.Node, fill) -> float:
    """The fill of a where/masked_fill mask, rounded to the scores' dtype as the op rounds it (bf16 holds
    ``finfo(float32).min`` as -inf); only -inf or the most negative finite value of that dtype make
    ``where(c, s, fill)`` equal to ``s + where(c, 0, fill)``."""
    value = _const_scalar(fill)
    dtype = dtype_of(op)
    value = value if value is None or not dtype.is_floating_point else _as_dtype(value, dtype)
    if value is None or not (value == -math.inf or value == torch.finfo(dtype).min):
        shown = "a tensor" if value is None else value
        raise _Miss(op, f"masked scores are filled with {shown}; SDPA needs -inf or torch.finfo({dtype}).min")
    return value


# the dtypes the attention weights may pass through on their way to attn @ V in the key's dtype: that dtype or a
# wider float (HF: the fp32 softmax's output cast to bf16), never one that rounds them more than SDPA does
_WIDER = {torch.float16: (torch.float32, torch.float64), torch.bfloat16: (torch.float32, torch.float64),
          torch.float32: (torch.float64,)}


def _walk_weights(node: fx.Node, attn: _Attention, grad_enabled: bool) -> fx.Node:
    """Walk from the softmax output to the bmm with V (through casts, eval-mode dropout, matmul's expand/view)."""
    dtypes = [(node, dtype_of(node))]
    for _ in range(_MAX_CHAIN):
        user = sole_user(node)
        if user is None:
            raise _users_miss(node, "weights (softmax output)", grad_enabled)
        if is_op(user, aten.bmm) and user.args[0] is node:
            final = dtype_of(node)
            narrow = next(((n, d) for n, d in dtypes if d != final and d not in _WIDER.get(final, ())), None)
            if narrow is not None:
                raise _Miss(narrow[0], f"the attention weights are held in {narrow[1]} on their way to attn @ V in "
                                       f"{final}: SDPA would not round them so")
            attn.chain.append(user)
            return user
        ok = _is_identity(user) or is_op(user, prims.convert_element_type, aten._to_copy)
        after = sole_user(user)
        if is_op(user, *_FLATTEN) and after is not None and is_op(after, aten.bmm):
            ok = same_shape(shape_of(user)[-2:], shape_of(node)[-2:])
        elif is_op(user, *_FLATTEN) and any(is_op(u, aten.bmm) and u.args[0] is user for u in user.users):
            # matmul's view of the weights feeds attn @ V and something else (autograd's dV = P^T dO, or a
            # returned tensor): the view is fine, its other user is what SDPA cannot keep
            raise _users_miss(user, "weights (softmax output)", grad_enabled)
        if not ok:
            if not _ops_ahead(node, (aten.bmm,)):
                raise _Miss(node, "softmax output does not feed a bmm", report=False)
            hint = " (dropout with p>0 in training mode? call model.eval())" if is_op(user, aten.mul) else ""
            raise _Miss(user, f"{op_name(user)} between the softmax and attn @ V{hint} cannot be expressed by SDPA")
        attn.chain.append(user)
        dtypes.append((user, dtype_of(user)))
        node = user
    raise _Miss(node, "too many ops between the softmax and attn @ V", report=False)


def _match_operands(bmm1: fx.Node, bmm2: fx.Node, batch: tuple, attn: _Attention, prep: list) -> None:
    """Find q, k, v behind the bmm operands, GQA's repeat_kv, and the output view."""
    kt = _unflatten(_scores_operands(bmm1)[1], prep)
    vv = _unflatten(bmm2.args[1], prep)
    k4 = _flattened_then_transposed(kt, batch, prep)
    if len(batch) > 1:  # a flat operand the matcher cannot trace to [*batch, ...] (DeBERTa's k.mT / scale): view it
        kt = kt if k4 is not None or len(shape_of(kt)) != 3 else _per_batch(kt, batch, attn, bmm1, "key operand")
        vv = vv if len(shape_of(vv)) != 3 else _per_batch(vv, batch, attn, bmm2, "value operand")
    for name, t in (("key", k4 if k4 is not None else kt), ("value", vv)):
        if not same_shape(shape_of(t)[:-2], batch):
            raise _Miss(t, f"the {name} batch dims {_fmt(shape_of(t)[:-2])} differ from the query's {_fmt(batch)} "
                           "(a broadcasting matmul)")
    k = k4 if k4 is not None else _strip_transpose(kt, prep)
    attn.k, attn.k_is_transposed = (k, False) if k is not None else (kt, True)
    attn.v = vv

    output = bmm2
    if len(batch) > 1:
        output = sole_user(bmm2)
        want = (*batch, *shape_of(bmm2)[-2:])
        if output is None or not is_op(output, *_FLATTEN) or not same_shape(shape_of(output), want):
            raise _Miss(bmm2, "attn @ V is not viewed back to the query's batch dims")
        attn.chain.append(output)
    attn.output = output

    if len(batch) == 2 and not attn.k_is_transposed:
        pair = _repeat_kv_pair(attn.k, attn.v)
        if pair:
            k_src, v_src, attn.repeat, kv_prep = pair
            attn.kv_sources = (k_src, v_src, kv_prep)  # used or not once the mask is known


def _check(attn: _Attention) -> None:
    """Preconditions that SDPA must meet to compute exactly what the graph computes."""
    q, k, v = (val(n) for n in (attn.q, attn.k, attn.v))
    if not (q.dtype == k.dtype == v.dtype):
        raise _Miss(attn.output, f"query/key/value dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")
    if not q.dtype.is_floating_point:
        raise _Miss(attn.output, f"attention in {q.dtype}: SDPA needs floating point")
    if not (q.device == k.device == v.device):
        raise _Miss(attn.output, f"query/key/value live on different devices ({q.device}, {k.device}, {v.device})")
    if dtype_of(attn.output) != q.dtype:
        raise _Miss(attn.output, f"the attention output is {dtype_of(attn.output)}, not the query dtype {q.dtype}")
    for term in attn.mask:
        t = val(term.tensor)
        if term.kind == "add" and t.dtype != q.dtype:
            why = _why_not_only_blocks(term.tensor) if (q.dtype, t.dtype) == (torch.bfloat16, torch.float32) else (
                "only a bf16 query with an fp32 mask is carried over")
            if why is not None:
                raise _Miss(term.tensor, f"the additive mask is {t.dtype} but the query is {q.dtype} (as under "
                                         "torch.autocast, which casts q but not the model's mask): rewritten only "
                                         "when the graph builds it from 0 and finfo(float32).min / -inf alone, as "
                                         f"transformers does, and the query is bf16; here {why}")
        if term.kind != "add" and t.dtype != torch.bool:
            raise _Miss(term.tensor, f"the where/masked_fill condition is {t.dtype}, not bool")
        if t.device != q.device:
            raise _Miss(term.tensor, f"the mask lives on {t.device}, the query on {q.device}")
    attn.decode = _decode_sized(q)


# On the H200 a decode step (q_len = 1 over a static KV cache) ran slower with SDPA than with what stock Inductor
# makes of the eager form (llama-1b decode-1024 with CUDA graphs: 2.43 ms vs 1.83 ms;
# benchmarks/results/e2e_decode_h200_torch2.11.0.json): with a mask, SDPA's memory-efficient kernel needs
# K/V repeated to all heads, a copy of the whole cache every step. So static query lengths up to this bound
# get our decode kernel instead (GQA in-kernel, the cache read once per KV head).
DECODE_MAX_QUERY = decode_kernel.MAX_QUERY
# The decode kernel computes the scores, the softmax and P @ V in fp32: fp64 attention keeps fp64 (SDPA computes
# it in fp64; the kernel was 2.6e-7 off fp64 eager, an fp32 rounding, found by session 42's tenth audit).
_DECODE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _decode_sized(q: torch.Tensor) -> bool:
    """Whether attention over the (fake) query q [B, H, Sq, D] (or [N, Sq, D]) goes to the decode kernel."""
    sq = q.shape[-2]
    if not isinstance(sq, int) or sq > DECODE_MAX_QUERY or q.dim() not in (3, 4) or q.dtype not in _DECODE_DTYPES:
        return False
    return q.device.type == "cuda" or decode_policy() == "always"


# --------------------------------------------------------------------------------------------- causal masks


def _constant_subgraph(node: fx.Node) -> list[fx.Node] | None:
    """The nodes computing ``node`` in topological order, if none of them reads a graph input, a random
    number generator or uninitialised memory, and all shapes are static (e.g. a mask built from ``arange``).
    Constants the tracer lifted out of the model's code count as constant (``graph_utils.lifted_constant``)."""
    order: list[fx.Node] = []
    seen: set[fx.Node] = set()

    def visit(n: fx.Node) -> bool:
        if n in seen:
            return True
        seen.add(n)
        if len(seen) > _MAX_CONST_NODES:
            return False
        constant = graph_utils.lifted_constant(n)
        if constant is not None:
            order.append(n)
            return constant.numel() <= _MAX_CONST_NUMEL
        if not graph_utils.deterministic_op(n):
            return False
        t = val(n)
        if isinstance(t, torch.Tensor) and (
            any(not isinstance(s, int) for s in t.shape) or t.numel() > _MAX_CONST_NUMEL
        ):
            return False
        if not all(visit(i) for i in n.all_input_nodes):
            return False
        order.append(n)
        return True

    return order if visit(node) else None


def _constant_mask_kind(attn: _Attention, q_len, k_len, proofs: dict) -> str | None:
    """For a single mask term that is a compile-time constant: "none" when it allows every key (e.g. an HF
    decode step), "causal" when it allows exactly key j <= query i (SDPA's is_causal, top-left aligned), each
    blocking the rest with -inf / the dtype's minimum; None otherwise (the mask is passed to SDPA).
    ``proofs`` keeps each answer for the rest of the pass: every layer reads the same mask, and evaluating it
    once per layer ([8, 1, 2048, 2048] x 32 layers) costs compile time for nothing."""
    if len(attn.mask) != 1 or not isinstance(q_len, int) or not isinstance(k_len, int):
        return None
    term = attn.mask[0]
    key = (term.tensor, term.kind, q_len, k_len)
    if key not in proofs:
        proofs[key] = _prove_mask_kind(term, q_len, k_len)
    return proofs[key]


def _constant_value(node: fx.Node) -> torch.Tensor | None:
    """``node``'s value, computed now on real tensors, when ``_constant_subgraph`` finds it a compile-time
    constant; else None."""
    nodes = _constant_subgraph(node)
    return None if nodes is None else graph_utils.run_nodes(nodes, {})[node]


def _prove_mask_kind(term: _MaskTerm, q_len: int, k_len: int) -> str | None:
    value = _constant_value(term.tensor)  # the mask's ops on real tensors, once, at compile time
    if value is None:
        return None
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        if term.kind == "add":
            blocked = (value == -math.inf) | (value <= torch.finfo(value.dtype).min)
            if not torch.equal(blocked, value != 0):
                return None  # some entries are neither 0 nor blocked: a real bias
            allowed = value == 0
        else:
            allowed = value if term.kind == "keep" else ~value
        causal = torch.ones(q_len, k_len, dtype=torch.bool, device=value.device).tril()
        try:
            shape = torch.broadcast_shapes(allowed.shape, causal.shape)
        except RuntimeError:
            return None
        if bool(allowed.all()):
            return "none"
        if torch.equal(allowed.expand(shape), causal.expand(shape)):
            return "causal"
    return None


def _decide_mask_and_gqa(attn: _Attention, proofs: dict) -> None:
    q_len, k_len = shape_of(attn.q)[-2], shape_of(attn.k)[-1 if attn.k_is_transposed else -2]
    kind = _constant_mask_kind(attn, q_len, k_len, proofs) if attn.mask else None
    if kind is not None:
        attn.mask, attn.is_causal, attn.mask_dropped = [], kind == "causal", kind
    if attn.decode and not _fits_decode_kernel(attn, q_len):
        attn.decode = False  # SDPA as for longer queries
    sources = attn.kv_sources
    if sources is None:
        return
    # SDPA's GQA keeps K/V un-repeated. Whether a fused kernel takes GQA (with a mask: CPU's flash, cuDNN on the
    # H200; not CUDA's flash) shows when the replacement is traced: _insert_sdpa_or_repeated falls back then.
    attn.repeated_kv = (attn.k, attn.v, len(attn.chain))
    attn.k, attn.v, kv_prep = sources
    attn.enable_gqa = True
    attn.chain.extend(kv_prep)


def _may_block_rows_with_inf(attn: _Attention, proofs: dict) -> bool:
    """Whether the mask that stays may block every key of some row with -inf (eager's softmax: NaN there): a
    where-mask filling -inf, a constant additive mask holding -inf, an additive mask the graph builds with ops
    that may make -inf (``_built_with_minus_inf``), or an additive mask added to earlier mask terms (the sum may
    overflow). An additive mask read as it is from an input, alone, is taken to block with finite values
    (transformers fills with ``finfo(dtype).min``); a row of -inf there gives 0."""
    for i, term in enumerate(attn.mask):
        if term.kind != "add":
            if term.fill == -math.inf:
                return True
            continue
        if i > 0:  # summed with the terms before it: two finite minimums make -inf (fp32: -3.4e38 * 2)
            return True
        key = ("-inf", term.tensor)
        if key not in proofs:
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            value = _constant_value(term.tensor)
            with unset_fake_temporarily():
                proofs[key] = (bool((value == -math.inf).any()) if value is not None
                               else _built_with_minus_inf(term.tensor))
        if proofs[key]:
            return True
    return False


# ops whose output values are taken from their inputs' (or set to 0): for each, the positions of the arguments
# that give values (a list argument: each of its elements); the other arguments are indices, sizes or conditions
_VALUE_ARGS = {**{op: (0,) for op in (*_FLATTEN, aten.expand, aten.slice, aten.select, aten.unsqueeze,
                                      aten.squeeze, aten.permute, aten.transpose, aten.t, aten.clone,
                                      aten.contiguous, aten.alias, aten.lift_fresh_copy, aten.index_select,
                                      aten.index, aten.gather, aten.repeat, aten.flip, prims.rev, aten.tril, aten.triu,
                                      aten.cat, aten.stack)},
               aten.where: (1, 2), aten.masked_fill: (0, 2), aten.minimum: (0, 1), aten.maximum: (0, 1),
               aten.slice_scatter: (0, 1), aten.select_scatter: (0, 1), aten.copy: (1,), aten.fill: (1,),
               aten.full: (1,), aten.full_like: (1,), aten.new_full: (2,), aten.scalar_tensor: (0,),
               aten.constant_pad_nd: (0, 2), aten.zeros: (), aten.zeros_like: (), aten.new_zeros: ()}


# Ops each of whose output values is one of their inputs' values or scalars (or a comparison's bool): a mask built
# from these alone holds -inf only where an input, a scalar or a lifted constant does, as the narrowest float dtype
# on its way to the mask stores it. Arithmetic (two fills of the minimum summed, ``min * 10``, ``log(0)``, a negated
# +inf) makes -inf from finite values; so may any op not listed.
_SELECTING = (*_VALUE_ARGS, aten.ones, aten.ones_like, aten.new_ones, aten.clamp)


def _fits(src: torch.dtype, dst: torch.dtype) -> bool:
    """Whether every value of ``src`` is finite in the float ``dst`` (no cast from one to the other overflows)."""
    if src == torch.bool:
        return True
    if src.is_complex:
        return False
    info = torch.finfo(src) if src.is_floating_point else torch.iinfo(src)
    return info.max <= torch.finfo(dst).max


def _built_with_minus_inf(mask: fx.Node) -> bool:
    """Whether the ops computing ``mask`` from the graph's inputs may make -inf, in the narrowest float dtype the
    values pass through on their way to the mask (fp32's minimum cast to bf16 is -inf): a scalar or a lifted
    constant that is -inf there, an input or integer that does not fit it, or any float op that is not in
    ``_SELECTING`` or a cast (it may overflow). Inputs read as they are, in the mask's dtype, are taken to hold
    no -inf."""
    stack, seen = [(mask, dtype_of(mask))], set()
    while stack:
        node, narrow = stack.pop()
        dtype = dtype_of(node)
        if (node, narrow) in seen or dtype is None or not dtype.is_floating_point:
            continue  # a bool / integer / size value: no -inf in it (an integer cast to a float is checked there)
        seen.add((node, narrow))
        narrow = dtype if _fits(dtype, narrow) else narrow
        if node.op == "placeholder" or (node.op == "get_attr" and graph_utils.lifted_constant(node) is None):
            if not _fits(dtype, narrow):  # an input cast to a narrower float: its minimum may become -inf
                return True
            continue
        constant = graph_utils.lifted_constant(node)
        if constant is not None:
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                if bool((constant.to(narrow) == -math.inf).any()):
                    return True
            continue
        if node.op != "call_function":
            continue
        if is_op(node, prims.convert_element_type, aten._to_copy):
            src = dtype_of(node.args[0])
            if src is None or (not src.is_floating_point and not _fits(src, narrow)):
                return True  # an integer past the float's range
        elif not is_op(node, *_SELECTING):
            return True
        scalars: list[float] = []  # ints too: full(size, -70000) in fp16 is -inf
        torch.fx.node.map_aggregate((node.args, node.kwargs), lambda x: scalars.append(x) if isinstance(
            x, (int, float)) and not isinstance(x, bool) else None)
        if any(_as_dtype(_as_dtype(x, dtype), narrow) == -math.inf for x in scalars):
            return True
        stack.extend((n, narrow) for n in node.all_input_nodes)
    return False


def _why_not_only_blocks(mask: fx.Node) -> str | None:
    """None when every value of the float ``mask`` is provably 0, -inf or its dtype's minimum (what transformers
    builds: ``where(allowed, 0, finfo.min)``): the graph makes it from scalars and lifted constants of those values
    through ops that only place them (``_VALUE_ARGS``; not arithmetic: ``-inf * False`` is NaN). Else why not,
    for the near miss. Such a mask blocks the same keys in any float dtype once each minimum becomes that dtype's
    minimum."""
    dtype = dtype_of(mask)
    minimum = torch.finfo(dtype).min
    allowed = {0.0, -math.inf, minimum}
    stack, seen = [mask], set()
    while stack:
        node = stack.pop()
        if not isinstance(node, fx.Node):
            if _as_dtype(node, dtype) not in allowed:
                return f"it holds {node}"
            continue
        if node in seen:
            continue
        seen.add(node)
        if dtype_of(node) != dtype:
            return f"its values pass through {op_name(node)} in {dtype_of(node)}"
        constant = graph_utils.lifted_constant(node)
        if constant is not None:
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                if not bool(((constant == 0) | (constant == -math.inf) | (constant == minimum)).all()):
                    return "a constant in it holds other values"
            continue
        if node.op == "placeholder":
            return f"it is read from an input ({node.name})"
        cast = dtype_cast(node)
        if cast is not None:
            return f"its values are cast from {dtype_of(cast[0])}"
        # x.masked_fill(x != 0, v), or its decomposition where(x != 0, v, x): 0 or v whatever x holds (transformers
        # 4.x's _expand_mask fills 1.0 - mask so)
        if is_op(node, aten.masked_fill) and _is_nonzero_of(node.args[1], node.args[0]):
            stack.extend([0.0, node.args[2]])
            continue
        if is_op(node, aten.where) and _is_nonzero_of(node.args[0], node.args[2]):
            stack.extend([0.0, node.args[1]])
            continue
        packet = getattr(node.target, "overloadpacket", None) if node.op == "call_function" else None
        positions = _VALUE_ARGS.get(packet)
        if positions is None:
            return f"it is computed by {op_name(node)}"
        args = list(node.args)
        if is_op(node, aten.constant_pad_nd):
            args += [node.kwargs.get("value", 0.0)] * (3 - len(args))
        if is_op(node, aten.zeros, aten.zeros_like, aten.new_zeros, aten.tril, aten.triu):
            stack.append(0.0)
        for i in positions:
            arg = args[i] if i < len(args) else None
            stack.extend(arg if isinstance(arg, (list, tuple)) else [arg] if arg is not None else [])
    return None


def _is_nonzero_of(cond, x: fx.Node) -> bool:
    """Whether ``cond`` is ``x != 0`` (``x.to(bool)``, or ``ne(x, 0)``): true also where x is NaN."""
    return dtype_cast(cond) == (x, torch.bool) or (is_op(cond, aten.ne) and list(cond.args) == [x, 0])


def _fits_decode_kernel(attn: _Attention, q_len: int) -> bool:
    """The decode kernel holds the query rows of one KV head (q_len x heads per KV head) and a head in one tile."""
    dims = [shape_of(attn.q)[-1], shape_of(attn.v)[-1]]
    return (q_len * attn.repeat <= decode_kernel.MAX_ROWS
            and all(isinstance(d, int) and d <= decode_kernel.MAX_HEAD_DIM for d in dims))


# --------------------------------------------------------------------------------------------- the rewrite


# each float dtype's -inf as the bits of the integer dtype of its width
_MINUS_INF_BITS = {dt: (ints, torch.tensor(-math.inf, dtype=dt).view(ints).item()) for dt, ints in (
    (torch.float16, torch.int16), (torch.bfloat16, torch.int16), (torch.float32, torch.int32),
    (torch.float64, torch.int64))}


def _is_minus_inf(mask: torch.Tensor) -> torch.Tensor:
    """``mask == -inf``, compared on the bits where the dtype allows: fused into the ops that build the mask,
    Inductor's CPU code keeps a bf16 / fp16 intermediate in fp32 without rounding it, so fp32's minimum cast to bf16
    (-inf) would compare as finite there; a bitcast makes it round first."""
    if mask.dtype not in _MINUS_INF_BITS:
        return mask == -math.inf
    ints, bits = _MINUS_INF_BITS[mask.dtype]
    return mask.view(ints) == bits


def _sdpa(attn: _Attention, dtype: torch.dtype, q, k, v, *extra):
    """The replacement, traced with Inductor's decompositions. ``extra``: scale tensors, then mask tensors."""
    it = iter(extra)
    for kind, _ in attn.scale_tensors:
        s = next(it)
        q = q * s if kind == "mul" else q / s
    if attn.k_is_transposed:
        k = k.transpose(-2, -1)
    k, v = (t if t.dtype == dtype else t.to(dtype) for t in (k, v))  # repeat_kv sources from before a cast
    mask = None
    for term in attn.mask:  # in the graph's order: a where-mask replaces what the terms before it added
        t = next(it)
        if term.kind == "add":
            if t.dtype != dtype:  # fp32 holding 0 / its minimum / -inf alone (_check): the same blocks in bf16
                t = torch.where(t == torch.finfo(t.dtype).min, torch.finfo(dtype).min, t).to(dtype)
            mask = t if mask is None else mask + t
            continue
        # blocked: -inf, or the mask dtype's most negative value for a finite fill (the scores' dtype's: s + fill
        # == fill in both, so every blocked score stays blocked and finite, as in eager)
        fill = term.fill if term.fill == -math.inf else torch.finfo(dtype).min
        base = torch.zeros((), dtype=dtype, device=q.device) if mask is None else mask
        blocked = torch.full((), fill, dtype=dtype, device=q.device)
        mask = torch.where(t, base, blocked) if term.kind == "keep" else torch.where(t, blocked, base)
    if mask is not None and mask.dim() < 2:  # SDPA takes no 0-d / 1-d mask; [Sk] broadcasts as [1, Sk]
        mask = mask.reshape((1,) * (2 - mask.dim()) + tuple(mask.shape))
    # eager's softmax of a row whose every score is -inf is NaN; SDPA's (a safe softmax) is 0
    nan_rows = _is_minus_inf(mask).all(-1, keepdim=True) if attn.nan_rows and mask is not None else None
    heads_dim = q.dim() == 3  # [N, S, D] from a plain bmm: the fused kernels want [N, 1, S, D]
    if heads_dim:
        q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
        mask = mask.unsqueeze(-3) if mask is not None and mask.dim() == 3 else mask
    # (not where every term blocks with -inf: a bool mask given to SDPA, say; such rows are NaN rows, above)
    finite_blocks = any(term.kind == "add" or term.fill != -math.inf for term in attn.mask)
    # the decode kernel adds the mask in fp32, where fp32's and bf16's minimum absorb any score, fp16's does not
    needs_uniform = not attn.decode or dtype == torch.float16
    uniform_rows = _uniform_rows(mask, dtype) if mask is not None and finite_blocks and needs_uniform else None
    if attn.decode:
        if mask is not None and mask.dim() < 4:
            mask = mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
        scale = attn.scale if attn.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        out = torch.ops.fusion_passes.decode_attention(q, k, v, mask, scale, attn.is_causal,
                                                       *([attn.softcap] if attn.tanh is not None else []))
    else:
        kwargs = {"enable_gqa": True} if attn.enable_gqa else {}
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=attn.is_causal, scale=attn.scale, **kwargs
        )
    if uniform_rows is not None:
        out = _with_uniform_rows(out, uniform_rows, v)
    out = out.squeeze(1) if heads_dim else out
    return out if nan_rows is None else torch.where(nan_rows, math.nan, out)


def _uniform_rows(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[..., Sq, 1]: the rows whose every key the mask blocks with the dtype's minimum. Eager's weights there are
    uniform (score + min == min in fp32 / bf16), but SDPA's fused CUDA kernels give 0 (they scale the scores by
    log2(e) for exp2, and fp32's minimum times that overflows to -inf: a row of -inf, which their safe softmax
    zeroes; an H100 showed it on DeBERTa's padded query rows, session 47) and in fp16 (-65504 added in fp32) the
    softmax of the scores, as our decode kernel does in fp16 too (session 48). So those rows get eager's uniform
    weights' output after the kernel."""
    return (mask == torch.finfo(dtype).min).all(-1, keepdim=True)


def _with_uniform_rows(out: torch.Tensor, rows: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """out [B, H, Sq, D] with its ``rows`` ([..., Sq, 1], broadcastable) set to what uniform weights over every key
    give: the mean of v [B, Hkv, Sk, D] over the keys, in fp32; query head h reads KV head h // (H / Hkv), as
    SDPA's enable_gqa does (through a [B, Hkv, H / Hkv, Sq, D] view: no repeated copy of V's mean)."""
    mean = v.float().mean(-2, keepdim=True).to(out.dtype)  # [B, Hkv, 1, D]
    heads, kv_heads = out.shape[-3], v.shape[-3]
    if heads == kv_heads:
        return torch.where(rows, mean, out)
    grouped = out.unflatten(-3, (kv_heads, heads // kv_heads))
    if rows.dim() >= 3:
        rows = rows.unflatten(-3, (kv_heads, heads // kv_heads)) if rows.shape[-3] == heads else rows.unsqueeze(-3)
    return torch.where(rows, mean.unsqueeze(-3), grouped).flatten(-4, -3)


def _insert_sdpa(graph: fx.Graph, attn: _Attention, masks: dict, graphed: bool) -> list[fx.Node]:
    """Trace the SDPA replacement on the matched tensors' fake values and splice it in before ``attn.output``;
    ``masks``: the decode masks already materialised in this graph (filled as they are made); ``graphed``: the
    compile is for CUDA graphs (where PDL is wanted the decode kernel stays an extern op, ``kernels.pdl``)."""
    from torch._guards import detect_fake_mode
    from torch._inductor.pattern_matcher import fwd_only

    inputs = [attn.q, attn.k, attn.v, *(n for _, n in attn.scale_tensors), *(t.tensor for t in attn.mask)]
    fakes = [val(n) for n in inputs]
    mode = detect_fake_mode([f for f in fakes if isinstance(f, torch.Tensor)])
    dtype = val(attn.q).dtype
    with mode if mode is not None else contextlib.nullcontext():
        traced = fwd_only(lambda *a: _sdpa(attn, dtype, *a), fakes)
    if any(n.op == "get_attr" for n in traced.graph.nodes):  # a constant we could not carry into ``graph``
        raise _Miss(attn.output, "the SDPA replacement traced to a graph with constants")
    fused = [n for n in traced.graph.nodes
             if op_name(n).startswith("aten._scaled_dot_product_") or op_name(n) == "fusion_passes.decode_attention"]
    if not fused:  # SDPA's math fallback is the same bmm/softmax/bmm again, plus _safe_softmax: no gain
        q, k = val(attn.q), val(attn.k)
        raise _Miss(attn.output, f"SDPA has no fused kernel for q {_fmt(q.shape)} / k {_fmt(k.shape)} {q.dtype} on "
                                 f"{q.device.type} here (it would run its math fallback)")
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    env = dict(zip(placeholders, inputs))
    with graph.inserting_before(attn.output):
        out = graph.graph_copy(traced.graph, env)
    attn.output.replace_all_uses_with(out)
    inserted = [env[n] for n in traced.graph.nodes if n.op == "call_function"]
    if not any(n.target is decode_kernel.decode_attention for n in inserted):
        inserted = _share_with_earlier_layers(graph, inserted, masks)
    for node in [n for n in inserted if n.target is decode_kernel.decode_attention]:
        inserted = _share_decode_mask(graph, node, inserted, masks)
        if prefetch_policy() == "on":  # (off CUDA the op ignores it: the decode policy "always", for tests)
            _prefetch_next_weight(node, attn)
    device = val(attn.q).device
    if device.type == "cuda" and inline_policy() == "on" and not pdl.wanted(device, graphed):
        inserted = [m for n in inserted for m in _inline_decode_kernel(graph, n)]
    copy_stack_trace([attn.output, attn.chain[0]], inserted)
    return inserted


def _share_with_earlier_layers(graph: fx.Graph, inserted: list[fx.Node], shared: dict) -> list[fx.Node]:
    """Each node of an SDPA replacement that computes what a node of an earlier layer's does (pure ops on the same
    values: every layer reads one mask, so its additive form and the check for rows it blocks entirely are the
    same) is replaced by that node; returns ``inserted`` without them. Inductor would compute each layer's copy
    again (a reduction over the mask per layer for the row check)."""
    memo: dict = {}
    for node in inserted:
        key = graph_utils.structure(node, memo)
        if not isinstance(key, tuple):  # not a pure op: compared by identity
            continue
        earlier = shared.get(("layer-shared", key))
        if earlier is not None and earlier is not node and graph_utils.precedes(earlier, node):
            node.replace_all_uses_with(earlier)
        else:
            shared[("layer-shared", key)] = node
    gone = set(erase_dead(graph, inserted))
    return [n for n in inserted if n not in gone]


def _share_decode_mask(graph: fx.Graph, node: fx.Node, inserted: list[fx.Node], masks: dict) -> list[fx.Node]:
    """Give ``node`` (a decode_attention) the graph's one materialised copy of its mask; returns ``inserted`` updated.

    Every layer's decode kernel reads the same mask (HF builds one per forward; a bool mask is converted to an
    additive one per layer, the same nodes each time). It is a cheap pointwise result, below Inductor's threshold
    for materialising a reused value, so Inductor computed the whole mask again for every layer's kernel (one small
    kernel per layer on the H200, gone with this: 173 -> 156 kernels per 1B step, logs/s9_run1)."""
    mask = node.args[3]
    if not isinstance(mask, fx.Node):
        return inserted
    shared, new = graph_utils.materialise_shared(graph, mask, node, masks)
    graph_utils.set_args(node, (*node.args[:3], shared, *node.args[4:]))
    gone = set(erase_dead(graph, [mask]))
    return [n for n in [*inserted, *new] if n not in gone]


_VIEWS = (*_FLATTEN, aten.transpose, aten.permute, aten.squeeze, aten.clone)  # HF's o_proj input: views + contiguous


def _prefetch_next_weight(node: fx.Node, attn: _Attention) -> None:
    """Give ``node`` (a decode_attention) the weight W of the linear its output feeds through views only
    (HF: ``out.transpose(1, 2).contiguous().reshape(B, S, H * D)`` -> ``o_proj``), to request into L2."""
    cur = node
    for _ in range(8):
        user = sole_user(cur)
        if user is None:
            return
        if is_op(user, aten.mm, aten.addmm):
            lin = linears.as_linear(user)
            if not isinstance(lin, str) and lin.x2 is cur and lin.constant is None and lin.cast is None:
                args = list(node.args) + [0.0] * (7 - len(node.args))  # softcap, if the node has none
                graph_utils.set_args(node, (*args[:7], lin.weight))
                attn.prefetch = lin.weight.name
            return
        if not is_op(user, *_VIEWS):
            return
        cur = user


def _inline_decode_kernel(graph: fx.Graph, node: fx.Node) -> list[fx.Node]:
    """A ``decode_attention`` node on CUDA becomes its two Triton launches, traced in place, so Inductor emits them
    in its generated code (an extern op would call back into Python on every step); other nodes stay."""
    if node.target is not decode_kernel.decode_attention:
        return [node]
    with graph.inserting_before(node):
        [out], inserted = graph_utils.insert_traced(graph, decode_kernel.decode_attention_inline, list(node.args),
                                                    written=decode_kernel.WRITTEN)
    node.replace_all_uses_with(out)
    graph.erase_node(node)
    return inserted


def _detail(attn: _Attention) -> dict:
    if attn.mask_dropped == "causal":
        mask = "causal (constant mask dropped, is_causal=True)"
    elif attn.mask_dropped == "none":
        mask = "none (constant mask allows every key, dropped)"
    else:
        q_dtype = dtype_of(attn.q)
        mask = "+".join(t.kind + (f" ({dtype_of(t.tensor)} mask of 0 / minimum, as {q_dtype})"
                                  if t.kind == "add" and dtype_of(t.tensor) != q_dtype else "") for t in attn.mask
                        ) or ("causal (is_causal=True)" if attn.is_causal else "none")
    return {
        "q": _fmt(shape_of(attn.q)),
        "k": _fmt(shape_of(attn.k)),
        "scale": attn.scale if not attn.scale_tensors else f"{attn.scale} * runtime scalar",
        "mask": mask,
        "gqa": f"enable_gqa (x{attn.repeat})" if attn.enable_gqa else ("repeated K/V" if attn.repeat > 1 else "no"),
        "kernel": "fusion_passes.decode_attention (q_len <= 16)" if attn.decode else "sdpa",
        **({"softcap": attn.softcap} if attn.tanh is not None else {}),
        **({"l2_prefetch": attn.prefetch} if attn.prefetch else {}),
    }


# --------------------------------------------------------------------------------------------- SDPA at decode

# SDPA's backend ops, by the name of their mask argument (None: the op takes no mask). The other outputs
# (logsumexp, RNG state, ...) exist for the backward pass; inference reads only output 0.
_SDPA_BACKENDS = {
    "aten._scaled_dot_product_efficient_attention": "attn_bias",
    "aten._scaled_dot_product_cudnn_attention": "attn_bias",
    "aten._scaled_dot_product_flash_attention": None,
    "aten._scaled_dot_product_flash_attention_for_cpu": "attn_mask",
}


def _sdpa_kwargs(node: fx.Node) -> dict | None:
    """The SDPA backend call ``node``'s arguments by name (query, key, value, scale, ...)."""
    from torch.fx.operator_schemas import normalize_function

    normalized = normalize_function(node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True)
    return None if normalized is None else normalized.kwargs


def _match_sdpa_call(node: fx.Node, grad_enabled: bool, proofs: dict) -> _Attention | None:
    """An SDPA call already in the graph (HF's ``sdpa`` attention), as an ``_Attention`` to replace, or None when
    there is nothing to gain (nothing to say). Decode-sized: our decode kernel, K/V taken from before ``repeat_kv``
    (the per-step copy of the whole cache goes); raises ``_Miss`` when that cannot be done. Longer: SDPA again
    without what it does not need, a compile-time constant mask proven causal (``is_causal=True``) or allowing
    every key (dropped), and then ``repeat_kv``'s copies (``enable_gqa``)."""
    kw = _sdpa_kwargs(node)
    if kw is None:
        return None
    mask_arg = _SDPA_BACKENDS[op_name(node)]
    q, k, v = kw["query"], kw["key"], kw["value"]
    if not all(isinstance(t, fx.Node) and isinstance(val(t), torch.Tensor) for t in (q, k, v)):
        return None
    qv, kv_, vv = val(q), val(k), val(v)
    if qv.dim() != 4:
        return None
    decode = _decode_sized(qv)
    mask = kw.get(mask_arg) if mask_arg else None
    out = [u for u in node.users if u.target is operator.getitem and u.args[1] == 0]
    others = [u for u in node.users if u not in out]
    kept = None
    if grad_enabled or len(out) != 1 or any(u.users for u in others):
        kept = "SDPA whose logsumexp/RNG outputs are used (autograd)"
    elif kw.get("dropout_p", 0.0) != 0.0:
        kept = f"SDPA with dropout_p={kw['dropout_p']}"
    elif not (qv.dtype == kv_.dtype == vv.dtype) or not (qv.device == kv_.device == vv.device):
        kept = "SDPA with mixed query/key/value dtypes or devices"
    elif mask is not None and not isinstance(mask, fx.Node):
        kept = "SDPA with a mask that is not a tensor"
    if kept:
        if decode:
            raise _Miss(node, f"decode-sized {kept}: kept")
        return None
    attn = _Attention(q=q, k=k, v=v, output=out[0], chain=[out[0], *others, node], decode=decode,
                      is_causal=bool(kw.get("is_causal", False)))
    attn.scale = kw.get("scale") if kw.get("scale") is not None else 1.0 / math.sqrt(qv.shape[-1])
    if mask is not None:
        m = val(mask)
        try:
            torch.broadcast_shapes(m.shape, (qv.shape[0], qv.shape[1], qv.shape[2], kv_.shape[2]))
        except RuntimeError:
            if decode:
                raise _Miss(node, f"decode-sized SDPA with a mask of shape {_fmt(m.shape)}: kept") from None
            return None
        if decode and (m.dtype == torch.bool or m.device != qv.device):
            raise _Miss(node, f"decode-sized SDPA with a {m.dtype} mask on {m.device}: kept")
        if m.device != qv.device or (m.dtype != torch.bool and m.dtype != qv.dtype) or attn.is_causal:
            return None
        if decode:
            attn.mask = [_MaskTerm("add", mask)]
        else:
            attn.mask = [_MaskTerm("keep", mask, -math.inf) if m.dtype == torch.bool else _sdpa_bool_mask(mask)]
    pair = _repeat_kv_pair(k, v)
    if decode:
        if pair:
            attn.k, attn.v, attn.repeat, kv_prep = pair
            attn.enable_gqa = attn.repeat > 1
            attn.chain.extend(kv_prep)
        elif qv.shape[1] != kv_.shape[1]:
            if not (isinstance(kv_.shape[1], int) and qv.shape[1] % kv_.shape[1] == 0):
                raise _Miss(node, "decode-sized SDPA whose query heads are not a multiple of the KV heads: kept")
            attn.repeat, attn.enable_gqa = qv.shape[1] // kv_.shape[1], True
        if not _fits_decode_kernel(attn, qv.shape[2]):
            raise _Miss(node, f"decode-sized SDPA with {qv.shape[2]} x {attn.repeat} query rows per KV head or head "
                              f"dim {qv.shape[-1]}: more than the decode kernel holds, kept")
        return attn
    if pair:
        attn.repeat, attn.kv_sources = pair[2], (pair[0], pair[1], pair[3])
    elif qv.shape[1] != kv_.shape[1]:  # the call's own enable_gqa (valid, or the model could not have run)
        attn.enable_gqa = True
    _decide_mask_and_gqa(attn, proofs)
    return attn if attn.mask_dropped or attn.kv_sources else None


# SDPA turns a bool mask into an additive one before its backend op: where(mask, 0, -inf) on CPU, but
# where(mask, 0, -65504) for cuDNN (which takes no -inf; -65536 in bf16). What the user wrote is the bool mask.
_SDPA_BOOL_FILL = -65504.0


def _sdpa_bool_mask(mask: fx.Node) -> _MaskTerm:
    """The mask term of an SDPA backend op's additive ``mask``: "keep" on the bool mask the user gave SDPA when
    ``mask`` is SDPA's where(bool, 0, fill <= -65504), with that fill (so a kept mask computes the same values);
    "add" otherwise. The constant-mask proof then runs on the bool mask: dropping it (is_causal) gives SDPA's
    semantics of the user's mask, and differs from the backend op's numbers only where a blocked score exceeds
    its row's largest allowed score by about 65,400 (exp underflows to 0 in fp32 below that)."""
    if is_op(mask, aten.where) and dtype_of(mask.args[0]) == torch.bool:
        zero, fill = _const_scalar(mask.args[1]), _const_scalar(mask.args[2])
        if zero == 0.0 and fill is not None and fill <= _SDPA_BOOL_FILL:
            return _MaskTerm("keep", mask.args[0], fill)
    return _MaskTerm("add", mask)


def _insert_sdpa_or_repeated(graph: fx.Graph, attn: _Attention, masks: dict, gain_without_gqa: bool,
                             graphed: bool) -> list[fx.Node]:
    """``_insert_sdpa``; where SDPA has no fused kernel for the GQA form here (fp32 on CUDA; a mask on a GPU
    without cuDNN's), with the repeated K/V as matched instead, if the rewrite still gains without GQA."""
    try:
        return _insert_sdpa(graph, attn, masks, graphed)
    except _Miss as miss:
        if not attn.repeated_kv or attn.decode:  # repeated_kv: GQA was chosen over repeat_kv's copies
            raise
        if not gain_without_gqa:
            why = (" with a mask not proven constant (it reads an input such as attention_mask, or its shape is "
                   "dynamic): K/V copies kept, no fused SDPA kernel here takes GQA with a mask" if attn.mask else
                   ": K/V copies kept, no fused SDPA kernel here takes the GQA form")
            raise _Miss(miss.node, f"SDPA over repeat_kv{why} ({miss.reason})") from None
    attn.k, attn.v, n = attn.repeated_kv
    attn.chain = attn.chain[:n]
    attn.enable_gqa = False
    return _insert_sdpa(graph, attn, masks, graphed)


def _rewrite_sdpa_calls(graph: fx.Graph, ctx, masks: dict, proofs: dict) -> None:
    for node in [n for n in graph.nodes if op_name(n) in _SDPA_BACKENDS]:
        try:
            attn = _match_sdpa_call(node, ctx.grad_enabled, proofs)
            if attn is None:
                continue
            order = {n: i for i, n in enumerate(graph.nodes)}
            inserted = _insert_sdpa_or_repeated(graph, attn, masks, gain_without_gqa=bool(attn.mask_dropped),
                                                graphed=ctx.graphed)
        except _Miss as miss:
            ctx.near_miss(miss.node, miss.reason)
            continue
        # SDPA ops carry the RNG tag (their dropout), so erase_dead keeps them; at dropout 0 with every output
        # unread, it is dead all the same
        gone = [u for u in node.users if not u.users]
        for u in gone:
            graph.erase_node(u)
        inputs = node.all_input_nodes  # a dropped mask's subgraph among them
        if not node.users:
            graph.erase_node(node)
            gone.append(node)
        erased = sorted([*gone, *erase_dead(graph, [*attn.chain, *inputs])], key=order.__getitem__)
        detail = {**_detail(attn), "from": op_name(node)}
        ctx.matched(erased, inserted, anchor=node, detail=detail)


def apply(graph: fx.Graph, ctx) -> None:
    """Rewrite every eager attention in ``graph`` into SDPA, and decode-sized SDPA calls into the decode kernel;
    report the ones that almost matched."""
    masks: dict = {}  # one shared, materialised mask per distinct decode mask (see _share_decode_mask); and the
    # nodes of SDPA replacements that later layers share (_share_with_earlier_layers)
    proofs: dict = {}  # what each constant mask was proven to be (see _constant_mask_kind)
    _rewrite_sdpa_calls(graph, ctx, masks, proofs)  # first: the SDPA calls the eager rewrites below insert are final
    for bmm1 in [n for n in graph.nodes if is_op(n, aten.bmm, aten.baddbmm)]:
        if getattr(bmm1, "_erased", False):
            continue  # erased by an earlier rewrite (it was that attention's bmm with V)
        made: list[fx.Node] = []
        try:
            attn = _match(bmm1, ctx.grad_enabled, made)
            _decide_mask_and_gqa(attn, proofs)
            attn.nan_rows = _may_block_rows_with_inf(attn, proofs)
            _check_softcap(attn)
        except _Miss as miss:
            erase_dead(graph, made)
            if miss.shield is not None:
                _shield_softmax(graph, miss.shield)
            if miss.report:
                ctx.near_miss(miss.node, miss.reason)
            continue
        saved = 2 * tensor_bytes(bmm1)  # the [*batch, Sq, Sk] scores and weights are no longer written and read
        order = {n: i for i, n in enumerate(graph.nodes)}
        try:
            inserted = _insert_sdpa_or_repeated(graph, attn, masks, gain_without_gqa=True, graphed=ctx.graphed)
        except _Miss as miss:
            erase_dead(graph, made)
            ctx.near_miss(miss.node, miss.reason)
            continue
        erased = sorted(erase_dead(graph, attn.chain), key=order.__getitem__)
        ctx.matched(erased, inserted, anchor=attn.softmax, detail=_detail(attn), saved_bytes=saved)
