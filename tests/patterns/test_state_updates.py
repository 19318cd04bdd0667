"""state_updates: N independent ``buffer += c`` updates -> one foreach add.

What must hold: after several calls the outputs and every buffer equal eager's; the N adds become one
``_foreach_add`` (the copies back stay); and it does not fire on one update, a tensor step, a buffer updated twice,
an updated value that is also read, or a promoting update. Groups form per (dtype, device, step).
"""

import copy

import pytest
import torch
from torch import nn

from tests.conftest import compile_with_records

PATTERN = ["state_updates"]


class Counters(nn.Module):
    """``n`` buffers of ``shape``/``dtype``; forward reads each into the output, then adds its step in place
    (as a static cache layer bumps its length counter)."""

    def __init__(self, n=4, shape=(), dtype=torch.int64, steps=None):
        super().__init__()
        self.steps = steps or [1] * n
        for i in range(n):
            self.register_buffer(f"c{i}", torch.full(shape, i, dtype=dtype))

    def counters(self):
        return [getattr(self, f"c{i}") for i in range(len(self.steps))]

    def forward(self, x):
        for c, step in zip(self.counters(), self.steps):
            x = x + c.sum().to(x.dtype)
            c += step
        return x


def fired(recs):
    return [m for r in recs for m in r.matches_for("state_updates")]


def post_grad(recs):
    (rec,) = recs
    (stage,) = [s for s in rec.stages if s.hook == "post_grad"]
    return stage


def run_against_eager(model, calls):
    """Call an eager copy of ``model`` and ``model`` compiled (one compile) ``calls`` times on one input; assert the
    outputs and every buffer match exactly; return the compile's records."""
    import fusion_passes

    eager = copy.deepcopy(model)
    x = torch.randn(2, 3)
    torch._dynamo.reset()
    fn = torch.compile(model, backend=fusion_passes.backend(patterns=PATTERN))
    with torch.no_grad():
        want = [eager(x) for _ in range(calls)]
        with fusion_passes.capture() as recs:
            got = [fn(x) for _ in range(calls)]
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    for a, b in zip(eager.counters(), model.counters()):
        assert torch.equal(a, b), "a buffer's value after the updates differs from eager's"
    return recs


@pytest.mark.parametrize("n", [2, 5])
@pytest.mark.parametrize("shape,dtype,step", [((), torch.int64, 1), ((3,), torch.float32, 0.5),
                                              ((2, 2), torch.bfloat16, 2)])
def test_updates_become_one_foreach_add_with_eager_parity(n, shape, dtype, step):
    recs = run_against_eager(Counters(n, shape, dtype, steps=[step] * n), 3)
    (match,) = fired(recs)
    assert match.detail["updates"] == n and match.detail["step"] == step
    stage = post_grad(recs)
    assert stage.ops_before.get("aten.add", 0) - stage.ops_after.get("aten.add", 0) == n  # the updates' adds went
    assert stage.ops_after.get("aten._foreach_add") == 1 and "aten._foreach_add" not in stage.ops_before
    assert stage.ops_after["aten.copy_"] == stage.ops_before["aten.copy_"] == n  # the buffers are still written


def test_groups_by_step():
    """Steps 1, 1, 2, 1: one foreach of the three 1-steps; the lone 2-step stays an add."""
    model = Counters(4, steps=[1, 1, 2, 1])
    recs = run_against_eager(model, 2)
    assert [m.detail["updates"] for m in fired(recs)] == [3]
    assert [a.item() for a in model.counters()] == [2, 3, 6, 5]


class Variant(Counters):
    """Counters whose update is not a plain ``buf += c`` of its own (kind picks how)."""

    def __init__(self, kind):
        super().__init__(3)
        self.kind = kind

    def forward(self, x):
        for i, c in enumerate(self.counters()):
            if self.kind == "tensor_step":
                c += torch.ones((), dtype=torch.int64)  # a tensor constant, not a Python number
            elif self.kind == "twice":
                c += 1
                x = x + c.to(x.dtype)
                c += 1
            elif self.kind == "read_after":
                c += 1
                x = x + c.to(x.dtype)  # the new value is read in the graph too
            elif self.kind == "single" and i == 0:
                c += 1
        return x


@pytest.mark.parametrize("kind", ["tensor_step", "twice", "read_after", "single"])
def test_does_not_fire(kind):
    recs = run_against_eager(Variant(kind), 2)
    assert not fired(recs)
    assert "aten._foreach_add" not in post_grad(recs).ops_after


def test_steps_of_zero_and_minus_zero_stay_apart():
    """0.0 == -0.0 in Python, but -0.0 + 0.0 is 0.0 and -0.0 + -0.0 is -0.0: one foreach per sign (one group
    gave every buffer the first step's sign)."""
    model = Counters(4, (2,), torch.float32, steps=[-0.0, 0.0, -0.0, 0.0])
    for c in model.counters():
        c.fill_(-0.0)
    recs = run_against_eager(model, 1)
    assert [m.detail["updates"] for m in fired(recs)] == [2, 2]
    assert [bool(c.signbit().all()) for c in model.counters()] == [True, False, True, False]  # as eager's


class ComplexCounters(Counters):
    def forward(self, x):
        for c, step in zip(self.counters(), self.steps):
            x = x + c.real.sum()
            c += step
        return x


def test_complex_buffers_are_left_alone():
    """Inductor cannot lower a foreach add over complex tensors: the rewrite made it fail on the graph (the
    backend then compiled it again without our passes, with a warning)."""
    recs = run_against_eager(ComplexCounters(3, (2,), torch.complex64), 2)
    assert not fired(recs)
    assert any("complex" in n.reason for r in recs for n in r.near_misses)


def test_fires_in_the_default_backend():
    """Part of the default family set: compiling with ``backend="fusion_passes"`` merges the updates."""
    import fusion_passes

    model = Counters(3)
    torch._dynamo.reset()
    with fusion_passes.capture() as recs, torch.no_grad():
        torch.compile(model, backend="fusion_passes")(torch.randn(2, 3))
    assert [m.detail["updates"] for m in fired(recs)] == [3]
    assert [c.item() for c in model.counters()] == [1, 2, 3]
