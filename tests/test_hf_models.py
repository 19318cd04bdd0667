"""Real transformers models (tiny configs, random weights; eager attention, and HF's default sdpa) through the
whole pipeline.

Each model is compiled once with every family; the test checks parity with eager and that the families
expected for that architecture fired. This is the "works on unmodified HF code" promise.
"""

import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.conftest import compile_with_records, transformers_major  # noqa: E402
from fusion_passes.zoo import hf_cache_kwargs  # noqa: E402

pytestmark = pytest.mark.slow

# eager attention chosen in the config, before the model is built: transformers 4.x picks some models' attention
# classes (BERT's) at construction, so setting it on the built model is too late there
EAGER = dict(attn_implementation="eager")
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=128, **EAGER)
DECODER = dict(SMALL, num_key_value_heads=2, max_position_embeddings=64)


def _ids(batch=2, seq=12, vocab=128):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0))


def _padding_mask(batch=2, seq=12):
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[-1, seq // 2:] = 0
    return mask


def llama():
    cfg = transformers.LlamaConfig(**DECODER)
    return transformers.LlamaForCausalLM(cfg), dict(input_ids=_ids(), use_cache=False)


def mistral():
    cfg = transformers.MistralConfig(**DECODER, sliding_window=None)
    return transformers.MistralForCausalLM(cfg), dict(input_ids=_ids(), use_cache=False)


def qwen2():
    cfg = transformers.Qwen2Config(**DECODER)
    return transformers.Qwen2ForCausalLM(cfg), dict(input_ids=_ids(), use_cache=False)


def gemma():
    cfg = transformers.GemmaConfig(**DECODER, head_dim=16)
    return transformers.GemmaForCausalLM(cfg), dict(input_ids=_ids(), use_cache=False)


def gpt2():
    cfg = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64, **EAGER)
    return transformers.GPT2Model(cfg), dict(input_ids=_ids(), use_cache=False)


def bert():
    cfg = transformers.BertConfig(**SMALL, max_position_embeddings=64)
    return transformers.BertModel(cfg), dict(input_ids=_ids(), attention_mask=_padding_mask())


def opt():
    cfg = transformers.OPTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                                 vocab_size=128, max_position_embeddings=64, word_embed_proj_dim=64, **EAGER)
    return transformers.OPTModel(cfg), dict(input_ids=_ids(), attention_mask=_padding_mask(), use_cache=False)


def t5():
    cfg = transformers.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=128, **EAGER)
    return transformers.T5EncoderModel(cfg), dict(input_ids=_ids(), attention_mask=_padding_mask())


def vit():
    cfg = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                 image_size=32, patch_size=8, **EAGER)
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    return transformers.ViTModel(cfg), dict(pixel_values=pixels)


# model -> families that must fire on it
CASES = {
    llama: {"attention_sdpa", "qkv_packing", "residual_norm"},
    mistral: {"attention_sdpa", "qkv_packing", "residual_norm"},
    qwen2: {"attention_sdpa", "qkv_packing", "residual_norm"},
    gemma: {"attention_sdpa", "qkv_packing", "residual_norm"},
    gpt2: {"attention_sdpa"},
    bert: {"attention_sdpa", "qkv_packing", "residual_norm"},
    opt: {"attention_sdpa", "qkv_packing"},
    t5: {"attention_sdpa", "qkv_packing"},
    vit: {"attention_sdpa", "qkv_packing"},
}


def _output(out):
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def _compiled_matches_eager(build, attn, patterns=None):
    """``build``'s model with HF attention ``attn``, compiled with ``patterns`` (None: every family): asserts
    parity with eager; returns the compile records."""
    torch.manual_seed(0)
    model, kwargs = build()
    model.config._attn_implementation = attn
    model.eval()
    with torch.no_grad():
        expected = _output(model(**kwargs))
    out, recs = compile_with_records(lambda kw: _output(model(**kw)), kwargs, patterns=patterns)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    return recs


@pytest.mark.parametrize("build", list(CASES), ids=lambda f: f.__name__)
def test_hf_model_fuses_and_matches_eager(build):
    expect = CASES[build] & set(__import__("fusion_passes").available_patterns())
    recs = _compiled_matches_eager(build, "eager", patterns=sorted(expect))
    fired = {m.pattern for r in recs for m in r.matches}
    assert expect <= fired, f"expected {expect - fired} to fire; near misses: " + "; ".join(
        f"{n.pattern}: {n.reason}" for r in recs for n in r.near_misses)
    assert not [e for r in recs for e in r.errors]


