#!/usr/bin/python3
"""Memory truth for vLLM's paged KV cache: tests/llm/families.py's decoders
with the cache in block pools, measured on CPU with
tests/oracle/measure_memory.py's method (its measure()).

Usage: nice -n 10 /usr/bin/python3 tests/llm/measure_paged.py [--models a,b] [--out golden/truth/llm]

Writes golden/truth/llm/<model>.paged.json (the config is measure_llm.py's
<model>.config.json). Modes, each at batch 1 and 4, prompt S, N new tokens
(torch.no_grad(), the config's torch_dtype, weights random, seeded):
  prefill_paged   the prompt of S tokens written into the pools
  decode_paged    the last decode step: S+N-1 tokens cached, one new
The cache is vLLM's (vllm/attention/backends/flash_attn.py
get_kv_cache_shape): per layer one tensor [2, blocks, 16, Hkv, hd] made
before the step, ceil(len/16) blocks a sequence, a block table [B, blocks]
(int32) and a flat slot_mapping [B, S] (int64) as vLLM's metadata; the
step's keys and values are written into their slots in place
(reshape_and_cache_flash: pool.view(-1, Hkv, hd)[slot_mapping] = k, an
index_put_ of the [B,S,Hkv,hd] view). Attention follows the kernels'
contract, not their insides (torch 1.13 on CPU has neither): the output is
allocated once [B,S,H,hd] in the model's dtype and the log-sum-exp [B,H,S]
in fp32 (flash's softmax_lse), and filled one query row at a time (the
prefill: causal over the fresh keys) or one block at a time through the
block table (decode: basic indexing, views of the pool, no gather copy),
so no [S,S] tensor and no gathered cache exist; the per-row temporaries
are a few KiB. The output is viewed [B,S,H*hd] for o_proj. As vLLM's
LogitsProcessor, only each sequence's last hidden state goes to lm_head
(index_select), and the logits are taken in fp32. Everything else is the
HF forward families.py implements (its locals as HF holds them).
Baseline: parameters, buffers, inputs (ids, position ids, slot_mapping,
block_tables) and the pools. "cache_bytes_end": the pools' bytes
(numel x element size).
"""
import argparse
import json
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
from measure_llm import MODELS as LLM_MODELS  # noqa: E402

torch.set_num_threads(1)

S, N = 256, 8
BLOCK = 16
BATCHES = (1, 4)
MODES = ("prefill_paged", "decode_paged")
MODELS = ("llama_small", "llama_small_bf16")


