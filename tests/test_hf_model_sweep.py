"""A sweep of HF architectures beyond ``tests/test_hf_models.py``'s nine: tiny random models (2 layers, hidden 64,
vocab 128, fp32, seeded, eval), compiled with every family, checked against eager.

Each architecture stresses something the first nine do not: unusual norms (Gemma2/3's (1 + w), OLMo2's norms
after attention and over all of q / k, Cohere's LayerNorm without bias, OLMo's non-parametric LayerNorm,
Nemotron's LayerNorm1P), per-head QK-norm (Qwen3, Gemma3), parallel residuals (GPT-NeoX, GPT-J, Falcon, Phi,
Cohere), ALiBi (Bloom, Falcon), softcapping and sliding windows (Gemma2/3, Starcoder2), a fused qkv weight in the
checkpoint (Phi3, Falcon, GPT-NeoX, Bloom), partial rotary (Phi, GPT-NeoX, StableLM, Persimmon, GLM), mixtures of
experts (Mixtral, Qwen3-MoE), attention sinks (GPT-OSS), relative-position attention (DeBERTa-v2), encoder-decoders
(BART, Whisper) and state-space / recurrent models (Mamba, RWKV).
"""

import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.test_hf_models import DECODER, EAGER, SMALL, _compiled_matches_eager, _ids, _padding_mask  # noqa: E402

pytestmark = pytest.mark.slow


def _cls(name):
    """transformers' class ``name``, or skip the test where the installed version lacks it."""
    cls = getattr(transformers, name, None)
    if cls is None:
        pytest.skip(f"transformers {transformers.__version__} has no {name}")
    return cls