@pytest.mark.parametrize("build", list(CASES), ids=lambda f: f.__name__)
def test_hf_model_with_sdpa_attention_matches_eager(build):
    """The same models with HF's default ``sdpa`` attention, every family: parity with eager. The decoders' causal
    prompt attention is rewritten (constant mask dropped); the encoders' padding mask, without repeat_kv, leaves
    nothing to gain."""
    recs = _compiled_matches_eager(build, "sdpa")
    assert not [e for r in recs for e in r.errors]
    causal = [m for r in recs for m in r.matches
              if m.pattern == "attention_sdpa" and m.detail["mask"].startswith("causal")]
    decoders = {llama, mistral, qwen2, gemma, gpt2}
    assert len(causal) == (2 if build in decoders else 0), [m.detail for r in recs for m in r.matches]


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2"])
@pytest.mark.parametrize("padded", [False, True])
def test_hf_sdpa_prompt_drops_the_causal_mask_and_repeat_kv(name, padded):
    """HF's default ``sdpa`` attention over a prompt: the causal mask transformers builds in the graph is proven
    causal and dropped, and repeat_kv's copies go (SDPA with is_causal and enable_gqa, every layer). With a padding
    mask (an input, not provable) the mask stays; on CPU the copies still go."""
    model = _causal_lm(name, attn="sdpa")
    kwargs = dict(input_ids=_ids(), use_cache=False, **({"attention_mask": _padding_mask()} if padded else {}))
    with torch.no_grad():
        expected = model(**kwargs).logits
    out, recs = compile_with_records(lambda kw: model(**kw).logits, kwargs, patterns=["attention_sdpa"])
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    ms = [m for r in recs for m in r.matches if m.pattern == "attention_sdpa"]
    assert len(ms) == 2 and all(m.detail["gqa"] == "enable_gqa (x2)" for m in ms), [m.detail for m in ms]
    for m in ms:  # (transformers 4.x may pass is_causal=True itself rather than a constant mask: "causal ...")
        assert m.detail["mask"] == "keep" if padded else m.detail["mask"].startswith("causal"), m.detail


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dynamic", [False, True])
def test_hf_llama_under_autocast_packs_and_takes_kv_before_repeat_kv(dynamic, device):
    """An fp32 Llama with HF's sdpa attention and a padding mask under bf16 autocast, every family: autocast
    casts x and each fp32 weight per linear, and SDPA's K/V after repeat_kv. q/k/v and gate/up are packed (the
    packed fp32 weights cast once per call), and SDPA takes K/V from before repeat_kv and its cast (enable_gqa),
    also compiled for every prompt length (dynamic=True, where the eighth audit found it missed). On CUDA, HF's
    SDPA call traces to cuDNN attention, which the rewrite reads the same way (the 12-token prompt may then go
    to our decode kernel), and the q/k/v order in the packed weight may differ, so widths are compared as sets."""
    model = _causal_lm("llama", attn="sdpa").to(device)
    kwargs = dict(input_ids=_ids().to(device), use_cache=False, attention_mask=_padding_mask().to(device))

    def forward(kw):
        with torch.autocast(device, dtype=torch.bfloat16):
            return model(**kw).logits

    with torch.no_grad():
        expected = forward(kwargs)
    out, recs = compile_with_records(forward, kwargs, dynamic=dynamic)
    assert out.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    assert not [e for r in recs for e in r.errors]
    ms = [m for r in recs for m in r.matches]
    widths = [sorted(m.detail["widths"]) for m in ms if m.pattern == "qkv_packing"]
    assert sorted(widths) == [[32, 32, 64]] * 2 + [[128, 128]] * 2, widths
    sdpa = [m.detail for m in ms if m.pattern == "attention_sdpa"]
    assert len(sdpa) == 2 and all(d["gqa"] == "enable_gqa (x2)" and d["mask"] in ("keep", "add") for d in sdpa), sdpa


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("padding", ["right", "left"])
def test_hf_eager_attention_under_autocast_takes_the_fp32_mask(padding, device):
    """An fp32 Llama with HF's eager attention under bf16 autocast: q/k/v are bf16, the mask transformers builds
    from the padding mask is fp32 (0 / finfo(float32).min). That mask is proven to hold those values alone, so both
    attentions become SDPA with it in bf16; left padding gives query rows that allow no key (eager: uniform
    weights; the same after the rewrite)."""
    model = _causal_lm("llama", attn="eager").to(device)
    mask = _padding_mask() if padding == "right" else _padding_mask().flip(-1)
    kwargs = dict(input_ids=_ids().to(device), use_cache=False, attention_mask=mask.to(device))

    def forward(kw):
        with torch.autocast(device, dtype=torch.bfloat16):
            return model(**kw).logits

    with torch.no_grad():
        expected = forward(kwargs)
    out, recs = compile_with_records(forward, kwargs, patterns=["attention_sdpa"])
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    sdpa = [m.detail for r in recs for m in r.matches if m.pattern == "attention_sdpa"]
    assert len(sdpa) == 2 and all(d["mask"] == "add (torch.float32 mask of 0 / minimum, as torch.bfloat16)"
                                  for d in sdpa), sdpa


