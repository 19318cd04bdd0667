"""Session 23 diagnosis: what the attention rewrite makes of HF's sdpa prompt attention on this device (a small
Llama-1B-shaped model, 2 layers, bf16): its matches and near misses."""
import torch
import transformers

import fusion_passes

cfg = transformers.LlamaConfig(hidden_size=2048, num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=2,
                               intermediate_size=8192, vocab_size=1024, attn_implementation="sdpa")
torch.manual_seed(0)
model = transformers.LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
ids = torch.randint(0, 1024, (1, 512), device="cuda")
torch._dynamo.reset()
with torch.no_grad(), fusion_passes.capture() as recs:
    out = torch.compile(model, backend=fusion_passes.backend(patterns=["attention_sdpa"]))(input_ids=ids, use_cache=False)
    ref = model(input_ids=ids, use_cache=False)
print("max err", (out.logits.float() - ref.logits.float()).abs().max().item())
for r in recs:
    print("matches", [m.detail for m in r.matches])
    print("misses", [(n.pattern, n.reason) for n in r.near_misses])
    print("errors", r.errors)
    for s in r.stages:
        print(s.hook, {k: v for k, v in s.ops_before.items() if "scaled" in k or k in ("aten.clone", "aten.where")},
              "->", {k: v for k, v in s.ops_after.items() if "scaled" in k or k in ("aten.clone", "aten.where")})

# why the mask is not proven constant: _constant_subgraph's and _constant_mask_kind's results, traced
from fusion_passes.patterns import attention_sdpa  # noqa: E402

_sub, _kind = attention_sdpa._constant_subgraph, attention_sdpa._constant_mask_kind


def traced_sub(node):
    nodes = _sub(node)
    print("constant_subgraph:", None if nodes is None else len(nodes), "nodes")
    if nodes is None:
        from fusion_passes import graph_utils
        from fusion_passes.graph_utils import val
        stack, seen = [node], set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            t = val(n)
            print("   ", n.format_node()[:200], tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__,
                  graph_utils.deterministic_op(n), graph_utils.lifted_constant(n) is not None)
            stack.extend(n.all_input_nodes)
    return nodes


def traced_kind(attn, q_len, k_len):
    kind = _kind(attn, q_len, k_len)
    from fusion_passes import graph_utils
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    term = attn.mask[0]
    nodes = _sub(term.tensor)
    env = graph_utils.run_nodes(nodes, {})
    with unset_fake_temporarily():
        value = env[term.tensor]
        print("value", value.dtype, tuple(value.shape), value.device, torch.unique(value.float()).tolist()[:8])
        for n in nodes:
            t = env[n]
            if isinstance(t, torch.Tensor) and t.numel() > 1:
                print("   ", n.name, t.dtype, tuple(t.shape), t.flatten()[:6].tolist(), "sum", t.float().sum().item())
    print("mask kind:", kind, "q_len", q_len, "k_len", k_len, [(t.kind, t.tensor.format_node()[:150]) for t in attn.mask])
    return kind


attention_sdpa._constant_subgraph, attention_sdpa._constant_mask_kind = traced_sub, traced_kind
_decide = attention_sdpa._decide_mask_and_gqa


def traced_decide(attn):
    print("decide: mask", [t.kind for t in attn.mask], "sources", attn.kv_sources is not None, "decode", attn.decode)
    _decide(attn)
    print("decided: dropped", attn.mask_dropped, "gqa", attn.enable_gqa)


attention_sdpa._decide_mask_and_gqa = traced_decide
torch._inductor.config.fx_graph_cache = False
torch._dynamo.reset()
with torch.no_grad():
    torch.compile(model, backend=fusion_passes.backend(patterns=["attention_sdpa"]))(input_ids=ids, use_cache=False)
