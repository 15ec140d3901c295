#!/usr/bin/python3
"""Truth for the CPU convolutions torch 1.13 runs on its native im2col
kernels instead of oneDNN (ConvParams::use_mkldnn, Convolution.cpp: fp32,
ungrouped, batch 1, a kernel of at most 3 in one of its last two dims, at
most 20480 input elements seen 4-d). Three small stacks, each measured at
batch 1 (native: _slow_conv2d_forward, slow_conv_dilated2d, slow_conv3d)
and batch 8 (oneDNN), with tests/oracle/measure_memory.py's method
(infer_nograd, infer_grad, train_sgd; torch.set_num_threads(2)); exported
with torch.onnx (opset 17, training export, dynamic batch) as graph-only
files. Checked by tests/test_native_conv.py.

Usage (repo root): /usr/bin/python3 tests/oracle/measure_native_conv.py
Writes models/onnx/native_conv/<name>.onnx and golden/truth/native_conv/<name>.json.
"""
import os, sys
import torch, torch.nn as nn
# the truth scripts beside this one import it (their own folder is on
# sys.path when run) and get measure_memory and tests/zoo through it
ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
import measure_memory as mm  # noqa: E402
from zoo_common import export_graph_only  # noqa: E402

F32 = torch.float32
MODELS = {
    # 3x3 convolutions at 7x7 (GoogLeNet's and a ResNet's last stage)
    "nc_conv2d": (lambda: nn.Sequential(nn.Conv2d(160, 320, 3, padding=1), nn.ReLU(), nn.Conv2d(320, 64, 3, padding=1)),
                  [("input", (160, 7, 7), F32)]),
    # Conv1d (viewed 4-d) and a dilated one
    "nc_conv1d": (lambda: nn.Sequential(nn.Conv1d(64, 128, 3, padding=1), nn.ReLU(), nn.Conv1d(128, 64, 3, padding=2, dilation=2)),
                  [("input", (64, 100), F32)]),
    # Conv3d (R3D's last stage)
    "nc_conv3d": (lambda: nn.Sequential(nn.Conv3d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv3d(64, 16, 3, padding=1)),
                  [("input", (64, 2, 7, 7), F32)]),
}


def export_stacks(models, suite):
    """Each stack exported (opset 17, training export, dynamic batch) as a
    graph-only file models/onnx/<suite>/<name>.onnx and registered with
    measure_memory; returns the truth folder golden/truth/<suite>."""
    onnx_out = os.path.join(ROOT, "models", "onnx", suite)
    truth_out = os.path.join(ROOT, "golden", "truth", suite)
    torch.set_num_threads(2)
    os.makedirs(onnx_out, exist_ok=True)
    os.makedirs(truth_out, exist_ok=True)
    for name, (ctor, spec) in models.items():
        torch.manual_seed(0)
        export_graph_only(ctor().train(), torch.randn(2, *spec[0][1]), os.path.join(onnx_out, name + ".onnx"), True)
        mm.LOCAL[name] = (ctor, spec)
    return truth_out


def measure_stacks(models, suite, batches=(1, 8), modes=("infer_nograd", "infer_grad", "train_sgd")):
    """export_stacks, then each stack measured (by default infer_nograd,
    infer_grad, train_sgd; a mode outside measure_memory's MODES, such as
    train_sgd_amp_bf16, is registered for the stack) at each batch."""
    truth_out = export_stacks(models, suite)
    summary = []
    for name in models:
        mm.EXTRA_MODES[name] = tuple(m for m in modes if m not in mm.MODES)
        mm.run_model(name, list(batches), truth_out, summary, modes_filter=modes)


if __name__ == "__main__":
    measure_stacks(MODELS, "native_conv")
