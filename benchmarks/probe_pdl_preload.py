"""Decode GEMVs that load their weights before waiting for the kernel before them (programmatic dependent launch).

    python benchmarks/probe_pdl_preload.py                        # GPU: llama-1b shapes, table + JSON
    python benchmarks/probe_pdl_preload.py --shapes 1b 8b         # ... and the 8B shapes
    python benchmarks/probe_pdl_preload.py --shipped-only --table-as "NVIDIA H200"   # the shipped GEMVs only, with
                                                                  # the H200's table (e.g. on an H100)
    python benchmarks/probe_pdl_preload.py --pdl-candidates --table-as "NVIDIA H200"   # PDL_PERSISTENT candidates
    python benchmarks/probe_pdl_preload.py --qkv-parts --table-as "NVIDIA H200"   # the 1B q/k/v without norm / RoPE
    python benchmarks/probe_pdl_preload.py --qkv-kv --shapes 1b 8b --table-as "NVIDIA H200"  # ... without / with the
                                                                                             # KV-cache write
    python benchmarks/probe_pdl_preload.py --marginal --shapes 1b 8b --table-as "NVIDIA H200"  # each linear's cost
                                                                                  # inside the layer chain
    python benchmarks/probe_pdl_preload.py --room --table-as "NVIDIA H200"   # the 1B q/k/v's PDL twin with 1-2 blocks
                                                     # before the wait at lowered register caps
    python benchmarks/probe_pdl_preload.py --kv-stores --shapes 1b 8b --table-as "NVIDIA H200"  # the cache-writing
                                                                   # q/k/v with and without k/v in its output
    TRITON_INTERPRET=1 python benchmarks/probe_pdl_preload.py --tiny   # CPU: values only (PDL off)

The small GEMVs that miss #8's per-GEMV target (1B q/k/v and o) cannot reach it as kernels that each start from
nothing: a kernel that only reads their bytes gets 55-66 % of the copy bandwidth (README "Where we lose"). The fixed
cost is at each kernel's start and end: the launch, the first HBM round trip, the last programs' tail, during which
HBM idles. Session 12 launched the shipped tiled kernel with PDL and had each program request only its *first K
tile* (2-4 rows x 1024 columns) before ``griddepcontrol.wait``: no gain. Session 41's grid barrier (two GEMVs in one
persistent kernel) saved at most 0.9 us a pair. This probe tries the form neither did: a weight is a parameter that
no kernel of the step writes, so each program can load its *whole* block of weight rows ([R, K], whole rows, held
in registers) before it waits, and only then read x (which the previous kernel writes), multiply and store:

    kernel i:  launch_dependents()           # kernel i+1 may be scheduled as soon as every program of i has started
               w = W_i[rows, :]               # [R, K] (and U_i's rows: gate/up), straight from HBM
               griddepcontrol.wait()          # kernel i-1 has finished and its stores are visible
               x = x_i[:]; y = epilogue(w @ x)   # + residual (o, down), silu(g) * u (gate/up)
               out_i[rows] = y

Programs of kernel i+1 that find room on an SM while kernel i still runs (its last wave, its tail) stream their rows
during it, so HBM keeps busy across the boundary. Nothing after the wait can see a stale value: every load of data
another kernel writes, and every store, comes after it.

Chains, each captured in one CUDA graph, 16 repetitions with distinct weights (every byte from HBM):
    per shape:  16 GEMVs of one linear back to back (q/k/v, o, gate/up, down): us per GEMV
    layer:      q/k/v -> o (+residual, reading q's slice) -> gate/up (silu * mul) -> down (+residual), 16 layers
Variants: ``shipped`` (fusion_passes' decode_gemv, gemv_table's configs, q/k/v and gate/up with the norm, q/k/v
with RoPE; ``+pdl``, ``+pdl2``, ``+pdl2+persist``: its PDL twins, see ``SHIPPED``), ``probe`` (this kernel,
plain launches), ``probe+pdl`` (launched with PDL, weights loaded before the wait), ``read`` / ``read+pdl`` (the
same kernel reading only its weights: the floor of each form). Every probe config is checked against torch, and the
PDL chain's output must equal the plain chain's bit for bit (same code, same config).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # fusion_passes (shipped)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_e2e import copy_bandwidth_gbs  # noqa: E402
from common import environment  # noqa: E402

try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - triton before 3.3: the PDL variants cannot be built
    gdc_launch_dependents = gdc_wait = None


@triton.jit
def preload_gemv_kernel(x_ptr, w_ptr, u_ptr, res_ptr, out_ptr, K: tl.constexpr, KP: tl.constexpr, R: tl.constexpr,
                        GATED: tl.constexpr, RES: tl.constexpr, READ_ONLY: tl.constexpr, PDL: tl.constexpr,
                        wait_count=None, done_count=None, WAIT_FOR: tl.constexpr = 0, SIGNAL: tl.constexpr = False):
    """out[rows] = epilogue(W[rows, :] @ x), rows = pid * R + [0, R); W, U [N, K] row-major, x [K], out [N];
    KP: K rounded up to a power of two (the tile's width, masked past K).
    ``benchmarks/probe_flag_wait.py``'s counters (int32 scalars): WAIT_FOR > 0 waits (with PDL) until the previous
    kernel's WAIT_FOR programs have counted themselves into ``wait_count`` instead of ``griddepcontrol.wait``;
    SIGNAL counts this program into ``done_count`` after its store, and the program that completes the count
    resets ``wait_count`` for the next replay (every program of this kernel has passed its wait by then)."""
    rows = tl.program_id(0) * R + tl.arange(0, R)
    cols = tl.arange(0, KP)
    offs = rows[:, None] * K + cols[None, :]
    k_ok = (cols < K)[None, :]
    if PDL:
        gdc_launch_dependents()
    w = tl.load(w_ptr + offs, mask=k_ok, other=0.0, eviction_policy="evict_first")
    u = w
    if GATED:
        u = tl.load(u_ptr + offs, mask=k_ok, other=0.0, eviction_policy="evict_first")
    x_ok = cols < K
    if PDL:  # below: reads of what earlier kernels write, and this kernel's stores
        if WAIT_FOR:
            while tl.load(wait_count, volatile=True) < WAIT_FOR:
                pass
            # the acquire orders every later load after the stores the count's release covered; x's mask uses
            # what it read because triton 3.6 turns an add of 0 into an acquire load and drops it when unused
            seen = tl.atomic_add(wait_count, 0, sem="acquire", scope="gpu")
            x_ok = x_ok & (seen >= WAIT_FOR)
        else:
            gdc_wait()
    if READ_ONLY:
        y = tl.sum(w.to(tl.float32), 1)
        if GATED:
            y += tl.sum(u.to(tl.float32), 1)
    else:
        x = tl.load(x_ptr + cols, mask=x_ok, other=0.0).to(tl.float32)
        y = tl.sum(w.to(tl.float32) * x[None, :], 1).to(tl.bfloat16).to(tl.float32)  # eager rounds each matmul
        if GATED:
            up = tl.sum(u.to(tl.float32) * x[None, :], 1).to(tl.bfloat16).to(tl.float32)
            y = (y / (1.0 + tl.exp(-y))).to(tl.bfloat16).to(tl.float32) * up
        if RES:
            y = y + tl.load(res_ptr + rows).to(tl.float32)
    tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty))
    if SIGNAL:
        tl.debug_barrier()  # every thread's stores happen before the release below
        counted = tl.atomic_add(done_count, 1, sem="release", scope="gpu")
        if WAIT_FOR:
            if counted % tl.num_programs(0) == tl.num_programs(0) - 1:
                tl.store(wait_count, 0)


# ------------------------------------------------------------------------------------------------ host side

SHAPES = {  # name: (hidden, ffn, q/k/v outputs)
    "1b": (2048, 8192, 3072),
    "8b": (4096, 14336, 6144),
    "tiny": (64, 96, 96),  # a K of 96: the tile masked past K
}
LINEARS = ("qkv", "o", "gate_up", "down")
MAX_PER_THREAD = 256  # weight elements a thread holds (bf16, two a register)


def dims(shape: str, linear: str) -> tuple[int, int, bool, bool]:
    """(N, K, gated, residual) of a linear."""
    h, f, nqkv = SHAPES[shape]
    return {"qkv": (nqkv, h, False, False), "o": (h, h, False, True), "gate_up": (f, h, True, False),
            "down": (h, f, False, True)}[linear]


class Linear:
    """One linear's tensors: W (, U) [N, K], its input x [1, K], residual and output [1, N]."""

    def __init__(self, shape, linear, device, dtype=torch.bfloat16):
        self.n, self.k, self.gated, self.res_on = dims(shape, linear)
        r = lambda *s: torch.randn(*s, device=device, dtype=dtype)  # noqa: E731
        self.w = r(self.n, self.k) * self.k**-0.5
        self.u = r(self.n, self.k) * self.k**-0.5 if self.gated else None
        self.x = r(1, self.k)
        self.res = r(1, self.n) if self.res_on else None
        # the shipped q/k/v and gate/up carry the layer's RMSNorm (and q/k/v their RoPE), as in a decode step
        self.nw = (torch.rand(self.k, device=device) + 0.5).to(dtype) if not self.res_on else None
        self.hd = 16 if self.k < 2048 else 64 if self.k == 2048 else 128  # head dim (tiny, 1B, 8B)
        angle = torch.rand(1, self.hd, device=device) * 6
        self.cos, self.sin = angle.cos().to(dtype), angle.sin().to(dtype)
        # a chain's later links read this as their x before any probe kernel has written it (with --shipped-only,
        # never): uninitialised memory held NaN there, and NaN != NaN made session 47's equality checks fail
        self.out = r(1, self.n)

    def bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.w, self.u) if t is not None)

    def reference(self, x=None) -> torch.Tensor:
        x = self.x if x is None else x
        y = x @ self.w.t()
        if self.gated:
            y = torch.nn.functional.silu(y) * (x @ self.u.t())
        return y + self.res if self.res_on else y


