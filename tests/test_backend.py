"""The backend: entry point, options, scoped config, chaining, fallback, errors, records, FX-cache keys."""

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from torch._inductor import config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass

import fusion_passes
from fusion_passes.pass_manager import FusionGraphPass
from fusion_passes.patterns import register_pattern, unregister_pattern
from tests.conftest import compile_with_records
from tests.toy_patterns import ToyBroken, ToyMul2ToAdd, ToyUncompilable


@pytest.fixture
def toys():
    names = [register_pattern(ToyMul2ToAdd), register_pattern(ToyBroken), register_pattern(ToyUncompilable)]
    yield names
    for n in names:
        unregister_pattern(n)


def f(x):
    return torch.sin(x * 2) * 3


def _run_py(code: str, env_extra=None) -> str:
    env = {**os.environ, **(env_extra or {})}
    env.pop("FUSION_PASSES_RAISE", None)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         cwd=os.path.dirname(os.path.dirname(__file__)), timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_backend_string_works_in_fresh_process_without_import():
    out = _run_py("""
        import sys, torch
        assert "fusion_passes" not in sys.modules
        f = torch.compile(lambda x: torch.sin(x) * 2, backend="fusion_passes")
        x = torch.randn(4)
        assert torch.allclose(f(x), torch.sin(x) * 2)
        rec = sys.modules["fusion_passes"].last_compile()
        print("RECORD", rec.graph_id, ",".join(rec.patterns))
    """)
    assert "RECORD 1" in out


# a checkout on sys.path without ``pip install``: no torch_dynamo_backends entry point for fusion_passes
_HIDE_ENTRY_POINT = """
        import importlib.metadata as md
        _entry_points = md.entry_points
        def entry_points(**kw):
            eps = _entry_points(**kw)
            return md.EntryPoints(e for e in eps if e.name != "fusion_passes") if kw.get("group") else eps
        md.entry_points = entry_points
"""


@pytest.mark.parametrize("installed", [True, False])
def test_backend_string_works_after_import(installed):
    """Imported first, the package makes ``backend="fusion_passes"`` work whether pip installed it (the entry
    point) or not (registered on import); never registered twice, which torch refuses with an error."""
    out = _run_py(("" if installed else _HIDE_ENTRY_POINT) + """
        import torch
        import fusion_passes
        from fusion_passes.backend import fusion_passes_backend, register_by_name
        assert register_by_name() is False  # installed: torch finds the entry point; else done on import
        f = torch.compile(lambda x: torch.sin(x) * 2, backend="fusion_passes")
        x = torch.randn(4)
        assert torch.allclose(f(x), torch.sin(x) * 2)
        assert torch._dynamo.lookup_backend("fusion_passes") is fusion_passes_backend
        print("RECORD", fusion_passes.last_compile().graph_id)
    """)
    assert "RECORD 1" in out


def test_backend_string_without_install_or_import_names_the_fix():
    """Neither installed nor imported, torch cannot know the name: its error says the backend is invalid."""
    code = _HIDE_ENTRY_POINT + """
        import torch
        try:
            torch.compile(lambda x: x + 1, backend="fusion_passes")
        except Exception as e:
            print(type(e).__name__)
    """
    assert "InvalidBackend" in _run_py(code)


def test_toy_pattern_rewrites_and_records(toys):
    x = torch.randn(8)
    out, recs = compile_with_records(f, x, patterns=["toy_mul2_to_add"])
    torch.testing.assert_close(out, f(x))
    (rec,) = recs
    (m,) = rec.matches
    assert m.pattern == "toy_mul2_to_add" and m.graph_id == rec.graph_id
    assert "test_backend.py" in m.source and "torch.sin(x * 2)" in m.source
    assert m.replaced == ["mul=aten.mul"] and m.inserted[0].endswith("=aten.add")
    (stage,) = rec.stages
    assert stage.hook == "post_grad"
    assert stage.ops_before["aten.mul"] == 2 and "aten.add" not in stage.ops_before
    assert stage.ops_after["aten.mul"] == 1 and stage.ops_after["aten.add"] == 1
    assert "add" in stage.code_after and stage.code_before != stage.code_after
    # the other mul (by 3) is a near miss with its reason
    assert [nm.reason for nm in rec.near_misses] == ["multiplier is not the constant 2"]
    assert fusion_passes.last_compile() is rec and rec in fusion_passes.history()
    # the family's own time, a part of the graph's compile time
    assert list(rec.pass_s) == ["toy_mul2_to_add"] and 0 < rec.pass_s["toy_mul2_to_add"] < rec.compile_s


