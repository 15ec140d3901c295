#!/usr/bin/env python3
"""Issue 10, nn.GroupNorm as torch.onnx writes it (src/canon/fuse.c
m_group_norm): Reshape(x, [0, G, -1]) -> InstanceNormalization(ones(G),
zeros(G)) -> Reshape(Shape(x)) -> Mul(weight) -> Add(bias) is the one
native_group_norm PyTorch ran.

usage: test_issue10_gapB.py MEMEST SOURCE_ROOT CASE

crafted: the chain (opset 13: weight and bias behind Unsqueeze with an axes
  input; opset 11: Unsqueeze with an axes attribute; constant-folded
  [C, 1, 1] weight and bias) and one GroupNormalization node give the same
  rows, params and peaks (batch 1 and 8; no_grad, grad, SGD, Adam), and the
  exporter's ones and zeros are no parameters.
unet: the diffusion UNet's committed exports (models/onnx/variants) count
  PyTorch's parameters and agree with each other, and their SGD and Adam
  peaks are within 2 % of PyTorch's (golden/truth/memory/diffusion_unet.json).
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
TMP = tempfile.mkdtemp(prefix="memest-i10-gn-")
MODES = [("no_grad", []), ("grad", ["--grad"]), ("sgd", ["--train", "--optimizer", "sgd"]),
         ("adam", ["--train", "--optimizer", "adam"])]
C, G = 64, 8


def report(f, *args):
    rc, out, err = run(f, "--runtime", "cpu", "--format", "json", *args)
    check(rc == 0, f"[{os.path.basename(f)} {' '.join(args)}] exit {rc}: {err.strip()[-300:]}")
    return json.loads(out) if rc == 0 else None


def facts(f):
    d = report(f)
    if not d:
        return None
    r = {"rows": [l["op"] for l in d["layers"]], "params": d["totals"]["params"]}
    for b in (1, 8):
        for m, a in MODES:
            e = report(f, "--batch", str(b), *a)
            r[f"b{b}/{m}"] = [s["peak"] for s in e["memory"]["steps"]] if e else None
    return r


def floats(name, dims, v):
    n = 1
    for x in dims:
        n *= x
    return oc.tensor(name, dims, raw=struct.pack(f"<{n}f", *([v] * n)))


def const(name, t):
    return oc.node("Constant", [], [name], name=name, attrs=[oc.attr_tensor("value", t)])


def write(name, form):
    """h = x · s (a parameter, so autograd records), then GroupNorm(G, C) of h."""
    inits = [floats("s", [C, 1, 1], 1.0)]
    nodes = [oc.node("Mul", ["x", "s"], ["h"], name="scale")]
    opset = 13
    if form == "canonical":
        opset = 18
        inits += [floats("gw", [C], 1.0), floats("gb", [C], 0.5)]
        nodes.append(oc.node("GroupNormalization", ["h", "gw", "gb"], ["y"], name="gn",
                             attrs=[oc.attr_int("num_groups", G), oc.attr_float("epsilon", 1e-5)]))
    else:
        nodes += [const("shp", oc.tensor("shp", [3], oc.INT64, oc.int64_raw([0, G, -1]))),
                  oc.node("Reshape", ["h", "shp"], ["r1"], name="r1"),
                  const("ones", floats("ones", [G], 1.0)), const("zeros", floats("zeros", [G], 0.0)),
                  oc.node("InstanceNormalization", ["r1", "ones", "zeros"], ["in"], name="in",
                          attrs=[oc.attr_float("epsilon", 1e-5)]),
                  oc.node("Shape", ["h"], ["hs"], name="hs"),
                  oc.node("Reshape", ["in", "hs"], ["r2"], name="r2")]
        if form == "folded":
            inits += [floats("gw", [C, 1, 1], 1.0), floats("gb", [C, 1, 1], 0.5)]
            w, b = "gw", "gb"
        else:
            inits += [floats("gw", [C], 1.0), floats("gb", [C], 0.5)]
            w, b = "uw", "ub"
            if form == "unsqueeze13":
                nodes += [const("ax", oc.tensor("ax", [2], oc.INT64, oc.int64_raw([1, 2]))),
                          oc.node("Unsqueeze", ["gw", "ax"], ["uw"], name="uw")]
            else:
                opset = 11
                nodes.append(oc.node("Unsqueeze", ["gw"], ["uw"], name="uw", attrs=[oc.attr_ints("axes", [1, 2])]))
        nodes.append(oc.node("Mul", ["r2", w], ["m"], name="m"))
        if form == "unsqueeze13":
            nodes += [const("ax2", oc.tensor("ax2", [2], oc.INT64, oc.int64_raw([1, 2]))),
                      oc.node("Unsqueeze", ["gb", "ax2"], ["ub"], name="ub")]
        elif form == "unsqueeze11":
            nodes.append(oc.node("Unsqueeze", ["gb"], ["ub"], name="ub", attrs=[oc.attr_ints("axes", [1, 2])]))
        nodes.append(oc.node("Add", ["m", b], ["y"], name="gn"))
    g = oc.graph(nodes, [oc.value_info("x", ["batch", C, 16, 16])], [oc.value_info("y", [])], inits)
    p = os.path.join(TMP, name + ".onnx")
    with open(p, "wb") as f:
        f.write(oc.model(g, opset))
    return p


def case_crafted():
    ref = facts(write("canonical", "canonical"))
    check(ref and ref["rows"] == ["Mul", "GroupNormalization"], f"[canonical] rows {ref and ref['rows']}")
    check(ref and ref["params"] == 3 * C, f"[canonical] params {ref and ref['params']}, expected {3 * C}")
    for form in ("unsqueeze13", "unsqueeze11", "folded"):
        got = facts(write(form, form))
        for k in ref or {}:
            check(got and got[k] == ref[k], f"[{form}] {k}: {got and got[k]} != GroupNormalization's {ref[k]}")


def case_unet():
    man = json.load(open(path("golden", "truth", "variants.json")))
    truth = json.load(open(path("golden", "truth", "memory", "diffusion_unet.json")))
    peaks = {}
    for fn, e in sorted(man["variants"].items()):
        if e["model"] != "diffusion_unet":
            continue
        f = path("models", "onnx", "variants", fn)
        ins = [a for i in e["inputs"] for a in ("--input", "%s=%s:%s" % (i["name"], "x".join(map(str, i["shape"])), i["dtype"]))]
        d = report(f, *ins)
        check(d and d["totals"]["params"] == truth["params"],
              f"[{fn}] params {d and d['totals']['params']} != PyTorch's {truth['params']}")
        for b in (1, 8):
            for m, opt in (("train_sgd", "sgd"), ("train_adam", "adam")):
                r = report(f, *ins, "--batch", str(b), "--train", "--optimizer", opt, "--loss", "mse")
                if not r:
                    continue
                t = truth["batches"][str(b)][m]
                for i, (s, w) in enumerate(zip(r["memory"]["steps"], [t["step1"]["peak"], t["step2"]["peak"]])):
                    err = (s["peak"] - w) / w
                    print(f"{fn} b{b} {m} step{i + 1}: predicted {s['peak']} PyTorch {w} ({100 * err:+.2f} %)")
                    check(abs(err) <= 0.02, f"[{fn} b{b} {m} step{i + 1}] {s['peak']} vs PyTorch {w}: {100 * err:+.2f} %")
                    peaks.setdefault((b, m, i), set()).add(s["peak"])
    check(peaks and all(len(v) == 1 for v in peaks.values()), f"variants disagree: {peaks}")


{"crafted": case_crafted, "unet": case_unet}[CASE]()
sys.exit(1 if failures else 0)