# --------------------------------------------------------------------------------------------- decode


DECODE_CASES = {
    # model -> (config class, model class): decode steps over HF's StaticCache
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {"sliding_window": None}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),  # q/k/v with biases: added in the GEMV, RoPE still folds
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16}),  # (1 + w) norm, GeGLU MLP (gelu_tanh epilogue)
    # + softcapped attention logits (the attention rewrite must not fire), sliding-window layers, 4 norms per layer
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16}),
    # per-head RMSNorm of q and k (QK-norm) before RoPE: the q/k/v GEMV fires, RoPE stays with Inductor
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {"head_dim": 16}),  # QK-norm, GeGLU, sliding-window layers
    # one qkv_proj and one gate_up_proj weight, split in the graph: concatenated-output GEMVs, the split left alone
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}),
}


@pytest.fixture
def decode_kernels_everywhere(monkeypatch):
    """decode_gemv and the decode attention kernel act on CUDA only; here they run (as torch) on CPU too."""
    from fusion_passes.patterns import attention_sdpa, decode_gemv

    monkeypatch.setenv(decode_gemv.POLICY_ENV, "always")
    monkeypatch.setenv(attention_sdpa.DECODE_POLICY_ENV, "always")


def _causal_lm(name, attn="eager"):
    cfg_cls, model_cls, extra = DECODE_CASES[name]
    cfg = getattr(transformers, cfg_cls)(**DECODER, **extra)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(cfg).eval()


def _greedy(model, prompt, steps):
    """Greedy decoding over a StaticCache: (tokens, logits per step)."""
    kw = hf_cache_kwargs(model, transformers.StaticCache(config=model.config, max_cache_len=prompt.shape[1] + steps))
    n = prompt.shape[1]
    with torch.no_grad():
        logits = model(input_ids=prompt, **kw, cache_position=torch.arange(n), use_cache=True).logits
        tok, toks, all_logits = logits[:, -1:].argmax(-1), [], []
        for i in range(steps):
            pos = torch.tensor([n + i])
            logits = model(input_ids=tok, **kw, cache_position=pos,
                           position_ids=pos[None].expand(prompt.shape[0], 1), use_cache=True).logits
            all_logits.append(logits)
            tok = logits[:, -1:].argmax(-1)
            toks.append(tok)
    return torch.cat(toks, 1), all_logits


def _decode_matches_eager(name, attn="eager"):
    """A 6-token prompt and 2 greedy steps of ``name`` compiled with every family: tokens and logits checked against
    eager; returns (the eager model, the compile records)."""
    import fusion_passes

    model = _causal_lm(name, attn)
    prompt = _ids(batch=2, seq=6)
    expected, ref_logits = _greedy(model, prompt, 2)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=fusion_passes.backend())
    with fusion_passes.capture() as recs:
        got, logits = _greedy(compiled, prompt, 2)
    assert torch.equal(got, expected)
    for a, b in zip(logits, ref_logits):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    return model, recs


# llama (eager attention): the generation test below; mistral: llama's graph. llama/sdpa: HF's default attention,
# SDPA over repeat_kv'd K/V, which becomes the decode kernel over the un-repeated cache.
@pytest.mark.parametrize("name, attn", [("qwen2", "eager"), ("gemma", "eager"), ("llama", "sdpa"), ("qwen2", "sdpa"),
                                        ("qwen3", "sdpa"), ("gemma3", "eager"), ("phi3", "eager")])
