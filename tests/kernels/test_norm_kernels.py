"""The residual-add + RMSNorm/LayerNorm Triton kernel against a float64 reference.

Without a GPU the kernel runs in Triton's interpreter, which must be switched on before triton is imported
(``TRITON_INTERPRET=1``). In a normal test run triton is already imported, so ``test_kernels_in_interpreter``
re-runs this file in a subprocess with the variable set; under ``TRITON_INTERPRET=1`` or on a CUDA machine
the tests below run directly (on CUDA they check the compiled kernel).

The interpreter costs ~20 ms per program, so the shapes are few rows of the large hidden sizes, and many
rows only for a small hidden size (where one program handles 16 rows).
"""

import pytest
import torch

from fusion_passes.kernels import LAUNCH_OPTIONS, norms
from tests.kernels import run_in_interpreter

DEVICE = "cuda" if torch.cuda.is_available() else ("cpu" if norms.INTERPRETED else None)
kernel_test = pytest.mark.skipif(DEVICE is None, reason="runs in the TRITON_INTERPRET=1 subprocess")

ops = torch.ops.fusion_passes
# Tolerance vs the float64 reference: a couple of ulps of the output dtype. (The interpreter also rounds
# fp32 -> bf16 by truncation where the GPU rounds to nearest even: a 1-ulp difference in bf16.)
TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}

# name -> (rms?, residual?, weight?, bias?, weight_offset, cast_before_weight)
VARIANTS = {
    "add_rms_llama": (True, True, True, False, 0.0, True),
    "rms_llama": (True, False, True, False, 0.0, True),
    "add_rms_gemma": (True, True, True, False, 1.0, False),
    "rms_noweight": (True, False, False, False, 0.0, False),
    "add_ln": (False, True, True, True, 0.0, False),
    "ln_nobias": (False, False, True, False, 0.0, False),
    "add_ln_noaffine": (False, True, False, False, 0.0, False),
}


@pytest.mark.skipif(DEVICE is not None, reason="the kernel tests run in this process")
@pytest.mark.skipif(not norms.HAS_TRITON, reason="triton is not installed")
def test_kernels_in_interpreter():
    """Run this file's kernel tests with TRITON_INTERPRET=1 (triton is already imported here)."""
    run_in_interpreter(__file__)


def _reference(x, residual, weight, bias, eps, rms, offset, cast_before_weight, out_dtype):
    """float64 math with eager's roundings: h to x.dtype, n to x.dtype before the weight (Llama)."""
    h = x + residual if residual is not None else x  # eager add, rounded to x.dtype
    hd = h.double()
    if rms:
        n = hd * torch.rsqrt(hd.pow(2).mean(-1, keepdim=True) + eps)
    else:
        n = (hd - hd.mean(-1, keepdim=True)) * torch.rsqrt(hd.var(-1, correction=0, keepdim=True) + eps)
    if cast_before_weight:
        n = n.to(x.dtype).double()
    if weight is not None:
        n = n * (weight.double() + offset)
    if bias is not None:
        n = n + bias.double()
    return h, n.to(out_dtype)


def _call(variant, x, r, w, b, eps, out_dtype, eps_tensor=None):
    rms, res, _, _, offset, cast = VARIANTS[variant]
    if rms and res:
        return ops.add_rms_norm(x, r, w, eps, offset, cast, out_dtype, eps_tensor)
    if rms:
        return None, ops.rms_norm(x, w, eps, offset, cast, out_dtype, eps_tensor)
    if res:
        return ops.add_layer_norm(x, r, w, b, eps, out_dtype, eps_tensor)
    return None, ops.layer_norm(x, w, b, eps, out_dtype, eps_tensor)


def _inputs(variant, rows, hidden, dtype, seed=0):
    _, res, has_w, has_b, _, _ = VARIANTS[variant]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, hidden, generator=g).mul(3).add(0.5).to(DEVICE, dtype)
    r = torch.randn(rows, hidden, generator=g).to(DEVICE, dtype) if res else None
    w = torch.randn(hidden, generator=g).to(DEVICE, dtype) if has_w else None
    b = torch.randn(hidden, generator=g).to(DEVICE, dtype) if has_b else None
    return x, r, w, b


def _check(variant, x, r, w, b, eps, out_dtype, eps_tensor=None):
    rms, res, _, _, offset, cast = VARIANTS[variant]
    h, y = _call(variant, x, r, w, b, eps, out_dtype, eps_tensor)
    h_ref, y_ref = _reference(x, r, w, b, eps, rms, offset, cast, out_dtype)
    tol = TOL[x.dtype]
    if res:
        assert h.dtype == x.dtype and h.shape == x.shape
        torch.testing.assert_close(h.double(), h_ref.double(), atol=tol, rtol=tol)
    assert y.dtype == out_dtype and y.shape == x.shape and y.is_contiguous()
    torch.testing.assert_close(y.double(), y_ref.double(), atol=tol * 4, rtol=tol)
    return h, y


