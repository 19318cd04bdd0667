"""Shared test setup: no Inductor caches (so our passes always run and leave records), one compile thread
(CI has 2 cores), a GPU marker, and ``compile_with_records`` used by every family's tests."""

import os

os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
os.environ.setdefault("FUSION_PASSES_RAISE", "1")
# residual_norm leaves every norm to Inductor by default (ours is not faster yet); test the rewrite itself
os.environ.setdefault("FUSION_PASSES_RESIDUAL_NORM", "always")  # a family that raises fails its test instead of warning

import pytest  # noqa: E402
import torch  # noqa: E402

import fusion_passes  # noqa: E402

if torch.__version__.startswith(("2.11.", "2.12.")):
    # the C++ code of torch 2.11 / 2.12 for the bounds check of an indirect index in HF generate's dynamic-shape
    # graphs does not compile ("'tmp2' was not declared" / "VectorizedN<long, 2> in a constant expression"), with
    # stock Inductor too (2.13 and 2.14 compile it): the tests turn that check off there
    torch._inductor.config.assert_indirect_indexing = False


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def compile_with_records(fn, *args, patterns=None, exclude=(), grad=False, dynamic=None, **backend_kw):
    """Compile ``fn`` with our backend, call it once on ``args``; return (output, [GraphRecord, ...])."""
    torch._dynamo.reset()
    be = fusion_passes.backend(patterns=patterns, exclude=exclude, **backend_kw)
    compiled = torch.compile(fn, backend=be, dynamic=dynamic)
    with fusion_passes.capture() as recs, torch.set_grad_enabled(grad):
        out = compiled(*args)
    return out, recs


def transformers_major() -> int:
    """The installed transformers' major version (the HF tests expect what 4.x and 5.x each do)."""
    return int(pytest.importorskip("transformers").__version__.split(".")[0])


def apply_on_fake_cuda(family, fn, *shapes, dtype=torch.bfloat16, graphed=False):
    """Trace ``fn`` on fake CUDA tensors of ``shapes`` (no GPU needed: how the CUDA rewrites are tested on CPU),
    run ``family``'s pass on the ATen graph with autograd off (``graphed``: as in a compile for CUDA graphs);
    return (GraphModule, GraphRecord). A shape may be ``(shape, dtype)`` for a tensor of another dtype
    (positions: int64)."""
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    with FakeTensorMode():
        specs = [s if s and isinstance(s[-1], torch.dtype) else (s, dtype) for s in shapes]
        args = [torch.empty(s, dtype=t, device="cuda") for s, t in specs]
        gm = make_fx(fn, select_decomp_table(), tracing_mode="real")(*args)
        gm.graph.eliminate_dead_code()  # unused dtype casts the decompositions leave (Inductor's graphs have none)
        rec = apply_family(family, gm.graph, graphed=graphed)
    assert_kernels_get_every_parameter(gm.graph)
    return gm, rec


def assert_kernels_get_every_parameter(graph):
    """Every Triton kernel traced into ``graph`` gets every parameter, constexprs with defaults too: Inductor's
    launcher for a traced user kernel takes no defaults, and a missing one fails only at run time on a GPU (the
    decode attention kernel's PF_PER / PF_LINE, session 14)."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    for node in graph.nodes:
        if node.target is torch.ops.higher_order.triton_kernel_wrapper_functional:
            kernel = kernel_side_table.get_kernel(node.kwargs["kernel_idx"])
            passed = {**node.kwargs["kwargs"], **kernel_side_table.get_constant_args(node.kwargs["constant_args_idx"])}
            tuned = {k for config in getattr(kernel, "configs", ()) for k in config.kwargs}  # an autotuner's
            missing = set(kernel.arg_names) - set(passed) - tuned
            assert not missing, f"{getattr(kernel, 'fn', kernel).__name__} launched without {sorted(missing)}"


def post_grad_like(fn, args, decompose=True):
    """An ATen graph of ``fn`` (Inductor's decompositions when ``decompose``), with fake vals in meta."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn, select_decomp_table() if decompose else None, tracing_mode="fake")(*args)


def apply_family(family, graph, graphed=False):
    """Run ``family``'s pass on ``graph`` with autograd off (``graphed``: in a compile for CUDA graphs), linting
    after; return its GraphRecord."""
    from fusion_passes import records
    from fusion_passes.pass_manager import PassContext

    rec = records.GraphRecord(graph_id=0, patterns=(family.NAME,))
    family.apply(graph, PassContext(family.NAME, family.HOOK, rec, grad_enabled=False, graphed=graphed))
    graph.lint()
    return rec


@pytest.fixture
def pad_mm_pads_rows(monkeypatch):
    """Inductor's pad_mm pads every 16-bit GEMM whose M, K or N is not a multiple of 8, as it may on a GPU (where
    it times padded against unpadded at compile time): on CPU it never pads, so force it there."""
    from torch._inductor.fx_passes import pad_mm

    monkeypatch.setattr(pad_mm, "check_device", lambda a, b: True)
    monkeypatch.setattr(pad_mm, "has_triton", lambda: True)
    # config.patch, not monkeypatch: pytest 9.2's undo deletes the setting from Inductor's config module
    with torch._inductor.config.patch(force_shape_pad=True):
        yield


@pytest.fixture
def compile_records():
    return compile_with_records
