#!/usr/bin/python3
"""Memory truth for the optimizers of issue 15 that torch 1.13 lacks or runs
another way, measured on CPU with tests/oracle/measure_memory.py's method
(its measure(): the profiler's allocation events, baseline + running peak).

Usage: nice -n 10 /usr/bin/python3 tests/llm/measure_optim.py [--models a,b] [--out golden/truth/optim]

Writes golden/truth/optim/<model>.json. Models: resmlp100 (tests/oracle's
100 residual Linear(512,512) blocks, input [B,512], cross-entropy over 512
classes) at batch 64, and llama_small (tests/llm/measure_llm.py's config,
tests/llm/families.py's decoder, fp32, a prompt of S=256 tokens, HF's
training forward: tests/llm/measure_lora.py's forward_loss, i.e.
LlamaForCausalLM.forward v4.44 with labels and use_cache=False, the shifted
logits' cross-entropy) at batch 1 and 4. Modes, two training steps each (forward, loss,
backward, opt.step(), opt.zero_grad(set_to_none=True); each step profiled on
its own with its own baseline):
  train_adafactor     Adafactor below: HF transformers v4.44
                      optimization.py Adafactor.step with its defaults
                      (lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0,
                      decay_rate=-0.8, beta1=None, weight_decay=0.0,
                      scale_parameter=True, relative_step=True,
                      warmup_init=False), written out line for line
                      (transformers is not in Debian)
  train_adam          torch.optim.Adam(lr=1e-3) (torch 1.13: the
                      single-tensor path)
  train_adam_foreach  torch.optim.Adam(lr=1e-3, foreach=True)
                      (_multi_tensor_adam)
"state8bit_bytes": the bytes of a block-wise 8-bit AdamW state in
bitsandbytes' layout (Optimizer2State.init_state with optim_bits=8,
min_8bit_size=4096, block_wise=True, blocksize 256: a parameter of fewer
than 4096 elements keeps fp32 state1/state2, a larger one uint8
state1/state2 and fp32 absmax1/absmax2 of ceil(numel/256); the two qmaps of
create_dynamic_map, 256 fp32 each, once) made with torch.zeros for every
parameter and summed as storage bytes (bitsandbytes is not in Debian and
needs CUDA: state bytes only, no step). "state32_paged_bytes" /
"state32_resident_bytes": PagedAdamW's fp32 state1/state2 split by
get_state_buffer's rule (1e5 elements or more: F.get_paged).
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import families  # noqa: E402
import measure_llm  # noqa: E402
import measure_lora  # noqa: E402
import measure_memory as mm  # noqa: E402

torch.set_num_threads(1)


class Adafactor(torch.optim.Optimizer):
    """HF transformers v4.44 Adafactor (optimization.py), the same calls in
    the same order: what the allocator sees is what it sees under HF."""

    def __init__(self, params, lr=None, eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta1=None,
                 weight_decay=0.0, scale_parameter=True, relative_step=True, warmup_init=False):
        defaults = {"lr": lr, "eps": eps, "clip_threshold": clip_threshold, "decay_rate": decay_rate, "beta1": beta1,
                    "weight_decay": weight_decay, "scale_parameter": scale_parameter, "relative_step": relative_step,
                    "warmup_init": warmup_init}
        super().__init__(params, defaults)

    @staticmethod
    def _get_lr(param_group, param_state):
        rel_step_sz = param_group["lr"]
        if param_group["relative_step"]:
            min_step = 1e-6 * param_state["step"] if param_group["warmup_init"] else 1e-2
            rel_step_sz = min(min_step, 1.0 / math.sqrt(param_state["step"]))
        param_scale = 1.0
        if param_group["scale_parameter"]:
            param_scale = max(param_group["eps"][1], param_state["RMS"])
        return param_scale * rel_step_sz

    @staticmethod
    def _get_options(param_group, param_shape):
        factored = len(param_shape) >= 2
        use_first_moment = param_group["beta1"] is not None
        return factored, use_first_moment

    @staticmethod
    def _rms(tensor):
        return tensor.norm(2) / (tensor.numel() ** 0.5)

    @staticmethod
    def _approx_sq_grad(exp_avg_sq_row, exp_avg_sq_col):
        r_factor = (exp_avg_sq_row / exp_avg_sq_row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
        c_factor = exp_avg_sq_col.unsqueeze(-2).rsqrt()
        return torch.mul(r_factor, c_factor)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.dtype in {torch.float16, torch.bfloat16}:
                    grad = grad.float()
                state = self.state[p]
                grad_shape = grad.shape
                factored, use_first_moment = self._get_options(group, grad_shape)
                if len(state) == 0:
                    state["step"] = 0
                    if use_first_moment:
                        state["exp_avg"] = torch.zeros_like(grad)
                    if factored:
                        state["exp_avg_sq_row"] = torch.zeros(grad_shape[:-1]).to(grad)
                        state["exp_avg_sq_col"] = torch.zeros(grad_shape[:-2] + grad_shape[-1:]).to(grad)
                    else:
                        state["exp_avg_sq"] = torch.zeros_like(grad)
                    state["RMS"] = 0
                else:
                    if use_first_moment:
                        state["exp_avg"] = state["exp_avg"].to(grad)
                    if factored:
                        state["exp_avg_sq_row"] = state["exp_avg_sq_row"].to(grad)
                        state["exp_avg_sq_col"] = state["exp_avg_sq_col"].to(grad)
                    else:
                        state["exp_avg_sq"] = state["exp_avg_sq"].to(grad)
                p_data_fp32 = p
                if p.dtype in {torch.float16, torch.bfloat16}:
                    p_data_fp32 = p_data_fp32.float()
                state["step"] += 1
                state["RMS"] = self._rms(p_data_fp32)
                lr = self._get_lr(group, state)
                beta2t = 1.0 - math.pow(state["step"], group["decay_rate"])
                update = (grad**2) + group["eps"][0]
                if factored:
                    exp_avg_sq_row = state["exp_avg_sq_row"]
                    exp_avg_sq_col = state["exp_avg_sq_col"]
                    exp_avg_sq_row.mul_(beta2t).add_(update.mean(dim=-1), alpha=(1.0 - beta2t))
                    exp_avg_sq_col.mul_(beta2t).add_(update.mean(dim=-2), alpha=(1.0 - beta2t))
                    update = self._approx_sq_grad(exp_avg_sq_row, exp_avg_sq_col)
                    update.mul_(grad)
                else:
                    exp_avg_sq = state["exp_avg_sq"]
                    exp_avg_sq.mul_(beta2t).add_(update, alpha=(1.0 - beta2t))
                    update = exp_avg_sq.rsqrt().mul_(grad)
                update.div_((self._rms(update) / group["clip_threshold"]).clamp_(min=1.0))
                update.mul_(lr)
                if use_first_moment:
                    exp_avg = state["exp_avg"]
                    exp_avg.mul_(group["beta1"]).add_(update, alpha=(1 - group["beta1"]))
                    update = exp_avg
                if group["weight_decay"] != 0:
                    p_data_fp32.add_(p_data_fp32, alpha=(-group["weight_decay"] * lr))
                p_data_fp32.add_(-update)
                if p.dtype in {torch.float16, torch.bfloat16}:
                    p.copy_(p_data_fp32)
        return loss


def make_opt(mode, params):
    if mode == "train_adafactor":
        return Adafactor(params)
    if mode == "train_adam":
        return torch.optim.Adam(params, lr=1e-3)
    if mode == "train_adam_foreach":
        return torch.optim.Adam(params, lr=1e-3, foreach=True)
    raise ValueError(mode)


def state8bit_bytes(params):
    """bitsandbytes Optimizer2State.init_state (optim_bits=8), as tensors."""
    ts, qmaps = [], False
    for p in params:
        n = p.numel()
        if n < 4096:
            ts += [torch.zeros_like(p, dtype=torch.float32), torch.zeros_like(p, dtype=torch.float32)]
            continue
        qmaps = True
        blocks = (n // 256) + bool(n % 256)
        ts += [torch.zeros_like(p, dtype=torch.uint8), torch.zeros_like(p, dtype=torch.uint8),
               torch.zeros((blocks,), dtype=torch.float32), torch.zeros((blocks,), dtype=torch.float32)]
    if qmaps:
        ts += [torch.zeros(256, dtype=torch.float32), torch.zeros(256, dtype=torch.float32)]
    return mm.tensors_bytes(ts)[0]


def state32_paged(params):
    """PagedAdamW: fp32 state1/state2; get_state_buffer pages numel >= 1e5."""
    paged = sum(2 * 4 * p.numel() for p in params if p.numel() >= 1e5)
    return paged, sum(2 * 4 * p.numel() for p in params) - paged


def setup(name, batch):
    """(model, inputs, target, loss(model, xs, target))"""
    torch.manual_seed(0)
    if name == "resmlp100":
        model = mm.resmlp100().train()
        torch.manual_seed(1)
        xs = [torch.randn(batch, 512)]
        target = torch.randint(0, 512, (batch,))
        return model, xs, target, lambda m, xs, t: F.cross_entropy(m(*xs), t.view(-1))
    cfg = measure_llm.MODELS[name]
    c = families.resolve(cfg)
    model = families.build(cfg).train()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    S = measure_llm.S
    torch.manual_seed(1)
    ids = torch.randint(0, c["vocab_size"], (batch, S))
    pos = torch.arange(0, S)[None]
    cpos = torch.arange(0, S)
    mask = families.causal_mask(batch, S, 0, S, c["dtype"])
    target = torch.randint(0, c["vocab_size"], (batch, S))

    def loss_fn(m, xs, target):
        return measure_lora.forward_loss(m, xs[0], xs[1], xs[2], target, False, False)
    return model, [ids, pos, mask, cpos], target, loss_fn


def run(name, mode, batch):
    model, xs, target, loss_fn = setup(name, batch)
    opt = make_opt(mode, list(model.parameters()))
    steps = {}
    for step in (1, 2):
        def fn():
            with mm.Phase("forward"):
                loss = loss_fn(model, xs, target)
            with mm.Phase("backward"):
                loss.backward()
            with mm.Phase("optimizer_step"):
                opt.step()
            with mm.Phase("zero_grad"):
                opt.zero_grad(set_to_none=True)

        r, _ = mm.measure(fn, mm.baseline_list(model, opt, xs, target))
        r = mm.clean(r)
        s = mm.summarize_tensors(model, opt, xs, target)
        keep = ("baseline", "peak", "peak_relative", "end", "counter_check", "peak_phase", "phases", "top_live_at_peak",
                "foreach_ops")
        r = {k: r[k] for k in keep if k in r}
        r["optimizer_state_bytes_end"] = s["optimizer_state_bytes"]
        steps["step%d" % step] = r
        print(name, mode, batch, step, r["peak"], r["baseline"], r["optimizer_state_bytes_end"], flush=True)
        mm.release()
    return steps


MODELS = {"resmlp100": (64,), "llama_small": (1, 4)}
MODES = {"resmlp100": ("train_adafactor", "train_adam_foreach"),
         "llama_small": ("train_adafactor", "train_adam", "train_adam_foreach")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=os.path.join(ROOT, "golden", "truth", "optim"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        res = {}
        for mode in MODES[name]:
            for b in MODELS[name]:
                res.setdefault(mode, {})[str(b)] = run(name, mode, b)
        model, _, _, _ = setup(name, 1)
        params = list(model.parameters())
        paged, resident = state32_paged(params)
        doc = {
            "model": name, "torch": torch.__version__,
            "graph": "models/resmlp100.json" if name == "resmlp100" else "golden/truth/llm/%s.config.json" % name,
            "seq": None if name == "resmlp100" else measure_llm.S,
            "params": sum(p.numel() for p in params),
            "state8bit_bytes": state8bit_bytes(params),
            "state32_paged_bytes": paged, "state32_resident_bytes": resident,
            "how": "tests/llm/measure_optim.py: " + " ".join(__doc__.split("\n\n")[1].split()) +
                   " Measured with tests/oracle/measure_memory.py's measure(): " + mm.HOW,
            "results": res,
        }
        with open(os.path.join(a.out, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