def test_global_config_untouched_and_options_forwarded(toys):
    seen = {}

    class Spy:
        NAME, HOOK, DESCRIPTION = "toy_spy", "post_grad", "records config seen during the pass"

        @staticmethod
        def apply(graph, ctx):
            seen["max_autotune"] = inductor_config.max_autotune
            seen["pre_pass"] = inductor_config.post_grad_custom_pre_pass

    register_pattern(Spy)
    try:
        before = inductor_config.get_config_copy()
        compile_with_records(f, torch.randn(4), patterns=["toy_spy"], options={"max_autotune": True})
        assert seen["max_autotune"] is True
        assert isinstance(seen["pre_pass"], FusionGraphPass)
        after = inductor_config.get_config_copy()
        assert after["post_grad_custom_pre_pass"] is None and after["max_autotune"] == before["max_autotune"]
    finally:
        unregister_pattern("toy_spy")


def test_mode_is_forwarded_as_inductor_options():
    be = fusion_passes.backend(patterns=[], mode="reduce-overhead")
    assert be.config_patches(grad_enabled=False)["triton.cudagraphs"] is True
    assert "triton.cudagraphs" not in fusion_passes.backend(patterns=[]).config_patches(False)


@pytest.mark.parametrize("kwargs, static, graphed", [
    ({}, False, False), (dict(mode="reduce-overhead"), False, True), (dict(cudagraphs="trees"), False, True),
    (dict(options={"triton.cudagraphs": True}), False, True), (dict(cudagraphs="static"), True, True),
    (dict(cudagraphs="static"), False, False)])
def test_passes_know_whether_the_compile_is_for_cuda_graphs(kwargs, static, graphed):
    """``ctx.graphed`` (``kernels.pdl``'s default policy launches the decode kernels with PDL only then): Inductor's
    CUDA graphs, our static ones (``static``: the graph was not refused), or a compile inside ``cuda_graph_step``'s
    calls. It enters the FX-graph-cache key: the passes' output differs."""
    from fusion_passes.kernels import pdl
    from fusion_passes.pass_manager import FusionGraphPass

    def passes(be, static):
        found = [p for p in be.config_patches(False, static=static).values() if isinstance(p, FusionGraphPass)]
        assert {p.hook for p in found} == {"joint", "post_grad"}
        return found

    be = fusion_passes.backend(**kwargs)
    assert all(p.graphed == graphed for p in passes(be, static))
    with pdl.graphed_compile():
        inside = passes(fusion_passes.backend(), False)
    assert all(p.graphed for p in inside)
    plain = passes(fusion_passes.backend(), False)
    assert [p.uuid() for p in inside] != [p.uuid() for p in plain]


def test_backend_string_takes_torch_compiles_mode_and_options(monkeypatch):
    """``torch.compile(backend="fusion_passes", mode=..., options=...)`` (and HF generate's compile_config,
    which passes mode="reduce-overhead") reach Inductor as with ``backend="inductor"``."""
    from fusion_passes.backend import FusionBackend

    seen = []
    real = FusionBackend.config_patches

    def spy(self, grad_enabled, trees=False, static=False):
        patches = real(self, grad_enabled, trees, static)
        seen.append((patches.get("triton.cudagraphs", False), patches.get("max_autotune", False)))
        return patches

    monkeypatch.setattr(FusionBackend, "config_patches", spy)
    x = torch.randn(8)
    for kwargs, want in [(dict(mode="reduce-overhead"), (True, False)),
                         (dict(options={"max_autotune": True}), (False, True))]:
        torch._dynamo.reset()
        g = torch.compile(lambda t: torch.sin(t) * 2, backend="fusion_passes", **kwargs)
        torch.testing.assert_close(g(x), torch.sin(x) * 2)
        assert seen[-1] == want, kwargs
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown mode 'fastest'; choose one of"):
        torch.compile(lambda t: t + 1, backend="fusion_passes", mode="fastest")(x)
    torch._dynamo.reset()


