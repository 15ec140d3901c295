#!/usr/bin/python3
"""Memory truth for GPT-2's training forward (issue 15): tests/llm/
families.py's GPT-2 modules (the gpt2_small config) run as HF v4.44's
GPT2LMHeadModel.forward runs them in train() with labels and
use_cache=False, written out here because families.py's forward keeps the
inference presents: drop (embd_pdrop) after wte + wpe; per block ln_1,
c_attn, split heads, the eager _attn (matmul, / sqrt(hd), where with the
causal buffer, + the [B,1,1,T] mask, softmax, attn_dropout, matmul with
v), merge heads, c_proj, resid_dropout, the residual, ln_2, c_fc, GELU,
c_proj, the MLP's dropout, the residual; ln_f, lm_head, the shifted
logits' .contiguous() and cross-entropy. Adam (lr 1e-3) steps 1 and 2,
zero_grad(set_to_none=True), S = 256, batch 1 and 4, fp32, CPU, measured
with tests/oracle/measure_memory.py's method (baseline + running peak of
the profiler's allocation events). Cells:
  p0        dropout probabilities 0
  p01       attn/resid/embd_pdrop 0.1 (GPT2Config's defaults)
  p01_ckpt  p01 with each block through torch.utils.checkpoint
            (use_reentrant=True, GPT2Model's gradient checkpointing)
  p01_sel   p01 with the core attention (scores .. matmul with v) through
            a reentrant checkpoint (Megatron's selective recompute)
Usage: nice /usr/bin/python3 tests/llm/measure_gpt_train.py
Writes golden/truth/gpt_train/gpt2_small.json.
"""
import json, os, sys
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "llm")); sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import torch, torch.nn.functional as F
import families, measure_memory as mm
from torch.utils.checkpoint import checkpoint
torch.set_num_threads(2)
S = 256

def attn_fwd(a, x, mask, p_attn, p_resid, ckpt_core):
    q, k, v = a.c_attn(x).split(a.split_size, dim=2)
    q = a._split_heads(q, a.num_heads, a.head_dim); k = a._split_heads(k, a.num_heads, a.head_dim); v = a._split_heads(v, a.num_heads, a.head_dim)
    def core(q, k, v):
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype)
        ql, kl = q.size(-2), k.size(-2)
        cm = a.bias[:, :, kl - ql:kl, :kl]
        mv = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
        w = torch.where(cm, w, mv)
        w = w + mask
        w = F.softmax(w, dim=-1)
        w = F.dropout(w, p_attn, True)
        return torch.matmul(w, v)
    o = checkpoint(core, q, k, v, use_reentrant=True) if ckpt_core else core(q, k, v)
    o = a._merge_heads(o, a.num_heads, a.head_dim)
    return F.dropout(a.c_proj(o), p_resid, True)

def block_fwd(blk, h, mask, p, ckpt_core):
    r = h
    a = attn_fwd(blk.attn, blk.ln_1(h), mask, p, p, ckpt_core)
    h = a + r
    r = h
    m = blk.mlp.c_proj(blk.mlp.act(blk.mlp.c_fc(blk.ln_2(h))))
    m = F.dropout(m, p, True)
    return r + m

def forward_loss(model, ids, pos, mask, labels, p, ckpt, core):
    t = model.transformer
    h = t.wte(ids) + t.wpe(pos)
    h = F.dropout(h, p, True)
    for blk in t.h:
        if ckpt: h = checkpoint(block_fwd, blk, h, mask, p, False, use_reentrant=True)
        else: h = block_fwd(blk, h, mask, p, core)
    h = t.ln_f(h)
    logits = model.lm_head(h)
    sl = logits[..., :-1, :].contiguous(); lab = labels[..., 1:].contiguous()
    return F.cross_entropy(sl.view(-1, sl.size(-1)), lab.view(-1))

def run(cfg, batch, p, ckpt, core):
    c = families.resolve(cfg)
    torch.manual_seed(0)
    model = families.build(cfg).train()
    with torch.no_grad():
        for q in model.parameters(): q.normal_(0, 0.02)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    torch.manual_seed(1)
    ids = torch.randint(0, c["vocab_size"], (batch, S)); labels = torch.randint(0, c["vocab_size"], (batch, S))
    pos = torch.arange(0, S)[None]
    mask = families.gpt2_mask(batch, S, c["dtype"])
    out = {}
    for step in (1, 2):
        def fn():
            loss = forward_loss(model, ids, pos, mask, labels, p, ckpt, core)
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        base = mm.baseline_list(model, opt, [ids, pos, mask, labels], None)
        r, _ = mm.measure(fn, base); r = mm.clean(r)
        out["step%d" % step] = r["peak"]
        mm.release()
    return out

cfg = json.load(open(os.path.join(ROOT, "golden", "truth", "llm", "gpt2_small.config.json")))
res = {}
for name, p, ckpt, core in (("p0", 0.0, False, False), ("p01", 0.1, False, False), ("p01_ckpt", 0.1, True, False), ("p01_sel", 0.1, False, True)):
    for b in (1, 4):
        res[f"{name}_b{b}"] = run(cfg, b, p, ckpt, core); print(name, b, res[f"{name}_b{b}"], flush=True)
res["how"] = ("tests/llm/measure_gpt_train.py: torch %s, CPU, tests/oracle's method; peak bytes of Adam steps 1 and 2"
              % torch.__version__)
json.dump(res, open(os.path.join(ROOT, "golden", "truth", "gpt_train", "gpt2_small.json"), "w"), indent=1)
