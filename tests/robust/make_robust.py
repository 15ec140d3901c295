#!/usr/bin/env python3
"""Writes the ONNX files of tests/test_robust.py into models/onnx/robust/
and their truth, from PyTorch, into models/onnx/robust/truth.json: files
written in ways memest once refused or miscounted (weights as graph
inputs, deduplicated initializers, shape arithmetic through reductions,
weights read inside If/Loop bodies, torchvision's GridSample and RoiAlign,
LpNormalization). Debian's torch 1.13 and torchvision 0.14:

    /usr/bin/python3 tests/robust/make_robust.py [OUT_DIR]

Truth per file: "params" (sum of p.numel() over model.parameters()),
"buffers" (running statistics, no num_batches_tracked: torch.onnx never
writes it), "outputs" (the shapes PyTorch's forward returns for the
exported inputs) and "output_names" (the graph outputs they are, in the
file), all measured here, never taken from memest.
"""
import json
import os
import sys
import warnings

import onnx
import onnx.helper as oh
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "onnx", "robust")
os.makedirs(OUT, exist_ok=True)
TRAIN, EVAL = torch.onnx.TrainingMode.TRAINING, torch.onnx.TrainingMode.EVAL
truth = {}


def counts(m):
    bufs = sum(b.numel() for n, b in m.named_buffers() if not n.endswith("num_batches_tracked"))
    return sum(p.numel() for p in m.parameters()), bufs


def shapes(out):
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [list(o.shape) for o in out]


def export(name, m, args, train=False, script=False, **kw):
    torch.manual_seed(0)
    m.train(train)
    with torch.no_grad():
        outs = shapes(m(*args))
    target = torch.jit.script(m) if script else m
    kw.setdefault("opset_version", 13)
    torch.onnx.export(target, args, os.path.join(OUT, name + ".onnx"), training=TRAIN if train else EVAL, **kw)
    p, b = counts(m)
    names = [o.name for o in onnx.load(os.path.join(OUT, name + ".onnx")).graph.output]
    truth[name] = {"params": p, "buffers": b, "outputs": outs, "output_names": names}


# 1. export_params=False: every parameter and buffer a graph input
class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.ln = nn.LayerNorm(16)
        self.conv = nn.Conv1d(8, 8, 3)
        self.bn = nn.BatchNorm1d(8)

    def forward(self, ids):
        return self.bn(self.conv(self.ln(self.emb(ids))))


class Mlp3d(nn.Module):
    """nn.Linear on 3-d input: MatMul of a folded transpose plus Add."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.fc(x))


class AB(nn.Module):
    """Two data inputs multiplied: neither is a weight."""
    def forward(self, a, b):
        return a @ b


torch.manual_seed(0)
export("noparams_tiny_train", Tiny(), (torch.zeros(2, 8, dtype=torch.long),), train=True, export_params=False)
export("noparams_tiny_eval", Tiny(), (torch.zeros(2, 8, dtype=torch.long),), export_params=False)
export("noparams_mlp3d_eval", Mlp3d(), (torch.zeros(2, 5, 16),), export_params=False)
export("noparams_ab", AB(), (torch.zeros(3, 4), torch.zeros(4, 5)), export_params=False)
# a weight input read only through an Identity (how torch.onnx passes a
# deduplicated tensor on): nn.Linear(3, 4, bias=False)'s weight
lin = nn.Linear(3, 4, bias=False)
graph = oh.make_graph([oh.make_node("Identity", ["fc.weight"], ["onnx::Gemm_5"], name="/Identity"),
                       oh.make_node("Gemm", ["x", "onnx::Gemm_5"], ["y"], name="/fc/Gemm", transB=1)], "identity",
                      [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3]),
                       oh.make_tensor_value_info("fc.weight", onnx.TensorProto.FLOAT, [4, 3])],
                      [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])])
onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), os.path.join(OUT, "noparams_identity.onnx"))
truth["noparams_identity"] = {"params": counts(lin)[0], "buffers": 0, "outputs": [list(lin(torch.zeros(2, 3)).shape)], "output_names": ["y"]}
r18 = torchvision.models.resnet18()
export("noparams_resnet18_train", r18, (torch.zeros(1, 3, 64, 64),), train=True, export_params=False)
export("noparams_resnet18_eval", r18, (torch.zeros(1, 3, 64, 64),), export_params=False)


# 2. deduplicated initializers
class Twice(nn.Module):
    """One nn.Linear and one Conv2d, each called twice: one Parameter each."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x, y):
        return self.fc(self.fc(x)), self.conv(self.conv(y))


