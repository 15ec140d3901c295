#!/usr/bin/python3
"""Writes zoo models as torch >= 2.0's exporter spells their attention,
for tests/test_torch2_spelling.py (models/onnx/torch2/).

Debian's torch is 1.13, which has neither F.scaled_dot_product_attention
nor its symbolic. For the export only, this script gives 1.13 what 2.x
runs in nn.MultiheadAttention (torch/nn/functional.py,
multi_head_attention_forward in 2.x) on the path the model takes
(self-attention with a packed in-projection, no masks, need_weights=False,
as torchvision's ViT EncoderBlock calls it):

    proj = linear(q, w, b)                       # _in_projection_packed
    proj = proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    q, k, v = proj[0], proj[1], proj[2]
    q = q.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)   # k, v alike
    q = q.view(bsz, num_heads, tgt_len, head_dim)                    # k, v alike
    attn_output = scaled_dot_product_attention(q, k, v, None, dropout_p)
    attn_output = attn_output.permute(2, 0, 1, 3).contiguous().view(bsz * tgt_len, embed_dim)
    attn_output = linear(attn_output, out_proj_weight, out_proj_bias).view(tgt_len, bsz, -1)

and F.scaled_dot_product_attention as an autograd.Function whose ONNX
symbolic writes what 2.x's does (torch/onnx/symbolic_opset14.py,
scaled_dot_product_attention and _attention_scale): scale = 1 /
sqrt(Cast(Slice(Shape(q), -1))), Mul(q, Sqrt(scale)), Mul(Transpose(k),
Sqrt(scale)), MatMul, Softmax(-1), Dropout only when dropout_p != 0,
MatMul with v. unflatten, which 1.13 cannot export, is a reshape to the
same computed shape (2.x's symbolic_opset13.py unflatten writes one
Reshape). The rest of the model is exported as 1.13 exports it. The
file's producer_version stays 1.13.0 (what wrote it); the spelling alone
says torch >= 2.0.

The memory PyTorch allocates is the model's, measured on torch 2.11
(golden/truth/cuda/nvidia_h200_vit_b_16*.json, which ran exactly this
code): memest must give this file what PyTorch measured.

usage (repo root): /usr/bin/python3 tests/zoo/torch2_spelling.py
"""
import os
import sys

import torch
import torch.nn.functional as F

ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))
from models import MODELS  # noqa: E402
from zoo_common import export_graph_only  # noqa: E402

OUT = os.path.join(ROOT, "models", "onnx", "torch2")
INT64_MAX = 2 ** 63 - 1


class SDPA(torch.autograd.Function):
    """F.scaled_dot_product_attention(q, k, v, None, dropout_p) of 2.x"""

    @staticmethod
    def forward(ctx, q, k, v, dropout_p):
        w = torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, -1)
        return F.dropout(w, dropout_p) @ v

    @staticmethod
    def symbolic(g, q, k, v, dropout_p):
        shape = g.op("Shape", q)
        last = g.op("Slice", shape, g.op("Constant", value_t=torch.tensor([-1], dtype=torch.int64)),
                    g.op("Constant", value_t=torch.tensor([INT64_MAX], dtype=torch.int64)))
        size = g.op("Cast", last, to_i=1)  # float, q's type
        one = g.op("Constant", value_t=torch.tensor([1.0], dtype=torch.float))
        scale = g.op("Cast", g.op("Div", one, g.op("Sqrt", size)), to_i=1)
        kt = g.op("Transpose", k, perm_i=[0, 1, 3, 2])
        qs = g.op("Mul", q, g.op("Sqrt", scale))
        ks = g.op("Mul", kt, g.op("Sqrt", scale))
        w = g.op("Softmax", g.op("MatMul", qs, ks), axis_i=-1)
        if dropout_p:
            w = g.op("Dropout", w, g.op("Constant", value_t=torch.tensor(dropout_p, dtype=torch.float)),
                     g.op("Constant", value_t=torch.tensor(True)), outputs=2)[0]
        return g.op("MatMul", w, v)


def mha_forward_2x(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k, bias_v,
                   add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training=True, key_padding_mask=None,
                   need_weights=True, attn_mask=None, use_separate_proj_weight=False, q_proj_weight=None,
                   k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True):
    assert query is key and key is value and not need_weights and attn_mask is None and key_padding_mask is None
    assert bias_k is None and not add_zero_attn and not use_separate_proj_weight and static_k is None
    tgt_len, bsz, embed_dim = query.shape
    head_dim = embed_dim // num_heads
    proj = F.linear(query, in_proj_weight, in_proj_bias)
    # unflatten(-1, (3, E)): 1.13 has no symbolic for it; 2.x's (symbolic_opset13.py)
    # writes a Reshape to the shape computed from Shape, as this reshape exports
    proj = proj.reshape(proj.shape[:-1] + (3, embed_dim)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    q, k, v = proj[0], proj[1], proj[2]
    q = q.view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.view(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = v.view(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    src_len = k.size(1)
    if not training:
        dropout_p = 0.0
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    out = SDPA.apply(q, k, v, dropout_p)
    out = out.permute(2, 0, 1, 3).contiguous().view(bsz * tgt_len, embed_dim)
    out = F.linear(out, out_proj_weight, out_proj_bias)
    return out.view(tgt_len, bsz, out.size(1)), None


def main():
    F.multi_head_attention_forward = mha_forward_2x
    os.makedirs(OUT, exist_ok=True)
    for name in ("vit_b_16",):
        torch.manual_seed(0)
        model = MODELS[name][0]().train()
        x = torch.randn(2, *MODELS[name][1][0][1])
        export_graph_only(model, x, os.path.join(OUT, name + ".onnx"), train=True)
        print(name, "written")


if __name__ == "__main__":
    main()
