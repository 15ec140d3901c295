#!/usr/bin/env python3
"""Issue 10, static dims: --batch and --input re-bind the dims a fixed-size
export (torch.onnx.export's default) bakes in, where they provably flow from
the input, and stop naming the node and the re-export fix where a constant
bakes them in unprovably. Real exports from tests/bind/export_static.py
(models/onnx/static/): each static file's figures at the re-bound sizes must
equal those of the dynamic-axes export of the same module, and its output
shape PyTorch's (truth.json); crafted files check each rewrite by hand.

usage: test_issue10_bind.py MEMEST ROOT CASE"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_craft as oc  # noqa: E402
from harness import check, failures, path, run  # noqa: E402

CASE = sys.argv[3]
STATIC = path("models", "onnx", "static")
TRUTH = json.load(open(os.path.join(STATIC, "truth.json")))["models"]
TMP = tempfile.mkdtemp(prefix="memest-bind-")
MODES = [[], ["--grad"], ["--train", "--optimizer", "adam"]]


def report(f, *args):
    rc, out, err = run(f, *args, "--format", "json", "--runtime", "cpu")
    check(rc == 0, f"{os.path.basename(f)} {' '.join(args)}: exit {rc}: {err.strip()}")
    return json.loads(out) if rc == 0 else None


def same_as_dynamic(name, args, modes=MODES, totals=("params", "macs")):
    """The static export re-bound by args predicts what the dynamic one does."""
    for mode in modes:
        a = report(os.path.join(STATIC, name + "_static.onnx"), *args, *mode)
        b = report(os.path.join(STATIC, name + "_dyn.onnx"), *args, *mode)
        if not a or not b:
            continue
        label = f"{name} {' '.join(args + mode)}"
        for k in totals:
            check(a["totals"][k] == b["totals"][k], f"{label}: {k} {a['totals'][k]} static, {b['totals'][k]} dynamic")
        pa = [s["peak"] for s in a["memory"]["steps"]]
        pb = [s["peak"] for s in b["memory"]["steps"]]
        check(pa == pb, f"{label}: peaks {pa} static, {pb} dynamic")


def out_shape(name, args, key):
    d = report(os.path.join(STATIC, name + "_static.onnx"), *args)
    want = TRUTH[name]["output_shapes"][key]
    got = d and [l["output_shape"] for l in d["layers"] if l["node"] and l.get("output_shape")][-1]
    check(got == want, f"{name} {' '.join(args)}: output {got}, PyTorch {want}")


def expect_bad(f, args, words):
    rc, out, err = run(f, *args)
    check(rc == 2, f"{os.path.basename(f)} {' '.join(args)}: exit {rc}, expected 2 ({err.strip()})")
    for w in words:
        check(w in err, f"{os.path.basename(f)} {' '.join(args)}: '{w}' not in: {err.strip()}")


def case_batch():
    """--batch 8 on exports at batch 1: torchvision resnet18, a token
    encoder whose Reshapes bake the batch, a net whose Resize sizes are
    computed from the input's shape."""
    same_as_dynamic("resnet18", ["--batch", "8"])
    out_shape("resnet18", ["--batch", "8"], "8x3x224x224")
    same_as_dynamic("tiny_enc", ["--input", "64", "--batch", "8"], totals=("params", "macs", "flops"))
    out_shape("tiny_enc", ["--batch", "8"], "8x64")
    same_as_dynamic("tiny_up", ["--input", "3x224x224", "--batch", "8"], modes=MODES[:2])
    out_shape("tiny_up", ["--batch", "8"], "8x3x224x224")
    out_shape("tiny_pos", ["--batch", "8"], "8x64")
    # a full shape re-binds the batch too; --max-batch re-binds it again
    out_shape("resnet18", ["--input", "8x3x224x224"], "8x3x224x224")
    d = report(os.path.join(STATIC, "resnet18_static.onnx"), "--train", "--gpu", "rtx3090", "--max-batch")
    mb = d and d["device"]["max_batch"]["batch"]
    check(mb and mb > 1, f"--max-batch on a batch-1 export: {mb}")


