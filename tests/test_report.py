"""fusion_passes.report: every section of one report on a model built to break (print, data-dependent ``if``,
``.item()``), matched and near-missed by the toy families; then the renderers, the graph-break parser and
the blocked-fusion heuristic on canned inputs, and a fullgraph zoo model with the real families.

One compile (module-scoped ``rep``) serves most tests; the others compile tiny functions.
"""

import dataclasses
import html.parser
import json
import logging
import os
import re
import shutil
import subprocess
import warnings

import pytest
import torch
import torch.fx as fx
from torch import nn

import fusion_passes
import fusion_passes.report as fp_report
from fusion_passes import graph_utils
from fusion_passes.patterns import unregister_pattern
from fusion_passes.report import breaks as brk
from fusion_passes.report import summary_table

from .toy_patterns import ToyBroken, ToyMul2ToAdd


# ----------------------------------------------------------------------------------------------- fixtures


class ToyMul2Bytes:
    """``toy_mul2_to_add`` that also reports the bytes of the product it stops writing (for the headline)."""

    NAME = "toy_mul2_bytes"
    HOOK = "post_grad"
    DESCRIPTION = "mul(x, 2) -> add(x, x), reporting saved bytes (test only)"

    class _Ctx:
        def __init__(self, ctx):
            self._ctx = ctx

        def __getattr__(self, name):
            return getattr(self._ctx, name)

        def matched(self, replaced, inserted, **kw):
            kw.setdefault("saved_bytes", sum(graph_utils.tensor_bytes(n) for n in replaced if isinstance(n, fx.Node)))
            return self._ctx.matched(replaced, inserted, **kw)

    @classmethod
    def apply(cls, graph, ctx):
        ToyMul2ToAdd.apply(graph, cls._Ctx(ctx))


def _debug(t):
    print("debug", tuple(t.shape))  # MARK:print


class Breaky(nn.Module):
    """x [2, 4, 8] -> [2, 4, 8] with three distinct graph breaks; the print one is hit twice."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = (q @ k.transpose(-1, -2)) * 2  # MARK:match
        _debug(scores)
        p = scores.softmax(-1)
        if p.sum() > 0:  # MARK:branch
            p = p * 3  # MARK:near
        n = int(x.abs().max().item())  # MARK:item
        _debug(p)
        return (p @ v) * 2 + n


def _line(mark: str) -> str:
    """``test_report.py:<line>`` of the line tagged ``# MARK:<mark>`` in this file."""
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# MARK:{mark}"):
                return f"{__file__}:{i}"
    raise AssertionError(mark)


@pytest.fixture(scope="module")
def toys():
    names = [fusion_passes.register_pattern(f) for f in (ToyMul2ToAdd, ToyMul2Bytes, ToyBroken)]
    yield names
    for n in names:
        unregister_pattern(n)


@pytest.fixture(scope="module")
def model_and_input():
    torch.manual_seed(0)
    return Breaky().eval(), torch.randn(2, 4, 8)


@pytest.fixture(scope="module")
def rep(toys, model_and_input):
    model, x = model_and_input
    with torch.no_grad():
        return fusion_passes.report(model, x, patterns=["toy_mul2_bytes"])


def _break(rep, words: str):
    found = [b for b in rep.breaks if words.lower() in b.reason.lower()]
    assert len(found) == 1, [b.reason for b in rep.breaks]
    return found[0]


# ----------------------------------------------------------------------------------------------- the compile


def test_report_output_matches_eager(rep, model_and_input):
    model, x = model_and_input
    with torch.no_grad():
        torch.testing.assert_close(rep.output, model(x))


def test_package_is_callable_and_exports():
    assert callable(fp_report) and fp_report.report.__module__ == "fusion_passes.report.collect"
    assert isinstance(fp_report.FusionReport(), fp_report.FusionReport) and callable(summary_table)


def test_graphs_section(rep):
    assert [g.graph_id for g in rep.graphs] == [1, 2, 3, 4]
    assert [g.ended_by for g in rep.graphs] == ["graph break"] * 3 + [""]
    for g in rep.graphs:
        assert g.passes_ran and g.kernels and g.kernels >= 1  # cache off: passes ran, kernels counted
        assert [s.hook for s in g.stages] == ["post_grad"] and g.num_nodes > 0 and re.fullmatch(r"\d+/\d+", g.compile_id)
    assert "matmul" in rep.graphs[0].tail_ops and "softmax" in rep.graphs[1].head_ops


def test_matches_section(rep):
    assert [(m.graph_id, m.pattern) for m in rep.matches] == [(1, "toy_mul2_bytes"), (4, "toy_mul2_bytes")]
    first = rep.matches[0]
    assert first.source.startswith(_line("match"))
    assert first.replaced == ["mul=aten.mul"] and first.inserted[0].endswith("aten.add")


