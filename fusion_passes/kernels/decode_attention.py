"""``fusion_passes::decode_attention``: attention for a few query rows over a (static) KV cache, GQA in-kernel.

    # unfused (HF eager attention at decode; q [B, H, Sq, D] with Sq <= 16, cache k/v [B, Hkv, Sk, D])
    k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)       # a copy of the whole cache, every step
    s = softmax(q @ k.transpose(-1, -2) * scale + mask, -1, dtype=f32)
    out = s.to(q.dtype) @ v                                     # 5 kernels, the scores written and re-read
    # fused: two kernels (flash-decoding): programs over (KV head, key chunk) read each cached key once for the
    # H // Hkv query heads sharing it and keep partial softmax results; a small kernel combines the chunks
    out = torch.ops.fusion_passes.decode_attention(q, k, v, mask, scale, is_causal)
    # softcap > 0 (Gemma2's logit softcapping): scores = softcap * tanh(q @ k.T * scale), then the mask
    out = torch.ops.fusion_passes.decode_attention(q, k, v, mask, scale, is_causal, softcap)

``prefetch`` (optional, CUDA only, off by default in the pass: ``FUSION_PASSES_DECODE_ATTENTION_PREFETCH``): a
tensor the next kernel will read, the o-proj weight; the attention kernel's programs request its bytes into L2
(PTX ``prefetch.global.L2::evict_last``, one request per 128-byte line, nothing waits for them) while the
attention itself, latency-bound at decode, leaves HBM bandwidth unused. It changes no result. On the H200 it
measured slower (session 15: issuing the requests costs the attention kernel more than the GEMV saves).

``mask`` is additive, broadcastable to [B, H, Sq, Sk] (None for none); ``is_causal`` masks key j > query i
(SDPA's top-left alignment). The softmax runs in fp32 with an online (running max) formulation, as SDPA's
kernels do. A row whose every key is masked with -inf gives 0, as SDPA does (its safe softmax; eager's softmax
gives NaN there, and where the attention pass replaces eager attention it puts that NaN back itself). A NaN row
would poison later layers: at a left-padded prompt's blocked rows, 0 * NaN in the next attention's P @ V.

``pdl`` (``decode_attention`` only): both kernels are launched with programmatic dependent launch (``kernels.pdl``,
sm_90+): each lets the next kernel start, then waits for the one before it first thing, so the o GEMV after the
combine kernel requests its weights while the attention runs. Same results.

Two ops with one body. ``decode_attention`` (the low-level Library API: a ``custom_op`` wrapper would add ~50-100 us
per call) is what the attention pass inserts; Inductor calls it as an extern kernel, which launches the two
Triton kernels from Python on every step. ``decode_attention_inline`` is a ``triton_op``: on CUDA the pass
traces it into the graph (unless ``FUSION_PASSES_DECODE_ATTENTION_INLINE=off``), so Inductor emits both kernels
in its generated code and no Python runs per step (host time that a decode step without CUDA graphs pays in
full: on the H200 the 1B step without graphs went from 8.7 to 3.5 ms). Off CUDA the math runs in torch (or the
kernels in Triton's interpreter when ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import math

from typing import Optional

import torch
from torch.library import triton_op, wrap_triton

from . import ieee_fp32_dot, is_interpreted, launch_options, pdl
from .pdl import gdc_launch_dependents, gdc_wait  # noqa: F401 - the kernels' PDL branches call them

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only torch without triton
    triton = None

__all__ = ["decode_attention", "decode_attention_inline", "reference", "MAX_QUERY", "MAX_ROWS", "MAX_HEAD_DIM",
           "HAS_TRITON", "INTERPRETED", "WRITTEN"]

HAS_TRITON = triton is not None
MAX_QUERY = 16
MAX_ROWS = 64  # Sq * (H // Hkv): the query rows sharing one KV head, held in one tile
MAX_HEAD_DIM = 256
_TARGET_PROGRAMS = 256  # about two programs per SM of an H100/H200
_MAX_SPLITS = 64
WRITTEN = ("M_PART", "L_PART", "ACC_PART", "OUT")  # the kernels' arguments they store to (the rest are read)

_lib = torch.library.Library("fusion_passes", "FRAGMENT")
_lib.define("decode_attention(Tensor q, Tensor k, Tensor v, Tensor? mask, float scale, bool is_causal, "
            "float softcap=0.0, Tensor? prefetch=None, bool pdl=False) -> Tensor")
_LINE_BYTES = 128  # one L2 line: one prefetch request


if triton is not None:

    @triton.jit
    def prefetch_l2(P, first, n, PER: tl.constexpr, LINE: tl.constexpr):
        """Request ``P[first : first + PER]`` (clamped to n) into L2 with PTX ``prefetch.global.L2::evict_last``,
        one request per LINE elements (128 bytes), 128 per loop trip; nothing waits for them (CUDA only)."""
        for i in range(0, PER, 128 * LINE):
            offs = tl.minimum(first + i + tl.arange(0, 128) * LINE, n - 1)
            tl.inline_asm_elementwise("prefetch.global.L2::evict_last [$1]; mov.u32 $0, 0;", "=r,l", [P + offs],
                                      dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def _decode_attention_kernel(
        Q, K, V, MASK,
        sq_b, sq_h, sq_s,  # q strides (last dim contiguous)
        sk_b, sk_h, sk_s,
        sv_b, sv_h, sv_s,
        sm_b, sm_h, sm_q, sm_k,  # mask strides (0 where it broadcasts)
        H_KV, SQ, SK, D, DV, scale, softcap,
        M_PART, L_PART, ACC_PART,  # per-split partial max / sum / output (fp32), combined by _combine_kernel
        CHUNK,  # keys per split (a multiple of BLOCK_N)
        PF, PF_N,  # the tensor whose lines to request into L2 (PREFETCH), its element count
        GROUP: tl.constexpr,  # H // Hkv query heads per KV head
        HAS_MASK: tl.constexpr,
        IS_CAUSAL: tl.constexpr,
        SOFTCAP: tl.constexpr,  # scores = softcap * tanh(scores) before the mask (Gemma2)
        BLOCK_M: tl.constexpr,  # >= GROUP * SQ rows: (query head, query position) pairs of this KV head
        BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
        BLOCK_DV: tl.constexpr,
        IEEE_F32: tl.constexpr,  # fp32 q/k/v: full-precision dots, not Triton's TF32 default (kernels.ieee_fp32_dot)
        PREFETCH: tl.constexpr,  # request PF's lines into L2 first (CUDA only: PTX)
        PF_PER: tl.constexpr,  # PF elements per program, a multiple of 128 lines
        PF_LINE: tl.constexpr,  # PF elements per 128-byte line
        PDL: tl.constexpr,  # launched with programmatic dependent launch (kernels.pdl)
    ):  # fmt: skip
        PRECISION: tl.constexpr = "ieee" if IEEE_F32 else None  # None: Triton's default
        if PDL:  # the combine kernel, then the o GEMV (loading its weights), may start while this one runs
            gdc_launch_dependents()
        if PREFETCH:  # before anything else, so the lines arrive while this program computes
            program = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
            prefetch_l2(PF, program.to(tl.int64) * PF_PER, PF_N, PF_PER, PF_LINE)
        if PDL:  # q and the caches come from the kernel before (the q/k/v GEMV)
            gdc_wait()
        scale = tl.full([], scale, tl.float32)  # Inductor passes a Python float as fp64: keep the softmax in fp32
        softcap = tl.full([], softcap, tl.float32)
        pid = tl.program_id(0)
        split = tl.program_id(1)
        n_splits = tl.num_programs(1)
        # int64: a cache of 2**31 elements or more puts b * sk_b past int32 (the in-slice offsets are checked on the
        # host, ``_offsets_fit``)
        b = (pid // H_KV).to(tl.int64)
        kvh = pid % H_KV
        rows = tl.arange(0, BLOCK_M)
        row_ok = rows < GROUP * SQ
        head = kvh * GROUP + rows // SQ  # repeat_kv: query head h reads KV head h // GROUP
        qpos = rows % SQ
        d = tl.arange(0, BLOCK_D)
        dv = tl.arange(0, BLOCK_DV)
        q = tl.load(Q + b * sq_b + head[:, None] * sq_h + qpos[:, None] * sq_s + d[None, :],
                    mask=row_ok[:, None] & (d[None, :] < D), other=0.0)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
        k_base = K + b * sk_b + kvh.to(tl.int64) * sk_h
        v_base = V + b * sv_b + kvh.to(tl.int64) * sv_h
        start = split * CHUNK
        for n0 in range(start, start + CHUNK, BLOCK_N):
            n = n0 + tl.arange(0, BLOCK_N)
            n_ok = n < SK
            k = tl.load(k_base + n[:, None] * sk_s + d[None, :], mask=n_ok[:, None] & (d[None, :] < D), other=0.0)
            # v is requested with k, before the scores need k: at decode a program usually runs one iteration, and
            # a load placed after the softmax would add a second HBM round trip to every program
            v = tl.load(v_base + n[:, None] * sv_s + dv[None, :], mask=n_ok[:, None] & (dv[None, :] < DV), other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale  # [BLOCK_M, BLOCK_N] fp32
            if SOFTCAP:  # tanh(z) = 1 - 2 / (exp(2z) + 1): exact at both infinities, no libdevice
                s = softcap * (1.0 - 2.0 / (tl.exp(2.0 * s) + 1.0))
            if HAS_MASK:
                mk = tl.load(MASK + b * sm_b + head[:, None] * sm_h + qpos[:, None] * sm_q + n[None, :] * sm_k,
                             mask=row_ok[:, None] & n_ok[None, :], other=0.0)
                s = s + mk.to(tl.float32)
            if IS_CAUSAL:
                s = tl.where(n[None, :] <= qpos[:, None], s, float("-inf"))
            s = tl.where(n_ok[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all masked so far: keep exp() finite
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m_i - m_safe)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
            m_i = m_new
        part = (pid * n_splits + split) * BLOCK_M + rows  # [BLOCK_M] rows of this (kv head, split)
        tl.store(M_PART + part, m_i)
        tl.store(L_PART + part, l_i)
        tl.store(ACC_PART + part[:, None] * BLOCK_DV + dv[None, :], acc)

    @triton.jit
    def _combine_kernel(
        M_IN, L_IN, ACC_IN, OUT,
        so_b, so_h, so_s,
        H_KV, SQ, DV, N_SPLITS,
        GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_DV: tl.constexpr,
        PDL: tl.constexpr,
    ):  # fmt: skip
        """One program per (batch x KV head, query row): rescale the splits' partial results (the attention
        kernel's M_PART / L_PART / ACC_PART) and sum them."""
        if PDL:
            gdc_launch_dependents()
            gdc_wait()
        pid = tl.program_id(0)
        row = tl.program_id(1)
        b = pid // H_KV
        head = (pid % H_KV) * GROUP + row // SQ
        qpos = row % SQ
        sp = tl.arange(0, BLOCK_S)
        sp_ok = sp < N_SPLITS
        dv = tl.arange(0, BLOCK_DV)
        part = (pid * N_SPLITS + sp) * BLOCK_M + row
        m = tl.load(M_IN + part, mask=sp_ok, other=float("-inf"))
        l = tl.load(L_IN + part, mask=sp_ok, other=0.0)
        m_max = tl.max(m, axis=0)
        w = tl.exp(m - tl.where(m_max == float("-inf"), 0.0, m_max))
        acc = tl.load(ACC_IN + part[:, None] * BLOCK_DV + dv[None, :], mask=sp_ok[:, None], other=0.0)
        total = tl.sum(l * w, axis=0)  # >= 1 unless every key of the row is masked with -inf (then acc is 0)
        out = tl.sum(acc * w[:, None], axis=0) / tl.where(total == 0.0, 1.0, total)
        tl.store(OUT + b * so_b + head * so_h + qpos * so_s + dv, out.to(OUT.dtype.element_ty), mask=dv < DV)