def case_size():
    """Another image size and sequence length on exports fixed at 224x224
    and 64 tokens: the Reshapes [1, 64, 4, 16] / [1, 64, 64] carry batch
    and sequence and are re-written."""
    same_as_dynamic("resnet18", ["--input", "2x3x320x256"], modes=MODES[:2])
    out_shape("resnet18", ["--input", "2x3x320x256"], "2x3x320x256")
    same_as_dynamic("tiny_enc", ["--input", "96", "--batch", "8"], totals=("params", "macs", "flops"))
    out_shape("tiny_enc", ["--input", "96", "--batch", "8"], "8x96")


def case_unprovable():
    """A constant the input does not reach: the position table sliced to 64
    (pos[:, :T]) and interpolate(size=(112, 112)); the channels are never
    re-bound."""
    expect_bad(os.path.join(STATIC, "tiny_pos_static.onnx"), ["--input", "96"],
               ["node '/Add'", "dim 1 is 64 in the export, 96 here", "dynamic_axes", "at the size you want"])
    expect_bad(os.path.join(STATIC, "tiny_up_static.onnx"), ["--input", "3x256x256"],
               ["node '/Resize'", "its sizes '", "axis 2 at 112", "dim 2 is 224 in the export, 256 here", "dynamic_axes"])
    expect_bad(os.path.join(STATIC, "resnet18_static.onnx"), ["--input", "4x224x224"],
               ["dim 1 is 3 in the model, not 4", "channels"])


def write(name, m):
    p = os.path.join(TMP, name)
    with open(p, "wb") as fh:
        fh.write(m)
    return p


def ints(name, vals):
    return oc.tensor(name, [len(vals)], dtype=7, raw=oc.int64_raw(vals))


def case_crafted():
    """x [1, 2, 5] -> Expand to [1, 2, 5] -> Slice axis 2 [0, 5) -> Reshape
    [1, 2, 5]: each constant entry carries a dim of x, so --input 2x7
    --batch 3 gives [3, 2, 7] everywhere (worked by hand from the ONNX
    spec); Reshape [1, 10] carries the batch but not the 5: --batch 3 gives
    [3, 10], --input 2x7 stops at that node. Two inputs whose fixed dim 0
    differ cannot tell --batch which dim is the batch."""
    nodes = [oc.node("Expand", ["x", "e"], ["y1"], name="expand"),
             oc.node("Slice", ["y1", "s0", "s1", "ax"], ["y2"], name="slice"),
             oc.node("Reshape", ["y2", "r"], ["y3"], name="reshape"),
             oc.node("Reshape", ["y3", "flat"], ["y4"], name="flatten")]
    inits = [ints("e", [1, 2, 5]), ints("s0", [0]), ints("s1", [5]), ints("ax", [2]), ints("r", [1, 2, 5]), ints("flat", [1, 10])]
    f = write("chain.onnx", oc.model(oc.graph(nodes, [oc.value_info("x", [1, 2, 5])], [oc.value_info("y4", [])], inits), 17))
    d = report(f, "--batch", "3")
    got = d and {l["node"]: l["output_shape"] for l in d["layers"]}
    want = {"expand": [3, 2, 5], "slice": [3, 2, 5], "reshape": [3, 2, 5], "flatten": [3, 10]}
    check(got and all(got.get(k) == v for k, v in want.items()), f"chain --batch 3: {got}, expected {want}")
    expect_bad(f, ["--input", "2x7", "--batch", "3"], ["node 'flatten'", "cannot reshape 3x2x7", "dim 2 is 5 in the export, 7 here"])
    nodes[3] = oc.node("Identity", ["y3"], ["y4"], name="flatten")
    f = write("chain2.onnx", oc.model(oc.graph(nodes, [oc.value_info("x", [1, 2, 5])], [oc.value_info("y4", [])], inits[:-1]), 17))
    d = report(f, "--input", "2x7", "--batch", "3")
    got = d and {l["node"]: l["output_shape"] for l in d["layers"]}
    want = {"expand": [3, 2, 7], "slice": [3, 2, 7], "reshape": [3, 2, 7]}
    check(got and all(got.get(k) == v for k, v in want.items()), f"chain --input 2x7 --batch 3: {got}, expected {want}")
    two = write("two.onnx", oc.model(oc.graph([oc.node("Add", ["a", "b"], ["c"], name="add")],
                                              [oc.value_info("a", [1, 4]), oc.value_info("b", [4, 4])], [oc.value_info("c", [])]), 17))
    expect_bad(two, ["--batch", "8"], ["--batch 8", "inputs 'a' and 'b'", "(1 and 4)", "--input NAME="])


