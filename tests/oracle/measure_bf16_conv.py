#!/usr/bin/python3
"""Truth for oneDNN's bf16 convolution backward on the CPU (v2.6.3, the one
torch 1.13 ships), which torch.autocast("cpu", torch.bfloat16) runs: the
weight gradient of jit_avx512_core_bf16_convolution_bwd_weights_t books
transposed copies of the input and of the output gradient and a per-thread
fp32 reduction of the weights (init_conf / init_scratchpad of
jit_avx512_core_bf16_conv_kernel.cpp). Six small stacks, each with a layer
before the convolution under test so that its input gradient runs too
(but for the first-layer one), ending in an average pool and a Linear so
that the loss is a cross-entropy over classes. Measured at batches 1 and 8
with tests/oracle/measure_memory.py's method (train_sgd_amp_bf16: forward
and loss under autocast; train_sgd for the fp32 reference;
torch.set_num_threads(2)); exported with torch.onnx (opset 17, training
export, dynamic batch) as graph-only files. The figures depend on the
CPU's ISA: they were measured on an avx512_core_bf16 machine without AMX
(the one memest's --runtime cpu models). Checked by
tests/test_native_conv.py (case bf16).

Usage (repo root): /usr/bin/python3 tests/oracle/measure_bf16_conv.py [name,...]
Writes models/onnx/bf16_conv/<name>.onnx and golden/truth/bf16_conv/<name>.json.
"""
import torch.nn as nn

from measure_direct_conv import head
from measure_native_conv import F32, measure_stacks


MODELS = {
    # ResNet's first stage: 3x3, 64 channels at 56x56 (the 2-d harness)
    "bf_3x3": (lambda: nn.Sequential(nn.Conv2d(16, 64, 1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1, bias=False),
                                     *head(64)),
               [("input", (16, 56, 56), F32)]),
    # the first layer: 3 input channels, 7x7 stride 2 (is_1stconv: no
    # transposed input, spatial blocking of the output gradient at 112 rows)
    "bf_first": (lambda: nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.ReLU(), *head(64)),
                 [("input", (3, 224, 224), F32)]),
    # a downsampling 1x1 with stride 2
    "bf_1x1s2": (lambda: nn.Sequential(nn.Conv2d(16, 64, 1), nn.ReLU(), nn.Conv2d(64, 128, 1, stride=2, bias=False),
                                       *head(128)),
                 [("input", (16, 56, 56), F32)]),
    # 256 channels at 14x14 with a bias (the full-spatial harness: ic >= 128)
    "bf_deep": (lambda: nn.Sequential(nn.Conv2d(32, 256, 1), nn.ReLU(), nn.Conv2d(256, 256, 3, padding=1),
                                      *head(256)),
                [("input", (32, 14, 14), F32)]),
    # a strided 3x3 with channels that are not a multiple of 16
    "bf_odd": (lambda: nn.Sequential(nn.Conv2d(8, 24, 1), nn.ReLU(), nn.Conv2d(24, 40, 3, stride=2, padding=1),
                                     *head(40)),
               [("input", (8, 28, 28), F32)]),
    # padding by reflection and replication, on autocast's CPU fp32 list
    # (torch 1.13 autocast_mode.cpp: reflection_pad1d/2d, replication_pad1d/2d/3d),
    # so each casts its bf16 input up and the next convolution casts back;
    # both keep their (fp32) input for backward
    "bf_pad": (lambda: nn.Sequential(nn.Conv2d(16, 64, 1), nn.ReLU(), nn.ReflectionPad2d(1), nn.Conv2d(64, 64, 3),
                                     nn.ReLU(), nn.ReplicationPad2d(1), nn.Conv2d(64, 64, 3, bias=False), *head(64)),
               [("input", (16, 56, 56), F32)]),
}
if __name__ == "__main__":
    import sys
    # optional: comma-separated names (default: every stack)
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(MODELS)
    measure_stacks({n: MODELS[n] for n in names}, "bf16_conv", modes=("train_sgd", "train_sgd_amp_bf16"))
