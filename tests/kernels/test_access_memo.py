"""access_memo: torch's kernel-access analysis runs once per distinct call of our kernels within a compile.

The real analysis generates TTIR and needs a GPU target; here it is replaced by a counting stand-in, so what
is tested is the memo's keying, scoping and pass-through. The GPU test compiles a decoder and checks reuse.
"""

import types

import pytest
import torch
from torch._higher_order_ops import triton_kernel_wrap as wrap

from fusion_passes.kernels import access_memo

NAME = next(n for n in access_memo._NAMES if hasattr(wrap, n))


def _kernel(module: str):
    """A stand-in Autotuner -> JITFunction -> function chain whose function lives in ``module``."""
    fn = types.FunctionType((lambda: None).__code__, {}, "k")
    fn.__module__ = module
    return types.SimpleNamespace(fn=types.SimpleNamespace(fn=fn))


@pytest.fixture
def counting(monkeypatch):
    calls = []

    def analyse(kernel, kwargs, tma):
        calls.append(dict(kwargs))
        return {"written": ["out_ptr"], "call": len(calls)}

    monkeypatch.setattr(wrap, NAME, analyse)
    return calls


def test_same_call_of_our_kernel_is_analysed_once(counting):
    ours = _kernel("fusion_passes.kernels.gemv")
    x = torch.empty(4, dtype=torch.bfloat16)
    with access_memo.memoized():
        first = getattr(wrap, NAME)(ours, {"x_ptr": x, "K": 2048, "BLOCK": 64}, {})
        again = getattr(wrap, NAME)(ours, {"x_ptr": torch.empty(9, dtype=torch.bfloat16), "K": 2048, "BLOCK": 64}, {})
        first["written"].append("mutated by a caller")
        third = getattr(wrap, NAME)(ours, {"x_ptr": x, "K": 2048, "BLOCK": 64}, {})
    assert len(counting) == 1
    assert again == {"written": ["out_ptr"], "call": 1}
    assert third["written"] == ["out_ptr"], "a caller's change to one answer must not leak into the next"


@pytest.mark.parametrize("changed", [
    {"K": 2049},                                        # integer specialisation can change the code
    {"BLOCK": 128},                                     # a constexpr
    {"x_ptr": torch.empty(4, dtype=torch.float32)},     # the pointer's element type
])
def test_anything_that_selects_the_code_is_analysed_again(counting, changed):
    ours = _kernel("fusion_passes.kernels.gemv")
    base = {"x_ptr": torch.empty(4, dtype=torch.bfloat16), "K": 2048, "BLOCK": 64}
    with access_memo.memoized():
        getattr(wrap, NAME)(ours, base, {})
        getattr(wrap, NAME)(ours, {**base, **changed}, {})
    assert len(counting) == 2


def test_other_kernels_and_unknown_arguments_are_not_memoized(counting):
    users = _kernel("my_project.kernels")
    ours = _kernel("fusion_passes.kernels.norms")
    with access_memo.memoized():
        for _ in range(2):
            getattr(wrap, NAME)(users, {"K": 1}, {})
            getattr(wrap, NAME)(ours, {"K": 1, "opaque": object()}, {})
    assert len(counting) == 4


def test_a_kernel_whose_function_has_no_module_goes_to_torch(counting):
    """A function made by ``exec`` without ``__name__`` in its globals (generated kernel source) has ``__module__``
    None: it is not ours, and the analysis must reach torch, not raise inside the compile."""
    generated = _kernel(None)
    with access_memo.memoized():
        for _ in range(2):
            assert getattr(wrap, NAME)(generated, {"K": 1}, {})["written"] == ["out_ptr"]
    assert len(counting) == 2


def test_memo_lasts_one_block_and_restores_torch(counting):
    ours = _kernel("fusion_passes.kernels.gemv")
    original = getattr(wrap, NAME)
    with access_memo.memoized():
        assert getattr(wrap, NAME) is not original
        with access_memo.memoized():  # a nested compile shares the outer memo
            getattr(wrap, NAME)(ours, {"K": 1}, {})
        getattr(wrap, NAME)(ours, {"K": 1}, {})
    assert getattr(wrap, NAME) is original
    with access_memo.memoized():
        getattr(wrap, NAME)(ours, {"K": 1}, {})
    assert len(counting) == 2


def test_backend_compiles_under_the_memo(monkeypatch):
    """The backend wraps Inductor's compile in ``memoized`` (the analysis runs during lowering, after our
    passes, so the memo must cover compile_fx, not only the passes)."""
    import fusion_passes

    seen = []
    real = access_memo.memoized

    def spying():
        seen.append(True)
        return real()

    monkeypatch.setattr(access_memo, "memoized", spying)
    torch._dynamo.reset()
    f = torch.compile(lambda x: x * 2, backend=fusion_passes.backend())
    assert torch.equal(f(torch.ones(3)), torch.full((3,), 2.0))
    assert seen


@pytest.mark.gpu
def test_gpu_decoder_layers_share_one_analysis(monkeypatch):
    """Two layers of the same shapes each get a fused GEMV; the second layer's kernels (and the lowering of both)
    reuse the first analysis, and the generated code is the same as when every call is analysed afresh."""
    import re

    from torch._inductor.utils import run_and_get_code

    from tests.conftest import compile_with_records

    layers = [torch.nn.Linear(256, 256, bias=False).cuda().bfloat16() for _ in range(2)]
    x = torch.randn(1, 256, device="cuda", dtype=torch.bfloat16)

    def two_layers(h):
        for lin in layers:
            h = lin(h) + h
        return h

    def compiled_code():
        torch._dynamo.reset()
        with torch.no_grad():
            (out, recs), codes = run_and_get_code(lambda: compile_with_records(two_layers, x,
                                                                               patterns=["decode_gemv"]))
        torch.testing.assert_close(out, two_layers(x), rtol=2e-2, atol=2e-2)
        assert sum(len(r.matches) for r in recs) == 2
        return [line for line in "\n".join(codes).splitlines() if not line.lstrip().startswith("#")]

    before = dict(access_memo.stats)
    with_memo = compiled_code()
    assert access_memo.stats["reused"] - before["reused"] >= 2, access_memo.stats
    monkeypatch.setattr(access_memo, "memoized", __import__("contextlib").nullcontext)
    without = compiled_code()
    launches = [re.findall(r"_gemv_kernel\w*\.run\(.*", "\n".join(c)) for c in (with_memo, without)]
    assert launches[0] and launches[0] == launches[1]
    assert with_memo == without
