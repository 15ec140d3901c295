"""Op-level defects of issue 12, each on an ONNX file crafted the way
PyTorch's exporter writes the pattern (tests/onnx_craft.py, no onnx
package). Expected shapes are worked by hand from the ONNX spec.

usage: test_issue12_ops.py MEMEST ROOT CASE
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402

MEMEST, ROOT, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
BOOL = 9
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def run(path, *args):
    p = subprocess.run([MEMEST, path, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write(name, data):
    p = os.path.join(tempfile.mkdtemp(prefix="memest-i12-"), name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def shapes(path, *args):
    """Output shape of every layer by node name; None when memest fails."""
    rc, out, err = run(path, *args, "--format", "json")
    check(rc == 0, f"{os.path.basename(path)}: exit {rc}: {err.strip()[-400:]}")
    if rc != 0:
        return {}
    return {layer["node"]: layer["output_shape"] for layer in json.loads(out)["layers"]}


def expect_bad(path, words, label):
    rc, out, err = run(path)
    check(rc == 2, f"[{label}] exit {rc}, expected 2; stderr: {err.strip()}")
    for w in words:
        check(w in err, f"[{label}] message lacks '{w}': {err.strip()}")
    check("runtime error" not in err and "AddressSanitizer" not in err, f"[{label}] sanitizer report")


# --- crafting helpers beyond onnx_craft: tensors with data, more attribute types ---

attr_float, attr_str, attr_tensor = oc.attr_float, oc.attr_str, oc.attr_tensor


def i64(name, values, dims=None):
    return oc.tensor(name, [len(values)] if dims is None else dims, oc.INT64, oc.int64_raw(values))


def f32(name, values, dims=None):
    return oc.tensor(name, [len(values)] if dims is None else dims, oc.FLOAT, b"".join(struct.pack("<f", v) for v in values))


class G:
    """A graph under construction: nodes named after their output."""

    def __init__(self, opset):
        self.opset, self.nodes, self.k = opset, [], 0

    def op(self, op, inputs, attrs=(), out=None, n_out=1):
        self.k += 1
        outs = [out or f"{op.lower()}{self.k}"] if n_out == 1 else [f"{op.lower()}{self.k}_{i}" for i in range(n_out)]
        self.nodes.append(oc.node(op, inputs, outs, name=outs[0], attrs=attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, t_builder, values, dims=None):
        self.k += 1
        name = f"const{self.k}"
        self.nodes.append(oc.node("Constant", [], [name], name=name, attrs=[attr_tensor("value", t_builder(name, values, dims))]))
        return name

    def scalar(self, v):
        return self.const(i64, [v], [])

    def unsqueeze0(self, x):
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const(i64, [0])])
        return self.op("Unsqueeze", [x], [oc.attr_ints("axes", [0])])

    def slice(self, x, starts, ends, axes, steps=None):
        if self.opset < 10:
            return self.op("Slice", [x], [oc.attr_ints("starts", starts), oc.attr_ints("ends", ends), oc.attr_ints("axes", axes)])
        ins = [x, self.const(i64, starts), self.const(i64, ends), self.const(i64, axes)]
        return self.op("Slice", ins + ([self.const(i64, steps)] if steps else []))

    def model(self, inputs, outputs):
        return oc.model(oc.graph(self.nodes, inputs, [oc.value_info(o, []) for o in outputs]), self.opset)


def remainder(g, a, b):
    """aten::remainder on int64 scalars as symbolic_opset9 writes it: a
    floor division (Div, then a fix-up for operands of opposite sign),
    Mul, Sub."""
    zero, one = g.scalar(0), g.scalar(1)
    div = g.op("Div", [a, b])
    negative = g.op("Xor", [g.op("Less", [a, zero]), g.op("Less", [b, zero])])
    mod = g.op("Sub", [a, g.op("Mul", [div, b])])
    fixup_mask = g.op("And", [negative, g.op("Not", [g.op("Equal", [mod, zero])])])
    fixup = g.op("Mul", [g.op("Cast", [fixup_mask], [oc.attr_int("to", oc.INT64)]), one])
    floor_div = g.op("Sub", [div, fixup])
    return g.op("Sub", [a, g.op("Mul", [floor_div, b])])


def swin_pad_model(opset, h, w, window):
    """torchvision swin_t's window padding, x: [1, h, w, 4] (B, H, W, C):
        pad_r = (window - W % window) % window
        pad_b = (window - H % window) % window
        F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    H and W are traced from x.shape, so the pads are computed in the graph,
    then turned into ONNX's pads by symbolic_opset11._prepare_onnx_paddings:
    Concat with zeros, Reshape to [-1, 2], flip (Slice with step -1 on axis 0
    of that rank-2 tensor), Transpose, Reshape to [-1], Cast."""
    g = G(opset)
    shape = g.op("Shape", ["x"])
    win = g.scalar(window)
    pads = {}
    for name, axis in (("H", 1), ("W", 2)):
        d = g.op("Gather", [shape, g.scalar(axis)], [oc.attr_int("axis", 0)])
        pads[name] = remainder(g, g.op("Sub", [win, remainder(g, d, win)]), win)
    # the list (0, 0, 0, pad_r, 0, pad_b): prim::ListConstruct of scalars
    items = [g.scalar(0), g.scalar(0), g.scalar(0), pads["W"], g.scalar(0), pads["H"]]
    pad = g.op("Concat", [g.unsqueeze0(i) for i in items], [oc.attr_int("axis", 0)])
    # _prepare_onnx_paddings
    pad_len = g.op("Gather", [g.op("Shape", [pad]), g.const(i64, [0])], [oc.attr_int("axis", 0)])
    extension = g.op("Sub", [g.op("Mul", [g.scalar(4), g.scalar(2)]), pad_len])
    pad = g.op("Cast", [pad], [oc.attr_int("to", oc.INT64)])
    zeros = g.op("ConstantOfShape", [extension], [attr_tensor("value", i64("v", [0]))])
    paddings = g.op("Concat", [pad, zeros], [oc.attr_int("axis", 0)])
    paddings = g.op("Reshape", [paddings, g.const(i64, [-1, 2])])
    paddings = g.slice(paddings, [-1], [-INT64_MAX], [0], [-1])  # opset10.flip
    paddings = g.op("Transpose", [paddings], [oc.attr_ints("perm", [1, 0])])
    paddings = g.op("Reshape", [paddings, g.const(i64, [-1])])
    paddings = g.op("Cast", [paddings], [oc.attr_int("to", oc.INT64)])
    g.op("Pad", ["x", paddings, g.const(f32, [0.0], [])], [attr_str("mode", "constant")], out="padded")
    return g.model([oc.value_info("x", [1, h, w, 4])], ["padded"])


def case_swin_pad():
    # H 9, W 10, window 7: pad_b = (7 - 2) % 7 = 5, pad_r = (7 - 3) % 7 = 4;
    # pads = [0, 0, 0, 0, 0, 5, 4, 0] (begins, then ends, axes 0..3)
    for opset in (11, 13, 17):
        s = shapes(write(f"swin_pad_{opset}.onnx", swin_pad_model(opset, 9, 10, 7)))
        check(s.get("padded") == [1, 14, 14, 4], f"opset {opset}: padded {s.get('padded')}, expected [1, 14, 14, 4]")
    # already a multiple of the window: every pad is 0
    s = shapes(write("swin_pad_even.onnx", swin_pad_model(17, 14, 7, 7)))
    check(s.get("padded") == [1, 14, 7, 4], f"no padding: {s.get('padded')}, expected [1, 14, 7, 4]")


def case_slice_fold():
    """Slice, Transpose, Gather and Concat evaluated on rank-2 and rank-3
    int64 constants; the result is the target of a Reshape, which needs it."""
    g = G(17)
    # c = arange(24).reshape(2, 3, 4)
    c = g.const(i64, list(range(24)), [2, 3, 4])
    # c[1, ::-2, 1:3] = [[21, 22], [13, 14]]; flattened: 21 22 13 14
    s = g.slice(c, [1, INT64_MAX, 1], [2, INT64_MIN, 3], [0, 1, 2], [1, -2, 1])
    flat = g.op("Reshape", [s, g.const(i64, [-1])])
    # Gather axis 1 of [[21, 22], [13, 14]] (reshaped 2x2) at [1] = [[22], [14]]
    sq = g.op("Reshape", [flat, g.const(i64, [2, 2])])
    col = g.op("Gather", [sq, g.const(i64, [1])], [oc.attr_int("axis", 1)])
    # Transpose → [[22, 14]], Concat with [[2, 1]] on axis 0 → [[22, 14], [2, 1]]
    row = g.op("Transpose", [col], [oc.attr_ints("perm", [1, 0])])
    both = g.op("Concat", [row, g.const(i64, [2, 1], [1, 2])], [oc.attr_int("axis", 0)])
    # target = both[1] · [2, 2] = [4, 2]
    target = g.op("Mul", [g.op("Gather", [both, g.scalar(1)], [oc.attr_int("axis", 0)]), g.const(i64, [2, 2])])
    g.op("Reshape", ["x", target], out="r1")
    # both[0] reversed (Slice from INT64_MAX down to INT64_MIN, step -1) = [14, 22]
    first = g.op("Gather", [both, g.scalar(0)], [oc.attr_int("axis", 0)])
    g.op("Reshape", ["x2", g.slice(first, [INT64_MAX], [INT64_MIN], [0], [-1])], out="r2")
    m = g.model([oc.value_info("x", [8]), oc.value_info("x2", [308])], ["r1", "r2"])
    s = shapes(write("slice_fold.onnx", m))
    check(s.get("r1") == [4, 2], f"r1 {s.get('r1')}, expected [4, 2]")
    check(s.get("r2") == [14, 22], f"r2 {s.get('r2')}, expected [14, 22]")


def case_slice_bounds():
    """Slice bounds at the ends of int64 (ONNX Slice: negative bounds + dim,
    then clamped to [0, dim] for positive steps, start to [0, dim-1] and
    end to [-1, dim-1] for negative ones)."""
    rows = [
        # starts, ends, steps on axis 1 of 10x10 → expected size of axis 1
        ([-1], [INT64_MIN], [INT64_MIN], 1),   # element 9 only (numpy: x[:, -1::-2**63] has 1)
        ([0], [INT64_MAX], [INT64_MAX], 1),    # element 0 only
        ([INT64_MIN], [INT64_MAX], [1], 10),   # everything
        ([INT64_MAX], [INT64_MIN], [-1], 10),  # everything, backwards
        ([INT64_MAX], [INT64_MIN], [-3], 4),   # 9, 6, 3, 0
        ([INT64_MIN], [INT64_MIN], [-1], 1),   # start clamps to 0, end to -1: element 0
        ([5], [INT64_MIN], [INT64_MAX], 0),    # end clamps to 0, below start: empty
    ]
    for i, (st, en, sp, want) in enumerate(rows):
        g = G(17)
        g.op("Slice", ["x", g.const(i64, st), g.const(i64, en), g.const(i64, [1]), g.const(i64, sp)], out="y")
        s = shapes(write(f"slice_bounds{i}.onnx", g.model([oc.value_info("x", [10, 10])], ["y"])))
        check(s.get("y") == [10, want], f"slice starts {st} ends {en} steps {sp}: {s.get('y')}, expected [10, {want}]")


def upsample9_model(h, w, stride=8):
    """torchvision fcn_resnet50's head at opset 9: the features (stride 8,
    here one MaxPool) are resized back with
        F.interpolate(x, size=input.shape[-2:], mode="bilinear")
    which symbolic_opset9 turns into Upsample(x, scales) with scales =
    Concat(ones(2), Cast(size, float) / Cast(Slice(Shape(x), 2:), float)).
    A second Upsample has its size computed as floor(H · 2.0) the way a
    traced int(h * scale) comes out: Cast, Mul, Floor, Cast."""
    g = G(9)
    feat = g.op("MaxPool", ["x"], [oc.attr_ints("kernel_shape", [1, 1]), oc.attr_ints("strides", [stride, stride])])
    shape = g.op("Shape", ["x"])
    hw = [g.unsqueeze0(g.op("Gather", [shape, g.scalar(a)], [oc.attr_int("axis", 0)])) for a in (2, 3)]
    size = g.op("Concat", hw, [oc.attr_int("axis", 0)])

    def upsample(x, size, out):
        dividend = g.op("Cast", [size], [oc.attr_int("to", oc.FLOAT)])
        divisor = g.op("Cast", [g.slice(g.op("Shape", [x]), [2], [INT64_MAX], [0])], [oc.attr_int("to", oc.FLOAT)])
        scales = g.op("Concat", [g.const(f32, [1.0, 1.0]), g.op("Div", [dividend, divisor])], [oc.attr_int("axis", 0)])
        return g.op("Upsample", [x, scales], [attr_str("mode", "linear")], out=out)

    up = upsample(feat, size, "up")
    twice = g.op("Floor", [g.op("Mul", [g.op("Cast", [size], [oc.attr_int("to", oc.FLOAT)]), g.const(f32, [2.0], [])])])
    upsample(up, g.op("Cast", [twice], [oc.attr_int("to", oc.INT64)]), "up2")
    return g.model([oc.value_info("x", [1, 3, h, w])], ["up2"])


def case_upsample9():
    # 500x375 → MaxPool stride 8 (ceil) → 63x47 → back to 500x375 → 1000x750.
    # float32(500/63)·63 is 499.99998..: the exporter meant 500 (PyTorch's
    # interpolate gives it), and float32 cannot tell the two apart. So too
    # 425x470 at stride 3 (142x157), where 425/142·142 falls below 425 even
    # in double.
    for h, w, stride in ((224, 224, 8), (500, 375, 8), (425, 470, 3)):
        s = shapes(write(f"up9_{h}.onnx", upsample9_model(h, w, stride)))
        fh, fw = -(-h // stride), -(-w // stride)
        check(s.get("maxpool1") == [1, 3, fh, fw], f"{h}x{w}: features {s.get('maxpool1')}")
        check(s.get("up") == [1, 3, h, w], f"{h}x{w}: up {s.get('up')}, expected [1, 3, {h}, {w}]")
        check(s.get("up2") == [1, 3, 2 * h, 2 * w], f"{h}x{w}: up2 {s.get('up2')}, expected [1, 3, {2 * h}, {2 * w}]")


def case_invalid():
    """Models the ONNX spec rejects: exit 2 naming node and field."""
    # Einsum: '-' is only valid as the start of '->'
    g = G(17)
    g.op("Einsum", ["a"], [attr_str("equation", "ab-bc")], out="e")
    expect_bad(write("einsum.onnx", g.model([oc.value_info("a", [2, 3])], ["e"])), ["Einsum", "equation"], "einsum ab-bc")
    g = G(17)
    g.op("Einsum", ["a", "b"], [attr_str("equation", "ab,bc->ac,d")], out="e")
    expect_bad(write("einsum2.onnx", g.model([oc.value_info("a", [2, 3]), oc.value_info("b", [3, 4])], ["e"])),
               ["Einsum", "equation"], "einsum trailing output term")
    # Split of 4 into 3 equal parts: opset 13 requires the axis to divide evenly
    for opset in (11, 13):
        g = G(opset)
        g.nodes.append(oc.node("Split", ["x"], ["s0", "s1", "s2"], name="split", attrs=[oc.attr_int("axis", 1)]))
        expect_bad(write(f"split{opset}.onnx", g.model([oc.value_info("x", [1, 4])], ["s0", "s1", "s2"])),
                   ["split", "4", "3"], f"split 4 into 3 at opset {opset}")
    # opset 18: num_outputs, the last chunk smaller: 5 into 3 is 2, 2, 1
    g = G(18)
    g.nodes.append(oc.node("Split", ["x"], ["s0", "s1", "s2"], name="split", attrs=[oc.attr_int("axis", 1), oc.attr_int("num_outputs", 3)]))
    g.nodes.append(oc.node("Relu", ["s2"], ["r"], name="relu"))
    s = shapes(write("split18.onnx", g.model([oc.value_info("x", [1, 5])], ["s0", "s1", "r"])))
    check(s.get("split") == [1, 2] and s.get("relu") == [1, 1], f"split 5 into 3 at opset 18: {s.get('split')} / {s.get('relu')}")
    # Gather needs data of rank 1 or more (folding a scalar read past it)
    g = G(17)
    g.op("Gather", [g.scalar(5), g.const(i64, [0])], out="y")
    g.op("Reshape", ["x", "y"], out="r")
    expect_bad(write("gather_scalar.onnx", g.model([oc.value_info("x", [5])], ["r"])), ["Gather", "scalar"], "Gather of a scalar")
    # ConvTranspose: output_padding must be smaller than stride or dilation
    w = oc.tensor("w", [3, 2, 3, 3], external=True)
    for op_pad, strides, dil, ok in (([2, 0], [2, 2], [1, 1], False), ([1, 1], [1, 1], [1, 1], False),
                                     ([1, 1], [2, 2], [1, 1], True), ([1, 0], [1, 1], [2, 2], True)):
        attrs = [oc.attr_ints("output_padding", op_pad), oc.attr_ints("strides", strides), oc.attr_ints("dilations", dil)]
        m = oc.model(oc.graph([oc.node("ConvTranspose", ["x", "w"], ["y"], name="deconv", attrs=attrs)],
                              [oc.value_info("x", [1, 3, 5, 5])], [oc.value_info("y", [])], [w]), 17)
        p = write("deconv.onnx", m)
        if ok:
            # (5 - 1)·stride + dilation·(3 - 1) + 1 + output_padding
            want = [1, 2] + [4 * s + d * 2 + 1 + o for s, d, o in zip(strides, dil, op_pad)]
            got = shapes(p).get("deconv")
            check(got == want, f"ConvTranspose output_padding {op_pad} strides {strides} dilations {dil}: {got}, expected {want}")
        else:
            expect_bad(p, ["deconv", "output_padding"], f"ConvTranspose output_padding {op_pad} strides {strides} dilations {dil}")


CASES = {"swin_pad": case_swin_pad, "slice_fold": case_slice_fold, "slice_bounds": case_slice_bounds,
         "upsample9": case_upsample9, "invalid": case_invalid}

if __name__ == "__main__":
    CASES[CASE]()
    print(f"{CASE}: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
