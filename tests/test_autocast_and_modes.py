"""Mixed precision under ``torch.autocast`` (CPU), against eager under the same autocast.

Autocast puts casts into the graph the families see: each linear reads its own cast of the input and of its
weight (qkv_packing sees through both), scores come out of the matmul in bf16 while masks and norms stay fp32,
and the outputs' dtypes follow from those casts. The families must keep eager's values and dtypes there, fire or
not. Session 41's audit of autocast and compile modes found no mismatch; these pin what it checked, whichever way
the autocast region is written (inside the compiled function, or around the call, where Dynamo guards on the
ambient autocast state and traces its casts into the graph).
"""

import contextlib

import pytest
import torch
import torch.nn.functional as F

from fusion_passes import zoo
from tests.conftest import compile_with_records


def _fired(recs):
    return {m.pattern for r in recs for m in r.matches}


@pytest.mark.parametrize("region", ["inside", "around"])
@pytest.mark.parametrize("name", zoo.MODELS)
def test_zoo_models_under_autocast_match_eager_under_autocast(name, region):
    """fp32 weights, bf16 autocast: the logits (Llama: bf16 from the autocast lm_head) or hidden states (GPT-2,
    BERT: fp32 from their final LayerNorm) in eager's dtype and within a bf16 rounding of eager's values. GPT-2's
    attention builds its mask from the bf16 scores' dtype, so attention_sdpa fires on the autocast graph too;
    Llama's and BERT's q/k/v (and Llama's gate/up) are packed with their fp32 weights, cast once per call."""
    model, args = zoo.build(name, seq=8)

    def forward(*a):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=region == "inside"):
            return model(*a)

    around = torch.autocast("cpu", dtype=torch.bfloat16) if region == "around" else contextlib.nullcontext()
    with torch.no_grad(), around:
        expected = forward(*args)
        out, recs = compile_with_records(forward, *args)
    assert out.dtype == expected.dtype
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    assert not [e for r in recs for e in r.errors]
    if name == "gpt2":
        assert "attention_sdpa" in _fired(recs)
    else:
        assert "qkv_packing" in _fired(recs)


def test_residual_norm_under_autocast_keeps_the_promoted_dtype():
    """A bf16 residual stream (autocast linears) into an HF RMSNorm with an fp32 weight, and into a LayerNorm with
    fp32 weight and bias: eager promotes the RMSNorm's output to fp32 and keeps the LayerNorm's in bf16. The fused
    ops must return those dtypes and eager's values."""
    torch.manual_seed(0)
    d = 64
    lin = torch.nn.Linear(d, d)
    w, b = torch.randn(d), torch.randn(d)

    def forward(r, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = r + lin(x)
            hf = h.float()
            rms = w * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(h.dtype)
            h2 = h + lin(x)
            return rms, F.layer_norm(h2, (d,), w, b), h2

    r, x = torch.randn(4, 8, d).bfloat16() * 3, torch.randn(4, 8, d)
    with torch.no_grad():
        expected = forward(r, x)
    out, recs = compile_with_records(forward, r, x, patterns=["residual_norm"])
    assert [t.dtype for t in out] == [torch.float32, torch.bfloat16, torch.bfloat16]
    for got, want in zip(out, expected):
        torch.testing.assert_close(got, want)
    assert _fired(recs) == {"residual_norm"}


def test_attention_under_autocast_keeps_eager_nan_rows():
    """GPT-2's form with the fill taken from the fp32 query's finfo while autocast makes the scores bf16: bf16
    stores finfo(float32).min as -inf, so rows with every key masked are NaN in eager, and must stay NaN."""
    def attention(q, k, v, keep):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            s = torch.matmul(q, k.transpose(-1, -2))
            s = s / torch.full([], 8.0 ** 0.5, dtype=s.dtype)
            s = torch.where(keep, s, torch.full([], torch.finfo(q.dtype).min, dtype=q.dtype))
            return torch.matmul(torch.softmax(s, -1).type(v.dtype), v)

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, 8) for _ in range(3))
    keep = torch.ones(8, 8, dtype=torch.bool).tril(-2)  # rows 0 and 1 see no key
    with torch.no_grad():
        expected = attention(q, k, v, keep)
    out, recs = compile_with_records(attention, q, k, v, keep, patterns=["attention_sdpa"])
    assert _fired(recs) == {"attention_sdpa"}
    assert expected[:, :, :2].isnan().all()
    assert out.dtype == expected.dtype
    # SDPA does not round the scores to bf16 as eager's matmul does: within a bf16 rounding of the outputs
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=1e-2, equal_nan=True)
