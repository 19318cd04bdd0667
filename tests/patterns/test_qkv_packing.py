"""qkv_packing: N linears on one input -> one GEMM on weights packed once (no per-call weight copy).

What must hold: parity with eager; zoo Llama goes from 7 to 4 GEMMs per decoder layer; the steady state has
no cat/copy of weights and weight memory stays 1x; weight updates (in place, load_state_dict, .data
reassignment, an alias of a weight) are never stale; dynamic shapes and freezing work; and the family does
not fire on different dtypes, look-alike inputs, a single linear, or with autograd on.
"""

import gc
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.profiler import profile

import fusion_passes
from fusion_passes import zoo
from fusion_passes.kernels import packed_linear as kernel
from tests.conftest import compile_with_records

PATTERN = ["qkv_packing"]
GEMMS = ("aten.mm", "aten.addmm", "fusion_passes.packed_linear", "fusion_passes.packed_linear_bias")


def gemms(ops: dict) -> int:
    return sum(ops.get(k, 0) for k in GEMMS)


def post_grad(rec):
    (stage,) = [s for s in rec.stages if s.hook == "post_grad"]
    return stage


def matches(recs):
    return [m for r in recs for m in r.matches_for("qkv_packing")]


def compiled(model, **kw):
    """A fresh compile of ``model`` with only this family (the caller runs it under no_grad)."""
    torch._dynamo.reset()
    return torch.compile(model, backend=fusion_passes.backend(patterns=PATTERN), **kw)


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the distinct storages that hold the model's parameters (what the weights cost in memory)."""
    storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
    return sum(storages.values())


def tiny_llama(layers=1, seed=0):
    torch.manual_seed(seed)
    return zoo.LlamaForCausalLM(zoo.LlamaConfig(num_hidden_layers=layers)).eval()


class Projections(nn.Module):
    """N linears reading one x [..., D]; each output goes through a pointwise op, like q/k/v into rotary."""

    def __init__(self, widths=(64, 32, 32), bias=(False, False, False), d=64):
        super().__init__()
        self.projs = nn.ModuleList(nn.Linear(d, n, bias=b) for n, b in zip(widths, bias))

    def forward(self, x):
        return [torch.tanh(p(x)) * 2 for p in self.projs]


@pytest.fixture(autouse=True)
def _fresh_stats():
    kernel.STATS.clear()
    kernel._warned.clear()  # each test that expects a warning gets it, whatever ran before
    yield


# --------------------------------------------------------------------------------------------- zoo Llama


@pytest.mark.parametrize("batch", [1, 2])
def test_llama_gemms_per_layer_7_to_4_with_parity(batch):
    model, args = zoo.build("llama", batch=batch, seq=8)
    layers = model.config.num_hidden_layers
    with torch.no_grad():
        ref = model(*args)
        out, recs = compile_with_records(model, *args, patterns=PATTERN)
    torch.testing.assert_close(out, ref)
    rec = [r for r in recs if r.matches][0]
    stage = post_grad(rec)
    # q, k, v, o, gate, up, down per layer + lm_head  ->  qkv, o, gate_up, down per layer + lm_head
    assert gemms(stage.ops_before) == 7 * layers + 1
    assert gemms(stage.ops_after) == 4 * layers + 1
    assert stage.ops_after["fusion_passes.packed_linear"] == 2 * layers
    widths = sorted(m.detail["widths"] for m in rec.matches)
    assert widths == [[64, 32, 32]] * layers + [[128, 128]] * layers  # GQA: q 64, k/v 32
    assert all(m.source.endswith(("q_proj(hidden_states).view(hidden_shape).transpose(1, 2)",
                                  "self.up_proj(x))")) for m in rec.matches)
    assert "packed_linear" in stage.code_after and "packed_linear" not in stage.code_before


def test_linears_inductor_padded_to_8_rows_are_still_packed(pad_mm_pads_rows):
    """pad_mm (as it may on a GPU) pads each 12-row bf16 GEMM to 16 rows with its own pad of the shared input,
    which would hide that q/k/v read one tensor; they are unpadded and packed, and the packed GEMM unpadded."""
    model, args = zoo.build("llama", batch=1, seq=12, dtype=torch.bfloat16)
    layers = model.config.num_hidden_layers
    with torch.no_grad():
        ref = model(*args)
        out, recs = compile_with_records(model, *args, patterns=PATTERN)
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)
    stage = post_grad([r for r in recs if r.matches][0])
    # every linear padded (and the attention's batched GEMMs): the case is exercised
    assert stage.ops_before["aten.constant_pad_nd"] >= 7 * layers + 1
    assert stage.ops_after["fusion_passes.packed_linear"] == 2 * layers
    # the pads of the 5 packed linears per layer are gone; o, down, the lm_head and the attention keep theirs
    assert stage.ops_after["aten.constant_pad_nd"] == stage.ops_before["aten.constant_pad_nd"] - 5 * layers
    assert all(m.detail["row_padding_undone"] == "Inductor's pad_mm had padded %d GEMM(s) by 4 rows" % len(m.replaced)
               for m in matches(recs))


