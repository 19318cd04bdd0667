"""outer_product: a matmul with inner dimension 1 -> a broadcast multiply.

What must hold: the result equals eager's bit for bit (each output is one product); the mm/bmm leaves the
post-grad graph and a mul takes its place; the zoo Llama's rotary embedding (HF's ``inv_freq @ position_ids``)
is rewritten; and it does not fire on an inner dimension above 1, symbolic shapes, or fp32 when matmuls may
round their inputs (TF32).
"""

import pytest
import torch

import fusion_passes
from fusion_passes import zoo
from fusion_passes.patterns import outer_product
from tests.conftest import apply_family, compile_with_records, post_grad_like

PATTERN = ["outer_product"]


def fired(recs):
    return [m for r in recs for m in r.matches_for("outer_product")]


def post_grad(recs):
    return [s for r in recs for s in r.stages if s.hook == "post_grad"]


def rewrite(fn, *args):
    """``fn`` traced to ATen on CPU (no Inductor decompositions: on CPU Inductor already turns small batched
    K = 1 matmuls into multiplies itself, on CUDA it does not), the family applied; returns (GraphModule, record)."""
    from fusion_passes.graph_utils import op_counts

    gm = post_grad_like(fn, args, decompose=False)
    before = op_counts(gm.graph)
    rec = apply_family(outer_product, gm.graph)
    gm.recompile()
    return gm, rec, before, op_counts(gm.graph)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("batch, m, n", [(None, 32, 1), (None, 5, 7), (2, 32, 1), (3, 4, 6)])
def test_inner_dimension_one_becomes_a_multiply_bit_for_bit(dtype, batch, m, n):
    torch.manual_seed(0)
    lead = () if batch is None else (batch,)
    a, b = torch.randn(*lead, m, 1).to(dtype), torch.randn(*lead, 1, n).to(dtype)
    matmul = torch.mm if batch is None else torch.bmm
    gm, rec, before, after = rewrite(matmul, a, b)
    assert torch.equal(gm(a, b), matmul(a, b))
    (match,) = rec.matches
    assert match.detail["shape"] == [[*lead, m, 1], [*lead, 1, n]]
    op = "aten.mm" if batch is None else "aten.bmm"
    assert before.get(op) == 1 and op not in after
    assert after.get("aten.mul") == 1 and "aten.clone" not in after  # contiguous inputs: no copy


def test_permuted_inputs_give_the_matmuls_contiguous_layout():
    """A batch-permuted input makes the broadcast product permuted too; the matmul's output is contiguous, and
    what reads it may rely on that (a view): the product is made contiguous, values and strides as eager's."""
    a = torch.randn(6, 3, 1).permute(1, 0, 2)  # [3, 6, 1], strides (1, 3, 1)
    b = torch.randn(3, 1, 5)

    def fn(a, b):
        return torch.bmm(a, b).view(3, 30)  # needs the contiguous layout

    gm, rec, before, after = rewrite(fn, a, b)
    got, want = gm(a, b), fn(a, b)
    assert torch.equal(got, want) and got.stride() == want.stride()
    assert len(rec.matches) == 1 and after.get("aten.clone") == 1 and "aten.bmm" not in after


@pytest.mark.parametrize("shape", [(64, 48), (32, 1), (1, 32)])
def test_compiled_parity_and_ops(shape):
    """Through the backend (Inductor on CPU keeps these mm shapes as mm): eager's bits, the mm gone."""
    m, n = shape
    a, b = torch.randn(m, 1), torch.randn(1, n)
    got, recs = compile_with_records(lambda a, b: (a @ b) * 2, a, b, patterns=PATTERN)
    assert torch.equal(got, (a @ b) * 2)
    (match,) = fired(recs)
    assert "test_outer_product.py" in match.source  # the user's line
    (stage,) = post_grad(recs)
    assert stage.ops_before.get("aten.mm") == 1 and "aten.mm" not in stage.ops_after


def test_zoo_llama_rotary_embedding_parity():
    """The zoo Llama's rotary (HF's ``inv_freq_expanded @ position_ids_expanded``, a bmm [B, D/2, 1] x [B, 1, S])
    is the case this is for; its cos/sin come out bit for bit."""
    model, (ids, *_) = zoo.build("llama", batch=2, seq=8)
    rotary = model.rotary_emb
    x = torch.randn(2, 8, model.config.hidden_size)
    positions = torch.arange(8).expand(2, 8)
    def fn(inv_freq, x, positions):  # the buffer as an input: fake tracing cannot read a real tensor
        return torch.func.functional_call(rotary, {"inv_freq": inv_freq}, (x, positions))

    gm, rec, before, after = rewrite(fn, rotary.inv_freq, x, positions)
    for got, want in zip(gm(rotary.inv_freq, x, positions), rotary(x, positions)):
        assert torch.equal(got, want)
    (match,) = rec.matches
    assert match.detail["shape"][0][-1] == 1 and before.get("aten.bmm") == 1 and "aten.bmm" not in after


@pytest.mark.parametrize("inner", [2, 16])
def test_inner_dimension_above_one_is_left_alone(inner):
    a, b = torch.randn(4, inner), torch.randn(inner, 3)
    got, recs = compile_with_records(lambda a, b: a @ b, a, b, patterns=PATTERN)
    torch.testing.assert_close(got, a @ b)
    assert not fired(recs)
    assert post_grad(recs)[0].ops_after.get("aten.mm") == 1


def test_symbolic_shapes_are_left_alone():
    a, b = torch.randn(4, 1), torch.randn(1, 3)
    got, recs = compile_with_records(lambda a, b: a @ b, a, b, patterns=PATTERN, dynamic=True)
    torch.testing.assert_close(got, a @ b)
    assert not fired(recs)


def test_fp32_with_tf32_allowed_is_left_alone(monkeypatch):
    """With TF32 allowed the GEMM rounds its fp32 inputs: the exact multiply would not give eager's bits."""
    monkeypatch.setattr(outer_product, "fp32_matmul_exact", lambda: False)
    a, b = torch.randn(2, 32, 1), torch.randn(2, 1, 4)
    gm, rec, before, after = rewrite(torch.bmm, a, b)
    assert not rec.matches and after == before
    assert any("TF32" in n.reason for n in rec.near_misses)
    gm, rec, _, _ = rewrite(torch.bmm, a.bfloat16(), b.bfloat16())  # bf16: exact either way
    assert len(rec.matches) == 1


def test_fp32_matmul_exact_follows_pytorch_settings():
    assert outer_product.fp32_matmul_exact()  # PyTorch's default
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert not outer_product.fp32_matmul_exact()
    finally:
        torch.set_float32_matmul_precision(previous)
    assert outer_product.fp32_matmul_exact()


def test_fires_in_the_default_backend():
    a, b = torch.randn(32, 1), torch.randn(1, 4)
    torch._dynamo.reset()
    with fusion_passes.capture() as recs:
        got = torch.compile(lambda a, b: a @ b, backend="fusion_passes")(a, b)
    assert torch.equal(got, a @ b)
    assert len(fired(recs)) == 1
