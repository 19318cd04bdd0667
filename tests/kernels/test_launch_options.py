"""Every launch of our Triton kernels requests ``kernels.LAUNCH_OPTIONS`` (fused multiply-add), so that Triton's
default, which 3.10 turns off, does not decide how the kernels round.

On CPU: each launch site, with the kernels replaced by recorders, passes the options. On CUDA: the kernels' outputs
are the same bits whatever ``TRITON_DEFAULT_FP_FUSION`` says, and a kernel launched without the options does lose its
FMAs under ``TRITON_DEFAULT_FP_FUSION=0`` (the variable reaches Triton's compiler here, so the comparison can fail).
"""

import os
import subprocess
import sys

import pytest
import torch

from fusion_passes.kernels import LAUNCH_OPTIONS, decode_attention, gemv, norms

pytestmark = pytest.mark.skipif(not gemv.HAS_TRITON, reason="needs triton")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NO_OPTIONS_ENV = "FUSION_PASSES_TEST_NO_LAUNCH_OPTIONS"  # this file's own switch: the kernels without the options


class LaunchRecorder:
    """Stands in for a Triton kernel (and for an autotuner's ``.fn``): ``kernel[grid](*args, **kwargs)`` records
    ``kwargs`` and runs nothing."""

    def __init__(self):
        self.launches: list[dict] = []
        self.fn = self

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(kwargs)


@pytest.fixture
def recorder(monkeypatch) -> LaunchRecorder:
    rec = LaunchRecorder()
    for module, names in ((gemv, ("_gemv_kernel", "_gemv_m16")), (norms, ("_norm_kernel",)),
                          (decode_attention, ("_decode_attention_kernel", "_combine_kernel"))):
        for name in names:
            monkeypatch.setattr(module, name, rec)
        monkeypatch.setattr(module, "wrap_triton", lambda kernel: kernel)
    monkeypatch.setattr(gemv, "_m1_kernel", lambda *args: rec)
    return rec


def assert_requested(launches: list[dict], count: int, pdl: bool = False) -> None:
    assert len(launches) == count, launches
    for kwargs in launches:
        assert kwargs.items() >= LAUNCH_OPTIONS.items(), sorted(kwargs)
        assert kwargs.get("launch_pdl", False) == pdl


@pytest.mark.parametrize("path", ["config", "autotuned", "pdl", "tile"])
def test_every_gemv_launch_requests_the_options(path, recorder, monkeypatch):
    """``config``: one given config (the benchmarks, the interpreter); ``autotuned``: M = 1 through the table or
    the autotuner (``wrap_triton`` on CUDA); ``pdl``: the same launched with PDL; ``tile``: the 16-row tile."""
    monkeypatch.setattr(gemv.pdl, "supported", lambda device: True)
    m = 4 if path == "tile" else 1
    x, w = torch.randn(m, 64), torch.randn(32, 64)
    y = torch.empty(m, 32)
    config = dict(BLOCK_N=16, BLOCK_K=64, num_warps=4, num_stages=2) if path == "config" else None
    if config is None:
        monkeypatch.setattr(gemv, "INTERPRETED", False)  # the interpreter always gives a config
    gemv._launch(x, w, None, None, torch.ones(64), 1e-6, 0.0, True, None, False, y, config=config,
                 pdl_launch=path == "pdl")
    assert_requested(recorder.launches, 1, pdl=path == "pdl")


@pytest.mark.parametrize("interpreted", [False, True])
def test_every_norm_launch_requests_the_options(interpreted, recorder, monkeypatch):
    monkeypatch.setattr(norms, "INTERPRETED", interpreted)
    x, res = torch.randn(3, 64), torch.randn(3, 64)
    norms._launch(x, res, torch.ones(64), None, torch.empty_like(x), torch.empty_like(x), 1e-6, None, 0.0, True,
                  False)
    assert_requested(recorder.launches, 1)


