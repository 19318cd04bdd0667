"""residual_norm: residual add + RMSNorm / LayerNorm -> fusion_passes.[add_]rms_norm / [add_]layer_norm.

CPU tests compile real graphs (the op runs its torch implementation there); the CUDA rewrite (the op traced
into ``triton_kernel_wrapper_functional``) is checked on fake CUDA tensors; ``gpu`` tests run the kernel.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fusion_passes import records, zoo
from fusion_passes.patterns import residual_norm
from tests.conftest import apply_family, assert_kernels_get_every_parameter, compile_with_records, post_grad_like

NAME = "residual_norm"
TOL = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}
NORM_OPS = ("aten.pow", "aten.mean", "aten.rsqrt", "aten.var_mean")


# --------------------------------------------------------------------------------------- models (HF code)


def rms_llama(x, w, eps=1e-6):
    dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return w * x.to(dtype)


def rms_gemma(x, w, eps=1e-6):
    xf = x.float()
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (out * (1.0 + w.float())).type_as(x)


def add_rms(x, r, w):
    h = x + r
    return h, rms_llama(h, w, 1e-5)


def _inputs(shape, dtype, n_res=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(shape, generator=g).to(dtype) for _ in range(1 + n_res)]
    w = (torch.randn(shape[-1], generator=g) * 0.5 + 1).to(dtype)
    return (*xs, w)


def _compile(fn, *args, **kw):
    out, recs = compile_with_records(fn, *args, patterns=[NAME], **kw)
    assert recs and not [e for r in recs for e in r.errors]
    return out, recs


def _matches(recs):
    return [m for r in recs for m in r.matches_for(NAME)]


def _near(recs):
    return [n.reason for r in recs for n in r.near_misses if n.pattern == NAME]


def _assert_close(out, ref, dtype):
    for o, e in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
        assert o.dtype == e.dtype and o.shape == e.shape
        torch.testing.assert_close(o, e, atol=TOL[dtype], rtol=TOL[dtype])


# --------------------------------------------------------------------------------------- parity + ops


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_add_rms_norm_llama(dtype, batch):
    args = _inputs((batch, 5, 64), dtype)
    out, recs = _compile(add_rms, *args)
    _assert_close(out, add_rms(*args), dtype)
    [m] = _matches(recs)
    assert m.detail["op"] == "fusion_passes.add_rms_norm" and m.detail["residual"]
    assert m.detail["form"] == ("llama" if dtype != torch.float32 else "fp32 weight")
    assert m.detail["eps"] == 1e-5 and m.detail["hidden"] == 64
    assert "test_residual_norm.py" in m.source
    stage = recs[0].stages[0]
    assert all(stage.ops_before.get(op) == 1 for op in ("aten.pow", "aten.mean", "aten.rsqrt"))
    assert stage.ops_before["aten.add"] == 2  # the residual add and `+ eps`
    assert stage.ops_after.get("fusion_passes.add_rms_norm") == 1
    assert not any(k in stage.ops_after for k in (*NORM_OPS, "aten.add", "aten.mul", "prims.convert_element_type"))


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gemma_form(dtype, residual):
    def f(x, r, w):
        h = x + r if residual else x
        return h, rms_gemma(h, w, 1e-3)

    args = _inputs((2, 4, 48), dtype)
    out, recs = _compile(f, *args)
    _assert_close(out, f(*args), dtype)
    [m] = _matches(recs)
    assert m.detail["form"] == "gemma" and m.detail["weight_offset"] == 1.0 and m.detail["eps"] == 1e-3
    assert m.detail["op"] == ("fusion_passes.add_rms_norm" if residual else "fusion_passes.rms_norm")
    ops = recs[0].stages[0].ops_after
    assert "aten.rsqrt" not in ops and "aten.pow" not in ops


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layer_norm_of_weight_plus_one_keeps_the_one(dtype, residual, device):
    """``layer_norm(h, w + 1, b)`` (Nemotron's LayerNorm1P): the layer-norm ops take no weight offset, so the
    ``w + 1`` node is the weight they read (it was matched as Gemma's offset and the ``+ 1`` dropped: session 40's
    sweep of HF models)."""

    def f(x, r, w, b):
        h = x + r if residual else x
        return h, F.layer_norm(h.float(), (48,), w.float() + 1.0, b.float(), 1e-5).to(h.dtype)

    x, r, w = (a.to(device) for a in _inputs((2, 4, 48), dtype))
    b = torch.randn(48).to(device, dtype)
    out, recs = _compile(f, x, r, w, b)
    _assert_close(out, f(x, r, w, b), dtype)
    [m] = _matches(recs)
    assert m.detail["weight"] and m.detail["bias"] and m.detail["weight_offset"] == 0.0
    assert m.detail["op"] == ("fusion_passes.add_layer_norm" if residual else "fusion_passes.layer_norm")
    assert m.detail["kernel"] == ("triton" if device == "cuda" else "torch")


def test_rms_norm_without_weight():
    def f(x, r):
        h = x + r
        hf = h.float()
        return h, (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(h.dtype)

    args = _inputs((3, 40), torch.bfloat16)[:2]
    out, recs = _compile(f, *args)
    _assert_close(out, f(*args), torch.bfloat16)
    [m] = _matches(recs)
    assert m.detail["form"] == "no weight" and not m.detail["weight"]


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_layer_norm(dtype, bias, residual):
    x, r, w = _inputs((2, 6, 96), dtype)
    b = (torch.randn(96) * 0.1).to(dtype) if bias else None

    def f(x, r):
        h = x + r if residual else x
        return h, F.layer_norm(h, (96,), w, b, 1e-4)

    out, recs = _compile(f, x, r)
    _assert_close(out, f(x, r), dtype)
    [m] = _matches(recs)
    assert m.detail["op"] == ("fusion_passes.add_layer_norm" if residual else "fusion_passes.layer_norm")
    assert m.detail["eps"] == 1e-4 and m.detail["weight"] and m.detail["bias"] == bias
    stage = recs[0].stages[0]
    assert stage.ops_before.get("aten.var_mean") == 1 and "aten.var_mean" not in stage.ops_after
    assert "aten.rsqrt" not in stage.ops_after


@pytest.mark.parametrize("norm", ["layer_no_bias", "rms"])
def test_norm_output_with_several_users(norm):
    """The normalised output read twice (returned, and by the next op): the matcher looks one op past the weight
    for a bias and finds no single user there. It used to raise on that (a differential fuzz found it in session
    25); the fusion must fire and keep every user's value."""
    x, r, w = _inputs((2, 5, 32), torch.float32)

    def f(x, r):
        h = x + r
        n = F.layer_norm(h, (32,), w, None, 1e-5) if norm == "layer_no_bias" else rms_llama(h, w)
        return n, n @ w.expand(32, 32)  # a GEMM reads it (a pointwise op would be left to Inductor)

    out, recs = _compile(f, x, r)
    _assert_close(out, f(x, r), torch.float32)
    [m] = _matches(recs)
    assert m.detail["weight"] and not m.detail.get("bias")


def _apply(gm):
    rec = apply_family(residual_norm, gm.graph)
    gm.recompile()
    return rec


@pytest.mark.parametrize("bias", [True, False])
def test_native_layer_norm_node(bias):
    """An undecomposed ``native_layer_norm`` (mean/rstd outputs unused) is matched too."""
    x, r, w = _inputs((2, 3, 32), torch.float32)
    b = torch.randn(32) if bias else None

    def f(x, r, w, b):
        h = x + r
        return h, torch.ops.aten.native_layer_norm(h, [32], w, b, 1e-5)[0]

    gm = post_grad_like(f, (x, r, w, b), decompose=False)
    assert any(n.target is torch.ops.aten.native_layer_norm.default for n in gm.graph.nodes)
    rec = _apply(gm)
    [m] = rec.matches
    assert m.detail["op"] == "fusion_passes.add_layer_norm" and m.detail["form"] == "native_layer_norm"
    assert not any(n.target is torch.ops.aten.native_layer_norm.default for n in gm.graph.nodes)
    _assert_close(gm(x, r, w, b), f(x, r, w, b), torch.float32)


class _Block(nn.Module):
    """Two residual adds, each followed by an HF Llama RMSNorm (a decoder layer without attention)."""

    def __init__(self, d=64):
        super().__init__()
        self.w1, self.w2 = nn.Parameter(torch.rand(d) + 0.5), nn.Parameter(torch.rand(d) + 0.5)
        self.proj = nn.Linear(d, d)
        self.eps = 1e-5

    def forward(self, x, r):
        h = x + r
        y = rms_llama(h, self.w1, self.eps)
        h2 = h + self.proj(y)
        return rms_llama(h2, self.w2, self.eps)


def test_dynamic_shapes():
    """dynamic=True: one graph serves several row counts; eps (a float attribute) becomes a 0-d tensor input."""
    import fusion_passes

    torch.manual_seed(0)
    model = _Block().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=fusion_passes.backend(patterns=[NAME]), dynamic=True)
    with torch.no_grad(), records.capture() as recs:
        for batch, seq in ((2, 5), (3, 7), (4, 3)):
            x, r = torch.randn(batch, seq, 64), torch.randn(batch, seq, 64)
            _assert_close(compiled(x, r), model(x, r), torch.float32)
    assert len(recs) == 1 and not recs[0].errors  # no recompile
    ms = _matches(recs)
    assert [m.detail["op"] for m in ms] == ["fusion_passes.add_rms_norm"] * 2
    assert all(str(m.detail["eps"]).startswith("tensor") for m in ms)


