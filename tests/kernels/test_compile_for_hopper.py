"""The Triton kernels compile for Hopper (sm_90) down to a cubin, without a GPU.

The interpreter tests check what the kernels compute, but the interpreter never runs Triton's compiler. This file
does: it compiles every mode of each kernel ahead of time for an H100/H200 target with the ptxas bundled in the
triton wheel. A kernel change that only the GPU compiler rejects then fails here, on CPU, before it reaches a GPU.
"""

import os
import re
import subprocess
import sys
import tempfile
from typing import Optional

import pytest

triton = pytest.importorskip("triton")

try:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except ImportError:  # pragma: no cover - an older or unusual triton build
    GPUTarget = None

from fusion_passes.kernels import LAUNCH_OPTIONS, decode_attention, gemv, gemv_table

pytestmark = pytest.mark.skipif(
    GPUTarget is None or not gemv.HAS_TRITON or gemv.INTERPRETED, reason="needs triton's compiler (not the interpreter)"
)

HOPPER = dict(backend="cuda", arch=90, warp_size=32)


def compile_for_hopper(fn, types: dict, constexprs: dict, aligned: tuple = (), **options) -> dict:
    """Compile the @triton.jit (or @gluon.jit) ``fn`` for sm_90 with the options our launches request
    (``kernels.LAUNCH_OPTIONS``, then ``options``); ``types``: argument -> triton type ("*bf16", "i32",
    "fp32", "tensordesc<...>"),
    every other argument is a constexpr from ``constexprs`` (None where the kernel takes an absent tensor).
    ``aligned``: arguments known to be multiples of 16, as Triton's launcher specialises them at run time."""
    names = fn.arg_names
    sig = {n: types.get(n, "constexpr") for n in names}
    const = {(i,): constexprs.get(n) for i, n in enumerate(names) if sig[n] == "constexpr"}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    try:
        source = ASTSource
        if getattr(fn, "is_gluon", lambda: False)():
            from triton.experimental.gluon._runtime import GluonASTSource as source
        kernel = triton.compile(source(fn=fn, signature=sig, constexprs=const, attrs=attrs),
                                target=GPUTarget(**HOPPER), options={**LAUNCH_OPTIONS, **options})
    except RuntimeError as e:  # ptxas missing from this triton build: nothing to check here
        if "ptxas" in str(e).lower():
            pytest.skip(f"no ptxas: {e}")
        raise
    # every rounding eager does happens in our kernels too: no product fused into an add at half precision, which
    # LLVM does to a product rounded to bf16 / fp16 that feeds an add (gemv._kept)
    assert not re.findall(r"\bfma\.rn\.(?:bf16|f16)", kernel.asm["ptx"]), fn.__name__
    return kernel.asm


GEMV_MODES = {
    # name: (CONCAT_W, HAS_NORM, SILU_MUL, HAS_RES, ROPE, CACHE_MASK[, BIAS_MASK])
    "qkv+norm": (3, True, False, False, False, 0),
    "qkv+bias+norm+rope+kv_write": (3, True, False, False, True, 6, 7),  # Qwen2's q/k/v
    "qkv+bias on q, v+norm": (3, True, False, False, False, 0, 5),
    "qkv+norm+rope": (3, True, False, False, True, 0),
    "qkv+norm+rope+kv_write": (3, True, False, False, True, 6),
    "qkv+norm+rope+kv_write+index_base": (3, True, False, False, True, 6),
    "gate_up+silu": (1, True, True, False, False, 0),
    "gate_up+gelu_tanh": (1, True, True, False, False, 0),  # Gemma's GeGLU (GELU_TANH from the name)
    "o+residual": (1, False, False, True, False, 0),
    "lm_head": (1, True, False, False, False, 0),
}


