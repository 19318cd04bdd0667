"""The decode attention Triton kernel (GQA in-kernel, online softmax) against its torch reference.

Runs in Triton's interpreter without a GPU (re-run in a ``TRITON_INTERPRET=1`` subprocess, like the other
kernel tests), directly on CUDA. Shapes are small: the interpreter is slow.
"""

import pytest
import torch

from fusion_passes.kernels import decode_attention as kernel
from tests.kernels import run_in_interpreter

DEVICE = "cuda" if torch.cuda.is_available() else ("cpu" if kernel.INTERPRETED else None)
kernel_test = pytest.mark.skipif(DEVICE is None, reason="runs in the TRITON_INTERPRET=1 subprocess")
DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if DEVICE == "cuda" else [])  # interpreter: no bf16 dot
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}


def test_kernels_in_interpreter():
    if kernel.INTERPRETED or torch.cuda.is_available() or not kernel.HAS_TRITON:
        pytest.skip("the kernel tests run directly in this process")
    pytest.importorskip("numpy")
    run_in_interpreter(__file__, tensor_loop_bounds=True)


# (batch, heads, kv heads, q_len, k_len, head dim): GQA x4 decode, MHA with 3 query rows, odd sizes
SHAPES = [(1, 8, 2, 1, 100, 64), (2, 4, 4, 3, 40, 32), (1, 6, 2, 2, 17, 80)]


@kernel_test
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask", [None, "add", "finfo_min"])
@pytest.mark.parametrize("causal", [False, True])
def test_kernel_matches_reference(shape, dtype, mask, causal):
    b, h, hkv, sq, sk, d = shape
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, s, d, dtype=dtype, device=DEVICE) for n, s in ((h, sq), (hkv, sk), (hkv, sk)))
    m = None
    if mask == "add":
        m = torch.randn(b, 1, sq, sk, dtype=dtype, device=DEVICE)
    elif mask == "finfo_min":  # HF's static-cache mask: the unwritten tail of the cache is blocked
        m = torch.zeros(1, 1, sq, sk, dtype=dtype, device=DEVICE)
        m[..., sk // 2 :] = torch.finfo(dtype).min
    got = torch.ops.fusion_passes.decode_attention(q, k, v, m, 0.125, causal)
    want = kernel.reference(q, k, v, m, 0.125, causal)
    assert got.shape == (b, h, sq, d) and got.dtype == dtype
    torch.testing.assert_close(got.float(), want.float(), atol=TOL[dtype], rtol=TOL[dtype])


@kernel_test
@pytest.mark.parametrize("form", ["bool", "-inf"])
@pytest.mark.parametrize("sq", [1, 3])
def test_rows_that_allow_no_key_give_zero_as_sdpa_does(form, sq):
    """A left-padded prompt's first rows see no key: SDPA (safe softmax) gives 0 there, and so must the kernel
    and its reference (NaN would reach every later layer through 0 * NaN in P @ V). Several splits, GQA x4."""
    import torch.nn.functional as F

    b, h, hkv, sk, d = 2, 8, 2, 150, 32
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, s, d, device=DEVICE) for n, s in ((h, sq), (hkv, sk), (hkv, sk)))
    keep = torch.ones(b, 1, sq, sk, dtype=torch.bool, device=DEVICE)
    keep[0, :, 0] = False  # batch 0, query row 0: every key blocked
    keep[1, :, :, : sk // 2] = False  # batch 1: half the keys blocked, whole splits of them
    mask = torch.zeros(keep.shape, device=DEVICE).masked_fill(~keep, float("-inf"))
    sdpa = F.scaled_dot_product_attention(q, k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1),
                                          attn_mask=keep if form == "bool" else mask, scale=0.125)
    got = torch.ops.fusion_passes.decode_attention(q, k, v, mask, 0.125, False)
    assert not got.isnan().any() and torch.equal(got[0, :, 0], torch.zeros_like(got[0, :, 0]))
    torch.testing.assert_close(got, sdpa, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(kernel.reference(q, k, v, mask, 0.125), sdpa, atol=1e-4, rtol=1e-4)


@kernel_test
@pytest.mark.parametrize("inline", [False, True])
def test_prefetching_another_tensor_changes_no_result(inline):
    """``prefetch`` (the o-proj weight, in the pass) is only requested into L2 (on CUDA): bit-equal output, and a
    tensor whose size is no multiple of the programs' shares is fine."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 8, 1, 64, device=DEVICE), torch.randn(1, 2, 100, 64, device=DEVICE), torch.randn(
        1, 2, 100, 64, device=DEVICE)
    w = torch.randn(1000, 37, device=DEVICE)
    op = kernel.decode_attention_inline if inline else torch.ops.fusion_passes.decode_attention
    if op is None:
        pytest.skip("no triton")
    assert torch.equal(op(q, k, v, None, 0.125, False, 0.0, w), op(q, k, v, None, 0.125, False))


@kernel_test
def test_mask_as_a_strided_slice_of_a_longer_mask():
    """HF slices the mask to the key length: a non-contiguous view must be read through its strides."""
    q, k, v = torch.randn(1, 4, 1, 16, device=DEVICE), torch.randn(1, 2, 24, 16, device=DEVICE), torch.randn(
        1, 2, 24, 16, device=DEVICE)
    full = torch.randn(1, 1, 1, 40, device=DEVICE)
    m = full[..., :24]
    got = torch.ops.fusion_passes.decode_attention(q, k, v, m, 0.25, False)
    torch.testing.assert_close(got, kernel.reference(q, k, v, m.contiguous(), 0.25, False), atol=1e-4, rtol=1e-4)


@kernel_test
@pytest.mark.parametrize("mask_shape", [(24,), (1, 24), (4, 1, 24), (2, 4, 1, 24), (2, 1, 1, 1)])
def test_mask_broadcasts_from_any_rank(mask_shape):
    """The kernel reads the mask through broadcast strides (0 where a dim is 1 or missing), as eager broadcasts
    it: lower ranks, per-head masks, a per-sequence scalar."""
    torch.manual_seed(0)
    q = torch.randn(2, 4, 1, 16, device=DEVICE)
    k, v = torch.randn(2, 2, 24, 16, device=DEVICE), torch.randn(2, 2, 24, 16, device=DEVICE)
    m = torch.randn(mask_shape, device=DEVICE)
    got = torch.ops.fusion_passes.decode_attention(q, k, v, m, 0.25, False)
    want = kernel.reference(q, k, v, m.expand(2, 4, 1, 24).contiguous(), 0.25, False)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@kernel_test
@pytest.mark.skipif(not kernel.HAS_TRITON, reason="the traceable twin exists only with triton")
def test_inline_op_runs_the_same_kernels():
    """Called directly, the traceable twin (``decode_attention_inline``) launches the same kernels: equal results."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 8, 1, 32, device=DEVICE), torch.randn(1, 2, 40, 32, device=DEVICE), torch.randn(
        1, 2, 40, 32, device=DEVICE)
    m = torch.randn(1, 1, 1, 40, device=DEVICE)
    extern = torch.ops.fusion_passes.decode_attention(q, k, v, m, 0.2, False)
    inline = torch.ops.fusion_passes.decode_attention_inline(q, k, v, m, 0.2, False)
    torch.testing.assert_close(inline, extern, atol=0, rtol=0)
    torch.testing.assert_close(inline, kernel.reference(q, k, v, m, 0.2, False), atol=1e-4, rtol=1e-4)


