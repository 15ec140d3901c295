#!/usr/bin/env python3
"""Synthetic graphs for scale benchmarks (stdlib only; ONNX is written with
tests/onnx_craft.py).

usage: gen_synthetic.py NODES OUT.onnx|OUT.json [--kind mlp|transformer]
                        [--width W] [--seq S] [--data]

Kinds (about NODES nodes in all, whole blocks):
  mlp          deep residual MLP, h = relu(x @ W1 + b1); x = x + h @ W2
               (ONNX: 5 nodes a block; JSON: Linear, ReLU, Linear, Add)
  transformer  post-norm encoder stack on [batch, S, W]: single-head
               attention (MatMul, Transpose, Mul, Softmax), residual Add,
               LayerNormalization, a 4W ReLU MLP, Add, LayerNormalization
               (ONNX: 17 nodes a block; JSON: MultiheadAttention, Add,
               LayerNorm, Linear, GELU, Linear, Add, LayerNorm)

ONNX weights are external data. Without --data the .data file does not
exist (memest never reads it); with --data OUT.data is written as a sparse
file of the real size with offsets for every tensor, so onnx.load can load
it (a 2 GB+ model: --kind mlp --width 4096, 20 blocks).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


class Weights:
    """Initializers with external data, laid end to end in one file."""

    def __init__(self, location):
        self.location, self.offset, self.inits = location, 0, []

    def add(self, name, dims):
        ext = oc.f_bytes(1, "location") + oc.f_bytes(2, self.location)
        if self.location != "missing.data":
            n = 4
            for d in dims:
                n *= d
            ext = (oc.f_bytes(13, ext) + oc.f_bytes(13, oc.f_bytes(1, "offset") + oc.f_bytes(2, str(self.offset)))
                   + oc.f_bytes(13, oc.f_bytes(1, "length") + oc.f_bytes(2, str(n))))
            self.offset += (n + 4095) // 4096 * 4096
        else:
            ext = oc.f_bytes(13, ext)
        t = b"".join(oc.f_varint(1, d) for d in dims) + oc.f_varint(2, oc.FLOAT) + oc.f_bytes(8, name)
        self.inits.append(oc.f_bytes(5, t + ext + oc.f_varint(14, 1)))
        return name


def onnx_mlp(blocks, width, w):
    body, x = [], "x"
    for i in range(blocks):
        w1, b1, w2 = w.add(f"b{i}.w1", [width, width]), w.add(f"b{i}.b1", [width]), w.add(f"b{i}.w2", [width, width])
        h0, h1, h2, h3, y = f"b{i}.mm1", f"b{i}.add1", f"b{i}.relu", f"b{i}.mm2", f"b{i}.out"
        body += [oc.node("MatMul", [x, w1], [h0], name=f"/b{i}/fc1/MatMul"),
                 oc.node("Add", [h0, b1], [h1], name=f"/b{i}/fc1/Add"),
                 oc.node("Relu", [h1], [h2], name=f"/b{i}/relu/Relu"),
                 oc.node("MatMul", [h2, w2], [h3], name=f"/b{i}/fc2/MatMul"),
                 oc.node("Add", [x, h3], [y], name=f"/b{i}/Add")]
        x = y
    return body, ["batch", width], x


def onnx_transformer(blocks, width, seq, w):
    scale = oc.f_bytes(5, oc.tensor("scale", [], raw=b"\x00\x00\x80\x3e"))  # 0.25
    body, x = [], "x"
    for i in range(blocks):
        p = f"/layers.{i}"
        n = {k: f"l{i}.{k}" for k in ("q", "k", "v", "kt", "s", "ss", "p", "a", "o", "r1", "n1", "h", "hb", "hr", "f", "r2", "out")}
        wq, wk, wv, wo = (w.add(f"l{i}.attn.{m}", [width, width]) for m in ("wq", "wk", "wv", "wo"))
        g1, be1, g2, be2 = (w.add(f"l{i}.{m}", [width]) for m in ("ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"))
        w1, b1, w2 = w.add(f"l{i}.fc1.weight", [width, 4 * width]), w.add(f"l{i}.fc1.bias", [4 * width]), w.add(f"l{i}.fc2.weight", [4 * width, width])
        ax = oc.attr_int("axis", -1)
        body += [oc.node("MatMul", [x, wq], [n["q"]], name=f"{p}/attn/q/MatMul"),
                 oc.node("MatMul", [x, wk], [n["k"]], name=f"{p}/attn/k/MatMul"),
                 oc.node("MatMul", [x, wv], [n["v"]], name=f"{p}/attn/v/MatMul"),
                 oc.node("Transpose", [n["k"]], [n["kt"]], name=f"{p}/attn/Transpose", attrs=[oc.attr_ints("perm", [0, 2, 1])]),
                 oc.node("MatMul", [n["q"], n["kt"]], [n["s"]], name=f"{p}/attn/MatMul"),
                 oc.node("Mul", [n["s"], "scale"], [n["ss"]], name=f"{p}/attn/Mul"),
                 oc.node("Softmax", [n["ss"]], [n["p"]], name=f"{p}/attn/Softmax", attrs=[ax]),
                 oc.node("MatMul", [n["p"], n["v"]], [n["a"]], name=f"{p}/attn/MatMul_1"),
                 oc.node("MatMul", [n["a"], wo], [n["o"]], name=f"{p}/attn/out/MatMul"),
                 oc.node("Add", [x, n["o"]], [n["r1"]], name=f"{p}/Add"),
                 oc.node("LayerNormalization", [n["r1"], g1, be1], [n["n1"]], name=f"{p}/ln1/LayerNormalization", attrs=[ax]),
                 oc.node("MatMul", [n["n1"], w1], [n["h"]], name=f"{p}/fc1/MatMul"),
                 oc.node("Add", [n["h"], b1], [n["hb"]], name=f"{p}/fc1/Add"),
                 oc.node("Relu", [n["hb"]], [n["hr"]], name=f"{p}/act/Relu"),
                 oc.node("MatMul", [n["hr"], w2], [n["f"]], name=f"{p}/fc2/MatMul"),
                 oc.node("Add", [n["n1"], n["f"]], [n["r2"]], name=f"{p}/Add_1"),
                 oc.node("LayerNormalization", [n["r2"], g2, be2], [n["out"]], name=f"{p}/ln2/LayerNormalization", attrs=[ax])]
        x = n["out"]
    return body, ["batch", seq, width], x, [scale]


def write_onnx(kind, nodes, out, width, seq, data):
    location = os.path.basename(os.path.splitext(out)[0]) + ".data" if data else "missing.data"
    w, extra = Weights(location), []
    if kind == "mlp":
        body, in_shape, y = onnx_mlp(max(1, nodes // 5), width, w)
    else:
        body, in_shape, y, extra = onnx_transformer(max(1, nodes // 17), width, seq, w)
    graph = b"".join(oc.f_bytes(1, b) for b in body) + oc.f_bytes(2, "synthetic") + b"".join(w.inits) + b"".join(extra)
    graph += oc.f_bytes(11, oc.value_info("x", in_shape)) + oc.f_bytes(12, oc.value_info(y, in_shape))
    with open(out, "wb") as f:
        f.write(oc.model(graph))
    if data:
        with open(os.path.join(os.path.dirname(out) or ".", location), "wb") as f:
            f.truncate(w.offset)  # sparse: the size is real, the disk use is not
    return len(body), w.offset


def write_json(kind, nodes, out, width, seq):
    layers, x = [], "x"
    if kind == "mlp":
        for i in range(max(1, nodes // 4)):
            layers += [{"name": f"b{i}.fc1", "type": "Linear", "in_features": width, "out_features": width, "inputs": [x]},
                       {"name": f"b{i}.relu", "type": "ReLU"},
                       {"name": f"b{i}.fc2", "type": "Linear", "in_features": width, "out_features": width},
                       {"name": f"b{i}.add", "type": "Add", "inputs": [x, f"b{i}.fc2"]}]
            x = f"b{i}.add"
        shape = [width]
    else:
        for i in range(max(1, nodes // 8)):
            p = f"layers.{i}"
            layers += [{"name": f"{p}.attn", "type": "MultiheadAttention", "embed_dim": width, "num_heads": 4,
                        "batch_first": True, "inputs": [x]},
                       {"name": f"{p}.add1", "type": "Add", "inputs": [x, f"{p}.attn"]},
                       {"name": f"{p}.ln1", "type": "LayerNorm", "normalized_shape": [width]},
                       {"name": f"{p}.fc1", "type": "Linear", "in_features": width, "out_features": 4 * width},
                       {"name": f"{p}.act", "type": "GELU"},
                       {"name": f"{p}.fc2", "type": "Linear", "in_features": 4 * width, "out_features": width},
                       {"name": f"{p}.add2", "type": "Add", "inputs": [f"{p}.ln1", f"{p}.fc2"]},
                       {"name": f"{p}.ln2", "type": "LayerNorm", "normalized_shape": [width]}]
            x = f"{p}.ln2"
        shape = [seq, width]
    doc = {"format": "memest-graph", "version": 1, "name": f"synthetic_{kind}",
           "how": "generated by tests/gen_synthetic.py (synthetic, for benchmarks)",
           "inputs": [{"name": "x", "shape": shape}], "layers": layers}
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    return len(layers), 0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    nodes, out = int(float(sys.argv[1])), sys.argv[2]
    kind = arg("--kind", "mlp")
    width, seq = int(arg("--width", 64)), int(arg("--seq", 16))
    if kind not in ("mlp", "transformer"):
        sys.exit("--kind must be mlp or transformer")
    if out.endswith(".json"):
        n, data = write_json(kind, nodes, out, width, seq)
    else:
        n, data = write_onnx(kind, nodes, out, width, seq, "--data" in sys.argv)
    print(f"wrote {out}: {kind}, {n} nodes, {os.path.getsize(out) / 1e6:.1f} MB"
          + (f", external data {data / 1e9:.2f} GB (sparse)" if data else ""))


main()