@kernel_test
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("rows,hidden", [(1, 5120), (3, 2560), (5, 1000)])
def test_matches_float64_reference(variant, dtype, rows, hidden):
    x, r, w, b = _inputs(variant, rows, hidden, dtype)
    _check(variant, x, r, w, b, 1e-6 if VARIANTS[variant][0] else 1e-5, dtype)


@kernel_test
@pytest.mark.parametrize("variant,dtype", [("add_rms_llama", torch.bfloat16), ("add_ln", torch.float16)], ids=str)
def test_many_rows_packed_per_program(variant, dtype):
    """3000 rows of hidden 100: 16 rows per program, and a last program with only 8 valid rows."""
    assert norms.launch_config(100) == (16, 128)
    x, r, w, b = _inputs(variant, 3000, 100, dtype, seed=1)
    _check(variant, x, r, w, b, 1e-5, dtype)


@kernel_test
def test_exact_roundings_fp16():
    """fp16 (rounded to nearest in the interpreter too): h and the Llama-form y equal eager's bit for bit."""
    x, r, w, _ = _inputs("add_rms_llama", 4, 1000, torch.float16, seed=2)
    h, y = ops.add_rms_norm(x, r, w, 1e-6, 0.0, True, None)
    hf = (x + r).float()
    y_eager = w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.float16)
    assert torch.equal(h, x + r)
    torch.testing.assert_close(y, y_eager, atol=0, rtol=2**-10)  # at most one ulp (summation order)


@kernel_test
def test_mixed_dtypes_and_eps_tensor():
    """bf16 activations with an fp32 weight give fp32 out; eps given as a 0-d float64 tensor."""
    x, r, _, _ = _inputs("add_rms_llama", 2, 2560, torch.bfloat16, seed=3)
    w = torch.randn(2560, device=DEVICE)
    eps_t = torch.tensor(1e-2, dtype=torch.float64, device=DEVICE)
    _check("add_rms_llama", x, r, w, None, 1e-2, torch.float32, eps_tensor=eps_t)
    # eps_tensor overrides eps
    _, y = ops.add_rms_norm(x, r, w, 0.5, 0.0, True, torch.float32, eps_t)
    _, y_ref = ops.add_rms_norm(x, r, w, 1e-2, 0.0, True, torch.float32)
    torch.testing.assert_close(y, y_ref)


@kernel_test
def test_strided_and_3d_inputs():
    """A [B, S, N] input and a residual whose rows are strided (a slice of a wider tensor)."""
    x = torch.randn(2, 3, 1000, device=DEVICE, dtype=torch.float16)
    wide = torch.randn(2, 3, 1500, device=DEVICE, dtype=torch.float16)
    r = wide[..., :1000]
    w = torch.randn(1000, device=DEVICE, dtype=torch.float16)
    h, y = ops.add_rms_norm(x, r, w, 1e-6, 0.0, True, None)
    h_ref, y_ref = _reference(x, r, w, None, 1e-6, True, 0.0, True, torch.float16)
    assert h.shape == y.shape == (2, 3, 1000)
    torch.testing.assert_close(h, h_ref)
    torch.testing.assert_close(y.double(), y_ref.double(), atol=1.6e-2, rtol=4e-3)



@kernel_test
@pytest.mark.parametrize("case", ["weight broadcasts", "bias broadcasts"])
def test_inputs_the_kernel_does_not_index_run_the_torch_implementation(case):
    """The kernel reads the weight and bias as [N] vectors: others (the pass never gives them, the op accepts) get
    the torch implementation's result (eager's broadcasting), not values read past the operands' ends."""
    torch.manual_seed(0)
    x = torch.randn(3, 64, device=DEVICE, dtype=torch.float16)
    r = torch.randn(3, 64, device=DEVICE, dtype=torch.float16)
    w, b = (torch.randn(1 if case == f"{name} broadcasts" else 64, device=DEVICE) for name in ("weight", "bias"))
    got = ops.add_layer_norm(x, r, w, b, 1e-5, None)
    want = norms._torch_norm(x, r, w, b, 1e-5, None, 0.0, False, False, None)
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g, e, atol=4e-3, rtol=4e-3)


@kernel_test
@pytest.mark.parametrize("case", ["residual broadcasts", "residual in fp32"])
def test_a_residual_unlike_x_is_refused(case):
    """h = x + residual is x's shape and dtype (the ops' fakes say so, and Inductor lays out what follows by them):
    a residual that eager would broadcast or promote is an error naming the fix, on every device."""
    x = torch.randn(3, 64, device=DEVICE, dtype=torch.float16)
    r = torch.randn(1 if case == "residual broadcasts" else 3, 64, device=DEVICE,
                    dtype=torch.float32 if case == "residual in fp32" else torch.float16)
    with pytest.raises(ValueError, match="residual must have x's shape and dtype"):
        ops.add_rms_norm(x, r, None, 1e-5)