def test_per_family_section(rep):
    """One row per family: fired twice at two source lines, near-missed once, what it saves."""
    [row] = rep.by_pattern()
    assert (row["pattern"], row["matches"], row["near_misses"], row["saved_bytes"]) == ("toy_mul2_bytes", 2, 1, 384)
    assert row["sources"] == [m.source for m in rep.matches] and len(set(row["sources"])) == 2
    text = rep.text()
    section = text[text.index("Per family"):text.index("Matches")]
    assert "toy_mul2_bytes" in section and "384 B" in section and _line("match").rsplit("/", 1)[-1] in section
    assert 'id="families"' in rep.to_html() and ">384 B</td>" in rep.to_html()


def test_near_misses_section(rep):
    assert [(n.graph_id, n.pattern, n.reason) for n in rep.near_misses] == [
        (3, "toy_mul2_bytes", "multiplier is not the constant 2")]
    assert rep.near_misses[0].source.startswith(_line("near"))


def test_headline_saved_bytes(rep):
    # graph 1 stops writing scores*2 [2, 4, 4] fp32, graph 4 (p@v)*2 [2, 4, 8] fp32
    assert [m.saved_bytes for m in rep.matches] == [2 * 4 * 4 * 4, 2 * 4 * 8 * 4]
    assert rep.saved_bytes == 384 == rep.summary()["saved_bytes"]
    assert "Intermediates no longer materialised: 384 B per call" in rep.text()


def test_op_counts_and_diff(rep):
    stage = rep.graph(1).stages[0]
    assert stage.ops_delta == {"aten.add": (0, 1), "aten.mul": (1, 0)}
    diff = stage.diff(1)
    assert "-    mul = torch.ops.aten.mul.Tensor(bmm, 2)" in diff
    assert re.search(r"^\+    add\w* = torch\.ops\.aten\.add\.Tensor\(bmm, bmm\)", diff, re.M)
    assert rep.graph(2).stages[0].diff() == "" and not rep.graph(2).stages[0].changed


def test_graph_breaks_deduplicated_with_locations(rep):
    assert len(rep.breaks) == 3
    printed, branch, item = (_break(rep, w) for w in ("builtin operator", "data-dependent", "item()"))
    assert printed.location == _line("print") and printed.count >= 2  # _debug() is called twice
    assert branch.location == _line("branch") and branch.count == 1
    assert item.location == _line("item") and item.count == 1
    assert any("capture_scalar_outputs" in h for h in item.hints)
    assert printed.user_stack[-1].startswith(_line("print")) and "in forward: _debug(scores)" in printed.user_stack[-2]
    assert not any("fusion_passes.report(" in f for b in rep.breaks for f in b.user_stack)  # caller frames dropped
    assert rep.break_count == sum(b.count for b in rep.breaks)


def test_graph_breaks_name_the_graphs_they_separate(rep):
    printed, branch, item = (_break(rep, w) for w in ("builtin operator", "data-dependent", "item()"))
    assert (1, 2) in printed.between
    assert branch.between == [(2, 3)] and item.between == [(3, 4)]


def test_graph_break_blocking_attention_is_named(rep):
    printed, branch, item = (_break(rep, w) for w in ("builtin operator", "data-dependent", "item()"))
    assert [b.pattern for b in printed.blocked] == ["attention_sdpa"]
    assert "QK^T" in printed.blocked[0].why and "graph 1" in printed.blocked[0].why
    assert branch.blocked == [] and item.blocked == []  # softmax, sum | mul, abs and mul, abs, max | matmul


def test_break_loggers_restored(rep):
    for lg in brk._graph_break_loggers():
        assert not any(isinstance(h, brk._Handler) for h in lg.handlers)
        if not os.environ.get("TORCH_LOGS"):
            assert lg.level == logging.NOTSET and lg.propagate


# ----------------------------------------------------------------------------------------------- outputs


