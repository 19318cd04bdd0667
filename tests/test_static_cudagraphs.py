"""fusion_passes.static_cudagraphs: when a graph may replay as one raw CUDA graph (``blocker``, on fake CUDA
tensors), the runner's bookkeeping (on CPU, with a stand-in for CUDA graph capture that records what a replay
redoes), and on a GPU the real thing against eager and against Inductor's cudagraph trees."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import fusion_passes
from fusion_passes import static_cudagraphs
from fusion_passes.static_cudagraphs import MAX_GRAPHS, StaticCudaGraphs, blocker


def _traced(fn, *shapes, device="cuda"):
    with FakeTensorMode():
        args = [torch.empty(s, device=device) for s in shapes]
        return make_fx(fn)(*args), args


def test_blocker_accepts_a_fixed_shape_inference_graph_on_one_gpu():
    gm, args = _traced(lambda x, w: torch.relu(x @ w), (1, 8), (8, 8))
    assert blocker(gm, args, grad_enabled=False) is None


@pytest.mark.parametrize("case, why", [
    ("grad", "records gradients"),
    ("cpu", "not on one CUDA device"),
    ("python_value", "is a int, not a tensor"),
    ("symint_input", "dynamic=False"),
    ("cpu_tensor_inside", "makes a cpu tensor"),
    ("symbolic", "symbolic or data-dependent size"),
])
def test_blocker_says_why_a_graph_cannot_be_static(case, why):
    if case == "cpu_tensor_inside":
        gm, args = _traced(lambda x: x + torch.arange(4, device="cpu").sum().to(x.device), (4,))
    elif case == "symbolic":  # e.g. the count of an ``x.nonzero()``: an unbacked size
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        gm, args = _traced(lambda x: x * 2, (3, 4))
        next(n for n in gm.graph.nodes if n.op == "call_function").meta["val"] = ShapeEnv().create_unbacked_symint()
    else:
        gm, args = _traced(lambda x, w: x @ w, (1, 8), (8, 8), device="cpu" if case == "cpu" else "cuda")
    if case == "python_value":
        args = [args[0], 3]
    if case == "symint_input":  # what Dynamo passes for a size it made dynamic
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        args = [args[0], ShapeEnv().create_unbacked_symint()]
    reason = blocker(gm, args, grad_enabled=case == "grad")
    assert reason is not None and why in reason, reason


# --- the runner on CPU: a stand-in CUDA graph whose replay re-runs what the test's "compiled" function
# registered while it was being captured (as a real graph re-runs the kernels on the same memory) ---

class _FakeGraph:
    capturing: "_FakeGraph | None" = None

    def __init__(self):
        self.replays = []

    def replay(self):
        for fn in self.replays:
            fn()


@contextlib.contextmanager
def _fake_capture(graph):
    _FakeGraph.capturing = graph
    try:
        yield
    finally:
        _FakeGraph.capturing = None


@pytest.fixture
def fake_cuda_graphs(monkeypatch):
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", _fake_capture)


def _linear_step(calls: list):
    """compiled(w, x) -> [x @ w], counting real runs; under capture it records the replay instead."""

    def compiled(w, x):
        calls.append("run" if _FakeGraph.capturing is None else "capture")
        out = x @ w  # (a capture would not compute it: the replay that follows does)
        if _FakeGraph.capturing is not None:
            _FakeGraph.capturing.replays.append(lambda: torch.matmul(x, w, out=out))
        return [out]

    return compiled


def _runner(compiled, *example, skipped=None):
    return StaticCudaGraphs(compiled, example, on_skip=(skipped if skipped is not None else []).append)


def test_runner_warms_up_captures_then_replays_with_fresh_inputs(fake_cuda_graphs):
    calls = []
    w = torch.nn.Parameter(torch.randn(8, 8), requires_grad=False)
    x = [torch.randn(2, 8) for _ in range(4)]
    run = _runner(_linear_step(calls), w, x[0])
    outs = [run(w, xi)[0] for xi in x]
    assert calls == ["run", "capture"]  # later calls replay: the compiled function does not run again
    assert run.static_idx == [0] and run.copied_idx == [1] and len(run.recordings) == 1
    for xi, out in zip(x, outs):  # each call saw its own input, and a later replay did not overwrite it
        torch.testing.assert_close(out, xi @ w)
    with torch.no_grad():
        w.mul_(2)  # a static input is used in place: its new values count
    torch.testing.assert_close(run(w, x[0])[0], x[0] @ w)


def test_runner_keeps_the_most_recently_used_graphs_when_static_inputs_move(fake_cuda_graphs):
    """HF's generate allocates a new StaticCache per call (transformers 5): each new address set captures once and
    then replays for the rest of its tokens; past MAX_GRAPHS the least recently used graph is dropped."""
    calls, skipped = [], []
    x = torch.randn(2, 8)
    caches = [torch.nn.Parameter(torch.randn(8, 8), requires_grad=False) for _ in range(MAX_GRAPHS + 2)]
    run = _runner(_linear_step(calls), caches[0], x, skipped=skipped)
    run(caches[0], x)  # warm-up
    for cache in caches:  # one "generate call" per cache: three "tokens" each
        for _ in range(3):
            torch.testing.assert_close(run(cache, x)[0], x @ cache)
    assert calls.count("capture") == run.captures == MAX_GRAPHS + 2 and not skipped
    assert [r.ptrs[0] for r in run.recordings] == [c.data_ptr() for c in reversed(caches[2:])]
    torch.testing.assert_close(run(caches[2], x)[0], x @ caches[2])  # kept: replayed, and now the most recent
    assert run.captures == MAX_GRAPHS + 2 and run.recordings[0].ptrs[0] == caches[2].data_ptr()
    torch.testing.assert_close(run(caches[0], x)[0], x @ caches[0])  # dropped: captured again
    assert run.captures == MAX_GRAPHS + 3 and len(run.recordings) == MAX_GRAPHS
    assert caches[3].data_ptr() not in [r.ptrs[0] for r in run.recordings]  # the least recently used went


def test_runner_stops_capturing_when_static_inputs_move_on_every_call(fake_cuda_graphs):
    """A parameter reassigned before every call would capture every time, which costs more than it saves."""
    calls, skipped = [], []
    x = torch.randn(2, 8)
    weights = [torch.nn.Parameter(torch.randn(8, 8), requires_grad=False) for _ in range(MAX_GRAPHS + 3)]
    run = _runner(_linear_step(calls), weights[0], x, skipped=skipped)
    for w in weights:
        torch.testing.assert_close(run(w, x)[0], x @ w)
    assert calls.count("capture") == MAX_GRAPHS  # calls 2 .. MAX_GRAPHS + 1; call MAX_GRAPHS + 2 gives up
    assert skipped == [f"static inputs moved on each of the last {MAX_GRAPHS + 1} calls"] and run.recordings == []
    torch.testing.assert_close(run(weights[1], x)[0], x @ weights[1])  # uncaptured from now on
    assert calls[-1] == "run"


def test_runner_runs_uncaptured_when_the_graph_mutates_an_input_without_static_address(fake_cuda_graphs):
    skipped = []

    def compiled(w, state):
        state.add_(1)  # an in-place update of a plain tensor: a copy of it could not carry the update back
        return [state * w]

    w = torch.nn.Parameter(torch.ones(3), requires_grad=False)
    state = torch.zeros(3)
    run = _runner(compiled, w, state, skipped=skipped)
    for step in range(1, 4):
        torch.testing.assert_close(run(w, state)[0], torch.full((3,), float(step)))
    assert state.tolist() == [3.0, 3.0, 3.0]
    assert len(skipped) == 1 and "mutates input 1, which has no static address" in skipped[0]


def test_runner_replays_updates_of_static_inputs_and_bumps_their_versions(fake_cuda_graphs):
    def compiled(cache, x):
        if _FakeGraph.capturing is None:
            cache.add_(x)
        else:  # a capture records the kernels without running them
            _FakeGraph.capturing.replays.append(lambda: cache.add_(x))
        return [cache[:2]]  # a view of the static input: returned as is, not cloned

    cache = torch.zeros(4)
    torch._dynamo.mark_static_address(cache)
    run = _runner(compiled, cache, torch.ones(4))
    for step in range(1, 5):
        version = cache._version
        out = run(cache, torch.ones(4))[0]
        assert cache.tolist() == [float(step)] * 4  # once per call: not again by the capture
        assert cache._version > version
    assert out.data_ptr() == cache.data_ptr()


def test_runner_runs_uncaptured_when_an_output_aliases_a_copied_input(fake_cuda_graphs):
    skipped = []
    run = _runner(lambda x: [x.view(-1)], torch.zeros(2, 2), skipped=skipped)
    x = torch.randn(2, 2)
    for _ in range(3):
        assert run(x)[0].data_ptr() == x.data_ptr()
    assert skipped == ["an output is a view of an input without a static address"]


def test_runner_runs_uncaptured_when_two_outputs_share_memory(fake_cuda_graphs):
    skipped = []

    def compiled(x):
        base = x * 2
        return [base, base[:1]]  # a view of another output: separate clones would break the aliasing

    run = _runner(compiled, torch.zeros(2), skipped=skipped)
    for _ in range(3):
        a, b = run(torch.ones(2))
        assert b.data_ptr() == a.data_ptr()
    assert skipped == ["two outputs share memory"]


def test_runner_runs_uncaptured_when_capture_fails(fake_cuda_graphs):
    skipped = []

    def compiled(x):
        if _FakeGraph.capturing is not None:
            raise RuntimeError("operation not permitted when stream is capturing")
        return [x + 1]

    run = _runner(compiled, torch.zeros(2), skipped=skipped)
    for _ in range(3):
        torch.testing.assert_close(run(torch.ones(2))[0], torch.full((2,), 2.0))
    assert len(skipped) == 1 and skipped[0].startswith("capture failed: RuntimeError: operation not permitted")


def test_runner_copies_an_expanded_input_through_its_one_stored_element(fake_cuda_graphs):
    calls = []
    w = torch.nn.Parameter(torch.randn(8, 8), requires_grad=False)
    example = torch.randn(1, 8).expand(3, 8)
    run = _runner(_linear_step(calls), w, example)
    for _ in range(3):
        x = torch.randn(1, 8).expand(3, 8)
        torch.testing.assert_close(run(w, x)[0], x @ w)
    assert calls == ["run", "capture"]


# --- cuda_graph_step: a whole step function, on CPU through the same stand-in ---

@pytest.fixture
def fake_cuda_step(fake_cuda_graphs, monkeypatch):
    monkeypatch.setattr(static_cudagraphs, "_cuda_available", lambda: True)
    monkeypatch.setattr(static_cudagraphs, "_capturable", lambda t: True)
    monkeypatch.setattr(static_cudagraphs, "_capturing", lambda: False)  # (CPU torch cannot ask)


class _Cache:
    """A stand-in for a static KV cache: a tensor updated in place, plus optional Python state."""

    def __init__(self):
        self.keys = torch.zeros(4)
        self.steps = 0


def _cache_step(cache: _Cache, calls: list, count_in_python=False):
    record = calls.append  # (a function: not Python state the check follows; ``calls`` itself would be)

    def step(x, *, scale=1.0):
        record("run" if _FakeGraph.capturing is None else "capture")
        if _FakeGraph.capturing is None:
            cache.keys.add_(x)
        else:
            _FakeGraph.capturing.replays.append(lambda: cache.keys.add_(x))
        if count_in_python:
            cache.steps += 1
        out = {"logits": cache.keys * scale, "cache": cache}
        if _FakeGraph.capturing is not None:
            logits = out["logits"]
            _FakeGraph.capturing.replays.append(lambda: torch.mul(cache.keys, scale, out=logits))
        return out

    return step


def test_graph_step_replays_a_step_function_with_structured_outputs(fake_cuda_step):
    calls, cache = [], _Cache()
    step = fusion_passes.cuda_graph_step(_cache_step(cache, calls))
    for i in range(1, 6):
        out = step(torch.ones(4), scale=2.0)
        assert out["cache"] is cache and out["logits"].tolist() == [2.0 * i] * 4
    assert calls == ["run", "run", "capture"] and step.skip_reason is None
    out = step(torch.ones(4), scale=3.0)  # another value of a Python argument: another graph
    assert out["logits"].tolist() == [18.0] * 4 and len(step.runners) == 2


def test_graph_step_refuses_a_step_that_changes_python_state(fake_cuda_step):
    calls, cache = [], _Cache()
    step = fusion_passes.cuda_graph_step(_cache_step(cache, calls, count_in_python=True))
    with pytest.warns(UserWarning, match=r"runs uncaptured: a call changes Python state \(cache\.steps: \(1,\) -> \(2,\)"):
        for i in range(1, 5):
            assert step(torch.ones(4))["logits"].tolist() == [float(i)] * 4
    assert cache.steps == 4 and "capture" not in calls


def test_graph_step_refuses_a_tensor_that_grows(fake_cuda_step):
    state = {"keys": [torch.zeros(2)]}

    def step(x):
        state["keys"].append(x.clone())  # a DynamicCache-like append
        return torch.stack(state["keys"]).sum(0)

    graphed = fusion_passes.cuda_graph_step(step)
    with pytest.warns(UserWarning, match="changes Python state"):
        for i in range(1, 4):
            assert graphed(torch.ones(2)).tolist() == [float(i)] * 2


def test_graph_step_takes_nested_arguments_and_gives_up_after_max_signatures(fake_cuda_step):
    calls = []
    record = calls.append

    def step(xs, *, bias):
        record("run" if _FakeGraph.capturing is None else "capture")
        out = xs[0] + xs[1] + bias
        if _FakeGraph.capturing is not None:
            _FakeGraph.capturing.replays.append(lambda: torch.add(xs[0] + xs[1], bias, out=out))
        return out

    graphed = fusion_passes.cuda_graph_step(step)
    for _ in range(3):  # a list argument goes through torch's pytree: its tensors are copied in per call
        xs = [torch.randn(3), torch.randn(3)]
        torch.testing.assert_close(graphed(xs, bias=1.0), xs[0] + xs[1] + 1.0)
    assert calls == ["run", "run", "capture"]
    for n in range(2, MAX_GRAPHS + 2):  # each length is a new signature; past MAX_GRAPHS: uncaptured, still right
        xs = [torch.ones(n), torch.ones(n)]
        if n == MAX_GRAPHS + 1:
            with pytest.warns(UserWarning, match=f"{MAX_GRAPHS} argument signatures already captured"):
                out = graphed(xs, bias=0.0)
        else:
            out = graphed(xs, bias=0.0)
        torch.testing.assert_close(out, torch.full((n,), 2.0))
    assert graphed.skip_reason is not None and graphed.runners == {}
    torch.testing.assert_close(graphed([torch.ones(2), torch.ones(2)], bias=0.0), torch.full((2,), 2.0))


def test_graph_step_captures_again_after_packed_linear_moves_the_weights(fake_cuda_step):
    """A graph captured before another compiled model of the same module packs its weights reads their old, freed
    addresses (on the H200: an illegal memory access, or silently stale weights): the step must capture again."""
    from fusion_passes.kernels import packed_linear

    calls = []
    record = calls.append
    w_q, w_k = torch.randn(4, 8), torch.randn(4, 8)

    def step(x):
        record("run" if _FakeGraph.capturing is None else "capture")
        out = torch.cat([x @ w_q.t(), x @ w_k.t()], dim=1)
        if _FakeGraph.capturing is not None:
            _FakeGraph.capturing.replays.append(lambda: torch.cat([x @ w_q.t(), x @ w_k.t()], dim=1, out=out))
        return out

    graphed = fusion_passes.cuda_graph_step(step)
    x = torch.randn(2, 8)
    for _ in range(4):
        torch.testing.assert_close(graphed(x), x @ torch.cat([w_q, w_k]).t())
    assert calls == ["run", "run", "capture"]
    packed_linear.packed_linear(x, [w_q, w_k])  # "another compiled model": packs, moving both weights
    assert w_q.untyped_storage().data_ptr() == w_k.untyped_storage().data_ptr()
    for _ in range(4):
        torch.testing.assert_close(graphed(x), x @ torch.cat([w_q, w_k]).t())
    assert calls == ["run", "run", "capture"] * 2 and graphed.skip_reason is None and len(graphed.runners) == 1
    packed_linear.packed_linear(x, [w_q, w_k])  # already packed: nothing moves, the graph stays
    graphed(x)
    assert calls == ["run", "run", "capture"] * 2


def test_graph_step_leaves_cpu_tensors_uncaptured(fake_cuda_graphs, monkeypatch):
    monkeypatch.setattr(static_cudagraphs, "_cuda_available", lambda: True)
    monkeypatch.setattr(static_cudagraphs, "_capturing", lambda: False)  # (CPU torch cannot ask)
    graphed = fusion_passes.cuda_graph_step(lambda x: x * 2)
    with pytest.warns(UserWarning, match="a tensor argument is not on a CUDA device"):
        torch.testing.assert_close(graphed(torch.ones(2)), torch.full((2,), 2.0))
    torch.testing.assert_close(graphed(torch.ones(2)), torch.full((2,), 2.0))


def test_graph_step_compiles_for_cuda_graphs_while_it_may_capture(fake_cuda_graphs, monkeypatch):
    """What Dynamo compiles during a graphed step's calls is compiled for CUDA graphs (``kernels.pdl``: there the
    decode kernels launch with PDL); not once the step runs uncaptured, nor outside it."""
    from fusion_passes.kernels import pdl

    monkeypatch.setattr(static_cudagraphs, "_cuda_available", lambda: True)
    monkeypatch.setattr(static_cudagraphs, "_capturing", lambda: False)  # (CPU torch cannot ask)
    seen = []
    step = fusion_passes.cuda_graph_step(lambda x: seen.append(pdl.compiling_for_graphs()) or x * 2)
    monkeypatch.setattr(static_cudagraphs, "_capturable", lambda t: True)
    step(torch.ones(2))
    assert seen == [True] and not pdl.compiling_for_graphs()
    monkeypatch.setattr(static_cudagraphs, "_capturable", lambda t: False)  # a new signature, on the CPU
    with pytest.warns(UserWarning, match="a tensor argument is not on a CUDA device"):
        step(torch.ones(3))
    step(torch.ones(2))  # uncaptured from now on
    assert seen == [True, False, False]


def test_graph_step_runs_uncaptured_when_autograd_records_the_step(fake_cuda_step):
    """A step called with autograd on (a training step, or a decode loop without torch.no_grad()) returns outputs
    that require grad. A replay returns them cut off from that call's autograd history (on the H200 the backward
    of the first replayed call failed: 'modified by an inplace operation', then 'backward through the graph a
    second time'), so the step runs uncaptured, and every call's gradients are eager's."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(8, 8))
    calls = []
    record = calls.append  # (a function: not Python state the check follows; ``calls`` itself would be)

    def step(x):
        record("run" if _FakeGraph.capturing is None else "capture")
        out = torch.tanh(x @ w)
        if _FakeGraph.capturing is not None:
            def replay():
                with torch.no_grad():
                    torch.tanh(x @ w, out=out)
            _FakeGraph.capturing.replays.append(replay)
        return out

    graphed = fusion_passes.cuda_graph_step(step)
    with pytest.warns(UserWarning, match="requires grad"):
        for _ in range(4):
            x = torch.randn(2, 8, requires_grad=True)
            got = torch.autograd.grad(graphed(x).square().sum(), (x, w))
            ref = torch.autograd.grad(torch.tanh(x @ w).square().sum(), (x, w))
            for a, b in zip(got, ref):
                torch.testing.assert_close(a, b)
    assert "capture" not in calls and "requires grad" in graphed.skip_reason