def gemv_flags(**flags) -> dict:
    """The GEMV kernel's constexprs: ``flags`` over every flag off (a flag added to the kernel gets a default here
    once, not at every call)."""
    return dict(CONCAT_W=1, HAS_NORM=False, NORM_LATE=False, NORM_CAST=True, NORM_OFFSET=False, SILU_MUL=False,
                GELU_TANH=False, HAS_RES=False, BIAS_MASK=0, ROPE=False, ROPE_DIM=0, CACHE_MASK=0, HEAD_DIM=1,
                IDX_BASE=False, CACHED_Y=True, PREFETCH=False, ACC1D=False, PERSIST=0, IEEE_F32=False, PDL=False,
                PDL_PRELOAD=1) | flags


def gemv_types(dtype: str) -> dict:
    """The GEMV kernel's always-present arguments (no norm weight, residual, rope tables or caches)."""
    ints = ["M", "K", "N0", "N1", "N2", "stride_x", "stride_r", "stride_y", "stride_cs", "rope_weights", "seq_len",
            "cache_len", "sc_b", "sc_h", "sc_l", "sc_d"]
    return {**{n: f"*{dtype}" for n in ("X", "W0", "W1", "W2", "Y")}, **{n: "i32" for n in ints},
            "eps": "fp32", "norm_offset": "fp32"}


@pytest.mark.parametrize("block_m, prefetch, acc1d, norm_late", [
    (1, False, False, False), (1, True, False, False), (1, True, True, False), (1, True, True, True),
    (1, False, False, True), (16, False, False, False)])
@pytest.mark.parametrize("mode", sorted(GEMV_MODES))
def test_decode_gemv_compiles(mode, block_m, prefetch, acc1d, norm_late):
    concat, norm, silu, res, rope, cache_mask, bias_mask = (*GEMV_MODES[mode], 0)[:7]
    if norm_late and not norm:
        pytest.skip("the late-norm form needs a norm")
    types = gemv_types("bf16")
    if norm:
        types["NW"] = "*bf16"
    if res:
        types["R"] = "*bf16"
    if rope:
        types.update(COS="*bf16", SIN="*bf16")
    if cache_mask:
        types.update(C1="*bf16", C2="*bf16", IDX="*i64")
    if bias_mask:
        types.update(B0="*bf16", B1="*bf16", B2="*bf16")
    asm = compile_for_hopper(gemv._gemv_kernel, types, gemv_flags(
        CONCAT_W=concat, HAS_NORM=norm, NORM_CAST=True, NORM_OFFSET=False, SILU_MUL=silu, HAS_RES=res, ROPE=rope,
        CACHE_MASK=cache_mask, IDX_BASE=mode.endswith("index_base"), BLOCK_M=block_m, BLOCK_N=16, BLOCK_K=256,
        ROPE_DIM=64 if rope else 0, HEAD_DIM=64 if cache_mask else 1, PREFETCH=prefetch, ACC1D=acc1d,
        NORM_LATE=norm_late, BIAS_MASK=bias_mask, GELU_TANH="gelu" in mode),
        num_warps=4,
        num_stages=3, aligned=[n for n, t in types.items() if t.startswith("*") or n in ("K", "stride_x", "stride_y")])
    assert "cubin" in asm and ".target sm_90" in asm["ptx"]
    if block_m > 1:  # Triton pipelines the loads that feed tl.dot through shared memory
        assert "cp.async" in asm["ptx"]
        return
    # with K a multiple of 16 the weight rows stream as 16-byte loads; a scalar load here costs half the bandwidth
    weight_loads = re.findall(r"ld\.global\.L1::evict_first\S*", asm["ptx"])
    assert weight_loads and all(".v4." in ld for ld in weight_loads), sorted(set(weight_loads))
    if prefetch:  # the next K tile is in flight while this one is reduced: twice the weight loads in the loop body
        plain = compile_for_hopper(gemv._gemv_kernel, types, gemv_flags(
            CONCAT_W=concat, HAS_NORM=norm, NORM_CAST=True, NORM_OFFSET=False, SILU_MUL=silu, HAS_RES=res,
            ROPE=rope, CACHE_MASK=cache_mask, BLOCK_M=block_m, BLOCK_N=16, BLOCK_K=256, PREFETCH=False,
            ROPE_DIM=64 if rope else 0, HEAD_DIM=64 if cache_mask else 1,
            ACC1D=acc1d, NORM_LATE=norm_late, BIAS_MASK=bias_mask, GELU_TANH="gelu" in mode),
            num_warps=4, num_stages=3,
            aligned=[n for n, t in types.items() if t.startswith("*") or n in ("K", "stride_x", "stride_y")])
        assert len(weight_loads) == 2 * len(re.findall(r"ld\.global\.L1::evict_first\S*", plain["ptx"]))


