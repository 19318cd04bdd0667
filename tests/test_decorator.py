"""``@fuse`` on a module class (bare and with options), on a module instance, and on a function."""

import pytest
import torch
from torch import nn

import fusion_passes
from fusion_passes import fuse, zoo
from fusion_passes.patterns import register_pattern, unregister_pattern
from tests.toy_patterns import ToyMul2ToAdd


@pytest.fixture(autouse=True)
def toy():
    register_pattern(ToyMul2ToAdd)
    torch._dynamo.reset()
    yield
    unregister_pattern(ToyMul2ToAdd.NAME)


class Doubler(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x) * 2)


def _assert_fired_on(fn, x, expected):
    with fusion_passes.capture() as recs:
        out = fn(x)
    torch.testing.assert_close(out, expected)
    assert [m.pattern for r in recs for m in r.matches] == ["toy_mul2_to_add"]


def test_bare_decorator_on_module_class_compiles_lazily_with_all_builtins():
    Fused = fuse(type("FusedDoubler", (Doubler,), {}))
    m = Fused()
    assert "_fusion_passes_compiled_forward" not in m.__dict__  # nothing compiled before the first call
    x = torch.randn(2, 4)
    with fusion_passes.capture() as recs:
        out = m(x)
    torch.testing.assert_close(out, Doubler.forward(m, x))
    assert len(recs) == 1 and "toy_mul2_to_add" not in recs[0].patterns  # toy families are opt-in
    assert list(m.state_dict()) == ["lin.weight", "lin.bias"]


def test_decorator_with_options_on_module_class():
    @fuse(patterns=["toy_mul2_to_add"], dynamic=False)
    class Fused(Doubler):
        pass

    m, x = Fused(), torch.randn(3, 4)
    _assert_fired_on(m, x, Doubler.forward(m, x))
    assert Fused._fusion_passes_backend.patterns == ("toy_mul2_to_add",)


def test_decorator_on_instance_keeps_state_dict_keys():
    m = Doubler()
    keys = list(m.state_dict())
    out = fuse(m, patterns=["toy_mul2_to_add"])
    assert out is m and list(m.state_dict()) == keys
    x = torch.randn(2, 4)
    _assert_fired_on(m, x, Doubler.forward(m, x))


def test_decorator_on_function():
    @fuse(patterns=["toy_mul2_to_add"])
    def g(x):
        """doc kept"""
        return torch.cos(x * 2)

    assert g.__doc__ == "doc kept"
    x = torch.randn(5)
    _assert_fired_on(g, x, torch.cos(x * 2))


def test_decorator_rejects_bad_targets_and_names():
    with pytest.raises(TypeError, match="nn.Module subclass or instance, or a function"):
        fuse(42)
    # it compiled the wrapper, which kept stock Inductor: none of our passes ran, silently
    with pytest.raises(TypeError, match=r"already wrapped \(Doubler\); fuse the module itself, fuse\(model\._orig"):
        fuse(torch.compile(Doubler()))
    with pytest.raises(ValueError, match="Valid names"):
        fuse(patterns=["nope"])


def test_zoo_models_run_under_decorator():
    model, args = zoo.build("gpt2", batch=1, seq=8)
    with torch.no_grad():
        expected = model(*args)
        got = fuse(model, patterns=[])(*args)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)



@fuse(patterns=[])  # the toy family is registered only during tests
class PicklableFusedDoubler(Doubler):  # at module level: pickle finds classes by name
    pass


def test_copies_of_a_decorated_class_instance_run_their_own_weights():
    """The compiled forward is bound to the instance it was compiled for: a deepcopy used to keep calling the
    original's weights, and pickling (torch.save) raised on the compiled function."""
    import copy
    import pickle

    m, x = PicklableFusedDoubler(), torch.randn(2, 4)
    m(x)  # compiled now
    for clone in (copy.deepcopy(m), copy.copy(m), pickle.loads(pickle.dumps(m))):
        clone.lin = nn.Linear(4, 4)  # weights of its own
        torch.testing.assert_close(clone(x), Doubler.forward(clone, x))
    torch.testing.assert_close(m(x), Doubler.forward(m, x))


@pytest.mark.parametrize("nesting", ["class decorated twice", "decorated subclass of a decorated class",
                                     "torch.export"])
def test_decorated_class_inside_another_trace_runs_in_the_outer_one(nesting):
    """A forward decorated twice (also by decorating a subclass that inherits it) compiled itself again inside its
    own trace and recursed without end (RecursionError); inside any trace (torch.export too) it now runs its code
    there."""
    fused = fuse(type("FusedDoubler", (Doubler,), {}))
    x = torch.randn(2, 4)
    if nesting == "torch.export":
        m = fused()
        torch.testing.assert_close(torch.export.export(m, (x,)).module()(x), Doubler.forward(m, x))
        return
    outer = fused if nesting == "class decorated twice" else type("Sub", (fused,), {})
    m = fuse(outer, patterns=["toy_mul2_to_add"])()
    _assert_fired_on(m, x, Doubler.forward(m, x))