def test_json_schema(rep, tmp_path):
    text = rep.to_json(tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data == json.loads(text) == json.loads(json.dumps(rep.to_dict()))  # plain JSON types only
    assert data["schema"] == fp_report.SCHEMA and data["patterns"] == ["toy_mul2_bytes"]
    assert set(data) == {"schema", "target", "torch_version", "fusion_passes_version", "patterns", "compile_s",
                         "summary", "graphs", "graph_breaks"}
    assert data["summary"] == {"graphs": 4, "graph_breaks": 3, "graph_break_occurrences": rep.break_count,
                               "matches": 2, "near_misses": 1, "errors": 0, "kernels": rep.kernels,
                               "saved_bytes": 384, "matches_by_pattern": {"toy_mul2_bytes": 2},
                               "by_pattern": [{"pattern": "toy_mul2_bytes", "matches": 2, "near_misses": 1,
                                               "saved_bytes": 384, "sources": [m.source for m in rep.matches]}]}
    g1 = data["graphs"][0]
    assert {"graph_id", "compile_id", "kernels", "matches", "near_misses", "errors", "stages", "saved_bytes"} <= set(g1)
    assert set(g1["pass_s"]) == {"toy_mul2_bytes"} and 0 <= g1["pass_s"]["toy_mul2_bytes"] <= g1["compile_s"]
    assert g1["stages"][0]["ops_delta"] == {"aten.add": [0, 1], "aten.mul": [1, 0]}
    assert g1["stages"][0]["diff"].startswith("--- graph 1 post_grad before")
    assert "mul = torch.ops.aten.mul.Tensor(bmm, 2)" in g1["stages"][0]["code_before"]
    assert "code_before" not in rep.to_dict(code=False)["graphs"][0]["stages"][0]
    b = data["graph_breaks"][0]
    assert set(b) == {"reason", "location", "explanation", "hints", "user_stack", "count", "between", "blocked",
                      "skipped_frame", "url"}
    assert b["between"][0] == [1, 2] and b["blocked"][0]["pattern"] == "attention_sdpa"


def test_text_has_every_section(rep):
    text = str(rep)
    assert text == rep.text()
    for title in ("Compiled graphs", "Matches", "Near misses", "Graph breaks", "Op counts changed by our passes"):
        assert f"\n{title}\n" in text
    assert "multiplier is not the constant 2" in text and "Data-dependent branching" in text
    assert "blocked attention_sdpa (heuristic)" in text and "1→2" in text
    assert "compile s    passes s" in text  # our families' share of each graph's compile
    assert "--- graph 1 post_grad before" not in text and "--- graph 1 post_grad before" in rep.text(diffs=True)


class _PageParser(html.parser.HTMLParser):
    """Collects ids, classes, external references and checks that non-void tags nest properly."""

    VOID = {"meta", "link", "br", "hr", "img", "input", "col", "area", "base", "wbr", "source"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.ids, self.classes = [], [], [], []
        self.external, self.scripts, self.data = [], [], {}
        self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if a.get(key) and re.match(r"^(https?:)?//", a[key]):
                self.external.append(a[key])
        if tag == "script":
            self.scripts.append(a)
            self._in = a.get("id") or "script"
        if "id" in a:
            self.ids.append(a["id"])
        self.classes += [(tag, c) for c in (a.get("class") or "").split()]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()
        self._in = None

    def handle_data(self, data):
        if self._in:
            self.data[self._in] = self.data.get(self._in, "") + data


@pytest.fixture(scope="module")
def page(rep, tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "report.html"
    text = rep.to_html(path)
    assert path.read_text() == text
    parser = _PageParser()
    parser.feed(text)
    parser.close()
    return path, text, parser


def test_html_structure(rep, page):
    _, text, p = page
    assert text.startswith("<!DOCTYPE html>") and p.errors == [] and p.stack == []
    for sid in ("summary", "graphs", "matches", "near-misses", "graph-breaks", "op-counts", "diffs", "saved-bytes"):
        assert sid in p.ids
    diffs = [c for c in p.classes if c == ("details", "diff")]
    assert len(diffs) == sum(s.changed for g in rep.graphs for s in g.stages) == 2
    assert ("pre", "diff") in p.classes and ("span", "add") in p.classes and ("span", "del") in p.classes
    assert len([c for c in p.classes if c == ("details", "break-detail")]) == 3
    assert p.external == [] and all("src" not in s for s in p.scripts)  # self-contained
    assert json.loads(p.data["report-data"]) == json.loads(json.dumps(rep.to_dict(code=False)))
    assert "384 B" in text and "multiplier is not the constant 2" in text


def test_html_escapes_user_text(rep, tmp_path):
    evil = dataclasses.replace(rep, target="<script>alert(1)</script>", graphs=rep.graphs[:1], breaks=[])
    text = evil.to_html()
    assert "<script>alert(1)" not in text and "&lt;script&gt;alert(1)" in text
    assert "\\u003cscript\\u003ealert(1)" in text  # escaped inside the embedded JSON too


def test_match_detail_in_every_output(rep):
    detail = {"mask": "<causal>", "widths": [64, 32], "dtype": torch.float16}
    g = dataclasses.replace(rep.graphs[0], matches=[dataclasses.replace(rep.matches[0], detail=detail)])
    one = dataclasses.replace(rep, graphs=[g], breaks=[])
    assert "mask=<causal>, widths=[64, 32]," in one.text()
    assert "mask: <code>&lt;causal&gt;</code>" in one.to_html()
    assert json.loads(one.to_json())["graphs"][0]["matches"][0]["detail"] == {
        "mask": "<causal>", "widths": [64, 32], "dtype": "torch.float16"}  # free-form values stringified



def test_non_finite_detail_values_keep_the_json_valid(rep):
    """A match's detail with inf (state_updates' step of ``buf += float("inf")``) was written as ``Infinity``:
    invalid JSON, and the page's JSON.parse of its embedded data threw, so its script stopped there."""
    detail = {"step": float("inf"), "scales": [float("-inf"), float("nan"), 0.5]}
    g = dataclasses.replace(rep.graphs[0], matches=[dataclasses.replace(rep.matches[0], detail=detail)])
    one = dataclasses.replace(rep, graphs=[g], breaks=[])

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))

    assert strict(one.to_json())["graphs"][0]["matches"][0]["detail"] == {"step": "inf",
                                                                          "scales": ["-inf", "nan", 0.5]}
    page = re.search(r'id="report-data">(.*?)</script>', one.to_html(), re.S).group(1)
    assert strict(page)["graphs"][0]["matches"][0]["detail"]["step"] == "inf"


def test_text_says_when_no_op_count_changed(rep):
    """It printed the op-count table's bare header instead of saying so."""
    text = dataclasses.replace(rep, graphs=[dataclasses.replace(rep.graphs[0], stages=[])], breaks=[]).text()
    assert "Op counts changed by our passes\n-------------------------------\n(no op count changed)" in text


def test_text_and_html_say_what_cuda_graphs_each_graph_got(rep):
    """backend(cudagraphs="static")'s outcome per graph was only in the JSON and the CLI's progress lines, though
    the README says reports give it; the column appears only where a graph has one."""
    why = "trees (a <symbolic> shape)"
    one = dataclasses.replace(rep, graphs=[dataclasses.replace(rep.graphs[0], cudagraphs=why)], breaks=[])
    assert "CUDA graphs" in one.text() and "trees (a <symbolic> shape)" in one.text()
    assert "<th>CUDA graphs</th>" in one.to_html() and "trees (a &lt;symbolic&gt; shape)" in one.to_html()
    assert "CUDA graphs" not in rep.text() and "<th>CUDA graphs</th>" not in rep.to_html()

@pytest.mark.skipif(not shutil.which("chromium"), reason="chromium not installed")
def test_html_renders_in_headless_chromium_without_console_errors(page):
    path, _, _ = page
    proc = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--dump-dom", f"file://{path}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-ready="1"' in proc.stdout  # the inline script ran to its last line
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == []


# ----------------------------------------------------------------------------------------------- small compiles


def test_no_breaks_errors_section_and_summary_table(toys, compile_records, monkeypatch):
    monkeypatch.delenv("FUSION_PASSES_RAISE", raising=False)  # the manager must record the error, not raise

    def f(x):
        return (x * 2).sin()

    with warnings.catch_warnings():  # the manager warns once per process about a failing family
        warnings.simplefilter("ignore")
        rep = fusion_passes.report(f, torch.randn(8), patterns=["toy_broken"])
    assert rep.breaks == [] and len(rep.graphs) == 1 and rep.graphs[0].ended_by == ""
    assert rep.matches == [] and [e.pattern for e in rep.errors] == ["toy_broken"]
    assert "toy failure after a partial rewrite" in rep.text() and "Pass errors" in rep.text()
    assert 'id="errors"' in rep.to_html()
    assert "(none: one graph per frame)" in rep.text()

    _, recs = compile_records(f, torch.randn(8), patterns=["toy_mul2_to_add"])
    table = summary_table(recs)
    assert "1 graph, 1 match, 0 near misses" in table and "toy_mul2_to_add" in table
    assert "Graph breaks" not in table and "aten.mul" in table
    short = summary_table(recs, compact=True)
    assert "Op counts changed by our passes (net): aten.add +1, aten.mul -1" in short and "detail" not in short


def test_report_passes_kwargs_and_options(toys):
    def f(x, *, scale):
        return x * scale

    x = torch.randn(4)
    rep = fusion_passes.report(f, x, scale=2, patterns=["toy_mul2_to_add"],
                               options={"fx_graph_cache": True})  # forced off: the passes must still run
    assert len(rep.matches) == 1 and rep.target == "test_report_passes_kwargs_and_options.<locals>.f"
    torch.testing.assert_close(rep.output, x * 2)
    again = fusion_passes.report(torch.compile(f), x, scale=2, patterns=["toy_mul2_to_add"])  # unwrapped
    assert len(again.matches) == 1 and again.target.endswith("<locals>.f")
    with pytest.raises(ValueError, match="unknown pattern"):
        fusion_passes.report(f, torch.randn(4), scale=2, patterns=["nope"])


_real = [p for p in ("attention_sdpa", "qkv_packing", "residual_norm") if p in fusion_passes.available_patterns()]


@pytest.mark.skipif(not _real, reason="no built-in pattern family present yet")
def test_real_families_on_zoo_llama(monkeypatch):
    from fusion_passes import zoo
    from fusion_passes.patterns import residual_norm

    monkeypatch.setenv(residual_norm.POLICY_ENV, "auto")  # its CPU near miss, once per norm: grouped below

    torch.manual_seed(0)
    model = zoo.LlamaForCausalLM(zoo.LlamaConfig(num_hidden_layers=2)).eval()
    ids = torch.randint(0, 256, (2, 8))
    with torch.no_grad():
        rep = fusion_passes.report(model, ids)
        torch.testing.assert_close(rep.output, model(ids), atol=1e-4, rtol=1e-4)
    assert rep.breaks == [] and len(rep.graphs) == 1
    # torch 2.11/2.12 leave the rotary embedding's inner-size-1 matmul in the graph, and outer_product takes it
    assert rep.matches and {m.pattern for m in rep.matches} <= {*_real, "outer_product"}
    assert rep.saved_bytes == sum(m.saved_bytes for m in rep.matches)
    assert all(m.source for m in rep.matches)
    # the norm line every layer runs is one near-miss row with its count (JSON keeps each one)
    groups = rep.near_miss_groups()
    norm_rows = [(n, c) for n, c in groups if n.pattern == "residual_norm"]
    assert len(norm_rows) == 1 and norm_rows[0][1] == 5 == len([n for n in rep.near_misses
                                                              if n.pattern == "residual_norm"])
    assert sum(c for _, c in groups) == len(rep.near_misses) == len(json.loads(rep.to_json())["graphs"][0]["near_misses"])
    text = rep.text()
    assert text.count("left to Inductor") == 1 and "times" in text
    assert ">5</td>" in rep.to_html()


# ----------------------------------------------------------------------------------------------- parser, heuristic

_LOG_213 = """Graph break in user code at /src/model.py:12
Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Failed to trace builtin operator
  Explanation: Dynamo does not know how to trace builtin operator `print`
  Hint: Avoid calling builtin `print`.
  Hint: Please report an issue to PyTorch.

  Developer debug context: builtin print

 For more details about this graph break, please visit: https://example.invalid/gb0059.html

User code traceback:
  File "/src/run.py", line 3, in <module>
    main()
  File "{torch}/nn/modules/module.py", line 1778, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/src/model.py", line 12, in forward
    print("hi")          # debug
    ^^^^^^^^^^^
"""


def test_parse_log_message_registry_format():
    ev = brk.parse_log_message(_LOG_213.replace("{torch}", os.path.dirname(torch.__file__)),
                               skip=frozenset({("/src/run.py", 3)}))
    assert ev.reason == "Failed to trace builtin operator" and ev.location == "/src/model.py:12"
    assert ev.explanation.startswith("Dynamo does not know") and ev.hints == ["Avoid calling builtin `print`."]
    assert ev.url == "https://example.invalid/gb0059.html" and not ev.skipped_frame
    assert ev.user_stack == ['/src/model.py:12 in forward: print("hi")  # debug']  # torch and caller frames dropped


def test_parse_log_message_other_formats():
    dup = brk.parse_log_message("Graph break (user stack suppressed due to duplicate graph break) in user code at "
                                "/src/m.py:7\nGraph Break Reason: Data-dependent branching\n  Explanation: x")
    assert (dup.reason, dup.location, dup.explanation) == ("Data-dependent branching", "/src/m.py:7", "x")
    skip = brk.parse_log_message(
        "Graph break: torch.compile cannot properly resume from this graph break, which results in a skip.\n"
        "torch.compile will skip tracing the frame forward and fall back to eager.\n"
        'The graph break occurred in the following user code:\n  File "/src/m.py", line 9, in forward\n    x.item()\n')
    assert skip.skipped_frame and skip.location == "/src/m.py:9"
    assert brk.parse_log_message("Recompiling function forward") is None
    assert brk.parse_reason("generic_jump TensorVariable()")[0] == "Data-dependent branching"


def _ev(gid, tail=(), head=(), **kw):
    return brk.GraphEvent(graph_id=gid, graph_break=True, tail_ops=list(tail), head_ops=list(head), **kw)


def test_blocked_fusion_heuristic():
    assert [b.pattern for b in brk.blocked_fusions(_ev(1, tail=["add"]), _ev(2, head=["pow", "mean", "rsqrt"]))] == [
        "residual_norm"]
    assert [b.pattern for b in brk.blocked_fusions(_ev(1, tail=["linear"], tail_linear_inputs=[(2, 8, 64)]),
                                                   _ev(2, head=["linear"], head_linear_inputs=[(2, 8, 64)]))] == [
        "qkv_packing"]
    assert brk.blocked_fusions(_ev(1, tail=["linear"], tail_linear_inputs=[(2, 8, 64)]),
                               _ev(2, head=["linear"], head_linear_inputs=[(2, 8, 128)])) == []
    (pv,) = brk.blocked_fusions(_ev(1, tail=["softmax", "isnan", "any"]), _ev(2, head=["matmul", "transpose"]))
    assert pv.pattern == "attention_sdpa" and "P @ V" in pv.why
    assert brk.blocked_fusions(_ev(1, tail=["relu", "sin"]), _ev(2, head=["matmul"])) == []


def test_build_breaks_merges_log_and_graph_events():
    log = brk.BreakEvent("Failed to trace builtin operator", "/m.py:5", hints=["h"])
    graphless = brk.BreakEvent("Failed to trace builtin operator", "/m.py:5")
    g1 = _ev(1, tail=["matmul"], location="/m.py:5", reason="terse")
    g2 = brk.GraphEvent(graph_id=2, graph_break=False, head_ops=["softmax"])
    (b,) = brk.build_breaks([log, g1, graphless, g2])
    assert b.count == 2 and b.between == [(1, 2), (None, 2)] and b.hints == ["h"]
    assert [x.pattern for x in b.blocked] == ["attention_sdpa"]
    (only_graph,) = brk.build_breaks([_ev(1, location="/m.py:9", reason="Data-dependent branching"), g2])
    assert only_graph.reason == "Data-dependent branching" and only_graph.between == [(1, 2)]


def test_blocked_attention_across_a_call_that_breaks():
    """A break inside a function called between QK^T and the softmax: the called function's graphs come next, and
    the softmax starts the graph that resumes the matmul's function after the call (Dynamo's
    ``torch_dynamo_resume_in_<fn>_at_<line>``). Only that resume counts: not another function's softmax, nor one
    resumed before the matmul's line."""
    site = ("/m.py", "forward", 10)
    before = _ev(1, tail=["matmul"], tail_sites=[site])
    callee = brk.GraphEvent(graph_id=2, graph_break=False, head_ops=["arange"], head_sites=[("/m.py", "bias", 30)])

    def resumed(fn, file="/m.py"):
        return brk.GraphEvent(graph_id=3, graph_break=False, head_ops=["add", "softmax"],
                              head_sites=[(file, fn, 12), (file, fn, 13)])

    bf = brk.blocked_across_a_call(before, resumed("torch_dynamo_resume_in_forward_at_11"))
    assert bf.pattern == "attention_sdpa" and "graph 1" in bf.why and "graph 3" in bf.why and "line 11" in bf.why
    twice = "torch_dynamo_resume_in_torch_dynamo_resume_in_forward_at_11_at_12"  # resumed after a second break
    assert brk.blocked_across_a_call(before, resumed(twice))
    for fn, file in [("torch_dynamo_resume_in_other_at_11", "/m.py"), ("forward", "/m.py"),
                     ("torch_dynamo_resume_in_forward_at_9", "/m.py"),
                     ("torch_dynamo_resume_in_forward_at_11", "/n.py")]:
        assert brk.blocked_across_a_call(before, resumed(fn, file)) is None, (fn, file)
    (b,) = brk.build_breaks([_ev(1, tail=["matmul"], tail_sites=[site], location="/m.py:31", reason="r"), callee,
                             resumed("torch_dynamo_resume_in_forward_at_11")])
    assert b.between == [(1, 2)] and [x.pattern for x in b.blocked] == ["attention_sdpa"]


def _bias_that_breaks(q):
    torch._dynamo.graph_break()  # MARK:call-break
    return q.sum(-1, keepdim=True)


class _AttentionBreakingInACall(nn.Module):
    """q/k/v [2, 4, 8, 16] -> [2, 4, 8, 16]; the bias between QK^T and the softmax comes from a call that breaks."""

    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-1, -2))
        s = s + _bias_that_breaks(q)
        return torch.matmul(torch.softmax(s, dim=-1), v)


