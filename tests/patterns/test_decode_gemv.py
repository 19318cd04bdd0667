"""decode_gemv: decode-sized linears with RMSNorm prologue / SiLU*mul / residual epilogue -> one GEMV each.

On CPU the family fires only with FUSION_PASSES_DECODE_GEMV=always (the op then runs as torch), which is how the
rewrite itself is tested here: parity with eager, ops before/after (all mm gone, 4 decode_gemv per layer + the
lm_head), and the cases that must not fire. The Triton kernel is tested in tests/kernels/test_gemv_kernel.py;
the GPU tests at the bottom run the real kernel inside compiled HF Llama decode steps, with CUDA graphs.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fusion_passes
from fusion_passes import zoo
from fusion_passes.graph_utils import op_name
from fusion_passes.kernels import gemv as gemv_kernels, gemv_table, pdl
from fusion_passes.patterns import decode_gemv
from fusion_passes.zoo import hf_cache_kwargs
from tests.conftest import apply_on_fake_cuda, compile_with_records

PATTERN = ["decode_gemv"]


@pytest.fixture
def always(monkeypatch):
    monkeypatch.setenv(decode_gemv.POLICY_ENV, "always")


def matches(recs):
    return [m for r in recs for m in r.matches_for("decode_gemv")]


def ops_of(recs, when):
    counts = {}
    for r in recs:
        for s in r.stages:
            if s.hook == "post_grad":
                for k, v in getattr(s, f"ops_{when}").items():
                    counts[k] = counts.get(k, 0) + v
    return counts


def zoo_decode(dtype, batch=1, layers=2):
    """Zoo Llama with a prefilled static cache; returns (model, step) with step(model) -> logits of one token."""
    cfg = zoo.LlamaConfig(num_hidden_layers=layers)
    torch.manual_seed(0)
    model = zoo.LlamaForCausalLM(cfg).to(dtype).eval()
    ids = torch.randint(0, cfg.vocab_size, (batch, 8))
    tok = torch.randint(0, cfg.vocab_size, (batch, 1))

    def step(m):
        cache = zoo.StaticKVCache(cfg, batch=batch, max_len=16, dtype=dtype)
        with torch.no_grad():
            model(ids, cache=cache, cache_position=torch.arange(8))
        return lambda: m(tok, cache=cache, cache_position=torch.tensor([8]))

    return model, step


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("rope", ["off", "on"])
def test_llama_decode_step_parity_and_ops(always, monkeypatch, dtype, batch, rope):
    """Every linear becomes a GEMV; with FUSION_PASSES_DECODE_ROPE=on q/k are also rotated in the q/k/v GEMV's
    epilogue and HF's rotate_half ops (slice, neg, cat, 4 mul, 2 add per layer) are gone."""
    monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, rope)
    model, step = zoo_decode(dtype, batch)
    layers = model.config.num_hidden_layers
    with torch.no_grad():
        expected = step(model)()
        out, recs = compile_with_records(step(model), patterns=PATTERN)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol)
    ms = matches(recs)
    kinds = sorted(m.detail.get("epilogue") for m in ms)
    assert kinds.count("residual add") == 2 * layers  # o_proj and down_proj
    assert kinds.count("silu * mul") == layers  # gate/up
    qkv_kind = "concatenated outputs" + (", rope on 2 (head dim 16)" if rope == "on" else "")
    assert kinds.count("concatenated outputs") == (1 if rope == "on" else layers + 1)  # (q/k/v and) the lm_head
    assert rope == "off" or kinds.count(qkv_kind) == layers
    before, after = ops_of(recs, "before"), ops_of(recs, "after")
    assert before["aten.mm"] == 7 * layers + 1 and after.get("aten.mm", 0) == 0
    assert after["fusion_passes.decode_gemv"] == 4 * layers + 1
    assert before["aten.rsqrt"] == 2 * layers + 1 and after.get("aten.rsqrt", 0) == 0  # norms folded in
    qkv = [m for m in ms if m.detail.get("epilogue") == qkv_kind and len(m.detail["weights"]) == 3]
    assert len(qkv) == layers
    assert qkv[0].detail["prologue"] == ("rms_norm (fp32 weight)" if dtype == torch.float32 else "rms_norm (llama)")
    assert all(m.source for m in ms), "every match names a source line"
    assert after.get("aten.clone", 0) == before.get("aten.clone", 0)  # the lm_head's logits are not copied
    rope_cats = 2 * layers if rope == "on" else 0
    assert after.get("aten.cat", 0) == before["aten.cat"] - rope_cats
    # per layer 3 negs: rotate_half's 2 (folded with rope on) and silu's 1 (always folded)
    assert before["aten.neg"] == 3 * layers and after.get("aten.neg", 0) == (0 if rope == "on" else 2 * layers)


def test_gemms_inductor_padded_to_8_rows_are_unpadded_and_fused(always, pad_mm_pads_rows):
    """On a GPU Inductor's pad_mm may pad a 4-row bf16 GEMM to 8 rows (it times both at compile time); the GEMV
    still takes every linear, and the pads and slices are gone."""
    model, step = zoo_decode(torch.bfloat16, batch=4)
    layers = model.config.num_hidden_layers
    with torch.no_grad():
        expected = step(model)()
        out, recs = compile_with_records(step(model), patterns=PATTERN)
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    before, after = ops_of(recs, "before"), ops_of(recs, "after")
    assert before["aten.constant_pad_nd"] == 7 * layers + 1  # every linear was padded: the case is exercised
    assert after.get("aten.constant_pad_nd", 0) == 0 and after.get("aten.mm", 0) == 0
    assert after["fusion_passes.decode_gemv"] == 4 * layers + 1
    ms = matches(recs)
    assert len(ms) == 4 * layers + 1
    assert all(m.detail["row_padding_undone"].endswith("by 4 rows") for m in ms)


@pytest.mark.parametrize("grad", [False, True])
def test_inductors_row_padding_stays_where_the_gemv_does_not_fire(pad_mm_pads_rows, grad):
    """By default the GEMV fires on CUDA only, and never with autograd on: there pad_mm's choice stands."""
    model, step = zoo_decode(torch.bfloat16, batch=4)
    if grad:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(decode_gemv.POLICY_ENV, "always")
            _, recs = compile_with_records(step(model), patterns=PATTERN, grad=True)
    else:
        with torch.no_grad():
            _, recs = compile_with_records(step(model), patterns=PATTERN)
    before, after = ops_of(recs, "before"), ops_of(recs, "after")
    assert before["aten.constant_pad_nd"] > 0 and after["aten.constant_pad_nd"] == before["aten.constant_pad_nd"]
    assert matches(recs) == []


