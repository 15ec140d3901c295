"""Small exports for issue 10's module items (tests/test_issue10_module.py):
tied LM heads, written as a PyTorch user would export them, and their truth.

Run as:  /usr/bin/python3 tests/canon_module/export.py
Writes graph-only ONNX files (tests/zoo/zoo_common.make_graph_only) to
models/onnx/module/ and golden/truth/module/tied.json with each model's
PyTorch parameter count, sum(p.numel() for p in model.parameters()) (a tied
Parameter once). Debian's python3-torch 1.13; weights random (seed 0).

  gpt_tied_eval      GPT-2-style decoder (tests/zoo/models.py GPTLike, small),
                     head torch.matmul(x, wte.weight.t()); eval export with
                     constant folding (torch.onnx's default): the head's
                     weight becomes a folded [hidden, vocab] copy
  gpt_hf_tied_eval   the same body with an nn.Linear head whose weight is
                     wte.weight (Hugging Face's tie_weights), eval export
  gpt_hf_tied_train  the nn.Linear tied head, training export without
                     folding: the file reads wte.weight twice, no copy
  gpt_untied_train   an nn.Linear head with its own weight, training export
                     without folding: two parameters, never merged
"""
import json
import os
import sys
import tempfile

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from models import GPTLike  # noqa: E402
from zoo_common import count_params, dump_json, make_graph_only  # noqa: E402

SMALL = dict(vocab=1000, hidden=64, layers=2, heads=4, ctx=64)


class HFHead(nn.Module):
    """GPTLike's body with an nn.Linear LM head, tied or not."""
    def __init__(self, tied):
        super().__init__()
        self.body = GPTLike(**SMALL)
        self.lm_head = nn.Linear(SMALL["hidden"], SMALL["vocab"], bias=False)
        if tied:
            self.lm_head.weight = self.body.wte.weight

    def forward(self, input_ids):
        b = self.body
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long).unsqueeze(0)
        x = b.drop(b.wte(input_ids) + b.wpe(pos))
        for blk in b.blocks:
            x = blk(x)
        return self.lm_head(b.ln_f(x))


MODELS = {
    "gpt_tied_eval": (lambda: GPTLike(**SMALL), True),
    "gpt_hf_tied_eval": (lambda: HFHead(True), True),
    "gpt_hf_tied_train": (lambda: HFHead(True), False),
    "gpt_untied_train": (lambda: HFHead(False), False),
}


def main():
    out = os.path.join(ROOT, "models", "onnx", "module")
    os.makedirs(out, exist_ok=True)
    truth = {"how": "tests/canon_module/export.py with torch %s: params = sum(p.numel() for p in "
                    "model.parameters()), a tied Parameter once" % torch.__version__, "models": {}}
    for name, (make, eval_export) in MODELS.items():
        torch.manual_seed(0)
        model = make()
        # as after training: no two LayerNorm weights equal (torch.onnx's eval
        # export merges equal-valued initializers, fresh ones(64) included)
        with torch.no_grad():
            for mod in model.modules():
                if isinstance(mod, nn.LayerNorm):
                    mod.weight.normal_()
                    mod.bias.normal_()
        ids = torch.randint(0, SMALL["vocab"], (1, 16))
        kw = dict(training=torch.onnx.TrainingMode.EVAL, do_constant_folding=True) if eval_export else \
            dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        model.eval() if eval_export else model.train()
        with tempfile.TemporaryDirectory() as tmp:
            full = os.path.join(tmp, name + ".onnx")
            torch.onnx.export(model, (ids,), full, input_names=["input_ids"], output_names=["logits"],
                              dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}},
                              opset_version=17, **kw)
            make_graph_only(full, os.path.join(out, name + ".onnx"))
        truth["models"][name] = {"params": count_params(model), "input": [1, 16],
                                 "export": "eval, do_constant_folding=True" if eval_export
                                 else "training=TRAINING, do_constant_folding=False"}
        print(name, truth["models"][name])
    os.makedirs(os.path.join(ROOT, "golden", "truth", "module"), exist_ok=True)
    with open(os.path.join(ROOT, "golden", "truth", "module", "tied.json"), "w") as f:
        f.write(dump_json(truth))


if __name__ == "__main__":
    main()
