"""
A greedy decode loop with each step replayed as one CUDA graph
==============================================================

The shortest decode step fusion_passes offers: the model compiled by our backend (no CUDA graphs of its own), and
its whole step (the Python around the graph, Dynamo's guards, the compiled kernels) captured by
``fusion_passes.cuda_graph_step`` and replayed per token, with only the new token and position copied in. The
model is the package's tiny HF-style Llama with a static KV cache (``fusion_passes.zoo``; nothing downloaded,
transformers not needed). The loop runs twice, uncompiled and graphed, and checks the tokens are the same. On a
CPU the step runs as is (no CUDA graphs): the check still holds.

    python examples/graphed_decode.py                        # CPU is fine
    python examples/graphed_decode.py --device cuda --dtype bfloat16 --layers 16
"""

# %%
# A decode loop over a static KV cache
# ------------------------------------
import argparse
import sys
import time

import torch

from fusion_passes import zoo

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def greedy(model, step, prompt: torch.Tensor, new_tokens: int, cache: zoo.StaticKVCache):
    """Prefill ``prompt`` [1, P] into ``cache`` with ``model``, then ``new_tokens`` greedy steps with
    ``step(ids [1, 1], position [1]) -> logits [1, 1, V]``; returns the tokens and the median ms per step after
    the first three (which compile, check and capture)."""
    p = prompt.shape[1]
    logits = model(prompt, cache=cache, cache_position=torch.arange(p, device=prompt.device))
    ids, tokens, times = logits[:, -1:].argmax(-1), [], []
    for i in range(new_tokens):
        start = time.perf_counter()
        logits = step(ids, torch.tensor([p + i], device=prompt.device))
        ids = logits[:, -1:].argmax(-1)
        tokens.append(ids.item())  # (a sync per token, as a generation loop that checks for the end has)
        times.append((time.perf_counter() - start) * 1e3)
    later = sorted(times[3:]) or times
    return tokens, later[len(later) // 2]


# %%
# Uncompiled, then compiled and graphed, and compare
# --------------------------------------------------
def main(argv=None) -> int:
    import fusion_passes

    parser = argparse.ArgumentParser(description="a decode loop replayed as one CUDA graph per token")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=16)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    config = zoo.LlamaConfig(num_hidden_layers=args.layers, max_position_embeddings=8 + args.new_tokens)
    model = zoo.LlamaForCausalLM(config).to(device=args.device, dtype=DTYPES[args.dtype]).eval()
    prompt = torch.randint(0, config.vocab_size, (1, 8), generator=torch.Generator().manual_seed(1)).to(args.device)
    compiled = torch.compile(model, backend=fusion_passes.backend())
    results = {}
    with torch.no_grad():
        for name in ("eager", "graphed"):
            cache = zoo.StaticKVCache(config, 1, 8 + args.new_tokens, dtype=DTYPES[args.dtype], device=args.device)
            if name == "eager":
                step = lambda ids, pos: model(ids, cache=cache, cache_position=pos)  # noqa: E731
            else:
                step = fusion_passes.cuda_graph_step(lambda ids, pos: compiled(ids, cache=cache, cache_position=pos))
            results[name] = greedy(model, step, prompt, args.new_tokens, cache)
            print(f"{name:8s} {results[name][1]:8.3f} ms per token (median after the first 3)")

    same = results["eager"][0] == results["graphed"][0]
    print(f"{args.new_tokens} greedy tokens, graphed vs eager: {'same' if same else 'DIFFERENT'}")
    if step.skip_reason:
        print(f"the step ran uncaptured: {step.skip_reason}")
    else:
        print("captured" if step.runners else "no CUDA: the step ran as is")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