class CountingPass(CustomGraphPass):
    def __init__(self):
        self.calls = 0

    def __call__(self, graph):
        self.calls += 1

    def uuid(self):
        return "counting-pass-v1"


def test_users_pass_is_chained_not_clobbered(toys):
    user = CountingPass()
    with inductor_config.patch(post_grad_custom_pre_pass=user):
        x = torch.randn(8)
        out, (rec,) = compile_with_records(f, x, patterns=["toy_mul2_to_add"])
        assert inductor_config.post_grad_custom_pre_pass is user
    torch.testing.assert_close(out, f(x))
    assert user.calls == 1 and len(rec.matches) == 1


def test_users_list_of_passes_is_chained(toys):
    a, b = CountingPass(), CountingPass()
    with inductor_config.patch(post_grad_custom_pre_pass=[a, b]):
        compile_with_records(f, torch.randn(8), patterns=["toy_mul2_to_add"])
    assert (a.calls, b.calls) == (1, 1)


def test_raising_family_falls_back_warns_and_records(toys, monkeypatch):
    from fusion_passes import pass_manager

    monkeypatch.delenv("FUSION_PASSES_RAISE", raising=False)
    monkeypatch.setattr(pass_manager, "_warned", set())  # it warns once per process: another test may have seen it
    x = torch.randn(8)
    with pytest.warns(UserWarning, match="toy_broken.*failed and was skipped"):
        out, (rec,) = compile_with_records(f, x, patterns=["toy_broken", "toy_mul2_to_add"])
    torch.testing.assert_close(out, f(x))  # the partial mul->sub rewrite was rolled back
    (err,) = rec.errors
    assert err.pattern == "toy_broken" and "toy failure" in err.error
    assert [m.pattern for m in rec.matches] == ["toy_mul2_to_add"]  # the broken family's match was dropped


def test_inductor_failing_on_a_rewritten_graph_compiles_it_without_our_passes(toys, monkeypatch):
    """A rewrite Inductor then cannot compile (on the GPU: one of our kernels failing to build) must not break the
    user's compile: the graph is compiled as stock Inductor would, with a warning, and the record says so."""
    monkeypatch.delenv("FUSION_PASSES_RAISE", raising=False)
    x = torch.randn(8)
    with pytest.warns(UserWarning, match="Inductor failed to compile graph .* after toy_uncompilable rewrote it"):
        out, (rec,) = compile_with_records(f, x, patterns=["toy_uncompilable"])
    torch.testing.assert_close(out, f(x))
    (err,) = rec.errors
    assert err.pattern == "toy_uncompilable" and "compiled it without fusion passes" in err.error
    assert rec.matches == [] and rec.stages == [] and rec.kernels is not None


def test_inductor_failing_after_we_only_moved_size_queries_compiles_without_our_passes(toys, monkeypatch):
    """Moving size queries (``graph_utils.read_sizes_early``) rewrites the graph too, with no family's match to
    show for it: if Inductor then fails, the graph is still compiled as stock Inductor would, with a warning."""
    from fusion_passes import graph_utils
    from tests.toy_patterns import _times_two

    def moves_and_breaks(graph):  # stands in for a move Inductor cannot compile
        mul = next(n for n in graph.nodes if n.target is torch.ops.aten.mul.Tensor)
        with graph.inserting_before(mul):
            bad = graph.call_function(_times_two, (mul.args[0],))
        bad.meta.update(mul.meta)
        mul.replace_all_uses_with(bad)
        graph.erase_node(mul)
        return 1

    monkeypatch.delenv("FUSION_PASSES_RAISE", raising=False)
    monkeypatch.setattr(graph_utils, "read_sizes_early", moves_and_breaks)
    x = torch.randn(8)
    with pytest.warns(UserWarning, match="after we moved 1 of its size queries"):
        out, (rec,) = compile_with_records(f, x, patterns=["qkv_packing"])
    torch.testing.assert_close(out, f(x))
    (err,) = rec.errors
    assert err.pattern == "(size queries)" and "compiled it without fusion passes" in err.error
    assert rec.sizes_moved == 0 and rec.stages == []


