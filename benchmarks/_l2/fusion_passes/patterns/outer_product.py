"""outer_product: a matmul whose inner dimension is 1 -> a broadcast multiply (fused with its neighbours).

    # before (HF's rotary embedding, every forward: inv_freq [B, D/2, 1] fp32, position_ids [B, 1, S] fp32)
    freqs = bmm(inv_freq_expanded, position_ids_expanded)     -> [B, D/2, S]   a cuBLAS call (mm for B = 1)
    emb   = cat(freqs.T, freqs.T); cos, sin = emb.cos(), emb.sin()
    # after
    freqs = mul(inv_freq_expanded, position_ids_expanded)     -> [B, D/2, S]   by broadcasting, pointwise
                                                              (made contiguous, as the GEMM's output is)
    # Inductor fuses the multiply, the casts feeding it and the cos/sin after it into one kernel

On the H200 the 1B decode step spent three launches here (two casts and a 3.4 us SIMT SGEMM for a 32 x 1 x 1
product) before the cos/sin kernel. Each output is one product a[i] * b[j] with nothing to sum, so the multiply
gives the bits the GEMM gives: an fp32 product rounded once, and for bf16/fp16 inputs a product exact in fp32,
rounded once to the output dtype. One exception is left alone: fp32 inputs while PyTorch lets fp32 matmuls use
TF32 (``torch.get_float32_matmul_precision() != "highest"``), where the GEMM rounds its inputs first.

Fires on ``mm`` [M, 1] x [1, N] and ``bmm`` [B, M, 1] x [B, 1, N] with static shapes and one dtype; not on
any other inner size, nor on symbolic ones. Inductor's own decompositions do the same for ``bmm`` from torch 2.13
(and on CPU for small shapes), before this pass sees the graph; torch 2.11/2.12 on CUDA leave it to cuBLAS.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from .. import graph_utils
from ..graph_utils import is_op, shape_of, val
from ..linears import FakeEval

NAME = "outer_product"
HOOK = "post_grad"
DESCRIPTION = "a matmul with inner dimension 1 (HF rotary's inv_freq @ positions) -> a broadcast multiply"

aten = torch.ops.aten
_REAL_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def apply(graph: fx.Graph, ctx) -> None:
    for mm in [n for n in graph.nodes if is_op(n, aten.mm, aten.bmm)]:
        reason = _blocker(mm)
        if reason is None:
            _rewrite(graph, mm, ctx)
        elif reason:
            ctx.near_miss(mm, reason)


def _blocker(mm: fx.Node) -> str | None:
    """None when ``mm`` can become a multiply; else why not ("" for matmuls with a real inner dimension)."""
    a, b = mm.args[0], mm.args[1]
    if not isinstance(a, fx.Node) or not isinstance(b, fx.Node):
        return ""
    sa, sb = shape_of(a), shape_of(b)
    if sa is None or sb is None or not (isinstance(sa[-1], int) and sa[-1] == 1):
        return ""  # no symbolic comparison here: it would add a guard
    if not all(isinstance(d, int) for d in (*sa, *sb)):
        return "inner dimension 1, but symbolic shapes"
    ta, tb = val(a), val(b)
    if ta.dtype != tb.dtype or val(mm).dtype != ta.dtype:
        return "inner dimension 1, but mixed dtypes"
    if ta.dtype not in _REAL_FLOATS:  # a complex product is a sum of two: its rounding may differ
        return f"inner dimension 1, but {ta.dtype} (only real floating point is rewritten)"
    if ta.dtype == torch.float32 and not fp32_matmul_exact():
        return "inner dimension 1, but fp32 matmuls may round their inputs here (TF32/bf16 allowed): left alone"
    return None


def fp32_matmul_exact() -> bool:
    """True when PyTorch's settings keep fp32 matmuls in fp32 (the default): neither the legacy
    ``set_float32_matmul_precision`` nor the per-backend ``fp32_precision`` allow TF32 or bf16."""
    try:
        if torch.get_float32_matmul_precision() != "highest":
            return False
    except RuntimeError:  # legacy and per-backend settings mixed: PyTorch will not say; assume they round
        return False
    backends = (torch.backends.cuda.matmul, getattr(torch.backends.mkldnn, "matmul", None))
    return all(getattr(b, "fp32_precision", "none") in ("none", "ieee") for b in backends if b is not None)


def cache_key() -> str:
    return f"fp32_exact={fp32_matmul_exact()}"


def _rewrite(graph: fx.Graph, mm: fx.Node, ctx) -> None:
    a, b = mm.args[0], mm.args[1]
    fake = FakeEval(val(mm))
    with graph.inserting_before(mm):
        product = fake.call(graph, aten.mul.Tensor, a, b)  # [.., M, 1] * [.., 1, N] -> [.., M, N]
        inserted = [product]
        if val(product).stride() != val(mm).stride():  # permuted inputs give a permuted product; mm's is contiguous
            inserted.append(fake.call(graph, aten.clone.default, product, memory_format=torch.contiguous_format))
    out = inserted[-1]
    if tuple(val(out).shape) != tuple(val(mm).shape) or val(out).stride() != val(mm).stride():
        for node in reversed(inserted):  # cannot happen for a valid mm/bmm; never risk it
            graph.erase_node(node)
        ctx.near_miss(mm, "the broadcast product's shape or strides differ from the matmul's")
        return
    graph_utils.copy_stack_trace([mm], inserted)
    mm.replace_all_uses_with(out)
    ctx.matched([mm], inserted, detail={"shape": [list(shape_of(a)), list(shape_of(b))], "dtype": str(val(a).dtype)})
    graph_utils.erase_dead(graph, [mm])