def _compile_for_h100(dtype, variant, hidden, num_warps, eps_ptr=False):
    """Compile the kernel to PTX/cubin for sm_90 (no GPU needed): catches what the interpreter accepts but
    the real compiler rejects. Returns the compiled kernel."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    rms, res, has_w, has_b, offset, cast = VARIANTS[variant]
    kernel = norms._norm_kernel.fn
    ptr = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16"}[dtype]
    rows, block = norms.launch_config(hidden)
    sig = {name: "constexpr" for name in kernel.arg_names}
    sig.update(X=ptr, Y=ptr, M="i32", N="i32", eps="fp32", weight_offset="fp32")
    sig.update({f"stride_{t}": "i32" for t in "xrhy"})
    consts = dict(IS_RMS=rms, HAS_RES=res, HAS_W=has_w, HAS_B=has_b, HAS_OFFSET=offset != 0.0,
                  CAST_BEFORE_W=cast, EPS_PTR=eps_ptr, ROWS=rows, BLOCK=block)  # fmt: skip
    for name, present, ty in (("R", res, ptr), ("H", res, ptr), ("W", has_w, ptr), ("B", has_b, ptr),
                              ("EPS", eps_ptr, "*fp64")):  # fmt: skip
        if present:
            sig[name] = ty
        else:
            consts[name] = None
    aligned = ["X", "Y", "N"] + [f"stride_{t}" for t in "xrhy"] + [n for n in "RHWB" if sig[n] != "constexpr"]
    src = ASTSource(
        fn=kernel,
        signature=sig,
        constexprs={(kernel.arg_names.index(k),): v for k, v in consts.items()},
        attrs={(kernel.arg_names.index(a),): [["tt.divisibility", 16]] for a in aligned},
    )
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={**LAUNCH_OPTIONS, "num_warps": num_warps})


@pytest.mark.skipif(not norms.HAS_TRITON or norms.INTERPRETED, reason="needs triton's compiler (not the interpreter)")
@pytest.mark.parametrize(
    "variant,dtype,hidden,num_warps,eps_ptr",
    [
        ("add_rms_llama", torch.bfloat16, 4096, 8, False),
        ("add_rms_gemma", torch.bfloat16, 5120, 16, True),
        ("rms_noweight", torch.float32, 1000, 4, False),
        ("add_ln", torch.float16, 2560, 8, False),
        ("ln_nobias", torch.float32, 64, 2, True),
    ],
    ids=str,
)
def test_kernel_compiles_for_sm90(variant, dtype, hidden, num_warps, eps_ptr):
    """The real Triton compiler accepts every variant; wide rows use 128-bit loads and stores."""
    try:
        compiled = _compile_for_h100(dtype, variant, hidden, num_warps, eps_ptr)
    except RuntimeError as e:  # pragma: no cover - a triton without its CUDA backend/ptxas
        pytest.skip(f"cannot compile for CUDA here: {e}")
    assert compiled.asm["cubin"]
    if hidden == 4096:
        ptx = compiled.asm["ptx"]
        assert "ld.global.L1::evict_first.L2::cache_hint.v4.b32" in ptx and "st.global.v4.b32" in ptx


def test_launch_config():
    """A whole row per program from 1024 wide; smaller rows packed to ~2K elements, at most 16 rows."""
    assert norms.launch_config(5120) == (1, 8192)
    assert norms.launch_config(4096) == (1, 4096)
    assert norms.launch_config(1000) == (1, 1024)
    assert norms.launch_config(300) == (4, 512)
    assert norms.launch_config(64) == (16, 64)


def test_torch_implementation_on_cpu():
    """Without the interpreter, CPU tensors take the plain-torch path, with the same math."""
    x, r = torch.randn(3, 7, 64, dtype=torch.bfloat16), torch.randn(3, 7, 64, dtype=torch.bfloat16)
    w = torch.randn(64, dtype=torch.bfloat16)
    h, y = norms._torch_norm(x, r, w, None, 1e-6, None, 0.0, True, True, None)
    hf = (x + r).float()
    y_eager = w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
    assert torch.equal(h, x + r) and torch.equal(y, y_eager)
    y = norms._torch_norm(x, None, w, w, 1e-5, None, 0.0, False, False, torch.float32)[1]
    y_eager = torch.nn.functional.layer_norm(x.float(), (64,), w.float(), w.float(), 1e-5)
    torch.testing.assert_close(y, y_eager)