def test_inductor_failure_raises_under_fusion_passes_raise(toys):
    with pytest.raises(Exception, match="_times_two"):
        compile_with_records(f, torch.randn(8), patterns=["toy_uncompilable"])


@pytest.mark.parametrize("kwargs, needle", [
    (dict(patterns=["attention_sdpaa"]), "unknown pattern name(s) in patterns=: 'attention_sdpaa'"),
    (dict(exclude=["nope"]), "unknown pattern name(s) in exclude=: 'nope'"),
    (dict(mode="fastest"), "unknown mode 'fastest'; choose one of"),
    (dict(options={"not_an_option": 1}), "unknown Inductor option(s) ['not_an_option']"),
])
def test_bad_input_names_the_fix(kwargs, needle):
    with pytest.raises(ValueError) as e:
        fusion_passes.backend(**kwargs)
    assert needle in str(e.value)
    if "pattern" in needle:
        assert "Valid names:" in str(e.value)



@pytest.mark.parametrize("kwargs, error, needle", [
    (dict(patterns=3), TypeError, "patterns=3: give family names as a list of strings, e.g. patterns=['qkv_packing']"),
    (dict(exclude=b"qkv_packing"), TypeError, "exclude=b'qkv_packing': give family names as a list of strings"),
    (dict(patterns={"qkv_packing": False}), TypeError, "give family names as a list of strings"),
    (dict(patterns=["qkv_packing", None]), TypeError, "patterns= holds None; family names are strings"),
    (dict(patterns=["qkv_packing"], exclude="qkv_packing"), ValueError,
     "'qkv_packing' in both patterns= and exclude=; name each family in one"),
    (dict(options=["max_autotune"]), TypeError, "options=['max_autotune']: give a dict of Inductor option names"),
    (dict(dynamic="yes"), TypeError, "dynamic='yes': use None (torch.compile decides), True or False"),
    (dict(cudagraphs="static", options={"triton.cudagraphs": True}), ValueError,
     "cudagraphs='static' and options={'triton.cudagraphs': True} both choose CUDA graphs; give only cudagraphs="),
])
def test_wrong_types_and_conflicts_name_the_fix(kwargs, error, needle):
    """These gave "'int' object is not iterable", a list of bytes' numbers as unknown names, a dict's keys as
    enabled families, "dictionary update sequence element #0", or were accepted: an empty pattern set when a name
    was both enabled and excluded, dynamic="yes", an options= CUDA-graph choice that cudagraphs= overrode."""
    with pytest.raises(error) as e:
        fusion_passes.backend(**kwargs)
    assert needle in str(e.value)


def test_torch_compiles_options_of_the_wrong_type_name_the_fix():
    be = fusion_passes.backend(patterns=[])
    with pytest.raises(TypeError, match="give a dict of Inductor option names to values"):
        be(torch.fx.symbolic_trace(torch.nn.ReLU()), [torch.randn(2)], options=["max_autotune"])

