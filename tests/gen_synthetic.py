#!/usr/bin/env python3
"""Synthetic graphs for scale benchmarks (stdlib only, ONNX written with
tests/onnx_craft.py): a deep residual MLP, each block
    h = relu(x @ W1 + b1); x = x + h @ W2
with weights as external data that does not exist (memest never reads it).

usage: gen_synthetic.py NODES OUT.onnx [--width 64]
Blocks have 5 nodes, so NODES / 5 blocks.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402


def main():
    nodes = int(float(sys.argv[1]))
    out = sys.argv[2]
    width = int(sys.argv[sys.argv.index("--width") + 1]) if "--width" in sys.argv else 64
    blocks = max(1, nodes // 5)
    inits, body = [], []
    x = "x"
    for i in range(blocks):
        w1, b1, w2 = f"b{i}.w1", f"b{i}.b1", f"b{i}.w2"
        inits += [oc.f_bytes(5, oc.tensor(w1, [width, width], external=True)),
                  oc.f_bytes(5, oc.tensor(b1, [width], external=True)),
                  oc.f_bytes(5, oc.tensor(w2, [width, width], external=True))]
        h0, h1, h2, h3, y = f"b{i}.mm1", f"b{i}.add1", f"b{i}.relu", f"b{i}.mm2", f"b{i}.out"
        body += [oc.f_bytes(1, oc.node("MatMul", [x, w1], [h0], name=f"/b{i}/fc1/MatMul")),
                 oc.f_bytes(1, oc.node("Add", [h0, b1], [h1], name=f"/b{i}/fc1/Add")),
                 oc.f_bytes(1, oc.node("Relu", [h1], [h2], name=f"/b{i}/relu/Relu")),
                 oc.f_bytes(1, oc.node("MatMul", [h2, w2], [h3], name=f"/b{i}/fc2/MatMul")),
                 oc.f_bytes(1, oc.node("Add", [x, h3], [y], name=f"/b{i}/Add"))]
        x = y
    graph = b"".join(body) + oc.f_bytes(2, "synthetic") + b"".join(inits)
    graph += oc.f_bytes(11, oc.value_info("x", ["batch", width])) + oc.f_bytes(12, oc.value_info(x, []))
    with open(out, "wb") as f:
        f.write(oc.model(graph))
    print(f"wrote {out}: {blocks} blocks, {5 * blocks} nodes, {os.path.getsize(out) / 1e6:.1f} MB")


main()