def test_steady_state_has_no_weight_copy_and_memory_stays_1x():
    model, args = tiny_llama(), (torch.randint(0, 256, (2, 8)),)
    attn, mlp = model.layers[0].self_attn, model.layers[0].mlp
    qkv = [attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]
    ids_before = [id(p) for p in model.parameters()]
    bytes_before = weight_bytes(model)
    old_storages = [StorageWeakRef(w.untyped_storage()) for w in qkv]
    fn = compiled(model)
    with torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
        ref = model(*args)
        torch.testing.assert_close(fn(*args), ref)  # compiles, and packs each group once
        assert kernel.STATS["repacked"] == 2
        for _ in range(2):
            with profile() as prof:
                out = fn(*args)
            torch.testing.assert_close(out, ref)
            names = [e.name for e in prof.events()]
            # no weight is copied: no cat/copy_ at all, and the 2 groups (qkv, gate_up) run as 2 packed GEMMs
            assert {op: names.count(op) for op in ("aten::cat", "aten::copy_", "fusion_passes::packed_linear")} == {
                "aten::cat": 0, "aten::copy_": 0, "fusion_passes::packed_linear": 2}
    assert kernel.STATS["repacked"] == 2 and kernel.STATS["packed"] == 6 and kernel.STATS["unpacked"] == 0
    # the parameters are the same objects, now consecutive row blocks of one buffer; the old storages are gone
    assert [id(p) for p in model.parameters()] == ids_before
    assert len({w.untyped_storage().data_ptr() for w in qkv}) == 1
    assert [w.storage_offset() for w in qkv] == [0, 64 * 64, 64 * 64 + 32 * 64]
    assert mlp.up_proj.weight.storage_offset() == mlp.gate_proj.weight.numel()
    gc.collect()
    assert all(s.expired() for s in old_storages)
    assert weight_bytes(model) <= 1.02 * bytes_before
    assert all(p.is_contiguous() for p in model.parameters())


def test_weight_updates_are_never_stale():
    model = tiny_llama()
    other = tiny_llama(seed=1)
    ids = torch.randint(0, 256, (2, 8))
    attn = model.layers[0].self_attn
    fn = compiled(model)

    def check():
        with torch.no_grad():
            torch.testing.assert_close(fn(ids), model(ids))

    check()
    assert kernel.STATS["repacked"] == 2
    with torch.no_grad():
        attn.k_proj.weight.mul_(0.5)  # in place, into the packed buffer
    check()
    model.load_state_dict(other.state_dict())  # copies into the parameters in place
    check()
    torch.testing.assert_close(fn(ids), other(ids))
    assert kernel.STATS["repacked"] == 2  # in-place updates need no repack
    attn.v_proj.weight.data = torch.randn_like(attn.v_proj.weight)  # a new storage: adjacency is gone
    moves = kernel.weight_moves()  # what a captured CUDA graph step follows (test_static_cudagraphs)
    check()
    assert kernel.STATS["repacked"] == 3 and kernel.weight_moves() == moves + 1
    assert kernel.unpack_parameters(model) == 5  # q, k, v, gate, up get their own storage again
    assert kernel.weight_moves() == moves + 2
    assert attn.q_proj.weight.untyped_storage().data_ptr() != attn.k_proj.weight.untyped_storage().data_ptr()
    check()
    assert kernel.STATS["repacked"] == 5 and kernel.weight_moves() == moves + 4
    assert kernel.unpack_parameters(tiny_llama()) == 0 and kernel.weight_moves() == moves + 4  # nothing moved


def test_weight_with_an_alias_runs_unpacked_and_sees_writes_through_the_alias():
    model = Projections().eval()
    x = torch.randn(2, 4, 64)
    alias = model.projs[1].weight.detach()  # shares memory; re-pointing the parameter would cut it off
    fn = compiled(model)
    with torch.no_grad(), pytest.warns(UserWarning, match="shares memory with another tensor"):
        fn(x)
    assert kernel.STATS["unpacked"] == 1 and kernel.STATS["repacked"] == 0
    alias.add_(1.0)  # the user updates the weight through the alias
    with torch.no_grad():
        for a, b in zip(fn(x), model(x)):
            torch.testing.assert_close(a, b)
    del alias
    with torch.no_grad():
        fn(x)
    assert kernel.STATS["repacked"] == 1  # the alias is gone: it packs now


def test_dynamic_batch_and_sequence():
    model = tiny_llama()
    fn = compiled(model, dynamic=True)
    with torch.no_grad(), fusion_passes.capture() as recs:
        for batch, seq in [(2, 8), (3, 5), (4, 11)]:  # sizes 0/1 would specialise (Dynamo), not us
            ids = torch.randint(0, 256, (batch, seq))
            torch.testing.assert_close(fn(ids), model(ids))
    assert len([r for r in recs if r.passes_ran]) == 1  # one dynamic graph, no recompiles
    assert len(matches(recs)) == 2
    assert kernel.STATS["repacked"] == 2 and kernel.STATS["packed"] == 6


# --------------------------------------------------------------------------------------------- shapes, bias, dtypes


@pytest.mark.parametrize(
    "widths, bias, shape",
    [
        ((64, 32, 32), (False, False, False), (2, 5, 64)),  # GQA q/k/v, no bias (Llama)
        ((64, 64, 64), (True, True, True), (1, 7, 64)),  # all biased (BERT/Qwen2), batch 1
        ((64, 32, 32), (True, False, True), (3, 4, 64)),  # mixed bias
        ((48, 16), (False, True), (9, 64)),  # 2-D input, two linears
        ((128, 128, 64, 32, 32), (False,) * 5, (2, 3, 64)),  # a parallel block: gate, up, q, k, v
    ],
)
def test_parity_and_ops(widths, bias, shape):
    torch.manual_seed(0)
    model = Projections(widths, bias).eval()
    x = torch.randn(shape)
    with torch.no_grad():
        ref = model(x)
        out, recs = compile_with_records(model, x, patterns=PATTERN)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    (m,) = matches(recs)
    assert m.detail["widths"] == list(widths) and m.detail["bias"] == list(bias)
    stage = post_grad(recs[0])
    assert gemms(stage.ops_before) == len(widths)
    assert stage.ops_after.get("aten.mm", 0) + stage.ops_after.get("aten.addmm", 0) == 0
    if all(bias):  # one addmm on the stacked biases, each added before the one rounding
        assert stage.ops_after["fusion_passes.packed_linear_bias"] == 1 and "aten.add" not in stage.ops_after
    else:
        assert stage.ops_after["fusion_passes.packed_linear"] == 1
        assert stage.ops_after.get("aten.add", 0) == sum(bias)  # biases are added to the column slices (fp32)
    assert m.saved_bytes == (len(widths) - 1) * x.numel() * 4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [(False, False, False), (True, True, True), (True, False, False)])