# --- through the backend ---

def test_backend_rejects_an_unknown_cudagraphs_value():
    with pytest.raises(ValueError, match=r"unknown cudagraphs='fast'; choose one of None, 'trees', 'static'"):
        fusion_passes.backend(cudagraphs="fast")


def test_backend_on_cpu_records_why_there_are_no_cuda_graphs():
    torch._dynamo.reset()
    model = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8)
    with fusion_passes.capture() as recs, torch.no_grad():
        out = torch.compile(model, backend=fusion_passes.backend(cudagraphs="static"))(x)
    torch.testing.assert_close(out, model(x))
    assert [r.cudagraphs for r in recs] == ["none (inputs on ['cpu'], not on one CUDA device)"]


def test_backend_takes_torch_compiles_mode_keyword():
    """torch.compile hands a callable backend its ``mode=`` (HF's CompileConfig passes "reduce-overhead")."""
    torch._dynamo.reset()
    model = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8)
    be = fusion_passes.backend(cudagraphs="static")
    with fusion_passes.capture() as recs, torch.no_grad():
        out = torch.compile(model, backend=be, mode="reduce-overhead")(x)
    torch.testing.assert_close(out, model(x))
    assert len(recs) == 1 and be.mode is None  # the backend object itself is left as configured


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _decode_steps(model, compiled, steps):
    """Greedy decoding of ``steps`` tokens after an 8-token prompt over an HF StaticCache, eager and compiled (each
    with its own cache, the compiled one fed eager's tokens): the logits of every step, all kept."""
    from transformers import StaticCache

    from fusion_passes.zoo import hf_cache_kwargs

    prompt = torch.randint(0, model.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0)).cuda()
    results, tokens = [], []
    for m in (model, compiled):
        cache = StaticCache(config=model.config, max_cache_len=8 + steps)
        kw = hf_cache_kwargs(model, cache)
        logits = model(prompt, **kw, cache_position=torch.arange(8, device="cuda"), use_cache=True).logits
        tok, got = logits[:, -1:].argmax(-1), []
        for i in range(steps):
            pos = torch.tensor([8 + i], device="cuda")
            out = m(tok, **kw, cache_position=pos, position_ids=pos[None], use_cache=True).logits
            got.append(out)
            if m is model:
                tokens.append(out[:, -1:].argmax(-1))
            tok = tokens[i]
        results.append(got)
    return results


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gpu_hf_decode_steps_under_static_graphs_match_eager(attn):
    from tests.test_hf_models import _causal_lm

    torch._dynamo.reset()
    model = _causal_lm("llama", attn=attn).cuda()
    compiled = torch.compile(model, backend=fusion_passes.backend(cudagraphs="static"))
    with torch.no_grad(), fusion_passes.capture() as recs, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected, got = _decode_steps(model, compiled, 12)
    assert not [w for w in caught if "without CUDA graphs" in str(w.message)]
    assert [r.cudagraphs for r in recs] == ["static"]
    assert {"decode_gemv", "attention_sdpa"} <= {m.pattern for r in recs for m in r.matches}
    for e, g in zip(expected, got):  # every step's logits, kept: no later replay overwrote them
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@gpu
def test_gpu_static_graph_replays_with_new_inputs_and_new_weights():
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda()
    compiled = torch.compile(model, backend=fusion_passes.backend(cudagraphs="static"))
    xs = [torch.randn(4, 64, device="cuda") for _ in range(5)]
    with torch.no_grad(), fusion_passes.capture() as recs:
        outs = [compiled(x) for x in xs]
        for x, out in zip(xs, outs):
            torch.testing.assert_close(out, model(x))
        model[0].weight.mul_(-1)  # in place: the replay reads it
        torch.testing.assert_close(compiled(xs[0]), model(xs[0]))
        model[2].weight = torch.nn.Parameter(torch.randn(8, 64, device="cuda"))  # a new address: captured again
        torch.testing.assert_close(compiled(xs[1]), model(xs[1]))
    assert [r.cudagraphs for r in recs if r.cudagraphs] == ["static"] * len({r.graph_id for r in recs})