def test_real_transformers_llama_decode(always):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=128, vocab_size=256, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()

    def step(m):
        kw = hf_cache_kwargs(model, transformers.StaticCache(config=cfg, max_cache_len=32))
        torch.manual_seed(1)
        with torch.no_grad():
            model(input_ids=torch.randint(0, 256, (1, 8)), **kw, cache_position=torch.arange(8))
            pos = torch.tensor([8])
            return m(input_ids=torch.randint(0, 256, (1, 1)), **kw, cache_position=pos,
                     position_ids=pos[None], use_cache=True).logits

    expected = step(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=fusion_passes.backend(patterns=PATTERN))
    with fusion_passes.capture() as recs:
        out = step(compiled)
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    assert len(matches(recs)) == 4 * 2 + 1


# ------------------------------------------------------------------------------------------ rope epilogue


@pytest.fixture
def rope_on(always, monkeypatch):
    monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, "on")


@pytest.mark.parametrize("setting, folded", [(None, True), ("off", False)])
def test_rope_on_by_default_and_off_on_request(always, monkeypatch, setting, folded):
    if setting is None:
        monkeypatch.delenv(decode_gemv.ROPE_POLICY_ENV, raising=False)
    else:
        monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, setting)
    model, step = zoo_decode(torch.float32)
    with torch.no_grad():
        _, recs = compile_with_records(step(model), patterns=PATTERN)
    qkv = [m for m in matches(recs) if len(m.detail.get("weights", ())) == 3]
    assert qkv and all(("rope on 2" in m.detail["epilogue"]) == folded for m in qkv)


