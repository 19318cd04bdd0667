"""
A HuggingFace Llama compiled with the backend string
====================================================

``torch.compile(model, backend="fusion_passes")`` is all it takes: the package registers the backend under
that name (an entry point), so an unmodified ``transformers`` model gets our fusions. This example builds a
tiny Llama from a config (random weights, nothing downloaded), checks the compiled logits against eager and
prints which patterns fired and where.

    python examples/hf_llama_backend.py                # CPU is fine
    python examples/hf_llama_backend.py --device cuda --dtype bfloat16
"""

# %%
# Build a tiny Llama (random weights, no download)
# ------------------------------------------------
import argparse
import sys

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_llama(device: str = "cpu", dtype: torch.dtype = torch.float32, layers: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    config._attn_implementation = "eager"  # the unfused attention our attention -> SDPA pattern rewrites
    model = LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()
    input_ids = torch.randint(0, config.vocab_size, (2, 16), device=device)
    return model, (input_ids,)


# %%
# Compile with the backend string and compare against eager
# ---------------------------------------------------------
def main(argv=None) -> int:
    import fusion_passes

    parser = argparse.ArgumentParser(description="HF Llama compiled with backend='fusion_passes'")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)

    model, (input_ids,) = build_llama(args.device, DTYPES[args.dtype], args.layers)
    compiled = torch.compile(model, backend="fusion_passes")
    with torch.no_grad(), fusion_passes.capture() as records:
        expected = model(input_ids, use_cache=False).logits
        got = compiled(input_ids, use_cache=False).logits

    tol = 1e-4 if args.dtype == "float32" else 3e-2
    err = (got.float() - expected.float()).abs().max().item()
    print(f"max |compiled - eager| = {err:.2e} (tolerance {tol:g})")
    matches = [m for rec in records for m in rec.matches]
    for m in matches:
        print(f"  {m.pattern:<16} graph {m.graph_id}  {m.source}")
    print(f"{len(matches)} rewrite(s) in {len(records)} graph(s); patterns enabled: "
          f"{', '.join(fusion_passes.available_patterns()) or '(none yet)'}")
    return 0 if err <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