@pytest.mark.gpu
@gpu
def test_gpu_static_graph_mutating_a_plain_input_runs_uncaptured_and_warns():
    torch._dynamo.reset()

    def step(x, state):
        state.add_(x)
        return state * 2

    compiled = torch.compile(step, backend=fusion_passes.backend(cudagraphs="static"))
    state = torch.zeros(16, device="cuda")
    with pytest.warns(UserWarning, match="runs without CUDA graphs: the graph mutates input"), \
            fusion_passes.capture() as recs:
        for i in range(1, 4):
            out = compiled(torch.ones(16, device="cuda"), state)
            torch.testing.assert_close(out, torch.full((16,), 2.0 * i, device="cuda"))
    assert recs[0].cudagraphs.startswith("none (the graph mutates input")


@pytest.mark.gpu
@gpu
def test_gpu_dynamic_shapes_and_training_get_inductors_cudagraph_trees():
    torch._dynamo.reset()
    model = torch.nn.Linear(32, 32).cuda()
    be = fusion_passes.backend(cudagraphs="static")
    with fusion_passes.capture() as recs:
        with torch.no_grad():
            dyn = torch.compile(model, backend=be, dynamic=True)
            for n in (3, 5):
                x = torch.randn(n, 32, device="cuda")
                torch.testing.assert_close(dyn(x), model(x))
        torch._dynamo.reset()
        train = torch.compile(model, backend=be)
        x = torch.randn(4, 32, device="cuda")
        train(x).sum().backward()
    assert all(r.cudagraphs.startswith("trees (") for r in recs), [r.cudagraphs for r in recs]
    assert any("dynamic=False" in r.cudagraphs for r in recs) and any("gradients" in r.cudagraphs for r in recs)
    assert model.weight.grad is not None


