#!/usr/bin/python3
"""Truth for nn.MultiheadAttention's reshapes (F.multi_head_attention_forward,
torch 1.13): q, k, v and the output go through .contiguous().view(), a copy
of every strided tensor, which at batch 1 includes the [L, 1, E] chunks of
the packed in-projection that a reshape() could have viewed; torch.onnx
writes both as Reshape. Two small stacks, LayerNorm -> MultiheadAttention
(batch_first, packed; and kdim/vdim given, unpacked) -> mean over positions
-> Linear, measured at batches 1 and 8 with tests/oracle/measure_memory.py's
method (infer_nograd, infer_grad, train_sgd; torch.set_num_threads(2));
exported with torch.onnx (opset 17, training export, dynamic batch) as
graph-only files. Checked by tests/test_native_conv.py (case mha). Two
nn.TransformerEncoder stacks (pre-norm GELU, post-norm ReLU) add the fused
no_grad layer, torch._transformer_encoder_layer_fwd.

Usage (repo root): /usr/bin/python3 tests/oracle/measure_mha.py
Writes models/onnx/mha/<name>.onnx and golden/truth/mha/<name>.json.
"""
import torch.nn as nn

from measure_native_conv import F32, measure_stacks


class Attn(nn.Module):
    def __init__(self, packed=True):
        super().__init__()
        self.norm = nn.LayerNorm(256)
        kw = {} if packed else dict(kdim=128, vdim=128)
        self.kv = None if packed else nn.Linear(256, 128)
        self.attn = nn.MultiheadAttention(256, 8, batch_first=True, **kw)
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        h = self.norm(x)
        kv = h if self.kv is None else self.kv(h)
        o, _ = self.attn(h, kv, kv, need_weights=False)
        return self.head(o.mean(1))


class Encoder(nn.Module):
    """nn.TransformerEncoder of two batch_first layers (PyTorch runs each
    as torch._transformer_encoder_layer_fwd under no_grad in eval)."""
    def __init__(self, norm_first, activation):
        super().__init__()
        layer = nn.TransformerEncoderLayer(128, 4, 384, activation=activation, batch_first=True, norm_first=norm_first)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.enc(x).mean(1))


MODELS = {
    "mha_packed": (lambda: Attn(True), [("input", (128, 256), F32)]),
    "mha_unpacked": (lambda: Attn(False), [("input", (128, 256), F32)]),
    "enc_prenorm": (lambda: Encoder(True, "gelu"), [("input", (96, 128), F32)]),
    "enc_postnorm": (lambda: Encoder(False, "relu"), [("input", (96, 128), F32)]),
}
if __name__ == "__main__":
    measure_stacks(MODELS, "mha")
