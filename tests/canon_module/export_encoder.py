"""Small exports for the fused nn.TransformerEncoderLayer note
(tests/test_issue10_module.py case encoder_note).

Run as:  /usr/bin/python3 tests/canon_module/export_encoder.py
Writes graph-only ONNX files (tests/zoo/zoo_common.make_graph_only) to
models/onnx/module/. Debian's python3-torch 1.13; weights random (seed 0).

  enc_fast_eval    nn.TransformerEncoder of two batch_first GELU layers,
                   eval export (constant folding): PyTorch runs each layer
                   as torch._transformer_encoder_layer_fwd under no_grad
  enc_fast_train   the same, training export without folding
  enc_seqfirst     batch_first=False: no fast path
  dec_layer        nn.TransformerDecoderLayer (batch_first): no fast path
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from zoo_common import export_graph_only  # noqa: E402


class Enc(nn.Module):
    def __init__(self, batch_first=True):
        super().__init__()
        layer = nn.TransformerEncoderLayer(64, 4, 128, activation="gelu", batch_first=batch_first)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


class Dec(nn.Module):
    def __init__(self):
        super().__init__()
        self.dec = nn.TransformerDecoderLayer(64, 4, 128, batch_first=True)

    def forward(self, x):
        return self.dec(x, x)


MODELS = {
    "enc_fast_eval": (lambda: Enc(True), False),
    "enc_fast_train": (lambda: Enc(True), True),
    "enc_seqfirst": (lambda: Enc(False), False),
    "dec_layer": (Dec, False),
}


def main():
    out = os.path.join(ROOT, "models", "onnx", "module")
    os.makedirs(out, exist_ok=True)
    for name, (make, train) in MODELS.items():
        torch.manual_seed(0)
        export_graph_only(make().train(train), torch.randn(2, 16, 64), os.path.join(out, name + ".onnx"), train)
        print(name, "exported")


if __name__ == "__main__":
    main()