@pytest.mark.gpu
@gpu
def test_gpu_hf_generate_with_a_static_graphs_backend_object():
    """HF's generate with ``CompileConfig(backend=fusion_passes.backend(cudagraphs="static"))``: the config's
    mode="reduce-overhead" reaches the backend as a keyword; the tokens are eager's, in every one of more calls than
    MAX_GRAPHS (each call allocates a new StaticCache: its graphs keep replaying, not given up)."""
    import transformers

    from tests.test_hf_models import _causal_lm, _ids

    model = _causal_lm("llama", attn="sdpa").cuda()
    prompt = _ids(batch=2, seq=8).cuda()
    kw = dict(max_new_tokens=12, do_sample=False, cache_implementation="static", pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(prompt, **kw, disable_compile=True)
        torch._dynamo.reset()
        config = transformers.CompileConfig(backend=fusion_passes.backend(cudagraphs="static"), fullgraph=True)
        with fusion_passes.capture() as recs:
            for _ in range(MAX_GRAPHS + 2):
                assert torch.equal(model.generate(prompt, **kw, compile_config=config), expected)
    assert "static" in [r.cudagraphs for r in recs]
    assert not [r.cudagraphs for r in recs if r.cudagraphs.startswith("none")], [r.cudagraphs for r in recs]


def test_report_says_which_cuda_graphs_each_graph_got():
    model = torch.nn.Linear(8, 8)
    with torch.no_grad():
        rep = fusion_passes.report(model, torch.randn(2, 8), cudagraphs="static")
    assert [g["cudagraphs"] for g in rep.to_dict()["graphs"]] == ["none (inputs on ['cpu'], not on one CUDA device)"]
    plain = fusion_passes.report(model, torch.randn(2, 8))
    assert [g["cudagraphs"] for g in plain.to_dict()["graphs"]] == [""]


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gpu_graphed_hf_decode_step_matches_eager(attn):
    """The whole HF decode step (Dynamo, HF's Python, our kernels) as one CUDA graph: eager's logits every step,
    and HF's StaticCache changes no Python state across a step, so it is captured."""
    from transformers import StaticCache

    from fusion_passes.zoo import hf_cache_kwargs
    from tests.test_hf_models import _causal_lm

    torch._dynamo.reset()
    model = _causal_lm("llama", attn=attn).cuda()
    compiled = torch.compile(model, backend=fusion_passes.backend())
    prompt = torch.randint(0, model.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0)).cuda()
    results = []
    with torch.no_grad():
        for graphed in (False, True):
            cache = StaticCache(config=model.config, max_cache_len=24)
            kw = hf_cache_kwargs(model, cache)
            model(prompt, **kw, cache_position=torch.arange(8, device="cuda"), use_cache=True)

            def step(ids, pos):
                return compiled(input_ids=ids, **kw, cache_position=pos, position_ids=pos[None], use_cache=True).logits

            run = fusion_passes.cuda_graph_step(step) if graphed else step
            tok, got = prompt[:, -1:].contiguous(), []  # the layout later tokens have: one signature
            for i in range(12):
                got.append(run(tok, torch.tensor([8 + i], device="cuda")))
                tok = got[-1][:, -1:].argmax(-1) if not graphed else results[0][i][:, -1:].argmax(-1)
            results.append(got)
    assert run.skip_reason is None and len(run.runners) == 1
    assert run.runners[next(iter(run.runners))][0].recordings  # captured and replayed
    for e, g in zip(*results):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gpu_graphed_hf_decode_step_compiled_inside_launches_with_pdl(attn, monkeypatch):
    """#8: compiled inside ``cuda_graph_step``'s calls, the step is compiled for CUDA graphs: with
    ``FUSION_PASSES_PDL=auto``, on sm_90+ every decode GEMV after the first and each attention launch with PDL
    (``kernels.pdl``), and the replayed steps still give eager's logits (each step reads the cache the ones before
    wrote)."""
    from transformers import StaticCache

    from fusion_passes.kernels import pdl

    monkeypatch.setenv(pdl.POLICY_ENV, "auto")
    from fusion_passes.zoo import hf_cache_kwargs
    from tests.test_hf_models import _causal_lm

    torch._dynamo.reset()
    model = _causal_lm("llama", attn=attn).cuda()
    prompt = torch.randint(0, model.config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0)).cuda()
    compiled = torch.compile(model, backend=fusion_passes.backend())
    results = []
    with torch.no_grad(), fusion_passes.capture() as recs:
        for m in (model, compiled):
            cache = StaticCache(config=model.config, max_cache_len=24)
            kw = hf_cache_kwargs(model, cache)
            model(prompt, **kw, cache_position=torch.arange(8, device="cuda"), use_cache=True)

            def step(ids, pos, m=m, kw=kw):
                return m(input_ids=ids, **kw, cache_position=pos, position_ids=pos[None], use_cache=True).logits

            run = fusion_passes.cuda_graph_step(step) if m is compiled else step
            tok = prompt[:, -1:].contiguous()
            results.append([run(tok, torch.tensor([8 + i], device="cuda")).clone() for i in range(8)])
    assert run.skip_reason is None and run.runners[next(iter(run.runners))][0].recordings
    for e, g in zip(*results):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    gemvs = [mt for r in recs for mt in r.matches if mt.pattern == "decode_gemv"]
    code = "\n".join(r.stages[-1].code_after for r in recs if r.stages)
    if pdl.supported(torch.device("cuda")):
        assert [mt.detail.get("launch") for mt in gemvs].count("pdl") == len(gemvs) - 1, [mt.detail for mt in gemvs]
        assert code.count("pdl = True") == model.config.num_hidden_layers
    else:
        assert not [mt for mt in gemvs if mt.detail.get("launch")] and "pdl = True" not in code