def test_rope_real_transformers_decode_steps(rope_on, monkeypatch):
    """Two greedy steps of HF Llama (GQA, static cache) give eager's logits with rope folded in."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   intermediate_size=128, vocab_size=256, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    got, expected, recs = _hf_decode_steps(transformers, cfg, model, batch=2, steps=2)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert sum("rope on 2" in m.detail.get("epilogue", "") for m in matches(recs)) == 2


class RopeVariants(nn.Module):
    """q/k projections + HF rope, with a twist that must keep the rope out of the GEMV."""

    def __init__(self, twist, v_width=0):
        super().__init__()
        self.norm = zoo.LlamaRMSNorm(32)
        self.q, self.k = nn.Linear(32, 32, bias=twist == "bias"), nn.Linear(32, 16, bias=False)
        self.v = nn.Linear(32, v_width, bias=False) if v_width else None
        self.twist = twist

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        h = self.norm(x)
        v = self.v(h) if self.v is not None else None
        q = self.q(h).view(b, s, -1, 8).transpose(1, 2)
        k = self.k(h).view(b, s, -1, 8).transpose(1, 2)
        c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        if self.twist == "interleaved":  # GPT-J style pairs (2i, 2i + 1): another rotation
            def rot(t):
                return torch.stack([-t[..., 1::2], t[..., ::2]], -1).flatten(-2)
        else:
            rot = zoo.rotate_half
        if self.twist == "partial":  # Phi / GPT-NeoX partial rotary on q: the first 4 of 8 dims rotate
            qa, qb = q[..., :4], q[..., 4:]
            qr = torch.cat([qa * c[..., :4] + zoo.rotate_half(qa) * sn[..., :4], qb], -1)
        else:
            qr = q * c + rot(q) * sn
        kr = k * c + rot(k) * sn
        if self.twist == "q_reused":
            return qr, kr, q
        if self.twist == "per_head_cos":
            qr = q * c.expand(b, 4, s, 8).contiguous() + rot(q) * sn
        return (qr, kr) if v is None else (qr, kr, v)


def _rope_variant_records(twist, v_width):
    """RopeVariants compiled with decode_gemv on random inputs, its outputs checked against eager: the records."""
    torch.manual_seed(0)
    mod = RopeVariants(twist, v_width)
    x, angle = torch.randn(2, 1, 32), torch.rand(2, 1, 4) * 6
    cos, sin = torch.cat([angle, angle], -1).cos(), torch.cat([angle, angle], -1).sin()
    with torch.no_grad():
        expected = mod(x, cos, sin)
        out, recs = compile_with_records(mod, x, cos, sin, patterns=PATTERN)
    for a, b in zip(out, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    return recs


def test_rope_folds_over_a_biased_projection(rope_on):
    """A bias on q (Qwen2 has them on q, k and v): the kernel adds it before rotating, so both ropes fold and no
    bias add is left in the graph."""
    recs = _rope_variant_records("bias", 16)
    [m] = matches(recs)
    assert "bias on 1" in m.detail["epilogue"] and "rope on 2" in m.detail["epilogue"]
    before, after = ops_of(recs, "before"), ops_of(recs, "after")
    assert before["aten.addmm"] == 1 and "aten.addmm" not in after
    assert after.get("aten.add", 0) == 0  # neither the ropes' adds nor a bias add is left


@pytest.mark.parametrize("twist, v_width, folded", [("interleaved", 0, 0), ("q_reused", 0, 1), ("per_head_cos", 0, 1),
                                                     ("partial", 0, 1), ("plain", 12, 0)])
def test_rope_not_folded(rope_on, twist, v_width, folded):
    """Another rotation, the unrotated q used elsewhere, a cos that differs per head, a partial rotary on q: q's
    rope stays outside the GEMV (k's, untouched by the twist, is still folded). A v output that is not whole heads
    (12 wide, heads of 8): the kernel's column pairs would straddle it, so neither is folded."""
    recs = _rope_variant_records(twist, v_width)
    ms = matches(recs)
    assert ms and sum(m.detail.get("epilogue", "").count(f"rope on {folded}") for m in ms) == (1 if folded else 0)
    assert not any("rope on 2" in m.detail.get("epilogue", "") for m in ms)
    if v_width:
        assert any("whole number" in nm.reason for r in recs for nm in r.near_misses)


@pytest.mark.parametrize("computed", ["bias", "cos_sin"])
def test_kernel_inputs_computed_from_the_projections_are_not_folded(rope_on, computed):
    """k's bias computed from q, or the rope's cos/sin from v: the GEMV computing the projections cannot read them
    (a cycle: Inductor failed on the graph, and the backend compiled it again without our passes, with a warning).
    Now a near miss, and what does not need them (q/k/v without the rope) still fuses."""
    torch.manual_seed(0)
    norm = zoo.LlamaRMSNorm(32)
    q, k, v = (nn.Linear(32, 16, bias=False) for _ in range(3))

    def fn(x):
        b, s, _ = x.shape
        h = norm(x)
        if computed == "bias":
            qo = q(h)
            return qo, F.linear(h, k.weight, qo.sum((0, 1)))
        vo = v(h)
        angle = vo.view(b, s, 2, 8).mean(2).unsqueeze(1)  # [B, 1, S, D]
        cos, sin = angle.cos(), angle.sin()
        heads = [p(h).view(b, s, 2, 8).transpose(1, 2) for p in (q, k)]
        return [t * cos + zoo.rotate_half(t) * sin for t in heads] + [vo]

    x = torch.randn(2, 1, 32)
    with torch.no_grad():
        expected = fn(x)
        out, recs = compile_with_records(fn, x, patterns=PATTERN)
    for a, b in zip(out, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert not [e for r in recs for e in r.errors]
    reasons = [nm.reason for r in recs for nm in r.near_misses]
    if computed == "bias":
        assert matches(recs) == [] and any("bias is computed from one of their own outputs" in r for r in reasons)
    else:
        assert [m.detail["epilogue"] for m in matches(recs)] == ["concatenated outputs"]
        assert any("cos/sin are computed from the projections" in r for r in reasons)


# ------------------------------------------------------------------------------------------ must not fire


def test_default_policy_leaves_cpu_alone():
    model, step = zoo_decode(torch.float32)
    with torch.no_grad():
        _, recs = compile_with_records(step(model), patterns=PATTERN)
    assert matches(recs) == [] and ops_of(recs, "after")["aten.mm"] == 7 * 2 + 1


def test_prefill_sized_rows_are_left_to_cublas(always):
    model, args = zoo.build("llama", batch=2, seq=9, dtype=torch.float32)  # 18 rows > 16
    with torch.no_grad():
        _, recs = compile_with_records(model, *args, patterns=PATTERN)
    assert matches(recs) == []


def test_autograd_on_does_not_fire(always):
    lin = nn.Linear(32, 32, bias=False)
    x, res = torch.randn(1, 32, requires_grad=True), torch.randn(1, 32)
    out, recs = compile_with_records(lambda a, r: lin(a) + r, x, res, patterns=PATTERN, grad=True)
    assert matches(recs) == []
    assert any("autograd" in nm.reason for r in recs for nm in r.near_misses)
    out.sum().backward()
    assert x.grad is not None


ACTS = {  # gate activations, as models write them
    "silu": F.silu,
    "sigmoid_product": lambda g: g * torch.sigmoid(g),  # silu by hand: in bf16 rounded twice
    "gelu_tanh": lambda g: F.gelu(g, approximate="tanh"),  # Gemma's GeGLU
    "gelu": F.gelu,  # the erf form
    "tanh": torch.tanh,
    "silu_clamped": lambda g: F.silu(g.clamp(max=50)),  # silu up to 50: a sampled check on [-30, 30] took it
    "silu_masked": lambda g: F.silu(g) * (g < 40),
}


class NormLinears(nn.Module):
    """An RMSNorm feeding linears; ``extra_user`` also returns the normalised input, ``silu_extra`` the silu."""

    def __init__(self, extra_user=False, silu_extra=False, n_linears=2, act="silu"):
        super().__init__()
        self.norm = zoo.LlamaRMSNorm(32)
        self.norm.weight.data.uniform_(0.5, 1.5)
        self.lins = nn.ModuleList(nn.Linear(32, 48, bias=False) for _ in range(n_linears))
        self.extra_user, self.silu_extra, self.act = extra_user, silu_extra, ACTS[act]

    def forward(self, x):
        h = self.norm(x)
        if len(self.lins) != 2:
            return [lin(h) for lin in self.lins]
        s = self.act(self.lins[0](h))
        out = s * self.lins[1](h)
        if self.extra_user:
            return out, h
        if self.silu_extra:
            return out, s
        return out


def _fused(mod, x):
    with torch.no_grad():
        expected = mod(x)
        out, recs = compile_with_records(mod, x, patterns=PATTERN)
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    return matches(recs)


def test_norm_with_another_user_is_not_folded(always):
    assert _fused(NormLinears(extra_user=True), torch.randn(1, 1, 32)) == []


def test_silu_with_another_user_keeps_outputs_separate(always):
    (m,) = _fused(NormLinears(silu_extra=True), torch.randn(1, 1, 32).bfloat16().float())
    assert m.detail["epilogue"] == "concatenated outputs"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_mul_forms(always, dtype):
    mod = NormLinears().to(dtype)
    (m,) = _fused(mod, torch.randn(2, 1, 32, dtype=dtype))
    assert m.detail["epilogue"] == "silu * mul" and m.detail["prologue"].startswith("rms_norm")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("act, epilogue", [
    ("gelu_tanh", "gelu_tanh * mul"), ("sigmoid_product", {torch.float32: "silu * mul"}), ("gelu", None),
    ("tanh", None), ("silu_clamped", None), ("silu_masked", None)])
def test_gate_activation_is_told_by_its_values(always, dtype, act, epilogue):
    """The gate's elementwise chain, run on sample values, picks the kernel's epilogue: Gemma's GeGLU gets the
    gelu_tanh one. What the kernel would not compute the same stays with Inductor and the two linears are only
    concatenated: gelu's erf form, tanh, in bf16 a silu rounded twice (sigmoid, then the product), and a silu
    that a clamp or a mask changes past some value (the chain may hold smooth ops only, and must match on every
    finite value of the dtype). With gate outputs past those values the results would differ from eager's."""
    want = epilogue.get(dtype) if isinstance(epilogue, dict) else epilogue
    mod = NormLinears(act=act).to(dtype)
    x = torch.randn(2, 1, 32, dtype=dtype)
    if act.startswith("silu_"):
        with torch.no_grad():
            mod.lins[0].weight.mul_(60)  # gate outputs of several hundred: past the clamp and the mask
    (m,) = _fused(mod, x)
    assert m.detail["epilogue"] == (want or "concatenated outputs")


@pytest.mark.parametrize("flatten", ["half rows", "per-head norm"])
def test_norm_not_folded_into_linears_reading_its_output_in_other_rows(always, flatten):
    """The kernel normalises each whole input row; a norm over 32 values whose output the linears read as rows of
    16 (or a per-head norm over D flattened to rows of H * D) is another computation: not folded (it crashed)."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = zoo.LlamaRMSNorm(32 if flatten == "half rows" else 8)
            self.lins = nn.ModuleList(nn.Linear(16 if flatten == "half rows" else 32, 24, bias=False)
                                      for _ in range(2))

        def forward(self, x):
            h = self.norm(x if flatten == "half rows" else x.view(*x.shape[:-1], 4, 8))
            h = h.reshape(-1, 16) if flatten == "half rows" else h.reshape(x.shape[0], 32)
            return [lin(h) for lin in self.lins]

    x = torch.randn(2, 32)
    torch.manual_seed(0)
    mod = Model()
    with torch.no_grad():
        expected = mod(x)
        out, recs = compile_with_records(mod, x, patterns=PATTERN)
    for a, b in zip(out, expected):
        torch.testing.assert_close(a, b)
    assert all("rms_norm" not in m.detail.get("prologue", "") for m in matches(recs))
    assert any("RMSNorm over" in nm.reason and "not folded" in nm.reason for r in recs for nm in r.near_misses)


def test_more_than_three_linears_are_not_concatenated(always):
    assert _fused(NormLinears(n_linears=4), torch.randn(1, 1, 32)) == []


def test_broadcasting_residual_is_not_fused(always):
    lin = nn.Linear(32, 32, bias=False)
    bias_row = torch.randn(32)  # [N]: the add broadcasts
    assert _fused(lambda x: lin(x) + bias_row, torch.randn(1, 1, 32)) == []


def test_residual_with_a_bias_linear_is_not_fused(always):
    lin = nn.Linear(32, 32, bias=True)
    x, r = torch.randn(1, 1, 32), torch.randn(1, 1, 32)
    with torch.no_grad():
        out, recs = compile_with_records(lambda a, b: lin(a) + b, x, r, patterns=PATTERN)
    torch.testing.assert_close(out, lin(x) + r)
    assert matches(recs) == []  # addmm: the bias would be rounded differently


def test_mixed_dtype_residual_is_not_fused(always):
    lin = nn.Linear(32, 32, bias=False).bfloat16()
    x, r = torch.randn(1, 1, 32, dtype=torch.bfloat16), torch.randn(1, 1, 32)
    with torch.no_grad():
        out, recs = compile_with_records(lambda a, b: lin(a) + b, x, r, patterns=PATTERN)
    torch.testing.assert_close(out, lin(x) + r)
    assert matches(recs) == []


@pytest.mark.parametrize("rows, mib, fused", [(1, 12, True), (1, 112, True), (1, 224, False), (1, 512, False),
                                              (8, 12, True), (8, 32, False)])
def test_shapes_measured_slower_than_cublas_are_declined(rows, mib, fused):
    """The lm_head-sized weight at any M, and large weights at M > 1, measured slower than cuBLAS on the H200."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        w = torch.empty(mib * 1024 * 1024 // 2 // 2048, 2048, dtype=torch.bfloat16)
    node = torch.fx.Graph().placeholder("w")
    node.meta["val"] = w
    lin = decode_gemv.linears.Linear(mm=None, x2=None, weight=node, bias=None, width=w.shape[0], k=2048)
    if fused:
        decode_gemv._check_measured_faster(rows, [lin], "cat")
    else:
        with pytest.raises(decode_gemv._NoMatch, match="left to cuBLAS"):
            decode_gemv._check_measured_faster(rows, [lin], "cat")


@pytest.mark.parametrize("device, rows, table, form, fused", [
    ("NVIDIA H200", 1, "on", "cat", True),
    ("NVIDIA H200", 8, "on", "cat", False),  # measured at M = 1 only
    ("NVIDIA H200", 1, "off", "cat", False),  # the table off: the size rule alone
    ("NVIDIA H200", 1, "on", "res", False),  # another form of the same shape was not measured
    ("NVIDIA A100-SXM4-80GB", 1, "on", "cat", False),
])
def test_large_shapes_measured_faster_on_their_gpu_are_fused(monkeypatch, device, rows, table, form, fused):
    """A 128K-vocabulary lm_head (525 MB) goes to our GEMV only where gemv_table.BEATS_CUBLAS lists its exact
    shape and form for the GPU it compiles for, at M = 1."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fusion_passes.kernels import gemv

    monkeypatch.setattr(gemv, "_device_name", lambda _: device)
    monkeypatch.setenv(gemv_table.POLICY_ENV, table)
    with FakeTensorMode():
        w = torch.empty(128256, 2048, dtype=torch.bfloat16)
    node = torch.fx.Graph().placeholder("w")
    node.meta["val"] = w
    lin = decode_gemv.linears.Linear(mm=None, x2=None, weight=node, bias=None, width=128256, k=2048)
    if fused:
        decode_gemv._check_measured_faster(rows, [lin], form)
    else:
        with pytest.raises(decode_gemv._NoMatch, match="left to cuBLAS"):
            decode_gemv._check_measured_faster(rows, [lin], form)


def test_cuda_rewrite_traces_the_kernel_and_reads_the_weights_in_place():
    """On CUDA (fake tensors here, no GPU) an HF decode MLP becomes two Triton launches in the graph (RMSNorm ->
    gate/up -> SiLU * mul, then down + residual) that read each weight where it lives: no packed copy, no
    transpose; after Inductor's reinplacing not even the output buffers are cloned."""
    from torch._inductor.fx_passes.reinplace import reinplace_inplaceable_ops_core

    def mlp(x, norm_w, wg, wu, wd):  # LlamaRMSNorm, then LlamaMLP with the decoder layer's residual add
        h = x.float()
        h = norm_w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
        return x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)

    gm, rec = apply_on_fake_cuda(decode_gemv, mlp, (1, 1, 256), (256,), (512, 256), (512, 256), (256, 512))
    assert [m.detail.get("epilogue") for m in rec.matches] == ["residual add", "silu * mul"]
    kernels = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.triton_kernel_wrapper_functional]
    gate_up, down = kernels
    weights = {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    assert gate_up.kwargs["kwargs"]["W0"] is weights["wg_1"] and gate_up.kwargs["kwargs"]["W1"] is weights["wu_1"]
    assert down.kwargs["kwargs"]["W0"] is weights["wd_1"] and down.kwargs["kwargs"]["HAS_RES"]
    assert {op_name(n) for n in gm.graph.nodes} <= {"aten.empty", "aten.view", "aten.reshape", "getitem",
                                                   "triton_kernel_wrapper_functional", "placeholder", "output"}
    assert [k.kwargs["tensors_to_clone"] for k in kernels] == [["Y"], ["Y"]]
    reinplace_inplaceable_ops_core(gm.graph)
    assert [k.kwargs["tensors_to_clone"] for k in kernels] == [[], []]


def _attention_layer(positions="shared", accumulate=False, rope=True, heads=4, kv_heads=2, d=16, bias=False,
                     heads_read=False):
    """An HF Llama attention block's projections at decode, as in the post-grad graph: RMSNorm -> q/k/v -> RoPE
    on q/k -> StaticCache's update of both caches (functional index_put + copy_ back into the graph inputs).
    Returns (fn, its argument shapes). ``positions``: "shared" (one index tensor), "base" (HF StaticCache's
    ``arange(S) + cumulative_length``), "separate" (k and v at different index tensors), "from_k" (the positions
    computed from k itself). ``bias``: q/k/v have biases (Qwen2), three more arguments. ``heads_read``: the output
    reads v's heads too, not only the caches."""
    b, s, k = 1, 1, 64

    def rotate_half(x):  # narrow, not [..., a:b]: tensor indexing is unavailable on fake CUDA in a CPU build
        return torch.cat([-x.narrow(-1, d // 2, d // 2), x.narrow(-1, 0, d // 2)], -1)

    def layer(h, nw, wq, wk, wv, cos, sin, kc, vc, pos, pos_v, bq=None, bk=None, bv=None):
        hf = h.float()
        xn = nw * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(h.dtype)
        q, key, v = (F.linear(xn, w, bias_).view(b, s, -1, d).transpose(1, 2)
                     for w, bias_ in zip((wq, wk, wv), (bq, bk, bv)))
        if rope:
            c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
            q, key = q * c + rotate_half(q) * sn, key * c + rotate_half(key) * sn
        if positions == "from_k":
            pos = key.reshape(-1).narrow(0, 0, 1).to(torch.int64)
        if positions == "base":
            pos = torch.arange(s, device=h.device) + pos
        aten = torch.ops.aten
        k2 = aten.index_put.default(kc, [None, None, pos], key, accumulate)
        v2 = aten.index_put.default(vc, [None, None, pos_v if positions == "separate" else pos], v, accumulate)
        out = q.sum() + k2.sum() + v2.sum()  # the attention reads the updated caches
        if heads_read:
            out = out + v.sum()
        aten.copy_.default(kc, k2)
        aten.copy_.default(vc, v2)
        return out

    pos = (() if positions == "base" else (s,), torch.int64)
    def plain(h, nw, wq, wk, wv, cos, sin, kc, vc, pos, pos_v):  # the tracer wants every argument given
        return layer(h, nw, wq, wk, wv, cos, sin, kc, vc, pos, pos_v)

    biases = [(heads * d,), (kv_heads * d,), (kv_heads * d,)] if bias else []
    return layer if bias else plain, [(b, s, k), (k,), (heads * d, k), (kv_heads * d, k), (kv_heads * d, k), (b, s, d), (b, s, d),
                   (b, kv_heads, 32, d), (b, kv_heads, 32, d), pos, pos, *biases]


def _qkv_kernel(gm):
    [kernel] = [n for n in gm.graph.nodes if n.target is torch.ops.higher_order.triton_kernel_wrapper_functional]
    return kernel


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("rope, mask", [("on", 6), ("off", 4)])
def test_cuda_kv_cache_write_in_the_qkv_epilogue(monkeypatch, rope, mask, bias):
    """#8: with FUSION_PASSES_DECODE_KV_WRITE=on the q/k/v GEMV also stores k and v into the caches: the two
    index_put (Inductor's scatter kernels) are gone, and after Inductor's reinplacing the kernel writes the graph's
    cache inputs in place (no cache copy, no copy_ back). Without the RoPE fold k is rotated by Inductor after the
    GEMV, so only v's write can move. With Qwen2's q/k/v biases the kernel adds them first (BIAS_MASK)."""
    from torch._inductor.fx_passes.reinplace import reinplace_inplaceable_ops_core

    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "on")
    monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, rope)
    fn, shapes = _attention_layer(bias=bias)
    gm, rec = apply_on_fake_cuda(decode_gemv, fn, *shapes)
    [m] = rec.matches
    assert m.detail["epilogue"].endswith(f"kv-cache write of {bin(mask).count('1')} (cached heads not stored to "
                                         "the output)")
    kernel = _qkv_kernel(gm)
    args, inputs = kernel.kwargs["kwargs"], {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    assert args["CACHE_MASK"] == mask and args["IDX"] is inputs["pos_1"]
    assert args["CACHED_Y"] is False  # only the caches are read: the kernel leaves k / v out of its output
    assert args["BIAS_MASK"] == (7 if bias else 0) and ("bias on 3" in m.detail["epilogue"]) == bias
    if bias:
        assert [args[f"B{i}"] for i in range(3)] == [inputs[f"{n}_1"] for n in ("bq", "bk", "bv")]
        assert all(list(inputs[f"{n}_1"].users) == [kernel] for n in ("bq", "bk", "bv"))  # no bias add left
        assert not [n for n in gm.graph.nodes if op_name(n) == "aten.addmm"]
    assert args["C2"] is inputs["vc_1"] and (args.get("C1") is inputs["kc_1"]) == (rope == "on")
    index_puts = [n for n in gm.graph.nodes if op_name(n) == "aten.index_put"]
    assert len(index_puts) == (0 if rope == "on" else 1)
    assert set(kernel.kwargs["tensors_to_clone"]) == {"Y", "C2"} | ({"C1"} if rope == "on" else set())
    reinplace_inplaceable_ops_core(gm.graph)
    assert kernel.kwargs["tensors_to_clone"] == []
    assert not [n for n in gm.graph.nodes if op_name(n) == "aten.copy_"]  # every cache written in place


def test_cuda_kv_cache_write_keeps_heads_in_the_output_that_something_else_reads(monkeypatch):
    """Where v's heads have a reader besides the cache update, the kernel still stores the cached outputs into y
    (``CACHED_Y``) and that reader gets y's v columns: compiled on fake CUDA, the graph's value for it is a slice of
    the kernel's Y."""
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "on")
    fn, shapes = _attention_layer(heads_read=True)
    gm, rec = apply_on_fake_cuda(decode_gemv, fn, *shapes)
    [m] = rec.matches
    assert m.detail["epilogue"].endswith("kv-cache write of 2")
    kernel = _qkv_kernel(gm)
    assert kernel.kwargs["kwargs"]["CACHE_MASK"] == 6 and kernel.kwargs["kwargs"]["CACHED_Y"] is True
    slices = [n for n in gm.graph.nodes if op_name(n) == "aten.slice" and n.users]
    assert [(n.args[2], n.args[3]) for n in slices if n.args[2] >= 64] == [(96, 128)]  # v's columns, read


def test_cuda_kv_cache_write_reads_static_cache_positions_from_their_base(monkeypatch):
    """HF StaticCache's positions are ``arange(S) + cumulative_length``: the kernel gets the counter itself
    (IDX_BASE) and the index computation leaves the graph (on the H200 it was one tiny kernel per layer)."""
    fn, shapes = _attention_layer(positions="base")
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "off")
    before = {op_name(n) for n in apply_on_fake_cuda(decode_gemv, fn, *shapes)[0].graph.nodes}
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "on")
    gm, rec = apply_on_fake_cuda(decode_gemv, fn, *shapes)
    args = _qkv_kernel(gm).kwargs["kwargs"]
    inputs = {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    assert args["CACHE_MASK"] == 6 and args["IDX_BASE"] and args["IDX"] is inputs["pos_1"]
    assert "prims.iota" in before  # the positions were computed in the graph (arange, decomposed) ...
    assert not [n for n in gm.graph.nodes if op_name(n) == "prims.iota"]  # ... and are not now


@pytest.mark.parametrize("twist", ["start 1", "step 2", "float base", "base subtracted"])
def test_cuda_kv_cache_positions_not_a_plain_ramp_keep_their_index(monkeypatch, twist):
    """Only ``iota(S) + p`` (start 0, step 1, p one integer) becomes a base: anything else passes the index."""
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "on")
    fn, shapes = _attention_layer()

    def ramp(h, pos):
        s = h.shape[1]
        if twist == "start 1":
            return torch.arange(1, s + 1, device=h.device) + pos
        if twist == "step 2":
            return torch.arange(0, 2 * s, 2, device=h.device) + pos
        if twist == "float base":
            return (torch.arange(s, device=h.device) + pos.float()).long()
        return torch.arange(s, device=h.device) - pos

    def layer(h, nw, wq, wk, wv, cos, sin, kc, vc, pos, pos_v):
        idx = ramp(h, pos)
        return fn(h, nw, wq, wk, wv, cos, sin, kc, vc, idx, idx)

    shapes = [*shapes[:-2], ((), torch.int64), shapes[-1]]
    gm, rec = apply_on_fake_cuda(decode_gemv, layer, *shapes)
    args = _qkv_kernel(gm).kwargs["kwargs"]
    assert args["CACHE_MASK"] == 6 and not args["IDX_BASE"]
    assert args["IDX"].op != "placeholder"  # the computed index, as before


