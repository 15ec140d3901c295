#!/usr/bin/env python3
"""Issue 12, loaders and the timeline's robustness: one case per item.

usage: test_issue12_load12.py MEMEST SOURCE_ROOT CASE
Crafted ONNX files come from onnx_craft.py; every expectation is worked
out by hand in the case (never taken from memest)."""
import json
import os
import struct
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


def unknown_model(declare_b, batch="batch", extra_nodes=()):
    """x -> Relu a -> FancyOp (unknown) b -> Add(a, b) y; b's shape declared
    in value_info when declare_b (symbolic batch named as x's)."""
    nodes = [oc.node("Relu", ["x"], ["a"], name="relu"), oc.node("FancyOp", ["a"], ["b"], name="fancy"),
             oc.node("Add", ["a", "b"], ["y"], name="add")] + list(extra_nodes)
    g = oc.graph(nodes, [oc.value_info("x", [batch, 4])], [oc.value_info("y", [batch, 4])])
    if declare_b:
        g += oc.f_bytes(13, oc.value_info("b", [batch, 4]))
    return oc.model(g)


def case_unknown():
    """Item 5: an unknown op no longer cancels the memory timeline; its
    outputs are sized from their declared shapes, the assumption is stated
    on stderr and in the report; --strict stays fatal. CPU runtime, batch 3:
    x, a, b and y are 3x4 float32 = 48 bytes each, all alive at Add: 192."""
    p = write("unknown.onnx", unknown_model(True))
    for train in ((), ("--train",)):
        rc, out, err = run(p, "--batch", "3", "--runtime", "cpu", "--format", "json", *train)
        check(rc == 0, f"[{train}] exit {rc}: {err}")
        if rc == 0:
            mem = json.loads(out)["memory"]
            check(len(mem["steps"]) >= 1 and "skipped" not in mem, f"[{train}] no timeline: {mem}")
            check("fancy" in mem.get("assumed", "") and "nothing for backward" in mem.get("assumed", ""), f"[{train}] JSON lacks the assumption: {mem}")
            check("WARNING" not in mem.get("assumed", ""), f"[{train}] b's declared shape was not used: {mem.get('assumed')}")
            if not train and mem["steps"]:
                check(mem["steps"][0]["peak"] == 4 * 48, f"peak {mem['steps'][0]['peak']}, expected 192")
        check("note: memory timeline" in err and "fancy" in err, f"[{train}] stderr lacks the assumption: {err}")
    rc, out, err = run(p, "--batch", "3")
    check(rc == 0 and "assumed:" in out and "not simulated" not in out, f"table lacks the assumption (rc {rc}): {out[-600:]}")
    for fmt, key in (("csv", "memory,assumed,"), ("markdown", "| memory | assumed |")):
        rc, out, err = run(p, "--batch", "3", "--format", fmt)
        check(rc == 0 and key in out and "fancy" in out.split(key, 1)[-1], f"{fmt} lacks the assumption (rc {rc}): {out[-600:]}")
    # --max-batch and --plot work with the unknown op
    rc, out, err = run(p, "--gpu-mem", "1GiB", "--max-batch")
    check(rc == 0 and out.strip(), f"--max-batch exit {rc}: {err}")
    svg = os.path.join(TMP, "u.svg")
    rc, out, err = run(p, "--plot", svg)
    check(rc == 0 and os.path.getsize(svg) > 200 and "could not write" not in err, f"--plot exit {rc}: {err}")
    # an output of unknown shape: counted as 0 bytes, and said loudly
    q = write("unknown_unsized.onnx", unknown_model(False))
    rc, out, err = run(q, "--batch", "3", "--format", "json")
    check(rc == 0, f"[unsized] exit {rc}: {err}")
    if rc == 0:
        mem = json.loads(out)["memory"]
        check(mem["steps"] and "WARNING" in mem.get("assumed", "") and "'b'" in mem.get("assumed", ""), f"[unsized] {mem}")
    check("WARNING" in err, f"[unsized] stderr: {err}")
    rc, out, err = run(p, "--strict")
    check(rc == 3 and "FancyOp" in err, f"--strict exit {rc}: {err}")


