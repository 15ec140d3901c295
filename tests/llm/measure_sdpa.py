#!/usr/bin/python3
"""Memory truth for HF's sdpa attention (transformers v4.44
LlamaSdpaAttention) around PyTorch 2.x's fused kernels: tests/llm/
families.py's decoders measured on CPU with tests/oracle/measure_memory.py's
method (its measure()).

Usage: nice -n 10 /usr/bin/python3 tests/llm/measure_sdpa.py [--models a,b] [--out golden/truth/llm]

Writes golden/truth/llm/<model>.sdpa.json (the config is measure_llm.py's
<model>.config.json). Modes, each at batch 1 and 4, prompt S, N new tokens
(torch.no_grad(), the config's torch_dtype, weights random, seeded):
  prefill          the prompt, an empty DynamicCache, no mask (is_causal)
  decode_dynamic   the last decode step, the cache holding S+N-1 tokens
                   (made under a profiler session, as measure_llm.py), no mask
  decode_static    the same step with a StaticCache of S+N tokens and HF's
                   4-d mask [B,1,1,S+N] (an input)
HF's module is followed line by line (q/k/v projections, rotary, the cache,
repeat_kv's copies, F.scaled_dot_product_attention, transpose(1,2).
contiguous(), view, o_proj; query/key/value_states held as its locals).
torch 1.13 has no scaled_dot_product_attention, so the kernel is replaced
by its contract, not its insides, as PyTorch 2.x's CUDA dispatch picks it:
flash (fp16/bf16, no mask) allocates the output, stored [B,S,H,hd] in q's
dtype, and softmax_lse [B,H,S] fp32; the memory-efficient kernel (fp32, or
a mask) the output only in inference, and a padded copy of a mask whose
last dim is not a multiple of 8 (attention.cpp preprocess_mask). The
output is filled one query row and KV-head group at a time (per-row
temporaries of a few KiB; no [S,T] tensor), and returned transposed [B,H,S,hd], so HF's
.contiguous() copies nothing. Baseline: parameters, buffers, inputs (ids,
position ids, the mask when there is one, cache_position) and the cache
alive before the region. "cache_bytes_end": the cache's tensors after.
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import families  # noqa: E402
import measure_memory as mm  # noqa: E402
from measure_llm import S, N, under_profiler  # noqa: E402
from measure_paged import measured, qkv_rotary, seeded_model, write_truth  # noqa: E402

torch.set_num_threads(1)

MODES = ("prefill", "decode_dynamic", "decode_static")
MODELS = ("llama_small", "llama_small_bf16")


def sdpa_contract(q, k, v, mask, n_kv):
    """F.scaled_dot_product_attention as its CUDA kernels allocate: q
    [B,H,S,hd], k, v [B,H,T,hd] (repeat_kv'd); returns [B,H,S,hd], a
    transposed view of the [B,S,H,hd] output."""
    B, H, Sq, hd = q.shape
    T = k.shape[2]
    flash = mask is None and q.dtype in (torch.float16, torch.bfloat16)
    pad = None
    if mask is not None and mask.shape[-1] % 8:
        pad = torch.nn.functional.pad(mask, (0, 8 - mask.shape[-1] % 8))  # pad_bias, freed on return
    out = torch.empty(B, Sq, H, hd, dtype=q.dtype)
    lse = torch.empty(B, H, Sq if flash else 0, dtype=torch.float32)
    scale = 1.0 / math.sqrt(hd)
    causal = mask is None and Sq > 1
    rep = H // n_kv
    for b in range(B):
        for g in range(n_kv):  # repeat_kv's copies are equal within a group: read one
            hs = slice(g * rep, (g + 1) * rep)
            for i in range(Sq):
                n = i + 1 + (T - Sq) if causal else T
                s = torch.mm(q[b, hs, i], k[b, g * rep, :n].t()).float() * scale  # [rep, n]
                if mask is not None:
                    s = s + mask[b, 0, i, :n].float()
                m = torch.logsumexp(s, -1)
                out[b, i, hs].copy_(torch.mm(torch.exp(s - m.unsqueeze(-1)).to(q.dtype), v[b, g * rep, :n]))
                if flash:
                    lse[b, hs, i] = m
    del lse, pad
    return out.transpose(1, 2)


def sdpa_forward(self, hidden_states, attention_mask, position_embeddings, cache, cache_position):
    """LlamaSdpaAttention.forward (v4.44), the kernel by its contract."""
    bsz, q_len, query_states, key_states, value_states = qkv_rotary(self, hidden_states, position_embeddings)
    key_states, value_states = cache.update(key_states, value_states, self.idx, cache_position)
    key_states = families.repeat_kv(key_states, self.h // self.kv)
    value_states = families.repeat_kv(value_states, self.h // self.kv)
    causal_mask = attention_mask
    if attention_mask is not None:
        causal_mask = causal_mask[:, :, :, : key_states.shape[-2]]
    attn_output = sdpa_contract(query_states, key_states, value_states, causal_mask, self.kv)
    attn_output = attn_output.transpose(1, 2).contiguous()
    attn_output = attn_output.view(bsz, q_len, -1)
    return self.o_proj(attn_output)


def run(cfg, mode, batch):
    c = families.resolve(cfg)
    assert not c["fused"], "sdpa truth: separate q/k/v projections only"
    model = seeded_model(cfg, sdpa_forward)
    dt = c["dtype"]
    kv, hd, L = c["num_key_value_heads"], c["head_dim"], c["num_hidden_layers"]
    prefill = mode == "prefill"
    q = S if prefill else 1
    past = 0 if prefill else S + N - 1
    ids = torch.randint(0, c["vocab_size"], (batch, q))
    pos = torch.arange(past, past + q)[None]
    cpos = torch.arange(past, past + q)
    mask = None
    if mode == "prefill":
        cache = families.DynamicCache()
    elif mode == "decode_dynamic":
        cache = families.DynamicCache()

        def fill():
            cache.key_cache = [torch.randn(batch, kv, past, hd, dtype=dt) for _ in range(L)]
            cache.value_cache = [torch.randn(batch, kv, past, hd, dtype=dt) for _ in range(L)]
        under_profiler(fill)
    else:
        cache = under_profiler(lambda: families.StaticCache(c, batch, S + N, dt))
        mask = families.causal_mask(batch, q, past, S + N, dt)
    xs = [ids, pos, cpos] + ([mask] if mask is not None else [])
    base = mm.baseline_list(model, None, xs, None) + cache.tensors()
    hold = {}

    def fn():
        base.clear()
        with torch.no_grad():
            hold["out"] = model(ids, pos, mask, cache, cpos)

    return measured(fn, base, cache, hold)


def main():
    write_truth("tests/llm/measure_sdpa.py", __doc__, "sdpa", MODELS, MODES, run)


if __name__ == "__main__":
    main()