def case_loop():
    """The seed's loop, `outputs = model(inputs)` again without no_grad:
    --grad reports the first call and the steady state, whose forward runs
    beside the last call's output and autograd graph. Truth: PyTorch on
    this CPU, tests/oracle/measure_loop.py (golden/truth/loop); within 2 %
    on both calls, and the steady state starts where call 1 ended."""
    import glob
    files = sorted(glob.glob(path("golden", "truth", "loop", "*.json")))
    check(len(files) >= 4, f"golden/truth/loop has {len(files)} files")
    for tf in files:
        t = json.load(open(tf))
        name, b = t["model"], t["batch"]
        spec = []
        for i in json.load(open(path("golden", "truth", "memory", name + ".json")))["inputs"]:
            spec += ["--input", "%s=%s:%s" % (i["name"], "x".join(map(str, i["shape"])), i["dtype"])]
        d = report(path("models", "onnx", "zoo", name + ".onnx"), *spec, "--batch", str(b), "--grad")
        steps = d["memory"]["steps"] if d else []
        check(len(steps) == 2, f"{name} b{b} --grad: {len(steps)} step(s), expected the first call and the steady state")
        for got, want in zip(steps, t["steps"]):
            err = (got["peak"] - want["peak"]) / want["peak"]
            print(f"{name} b{b} call {want['step']}: measured {want['peak'] / 2**20:.2f} MiB, "
                  f"predicted {got['peak'] / 2**20:.2f} MiB, {100 * err:+.2f} %")
            check(abs(err) <= 0.02, f"{name} b{b} call {want['step']}: {100 * err:+.2f} %")
        if len(steps) == 2:
            check(steps[1]["baseline"] == steps[0]["end"], f"{name} b{b}: call 2 starts at {steps[1]['baseline']}, call 1 ended at {steps[0]['end']}")


def case_computed():
    """Shapes computed in the graph (tests/bind/export_bind.py): the
    grouped-query attention's repeat_interleave expands a constant and
    splits it (Expand and Split of constants fold), then Expands each chunk
    to that computed shape; a diffusion-style up block's training export
    computes its Resize sizes from Shape slices. Output shapes and
    parameters against PyTorch (models/onnx/bind/truth.json), all modes run."""
    truth = json.load(open(path("models", "onnx", "bind", "truth.json")))["models"]
    for name, args, key in (("gqa_repeat", ["--input", "16x64", "--batch", "4"], "4x16x64"),
                            ("unet_up_train", ["--input", "3x32x32", "--batch", "4"], "4x3x32x32")):
        f = path("models", "onnx", "bind", name + ".onnx")
        for mode in MODES:
            d = report(f, *args, *mode)
            if not d:
                continue
            got = [l["output_shape"] for l in d["layers"] if l.get("output_shape")][-1]
            want = truth[name]["output_shapes"][key]
            check(got == want, f"{name} {' '.join(mode)}: output {got}, PyTorch {want}")
    d = report(path("models", "onnx", "bind", "gqa_repeat.onnx"), "--input", "16x64", "--batch", "4")
    check(d and d["totals"]["params"] == truth["gqa_repeat"]["params"],
          f"gqa_repeat params {d and d['totals']['params']}, PyTorch {truth['gqa_repeat']['params']}")


CASES = {"computed": case_computed, "loop": case_loop, "batch": case_batch, "size": case_size, "unprovable": case_unprovable, "crafted": case_crafted}

if __name__ == "__main__":
    CASES[CASE]()
    print(f"{CASE}: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
