"""linears.unpad_rows: Inductor's pad_mm row padding of a linear is undone exactly, and nothing else is touched."""

import pytest
import torch

from fusion_passes import linears
from fusion_passes.graph_utils import op_counts
from tests.conftest import post_grad_like

aten = torch.ops.aten


def padded_linear(pad=(0, 0, 0, 4), value=0.0, start=0, end=-4, step=1, bias=None, extra_user=False):
    """pad_mm's form of ``x2 @ W.T (+ b)``: x2 [M, K] padded by rows, the GEMM, the padded rows sliced off."""

    def fn(x2, w, *b):
        xp = aten.constant_pad_nd(x2, list(pad), value)
        y = aten.addmm(b[0], xp, w.t()) if b else aten.mm(xp, w.t())
        out = aten.slice(y, 0, start, end, step)
        return (out, y) if extra_user else out

    return fn


def run(fn, rows=4, k=16, n=8, bias_shape=None, **kw):
    """Trace ``fn``, unpad; return (restored GEMMs, ops after, max |graph - eager|)."""
    torch.manual_seed(0)
    args = [torch.randn(rows, k, dtype=torch.bfloat16), torch.randn(n, k, dtype=torch.bfloat16)]
    if bias_shape:
        args.append(torch.randn(bias_shape, dtype=torch.bfloat16))
    gm = post_grad_like(fn, args)
    gm.graph.eliminate_dead_code()  # the decompositions' unused casts (Inductor's graphs have none)
    restored = linears.unpad_rows(gm.graph, **kw)
    gm.graph.lint()
    gm.recompile()
    got, want = gm(*args), fn(*args)
    err = max((g.float() - w.float()).abs().max().item() for g, w in zip(*(
        (t,) if isinstance(t, torch.Tensor) else t for t in (got, want))))
    return restored, op_counts(gm.graph), err


@pytest.mark.parametrize("bias_shape", [None, (8,)])
@pytest.mark.parametrize("rows, end", [(4, -4), (4, 4), (13, -3)])
def test_row_padding_is_undone_exactly(bias_shape, rows, end):
    fn = padded_linear(pad=(0, 0, 0, 8 - rows % 8), end=end, bias=bias_shape)
    restored, ops, err = run(fn, rows=rows, bias_shape=bias_shape)
    assert len(restored) == 1 and restored[0].meta[linears.UNPADDED] == 8 - rows % 8
    assert "aten.constant_pad_nd" not in ops and "aten.slice" not in ops
    assert err == 0


@pytest.mark.parametrize("case, kw, run_kw", [
    ("more rows than max_rows", dict(pad=(0, 0, 0, 3), end=-3), dict(rows=13, max_rows=8)),
    ("rows padded in front", dict(pad=(0, 0, 4, 0), start=4, end=8), {}),
    ("pad value not zero", dict(value=1.0), {}),
    ("slice from row 1", dict(start=1), {}),
    ("every other row", dict(step=2, end=8), {}),
    ("slice keeps a padded row", dict(end=-3), {}),
    ("padded GEMM used elsewhere", dict(extra_user=True), {}),
    ("per-row bias (padded too)", dict(bias=(8, 8)), dict(bias_shape=(8, 8))),
    ("[1, N] bias: not a linear", dict(bias=(1, 8)), dict(bias_shape=(1, 8))),
    ("a group smaller than min_group", {}, dict(min_group=2)),
])
def test_other_paddings_and_slices_are_left_alone(case, kw, run_kw):
    restored, ops, err = run(padded_linear(**kw), **run_kw)
    assert restored == [], case
    assert ops["aten.constant_pad_nd"] == 1
    assert err == 0


def test_only_the_given_device_is_unpadded():
    """decode_gemv fires on CUDA only (by default), so only CUDA GEMMs get their rows back there."""
    restored, ops, _ = run(padded_linear(), device_type="cuda")  # the traced graph is on CPU
    assert restored == [] and ops["aten.constant_pad_nd"] == 1
    restored, _, _ = run(padded_linear(), device_type="cpu")
    assert len(restored) == 1
