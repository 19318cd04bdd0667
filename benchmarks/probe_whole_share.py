"""Design 28: the 1B q/k/v with one program an SM holding its SM's whole share of the weight in registers, so that the
next kernel's program fits beside it and streams its share while this one waits, multiplies and stores.

    python benchmarks/probe_whole_share.py                 # GPU (sm_90): the 1B q/k/v, table + JSON
    TRITON_INTERPRET=1 python benchmarks/probe_whole_share.py --tiny   # CPU: values only (PDL off)

Why (session 53's ``--room``, ``probe_pdl_preload.py``): a PDL twin gains as far as the next kernel's programs find
room on an SM while this one runs. The shipped 1B q/k/v (6 programs of 4 warps an SM, 69 registers) leaves room for
one program of the next kernel in six; with the whole weight before the wait (80 registers) for none, and then it
timed as a plain launch (7.0 against 5.33 us). Session 45's probe kernel (8 rows a program, 384 programs, about 3 an
SM) reached 4.67 us bare; 16 rows (192 programs, 60 SMs with two) 5.15.

The 1B q/k/v is 3072 rows x 2048 (12.6 MB): 24 rows an SM on 128 SMs, 96 KB, 24,576 registers. Two such shares
fill 49,152 of an SM's 65,536, so a program of 4 warps may take up to 255 registers a thread (192 of them weights)
and the next kernel's program still fits beside it. 24 rows is not a power of two, so a program loads SUBS
sub-blocks of R rows each (R = 8, SUBS = 3), all before the wait:

    program p (PDL):  launch_dependents()
                      w_s = W[(p * SUBS + s) * R + [0, R), :]  for s < SUBS   # SUBS x [R, K], from HBM
                      griddepcontrol.wait()
                      x = x[:]  (NORM: xn = (x * rsqrt(mean(x^2) + eps)) -> bf16 * nw -> bf16)
                      out[rows of w_s] = (w_s @ x) -> bf16                     # READ_ONLY: sum(w_s) instead

Chains of 16 twins (distinct weights, every byte from HBM), each captured in one CUDA graph, as
``probe_pdl_preload.py`` times them; each config is checked against torch, and its PDL chain must equal its plain
chain bit for bit. The registers and spills of each compile are printed beside it (programs an SM: the register
file's bound).

Result (session 59, one H100 80GB HBM3, torch 2.11, triton 3.6, copy bandwidth 3.03 TB/s; ``logs/s59_run1``): the
premise fails. The whole share compiles to 255 registers without a spill (two programs an SM fit), and its read
floor is the read's (4.31 us with PDL against 4.26 for 8 rows), but with PDL it takes 5.46 us bare (76 %) and 5.70
with the norm against 4.70 (88.4 %) and 5.10 for 8 rows a program (about three an SM); 8 warps 5.74 / 5.95, 12 rows
5.25 / 5.20, 16 rows 5.03 / 5.25. What holds the small GEMV back is the path after the wait (x, the sums, the
stores), which one program an SM runs with fewer warps than three, not room for the next kernel's programs. The
shipped twins in the same run: 5.20 us (79.9 %) in the RoPE form, 5.39 (77.0 %) in the step's form. Every PDL
chain equalled its plain chain bit for bit. Not built in.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_e2e import copy_bandwidth_gbs  # noqa: E402
from common import environment  # noqa: E402
from probe_pdl_preload import (Linear, chain_inputs, gdc_launch_dependents, gdc_wait, launch_shipped,  # noqa: E402
                               launch_shipped_kv, rel_err, shipped_reference, time_graph)


@triton.jit
def _sub_rows(w_ptr, p, s: tl.constexpr, K: tl.constexpr, KP: tl.constexpr, R: tl.constexpr, SUBS: tl.constexpr):
    """Sub-block s of program p: its row indices [R] and weight rows [R, KP] (zeros past K)."""
    rows = (p * SUBS + s) * R + tl.arange(0, R)
    cols = tl.arange(0, KP)
    w = tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=(cols < K)[None, :], other=0.0,
                eviction_policy="evict_first")
    return rows, w


@triton.jit
def _sub_out(out_ptr, rows, w, x, READ_ONLY: tl.constexpr):
    if READ_ONLY:
        y = tl.sum(w.to(tl.float32), 1)
    else:
        y = tl.sum(w.to(tl.float32) * x[None, :], 1)
    tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty))


@triton.jit
def whole_share_kernel(x_ptr, nw_ptr, w_ptr, out_ptr, eps, K: tl.constexpr, KP: tl.constexpr, R: tl.constexpr,
                       SUBS: tl.constexpr, NORM: tl.constexpr, READ_ONLY: tl.constexpr, PDL: tl.constexpr):
    """out[rows] = W[rows, :] @ xn for the SUBS * R rows of this program (SUBS <= 3); x [K], nw [K], W [N, K]."""
    p = tl.program_id(0)
    cols = tl.arange(0, KP)
    if PDL:
        gdc_launch_dependents()
    rows_a, w_a = _sub_rows(w_ptr, p, 0, K, KP, R, SUBS)
    if SUBS >= 2:
        rows_b, w_b = _sub_rows(w_ptr, p, 1, K, KP, R, SUBS)
    if SUBS >= 3:
        rows_c, w_c = _sub_rows(w_ptr, p, 2, K, KP, R, SUBS)
    if NORM:  # a parameter: requested before the wait, as the shipped PDL twins do
        nw = tl.load(nw_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)
    if PDL:  # below: reads of what the kernel before writes, and every store
        gdc_wait()
    x = tl.load(x_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)
    if NORM:  # eager's roundings
        x = (x * tl.rsqrt(tl.sum(x * x, 0) / K + eps)).to(tl.bfloat16).to(tl.float32)
        x = (x * nw).to(tl.bfloat16).to(tl.float32)
    _sub_out(out_ptr, rows_a, w_a, x, READ_ONLY)
    if SUBS >= 2:
        _sub_out(out_ptr, rows_b, w_b, x, READ_ONLY)
    if SUBS >= 3:
        _sub_out(out_ptr, rows_c, w_c, x, READ_ONLY)


# (R, SUBS, warps): session 45's best (8 rows, ~3 programs an SM), 16 rows, and the whole share (24 rows, one an SM)
CONFIGS = [(8, 1, 4), (16, 1, 4), (8, 3, 4), (8, 3, 8), (4, 3, 4), (8, 2, 4)]


def launch(lin: Linear, x, cfg: tuple, norm: bool, pdl: bool, read_only: bool = False):
    """The kernel over ``lin``'s weight for input x [1, K]; returns (output [1, N], the compiled kernel)."""
    r, subs, warps = cfg
    opts = dict(num_warps=warps)
    if pdl:
        opts["launch_pdl"] = True
    nw = lin.nw if lin.nw is not None else lin.x
    compiled = whole_share_kernel[(lin.n // (r * subs),)](x, nw, lin.w, lin.out, 1e-5, lin.k,
                                                          triton.next_power_of_2(lin.k), r, subs, norm, read_only,
                                                          pdl, **opts)
    return lin.out, compiled


def tiny() -> int:
    torch.manual_seed(0)
    lin = Linear("tiny", "qkv", "cpu")
    for cfg in [(8, 1, 4), (4, 3, 4), (2, 2, 4)]:
        for norm in (False, True):
            out, _ = launch(lin, lin.x, cfg, norm, False)
            err = rel_err(out, shipped_reference(lin, lin.x, norm, rope=False))
            print(f"tiny {cfg} norm={norm}: rel err {err:.4f}")
            if err > 0.02:
                raise SystemExit(f"{cfg}: the kernel computed something else")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "whole_share_probe.json"))
    args = ap.parse_args()
    if args.tiny:
        return tiny()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    bw = copy_bandwidth_gbs("cuda") / 1e3
    lins = [Linear("1b", "qkv", dev) for _ in range(args.layers)]
    xs = chain_inputs(lins)
    ideal = lins[0].bytes() / (bw * 1e12) * 1e6
    rows = []
    os.environ.setdefault("FUSION_PASSES_GEMV_TABLE_DEVICE", "NVIDIA H200")  # the shipped twins' configs, as shipped
    for form, fn in (("rope", launch_shipped), ("kv", launch_shipped_kv)):  # the shipped PDL twins, for reference
        us = time_graph(lambda: [fn(lin, x, True) for lin, x in zip(lins, xs)]) / len(lins)
        rows.append(dict(cfg=f"shipped {form}", norm=True, us_pdl=round(us, 3), pct_pdl=round(100 * ideal / us, 1)))
        print(json.dumps(rows[-1]), flush=True)
    for norm in (False, True):
        for cfg in CONFIGS:
            row = dict(cfg=cfg, norm=norm)
            try:
                out, compiled = launch(lins[0], lins[0].x, cfg, norm, False)
                row["rel_err"] = round(rel_err(out, shipped_reference(lins[0], lins[0].x, norm, rope=False)), 5)
                _, compiled = launch(lins[0], lins[0].x, cfg, norm, True)
                row["regs"], row["spills"] = getattr(compiled, "n_regs", None), getattr(compiled, "n_spills", None)
                for variant, pdl, ro in (("plain", False, False), ("pdl", True, False), ("read+pdl", True, True)):
                    if ro and norm:
                        continue
                    us = time_graph(lambda: [launch(lin, x, cfg, norm, pdl, ro) for lin, x in zip(lins, xs)])
                    us /= len(lins)
                    row[f"us_{variant}"], row[f"pct_{variant}"] = round(us, 3), round(100 * ideal / us, 1)
                outs = {}
                for pdl in (False, True):
                    torch.cuda.synchronize()
                    for lin, x in zip(lins, xs):
                        launch(lin, x, cfg, norm, pdl)
                    torch.cuda.synchronize()
                    outs[pdl] = [lin.out.clone() for lin in lins]
                row["pdl_equals_plain"] = all(torch.equal(a, b) for a, b in zip(outs[False], outs[True]))
            except Exception as e:  # noqa: BLE001 - a config that does not compile is reported, the rest run
                row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\ncopy bandwidth {bw:.2f} TB/s; 1B q/k/v ({ideal:.2f} us at it), us per GEMV in chains of 16 twins")
    for r in rows:
        print(f"{str(r['cfg']):12} norm={r['norm']!s:5} regs {r.get('regs')} spills {r.get('spills')}  "
              f"plain {r.get('us_plain')}  pdl {r.get('us_pdl')} ({r.get('pct_pdl')} %)  "
              f"read+pdl {r.get('us_read+pdl')}  equal {r.get('pdl_equals_plain')}  err {r.get('rel_err')} "
              f"{r.get('error', '')}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(dict(environment=environment("cuda"), copy_bw_tbs=bw, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
