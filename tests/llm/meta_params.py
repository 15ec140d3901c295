#!/usr/bin/python3
"""Parameter truth for the language-model families: writes
golden/truth/llm/params.json.

    /usr/bin/python3 tests/llm/meta_params.py [OUT]

For each model under models/llm/<name>/config.json (Hugging Face's published
config of that checkpoint), the family is built from torch.nn primitives by
tests/llm/families.py on the meta device (torch 1.13: nn.Linear and
nn.Embedding take device="meta"; no memory is allocated) and its
parameters counted: sum(p.numel()) over model.parameters(), a tied head
once. Families that families.py does not build yet (phi3, mixtral, gpt2)
are counted from their layout, term by term as HF's modeling code makes
the parameters (see formula() below), and marked "method": "formula".

Each entry also carries the published count where one is known, and its
source; "published" is null where none gives the exact figure.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# families.py lives beside this script once merged; during development in
# the llm worktree
sys.path.insert(0, HERE)
if not os.path.exists(os.path.join(HERE, "families.py")):
    sys.path.insert(0, "/work/wt/llm/tests/llm")

import torch  # noqa: E402
import families  # noqa: E402

# Published counts: the issue (from the checkpoints' safetensors headers on
# the Hub) and the papers' tables.
PUBLISHED = {
    "llama-2-7b": (6738415616, "issue 14; meta-llama/Llama-2-7b-hf safetensors (6.74B)"),
    "llama-3-8b": (8030261248, "issue 14; meta-llama/Meta-Llama-3-8B safetensors (8.03B)"),
    "mistral-7b": (7241732096, "issue 14; mistralai/Mistral-7B-v0.1 safetensors (7.24B)"),
    "mixtral-8x7b": (46702792704, "issue 14; mistralai/Mixtral-8x7B-v0.1 safetensors (46.7B)"),
    # Gemma report (arXiv:2403.08295) table 2 counts embeddings for a
    # 256,128-token vocabulary; the HF checkpoints have 256,000 rows, so
    # published = non-embedding + 256000 x d
    "gemma-2b": (1981884416 + 256000 * 2048, "Gemma report table 2: 1,981,884,416 non-embedding; + 256000 x 2048 embedding"),
    "gemma-7b": (7751248896 + 256000 * 3072, "Gemma report table 2: 7,751,248,896 non-embedding; + 256000 x 3072 embedding"),
    # the Hub's safetensors counts (the model page's "Model size"), as quoted in public code
    "gpt2": (124439808, "openai-community/gpt2: GPT2LMHeadModel's count, 124.44M (the GPT-2 paper's 117M predates it)"),
    "qwen2-7b": (7615616512, "Hub safetensors count 7,615,616,512 of Qwen2/Qwen2.5-7B (same sizes; GGUF general.parameter_count)"),
    "phi-3-mini": (3821079552, "microsoft/Phi-3-mini-4k-instruct: Hub safetensors count 3,821,079,552 BF16"),
    "pythia-160m": (162322944, "Pythia paper (arXiv:2304.01373) table 1: 162,322,944 total parameters (EleutherAI/pythia-160m)"),
    "gpt-neox-20b": (20554567680, "GPT-NeoX-20B paper (arXiv:2204.06745): 20,554,567,680 parameters (EleutherAI/gpt-neox-20b)"),
    "qwen1.5-moe-a2.7b": (14315784192, "Qwen/Qwen1.5-MoE-A2.7B: Hub safetensors count 14,315,784,192 (\"14.3B parameters in total\", its model card)"),
}


def formula(cfg):
    """Parameters of the families families.py does not build, each term as
    HF's modeling code creates it (transformers v4.44)."""
    mt = cfg["model_type"]
    if mt == "gpt2":  # modeling_gpt2.py: Conv1D layers carry biases, LayerNorms weight + bias, head tied to wte
        V, D, P, L = cfg["vocab_size"], cfg["n_embd"], cfg["n_positions"], cfg["n_layer"]
        I = cfg.get("n_inner") or 4 * D
        layer = (2 * D               # ln_1
                 + D * 3 * D + 3 * D  # attn.c_attn (fused q, k, v)
                 + D * D + D          # attn.c_proj
                 + 2 * D              # ln_2
                 + D * I + I          # mlp.c_fc
                 + I * D + D)         # mlp.c_proj
        return V * D + P * D + L * layer + 2 * D  # wte, wpe, layers, ln_f
    V, D, L = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = D // H
    I = cfg["intermediate_size"]
    head = 0 if cfg.get("tie_word_embeddings") else V * D
    if mt == "phi3":  # modeling_phi3.py: qkv_proj and gate_up_proj fused, no biases, RMSNorm weights
        layer = (D * (H + 2 * KV) * hd  # self_attn.qkv_proj
                 + H * hd * D           # self_attn.o_proj
                 + D * 2 * I            # mlp.gate_up_proj
                 + I * D                # mlp.down_proj
                 + 2 * D)               # input_layernorm, post_attention_layernorm
        return V * D + L * layer + D + head
    if mt == "mixtral":  # modeling_mixtral.py: block_sparse_moe.gate (router, no bias) and E experts w1, w2, w3
        E = cfg["num_local_experts"]
        layer = (D * H * hd + 2 * D * KV * hd + H * hd * D  # q, k, v, o projections
                 + D * E                                    # block_sparse_moe.gate
                 + E * 3 * D * I                            # experts' w1, w3 (D -> I) and w2 (I -> D)
                 + 2 * D)                                   # two RMSNorms
        return V * D + L * layer + D + head
    raise KeyError(mt)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "golden", "truth", "llm", "params.json")
    models = {}
    base = os.path.join(ROOT, "models", "llm")
    for name in sorted(os.listdir(base)):
        with open(os.path.join(base, name, "config.json")) as f:
            cfg = json.load(f)
        if cfg["model_type"] in families.DEFAULTS:
            with torch.no_grad():
                m = families.build(cfg, device="meta")
            assert all(p.is_meta for p in m.parameters())
            n, method = families.n_params(m), "meta"
            del m
        else:
            n, method = formula(cfg), "formula"
        pub, src = PUBLISHED.get(name, (None, None))
        if pub is not None and pub != n:
            sys.exit(f"{name}: counted {n}, published {pub}")
        models[name] = {"config": f"models/llm/{name}/config.json", "model_type": cfg["model_type"],
                        "params": n, "method": method, "published": pub, "published_source": src}
        print(f"{name:14s} {method:8s} {n:>15,d} {'= published' if pub else ''}")
    doc = {"made_by": "tests/llm/meta_params.py (torch %s, meta device, families.py)" % torch.__version__,
           "note": "params: sum(p.numel()) of the family built at the config's size on the meta device "
                   "(method meta), or the layout's terms (method formula, families.py lacking the family)",
           "models": models}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
