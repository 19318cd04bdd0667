"""The ``fusion-passes`` command: demo (the main job), patterns, and errors that name the fix."""

import os
import shutil
import subprocess
import sys

import pytest
import torch

import fusion_passes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, check=True, module=False):
    """The command (its installed script where there is one), or with ``module`` as ``python -m fusion_passes``."""
    exe = None if module else shutil.which("fusion-passes")
    cmd = [exe] if exe else [sys.executable, "-m", "fusion_passes"]
    env = {k: v for k, v in os.environ.items() if k != "FUSION_PASSES_RAISE"}
    out = subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    if check:
        assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_demo_compiles_checks_and_reports_fusions():
    out = cli("demo", "--seq", "8", "--batch", "2", "--iters", "1")
    text = out.stdout
    assert "zoo 'llama' on cpu" in text
    for name in fusion_passes.available_patterns():
        assert name in text, f"demo output does not mention {name}"
    assert "torch.compile (inductor)" in text and "fusion_passes" in text and "median ms" in text
    assert ": OK" in text and "on CPU these times are a tiny model's" in text
    assert "compiling with fusion_passes" in out.stderr  # progress goes to stderr


def test_patterns_lists_every_family_with_its_hook():
    text = cli("patterns").stdout
    for name in fusion_passes.available_patterns():
        assert name in text
    assert "post_grad" in text or "joint" in text


def test_python_dash_m_runs_the_command():
    """``python -m fusion_passes``: the same command without the installed script, exit status included."""
    out = cli("patterns", module=True)
    assert all(name in out.stdout for name in fusion_passes.available_patterns())
    bad = cli("no-such-command", module=True, check=False)
    assert bad.returncode == 2 and "demo" in bad.stderr  # argparse names the valid commands


def test_settings_lists_each_with_its_choices_value_and_ignored_ones():
    env = {"FUSION_PASSES_GEMV_TABLE": "tiled", "FUSION_PASSES_GEMV_NORM": "nope",
           "FUSION_PASSES_SDPA_BACKEND": "no-cudnn", "FUSION_PASSES_DECODE_ROPEE": "off"}
    exe = shutil.which("fusion-passes")
    cmd = [exe] if exe else [sys.executable, "-m", "fusion_passes.cli"]
    out = subprocess.run(cmd + ["settings"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**{k: v for k, v in os.environ.items() if not k.startswith("FUSION_PASSES_")}, **env})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.startswith("FUSION_PASSES_")}
    assert "on | tiled | off" in lines["FUSION_PASSES_GEMV_TABLE"] and " tiled " in lines["FUSION_PASSES_GEMV_TABLE"]
    assert "nope (invalid)" in lines["FUSION_PASSES_GEMV_NORM"]
    assert "(on)" in lines["FUSION_PASSES_DECODE_ROPE"]  # unset: its default
    assert "FUSION_PASSES_DECODE_ROPEE is set but ignored: no such setting (a typo?)" in out.stdout
    assert "FUSION_PASSES_SDPA_BACKEND is set but ignored: removed in session 21" in out.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_demo_cuda_without_cuda_names_the_fix():
    out = cli("demo", "--device", "cuda", check=False)
    assert out.returncode == 2 and "--device cuda was requested but CUDA is not available" in out.stderr
    assert "use --device cpu" in out.stderr


def test_demo_unknown_pattern_lists_valid_names():
    out = cli("demo", "--patterns", "attention", check=False)
    assert out.returncode == 2 and "Valid names:" in out.stderr


@pytest.mark.parametrize("argv, message", [
    (["demo", "--batch", "0"], "argument --batch: 0 is not a positive integer"),
    (["demo", "--seq", "-1"], "argument --seq: -1 is not a positive integer"),
    (["demo", "--iters", "0"], "argument --iters: 0 is not a positive integer"),
])
def test_demo_sizes_must_be_positive(argv, message, capsys):
    """0 or less failed deep in the model with torch's reshape error, or with an IndexError traceback after the
    compile (--iters 0): now argparse's usage and exit code 2."""
    from fusion_passes.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and err.startswith("usage: fusion-passes demo")


def test_demo_unknown_device_names_the_fix(capsys):
    from fusion_passes.cli import main

    assert main(["demo", "--device", "tpu"]) == 2
    assert "--device 'tpu' is not a device torch knows" in capsys.readouterr().err  # was torch's message alone


def test_output_closed_early_exits_quietly():
    """``fusion-passes patterns | head -1``: the reader leaves; this was a BrokenPipeError traceback."""
    exe = shutil.which("fusion-passes")
    cmd = [exe] if exe else [sys.executable, "-m", "fusion_passes"]
    proc = subprocess.Popen(cmd + ["patterns"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # before the command prints (importing torch takes it seconds)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 1 and "Traceback" not in err and "BrokenPipeError" not in err, err
