"""The decode GEMV Triton kernel against a float64 reference with eager's roundings.

Without a GPU the kernel runs in Triton's interpreter (``TRITON_INTERPRET=1`` before triton is imported):
``test_kernels_in_interpreter`` re-runs this file in a subprocess with it set; on CUDA the tests run the
compiled kernel directly. The interpreter's bf16 ``tl.dot`` is wrong (triton 3.9), so the 16-row tile is
checked there in fp32/fp16 only; bf16 runs the M = 1 path (and everything on a GPU).
"""

import pytest
import torch

from fusion_passes.kernels import gemv
from tests.kernels import run_in_interpreter

DEVICE = "cuda" if torch.cuda.is_available() else ("cpu" if gemv.INTERPRETED else None)
if DEVICE == "cpu":  # the interpreter has no griddepcontrol: a PDL kernel runs there with these as no-ops
    import triton
    import triton.language as tl  # noqa: F401 - the interpreter wants triton.language in a jit function's module

    @triton.jit
    def _no_griddepcontrol():
        pass
kernel_test = pytest.mark.skipif(DEVICE is None, reason="runs in the TRITON_INTERPRET=1 subprocess")
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}  # relative to the output's scale
# The interpreter's one config (gemv._launch): BLOCK_K = 64 < K = 96 here, so the K-tile masks are exercised
INTERPRETER_CONFIG = dict(BLOCK_N=16, BLOCK_K=64, num_warps=4, num_stages=2)


@pytest.fixture(autouse=True)
def interpreters_config_on_cuda(request, monkeypatch):
    """On CUDA every launch runs the interpreter's one config instead of autotuning: each new test shape would
    compile and time all 39 M = 1 configs (tests/kernels took over 420 s on the H200). Every autotuner config is
    checked once in test_every_autotuner_config_matches_reference; tests marked ``autotuners`` see the real ones."""
    if DEVICE != "cuda" or request.node.get_closest_marker("autotuners"):
        return
    c = INTERPRETER_CONFIG
    entry = (c["BLOCK_N"], c["BLOCK_K"], False, c["num_warps"], c["num_stages"])
    monkeypatch.setattr(gemv, "_gemv_m16", gemv._fixed_kernel(entry))
    monkeypatch.setattr(gemv, "_m1_kernel", lambda *a: gemv._fixed_kernel(
        (*entry[:2], gemv.PREFETCH, *entry[3:], gemv.ACC1D_INTERPRETED)))


def test_kernels_in_interpreter():
    if gemv.INTERPRETED or torch.cuda.is_available() or not gemv.HAS_TRITON:
        pytest.skip("the kernel tests run directly in this process")
    pytest.importorskip("numpy")
    run_in_interpreter(__file__, tensor_loop_bounds=True)


def _reference64(x, ws, nw, eps, res, silu, cast, biases=None, gelu=False):
    """float64 math, rounding to x.dtype where eager does (after the norm, after each GEMM with its bias, silu (or
    with ``gelu`` gelu's tanh form), product)."""
    t = x.dtype

    def rnd(v):
        return v.to(t).double()

    xd = x.double()
    if nw is not None:
        n = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
        xd = rnd(rnd(n) * nw.double() if cast else n * nw.double())
    biases = biases or [None] * len(ws)
    outs = [rnd(xd @ w.double().t() + (0 if b is None else b.double())) for w, b in zip(ws, biases)]
    if silu:
        g = outs[0]
        act = torch.nn.functional.gelu(g, approximate="tanh") if gelu else g / (1 + torch.exp(-g))
        return rnd(rnd(act) * outs[1])
    if res is not None:
        return rnd(outs[0] + res.double())
    return torch.cat(outs, 1)


CASES = {
    # name: (widths, mode)
    "qkv_gqa": ((40, 24, 24), "cat"),
    "two": ((32, 48), "cat"),
    "lm_head": ((70,), "cat"),
    "gate_up": ((40, 40), "silu"),
    "geglu": ((40, 40), "gelu"),  # Gemma's gate/up
    "residual": ((40,), "res"),
}