@pytest.mark.parametrize("dynamic", [False, True])
def test_zoo_llama_every_layer(dynamic):
    """2 layers: embedding -> norm, then add+norm after attention, after the MLP, and the final norm."""
    model, args = zoo.build("llama", batch=1 if dynamic else 2, seq=8)
    with torch.no_grad():
        out, recs = _compile(model, *args, dynamic=dynamic)
        ref = model(*args)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    ops = [m.detail["op"] for m in _matches(recs)]
    layers = model.config.num_hidden_layers
    assert ops.count("fusion_passes.add_rms_norm") == 2 * layers and ops.count("fusion_passes.rms_norm") == 1
    after = [r for r in recs if r.stages][-1].stages[-1].ops_after  # (a restarted trace leaves an empty record)
    assert "aten.rsqrt" not in after and "aten.pow" not in after


@pytest.mark.parametrize("name,expected", [("gpt2", 5), ("bert", 4)])
def test_zoo_layer_norm_models(name, expected):
    """GPT-2: ln_1 of layer 0 (after a broadcasting embedding add), then every add+LN and ln_f.
    BERT: both add+LNs of every layer; the embedding LN reads a pointwise add only it uses: left to Inductor."""
    model, args = zoo.build(name, batch=2, seq=8)
    with torch.no_grad():
        out, recs = _compile(model, *args)
        ref = model(*args)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    ops = [m.detail["op"] for m in _matches(recs)]
    assert len(ops) == expected and ops.count("fusion_passes.add_layer_norm") == 4
    assert any("broadcasts" in r for r in _near(recs))


