#!/usr/bin/python3
"""Memory truth for language models: tests/llm/families.py's decoders at
small sizes, measured on CPU with tests/oracle/measure_memory.py's method
(its measure(): the profiler's allocation events, baseline + running peak).

Usage: nice -n 10 /usr/bin/python3 tests/llm/measure_llm.py [--models a,b] [--out golden/truth/llm]

Writes golden/truth/llm/<model>.config.json (the config memest reads) and
<model>.json (the figures). Modes, each at batch 1 and 4, prompt S, N new
tokens (eager attention, torch.no_grad(), the config's torch_dtype, weights random, seeded):
  prefill          model(ids[B,S]) with an empty DynamicCache; logits and
                   the cache alive at the end
  decode_dynamic   the last decode step: a DynamicCache already holding
                   S+N-1 tokens, model(ids[B,1]); each layer's torch.cat
                   replaces its key and value (the old ones die inside the
                   region: they were made under a profiler session, so the
                   allocator reports their frees, and only the cache holds
                   them)
  decode_static    the same step with a StaticCache of S+N tokens
                   (index_copy_ in place)
  prefill_static   the prompt into a StaticCache of S tokens
MoE models also record "tokens_per_expert": the tokens each expert got in
each MoE layer in that very step (an unmeasured forward on a copy of the
cache; the routing is what the seeded weights make it).
Baseline: parameters, buffers, inputs (ids, position ids, the 4-d causal
mask) and the cache tensors alive before the region. "cache_bytes_end": the
cache's tensors after the region (numel x element size);
"cache_storage_bytes_end": the storages they keep alive (deduplicated).
"""
import argparse
import copy
import json
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import families  # noqa: E402
import measure_memory as mm  # noqa: E402

torch.set_num_threads(1)

S, N = 256, 8
BATCHES = (1, 4)
MODES = ("prefill", "decode_dynamic", "decode_static", "prefill_static")

# small members of each family (d 256-512, 2-4 layers)
MODELS = {
    "llama_small": {"model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                    "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 688,
                    "torch_dtype": "float32"},
    "llama_mha_small": {"model_type": "llama", "vocab_size": 2000, "hidden_size": 512, "num_hidden_layers": 3,
                        "num_attention_heads": 8, "intermediate_size": 1376, "torch_dtype": "float32"},
    "mistral_small": {"model_type": "mistral", "vocab_size": 1000, "hidden_size": 384, "num_hidden_layers": 2,
                      "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 1024,
                      "sliding_window": None, "torch_dtype": "float32"},
    "qwen2_small": {"model_type": "qwen2", "vocab_size": 1500, "hidden_size": 256, "num_hidden_layers": 4,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 768,
                    "torch_dtype": "float32"},
    "llama_small_bf16": {"model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                         "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 688,
                         "torch_dtype": "bfloat16"},
    "phi3_small": {"model_type": "phi3", "vocab_size": 1000, "hidden_size": 384, "num_hidden_layers": 2,
                   "num_attention_heads": 6, "num_key_value_heads": 6, "intermediate_size": 1024,
                   "torch_dtype": "float32"},
    "gemma_small": {"model_type": "gemma", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 96, "intermediate_size": 768,
                    "torch_dtype": "float32"},
    # GPT-2 and GPT-NeoX (tuple caches: prefill and decode_dynamic only)
    "gpt2_small": {"model_type": "gpt2", "vocab_size": 1000, "n_embd": 256, "n_layer": 3, "n_head": 4,
                   "n_positions": 1024, "torch_dtype": "float32"},
    "neox_small": {"model_type": "gpt_neox", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 3,
                   "num_attention_heads": 4, "intermediate_size": 1024, "max_position_embeddings": 1024,
                   "rotary_pct": 0.25, "use_parallel_residual": True, "torch_dtype": "float32"},
    "neox_seq_small": {"model_type": "gpt_neox", "vocab_size": 1500, "hidden_size": 384, "num_hidden_layers": 2,
                       "num_attention_heads": 6, "intermediate_size": 1536, "max_position_embeddings": 512,
                       "rotary_pct": 0.5, "use_parallel_residual": False, "hidden_act": "gelu_fast",
                       "torch_dtype": "float32"},
    # bf16 weights: the float32 rotary tables promote query and key (cached keys in float32)
    "neox_small_bf16": {"model_type": "gpt_neox", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 3,
                        "num_attention_heads": 4, "intermediate_size": 1024, "max_position_embeddings": 1024,
                        "rotary_pct": 0.25, "use_parallel_residual": True, "torch_dtype": "bfloat16"},
    # sparse MoE (eager expert loop): Mixtral's 8 experts top-2
    # renormalized; Qwen2-MoE's 4 experts top-2 with a shared expert, layer
    # 0 dense (decoder_sparse_step 2)
    "mixtral_small": {"model_type": "mixtral", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                      "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 512,
                      "num_local_experts": 8, "num_experts_per_tok": 2, "torch_dtype": "float32"},
    "qwen2moe_small": {"model_type": "qwen2_moe", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 768,
                       "moe_intermediate_size": 256, "shared_expert_intermediate_size": 512, "num_experts": 4,
                       "num_experts_per_tok": 2, "decoder_sparse_step": 2, "torch_dtype": "float32"},
    # bf16: the router's softmax in fp32 and the routing weights cast back
    "mixtral_small_bf16": {"model_type": "mixtral", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2,
                           "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 512,
                           "num_local_experts": 8, "num_experts_per_tok": 2, "torch_dtype": "bfloat16"},
}
# transformers v4.44's GPT2Model and GPTNeoXModel keep past_key_values as
# tuples: no StaticCache
TUPLE_CACHE = ("gpt2", "gpt_neox")
TUPLE_HOW = (" GPT-2 / GPT-NeoX (run_tuple): no static modes; the cache is v4.44's tuple past_key_values: "
             "decode_dynamic's old tuple (made under a profiler session) stays held by the caller through the "
             "forward, as generate's model_kwargs holds it; cache_bytes_end counts the returned presents.")