def case_const_weight():
    """Item 3: a 64x32 float MatMul weight held in a Constant node is 2048
    parameters (8192 bytes) and in memory as weights; the report says it
    came from a Constant node. A scalar Constant (an eps added) stays a
    constant. CPU runtime, batch 1: x 1x64 (256 B), y 1x32 (128 B)."""
    w = oc.tensor("W", [64, 32], dtype=oc.FLOAT, raw=struct.pack("<2048f", *([0.5] * 2048)))
    eps = oc.tensor("e", [], dtype=oc.FLOAT, raw=struct.pack("<f", 1e-5))
    nodes = [oc.node("Constant", [], ["W"], name="wconst", attrs=[oc.f_bytes(1, "value") + oc.f_bytes(5, w) + oc.f_varint(20, 4)]),
             oc.node("Constant", [], ["e"], name="econst", attrs=[oc.f_bytes(1, "value") + oc.f_bytes(5, eps) + oc.f_varint(20, 4)]),
             oc.node("MatMul", ["x", "W"], ["m"], name="mm"), oc.node("Add", ["m", "e"], ["y"], name="add")]
    p = write("constw.onnx", oc.model(oc.graph(nodes, [oc.value_info("x", ["batch", 64])], [oc.value_info("y", ["batch", 32])])))
    rc, out, err = run(p, "--runtime", "cpu", "--format", "json")
    check(rc == 0, f"exit {rc}: {err}")
    if rc == 0:
        d = json.loads(out)
        check(d["totals"]["params"] == 2048 and d["totals"]["param_bytes"] == 8192, f"totals {d['totals']}")
        check(d.get("constant_weights") == ["W"], f"constant_weights {d.get('constant_weights')}")
        step = d["memory"]["steps"][0]
        check(step["at_peak"]["weights"] == 8192, f"weights at the peak {step['at_peak']}")
    rc, out, err = run(p)
    check(rc == 0 and "Weights held in Constant nodes" in out and "'W'" in out, f"table: {out[-400:]}")
    for fmt, key in (("csv", "constant_weights,W,2048,count"), ("markdown", "| constant_weights | W | 2048 | count |")):
        rc, out, err = run(p, "--format", fmt)
        check(rc == 0 and key in out, f"{fmt} lacks the Constant-node weight (rc {rc}): {out[-400:]}")
    rc, out, err = run(p, "--train", "--runtime", "cpu", "--format", "json")
    if rc == 0:
        step = json.loads(out)["memory"]["steps"][0]
        check(step["at_peak"]["gradients"] + step["at_peak"]["weights"] >= 8192, f"train {step['at_peak']}")
    check(rc == 0, f"--train exit {rc}: {err}")


def json_of(p, *args):
    rc, out, err = run(p, "--runtime", "cpu", "--format", "json", *args)
    check(rc == 0, f"[{os.path.basename(p)}] exit {rc}: {err.strip()}")
    no_sanitizer(err, p)
    return json.loads(out) if rc == 0 else None


def case_types():
    """Item 4: FLOAT8 (17-20: 1 byte) and UINT4/INT4 (21, 22: two a byte,
    ceil(n/2)) are known types. A float8 4x2 MatMul weight: 8 parameters,
    8 bytes; x 1x4 float8: 4 bytes. An int4 4x3 table (6 bytes) gathered by
    5 int64 indices (40 bytes) into 5x3 int4: ceil(15/2) = 8 bytes."""
    for dt in (17, 18, 19, 20):
        w = oc.tensor("w", [4, 2], dtype=dt, raw=bytes(8))
        g = oc.graph([oc.node("MatMul", ["x", "w"], ["y"], name="mm")], [oc.value_info("x", [1, 4], elem=dt)], [oc.value_info("y", [1, 2])], [w])
        d = json_of(write(f"f8_{dt}.onnx", oc.model(g, opset=21)))
        if d:
            at = d["memory"]["steps"][0]["at_peak"]
            check(d["totals"]["params"] == 8 and d["totals"]["param_bytes"] == 8, f"[float8 {dt}] totals {d['totals']}")
            check(at["weights"] == 8 and at["inputs"] == 4 and at["activations"] == 2, f"[float8 {dt}] {at}")
    for dt in (21, 22):
        w = oc.tensor("w", [4, 3], dtype=dt, raw=bytes(6))
        g = oc.graph([oc.node("Gather", ["w", "i"], ["y"], name="g")], [oc.value_info("i", [5], elem=oc.INT64)], [oc.value_info("y", [5, 3])], [w])
        d = json_of(write(f"i4_{dt}.onnx", oc.model(g, opset=21)))
        if d:
            at = d["memory"]["steps"][0]["at_peak"]
            check(at["weights"] == 6 and at["inputs"] == 40 and at["activations"] == 8, f"[int4 {dt}] {at}")
            # the gather reads the rows it takes (15 int4: 8 bytes) and the indices (40)
            g_row = [l for l in d["layers"] if l["op"] == "Gather"]
            check(g_row and g_row[0]["mem_read"] == 48, f"[int4 {dt}] Gather reads {g_row and g_row[0].get('mem_read')} bytes, not 48")
        # raw_data of the wrong packed size is still refused
        w = oc.tensor("w", [4, 3], dtype=dt, raw=bytes(12))
        g = oc.graph([oc.node("Gather", ["w", "i"], ["y"], name="g")], [oc.value_info("i", [5], elem=oc.INT64)], [oc.value_info("y", [5, 3])], [w])
        rc, out, err = run(write(f"i4bad_{dt}.onnx", oc.model(g, opset=21)))
        check(rc == 2 and "raw_data has 12 bytes, its shape needs 6" in err, f"[int4 {dt} bad raw] exit {rc}: {err.strip()}")