def test_report_names_attention_blocked_by_a_break_in_a_call():
    with torch.no_grad():
        rep = fusion_passes.report(_AttentionBreakingInACall(), *(torch.randn(2, 4, 8, 16) for _ in range(3)),
                                   patterns=["attention_sdpa"])
    (b,) = rep.breaks
    assert b.location == _line("call-break")
    assert [x.pattern for x in b.blocked] == ["attention_sdpa"], b.between
    assert "resumes forward" in b.blocked[0].why


# ----------------------------------------------------------------------------------------------- audit: break places


class _InitLayer(nn.Module):
    """x [4] -> [4]; ``trunc_normal_`` breaks on an ``.item()`` inside torch/nn/init.py, reached from one line."""

    def forward(self, x):
        x = x * 2
        y = torch.nn.init.trunc_normal_(x.clone())  # MARK:torch-internal
        return (x + y) * 3


class _TwoInitLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = _InitLayer(), _InitLayer()

    def forward(self, x):
        return self.b(self.a(x.cos())).sin()


def test_break_inside_torch_code_is_one_break_at_the_user_line(toys):
    """Dynamo's log header names the frame inside torch (init.py), the graph its user line: they never met, so
    each occurrence was counted twice, in two rows (5 for Dynamo's 3), and graph 1, which ended at the break,
    was also shown as a break with nothing compiled before it. Dynamo's repeats of the record (header only)
    still named init.py after the location fix; the report now keeps their tracebacks too."""
    from torch._dynamo.utils import counters

    counters["graph_break"].clear()  # torch._dynamo.reset() leaves the counters alone
    with torch.no_grad():
        rep = fusion_passes.report(_TwoInitLayers(), torch.randn(4), patterns=["toy_mul2_to_add"])
        dynamo_count = sum(counters["graph_break"].values())
    if dynamo_count == 0:
        pytest.skip(f"torch {torch.__version__}'s Dynamo traces trunc_normal_'s .item() without a break")
    (b,) = rep.breaks
    assert b.location == _line("torch-internal") and b.user_stack[-1].startswith(_line("torch-internal"))
    assert b.count == rep.break_count == dynamo_count == 3
    # a's graph 1 (cos) and its own frame's graph 2 (mul) end at it; b's hit leaves no graph (its frames cached)
    assert b.between == [(1, 2), (2, 3), (None, 4)]
    from torch._dynamo.utils import graph_break_dup_warning_checker as checker

    assert "add" not in vars(checker)  # the duplicate suppression is Dynamo's again


