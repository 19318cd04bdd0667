"""What ``attention_sdpa`` makes of HF's ``sdpa`` prompt attention on this device (session 23's diagnosis).

    python benchmarks/diag_sdpa_prefill.py [--tokens 512]
    python benchmarks/diag_sdpa_prefill.py --tiny          # CPU smoke run (hidden 64)

A 2-layer Llama-1B-shaped transformers model (bf16 on CUDA, fp32 on CPU), HF ``sdpa`` attention, one prompt,
compiled with the attention family alone: prints the max error against eager, the matches and near misses, and for
every SDPA call the mask the constant-mask proof evaluated (its dtype, shape and distinct values) and what it
decided. On the H200 this showed SDPA handing cuDNN a bool mask as ``where(mask, 0, -65504)``.
"""

from __future__ import annotations

import argparse

import torch

import fusion_passes
from fusion_passes import graph_utils
from fusion_passes.patterns import attention_sdpa


def traced_mask_kind(term, q_len, k_len):
    """``attention_sdpa._prove_mask_kind``, printing the mask value it judged (once per mask: the pass keeps the
    answer for the other layers)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    kind = _prove_mask_kind(term, q_len, k_len)
    nodes = attention_sdpa._constant_subgraph(term.tensor)
    if nodes is None:
        print(f"mask: not a constant subgraph -> {kind}")
        return kind
    value = graph_utils.run_nodes(nodes, {})[term.tensor]
    with unset_fake_temporarily():
        distinct = torch.unique(value.float()).tolist()[:6]
    print(f"mask ({term.kind}, {len(nodes)} nodes): {value.dtype} {tuple(value.shape)} values {distinct} -> {kind}")
    return kind


_prove_mask_kind = attention_sdpa._prove_mask_kind


def main(argv=None) -> None:
    import transformers

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--tiny", action="store_true")
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    shape = (dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128) if args.tiny
             else dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=8, intermediate_size=8192))
    cfg = transformers.LlamaConfig(**shape, num_hidden_layers=2, vocab_size=1024, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(device, dtype).eval()
    ids = torch.randint(0, 1024, (1, args.tokens), device=device)
    torch._dynamo.reset()
    attention_sdpa._prove_mask_kind = traced_mask_kind
    try:  # without the FX graph cache: a cached graph would skip the pass, and its printing
        with torch.no_grad(), fusion_passes.capture() as recs, torch._inductor.config.patch(fx_graph_cache=False):
            out = torch.compile(model, backend=fusion_passes.backend(patterns=["attention_sdpa"]))(input_ids=ids,
                                                                                                 use_cache=False)
            ref = model(input_ids=ids, use_cache=False)
    finally:
        attention_sdpa._prove_mask_kind = _prove_mask_kind
    print("max err", (out.logits.float() - ref.logits.float()).abs().max().item())
    for r in recs:
        print("matches", [m.detail for m in r.matches])
        print("near misses", [n.reason for n in r.near_misses])
        print("errors", r.errors)


if __name__ == "__main__":
    main()