def test_low_precision_parity(dtype, bias):
    """Bit for bit in bf16 / fp16 with N(0, 1) weights and biases (where a bias added after the packed GEMM's
    rounding differed from addmm's by up to 0.125 in bf16 on 30 % of the outputs): biased linears are packed as
    one addmm when every one has a bias, and left unpacked next to unbiased ones."""
    torch.manual_seed(0)
    model = Projections((64, 32, 32), bias).eval().to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    x = torch.randn(2, 5, 64, dtype=dtype)
    with torch.no_grad():
        ref = model(x)
        out, recs = compile_with_records(model, x, patterns=PATTERN)
    (m,) = matches(recs)
    mixed = any(bias) and not all(bias)
    assert m.detail["linears"] == (2 if mixed else 3)
    assert any("biased linear not packed" in n.reason for r in recs for n in r.near_misses) == mixed
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


class RawProjections(nn.Module):
    """Returns the projections themselves (through views) as graph outputs, plus one that is consumed."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(64, 64), nn.Linear(64, 32, bias=False), nn.Linear(64, 32)

    def forward(self, x):
        q = self.q(x).view(*x.shape[:-1], 4, 16).transpose(1, 2)
        return q, self.k(x), torch.relu(self.v(x))


def test_projections_returned_from_the_graph_keep_eager_strides():
    model = RawProjections().eval()
    x = torch.randn(2, 3, 64)
    with torch.no_grad():
        ref = model(x)
        out, recs = compile_with_records(model, x, patterns=PATTERN)
    (m,) = matches(recs)
    assert m.detail["widths"] == [64, 32, 32]
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
        assert a.stride() == b.stride()  # not a view into the packed [M, 128] result
    out[1].view(-1)  # works in eager, so must work here


class StorageViews(nn.Module):
    """Reads each projection through ``as_strided``, whose strides index the storage: [B, S, 32] -> [B, S, 16]."""

    def __init__(self):
        super().__init__()
        self.q, self.k = nn.Linear(64, 32), nn.Linear(64, 32, bias=False)

    def forward(self, x):
        b, s = x.shape[:2]
        q = self.q(x).as_strided((b, s, 16), (s * 32, 32, 2))  # every other column, as eager's dense [M, 32] holds it
        return torch.tanh(q) + 1, torch.tanh(self.k(x).as_strided((b, s, 16), (s * 32, 32, 1), 16))


def test_as_strided_on_a_projection_reads_its_own_columns():
    """On a column slice of the packed [M, 64] result the same strides would read the other projection's rows
    (error 1.4 before); the slice is made dense for it, as eager's GEMM output is."""
    torch.manual_seed(0)
    model = StorageViews().eval()
    x = torch.randn(2, 5, 64)
    with torch.no_grad():
        ref = model(x)
        out, recs = compile_with_records(model, x, patterns=PATTERN)
    assert len(matches(recs)) == 1
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)


class LateBias(nn.Module):
    """k's bias is computed from q, after q's GEMM, where the packed GEMM would have to run."""

    def __init__(self, q_bias: bool):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(64, 32, bias=q_bias), nn.Linear(64, 32, bias=False), nn.Linear(64, 32)

    def forward(self, x):
        q = self.q(x)
        k = F.linear(x, self.k.weight, torch.tanh(q.sum((0, 1))))
        return q, k, self.v(x)


@pytest.mark.parametrize("q_bias", [True, False])
def test_bias_computed_after_the_first_linear_is_not_packed(q_bias):
    """A graph where the packed GEMM reads a bias defined after it failed to compile (and restoring the graph
    raised too); now that linear stays unpacked with a near miss, and q and v are packed."""
    torch.manual_seed(0)
    model = LateBias(q_bias).eval()
    x = torch.randn(2, 5, 64)
    with torch.no_grad():
        ref = model(x)
        out, recs = compile_with_records(model, x, patterns=PATTERN)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    assert not [e for r in recs for e in r.errors]
    (m,) = matches(recs)
    assert m.detail["linears"] == 2 and m.detail["bias"] == [q_bias, True]
    assert any("is computed after the first linear" in n.reason for r in recs for n in r.near_misses)


# --------------------------------------------------------------------------------------------- freezing


def test_freezing_default_cpu_is_correct():
    """CPU freezing turns linears into mkl linears with prepacked weights before our pass: nothing to pack."""
    model = Projections((64, 32, 32), (True, False, True)).eval()
    x = torch.randn(2, 5, 64)
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        ref = model(x)
        out, recs = compile_with_records(model, x, patterns=PATTERN)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    assert kernel.STATS["repacked"] == 0 and kernel.STATS["packed"] == 0