def test_cuda_kv_cache_write_is_on_by_default_and_off_on_request(monkeypatch):
    monkeypatch.delenv(decode_gemv.KV_WRITE_POLICY_ENV, raising=False)
    fn, shapes = _attention_layer()
    gm, rec = apply_on_fake_cuda(decode_gemv, fn, *shapes)
    assert _qkv_kernel(gm).kwargs["kwargs"]["CACHE_MASK"] == 6
    assert "kv-cache write of 2" in rec.matches[0].detail["epilogue"]
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "off")
    gm, rec = apply_on_fake_cuda(decode_gemv, fn, *shapes)
    assert _qkv_kernel(gm).kwargs["kwargs"]["CACHE_MASK"] == 0
    assert len([n for n in gm.graph.nodes if op_name(n) == "aten.index_put"]) == 2
    assert "kv-cache" not in rec.matches[0].detail["epilogue"]


@pytest.mark.parametrize("variant, reason", [
    (dict(accumulate=True), None),  # index_put(accumulate=True) adds to the cache: not the update
    (dict(positions="separate"), "differ in layout or position index"),
    (dict(positions="from_k"), "computed from the projections"),
])
def test_cuda_kv_cache_write_not_folded(monkeypatch, variant, reason):
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "on")
    fn, shapes = _attention_layer(**variant)
    gm, rec = apply_on_fake_cuda(decode_gemv, fn, *shapes)
    assert _qkv_kernel(gm).kwargs["kwargs"]["CACHE_MASK"] == 0
    assert len([n for n in gm.graph.nodes if op_name(n) == "aten.index_put"]) == 2
    assert "rope on 2" in rec.matches[0].detail["epilogue"]  # the GEMV itself still fires
    if reason:
        assert any(reason in n.reason for n in rec.near_misses), rec.near_misses


