"""Measured M = 1 decode GEMV configs, per device and weight shape: launched as they are, without autotuning.

Inductor's autotuner picks a config by calling each one again and again on the same weights (L2-hot for a 1B
model's linears), so its pick is not always the fastest in a decode step, where every weight comes from HBM once;
it also compiles and times every config, and for the cache-writing form it clones both KV caches before each
timing, which drowns the difference it measures. ``benchmarks/bench_gemv_configs.py`` times every config with the
weights streamed from HBM; its fastest per linear are below (``logs/s9_run2/configs_*.log``, H200: in-step time
per layer 43.9 us for the 1B shapes against 46.1 us for the autotuner's picks). Session 12 re-timed every entry
against the loop that reduces each tile (ACC1D) and added the lm_heads; where an ACC1D config won, the comment
gives it against the previous entry (``logs/s12_run6/gemv_configs_acc1d_*.json``).

Session 17 measured the kernel's persistent form (``gemv``'s module doc) the same way; where it was faster than the
table's tiled entry, ``PERSISTENT`` overrides that entry. ``FUSION_PASSES_GEMV_TABLE=tiled`` keeps the tiled entries
(for measuring the two side by side).

Shapes not listed here (other models, other GPUs) are autotuned as before, except the cache-writing form, which
always runs a fixed config (``KV_FALLBACK``). ``FUSION_PASSES_GEMV_TABLE=off`` autotunes listed shapes too.

``FUSION_PASSES_GEMV_NORM=late`` (default ``exact``) runs the M = 1 launches with a norm in the kernel's late-norm
form (``gemv``'s module doc): no prologue pass over the input, not eager's roundings; for measuring it. On the
H200 it measured slower (session 14, ``gemv_chain_normlate_*.json``: 1B chain 0.767 vs 0.729 ms, 8B 3.891 vs
3.755 ms; its q/k/v gain, gate/up and the lm_head lose more). Session 60 had the persistent form honour it too (it ran
the exact form there): on an H100 with PDL the graphed 1B step took 0.98 vs 1.02 ms and the 8B was no faster, and the
1B q/k/v with the cache write was no faster (``logs/s60_run0`` to ``s60_run2``).
"""

from __future__ import annotations

from typing import Optional

POLICY_ENV = "FUSION_PASSES_GEMV_TABLE"
POLICIES = ("on", "tiled", "off")
# Whose configs a GPU looks up: "auto" its own, or SAME_CONFIGS' GPU where it is listed; "own" its own; a GPU's
# name: that GPU's (on any GPU: for measuring)
DEVICE_POLICY_ENV = "FUSION_PASSES_GEMV_TABLE_DEVICE"
DEVICE_POLICIES = ("auto", "own", "NVIDIA H200")
# GPUs whose entries are another's: the H100 SXM has the H200's SM count, architecture and register file, and its
# graphed 1B decode step (session 48, logs/s48_run2) took 1.113 ms with the H200's entries against 1.227 with its
# GEMVs autotuned (1.036 against 1.133 with PDL); its own were never measured
SAME_CONFIGS = {"NVIDIA H100 80GB HBM3": "NVIDIA H200"}
NORM_POLICY_ENV = "FUSION_PASSES_GEMV_NORM"
NORM_POLICIES = ("exact", "late")