@pytest.mark.parametrize("bias", [(True, False, True), (True, True, True)])
def test_freezing_packs_constants_at_compile_time(bias):
    """With frozen constants left as mm operands (on GPU; on CPU for dtypes that mkl does not prepack, like
    float64 here) the weights are stacked once, at compile time: a plain mm on a new constant (with a bias on every
    linear, an addmm on the stacked biases too), no run-time op, and the parameters are left alone."""
    model = Projections((64, 32, 32), bias).eval().double()
    x = torch.randn(2, 5, 64, dtype=torch.float64)
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        ref = model(x)
        out, recs = compile_with_records(model, x, patterns=PATTERN)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    (m,) = matches(recs)
    assert m.detail["weights_packed"].startswith("at compile time")
    stage = post_grad(recs[0])
    gemm = "aten.addmm" if all(bias) else "aten.mm"
    assert gemms(stage.ops_before) == 3 and stage.ops_after[gemm] == 1 and gemms(stage.ops_after) == 1
    assert stage.ops_after.get("aten.add", 0) == (0 if all(bias) else sum(bias))
    assert "packed_linear" not in stage.code_after and "_fusion_packed_weight" in stage.code_after
    assert kernel.STATS["repacked"] == 0 and model.projs[1].weight.storage_offset() == 0


# --------------------------------------------------------------------------------------------- must not fire


class TwoInputs(nn.Module):
    def __init__(self, dtype_k=torch.float32):
        super().__init__()
        self.q = nn.Linear(64, 32)
        self.k = nn.Linear(64, 32).to(dtype_k)

    def forward(self, x1, x2):
        return self.q(x1), self.k(x2.to(self.k.weight.dtype)).float()


def _no_match(model, *args, grad=False):
    ref = model(*args)
    out, recs = compile_with_records(model, *args, patterns=PATTERN, grad=grad)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    assert matches(recs) == []
    assert all(post_grad(r).ops_after.get("fusion_passes.packed_linear", 0) == 0 for r in recs if r.passes_ran)
    return recs


def test_no_fire_weights_of_different_dtypes():
    x = torch.randn(2, 3, 64)
    with torch.no_grad():
        _no_match(TwoInputs(dtype_k=torch.bfloat16).eval(), x, x)


def test_no_fire_inputs_that_only_look_alike():
    x1, x2 = torch.randn(2, 3, 64), torch.randn(2, 3, 64)  # same shape and dtype, different tensors
    with torch.no_grad():
        _no_match(TwoInputs().eval(), x1, x2)


def test_no_fire_single_linear():
    with torch.no_grad():
        recs = _no_match(Projections((64,), (True,)).eval(), torch.randn(2, 3, 64))
    assert [n for r in recs for n in r.near_misses] == []


def test_no_fire_with_autograd_and_grads_stay_exact():
    torch.manual_seed(0)
    model = Projections((64, 32, 32), (True, False, False)).train()
    x = torch.randn(2, 3, 64)
    recs = _no_match(model, x, grad=True)
    assert any("autograd is on" in n.reason for r in recs for n in r.near_misses)
    fn = compiled(model)
    sum(o.sum() for o in fn(x)).backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    sum(o.sum() for o in model(x)).backward()
    for a, b in zip(got, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(a, b)
    assert kernel.STATS["repacked"] == 0


@pytest.mark.parametrize("frozen", [(0,), (0, 1, 2)], ids=["q-frozen", "all-frozen"])
def test_no_fire_with_frozen_weights_and_grads_stay_exact(frozen):
    """Training with some (or all) of the projections frozen and the input requiring grad (it comes from a layer
    that trains): nothing is packed, every gradient is eager's, and the near miss names the autograd cause without
    claiming the weights require grad when none does."""
    torch.manual_seed(0)
    model = Projections((64, 32, 32), (False, False, False)).train()
    for i in frozen:
        model.projs[i].weight.requires_grad_(False)
    x = torch.randn(2, 3, 64, requires_grad=True)
    recs = _no_match(model, x, grad=True)
    reasons = [n.reason for r in recs for n in r.near_misses]
    assert any("autograd is on" in r for r in reasons), reasons
    if len(frozen) == 3:
        assert not any("weights that require grad" in r for r in reasons), reasons
    fn = compiled(model)
    (got_x,) = torch.autograd.grad(sum(o.square().sum() for o in fn(x)), x)
    (ref_x,) = torch.autograd.grad(sum(o.square().sum() for o in model(x)), x)
    torch.testing.assert_close(got_x, ref_x)
    trained = [p for p in model.parameters() if p.requires_grad]
    got = torch.autograd.grad(sum(o.square().sum() for o in fn(x)), trained) if trained else ()
    ref = torch.autograd.grad(sum(o.square().sum() for o in model(x)), trained) if trained else ()
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)
    assert kernel.STATS["repacked"] == 0


class ComputedWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(32, 64))
        self.w2 = nn.Parameter(torch.randn(32, 64))

    def forward(self, x):
        return F.linear(x, self.w1 * 0.5), F.linear(x, self.w2)  # w1 * 0.5 would have to be copied each call


def test_near_miss_for_a_weight_computed_in_the_graph():
    with torch.no_grad():
        recs = _no_match(ComputedWeight().eval(), torch.randn(2, 3, 64))
    reasons = [n.reason for r in recs for n in r.near_misses]
    assert any("computed in the graph" in r for r in reasons), reasons


def _two_linears(x, w1, w2):
    return F.linear(x, w1).relu(), F.linear(x, w2).relu()