@kernel_test
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask", [None, "finfo_min"])
def test_softcapped_scores(dtype, mask):
    """Gemma2's logit softcapping: scores = softcap * tanh(q @ k.T * scale) before the mask. Checked against the
    reference, and against a float64 computation of the formula (so the reference itself is checked too); the
    scale is large enough that the cap bends the scores (the result differs from the uncapped one)."""
    b, h, hkv, sq, sk, d = 1, 8, 2, 1, 100, 64
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, s, d, dtype=dtype, device=DEVICE) for n, s in ((h, sq), (hkv, sk), (hkv, sk)))
    m = None
    if mask:
        m = torch.zeros(1, 1, sq, sk, dtype=dtype, device=DEVICE)
        m[..., sk // 2 :] = torch.finfo(dtype).min
    scale, cap = 0.5, 4.0
    got = torch.ops.fusion_passes.decode_attention(q, k, v, m, scale, False, cap)
    want = kernel.reference(q, k, v, m, scale, False, cap)
    torch.testing.assert_close(got.float(), want.float(), atol=TOL[dtype], rtol=TOL[dtype])
    kr, vr = (t.double().repeat_interleave(h // hkv, 1) for t in (k, v))
    s = cap * torch.tanh(q.double() @ kr.transpose(-1, -2) * scale) + (0 if m is None else m.double())
    exact = torch.softmax(s, -1) @ vr
    torch.testing.assert_close(got.double(), exact, atol=TOL[dtype], rtol=TOL[dtype])
    uncapped = torch.ops.fusion_passes.decode_attention(q, k, v, m, scale, False)
    assert (uncapped.float() - got.float()).abs().max() > 10 * TOL[dtype]
    if kernel.decode_attention_inline is not None:
        inline = torch.ops.fusion_passes.decode_attention_inline(q, k, v, m, scale, False, cap)
        torch.testing.assert_close(inline, got, atol=0, rtol=0)


@kernel_test
@pytest.mark.parametrize("kv_batch", ["k and v", "v only"])
def test_kv_of_batch_one_broadcasts_over_the_query_batch(kv_batch):
    """SDPA (whose decode-sized calls the pass gives this op) and the reference broadcast a K/V batch of 1 over the
    query's batch (one cache shared by every sequence); the kernel indexes K/V by the query's batch, so it must
    read that one sequence for all of them, not memory past the cache's end."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    q = torch.randn(3, 4, 1, 16, device=DEVICE)
    k = torch.randn(1 if kv_batch == "k and v" else 3, 2, 30, 16, device=DEVICE)
    v = torch.randn(1, 2, 30, 16, device=DEVICE)
    got = torch.ops.fusion_passes.decode_attention(q, k, v, None, 0.25, False)
    sdpa = F.scaled_dot_product_attention(q, k, v, scale=0.25, enable_gqa=True)
    torch.testing.assert_close(got, sdpa, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(kernel.reference(q, k, v, None, 0.25), sdpa, atol=1e-4, rtol=1e-4)


@kernel_test
@pytest.mark.parametrize("empty", ["batch", "keys"])
def test_empty_batch_or_cache_gives_the_references_result(empty):
    """Nothing to launch: the op returns what its torch implementation does (an empty batch; zeros for no keys, as
    SDPA's safe softmax gives for rows that allow no key) instead of failing in the grid arithmetic."""
    b, sk = (0, 30) if empty == "batch" else (2, 0)
    q = torch.randn(b, 4, 1, 16, device=DEVICE)
    k, v = (torch.randn(b, 2, sk, 16, device=DEVICE) for _ in range(2))
    got = torch.ops.fusion_passes.decode_attention(q, k, v, None, 0.25, False)
    assert torch.equal(got, kernel.reference(q, k, v, None, 0.25)) and got.shape == (b, 4, 1, 16)


@pytest.mark.parametrize("keys, fits", [(2**21, True), (2**21 + 1, False)])
def test_offsets_past_int32_inside_one_head_run_the_torch_implementation(keys, fits):
    """The kernel adds int32 offsets to an int64 base per (batch, KV head): a [B, L, H, D] cache whose rows of
    one sequence span 2**31 elements or more must go to the torch implementation (meta tensors: no memory)."""
    q = torch.empty(1, 8, 1, 128, device="meta")
    k = torch.empty(1, keys, 8, 128, device="meta").transpose(1, 2)  # row stride 8 * 128
    v = torch.empty(1, 8, 16, 128, device="meta")
    assert kernel._offsets_fit(q, k, v, None) is fits
    # a mask slice [1, 8, 1, 16] of a wider one: head 7 starts 7 * its width in (any head from the batch's base)
    width = 2**28 if fits else 2**29
    assert kernel._offsets_fit(q, v, v, torch.empty(1, 8, 1, width, device="meta")[..., :16]) is fits


@pytest.mark.gpu
def test_cache_of_more_than_2_31_elements_is_indexed_in_int64():
    """b * stride(0) of a cache with 2**31 elements or more passes int32: batch 2 of a [3, 1, 2**23, 128] cache
    starts at element 2**31 (6 GiB per bf16 cache)."""
    if not torch.cuda.is_available() or torch.cuda.mem_get_info()[0] < 24 * 2**30:
        pytest.skip("needs a CUDA device with 24 GiB free")
    torch.manual_seed(0)
    q = torch.randn(3, 2, 1, 128, dtype=torch.bfloat16, device="cuda")
    k, v = (torch.empty(3, 1, 2**23, 128, dtype=torch.bfloat16, device="cuda").normal_() for _ in range(2))
    got = torch.ops.fusion_passes.decode_attention(q, k, v, None, 128**-0.5, False)
    for b in range(3):
        want = kernel.reference(q[b:b + 1], k[b:b + 1], v[b:b + 1], None, 128**-0.5)
        torch.testing.assert_close(got[b:b + 1], want, atol=3e-3, rtol=3e-2)


def test_operands_of_different_dtypes_are_refused_as_sdpa_does():
    q = torch.randn(1, 2, 1, 16)
    k, v = torch.randn(1, 2, 8, 16, dtype=torch.float64), torch.randn(1, 2, 8, 16)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    with pytest.raises(ValueError, match="one dtype"):
        torch.ops.fusion_passes.decode_attention(q, k, v, None, 0.25, False)


@kernel_test
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mask", [None, "add"])
def test_pdl_launch_computes_what_the_plain_launch_does(shape, mask):
    """``pdl=True`` (both kernels launched with programmatic dependent launch where the GPU has it, ``kernels.pdl``;
    the interpreter runs them plainly) gives the plain launch's output bit for bit, back to back with the plain
    launch on the same stream."""
    b, h, hkv, sq, sk, d = shape
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, s, d, device=DEVICE) for n, s in ((h, sq), (hkv, sk), (hkv, sk)))
    m = torch.randn(b, 1, sq, sk, device=DEVICE) if mask else None
    want = torch.ops.fusion_passes.decode_attention(q, k, v, m, 0.125, False)
    got = torch.ops.fusion_passes.decode_attention(q, k, v, m, 0.125, False, pdl=True)
    assert torch.equal(got, want)
    again = torch.ops.fusion_passes.decode_attention(got.expand(b, h, sq, d).contiguous(), k, v, m, 0.125, False,
                                                     pdl=True)  # reads what the PDL launch before it wrote
    assert torch.equal(again, torch.ops.fusion_passes.decode_attention(want, k, v, m, 0.125, False))
