"""
``@fusion_passes.fuse`` on your own HF-style module
==================================================

Decorate a module class and every instance compiles its ``forward`` with our backend on the first call;
parameter names and ``state_dict`` keys stay exactly as they were, so checkpoints load unchanged. The module
below is written the way ``transformers`` writes a decoder layer (fp32-upcast RMSNorm, separate q/k/v
projections, eager softmax attention, residual adds), which is what the fusions target.

    python examples/decorator_custom_module.py
"""

# %%
# A decoder layer, decorated
# --------------------------
import argparse
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

import fusion_passes


class RMSNorm(nn.Module):
    """x [..., D] -> [..., D], computed in fp32 like HF's LlamaRMSNorm."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


@fusion_passes.fuse  # compiled on each instance's first call; state_dict unchanged
class DecoderLayer(nn.Module):
    """hidden [B, S, D] -> [B, S, D]: pre-norm causal self-attention and a SiLU MLP, each with a residual add."""

    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(dim), RMSNorm(dim)
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.up, self.down = nn.Linear(dim, 2 * dim, bias=False), nn.Linear(2 * dim, dim, bias=False)

    def attention(self, h):
        b, s, _ = h.shape
        q, k, v = (p(h).view(b, s, self.heads, self.head_dim).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)        # [B, H, S, S]
        causal = torch.full((s, s), float("-inf"), device=h.device, dtype=scores.dtype).triu(1)
        probs = F.softmax(scores + causal, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.o_proj(torch.matmul(probs, v).transpose(1, 2).reshape(b, s, -1))

    def forward(self, hidden):
        hidden = hidden + self.attention(self.input_layernorm(hidden))
        return hidden + self.down(F.silu(self.up(self.post_attention_layernorm(hidden))))


# %%
# Run it and check it against the undecorated forward
# ---------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="@fuse on a custom HF-style module")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=16)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    layer = DecoderLayer().eval()
    x = torch.randn(args.batch, args.seq, 64)
    with torch.no_grad(), fusion_passes.capture() as records:
        got = layer(x)                                          # compiles on this first call
        expected = DecoderLayer.forward.__wrapped__(layer, x)   # the original forward, eager
    err = (got - expected).abs().max().item()
    print(f"max |fused - eager| = {err:.2e}")
    print(f"state_dict keys unchanged: {sorted(layer.state_dict())[:3]} ...")
    from fusion_passes.report import summary_table

    print(summary_table(records))
    return 0 if err <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