_EXEC_SRC = '''
import torch
from torch import nn


class ExecModel(nn.Module):
    def forward(self, x):
        x = x * 2
        print("exec'd")
        return x + 1
'''


def test_break_in_exec_d_source_is_placed_once(toys):
    """A model defined by ``exec`` of a string (a notebook, a code generator) has frames in ``<model-src>``: the
    graph side dropped them as not the user's, so one print was two rows, one of them at '?' (no location)."""
    ns = {}
    exec(compile(_EXEC_SRC, "<model-src>", "exec"), ns)
    with torch.no_grad():
        rep = fusion_passes.report(ns["ExecModel"](), torch.randn(4), patterns=["toy_mul2_to_add"])
    (b,) = rep.breaks
    assert (b.location, b.count, b.between) == ("<model-src>:9", 1, [(1, 2)])
    assert b.user_stack == ["<model-src>:9 in forward"] and "<model-src>:9" in rep.text()
    assert not brk._is_user_file("<frozen runpy>") and not brk._is_user_file("<eval_with_key>.3")


class _SplitQKV(nn.Module):
    """x [B, S, 8] -> [B, S, 8]: q, a print, then k and v (the break splits three projections of x)."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        q = self.q(x) * 2
        print("split")
        return q + self.k(x) + self.v(x)


def test_dynamic_report_is_not_specialised_by_the_break_analysis(toys):
    """Reading the linears' input shapes with int() put a guard on each symbolic size: the dynamic=True report
    showed graphs with this call's sizes baked in ([6, 8]), not the dynamic graphs the user's compile gets."""
    with torch.no_grad():
        rep = fusion_passes.report.collect(_SplitQKV(), (torch.randn(2, 3, 8),), patterns=["toy_mul2_to_add"],
                                           dynamic=True)
    code = rep.graph(1).stages[0].code_before
    assert "[6, 8]" not in code and "[2, 3, 8]" not in code, code
    (b,) = rep.breaks
    assert [x.pattern for x in b.blocked] == ["qkv_packing"]  # the shapes still compare, by their hints


def test_restarted_compile_keeps_graph_ids(toys, monkeypatch):
    """Dynamo re-traces a frame when AOTAutograd raises its float restart from inside our backend: the report's
    counter had already moved on, so a one-graph report called its graph 'graph 2'."""
    from fusion_passes.backend import FusionBackend

    orig, calls = FusionBackend.__call__, []

    def restart_once(self, gm, example_inputs, *args, **kwargs):
        calls.append(gm)
        if len(calls) == 1:
            raise torch._dynamo.exc.TensorifyScalarRestartAnalysis()
        return orig(self, gm, example_inputs, *args, **kwargs)

    monkeypatch.setattr(FusionBackend, "__call__", restart_once)
    with torch.no_grad():
        rep = fusion_passes.report(lambda x: x * 2, torch.randn(4), patterns=["toy_mul2_to_add"])
    assert len(calls) == 2 and [g.graph_id for g in rep.graphs] == [1]
    assert [m.graph_id for m in rep.matches] == [1]


def test_blocked_residual_norm_needs_a_norm_after_the_break():
    """A bare mean (mean pooling) after an add was named 'residual_norm blocked': nothing there normalises, so no
    add + norm could have been fused. The norm's rsqrt, or LayerNorm's / RMSNorm's op, must follow."""
    assert brk.blocked_fusions(_ev(1, tail=["add"]), _ev(2, head=["mean"])) == []
    assert brk.blocked_fusions(_ev(1, tail=["add"]), _ev(2, head=["pow", "sum"])) == []
    assert [b.pattern for b in brk.blocked_fusions(_ev(1, tail=["add"]), _ev(2, head=["layer_norm"]))] == [
        "residual_norm"]
    (split,) = brk.blocked_fusions(_ev(1, tail=["pow", "mean"]), _ev(2, head=["add", "rsqrt", "mul"]))
    assert split.pattern == "residual_norm" and "split" in split.why
    assert brk.blocked_fusions(_ev(1, tail=["pow", "mean"]), _ev(2, head=["mul", "mean"])) == []


