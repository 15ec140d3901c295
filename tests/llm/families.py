#!/usr/bin/python3
"""Decoder language models from torch.nn primitives, following Hugging Face
transformers' modeling code (v4.44: modeling_llama.py, whose eager path
modeling_mistral.py and modeling_qwen2.py copy; modeling_gemma.py;
modeling_phi3.py's fused projections; its rotary, per layer there, is
computed once per forward here as in Llama, cos/sin being a few KiB), built
from a config dict with the keys and defaults of the families'
configuration_*.py. No transformers import: Debian's torch 1.13 only.

Usable on the meta device for parameter counts at real sizes
(build(cfg, device="meta")) and on CPU at small sizes for memory truth
(tests/llm/measure_llm.py). Each tensor the forward makes is made by the
same call HF's code makes, in the same order, so the allocator sees what it
sees under HF; what differs is listed where it differs.

    cfg = {"model_type": "llama", "hidden_size": 256, ...}
    model = build(cfg)                  # LlamaForCausalLM-like
    logits = model(ids, position_ids, causal_mask, cache)

cache: DynamicCache() (torch.cat per layer per step) or
StaticCache(cfg, batch, max_len, dtype) (index_copy_ into preallocated
[B, Hkv, max, hd]); causal_mask: the 4-d float mask [B, 1, S, T] that
LlamaModel._update_causal_mask builds before layer 0 (0 where attended,
the dtype's min elsewhere), made by causal_mask() here.
"""
import math

import torch
from torch import nn

# configuration_<family>.py defaults for the keys a config may leave out
DEFAULTS = {
    "llama": dict(vocab_size=32000, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                  intermediate_size=11008, max_position_embeddings=2048, rms_norm_eps=1e-6, rope_theta=10000.0,
                  hidden_act="silu", tie_word_embeddings=False, attention_bias=False, mlp_bias=False),
    "mistral": dict(vocab_size=32000, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, intermediate_size=14336, max_position_embeddings=131072,
                    rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False),
    "qwen2": dict(vocab_size=151936, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=32, intermediate_size=22016, max_position_embeddings=32768,
                  rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False),
    "gemma": dict(vocab_size=256000, hidden_size=3072, num_hidden_layers=28, num_attention_heads=16,
                  num_key_value_heads=16, head_dim=256, intermediate_size=24576, max_position_embeddings=8192,
                  rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="gelu_pytorch_tanh", tie_word_embeddings=True),
    "phi3": dict(vocab_size=32064, hidden_size=3072, num_hidden_layers=32, num_attention_heads=32,
                 intermediate_size=8192, max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                 hidden_act="silu", tie_word_embeddings=False),
    # configuration_mixtral.py, configuration_qwen2_moe.py (v4.44)
    "mixtral": dict(vocab_size=32000, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, intermediate_size=14336, max_position_embeddings=4096 * 32,
                    rms_norm_eps=1e-5, rope_theta=1e6, hidden_act="silu", tie_word_embeddings=False,
                    num_local_experts=8, num_experts_per_tok=2),
    "qwen2_moe": dict(vocab_size=151936, hidden_size=2048, num_hidden_layers=24, num_attention_heads=16,
                      num_key_value_heads=16, intermediate_size=5632, max_position_embeddings=32768,
                      rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False,
                      decoder_sparse_step=1, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                      num_experts_per_tok=4, num_experts=60, norm_topk_prob=False, mlp_only_layers=[]),
}

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve(cfg):
    """cfg with the family's defaults filled in (HF's config classes)."""
    mt = cfg["model_type"]
    c = dict(DEFAULTS[mt])
    c.update({k: v for k, v in cfg.items() if v is not None})
    c.setdefault("num_key_value_heads", c["num_attention_heads"])
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    c["qkv_bias"] = mt in ("qwen2", "qwen2_moe") or (mt == "llama" and c.get("attention_bias", False))
    c["o_bias"] = mt == "llama" and c.get("attention_bias", False)
    c["mlp_bias"] = mt == "llama" and c.get("mlp_bias", False)
    c["gemma"] = mt == "gemma"
    c["fused"] = mt == "phi3"  # Phi3Attention.qkv_proj, Phi3MLP.gate_up_proj
    c["dtype"] = DTYPES[c.get("torch_dtype", "float32")]
    return c


