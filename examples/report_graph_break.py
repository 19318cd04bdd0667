"""
Report for a model with deliberate graph breaks, written to one HTML page
=========================================================================

A small HF-style attention block where someone left a debug ``print`` between the attention scores and the
softmax, and a data-dependent ``if`` and an ``.item()`` further down: three graph breaks. The report shows,
from ONE compile:

* each break (reason, ``file:line``, hints, how often it was hit, the graphs it separates),
* that the ``print`` split QK^T from the softmax, so attention -> SDPA could not fire there,
* per compiled graph: matches, near misses, op counts, a diff of the graph before/after our passes.

Run it (CPU is fine)::

    python examples/report_graph_break.py --out report.html
    fusion-passes report examples/report_graph_break.py:make_model --html report.html   # same, from the CLI
"""

# %%
# The model
# ---------
import argparse
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


def log_scores(scores: torch.Tensor) -> None:
    """The kind of debug line that ends up in real models; Dynamo cannot trace ``print``."""
    print(f"attention scores: shape {tuple(scores.shape)}")


class BreakyAttentionBlock(nn.Module):
    """x [B, S, D] -> [B, S, D]: pre-norm attention with three graph breaks (print, if on a tensor, .item())."""

    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.norm = nn.LayerNorm(dim)
        self.q_proj, self.k_proj, self.v_proj = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.o_proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        h = self.norm(x)
        q, k, v = (p(h).view(b, s, self.heads, self.head_dim).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)   # [B, H, S, S]
        log_scores(scores)                                                        # graph break 1: print
        probs = F.softmax(scores, dim=-1)
        if probs.isnan().any():                                                   # graph break 2: data-dependent if
            probs = torch.nan_to_num(probs)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, -1)
        steps = int(x.abs().amax().item()) + 1                                    # graph break 3: .item()
        return x + self.o_proj(out) / steps


def make_model(device: str = "cpu", dtype: torch.dtype = torch.float32):
    """The CLI factory: ``(model, example_inputs)``."""
    torch.manual_seed(0)
    model = BreakyAttentionBlock().to(device=device, dtype=dtype).eval()
    x = torch.randn(2, 8, 32, device=device, dtype=dtype)
    return model, (x,)


# %%
# The report
# ----------
def main(argv=None) -> int:
    import fusion_passes.report

    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--out", default="report_graph_break.html", help="where to write the HTML report")
    args = parser.parse_args(argv)

    model, inputs = make_model()
    with torch.no_grad():
        expected = model(*inputs)
        rep = fusion_passes.report(model, *inputs)
    torch.testing.assert_close(rep.output, expected)  # the report's compile computed the same thing

    print(rep)
    rep.to_html(args.out)
    print(f"\nwrote {args.out}: {len(rep.breaks)} distinct graph breaks, {len(rep.graphs)} compiled graphs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
