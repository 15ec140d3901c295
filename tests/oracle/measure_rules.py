#!/usr/bin/python3
"""Truth for rules of memest's timeline, one toy model each, exported at
opset 14 as training exports with a dynamic batch (models/onnx/backward)
and measured with tests/oracle/measure_memory.py's method (every mode,
batches 1 and 8, torch 1.13 CPU) into golden/truth/backward;
tests/test_memory.py checks memest against them (0.5 %).

bw_shared: a module called again with the same parameters (ALBERT's
shared layer, a universal transformer's step: `for _ in range(3):
x = self.block(x)`), three rules of memest's at once:

- TorchScript's export names the block's own ops "/block", "/block_1",
  "/block_2", but its children's "/block/fc1", "/block/fc1_1", ...
  (naming.cpp: a scope is the path of attribute names made unique as a
  whole), so each child call belongs to the block call it ran in, not to
  the first (src/load/onnx.c repoint_calls);
- the block's result is the next call's argument, held until that call
  returns, not until the forward does (src/canon/chunk.c stored_results);
- each parameter's gradients meet in the engine's InputBuffer as old + new
  after the node that made the new one released its saved tensors
  (engine.cpp evaluate_function; src/memory.c, a shared parameter).

The model is a Linear 64 -> 64 on [B, 128, 64] tokens, one block (Linear
64 -> 256, ReLU bound to a name, Linear back, the residual add bound to a
name, LayerNorm) called three times, the mean over tokens and a Linear head
to 10 classes.

bw_factory: tensors a forward makes (torch.zeros_like, torch.eye,
torch.arange) are allocated each time it runs (an empty() the op then
fills), though memest can compute their contents from the shapes alone;
torch.onnx writes them as ConstantOfShape, EyeLike and Range of a computed
shape (memest: ME_OPF_FACTORY, memory.c me_node_skipped; torch.eye's
ConstantOfShape and EyeLike are one tensor, canon/fuse.c). And
torch.maximum keeps both operands and makes grad / 2 and two masks in
backward. The model is a Linear 64 -> 512 on [B, 128, 64] tokens, a ReLU
written as torch.maximum(h, torch.zeros_like(h)), h @ torch.eye(512) of
h's last dim, the token positions torch.arange(128) added as floats, the
mean over tokens and a Linear head to 10 classes.

Usage (repo root): /usr/bin/python3 tests/oracle/measure_rules.py export|measure [names]
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_strided_grad import F32, ROOT, export_toys, mm  # noqa: E402

ONNX_OUT = os.path.join(ROOT, "models", "onnx", "backward")
TRUTH_OUT = os.path.join(ROOT, "golden", "truth", "backward")


class Block(nn.Module):
    """y = x + fc2(relu(fc1(x))), LayerNorm(y); its temporaries bound to names."""
    def __init__(self, d=64, ff=256):
        super().__init__()
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        y = x + self.fc2(h)
        return self.norm(y)


class Shared(nn.Module):
    """A Linear, one Block called three times, the token mean and a head."""
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 64)
        self.block = Block()
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        x = self.inp(x)
        for _ in range(3):
            x = self.block(x)
        return self.head(x.mean(1))


class Factory(nn.Module):
    """A Linear, three tensors made in the forward, the token mean, a head."""
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 512)
        self.head = nn.Linear(512, 10)

    def forward(self, x):
        h = self.up(x)
        h = torch.maximum(h, torch.zeros_like(h))
        h = h @ torch.eye(h.shape[-1])
        h = h + torch.arange(h.shape[1], dtype=h.dtype)[:, None]
        return self.head(h.mean(1))


MODELS = {"bw_shared": (Shared, [("input", (128, 64), F32)]),
          "bw_factory": (Factory, [("input", (128, 64), F32)])}


def export(names):
    export_toys(MODELS, ONNX_OUT, names, opset=14)


if __name__ == "__main__":
    mm.toy_main(MODELS, ONNX_OUT, TRUTH_OUT, export, ("infer_nograd", "infer_grad", "train_sgd", "train_adam"))