class RMSNorm(nn.Module):
    """LlamaRMSNorm; GemmaRMSNorm when plus_one (fp32 to the end, (1 + w))."""

    def __init__(self, d, eps, plus_one, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d, device=device, dtype=dtype))
        self.eps, self.plus_one = eps, plus_one

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.plus_one:
            return (hidden_states * (1.0 + self.weight.float())).to(input_dtype)
        return self.weight * hidden_states.to(input_dtype)


class RotaryEmbedding(nn.Module):
    """LlamaRotaryEmbedding (computed once per forward, as in v4.44)."""

    def __init__(self, hd, theta, device=None):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64, device=device).float() / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class DynamicCache:
    """transformers.DynamicCache.update: append, then torch.cat per step."""

    def __init__(self):
        self.key_cache, self.value_cache = [], []

    def update(self, key_states, value_states, layer_idx, cache_position):
        if len(self.key_cache) <= layer_idx:
            self.key_cache.append(key_states)
            self.value_cache.append(value_states)
        else:
            self.key_cache[layer_idx] = torch.cat([self.key_cache[layer_idx], key_states], dim=-2)
            self.value_cache[layer_idx] = torch.cat([self.value_cache[layer_idx], value_states], dim=-2)
        return self.key_cache[layer_idx], self.value_cache[layer_idx]

    def tensors(self):
        return self.key_cache + self.value_cache


class StaticCache:
    """transformers.StaticCache: [B, Hkv, max, hd] zeros per layer,
    index_copy_ along the sequence dim; attention reads all max positions."""

    def __init__(self, c, batch, max_len, dtype):
        shape = (batch, c["num_key_value_heads"], max_len, c["head_dim"])
        self.key_cache = [torch.zeros(shape, dtype=dtype) for _ in range(c["num_hidden_layers"])]
        self.value_cache = [torch.zeros(shape, dtype=dtype) for _ in range(c["num_hidden_layers"])]

    def update(self, key_states, value_states, layer_idx, cache_position):
        k_out, v_out = self.key_cache[layer_idx], self.value_cache[layer_idx]
        k_out.index_copy_(2, cache_position, key_states)
        v_out.index_copy_(2, cache_position, value_states)
        return k_out, v_out

    def tensors(self):
        return self.key_cache + self.value_cache