def _rope(partial):
    """Partial rotary: transformers 5 reads ``rope_parameters``, 4.x ``partial_rotary_factor``."""
    return dict(partial_rotary_factor=partial, rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": partial, "rope_type": "default"})


def _lm(cfg_name, model_name, **cfg):
    def build():
        model = _cls(model_name)(_cls(cfg_name)(**{**TOKENS, **cfg}))
        return model, dict(input_ids=_ids(), use_cache=False)
    return build


TOKENS = dict(pad_token_id=0, bos_token_id=0, eos_token_id=0)  # ids inside the 128-token vocabulary


def _encoder(cfg_name, model_name, **cfg):
    def build():
        model = _cls(model_name)(_cls(cfg_name)(**cfg))
        return model, dict(input_ids=_ids(), attention_mask=_padding_mask())
    return build


# decoder-only causal LMs: name -> builder (model, forward kwargs)
LMS = {
    "phi3": _lm("Phi3Config", "Phi3ForCausalLM", **DECODER, **_rope(0.5)),  # qkv_proj / gate_up_proj
    "phi": _lm("PhiConfig", "PhiForCausalLM", **DECODER, qk_layernorm=True, **_rope(0.5)),  # parallel residual
    "gemma2": _lm("Gemma2Config", "Gemma2ForCausalLM", **DECODER, head_dim=16, sliding_window=4),  # softcap
    "gemma3": _lm("Gemma3TextConfig", "Gemma3ForCausalLM", **DECODER, head_dim=16, sliding_window=4),
    "qwen3": _lm("Qwen3Config", "Qwen3ForCausalLM", **DECODER, head_dim=16),
    "qwen3_moe": _lm("Qwen3MoeConfig", "Qwen3MoeForCausalLM", **DECODER, head_dim=16, num_experts=4,
                     num_experts_per_tok=2, moe_intermediate_size=32),
    "mixtral": _lm("MixtralConfig", "MixtralForCausalLM", **DECODER, num_local_experts=4, num_experts_per_tok=2,
                   sliding_window=None),
    "falcon": _lm("FalconConfig", "FalconForCausalLM", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                  vocab_size=128, **EAGER),  # multi-query, parallel attention, one query_key_value weight
    "falcon_alibi": _lm("FalconConfig", "FalconForCausalLM", hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, vocab_size=128, alibi=True, multi_query=False,
                        parallel_attn=False, bias=True, **EAGER),
    "falcon_new": _lm("FalconConfig", "FalconForCausalLM", hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_kv_heads=2, vocab_size=128, new_decoder_architecture=True,
                      **EAGER),
    "gpt_neox": _lm("GPTNeoXConfig", "GPTNeoXForCausalLM", **SMALL, max_position_embeddings=64, **_rope(0.25)),
    "gptj": _lm("GPTJConfig", "GPTJForCausalLM", n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64,
                rotary_dim=8, **EAGER),
    "bloom": _lm("BloomConfig", "BloomForCausalLM", hidden_size=64, n_layer=2, n_head=4, vocab_size=128, **EAGER),
    "stablelm": _lm("StableLmConfig", "StableLmForCausalLM", **DECODER, qk_layernorm=True, use_qkv_bias=True,
                    **_rope(0.25)),
    "stablelm_parallel": _lm("StableLmConfig", "StableLmForCausalLM", **DECODER, use_parallel_residual=True,
                             **_rope(0.25)),
    "starcoder2": _lm("Starcoder2Config", "Starcoder2ForCausalLM", **DECODER, sliding_window=4),
    "cohere": _lm("CohereConfig", "CohereForCausalLM", **DECODER, use_qk_norm=True, logit_scale=1.0),
    "cohere2": _lm("Cohere2Config", "Cohere2ForCausalLM", **DECODER, sliding_window=4, head_dim=16, logit_scale=1.0,
                   layer_types=["sliding_attention", "full_attention"]),
    "olmo": _lm("OlmoConfig", "OlmoForCausalLM", **DECODER, clip_qkv=8.0),
    "olmo2": _lm("Olmo2Config", "Olmo2ForCausalLM", **DECODER),
    "granite": _lm("GraniteConfig", "GraniteForCausalLM", **DECODER, residual_multiplier=0.5,
                   embedding_multiplier=2.0, attention_multiplier=0.3, logits_scaling=4.0),
    "nemotron": _lm("NemotronConfig", "NemotronForCausalLM", **DECODER, head_dim=16, **_rope(0.5)),
    "persimmon": _lm("PersimmonConfig", "PersimmonForCausalLM", **{k: v for k, v in DECODER.items()
                                                                  if k != "num_key_value_heads"}, **_rope(0.5)),
    "glm": _lm("GlmConfig", "GlmForCausalLM", **DECODER, head_dim=16, **_rope(0.5)),
    "smollm3": _lm("SmolLM3Config", "SmolLM3ForCausalLM", **DECODER, no_rope_layers=[1, 0]),
    "gpt_oss": _lm("GptOssConfig", "GptOssForCausalLM", **DECODER, head_dim=16, num_local_experts=4,
                   num_experts_per_tok=2, sliding_window=4, layer_types=["sliding_attention", "full_attention"],
                   rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
    "mamba": _lm("MambaConfig", "MambaForCausalLM", hidden_size=64, num_hidden_layers=2, vocab_size=128,
                 state_size=8, time_step_rank=8),
    "rwkv": _lm("RwkvConfig", "RwkvForCausalLM", hidden_size=64, num_hidden_layers=2, vocab_size=128,
                attention_hidden_size=64, intermediate_size=128, context_length=64),
}


def _bart():
    cfg = _cls("BartConfig")(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                             decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=128,
                             max_position_embeddings=64, **EAGER)
    return _cls("BartModel")(cfg), dict(input_ids=_ids(), attention_mask=_padding_mask(),
                                        decoder_input_ids=_ids(seq=7), use_cache=False)


def _whisper():
    cfg = _cls("WhisperConfig")(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                vocab_size=128, num_mel_bins=16, max_source_positions=16, max_target_positions=32,
                                pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0, **EAGER)
    features = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(0))
    return _cls("WhisperModel")(cfg), dict(input_features=features, decoder_input_ids=_ids(seq=7), use_cache=False)


def _clip_text():
    cfg = _cls("CLIPTextConfig")(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                 vocab_size=128, max_position_embeddings=64, **TOKENS, **EAGER)
    return _cls("CLIPTextModel")(cfg), dict(input_ids=_ids(), attention_mask=_padding_mask())


ENCODERS = {
    "distilbert": _encoder("DistilBertConfig", "DistilBertModel", dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                           vocab_size=128, max_position_embeddings=64, **EAGER),
    "roberta": _encoder("RobertaConfig", "RobertaModel", **SMALL, max_position_embeddings=64, pad_token_id=1),
    "albert": _encoder("AlbertConfig", "AlbertModel", **SMALL, embedding_size=32, max_position_embeddings=64),
    "deberta_v2": _encoder("DebertaV2Config", "DebertaV2Model", **SMALL, max_position_embeddings=64,
                           relative_attention=True, position_buckets=8, pos_att_type=["p2c", "c2p"],
                           norm_rel_ebd="layer_norm", share_att_key=True),
    "electra": _encoder("ElectraConfig", "ElectraModel", **SMALL, embedding_size=32, max_position_embeddings=64),
    "bart": _bart,
    "whisper": _whisper,
    "clip_text": _clip_text,
}

BUILDERS = {**LMS, **ENCODERS}
# transformers 5.17 (the GPU machine's) writes two of the models differently from 5.25, which the expectations below
# were written for: its Falcon scales ALiBi with the scores, ``(s + alibi) * c`` (SDPA adds its mask after the
# scale: a near miss), and its Mamba cache updates the states without the in-place adds state_updates groups
OLD_MODEL_CODE = tuple(int(x) for x in transformers.__version__.split(".")[:2]) < (5, 25)


def _fired(recs):
    return {m.pattern for r in recs for m in r.matches}


# name -> (families that must fire on the prompt with eager attention, families that must not)
FORWARD = {
    # one qkv_proj / gate_up_proj weight: nothing to pack; partial rotary
    "phi3": ({"attention_sdpa", "residual_norm"}, {"qkv_packing"}),
    "phi": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),  # parallel residual, q/k LayerNorm
    # tanh-softcapped scores: SDPA cannot express them, so the prompt's attention stays
    "gemma2": ({"qkv_packing", "residual_norm"}, {"attention_sdpa"}),
    "gemma3": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),  # QK-norm, (1 + w), sliding window
    "qwen3_moe": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),
    "falcon": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),  # multi-query, parallel attention
    "falcon_alibi": ({"residual_norm"} if OLD_MODEL_CODE else {"attention_sdpa", "residual_norm"}, set()),  # ALiBi
    "gpt_neox": ({"attention_sdpa", "residual_norm"}, set()),  # fused qkv, parallel residual, partial rotary
    "gptj": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),  # interleaved rotary, parallel residual
    "bloom": ({"attention_sdpa", "residual_norm"}, set()),  # ALiBi through baddbmm, K transposed after flattening
    "cohere": ({"attention_sdpa", "qkv_packing"}, set()),  # LayerNorm without bias, written out by hand
    "olmo2": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),  # norms after attention / MLP
    "granite": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),  # residual / attention multipliers
    # LayerNorm1P: layer_norm(x, w + 1, b). residual_norm read the `+ 1` as Gemma's weight offset, which its
    # layer-norm ops do not take, and dropped it (logits off by 0.53; fixed in 4a4fc17, found by this sweep)
    "nemotron": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),
    # attention sinks: a column concatenated to the scores before the softmax, which SDPA cannot express
    "gpt_oss": ({"qkv_packing", "residual_norm"}, {"attention_sdpa"}),
    # (Mamba and RWKV match too, fp32 within 1e-6; left out for time: Mamba's generation test below covers it)
    "deberta_v2": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),  # c2p / p2c bias on flat scores
    "bart": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),  # encoder, decoder, cross-attention
    "whisper": ({"attention_sdpa", "qkv_packing", "residual_norm"}, set()),
}


