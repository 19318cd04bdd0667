"""Tiny HF-style models, written the way `transformers` writes them, so the package works without it.

The demo, the tests and the CPU benchmarks all use these. Each model keeps the exact op sequence of its
HF counterpart (fp32-upcast RMSNorm, rotary, ``repeat_kv`` GQA, eager attention with an additive mask,
``softmax(dtype=float32).to(q.dtype)``, SiLU MLP), because that is what our patterns must match.

    LlamaConfig / LlamaForCausalLM   input_ids [B, S] (+ optional static KV cache) -> logits [B, S, V]
    GPT2Config  / GPT2Model          input_ids [B, S] -> hidden [B, S, D]   (causal bias via torch.where)
    BertConfig  / BertModel          input_ids [B, S], attention_mask [B, S] -> hidden [B, S, D]
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "LlamaConfig",
    "LlamaForCausalLM",
    "LlamaDecoderLayer",
    "LlamaRMSNorm",
    "StaticKVCache",
    "GPT2Config",
    "GPT2Model",
    "BertConfig",
    "BertModel",
    "build",
    "MODELS",
    "hf_cache_kwargs",
]


# --------------------------------------------------------------------------------------------- Llama


@dataclass
class LlamaConfig:
    vocab_size: int = 256
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    attention_dropout: float = 0.0
    attention_bias: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


class LlamaRMSNorm(nn.Module):
    """HF's RMSNorm: fp32 upcast, mean of squares, rsqrt, cast back, times weight.  x [..., D] -> [..., D]"""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        dim = config.head_dim
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim: int = 1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[B, Hkv, S, Dh] -> [B, Hkv * n_rep, S, Dh], as HF writes it (unsqueeze, expand, reshape)."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0):
    """HF's eager attention. q [B, H, Sq, Dh], k/v [B, Hkv, Sk, Dh], mask [B, 1, Sq, >=Sk] -> [B, Sq, H, Dh]"""
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


class StaticKVCache(nn.Module):
    """Preallocated per-layer K/V buffers [B, Hkv, max_len, Dh], written in place at ``cache_position``."""

    def __init__(self, config: LlamaConfig, batch: int, max_len: int, dtype=torch.float32, device=None):
        super().__init__()
        shape = (batch, config.num_key_value_heads, max_len, config.head_dim)
        for i in range(config.num_hidden_layers):
            self.register_buffer(f"k{i}", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
            self.register_buffer(f"v{i}", torch.zeros(shape, dtype=dtype, device=device), persistent=False)

    def update(self, k: torch.Tensor, v: torch.Tensor, layer: int, cache_position: torch.Tensor):
        k_buf, v_buf = getattr(self, f"k{layer}"), getattr(self, f"v{layer}")
        k_buf.index_copy_(2, cache_position, k)
        v_buf.index_copy_(2, cache_position, v)
        return k_buf, v_buf


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaConfig, layer_idx: int) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.attention_dropout = config.attention_dropout
        h, kv = config.num_attention_heads, config.num_key_value_heads
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, h * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(h * self.head_dim, config.hidden_size, bias=bias)

    def forward(self, hidden_states, position_embeddings, attention_mask, cache=None, cache_position=None):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        if cache is not None:
            key_states, value_states = cache.update(key_states, value_states, self.layer_idx, cache_position)
        attn_output, attn_weights = eager_attention_forward(
            self,
            query_states,
            key_states,
            value_states,
            attention_mask,
            dropout=0.0 if not self.training else self.attention_dropout,
            scaling=self.scaling,
        )
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output), attn_weights


class LlamaMLP(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig, layer_idx: int) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config, layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask, position_embeddings, cache=None, cache_position=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states, position_embeddings, attention_mask, cache, cache_position)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


def causal_mask(q_len: int, kv_len: int, past: int, dtype: torch.dtype, device, padding=None) -> torch.Tensor:
    """Additive float mask [B|1, 1, q_len, kv_len]: 0 where allowed, finfo.min where masked (HF's form)."""
    q_pos = torch.arange(past, past + q_len, device=device)[:, None]
    k_pos = torch.arange(kv_len, device=device)[None, :]
    allowed = (k_pos <= q_pos)[None, None]
    if padding is not None:
        allowed = allowed & padding[:, None, None, :kv_len].bool()
    zero = torch.zeros((), dtype=dtype, device=device)
    return torch.where(allowed, zero, torch.finfo(dtype).min)


class LlamaForCausalLM(nn.Module):
    """input_ids [B, S] -> logits [B, S, vocab]. With ``cache`` set, runs as a decode step at ``cache_position``."""

    def __init__(self, config: LlamaConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or LlamaConfig()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, attention_mask=None, cache: StaticKVCache | None = None, cache_position=None):
        bsz, q_len = input_ids.shape
        hidden_states = self.embed_tokens(input_ids)
        if cache_position is None:
            cache_position = torch.arange(q_len, device=input_ids.device)
        position_ids = cache_position.unsqueeze(0).expand(bsz, -1)
        kv_len = cache.k0.shape[2] if cache is not None else q_len
        mask = causal_mask(q_len, kv_len, 0, hidden_states.dtype, input_ids.device, attention_mask)
        if cache is not None:
            # decode/prefill into a static cache: row i may see keys at positions <= cache_position[i]
            k_pos = torch.arange(kv_len, device=input_ids.device)[None, None, None, :]
            allowed = k_pos <= cache_position[None, None, :, None]
            mask = torch.where(allowed, 0.0, torch.finfo(hidden_states.dtype).min).to(hidden_states.dtype)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask, position_embeddings, cache, cache_position)
        return self.lm_head(self.norm(hidden_states))