INTERPRETED = triton is not None and is_interpreted(_decode_attention_kernel)


def reference(q, k, v, mask=None, scale=None, is_causal=False, softcap=0.0) -> torch.Tensor:
    """The op's math in torch (the CPU implementation, and the tests' oracle); rows that allow no key give 0."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if softcap:
        s = softcap * torch.tanh(s)
    if mask is not None:
        s = s + mask.float()
    if is_causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(~torch.ones(sq, sk, dtype=torch.bool, device=s.device).tril(), float("-inf"))
    p = torch.softmax(s, dim=-1).masked_fill((s == float("-inf")).all(-1, keepdim=True), 0.0)  # SDPA's safe softmax
    return (p.to(v.dtype).float() @ v.float()).to(q.dtype)


def _use_triton(q: torch.Tensor) -> bool:
    return HAS_TRITON and (q.is_cuda or (INTERPRETED and type(q) is torch.Tensor))


def _launch(q, k, v, mask, scale, is_causal, out, traced: bool, softcap: float = 0.0,
            prefetch: Optional[torch.Tensor] = None, pdl_launch: bool = False) -> None:
    """The two kernels over q [B, H, Sq, D], k/v [B, Hkv, Sk, D|Dv] (last dims contiguous), mask None or
    [B, H, Sq, Sk] (strides 0 where it broadcasts) into ``out``;
    ``traced``: through ``wrap_triton``, so that tracing puts the kernels themselves into the graph;
    ``prefetch``: a tensor whose lines to request into L2 (on CUDA; the interpreter has no PTX);
    ``pdl_launch``: both launched with programmatic dependent launch where the GPU has it (not traced)."""
    b, h, sq, dim = q.shape
    h_kv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
    ms = mask.stride() if mask is not None else (0, 0, 0, 0)
    group = h // h_kv
    block_m = max(16, triton.next_power_of_2(group * sq))
    block_n = 64 if dim <= 128 else 32
    block_dv = max(16, triton.next_power_of_2(dv))
    # Split the keys so that the grid fills the GPU (flash-decoding): one program per KV head alone would
    # stream the whole cache from a handful of SMs.
    splits = max(1, min(_MAX_SPLITS, _TARGET_PROGRAMS // (b * h_kv), triton.cdiv(sk, block_n)))
    chunk = triton.cdiv(triton.cdiv(sk, splits), block_n) * block_n
    splits = triton.cdiv(sk, chunk)
    parts = b * h_kv * splits * block_m
    m_part = torch.empty(parts, dtype=torch.float32, device=q.device)
    l_part = torch.empty(parts, dtype=torch.float32, device=q.device)
    acc_part = torch.empty((parts, block_dv), dtype=torch.float32, device=q.device)
    launch = wrap_triton if traced and q.device.type == "cuda" else (lambda kernel: kernel)
    with_pdl = pdl_launch and not traced and pdl.supported(q.device)
    launch_opts = launch_options(with_pdl)
    # every constexpr passed, defaults or not: Inductor's launcher for a traced user kernel takes no defaults
    pf = dict(PREFETCH=False, PF_PER=0, PF_LINE=1)
    if prefetch is not None and prefetch.is_cuda and not INTERPRETED:
        pf = dict(PREFETCH=True, **prefetch_shares(prefetch, b * h_kv * splits))
    else:
        prefetch = q  # never read (PREFETCH off): any tensor the kernels do not write
    launch(_decode_attention_kernel)[(b * h_kv, splits)](
        q, k, v, mask,
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        *ms,
        h_kv, sq, sk, dim, dv, scale, softcap,
        m_part, l_part, acc_part, chunk, prefetch, prefetch.numel(),
        GROUP=group, HAS_MASK=mask is not None, IS_CAUSAL=is_causal, SOFTCAP=softcap != 0.0, BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=max(16, triton.next_power_of_2(dim)), BLOCK_DV=block_dv, IEEE_F32=ieee_fp32_dot(q.dtype), **pf,
        PDL=with_pdl, num_warps=4, num_stages=2, **launch_opts,
    )  # fmt: skip
    launch(_combine_kernel)[(b * h_kv, group * sq)](
        m_part, l_part, acc_part, out, out.stride(0), out.stride(1), out.stride(2), h_kv, sq, dv, splits,
        GROUP=group, BLOCK_M=block_m, BLOCK_S=max(2, triton.next_power_of_2(splits)), BLOCK_DV=block_dv,
        PDL=with_pdl, num_warps=1, **launch_opts,
    )  # fmt: skip


def prefetch_shares(t: torch.Tensor, programs: int) -> dict:
    """``prefetch_l2``'s PER (elements per program, whole loop trips) and LINE for ``t`` over ``programs``."""
    line = _LINE_BYTES // t.element_size()
    return dict(PF_PER=triton.cdiv(triton.cdiv(t.numel(), programs), 128 * line) * 128 * line, PF_LINE=line)


