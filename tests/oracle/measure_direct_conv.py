#!/usr/bin/python3
"""Truth for oneDNN's backward of the CPU convolutions it runs on its
blocked jit kernels (v2.6.3, the one torch 1.13 ships): backward-data and
backward-weights one after the other, each with its own reorders, the
weight gradient made blocked then copied plain, and the direct kernel's
per-thread weight-reduction scratchpad where balance() splits the
minibatch or the output rows; and autograd summing a tensor's gradients
only after the node that made the second one has returned (a branch point
read by two convolutions). Four small stacks, each with a layer before
the convolution under test so that its input gradient runs too, ending in
an average pool and (but for dc_1x1) a Linear so that the loss is a
cross-entropy over classes. Measured at batches 1 and 8 with
tests/oracle/measure_memory.py's method (infer_nograd, infer_grad,
train_sgd; torch.set_num_threads(2)); exported with torch.onnx (opset 17,
training export, dynamic batch) as graph-only files. Checked by
tests/test_native_conv.py (case direct).

Usage (repo root): /usr/bin/python3 tests/oracle/measure_direct_conv.py
Writes models/onnx/direct_conv/<name>.onnx and golden/truth/direct_conv/<name>.json.
"""
import torch
import torch.nn as nn

from measure_native_conv import F32, measure_stacks


class Branch(nn.Module):
    """h read by a 1x1 and a 3x3 convolution, concatenated (Inception's
    branches): h's two gradients meet in autograd's InputBuffer."""
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(32, 256, 1)
        self.a = nn.Conv2d(256, 64, 1)
        self.b = nn.Conv2d(256, 64, 3, padding=1)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))

    def forward(self, x):
        h = torch.relu(self.stem(x))
        return self.head(torch.cat([self.a(h), self.b(h)], 1))


def head(c, classes=10):
    return [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]


MODELS = {
    # SqueezeNet's last convolution: 1x1, 1000 outputs (padded to 1008)
    "dc_1x1": (lambda: nn.Sequential(nn.Conv2d(16, 512, 1), nn.ReLU(), nn.Conv2d(512, 1000, 1), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten()),
               [("input", (16, 13, 13), F32)]),
    # channels that are not a multiple of 16 (24 in, 40 out)
    "dc_odd": (lambda: nn.Sequential(nn.Conv2d(8, 24, 1), nn.ReLU(), nn.Conv2d(24, 40, 3, padding=1), *head(40)),
               [("input", (8, 28, 28), F32)]),
    # 48 output rows: the 2-d harness splits them over both threads at batch 1
    "dc_rows": (lambda: nn.Sequential(nn.Conv2d(16, 16, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), *head(32)),
                [("input", (16, 48, 48), F32)]),
    "dc_branch": (Branch, [("input", (32, 16, 16), F32)]),
}
if __name__ == "__main__":
    measure_stacks(MODELS, "direct_conv")
