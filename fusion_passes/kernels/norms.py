"""Residual add + RMSNorm / LayerNorm as one Triton kernel, exposed as ``torch.library.triton_op`` ops.

    # unfused (what the model does; every line is a read and a write of [M, N] unless Inductor fuses it)
    h = x + residual                                   x, residual [..., N] dtype T   ->  h [..., N] T
    y = norm(h.float(), eps) ... * weight              weight [N]                     ->  y [..., N]
    # fused: one pass over each row, x and residual read once, h and y written once
    h, y = torch.ops.fusion_passes.add_rms_norm(x, residual, weight, eps, ...)

Ops (all ``[..., N]`` in, last dim normalised, outputs contiguous):

    rms_norm(x, weight?, eps, weight_offset, cast_before_weight, out_dtype)              -> y
    add_rms_norm(x, residual, weight?, eps, weight_offset, cast_before_weight, out_dtype) -> (h, y)
    layer_norm(x, weight?, bias?, eps, out_dtype)                                        -> y
    add_layer_norm(x, residual, weight?, bias?, eps, out_dtype)                          -> (h, y)

The math, per row, exactly as HF writes it (all reductions in fp32):

    h  = (x + residual) rounded to T                          (add_* ops only)
    n  = h * rsqrt(mean(h**2) + eps)                          RMSNorm
    n  = (h - mean(h)) * rsqrt(var(h) + eps)                  LayerNorm (biased variance)
    n  = n rounded to T            if cast_before_weight      (Llama: ``weight * n.to(T)``)
    y  = n * (weight + weight_offset) [+ bias]                (Gemma: ``n * (1 + weight)``, offset 1.0)
    y  = y rounded to out_dtype

Which implementation runs:
- CUDA tensors: the Triton kernel, launched through ``wrap_triton`` so that when the op is traced under
  functionalization (AOTAutograd, or our post-grad rewrite) Inductor sees the kernel itself and emits it in
  its generated code.
- Other devices: plain torch (the same math, so CPU graphs that use the ops run and match eager).
- ``TRITON_INTERPRET=1`` set before triton is imported: the Triton kernel also runs on real CPU tensors
  (the interpreter), which is how the kernel is tested without a GPU.
"""

import functools
from typing import Optional

import torch
from torch.library import triton_op, wrap_triton

from . import is_interpreted, launch_options

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU-only torch without triton: the ops exist and run their torch implementation
    triton = None

__all__ = [
    "rms_norm",
    "add_rms_norm",
    "layer_norm",
    "add_layer_norm",
    "launch_config",
    "MAX_HIDDEN",
    "INTERPRETED",
    "HAS_TRITON",
]

HAS_TRITON = triton is not None

# Largest hidden size the kernel handles: it keeps a whole row in registers (one pass over memory).
MAX_HIDDEN = 16384


# ------------------------------------------------------------------------------------------ the kernel