# (device name, form, K, N0, N1, N2) -> (BLOCK_N, BLOCK_K, PREFETCH, num_warps, num_stages[, ACC1D[, PERSIST[,
# PDL_PRELOAD]]]) (the last: PERSISTENT below).
# form: "rope" (norm + q/k/v, q and k rotated), "kv" (the same + k/v cache stores), "res" (+ residual),
# "silu" (norm + silu(gate) * up), "cat" (concatenated outputs).
TABLE = {
    # llama-1b (hidden 2048, 32 heads, 8 KV heads of 64, FFN 8192)
    ("NVIDIA H200", "rope", 2048, 2048, 512, 512): (2, 1024, True, 4, 1, True),  # 5.95 vs 6.25 us
    ("NVIDIA H200", "kv", 2048, 2048, 512, 512): (4, 1024, False, 4, 3),
    ("NVIDIA H200", "res", 2048, 2048, 0, 0): (2, 1024, False, 4, 2),
    ("NVIDIA H200", "silu", 2048, 8192, 8192, 0): (2, 1024, True, 4, 1, True),  # 19.47 vs 20.42 us
    ("NVIDIA H200", "res", 8192, 2048, 0, 0): (4, 1024, True, 8, 2),
    ("NVIDIA H200", "cat", 2048, 128256, 0, 0): (4, 1024, True, 4, 2, True),  # lm_head: 118.7 vs 121.3 us
    # llama-8b (hidden 4096, 32 heads, 8 KV heads of 128, FFN 14336)
    ("NVIDIA H200", "rope", 4096, 4096, 1024, 1024): (4, 1024, True, 4, 2),
    ("NVIDIA H200", "kv", 4096, 4096, 1024, 1024): (8, 512, False, 4, 3),
    ("NVIDIA H200", "res", 4096, 4096, 0, 0): (4, 1024, True, 4, 1, True),  # 10.97 vs 11.19 us
    ("NVIDIA H200", "silu", 4096, 14336, 14336, 0): (2, 1024, True, 4, 1, True),  # 57.3 vs 60.3 us
    ("NVIDIA H200", "res", 14336, 4096, 0, 0): (4, 1024, True, 4, 3),
    ("NVIDIA H200", "cat", 4096, 128256, 0, 0): (4, 2048, True, 4, 2, True),  # lm_head: 237.7 vs 252.0 us
    # qwen2-1.5b (hidden 1536, 12 heads, 2 KV heads of 128, FFN 8960; logs/s14_run4: the fastest with BLOCK_K <= K,
    # against the autotuner's pick)
    ("NVIDIA H200", "rope", 1536, 1536, 256, 256): (4, 1024, False, 4, 2),  # 4.89 vs 5.38 us
    ("NVIDIA H200", "res", 1536, 1536, 0, 0): (2, 1024, True, 4, 2),  # 3.58 vs 3.71 us
    ("NVIDIA H200", "silu", 1536, 8960, 8960, 0): (8, 256, True, 4, 4),  # the autotuner's pick (17.76 us)
    ("NVIDIA H200", "res", 8960, 1536, 0, 0): (2, 1024, False, 4, 2),  # 9.80 vs 9.93 us
    # gemma-2b (hidden 2048, 8 heads, 1 KV head of 256, FFN 16384; its o shares llama-1b's entry, the fastest there
    # too: logs/s14_run5; gate/up (GeGLU, same bytes as the silu form) and the 256K lm_head: logs/s15_run4)
    ("NVIDIA H200", "rope", 2048, 2048, 256, 256): (2, 1024, True, 4, 2, True),  # 5.64 us, the autotuner's 5.63
    ("NVIDIA H200", "res", 16384, 2048, 0, 0): (2, 2048, True, 4, 2, True),  # 18.51 vs 19.28 us
    ("NVIDIA H200", "silu", 2048, 16384, 16384, 0): (2, 1024, True, 4, 1, True),  # 33.64 us
    ("NVIDIA H200", "cat", 2048, 256000, 0, 0): (4, 1024, True, 4, 3, True),  # 228.11 vs the autotuner's 238.58 us
    # The cache-writing q/k/v of Qwen2 and Gemma measured fastest at KV_FALLBACK's config (with BLOCK_K <= K:
    # 5.02 and 5.90 us; logs/s15_run4), so they need no entry.
}  # fmt: skip