def test_unknown_policy_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(decode_gemv.POLICY_ENV, "sometimes")
    with pytest.raises(ValueError, match="auto, always"):
        decode_gemv.policy()
    monkeypatch.setenv(decode_gemv.POLICY_ENV, "always")
    monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, "yes")
    with pytest.raises(ValueError, match="FUSION_PASSES_DECODE_ROPE='yes'; use one of on, off"):
        decode_gemv.cache_key()
    monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, "on")
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "true")
    with pytest.raises(ValueError, match="FUSION_PASSES_DECODE_KV_WRITE='true'; use one of on, off"):
        decode_gemv.cache_key()
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, "on")
    exact = decode_gemv.cache_key()
    monkeypatch.setenv(gemv_table.NORM_POLICY_ENV, "lazy")
    with pytest.raises(ValueError, match="FUSION_PASSES_GEMV_NORM='lazy'; use one of exact, late"):
        decode_gemv.cache_key()
    monkeypatch.setenv(gemv_table.NORM_POLICY_ENV, "late")  # the kernel it launches differs: so does the key
    assert decode_gemv.cache_key() != exact


# ------------------------------------------------------------------------------------------ PDL launches


def _two_mlp_layers(x, n1, wg1, wu1, wd1, n2, wg2, wu2, wd2):
    """Two HF decode MLPs with their norms and residual adds: four GEMVs, each reading the one before."""
    def layer(x, norm_w, wg, wu, wd):
        h = x.float()
        h = norm_w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
        return x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)

    return layer(layer(x, n1, wg1, wu1, wd1), n2, wg2, wu2, wd2)