def test_where_it_fired_keeps_a_path_with_in_in_it(rep):
    """The per-family 'where it fired' cut each source at its first ' in ': a folder named 'work in progress'
    was shown as 'work'."""
    src = "/data/work in progress/model.py:12 in forward: y = x * 2"
    g = dataclasses.replace(rep.graphs[0], matches=[dataclasses.replace(rep.matches[0], source=src)])
    text = dataclasses.replace(rep, graphs=[g], breaks=[]).text()
    section = text[text.index("Per family"):text.index("Matches")]
    assert "/data/work in progress/model.py:12" in section and "forward" not in section


def test_stage_left_without_counted_ops_reports_the_removal():
    """A stage whose graph our passes left with no counted op (ops_after == {}) was shown with its ops before as
    its ops after: 'no op count changed' next to a diff that removed the op."""
    from fusion_passes import records

    rec = records.GraphRecord(graph_id=7, patterns=("toy",))
    rec.stages.append(records.StageRecord("post_grad", "def forward(x):\n    mul = x * 1\n    return (mul,)",
                                          "def forward(x):\n    return (x,)", {"aten.mul": 1}, {}))
    rep = fp_report.from_records([rec])
    assert rep.graph(1).stages[0].ops_delta == {"aten.mul": (1, 0)}
    assert "(no op count changed)" not in rep.text()