@pytest.mark.gpu
@gpu
def test_gpu_graphed_step_follows_weights_another_compile_packs():
    """Model A (no qkv_packing) is captured; then model B, compiled from the same module with qkv_packing, packs the
    weights on its first call and frees their old memory, which is then reused (NaN-filled here). A's next replay
    must not read it: the graph is captured again and A still matches eager (bench_e2e's paired rounds hit an
    illegal memory access on the H200 before this, session 31)."""
    from fusion_passes import zoo
    from fusion_passes.kernels import packed_linear

    model, args = zoo.build("llama", batch=4, seq=1, dtype=torch.bfloat16, device="cuda")
    torch._dynamo.reset()
    model_a = torch.compile(model, backend=fusion_passes.backend(exclude=["qkv_packing"]))
    model_b = torch.compile(model, backend=fusion_passes.backend(patterns=["qkv_packing"]))
    step_a = fusion_passes.cuda_graph_step(lambda *inputs: model_a(*inputs))
    with torch.no_grad():
        ref = model(*args)
        for _ in range(4):  # run, check, capture, replay
            torch.testing.assert_close(step_a(*args), ref, atol=2e-2, rtol=2e-2)
        (runner, _), = step_a.runners.values()
        assert runner.recordings
        moves = packed_linear.weight_moves()
        torch.testing.assert_close(model_b(*args), ref, atol=2e-2, rtol=2e-2)
        assert packed_linear.weight_moves() > moves
        junk = [torch.full_like(p, float("nan")) for p in model.parameters() for _ in range(2)]
        for _ in range(4):
            torch.testing.assert_close(step_a(*args), ref, atol=2e-2, rtol=2e-2)
        (again, _), = step_a.runners.values()
        assert step_a.skip_reason is None and again is not runner and again.recordings  # captured anew
    del junk