class PagedCache:
    """Block pools, a block table and slots, as vLLM's CacheEngine and its
    attention metadata hold them."""

    def __init__(self, c, batch, length, past, q_len, dtype):
        kv, hd = c["num_key_value_heads"], c["head_dim"]
        per = math.ceil(length / BLOCK)
        self.pools = [torch.zeros(2, batch * per, BLOCK, kv, hd, dtype=dtype) for _ in range(c["num_hidden_layers"])]
        self.tables = torch.arange(batch * per, dtype=torch.int32).view(batch, per)
        pos = torch.arange(past, past + q_len)
        self.slots = (self.tables[:, pos // BLOCK].long() * BLOCK + pos % BLOCK).contiguous()
        self.length = past + q_len

    def write(self, li, k, v):
        """reshape_and_cache_flash: k, v [B,Hkv,S,hd] into their slots in place."""
        pool = self.pools[li]
        kv, hd = pool.shape[3], pool.shape[4]
        pool[0].view(-1, kv, hd)[self.slots] = k.transpose(1, 2)
        pool[1].view(-1, kv, hd)[self.slots] = v.transpose(1, 2)

    def tensors(self):
        return list(self.pools)


def attend(cache, li, q, k, v, n_rep):
    """The kernels' contract: out [B,S,H,hd] and lse [B,H,S] fp32 allocated
    once, filled row by row (prefill, causal over the fresh k, v) or block
    by block through the table (decode)."""
    B, H, Sq, hd = q.shape
    out = torch.empty(B, Sq, H, hd, dtype=q.dtype)
    lse = torch.empty(B, H, Sq, dtype=torch.float32)
    scale = 1.0 / math.sqrt(hd)
    kvh = H // n_rep
    for b in range(B):
        for g in range(kvh):  # each KV head serves n_rep query heads (GQA read natively)
            hs = slice(g * n_rep, (g + 1) * n_rep)
            if Sq > 1:  # prefill: flash over the prompt's own keys
                for i in range(Sq):
                    s = torch.mm(q[b, hs, i], k[b, g, : i + 1].t()).float() * scale  # [rep, i+1]
                    m = torch.logsumexp(s, -1)
                    p = torch.exp(s - m.unsqueeze(-1)).to(q.dtype)
                    out[b, i, hs].copy_(torch.mm(p, v[b, g, : i + 1]))
                    lse[b, hs, i].copy_(m)
            else:  # decode: the sequence's blocks, views of the pool
                pool, n = cache.pools[li], cache.length
                ms, accs = [], []
                for j in range(math.ceil(n / BLOCK)):
                    blk, t = int(cache.tables[b, j]), min(BLOCK, n - j * BLOCK)
                    s = torch.mm(q[b, hs, 0], pool[0, blk, :t, g].t()).float() * scale  # [rep, t]
                    m = torch.logsumexp(s, -1)
                    accs.append(torch.mm(torch.exp(s - m.unsqueeze(-1)).to(q.dtype), pool[1, blk, :t, g]).float())
                    ms.append(m)
                m = torch.logsumexp(torch.stack(ms), 0)
                o = sum(a * torch.exp(mj - m).unsqueeze(-1) for a, mj in zip(accs, ms))
                out[b, 0, hs].copy_(o)
                lse[b, hs, 0].copy_(m)
    del lse  # returned by the kernel, dropped by its caller
    return out


def qkv_rotary(self, hidden_states, position_embeddings):
    """LlamaAttention.forward's first lines (HF): q/k/v projections, head
    views, rotary; the pre-rotary q and k die as HF rebinds its locals."""
    bsz, q_len, _ = hidden_states.size()
    query_states = self.q_proj(hidden_states)
    key_states = self.k_proj(hidden_states)
    value_states = self.v_proj(hidden_states)
    query_states = query_states.view(bsz, q_len, self.h, self.hd).transpose(1, 2)
    key_states = key_states.view(bsz, q_len, self.kv, self.hd).transpose(1, 2)
    value_states = value_states.view(bsz, q_len, self.kv, self.hd).transpose(1, 2)
    cos, sin = position_embeddings
    query_states, key_states = families.apply_rotary_pos_emb(query_states, key_states, cos, sin)
    return bsz, q_len, query_states, key_states, value_states


def paged_forward(self, hidden_states, attention_mask, position_embeddings, cache, cache_position):
    """HF's projections and rotary, vLLM's cache and attention;
    query/key/value_states held to the end as HF's locals are."""
    bsz, q_len, query_states, key_states, value_states = qkv_rotary(self, hidden_states, position_embeddings)
    cache.write(self.idx, key_states, value_states)
    attn_output = attend(cache, self.idx, query_states, key_states, value_states, self.h // self.kv)
    attn_output = attn_output.view(bsz, q_len, -1)
    return self.o_proj(attn_output)


def seeded_model(cfg, forward):
    """families.py's decoder with Attention.forward replaced, weights
    random (seed 0), then the inputs' seed (1)."""
    families.Attention.forward = forward
    torch.manual_seed(0)
    model = families.build(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    torch.manual_seed(1)
    return model


def measured(fn, base, cache, hold):
    """measure()'s figures of fn, with the cache's and the logits' bytes"""
    r, _ = mm.measure(fn, base)
    r = mm.clean(r)
    r["cache_bytes_end"] = sum(t.numel() * t.element_size() for t in cache.tensors())
    r["logits_bytes"] = hold["out"].numel() * hold["out"].element_size()
    keep = ("baseline", "peak", "peak_relative", "end", "cache_bytes_end", "logits_bytes", "counter_check")
    return {k: r[k] for k in keep if k in r}


def run(cfg, mode, batch):
    c = families.resolve(cfg)
    assert not c["fused"], "paged truth: separate q/k/v projections only"
    model = seeded_model(cfg, paged_forward)
    dt = c["dtype"]
    prefill = mode == "prefill_paged"
    q = S if prefill else 1
    past = 0 if prefill else S + N - 1
    ids = torch.randint(0, c["vocab_size"], (batch, q))
    pos = torch.arange(past, past + q)[None]
    cache = PagedCache(c, batch, past + q, past, q, dt)
    last = torch.tensor([q - 1])  # vLLM's selected_token_indices (a constant in memest)
    xs = [ids, pos, cache.slots, cache.tables, last]
    base = mm.baseline_list(model, None, xs, None) + cache.tensors()
    hold = {}

    def fn():
        base.clear()
        with torch.no_grad():
            h = model.model(ids, pos, None, cache, None)
            h = h.index_select(1, last)  # LogitsProcessor._prune_hidden_states
            hold["out"] = model.lm_head(h).float()

    return measured(fn, base, cache, hold)


def write_truth(script, doc, suffix, models, modes, run_fn, extra=None):
    """Each model's modes at BATCHES into <out>/<model>.<suffix>.json"""
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(models))
    ap.add_argument("--out", default=os.path.join(ROOT, "golden", "truth", "llm"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        res = {}
        for mode in modes:
            for b in BATCHES:
                r = run_fn(LLM_MODELS[name], mode, b)
                res.setdefault(mode, {})[str(b)] = r
                print(name, mode, b, r["peak"], r["end"], r["cache_bytes_end"], flush=True)
                mm.release()
        out = {"model": name, "config": name + ".config.json", "torch": torch.__version__, "seq": S, "new_tokens": N}
        out.update(extra or {})
        out["how"] = (script + ": " + " ".join(doc.split("\n\n")[1].split()) +
                      " Measured with tests/oracle/measure_memory.py's measure(): " + mm.HOW)
        out["results"] = res
        with open(os.path.join(a.out, f"{name}.{suffix}.json"), "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")


def main():
    write_truth("tests/llm/measure_paged.py", __doc__, "paged", MODELS, MODES, run, {"block": BLOCK})

if __name__ == "__main__":
    main()