@pytest.mark.parametrize("name", list(FORWARD))
def test_sweep_forward_matches_eager(name):
    """The prompt's logits (the last hidden state for encoders) with every family: eager's within 1e-4, the
    expected families fired, the ones that cannot be equivalent did not."""
    must, must_not = FORWARD[name]
    recs = _compiled_matches_eager(BUILDERS[name], "eager")
    fired = _fired(recs)
    assert must <= fired, f"{must - fired} did not fire; near misses: {[n.reason for r in recs for n in r.near_misses]}"
    assert not must_not & fired, must_not & fired
    assert not [e for r in recs for e in r.errors]


def test_sweep_deberta_v1_with_captured_scalars():
    """DeBERTa (v1) breaks on an ``.item()`` inside its attention, between QK^T and the softmax; with Dynamo's
    ``capture_scalar_outputs`` (what the report's hint for that break says) the model is one graph and both
    layers' attentions (4-d matmuls, a relative-position bias, a masked_fill) become SDPA."""
    build = _encoder("DebertaConfig", "DebertaModel", **SMALL, max_position_embeddings=64, relative_attention=True,
                     pos_att_type=["p2c", "c2p"])
    # config.patch, not monkeypatch: in torch 2.14 the name is an alias that monkeypatch's undo breaks for the process
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        recs = _compiled_matches_eager(build, "eager", patterns=["attention_sdpa"])
    assert len(recs) == 1
    assert [m.detail["mask"] for m in recs[0].matches_for("attention_sdpa")] == ["add+fill", "add+fill"]


