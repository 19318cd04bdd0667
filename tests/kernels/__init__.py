

def interpreter_blocker() -> str | None:
    """Why Triton's interpreter cannot run this project's kernels here, or None.

    triton < 3.7's interpreter turns a tensor used as a loop bound into a Python int with ``int(array)``, which
    numpy >= 2.4 refuses for the 1-element arrays it holds ("only 0-dimensional arrays can be converted"); torch
    2.11 comes with triton 3.6. The kernels themselves are fine (their GPU tests pass on triton 3.6)."""
    try:
        import numpy
        import triton
    except ImportError:
        return None  # the callers' own checks skip for a missing triton or numpy

    def major_minor(version: str) -> tuple[int, int]:
        major, minor = version.split(".")[:2]
        return int(major), int(minor)

    if major_minor(triton.__version__) < (3, 7) and major_minor(numpy.__version__) >= (2, 4):
        return (f"triton {triton.__version__}'s interpreter cannot run these kernels with numpy {numpy.__version__} "
                "(fixed in triton 3.7): pip install 'numpy<2.4' to run them")
    return None


def run_in_interpreter(test_file: str, tensor_loop_bounds: bool = False) -> None:
    """Run ``test_file``'s kernel tests in a subprocess with ``TRITON_INTERPRET=1`` (it must be set before triton
    is imported, and in a normal test run triton already is); assert they all passed. ``tensor_loop_bounds``: its
    kernels loop over a range computed from the program id (skipped where ``interpreter_blocker`` says so)."""
    import os
    import subprocess
    import sys

    import pytest

    if tensor_loop_bounds and (reason := interpreter_blocker()):
        pytest.skip(reason)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", test_file]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