if triton is not None:

    def _autotune_configs() -> list[triton.Config]:
        # The tile shape (ROWS x BLOCK) is fixed by launch_config from N; only the warp count is tuned, so the
        # grid never depends on the chosen config (simplest for Inductor and for dynamic row counts).
        return [triton.Config({}, num_warps=w) for w in (2, 4, 8, 16)]

    @triton.autotune(configs=_autotune_configs(), key=["N", "ROWS", "IS_RMS", "HAS_RES"])
    @triton.jit
    def _norm_kernel(
        X,  # [M, N] input, row stride stride_x, dtype T
        R,  # [M, N] residual (None unless HAS_RES)
        W,  # [N] weight (None unless HAS_W)
        B,  # [N] bias (None unless HAS_B)
        EPS,  # 0-d tensor holding eps (None unless EPS_PTR; eps is then ignored)
        H,  # [M, N] out: x + residual in T (None unless HAS_RES)
        Y,  # [M, N] out: the normalised rows in out_dtype
        M,
        N,
        stride_x,
        stride_r,
        stride_h,
        stride_y,
        eps,
        weight_offset,
        IS_RMS: tl.constexpr,
        HAS_RES: tl.constexpr,
        HAS_W: tl.constexpr,
        HAS_B: tl.constexpr,
        HAS_OFFSET: tl.constexpr,
        CAST_BEFORE_W: tl.constexpr,
        EPS_PTR: tl.constexpr,
        ROWS: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        """One program normalises ROWS rows; each row is loaded once and held in registers (BLOCK >= N)."""
        pid = tl.program_id(0)
        rows = (pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]  # [ROWS, 1]
        cols = tl.arange(0, BLOCK)[None, :]  # [1, BLOCK]
        col_ok = cols < N
        mask = (rows < M) & col_ok

        # streamed once: evict first; the weight and bias are read by every program: keep them in L2
        x = tl.load(X + rows * stride_x + cols, mask=mask, other=0.0, eviction_policy="evict_first")
        if HAS_RES:
            r = tl.load(R + rows * stride_r + cols, mask=mask, other=0.0, eviction_policy="evict_first")
            # round the sum to T, as eager does, before normalising it
            x = (x.to(tl.float32) + r.to(tl.float32)).to(X.dtype.element_ty)
            tl.store(H + rows * stride_h + cols, x, mask=mask)
        xf = x.to(tl.float32)
        if EPS_PTR:  # eps is a tensor (a float that torch.compile made a graph input); rounded to fp32 as eager does
            eps = tl.load(EPS).to(tl.float32)

        if IS_RMS:
            var = tl.sum(xf * xf, axis=1) / N
            n = xf * tl.rsqrt(var + eps)[:, None]
        else:
            mean = tl.sum(xf, axis=1) / N
            xc = tl.where(col_ok, xf - mean[:, None], 0.0)
            var = tl.sum(xc * xc, axis=1) / N
            n = xc * tl.rsqrt(var + eps)[:, None]

        if CAST_BEFORE_W:
            n = n.to(X.dtype.element_ty).to(tl.float32)
        if HAS_W:
            w = tl.load(W + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
            if HAS_OFFSET:
                w = w + weight_offset
            n = n * w
        if HAS_B:
            n = n + tl.load(B + cols, mask=col_ok, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(Y + rows * stride_y + cols, n.to(Y.dtype.element_ty), mask=mask)


# True when TRITON_INTERPRET=1 was set before triton was imported: the kernel then runs on CPU tensors.
INTERPRETED = triton is not None and is_interpreted(_norm_kernel.fn)


@functools.lru_cache(maxsize=None)
def launch_config(n: int) -> tuple[int, int]:
    """(ROWS, BLOCK) for hidden size ``n``: a row per program for n >= 1024, else rows packed to ~2K elements."""
    block = 1 << max(0, n - 1).bit_length()  # next power of two
    rows = 1 if block >= 1024 else min(16, 2048 // block)
    return rows, block


def _launch(x, residual, weight, bias, h, y, eps, eps_tensor, weight_offset, is_rms, cast_before_weight) -> None:
    """Run the kernel over x [M, N] (last dim contiguous). Traceable: M may be symbolic, N must be static."""
    m, n = x.shape
    rows, block = launch_config(int(n))
    grid = (triton.cdiv(m, rows),)
    meta = dict(
        IS_RMS=is_rms,
        HAS_RES=residual is not None,
        HAS_W=weight is not None,
        HAS_B=bias is not None,
        HAS_OFFSET=weight_offset != 0.0,
        CAST_BEFORE_W=cast_before_weight,
        EPS_PTR=eps_tensor is not None,
        ROWS=rows,
        BLOCK=block,
    )
    args = (
        x, residual, weight, bias, eps_tensor, h, y, m, n,
        x.stride(0),
        residual.stride(0) if residual is not None else 0,
        h.stride(0) if h is not None else 0,
        y.stride(0),
        eps, weight_offset,
    )  # fmt: skip
    if INTERPRETED and x.device.type != "cuda":
        # the autotuner would benchmark each config in the (slow) interpreter: run one config directly
        _norm_kernel.fn[grid](*args, **meta, num_warps=4, **launch_options())
    else:
        wrap_triton(_norm_kernel)[grid](*args, **meta, **launch_options())


def _use_triton(x: torch.Tensor) -> bool:
    # type(x) is torch.Tensor: a real tensor, not a fake/functional one being traced (the interpreter
    # cannot run on those; tracing a CPU graph keeps the torch implementation)
    if not HAS_TRITON:
        return False
    return x.device.type == "cuda" or (INTERPRETED and type(x) is torch.Tensor)


def _rows(t: torch.Tensor | None, n) -> torch.Tensor | None:
    """``t`` as [M, N] with a unit column stride (a view when possible)."""
    if t is None:
        return None
    t2 = t.reshape(-1, n)
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _vec(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.contiguous()


def _run(x, residual, weight, bias, eps, eps_tensor, weight_offset, is_rms, cast_before_weight, out_dtype):
    """Shared body of the four ops: returns (h or None, y), both shaped like x."""
    n = x.shape[-1]
    out_dtype = out_dtype if out_dtype is not None else x.dtype
    x2, r2 = _rows(x, n), _rows(residual, n)
    h2 = torch.empty(x2.shape, dtype=x.dtype, device=x.device) if residual is not None else None
    y2 = torch.empty(x2.shape, dtype=out_dtype, device=x.device)
    eps_t = eps_tensor.reshape(1) if eps_tensor is not None else None
    _launch(x2, r2, _vec(weight), _vec(bias), h2, y2, eps, eps_t, weight_offset, is_rms, cast_before_weight)
    h = h2.view(x.shape) if h2 is not None else None
    return h, y2.view(x.shape)


# ------------------------------------------------------------------------------------------ torch reference


def _torch_norm(x, residual, weight, bias, eps, eps_tensor, weight_offset, is_rms, cast_before_weight, out_dtype):
    """The same math in plain torch (the CPU implementation, and the reference the tests start from)."""
    h = x + residual if residual is not None else None
    src = h if h is not None else x
    xf = src.float()
    if eps_tensor is not None:
        eps = eps_tensor.to(torch.float32)
    if is_rms:
        n = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    else:
        var, mean = torch.var_mean(xf, dim=-1, correction=0, keepdim=True)
        n = (xf - mean) * torch.rsqrt(var + eps)
    if cast_before_weight:
        n = n.to(src.dtype).float()
    if weight is not None:
        w = weight.float()
        n = n * (w + weight_offset if weight_offset != 0.0 else w)
    if bias is not None:
        n = n + bias.float()
    y = n.to(out_dtype if out_dtype is not None else x.dtype)
    return h, y.contiguous()


def _kernel_takes(x, weight, bias) -> bool:
    """Whether the kernel computes what ``_torch_norm`` does: it reads the weight and bias as [N] vectors (eager
    broadcasts others). The pass gives it only such inputs."""
    n = x.shape[-1]
    return all(t is None or t.shape == (n,) for t in (weight, bias))


def _impl(x, residual, weight, bias, eps, eps_tensor, weight_offset, is_rms, cast_before_weight, out_dtype):
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype):
        # h is x's shape and dtype (the fake says so): eager's broadcasting / promoting add would give another
        raise ValueError(f"fusion_passes norm ops: the residual must have x's shape and dtype {tuple(x.shape)} "
                         f"{x.dtype}, got {tuple(residual.shape)} {residual.dtype}; expand or cast it first")
    fn = _run if _use_triton(x) and _kernel_takes(x, weight, bias) else _torch_norm
    return fn(x, residual, weight, bias, eps, eps_tensor, weight_offset, is_rms, cast_before_weight, out_dtype)


def _fake(x, residual, out_dtype):
    y = torch.empty(x.shape, dtype=out_dtype if out_dtype is not None else x.dtype, device=x.device)
    h = torch.empty(x.shape, dtype=x.dtype, device=x.device) if residual is not None else None
    return h, y


# ------------------------------------------------------------------------------------------ the ops
_define_op = triton_op if HAS_TRITON else torch.library.custom_op

# eps_tensor: a 0-d float tensor used instead of eps when given. torch.compile(dynamic=True) turns a float
# module attribute such as ``variance_epsilon`` into a graph input, so eps is only known at run time.


@_define_op("fusion_passes::rms_norm", mutates_args=())
def rms_norm(
    x: torch.Tensor,
    weight: Optional[torch.Tensor],
    eps: float,
    weight_offset: float = 0.0,
    cast_before_weight: bool = False,
    out_dtype: Optional[torch.dtype] = None,
    eps_tensor: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """RMSNorm over the last dim.  x [..., N], weight [N] -> y [..., N] (out_dtype, default x.dtype)"""
    return _impl(x, None, weight, None, eps, eps_tensor, weight_offset, True, cast_before_weight, out_dtype)[1]


@_define_op("fusion_passes::add_rms_norm", mutates_args=())
def add_rms_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: Optional[torch.Tensor],
    eps: float,
    weight_offset: float = 0.0,
    cast_before_weight: bool = False,
    out_dtype: Optional[torch.dtype] = None,
    eps_tensor: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x + residual; y = RMSNorm(h).  x, residual [..., N] -> (h [..., N] x.dtype, y [..., N] out_dtype)"""
    return _impl(x, residual, weight, None, eps, eps_tensor, weight_offset, True, cast_before_weight, out_dtype)


@_define_op("fusion_passes::layer_norm", mutates_args=())
def layer_norm(
    x: torch.Tensor,
    weight: Optional[torch.Tensor],
    bias: Optional[torch.Tensor],
    eps: float,
    out_dtype: Optional[torch.dtype] = None,
    eps_tensor: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """LayerNorm over the last dim (biased variance).  x [..., N], weight/bias [N] -> y [..., N]"""
    return _impl(x, None, weight, bias, eps, eps_tensor, 0.0, False, False, out_dtype)[1]


@_define_op("fusion_passes::add_layer_norm", mutates_args=())
def add_layer_norm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: Optional[torch.Tensor],
    bias: Optional[torch.Tensor],
    eps: float,
    out_dtype: Optional[torch.dtype] = None,
    eps_tensor: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """h = x + residual; y = LayerNorm(h).  x, residual [..., N] -> (h [..., N], y [..., N])"""
    return _impl(x, residual, weight, bias, eps, eps_tensor, 0.0, False, False, out_dtype)


# Fake (meta) implementations: shapes and dtypes only, so tracing never runs a kernel.


@rms_norm.register_fake
def _(x, weight, eps, weight_offset=0.0, cast_before_weight=False, out_dtype=None, eps_tensor=None):
    return _fake(x, None, out_dtype)[1]


@add_rms_norm.register_fake
def _(x, residual, weight, eps, weight_offset=0.0, cast_before_weight=False, out_dtype=None, eps_tensor=None):
    return _fake(x, residual, out_dtype)


@layer_norm.register_fake
def _(x, weight, bias, eps, out_dtype=None, eps_tensor=None):
    return _fake(x, None, out_dtype)[1]


@add_layer_norm.register_fake
def _(x, residual, weight, bias, eps, out_dtype=None, eps_tensor=None):
    return _fake(x, residual, out_dtype)