class Same(nn.Module):
    """Two layers of equal weights: two Parameters each, equal values."""
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 16)
        self.c1, self.c2 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
        with torch.no_grad():
            self.fc2.weight.copy_(self.fc1.weight)
            self.fc2.bias.copy_(self.fc1.bias)
            self.c2.weight.copy_(self.c1.weight)
            self.c2.bias.copy_(self.c1.bias)

    def forward(self, x, y):
        return self.fc2(self.fc1(x)), self.c2(self.c1(y))


for name, cls in (("twice", Twice), ("same", Same)):
    for mode in ("eval", "train"):
        for xs in ((2, 16), (2, 3, 16)):
            export(f"dedup_{name}_{mode}_{len(xs)}d", cls(), (torch.zeros(*xs), torch.zeros(1, 4, 8, 8)), train=mode == "train")

# freshly built BatchNorms in an eval export: weight = running_var (ones),
# bias = running_mean (zeros), and the second layer's equal to the first's
export("dedup_bn_eval", nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 8), nn.BatchNorm1d(8)), (torch.zeros(2, 8),))

# one initializer read only through two Identity nodes (an nn.Linear called
# twice, its folded weight deduplicated): one tensor, counted once
lin = nn.Linear(3, 3, bias=False)
w = oh.make_tensor("onnx::Gemm_7", onnx.TensorProto.FLOAT, [3, 3], lin.weight.detach().flatten().tolist())
graph = oh.make_graph([oh.make_node("Identity", ["onnx::Gemm_7"], ["onnx::Gemm_8"], name="/Identity"),
                       oh.make_node("Identity", ["onnx::Gemm_7"], ["onnx::Gemm_9"], name="/Identity_1"),
                       oh.make_node("Gemm", ["x", "onnx::Gemm_8"], ["h"], name="/fc/Gemm", transB=1),
                       oh.make_node("Gemm", ["h", "onnx::Gemm_9"], ["y"], name="/fc_1/Gemm", transB=1)], "identity_only",
                      [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
                      [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])], [w])
onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), os.path.join(OUT, "dedup_identity_only.onnx"))
truth["dedup_identity_only"] = {"params": counts(lin)[0], "buffers": 0, "outputs": [[2, 3]], "output_names": ["y"]}

# 3. sizes computed by reductions
class DetTransform(nn.Module):
    """torchvision's detection transform (normalize, resize the shorter side
    to min_size: ReduceMin/ReduceMax of the image's sizes) and a conv."""
    def __init__(self):
        super().__init__()
        self.t = torchvision.models.detection.transform.GeneralizedRCNNTransform(48, 80, [0.5] * 3, [0.25] * 3)
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.conv(self.t([x[0]])[0].tensors)


class SizeReduce(nn.Module):
    """Sizes from ReduceProd, ReduceSum, ReduceMax and ReduceMin of the
    inputs' shapes (dynamic axes: Shape, not constants)."""
    def forward(self, x, y):
        s, t = torch._shape_as_tensor(x), torch._shape_as_tensor(y)
        return x.reshape(s[0], torch.prod(s[1:])), torch.zeros(torch.sum(t), torch.max(t) - torch.min(t))


export("reduce_det_transform", DetTransform(), (torch.rand(1, 3, 30, 40),), opset_version=13)
export("reduce_sizes", SizeReduce(), (torch.rand(2, 3, 4), torch.rand(5, 2)), input_names=["x", "y"],
       dynamic_axes={"x": {0: "b", 1: "c"}, "y": {0: "p"}})

# a product of sizes past int64: refused, naming the node
big = oh.make_tensor("sizes", onnx.TensorProto.INT64, [2], [1 << 40, 1 << 40])
graph = oh.make_graph([oh.make_node("ReduceProd", ["sizes"], ["n"], name="/numel/ReduceProd", keepdims=1),
                       oh.make_node("Reshape", ["x", "n"], ["y"], name="/Reshape")], "overflow",
                      [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
                      [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], [big])
onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), os.path.join(OUT, "reduce_overflow.onnx"))


