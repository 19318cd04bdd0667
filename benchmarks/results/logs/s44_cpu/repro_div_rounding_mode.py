"""Minimal repro: a div with rounding_mode ("floor"/"trunc") on the attention scores is folded into SDPA's scale
as a true division (_scores_op checks is_op(op, aten.div) but not the rounding_mode kwarg). Reached both in the new
flat-scores (DeBERTa) phase and in the 4-d phase.
Run: cd /work/main && PYTHONPATH=. TORCHINDUCTOR_FX_GRAPH_CACHE=0 python /tmp/s44/audit/repro_div_rounding_mode.py"""
import math, warnings
import torch, torch.nn.functional as F
import fusion_passes

torch.manual_seed(0)
B, H, Sq, Sk, D = 2, 3, 5, 7, 8
N = B * H
q, k, v = (torch.randn(B, H, s, D) * 3 for s in (Sq, Sk, Sk))
rel = torch.randn(N, Sq, Sk)

def deberta_like(q, k, v, rel):
    s = torch.bmm(q.reshape(N, Sq, D), k.reshape(N, Sk, D).mT / math.sqrt(D))
    s = torch.div(s, 0.5, rounding_mode="floor") + rel          # floor(s / 0.5), not s * 2
    p = F.softmax(s.view(B, H, Sq, Sk), -1)
    return torch.bmm(p.view(N, Sq, Sk), v.reshape(N, Sk, D)).view(B, H, Sq, D)

with torch.no_grad(), fusion_passes.capture() as recs, warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ref = deberta_like(q, k, v, rel)
    out = torch.compile(deberta_like, backend=fusion_passes.backend(patterns=["attention_sdpa"]))(q, k, v, rel)
print("fired:", [m.detail.get("scale") for r in recs for m in r.matches], "max abs err:", (out - ref).abs().max().item())