class Attention(nn.Module):
    """LlamaAttention, eager (also Mistral's, Qwen2's, Gemma's)."""

    def __init__(self, c, idx, device=None, dtype=None):
        super().__init__()
        d, h, kv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.h, self.kv, self.hd, self.idx = h, kv, hd, idx
        kw = dict(device=device, dtype=dtype)
        self.fused = c["fused"]
        if self.fused:
            self.qkv_proj = nn.Linear(d, (h + 2 * kv) * hd, bias=False, **kw)
        else:
            self.q_proj = nn.Linear(d, h * hd, bias=c["qkv_bias"], **kw)
            self.k_proj = nn.Linear(d, kv * hd, bias=c["qkv_bias"], **kw)
            self.v_proj = nn.Linear(d, kv * hd, bias=c["qkv_bias"], **kw)
        self.o_proj = nn.Linear(h * hd, d, bias=c["o_bias"], **kw)

    def forward(self, hidden_states, attention_mask, position_embeddings, cache, cache_position):
        bsz, q_len, _ = hidden_states.size()
        if self.fused:  # Phi3Attention
            qkv = self.qkv_proj(hidden_states)
            query_pos = self.h * self.hd
            query_states = qkv[..., :query_pos]
            key_states = qkv[..., query_pos: query_pos + self.kv * self.hd]
            value_states = qkv[..., query_pos + self.kv * self.hd:]
        else:
            query_states = self.q_proj(hidden_states)
            key_states = self.k_proj(hidden_states)
            value_states = self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, self.h, self.hd).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.kv, self.hd).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.kv, self.hd).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states, value_states = cache.update(key_states, value_states, self.idx, cache_position)
        key_states = repeat_kv(key_states, self.h // self.kv)
        value_states = repeat_kv(value_states, self.h // self.kv)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.hd)
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class GeluTanh(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x, approximate="tanh")


class MLP(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        d, i, b = c["hidden_size"], c["intermediate_size"], c["mlp_bias"]
        kw = dict(device=device, dtype=dtype)
        self.fused = c["fused"]
        if self.fused:  # Phi3MLP
            self.gate_up_proj = nn.Linear(d, 2 * i, bias=False, **kw)
            self.activation_fn = nn.SiLU()
        else:
            self.gate_proj = nn.Linear(d, i, bias=b, **kw)
            self.up_proj = nn.Linear(d, i, bias=b, **kw)
            self.act_fn = nn.SiLU() if c["hidden_act"] in ("silu", "swish") else GeluTanh()
        self.down_proj = nn.Linear(i, d, bias=b, **kw)

    def forward(self, x):
        if self.fused:
            up_states = self.gate_up_proj(x)
            gate, up_states = up_states.chunk(2, dim=-1)
            up_states = up_states * self.activation_fn(gate)
            return self.down_proj(up_states)
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class MixtralBlockSparseTop2MLP(nn.Module):
    """modeling_mixtral.py: w2(act(w1(x)) * w3(x))."""

    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        d, i = c["hidden_size"], c["intermediate_size"]
        kw = dict(device=device, dtype=dtype)
        self.w1 = nn.Linear(d, i, bias=False, **kw)
        self.w2 = nn.Linear(i, d, bias=False, **kw)
        self.w3 = nn.Linear(d, i, bias=False, **kw)
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states):
        current_hidden_states = self.act_fn(self.w1(hidden_states)) * self.w3(hidden_states)
        current_hidden_states = self.w2(current_hidden_states)
        return current_hidden_states


class Qwen2MoeMLP(nn.Module):
    """modeling_qwen2_moe.py: down_proj(act(gate_proj(x)) * up_proj(x))."""

    def __init__(self, c, intermediate_size, device=None, dtype=None):
        super().__init__()
        d, i = c["hidden_size"], intermediate_size
        kw = dict(device=device, dtype=dtype)
        self.gate_proj = nn.Linear(d, i, bias=False, **kw)
        self.up_proj = nn.Linear(d, i, bias=False, **kw)
        self.down_proj = nn.Linear(i, d, bias=False, **kw)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


# tokens each expert received, per MoE block in call order, while RECORD
# is set (measure_llm.py runs an unmeasured forward for it: counting
# allocates)
ROUTING = []
RECORD = False


class SparseMoeBlock(nn.Module):
    """MixtralSparseMoeBlock.forward (eval: no jitter), and
    Qwen2MoeSparseMoeBlock.forward when qwen (the shared expert and its
    sigmoid gate; norm_topk_prob), line by line (transformers v4.44)."""

    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.qwen = c["model_type"] == "qwen2_moe"
        self.num_experts = c["num_experts"] if self.qwen else c["num_local_experts"]
        self.top_k = c["num_experts_per_tok"]
        self.norm_topk_prob = c["norm_topk_prob"] if self.qwen else True
        self.gate = nn.Linear(c["hidden_size"], self.num_experts, bias=False, **kw)
        if self.qwen:
            self.experts = nn.ModuleList(Qwen2MoeMLP(c, c["moe_intermediate_size"], device, dtype)
                                         for _ in range(self.num_experts))
            self.shared_expert = Qwen2MoeMLP(c, c["shared_expert_intermediate_size"], device, dtype)
            self.shared_expert_gate = nn.Linear(c["hidden_size"], 1, bias=False, **kw)
        else:
            self.experts = nn.ModuleList(MixtralBlockSparseTop2MLP(c, device, dtype) for _ in range(self.num_experts))

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        # router_logits: (batch * sequence_length, n_experts)
        router_logits = self.gate(hidden_states)

        routing_weights = nn.functional.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        if self.norm_topk_prob:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        # we cast back to the input dtype
        routing_weights = routing_weights.to(hidden_states.dtype)

        final_hidden_states = torch.zeros(
            (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype, device=hidden_states.device
        )

        expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        if RECORD:
            ROUTING.append([int(expert_mask[e].sum()) for e in range(self.num_experts)])

        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])

            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]

            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))

        if self.qwen:
            shared_expert_output = self.shared_expert(hidden_states)
            shared_expert_output = nn.functional.sigmoid(self.shared_expert_gate(hidden_states)) * shared_expert_output

            final_hidden_states = final_hidden_states + shared_expert_output

        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


