"""
BERT sentence embeddings, compiled and checked against eager
============================================================

Sentence embeddings = mean of BERT's last hidden states over the real (non-padding) tokens, L2-normalised;
similar sentences get a high cosine similarity. Padding makes the attention mask matter, which is exactly
what an attention rewrite must get right, so we compare the compiled embeddings and the similarity matrix
with eager on a padded batch. Tiny config, random weights, nothing downloaded.

    python examples/bert_sentence_embeddings.py
"""

# %%
# The embedding function
# ----------------------
import argparse
import sys

import torch
import torch.nn.functional as F


def build_bert(layers: int = 2):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64)
    config._attn_implementation = "eager"
    return BertModel(config, add_pooling_layer=False).eval()


def embed(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """input_ids, attention_mask [B, S] -> unit-norm sentence embeddings [B, D] (masked mean pooling)."""
    hidden = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state     # [B, S, D]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)                                     # [B, S, 1]
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return F.normalize(pooled, dim=-1)


def padded_batch(lengths=(12, 7, 16, 3), seq: int = 16, vocab: int = 128):
    """Random token ids with right padding: input_ids, attention_mask [B, S]."""
    torch.manual_seed(1)
    ids = torch.randint(1, vocab, (len(lengths), seq))
    mask = (torch.arange(seq)[None, :] < torch.tensor(lengths)[:, None]).long()
    return ids * mask, mask


# %%
# Compile, embed, compare
# -----------------------
def main(argv=None) -> int:
    import fusion_passes

    parser = argparse.ArgumentParser(description="BERT sentence embeddings with fusion_passes")
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)

    model = build_bert(args.layers)
    input_ids, attention_mask = padded_batch()
    compiled_embed = torch.compile(embed, backend=fusion_passes.backend())
    with torch.no_grad(), fusion_passes.capture() as records:
        expected = embed(model, input_ids, attention_mask)
        got = compiled_embed(model, input_ids, attention_mask)

    err = (got - expected).abs().max().item()
    sim_err = (got @ got.T - expected @ expected.T).abs().max().item()
    print(f"max |compiled - eager| embedding: {err:.2e}; cosine-similarity matrix: {sim_err:.2e}")
    print("cosine similarities (compiled):")
    print((got @ got.T).numpy().round(3))
    matches = [m.pattern for rec in records for m in rec.matches]
    print(f"rewrites: {', '.join(sorted(set(matches))) or '(none)'} ({len(matches)} in {len(records)} graph(s))")
    return 0 if max(err, sim_err) <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