# 4. weights read only inside If / Loop bodies
class Branch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)
        self.c = nn.Conv2d(3, 3, 1)

    def forward(self, x, y):
        if bool(x.sum() > 0):
            z = self.a(x)
        else:
            z = self.b(x)
        return z, self.c(y)


class Repeat(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x, n: int):
        for _ in range(n):
            x = self.a(x)
        return x


class Nested(nn.Module):
    """An If inside a Loop's body: the weights two bodies deep."""
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x, n: int):
        for i in range(n):
            if i % 2 == 0:
                x = self.a(x)
            else:
                x = self.b(x)
        return x


export("subgraph_if", Branch(), (torch.ones(2, 8), torch.ones(1, 3, 4, 4)), script=True)
export("subgraph_loop", Repeat(), (torch.ones(2, 8), 3), script=True)
export("subgraph_nested", Nested(), (torch.ones(2, 8), 3), script=True)


class BranchOnly(nn.Module):
    """Weights read only inside the If's branches, and written without data
    (export_params=False): graph inputs that only the bodies read."""
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        if bool(x.sum() > 0):
            return self.a(x)
        return self.b(x)


export("subgraph_if_noparams", BranchOnly(), (torch.ones(2, 8),), script=True, export_params=False)


# 5. ops torchvision models export
class Warp(nn.Module):
    """A spatial transformer's sampling: F.grid_sample (GridSample, opset 16)."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x, grid):
        return F.grid_sample(self.conv(x), grid, align_corners=False)


class Pool(nn.Module):
    """torchvision.ops.roi_align on boxes (RoiAlign)."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x, boxes):
        return torchvision.ops.roi_align(self.conv(x), boxes, (5, 4), 0.5, 2)


export("op_grid_sample", Warp(), (torch.rand(2, 3, 16, 16), torch.rand(2, 6, 7, 2) * 2 - 1), opset_version=16)
boxes = torch.tensor([[0, 1.0, 1.0, 9.0, 12.0], [1, 0.0, 2.0, 15.0, 7.0], [0, 3.0, 3.0, 6.0, 6.0]])
export("op_roi_align", Pool(), (torch.rand(2, 3, 16, 16), boxes), opset_version=16)

# torch.onnx writes no LpNormalization (F.normalize becomes ReduceL2 and
# Div): the node is written by hand, its truth is F.normalize's result.
x = torch.rand(2, 5, 3)
graph = oh.make_graph([oh.make_node("LpNormalization", ["x"], ["y"], name="/norm/LpNormalization", axis=1, p=2)], "lpnorm",
                      [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 5, 3])],
                      [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), os.path.join(OUT, "op_lp_normalization.onnx"))
truth["op_lp_normalization"] = {"params": 0, "buffers": 0, "outputs": [list(F.normalize(x, p=2.0, dim=1).shape)], "output_names": ["y"]}

# the same ops with inputs that do not fit: refused, naming node and input
F32, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
for name, node, ins in (
        ("bad_grid_sample", oh.make_node("GridSample", ["x", "grid"], ["y"], name="/warp/GridSample"),
         [("x", F32, [2, 3, 8, 8]), ("grid", F32, [2, 5, 7, 3])]),
        ("bad_roi_align", oh.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], name="/pool/RoiAlign"),
         [("x", F32, [2, 3, 8, 8]), ("rois", F32, [4, 5]), ("idx", I64, [4])]),
        ("bad_lp_normalization", oh.make_node("LpNormalization", ["x"], ["y"], name="/norm/LpNormalization", p=3),
         [("x", F32, [2, 3])])):
    graph = oh.make_graph([node], name, [oh.make_tensor_value_info(n, t, d) for n, t, d in ins], [oh.make_tensor_value_info("y", F32, None)])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 16)]), os.path.join(OUT, name + ".onnx"))

with open(os.path.join(OUT, "truth.json"), "w") as f:
    json.dump({"torch": torch.__version__, "torchvision": torchvision.__version__, "models": truth}, f, indent=1, sort_keys=True)
    f.write("\n")
print("wrote %d models to %s" % (len(truth), OUT))