def modes_of(cfg):
    return ("prefill", "decode_dynamic") if cfg["model_type"] in TUPLE_CACHE else MODES


def run_tuple(cfg, mode, batch):
    """GPT-2 / GPT-NeoX: the old tuple of the last decode step stays held by
    the caller (TupleCache.past) through the forward; cache_bytes_end
    counts the returned presents."""
    c = families.resolve(cfg)
    torch.manual_seed(0)
    model = families.build(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    dt = c["dtype"]
    H, hd, L = c["num_attention_heads"], c["head_dim"], c["num_hidden_layers"]
    torch.manual_seed(1)
    prefill = mode == "prefill"
    q = S if prefill else 1
    past = 0 if prefill else S + N - 1
    total = past + q
    ids = torch.randint(0, c["vocab_size"], (batch, q))
    pos = torch.arange(past, past + q)[None]
    cache = families.TupleCache(L)
    # the keys a NeoX prefill caches are float32 (its rotary tables are)
    kdt = torch.float32 if cfg["model_type"] == "gpt_neox" and int(hd * c["rotary_pct"]) > 0 else dt
    if not prefill:
        cache.past = under_profiler(lambda: tuple((torch.randn(batch, H, past, hd, dtype=kdt),
                                                   torch.randn(batch, H, past, hd, dtype=dt)) for _ in range(L)))
    if cfg["model_type"] == "gpt2":
        mask = families.gpt2_mask(batch, total, dt)
    else:
        mask = families.causal_mask(batch, q, past, total, dt)
    xs = [ids, pos, mask]
    base = mm.baseline_list(model, None, xs, None) + [t for kv in (cache.past or ()) for t in kv]
    hold = {}

    def fn():
        base.clear()
        with torch.no_grad():
            hold["out"] = model(ids, pos, mask, cache)

    r, _ = mm.measure(fn, base)
    r = mm.clean(r)
    r["cache_bytes_end"] = sum(t.numel() * t.element_size() for t in cache.tensors())
    r["cache_storage_bytes_end"] = mm.tensors_bytes(cache.tensors())[0]
    r["logits_bytes"] = hold["out"].numel() * hold["out"].element_size()
    keep = ("baseline", "peak", "peak_relative", "end", "cache_bytes_end", "cache_storage_bytes_end", "logits_bytes",
            "counter_check")
    return {k: r[k] for k in keep if k in r}


def under_profiler(make):
    """Tensors made while a profiler session records memory: c10 then keeps
    their sizes, so their later frees are reported (measure_memory.py)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False):
        return make()


def run(name, cfg, mode, batch):
    if cfg["model_type"] in TUPLE_CACHE:
        return run_tuple(cfg, mode, batch)
    c = families.resolve(cfg)
    torch.manual_seed(0)
    model = families.build(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    dt = c["dtype"]
    kv, hd, L = c["num_key_value_heads"], c["head_dim"], c["num_hidden_layers"]
    torch.manual_seed(1)
    prefill = mode.startswith("prefill")
    q = S if prefill else 1
    past = 0 if prefill else S + N - 1
    ids = torch.randint(0, c["vocab_size"], (batch, q))
    pos = torch.arange(past, past + q)[None]
    cpos = torch.arange(past, past + q)
    if mode == "prefill":
        cache, total = families.DynamicCache(), q
    elif mode == "decode_dynamic":
        cache, total = families.DynamicCache(), past + 1

        def fill():
            cache.key_cache = [torch.randn(batch, kv, past, hd, dtype=dt) for _ in range(L)]
            cache.value_cache = [torch.randn(batch, kv, past, hd, dtype=dt) for _ in range(L)]
        under_profiler(fill)
    else:
        total = S if mode == "prefill_static" else S + N
        cache = under_profiler(lambda: families.StaticCache(c, batch, total, dt))
    mask = families.causal_mask(batch, q, past, total, dt)
    xs = [ids, pos, mask, cpos]
    routing = None
    if any(isinstance(m, families.SparseMoeBlock) for m in model.modules()):
        # tokens per expert of this very step, from an unmeasured forward
        # on a copy of the cache (counting them allocates)
        twin = copy.deepcopy(cache)
        families.ROUTING.clear()
        families.RECORD = True
        with torch.no_grad():
            model(ids, pos, mask, twin, cpos)
        families.RECORD = False
        routing = [list(r) for r in families.ROUTING]
        del twin
        mm.release()
    base = mm.baseline_list(model, None, xs, None) + cache.tensors()
    hold = {}

    def fn():
        base.clear()  # the list measure() reads must not keep the old cache alive
        with torch.no_grad():
            hold["out"] = model(ids, pos, mask, cache, cpos)

    r, _ = mm.measure(fn, base)
    r = mm.clean(r)
    # the cache's tensors (numel x element size) and the storages they keep
    # (more where a cached value is a view of a larger tensor: Phi-3's qkv)
    r["cache_bytes_end"] = sum(t.numel() * t.element_size() for t in cache.tensors())
    r["cache_storage_bytes_end"] = mm.tensors_bytes(cache.tensors())[0]
    r["logits_bytes"] = hold["out"].numel() * hold["out"].element_size()
    keep = ("baseline", "peak", "peak_relative", "end", "cache_bytes_end", "cache_storage_bytes_end", "logits_bytes",
            "counter_check")
    out = {k: r[k] for k in keep if k in r}
    if routing is not None:
        out["tokens_per_expert"] = routing  # per MoE layer, per expert: the measured routing
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=os.path.join(ROOT, "golden", "truth", "llm"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        cfg = MODELS[name]
        with open(os.path.join(a.out, name + ".config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")
        res = {}
        for mode in modes_of(cfg):
            for b in BATCHES:
                r = run(name, cfg, mode, b)
                res.setdefault(mode, {})[str(b)] = r
                print(name, mode, b, r["peak"], r["end"], r["cache_bytes_end"], flush=True)
                mm.release()
        doc = {
            "model": name, "config": name + ".config.json", "torch": torch.__version__,
            "params": families.n_params(families.build(cfg, device="meta")),
            "seq": S, "new_tokens": N,
            "how": "tests/llm/measure_llm.py: " + " ".join(__doc__.split("\n\n")[1].split()) +
                   " Measured with tests/oracle/measure_memory.py's measure(): " + mm.HOW +
                   (TUPLE_HOW if cfg["model_type"] in TUPLE_CACHE else ""),
            "results": res,
        }
        with open(os.path.join(a.out, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