def _fake_cuda(mode, shape, dtype, dynamic_rows=True):
    """A fake CUDA tensor whose leading dims are symbolic (no GPU needed)."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    dims = [DimDynamic.DYNAMIC if dynamic_rows and i < len(shape) - 1 else DimDynamic.STATIC for i in range(len(shape))]
    meta = torch.empty(shape, dtype=dtype, device="meta")
    context = StatelessSymbolicContext(dynamic_sizes=dims)
    t = mode.from_tensor(meta, symbolic_context=context, source=ConstantSource("x"))
    with mode:
        return torch.empty_strided(t.shape, t.stride(), dtype=dtype, device="cuda")


def _trace_fake(fn, *args):
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn, select_decomp_table(), tracing_mode="real")(*args)


def test_cuda_rewrite_inlines_triton_kernel():
    """On CUDA tensors (fake ones here) the op is traced into the graph: Inductor gets the Triton kernel,
    launched over a symbolic number of rows, and the rewrite adds no shape guard."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())
    x = _fake_cuda(mode, (3, 7, 4096), torch.bfloat16)
    with mode:
        r, w = torch.empty_like(x), torch.empty(4096, dtype=torch.bfloat16, device="cuda")
        gm = _trace_fake(add_rms, x, r, w)
        rec = _apply(gm)
    [m] = rec.matches
    assert m.detail["kernel"] == "triton"
    [kernel] = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.triton_kernel_wrapper_functional]
    kw = kernel.kwargs["kwargs"]
    assert kw["IS_RMS"] and kw["HAS_RES"] and kw["CAST_BEFORE_W"] and not kw["EPS_PTR"]
    assert kw["BLOCK"] == 4096 and kw["N"] == 4096 and kw["eps"] == 1e-5
    assert isinstance(kw["M"], torch.fx.Node)  # rows stay symbolic
    assert kernel.kwargs["tensors_to_clone"] == ["H", "Y"]  # x, residual, weight are never copied
    assert_kernels_get_every_parameter(gm.graph)
    assert not mode.shape_env.guards
    targets = {str(n.target) for n in gm.graph.nodes}
    assert not any(op in t for t in targets for op in ("rsqrt", "pow", "mean", "add.Tensor"))