def _attention(q, k, v, mask, scale, is_causal, traced: bool, softcap: float = 0.0,
               prefetch: Optional[torch.Tensor] = None, pdl_launch: bool = False) -> torch.Tensor:
    b, h, sq, dim = q.shape
    h_kv, dv = k.shape[1], v.shape[3]
    if not q.dtype == k.dtype == v.dtype:  # as SDPA; the kernel would not compile for mixed operands
        raise ValueError(f"decode_attention: q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if (not _use_triton(q) or h % h_kv or sq * (h // h_kv) > MAX_ROWS or max(dim, dv) > MAX_HEAD_DIM
            or q.numel() == 0 or k.shape[2] == 0):  # empty: no grid to launch (its arithmetic divides by zero)
        return reference(q, k, v, mask, scale, is_causal, softcap)
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    # the kernel indexes K/V by q's batch: a batch of 1 broadcasts over it, as in SDPA (stride 0, no copy)
    k, v = (t if t.shape[0] == b else t.expand(b, *t.shape[1:]) for t in (k, v))
    if mask is not None:
        mask = mask.expand(b, h, sq, k.shape[2])  # strides 0 where it broadcasts: nothing is copied
    if not _offsets_fit(q, k, v, mask):
        return reference(q, k, v, mask, scale, is_causal, softcap)
    out = torch.empty((b, h, sq, dv), dtype=q.dtype, device=q.device)
    _launch(q, k, v, mask, scale, is_causal, out, traced, softcap, prefetch, pdl_launch)
    return out