def test_multi_line_explanation_and_hint_are_kept_whole():
    """Only the first line of an explanation or hint was kept (a two-line ``graph_break(msg=...)`` lost its second
    line), and a U+2028 inside a message cut it there too (``str.splitlines`` ends lines at it)."""
    text = ("Call to `torch._dynamo.graph_break()`\n"
            "  Explanation: User-inserted graph break. Message: first line\n"
            "    second line \u2028 same line\n"
            "  Hint: Remove the call,\n"
            "    or move it out of the compiled region.\n"
            "  Hint: Please report an issue to PyTorch.\n\n"
            "  Developer debug context: Called with args `[]`\n")
    title, explanation, hints, _ = brk.parse_reason(text)
    assert title == "Call to `torch._dynamo.graph_break()`"
    assert explanation == "User-inserted graph break. Message: first line second line \u2028 same line"
    assert hints == ["Remove the call, or move it out of the compiled region."]


def _builds_a_module_then_breaks(x):
    torch.nn.Identity()  # Dynamo's graph holds only its _log_api_usage_once call: no ATen op for Inductor
    torch._dynamo.graph_break()
    return x * 2


def test_graph_with_nothing_to_compile_is_not_called_cached(toys):
    """A graph with no op after AOTAutograd is returned by Inductor before any pass runs, so its record has no
    kernel count, which the report printed as 'cached', though report() compiles with every cache off."""
    with torch.no_grad():
        rep = fusion_passes.report(_builds_a_module_then_breaks, torch.randn(4), patterns=["toy_mul2_to_add"])
    assert [g.passes_ran for g in rep.graphs] == [False, True]
    assert rep.graph(1).kernels == 0 and "cached" not in rep.text() and ">cached<" not in rep.to_html()