def test_hf_decode_step_with_decode_kernels(decode_kernels_everywhere, name, attn):
    _, recs = _decode_matches_eager(name, attn)
    decode = [m for r in recs for m in r.matches if m.pattern == "decode_gemv"]
    attn = [m for r in recs for m in r.matches if m.pattern == "attention_sdpa" and "decode" in m.detail["kernel"]]
    assert len(decode) >= 3 * 2 + 1 and len(attn) >= 2, [(m.pattern, m.detail) for r in recs for m in r.matches]
    assert not [e for r in recs for e in r.errors]
    if name == "qwen2":  # its q/k/v biases go into the kernel, so the RoPE still folds (one GEMV per layer, 2 layers)
        qkv = [m for m in decode if "bias on 3, rope on 2" in m.detail.get("epilogue", "")]
        assert len(qkv) >= 2, [m.detail for m in decode]
    if name in ("qwen3", "gemma3"):  # QK-norm keeps RoPE out of the GEMV, and the report says why
        assert any("QK-norm" in n.reason for r in recs for n in r.near_misses)
    if name in ("gemma", "gemma3"):  # GeGLU (gelu's tanh form) in the gate/up GEMV's epilogue, every layer
        assert len([m for m in decode if m.detail.get("epilogue") == "gelu_tanh * mul"]) >= 2, [m.detail for m in decode]


def test_gemma2_decode_with_softcapped_attention(decode_kernels_everywhere):
    """Gemma2: the GeGLU gate/up and the q/k/v (+ RoPE) GEMVs fire, and its tanh-softcapped attention scores go to
    the decode kernel with the model's cap (SDPA has no softcap: longer prompts keep the eager ops); the tokens
    and logits are eager's."""
    model, recs = _decode_matches_eager("gemma2")
    assert model.config.attn_logit_softcapping
    ms = [m for r in recs for m in r.matches]
    attn = [m for m in ms if m.pattern == "attention_sdpa"]
    assert attn and all(m.detail.get("softcap") == model.config.attn_logit_softcapping for m in attn), attn
    epilogues = [m.detail.get("epilogue", "") for m in ms if m.pattern == "decode_gemv"]
    assert epilogues.count("gelu_tanh * mul") >= 2 and sum("rope on 2" in e for e in epilogues) >= 2, epilogues
    assert not [e for r in recs for e in r.errors]


def _decode_codes(attn: str) -> list[str]:
    """Inductor's generated code for a 2-layer Llama's 6-token prompt and 2 greedy steps, compiled with every
    family (the tokens checked against eager)."""
    import fusion_passes
    from torch._inductor.utils import run_and_get_code

    model = _causal_lm("llama", attn)
    prompt = _ids(batch=1, seq=6)
    expected, _ = _greedy(model, prompt, 2)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=fusion_passes.backend())
    (got, _), codes = run_and_get_code(lambda: _greedy(compiled, prompt, 2))
    assert torch.equal(got, expected)
    return codes


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_every_layers_decode_kernel_reads_one_mask(decode_kernels_everywhere, attn):
    """Inductor recomputed the (cheap, pointwise) mask for each layer's decode kernel: one kernel per layer. The
    pass hands every layer one materialised mask (``inductor_force_stride_order``): in the generated code all the
    decode_attention calls read one buffer, and the step still matches eager."""
    import re

    masked_graphs = []
    for code in _decode_codes(attn):
        calls = [line for line in code.splitlines()
                 if "fusion_passes.decode_attention.default(" in line and "assert" not in line]
        # the mask is the 4th argument (after q, which may be a reinterpret_tensor(...) with commas inside)
        args = [re.sub(r"reinterpret_tensor\([^()]*(\([^()]*\)[^()]*)*\)", "q", c.split("default(", 1)[1]).split(", ")
                for c in calls]
        masks = [a[3] for a in args if a[3] != "None"]
        # the 6-token prompt's graph has no mask (causal), except with sdpa on torch 2.11, where transformers
        # builds the prompt's mask as a tensor: then that graph too reads one mask in both layers
        if masks:
            masked_graphs.append(masks)
    assert masked_graphs and all(len(m) == 2 and len(set(m)) == 1 for m in masked_graphs), masked_graphs