@pytest.mark.parametrize("traced, pdl", [(False, False), (True, False), (False, True)])
def test_both_attention_launches_request_the_options(traced, pdl, recorder, monkeypatch):
    monkeypatch.setattr(decode_attention.pdl, "supported", lambda device: True)
    q, k = torch.randn(1, 4, 1, 16), torch.randn(1, 2, 32, 16)
    decode_attention._launch(q, k, k, None, 0.25, False, torch.empty_like(q), traced=traced, pdl_launch=pdl)
    assert_requested(recorder.launches, 2, pdl=pdl)


def save_outputs(path: str) -> None:
    """The shipped kernels' outputs on CUDA for fixed inputs, saved to ``path``: the 1B o-projection's GEMV (M = 1,
    its table config) plain and with PDL, with a config given (a persistent one), the 4-row tile, the add + RMSNorm
    and the decode attention. The subprocesses of the test below call it."""
    if os.environ.get(NO_OPTIONS_ENV) == "1":
        LAUNCH_OPTIONS.clear()
    torch.manual_seed(0)
    dev, bf16 = "cuda", torch.bfloat16
    w, nw = torch.randn(2048, 2048, device=dev, dtype=bf16) / 45, torch.rand(2048, device=dev, dtype=bf16) + 0.5
    x1, x4, res = (torch.randn(m, 2048, device=dev, dtype=bf16) for m in (1, 4, 1))
    out = {}

    def gemv_out(x, pdl=False, config=None, residual=res, norm=None):
        y = torch.empty(x.shape[0], 2048, device=dev, dtype=bf16)
        gemv._launch(x, w, None, None, norm, 1e-5, 0.0, True, residual, False, y, config=config, pdl_launch=pdl)
        return y

    out["o_proj"] = gemv_out(x1)
    out["o_proj_pdl"] = gemv_out(x1, pdl=True)
    persistent = dict(BLOCK_N=2, BLOCK_K=2048, PREFETCH=True, ACC1D=True, PERSIST=2, num_warps=4, num_stages=1)
    out["persistent"] = torch.empty(1, 2048, device=dev, dtype=bf16)
    compiled = gemv._launch(x1, w, None, None, nw, 1e-5, 0.0, True, None, False, out["persistent"],
                            config=persistent)  # a launch with a config returns the compiled kernel
    out["persistent_fp32_fmas"] = torch.tensor(compiled.asm["ptx"].count("fma.rn.f32"))
    out["tile"] = gemv_out(x4, config=dict(BLOCK_N=16, BLOCK_K=64, PREFETCH=False, num_warps=4, num_stages=2),
                           residual=None, norm=nw)
    out["add_rms_norm"] = torch.ops.fusion_passes.add_rms_norm(x4, x4.flip(0), nw, 1e-5)[1]
    q, k, v = (torch.randn(1, h, s, 64, device=dev, dtype=bf16) for h, s in ((32, 1), (8, 1024), (8, 1024)))
    out["attention"] = decode_attention.decode_attention(q, k, v, None, 0.125, False)
    torch.cuda.synchronize()
    torch.save({name: t.cpu() for name, t in out.items()}, path)


@pytest.mark.gpu
def test_outputs_do_not_depend_on_tritons_fp_fusion_default(tmp_path):
    def outputs(default: str, requested: bool) -> dict:
        path = tmp_path / f"out_{default}_{requested}.pt"
        env = {**os.environ, "TRITON_DEFAULT_FP_FUSION": default, NO_OPTIONS_ENV: "0" if requested else "1",
               "TRITON_CACHE_DIR": str(tmp_path / "triton_cache")}  # fresh compiles: the options are in the key
        code = f"from tests.kernels.test_launch_options import save_outputs; save_outputs({str(path)!r})"
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=400)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return torch.load(path)

    fused, unfused_default = outputs("1", True), outputs("0", True)
    for name, want in fused.items():
        assert torch.equal(unfused_default[name], want), name
    assert fused["persistent_fp32_fmas"] > 0
    # left to the default, the kernel loses its FMAs: the variable reaches the compiler (so the test can fail)
    unrequested = outputs("0", False)
    assert unrequested["persistent_fp32_fmas"] == 0