def test_near_miss_for_weights_that_view_a_larger_tensor():
    """Dbrx passes each expert's ``w1.view(E, F, H)[e]`` into a graph: re-pointing such a view at a packed buffer
    would cut it off the parameter, so the op would refuse at run time; the family must not pack it at all."""
    torch.manual_seed(0)
    stacked_a, stacked_b = torch.randn(3 * 32, 64), torch.randn(3 * 32, 64)  # [experts * F, H]
    x = torch.randn(2, 5, 64)
    for expert in (0, 2):  # offset 0 in a larger storage, and a non-zero offset
        w1, w2 = stacked_a.view(3, 32, 64)[expert], stacked_b.view(3, 32, 64)[expert]
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*shares memory")  # no run-time refusal: nothing packed
            recs = _no_match(_two_linears, x, w1, w2)
        reasons = [n.reason for r in recs for n in r.near_misses]
        assert sum("is a view into a 24576-byte tensor" in r for r in reasons) == 2, reasons
        assert w1.data_ptr() == stacked_a.data_ptr() + expert * 32 * 64 * 4  # still a view of the parameter


@pytest.mark.parametrize("in_storage_order", [True, False])
def test_adjacent_views_of_one_buffer_are_packed_in_place(in_storage_order):
    """Row blocks that already fill one buffer in the graph's order (a user's fused weight, or ours after packing)
    are packed: the op reads them as they lie, with no copy. In the other order the op would have to re-point them
    (cutting them off the buffer), so they are a near miss."""
    torch.manual_seed(0)
    fused, x = torch.randn(2 * 32, 64), torch.randn(2, 5, 64)
    w1, w2 = (fused[:32], fused[32:]) if in_storage_order else (fused[32:], fused[:32])
    moves = kernel.weight_moves()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*shares memory")
        ref = _two_linears(x, w1, w2)
        out, recs = compile_with_records(_two_linears, x, w1, w2, patterns=PATTERN)
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b)
    assert kernel.weight_moves() == moves and kernel.STATS["repacked"] == 0
    if in_storage_order:
        assert len(matches(recs)) == 1 and kernel.STATS["packed"] == 1
    else:
        assert matches(recs) == [] and kernel.STATS["packed"] == 0
        assert any("is a view into" in n.reason for r in recs for n in r.near_misses)


def test_recompile_after_packing_packs_the_packed_weights_again():
    """A second graph (a new static shape) sees the parameters as row blocks of the buffer the first call made;
    it packs them too, without moving them again."""
    model = tiny_llama()
    fn = compiled(model, dynamic=False)
    with torch.no_grad(), fusion_passes.capture() as recs:
        for seq in (8, 9):
            ids = torch.randint(0, 256, (2, seq))
            torch.testing.assert_close(fn(ids), model(ids))
    graphs = [r for r in recs if r.passes_ran]
    assert len(graphs) == 2
    assert [len(r.matches_for("qkv_packing")) for r in graphs] == [2, 2]
    assert not any("view into" in n.reason for r in graphs for n in r.near_misses)
    assert kernel.STATS["repacked"] == 2 and kernel.STATS["packed"] == 4


# --------------------------------------------------------------------------------------------- autocast


class Autocast(nn.Module):
    """``model`` called under ``torch.autocast`` (its fp32 parameters cast to ``dtype`` on every call)."""

    def __init__(self, model, dtype=torch.bfloat16):
        super().__init__()
        self.model, self.dtype = model, dtype

    def forward(self, *args):
        with torch.autocast("cpu", dtype=self.dtype):
            return self.model(*args)


def _casts(ops: dict) -> int:
    return ops.get("prims.convert_element_type", 0) + ops.get("aten._to_copy", 0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [(False, False, False), (True, True, True), (True, False, False)])
def test_autocast_packs_fp32_weights_and_casts_them_once(dtype, bias):
    """Autocast casts x and each fp32 W (and b) per linear: 3 x 2 (3) casts and 3 GEMMs become one cast of x,
    one packed op (casting the packed weights once inside) and the GEMMs; bit for bit as eager under autocast.
    A biased linear next to unbiased ones stays unpacked, as in bf16 without autocast."""
    torch.manual_seed(0)
    model = Autocast(Projections((64, 32, 32), bias).eval(), dtype)
    x = torch.randn(2, 5, 64)
    with torch.no_grad():
        ref = model(x)
        out, recs = compile_with_records(model, x, patterns=PATTERN)
    for a, b in zip(out, ref):
        assert a.dtype == b.dtype == dtype
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    (m,) = matches(recs)
    mixed = any(bias) and not all(bias)
    assert m.detail["linears"] == (2 if mixed else 3)
    assert m.detail["cast_per_call"] == f"torch.float32 -> {dtype}, once on the packed weights"
    stage = post_grad(recs[0])
    assert _casts(stage.ops_before) == 3 * 2 + sum(bias)
    assert _casts(stage.ops_after) == (1 + 3 if mixed else 1)  # x once; the unpacked one's x, W, b
    op = "fusion_passes.packed_linear_bias" if all(bias) else "fusion_passes.packed_linear"
    assert stage.ops_after[op] == 1
    assert stage.ops_after.get("aten.mm", 0) == 0 and stage.ops_after.get("aten.addmm", 0) == int(mixed)
    assert kernel.STATS["repacked"] == 1 and kernel.STATS["packed"] == 1
    assert all(p.dtype == torch.float32 for p in model.parameters())  # packed as they are, cast per call


