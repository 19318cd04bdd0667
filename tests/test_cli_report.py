"""``fusion-passes report TARGET``: as a subprocess (file and module targets, HTML/JSON outputs, progress on
stderr, a factory returning the wrong thing), and its other mistakes through ``cli.main(argv)`` in-process
(each subprocess pays ~5-10 s of ``import torch`` on CI, so only three are spawned)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from fusion_passes.cli import main

TARGET_SRC = textwrap.dedent('''
    """A CLI target: a tiny model with one graph break, and a plugin family registered at import."""
    import torch
    from torch import nn

    import fusion_passes


    class ToyCli:
        NAME = "toy_cli"
        HOOK = "post_grad"
        DESCRIPTION = "mul(x, 2) -> add(x, x) (test only)"

        @staticmethod
        def apply(graph, ctx):
            for node in list(graph.nodes):
                if node.target is torch.ops.aten.mul.Tensor and node.args[1] == 2:
                    with graph.inserting_before(node):
                        new = graph.call_function(torch.ops.aten.add.Tensor, (node.args[0], node.args[0]))
                    new.meta.update(node.meta)
                    node.replace_all_uses_with(new)
                    graph.erase_node(node)
                    ctx.matched([node], [new])


    fusion_passes.register_pattern(ToyCli)


    class Tiny(nn.Module):
        def forward(self, x):
            y = x * 2
            print("a debug line")  # the graph break
            return y.sin()


    def make(device="cpu", dtype=torch.float32):
        return Tiny(), (torch.randn(4, 4, device=device, dtype=dtype),)


    def make_kwargs():
        return Tiny(), (), {"x": torch.randn(4)}


    def wrong():
        return Tiny()


    def boom():
        raise RuntimeError("no weights here")
''')


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "tiny_target.py").write_text(TARGET_SRC)
    return d / "tiny_target.py"


def _cli(*args, env_extra=None, cwd=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "fusion_passes.cli", "report", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_file_target_text_html_json(target, tmp_path):
    html, js = tmp_path / "out.html", tmp_path / "out.json"
    proc = _cli(f"{target}:make", "--patterns", "toy_cli", "--device", "cpu", "--dtype", "float32",
                "--html", html, "--json", js, "--diffs")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # text report on stdout
    assert "fusion_passes report: " in proc.stdout and "Graph breaks" in proc.stdout
    assert "Failed to trace builtin operator" in proc.stdout and "toy_cli" in proc.stdout
    assert "--- graph 1 post_grad before fusion_passes" in proc.stdout  # --diffs
    # progress on stderr: which graph, which phase
    err = proc.stderr
    for line in ("[fusion-passes] building the model", "[fusion-passes] tracing", "[fusion-passes] graph 1 (Dynamo frame",
                 "[fusion-passes] graph 1: post-grad passes (toy_cli)", "Inductor lowering and code generation",
                 "[fusion-passes] graph 2: compiled in", f"[fusion-passes] wrote {html}", f"[fusion-passes] wrote {js}"):
        assert line in err, (line, err[-3000:])
    data = json.loads(js.read_text())
    assert data["schema"] == "fusion_passes.report/1" and data["target"] == f"{target}:make"
    assert data["summary"]["graphs"] == 2 and data["summary"]["matches"] == 1 and data["summary"]["graph_breaks"] == 1
    assert html.read_text().startswith("<!DOCTYPE html>")


def test_module_target_json_to_stdout(target):
    proc = _cli("tiny_target:make_kwargs", "--patterns", "toy_cli", "--json", "--cudagraphs", "static",
                env_extra={"PYTHONPATH": f"{target.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)  # only JSON on stdout; progress went to stderr
    assert data["patterns"] == ["toy_cli"] and data["summary"]["matches"] == 1
    line = 1 + TARGET_SRC.splitlines().index('        print("a debug line")  # the graph break')
    assert data["graph_breaks"][0]["location"] == f"{target}:{line}"
    # --cudagraphs static on CPU: each graph says it got none, and why
    assert {g["cudagraphs"] for g in data["graphs"]} == {"none (inputs on ['cpu'], not on one CUDA device)"}


def test_factory_returning_the_wrong_thing_exits_2(target):
    proc = _cli(f"{target}:wrong")
    assert proc.returncode == 2
    assert "wrong() must return (model, example_inputs) or (model, args, kwargs)" in proc.stderr
    assert "it returned a Tiny" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------------------ in-process


@pytest.mark.parametrize("argv, message", [
    (["nocolon"], "must be 'path/to/file.py:factory' or 'package.module:factory'"),
    (["missing_dir/missing.py:make"], "no such file 'missing_dir/missing.py'"),
    (["no_such_module_xyz.models:make"], "cannot import 'no_such_module_xyz.models'"),
    (["{target}:nope"], "has no 'nope'; functions defined there: make, make_kwargs, wrong, boom"),
    (["{target}:make", "--dtype", "float8"], "unknown --dtype 'float8'; choose one of float32"),
    (["{target}:make", "--patterns", "no_such_family"], "unknown pattern name(s) in patterns=: 'no_such_family'"),
    # before the model is built: wrong() is never called
    (["{target}:wrong", "--mode", "fastest"], "unknown mode 'fastest'; choose one of"),
    (["{target}:boom"], "boom() failed while building the model: RuntimeError: no weights here"),
    # before the compile, not with a traceback after it
    (["{target}:make", "--html", "{target}.missing/report.html"], ".missing does not exist; create it (mkdir -p "),
    (["{target}:make", "--json", "{dir}"], "is a directory; give a file name, e.g. "),
])
def test_mistakes_name_the_fix(argv, message, target, capsys):
    rc = main(["report", *(a.format(target=target, dir=target.parent) for a in argv)])
    err = capsys.readouterr().err
    assert rc == 2 and message in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_but_unavailable(target, capsys):
    rc = main(["report", f"{target}:make", "--device", "cuda"])
    err = capsys.readouterr().err
    assert rc == 2 and "--device cuda was requested but CUDA is not available" in err and "--device cpu" in err


def test_build_inputs_shapes():
    from fusion_passes.cli_report import ReportError, build_inputs

    m, x = torch.nn.Identity(), torch.ones(2)
    assert build_inputs((m, (x,)), "f") == (m, (x,), {})
    assert build_inputs((m, x), "f")[1] == (x,)
    assert build_inputs([m, {"x": x}], "f")[2] == {"x": x}
    assert build_inputs((m, [x], {"y": 1}), "f") == (m, (x,), {"y": 1})
    for bad, why in [((m,), "a tuple of 1"), ((1, (x,)), "first item should be the model"), ((m, 3), "got an int"),
                     ((m, (x,), [1]), "kwargs a dict")]:
        with pytest.raises(ReportError, match=why):
            build_inputs(bad, "f")


NAMEDTUPLE_SRC = textwrap.dedent('''
    """A CLI target whose example input is a namedtuple (a batch object), moved to --dtype."""
    import collections

    import torch
    from torch import nn

    Batch = collections.namedtuple("Batch", "x scale")


    class ReadsBatch(nn.Module):
        def forward(self, batch):
            assert batch.x.dtype == torch.bfloat16, batch.x.dtype  # --dtype reached the namedtuple's tensors
            return batch.x * batch.scale


    def make():
        return ReadsBatch(), (Batch(torch.randn(4), 2.0),)
''')


def test_namedtuple_inputs_are_moved_not_rebuilt_wrongly(tmp_path, capsys):
    """``_move`` rebuilt every tuple as ``type(obj)(generator)``: a namedtuple input (any factory, even without
    --device/--dtype) raised TypeError from ``Batch.__new__`` with a traceback instead of a report."""
    path = tmp_path / "nt_target.py"
    path.write_text(NAMEDTUPLE_SRC)
    rc = main(["report", f"{path}:make", "--patterns", "--dtype", "bf16", "--json"])
    out = capsys.readouterr().out
    assert rc == 0 and json.loads(out)["summary"]["graphs"] == 1
