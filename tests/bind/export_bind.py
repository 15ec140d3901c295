#!/usr/bin/python3
"""Minimal PyTorch modules that export shapes computed in the graph
(issue 10), written graph-only into models/onnx/bind/ with truth.json
(PyTorch's parameter count and output shape at the sizes the tests use).

  unet_up_train     a diffusion-style up block, training export
                    (TrainingMode.TRAINING, do_constant_folding=False,
                    dynamic batch): F.interpolate(scale_factor=2) and
                    interpolate(size=skip.shape[-2:]), whose Resize sizes
                    are computed from Shape slices by a Concat
  gqa_repeat        grouped-query attention with torch.repeat_interleave of
                    the keys and values over the heads, dynamic batch: the
                    exporter expands the repeats (a constant) and splits
                    them per chunk (Expand, Split, Where over constants),
                    then Expands each chunk to that computed shape. (With a
                    dynamic sequence too, torch 1.13 writes a Reshape
                    [0, -1, 0, 8] that puts the sequence where the heads
                    go: that graph is wrong by the ONNX spec, and memest
                    stops at the MatMul it breaks; not committed.)

Run: /usr/bin/python3 tests/bind/export_bind.py (torch 1.13, CPU)."""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from zoo_common import make_graph_only  # noqa: E402

OUT = os.path.join(ROOT, "models", "onnx", "bind")


class UpBlock(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.inp = nn.Conv2d(3, c, 3, padding=1)
        self.norm = nn.GroupNorm(4, c)
        self.down = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.mid = nn.Conv2d(c, c, 3, padding=1)
        self.out = nn.Conv2d(3 * c, c, 3, padding=1)

    def forward(self, x):
        skip = F.silu(self.norm(self.inp(x)))
        h = self.mid(F.silu(self.down(skip)))
        a = F.interpolate(h, scale_factor=2.0, mode="nearest")
        b = F.interpolate(h, size=skip.shape[-2:], mode="nearest")
        return self.out(torch.cat([a, b, skip], dim=1))


class GQA(nn.Module):
    def __init__(self, hidden=64, heads=8, kv_heads=2):
        super().__init__()
        self.h, self.kv, self.d = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv, self.d).transpose(1, 2)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        a = torch.softmax(q @ k.transpose(-1, -2) / self.d ** 0.5, dim=-1)
        return self.o((a @ v).transpose(1, 2).reshape(b, t, self.h * self.d))


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    truth = {"made_by": "tests/bind/export_bind.py (torch %s, CPU, random weights seeded 0)" % torch.__version__,
             "models": {}}
    cases = {
        "unet_up_train": (UpBlock(), torch.randn(2, 3, 32, 32), {"x": {0: "batch"}, "out": {0: "batch"}},
                          torch.onnx.TrainingMode.TRAINING, [(4, 3, 32, 32)]),
        "gqa_repeat": (GQA(), torch.randn(2, 16, 64), {"x": {0: "batch"}, "out": {0: "batch"}},
                       torch.onnx.TrainingMode.EVAL, [(4, 16, 64)]),
    }
    for name, (model, x, dyn, mode, sizes) in cases.items():
        model.train(mode == torch.onnx.TrainingMode.TRAINING)
        tmp = os.path.join(OUT, name + ".full.onnx")
        torch.onnx.export(model, x, tmp, opset_version=17, input_names=["x"], output_names=["out"], dynamic_axes=dyn,
                          training=mode, do_constant_folding=mode != torch.onnx.TrainingMode.TRAINING)
        make_graph_only(tmp, os.path.join(OUT, name + ".onnx"))
        os.remove(tmp)
        with torch.no_grad():
            shapes = {"x".join(map(str, s)): list(model(torch.randn(*s)).shape) for s in sizes}
        truth["models"][name] = {"params": sum(p.numel() for p in model.parameters()), "output_shapes": shapes}
    with open(os.path.join(OUT, "truth.json"), "w") as fh:
        json.dump(truth, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
