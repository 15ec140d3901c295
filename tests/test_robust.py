#!/usr/bin/env python3
"""ONNX files written in common ways memest once refused or miscounted
(models/onnx/robust/, made by tests/robust/make_robust.py with torch 1.13;
truth from PyTorch in models/onnx/robust/truth.json):

  weights_inputs  export_params=False: weights are graph inputs without
                  data; they count as parameters and buffers (PyTorch's
                  numbers), a note weights_as_inputs says so, and --input
                  binds only the data inputs
  dedup           deduplicated initializers: one nn.Linear called twice is
                  one tensor; two equal layers are stored once by an eval
                  export, counted as the file holds them, and the note
                  deduplicated_initializers gives the difference to PyTorch
  reduce          sizes computed by ReduceMin/Max/Sum/Prod (torchvision's
                  detection transform) are evaluated, not refused
  subgraph        weights read only inside If/Loop bodies count once, also
                  when they are graph inputs without data
  ops             GridSample, RoiAlign, LpNormalization: known ops, output
                  shapes as PyTorch's
  ops_memory      GridSample's, LpNormalization's and RoiAlign's forward and
                  training peaks against torch's CPU measurement, within 1 %

usage: test_robust.py MEMEST SOURCE_ROOT CASE
"""
import json
import os
import re
import subprocess
import sys

MEMEST, ROOT, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
DIR = os.path.join(ROOT, "models", "onnx", "robust")
TRUTH = json.load(open(os.path.join(DIR, "truth.json")))["models"]
fails = 0


def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok


def run(name, *args):
    r = subprocess.run([MEMEST, os.path.join(DIR, name + ".onnx"), "--format", "json"] + list(args), capture_output=True, text=True)
    doc = None
    if r.returncode == 0:
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            pass
    return r.returncode, doc, r.stderr


def notes(doc, code):
    return [n["text"] for n in doc["notes"] if n["code"] == code] if doc else []


def output_shapes(doc, names):
    """Shapes memest gives the graph outputs named."""
    got = {}
    for layer in doc["layers"] if doc else []:
        for o in layer.get("outputs", []):
            got[o["name"]] = o.get("shape")
    return [got.get(n) for n in names]


def case_weights_inputs():
    for name in ("noparams_tiny_train", "noparams_mlp3d_eval", "noparams_resnet18_train", "noparams_identity"):
        t = TRUTH[name]
        rc, doc, err = run(name)
        check(rc == 0 and doc is not None, f"{name}: loads (rc {rc}) {err.strip()[-200:]}")
        if not doc:
            continue
        check(doc["totals"]["params"] == t["params"], f"{name}: params {doc['totals']['params']} vs PyTorch {t['params']}")
        check(doc["totals"].get("buffers", 0) == t["buffers"], f"{name}: buffers {doc['totals'].get('buffers')} vs PyTorch {t['buffers']}")
        check(len(doc["inputs"]) == 1, f"{name}: one data input, got {[i['name'] for i in doc['inputs']]}")
        check(len(notes(doc, "weights_as_inputs")) == 1, f"{name}: note weights_as_inputs")
        check(output_shapes(doc, t["output_names"]) == t["outputs"], f"{name}: outputs {output_shapes(doc, t['output_names'])} vs {t['outputs']}")
    # an eval export folds BatchNorm into the convolutions: the weights are
    # still inputs, and the canonicalization sees them as stored weights
    rc, doc, err = run("noparams_resnet18_eval", "--input", "input.1=3x32x32", "--batch", "2")
    check(rc == 0 and doc and [i["name"] for i in doc["inputs"]] == ["input.1"] and doc["inputs"][0]["shape"] == [2, 3, 32, 32],
          f"resnet18 eval: --input binds the data input only: rc {rc} {err.strip()[-200:]}")
    check(len(notes(doc, "weights_as_inputs")) == 1 and len(notes(doc, "folded_batchnorm")) == 1,
          f"resnet18 eval: notes weights_as_inputs and folded_batchnorm: {[n['code'] for n in doc['notes']] if doc else None}")
    rc, doc, err = run("noparams_resnet18_eval", "--input", "fc.weight=3x3")
    check(rc == 2 and "fc.weight" in err and "input.1" in err, f"binding a weight is refused, naming the inputs: rc {rc} {err.strip()}")
    # two data inputs multiplied are no weights
    rc, doc, err = run("noparams_ab")
    check(rc == 0 and doc and len(doc["inputs"]) == 2 and doc["totals"]["params"] == 0 and not notes(doc, "weights_as_inputs"),
          f"a @ b: two inputs, no parameters: rc {rc} {doc['inputs'] if doc else err.strip()}")


