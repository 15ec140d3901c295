#!/usr/bin/python3
"""Fixed-size exports (torch.onnx.export's default: no dynamic_axes) for
issue 10's re-binding tests, written graph-only into models/onnx/static/,
with a dynamic-axes export of the same module beside each as the reference
memest must agree with, and truth.json: PyTorch's own parameter count and
output shapes at the sizes the tests re-bind to.

  resnet18_static     torchvision resnet18, batch 1, 3x224x224 (Flatten)
  tiny_enc_static     token encoder [1, 64]: Reshapes [1, 64, 4, 16] and
                      [1, 64, 64] bake batch and sequence (provable)
  tiny_pos_static     the same with a learned position table sliced to the
                      sequence (pos[:, :T]): the Slice end bakes T into a
                      constant the input does not reach (not provable)
  tiny_up_static      conv net with interpolate(size=(56, 56)): Resize sizes
                      fix the spatial size (not provable)

Run: /usr/bin/python3 tests/bind/export_static.py (torch 1.13, CPU)."""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from zoo_common import make_graph_only  # noqa: E402

OUT = os.path.join(ROOT, "models", "onnx", "static")


class TinyEnc(nn.Module):
    def __init__(self, vocab=1000, hidden=64, heads=4, layers=2, max_pos=0):
        super().__init__()
        self.heads, self.hd = heads, hidden // heads
        self.emb = nn.Embedding(vocab, hidden)
        self.pos = nn.Parameter(torch.randn(1, max_pos, hidden)) if max_pos else None
        self.qkv = nn.ModuleList([nn.Linear(hidden, 3 * hidden) for _ in range(layers)])
        self.proj = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(layers)])
        self.norm = nn.ModuleList([nn.LayerNorm(hidden) for _ in range(layers)])
        self.head = nn.Linear(hidden, 10)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids)
        if self.pos is not None:
            x = x + self.pos[:, :t]
        for qkv, proj, norm in zip(self.qkv, self.proj, self.norm):
            q, k, v = qkv(x).chunk(3, dim=-1)
            q, k, v = (y.reshape(b, t, self.heads, self.hd).transpose(1, 2) for y in (q, k, v))
            a = torch.softmax(q @ k.transpose(-1, -2) / self.hd ** 0.5, dim=-1)
            x = norm(x + proj((a @ v).transpose(1, 2).reshape(b, t, self.heads * self.hd)))
        return self.head(x)


class TinyUp(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, stride=4, padding=1)
        self.c2 = nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x):
        return self.c2(F.interpolate(torch.relu(self.c1(x)), size=(112, 112), mode="nearest"))


def export(model, x, name, in_name, dyn_axes):
    model.eval()
    for stem, dyn in ((name + "_static", None), (name + "_dyn", dyn_axes)):
        tmp = os.path.join(OUT, stem + ".full.onnx")
        torch.onnx.export(model, x, tmp, opset_version=17, input_names=[in_name], output_names=["out"],
                          dynamic_axes=dyn, do_constant_folding=True)
        make_graph_only(tmp, os.path.join(OUT, stem + ".onnx"))
        os.remove(tmp)


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    truth = {"made_by": "tests/bind/export_static.py (torch %s, CPU, random weights seeded 0)" % torch.__version__,
             "models": {}}
    cases = {
        "resnet18": (torchvision.models.resnet18(weights=None), torch.randn(1, 3, 224, 224), "input",
                     {"input": {0: "batch"}, "out": {0: "batch"}}, [(8, 3, 224, 224), (2, 3, 320, 256)]),
        "tiny_enc": (TinyEnc(), torch.randint(0, 1000, (1, 64)), "ids",
                     {"ids": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}}, [(8, 64), (8, 96)]),
        "tiny_pos": (TinyEnc(max_pos=256), torch.randint(0, 1000, (1, 64)), "ids",
                     {"ids": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}}, [(8, 64), (8, 96)]),
        "tiny_up": (TinyUp(), torch.randn(1, 3, 224, 224), "x",
                    {"x": {0: "batch", 2: "h", 3: "w"}, "out": {0: "batch"}}, [(8, 3, 224, 224), (1, 3, 256, 256)]),
    }
    for name, (model, x, in_name, dyn, sizes) in cases.items():
        export(model, x, name, in_name, dyn)
        shapes = {}
        with torch.no_grad():
            for s in sizes:
                xi = torch.randint(0, 1000, s) if x.dtype == torch.int64 else torch.randn(*s)
                shapes["x".join(map(str, s))] = list(model(xi).shape)
        truth["models"][name] = {"params": sum(p.numel() for p in model.parameters()),
                                 "export_input": list(x.shape), "output_shapes": shapes}
    with open(os.path.join(OUT, "truth.json"), "w") as fh:
        json.dump(truth, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