@kernel_test
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("rows", [1, 3, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("norm", [True, False])
def test_kernel_matches_reference(case, rows, dtype, norm):
    _check_kernel(case, rows, dtype, norm)


@kernel_test
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_without_prefetch(case, dtype, monkeypatch):
    """The M = 1 loop without the next-tile prefetch (the benchmarks' comparison variant) computes the same."""
    monkeypatch.setattr(gemv, "PREFETCH", not gemv.PREFETCH)
    _check_kernel(case, 1, dtype, CASES[case][1] != "res")


@kernel_test
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("norm", [True, False])
def test_kernel_reducing_each_tile(case, dtype, norm, monkeypatch):
    """The M = 1 loop that reduces each tile into [BLOCK_N] (ACC1D) computes the same, with the norm prologue's
    squares summed per lane."""
    _force_acc1d(monkeypatch)
    _check_kernel(case, 1, dtype, norm)


@kernel_test
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("norm", [True, False])
def test_persistent_form(case, dtype, norm, monkeypatch):
    """The persistent M = 1 form (x normalised once, each program taking every P-th column block of all the
    weights, the next block's rows loaded ahead) computes the same; two programs here, so each takes several
    blocks, across weights."""
    _force_loop(monkeypatch, "persistent", 1)
    _check_kernel(case, 1, dtype, norm)


@pytest.mark.skipif(not gemv.HAS_TRITON, reason="a launch config is the kernel's")
def test_persistent_form_needs_whole_rows():
    x, w = torch.randn(1, 96), torch.randn(8, 96)
    y = torch.empty(1, 8)
    for rows, block_k in ((1, 64), (2, 128)):
        with pytest.raises(ValueError, match="persistent form needs M = 1 and BLOCK_K >= K"):
            gemv._launch(x.expand(rows, 96), w, None, None, None, 1e-6, 0.0, True, None, False, y,
                         config=dict(BLOCK_N=4, BLOCK_K=block_k, PREFETCH=True, PERSIST=1, num_warps=4))


def _late_reference64(x, ws, nw, eps, silu):
    """The late-norm form in float64: (x * nw) @ W.T scaled by 1/rms after the dot, rounded only as it is output
    (and after silu and the product, as eager)."""
    t = x.dtype

    def rnd(v):
        return v.to(t).double()

    xd = x.double()
    rstd = torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    outs = [rnd(((xd * nw.double()) @ w.double().t()) * rstd) for w in ws]
    if silu:
        g = outs[0]
        return rnd(rnd(g / (1 + torch.exp(-g))) * outs[1])
    return torch.cat(outs, 1)


@kernel_test
@pytest.mark.parametrize("case", ["qkv_gqa", "lm_head", "gate_up"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("loop", ["tiled", "acc1d", "persistent"])
def test_late_norm_form(case, dtype, loop, monkeypatch):
    """FUSION_PASSES_GEMV_NORM=late: an M = 1 launch, in each loop, computes the late-norm math (to the fp32
    summation order and one output rounding) and eager's within the usual tolerance; in bf16 it differs from the
    exact form's output (which rounds the normalised row first), so the setting reached the kernel; 3 rows keep the
    exact form."""
    from fusion_passes.kernels import gemv_table

    _force_loop(monkeypatch, loop, 1)
    widths, mode = CASES[case]
    torch.manual_seed(0)
    k = 96
    ws = [(torch.randn(n, k, dtype=dtype, device=DEVICE) / k**0.5) for n in widths]
    nw = torch.rand(k, dtype=dtype, device=DEVICE) + 0.5
    w3 = ws + [None] * (3 - len(ws))
    rows = torch.randn(3, k, dtype=dtype, device=DEVICE) * 3
    outs = {}
    for policy in ("exact", "late"):
        monkeypatch.setenv(gemv_table.NORM_POLICY_ENV, policy)
        outs[policy] = [torch.ops.fusion_passes.decode_gemv(x, w3[0], w3[1], w3[2], nw, 1e-6, 0.0, True, None,
                                                            mode == "silu")
                        for x in (rows[:1], rows if dtype != torch.bfloat16 or DEVICE == "cuda" else None)
                        if x is not None]
    x = rows[:1]
    got = outs["late"][0]
    late = _late_reference64(x, ws, nw, 1e-6, mode == "silu")
    exact = _reference64(x, ws, nw, 1e-6, None, mode == "silu", True)
    scale = max(late.abs().max().item(), 1.0)
    assert (got.double() - exact).abs().max().item() <= TOL[dtype] * scale
    assert (got.double() - late).abs().max().item() <= (1e-5 if dtype == torch.float32 else 2**-6) * scale
    if dtype == torch.bfloat16:
        assert not torch.equal(got, outs["exact"][0])
    if len(outs["late"]) == 2:  # the 16-row tile has no late form
        assert torch.equal(outs["late"][1], outs["exact"][1])


def _force_acc1d(monkeypatch) -> None:
    """Every M = 1 launch runs the ACC1D loop: the interpreter's one config, or one fixed config on CUDA."""
    monkeypatch.setattr(gemv, "ACC1D_INTERPRETED", True)
    monkeypatch.setattr(gemv, "_m1_kernel", lambda *a: gemv._fixed_kernel((16, 64, True, 4, 2, True)))


def _force_loop(monkeypatch, loop: str, rows: int) -> None:
    """Every M = 1 launch runs ``loop``: "tiled" (the default config), "acc1d", "persistent" (two programs, four
    columns a block, so each program takes several blocks) or "persistent-one" (the same without PREFETCH: a
    program for every block); all but the first are M = 1 forms, skipped for more rows."""
    if loop == "tiled":
        return
    if rows > 1:
        pytest.skip(f"the {loop} loop is an M = 1 form")
    if loop == "acc1d":
        _force_acc1d(monkeypatch)
        return
    monkeypatch.setattr(gemv, "PERSIST_INTERPRETED", 2)
    monkeypatch.setattr(gemv, "_sm_count", lambda device: 1)
    prefetch = loop == "persistent"  # "persistent-one": a program for every block, no next-block prefetch
    monkeypatch.setattr(gemv, "PREFETCH", prefetch)  # the interpreter's config
    monkeypatch.setattr(gemv, "_m1_kernel", lambda *a: gemv._fixed_kernel((4, 128, prefetch, 4, 1, True, 2)))


def _autotuner_configs() -> list[tuple[int, dict]]:
    """(rows, launch config) for every config the M = 1 and the 16-row autotuners may pick."""
    if not gemv.HAS_TRITON:
        return []
    return [(rows, {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages})
            for rows, tuner in ((1, gemv._gemv_m1[True]), (3, gemv._gemv_m16)) for c in tuner.configs]


AUTOTUNER_CONFIGS = _autotuner_configs()


@kernel_test
@pytest.mark.parametrize("index", range(len(AUTOTUNER_CONFIGS)))
def test_every_autotuner_config_matches_reference(index):
    """Whichever config the autotuner picks computes the same: each config runs one case (in turn), M = 1 in
    bf16, the 16-row tile in fp16 (the interpreter's bf16 tl.dot is wrong)."""
    rows, config = AUTOTUNER_CONFIGS[index]
    case = sorted(CASES)[index % len(CASES)]
    _check_kernel(case, rows, torch.bfloat16 if rows == 1 else torch.float16, CASES[case][1] != "res", config)


def _check_kernel(case, rows, dtype, norm, config=None):
    """The op (or, with ``config``, one launch of that config) on random inputs against the float64 reference."""
    if DEVICE == "cpu" and dtype == torch.bfloat16 and rows > 1:
        pytest.skip("the interpreter's bf16 tl.dot is wrong; covered on GPU")
    widths, mode = CASES[case]
    if mode == "res" and norm:
        pytest.skip("the residual epilogue takes no norm in the pass")
    torch.manual_seed(0)
    k = 96  # not a multiple of the K tile: the masks matter
    x = torch.randn(rows, k, dtype=dtype, device=DEVICE)
    ws = [(torch.randn(n, k, dtype=dtype, device=DEVICE) / k**0.5) for n in widths]
    nw = (torch.rand(k, dtype=dtype, device=DEVICE) + 0.5) if norm else None
    res = torch.randn(rows, widths[0], dtype=dtype, device=DEVICE) if mode == "res" else None
    w3 = ws + [None] * (3 - len(ws))
    gated, gelu = mode in ("silu", "gelu"), mode == "gelu"
    args = (x, w3[0], w3[1], w3[2], nw, 1e-6, 0.0, True, res, gated)
    if config is None:
        got = torch.ops.fusion_passes.decode_gemv(*args, gelu_tanh=gelu)
    else:
        got = torch.empty(rows, widths[0] if mode != "cat" else sum(widths), dtype=dtype, device=DEVICE)
        gemv._launch(*args, got, config=config, gelu_tanh=gelu)
    want = _reference64(x, ws, nw, 1e-6, res, gated, True, gelu=gelu)
    assert got.shape == want.shape and got.dtype == dtype
    scale = want.abs().max().item()
    err = (got.double() - want).abs().max().item()
    assert err <= TOL[dtype] * max(scale, 1.0), f"max err {err} vs scale {scale}"


@kernel_test
def test_gemma_offset_and_uncast_norm():
    torch.manual_seed(0)
    x = torch.randn(1, 64, device=DEVICE)
    w = torch.randn(32, 64, device=DEVICE) / 8
    nw = torch.randn(64, device=DEVICE) * 0.1
    got = torch.ops.fusion_passes.decode_gemv(x, w, None, None, nw, 1e-6, 1.0, False, None, False)
    xn = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + nw)
    torch.testing.assert_close(got, xn @ w.t(), rtol=1e-4, atol=1e-4)


def test_torch_implementation_is_the_reference_off_gpu():
    x, w = torch.randn(2, 8), torch.randn(4, 8)
    if gemv._use_triton(x):
        pytest.skip("the triton kernel runs here")
    got = torch.ops.fusion_passes.decode_gemv(x, w, w, None, None, 1e-6, 0.0, True, None, False)
    torch.testing.assert_close(got, torch.cat([x @ w.t(), x @ w.t()], 1))


def _rope64(y, cos, sin, t):
    """HF's y * cos + rotate_half(y) * sin per head, float64, rounding to t after each op as eager does."""

    def rnd(v):
        return v.to(t).double()

    m, n = y.shape
    d = cos.shape[-1]
    yh = y.reshape(m, n // d, d)
    rot = torch.cat([-yh[..., d // 2:], yh[..., : d // 2]], dim=-1)
    return rnd(rnd(yh * cos.double()[:, None]) + rnd(rot * sin.double()[:, None])).reshape(m, n)


@kernel_test
@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rope_weights, widths", [(2, (64, 32, 32)), (1, (48, 32)), (2, (32, 16))])
@pytest.mark.parametrize("loop", ["tiled", "acc1d", "persistent", "persistent-one"])
def test_kernel_rope_epilogue(rows, dtype, rope_weights, widths, loop, monkeypatch):
    """q/k rotated per head in the epilogue (each program owns column pairs j, j + 8 of 16-wide heads); v as is.
    acc1d: the M = 1 loop reducing each tile (the H200 table's q/k/v config for the 1B shape); persistent: the
    persistent M = 1 form."""
    if DEVICE == "cpu" and dtype == torch.bfloat16 and rows > 1:
        pytest.skip("the interpreter's bf16 tl.dot is wrong; covered on GPU")
    _force_loop(monkeypatch, loop, rows)
    torch.manual_seed(0)
    k, d = 96, 16
    x = torch.randn(rows, k, dtype=dtype, device=DEVICE)
    ws = [(torch.randn(n, k, dtype=dtype, device=DEVICE) / k**0.5) for n in widths]
    nw = torch.rand(k, dtype=dtype, device=DEVICE) + 0.5
    angle = torch.rand(rows, d // 2, device=DEVICE) * 6
    cos, sin = (f(torch.cat([angle, angle], -1)).to(dtype) for f in (torch.cos, torch.sin))
    w3 = ws + [None] * (3 - len(ws))
    got = torch.ops.fusion_passes.decode_gemv(x, w3[0], w3[1], w3[2], nw, 1e-6, 0.0, True, None, False, cos, sin,
                                              d, rope_weights)
    plain = _reference64(x, ws, nw, 1e-6, None, False, True)
    parts = list(plain.split(list(widths), 1))
    want = torch.cat([_rope64(p, cos, sin, dtype) if i < rope_weights else p for i, p in enumerate(parts)], 1)
    err = (got.double() - want).abs().max().item()
    assert err <= TOL[dtype] * max(want.abs().max().item(), 1.0), err
    assert (got.double() - plain).abs().max().item() > 10 * TOL[dtype]  # the rotation did something


@kernel_test
@pytest.mark.parametrize("case", ["17 rows", "rope rows broadcast", "residual broadcast", "norm weight broadcast",
                                  "fp32 weight, fp16 input"])
def test_inputs_the_kernel_does_not_index_run_the_torch_implementation(case):
    """The kernel computes one 16-row tile, reads cos/sin, the residual and the norm weight as [M, rope_dim],
    [M, N] and [K] without broadcasting, and multiplies weights of the input's dtype: other inputs (which the pass
    never gives it, but the op accepts) get the torch implementation's result (or its error, as eager's mixed-dtype
    matmul), not rows left unwritten, values read past the operands' ends or a product eager refuses."""
    torch.manual_seed(0)
    rows = gemv.MAX_ROWS + 1 if case == "17 rows" else 1 if case.startswith("fp32") else 3
    dtype = torch.float16 if case.startswith("fp32") else torch.float32  # (bf16 tl.dot: wrong in the interpreter)
    x = torch.randn(rows, 32, dtype=dtype, device=DEVICE)
    w0, w1 = (torch.randn(16, 32, dtype=dtype, device=DEVICE) / 6 for _ in range(2))
    if case.startswith("fp32"):
        w0 = w0.float()
    nw = torch.rand(1 if case == "norm weight broadcast" else 32, dtype=dtype, device=DEVICE) + 0.5
    cos, sin, rope = None, None, (0, 0)
    if case == "rope rows broadcast":  # one position's table for every row: eager broadcasts it
        angle = torch.rand(1, 4, device=DEVICE) * 6
        cos, sin = (f(torch.cat([angle, angle], -1)).to(dtype) for f in (torch.cos, torch.sin))
        rope = (8, 2)
    residual = torch.randn(1, 16, dtype=dtype, device=DEVICE) if case == "residual broadcast" else None
    w1 = None if residual is not None else w1
    nw = None if residual is not None else nw
    args = (x, w0, w1, None, nw, 1e-6, 0.0, True, residual, False, cos, sin, *rope)
    if case.startswith("fp32"):
        for run in (gemv.reference, torch.ops.fusion_passes.decode_gemv):
            with pytest.raises(RuntimeError, match="same dtype"):
                run(*args)
        return
    got = torch.ops.fusion_passes.decode_gemv(*args)
    want = gemv.reference(*args)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_rope_needs_concatenated_head_multiples():
    x, w = torch.randn(1, 8), torch.randn(12, 8)
    cos = sin = torch.ones(1, 8)
    with pytest.raises(ValueError, match="rope"):
        torch.ops.fusion_passes.decode_gemv(x, w, None, None, None, 1e-6, 0.0, True, None, False, cos, sin, 8, 1)


@kernel_test
@pytest.mark.parametrize("batch, seq, positions", [(1, 1, [5]), (2, 1, [0]), (1, 3, [2, 3, -1]), (2, 2, [6, 7])])
@pytest.mark.parametrize("rope", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("loop", ["tiled", "acc1d", "persistent", "persistent-one"])
def test_kv_write_epilogue_stores_exactly_the_heads(batch, seq, positions, rope, dtype, loop, monkeypatch):
    """decode_gemv_kv_write gives decode_gemv's output bit for bit and leaves in the K/V caches exactly what HF's
    ``cache.index_copy_(2, pos, heads)`` leaves (negative positions count from the end, as index_put's do);
    the q output and every other cache row are untouched."""
    if DEVICE == "cpu" and dtype == torch.bfloat16 and batch * seq > 1:
        pytest.skip("the interpreter's bf16 tl.dot is wrong; covered on GPU")
    _force_loop(monkeypatch, loop, batch * seq)
    torch.manual_seed(0)
    k, d, heads, kv_heads, length = 64, 16, 4, 2, 8
    rows = batch * seq
    x = torch.randn(rows, k, dtype=dtype, device=DEVICE)
    wq, wk, wv = (torch.randn(h * d, k, dtype=dtype, device=DEVICE) / k**0.5 for h in (heads, kv_heads, kv_heads))
    nw = torch.rand(k, dtype=dtype, device=DEVICE) + 0.5
    cos, sin = (f(torch.rand(rows, d, device=DEVICE) * 6).to(dtype) if rope else None for f in (torch.cos, torch.sin))
    pos = torch.tensor(positions, device=DEVICE)
    caches = [torch.randn(batch, kv_heads, length, d, dtype=dtype, device=DEVICE) for _ in range(2)]
    expected, before = [c.clone() for c in caches], caches[0].clone()
    common = (x, wq, wk, wv, nw, 1e-6, 0.0, True)
    rope_args = (cos, sin, d, 2) if rope else (None, None, 0, 0)
    got = torch.ops.fusion_passes.decode_gemv_kv_write(*common, *rope_args, None, *caches, pos)
    want = torch.ops.fusion_passes.decode_gemv(*common, None, False, *rope_args)
    assert torch.equal(got, want)
    gemv.write_cache_reference(want, [heads * d, kv_heads * d, kv_heads * d], [None, *expected], pos)
    for c, e in zip(caches, expected):
        assert torch.equal(c, e)
    written = torch.zeros(length, dtype=torch.bool)
    written[pos.cpu()] = True
    assert not torch.equal(caches[0][:, :, written], before[:, :, written])  # it did write


@kernel_test
@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("present", [(True, True, True), (True, False, True), (False, True, False)])
@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("loop", ["tiled", "persistent", "persistent-one"])
def test_bias_epilogue(rows, dtype, present, rope, loop, monkeypatch):
    """bias_i is added to output i in fp32 before its one rounding (as eager's addmm) and before the rotation
    (Qwen2's q/k/v); any subset of the outputs may have one; the late-norm form adds it after its 1/rms scale (the
    persistent form has no late norm: it normalises x once, exactly)."""
    if DEVICE == "cpu" and dtype == torch.bfloat16 and rows > 1:
        pytest.skip("the interpreter's bf16 tl.dot is wrong; covered on GPU")
    _force_loop(monkeypatch, loop, rows)
    torch.manual_seed(0)
    k, d, widths = 96, 16, (64, 32, 32)
    x = torch.randn(rows, k, dtype=dtype, device=DEVICE)
    ws = [(torch.randn(n, k, dtype=dtype, device=DEVICE) / k**0.5) for n in widths]
    nw = torch.rand(k, dtype=dtype, device=DEVICE) + 0.5
    bs = [torch.randn(n, dtype=dtype, device=DEVICE) if p else None for n, p in zip(widths, present)]
    angle = torch.rand(rows, d // 2, device=DEVICE) * 6
    cos, sin = (f(torch.cat([angle, angle], -1)).to(dtype) for f in (torch.cos, torch.sin))
    rope_args = (cos, sin, d, 2) if rope else (None, None, 0, 0)
    got = torch.ops.fusion_passes.decode_gemv(x, *ws, nw, 1e-6, 0.0, True, None, False, *rope_args, *bs)
    plain = _reference64(x, ws, nw, 1e-6, None, False, True, biases=bs)
    want = plain
    if rope:
        parts = list(plain.split(list(widths), 1))
        want = torch.cat([_rope64(p, cos, sin, dtype) if i < 2 else p for i, p in enumerate(parts)], 1)
    err = (got.double() - want).abs().max().item()
    assert err <= TOL[dtype] * max(want.abs().max().item(), 1.0), err
    unbiased = torch.ops.fusion_passes.decode_gemv(x, *ws, nw, 1e-6, 0.0, True, None, False, *rope_args)
    moved = (got - unbiased).abs().double().split(list(widths), 1)
    for p, m in zip(present, moved):  # each bias reached its own output only
        assert (m.max().item() > 10 * TOL[dtype]) == p
    if rows == 1:  # the cache-writing form adds them the same way, bit for bit
        caches = [torch.zeros(1, 2, 8, d, dtype=dtype, device=DEVICE) for _ in range(2)]
        pos = torch.tensor([3], device=DEVICE)
        kv = torch.ops.fusion_passes.decode_gemv_kv_write(x, *ws, nw, 1e-6, 0.0, True, *rope_args, None, *caches,
                                                          pos, False, *bs)
        assert torch.equal(kv, got)
        assert torch.equal(caches[0][0, :, 3].reshape(-1), got[0, 64:96])
        from fusion_passes.kernels import gemv_table

        monkeypatch.setenv(gemv_table.NORM_POLICY_ENV, "late")
        x3 = x * 3  # rms ~3: a bias scaled by 1/rms with the dot would be off by a third of itself
        late = torch.ops.fusion_passes.decode_gemv(x3, *ws, nw, 1e-6, 0.0, True, None, False, *rope_args, *bs)
        want3 = _reference64(x3, ws, nw, 1e-6, None, False, True, biases=bs)
        if rope:
            parts = list(want3.split(list(widths), 1))
            want3 = torch.cat([_rope64(p, cos, sin, dtype) if i < 2 else p for i, p in enumerate(parts)], 1)
        assert (late.double() - want3).abs().max().item() <= TOL[dtype] * max(want3.abs().max().item(), 1.0)


def test_biases_are_checked():
    x, w = torch.randn(1, 8), torch.randn(4, 8)
    with pytest.raises(ValueError, match="bias0 must be \\[4\\]"):
        torch.ops.fusion_passes.decode_gemv(x, w, w, None, None, 1e-6, 0.0, True, None, False, None, None, 0, 0,
                                            torch.randn(5))
    with pytest.raises(ValueError, match="concatenated outputs"):
        torch.ops.fusion_passes.decode_gemv(x, w, w, None, None, 1e-6, 0.0, True, None, True, None, None, 0, 0,
                                            torch.randn(4))


@kernel_test
@pytest.mark.parametrize("batch, seq, base, shape", [(1, 1, 5, []), (2, 2, 6, [1]), (1, 3, -3, [])])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("loop", ["tiled", "acc1d", "persistent", "persistent-one"])
def test_kv_write_from_a_base_position(batch, seq, base, shape, dtype, loop, monkeypatch):
    """index_base: the positions are base + arange(S) (HF StaticCache's ``arange(S) + cumulative_length``); the
    caches end as they do with the positions given one by one, bit for bit."""
    if DEVICE == "cpu" and dtype == torch.bfloat16 and batch * seq > 1:
        pytest.skip("the interpreter's bf16 tl.dot is wrong; covered on GPU")
    _force_loop(monkeypatch, loop, batch * seq)
    torch.manual_seed(0)
    k, d, heads, kv_heads, length = 64, 16, 4, 2, 8
    x = torch.randn(batch * seq, k, dtype=dtype, device=DEVICE)
    wq, wk, wv = (torch.randn(h * d, k, dtype=dtype, device=DEVICE) / k**0.5 for h in (heads, kv_heads, kv_heads))
    cos, sin = (f(torch.rand(batch * seq, d, device=DEVICE) * 6).to(dtype) for f in (torch.cos, torch.sin))
    caches = [torch.randn(batch, kv_heads, length, d, dtype=dtype, device=DEVICE) for _ in range(2)]
    expected = [c.clone() for c in caches]
    args = (x, wq, wk, wv, None, 1e-6, 0.0, True, cos, sin, d, 2, None)
    got = torch.ops.fusion_passes.decode_gemv_kv_write(*args, *caches, torch.tensor(base, device=DEVICE).reshape(shape),
                                                       True)
    want = torch.ops.fusion_passes.decode_gemv_kv_write(*args, *expected, base + torch.arange(seq, device=DEVICE))
    assert torch.equal(got, want)
    for c, e in zip(caches, expected):
        assert torch.equal(c, e)


@kernel_test
@pytest.mark.parametrize("batch, seq", [(1, 1), (2, 1)])
@pytest.mark.parametrize("rope", [True, False])
@pytest.mark.parametrize("loop", ["tiled", "persistent", "persistent-one"])
def test_kv_write_can_leave_the_cached_outputs_out_of_y(batch, seq, rope, loop, monkeypatch):
    """``cached_y=False``: k and v reach the caches only; q's columns and the caches are what the shipped launch
    leaves, bit for bit, and k/v's columns of y are not written (they keep a sentinel)."""
    _force_loop(monkeypatch, loop, batch * seq)
    torch.manual_seed(0)
    dtype, k, d, heads, kv_heads, length = torch.float32, 64, 16, 4, 2, 8
    rows = batch * seq
    x = torch.randn(rows, k, dtype=dtype, device=DEVICE)
    wq, wk, wv = (torch.randn(h * d, k, dtype=dtype, device=DEVICE) / k**0.5 for h in (heads, kv_heads, kv_heads))
    cos, sin = (f(torch.rand(rows, d, device=DEVICE) * 6).to(dtype) if rope else None for f in (torch.cos, torch.sin))
    rope_args = (cos, sin, d, 2) if rope else (None, None, 0, 0)
    pos = torch.tensor([3], device=DEVICE)
    caches = [torch.zeros(batch, kv_heads, length, d, dtype=dtype, device=DEVICE) for _ in range(2)]
    full = torch.ops.fusion_passes.decode_gemv_kv_write(x, wq, wk, wv, None, 1e-6, 0.0, True, *rope_args, None,
                                                        *caches, pos)
    expected = [c.clone() for c in caches]
    for c in caches:
        c.zero_()
    y = torch.full_like(full, 12345.0)
    gemv._launch(x, wq, wk, wv, None, 1e-6, 0.0, True, None, False, y, *rope_args, caches=(None, *caches),
                 cache_index=pos, cached_y=False)
    q = heads * d
    assert torch.equal(y[:, :q], full[:, :q])
    assert bool((y[:, q:] == 12345.0).all())  # k and v: not stored
    for c, e in zip(caches, expected):
        assert torch.equal(c, e) and bool(e.abs().sum() > 0)


def test_kv_write_checks_the_cache_shapes():
    x, w = torch.randn(2, 8), torch.randn(16, 8)
    pos = torch.tensor([0])
    with pytest.raises(ValueError, match="does not hold 2 rows"):  # 2 rows, 1 position: needs a batch of 2
        torch.ops.fusion_passes.decode_gemv_kv_write(x, w, w, None, None, 1e-6, 0.0, True, None, None, 0, 0,
                                                     None, torch.zeros(1, 2, 4, 8), None, pos)
    with pytest.raises(ValueError, match="index_base needs one integer position"):
        torch.ops.fusion_passes.decode_gemv_kv_write(x, w, w, None, None, 1e-6, 0.0, True, None, None, 0, 0,
                                                     None, torch.zeros(2, 2, 4, 8), None, torch.tensor([0, 1]), True)
    with pytest.raises(ValueError, match="its weight"):
        torch.ops.fusion_passes.decode_gemv_kv_write(x, w, None, None, None, 1e-6, 0.0, True, None, None, 0, 0,
                                                     None, torch.zeros(2, 2, 4, 8), None, pos)
    # the kernel reads positions as integers: a bool (eager's index_put takes it as a mask) or float index would be
    # cast to one; eager's index_copy_ refuses both
    for index, base in ((torch.tensor([True, False]), False), (torch.tensor([1.0, 2.0]), False),
                        (torch.tensor(True), True)):
        with pytest.raises(ValueError, match="integer positions"):
            torch.ops.fusion_passes.decode_gemv_kv_write(x, w, w, None, None, 1e-6, 0.0, True, None, None, 0, 0,
                                                         None, torch.zeros(1, 2, 4, 8), None, index, base)


def _meta(form: str) -> dict:
    """The constexpr flags of a launch of ``gemv_table`` form ``form``."""
    return dict(CACHE_MASK=6 if form == "kv" else 0, SILU_MUL=form == "silu", HAS_RES=form == "res",
                ROPE=form in ("rope", "kv"))


def _one_config(kernel) -> tuple:
    [c] = kernel.configs
    kw = c.kwargs  # the table's entries name ACC1D only when set or followed by PERSIST, PERSIST only when set,
    # PDL_PRELOAD only when not 1
    extra = (kw["ACC1D"], kw["PERSIST"]) if kw["PERSIST"] else (kw["ACC1D"],) if kw["ACC1D"] else ()
    extra += (kw["PDL_PRELOAD"],) if kw["PDL_PRELOAD"] != 1 else ()
    return (kw["BLOCK_N"], kw["BLOCK_K"], kw["PREFETCH"], c.num_warps, c.num_stages, *extra)


@pytest.mark.parametrize("persist, warps, cap", [(3, 8, 80), (4, 8, 64), (6, 4, 80), (8, 4, 64), (2, 4, 255)])
def test_persistent_configs_cap_registers_so_every_program_fits_one_sm(persist, warps, cap):
    """PERSIST programs of num_warps warps share an SM's 64K registers (8-register units): the cap is the most each
    thread may use; a tiled config (PERSIST 0) is left alone."""
    config = dict(BLOCK_N=1, BLOCK_K=4096, PREFETCH=True, ACC1D=True, PERSIST=persist, num_warps=warps, num_stages=1)
    assert gemv._with_register_cap(config) == {**config, "maxnreg": cap}
    tiled = dict(config, PERSIST=0)
    assert gemv._with_register_cap(tiled) == tiled


@pytest.mark.autotuners
@pytest.mark.skipif(not gemv.HAS_TRITON or gemv.INTERPRETED, reason="inspects the autotuners of the compiled kernel")
def test_m1_launch_runs_the_measured_config_of_its_device_and_shape(monkeypatch):
    """Every table entry is launched as one fixed config on its device; the same shape elsewhere, an unlisted shape,
    a caller choosing the loop itself, or FUSION_PASSES_GEMV_TABLE=off get the autotuner, except the cache-writing
    form, which never autotunes (Inductor would clone both caches before every timing)."""
    from fusion_passes.kernels import gemv_table

    cuda = torch.device("cuda", 0)
    assert set(gemv_table.PERSISTENT) <= set(gemv_table.TABLE)  # each overrides a measured tiled entry
    for (device, form, k, n0, n1, n2), entry in gemv_table.TABLE.items():
        monkeypatch.setattr(gemv, "_device_name", lambda _, name=device: name)
        persistent = gemv_table.PERSISTENT.get((device, form, k, n0, n1, n2), entry)
        kernel = gemv._m1_kernel(cuda, _meta(form), k, n0, n1, n2, None)
        assert _one_config(kernel) == persistent
        # in the config's kwargs, which Inductor's code for the kernel keeps (test_compile_for_hopper checks the fit)
        assert ("maxnreg" in kernel.configs[0].kwargs) == (persistent is not entry)
        monkeypatch.setenv(gemv_table.POLICY_ENV, "tiled")
        assert _one_config(gemv._m1_kernel(cuda, _meta(form), k, n0, n1, n2, None)) == entry
        monkeypatch.delenv(gemv_table.POLICY_ENV)
        assert gemv._m1_kernel(cuda, _meta(form), k + 64, n0, n1, n2, None) is (
            gemv._fixed_kernel(gemv_table.KV_FALLBACK) if form == "kv" else gemv._gemv_m1[gemv.PREFETCH])
        monkeypatch.setattr(gemv, "_device_name", lambda _: "NVIDIA A100-SXM4-80GB")
        assert len(gemv._m1_kernel(cuda, _meta(form), k, n0, n1, n2, None).configs) == (1 if form == "kv" else 39)
    monkeypatch.setattr(gemv, "_device_name", lambda _: "NVIDIA H200")
    assert gemv._m1_kernel(cuda, _meta("silu"), 2048, 8192, 8192, 0, False) is gemv._gemv_m1[False]
    assert _one_config(gemv._m1_kernel(cuda, _meta("kv"), 2048, 2048, 512, 512, False)) == gemv_table.KV_FALLBACK
    monkeypatch.setenv(gemv_table.POLICY_ENV, "off")
    assert gemv._m1_kernel(cuda, _meta("silu"), 2048, 8192, 8192, 0, None) is gemv._gemv_m1[gemv.PREFETCH]
    assert _one_config(gemv._m1_kernel(cuda, _meta("kv"), 2048, 2048, 512, 512, None)) == gemv_table.KV_FALLBACK
    monkeypatch.setenv(gemv_table.POLICY_ENV, "of")
    with pytest.raises(ValueError, match="FUSION_PASSES_GEMV_TABLE='of'; use one of on, tiled, off"):
        gemv._m1_kernel(cuda, _meta("silu"), 2048, 8192, 8192, 0, None)


@pytest.mark.parametrize("gpu,by_default", [("NVIDIA H100 80GB HBM3", "NVIDIA H200"), ("NVIDIA H100 PCIe", None),
                                             ("NVIDIA A100-SXM4-80GB", None), ("NVIDIA H200", "NVIDIA H200")])
def test_table_device_setting_looks_the_configs_up_as_on_that_gpu(monkeypatch, gpu, by_default):
    """By default an H100 SXM takes the H200's entries (gemv_table.SAME_CONFIGS: same SMs and architecture) and
    every other GPU its own; FUSION_PASSES_GEMV_TABLE_DEVICE=own keeps any GPU to its own, ="NVIDIA H200" gives any
    GPU the H200's entries (and beats_cublas the H200's verdicts); a name with no entries is an error that lists
    the valid ones."""
    from fusion_passes.kernels import gemv_table

    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: gpu)
    monkeypatch.delenv(gemv_table.DEVICE_POLICY_ENV, raising=False)
    assert gemv._device_name(cuda) == (by_default or gpu)
    monkeypatch.setenv(gemv_table.DEVICE_POLICY_ENV, "own")
    assert gemv._device_name(cuda) == gpu
    monkeypatch.setenv(gemv_table.DEVICE_POLICY_ENV, "NVIDIA H200")
    assert gemv._device_name(cuda) == "NVIDIA H200"
    assert gemv_table.lookup(gemv._device_name(cuda), _meta("silu"), 2048, 8192, 8192, 0) == (
        gemv_table.PERSISTENT[("NVIDIA H200", "silu", 2048, 8192, 8192, 0)])
    monkeypatch.setenv(gemv_table.DEVICE_POLICY_ENV, "H200")
    with pytest.raises(ValueError, match="FUSION_PASSES_GEMV_TABLE_DEVICE='H200'; use one of auto, own, NVIDIA H200"):
        gemv._device_name(cuda)


@pytest.mark.autotuners
@pytest.mark.skipif(not gemv.HAS_TRITON or gemv.INTERPRETED, reason="inspects the autotuners of the compiled kernel")
def test_pdl_launches_take_their_own_persistent_entries_with_a_program_for_every_block(monkeypatch):
    """Launched with PDL, a shape ``gemv_table.PDL_PERSISTENT`` lists runs that entry (with the table on; its
    tiled entries under FUSION_PASSES_GEMV_TABLE=tiled), plain launches the usual one. Each such entry gives every
    column block a program of its own on a 132-SM GPU, so each program requests all its weight rows before
    griddepcontrol.wait."""
    from fusion_passes.kernels import gemv_table

    cuda = torch.device("cuda", 0)
    assert gemv_table.PDL_PERSISTENT
    for key, entry in gemv_table.PDL_PERSISTENT.items():
        device, form, k, n0, n1, n2 = key
        assert key in gemv_table.TABLE  # overrides a measured entry
        monkeypatch.setattr(gemv, "_device_name", lambda _, name=device: name)
        plain = gemv_table.PERSISTENT.get(key, gemv_table.TABLE[key])
        assert _one_config(gemv._m1_kernel(cuda, {**_meta(form), "PDL": True}, k, n0, n1, n2, None)) == entry
        assert _one_config(gemv._m1_kernel(cuda, {**_meta(form), "PDL": False}, k, n0, n1, n2, None)) == plain
        monkeypatch.setenv(gemv_table.POLICY_ENV, "tiled")
        assert gemv_table.lookup(device, {**_meta(form), "PDL": True}, k, n0, n1, n2) == gemv_table.TABLE[key]
        monkeypatch.delenv(gemv_table.POLICY_ENV)
        config = gemv_table.as_config(entry)
        pair = 2 if form in ("rope", "kv") else 1
        blocks = sum(-(-n // pair // config["BLOCK_N"]) for n in (n0, n1, n2) if n)
        assert blocks <= 132 * config["PERSIST"], (form, blocks)


def test_table_entries_are_launchable_tiles():
    """Powers of two the kernel's aranges accept; BLOCK_K no longer than K (a tile past K only loads zeros), except
    the persistent form's, which holds the whole row: the power of two at or above K."""
    from fusion_passes.kernels import gemv_table

    for (_, form, k, *_), (n, bk, prefetch, warps, stages, *rest) in [
            *gemv_table.TABLE.items(), *gemv_table.PERSISTENT.items(), *gemv_table.PDL_PERSISTENT.items(),
            (("", "kv", 2048), gemv_table.KV_FALLBACK)]:
        assert form in ("rope", "kv", "res", "silu", "cat")
        for v in (n, bk, warps):
            assert v & (v - 1) == 0
        assert isinstance(prefetch, bool) and 1 <= stages <= 4
        persistent = len(rest) >= 2
        assert rest in ([], [True], [False]) or (persistent and isinstance(rest[0], bool) and rest[1] >= 1)
        assert len(rest) <= 2 or (len(rest) == 3 and rest[2] in (1, 2))  # PDL_PRELOAD
        assert (k <= bk < 2 * k) if persistent else bk <= k
    # a shape taken from cuBLAS runs the config it was measured with, never one autotuned on L2-hot weights
    for key, (ours, cublas) in gemv_table.BEATS_CUBLAS.items():
        assert key in gemv_table.TABLE and ours < cublas, key


@pytest.mark.autotuners
@pytest.mark.skipif(not gemv.HAS_TRITON or gemv.INTERPRETED, reason="inspects the autotuners of the compiled kernel")
def test_autotuner_offers_both_m1_loops_and_the_plain_one_alone():
    """Neither M = 1 loop won on every H200 shape, so the default autotuner gets both, and the prefetching loop
    also reducing each tile; the dot tile gets none."""
    def forms(tuner):
        return {(c.kwargs["PREFETCH"], c.kwargs["ACC1D"]) for c in tuner.configs}

    assert forms(gemv._gemv_m1[True]) == {(False, False), (True, False), (True, True)}
    assert forms(gemv._gemv_m1[False]) == {(False, False)}
    assert forms(gemv._gemv_m16) == {(False, False)}
    assert len(gemv._gemv_m1[True].configs) == 2 * len(gemv._gemv_m1[False].configs) + 7


def _decode_layer_args(dtype, k=96, heads=4, kv_heads=2, d=16, length=8, ffn=80):
    """One decode layer's GEMV arguments (M = 1): q/k/v with norm, RoPE and the cache write at position 5, o with
    the residual, gate/up with norm and SiLU * mul, down with the residual. Returns (calls, caches): each call is
    (op name, args) with inputs drawn at random, caches the two K/V caches the q/k/v call writes."""
    torch.manual_seed(0)
    r = lambda *s: torch.randn(*s, dtype=dtype, device=DEVICE)  # noqa: E731
    x, nw = r(1, k), torch.rand(k, dtype=dtype, device=DEVICE) + 0.5
    cos, sin = (f(torch.rand(1, d, device=DEVICE) * 6).to(dtype) for f in (torch.cos, torch.sin))
    caches = [r(1, kv_heads, length, d) for _ in range(2)]
    qkv = [r(h * d, k) / k**0.5 for h in (heads, kv_heads, kv_heads)]
    return [("decode_gemv_kv_write", (x, *qkv, nw, 1e-6, 0.0, True, cos, sin, d, 2, None, *caches,
                                      torch.tensor([5], device=DEVICE))),
            ("decode_gemv", (r(1, heads * d), r(k, heads * d) / (heads * d)**0.5, None, None, None, 1e-6, 0.0, True,
                             r(1, k), False)),
            ("decode_gemv", (x, r(ffn, k) / k**0.5, r(ffn, k) / k**0.5, None, nw, 1e-6, 0.0, True, None, True)),
            ("decode_gemv", (r(1, ffn), r(k, ffn) / ffn**0.5, None, None, None, 1e-6, 0.0, True, r(1, k), False))], caches


@kernel_test
@pytest.mark.parametrize("loop", ["tiled", "persistent", "persistent-one"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pdl_twins_compute_what_the_ops_do(loop, dtype, monkeypatch):
    """``decode_gemv_pdl`` / ``decode_gemv_kv_write_pdl`` (the ops launched with programmatic dependent launch,
    ``kernels.pdl``) give the ops' outputs bit for bit and write the caches alike: on a GPU with PDL in the kernel
    (sm_90+), in the interpreter with PDL off (it has no griddepcontrol), the same extern-op path either way."""
    _force_loop(monkeypatch, loop, 1)
    _assert_twins_equal_the_ops(dtype)


def _assert_twins_equal_the_ops(dtype) -> int:
    """Each GEMV of a decode layer by its op and by its PDL twin, from the same caches: the same output and cache
    writes, bit for bit (and the q/k/v did write). Returns the number of calls."""
    calls, caches = _decode_layer_args(dtype)
    for name, args in calls:
        op_caches, twin_caches = [c.clone() for c in caches], [c.clone() for c in caches]
        want = getattr(torch.ops.fusion_passes, name)(*_with_caches(name, args, op_caches))
        got = getattr(torch.ops.fusion_passes, name + "_pdl")(*_with_caches(name, args, twin_caches))
        assert torch.equal(got, want), name
        assert all(torch.equal(a, b) for a, b in zip(twin_caches, op_caches)), name
        assert name != "decode_gemv_kv_write" or not torch.equal(op_caches[1], caches[1])  # it did write
    return len(calls)


@kernel_test
@pytest.mark.parametrize("preload, prefetch", [(1, True), (2, True), (1, False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pdl_persistent_loop_with_blocks_preloaded_computes_what_the_op_does(preload, prefetch, dtype, monkeypatch):
    """The persistent form launched with PDL requests its config's ``PDL_PRELOAD`` blocks of weight rows before the
    wait (2: its loop keeps two blocks ahead): every layer's GEMV, bit for bit the op's output, with each program
    taking several blocks (so past the last one the preloads are masked); without PREFETCH, a program for every
    block (the launch sizes the grid so). The interpreter has no griddepcontrol: there the two instructions are
    no-ops and the kernel is compiled with PDL on all the same."""
    from fusion_passes.kernels import pdl

    _force_loop(monkeypatch, "persistent", 1)
    monkeypatch.setattr(gemv, "PDL_PRELOAD_INTERPRETED", preload)
    monkeypatch.setattr(gemv, "_m1_kernel",
                        lambda *a: gemv._fixed_kernel((4, 128, prefetch, 4, 1, True, 2, preload)))
    if DEVICE == "cpu":
        monkeypatch.setattr(gemv, "gdc_wait", _no_griddepcontrol)
        monkeypatch.setattr(gemv, "gdc_launch_dependents", _no_griddepcontrol)
        monkeypatch.setattr(pdl, "supported", lambda device: True)
    launched = []
    kernel_call = gemv._gemv_kernel.run
    monkeypatch.setattr(gemv._gemv_kernel, "run",
                        lambda *a, **kw: launched.append((kw["PDL"], kw["PDL_PRELOAD"])) or kernel_call(*a, **kw))
    calls = _assert_twins_equal_the_ops(dtype)
    assert launched.count((True, preload)) == calls  # every twin ran the PDL form, the ops the plain one


def _with_caches(name: str, args: tuple, caches: list) -> list:
    """``args`` of a ``_decode_layer_args`` call with the q/k/v call writing ``caches`` instead."""
    args = list(args)
    if name.endswith("kv_write"):
        args[13:15] = caches
    return args


def test_pdl_twins_have_the_ops_schemas():
    """Each PDL twin takes exactly its op's arguments (the pass swaps one for the other) and writes the same ones."""
    for op, twin in gemv.PDL_TWINS.items():
        assert twin._schema.name == op._schema.name + "_pdl"
        assert str(twin._schema)[len(twin._schema.name):] == str(op._schema)[len(op._schema.name):]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("loop", ["tiled", "persistent", "persistent-one", "h200-table-1b"])
def test_gpu_pdl_chain_in_a_cuda_graph_equals_the_plain_chain(loop, monkeypatch):
    """Three decode layers' GEMVs as a graphed step launches them (the first plainly, every later one with PDL, each
    reading the one before: weights loaded before the wait overlap the kernel before), captured in one CUDA graph
    and replayed: the outputs and caches equal the plain chain's bit for bit, on every replay. "h200-table-1b": the
    Llama-1B shapes with the H200's table, where the o's PDL twin runs a config of its own (``PDL_PERSISTENT``)."""
    from fusion_passes.kernels import pdl

    dims = dict(k=256, heads=8, kv_heads=2, d=32, length=16, ffn=512)
    if loop == "h200-table-1b":
        monkeypatch.setenv("FUSION_PASSES_GEMV_TABLE_DEVICE", "NVIDIA H200")
        dims = dict(k=2048, heads=32, kv_heads=8, d=64, length=64, ffn=8192)
    else:
        _force_loop(monkeypatch, loop, 1)
    calls, caches = _decode_layer_args(torch.bfloat16, **dims)
    calls = calls * 3

    def chain(twins: bool, kv: list):
        outs, prev = [], None
        for i, (name, args) in enumerate(calls):
            op = getattr(torch.ops.fusion_passes, name + ("_pdl" if twins and i else ""))
            args = _with_caches(name, args, kv)
            if prev is not None and prev.shape[1] >= args[0].shape[1]:  # read the last output: a real dependency
                args[0] = prev[:, :args[0].shape[1]]
            prev = op(*args)
            outs.append(prev)
        return outs

    plain_kv = [c.clone() for c in caches]
    want = chain(False, plain_kv)
    graph_kv = [c.clone() for c in caches]
    chain(True, graph_kv)  # compiles, outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        got = chain(True, graph_kv)
    for _ in range(3):
        g.replay()
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(got, want))
        assert all(torch.equal(a, b) for a, b in zip(graph_kv, plain_kv))
    assert pdl.supported(torch.device("cuda")) == (torch.cuda.get_device_capability() >= (9, 0))
