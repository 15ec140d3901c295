"""torchvision models that once could not be analysed, at the opsets where
they failed (tests/zoo/export_extra.py: swin_t at opsets 13 and 17, whose
F.pad pads come from Slice on rank-2 shape constants; fcn_resnet50 at
opset 9, whose Upsample scales are computed in float): memest's parameter
count equals PyTorch's (the training export keeps every parameter), the
output shape equals PyTorch's, and every node output whose shape
onnx.shape_inference knows has that shape, at batches 1 and 2.

usage: test_extra_exports.py MEMEST ROOT STEM
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, failures, path, run  # noqa: E402


def main():
    stem = sys.argv[3]
    truth = json.load(open(path("golden", "truth", "extra", stem + ".json")))
    f = path("models", "onnx", "extra", stem + ".onnx")
    spec = "x".join(str(d) for d in truth["input"]["shape"])
    for b, t in truth["batches"].items():
        rc, out, err = run(f, "--input", spec, "--batch", b, "--format", "json")
        check(rc == 0, f"{stem} b{b}: exit {rc}: {err.strip()[:300]}")
        if rc:
            continue
        d = json.loads(out)
        check(d["totals"]["params"] == truth["params"], f"{stem} b{b}: params {d['totals']['params']} != PyTorch {truth['params']}")
        check(d["unknown_ops"] == {}, f"{stem} b{b}: unknown ops {d['unknown_ops']}")
        outs = {o["name"]: o["shape"] for layer in d["layers"] for o in layer["outputs"]}
        check(outs.get("output") == t["output_shape"], f"{stem} b{b}: output {outs.get('output')} != PyTorch {t['output_shape']}")
        # Constant nodes (and the shape arithmetic onnx's inference was
        # helped through) hold data, not layers: the report leaves them out
        expected = {k: v for k, v in t["value_shapes"].items() if k not in d["constants"] and k not in d.get("canonicalized_values", ())}
        compared = bad = 0
        for name, shape in expected.items():
            if name in outs:
                compared += 1
                if outs[name] != shape:
                    bad += 1
                    if bad <= 5:
                        check(False, f"{stem} b{b}: {name} {outs[name]} != onnx {shape}")
        check(bad == 0, f"{stem} b{b}: {bad} shapes differ from onnx.shape_inference")
        check(compared == len(expected), f"{stem} b{b}: compared only {compared} of {len(expected)} shapes")
    print(f"{stem}: {len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


main()