def test_cuda_cpu_scalar_eps_is_left_alone():
    """dynamic=True makes eps a CPU 0-d tensor input: a CUDA kernel cannot read it, so no rewrite."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    def f(x, r, w, eps):
        h = x + r
        hf = h.float()
        return h, w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps.float())).to(h.dtype)

    with FakeTensorMode():
        x = torch.empty(2, 5, 256, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(256, dtype=torch.bfloat16, device="cuda")
        gm = post_grad_like(f, (x, torch.empty_like(x), w, torch.tensor(1e-6, dtype=torch.float64)))
        rec = _apply(gm)
    assert not rec.matches
    assert any("eps is a CPU scalar tensor" in n.reason for n in rec.near_misses)


# --------------------------------------------------------------------------------------- must not fire


def _assert_not_fired(fn, *args, reason, **kw):
    out, recs = _compile(fn, *args, **kw)
    ref = fn(*args)
    _assert_close(out, ref, args[0].dtype)
    assert not _matches(recs), [m.detail for m in _matches(recs)]
    assert any(reason in r for r in _near(recs)), _near(recs)
    return recs


def test_no_fire_norm_over_non_last_dims():
    x, r, _ = _inputs((2, 6, 16), torch.float32)

    def f(x, r):
        h = x + r
        return h, F.layer_norm(h, (6, 16), eps=1e-5)  # normalises the last two dims

    _assert_not_fired(f, x, r, reason="not the last dim only")


def test_no_fire_mean_of_squares_over_other_axis():
    x, r, w = _inputs((2, 6, 16), torch.float32)

    def f(x, r):
        h = x + r
        return h, h * torch.rsqrt(h.pow(2).mean(1, keepdim=True) + 1e-6) * w

    _assert_not_fired(f, x, r, reason="over dim [1]")


def test_no_fire_when_fp32_copy_of_sum_is_used_elsewhere():
    x, r, w = _inputs((2, 5, 32), torch.bfloat16)

    def f(x, r):
        hf = (x + r).float()
        y = w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
        return y, hf.amax(-1)  # the fp32 sum: the kernel only returns h in bf16

    _assert_not_fired(f, x, r, reason="fp32 copy of the input")


def test_no_fire_when_rstd_is_used_elsewhere():
    x, r, w = _inputs((2, 5, 32), torch.float32)

    def f(x, r):
        h = x + r
        rstd = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return h, h * rstd * w, rstd

    _assert_not_fired(f, x, r, reason="the rstd")


def test_no_fire_mixed_dtype_add():
    x, _, w = _inputs((2, 5, 32), torch.bfloat16)
    r = torch.randn(2, 5, 32)  # fp32 residual: the add promotes

    def f(x, r):
        return rms_llama(x + r, w.float())

    _assert_not_fired(f, x, r, reason="mixed dtypes")


def test_no_fire_broadcasting_add():
    x, _, w = _inputs((2, 5, 32), torch.float32)
    bias = torch.randn(32)

    def f(x, bias):
        return rms_llama(x + bias, w)

    _assert_not_fired(f, x, bias, reason="broadcasts")


@pytest.mark.parametrize("operand", ["weight", "bias"])
def test_residual_not_absorbed_when_the_norm_reads_a_value_computed_from_the_sum(operand):
    """A weight (or bias) made from a matmul of the sum h: an op returning h could not also take it, since it
    would need its own output (the graph had a cycle and the family raised). The norm alone still fires."""
    x, r, w = _inputs((2, 5, 32), torch.float32)
    a = torch.randn(32, 32)

    def f(x, r, a):
        h = x + r
        made = (h.reshape(-1, 32) @ a).mean(0)  # [32], from h through a matmul (Inductor cannot fuse it)
        if operand == "weight":
            return h, rms_llama(h, made)
        return h, F.layer_norm(h, (32,), w, made, 1e-5)

    out, recs = _compile(f, x, r, a)
    _assert_close(out, f(x, r, a), torch.float32)
    (m,) = _matches(recs)
    assert m.detail["residual"] is False
    assert any("computed from the sum" in n for n in _near(recs)), _near(recs)


def test_no_fire_with_autograd():
    x, r, w = _inputs((2, 5, 32), torch.float32)
    w.requires_grad_(True)

    def f(x, r, w):
        return add_rms(x, r, w)

    recs = _assert_not_fired(f, x, r, w, reason="autograd", grad=True)
    assert all(not r.matches for r in recs)


def test_left_to_inductor_pointwise_consumer():
    """Inductor fuses `y * 2` into its own norm kernel; with ours it would be a second kernel."""
    x, r, w = _inputs((2, 5, 32), torch.float32)

    def f(x, r):
        h, y = add_rms(x, r, w)
        return h, y * 2

    _assert_not_fired(f, x, r, reason="fuses into its own norm kernel")


def test_left_to_inductor_pointwise_producer():
    x, _, w = _inputs((2, 5, 32), torch.float32)

    def f(x):
        return rms_llama(x * 3, w)  # x * 3 would be read back from memory by our kernel

    _assert_not_fired(f, x, reason="Inductor fuses that op")


def test_no_fire_symbolic_hidden_size():
    x, r, w = _inputs((2, 5, 32), torch.float32)
    _assert_not_fired(add_rms, x, r, w, reason="hidden size is symbolic", dynamic=True)


# --------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("rows,hidden", [(1, 4096), (2048, 2048), (37, 5120)])
def test_gpu_kernel_in_generated_code(rows, hidden):
    """bf16 on CUDA: Inductor's code contains our kernel, inputs are not copied, results match eager."""
    from torch._inductor.utils import run_and_get_code

    args = [a.cuda() for a in _inputs((rows, hidden), torch.bfloat16)]
    ref = add_rms(*args)
    torch._dynamo.reset()
    import fusion_passes

    with records.capture() as recs:
        compiled = torch.compile(add_rms, backend=fusion_passes.backend(patterns=[NAME]))
        out, codes = run_and_get_code(compiled, *args)
    assert [m.detail["kernel"] for m in _matches(recs)] == ["triton"]
    assert any("_norm_kernel" in code for code in codes)
    # only H and Y are written by the kernel, so functionalization must not copy the inputs
    assert "tensors_to_clone = ['H', 'Y']" in recs[0].stages[0].code_after
    torch.testing.assert_close(out[0], ref[0], atol=0, rtol=0)
    torch.testing.assert_close(out[1], ref[1], atol=1.6e-2, rtol=1.6e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["llama", "gpt2", "bert"])
