"""
HF ``generate`` with its decode step compiled by fusion_passes
==============================================================

``model.generate(..., compile_config=CompileConfig(backend="fusion_passes"))`` compiles the decode step that
``generate`` runs with a static KV cache, through our backend (``CompileConfig``'s default
``mode="reduce-overhead"`` is forwarded to Inductor: CUDA graphs on a GPU). This example builds a tiny Llama
(random weights, nothing downloaded), generates greedily with and without compilation, checks the tokens are
the same and prints which patterns fired in the compiled step.

    python examples/hf_generate.py                          # CPU is fine
    python examples/hf_generate.py --device cuda --dtype bfloat16
"""

# %%
# Build a tiny Llama (random weights, no download)
# ------------------------------------------------
import argparse
import sys

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_llama(device: str, dtype: torch.dtype, layers: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    config._attn_implementation = "sdpa"  # HF's default attention
    return LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


# %%
# Generate eagerly, then with the compiled decode step, and compare
# -----------------------------------------------------------------
def main(argv=None) -> int:
    from transformers import CompileConfig

    import fusion_passes

    parser = argparse.ArgumentParser(description="HF generate compiled with backend='fusion_passes'")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=16)
    args = parser.parse_args(argv)

    model = build_llama(args.device, DTYPES[args.dtype], args.layers)
    prompt = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1)).to(args.device)
    kw = dict(max_new_tokens=args.new_tokens, do_sample=False, cache_implementation="static", pad_token_id=0)
    config = CompileConfig(backend="fusion_passes", fullgraph=True)
    config._compile_all_devices = True  # HF compiles the decode step on a GPU by itself; on CPU only when asked
    with torch.no_grad():
        expected = model.generate(prompt, **kw, disable_compile=True)
        with fusion_passes.capture() as records:
            got = model.generate(prompt, **kw, compile_config=config)

    same = torch.equal(got, expected)
    print(f"{args.new_tokens} greedy tokens, compiled vs eager generate: {'same' if same else 'DIFFERENT'}")
    fired = sorted({m.pattern for rec in records for m in rec.matches})
    print(f"compiled {len(records)} graph(s); patterns fired: {', '.join(fired) or '(none)'}")
    return 0 if same and records else 1


if __name__ == "__main__":
    sys.exit(main())