def case_sparse():
    """Item 4: sparse initializers and sparse Constants are accepted. memest
    counts what PyTorch holds of a sparse COO tensor: its values and int64
    indices (doc/memory.md). W: dense 64x32, 10 float values, indices
    [10, 2]: 10 parameters, 40 + 160 = 200 bytes. A sparse Constant 4x2
    with 3 values and linear indices [3]: 12 + 2·3·8 = 60 bytes (PyTorch's
    indices are [rank, nnz] whatever the file's layout)."""
    vals = oc.tensor("W", [10], dtype=oc.FLOAT, raw=struct.pack("<10f", *range(10)))
    idx = oc.tensor("", [10, 2], dtype=oc.INT64, raw=oc.int64_raw([0] * 20))
    sp = oc.f_bytes(1, vals) + oc.f_bytes(2, idx) + oc.f_varint(3, 64) + oc.f_varint(3, 32)
    g = oc.graph([oc.node("MatMul", ["x", "W"], ["y"], name="mm")], [oc.value_info("x", [1, 64])], [oc.value_info("y", [1, 32])])
    d = json_of(write("sparse_init.onnx", oc.model(g + oc.f_bytes(15, sp))))
    if d:
        check(d["layers"][0]["output_shape"] == [1, 32], f"dense shape seen by MatMul: {d['layers'][0]['output_shape']}")
        check(d["totals"]["params"] == 10 and d["totals"]["param_bytes"] == 200, f"sparse totals {d['totals']}")
        check(d["memory"]["steps"][0]["at_peak"]["weights"] == 200, f"sparse weights {d['memory']['steps'][0]['at_peak']}")
    vals = oc.tensor("v", [3], dtype=oc.FLOAT, raw=struct.pack("<3f", 1, 2, 3))
    idx = oc.tensor("", [3], dtype=oc.INT64, raw=oc.int64_raw([0, 3, 5]))
    spc = oc.f_bytes(1, vals) + oc.f_bytes(2, idx) + oc.f_varint(3, 4) + oc.f_varint(3, 2)
    attr = oc.f_bytes(1, "sparse_value") + oc.f_bytes(22, spc) + oc.f_varint(20, 11)
    g = oc.graph([oc.node("Constant", [], ["C"], name="c", attrs=[attr]), oc.node("MatMul", ["x", "C"], ["y"], name="mm")],
                 [oc.value_info("x", [1, 4])], [oc.value_info("y", [1, 2])])
    d = json_of(write("sparse_const.onnx", oc.model(g)))
    if d:
        check(d["layers"][0]["output_shape"] == [1, 2], f"sparse Constant: {d['layers']}")
        check(d["totals"]["params"] == 3 and d["memory"]["steps"][0]["at_peak"]["weights"] == 60, f"sparse Constant {d['totals']}")
    # values and indices that disagree are refused, naming the tensor
    bad = oc.f_bytes(1, vals) + oc.f_bytes(2, oc.tensor("", [4], dtype=oc.INT64, raw=oc.int64_raw([0] * 4))) + oc.f_varint(3, 4)
    g = oc.graph([oc.node("Relu", ["x"], ["y"], name="r")], [oc.value_info("x", [1, 4])], [oc.value_info("y", [1, 4])])
    rc, out, err = run(write("sparse_bad.onnx", oc.model(g + oc.f_bytes(15, bad))))
    check(rc == 2 and "sparse initializer 'v'" in err, f"bad sparse: exit {rc}: {err.strip()}")


