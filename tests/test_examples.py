"""Every script in ``examples/`` runs on CPU and checks itself (exit status 0 = matches eager).

Each runs in-process as ``__main__`` (``runpy``), as ``python examples/x.py`` would, with small sizes.
"""

import importlib.util
import json
import os
import runpy
import sys

import pytest

import fusion_passes

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
_has_transformers = importlib.util.find_spec("transformers") is not None
_families = set(fusion_passes.available_patterns())


def _backend_string_registered() -> bool:
    """``backend="fusion_passes"`` comes from the package's entry point: present once it is pip-installed."""
    import torch._dynamo

    return "fusion_passes" in torch._dynamo.list_backends()


def run_example(name: str, *argv: str) -> int:
    path = os.path.join(EXAMPLES, name)
    old_argv = sys.argv
    sys.argv = [path, *argv]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = old_argv
    return 0


def test_every_example_is_tested():
    tested = {"hf_llama_backend.py", "decorator_custom_module.py", "report_graph_break.py",
              "bert_sentence_embeddings.py", "hf_generate.py", "graphed_decode.py"}
    assert {f for f in os.listdir(EXAMPLES) if f.endswith(".py")} == tested


@pytest.mark.skipif(not _has_transformers, reason="needs transformers")
@pytest.mark.skipif(not _backend_string_registered(), reason="package not pip-installed: no 'fusion_passes' entry point")
def test_hf_llama_with_backend_string(capsys):
    assert run_example("hf_llama_backend.py", "--layers", "1") == 0
    out = capsys.readouterr().out
    assert "max |compiled - eager|" in out and "in 1 graph(s)" in out
    for family in _families & {"attention_sdpa", "qkv_packing", "residual_norm"}:
        assert f"  {family}" in out  # each built-in family fires on HF Llama


@pytest.mark.skipif(not _has_transformers, reason="needs transformers")
@pytest.mark.skipif(not _backend_string_registered(), reason="package not pip-installed: no 'fusion_passes' entry point")
def test_hf_generate_with_compile_config(capsys):
    assert run_example("hf_generate.py", "--layers", "1", "--new-tokens", "6") == 0
    out = capsys.readouterr().out
    assert "compiled vs eager generate: same" in out
    if "qkv_packing" in _families:
        assert "qkv_packing" in out.splitlines()[-1]  # q/k/v packed in the compiled decode step


def test_graphed_decode_loop(capsys):
    assert run_example("graphed_decode.py", "--layers", "1", "--new-tokens", "5") == 0
    out = capsys.readouterr().out
    assert "5 greedy tokens, graphed vs eager: same" in out
    assert "no CUDA: the step ran as is" in out or "captured" in out


def test_decorator_on_custom_module(capsys):
    assert run_example("decorator_custom_module.py", "--seq", "8") == 0
    out = capsys.readouterr().out
    assert "max |fused - eager|" in out and "intermediates no longer materialised" in out
    if _families:
        assert "0 matches" not in out


def test_report_html_for_model_with_graph_breaks(tmp_path, capsys):
    out_html = tmp_path / "report.html"
    assert run_example("report_graph_break.py", "--out", str(out_html)) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "3 distinct graph breaks" in out
    page = out_html.read_text()
    start = page.index('<script type="application/json" id="report-data">') + len(
        '<script type="application/json" id="report-data">')
    data = json.loads(page[start:page.index("</script>", start)])
    reasons = [b["reason"] for b in data["graph_breaks"]]
    assert reasons[0] == "Failed to trace builtin operator" and "Data-dependent branching" in reasons
    assert any("item()" in r for r in reasons)
    blocked = {b["pattern"] for gb in data["graph_breaks"] for b in gb["blocked"]}
    assert "attention_sdpa" in blocked  # the print splits QK^T from the softmax


@pytest.mark.skipif(not _has_transformers, reason="needs transformers")
def test_bert_sentence_embeddings_match_eager(capsys):
    assert run_example("bert_sentence_embeddings.py", "--layers", "1") == 0
    out = capsys.readouterr().out
    assert "cosine-similarity matrix" in out and "rewrites:" in out