# The persistent form where it measured faster than the entry above (logs/s17_run8, s17_run9:
# bench_gemv_configs --persistent-only, both in one run; us per call in a CUDA graph, weights streamed from HBM).
# It lost on the 1B o (4.39 vs 4.35), the 8B down (32.86 vs 30.97: its 14336-wide row needs a 16384-wide tile) and
# the lm_heads (1B 120.9 vs 119.4), so those keep their tiled entries. It also lost on the cache-writing q/k/v until
# session 26 (1B 7.42 vs 6.46 us, 8B 18.01 vs 16.45): its per-block column math divided by rope_dim and head_dim,
# run-time arguments then (sm_90, Triton 3.9: 379 instructions per block and 80 registers, against 318 and 64 with
# both constexprs). With them constexprs it won there, in two runs on two machines (logs/s26_run3,
# gemv_configs_constdims_*.json: the kernel before and after, per model in alternation; logs/s26_run7, every
# persistent config; us: run 3 / run 7 against the tiled entry's). The 8B takes 3 programs per SM, not 4: as fast
# within the runs' noise (16.02 / 16.61 us), and at 63 registers 4 programs of 8 warps fill the register file
# exactly, so a compiler that needs one register more would spill under the launch's register cap
# (gemv._with_register_cap); 3 leave room up to 80. (The 8B RoPE form measured 15.46 us at 4 against 15.79 at 3
# in run 3, within that noise: it stays at 3.)
# In the persistent form PREFETCH (the third field) requests each next block's rows before this one is reduced; without
# it the launch gives every block a program of its own (PDL_PERSISTENT's entries).
# An eighth field, PDL_PRELOAD (default 1): launched with PDL (``kernels.pdl``) the program requests that many blocks
# of weight rows before griddepcontrol.wait. 2 measured no faster than 1 in the H100's 1B decode step (1.032 vs 1.036
# ms) and slower per GEMV (1B q/k/v chain 62.2 vs 76.7 % of the copy bandwidth; session 48, logs/s48_run2), so no
# entry sets it (session 47's "differs bit for bit" was the probe's NaN inputs). Gate/up and the 1B down would
# spill with two beside the norm prologue (sm_90).
PERSISTENT = {
    ("NVIDIA H200", "rope", 2048, 2048, 512, 512): (1, 2048, True, 4, 1, True, 6),  # 6.01 vs 6.43 us
    ("NVIDIA H200", "kv", 2048, 2048, 512, 512): (1, 2048, True, 4, 1, True, 6),  # 6.40 / 6.51 vs 6.52 / 6.67 us
    ("NVIDIA H200", "silu", 2048, 8192, 8192, 0): (1, 2048, True, 4, 1, True, 8),  # 19.10 vs 19.33 us
    ("NVIDIA H200", "res", 8192, 2048, 0, 0): (1, 8192, True, 8, 1, True, 3),  # 10.56 vs 11.09 us
    ("NVIDIA H200", "rope", 4096, 4096, 1024, 1024): (1, 4096, True, 8, 1, True, 3),  # 15.98 vs 17.89 us
    ("NVIDIA H200", "kv", 4096, 4096, 1024, 1024): (1, 4096, True, 8, 1, True, 3),  # 16.33 / 16.18 vs 16.21 / 17.48
    ("NVIDIA H200", "res", 4096, 4096, 0, 0): (2, 4096, True, 8, 1, True, 3),  # 10.43 vs 11.06 us
    ("NVIDIA H200", "silu", 4096, 14336, 14336, 0): (1, 4096, True, 8, 1, True, 4),  # 55.74 vs 57.74 us
}  # fmt: skip

# Launched with PDL, the persistent entry to run instead of the above, with a program for every block of rows, so
# each program requests all its weight rows before the wait, as session 45's probe kernel did. Since session 49 such
# an entry has PREFETCH False: the launch then sizes the grid with a program for every block (PERSIST only sets the
# register cap: PERSIST programs of a SM must fit, and 132 * PERSIST must cover the blocks), and each program holds
# one block, not the loop's second for the next one, and skips the loop (sm_90, the 1B o's entry: 53 registers and
# 206 instructions after the wait, against 71 and 434 for session 48's; which of these made it faster was not
# measured). Measured on an H100 with the H200's entries, us per call in a chain of PDL twins
# (benchmarks/probe_pdl_preload.py --pdl-candidates): session 48 (PREFETCH on, logs/s48_run5) 4 rows a block at 4
# programs an SM 4.00 vs 4.65 us for the plain entry's twin; session 49 (logs/s49_run6), 2 rows a block at 8 an SM
# 3.24 us (85.7 % of the copy bandwidth) against 3.89 for session 48's entry and 4.67 without one; the graphed 1B
# decode step 0.983 ms pipelined (logs/s49_run7). Every q/k/v candidate was slower than its plain entry's PDL twin
# (session 48: 2-8 pairs a block with PREFETCH, best 6.18 vs 5.49 us; session 49 without it: 5.56-6.00 vs 5.24),
# so the q/k/v have none. Session 50's one-warp program (two rotary pairs a block) was faster, 5.04-5.24 against
# 5.23-5.30 us, but it sums each row in another order than the plain entry's four warps (the PDL launch would no
# longer equal the plain one bit for bit), and as the plain entry too it is slower there (7.09 vs 6.68 us;
# logs/s50_run6). With a one-warp persistent loop as the plain entry the twin does equal it bit for bit (session 51,
# logs/s51_run0: 5.03-5.08 vs 5.28 us), but those loops take 7.44-8.34 us against 6.79 for the plain entry's.
PDL_PERSISTENT = {
    ("NVIDIA H200", "res", 2048, 2048, 0, 0): (2, 2048, False, 4, 1, True, 8),  # the 1B o: 3.24 vs 4.67 us
}  # fmt: skip