def launch(lin: Linear, x, cfg: dict, read_only=False, **counting):
    """This probe's kernel for ``lin`` on input x [1, K]: cfg R (rows per program), warps, pdl; ``counting``:
    ``probe_flag_wait``'s counter arguments (wait_count, done_count, WAIT_FOR, SIGNAL)."""
    r, pdl = cfg["R"], cfg["pdl"]
    opts = dict(num_warps=cfg["warps"])
    if pdl:
        opts["launch_pdl"] = True
    preload_gemv_kernel[(lin.n // r,)](x, lin.w, lin.u if lin.gated else lin.w, lin.res if lin.res_on else lin.out,
                                       lin.out, lin.k, triton.next_power_of_2(lin.k), r, lin.gated, lin.res_on, read_only, pdl,
                                       **counting, **opts)
    return lin.out


def qkv_weights(lin: Linear) -> tuple:
    """The q/k/v's three weights, row slices of W [N, K]: q (K rows), then k and v (half the rest each)."""
    h, kv = lin.k, (lin.n - lin.k) // 2
    return lin.w[:h], lin.w[h:h + kv], lin.w[h + kv:]


def launch_shipped(lin: Linear, x, pdl: bool = False):
    """fusion_passes' decode_gemv as a decode step launches it (``pdl``: its PDL twin, as the passes launch it in a
    graphed step): q/k/v with the norm and RoPE on q and k (three weights, row slices of W: one launch; without the
    KV-cache write, which a step on CUDA folds in by default: ``launch_shipped_kv``), o and down with the residual,
    gate/up with the norm and silu * mul."""
    from fusion_passes.kernels import gemv  # noqa: F401  (registers the ops)
    op = torch.ops.fusion_passes.decode_gemv_pdl if pdl else torch.ops.fusion_passes.decode_gemv
    if lin.res_on:
        lin.out_shipped = op(x, lin.w, None, None, None, 1e-5, 0.0, True, lin.res, False)
    elif lin.gated:
        lin.out_shipped = op(x, lin.w, lin.u, None, lin.nw, 1e-5, 0.0, True, None, True)
    else:
        lin.out_shipped = op(x, *qkv_weights(lin), lin.nw, 1e-5, 0.0, True, None, False, lin.cos, lin.sin, lin.hd, 2)
    return lin.out_shipped


CACHE_LEN = 1024  # --qkv-kv: the static cache's length (positions), written at its middle


def launch_shipped_kv(lin: Linear, x, pdl: bool = False):
    """The q/k/v as a decode step on CUDA launches it by default (``FUSION_PASSES_DECODE_KV_WRITE=on``): the
    ``launch_shipped`` q/k/v that also stores k and v into the layer's static caches [1, H_kv, CACHE_LEN, HD] at one
    position read from a tensor (StaticCache's cumulative length: ``index_base``); gemv_table's "kv" form."""
    from fusion_passes.kernels import gemv  # noqa: F401  (registers the ops)
    op = torch.ops.fusion_passes.decode_gemv_kv_write_pdl if pdl else torch.ops.fusion_passes.decode_gemv_kv_write
    if getattr(lin, "caches", None) is None:
        heads = (lin.n - lin.k) // 2 // lin.hd
        lin.caches = [torch.zeros(1, heads, CACHE_LEN, lin.hd, device=lin.w.device, dtype=lin.w.dtype) for _ in "kv"]
        lin.position = torch.tensor([CACHE_LEN // 2], device=lin.w.device)
    lin.out_shipped = op(x, *qkv_weights(lin), lin.nw, 1e-5, 0.0, True, lin.cos, lin.sin, lin.hd, 2, None,
                         *lin.caches, lin.position, True)
    return lin.out_shipped


def shipped_reference(lin: Linear, x, norm: bool = True, rope: bool = True) -> torch.Tensor:
    """What ``launch_shipped`` computes, in fp32 from the same bf16 operands (the norm's output rounded to bf16
    as eager's is; rotate-half RoPE); ``norm`` / ``rope`` False: without the q/k/v's norm / RoPE."""
    xf = x.float()
    if lin.nw is not None and norm:
        xf = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype).float()
        xf = (xf * lin.nw.float()).to(x.dtype).float()
    y = xf @ lin.w.float().t()
    if lin.gated:
        y = torch.nn.functional.silu(y) * (xf @ lin.u.float().t())
    elif lin.res_on:
        y = y + lin.res.float()
    elif rope:  # q and k rotated per head
        h, kv = lin.k, (lin.n - lin.k) // 2
        qk = y[:, :h + kv].reshape(1, -1, lin.hd)
        half = lin.hd // 2
        rotated = torch.cat((-qk[..., half:], qk[..., :half]), -1)
        y = torch.cat(((qk * lin.cos.float() + rotated * lin.sin.float()).reshape(1, -1), y[:, h + kv:]), -1)
    return y


# The shipped variants: (PDL twins, how gemv_table.PERSISTENT is changed for the run). "+pdl": the table as it is;
# "+pdl-plain": without PDL_PERSISTENT (the PDL twins run the plain launches' entries, as before session 48);
# "+pdl2": two blocks before the wait (PDL_PRELOAD 2) in the entries where that compiles without spills (the q/k/v
# forms, the 8B o); "+pdl2+persist": also a persistent entry (two blocks) for the 1B o, which has only a tiled one.
SHIPPED = {"shipped": (False, None), "shipped+pdl": (True, None), "shipped+pdl-plain": (True, "nopdlentries"),
           "shipped+pdl2": (True, "preload2"), "shipped+pdl2+persist": (True, "persist")}
PRELOAD2 = {("rope", 2048, 2048, 512, 512), ("kv", 2048, 2048, 512, 512), ("rope", 4096, 4096, 1024, 1024),
            ("kv", 4096, 4096, 1024, 1024), ("res", 4096, 4096, 0, 0)}
EXTRA_PERSISTENT = {("res", 2048, 2048, 0, 0): (1, 2048, True, 4, 1, True, 6, 2)}


@contextlib.contextmanager
def gemv_tables(persistent: dict, pdl_persistent: dict):
    """gemv_table.PERSISTENT and PDL_PERSISTENT replaced while the block runs (launches look them up per call)."""
    from fusion_passes.kernels import gemv_table

    saved = gemv_table.PERSISTENT, gemv_table.PDL_PERSISTENT
    gemv_table.PERSISTENT, gemv_table.PDL_PERSISTENT = persistent, pdl_persistent
    try:
        yield
    finally:
        gemv_table.PERSISTENT, gemv_table.PDL_PERSISTENT = saved


def shipped_tables(change, device_name: str):
    """``gemv_tables`` with PERSISTENT changed as ``change`` says; every change but None also empties
    PDL_PERSISTENT ("nopdlentries" only that: PDL launches run the plain entries)."""
    from fusion_passes.kernels import gemv_table

    table = dict(gemv_table.PERSISTENT)
    if change in ("preload2", "persist"):
        table = {key: (*entry[:7], 2) if key[1:] in PRELOAD2 else entry for key, entry in table.items()}
    if change == "persist":
        table.update({(device_name, *key): entry for key, entry in EXTRA_PERSISTENT.items()})
    return gemv_tables(table, gemv_table.PDL_PERSISTENT if change is None else {})


# --pdl-candidates: persistent configs for the PDL launches of the 1B q/k/v (RoPE form) and o, each with a program for
# every block of rows (132 SMs), so every program requests all its rows before the wait, as this probe's kernel does.
# Session 48 measured such configs with PREFETCH on (the loop's next-block loads, masked past the last block, held
# registers for a second block); since session 49 PREFETCH off launches a program for every block with one block in
# registers (PERSIST then only sets the register cap). Each compiles without spilling under its cap (sm_90).
PDL_CANDIDATES = {
    # session 50 (H100): one warp a program is the fastest q/k/v PDL twin (two pairs a block, 6 an SM: 5.09 / 5.24 /
    # 5.04 / 5.08 us in four runs against 5.23-5.30 without an entry; 2-8 warps and a pair a block 5.16-6.08,
    # logs/s50_run0, s50_run1, s50_run6); but it sums each row in another order than the plain launch's 4 warps (the
    # shipped twin then differs in the last bit, s50_run5), and the plain launch at the same config takes 7.09 us
    # against 6.68: not shipped. The plain time is printed beside each twin's. A pair (PDL entry, plain entry) times
    # the plain launches at a config of their own: one-warp persistent loops for the plain launch, which sum each
    # row in the one-warp twin's order (a tile of whole rows: the lanes split K alike whatever the rows a block).
    # Session 51 (logs/s51_run0): they do, the twins equal those plain launches bit for bit, 5.03-5.08 us against
    # 5.28 without an entry; but the one-warp plain loops take 7.44-8.34 us against the plain entry's 6.79: not shipped
    "qkv": [(2, 2048, False, 1, 1, True, 6), (4, 2048, False, 2, 1, True, 4),
            ((2, 2048, False, 1, 1, True, 6), (1, 2048, True, 1, 1, True, 4)),
            ((2, 2048, False, 1, 1, True, 6), (1, 2048, True, 1, 1, True, 6)),
            ((2, 2048, False, 1, 1, True, 6), (1, 2048, True, 1, 1, True, 3))],
    "o": [(2, 2048, False, 4, 1, True, 8)],
}


def candidate_entries(cand) -> tuple:
    """(PDL entry, plain entry) of a PDL_CANDIDATES item: a pair as given, an entry for both, None for neither."""
    return cand if cand is not None and isinstance(cand[0], tuple) else (cand, cand)


# gemv_table's key (after the device name) of each linear PDL_CANDIDATES lists: the 1B q/k/v in the RoPE form, the o
PDL_CANDIDATE_FORMS = {"qkv": ("rope", 2048, 2048, 512, 512), "o": ("res", 2048, 2048, 0, 0)}


def pdl_candidates(device_name: str, bw: float, layers: int, record) -> list[dict]:
    """Each PDL_CANDIDATES config as gemv_table.PDL_PERSISTENT's entry for its shape (None: no entry, the shipped
    table's before session 48's), the chain of PDL twins timed; its output checked bit for bit against the plain
    ops run with the same config, and against fp32 math."""
    from fusion_passes.kernels import gemv_table

    summary = []
    for linear, cands in PDL_CANDIDATES.items():
        torch.manual_seed(0)
        lins = [Linear("1b", linear, torch.device("cuda")) for _ in range(layers)]
        xs, ideal = chain_inputs(lins), lins[0].bytes() / (bw * 1e12) * 1e6
        refs = [shipped_reference(lin, x) for lin, x in zip(lins, xs)]
        key = (device_name, *PDL_CANDIDATE_FORMS[linear])
        for cand in (None, *cands):
            pdl_entry, plain_entry = candidate_entries(cand)
            pdl_table = {k: v for k, v in gemv_table.PDL_PERSISTENT.items() if k != key}
            table = gemv_table.PERSISTENT
            if cand is not None:
                pdl_table[key] = pdl_entry
                table = {**table, key: plain_entry}  # the plain ops with their config, timed and for the check
            with gemv_tables(table, pdl_table):
                us = time_graph(lambda: [launch_shipped(lin, x, True) for lin, x in zip(lins, xs)]) / len(lins)
                us_plain = time_graph(lambda: [launch_shipped(lin, x, False) for lin, x in zip(lins, xs)]) / len(lins)
                torch.cuda.synchronize()
                twins = [launch_shipped(lin, x, True).clone() for lin, x in zip(lins, xs)]
                plain = [launch_shipped(lin, x, False).clone() for lin, x in zip(lins, xs)]
                torch.cuda.synchronize()
            row = dict(shape="1b", chain=linear, variant="candidate", cfg=cand, us_per_gemv=round(us, 3),
                       pct_copy_bw=round(100 * ideal / us, 1), us_plain=round(us_plain, 3),
                       equal=all(torch.equal(a, b) for a, b in zip(plain, twins)),
                       finite=all(bool(t.isfinite().all()) for t in twins),
                       rel_err_vs_fp32=round(max(rel_err(o, r) for o, r in zip(twins, refs)), 5))
            record(**row)
            summary.append(row)
    print(f"\ncopy bandwidth {bw:.2f} TB/s; PDL twins per persistent config (None: none for PDL launches)")
    for r in summary:
        print(f"{r['chain']:4} {str(r['cfg']):72} {r['us_per_gemv']:7.2f} us {r['pct_copy_bw']:6.1f} %  "
              f"plain {r['us_plain']:6.2f} us  "
              f"equal {r['equal']} finite {r['finite']} rel err {r['rel_err_vs_fp32']}")
    return summary


# --qkv-parts: the 1B q/k/v with its norm prologue and RoPE epilogue each on or off: (norm, rope)
QKV_PARTS = {"norm+rope": (True, True), "rope": (False, True), "norm": (True, False), "neither": (False, False)}


def launch_qkv_part(lin: Linear, x, norm: bool, rope: bool, pdl: bool, entry: tuple) -> torch.Tensor:
    """The shipped kernel on the q/k/v weights into ``lin.out``, at gemv_table ``entry``'s config with the same
    weight rows a block whatever the form (without RoPE a block is rows, not rotary pairs: twice BLOCK_N)."""
    from fusion_passes.kernels import gemv, gemv_table

    config = gemv_table.as_config(entry)
    config["BLOCK_N"] *= 1 if rope else 2
    gemv._launch(x, *qkv_weights(lin), lin.nw if norm else None, 1e-5, 0.0, True, None, False, lin.out,
                 *((lin.cos, lin.sin, lin.hd, 2) if rope else ()), config=config, pdl_launch=pdl)
    return lin.out


def qkv_parts(device_name: str, bw: float, layers: int, record, entries=()) -> list[dict]:
    """Chains of the 1B q/k/v in each QKV_PARTS form at its table entry's config, plain and as PDL twins, and at each
    of ``entries`` (gemv_table entries) as PDL twins only; then this probe's kernel (the bare GEMV, no norm or RoPE)
    with PDL at its fastest session-45 configs, and its read-only floor: which part keeps the PDL twin (76.7 % of
    the copy bandwidth on an H100) from the probe kernel's 91 %."""
    from fusion_passes.kernels import gemv_table

    torch.manual_seed(0)
    lins = [Linear("1b", "qkv", torch.device("cuda")) for _ in range(layers)]
    xs, ideal = chain_inputs(lins), lins[0].bytes() / (bw * 1e12) * 1e6
    entry = gemv_table.lookup(device_name, dict(CACHE_MASK=0, SILU_MUL=False, HAS_RES=False, ROPE=True), 2048,
                              2048, 512, 512)
    summary = []

    def row(variant, cfg, us, err=None):
        summary.append(dict(shape="1b", chain="qkv", variant=variant, cfg=cfg, us_per_gemv=round(us, 3),
                            pct_copy_bw=round(100 * ideal / us, 1), rel_err_vs_fp32=err))
        record(**summary[-1])

    for cfg in (entry, *entries):
        for form, (norm, rope) in QKV_PARTS.items():
            for pdl in (False, True) if cfg is entry else (True,):
                us = time_graph(lambda: [launch_qkv_part(lin, x, norm, rope, pdl, cfg)
                                         for lin, x in zip(lins, xs)]) / len(lins)
                err = max(rel_err(launch_qkv_part(lin, x, norm, rope, pdl, cfg).clone(),
                                  shipped_reference(lin, x, norm, rope)) for lin, x in zip(lins, xs))
                row(form + ("+pdl" if pdl else ""), cfg, us, round(err, 5))
    for r in (4, 8):
        cfg = dict(R=r, warps=4, pdl=True)
        row("probe+pdl", cfg, time_graph(lambda: [launch(lin, x, cfg) for lin, x in zip(lins, xs)]) / len(lins))
    cfg = dict(R=8, warps=4, pdl=True)
    row("read+pdl", cfg, time_graph(lambda: [launch(lin, x, cfg, True) for lin, x in zip(lins, xs)]) / len(lins))
    print(f"\ncopy bandwidth {bw:.2f} TB/s; the 1B q/k/v by part (the table's config: {entry})")
    for r in summary:
        print(f"{r['variant']:16} {str(r['cfg']):36} {r['us_per_gemv']:7.2f} us {r['pct_copy_bw']:6.1f} %  "
              f"rel err {r['rel_err_vs_fp32']}")
    return summary


def qkv_forms(shape: str, bw: float, layers: int, record, forms: dict, kept) -> tuple[list[dict], dict]:
    """Chains of ``shape``'s q/k/v launched by each of ``forms`` (name -> launch(lin, x, pdl)), plain and as PDL
    twins: rows of µs per GEMV (recorded), and per (name, pdl) what ``kept(lin, out)`` keeps of each layer's launch
    (after the caches, if any, are zeroed), for the caller's checks."""
    torch.manual_seed(0)
    lins = [Linear(shape, "qkv", torch.device("cuda")) for _ in range(layers)]
    xs, ideal = chain_inputs(lins), lins[0].bytes() / (bw * 1e12) * 1e6
    rows, outs = [], {}
    for form, launch_form in forms.items():
        for pdl in (False, True):
            us = time_graph(lambda: [launch_form(lin, x, pdl) for lin, x in zip(lins, xs)]) / len(lins)
            torch.cuda.synchronize()
            for c in (c for lin in lins for c in getattr(lin, "caches", ())):
                c.zero_()
            outs[form, pdl] = [kept(lin, launch_form(lin, x, pdl)) for lin, x in zip(lins, xs)]
            rows.append(dict(shape=shape, chain="qkv", variant=form + ("+pdl" if pdl else ""),
                             us_per_gemv=round(us, 3), pct_copy_bw=round(100 * ideal / us, 1)))
            record(**rows[-1])
    return rows, outs


def check_row(rows: list[dict], record, shape: str, check: str, equal: bool) -> None:
    rows.append(dict(shape=shape, chain="qkv", check=check, equal=equal))
    record(**rows[-1])


def print_qkv_rows(rows: list[dict], title: str) -> None:
    print(f"\n{title}")
    for r in rows:
        print(f"{r['variant']:26} {r['us_per_gemv']:7.2f} us {r['pct_copy_bw']:6.1f} %" if "variant" in r else
              f"check: {r['check']}: {r['equal']}")


def equal_outputs(a: list[tuple], b: list[tuple]) -> bool:
    """Each layer's kept tensors equal bit for bit."""
    return all(torch.equal(t, u) for ta, tb in zip(a, b) for t, u in zip(ta, tb))


def qkv_kv(device_name: str, bw: float, layers: int, record, shapes=("1b",)) -> list[dict]:
    """Chains of each shape's q/k/v in both of the table's forms a decode step uses, plain and as PDL twins with the
    shipped tables: "rope" (what the other modes time) and "kv", which also writes k and v into the static caches
    (the step's default on CUDA). Checks: each PDL twin equals its plain launch bit for bit (output and caches), and
    the "kv" output equals the "rope" one."""
    summary = []
    for shape in shapes:
        rows, outs = qkv_forms(shape, bw, layers, record, {"rope": launch_shipped, "kv": launch_shipped_kv},
                               lambda lin, y: (y.clone(), *[c.clone() for c in getattr(lin, "caches", ())]))
        for form in ("rope", "kv"):
            check_row(rows, record, shape, f"{form}+pdl equals {form}",
                      equal_outputs(outs[form, True], outs[form, False]))
        check_row(rows, record, shape, "kv's output equals rope's",
                  equal_outputs([o[:1] for o in outs["kv", False]], outs["rope", False]))
        print_qkv_rows(rows, f"copy bandwidth {bw:.2f} TB/s; the {shape.upper()} q/k/v without and with the "
                             "cache write")
        summary += rows
    return summary


def launch_kv_unset_y(lin: Linear, x, pdl: bool = False, config=None):
    """``launch_shipped_kv``'s launch with ``cached_y=False``: k and v go to the caches only, their columns of the
    output stay unset (a decode step reads them from the caches). Same config (the table's), into ``lin.out_kv``.
    With ``config`` (gemv._launch's): at that config, and the compiled kernel is returned instead."""
    from fusion_passes.kernels import gemv

    if getattr(lin, "caches", None) is None:
        launch_shipped_kv(lin, x)  # makes the caches and the position
    if getattr(lin, "out_kv", None) is None:
        lin.out_kv = torch.zeros(x.shape[0], lin.n, device=x.device, dtype=x.dtype)
    compiled = gemv._launch(x, *qkv_weights(lin), lin.nw, 1e-5, 0.0, True, None, False, lin.out_kv, lin.cos, lin.sin,
                            lin.hd, 2, caches=(None, *lin.caches), cache_index=lin.position, index_base=True,
                            pdl_launch=pdl, cached_y=False, config=config)
    return lin.out_kv if config is None else compiled


def q_and_caches(lin: Linear, y) -> tuple:
    """What the cache-writing q/k/v's checks compare: y's q columns and both caches (k/v may be unset in y)."""
    return (y[:, :lin.k].clone(), *[c.clone() for c in lin.caches])


def check_against(rows: list[dict], record, shape: str, outs: dict, base: str, label) -> None:
    """A check row per (form, pdl) of ``outs`` but the plain ``base``: equal to it bit for bit; ``label(form, pdl)``
    names the check."""
    for (form, pdl), got in outs.items():
        if (form, pdl) != (base, False):
            check_row(rows, record, shape, label(form, pdl), equal_outputs(got, outs[base, False]))


def kv_stores(device_name: str, bw: float, layers: int, record, shapes=("1b",)) -> list[dict]:
    """The q/k/v in the step's cache-writing form, as shipped and with the cached outputs (k, v) left out of the
    output (``cached_y=False``), plain and as PDL twins. Checks: the q columns and the caches equal the shipped
    launch's bit for bit."""
    summary = []
    for shape in shapes:
        rows, outs = qkv_forms(shape, bw, layers, record,
                               {"kv": launch_shipped_kv, "kv, k/v only cached": launch_kv_unset_y}, q_and_caches)
        check_against(rows, record, shape, outs, "kv",
                      lambda form, pdl: f"{form}{'+pdl' if pdl else ''}: q and the caches equal kv's")
        print_qkv_rows(rows, f"copy bandwidth {bw:.2f} TB/s; the {shape.upper()} q/k/v writing the caches, k/v in "
                             "the output or not")
        summary += rows
    return summary


# --room: does a PDL twin gain only as far as the next kernel's programs fit on an SM beside this one's? The 1B kv
# entry (6 programs of 4 warps an SM) compiles to 63 registers a thread under triton 3.9 (room for 2 programs of the
# next kernel an SM); with two blocks before the wait (PDL_PRELOAD 2) to 80, no room, and it timed as a plain launch
# (sessions 48, 53). The same configs with the register cap lowered (spilling, but leaving room) tell which it is.
# name: (PDL_PRELOAD, registers a thread allowed; None: the launch's own cap)
ROOM_VARIANTS = {"shipped": (1, None), "2 blocks": (2, None), "2 blocks, cap 64": (2, 64), "shipped, cap 56": (1, 56)}


@contextlib.contextmanager
def register_cap(cap):
    """gemv's persistent launches capped at ``cap`` registers a thread (None: as shipped), compiled afresh."""
    from fusion_passes.kernels import gemv

    shipped = gemv._with_register_cap
    if cap is not None:
        gemv._with_register_cap = lambda config: {**shipped(config), "maxnreg": cap}
    gemv._fixed_kernel.cache_clear()
    try:
        yield
    finally:
        gemv._with_register_cap = shipped
        gemv._fixed_kernel.cache_clear()


def room(device_name: str, bw: float, layers: int, record, shapes=("1b",)) -> list[dict]:
    """The q/k/v in the step's form at its kv entry under each ROOM_VARIANTS (PDL_PRELOAD, cap), plain and as PDL
    twins, with each PDL compile's registers and spills. Checks: q and the caches equal the shipped plain launch's."""
    from fusion_passes.kernels import gemv_table

    summary = []
    for shape in shapes:
        h, _, nqkv = SHAPES[shape]
        key = (device_name, "kv", h, h, (nqkv - h) // 2, (nqkv - h) // 2)
        entry = gemv_table.lookup(device_name, dict(CACHE_MASK=6, SILU_MUL=False, HAS_RES=False, ROPE=True), *key[2:])
        forms = {}
        for name, (preload, cap) in ROOM_VARIANTS.items():
            variant = (*entry[:7], preload) if len(entry) >= 7 else entry

            def go(lin, x, pdl=False, variant=variant, cap=cap):
                with gemv_tables({**gemv_table.PERSISTENT, key: variant}, gemv_table.PDL_PERSISTENT), register_cap(cap):
                    return launch_kv_unset_y(lin, x, pdl)
            forms[name] = go
        rows, outs = qkv_forms(shape, bw, layers, record, forms, q_and_caches)
        check_against(rows, record, shape, outs, "shipped",
                      lambda form, pdl: f"{form}{'+pdl' if pdl else ''} equals shipped")
        lin = Linear(shape, "qkv", torch.device("cuda"))
        for name, (preload, cap) in ROOM_VARIANTS.items():
            with register_cap(cap):
                compiled = launch_kv_unset_y(lin, lin.x, True, {**gemv_table.as_config(entry), "PDL_PRELOAD": preload})
            rows.append(dict(shape=shape, chain="qkv", variant=name, registers=getattr(compiled, "n_regs", None),
                             spills=getattr(compiled, "n_spills", None)))
            record(**rows[-1])
        print(f"\ncopy bandwidth {bw:.2f} TB/s; the {shape.upper()} q/k/v (kv) at {entry}: blocks before the wait, "
              "register cap")
        for r in rows:
            print(f"{r['variant']:26} registers {r['registers']} spills {r['spills']}" if "registers" in r else
                  f"{r['variant']:26} {r['us_per_gemv']:7.2f} us {r['pct_copy_bw']:6.1f} %" if "variant" in r else
                  f"check: {r['check']}: {r['equal']}")
        summary += rows
    return summary


def marginal(device_name: str, bw: float, layers: int, record, shapes=("1b",)) -> list[dict]:
    """Each linear's cost inside the layer, not in a chain of its own twins: the shipped layer chain (q/k/v in the
    step's cache-writing form -> o -> gate/up -> down, as a graphed step launches it: the first GEMV plainly, every
    later one as its PDL twin) timed whole and without that linear, the difference per layer. A small GEMV behind a
    large one has the large one's tail to hide its wait behind; behind its own twin it has only a small tail."""
    summary = []
    for shape in shapes:
        torch.manual_seed(0)
        chains = {linear: [Linear(shape, linear, torch.device("cuda")) for _ in range(layers)] for linear in LINEARS}
        launch_of = {linear: launch_shipped_kv if linear == "qkv" else launch_shipped for linear in LINEARS}

        def layer_us(linears: tuple) -> float:
            layer = [(chains[linear][i], launch_of[linear]) for i in range(layers) for linear in linears]
            xs = chain_inputs([lin for lin, _ in layer])
            return time_graph(lambda: [go(lin, x, j > 0) for j, ((lin, go), x) in enumerate(zip(layer, xs))]) / layers

        whole = layer_us(LINEARS)
        layer_bytes = sum(chains[linear][0].bytes() for linear in LINEARS)
        row = dict(shape=shape, chain="layer", variant="shipped+pdl, kv", us_per_layer=round(whole, 3),
                   pct_copy_bw=round(100 * layer_bytes / (bw * 1e12) * 1e6 / whole, 1))
        record(**row)
        summary.append(row)
        for linear in LINEARS:
            us = whole - layer_us(tuple(other for other in LINEARS if other != linear))
            ideal = chains[linear][0].bytes() / (bw * 1e12) * 1e6
            row = dict(shape=shape, chain=linear, variant="marginal in the layer", us_per_gemv=round(us, 3),
                       pct_copy_bw=round(100 * ideal / us, 1))
            record(**row)
            summary.append(row)
        print(f"\ncopy bandwidth {bw:.2f} TB/s; the {shape.upper()} layer, and what each linear adds to it")
        for r in summary:
            if r["shape"] == shape:
                us = r.get("us_per_gemv", r.get("us_per_layer"))
                print(f"{r['chain']:8} {r['variant']:22} {us:8.2f} us {r['pct_copy_bw']:6.1f} %")
    return summary


def configs(lin: Linear, pdl: bool):
    for r in (1, 2, 4, 8, 16):
        for warps in (2, 4, 8):
            if r * triton.next_power_of_2(lin.k) * (1 + lin.gated) <= MAX_PER_THREAD * 32 * warps and lin.n % r == 0:
                yield dict(R=r, warps=warps, pdl=pdl)


def time_graph(step, reps=20) -> float:
    """us per replay of ``step()`` captured in one CUDA graph (best of 3 rounds of ``reps`` replays)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up (compiles)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(reps):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) * 1000 / reps)
    return best


def chain_inputs(lins: list[Linear]) -> list:
    """The input each link of a chain reads: the previous link's output where the widths fit (its first K columns:
    q's slice for o), else the link's own x. Stream order serialises the links either way."""
    xs, prev = [], None
    for lin in lins:
        xs.append(prev[:, :lin.k] if prev is not None and prev.shape[1] >= lin.k else lin.x)
        prev = lin.out
    return xs


def rel_err(out, ref) -> float:
    return float((out.float() - ref.float()).abs().max() / ref.float().abs().max())


def tiny() -> int:
    """Every linear of the tiny shape in the interpreter, PDL off: the kernel equals torch to bf16 rounding."""
    torch.manual_seed(0)
    for linear in LINEARS:
        lin = Linear("tiny", linear, "cpu")
        for cfg in configs(lin, False):
            err = rel_err(launch(lin, lin.x, cfg), lin.reference())
            print(f"tiny {linear} {cfg}: rel err {err:.4f}")
            if err > 0.02:
                raise SystemExit(f"{linear} {cfg}: the probe kernel computed something else")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--shapes", nargs="+", default=["1b"])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--shipped-only", action="store_true",
                    help="only fusion_passes' GEMVs, plain and PDL (no probe-kernel sweep, no read floors)")
    ap.add_argument("--pdl-candidates", action="store_true",
                    help="only the PDL twins of the 1B q/k/v and o under each PDL_CANDIDATES config")
    ap.add_argument("--qkv-parts", action="store_true",
                    help="only the 1B q/k/v with / without its norm and RoPE, plain and PDL")
    ap.add_argument("--qkv-kv", action="store_true",
                    help="only the q/k/v (of --shapes) with and without the KV-cache write, plain and PDL")
    ap.add_argument("--kv-stores", action="store_true",
                    help="only the q/k/v's cache-writing form with and without k/v in its output, plain and PDL")
    ap.add_argument("--room", action="store_true",
                    help="only the cache-writing q/k/v with 1-2 blocks before the wait, at lowered register caps")
    ap.add_argument("--marginal", action="store_true",
                    help="only each linear's cost inside the shipped layer chain (the layer with and without it)")
    ap.add_argument("--entries", nargs="*", default=[], metavar="ENTRY",
                    help="with --qkv-parts: gemv_table entries to run as PDL twins too, e.g. '(4, 2048, False, 4, 1, "
                         "True, 3)'")
    ap.add_argument("--table-as", default=None, metavar="DEVICE_NAME",
                    help="FUSION_PASSES_GEMV_TABLE_DEVICE: gemv_table's configs as on this GPU ('NVIDIA H200')")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "pdl_preload_probe.json"))
    args = ap.parse_args()
    if args.tiny:
        return tiny()
    if gdc_wait is None:
        raise SystemExit("this triton has no griddepcontrol ops (triton.language.extra.cuda.gdc_wait)")
    dev = torch.device("cuda")
    from fusion_passes.kernels import gemv

    if args.table_as:  # recorded in the JSON's settings
        os.environ["FUSION_PASSES_GEMV_TABLE_DEVICE"] = args.table_as
    device_name = gemv._device_name(dev)
    bw = copy_bandwidth_gbs("cuda") / 1e3  # TB/s
    rows, summary, checks = [], [], []

    def record(**row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    if args.pdl_candidates or args.qkv_parts or args.qkv_kv or args.marginal or args.kv_stores or args.room:
        if args.room:
            summary = room(device_name, bw, args.layers, record, args.shapes)
        elif args.kv_stores:
            summary = kv_stores(device_name, bw, args.layers, record, args.shapes)
        elif args.marginal:
            summary = marginal(device_name, bw, args.layers, record, args.shapes)
        elif args.qkv_kv:
            summary = qkv_kv(device_name, bw, args.layers, record, args.shapes)
        elif args.pdl_candidates:
            summary = pdl_candidates(device_name, bw, args.layers, record)
        else:
            entries = [tuple(ast.literal_eval(e)) for e in args.entries]
            summary = qkv_parts(device_name, bw, args.layers, record, entries)
        save(args.out, bw, summary, rows, quiet=True)
        return 0

    for shape in args.shapes:
        torch.manual_seed(0)
        chains = {linear: [Linear(shape, linear, dev) for _ in range(args.layers)] for linear in LINEARS}
        best = {}  # (linear, variant) -> (us, cfg)
        for linear, lins in chains.items():
            xs = chain_inputs(lins)
            ideal = lins[0].bytes() / (bw * 1e12) * 1e6

            def run(variant, cfg, step):
                us = time_graph(step) / len(lins)
                record(shape=shape, chain=linear, variant=variant, cfg=cfg, us_per_gemv=round(us, 3),
                       pct_copy_bw=round(100 * ideal / us, 1))
                if (linear, variant) not in best or us < best[(linear, variant)][0]:
                    best[(linear, variant)] = (us, cfg)
                return us

            outs, refs = {}, [shipped_reference(lin, x) for lin, x in zip(lins, xs)]
            for variant, (pdl, change) in SHIPPED.items():
                with shipped_tables(change, device_name):
                    run(variant, {}, (lambda pdl: lambda: [launch_shipped(lin, x, pdl) for lin, x in zip(lins, xs)])(pdl))
                    torch.cuda.synchronize()  # each variant computes what the plain ops do, bit for bit
                    outs[variant] = [launch_shipped(lin, x, pdl).clone() for lin, x in zip(lins, xs)]
                same = all(torch.equal(a, b) for a, b in zip(outs["shipped"], outs[variant]))
                # how far, and how far each is from fp32 math on the same bf16 operands (a wrong result, or
                # another rounding)
                diff = max(float((a.float() - b.float()).abs().max()) for a, b in zip(outs["shipped"], outs[variant]))
                err = max(rel_err(o, ref) for o, ref in zip(outs[variant], refs))
                finite = all(bool(o.isfinite().all()) for o in outs[variant])  # NaN would make `equal` False
                checks.append(dict(shape=shape, chain=linear, variant=variant, equal=same, finite=finite,
                                   max_abs_diff=diff, rel_err_vs_fp32=round(err, 5)))
                record(check=f"{variant} equals shipped", **checks[-1])
            if args.shipped_only:
                for variant in SHIPPED:
                    us, cfg = best[(linear, variant)]
                    summary.append(dict(shape=shape, chain=linear, variant=variant, cfg=cfg, us_per_gemv=round(us, 3),
                                        pct_copy_bw=round(100 * ideal / us, 1)))
                continue
            for pdl in (False, True):
                for cfg in configs(lins[0], pdl):
                    try:
                        err = rel_err(launch(lins[0], lins[0].x, cfg), lins[0].reference())
                    except Exception as e:  # noqa: BLE001 - a config that does not compile is skipped
                        print("skip", linear, cfg, type(e).__name__, str(e)[:120])
                        continue
                    if err > 0.02:
                        record(shape=shape, chain=linear, variant="probe", cfg=cfg, invalid=f"rel err {err:.4f}")
                        continue
                    run("probe+pdl" if pdl else "probe", cfg, lambda: [launch(lin, x, cfg) for lin, x in zip(lins, xs)])
            for pdl in (False, True):
                cfg = dict(best[(linear, "probe+pdl" if pdl else "probe")][1])
                run("read+pdl" if pdl else "read", cfg,
                    lambda: [launch(lin, x, cfg, read_only=True) for lin, x in zip(lins, xs)])
            # the PDL form must compute what the plain one does: same code, same config, bit for bit
            cfg = dict(best[(linear, "probe+pdl")][1])
            for pdl in (False, True):
                torch.cuda.synchronize()
                for lin, x in zip(lins, xs):
                    launch(lin, x, {**cfg, "pdl": pdl})
                torch.cuda.synchronize()
                outs = [lin.out.clone() for lin in lins]
                if not pdl:
                    plain = outs
            same = all(torch.equal(a, b) for a, b in zip(plain, outs))
            record(shape=shape, chain=linear, check="pdl chain equals plain chain", cfg=cfg, equal=same)
            if not same:
                raise SystemExit(f"{shape} {linear}: the PDL chain differs from the plain chain")
            for variant in (*SHIPPED, "probe", "probe+pdl", "read", "read+pdl"):
                us, cfg = best[(linear, variant)]
                summary.append(dict(shape=shape, chain=linear, variant=variant, cfg=cfg, us_per_gemv=round(us, 3),
                                    pct_copy_bw=round(100 * ideal / us, 1)))

        # the layer: q/k/v -> o -> gate/up -> down, each linear at its best config per variant
        layer = [chains[linear][i] for i in range(args.layers) for linear in LINEARS]
        xs = chain_inputs(layer)
        layer_bytes = sum(chains[linear][0].bytes() for linear in LINEARS)
        ideal = layer_bytes / (bw * 1e12) * 1e6
        # as a graphed step launches them: the first GEMV plainly, every later one with PDL (in the PDL variants)
        steps = {variant: (lambda pdl: lambda: [launch_shipped(lin, x, pdl and j > 0)
                                                for j, (lin, x) in enumerate(zip(layer, xs))])(pdl)
                 for variant, (pdl, _) in SHIPPED.items()}
        for variant in ("probe", "probe+pdl") if not args.shipped_only else ():
            picks = {linear: best[(linear, variant)][1] for linear in LINEARS}
            steps[variant] = (lambda picks: lambda: [launch(lin, x, picks[LINEARS[j % 4]])
                                                     for j, (lin, x) in enumerate(zip(layer, xs))])(picks)
        for variant, step in steps.items():
            with shipped_tables(SHIPPED.get(variant, (False, None))[1], device_name):
                us = time_graph(step) / args.layers
            row = dict(shape=shape, chain="layer", variant=variant, us_per_gemv=None, us_per_layer=round(us, 3),
                       pct_copy_bw=round(100 * ideal / us, 1))
            record(**row)
            summary.append(row)
        save(args.out, bw, summary, rows, checks)  # after each shape: a run cut short keeps what it measured
    return 0


def save(out: str, bw: float, summary: list, rows: list, checks=(), quiet: bool = False) -> None:
    """Print the checks and the summary table (unless ``quiet``: the caller printed its own) and write the JSON
    (environment, copy bandwidth, summary, every row)."""
    if not quiet:
        for c in checks:
            print(f"check {c['shape']} {c['chain']} {c['variant']}: equal {c['equal']}, finite {c['finite']}, "
                  f"max |diff| {c['max_abs_diff']:.3g}, rel err vs fp32 {c['rel_err_vs_fp32']}")
        print(f"\ncopy bandwidth {bw:.2f} TB/s; best config per variant (us per GEMV, or per layer; % of copy "
              "bandwidth)")
        print(f"{'shape':6} {'chain':8} {'variant':20} {'us':>8} {'%bw':>6}  cfg")
        for r in summary:
            us = r["us_per_gemv"] if r["us_per_gemv"] is not None else r["us_per_layer"]
            print(f"{r['shape']:6} {r['chain']:8} {r['variant']:20} {us:8.2f} {r['pct_copy_bw']:6.1f}  "
                  f"{r.get('cfg', '')}")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(dict(**environment("cuda"), copy_tb_s=bw, summary=summary, checks=list(checks), rows=rows), f,
                  indent=1)
    print("wrote", out)


if __name__ == "__main__":
    sys.exit(main())