def _offsets_fit(q, k, v, mask) -> bool:
    """(mask None or expanded to [B, H, Sq, Sk].) Whether the kernel's int32 offsets stay below 2**31: it adds them to an int64 base, the batch's for q and
    the mask (any head), the (batch, KV head)'s for K and V (a key's row n * stride, e.g. in a [B, L, H, D] cache
    of 2**31 elements per sequence, would wrap)."""
    def last(t, dims):  # offset of the slice's last element along ``dims`` (torch strides are not negative)
        return sum((t.shape[i] - 1) * t.stride(i) for i in dims)
    spans = [last(q, (1, 2, 3)), last(k, (2, 3)), last(v, (2, 3))]  # q and the mask: every head from b's base
    if mask is not None:
        spans.append(last(mask, (1, 2, 3)))
    # each span on its own (not max()): traced with symbolic sizes, that guards only on the bound itself
    return all(span < 2**31 for span in spans)


def _impl(q, k, v, mask, scale, is_causal, softcap=0.0, prefetch=None, pdl=False):
    return _attention(q, k, v, mask, scale, is_causal, traced=False, softcap=softcap, prefetch=prefetch,
                      pdl_launch=pdl)


def _fake(q, k, v, mask, scale, is_causal, softcap=0.0, prefetch=None, pdl=False):
    return q.new_empty((*q.shape[:3], v.shape[-1]))


_lib.impl("decode_attention", _impl, "CompositeExplicitAutograd")
torch.library.register_fake("fusion_passes::decode_attention", _fake, lib=_lib)

decode_attention = torch.ops.fusion_passes.decode_attention.default
decode_attention_inline = None

if HAS_TRITON:

    @triton_op("fusion_passes::decode_attention_inline", mutates_args=())
    def decode_attention_inline(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor], scale: float,
        is_causal: bool, softcap: float = 0.0, prefetch: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """``decode_attention`` traceable into Inductor's graph: q [B, H, Sq, D], k [B, Hkv, Sk, D],
        v [B, Hkv, Sk, Dv], mask additive, broadcastable to [B, H, Sq, Sk] (or None) -> [B, H, Sq, Dv];
        softcap > 0: scores = softcap * tanh(scores) before the mask; prefetch: requested into L2, not read."""
        return _attention(q, k, v, mask, scale, is_causal, traced=True, softcap=softcap, prefetch=prefetch)

    decode_attention_inline.register_fake(_fake)
