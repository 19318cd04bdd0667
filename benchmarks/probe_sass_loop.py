"""Probe, no GPU needed: where ptxas puts the persistent GEMV loop's weight loads (sm_90 SASS).

    python benchmarks/probe_sass_loop.py                      # every gemv_table.PERSISTENT entry, as launched
    python benchmarks/probe_sass_loop.py --set PERSIST=2      # the same entries with a config value changed

Each entry is compiled for sm_90 with the ptxas bundled in the triton wheel (``tests/kernels/test_compile_for_hopper``'s
helpers), and its hot loop (the body of the last backward branch) is read from ``cuobjdump -sass``: the number of
instructions, the positions of the 128-bit weight loads (``LDG.E.EF.128``: evict-first), the first and last
multiply-add and the barriers. PTX requests the next block's rows at the top of the loop; sessions 27, 33 and 34 used
this to see that ptxas moves those loads down to just before the reduction's barrier, after this block's
multiply-adds, at any register budget (``benchmarks/HISTORY.md``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from fusion_passes.kernels import gemv_table  # noqa: E402
from tests.kernels import test_compile_for_hopper as hopper  # noqa: E402


def sass(key: tuple, changes: dict) -> tuple[str, int, int]:
    """sm_90 SASS of a PERSISTENT entry's launch (``changes`` applied before the register cap), its registers and
    stack bytes per thread."""
    asm, _, _ = hopper.compile_persistent_entry((key, False), changes)
    return hopper.cuobjdump(asm["cubin"], "-sass"), *hopper.registers_per_thread(asm["cubin"])


def hot_loop(text: str) -> dict:
    """The body of the last backward branch: its length, weight-load and barrier positions, multiply-add span."""
    code = [(int(m.group(1), 16), m.group(2).strip())
            for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", text)]
    back = [(at, int(m.group(1), 16)) for at, ins in code
            if (m := re.search(r"\bBRA 0x([0-9a-f]+)", ins)) and int(m.group(1), 16) < at]
    end, start = back[-1]
    body = [ins for at, ins in code if start <= at <= end]
    ffma = [i for i, ins in enumerate(body) if re.search(r"\bFFMA\b", ins)]
    return dict(instructions=len(body), weight_loads=[i for i, ins in enumerate(body) if "LDG.E.EF.128" in ins],
                ffma=(ffma[0], ffma[-1]) if ffma else None,
                barriers=[i for i, ins in enumerate(body) if "BAR.SYNC" in ins])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", nargs="*", default=[], metavar="NAME=INT", help="config values to change, e.g. PERSIST=2")
    args = p.parse_args(argv)
    changes = {name: int(value) for name, value in (kv.split("=", 1) for kv in args.set)}
    for key in gemv_table.PERSISTENT:
        text, regs, stack = sass(key, changes)
        print(" ".join(map(str, key[1:])), f"regs {regs} stack {stack}", hot_loop(text), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
