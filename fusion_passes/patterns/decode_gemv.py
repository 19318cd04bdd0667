"""decode_gemv: a decode step's linears with their neighbours folded in -> one GEMV kernel each.

    # before (post-grad ATen of a Llama layer at decode; x, h [B, S, D] with B*S = M <= 16, bf16)
    xn  = rms_norm(h) * w_in                               # 7 pointwise/reduction ops -> [M, D]
    q, k, v = mm(xn, Wq.T), mm(xn, Wk.T), mm(xn, Wv.T)
    h   = h + mm(attn, Wo.T)                               # o-proj, then the residual add
    xn  = rms_norm(h) * w_post
    a   = silu(mm(xn, Wg.T)) * mm(xn, Wu.T)                # gate/up, silu decomposed into 5 ops (Gemma: gelu_tanh)
    h   = h + mm(a, Wd.T)                                  # down-proj + residual
    # after: four kernels, each reading its weights once
    qkv = decode_gemv(h, Wq, Wk, Wv, norm_weight=w_in)     -> [M, Nq + Nk + Nv]; q, k, v are column slices
    h   = decode_gemv(attn, Wo, residual=h)
    a   = decode_gemv(h, Wg, Wu, norm_weight=w_post, silu_mul=True)
    h   = decode_gemv(a, Wd, residual=h)

The q/k GEMV also applies HF's rotary embedding in its epilogue (``FUSION_PASSES_DECODE_ROPE=off`` leaves it out):

    q = permute(view(q, [B, S, H, D]), [0, 2, 1, 3]); q = q * cos + rotate_half(q) * sin    (same for k)
    # after: the q/k/v GEMV writes rotated q and k; the heads view of its output replaces q_embed / k_embed
    qkv = decode_gemv(h, Wq, Wk, Wv, norm_weight=w_in, rope_cos=cos, rope_sin=sin, rope_dim=D, rope_weights=2)

On CUDA (``FUSION_PASSES_DECODE_KV_WRITE=off`` leaves it out) the same GEMV also stores k and v into HF
StaticCache's caches, the update that follows the projections:

    k_cache = index_put(k_cache, [None, None, cache_position], k_embed)      # same for v; [B, H_kv, L, D]
    # after: the kernel writes the rotated k and the v heads at cache_position; reinplacing makes it in place;
    # where the update is their only reader, qkv's k and v columns are left unset (cached_y=False)
    qkv = decode_gemv_kv_write(h, Wq, Wk, Wv, ..., None, k_cache, v_cache, cache_position)
    # StaticCache's positions, cache_position = iota(S) + cumulative_length: the kernel reads the base itself
    qkv = decode_gemv_kv_write(h, Wq, Wk, Wv, ..., None, k_cache, v_cache, cumulative_length, index_base=True)

Every layer's GEMV reads one materialised copy of the cos/sin rows (``graph_utils.materialise_shared``): Inductor
would compute them again for each layer's traced kernel.

On the H200 RoPE took the 1B decode rate from 1.125 to 1.110 ms and removed Inductor's RoPE kernel. It folds only
the exact ``rotate_half`` form, with one cos/sin of shape
[B or 1, 1, S, D] shared by q and k, no other user of the unrotated heads, and outputs that are whole heads.
Biased q/k/v (Qwen2) fold the same way: the kernel adds each bias before the rotation, with addmm's one rounding.

Also the final norm + lm_head (one weight). Matched forms: an RMSNorm with a weight (the HF Llama form
``w * n.to(T)`` or Gemma's ``(n * (1 + w.float())).to(T)``, as ``residual_norm`` matches it) whose output feeds
only 1-3 linears; ``act(g) * u`` with act SiLU (Llama, Qwen2, Mistral) or GELU's tanh form (Gemma's GeGLU),
however spelled (``aten.silu``, ``g * sigmoid(g)``, a decomposition, with or without an fp32 round trip): the
elementwise chain from g is run on 4,099 values and must equal one of them (see ``_gate_activation``);
``add`` of a linear's output and a same-shape, same-dtype tensor.

Fires only when: the row count M is static and <= 16 (``kernels.gemv.MAX_ROWS``); the graph is on CUDA
(policy ``auto``; ``FUSION_PASSES_DECODE_GEMV=always`` also fires on other devices, where the op runs as torch,
for tests); weights are distinct 2-D contiguous graph inputs of the activation's dtype (no freezing
constants, not mutated), K static; every intermediate it absorbs (normalised input, GEMM outputs, silu) has
no other user; biases only where outputs are concatenated (the kernel adds them; a biased gate/up runs as two
concatenated outputs, SiLU·mul left to Inductor); autograd is off.
Where Inductor's pad_mm padded a GEMM's rows to a multiple of 8 (on a GPU it decides by timing both at compile
time), ``linears.unpad_rows`` first restores the plain linear (exact), so whether the GEMV fires does not hang on
that timing; the match's detail then says ``row_padding_undone``.
In a compile for CUDA graphs (``ctx.graphed``; ``kernels.pdl``, ``FUSION_PASSES_PDL``) on sm_90+, a GEMV whose
input a Triton kernel of ours computes (so not the graph's first kernel of ours) runs as its PDL twin, which loads
its weights while the kernel before it finishes; and the decode attention ops that ``attention_sdpa`` left extern
for this get ``pdl=True`` where such a kernel computes q:

    qkv = decode_gemv_kv_write(h, Wq, Wk, Wv, ...)          # the graph's first GEMV: a plain launch
    out = decode_attention(q, k_cache, v_cache, ..., pdl=True)
    h   = decode_gemv_pdl(out, Wo, residual=h)              # ... every later one with PDL
Above 16 rows the linears are left to cuBLAS and ``qkv_packing``; so are the shapes where our GEMV measured
slower than cuBLAS (see ``HUGE_WEIGHT_BYTES`` / ``BATCHED_MAX_WEIGHT_BYTES``; ``gemv_table.BEATS_CUBLAS`` lists the
large M = 1 shapes measured faster on a given GPU, which are fused there).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.fx as fx

from .. import graph_utils, linears
from ..graph_utils import dtype_of, erase_dead, is_op, known_equal, same_shape, shape_of, sole_user, val
from ..kernels import decode_attention, gemv, gemv_table, pdl
from . import env_policy, residual_norm

NAME = "decode_gemv"
HOOK = "post_grad"
DESCRIPTION = ("decode-sized linears (M <= 16) + RMSNorm prologue / SiLU*mul / residual / RoPE epilogue "
               "-> one GEMV kernel")
DEPENDS = (gemv, gemv_table, linears, residual_norm, pdl, decode_attention)  # decode_attention: its op, for PDL

POLICY_ENV = "FUSION_PASSES_DECODE_GEMV"
POLICIES = ("auto", "always")
# RoPE in the q/k GEMV's epilogue: on by default since the H200 measured it (1B decode rate 1.125 -> 1.110 ms,
# 12 fewer kernels, e2e_decode_prefetch_*.json); "off" keeps Inductor's own RoPE kernel.
ROPE_POLICY_ENV = "FUSION_PASSES_DECODE_ROPE"
ROPE_POLICIES = ("on", "off")
# The KV-cache update in the q/k/v GEMV's epilogue (CUDA only, where the kernel is traced into Inductor's code):
# on by default since the H200 measured it with the measured GEMV configs (1B decode rate 1.018 -> 1.002 ms eager
# attention, 1.016 -> 1.002 ms sdpa, 17 fewer kernels; logs/s9_run3); "off" leaves the update to Inductor.
KV_WRITE_POLICY_ENV = "FUSION_PASSES_DECODE_KV_WRITE"
KV_WRITE_POLICIES = ("on", "off")

aten = torch.ops.aten
prims = torch.ops.prims
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_RESHAPES = (aten.reshape, aten.view, aten._unsafe_view)
# residual_norm's forms the kernel computes: w * n.to(T), (n * (1 + w.float())).to(T), (n * w.float()).to(T)
_NORM_FORMS = ("llama", "gemma", "fp32 weight")
_OP = torch.ops.fusion_passes.decode_gemv.default
_KV_OP = torch.ops.fusion_passes.decode_gemv_kv_write.default


def policy() -> str:
    return env_policy(POLICY_ENV, POLICIES)


def rope_policy() -> str:
    return env_policy(ROPE_POLICY_ENV, ROPE_POLICIES)


def kv_write_policy() -> str:
    return env_policy(KV_WRITE_POLICY_ENV, KV_WRITE_POLICIES)


def cache_key() -> str:
    return (f"{policy()}/rope={rope_policy()}/kv_write={kv_write_policy()}/table={gemv_table.policy()}"
            f"/norm={gemv_table.norm_policy()}/pdl={pdl.policy()}/table_device={gemv_table.device_policy()}")


class _NoMatch(Exception):
    """The message is the near-miss reason."""


def apply(graph: fx.Graph, ctx) -> None:
    """Residual epilogues first (their adds become the ``h`` the next norm reads), then norm prologues."""
    if not ctx.grad_enabled:  # (with autograd on nothing here fires: pad_mm's choice stands)
        linears.unpad_rows(graph, max_rows=gemv.MAX_ROWS, device_type=None if policy() == "always" else "cuda")
    for mm in [n for n in graph.nodes if is_op(n, aten.mm)]:
        if mm.graph is graph:
            _try(ctx, mm, lambda: _fuse_residual(graph, mm, ctx))
    folded, tables = False, {}
    for mean in [n for n in graph.nodes if is_op(n, aten.mean)]:
        if mean.graph is graph:
            folded |= _try(ctx, mean, lambda: _fuse_norm(graph, mean, ctx, tables))
    if folded:
        from torch._inductor.pattern_matcher import stable_topological_sort

        stable_topological_sort(graph)  # once per graph, not per rewrite
    _launch_attention_with_pdl(graph, ctx)


def _try(ctx, node: fx.Node, rewrite) -> bool:
    """Run ``rewrite``; True if it rewrote, else record its near miss (if it has a reason) and return False."""
    try:
        rewrite()
        return True
    except _NoMatch as e:
        if str(e):
            ctx.near_miss(node, str(e))
        return False


def _in_scope(x2: fx.Node, mm: fx.Node, ctx) -> bool:
    """Whether ``mm`` (reading x2 [M, K]) is a decode-sized GEMM on a device this policy covers, autograd off."""
    x = val(x2)
    if not isinstance(x, torch.Tensor) or not isinstance(x.shape[0], int) or x.shape[0] > gemv.MAX_ROWS:
        return False
    if x.device.type != "cuda" and policy() != "always":
        return False
    if ctx.grad_enabled:
        ctx.near_miss(mm, "autograd is on and the GEMV kernel has no backward: left to cuBLAS")
        return False
    return True


# ------------------------------------------------------------------------------------------ matching


def _linear(mm: fx.Node) -> linears.Linear:
    """``mm`` as a linear this kernel can run, or _NoMatch with the reason."""
    lin = linears.as_linear(mm)
    if isinstance(lin, str):
        raise _NoMatch(f"decode-sized linear not fused: {lin}")
    w, x = val(lin.weight), val(lin.x2)
    if lin.constant is not None:
        raise _NoMatch("decode-sized linear not fused: its weight is a frozen constant (the kernel reads parameters)")
    if lin.cast is not None:
        raise _NoMatch(f"decode-sized linear not fused: its {w.dtype} weight is cast to {lin.cast} on every call "
                       "(autocast); the kernel reads weights in the input's dtype")
    if w.dtype != x.dtype or w.dtype not in _FLOATS or w.device != x.device:
        raise _NoMatch(f"decode-sized linear not fused: weight {w.dtype} on {w.device}, input {x.dtype} on {x.device}")
    if not isinstance(lin.k, int):
        raise _NoMatch("decode-sized linear not fused: K is symbolic")
    return lin


def _through_reshape(node: fx.Node) -> fx.Node:
    """The single reshape user of ``node`` (a GEMM's [M, N] back to [B, S, N]), or ``node`` itself."""
    user = sole_user(node)
    return user if user is not None and is_op(user, *_RESHAPES) else node


# Where our GEMV measured slower than cuBLAS on the H200 (benchmarks/results/gemv_h200_torch2.11.0.json, per call
# under CUDA graphs), the linears are left to cuBLAS even though the fused norm / epilogue would save a small kernel:
# - 128 MiB of weights and more: the 128K-row lm_head (525 MB in Llama-1B: 136 vs 126 us at M = 1, 160 vs 129 at
#   M = 8) and the 8B gate/up pair (235 MB: 68 vs 61 us); below it ours won at M = 1 (8B down, 117 MB: 30.1 vs 31.5).
#   Except at M = 1 for the shapes gemv_table.BEATS_CUBLAS lists for this GPU: since the per-tile reduction
#   (ACC1D, session 12) those measured faster than cuBLAS (1B lm_head 118.7 vs 126.0 us);
# - at M = 2..16 (the 16-row tl.dot tile) every weight above ~16 MB: down 12.5 vs 9.1 us, 8B o 11.8 vs 8.9 us,
#   8B gate/up 73 vs 60 us; below it ours wins or ties (q/k/v 9.7 vs 14.9 us, o 6.3 vs 5.1 us + the add saved).
HUGE_WEIGHT_BYTES = 128 << 20
BATCHED_MAX_WEIGHT_BYTES = 16 << 20


def _check_measured_faster(m: int, lins: list[linears.Linear], form: str) -> None:
    """``form``: the GEMV's ``gemv_table`` form ("cat", "silu" or "res"; rope and the cache write only add
    epilogues to "cat", whose entries are the q/k/v shapes, far below the size limit)."""
    weight_bytes = sum(graph_utils.tensor_bytes(lin.weight) for lin in lins)
    widths = ([lin.width for lin in lins] + [0, 0])[:3]
    if weight_bytes >= HUGE_WEIGHT_BYTES and not (
            m == 1 and gemv_table.beats_cublas(gemv._device_name(val(lins[0].weight).device), form, lins[0].k,
                                               *widths)):
        raise _NoMatch(f"left to cuBLAS: {weight_bytes >> 20} MiB of weights, where our GEMV measured 7-11% slower "
                       f"(>= {HUGE_WEIGHT_BYTES >> 20} MiB: a 128K-vocabulary lm_head, an 8B-sized gate/up)")
    if m > 1 and weight_bytes > BATCHED_MAX_WEIGHT_BYTES:
        raise _NoMatch(f"left to cuBLAS: {m} rows x {weight_bytes >> 20} MiB of weights, where our 16-row GEMV tile "
                       f"measured slower (M > 1 and > {BATCHED_MAX_WEIGHT_BYTES >> 20} MiB)")


# ------------------------------------------------------------------------------------------ residual epilogue


def _fuse_residual(graph: fx.Graph, mm: fx.Node, ctx) -> None:
    """``add(residual, reshape(mm(x2, W.T)))`` -> ``reshape(decode_gemv(x2, W, residual=residual))``."""
    out = _through_reshape(mm)
    add = sole_user(out)
    if not _in_scope(mm.args[0], mm, ctx):
        raise _NoMatch("")
    if add is None or not is_op(add, aten.add) or len(add.args) != 2 or add.kwargs.get("alpha", 1) != 1:
        raise _NoMatch("")  # not a residual linear: nothing to report
    residual = add.args[1] if add.args[0] is out else add.args[0]
    shape = shape_of(add)
    if not isinstance(residual, fx.Node) or not all(same_shape(shape_of(t), shape) for t in (residual, out)):
        raise _NoMatch("residual add not fused into the GEMV: the add broadcasts")
    if dtype_of(residual) != dtype_of(mm) or dtype_of(add) != dtype_of(mm):
        raise _NoMatch(f"residual add not fused into the GEMV: it mixes {dtype_of(residual)} and {dtype_of(mm)}")
    lin = _linear(mm)
    m, n = val(mm).shape
    _check_measured_faster(m, [lin], "res")
    fake = linears.FakeEval(val(add))
    pdl_launch = _pdl_launch(lin.x2, ctx)
    with graph.inserting_before(add):
        res2 = fake.call(graph, aten.reshape.default, residual, [m, n])
        outs, inserted = _insert_op(graph, [lin.x2, lin.weight, None, None, None, 0.0, 0.0, False, res2, False], fake,
                                    pdl_launch)
        y = fake.call(graph, aten.reshape.default, outs[0], list(val(add).shape))
    graph_utils.copy_stack_trace([add], [res2, *inserted, y])
    ctx.matched([mm, add], inserted, anchor=add,
                detail={"epilogue": "residual add", "shape": [m, lin.k, n], "weight": lin.weight.name,
                        **_launch_detail(pdl_launch)},
                saved_bytes=2 * graph_utils.tensor_bytes(add))  # the GEMM output is neither written nor re-read
    add.replace_all_uses_with(y)
    erase_dead(graph, [add, out, mm, *mm.args])


# ------------------------------------------------------------------------------------------ norm prologue


def _fuse_norm(graph: fx.Graph, mean: fx.Node, ctx, tables: dict) -> None:
    """RMSNorm whose output only feeds 1-3 decode-sized linears -> one ``decode_gemv`` with the norm inside.
    ``tables``: the RoPE cos/sin rows materialised so far (``graph_utils.materialise_shared``)."""
    try:
        norm = residual_norm.match_norm(mean)
    except residual_norm.NoMatch:
        raise _NoMatch("") from None  # residual_norm reports why this is not a clean norm
    if norm is None or norm.kind != "rms":
        raise _NoMatch("")
    mms = _linears_reading(norm.y)
    if mms is None or not _in_scope(next(iter(norm.y.users)), mms[0], ctx):
        raise _NoMatch("")
    if norm.weight is None or norm.bias is not None or norm.eps_tensor is not None or norm.form not in _NORM_FORMS:
        raise _NoMatch(f"RMSNorm ({norm.form}) before decode linears not folded into the GEMV: the kernel takes "
                       "a weighted form (Llama, Gemma, fp32 weight) with a constant eps")
    if dtype_of(norm.y) != dtype_of(norm.x):
        raise _NoMatch("RMSNorm before decode linears not folded: its output dtype differs from its input's")
    lins = [_linear(mm) for mm in mms]
    if len({lin.weight for lin in lins}) != len(lins):
        raise _NoMatch("decode linears share a weight; not folded")
    gated = _gated_mul(lins) if len(lins) == 2 else None
    if gated is None and len(lins) > 3:
        raise _NoMatch(f"{len(lins)} linears read the normalised input; the GEMV kernel concatenates at most 3")
    if gated is not None:
        lins = gated[1]
        if any(lin.bias is not None for lin in lins):
            gated = None
    if any(lin.bias is not None and graph_utils.depends_on(lin.bias, [other.mm for other in lins]) for lin in lins):
        # the GEMV that computes the outputs would need the bias first: a cycle, on which Inductor failed
        raise _NoMatch("decode linears not folded: a bias is computed from one of their own outputs")
    m, k = val(lins[0].x2).shape
    hidden = shape_of(norm.y)[-1]
    if any(not known_equal(val(lin.x2).shape[-1], hidden) for lin in lins):
        # e.g. a per-head norm over D flattened to [M, H * D]: the kernel normalises each whole input row
        raise _NoMatch(f"RMSNorm over {hidden} values before decode linears not folded: they read its output "
                       f"reshaped to rows of {val(lins[0].x2).shape[-1]}")
    _check_measured_faster(m, lins, "silu" if gated is not None else "cat")
    rope = _rope_epilogue(lins, m, ctx) if gated is None and len(lins) >= 2 and rope_policy() == "on" else None
    chains = []
    if rope is not None:
        lins, chains = rope  # the rotated outputs first: the kernel rotates the first rope_weights
    fake = linears.FakeEval(val(norm.x))
    tail = [norm.weight, norm.eps, norm.weight_offset, norm.cast_before_weight, None, gated is not None]
    with graph.inserting_after(norm.y):
        x2 = fake.call(graph, aten.reshape.default, norm.x, [m, k])
    rope_args, anchor, local_rows, shared_rows = [], x2, [], []
    if chains:
        b, _, s, d = shape_of(chains[0].heads)
        with graph.inserting_after(x2):  # cos/sin [B', 1, S, D] -> one row per GEMV row: [M, D]
            local_rows = [fake.call(graph, aten.reshape.default, fake.call(graph, aten.expand.default, t, [b, 1, s, d]),
                                    [m, d])
                          for t in (chains[0].cos, chains[0].sin)]
        # every layer's kernel reads one materialised copy of the tables (Inductor would recompute them per layer)
        for row in local_rows:
            shared, new = graph_utils.materialise_shared(graph, row, row, tables)
            shared_rows.append(shared)
            anchor = new[-1] if new else row
        rope_args = [*shared_rows, d, len(chains)]
    writes = _cache_writes(lins, chains, m, ctx) if gated is None else None
    weights = [*[lin.weight for lin in lins], *[None] * (3 - len(lins))]
    # concatenated outputs take their biases into the kernel (added before the rotation, one rounding as addmm)
    biases = [None] * 3 if gated is not None else [*[lin.bias for lin in lins], *[None] * (3 - len(lins))]
    rope_args = rope_args or [None, None, 0, 0]
    cached_y = True
    pdl_launch = _pdl_launch(norm.x, ctx, params=[norm.weight])
    with graph.inserting_after(anchor):
        if writes:
            args = [x2, *weights, *tail[:4], *rope_args]
            caches = [w.cache if w else None for w in [*writes, *[None] * (3 - len(writes))]]
            mutated = tuple(len(args) + i for i, c in enumerate(caches) if c is not None)
            index = next(w.index for w in writes if w)
            base = _position_base(index)
            position = [base, True] if base is not None else [index, False]
            op = gemv.PDL_TWINS[_KV_OP] if pdl_launch else _KV_OP
            # k / v whose heads only the cache update reads need not be stored into y as well
            cached_y = not all(w.only_reader for w in writes if w)
            outs, inserted = graph_utils.insert_traced(
                graph, op, _without_defaults(op, [*args, *caches, *position, *biases, cached_y]),
                written=("Y", "C0", "C1", "C2"), mutated=mutated)
        else:
            gelu = gated is not None and gated[3] == "gelu_tanh"
            outs, inserted = _insert_op(graph, [x2, *weights, *tail, *rope_args, *biases, gelu], fake, pdl_launch)
    replaced = [*norm.interior, norm.y, *(lin.mm for lin in lins)]
    detail = {"prologue": f"rms_norm ({norm.form})", "shape": [m, k, [lin.width for lin in lins]],
              "weights": [lin.weight.name for lin in lins], **_launch_detail(pdl_launch)}
    last = inserted[-1]
    if gated is not None:
        final, _, chain, act = gated
        with graph.inserting_after(last):
            y = fake.call(graph, aten.reshape.default, outs[0], list(val(final).shape))
        ctx.matched([*replaced, *chain, final], inserted, anchor=final, detail={**detail, "epilogue": f"{act} * mul"},
                    saved_bytes=sum(graph_utils.tensor_bytes(n) for n in norm.interior))
        final.replace_all_uses_with(y)
        dead = [final, *chain]
        inserted.append(y)
    else:
        cached = [w for w in writes or () if w]
        n_biases = sum(b is not None for b in biases)
        epilogue = "concatenated outputs" + (f", bias on {n_biases}" if n_biases else "")
        epilogue += f", rope on {len(chains)} (head dim {chains[0].dim})" if chains else ""
        epilogue += f", kv-cache write of {len(cached)}" if cached else ""
        epilogue += " (cached heads not stored to the output)" if cached and not cached_y else ""
        rope_nodes = [n for c in chains for n in c.interior]
        ctx.matched([*replaced, *rope_nodes, *(w.update for w in cached)], inserted, anchor=lins[0].mm,
                    detail={**detail, "epilogue": epilogue},
                    saved_bytes=sum(graph_utils.tensor_bytes(n) for n in norm.interior))
        start, dead = 0, []
        for lin in lins:
            if len(lins) == 1:
                piece = outs[0]  # the whole output (an lm_head): no slice, so no copy where it is returned
            else:
                with graph.inserting_after(last):
                    piece = fake.call(graph, aten.slice.Tensor, outs[0], 1, start, start + lin.width)
                inserted.append(piece)
            last = piece
            start += lin.width
            linears.replace_output(graph, lin.mm, piece, fake)
        for chain in chains:
            chain.out.replace_all_uses_with(chain.heads)  # the heads view now reads rotated columns
            dead += chain.interior
        for write, new_cache in zip(cached, outs[1:]):
            write.update.replace_all_uses_with(new_cache)  # the cache as the kernel leaves it
            dead += [write.update, write.index]
    graph_utils.copy_stack_trace([lins[0].mm], [x2, *inserted, *(r for r in shared_rows if r not in local_rows)])
    erase_dead(graph, [*dead, *(lin.mm for lin in lins), *(a for lin in lins for a in lin.mm.args), norm.y,
                        *norm.interior, *local_rows])


@dataclass
class _RopeChain:
    """HF's ``apply_rotary_pos_emb`` on one linear's output, in post-grad ATen (h = D / 2):

        heads = permute(reshape(mm, [B, S, H, D]), [0, 2, 1, 3])              # [B, H, S, D]
        out   = heads * cos + cat([-heads[..., h:], heads[..., :h]], -1) * sin   # cos/sin [B or 1, 1, S, D]
    """

    heads: fx.Node
    out: fx.Node
    cos: fx.Node
    sin: fx.Node
    dim: int  # D
    interior: list[fx.Node]  # mul, slices, neg, cat, mul, add: dead once ``out``'s users read ``heads``


def _heads(lin: linears.Linear, m: int) -> fx.Node | None:
    """The [B, H, S, D] heads view of a linear's [M, N] output (bias included: the kernel adds it first),
    ``permute(reshape(mm, [B, S, H, D]), [0, 2, 1, 3])`` through only-user reshapes, with B * S = M and H * D = N."""
    node = lin.mm
    while (nxt := sole_user(node)) is not None and is_op(nxt, *_RESHAPES):
        node = nxt
    heads = sole_user(node)
    if heads is None or not is_op(heads, aten.permute) or list(heads.args[1]) != [0, 2, 1, 3]:
        return None
    b, h, s, d = shape_of(heads)
    if not all(isinstance(v, int) for v in (b, h, s, d)) or b * s != m or h * d != lin.width:
        return None
    return heads


def _rope_chain(lin: linears.Linear, m: int) -> _RopeChain | None:
    t = dtype_of(lin.mm)
    heads = _heads(lin, m)
    if heads is None:
        return None
    b, h, s, d = shape_of(heads)
    if d % 2:
        return None
    users = list(heads.users)
    muls = [u for u in users if is_op(u, aten.mul) and heads in u.args and len(u.args) == 2]
    slices = {(u.args[1] % 4, u.args[2], u.args[3] if len(u.args) > 3 else None): u for u in users
              if is_op(u, aten.slice) and len(u.args) >= 3 and (len(u.args) < 5 or u.args[4] == 1)}
    lo, hi = slices.get((3, 0, d // 2)), next((v for (dim, a, e), v in slices.items()
                                                if dim == 3 and a == d // 2 and e is not None and e >= d), None)
    if len(users) != 3 or len(muls) != 1 or lo is None or hi is None:
        return None
    neg, cat = sole_user(hi), sole_user(lo)
    if neg is None or not is_op(neg, aten.neg) or cat is None or sole_user(neg) is not cat:
        return None
    if not is_op(cat, aten.cat) or list(cat.args[0]) != [neg, lo] or (cat.args[1] if len(cat.args) > 1 else 0) % 4 != 3:
        return None
    mul_s, mul_c = sole_user(cat), muls[0]
    if mul_s is None or not is_op(mul_s, aten.mul) or len(mul_s.args) != 2:
        return None
    out = sole_user(mul_c)
    if out is None or sole_user(mul_s) is not out or not is_op(out, aten.add) or set(out.args) != {mul_c, mul_s}:
        return None
    if out.kwargs.get("alpha", 1) != 1:
        return None
    cos = mul_c.args[1] if mul_c.args[0] is heads else mul_c.args[0]
    sin = mul_s.args[1] if mul_s.args[0] is cat else mul_s.args[0]
    for tab in (cos, sin):
        shape = shape_of(tab) if isinstance(tab, fx.Node) else None
        if shape is None or len(shape) != 4 or tuple(shape[1:]) != (1, s, d) or shape[0] not in (1, b):
            return None
        if dtype_of(tab) != t or val(tab).device != val(lin.mm).device:
            return None
    if any(dtype_of(n) != t for n in (mul_c, mul_s, cat, out)) or not same_shape(shape_of(out), (b, h, s, d)):
        return None
    return _RopeChain(heads, out, cos, sin, d, [mul_c, lo, hi, neg, cat, mul_s, out])


def _normalised_first(lin: linears.Linear, depth: int = 6) -> bool:
    """Whether the linear's output, within a few elementwise / view ops, is reduced by a ``mean`` (an RMSNorm of
    its heads: QK-norm)."""
    frontier = [lin.mm]
    for _ in range(depth):
        frontier = [u for n in frontier for u in n.users]
        if any(is_op(u, aten.mean) for u in frontier):
            return True
        frontier = [u for u in frontier
                    if is_op(u, *_RESHAPES, aten.permute, aten.pow, aten.mul, prims.convert_element_type)]
    return False


def _rope_epilogue(lins: list[linears.Linear], m: int, ctx) -> tuple[list[linears.Linear], list[_RopeChain]] | None:
    """(the linears with the rotated ones first, their rope chains) when the kernel can compute the chains on
    these linears' outputs (q and k) in its epilogue: one shared cos/sin and head dim, and every output (v too)
    a whole number of heads."""
    chains = {id(lin): _rope_chain(lin, m) for lin in lins}
    found = [c for c in chains.values() if c is not None]
    if not found:
        if sum(_normalised_first(lin) for lin in lins) >= 2:
            ctx.near_miss(lins[0].mm, "rope not folded into the q/k GEMV: q and k are RMS-normalised per head first "
                                      "(QK-norm, as in Qwen3 / Gemma3); the kernel's programs do not hold whole heads")
        return None
    first = found[0]
    if any((c.cos, c.sin, c.dim) != (first.cos, first.sin, first.dim) for c in found):
        ctx.near_miss(lins[0].mm, "rope not folded into the q/k GEMV: q and k use different cos/sin tables")
        return None
    if any(graph_utils.depends_on(tab, [lin.mm for lin in lins]) for tab in (first.cos, first.sin)):
        # the kernel reads them in its epilogue: they must exist before it runs
        ctx.near_miss(lins[0].mm, "rope not folded into the q/k GEMV: its cos/sin are computed from the projections")
        return None
    if any(lin.width % first.dim for lin in lins):
        ctx.near_miss(lins[0].mm, f"rope not folded into the q/k GEMV: an output is not a whole number of "
                                  f"{first.dim}-wide heads")
        return None
    ordered = [lin for lin in lins if chains[id(lin)]] + [lin for lin in lins if not chains[id(lin)]]
    return ordered, found


@dataclass
class _CacheWrite:
    """HF StaticCache's update of one layer's K or V cache with a linear's heads, in post-grad ATen:

        cache.index_copy_(2, index, heads)    # cache [B, H, L, D], index [S] (cache_position), heads [B, H, S, D]
        update = index_put(cache, [None, None, index], heads)     # post-grad: functional, index_copy decomposed
    """

    update: fx.Node
    cache: fx.Node
    index: fx.Node
    only_reader: bool  # the update is the heads' one user: once the cache holds them, nothing reads them from y


def _cache_write(value: fx.Node) -> _CacheWrite | None:
    """The cache update that stores ``value`` (a [B, H, S, D] heads tensor) whole along the cache's dim 2."""
    for user in value.users:
        if not is_op(user, aten.index_put) or len(user.args) < 3 or user.args[2] is not value:
            continue
        indices = list(user.args[1])
        accumulate = user.args[3] if len(user.args) > 3 else user.kwargs.get("accumulate", False)
        if len(indices) != 3 or indices[:2] != [None, None] or accumulate:
            continue
        cache, index = user.args[0], indices[2]
        if not isinstance(cache, fx.Node) or not isinstance(index, fx.Node):
            continue
        b, h, s, d = shape_of(value)
        shape, idx = shape_of(cache), val(index)
        if shape is None or len(shape) != 4 or not all(isinstance(v, int) for v in shape):
            continue
        if (shape[0], shape[1], shape[3]) != (b, h, d) or dtype_of(cache) != dtype_of(value):
            continue
        if idx.dim() != 1 or idx.shape[0] != s or idx.dtype not in (torch.int64, torch.int32):
            continue
        if val(cache).device != val(value).device or idx.device != val(value).device:
            continue
        return _CacheWrite(user, cache, index, only_reader=sole_user(value) is user)
    return None


def _position_base(index: fx.Node) -> fx.Node | None:
    """p when ``index`` [S] is ``iota(S) + p``, p an integer tensor of one element (HF StaticCache's
    ``arange(S) + cumulative_length``): the kernel then adds s itself, and the index needs no kernel of its own
    (Inductor computed it into a buffer for the GEMV to read: one launch per layer)."""
    if not is_op(index, aten.add) or len(index.args) != 2 or index.kwargs.get("alpha", 1) != 1:
        return None
    s, out = shape_of(index)[0], val(index)
    for ramp, base in (index.args, index.args[::-1]):
        if not (isinstance(ramp, fx.Node) and isinstance(base, fx.Node) and _is_ramp(ramp, s)):
            continue
        p = val(base)
        if (isinstance(p, torch.Tensor) and p.dim() <= 1 and p.numel() == 1 and p.dtype in (torch.int64, torch.int32)
                and p.device == out.device):
            return base
    return None


def _is_ramp(node: fx.Node, length: int) -> bool:
    """``node`` is 0, 1, ..., length - 1: ``prims.iota``, the form ``arange`` takes after Inductor's decompositions
    (the post-grad graph has no aten.arange)."""
    return (is_op(node, prims.iota) and node.args[:1] == (length,) and node.kwargs.get("start") == 0
            and node.kwargs.get("step") == 1)


def _cache_writes(lins: list[linears.Linear], chains: list[_RopeChain], m: int, ctx) -> list | None:
    """Per linear, the KV-cache update its (rotated) heads feed, when the GEMV can write them in its epilogue:
    traced on CUDA, policy on, every cache of one layout and one position index that does not depend on the
    linears (or None when there is none)."""
    if kv_write_policy() != "on" or val(lins[0].x2).device.type != "cuda":
        return None
    rotated = {c.heads: c.out for c in chains}
    writes = []
    for lin in lins:
        heads = _heads(lin, m)
        writes.append(_cache_write(rotated.get(heads, heads)) if heads is not None else None)
    found = [w for w in writes if w]
    if not found:
        return None
    first = found[0]
    layouts = {(tuple(val(w.cache).shape), val(w.cache).stride()) for w in found}
    if len(layouts) > 1 or any(w.index is not first.index for w in found):
        ctx.near_miss(lins[0].mm, "kv-cache write not folded into the q/k/v GEMV: the caches differ in layout or "
                                  "position index")
        return None
    if graph_utils.depends_on(first.index, [lin.mm for lin in lins]):
        ctx.near_miss(lins[0].mm, "kv-cache write not folded: its positions are computed from the projections")
        return None
    return writes


def _linears_reading(y: fx.Node) -> list[fx.Node] | None:
    """The mm/addmm nodes that read ``y`` through a reshape to [M, K], when those are all of y's uses."""
    mms = []
    for user in y.users:
        if not is_op(user, *_RESHAPES) or val(user).dim() != 2:
            return None
        for mm in user.users:
            if not (is_op(mm, aten.mm) and mm.args[0] is user) and not (is_op(mm, aten.addmm) and mm.args[1] is user):
                return None
            mms.append(mm)
    return mms or None


def _gated_mul(lins: list[linears.Linear]):
    """(final mul, [gate, up], chain nodes, activation) when the two linears' outputs are only used as
    ``act(g) * u``, act one of ``_GATE_ACTIVATIONS`` (told apart by value, see ``_gate_activation``)."""
    for gate, up in (lins, lins[::-1]):
        g, u = _through_reshape(gate.mm), _through_reshape(up.mm)
        mul = sole_user(u)
        if mul is None or not is_op(mul, aten.mul) or len(mul.args) != 2 or u not in mul.args:
            continue
        s = mul.args[0] if mul.args[1] is u else mul.args[1]
        shape = shape_of(u)
        if not isinstance(s, fx.Node) or sole_user(s) is not mul:
            continue
        if not (same_shape(shape_of(s), shape) and same_shape(shape_of(mul), shape)):
            continue
        if dtype_of(mul) != dtype_of(gate.mm) or dtype_of(s) != dtype_of(g):
            continue
        found = _gate_activation(g, s)
        if found is None:
            continue
        act, chain = found
        return mul, [gate, up], [*([g] if g is not gate.mm else []), *([u] if u is not up.mm else []), *chain], act
    return None


# The gate activations the kernel computes (GELU_TANH or not), applied as eager's kernels apply them to a 16-bit
# tensor: in fp32, rounded once
_GATE_ACTIVATIONS = {
    "silu": torch.nn.functional.silu,
    "gelu_tanh": functools.partial(torch.nn.functional.gelu, approximate="tanh"),  # Gemma's GeGLU
}
_ULP = {torch.float32: 1e-5, torch.float16: 2**-10, torch.bfloat16: 2**-7}  # relative: one rounding's worth
# The ops a gate activation's chain may use: smooth arithmetic, no comparison, clamp, where or rounding, so that
# agreeing on every finite value of a 16-bit dtype (and on a grid over fp32's whole range) is agreement everywhere
# (a clamp or a threshold past some value would show on the values beyond it)
_SMOOTH_OPS = (aten.silu, aten.sigmoid, aten.exp, aten.expm1, aten.neg, aten.add, aten.sub, aten.mul, aten.div,
               aten.reciprocal, aten.tanh, aten.pow, aten.gelu, aten.erf, aten.sqrt, aten.rsqrt,
               torch.ops.prims.convert_element_type, aten._to_copy, aten.clone, aten.alias)


def _finite_values(t: torch.dtype) -> torch.Tensor:
    """Every finite value of a 16-bit dtype; for fp32, every finite bf16 value (fp32's range, 7 bits of each
    binade), in fp32."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    x = bits.view(torch.float16 if t == torch.float16 else torch.bfloat16)
    return x[x.isfinite()].to(t)


def _gate_activation(g: fx.Node, s: fx.Node) -> tuple[str, list[fx.Node]] | None:
    """(name, chain) when ``s`` is computed from ``g`` alone by smooth elementwise ops (``chain``, in graph order:
    however the model or a decomposition spelled it, with or without an fp32 round trip; ``_SMOOTH_OPS``) and
    equals one of ``_GATE_ACTIVATIONS`` within one rounding on every finite value of the dtype (fp32: of bf16), and
    on 4,097 values from -8 to 8: in fp32 to 1e-5, in 16-bit dtypes bit for bit on at least 97 % of them."""
    chain = _elementwise_chain(g, s)
    t = dtype_of(g)
    if chain is None or t not in _ULP or any(not is_op(n, *_SMOOTH_OPS) for n in chain):
        return None
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():  # real tensors, whatever mode the pass runs under
        x = torch.linspace(-8, 8, 4097).to(t)
        everywhere = _finite_values(t)
        try:
            got, got_everywhere = (graph_utils.run_nodes(chain, {g: v})[s] for v in (x, everywhere))
        except Exception:  # noqa: BLE001 - an op that will not run on these values is not an activation we know
            return None
        if not all(isinstance(r, torch.Tensor) and r.shape == v.shape
                   for r, v in ((got, x), (got_everywhere, everywhere))):
            return None
        for name, act in _GATE_ACTIVATIONS.items():
            want = act(x.float()).to(t)
            if not torch.allclose(got, want, rtol=_ULP[t], atol=1e-6, equal_nan=True):
                continue
            if not torch.allclose(got_everywhere, act(everywhere.float()).to(t), rtol=_ULP[t], atol=1e-6,
                                  equal_nan=True):
                continue
            # in 16-bit dtypes one rounding's worth is coarse: gelu's erf form is within it of the tanh form, and a
            # silu rounded twice (sigmoid, then the product) within it of one rounding. A decomposition of the same
            # function (bf16: 99.2 % equal, on CPU) is told apart from those (bf16: 76 % and 79 %) by how often it
            # is bit for bit the same.
            if t == torch.float32 or (got == want).double().mean() >= 0.97:
                return name, chain
    return None


def _elementwise_chain(a: fx.Node, out: fx.Node, limit: int = 32) -> list[fx.Node] | None:
    """The nodes that compute ``out`` from ``a`` and constants alone, in graph order, when each is an elementwise
    op and only ``out`` is used outside them (``a``'s users all inside): else None."""
    inside, stack = set(), [out]
    while stack:
        node = stack.pop()
        if node is a or node in inside:
            continue
        if node.op != "call_function" or torch.Tag.pointwise not in getattr(node.target, "tags", ()):
            return None
        inside.add(node)
        if len(inside) > limit:
            return None
        for arg in (*node.args, *node.kwargs.values()):
            if isinstance(arg, fx.Node):
                stack.append(arg)
            elif not isinstance(arg, (int, float, bool, torch.dtype)):
                return None
    if any(u not in inside for u in a.users):
        return None
    if any(u not in inside for n in inside if n is not out for u in n.users):
        return None
    return [n for n in a.graph.nodes if n in inside]


# ------------------------------------------------------------------------------------------ rewriting


def _without_defaults(op, args: list) -> list:
    """``args`` less the trailing ones that equal ``op``'s defaults (None, 0, False): the call reads as before the
    optional arguments existed."""
    schema = op._schema.arguments
    while args and len(args) <= len(schema) and schema[len(args) - 1].has_default_value() \
            and not isinstance(args[-1], fx.Node) and args[-1] == schema[len(args) - 1].default_value:
        args = args[:-1]
    return args


def _insert_op(graph: fx.Graph, args: list, fake: linears.FakeEval,
               pdl_launch: bool = False) -> tuple[list[fx.Node], list[fx.Node]]:
    """The op on the nodes' values: traced (Inductor emits the Triton kernel) on CUDA, or its PDL twin
    (``pdl_launch``: an extern op); one node elsewhere."""
    args = _without_defaults(_OP, args)
    if val(args[0]).device.type == "cuda" and not pdl_launch:
        return graph_utils.insert_traced(graph, _OP, args, written=("Y",))
    node = fake.call(graph, gemv.PDL_TWINS[_OP] if pdl_launch else _OP, *args)
    return [node], [node]


# ------------------------------------------------------------------------------------------ PDL launches

_TRACED_KERNELS = (torch.ops.higher_order.triton_kernel_wrapper_functional,
                   torch.ops.higher_order.triton_kernel_wrapper_mutation)
_FUNCTIONALIZED = tuple(getattr(torch.ops.higher_order, name) for name in ("auto_functionalized",
                                                                           "auto_functionalized_v2")
                        if hasattr(torch.ops.higher_order, name))
_TRITON_OPS = (decode_attention.decode_attention, *gemv.PDL_TWINS.values())


def _launches_triton(node: fx.Node) -> bool:
    """Whether ``node`` launches a Triton kernel: a traced user kernel (ours, or the model's own; Inductor's code
    launches it plainly) or one of our extern ops that launch Triton kernels (the decode attention, the GEMVs' PDL
    twins), also as ``auto_functionalized`` wraps one that writes in place. A graph's first such kernel is a plain
    launch: the later ones get PDL only where one of these computes their input."""
    if node.op != "call_function":
        return False
    return (node.target in _TRACED_KERNELS or node.target in _TRITON_OPS
            or (node.target in _FUNCTIONALIZED and node.args[0] in _TRITON_OPS))


def _pdl_launch(x: fx.Node, ctx, params: tuple = ()) -> bool:
    """Whether the GEMV reading ``x`` runs as its PDL twin: PDL is wanted for this compile and device, and ``x`` is
    computed by a Triton kernel of ours in this graph, so that this GEMV is not the graph's first kernel of ours
    (``kernels.pdl`` says why that makes loading the weights before the wait safe). ``params``: what else the
    kernel reads before its wait besides the linears' weights (``as_linear`` checked those), here the norm weight:
    each must be a graph input that no op of the graph writes."""
    if not all(p.op in ("placeholder", "get_attr") and not any(graph_utils.mutates(u, p) for u in p.users)
               for p in params):
        return False
    return pdl.wanted(val(x).device, ctx.graphed) and graph_utils.depends_on(x, where=_launches_triton)


def _launch_detail(pdl_launch: bool) -> dict:
    return {"launch": "pdl"} if pdl_launch else {}


def _launch_attention_with_pdl(graph: fx.Graph, ctx) -> None:
    """The decode attention ops (``attention_sdpa`` leaves them extern where PDL is wanted) whose q a Triton kernel
    of ours computes are launched with PDL: each lets the next kernel start while it runs (the o GEMV then loads
    its weights during the attention). Here, not in ``attention_sdpa``: it runs before this family's GEMVs exist."""
    for node in graph.nodes:
        if node.target is decode_attention.decode_attention and not node.kwargs.get("pdl", False):
            q = node.args[0]
            if pdl.wanted(val(q).device, ctx.graphed) and graph_utils.depends_on(q, where=_launches_triton):
                node.kwargs = {**node.kwargs, "pdl": True}
