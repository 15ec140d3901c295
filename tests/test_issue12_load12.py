#!/usr/bin/env python3
"""Issue 12, loaders and the timeline's robustness: one case per item.

usage: test_issue12_load12.py MEMEST SOURCE_ROOT CASE
Crafted ONNX files come from onnx_craft.py; every expectation is worked
out by hand in the case (never taken from memest)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402
from harness import MEMEST, check, failures  # noqa: E402

CASE = sys.argv[3]
TMP = tempfile.mkdtemp(prefix="memest-i12-load-")


def run(*args, timeout=60):
    try:
        p = subprocess.run([MEMEST, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "", "timed out"
    return p.returncode, p.stdout, p.stderr


def write(name, data):
    p = os.path.join(TMP, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def no_sanitizer(err, label):
    check("runtime error" not in err and "AddressSanitizer" not in err, f"[{label}] sanitizer report: {err[-400:]}")


def case_fifo():
    """Item 19: a FIFO (or directory) as the model is refused at once."""
    fifo = os.path.join(TMP, "model.onnx")
    os.mkfifo(fifo)
    for p, what in ((fifo, "FIFO"), (os.path.join(TMP, "m.json"), "FIFO"), (TMP, "directory")):
        if p.endswith(".json"):
            os.mkfifo(p)
        rc, out, err = run(p, "--input", "3x8x8", timeout=20)
        check(rc == 2, f"[{p}] exit {rc}, expected 2: {err.strip()}")
        check("not a regular file" in err and what in err and p in err, f"[{p}] message: {err.strip()}")
        no_sanitizer(err, p)


def unnamed_node(op, inputs, outputs):
    """A NodeProto with no name field (onnx_craft.node always writes one)."""
    return b"".join(oc.f_bytes(1, i) for i in inputs) + b"".join(oc.f_bytes(2, o) for o in outputs) + oc.f_bytes(4, op)


def case_names():
    """Item 15: an unnamed node's made-up name never equals an explicit one.
    Node 1 is unnamed, so it would be called Relu_1, which node 0 is called
    explicitly (and node 2 explicitly Relu_1_2, the first suffix tried)."""
    nodes = [oc.node("Relu", ["x"], ["a"], name="Relu_1"), unnamed_node("Relu", ["a"], ["b"]),
             oc.node("Relu", ["b"], ["c"], name="Relu_1_2"), unnamed_node("Relu", ["c"], ["y"])]
    p = write("names.onnx", oc.model(oc.graph(nodes, [oc.value_info("x", [1, 4])], [oc.value_info("y", [1, 4])])))
    rc, out, err = run(p, "--format", "json")
    check(rc == 0, f"exit {rc}: {err}")
    if rc == 0:
        names = [layer["name"] for layer in json.loads(out)["layers"]]
        check(len(names) == 4 and len(set(names)) == 4, f"node names not unique: {names}")
        check(names[0] == "Relu_1" and names[2] == "Relu_1_2" and names[3] == "Relu_3", f"explicit names kept: {names}")


def case_huge():
    """Item 17: ConstantOfShape of 2^62 one-byte elements, twice: 2^63 bytes
    wrapped int64 (release printed 2^63-byte figures, exit 0). Also four of
    2^58 bytes each, every one plausible alone, whose sum passes 1 EiB."""
    val = oc.f_bytes(1, "value") + oc.f_bytes(5, oc.tensor("v", [1], dtype=2, raw=b"\x01")) + oc.f_varint(20, 4)
    for label, dims, count, culprit in (("2^62 twice", [1 << 31, 1 << 31], 2, "big_0"),
                                        ("2^58 four times", [1 << 30, 1 << 28], 4, "big_3")):
        shape = oc.tensor("s", [2], dtype=oc.INT64, raw=oc.int64_raw(dims))
        nodes = [oc.node("ConstantOfShape", ["s"], [f"c{k}"], name=f"big_{k}", attrs=[val]) for k in range(count)]
        nodes.append(oc.node("Add", ["x", "x"], ["y"], name="add"))
        outs = [oc.value_info("y", [1, 4])] + [oc.value_info(f"c{k}", []) for k in range(count)]
        p = write("huge.onnx", oc.model(oc.graph(nodes, [oc.value_info("x", [1, 4])], outs, [shape])))
        for mode in ((), ("--train",), ("--runtime", "cpu")):
            rc, out, err = run(p, *mode)
            check(rc == 2, f"[{label} {mode}] exit {rc}, expected 2; stdout {out[-300:]}; stderr {err.strip()}")
            check(f"node '{culprit}' (ConstantOfShape)" in err and "not plausible" in err, f"[{label} {mode}] message: {err.strip()}")
            no_sanitizer(err, label)


CASES = {"fifo": case_fifo, "names": case_names, "huge": case_huge}

CASES[CASE]()
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