_MLP_SHAPES = [(1, 1, 256), *[(256,), (512, 256), (512, 256), (256, 512)] * 2]


def _launches(gm):
    """The GEMVs in graph order: "pdl" (the extern PDL twin) or "traced" (the kernel in Inductor's code)."""
    twins = set(gemv_kernels.PDL_TWINS.values())
    return ["pdl" if n.target in twins else "traced" for n in gm.graph.nodes
            if n.target in twins or n.target is torch.ops.higher_order.triton_kernel_wrapper_functional]


@pytest.mark.parametrize("graphed, policy, supported, twins", [
    (True, "auto", True, True), (False, "auto", True, False), (True, "off", True, False), (False, "on", True, True),
    (True, "auto", False, False), (True, "on", False, False)])
def test_cuda_gemvs_after_a_kernel_of_ours_launch_with_pdl_in_graphed_compiles(graphed, policy, supported, twins,
                                                                               monkeypatch):
    """#8: where PDL is wanted (``kernels.pdl``: by default in a compile for CUDA graphs, on a GPU that has it) a
    GEMV whose input a Triton kernel of ours computes runs as its PDL twin (an extern op: Inductor's code cannot
    launch with PDL), which loads its weights before waiting for the kernel before it. The graph's first GEMVs read
    only what no kernel of ours computed (here the input), so they stay plain launches: that is what makes the
    early weight loads safe. Ops before/after: the same GEMVs, the later two as twins; the match says so."""
    monkeypatch.setenv(pdl.POLICY_ENV, policy)
    monkeypatch.setattr(pdl, "supported", lambda device: supported)
    gm, rec = apply_on_fake_cuda(decode_gemv, _two_mlp_layers, *_MLP_SHAPES, graphed=graphed)
    # residual epilogues first (down 1, down 2), then the norm prologues (gate/up 1, gate/up 2); down 1 reads only
    # mms at its turn, so it is traced too
    assert [m.detail.get("launch") for m in rec.matches] == [None, "pdl", None, "pdl"] if twins else [None] * 4
    assert sorted(_launches(gm)) == (["pdl", "pdl", "traced", "traced"] if twins else ["traced"] * 4)
    assert not [n for n in gm.graph.nodes if op_name(n) in ("aten.mm", "aten.addmm")]


