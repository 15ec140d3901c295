#!/usr/bin/python3
"""Truth for one rule of memest's backward: CatBackward0 hands each input
grad.narrow(dim, ...), a view whose rows lie apart when a dim before the
concatenated one exceeds 1 (batch 8, not batch 1), and the backward
kernels that begin with grad_output.contiguous() copy it.

Each model is h = stem(x), op(h) and h flattened and concatenated along
dim 1, then a Linear head, so the op's output gradient is such a slice
(through Flatten's ViewBackward0, a view of it). Where the op's backward
sets the peak (the convolution, the Linear) the copy is in it (without the
rule memest was -11 % and -3 % there); elsewhere the head's backward sets
it and the model checks that the rule adds nothing there. The ops: convolution, transposed convolution,
max and average pooling, nearest and bilinear upsampling, GroupNorm,
LayerNorm and softmax (which copy), a Linear on a 3-d input (whose output
reshape in backward copies instead: the slice's rows are not the Linear's
rows) and ReLU (which does not copy). Exported at opset 17 as training
exports with a dynamic batch (models/onnx/strided), measured with
tests/oracle/measure_memory.py's method (train_sgd, train_adam; batches 1
and 8; torch 1.13 CPU) into golden/truth/strided. tests/test_memory.py
checks memest against them (sg_* models, 0.5 %).

Usage (repo root): /usr/bin/python3 tests/oracle/measure_strided_grad.py export|measure [names]
"""
import os
import sys

import torch
import torch.nn as nn

ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
import measure_memory as mm  # noqa: E402
from zoo_common import export_graph_only  # noqa: E402

ONNX_OUT = os.path.join(ROOT, "models", "onnx", "strided")
TRUTH_OUT = os.path.join(ROOT, "golden", "truth", "strided")
F32 = torch.float32


class CatFlat(nn.Module):
    """h = stem(x); cat([op(h).flatten(1), h.flatten(1)], 1), then a
    Linear to 10 classes: op's output gradient is a narrow() of the
    concatenation's gradient, strided at batch > 1."""
    def __init__(self, stem, op, feats):
        super().__init__()
        self.stem, self.op, self.head = stem, op, nn.Linear(feats, 10)

    def forward(self, x):
        h = self.stem(x)
        return self.head(torch.cat([self.op(h).flatten(1), h.flatten(1)], 1))


IMG = [("input", (16, 32, 32), F32)]  # stem: 1x1 convolution to 32 channels
SEQ = [("input", (64, 96), F32)]      # stem: Linear to 128 features
C, HW, T, D = 32, 32 * 32, 64, 128


def img(op, out_elems):
    return lambda: CatFlat(nn.Conv2d(16, C, 1), op(), out_elems + C * HW)


def seq(op, out_elems):
    return lambda: CatFlat(nn.Linear(96, D), op(), out_elems + T * D)


MODELS = {
    "sg_conv": (img(lambda: nn.Conv2d(C, 64, 3, padding=1), 64 * HW), IMG),
    "sg_convt": (img(lambda: nn.ConvTranspose2d(C, 16, 2, stride=2), 16 * 4 * HW), IMG),
    "sg_maxpool": (img(lambda: nn.MaxPool2d(2), C * HW // 4), IMG),
    "sg_avgpool": (img(lambda: nn.AvgPool2d(2), C * HW // 4), IMG),
    "sg_upsample": (img(lambda: nn.Upsample(scale_factor=2, mode="nearest"), C * 4 * HW), IMG),
    "sg_bilinear": (img(lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), C * 4 * HW), IMG),
    "sg_groupnorm": (img(lambda: nn.GroupNorm(8, C), C * HW), IMG),
    "sg_relu": (img(lambda: nn.ReLU(), C * HW), IMG),
    "sg_layernorm": (seq(lambda: nn.LayerNorm(D), T * D), SEQ),
    "sg_softmax": (seq(lambda: nn.Softmax(-1), T * D), SEQ),
    "sg_linear": (seq(lambda: nn.Linear(D, 256), T * 256), SEQ),
}


def export_toys(models, onnx_out, names, **kw):
    """The toy scripts' export: each named model, seeded, as a training
    export of a batch-2 random input (dynamic batch) into onnx_out;
    kw: export_graph_only's (opset)."""
    for name in names:
        make, spec = models[name]
        torch.manual_seed(0)
        export_graph_only(make().train(True), torch.randn(2, *spec[0][1]), os.path.join(onnx_out, name + ".onnx"), True,
                          **kw)
        print(name, "exported")


def export(names):
    export_toys(MODELS, ONNX_OUT, names)


if __name__ == "__main__":
    mm.toy_main(MODELS, ONNX_OUT, TRUTH_OUT, export, ("train_sgd", "train_adam"))