def test_every_layers_qkv_gemv_reads_one_rope_table(decode_kernels_everywhere):
    """Like the mask: HF's cos/sin are cheap pointwise values, and on the H200 Inductor computed them again for the
    traced q/k/v GEMV of every layer (4 small kernels per 1B step, each for 4 layers). The pass hands every layer
    one materialised copy. On CPU (extern op) Inductor shared them already, so here this guards the rewrite's
    parity and that the layers still read one buffer; the GPU kernel listing (``run_gpu.sh code``) shows the gain."""
    for code in _decode_codes("eager"):
        calls = [line.split("default(", 1)[1] for line in code.splitlines()
                 if "fusion_passes.decode_gemv.default(" in line and "assert" not in line]
        tables = [tuple(c.rstrip(")").split(", ")[-4:-2]) for c in calls if c.rstrip(")").endswith(", 2")]
        assert len(tables) == 2 and len(set(tables)) == 1, calls


@pytest.mark.parametrize("rope", ["off", "on"])
def test_hf_llama_64_token_greedy_generation_matches_eager(decode_kernels_everywhere, monkeypatch, rope):
    """#8: 64 greedy tokens with every family (decode kernels included, RoPE in the q/k GEMV or not) give eager's
    tokens (fp32, seeded)."""
    import fusion_passes
    from fusion_passes.patterns import decode_gemv

    monkeypatch.setenv(decode_gemv.ROPE_POLICY_ENV, rope)

    model = _causal_lm("llama")
    prompt = _ids(batch=1, seq=8)
    expected, ref_logits = _greedy(model, prompt, 64)
    torch._dynamo.reset()
    with fusion_passes.capture() as recs:
        got, logits = _greedy(torch.compile(model, backend=fusion_passes.backend()), prompt, 64)
    fired = {m.pattern for r in recs for m in r.matches}
    assert {"decode_gemv", "attention_sdpa"} <= fired
    roped = [m for r in recs for m in r.matches if "rope on 2" in (m.detail or {}).get("epilogue", "")]
    # one q/k/v GEMV per layer, in the decode graph and in the 8-token prompt's (8 rows: decode-sized too)
    assert len(roped) == (4 if rope == "on" else 0)
    # the static cache's per-layer counters (``cumulative_length.add_(kv_length)``): one foreach per graph,
    # stepping by the prompt's 8 tokens and then by 1
    counters = [m.detail for r in recs for m in r.matches_for("state_updates")]
    # transformers 4.x's StaticCache keeps no such counters: nothing to fuse there
    expected_counters = [(2, 1), (2, 8)] if transformers_major() >= 5 else []
    assert sorted((d["updates"], d["step"]) for d in counters) == expected_counters, counters
    assert torch.equal(got, expected)
    assert max((a - b).abs().max().item() for a, b in zip(logits, ref_logits)) < 1e-4