# HF's sdpa attention, where the architecture has it
@pytest.mark.parametrize("name", ["phi", "falcon_alibi", "gpt_neox", "qwen3_moe"])
def test_sweep_forward_with_sdpa_attention_matches_eager(name):
    recs = _compiled_matches_eager(BUILDERS[name], "sdpa")
    assert not [e for r in recs for e in r.errors]


@pytest.fixture
def decode_kernels_everywhere(monkeypatch):
    """decode_gemv and the decode attention kernel act on CUDA only; here they run (as torch) on CPU too."""
    from fusion_passes.patterns import attention_sdpa, decode_gemv

    monkeypatch.setenv(decode_gemv.POLICY_ENV, "always")
    monkeypatch.setenv(attention_sdpa.DECODE_POLICY_ENV, "always")


def _generate_matches_eager(name, attn="eager", new_tokens=8):
    """8 greedy tokens from HF ``generate`` (its DynamicCache; a 6-token prompt, batch 2) with the model's forward
    compiled with every family: eager's tokens, and each step's logits within 1e-4. Returns the records."""
    import fusion_passes

    torch.manual_seed(0)
    model, _ = BUILDERS[name]()
    model.config._attn_implementation = attn
    model.eval()
    prompt = _ids(batch=2, seq=6)
    kw = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
              do_sample=False, pad_token_id=0, disable_compile=True, output_logits=True,
              return_dict_in_generate=True)
    with torch.no_grad():
        expected = model.generate(prompt, **kw)
        torch._dynamo.reset()
        model.forward = torch.compile(model.forward, backend=fusion_passes.backend())
        try:
            with fusion_passes.capture() as recs, warnings.catch_warnings():
                warnings.simplefilter("ignore")  # transformers' and Dynamo's own (Mamba's lru_cache)
                got = model.generate(prompt, **kw)
        finally:
            del model.forward
    assert torch.equal(got.sequences, expected.sequences)
    for a, b in zip(got.logits, expected.logits):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert not [e for r in recs for e in r.errors]
    return recs


# name -> families that must fire somewhere in the prompt and decode graphs (decode kernels forced on)
GENERATE = {
    "gemma2": {"attention_sdpa", "decode_gemv"},  # softcapped scores in the decode kernel; a window of 4 < 14
    "mamba": {"decode_gemv"} | (set() if OLD_MODEL_CODE else {"state_updates"}),  # in-place conv / ssm states
    "falcon": {"attention_sdpa", "decode_gemv", "qkv_packing"},  # multi-query, one query_key_value weight
}


@pytest.mark.parametrize("name", list(GENERATE))
def test_sweep_greedy_generate_matches_eager(decode_kernels_everywhere, name):
    fired = _fired(_generate_matches_eager(name))
    assert GENERATE[name] <= fired, fired
