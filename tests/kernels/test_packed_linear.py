"""``packed_linear``'s packing on inputs the qkv_packing pass never gives it (the pass packs only weights of one
dtype, device and K); the op's paths with the pass are tested in tests/patterns/test_qkv_packing.py."""

import warnings

import pytest
import torch

from fusion_passes.kernels import packed_linear as kernel


@pytest.mark.parametrize("dtypes", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float16)], ids=str)
@pytest.mark.parametrize("bias", [False, True])
def test_weights_of_different_dtypes_are_never_repointed(dtypes, bias):
    """One packed buffer has one dtype: re-pointing a weight of another dtype onto its bytes would leave that
    parameter reading reinterpreted (or rounded) values for every later user. The op runs unpacked instead, each
    weight (and bias) cast to x's dtype as the op casts autocast's fp32 weights."""
    torch.manual_seed(0)
    x = torch.randn(3, 8, dtype=dtypes[0])
    ws = [torch.randn(4, 8, dtype=dt) for dt in dtypes]
    bs = [torch.randn(4, dtype=dt) for dt in dtypes]
    before = [t.clone() for t in ws + bs]
    expected = torch.cat([torch.addmm(b.to(x.dtype), x, w.to(x.dtype).t()) if bias else x @ w.to(x.dtype).t()
                          for w, b in zip(ws, bs)], 1)
    with pytest.warns(UserWarning, match="differ in dtype"):
        kernel._warned.clear()
        out = (torch.ops.fusion_passes.packed_linear_bias(x, ws, bs) if bias
               else torch.ops.fusion_passes.packed_linear(x, ws))
    assert torch.equal(out, expected) and kernel.STATS["unpacked"] >= 1
    for t, v in zip(ws + bs, before):
        assert t.dtype == v.dtype and torch.equal(t, v)
    assert ws[0].untyped_storage().data_ptr() != ws[1].untyped_storage().data_ptr()
