#!/usr/bin/python3
"""Truth for the memory of three ops torchvision-style models export that
memest once did not know: GridSample (F.grid_sample), LpNormalization
(F.normalize) and RoiAlign (torchvision.ops.roi_align, one box per image
built in the forward). Each sits in a small stack (Conv2d, the op, adaptive
average pool, Linear: a cross-entropy loss over 10 classes), measured at
batch 1 and 8 with tests/oracle/measure_memory.py's method (infer_nograd,
infer_grad, train_sgd; torch.set_num_threads(2)). The grid is an input
that needs no gradient (sampling points computed without autograd).

torch.onnx writes F.normalize as ReduceL2, Clip, Expand and Div, never as
LpNormalization: the file's chain from the Conv's output to the Div's is
replaced by the one LpNormalization node (axis 1, p 2) it computes.
Files are graph-only (tests/zoo/zoo_common.py make_graph_only).

Usage (repo root): /usr/bin/python3 tests/oracle/measure_robust_ops.py
Writes models/onnx/robust/mem_<name>.onnx and golden/truth/robust_ops/<name>.json;
checked by tests/test_robust.py (case ops_memory).
"""
import os
import sys

import onnx
import onnx.helper as oh
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
import measure_memory as mm  # noqa: E402
from zoo_common import make_graph_only  # noqa: E402

F32 = torch.float32


class Stack(nn.Module):
    """Conv2d(16, 32, 3), the op, adaptive average pool, Linear(32, 10)."""
    def __init__(self, op):
        super().__init__()
        self.op = op
        self.conv = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x, *rest):
        return self.fc(self.pool(self.op(self.conv(x), *rest)).flatten(1))


def warp():
    return Stack(lambda h, grid: F.grid_sample(h, grid, align_corners=False))


def norm():
    return Stack(lambda h: F.normalize(h, p=2.0, dim=1))


def roi(h):
    """torchvision.ops.roi_align of one box per image (its batch index, then
    fixed corners), 14 x 14 bins, 2 x 2 samples each."""
    b = h.shape[0]
    boxes = torch.cat([torch.arange(b, dtype=h.dtype).unsqueeze(1),
                       torch.tensor([[2.0, 3.0, 40.0, 30.0]], dtype=h.dtype).expand(b, 4)], 1)
    return torchvision.ops.roi_align(h, boxes, (14, 14), 1.0, 2)


def pool():
    return Stack(roi)


MODELS = {
    "grid_sample": (warp, [("input", (16, 48, 48), F32), ("grid", (40, 40, 2), F32)], 16),
    "lp_normalization": (norm, [("input", (16, 48, 48), F32)], 13),
    "roi_align": (pool, [("input", (16, 48, 48), F32)], 16),
}
ONNX_OUT = os.path.join(ROOT, "models", "onnx", "robust")
TRUTH_OUT = os.path.join(ROOT, "golden", "truth", "robust_ops")


def as_lp_normalization(path):
    """Conv -> (ReduceL2 .. Div) -> rest becomes Conv -> LpNormalization -> rest."""
    m = onnx.load(path)
    nodes = list(m.graph.node)
    conv = next(n for n in nodes if n.op_type == "Conv")
    div = next(n for n in nodes if n.op_type == "Div")
    i0, i1 = nodes.index(conv), nodes.index(div)
    lp = oh.make_node("LpNormalization", [conv.output[0]], [div.output[0]], name="/LpNormalization", axis=1, p=2)
    del m.graph.node[:]
    m.graph.node.extend(nodes[:i0 + 1] + [lp] + nodes[i1 + 1:])
    onnx.save(m, path)


if __name__ == "__main__":
    torch.set_num_threads(2)
    os.makedirs(ONNX_OUT, exist_ok=True)
    os.makedirs(TRUTH_OUT, exist_ok=True)
    for name, (ctor, spec, opset) in MODELS.items():
        torch.manual_seed(0)
        m = ctor().train()
        args = tuple(torch.randn(2, *shape) for _, shape, _ in spec)
        names = [n for n, _, _ in spec]
        tmp = os.path.join(ONNX_OUT, "mem_" + name + ".full.onnx")
        torch.onnx.export(m, args, tmp, opset_version=opset, input_names=names, output_names=["output"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={**{n: {0: "batch"} for n in names}, "output": {0: "batch"}})
        if name == "lp_normalization":
            as_lp_normalization(tmp)
        make_graph_only(tmp, os.path.join(ONNX_OUT, "mem_" + name + ".onnx"))
        os.remove(tmp)
        mm.LOCAL[name] = (ctor, spec)
    summary = []
    for name in MODELS:
        mm.run_model(name, [1, 8], TRUTH_OUT, summary, modes_filter=("infer_nograd", "infer_grad", "train_sgd"))
