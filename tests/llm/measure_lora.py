#!/usr/bin/python3
"""Memory truth for fine-tuning a language model: tests/llm/families.py's
Llama (the llama_small config) trained on CPU, measured with
tests/oracle/measure_memory.py's method (its measure(): the profiler's
allocation events, baseline + running peak), Adam steps 1 and 2.

Usage: nice -n 10 /usr/bin/python3 tests/llm/measure_lora.py [--model llama_small] [--only full,lora]
           [--cases name,...] [--out golden/truth/lora]

Writes golden/truth/lora/<model>.json (llama_small; llama_small_bf16 for
the casts around bf16 adapters' inputs and outputs). Each case is one model built
fresh (torch.manual_seed(0), weights N(0, 0.02)), ids, labels uniform in
[0, vocab) (seed 1), S = 256 tokens, batch 1 and 4, the config's torch_dtype, eager attention:
  forward   HF's training forward (transformers v4.44 LlamaForCausalLM with
            labels and use_cache=False): no cache; logits.float();
            shift_logits = logits[..., :-1, :].contiguous(); shift_labels =
            labels[..., 1:].contiguous(); CrossEntropyLoss on
            shift_logits.view(-1, V), shift_labels.view(-1)
  step      as HF's Trainer: loss = forward (the logits die with the forward);
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True);
            torch.optim.Adam(lr=1e-3) over the parameters that require grad
  lora      PEFT 0.12's lora.Linear (peft/tuners/lora/layer.py) written out
            (peft is not in Debian): result = base_layer(x);
            x = x.to(lora_A.weight.dtype); result = result +
            lora_B(lora_A(lora_dropout(x))) * scaling; result.to(result
            dtype). lora_A nn.Linear(in, r), lora_B nn.Linear(r, out), no
            bias, float32, dropout 0 (nn.Identity), scaling alpha / r with
            alpha = 2r; every other parameter requires_grad_(False).
            Targets q_proj,v_proj or all-linear (every Linear but lm_head).
            Ranks 8 and 64. The _drop cases: lora_dropout = nn.Dropout(0.1)
            (train mode) on the fp32 x, one per adapted Linear (its own mask
            and dropped copy), rank 8.
  dora      PEFT 0.12's use_dora=True written out (Linear.forward: x =
            dropout(x); result = result + lora_magnitude_vector(x, ...);
            dora.py DoraLinearLayer.forward): lora_result = lora_B(lora_A(x));
            x_eye = torch.eye(in, dtype=x.dtype); lora_weight =
            lora_B(lora_A(x_eye)).T; weight = base weight .to(x.dtype);
            weight_norm = linalg.norm(weight + scaling *
            lora_weight.detach(), dim=1).detach(); mag_norm_scale =
            (magnitude / weight_norm).view(1, -1); result_dora =
            (mag_norm_scale - 1) * F.linear(x, weight) + mag_norm_scale *
            lora_result * scaling. magnitude: an fp32 [out] parameter,
            trained, initialised to the row norms of weight + scaling * B @ A
            (_update_layer). Rank 8, q_proj,v_proj, no checkpointing.
  full      no adapters, every parameter trained (the reference for the
            training forward alone)
  ckpt      each decoder layer through torch.utils.checkpoint
            .checkpoint(layer, ..., use_reentrant=True) (HF's
            gradient_checkpointing_enable default in v4.44); with LoRA the
            embedding's output gets requires_grad_(True) as HF's
            enable_input_require_grads hook does under PEFT.
Baseline: parameters, the inv_freq buffer, ids, position ids, the 4-d
causal mask, labels, and for step 2 Adam's state.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import families  # noqa: E402
import measure_memory as mm  # noqa: E402

torch.set_num_threads(1)

S = 256
BATCHES = (1, 4)
HOW = "tests/llm/measure_lora.py: " + " ".join(" ".join(__doc__.split("\n\n")[2:4]).split())
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class NoCache:
    """use_cache=False: LlamaAttention skips past_key_value.update."""

    def update(self, k, v, idx, cache_position):
        return k, v


class LoraLinear(nn.Module):
    """peft.tuners.lora.layer.Linear (0.12), one adapter, not merged."""

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__()
        self.base_layer = base
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.lora_A = nn.Linear(base.in_features, r, bias=False, dtype=torch.float32)
        self.lora_B = nn.Linear(r, base.out_features, bias=False, dtype=torch.float32)
        nn.init.zeros_(self.lora_B.weight)
        self.scaling = alpha / r

    def forward(self, x):
        result = self.base_layer(x)
        torch_result_dtype = result.dtype
        x = x.to(self.lora_A.weight.dtype)
        result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
        result = result.to(torch_result_dtype)
        return result


class DoraLinear(LoraLinear):
    """peft.tuners.lora.layer.Linear with use_dora=True (0.12): the
    magnitude vector's module is dora.py's DoraLinearLayer."""

    def __init__(self, base, r, alpha, dropout=0.0):
        super().__init__(base, r, alpha, dropout)
        with torch.no_grad():
            w = base.weight.float()
            lora_weight = self.lora_B.weight @ self.lora_A.weight
            norm = torch.linalg.norm(w + self.scaling * lora_weight, dim=1).to(w.dtype)
        self.magnitude = nn.Parameter(norm, requires_grad=True)

    def forward(self, x):
        result = self.base_layer(x)
        torch_result_dtype = result.dtype
        x = x.to(self.lora_A.weight.dtype)
        x = self.lora_dropout(x)
        lora_result = self.lora_B(self.lora_A(x))
        x_eye = torch.eye(self.lora_A.weight.shape[1], dtype=x.dtype)
        lora_weight = self.lora_B(self.lora_A(x_eye)).T
        magnitude = self.magnitude
        weight = self.base_layer.weight
        weight = weight.to(x.dtype)
        w = weight + self.scaling * lora_weight.detach()
        weight_norm = torch.linalg.norm(w, dim=1).to(w.dtype)
        weight_norm = weight_norm.detach()
        mag_norm_scale = (magnitude / weight_norm).view(1, -1)
        result_dora = (mag_norm_scale - 1) * (F.linear(x, weight)) + mag_norm_scale * lora_result * self.scaling
        result = result + result_dora
        result = result.to(torch_result_dtype)
        return result


def add_lora(model, r, targets, dropout=0.0, kind=None):
    kind = kind or LoraLinear

    for p in model.parameters():
        p.requires_grad_(False)
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name in targets:
                base = getattr(parent, name, None)
                if isinstance(base, nn.Linear):
                    setattr(parent, name, kind(base, r, 2 * r, dropout))


def forward_loss(model, ids, pos, mask, labels, ckpt, hook):
    """LlamaForCausalLM.forward (v4.44) with labels, use_cache=False."""
    m = model.model
    cache = NoCache()
    hidden_states = m.embed_tokens(ids)
    if hook:
        hidden_states.requires_grad_(True)  # enable_input_require_grads
    position_embeddings = m.rotary_emb(hidden_states, pos)
    for layer in m.layers:
        if ckpt:
            hidden_states = checkpoint(layer, hidden_states, mask, position_embeddings, cache, None, use_reentrant=True)
        else:
            hidden_states = layer(hidden_states, mask, position_embeddings, cache, None)
    hidden_states = m.norm(hidden_states)
    logits = model.lm_head(hidden_states)
    logits = logits.float()
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    shift_logits = shift_logits.view(-1, logits.shape[-1])
    shift_labels = shift_labels.view(-1)
    return F.cross_entropy(shift_logits, shift_labels)


def run(cfg, case, batch):
    c = families.resolve(cfg)
    torch.manual_seed(0)
    model = families.build(cfg).train()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    if case["r"]:
        add_lora(model, case["r"], ALL_LINEAR if case["targets"] == "all-linear" else case["targets"].split(","),
                 case.get("dropout", 0.0), DoraLinear if case.get("dora") else None)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-3)
    torch.manual_seed(1)
    ids = torch.randint(0, c["vocab_size"], (batch, S))
    labels = torch.randint(0, c["vocab_size"], (batch, S))
    pos = torch.arange(0, S)[None]
    mask = families.causal_mask(batch, S, 0, S, c["dtype"])
    xs = [ids, pos, mask, labels]
    ckpt, hook = case["checkpoint"], case["checkpoint"] and bool(case["r"])
    steps = {}
    for step in (1, 2):
        def fn():
            with mm.Phase("forward"):
                loss = forward_loss(model, ids, pos, mask, labels, ckpt, hook)
            with mm.Phase("backward"):
                loss.backward()
            with mm.Phase("optimizer_step"):
                opt.step()
            with mm.Phase("zero_grad"):
                opt.zero_grad(set_to_none=True)

        base = mm.baseline_list(model, opt, xs, None)
        r, _ = mm.measure(fn, base)
        r = mm.clean(r)
        keep = ("baseline", "peak", "peak_relative", "end", "counter_check")
        steps["step%d" % step] = {k: r[k] for k in keep if k in r}
        mm.release()
    steps["trainable_params"] = sum(p.numel() for p in params)
    steps["total_params"] = sum(p.numel() for p in model.parameters())
    return steps


def cases(only):
    out = []
    for ck in (False, True):
        if "full" in only:
            out.append({"name": "full" + ("_ckpt" if ck else ""), "r": 0, "targets": "", "checkpoint": ck})
        if "lora" in only:
            for r in (8, 64):
                for t in ("q_proj,v_proj", "all-linear"):
                    tn = "qv" if t == "q_proj,v_proj" else "all"
                    out.append({"name": "lora_r%d_%s%s" % (r, tn, "_ckpt" if ck else ""), "r": r, "alpha": 2 * r,
                                "targets": t, "checkpoint": ck})
            for t in ("q_proj,v_proj", "all-linear"):
                tn = "qv" if t == "q_proj,v_proj" else "all"
                out.append({"name": "lora_r8_%s_drop%s" % (tn, "_ckpt" if ck else ""), "r": 8, "alpha": 16,
                            "targets": t, "dropout": 0.1, "checkpoint": ck})
            if not ck:
                out.append({"name": "dora_r8_qv", "r": 8, "alpha": 16, "targets": "q_proj,v_proj", "dora": True,
                            "checkpoint": False})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama_small")
    ap.add_argument("--only", default="full,lora")
    ap.add_argument("--cases", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "golden", "truth", "lora"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(ROOT, "golden", "truth", "llm", a.model + ".config.json")) as f:
        cfg = json.load(f)
    dest = os.path.join(a.out, a.model + ".json")
    res = {}
    if a.cases and os.path.exists(dest):  # one case re-measured: the others kept
        with open(dest) as f:
            res = json.load(f)["results"]
    for case in cases(a.only.split(",")):
        if a.cases and case["name"] not in a.cases.split(","):
            continue
        for b in BATCHES:
            r = run(cfg, case, b)
            if str(b) == str(BATCHES[0]):
                res[case["name"]] = {"case": case}
            res[case["name"]][str(b)] = r
            print(case["name"], b, r["step1"]["peak"], r["step2"]["peak"], r["trainable_params"], flush=True)
    doc = {
        "model": a.model, "config": "../llm/" + a.model + ".config.json", "torch": torch.__version__, "seq": S,
        "optimizer": "adam", "how": HOW +
        " Measured with tests/oracle/measure_memory.py's measure(): " + mm.HOW,
        "results": res,
    }
    with open(dest, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
