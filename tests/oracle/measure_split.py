#!/usr/bin/python3
"""Truth for one rule of memest's backward: a torch.chunk (or split) that
the export writes as one Slice a piece (symbolic_opset11
prim_constant_chunk, opset 11 and later) ran in PyTorch as one op, whose
backward SplitBackward0 cats the pieces' gradients into one tensor of the
input's size; pieces sliced in Python are SliceBackward0s, each making an
input-sized gradient (zeros, the piece copied in) that the engine adds up.

Each model is h = Linear(x) on [B, 128, 64] tokens, [B, 128, 768], split
into pieces combined elementwise (a GLU: a * sigmoid(b); three pieces:
a * sigmoid(b) + tanh(c)), a Linear back to 64 features, the mean over
tokens and a Linear head to 10 classes: the pieces' gradients meet in the
backward of the split. bw_chunk2 and bw_chunk3 call h.chunk(2 or 3, -1);
bw_slices takes h[..., :384] and h[..., 384:] in Python; bw_ln_piece
is the chunk(2) GLU with a LayerNorm(384) on its second piece, a strided
input that layer_norm_cpu and its backward copy first. Exported at
opset 14 as training exports with a dynamic batch (models/onnx/backward),
measured with tests/oracle/measure_memory.py's method (every mode, batches
1 and 8, torch 1.13 CPU) into golden/truth/backward. tests/test_memory.py
checks memest against them (bw_* models, 0.5 %).

Usage (repo root): /usr/bin/python3 tests/oracle/measure_split.py export|measure [names]
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the toy scripts' shared setup: the repo root, the oracle, the exporter
from measure_strided_grad import F32, ROOT, export_toys, mm  # noqa: E402

ONNX_OUT = os.path.join(ROOT, "models", "onnx", "backward")
TRUTH_OUT = os.path.join(ROOT, "golden", "truth", "backward")
SEQ = [("input", (128, 64), F32)]


class Pieces(nn.Module):
    """Linear 64 -> 768, split three ways ('chunk2', 'chunk3', 'slices'),
    combined elementwise, Linear back to 64, mean over tokens, head."""
    def __init__(self, how):
        super().__init__()
        self.how = how
        self.up = nn.Linear(64, 768)
        self.down = nn.Linear(768 // (3 if how == "chunk3" else 2), 64)
        self.head = nn.Linear(64, 10)
        if how == "ln_piece":
            self.norm = nn.LayerNorm(384)

    def forward(self, x):
        h = self.up(x)
        if self.how == "ln_piece":
            a, b = h.chunk(2, -1)
            y = a * self.norm(b)
        elif self.how == "chunk3":
            a, b, c = h.chunk(3, -1)
            y = a * torch.sigmoid(b) + torch.tanh(c)
        elif self.how == "chunk2":
            a, b = h.chunk(2, -1)
            y = a * torch.sigmoid(b)
        else:
            y = h[..., :384] * torch.sigmoid(h[..., 384:])
        return self.head(self.down(y).mean(1))


MODELS = {
    "bw_chunk2": (lambda: Pieces("chunk2"), SEQ),
    "bw_chunk3": (lambda: Pieces("chunk3"), SEQ),
    "bw_slices": (lambda: Pieces("slices"), SEQ),
    "bw_ln_piece": (lambda: Pieces("ln_piece"), SEQ),
}


def export(names):
    export_toys(MODELS, ONNX_OUT, names, opset=14)


if __name__ == "__main__":
    mm.toy_main(MODELS, ONNX_OUT, TRUTH_OUT, export, ("infer_nograd", "infer_grad", "train_sgd", "train_adam"))