def is_moe_layer(c, idx):
    """MixtralDecoderLayer: always; Qwen2MoeDecoderLayer: num_experts > 0,
    (idx + 1) % decoder_sparse_step == 0 and idx not in mlp_only_layers."""
    if c["model_type"] == "mixtral":
        return True
    if c["model_type"] == "qwen2_moe":
        return (idx not in (c["mlp_only_layers"] or []) and c["num_experts"] > 0
                and (idx + 1) % c["decoder_sparse_step"] == 0)
    return False


class DecoderLayer(nn.Module):
    def __init__(self, c, idx, device=None, dtype=None):
        super().__init__()
        self.self_attn = Attention(c, idx, device, dtype)
        self.moe = is_moe_layer(c, idx)
        if self.moe:
            self.mlp = SparseMoeBlock(c, device, dtype)
        elif c["model_type"] == "qwen2_moe":
            self.mlp = Qwen2MoeMLP(c, c["intermediate_size"], device, dtype)
        else:
            self.mlp = MLP(c, device, dtype)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], c["gemma"], device, dtype)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], c["gemma"], device, dtype)

    def forward(self, hidden_states, attention_mask, position_embeddings, cache, cache_position):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, attention_mask, position_embeddings, cache, cache_position)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        if self.moe:  # the decoder layer keeps router_logits to its return
            hidden_states, router_logits = self.mlp(hidden_states)
        else:
            hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states


class Model(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"], device=device, dtype=dtype)
        self.layers = nn.ModuleList(DecoderLayer(c, i, device, dtype) for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], c["gemma"], device, dtype)
        self.rotary_emb = RotaryEmbedding(c["head_dim"], c["rope_theta"], device)
        self.scale = math.sqrt(c["hidden_size"]) if c["gemma"] else None

    def forward(self, input_ids, position_ids, causal_mask, cache, cache_position):
        hidden_states = self.embed_tokens(input_ids)
        if self.scale is not None:  # GemmaModel: normalizer = tensor(hidden_size**0.5, dtype)
            hidden_states = hidden_states * torch.tensor(self.scale, dtype=hidden_states.dtype)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, causal_mask, position_embeddings, cache, cache_position)
        return self.norm(hidden_states)


class ForCausalLM(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        self.model = Model(c, device, dtype)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False, device=device, dtype=dtype)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, position_ids, causal_mask, cache, cache_position=None):
        hidden_states = self.model(input_ids, position_ids, causal_mask, cache, cache_position)
        logits = self.lm_head(hidden_states)
        return logits.float()


def build(cfg, device=None):
    """The model of config dict cfg, in its torch_dtype; device="meta" for counts."""
    c = resolve(cfg)
    return ForCausalLM(c, device=device, dtype=c["dtype"])


def causal_mask(batch, q_len, past, total, dtype):
    """_update_causal_mask's 4-d mask: position past+i attends to keys <= past+i."""
    m = torch.full((q_len, total), torch.finfo(dtype).min, dtype=dtype)
    m = torch.triu(m, diagonal=past + 1)
    return m[None, None].expand(batch, 1, q_len, total).contiguous()