def test_gpu_zoo_models(name):
    model, args = zoo.build(name, batch=2, seq=16, dtype=torch.bfloat16, device="cuda")
    with torch.no_grad():
        ref = model(*args)
        out, recs = _compile(model, *args)
    assert _matches(recs) and all(m.detail["kernel"] == "triton" for m in _matches(recs))
    torch.testing.assert_close(out.float(), ref.float(), atol=5e-2, rtol=5e-2)


def test_default_policy_leaves_norms_to_inductor_and_says_why(monkeypatch):
    monkeypatch.setenv("FUSION_PASSES_RESIDUAL_NORM", "auto")
    model, args = zoo.build("llama", batch=2, seq=8)
    with torch.no_grad():
        expected = model(*args)
    out, recs = compile_with_records(model, *args, patterns=["residual_norm"])
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert not [m for r in recs for m in r.matches]
    reasons = [n.reason for r in recs for n in r.near_misses]
    assert reasons and all("left to Inductor" in r and "FUSION_PASSES_RESIDUAL_NORM=always" in r for r in reasons)


def test_policy_enters_the_cache_key(monkeypatch):
    from fusion_passes.pass_manager import FusionGraphPass

    monkeypatch.setenv("FUSION_PASSES_RESIDUAL_NORM", "auto")
    auto = FusionGraphPass("post_grad", ("residual_norm",)).uuid()
    monkeypatch.setenv("FUSION_PASSES_RESIDUAL_NORM", "always")
    assert FusionGraphPass("post_grad", ("residual_norm",)).uuid() != auto
    monkeypatch.setenv("FUSION_PASSES_RESIDUAL_NORM", "sometimes")
    with pytest.raises(ValueError, match="use one of auto, always"):
        FusionGraphPass("post_grad", ("residual_norm",)).uuid()