def case_dedup():
    for name, t in sorted(TRUTH.items()):
        if not name.startswith("dedup_"):
            continue
        rc, doc, err = run(name)
        check(rc == 0 and doc is not None, f"{name}: loads (rc {rc}) {err.strip()[-200:]}")
        if not doc:
            continue
        params, texts = doc["totals"]["params"], notes(doc, "deduplicated_initializers")
        if name == "dedup_bn_eval":
            more = [int(m) for m in re.findall(r"(\d+) more parameters and (\d+) more buffer elements", " ".join(texts))[0]] if texts else [0, 0]
            check(len(texts) == 1 and params + more[0] == t["params"] and doc["totals"].get("buffers", 0) + more[1] == t["buffers"],
                  f"{name}: {params} params, {doc['totals'].get('buffers', 0)} buffers + the note's {more} vs PyTorch {t['params']}, {t['buffers']}")
        elif name.startswith("dedup_same_eval"):
            # the file holds each equal pair once; the note states the rest
            more = [int(m) for m in re.findall(r"(\d+) more parameters", " ".join(texts))]
            upto = [int(m) for m in re.findall(r"up to (\d+) more elements", " ".join(texts))]
            check(params + sum(more) <= t["params"] <= params + sum(more) + sum(upto) and len(texts) == 1,
                  f"{name}: {params} counted + {more} (up to {upto}) more in the note vs PyTorch {t['params']}")
            check(params * 2 == t["params"], f"{name}: the file's tensors once each: {params} (PyTorch {t['params']}, every tensor twice)")
        else:
            check(params == t["params"] and not texts, f"{name}: params {params} vs PyTorch {t['params']}, no note: {texts}")


def case_reduce():
    rc, doc, err = run("reduce_det_transform")
    t = TRUTH["reduce_det_transform"]
    check(rc == 0 and doc is not None, f"detection transform: loads (rc {rc}) {err.strip()[-300:]}")
    check(doc is not None and output_shapes(doc, t["output_names"]) == t["outputs"] and doc["totals"]["params"] == t["params"],
          f"detection transform: output {output_shapes(doc, t['output_names'])} vs PyTorch {t['outputs']}")
    t = TRUTH["reduce_sizes"]
    rc, doc, err = run("reduce_sizes", "--input", "x=2x3x4", "--input", "y=5x2")
    check(rc == 0 and output_shapes(doc, t["output_names"]) == t["outputs"],
          f"ReduceProd/Sum/Max/Min of shapes: rc {rc} {output_shapes(doc, t['output_names'])} vs PyTorch {t['outputs']} {err.strip()[-300:]}")
    # another binding: the folded sizes follow it
    rc, doc, err = run("reduce_sizes", "--input", "x=3x5x2", "--input", "y=4x2")
    check(rc == 0 and output_shapes(doc, t["output_names"]) == [[3, 10], [6, 2]], f"re-bound: rc {rc} {output_shapes(doc, t['output_names'])}")
    rc, doc, err = run("reduce_overflow")
    check(rc == 2 and "node '/numel/ReduceProd' (ReduceProd)" in err and "overflow" in err,
          f"a product of sizes past int64 is refused, naming the node: rc {rc} {err.strip()}")