# --------------------------------------------------------------------------------------------- GPT-2


@dataclass
class GPT2Config:
    vocab_size: int = 256
    n_embd: int = 64
    n_head: int = 4
    n_layer: int = 2
    n_positions: int = 128
    layer_norm_epsilon: float = 1e-5


class Conv1D(nn.Module):
    """GPT-2's transposed linear: x [..., nx] @ W [nx, nf] + b."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.size()[:-1] + (self.weight.size(-1),)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        n = config.n_positions
        self.register_buffer("bias", torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n), False)
        self.num_heads, self.head_dim = config.n_head, config.n_embd // config.n_head
        self.c_attn = Conv1D(3 * config.n_embd, config.n_embd)
        self.c_proj = Conv1D(config.n_embd, config.n_embd)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(hidden_states).split(self.num_heads * self.head_dim, dim=2)
        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        attn_weights = torch.matmul(q, k.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], v.size(-1) ** 0.5, dtype=attn_weights.dtype)
        query_length, key_length = q.size(-2), k.size(-2)
        causal = self.bias[:, :, key_length - query_length : key_length, :key_length]
        mask_value = torch.full([], torch.finfo(attn_weights.dtype).min, dtype=attn_weights.dtype)
        attn_weights = torch.where(causal, attn_weights.to(attn_weights.dtype), mask_value)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(v.dtype)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2)
        attn_output = attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous()
        return self.c_proj(attn_output)


class GPT2Block(nn.Module):
    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        d = config.n_embd
        self.ln_1 = nn.LayerNorm(d, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(d, eps=config.layer_norm_epsilon)
        self.c_fc = Conv1D(4 * d, d)
        self.c_proj = Conv1D(d, 4 * d)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = hidden_states + self.attn(self.ln_1(hidden_states))
        mlp = self.c_proj(F.gelu(self.c_fc(self.ln_2(hidden_states)), approximate="tanh"))
        return hidden_states + mlp


class GPT2Model(nn.Module):
    """input_ids [B, S] -> hidden [B, S, n_embd]."""

    def __init__(self, config: GPT2Config | None = None) -> None:
        super().__init__()
        self.config = config = config or GPT2Config()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(GPT2Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        hidden_states = self.wte(input_ids) + self.wpe(pos)[None]
        for block in self.h:
            hidden_states = block(hidden_states)
        return self.ln_f(hidden_states)


# --------------------------------------------------------------------------------------------- BERT


@dataclass
class BertConfig:
    vocab_size: int = 256
    hidden_size: int = 64
    num_attention_heads: int = 4
    num_hidden_layers: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 128
    layer_norm_eps: float = 1e-12


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        d = config.hidden_size
        self.num_heads, self.head_dim = config.num_attention_heads, d // config.num_attention_heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.attn_out = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(d, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, d)
        self.out_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor, extended_mask: torch.Tensor) -> torch.Tensor:
        shape = (*hidden_states.shape[:-1], -1, self.head_dim)
        q = self.query(hidden_states).view(shape).transpose(1, 2)
        k = self.key(hidden_states).view(shape).transpose(1, 2)
        v = self.value(hidden_states).view(shape).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores + extended_mask
        probs = nn.functional.softmax(scores, dim=-1)
        probs = nn.functional.dropout(probs, p=0.1, training=self.training)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(*hidden_states.shape[:-1], -1)
        hidden_states = self.attn_norm(self.attn_out(ctx) + hidden_states)
        inter = F.gelu(self.intermediate(hidden_states))
        return self.out_norm(self.output(inter) + hidden_states)


class BertModel(nn.Module):
    """input_ids [B, S], attention_mask [B, S] (1 keep, 0 pad) -> hidden [B, S, D]."""

    def __init__(self, config: BertConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or BertConfig()
        d = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, d)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, d)
        self.embed_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        hidden_states = self.embed_norm(self.word_embeddings(input_ids) + self.position_embeddings(pos)[None])
        dtype = hidden_states.dtype
        extended = (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        for layer in self.layer:
            hidden_states = layer(hidden_states, extended)
        return hidden_states


# --------------------------------------------------------------------------------------------- factory


MODELS = ("llama", "gpt2", "bert")


def build(name: str = "llama", *, batch: int = 2, seq: int = 16, dtype=torch.float32, device="cpu", seed: int = 0):
    """Return ``(model, args)`` for a zoo model in eval mode with seeded random weights."""
    if name not in MODELS:
        raise ValueError(f"unknown zoo model {name!r}; choose one of {', '.join(MODELS)}")
    torch.manual_seed(seed)
    model = {"llama": LlamaForCausalLM, "gpt2": GPT2Model, "bert": BertModel}[name]()
    model = model.to(device=device, dtype=dtype).eval()
    input_ids = torch.randint(0, model.config.vocab_size, (batch, seq), device=device)
    if name == "bert":
        mask = torch.ones(batch, seq, dtype=torch.long, device=device)
        mask[-1, seq // 2 :] = 0  # the last row is padded, so the mask is not all-ones
        return model, (input_ids, mask)
    return model, (input_ids,)


def hf_cache_kwargs(model, cache) -> dict:
    """``{"cache": cache}`` or ``{"past_key_values": cache}``: the keyword a transformers model's forward takes its
    KV cache by. Newer transformers renamed it (``past_key_values`` warns, and goes in 5.40); 5.17 knows only
    ``past_key_values``. ``model`` may be a ``torch.compile``'d module."""
    forward = getattr(model, "_orig_mod", model).forward
    return {"cache" if "cache" in inspect.signature(forward).parameters else "past_key_values": cache}