def n_params(model):
    """sum(p.numel()) over distinct parameters (a tied head counts once)."""
    return sum(p.numel() for p in model.parameters())


# ---- GPT-2 (modeling_gpt2.py) and GPT-NeoX (modeling_gpt_neox.py), v4.44 ----
# Both keep their cache as tuples: layer_past = (key, value), key =
# torch.cat((past_key, key), dim=-2) and the model returns the new tuples;
# the caller still holds the old ones while the forward runs (generate's
# model_kwargs; v4.44 builds no DynamicCache for models without
# _supports_cache_class). TupleCache holds them the same way.

DEFAULTS_GPT = {
    "gpt2": dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
                 activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True),
    "gpt_neox": dict(vocab_size=50432, hidden_size=6144, num_hidden_layers=44, num_attention_heads=64,
                     intermediate_size=24576, hidden_act="gelu", rotary_pct=0.25, rotary_emb_base=10000,
                     max_position_embeddings=2048, layer_norm_eps=1e-5, use_parallel_residual=True,
                     attention_bias=True, tie_word_embeddings=False),
}
DEFAULTS.update(DEFAULTS_GPT)


def resolve_gpt(cfg):
    """GPT2Config / GPTNeoXConfig with defaults, in the names run() reads."""
    mt = cfg["model_type"]
    c = dict(DEFAULTS_GPT[mt])
    c.update({k: v for k, v in cfg.items() if v is not None or k == "n_inner"})
    if mt == "gpt2":
        c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"] = c["n_embd"], c["n_layer"], c["n_head"]
        c["max_position_embeddings"] = c["n_positions"]
        c["intermediate_size"] = c["n_inner"] if c.get("n_inner") is not None else 4 * c["n_embd"]
        c["hidden_act"], c["eps"] = c["activation_function"], c["layer_norm_epsilon"]
    else:
        c["eps"] = c["layer_norm_eps"]
    c["num_key_value_heads"] = c["num_attention_heads"]
    c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    c["dtype"] = DTYPES[c.get("torch_dtype", "float32")]
    return c


class NewGELU(nn.Module):
    """activations.py NewGELUActivation (gelu_new), every operation a tensor."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class FastGELU(nn.Module):
    """activations.py FastGELUActivation (gelu_fast)."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(input * 0.7978845608 * (1.0 + 0.044715 * input * input)))


class GELU(nn.Module):
    def forward(self, input):
        return nn.functional.gelu(input)


ACT_GPT = {"gelu_new": NewGELU, "gelu_fast": FastGELU, "gelu": GELU}


class Conv1D(nn.Module):
    """pytorch_utils.Conv1D: weight [in, out]; addmm(bias, x.view(-1, in), weight)."""

    def __init__(self, nf, nx, device=None, dtype=None):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(nf, device=device, dtype=dtype))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class TupleCache:
    """Legacy past_key_values: past (the caller's tuple, held during the
    forward) and presents (what the forward returns)."""

    def __init__(self, layers):
        self.past = None
        self.presents = None
        self.layers = layers

    def layer(self, i):
        return None if self.past is None else self.past[i]

    def tensors(self):
        return [t for kv in self.presents for t in kv] if self.presents else []


class GPT2Attention(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        P, D = c["max_position_embeddings"], c["hidden_size"]
        self.register_buffer("bias", torch.tril(torch.ones((P, P), dtype=torch.bool, device=device)).view(1, 1, P, P),
                             persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e4, device=device), persistent=False)
        self.embed_dim, self.num_heads = D, c["num_attention_heads"]
        self.head_dim, self.split_size = D // self.num_heads, D
        self.c_attn = Conv1D(3 * D, D, device, dtype)
        self.c_proj = Conv1D(D, D, device, dtype)
        self.attn_dropout = nn.Dropout(c.get("attn_pdrop", 0.1))  # identity in eval
        self.resid_dropout = nn.Dropout(c.get("resid_pdrop", 0.1))

    def _attn(self, query, key, value, attention_mask=None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype,
                                                 device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype).to(attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        return tensor.view(new_shape).permute(0, 2, 1, 3)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size()[:-2] + (num_heads * attn_head_size,))

    def forward(self, hidden_states, layer_past=None, attention_mask=None):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        if layer_past is not None:
            past_key, past_value = layer_past
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        present = (key, value)
        attn_output, attn_weights = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return (attn_output, present)


