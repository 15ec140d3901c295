#!/usr/bin/python3
"""Small models, one exporter idiom each, exported by torch.onnx at opsets
11, 13, 14 and 17, with PyTorch's truth (issue 10, canonicalization).

Usage: /usr/bin/python3 tests/canon/export_canon.py [--models a,b] [--no-measure]

Writes models/onnx/canon/<model>_op<N>.onnx (graph only: weights above the
zoo's size threshold external, the data file deleted) and
golden/truth/canon/<model>.json: parameters and output shape of the
PyTorch module, and its CPU memory peaks measured with
tests/oracle/measure_memory.py's method (its run_model, imported, not
edited): infer_nograd, infer_grad, train_sgd and train_adam (steps 1 and
2), batch 1 and 8. The truth is the module's: every opset's export must
predict it. Each model is x[B,64,128] -> Linear(128,256) -> IDIOM ->
flatten -> Linear(16384,10) (8192 after GLU, which halves the last dim),
so the idiom's tensors dominate activations.
Weights random, seeded; nothing downloaded.
"""
import argparse
import json
import os
import sys
import warnings

import torch
import torch.nn as nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import measure_memory as mm  # noqa: E402
from zoo_common import make_graph_only  # noqa: E402

torch.set_num_threads(2)
warnings.filterwarnings("ignore")
ONNX_DIR = os.path.join(ROOT, "models", "onnx", "canon")
TRUTH_DIR = os.path.join(ROOT, "golden", "truth", "canon")
OPSETS = (11, 13, 14, 17)
MODES = ["infer_nograd", "infer_grad", "train_sgd", "train_adam"]
SEQ, DIN, DH = 64, 128, 256


class LogSoftmax1(nn.Module):
    """log_softmax over a non-last axis: Transpose-wrapped below opset 13."""
    def forward(self, x):
        return torch.log_softmax(x, dim=1)


IDIOMS = {
    "layernorm": lambda: nn.LayerNorm(DH),
    "layernorm2d": lambda: nn.LayerNorm([SEQ, DH]),
    "gelu": lambda: nn.GELU(),
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
    "silu": lambda: nn.SiLU(),
    "mish": lambda: nn.Mish(),
    "hardswish": lambda: nn.Hardswish(),
    "logsoftmax1": lambda: LogSoftmax1(),
    "glu": lambda: nn.GLU(dim=-1),  # halves the last dim: fc2 reads SEQ * DH / 2
}


class Net(nn.Module):
    def __init__(self, idiom):
        super().__init__()
        self.fc1 = nn.Linear(DIN, DH)
        self.act = IDIOMS[idiom]()
        self.fc2 = nn.Linear(SEQ * DH // (2 if idiom == "glu" else 1), 10)

    def forward(self, x):
        return self.fc2(torch.flatten(self.act(self.fc1(x)), 1))


def ctor(idiom):
    def make():
        return Net(idiom)
    make.__name__ = "Net_" + idiom
    return make


SPEC = [("input", (SEQ, DIN), torch.float32)]


def export(name, opset):
    torch.manual_seed(0)
    m = Net(name).eval()
    full = os.path.join(ONNX_DIR, "%s_op%d_full.onnx" % (name, opset))
    dst = os.path.join(ONNX_DIR, "%s_op%d.onnx" % (name, opset))
    torch.onnx.export(m, (torch.randn(2, SEQ, DIN),), full, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=opset,
                      do_constant_folding=False)
    make_graph_only(full, dst)
    os.remove(full)
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(IDIOMS))
    ap.add_argument("--no-measure", action="store_true")
    a = ap.parse_args()
    os.makedirs(ONNX_DIR, exist_ok=True)
    summary = []
    for name in a.models.split(","):
        for opset in OPSETS:
            print("wrote", export(name, opset), flush=True)
        if a.no_measure:
            continue
        mm.LOCAL[name] = (ctor(name), SPEC)
        doc = mm.run_model(name, [1, 8], TRUTH_DIR, summary, modes_filter=MODES)
        doc["source"] = "tests/canon/export_canon.py:Net(%r)" % name
        doc["exports"] = ["models/onnx/canon/%s_op%d.onnx" % (name, o) for o in OPSETS]
        with open(os.path.join(TRUTH_DIR, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(name, "params", doc["params"], flush=True)


if __name__ == "__main__":
    main()