def test_unknown_or_removed_setting_warns_naming_the_fix(monkeypatch):
    """A FUSION_PASSES_* variable that nothing reads (a typo, a removed setting) would do nothing silently: building
    the backend warns once per name, listing the settings or saying what replaced a removed one. Known settings,
    even with values the backend does not use, do not warn."""
    from fusion_passes import patterns

    monkeypatch.setattr(patterns, "_warned_settings", set())
    monkeypatch.setenv("FUSION_PASSES_GEMV_TABEL", "off")
    monkeypatch.setenv("FUSION_PASSES_SDPA_BACKEND", "no-cudnn")
    monkeypatch.setenv("FUSION_PASSES_GEMV_TABLE", "tiled")
    monkeypatch.setenv("FUSION_PASSES_RAISE", "0")
    with pytest.warns(UserWarning) as caught:
        fusion_passes.backend()
    messages = sorted(str(w.message) for w in caught if "is ignored" in str(w.message))
    assert len(messages) == 2, messages
    assert messages[0].startswith("fusion_passes: FUSION_PASSES_GEMV_TABEL is ignored: no such setting; the settings "
                                  "are FUSION_PASSES_DECODE_ATTENTION, ")
    assert "FUSION_PASSES_GEMV_TABLE" in messages[0] and "FUSION_PASSES_RESIDUAL_NORM" in messages[0]
    assert "FUSION_PASSES_SDPA_BACKEND is ignored: removed in session 21" in messages[1]
    assert "torch.backends.cuda.enable_cudnn_sdp(False)" in messages[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per name: no second warning
        fusion_passes.backend()
    assert patterns.check_settings({"FUSION_PASSES_GEMV_NORM": "late", "OTHER": "x"}) == []


@pytest.mark.parametrize("name, value", [("FUSION_PASSES_DECODE_GEMV", "bogus"), ("FUSION_PASSES_RAISE", "true"),
                                         ("FUSION_PASSES_RESIDUAL_NORM", "")])
def test_an_invalid_setting_value_fails_when_the_backend_is_built(monkeypatch, name, value):
    """Not at the first call: there the FX-cache key reads it and fails the compile with the cache on, while with it
    off the family fails alone and the graph compiles without it."""
    from fusion_passes import patterns

    monkeypatch.setenv(name, value)
    choices = patterns.settings()[name][0]
    with pytest.raises(ValueError, match=f"{name}={value!r}; use one of {', '.join(choices)}"):
        fusion_passes.backend()


def test_a_registered_familys_setting_is_known_even_without_its_choices():
    from types import SimpleNamespace

    from fusion_passes import patterns

    family = SimpleNamespace(NAME="toy_with_setting", HOOK="post_grad", apply=lambda graph, ctx: None,
                             EXTRA_POLICY_ENV="FUSION_PASSES_TOY_EXTRA")
    register_pattern(family)
    try:
        assert patterns.settings()["FUSION_PASSES_TOY_EXTRA"] == ((), repr(family))
        assert patterns.check_settings({"FUSION_PASSES_TOY_EXTRA": "1"}) == []
    finally:
        unregister_pattern("toy_with_setting")


def test_every_setting_is_listed_with_its_choices():
    """``settings()`` finds each family's settings (and its kernels') by the ``<X>POLICY_ENV`` / ``<X>POLICIES``
    convention; each one's default is what ``env_policy`` returns when it is unset."""
    from fusion_passes.kernels import gemv_table
    from fusion_passes.patterns import attention_sdpa, decode_gemv, env_policy, residual_norm, settings

    found = settings()
    assert found[gemv_table.NORM_POLICY_ENV] == (gemv_table.NORM_POLICIES, "fusion_passes.kernels.gemv_table")
    assert found[attention_sdpa.INLINE_POLICY_ENV][0] == attention_sdpa.INLINE_POLICIES
    assert {decode_gemv.POLICY_ENV, decode_gemv.ROPE_POLICY_ENV, decode_gemv.KV_WRITE_POLICY_ENV,
            residual_norm.POLICY_ENV, "FUSION_PASSES_RAISE"} <= set(found)
    for name, (choices, _) in found.items():
        if name != "FUSION_PASSES_RAISE" and name not in os.environ:
            assert env_policy(name, choices) == choices[0]


def test_unknown_pattern_error_lists_valid_names(toys):
    with pytest.raises(ValueError, match="Valid names: .*toy_mul2_to_add"):
        fusion_passes.backend(patterns=["toy_mul2_to_ad"])


def test_available_patterns_and_exclude(toys):
    names = fusion_passes.available_patterns()
    assert {"toy_mul2_to_add", "toy_broken"} <= set(names)
    be = fusion_passes.backend(exclude=["toy_broken"])
    assert "toy_broken" not in be.patterns and "toy_mul2_to_add" not in be.patterns  # not built-in: opt-in
    assert fusion_passes.backend(patterns=["toy_mul2_to_add", "toy_broken"]).patterns == ("toy_mul2_to_add", "toy_broken")


def test_uuid_covers_enabled_patterns(toys):
    one = FusionGraphPass("post_grad", ("toy_mul2_to_add",)).uuid()
    assert one == FusionGraphPass("post_grad", ("toy_mul2_to_add",)).uuid()
    assert one != FusionGraphPass("post_grad", ("toy_mul2_to_add", "toy_broken")).uuid()
    assert one != FusionGraphPass("post_grad", ("toy_mul2_to_add",), chained=CountingPass()).uuid()
    # a chained plain function cannot be hashed, so the whole chain opts out of the cache
    assert FusionGraphPass("post_grad", ("toy_mul2_to_add",), chained=lambda g: None).uuid() is None


_CACHE_PROBE = """
    import sys, torch
    sys.path.insert(0, ".")
    import fusion_passes
    from torch._dynamo.utils import counters
    from tests.toy_patterns import ToyMul2ToAdd, ToyBroken
    fusion_passes.register_pattern(ToyMul2ToAdd); fusion_passes.register_pattern(ToyBroken)
    f = torch.compile(lambda x: torch.sin(x * 2) * 3, backend=fusion_passes.backend(patterns=PATTERNS))
    f(torch.randn(8))
    print("HIT", counters["inductor"]["fxgraph_cache_hit"], "MISS", counters["inductor"]["fxgraph_cache_miss"])
"""


def test_fx_graph_cache_hits_across_processes_and_misses_for_other_patterns(tmp_path):
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
           "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    probe = lambda pats: _run_py(_CACHE_PROBE.replace("PATTERNS", repr(pats)), env)  # noqa: E731
    assert "HIT 0 MISS 1" in probe(["toy_mul2_to_add"])
    assert "HIT 1 MISS 0" in probe(["toy_mul2_to_add"])  # same config, new process: served from the cache
    assert "HIT 0 MISS 1" in probe(["toy_mul2_to_add", "toy_broken"])  # another pattern set: another key


def test_family_that_fails_to_import_is_disabled_not_fatal(monkeypatch):
    from fusion_passes import patterns

    monkeypatch.setitem(patterns.BUILTIN, "broken_import", "tests.family_that_fails_to_import")
    with pytest.warns(UserWarning, match="'broken_import' failed to load and is disabled"):
        be = fusion_passes.backend(patterns=["broken_import"])
    assert be.patterns == ()
    x = torch.randn(4)
    out = torch.compile(f, backend=be)(x)
    torch.testing.assert_close(out, f(x))
    assert "failed to load: ImportError" in fusion_passes.last_compile().errors[0].error


def test_enable_grad_inside_a_no_grad_call_counts_as_recording_gradients():
    """Called under torch.no_grad(), a model that turns autograd back on for part of its forward (``with
    torch.enable_grad():``, e.g. forces as the gradient of an energy) records gradients there: AOTAutograd builds a
    training graph, and the output requires grad. The families must see autograd as on (the near miss names it;
    nothing whose kernel has no backward is inserted), and static CUDA graphs must not take the graph: a replay
    returns outputs cut off from their autograd history (measured on the H200: from the second call, outputs that
    did not require grad, so the gradients were lost)."""
    torch.manual_seed(0)
    projs = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(3))  # three linears on one input

    def energy(x):
        with torch.enable_grad():
            return sum(torch.tanh(p(x)) for p in projs).square().sum()

    x = torch.randn(4, 16, requires_grad=True)
    out, recs = compile_with_records(energy, x, patterns=["qkv_packing"], cudagraphs="static")
    assert out.requires_grad
    (rec,) = [r for r in recs if r.passes_ran]
    assert "records gradients" in rec.cudagraphs, rec.cudagraphs
    assert [m.pattern for m in rec.matches] == []
    assert any("autograd is on" in n.reason for n in rec.near_misses), [n.reason for n in rec.near_misses]
    got = torch.autograd.grad(out, [x, *projs.parameters()])
    ref = torch.autograd.grad(energy(x), [x, *projs.parameters()])
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)
