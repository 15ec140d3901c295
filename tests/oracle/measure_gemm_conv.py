#!/usr/bin/python3
"""Truth for the CPU convolutions whose weight gradient oneDNN (v2.6.3, the
one torch 1.13 ships) computes with its gemm implementation: the jit
kernels' init_conf refuse a kernel wider than 14 (a ViT's 16x16 or 32x32
patch embedding) or a 3-d kernel whose front padding reaches past the
input's depth (R3D's last stage at 1 frame). Three small stacks, each with
a layer before the convolution so that its input gradient runs too,
measured at batches 1, 2 and 8 with tests/oracle/measure_memory.py's method
(infer_nograd, infer_grad, train_sgd; torch.set_num_threads(2)); exported
with torch.onnx (opset 17, training export, dynamic batch) as graph-only
files. The scratchpad is per thread: gc_patch32 and gc_conv3d are measured
again with torch.set_num_threads(1) (golden/truth/gemm_conv/threads1/,
memest --cpu-threads 1). Checked by tests/test_native_conv.py (case gemm).

Usage (repo root): /usr/bin/python3 tests/oracle/measure_gemm_conv.py
Writes models/onnx/gemm_conv/<name>.onnx and golden/truth/gemm_conv/[threads1/]<name>.json.
"""
import os
import sys

import torch
import torch.nn as nn

from measure_native_conv import F32, export_stacks, mm
MODELS = {
    # ViT-B/32's patch embedding behind a 1x1 layer
    "gc_patch32": (lambda: nn.Sequential(nn.Conv2d(3, 8, 1), nn.ReLU(), nn.Conv2d(8, 384, 32, stride=32)),
                   [("input", (3, 224, 224), F32)]),
    # a 16x16 patch embedding of a wider input
    "gc_patch16": (lambda: nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU(), nn.Conv2d(32, 256, 16, stride=16)),
                   [("input", (16, 128, 128), F32)]),
    # R3D's last stage: 3x3x3 kernels, padding 1, one frame
    "gc_conv3d": (lambda: nn.Sequential(nn.Conv3d(64, 256, 1), nn.ReLU(), nn.Conv3d(256, 256, 3, padding=1)),
                  [("input", (64, 1, 4, 4), F32)]),
}
if __name__ == "__main__":
    TRUTH_OUT = export_stacks(MODELS, "gemm_conv")
    summary = []
    if "--threads1-only" not in sys.argv:
        for name in MODELS:
            mm.run_model(name, [1, 2, 8], TRUTH_OUT, summary, modes_filter=("infer_nograd", "infer_grad", "train_sgd"))
    torch.set_num_threads(1)
    os.makedirs(os.path.join(TRUTH_OUT, "threads1"), exist_ok=True)
    for name in ("gc_patch32", "gc_conv3d"):
        mm.run_model(name, [2, 8], os.path.join(TRUTH_OUT, "threads1"), summary, modes_filter=("train_sgd",))