def test_autocast_zoo_llama_packs_qkv_and_gate_up_and_sees_weight_updates():
    """Against stock Inductor under autocast (eager rounds its fp32 elementwise ops differently): bit for bit."""
    model, args = zoo.build("llama", seq=8)
    layers = model.config.num_hidden_layers
    torch._dynamo.reset()
    stock = torch.compile(Autocast(model), backend=fusion_passes.backend(patterns=[]))
    with torch.no_grad():
        expected = [stock(*args)]
        for p in model.parameters():
            p.mul_(0.5)
        expected.append(stock(*args))
        for p in model.parameters():
            p.mul_(2)
    fn = compiled(Autocast(model))
    with torch.no_grad(), fusion_passes.capture() as recs:
        torch.testing.assert_close(fn(*args), expected[0], atol=0, rtol=0)
        for p in model.parameters():
            p.mul_(0.5)  # in place: the packed fp32 buffer changes, and the next call casts it again
        torch.testing.assert_close(fn(*args), expected[1], atol=0, rtol=0)
    assert sorted(m.detail["widths"] for m in matches(recs)) == [[64, 32, 32]] * layers + [[128, 128]] * layers
    assert kernel.STATS["repacked"] == 2 * layers and kernel.STATS["unpacked"] == 0


class CastLinears(nn.Module):
    """Two linears on one x, each casting x and its weight to the given dtypes (autocast writes these casts)."""

    def __init__(self, x_dtypes, w_dtypes=(torch.float32, torch.float32), w_casts=(True, True)):
        super().__init__()
        self.x_dtypes, self.w_casts = x_dtypes, w_casts
        self.ws = nn.ParameterList(nn.Parameter(torch.randn(32, 64).to(d)) for d in w_dtypes)

    def forward(self, x):
        return [F.linear(x.to(xd), w.to(xd) if cast else w).float()
                for xd, w, cast in zip(self.x_dtypes, self.ws, self.w_casts)]


@pytest.mark.parametrize("x_dtypes, w_dtypes, w_casts, reason", [
    # one x cast to two dtypes: different values, never one GEMM
    ((torch.bfloat16, torch.float16), (torch.float32, torch.float32), (True, True), None),
    # fp32 and fp16 weights both cast to bf16: the packed buffer would mix dtypes
    ((torch.bfloat16, torch.bfloat16), (torch.float32, torch.float16), (True, True), "different dtype"),
    # a weight cast per call next to one already in bf16
    ((torch.bfloat16, torch.bfloat16), (torch.float32, torch.bfloat16), (True, False), "different dtype"),
], ids=["x-cast-to-two-dtypes", "weights-of-two-dtypes", "cast-and-native"])
def test_autocast_casts_that_differ_are_not_packed(x_dtypes, w_dtypes, w_casts, reason):
    torch.manual_seed(0)
    with torch.no_grad():
        recs = _no_match(CastLinears(x_dtypes, w_dtypes, w_casts).eval(), torch.randn(2, 5, 64))
    reasons = [n.reason for r in recs for n in r.near_misses]
    assert (any(reason in r for r in reasons) if reason else reasons == []), reasons


def test_autocast_weight_computed_before_its_cast_is_not_packed():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k = nn.Linear(64, 32, bias=False), nn.Linear(64, 32, bias=False)

        def forward(self, x):
            return F.linear(x, self.q.weight * 2), self.k(x)  # q's W * 2 is computed, then cast

    with torch.no_grad():
        recs = _no_match(Autocast(Scaled().eval()), torch.randn(2, 5, 64))
    reasons = [n.reason for r in recs for n in r.near_misses]
    assert any("computed in the graph (aten.mul, then cast to torch.bfloat16)" in r for r in reasons), reasons


@pytest.mark.parametrize("bias_dtypes", [(torch.float32,) * 3, (torch.bfloat16, torch.float32, torch.bfloat16)],
                         ids=["all-fp32", "one-fp32"])
def test_autocast_biases_stored_in_another_dtype_than_the_weights_stay_unpacked(bias_dtypes):
    """bf16 weights with fp32 biases under bf16 autocast: autocast casts the fp32 biases (each just before its own
    linear) and leaves the weights. One packed buffer holds one dtype, so the biased linears stay unpacked, with a
    near miss that says why. Before, the packed op read the later biases' casts before the graph defined them: the
    family raised (and without FUSION_PASSES_RAISE the graph fell back with a warning)."""
    torch.manual_seed(0)
    model = Autocast(Projections((64, 32, 32), (True, True, True)).eval())
    for lin, dtype in zip(model.model.projs, bias_dtypes):
        lin.weight.data, lin.bias.data = lin.weight.data.bfloat16(), lin.bias.data.to(dtype)
    with torch.no_grad():
        recs = _no_match(model, torch.randn(2, 5, 64))
    assert not [e for r in recs for e in r.errors]
    reasons = [n.reason for r in recs for n in r.near_misses]
    assert sum("stored in another dtype than the weights' torch.bfloat16" in r for r in reasons) == 3, reasons


def test_autocast_with_autograd_is_not_packed_and_grads_match():
    torch.manual_seed(0)
    model = Autocast(Projections((64, 32, 32), (True, True, True)).train())
    x = torch.randn(2, 3, 64)
    recs = _no_match(model, x, grad=True)
    assert any("autograd is on" in n.reason for r in recs for n in r.near_misses)


# --------------------------------------------------------------------------------------------- the op itself


def test_op_packs_once_then_runs_one_gemm_on_the_packed_rows():
    torch.manual_seed(0)
    x = torch.randn(5, 16)
    ws = [torch.randn(8, 16), torch.randn(4, 16), torch.randn(4, 16)]
    values = [w.clone() for w in ws]
    expected = torch.cat([x @ w.t() for w in values], dim=1)
    torch.testing.assert_close(torch.ops.fusion_passes.packed_linear(x, ws), expected)
    assert kernel.STATS["repacked"] == 1
    assert len({w.untyped_storage().data_ptr() for w in ws}) == 1
    assert [w.storage_offset() for w in ws] == [0, 8 * 16, 12 * 16]
    for w, v in zip(ws, values):
        assert torch.equal(w, v) and w.is_contiguous()
    torch.testing.assert_close(torch.ops.fusion_passes.packed_linear(x, ws), expected)
    assert kernel.STATS["packed"] == 2 and kernel.STATS["repacked"] == 1
    # already adjacent rows of some buffer (e.g. a user's fused weight): used as they are, never copied
    fused = torch.randn(12, 16)
    parts = [fused[:8], fused[8:]]
    torch.testing.assert_close(torch.ops.fusion_passes.packed_linear(x, parts), x @ fused.t())
    assert kernel.STATS["repacked"] == 1 and parts[0].untyped_storage().data_ptr() == fused.data_ptr()