def function(name, inputs, outputs, nodes, domain="local", defaults=()):
    """FunctionProto: name 1, input 4, output 5, node 7, opset_import 9,
    domain 10, attribute_proto 11."""
    f = oc.f_bytes(1, name) + b"".join(oc.f_bytes(4, i) for i in inputs) + b"".join(oc.f_bytes(5, o) for o in outputs)
    f += b"".join(oc.f_bytes(7, n) for n in nodes) + oc.f_bytes(9, oc.f_bytes(1, "") + oc.f_varint(2, 17)) + oc.f_bytes(10, domain)
    return f + b"".join(oc.f_bytes(11, a) for a in defaults)


def call(op, inputs, outputs, name, attrs=(), domain="local"):
    return oc.node(op, inputs, outputs, name=name, attrs=attrs) + oc.f_bytes(7, domain)


def ref_attr(name, ref, type_=2):
    """An attribute that stands for the caller's (ref_attr_name, field 21)."""
    return oc.f_bytes(1, name) + oc.f_bytes(21, ref) + oc.f_varint(20, type_)


def model_with_functions(g, functions):
    return oc.model(g) + b"".join(oc.f_bytes(25, f) for f in functions)


def case_functions():
    """Item 4: model-local functions (FunctionProto) are inlined: nested
    calls, attribute references (ref_attr_name) with the call's value or the
    function's default, recursion refused. Flatten of 2x3x4 at axis 2 is
    6x4, at the default axis 0 (given by the function) 1x24. Relu's output
    there is the function's formal output, so the caller's value."""
    inner = function("FlatRelu", ["X"], ["Y"], [oc.node("Flatten", ["X"], ["T"], name="flat", attrs=[ref_attr("axis", "ax")]),
                                                oc.node("Relu", ["T"], ["Y"], name="relu")],
                     defaults=[oc.attr_int("ax", 0)])
    outer = function("Outer", ["A"], ["B", "C"], [call("FlatRelu", ["A"], ["B"], "first", attrs=[ref_attr("ax", "outer_ax")]),
                                                  call("FlatRelu", ["A"], ["C"], "second")])
    g = oc.graph([call("Outer", ["x"], ["y", "z"], "outer", attrs=[oc.attr_int("outer_ax", 2)])],
                 [oc.value_info("x", [2, 3, 4])], [oc.value_info("y", []), oc.value_info("z", [])])
    p = write("functions.onnx", model_with_functions(g, [inner, outer]))
    rc, out, err = run(p, "--format", "json")
    check(rc == 0, f"exit {rc}: {err.strip()}")
    if rc == 0:
        d = json.loads(out)
        layers = {layer["name"]: layer for layer in d["layers"]}
        check(sorted(layers) == ["outer/first/flat", "outer/first/relu", "outer/second/flat", "outer/second/relu"], f"inlined names {sorted(layers)}")
        check(not d["unknown_ops"], f"unknown ops left: {d['unknown_ops']}")
        if "outer/first/relu" in layers and "outer/second/relu" in layers:
            check(layers["outer/first/relu"]["output_shape"] == [6, 4], f"call's attribute: {layers['outer/first/relu']['output_shape']}")
            check(layers["outer/second/relu"]["output_shape"] == [1, 24], f"function's default: {layers['outer/second/relu']['output_shape']}")
    # a function that calls itself
    rec = function("Rec", ["X"], ["Y"], [call("Rec", ["X"], ["Y"], "again")])
    g = oc.graph([call("Rec", ["x"], ["y"], "r")], [oc.value_info("x", [1, 4])], [oc.value_info("y", [])])
    rc, out, err = run(write("recursive.onnx", model_with_functions(g, [rec])))
    check(rc == 2 and "nest deeper" in err and "Rec" in err, f"recursion: exit {rc}: {err.strip()}")
    no_sanitizer(err, "recursive")


CASES = {"functions": case_functions, "types": case_types, "sparse": case_sparse, "fifo": case_fifo, "names": case_names, "huge": case_huge, "unknown": case_unknown, "const_weight": case_const_weight}

CASES[CASE]()
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