# M = 1 shapes of 128 MiB of weights and more, where cuBLAS used to be faster (``patterns.decode_gemv`` leaves such
# weights to it) but the table's config measured faster on this device: (ours, cuBLAS) in us per call with the
# weights streamed from HBM (ours: logs/s12_run6/gemv_configs_acc1d_*.json; cuBLAS: gemv_h200_torch2.11.0.json).
BEATS_CUBLAS = {
    ("NVIDIA H200", "cat", 2048, 128256, 0, 0): (118.7, 126.0),  # llama-1b lm_head (+ the final norm folded)
    ("NVIDIA H200", "silu", 4096, 14336, 14336, 0): (57.3, 61.0),  # llama-8b gate/up (+ norm, silu * mul)
    ("NVIDIA H200", "cat", 4096, 128256, 0, 0): (237.7, 247.7),  # llama-8b lm_head
    # ours: logs/s15_run4/gemv_configs_gemma-2b_more.json; cuBLAS: logs/s15_run3/gemv_gemma_qwen2.json
    ("NVIDIA H200", "silu", 2048, 16384, 16384, 0): (33.64, 36.77),  # gemma-2b gate/up (+ norm, gelu_tanh * mul)
    ("NVIDIA H200", "cat", 2048, 256000, 0, 0): (228.11, 246.02),  # gemma-2b lm_head (+ the final norm folded)
}

# The cache-writing form's config where the table has none (the 1B q/k/v shape's runner-up, within 0.1 us).
KV_FALLBACK = (4, 1024, False, 4, 2)


def policy() -> str:
    from ..patterns import env_policy  # the registry's helper: one parser and error for every setting

    return env_policy(POLICY_ENV, POLICIES)


def device_policy() -> str:
    from ..patterns import env_policy

    return env_policy(DEVICE_POLICY_ENV, DEVICE_POLICIES)


def norm_policy() -> str:
    from ..patterns import env_policy

    return env_policy(NORM_POLICY_ENV, NORM_POLICIES)


def form(meta: dict) -> str:
    """The table's form name for a launch's constexpr flags."""
    if meta["CACHE_MASK"]:
        return "kv"
    if meta["SILU_MUL"]:
        return "silu"
    if meta["HAS_RES"]:
        return "res"
    return "rope" if meta["ROPE"] else "cat"


def as_config(entry: tuple) -> dict:
    """A table entry as the kernel's config: BLOCK_N, BLOCK_K, PREFETCH, ACC1D, PERSIST, PDL_PRELOAD, num_warps,
    num_stages."""
    n, bk, prefetch, warps, stages, *rest = entry
    acc1d, persist, preload = (list(rest) + [False, 0, 1][len(rest):])[:3]
    return dict(BLOCK_N=n, BLOCK_K=bk, PREFETCH=prefetch, ACC1D=bool(acc1d), PERSIST=persist, PDL_PRELOAD=preload,
                num_warps=warps, num_stages=stages)


def beats_cublas(device_name: str, form: str, k: int, n0: int, n1: int, n2: int) -> bool:
    """A large M = 1 shape where the table's config measured faster than cuBLAS on this device (table on)."""
    return policy() != "off" and (device_name, form, k, n0, n1, n2) in BEATS_CUBLAS


def lookup(device_name: str, meta: dict, k: int, n0: int, n1: int, n2: int) -> Optional[tuple]:
    """The measured config of an M = 1 launch, or None (not listed, or the table is off); with ``meta["PDL"]``
    (launched with PDL) ``PDL_PERSISTENT``'s entry where it has one."""
    key = (device_name, form(meta), k, n0, n1, n2)
    if policy() == "off":
        return None
    if policy() == "on" and meta.get("PDL") and key in PDL_PERSISTENT:
        return PDL_PERSISTENT[key]
    return PERSISTENT.get(key) if policy() == "on" and key in PERSISTENT else TABLE.get(key)