def _generate_compiled_vs_eager(batch, device="cpu"):
    """HF's own ``generate`` loop, eager and compiled through ``CompileConfig(backend="fusion_passes")`` (which
    passes ``mode="reduce-overhead"``): the same greedy tokens, with the decode kernels in the compiled step."""
    import fusion_passes

    model = _causal_lm("llama", attn="sdpa").to(device)
    prompt = _ids(batch=batch, seq=8).to(device)
    kw = dict(max_new_tokens=12, do_sample=False, cache_implementation="static", pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(prompt, **kw, disable_compile=True)
        torch._dynamo.reset()
        config = transformers.CompileConfig(backend="fusion_passes", fullgraph=True)
        config._compile_all_devices = True  # HF compiles on CPU only when asked (a class attribute, no argument)
        assert config.mode == "reduce-overhead"  # what makes the backend take torch.compile's mode keyword
        with fusion_passes.capture() as recs:
            got = model.generate(prompt, **kw, compile_config=config)
    assert torch.equal(got, expected)
    fired = {m.pattern for r in recs for m in r.matches}
    assert {"decode_gemv", "attention_sdpa"} <= fired, fired  # the decode step was compiled by us
    assert not [e for r in recs for e in r.errors]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_hf_generate_with_dynamic_cache_and_compiled_forward(decode_kernels_everywhere, attn):
    """HF's default DynamicCache with ``model.forward = torch.compile(model.forward, backend="fusion_passes")``: the
    cache grows every step, so Dynamo compiles the prompt, one decode length, then one graph with a symbolic cache
    length. The families fire in that graph too, and the tokens are eager's."""
    import fusion_passes

    model = _causal_lm("llama", attn=attn)
    prompt = _ids(batch=1, seq=8)
    kw = dict(max_new_tokens=8, do_sample=False, pad_token_id=0, disable_compile=True)
    with torch.no_grad():
        expected = model.generate(prompt, **kw)
        torch._dynamo.reset()
        model.forward = torch.compile(model.forward, backend="fusion_passes")
        try:
            with fusion_passes.capture() as recs, warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = model.generate(prompt, **kw)
        finally:
            del model.forward
    assert torch.equal(got, expected)
    # the shared decode mask's strides are graph nodes, not SymInts written into a call's arguments
    assert not [w for w in caught if "Raw SymInt" in str(w.message)]
    assert not [e for r in recs for e in r.errors]
    symbolic = [r for r in recs if any(c.isalpha() for m in r.matches_for("attention_sdpa") for c in m.detail["k"])]
    assert len(symbolic) == 1, [[m.detail for m in r.matches_for("attention_sdpa")] for r in recs]
    assert {m.pattern for m in symbolic[0].matches} >= {"attention_sdpa", "decode_gemv"}
    assert all(m.detail["kernel"].startswith("fusion_passes.decode_attention") for m in symbolic[0].matches_for("attention_sdpa")), [
        m.detail for m in symbolic[0].matches_for("attention_sdpa")]


@pytest.mark.parametrize("batch", [1, 2])
def test_hf_generate_with_compile_config_backend(decode_kernels_everywhere, batch):
    _generate_compiled_vs_eager(batch)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_hf_generate_with_compile_config_backend():
    """On CUDA, in fp32: the decode kernels fire by default and the step runs under CUDA graphs."""
    _generate_compiled_vs_eager(2, device="cuda")


def _left_padded_generate(device):
    """HF generate, sdpa attention, a batch of two 7-token prompts, the first left-padded by 3: its first rows
    allow no key, where SDPA gives 0 (a NaN there reaches every later layer through 0 * NaN in P @ V)."""
    import fusion_passes

    model = _causal_lm("llama", attn="sdpa").to(device)
    ids = _ids(batch=2, seq=7).to(device)
    mask = torch.ones_like(ids)
    mask[0, :3], ids[0, :3] = 0, 0
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0, disable_compile=True, output_logits=True,
              return_dict_in_generate=True)
    with torch.no_grad():
        expected = model.generate(ids, attention_mask=mask, **kw)
        torch._dynamo.reset()
        model.forward = torch.compile(model.forward, backend="fusion_passes")
        try:
            with fusion_passes.capture() as recs:
                got = model.generate(ids, attention_mask=mask, **kw)
        finally:
            del model.forward
    kernels = {m.detail["kernel"] for r in recs for m in r.matches_for("attention_sdpa")}
    assert any(k.startswith("fusion_passes.decode_attention") for k in kernels), kernels
    assert not any(step.isnan().any() for step in got.logits)
    assert torch.equal(got.sequences, expected.sequences)
    for a, b in zip(got.logits, expected.logits):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_hf_generate_left_padded_short_prompt_sdpa(decode_kernels_everywhere):
    _left_padded_generate("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_hf_generate_left_padded_short_prompt_sdpa():
    """On CUDA, fp32, default policies: the decode kernel takes the 7-token prompt and the steps."""
    _left_padded_generate("cuda")


def test_hf_cache_kwargs_follows_the_forward_signature():
    """Newer transformers take the KV cache as ``cache=`` (``past_key_values=`` warns, and goes in 5.40); 5.17, on
    the GPU machine, knows only ``past_key_values=``."""

    class New(torch.nn.Module):
        def forward(self, input_ids, cache=None, **kwargs):
            return cache

    class Old(torch.nn.Module):
        def forward(self, input_ids, past_key_values=None, **kwargs):
            return past_key_values

    for cls, key in [(New, "cache"), (Old, "past_key_values")]:
        model = cls()
        assert hf_cache_kwargs(model, "C") == {key: "C"}
        assert hf_cache_kwargs(torch.compile(model), "C") == {key: "C"}  # the compiled wrapper's own forward
        assert model(torch.zeros(1), **hf_cache_kwargs(model, "C")) == "C"