def test_cuda_gemv_on_values_no_kernel_of_ours_computed_is_never_pdl(monkeypatch):
    """Must not fire: a GEMV whose input comes from the graph's inputs through Inductor's own ops (here a scale and a
    cast) could be the graph's first kernel, which must be a plain launch (else it might read a weight while work
    queued before the graph still writes it); so it is traced however PDL is set."""
    monkeypatch.setenv(pdl.POLICY_ENV, "on")
    monkeypatch.setattr(pdl, "supported", lambda device: True)

    def fn(x, r, w1, w2):
        a = x + F.linear((x.float() * 2).to(x.dtype), w1)  # o-proj form on a computed input
        return a, r + F.linear((r * 3), w2)

    gm, rec = apply_on_fake_cuda(decode_gemv, fn, (1, 256), (1, 256), (256, 256), (256, 256), graphed=True)
    assert len(rec.matches) == 2 and _launches(gm) == ["traced", "traced"]


def test_cuda_gemv_whose_norm_weight_the_graph_computes_is_never_pdl(monkeypatch):
    """Must not fire: a PDL launch reads its norm weight before its wait, as it does its linears' weights, so a norm
    weight that an op of the graph computes (here the parameter scaled) keeps the GEMV a plain launch, though a
    kernel of ours computes its input; the norm is folded all the same."""
    monkeypatch.setenv(pdl.POLICY_ENV, "auto")
    monkeypatch.setattr(pdl, "supported", lambda device: True)

    def fn(x, n1, wg1, wu1, wd1, n2, wg2, wu2, wd2):
        return _two_mlp_layers(x, n1, wg1, wu1, wd1, n2 * 2, wg2, wu2, wd2)

    gm, rec = apply_on_fake_cuda(decode_gemv, fn, *_MLP_SHAPES, graphed=True)
    assert [m.detail.get("launch") for m in rec.matches] == [None, "pdl", None, None]  # down 1, 2, gate/up 1, 2
    assert [m.detail.get("prologue") for m in rec.matches][2:] == ["rms_norm (llama)"] * 2