def cuobjdump(cubin: bytes, option: str) -> str:
    """What ``cuobjdump <option>`` (bundled with triton) prints for the cubin; skips where the triton build has no
    cuobjdump."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        pytest.skip("no cuobjdump in this triton build")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, option, f.name], capture_output=True, text=True).stdout


def sass(cubin: bytes) -> list[str]:
    """The kernel's SASS instructions in order, each without its predicate (``@P0 LDG...`` -> ``LDG...``)."""
    found = re.finditer(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", cuobjdump(cubin, "-sass"))
    return [re.sub(r"^@!?U?P\w+\s+", "", m.group(1)) for m in found]


def before_and_after_the_wait(cubin: bytes) -> tuple[list[str], list[str]]:
    """A PDL kernel's SASS split at its griddepcontrol.wait (``ACQBULK``); it must have one, and let the next
    kernel launch (``PREEXIT``: griddepcontrol.launch_dependents) before it."""
    ins = sass(cubin)
    waits = [i for i, s in enumerate(ins) if s.startswith("ACQBULK")]
    assert waits, "no griddepcontrol.wait"
    assert any(s.startswith("PREEXIT") for s in ins[:waits[0]]), "no griddepcontrol.launch_dependents before the wait"
    return ins[:waits[0]], ins[waits[0]:]


def registers_per_thread(cubin: bytes) -> tuple[int, int]:
    """The kernel's registers and stack bytes per thread (spills go to the stack), as ``cuobjdump
    --dump-resource-usage`` reads the cubin."""
    found = re.search(r"REG:(\d+) STACK:(\d+)", cuobjdump(cubin, "--dump-resource-usage"))
    return int(found.group(1)), int(found.group(2))


def table_launch(form: str, k: int, widths: tuple, head_dim: int) -> tuple[dict, dict, list]:
    """types, constexprs and aligned arguments of a ``gemv_table`` form's M = 1 launch at a decode step, specialised
    as Triton's launcher does (M, S and the caches' last stride are 1, so constexprs)."""
    types = gemv_types("bf16")
    for one in ("M", "seq_len", "sc_d"):
        del types[one]
    rope, kv = form in ("rope", "kv"), form == "kv"
    if form != "res":
        types["NW"] = "*bf16"
    if form == "res":
        types["R"] = "*bf16"
    if rope:
        types.update(COS="*bf16", SIN="*bf16")
    if kv:
        types.update(C1="*bf16", C2="*bf16", IDX="*i64")
    flags = gemv_flags(CONCAT_W=len(widths) if form in ("rope", "kv", "cat") else 1, HAS_NORM=form != "res",
                       SILU_MUL=form == "silu", HAS_RES=form == "res", ROPE=rope, ROPE_DIM=head_dim if rope else 0,
                       CACHE_MASK=6 if kv else 0, HEAD_DIM=head_dim if kv else 1, BLOCK_M=1, M=1, seq_len=1, sc_d=1)
    aligned = [n for n, t in types.items() if t.startswith("*")] + ["K", "N0", "stride_x", "stride_y"]
    return types, flags, aligned


# every persistent entry, as (key, from PDL_PERSISTENT): those are launched with PDL only
PERSISTENT_ENTRIES = [*((key, False) for key in sorted(gemv_table.PERSISTENT, key=str)),
                      *((key, True) for key in sorted(gemv_table.PDL_PERSISTENT, key=str))]


def entry_id(entry) -> str:
    key, pdl_only = entry
    return ("pdl-" if pdl_only else "") + "-".join(map(str, key[1:]))


def compile_persistent_entry(entry: tuple, changes: Optional[dict] = None) -> tuple[dict, dict, dict]:
    """A persistent entry of ``PERSISTENT_ENTRIES`` compiled for sm_90 as its launch runs it (``changes`` to the
    config applied before the register cap; a ``PDL_PERSISTENT`` entry always with PDL): (asm, the kernel's
    config, the compiler options)."""
    key, pdl_only = entry
    _, form, k, *widths = key
    table = gemv_table.PDL_PERSISTENT if pdl_only else gemv_table.PERSISTENT
    changes = {**({"PDL": True} if pdl_only else {}), **(changes or {})}
    config = gemv._with_register_cap({**gemv_table.as_config(table[key]), **changes})
    options = {name: config.pop(name) for name in ("num_warps", "num_stages", "maxnreg")}
    types, flags, aligned = table_launch(form, k, tuple(w for w in widths if w), head_dim=64 if k == 2048 else 128)
    asm = compile_for_hopper(gemv._gemv_kernel, types, {**flags, **config}, aligned=aligned, **options)
    return asm, config, options


@pytest.mark.parametrize("entry", PERSISTENT_ENTRIES, ids=entry_id)
def test_persistent_table_entries_fit_their_programs_on_one_sm(entry):
    """A persistent config launches PERSIST programs per SM, each taking every P-th column block. If their registers
    do not let all of them reside at once, the last ones start only when others finish: a second wave, which cost
    the cache-writing q/k/v 2-7 us per call on the H200 before session 26. Hopper: 64K registers per SM, allocated
    per warp in units of 8 registers per thread. Registers differ between Triton versions (triton 3.8 put the 1B
    down at 86, one past the fit), so the launch caps them (``gemv._with_register_cap``); compiled as launched, each
    entry must fit, and without spilling."""
    asm, config, options = compile_persistent_entry(entry)
    regs, stack = registers_per_thread(asm["cubin"])
    per_sm, warps = config["PERSIST"], options["num_warps"]
    assert per_sm * warps * 32 * -(-regs // 8) * 8 <= gemv.REGISTERS_PER_SM, (regs, per_sm, warps)
    assert stack == 0, f"the register cap spills: {stack} bytes of stack a thread"


def test_cache_writing_persistent_loop_divides_by_no_runtime_value():
    """ROPE_DIM and HEAD_DIM are constexprs: the per-block column math (head, column in head, rotation pair) is then
    shifts and masks. As run-time arguments they put integer divisions in every block of the persistent loop."""
    types, flags, aligned = table_launch("kv", 4096, (4096, 1024, 1024), head_dim=128)
    config = dict(BLOCK_N=1, BLOCK_K=4096, PREFETCH=True, ACC1D=True, PERSIST=4)
    ptx = compile_for_hopper(gemv._gemv_kernel, types, {**flags, **config}, aligned=aligned, num_warps=8,
                             num_stages=1)["ptx"]
    assert ".target sm_90" in ptx
    assert not re.findall(r"\b(?:div|rem)\.[su](?:32|64)\b", ptx), sorted(set(re.findall(r"\b(?:div|rem)\.\S+", ptx)))


@pytest.mark.parametrize("form, widths", [("kv", (4096, 1024, 1024)), ("rope", (4096, 1024, 1024)),
                                          ("silu", (14336, 14336))])
def test_two_row_persistent_blocks_reduce_once(form, widths):
    """Blocks of two rows per output (the RoPE pair, gate and up) sum both rows' products in one reduction: as many
    barriers as the one-row form (q/k/v without RoPE). Two separate sums cost the 1B q/k/v 0.4-0.7 us a call on the
    H200 (``logs/s27_run1``, ``s27_run2``)."""
    config = dict(BLOCK_N=1, BLOCK_K=4096, PREFETCH=True, ACC1D=True, PERSIST=3)

    def barriers(form, widths):
        types, flags, aligned = table_launch(form, 4096, widths, head_dim=128)
        ptx = compile_for_hopper(gemv._gemv_kernel, types, {**flags, **config}, aligned=aligned, num_warps=8,
                                 num_stages=1)["ptx"]
        return len(re.findall(r"\bbar\.sync\b", ptx))

    assert barriers(form, widths) == barriers("cat", (4096, 1024, 1024))


def attention_types(dtype: str, scale: str = "fp32") -> dict:
    """The attention kernel's argument types (no mask), ``dtype`` for q/k/v; ``scale``: how the launcher passes
    the Python float (Triton's own launcher: fp32; Inductor's generated code: fp64)."""
    ints = ["sq_b", "sq_h", "sq_s", "sk_b", "sk_h", "sk_s", "sv_b", "sv_h", "sv_s", "sm_b", "sm_h", "sm_q", "sm_k",
            "H_KV", "SQ", "SK", "D", "DV", "CHUNK"]
    return {"Q": f"*{dtype}", "K": f"*{dtype}", "V": f"*{dtype}", "scale": scale, "softcap": scale, "M_PART": "*fp32",
            "L_PART": "*fp32", "ACC_PART": "*fp32", "PF": "*bf16", **{n: "i32" for n in [*ints, "PF_N"]}}


@pytest.mark.parametrize("mask, causal, scale, softcap", [(True, False, "fp32", False), (False, True, "fp32", False),
                                                          (True, False, "fp64", False), (True, False, "fp64", True)])
def test_decode_attention_compiles(mask, causal, scale, softcap):
    types = attention_types("bf16", scale)
    if mask:
        types["MASK"] = "*bf16"
    asm = compile_for_hopper(decode_attention._decode_attention_kernel, types, dict(
        GROUP=4, HAS_MASK=mask, IS_CAUSAL=causal, SOFTCAP=softcap, BLOCK_M=16, BLOCK_N=64, BLOCK_D=64, BLOCK_DV=64),
        num_warps=4)
    assert "cubin" in asm
    combine = {"M_IN": "*fp32", "L_IN": "*fp32", "ACC_IN": "*fp32", "OUT": "*bf16",
               **{n: "i32" for n in ("so_b", "so_h", "so_s", "H_KV", "SQ", "DV", "N_SPLITS")}}
    asm = compile_for_hopper(decode_attention._combine_kernel, combine, dict(GROUP=4, BLOCK_M=16, BLOCK_S=32,
                                                                             BLOCK_DV=64), num_warps=4)
    assert "cubin" in asm


@pytest.mark.parametrize("prefetch", [False, True])
def test_decode_attention_requests_the_prefetch_tensors_lines_only_when_asked(prefetch):
    """PREFETCH: one PTX L2 prefetch per 128-byte line of the program's share (here 128 lines per loop trip)."""
    ptx = compile_for_hopper(decode_attention._decode_attention_kernel, attention_types("bf16"), dict(
        GROUP=4, HAS_MASK=False, IS_CAUSAL=False, SOFTCAP=False, BLOCK_M=16, BLOCK_N=64, BLOCK_D=64, BLOCK_DV=64,
        PREFETCH=prefetch, PF_PER=2 * 128 * 64, PF_LINE=64), num_warps=4)["ptx"]
    assert ("prefetch.global.L2::evict_last" in ptx) == prefetch


@pytest.mark.parametrize("ieee", [False, True])
def test_fp32_dots_use_tf32_only_when_allowed(ieee):
    """With fp32 inputs Triton's tl.dot defaults to TF32; IEEE_F32 (set unless the user allows TF32, as eager's
    fp32 matmuls do) must leave no TF32 tensor-core instruction in the 16-row GEMV tile or the attention kernel."""
    types = {**gemv_types("fp32"), "NW": "*fp32"}
    gemv_ptx = compile_for_hopper(gemv._gemv_kernel, types, gemv_flags(
        CONCAT_W=1, HAS_NORM=True, NORM_CAST=True, NORM_OFFSET=False, SILU_MUL=True, HAS_RES=False, ROPE=False,
        CACHE_MASK=0, BLOCK_M=16, BLOCK_N=16, BLOCK_K=64, PREFETCH=False, IEEE_F32=ieee), num_warps=4, num_stages=2)["ptx"]
    attn_ptx = compile_for_hopper(decode_attention._decode_attention_kernel, attention_types("fp32"), dict(
        GROUP=4, HAS_MASK=False, IS_CAUSAL=False, BLOCK_M=16, BLOCK_N=64, BLOCK_D=64, BLOCK_DV=64,
        IEEE_F32=ieee), num_warps=4)["ptx"]
    for ptx in (gemv_ptx, attn_ptx):
        assert ("tf32" in ptx) != ieee


def test_ieee_fp32_dot_follows_the_users_tf32_setting():
    import torch

    from fusion_passes.kernels import ieee_fp32_dot

    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert ieee_fp32_dot(torch.float32) and not ieee_fp32_dot(torch.bfloat16)
        torch.backends.cuda.matmul.allow_tf32 = True
        assert not ieee_fp32_dot(torch.float32)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old



@pytest.mark.parametrize("entry", PERSISTENT_ENTRIES, ids=entry_id)
def test_pdl_persistent_gemv_reads_only_weights_before_the_wait(entry):
    """Launched with PDL (``kernels.pdl``) a persistent program lets the next kernel launch, requests its first
    block's weight rows (its first two with ``PDL_PRELOAD`` 2: twice the loads) as evict-first
    loads and the norm weight as plain ones (parameters, which no kernel of the step writes), and only then waits
    for the kernel before it: every other load (x, the residual, cos / sin, the cache positions: what earlier
    kernels write) and every store comes after the wait. Right after it, the first block's residual or cos / sin
    are requested before x (a few elements a block, narrower than x's 16-byte loads), so their round trip overlaps
    x's. Compiled with PDL off, neither instruction is there; and with it on, the entry as the table has it still
    fits its programs on one SM without spilling."""
    asm, config, options = compile_persistent_entry(entry, {"PDL": True})
    before, after = before_and_after_the_wait(asm["cubin"])
    _, form, k, *_ = entry[0]
    loads = [s.split()[0] for s in before if s.startswith("LDG")]
    norm_loads = -(-k * 2 // (options["num_warps"] * 32 * 16)) if form != "res" else 0  # bf16 row, 16 B a load
    assert [op for op in loads if ".EF" not in op] == ["LDG.E.128"] * norm_loads, loads
    assert any(".EF" in op for op in loads), loads
    assert not [s for s in before if s.startswith(("STG", "LDS", "STS", "ATOM", "RED"))]
    after_loads = [s.split()[0] for s in after if s.startswith("LDG") and ".EF" not in s.split()[0]]
    assert after_loads  # x and the rest
    if form in ("res", "rope", "kv"):
        assert after_loads[0] != "LDG.E.128" and "LDG.E.128" in after_loads, after_loads
    regs, stack = registers_per_thread(asm["cubin"])
    assert config["PERSIST"] * options["num_warps"] * 32 * -(-regs // 8) * 8 <= gemv.REGISTERS_PER_SM and stack == 0
    # two blocks (PDL_PRELOAD 2, which no entry sets yet: gemv_table says why): twice the loads, the same order;
    # without PREFETCH a program holds one block whatever PDL_PRELOAD says
    two, _, _ = compile_persistent_entry(entry, {"PDL": True, "PDL_PRELOAD": 2})
    before_two, _ = before_and_after_the_wait(two["cubin"])
    loads_two = [s.split()[0] for s in before_two if s.startswith("LDG")]
    weights_one, weights_two = ([op for op in found if ".EF" in op] for found in (loads, loads_two))
    blocks = 2 if config["PREFETCH"] else 1
    assert len(weights_two) == blocks * len(weights_one) and len(loads_two) - len(weights_two) == norm_loads, loads_two
    assert not [s for s in before_two if s.startswith(("STG", "LDS", "STS", "ATOM", "RED"))]
    plain, _, _ = compile_persistent_entry(entry, {"PDL": False})
    assert not [s for s in sass(plain["cubin"]) if s.startswith(("ACQBULK", "PREEXIT"))]


@pytest.mark.parametrize("mode", ["qkv+norm+rope+kv_write", "gate_up+silu", "o+residual"])
def test_pdl_tiled_gemv_waits_before_any_load(mode):
    """The tiled form has no whole block of rows to hold: with PDL it waits first thing (its gain is the launch
    hidden behind the kernel before)."""
    concat, norm, silu, res, rope, cache_mask = GEMV_MODES[mode][:6]
    types = gemv_types("bf16")
    types.update({"NW": "*bf16"} if norm else {}, **({"R": "*bf16"} if res else {}))
    if rope:
        types.update(COS="*bf16", SIN="*bf16", C1="*bf16", C2="*bf16", IDX="*i64")
    asm = compile_for_hopper(gemv._gemv_kernel, types, gemv_flags(
        CONCAT_W=concat, HAS_NORM=norm, SILU_MUL=silu, HAS_RES=res, ROPE=rope, CACHE_MASK=cache_mask,
        ROPE_DIM=64 if rope else 0, HEAD_DIM=64 if cache_mask else 1, BLOCK_M=1, BLOCK_N=4, BLOCK_K=1024,
        PREFETCH=True, PDL=True), num_warps=4, num_stages=2, aligned=[n for n, t in types.items() if t[0] == "*"])
    before, _ = before_and_after_the_wait(asm["cubin"])
    assert not [s for s in before if s.startswith(("LDG", "STG"))], before


def test_pdl_decode_attention_waits_before_any_load():
    """The attention and its combine kernel read only what the kernels before them write: with PDL each lets the
    next kernel launch (the o GEMV may then load its weights) and waits before its first load."""
    types = {**attention_types("bf16"), "MASK": "*bf16"}
    kernels = [(decode_attention._decode_attention_kernel, types, dict(
        GROUP=4, HAS_MASK=True, IS_CAUSAL=False, SOFTCAP=False, BLOCK_M=16, BLOCK_N=64, BLOCK_D=64, BLOCK_DV=64,
        PREFETCH=False, PF_PER=0, PF_LINE=1, PDL=True)),
        (decode_attention._combine_kernel, {"M_IN": "*fp32", "L_IN": "*fp32", "ACC_IN": "*fp32", "OUT": "*bf16",
                                            **{n: "i32" for n in ("so_b", "so_h", "so_s", "H_KV", "SQ", "DV",
                                                                  "N_SPLITS")}},
         dict(GROUP=4, BLOCK_M=16, BLOCK_S=32, BLOCK_DV=64, PDL=True))]
    for kernel, kinds, constexprs in kernels:
        before, after = before_and_after_the_wait(compile_for_hopper(kernel, kinds, constexprs, num_warps=4)["cubin"])
        assert not [s for s in before if s.startswith(("LDG", "STG"))], (kernel, before)
        assert any(s.startswith("LDG") for s in after)


def test_launch_options_keep_the_fmas_whatever_tritons_default(monkeypatch):
    """Compiled with ``kernels.LAUNCH_OPTIONS``, as every launch is, the 1B q/k/v in the step's form (persistent,
    PDL, cache write) has the same PTX whatever Triton's default for FP fusion, which Triton 3.10 turns off. Without
    them, under that default, none of its products is fused into an add (24 FMAs with triton 3.9, then none)."""
    entry = next(e for e in PERSISTENT_ENTRIES if entry_id(e) == "kv-2048-2048-512-512")

    def ptx(default: str, options: dict) -> str:
        monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", default)
        monkeypatch.setattr(sys.modules[__name__], "LAUNCH_OPTIONS", options)
        return compile_persistent_entry(entry, {"PDL": True})[0]["ptx"]

    fused = ptx("1", LAUNCH_OPTIONS)
    assert re.findall(r"\bfma\.rn\.f32\b", fused)
    assert ptx("0", LAUNCH_OPTIONS) == fused
    assert not re.findall(r"\bfma\.rn\.f32\b", ptx("0", {}))
