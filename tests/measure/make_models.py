#!/usr/bin/env python3
"""Writes tests/measure/models/matmul.onnx: the GEMM shapes memest-measure
runs that the zoo's CNNs do not have (stdlib only, through tests/onnx_craft.py).

    x [B, 4, 6] -> MatMul W1 [6, 5] -> a [B, 4, 5]          (folded to one GEMM)
    z [B, 5, 7] -> MatMul W2 [7, 3] -> c [B, 5, 3]
    MatMul(a, c)                    -> d [B, 4, 3]          (batched GEMM of two activations)
    Flatten -> Gemm W3 [12, 16] + C [16]                    (transB 0)
    Relu -> Gemm W4 [10, 16] transB, alpha 0.5, beta 2, C [1, 10] -> y [B, 10]

usage: make_models.py [OUTDIR]
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import onnx_craft as oc  # noqa: E402


def attr_float(name, v):
    return oc.f_bytes(1, name) + oc.key(2, 5) + struct.pack("<f", v) + oc.f_varint(20, 1)


def matmul_model():
    w = [oc.tensor("W1", [6, 5], external=True), oc.tensor("W2", [7, 3], external=True),
         oc.tensor("W3", [12, 16], external=True), oc.tensor("C3", [16], external=True),
         oc.tensor("W4", [10, 16], external=True), oc.tensor("C4", [1, 10], external=True)]
    nodes = [
        oc.node("MatMul", ["x", "W1"], ["a"], name="proj_x"),
        oc.node("MatMul", ["z", "W2"], ["c"], name="proj_z"),
        oc.node("MatMul", ["a", "c"], ["d"], name="mix"),
        oc.node("Flatten", ["d"], ["f"], name="flatten", attrs=[oc.attr_int("axis", 1)]),
        oc.node("Gemm", ["f", "W3", "C3"], ["h"], name="fc1"),
        oc.node("Relu", ["h"], ["r"], name="relu"),
        oc.node("Gemm", ["r", "W4", "C4"], ["y"], name="fc2",
                attrs=[oc.attr_int("transB", 1), attr_float("alpha", 0.5), attr_float("beta", 2.0)]),
    ]
    g = oc.graph(nodes, [oc.value_info("x", ["batch", 4, 6]), oc.value_info("z", ["batch", 5, 7])],
                 [oc.value_info("y", ["batch", 10])], w)
    return oc.model(g, 17)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "models")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "matmul.onnx"), "wb") as f:
        f.write(matmul_model())


if __name__ == "__main__":
    main()