def test_bias_op_packs_weights_and_biases_once_then_runs_one_addmm():
    """``packed_linear_bias``: the weights and the biases each become row blocks of one buffer on the first call
    (the same tensors, the same values), then one addmm; in-place updates of a bias are seen; a bias that another
    tensor aliases keeps the group unpacked (N addmms) until the alias is gone."""
    torch.manual_seed(0)
    x = torch.randn(5, 16, dtype=torch.bfloat16)
    ws = [torch.randn(8, 16, dtype=torch.bfloat16), torch.randn(4, 16, dtype=torch.bfloat16)]
    bs = [torch.randn(8, dtype=torch.bfloat16), torch.randn(4, dtype=torch.bfloat16)]

    def expected():
        return torch.cat([torch.addmm(b, x, w.t()) for w, b in zip(ws, bs)], dim=1)  # one rounding each

    ref = expected()
    assert torch.equal(torch.ops.fusion_passes.packed_linear_bias(x, ws, bs), ref)
    assert kernel.STATS["repacked"] == 1 and kernel.STATS["packed"] == 1
    assert len({b.untyped_storage().data_ptr() for b in bs}) == 1 and [b.storage_offset() for b in bs] == [0, 8]
    assert len({w.untyped_storage().data_ptr() for w in ws}) == 1
    bs[1].mul_(2)  # in place, into the packed bias buffer
    assert torch.equal(torch.ops.fusion_passes.packed_linear_bias(x, ws, bs), expected())
    assert kernel.STATS["repacked"] == 1 and kernel.STATS["packed"] == 2
    bs[0].data = torch.randn(8, dtype=torch.bfloat16)  # a new storage for one bias
    alias = bs[0].detach()
    with pytest.warns(UserWarning, match="shares memory"):
        assert torch.equal(torch.ops.fusion_passes.packed_linear_bias(x, ws, bs), expected())
    assert kernel.STATS["unpacked"] == 1
    del alias
    assert torch.equal(torch.ops.fusion_passes.packed_linear_bias(x, ws, bs), expected())
    assert kernel.STATS["repacked"] == 2 and [b.storage_offset() for b in bs] == [0, 8]


@pytest.mark.parametrize("bias", [False, True])
def test_op_casts_weights_to_the_input_dtype_packed_or_not(bias):
    """fp32 weights (and biases) with a bf16 x: cast once on the packed rows, or one by one when the op falls
    back to unpacked GEMMs (a weight shared with an alias); the same values both ways. Integer weights: an error."""
    torch.manual_seed(0)
    x = torch.randn(5, 16).bfloat16()
    ws, bs = [torch.randn(16, 16), torch.randn(8, 16)], [torch.randn(16), torch.randn(8)]
    op = torch.ops.fusion_passes.packed_linear_bias if bias else torch.ops.fusion_passes.packed_linear
    call = (lambda: op(x, ws, bs)) if bias else (lambda: op(x, ws))
    expected = torch.cat([torch.addmm(b.bfloat16(), x, w.bfloat16().t()) if bias else x @ w.bfloat16().t()
                          for w, b in zip(ws, bs)], 1)
    alias = ws[0].view(-1)
    with pytest.warns(UserWarning, match="shares memory"):
        out = call()
    assert out.dtype == torch.bfloat16 and torch.equal(out, expected) and kernel.STATS["unpacked"] == 1
    del alias
    assert torch.equal(call(), expected) and kernel.STATS["repacked"] == 1
    assert ws[0].dtype == torch.float32 and ws[1].storage_offset() == 16 * 16
    with pytest.raises(ValueError, match="only float weights are cast"):
        torch.ops.fusion_passes.packed_linear(x, [w.int() for w in ws])


def test_op_takes_weights_back_to_back_in_separate_storages_as_unpacked_memory():
    """Two weights whose memory lies back to back but in separate storages are not one buffer: a view of the first
    weight's storage cannot reach the second (``as_strided`` refuses), so the op packs them before one GEMM. Weights
    of another width at the right address are never read as rows of the first."""
    np = pytest.importorskip("numpy")
    x = torch.randn(3, 16)
    memory = np.random.default_rng(0).standard_normal((12, 16)).astype(np.float32)
    a, b = torch.from_numpy(memory[:8]), torch.from_numpy(memory[8:])  # one numpy buffer, two storages
    assert b.data_ptr() == a.data_ptr() + a.numel() * 4 and a.untyped_storage().nbytes() == a.numel() * 4
    expected = torch.cat([x @ a.t(), x @ b.t()], 1)
    assert kernel._stacked_t([a, b]) is None
    torch.testing.assert_close(torch.ops.fusion_passes.packed_linear(x, [a, b]), expected)
    assert kernel.STATS["repacked"] == 1
    stacked = kernel._stacked_t([a, b])  # now rows of one buffer: the view is [K, sum N_i]
    assert stacked is not None and stacked.shape == (16, 12) and stacked.data_ptr() == a.data_ptr()
    fused = torch.randn(12, 16)
    narrow = fused.view(-1)[8 * 16:].view(8, 8)  # right where a third 16-wide weight would start, but 8 wide
    assert kernel._stacked_t([fused[:8], narrow]) is None
    assert kernel._stacked_t([fused[:8], fused[8:]]).shape == (16, 12)