def case_subgraph():
    for name, extra in (("subgraph_if", []), ("subgraph_loop", ["--input", "x.1=2x8"]), ("subgraph_nested", ["--input", "x.1=2x8"]),
                        ("subgraph_if_noparams", [])):
        t = TRUTH[name]
        rc, doc, err = run(name, *extra)
        check(rc == 0 and doc is not None and doc["totals"]["params"] == t["params"],
              f"{name}: params {doc['totals']['params'] if doc else None} vs PyTorch {t['params']} (rc {rc}) {err.strip()[-200:]}")
    # weights as inputs that only the bodies read: the bodies' Gemm slots say so
    rc, doc, err = run("subgraph_if_noparams")
    check(doc is not None and [i["name"] for i in doc["inputs"]] == ["x.1"] and len(notes(doc, "weights_as_inputs")) == 1,
          f"subgraph_if_noparams: one data input and the note: {doc['inputs'] if doc else err.strip()}")


def case_ops():
    for name, op in (("op_grid_sample", "GridSample"), ("op_roi_align", "RoiAlign"), ("op_lp_normalization", "LpNormalization")):
        t = TRUTH[name]
        rc, doc, err = run(name, "--strict")
        check(rc == 0 and doc is not None, f"{name}: {op} is known (--strict, rc {rc}) {err.strip()[-200:]}")
        if not doc:
            continue
        check(output_shapes(doc, t["output_names"]) == t["outputs"], f"{name}: output {output_shapes(doc, t['output_names'])} vs PyTorch {t['outputs']}")
        check(doc["totals"]["params"] == t["params"], f"{name}: params {doc['totals']['params']} vs PyTorch {t['params']}")
        row = [l for l in doc["layers"] if l["op"] == op]
        check(len(row) == 1 and row[0]["status"] == "counted" and (op == "GridSample") <= (row[0]["flops"] > 0),
              f"{name}: one {op} row, counted: {row}")
        # training: the op's backward runs (its saved tensors), nothing refused
        rc, doc, err = run(name, "--train", "--optimizer", "sgd")
        check(rc == 0 and doc is not None, f"{name}: --train (rc {rc}) {err.strip()[-200:]}")

    for name, node, what in (("bad_grid_sample", "/warp/GridSample", "grid"), ("bad_roi_align", "/pool/RoiAlign", "rois"),
                             ("bad_lp_normalization", "/norm/LpNormalization", "p is 3")):
        rc, doc, err = run(name)
        check(rc == 2 and f"node '{node}'" in err and what in err and name in err, f"{name}: refused naming file, node and field: rc {rc} {err.strip()}")


def case_ops_memory():
    """GridSample, LpNormalization and RoiAlign in a Conv, op, pool, Linear stack:
    memest --runtime cpu against torch's CPU peaks (golden/truth/robust_ops,
    tests/oracle/measure_robust_ops.py), every cell within 1 %."""
    modes = {"infer_nograd": [], "infer_grad": ["--grad"], "train_sgd": ["--train", "--optimizer", "sgd", "--loss", "cross-entropy"]}
    for name in ("grid_sample", "lp_normalization", "roi_align"):
        t = json.load(open(os.path.join(ROOT, "golden", "truth", "robust_ops", name + ".json")))
        for b, e in sorted(t["batches"].items()):
            for mode, extra in modes.items():
                rc, doc, err = run("mem_" + name, "--batch", b, "--runtime", "cpu", *extra)
                if not doc:
                    check(False, f"{name} b{b} {mode}: rc {rc} {err.strip()[-200:]}")
                    continue
                steps = doc["memory"]["steps"]
                want = [e[mode]["step1"]["peak"], e[mode]["step2"]["peak"]] if mode.startswith("train") else [e[mode]["peak"]]
                for i, w in enumerate(want):
                    err_pct = 100 * (steps[i]["peak"] - w) / w
                    check(abs(err_pct) <= 1, f"{name} b{b} {mode} step {i + 1}: {steps[i]['peak']} B vs {w} B ({err_pct:+.2f} %)")


CASES = {"weights_inputs": case_weights_inputs, "dedup": case_dedup, "reduce": case_reduce, "subgraph": case_subgraph, "ops": case_ops,
         "ops_memory": case_ops_memory}
CASES[CASE]()
print("%d failure(s)" % fails)
sys.exit(1 if fails else 0)