def test_cuda_kv_writing_pdl_twin_writes_the_caches_in_place(monkeypatch):
    """The cache-writing q/k/v GEMV as its PDL twin goes through ``auto_functionalized``; Inductor's reinplacing
    then has it write the graph's cache inputs in place: no copy of a cache, and the copy_ back becomes a self-copy
    (which Inductor drops)."""
    from torch._inductor.fx_passes.post_grad import decompose_auto_functionalized
    from torch._inductor.fx_passes.reinplace import reinplace_inplaceable_ops_core

    monkeypatch.setenv(pdl.POLICY_ENV, "auto")
    monkeypatch.setattr(pdl, "supported", lambda device: True)
    fn, shapes = _attention_layer()

    def after_o_proj(a, w_o, h, *rest):  # the q/k/v GEMV then reads what the o GEMV (a kernel of ours) computes
        return fn(h + F.linear(a, w_o), *rest)

    gm, rec = apply_on_fake_cuda(decode_gemv, after_o_proj, (1, 1, 64), (64, 64), *shapes, graphed=True)
    assert [m.detail.get("launch") for m in rec.matches] == [None, "pdl"]
    assert "kv-cache write of 2" in rec.matches[1].detail["epilogue"]
    reinplace_inplaceable_ops_core(gm.graph)
    decompose_auto_functionalized(gm.graph)
    [twin] = [n for n in gm.graph.nodes if n.target is gemv_kernels.PDL_TWINS[decode_gemv._KV_OP]]
    caches = {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    assert twin.args[13:15] == (caches["arg9_1"], caches["arg10_1"])  # cache1, cache2: the graph's inputs
    assert not [n for n in gm.graph.nodes if op_name(n) == "aten.clone"]
    assert all(n.args[0] is n.args[1] for n in gm.graph.nodes if op_name(n) == "aten.copy_")


@pytest.mark.parametrize("q_from", ["gemv", "input"])
def test_cuda_decode_attention_launches_with_pdl_after_a_kernel_of_ours(q_from, monkeypatch):
    """The extern decode attention that ``attention_sdpa`` left for PDL gets ``pdl=True`` where a Triton kernel of
    ours computes q (the q/k/v GEMV): the o GEMV after it then loads its weights during the attention. Must not
    fire where q is a graph input (the attention could be the graph's first kernel). The o GEMV is a PDL twin
    either way: the attention, a kernel of ours launched before it, computes its input."""
    monkeypatch.setenv(pdl.POLICY_ENV, "auto")
    monkeypatch.setattr(pdl, "supported", lambda device: True)

    def fn(h, nw, wq, q_in, kc, vc, a_res, w_o):
        hf = h.float()
        xn = nw * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(h.dtype)
        q = F.linear(xn, wq).view(1, 1, 4, 16).transpose(1, 2) if q_from == "gemv" else q_in
        out = torch.ops.fusion_passes.decode_attention(q, kc, vc, None, 0.25, False)
        return a_res + F.linear(out.transpose(1, 2).reshape(1, 64), w_o)

    shapes = [(1, 1, 64), (64,), (64, 64), (1, 4, 1, 16), (1, 2, 32, 16), (1, 2, 32, 16), (1, 64), (64, 64)]
    gm, rec = apply_on_fake_cuda(decode_gemv, fn, *shapes, graphed=True)
    [attn] = [n for n in gm.graph.nodes if n.target is torch.ops.fusion_passes.decode_attention.default]
    assert attn.kwargs.get("pdl", False) == (q_from == "gemv")
    o_proj = next(m for m in rec.matches if m.detail.get("epilogue") == "residual add")
    assert o_proj.detail.get("launch") == "pdl"


def test_pdl_twins_compile_and_run_through_inductor(always, monkeypatch):
    """The PDL twins are extern ops to Inductor: forced here on CPU (where they run as torch, and the plain op
    stands in for the traced kernels it would be on CUDA), the zoo Llama's decode step compiles with every GEMV but
    the first ones as twins and matches eager as the traced op does. The first ones: the layer-0 q/k/v GEMV (it
    reads the embedding) and o GEMV (the residual GEMVs are rewritten first, when its input, the attention here
    left to Inductor, is computed from the q/k/v mm alone; with ``attention_sdpa`` on CUDA the decode attention,
    a kernel of ours, computes it)."""
    monkeypatch.setattr(decode_gemv.pdl, "wanted", lambda device, graphed: True)
    monkeypatch.setattr(decode_gemv, "_TRITON_OPS", (*decode_gemv._TRITON_OPS, decode_gemv._OP))
    model, step = zoo_decode(torch.float32, 1)
    layers = model.config.num_hidden_layers
    with torch.no_grad():
        expected = step(model)()
        out, recs = compile_with_records(step(model), patterns=PATTERN)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    after = ops_of(recs, "after")
    assert after["fusion_passes.decode_gemv_pdl"] == 4 * layers - 1 and after["fusion_passes.decode_gemv"] == 2
    assert [m.detail.get("launch") for m in matches(recs)].count("pdl") == 4 * layers - 1


# ------------------------------------------------------------------------------------------ GPU


def _hf_decode_steps(transformers, cfg, model, batch, steps, prompt=8, **backend):
    """``steps`` decode steps over a StaticCache that eager prefills with a random prompt: eager vs compiled with
    ``backend``'s options; returns (compiled logits, eager logits, capture records)."""
    dev = next(model.parameters()).device
    ids = torch.randint(0, cfg.vocab_size, (batch, prompt), device=dev)
    toks = torch.randint(0, cfg.vocab_size, (steps, batch, 1), device=dev)

    def run(m):
        kw = hf_cache_kwargs(model, transformers.StaticCache(config=cfg, max_cache_len=prompt + steps + 8))
        outs = []
        with torch.no_grad():
            model(input_ids=ids, **kw, cache_position=torch.arange(prompt, device=dev))
            for i in range(steps):  # on GPU, CUDA graph trees record on a later call
                pos = torch.tensor([prompt + i], device=dev)
                outs.append(m(input_ids=toks[i], **kw, cache_position=pos,
                              position_ids=pos[None].expand(batch, 1), use_cache=True).logits.float().clone())
        return outs

    expected = run(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=fusion_passes.backend(**{"patterns": PATTERN, **backend}))
    with fusion_passes.capture() as recs:
        got = run(compiled)
    return got, expected, recs


def _hf_llama_cuda(hidden=256, layers=2):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=8,
                                   num_key_value_heads=2, intermediate_size=4 * hidden, vocab_size=1024,
                                   attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    return transformers, cfg, model


@pytest.mark.gpu
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("mode, rope, kv, pdl_policy", [
    (None, "off", "off", "off"), ("reduce-overhead", "off", "off", "off"), ("reduce-overhead", "on", "off", "off"),
    (None, "on", "on", "off"), ("reduce-overhead", "on", "on", "off"), ("reduce-overhead", "on", "on", "auto")])
def test_gpu_hf_llama_decode(monkeypatch, mode, rope, kv, pdl_policy, batch):
    """Four decode steps (each reads the cache the previous ones wrote) match eager, with RoPE and the KV-cache
    update in the q/k/v GEMV or not, and under Inductor's CUDA graphs with the kernels launched with PDL (on sm_90+:
    every GEMV but the first)."""
    monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, rope)
    monkeypatch.setenv(decode_gemv.KV_WRITE_POLICY_ENV, kv)
    monkeypatch.setenv(pdl.POLICY_ENV, pdl_policy)
    transformers, cfg, model = _hf_llama_cuda()
    got, expected, recs = _hf_decode_steps(transformers, cfg, model, batch=batch, steps=4, prompt=16, patterns=None,
                                           mode=mode)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=5e-2, atol=5e-2)
    assert len(matches(recs)) == 4 * 2 + 1, (
        f"{len(recs)} graph(s); fired: {[m.detail.get('epilogue') for m in matches(recs)]}; near misses: "
        f"{[(n.pattern, n.reason) for r in recs for n in r.near_misses]}; errors: {[e for r in recs for e in r.errors]}")
    assert sum("rope on 2" in m.detail.get("epilogue", "") for m in matches(recs)) == (2 if rope == "on" else 0)
    assert sum("kv-cache write of 2" in m.detail.get("epilogue", "") for m in matches(recs)) == (2 if kv == "on" else 0)
    # HF's StaticCache reads k and v back from the caches only: the kernel leaves them out of its output
    assert sum("cached heads not stored" in m.detail.get("epilogue", "") for m in matches(recs)) == (
        2 if kv == "on" else 0)
    with_pdl = pdl_policy == "auto" and pdl.supported(torch.device("cuda"))
    assert [m.detail.get("launch") for m in matches(recs)].count("pdl") == (len(matches(recs)) - 1 if with_pdl else 0)
    before, after = ops_of(recs, "before"), ops_of(recs, "after")
    # every linear's GEMM is gone; at batch 1 the rotary embedding's inv_freq @ positions is an mm too, which
    # outer_product turns into a multiply
    assert before["aten.mm"] == 7 * 2 + 1 + (batch == 1) and after.get("aten.mm", 0) == 0


@pytest.mark.gpu
def test_gpu_kernel_in_generated_code():
    from torch._inductor.utils import run_and_get_code

    lin = nn.Linear(256, 512, bias=False).cuda().bfloat16()
    x, r = torch.randn(1, 256, device="cuda", dtype=torch.bfloat16), torch.randn(1, 512, device="cuda",
                                                                                     dtype=torch.bfloat16)
    with torch.no_grad():
        (out, recs), codes = run_and_get_code(lambda: compile_with_records(lambda a, b: lin(a) + b, x, r,
                                                                           patterns=PATTERN))
    code = "\n".join(codes)
    assert "_gemv_kernel" in code and "extern_kernels.mm" not in code
    torch.testing.assert_close(out, lin(x) + r, rtol=2e-2, atol=2e-2)