def test_op_never_separates_weights_that_alias_each_other_or_inference_tensors():
    x = torch.randn(3, 16)
    w = torch.randn(8, 16)
    both = [w, w.view_as(w)]  # two inputs, one memory: packing them apart would let one go stale
    with pytest.warns(UserWarning, match="overlap in memory"):
        torch.testing.assert_close(torch.ops.fusion_passes.packed_linear(x, both), torch.cat([x @ w.t()] * 2, 1))
    w.mul_(2)
    torch.testing.assert_close(torch.ops.fusion_passes.packed_linear(x, both), torch.cat([x @ w.t()] * 2, 1))
    assert kernel.STATS["repacked"] == 0 and kernel.STATS["unpacked"] == 2
    with torch.inference_mode():
        frozen = [torch.randn(8, 16), torch.randn(4, 16)]  # inference tensors refuse set_ outside the mode
    with pytest.warns(UserWarning, match="could not pack"):
        out = torch.ops.fusion_passes.packed_linear(x, frozen)
    torch.testing.assert_close(out, torch.cat([x @ f.t() for f in frozen], 1))


@pytest.mark.gpu
@pytest.mark.parametrize("batch, packs", [(4, True), (1, False)])
def test_gpu_decode_of_several_sequences_is_packed(batch, packs):
    """One decode token of ``batch`` sequences (M = batch rows), decode_gemv not enabled: on CUDA 2-16 rows are
    packed and match eager; one row stays as cuBLAS's separate GEMVs."""
    model, args = zoo.build("llama", batch=batch, seq=1, dtype=torch.bfloat16, device="cuda")
    torch._dynamo.reset()
    fn = torch.compile(model, backend=fusion_passes.backend(patterns=PATTERN))
    with torch.no_grad(), fusion_passes.capture() as recs:
        ref = model(*args)
        out = fn(*args)
    torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)
    assert any(m.pattern == "qkv_packing" for r in recs for m in r.matches) == packs
    if not packs:
        assert any("one row" in n.reason for r in recs for n in r.near_misses)


@pytest.mark.gpu
def test_gpu_llama_reduce_overhead_packs_once_outside_the_graph_pool():
    # 32 rows: packed at any decode policy (one decode row is left unpacked on CUDA by design)
    model, args = zoo.build("llama", batch=2, seq=16, dtype=torch.bfloat16, device="cuda")
    bytes_before = weight_bytes(model)
    torch._dynamo.reset()
    fn = torch.compile(model, backend=fusion_passes.backend(patterns=PATTERN, mode="reduce-overhead"))
    with torch.no_grad():
        ref = model(*args)
        for _ in range(4):  # warm-up (packs), record, replays
            out = fn(*args).clone()
            torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)
    assert kernel.STATS["repacked"] == 4 and kernel.STATS["unpacked"] == 0
    assert weight_bytes(model) <= 1.02 * bytes_before
    with torch.no_grad():  # an update after capture lands in the packed buffer the graph reads
        model.layers[0].self_attn.q_proj.weight.mul_(0.5)
        torch.testing.assert_close(fn(*args).clone(), model(*args), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("rows, device, decode_policy, packs", [
    (1, "cuda", "auto", False), (2, "cuda", "auto", True), (16, "cuda", "auto", True), (1, "cpu", "auto", True),
    (1, "cuda", "unpacked", False), (16, "cuda", "unpacked", False), (17, "cuda", "unpacked", True),
    (1, "cpu", "unpacked", True), (8, "cuda", "packed", True), (1, "cuda", "packed", True)])
def test_decode_sized_gemms_stay_unpacked_on_cuda(monkeypatch, rows, device, decode_policy, packs):
    """The H200 measured the packed GEMV slower at one decode row and faster at 2-16 (several sequences): by default
    a single static row on CUDA is left alone; FUSION_PASSES_QKV_PACKING_DECODE=unpacked leaves every M <= 16 there,
    =packed packs them all."""
    from types import SimpleNamespace

    from torch._subclasses.fake_tensor import FakeTensorMode

    from fusion_passes.patterns import qkv_packing

    monkeypatch.setenv(qkv_packing.DECODE_POLICY_ENV, decode_policy)
    with FakeTensorMode():
        x = torch.empty(rows, 64, device=device)
    group = [SimpleNamespace(x2=torch.fx.Graph().placeholder("x"))]
    group[0].x2.meta["val"] = x
    reason = qkv_packing._decode_sized(group)
    assert (reason is None) == packs
    if not packs:
        assert "decode-sized" in reason and ("rows <= 16" if decode_policy == "unpacked" else "one row") in reason
        assert "FUSION_PASSES_QKV_PACKING_DECODE=packed" in reason


def test_decode_packing_policy_is_part_of_the_graph_cache_key(monkeypatch):
    """Switching the policy must miss the FX graph cache: the pass produces another graph."""
    from fusion_passes.patterns import qkv_packing

    monkeypatch.setenv(qkv_packing.DECODE_POLICY_ENV, "packed")
    packed = qkv_packing.cache_key()
    monkeypatch.delenv(qkv_packing.DECODE_POLICY_ENV)
    assert qkv_packing.cache_key() != packed
    monkeypatch.setenv(qkv_packing.DECODE_POLICY_ENV, "sometimes")
    with pytest.raises(ValueError, match="auto, unpacked, packed"):
        qkv_packing.cache_key()
