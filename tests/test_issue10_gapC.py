"""Issue 10 (gapC): a table the forward slices by the run's length, which
torch.onnx writes as a Constant (a non-persistent buffer is no state_dict()
entry, so it gets no initializer): rotary cos/sin caches, GPT-2's causal
"bias". PyTorch holds the whole table from construction, so memest counts
it with the stored tensors (a buffer, not a parameter), however much of it
one run slices. Usage: test_issue10_gapC.py MEMEST SOURCE_ROOT CASE"""
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, run  # noqa: E402
import onnx_craft as oc  # noqa: E402

BOOL = 9
D, CTX = 64, 512


def i64(name, values, dims=None):
    return oc.tensor(name, [len(values)] if dims is None else dims, oc.INT64, oc.int64_raw(values))


def model_file():
    """x [batch, seq, 64]; cos = table[:seq] (float, 512 x 64, a Constant
    read by Slice as the exporter writes a sliced buffer); causal =
    mask[:seq, :seq] (bool, 512 x 512); out = where(causal, x @ x^T, 0) +
    (x * cos) @ x^T."""
    nodes = []

    def const(name, t):
        nodes.append(oc.node("Constant", [], [name], name=name, attrs=[oc.attr_tensor("value", t)]))
        return name

    def op(kind, ins, out, attrs=()):
        nodes.append(oc.node(kind, ins, [out], name="/" + out, attrs=attrs))
        return out

    table = const("onnx::Slice_1", oc.tensor("t", [CTX, D], oc.FLOAT,
                                              b"".join(struct.pack("<f", i % 7) for i in range(CTX * D))))
    mask = const("onnx::Slice_2", oc.tensor("m", [CTX, CTX], BOOL,
                                             bytes(1 if j <= i else 0 for i in range(CTX) for j in range(CTX))))
    shape = op("Shape", ["x"], "shape")
    seq = op("Gather", [shape, const("one", i64("one", [1], []))], "seq")
    ends = op("Unsqueeze", [seq, const("ax0", i64("ax0", [0]))], "ends")
    zero = const("zero", i64("zero", [0]))
    cos = op("Slice", [table, zero, ends, zero], "cos")
    m1 = op("Slice", [mask, zero, ends, zero], "m1")
    causal = op("Slice", [m1, zero, ends, const("ax1", i64("ax1", [1]))], "causal")
    xt = op("Transpose", ["x"], "xt", [oc.attr_ints("perm", [0, 2, 1])])
    w = op("MatMul", ["x", xt], "w")
    fill = const("fill", oc.tensor("f", [], oc.FLOAT, struct.pack("<f", 0.0)))
    wm = op("Where", [causal, w, fill], "wm")
    xc = op("Mul", ["x", cos], "xc")
    r = op("MatMul", [xc, xt], "r")
    op("Add", [wm, r], "out")
    g = oc.graph(nodes, [oc.value_info("x", ["batch", "seq", D])], [oc.value_info("out", [])])
    fd, path = tempfile.mkstemp(suffix=".onnx")
    with os.fdopen(fd, "wb") as f:
        f.write(oc.model(g, 17))
    return path


def case_sliced_buffer():
    path = model_file()
    try:
        rc, out, err = run(path, "--input", "x=128x%d" % D, "--runtime", "cpu", "--format", "json")
    finally:
        os.unlink(path)
    check(rc == 0, "memest exit %d: %s" % (rc, err.strip()[-300:]))
    if rc:
        return
    rep = json.loads(out)
    tables = CTX * D * 4 + CTX * CTX  # both tables whole, not the 128 rows sliced
    x = 128 * D * 4
    check(rep["totals"]["params"] == 0, "tables are buffers, not parameters: params %s" % rep["totals"]["params"])
    check(rep["totals"]["buffers"] == CTX * D + CTX * CTX,
          "buffers %s, want %d elements" % (rep["totals"]["buffers"], CTX * D + CTX * CTX))
    check(rep.get("constant_buffers") == ["onnx::Slice_1", "onnx::Slice_2"] and "constant_weights" not in rep,
          "the report names the tables as buffers: %s / %s" % (rep.get("constant_buffers"), rep.get("constant_weights")))
    st = rep["memory"]["steps"][0]
    check(st["baseline"] == tables + x, "baseline %d, want the tables %d + the input %d" % (st["baseline"], tables, x))
    check(st["at_peak"]["weights"] == tables, "at_peak weights %d, want %d" % (st["at_peak"]["weights"], tables))


CASES = {"sliced_buffer": case_sliced_buffer}

if __name__ == "__main__":
    CASES[sys.argv[3]]()
    sys.exit(1 if failures else 0)