class GPT2MLP(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        D, I = c["hidden_size"], c["intermediate_size"]
        self.c_fc = Conv1D(I, D, device, dtype)
        self.c_proj = Conv1D(D, I, device, dtype)
        self.act = ACT_GPT[c["hidden_act"]]()
        self.dropout = nn.Dropout(c.get("resid_pdrop", 0.1))  # identity in eval

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        return self.dropout(hidden_states)


class GPT2Block(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        D = c["hidden_size"]
        self.ln_1 = nn.LayerNorm(D, eps=c["eps"], device=device, dtype=dtype)
        self.attn = GPT2Attention(c, device, dtype)
        self.ln_2 = nn.LayerNorm(D, eps=c["eps"], device=device, dtype=dtype)
        self.mlp = GPT2MLP(c, device, dtype)

    def forward(self, hidden_states, layer_past=None, attention_mask=None):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_outputs = self.attn(hidden_states, layer_past=layer_past, attention_mask=attention_mask)
        attn_output = attn_outputs[0]
        outputs = attn_outputs[1:]
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return (hidden_states,) + outputs


class GPT2Model(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        D = c["hidden_size"]
        self.wte = nn.Embedding(c["vocab_size"], D, device=device, dtype=dtype)
        self.wpe = nn.Embedding(c["max_position_embeddings"], D, device=device, dtype=dtype)
        self.h = nn.ModuleList(GPT2Block(c, device, dtype) for _ in range(c["num_hidden_layers"]))
        self.ln_f = nn.LayerNorm(D, eps=c["eps"], device=device, dtype=dtype)

    def forward(self, input_ids, position_ids, attention_mask, cache):
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds  # drop: identity in eval
        presents = ()
        for i, block in enumerate(self.h):
            outputs = block(hidden_states, layer_past=cache.layer(i), attention_mask=attention_mask)
            hidden_states = outputs[0]
            presents = presents + (outputs[1],)
        hidden_states = self.ln_f(hidden_states)
        cache.presents = presents
        return hidden_states


class GPTNeoXRotaryEmbedding(nn.Module):
    """v4.44: cos/sin tables of max_position_embeddings rows made at init
    (float32: inv_freq is .float()), sliced [:seq_len] in forward."""

    def __init__(self, dim, max_position_embeddings, base, device=None):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float().to(device) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        t = torch.arange(max_position_embeddings, device=device, dtype=torch.int64).type_as(self.inv_freq)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x, seq_len=None):
        return self.cos_cached[:seq_len], self.sin_cached[:seq_len]


def neox_apply_rotary_pos_emb(q, k, cos, sin, position_ids, unsqueeze_dim=1):
    cos = cos[position_ids].unsqueeze(unsqueeze_dim)
    sin = sin[position_ids].unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class GPTNeoXAttention(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        D, P = c["hidden_size"], c["max_position_embeddings"]
        self.num_attention_heads = c["num_attention_heads"]
        self.head_size = D // self.num_attention_heads
        self.rotary_ndims = int(self.head_size * c["rotary_pct"])
        self.register_buffer("bias", torch.tril(torch.ones((P, P), dtype=torch.bool, device=device)).view(1, 1, P, P),
                             persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e9, device=device), persistent=False)
        self.rotary_emb = GPTNeoXRotaryEmbedding(self.rotary_ndims, P, c["rotary_emb_base"], device)
        self.norm_factor = self.head_size ** -0.5
        self.query_key_value = nn.Linear(D, 3 * D, bias=c["attention_bias"], device=device, dtype=dtype)
        self.dense = nn.Linear(D, D, bias=c["attention_bias"], device=device, dtype=dtype)

    def forward(self, hidden_states, attention_mask, position_ids, layer_past=None):
        query, key, value, present = self._attn_projections_and_rope(hidden_states, position_ids, layer_past)
        attn_output, attn_weights = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_attention_heads, self.head_size)
        attn_output = self.dense(attn_output)
        return (attn_output, present)

    @classmethod
    def _merge_heads(cls, tensor, num_attention_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size(0), tensor.size(1), num_attention_heads * attn_head_size)

    def _attn_projections_and_rope(self, hidden_states, position_ids, layer_past=None):
        has_layer_past = layer_past is not None
        qkv = self.query_key_value(hidden_states)
        new_qkv_shape = qkv.size()[:-1] + (self.num_attention_heads, 3 * self.head_size)
        qkv = qkv.view(*new_qkv_shape)
        query = qkv[..., : self.head_size].permute(0, 2, 1, 3)
        key = qkv[..., self.head_size: 2 * self.head_size].permute(0, 2, 1, 3)
        value = qkv[..., 2 * self.head_size:].permute(0, 2, 1, 3)
        query_rot = query[..., : self.rotary_ndims]
        query_pass = query[..., self.rotary_ndims:]
        key_rot = key[..., : self.rotary_ndims]
        key_pass = key[..., self.rotary_ndims:]
        seq_len = key.shape[-2]
        if has_layer_past:
            seq_len += layer_past[0].shape[-2]
        cos, sin = self.rotary_emb(value, seq_len=seq_len)
        query, key = neox_apply_rotary_pos_emb(query_rot, key_rot, cos, sin, position_ids)
        query = torch.cat((query, query_pass), dim=-1)
        key = torch.cat((key, key_pass), dim=-1)
        if has_layer_past:
            past_key = layer_past[0]
            past_value = layer_past[1]
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        present = (key, value)
        return query, key, value, present

    def _attn(self, query, key, value, attention_mask=None):
        batch_size, num_attention_heads, query_length, attn_head_size = query.size()
        key_length = key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        query = query.view(batch_size * num_attention_heads, query_length, attn_head_size)
        key = key.view(batch_size * num_attention_heads, key_length, attn_head_size)
        attn_scores = torch.zeros(batch_size * num_attention_heads, query_length, key_length, dtype=query.dtype,
                                  device=key.device)
        attn_scores = torch.baddbmm(attn_scores, query, key.transpose(1, 2), beta=1.0, alpha=self.norm_factor)
        attn_scores = attn_scores.view(batch_size, num_attention_heads, query_length, key_length)
        mask_value = torch.finfo(attn_scores.dtype).min
        mask_value = torch.tensor(mask_value, dtype=attn_scores.dtype).to(attn_scores.device)
        attn_scores = torch.where(causal_mask, attn_scores, mask_value)
        if attention_mask is not None:
            attn_scores = attn_scores + attention_mask
        attn_weights = nn.functional.softmax(attn_scores, dim=-1)
        attn_weights = attn_weights.to(value.dtype)
        attn_output = torch.matmul(attn_weights, value)  # attention_dropout: identity in eval
        return attn_output, attn_weights


class GPTNeoXMLP(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        D, I = c["hidden_size"], c["intermediate_size"]
        self.dense_h_to_4h = nn.Linear(D, I, device=device, dtype=dtype)
        self.dense_4h_to_h = nn.Linear(I, D, device=device, dtype=dtype)
        self.act = ACT_GPT[c["hidden_act"]]()

    def forward(self, hidden_states):
        hidden_states = self.dense_h_to_4h(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dense_4h_to_h(hidden_states)
        return hidden_states


class GPTNeoXLayer(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        D = c["hidden_size"]
        self.use_parallel_residual = c["use_parallel_residual"]
        self.input_layernorm = nn.LayerNorm(D, eps=c["eps"], device=device, dtype=dtype)
        self.post_attention_layernorm = nn.LayerNorm(D, eps=c["eps"], device=device, dtype=dtype)
        self.attention = GPTNeoXAttention(c, device, dtype)
        self.mlp = GPTNeoXMLP(c, device, dtype)

    def forward(self, hidden_states, attention_mask, position_ids, layer_past=None):
        attention_layer_outputs = self.attention(self.input_layernorm(hidden_states), attention_mask=attention_mask,
                                                 position_ids=position_ids, layer_past=layer_past)
        attn_output = attention_layer_outputs[0]  # post_attention_dropout: identity in eval
        outputs = attention_layer_outputs[1:]
        if self.use_parallel_residual:
            mlp_output = self.mlp(self.post_attention_layernorm(hidden_states))
            hidden_states = mlp_output + attn_output + hidden_states
        else:
            attn_output = attn_output + hidden_states
            mlp_output = self.mlp(self.post_attention_layernorm(attn_output))
            hidden_states = mlp_output + attn_output
        return (hidden_states,) + outputs


class GPTNeoXModel(nn.Module):
    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        D = c["hidden_size"]
        self.embed_in = nn.Embedding(c["vocab_size"], D, device=device, dtype=dtype)
        self.layers = nn.ModuleList(GPTNeoXLayer(c, device, dtype) for _ in range(c["num_hidden_layers"]))
        self.final_layer_norm = nn.LayerNorm(D, eps=c["eps"], device=device, dtype=dtype)

    def forward(self, input_ids, position_ids, attention_mask, cache):
        inputs_embeds = self.embed_in(input_ids)
        hidden_states = inputs_embeds  # emb_dropout: identity in eval
        presents = ()
        for i, layer in enumerate(self.layers):
            outputs = layer(hidden_states, attention_mask=attention_mask, position_ids=position_ids,
                            layer_past=cache.layer(i))
            hidden_states = outputs[0]
            presents = presents + (outputs[1],)
        hidden_states = self.final_layer_norm(hidden_states)
        cache.presents = presents
        return hidden_states


class GPTForCausalLM(nn.Module):
    """GPT2LMHeadModel (lm_head tied to wte) / GPTNeoXForCausalLM (embed_out);
    no .float() of the logits in either (v4.44)."""

    def __init__(self, c, device=None, dtype=None):
        super().__init__()
        D, V = c["hidden_size"], c["vocab_size"]
        if c["model_type"] == "gpt2":
            self.transformer = GPT2Model(c, device, dtype)
            self.lm_head = nn.Linear(D, V, bias=False, device=device, dtype=dtype)
            self.body, self.head = self.transformer, self.lm_head
            if c["tie_word_embeddings"]:
                self.lm_head.weight = self.transformer.wte.weight
        else:
            self.gpt_neox = GPTNeoXModel(c, device, dtype)
            self.embed_out = nn.Linear(D, V, bias=False, device=device, dtype=dtype)
            self.body, self.head = self.gpt_neox, self.embed_out
            if c["tie_word_embeddings"]:
                self.embed_out.weight = self.gpt_neox.embed_in.weight

    def forward(self, input_ids, position_ids, attention_mask, cache, cache_position=None):
        return self.head(self.body(input_ids, position_ids, attention_mask, cache))


_build_llama = build
_resolve_llama = resolve


def resolve(cfg):  # noqa: F811
    return resolve_gpt(cfg) if cfg["model_type"] in DEFAULTS_GPT else _resolve_llama(cfg)


def build(cfg, device=None):  # noqa: F811
    """The model of config dict cfg (any family above)."""
    if cfg["model_type"] not in DEFAULTS_GPT:
        return _build_llama(cfg, device)
    c = resolve_gpt(cfg)
    return GPTForCausalLM(c, device=device, dtype=c["dtype"])


def gpt2_mask(batch, total, dtype):
    """GPT2Model's eager mask from a 2-d mask of ones: [B, 1, 1, T],
    (1.0 - mask) * finfo.min."""
    m = torch.ones(batch, total)[:, None, None, :].to(dtype=dtype)
    return (1.0 - m) * torch.finfo(dtype).min
