"""Small exports for the eval_export_dropout note
(tests/test_issue10_module.py case dropout_note).

Run as:  /usr/bin/python3 tests/canon_module/export_dropout.py
Writes graph-only ONNX files (tests/zoo/zoo_common.make_graph_only) to
models/onnx/module/. Debian's python3-torch 1.13; seed 0.

A SqueezeNet-like stack: Conv2d -> ReLU -> Dropout(0.5) -> 1x1 Conv2d ->
average pool, no BatchNorm and no Linear, so constant folding makes no
weight of its own.

  drop_dedup_eval     biases zero (SqueezeNet's final conv is so
                      initialized): the eval export stores the equal
                      biases once, its only eval mark; --train must say the
                      export left Dropout out
  drop_train          the same model, training export: Dropout is in the file
  drop_distinct_eval  random biases, eval export: nothing marks it as one
                      (the rule's stated limit), no note
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from zoo_common import export_graph_only  # noqa: E402


def stack(zero_bias):
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Dropout(0.5), nn.Conv2d(16, 16, 1),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
    if zero_bias:
        for c in (m[0], m[3]):
            nn.init.zeros_(c.bias)
    return m


MODELS = {"drop_dedup_eval": (True, False), "drop_train": (True, True), "drop_distinct_eval": (False, False)}


def main():
    out = os.path.join(ROOT, "models", "onnx", "module")
    os.makedirs(out, exist_ok=True)
    for name, (zero, train) in MODELS.items():
        torch.manual_seed(0)
        export_graph_only(stack(zero).train(train), torch.randn(2, 3, 32, 32), os.path.join(out, name + ".onnx"), train)
        print(name, "exported")


if __name__ == "__main__":
    main()
